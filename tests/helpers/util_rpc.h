/*
 * util_rpc.h - sheafd's protocol spoken raw (length-prefixed protobuf frames,
 * proto/frame.h), bypassing libsheaf: for tests that send what libsheaf
 * never would, and for asking a daemon about itself (DaemonInfo, Check)
 * without attaching.  Failures of the helpers that return no status go
 * through REQUIRE (util_check.h).
 */
#ifndef SHEAF_TESTS_UTIL_RPC_H
#define SHEAF_TESTS_UTIL_RPC_H

#include <stddef.h>
#include <stdint.h>

#include "proto/sheaf.pb-c.h"

/* send(2) all @n bytes (no SIGPIPE): 0, or -errno. */
int send_all(int fd, const void *buf, size_t n);
/* Send a frame: a length header @hdr_len (normally @len) and @len bytes. */
int send_frame_hdr(int fd, uint32_t hdr_len, const void *msg, size_t len);
int send_frame(int fd, const void *msg, size_t len);
/* Pack @rq into @buf (it must fit @cap): its length. */
size_t pack_req(const Sheaf__V1__Request *rq, uint8_t *buf, size_t cap);
/* Receive one Response within @ms: NULL with *@rc (-errno) on failure. */
Sheaf__V1__Response *recv_resp(int fd, int ms, int *rc);
/* Send @rq and receive the Response. */
Sheaf__V1__Response *raw_rpc(int fd, const Sheaf__V1__Request *rq, int ms, int *rc);
/* DaemonInfo with request id @id on connection @fd. */
Sheaf__V1__Response *rpc_info(int fd, uint64_t id, int *rc);
/* DaemonInfo on a fresh connection (no Attach): NULL on failure. */
Sheaf__V1__Response *daemon_info(const char *sock);
/* Attached clients by DaemonInfo, or -1. */
int info_clients(const char *sock);
/* The Check RPC on a fresh connection; required to succeed. */
Sheaf__V1__Response *raw_check(const char *sock);
/* Wait until the daemon closes @fd (EOF or reset): 1, or 0 on timeout;
 * *@extra counts bytes received meanwhile. */
int wait_closed(int fd, int ms, size_t *extra);

#endif
