/*
 * rpc.h - libsheaf's connection to sheafd (client/rpc.c): the socket, the
 * Attach that makes this process a client of the pool, and the one
 * request/response round trip every control call of a sheafd pool uses
 * (proto/call.h), with a reconnect when sheafd restarted.
 *
 * Who may call: pool_sheafd.c (open, attach, requests, close) and pool.c
 * (rpc_set_timeout, on a pool of either kind).  It knows nothing of
 * struct sheaf_pool: every pool embeds one struct rpc_conn, opened for a
 * pool of sheafd only.  Errors: 0 or -errno, with a one-line cause in @err when the
 * caller passes one.
 */
#ifndef SHEAF_CLIENT_RPC_H
#define SHEAF_CLIENT_RPC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct Sheaf__V1__Request;
struct Sheaf__V1__Response;

struct rpc_conn {
	int sock;                    /* -1: none (lost, or never connected) */
	pthread_mutex_t lock;        /* one request in flight; guards the rest */
	uint64_t next_id;            /* last request id */
	uint32_t client;             /* our client id, once attached */
	int attached;                /* Attach done: reconnects resume @client */
	int stale;                   /* sheafd came back with another pool */
	uint32_t reconnects;
	_Atomic unsigned timeout_ms; /* longest wait for connect and reply (any thread may set it) */
	char path[108];              /* sheafd's socket */
};

/* A control request's longest wait, unless $SHEAF_RPC_TIMEOUT_MS (1..
 * 3600000) or sheaf_pool_set_timeout says otherwise. */
#define RPC_TIMEOUT_DEFAULT_MS 5000u
#define RPC_TIMEOUT_MAX_MS     3600000u

/* Connect to sheafd's socket @path (c->timeout_ms from the environment or
 * the default).  0, or -errno with @err. */
int rpc_open(struct rpc_conn *c, const char *path, char *err, size_t errlen);

/*
 * Attach as @name (may be NULL): sheafd's reply names our client id (kept in
 * c->client; later reconnects resume it) and carries the pool's memfds:
 * META (read-only) in @pool_fds[0], SHARED in @pool_fds[1] (the caller
 * closes them).  0, or -errno with @err.
 */
int rpc_attach(struct rpc_conn *c, const char *name, int pool_fds[2], char *err,
	       size_t errlen);

/*
 * Send @rq and receive its response: 0 with *@out (free it with
 * sheaf__v1__response__free_unpacked), or -errno with @err filled (a daemon
 * refusal maps to its errno, a malformed reply is -EPROTO).  When sheafd
 * went away after Attach, reconnects and resumes our client id once; when
 * the new sheafd runs another pool, this and every later call fail with
 * -ESTALE.  @recv_fds: NULL, or FRAME_MAX_FDS slots for the reply's
 * descriptors (-1: none).
 * No reply within c->timeout_ms: -ETIMEDOUT, and the connection is closed
 * (a late reply must not answer the next request); the next call connects
 * again and resumes our client id.  sheafd does not take a client for dead
 * on a closed connection, only when its process is gone.
 */
int rpc_call(struct rpc_conn *c, struct Sheaf__V1__Request *rq,
	     struct Sheaf__V1__Response **out, int *recv_fds, char *err, size_t errlen);

/* Set the longest wait of later calls (1..RPC_TIMEOUT_MAX_MS, checked by
 * the caller).  Safe on a struct rpc_conn that was never opened. */
void rpc_set_timeout(struct rpc_conn *c, unsigned ms);

/* Close the connection (sheafd then counts us detached). */
void rpc_close(struct rpc_conn *c);

#endif
