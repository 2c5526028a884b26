/*
 * util_rpc.c - raw framed protobuf to sheafd (see util_rpc.h).
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/frame.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_proc.h"
#include "tests/helpers/util_rpc.h"

int send_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Send a frame: a length header @hdr_len (normally @len) and @len bytes. */
int send_frame_hdr(int fd, uint32_t hdr_len, const void *msg, size_t len)
{
	uint8_t *buf = malloc(FRAME_HDR + len);
	int rc;

	if (buf == NULL)
		return -ENOMEM;
	frame_put_len(buf, hdr_len);
	if (len > 0)
		memcpy(buf + FRAME_HDR, msg, len);
	rc = send_all(fd, buf, FRAME_HDR + len);
	free(buf);
	return rc;
}

int send_frame(int fd, const void *msg, size_t len)
{
	return send_frame_hdr(fd, (uint32_t)len, msg, len);
}

size_t pack_req(const Sheaf__V1__Request *rq, uint8_t *buf, size_t cap)
{
	size_t n = sheaf__v1__request__get_packed_size(rq);

	REQUIRE(n <= cap, "request of %zu bytes does not fit %zu", n, cap);
	return sheaf__v1__request__pack(rq, buf);
}

/* Receive one Response within @ms: NULL with *@rc (-errno) on failure. */
Sheaf__V1__Response *recv_resp(int fd, int ms, int *rc)
{
	uint8_t *msg = NULL;
	size_t len = 0;
	Sheaf__V1__Response *r;

	*rc = frame_recv(fd, &msg, &len, 16u << 20, ms, NULL);
	if (*rc != 0)
		return NULL;
	r = sheaf__v1__response__unpack(NULL, len, msg);
	free(msg);
	if (r == NULL)
		*rc = -EPROTO;
	return r;
}

Sheaf__V1__Response *raw_rpc(int fd, const Sheaf__V1__Request *rq, int ms, int *rc)
{
	uint8_t buf[4096];
	size_t n = pack_req(rq, buf, sizeof(buf));

	*rc = send_frame(fd, buf, n);
	return *rc == 0 ? recv_resp(fd, ms, rc) : NULL;
}

Sheaf__V1__Response *rpc_info(int fd, uint64_t id, int *rc)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__DaemonInfoRequest di = SHEAF__V1__DAEMON_INFO_REQUEST__INIT;

	rq.id = id;
	rq.body_case = SHEAF__V1__REQUEST__BODY_DAEMON_INFO;
	rq.daemon_info = &di;
	return raw_rpc(fd, &rq, 20000, rc);
}

/* DaemonInfo on a fresh connection (no Attach): NULL on failure. */
Sheaf__V1__Response *daemon_info(const char *sock)
{
	int fd = unix_connect(sock), rc;
	Sheaf__V1__Response *r;

	if (fd < 0)
		return NULL;
	r = rpc_info(fd, 1, &rc);
	close(fd);
	if (r != NULL && (r->status != SHEAF__V1__STATUS__STATUS_OK ||
			  r->body_case != SHEAF__V1__RESPONSE__BODY_DAEMON_INFO)) {
		sheaf__v1__response__free_unpacked(r, NULL);
		r = NULL;
	}
	return r;
}

/* Attached clients by DaemonInfo, or -1. */
int info_clients(const char *sock)
{
	Sheaf__V1__Response *r = daemon_info(sock);
	int n = r ? (int)r->daemon_info->clients : -1;

	if (r != NULL)
		sheaf__v1__response__free_unpacked(r, NULL);
	return n;
}

/* The Check RPC on a fresh connection. */
Sheaf__V1__Response *raw_check(const char *sock)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__CheckRequest cr = SHEAF__V1__CHECK_REQUEST__INIT;
	Sheaf__V1__Response *r;
	int fd = unix_connect(sock), rc;

	REQUIRE(fd >= 0, "connect %s: %s", sock, strerror(-fd));
	rq.id = 42;
	rq.body_case = SHEAF__V1__REQUEST__BODY_CHECK;
	rq.check = &cr;
	r = raw_rpc(fd, &rq, 120000, &rc);
	close(fd);
	REQUIRE(r != NULL, "Check RPC: %s", strerror(-rc));
	REQUIRE(r->status == SHEAF__V1__STATUS__STATUS_OK &&
		r->body_case == SHEAF__V1__RESPONSE__BODY_CHECK,
		"Check RPC: status %d (%s)", r->status, r->error);
	return r;
}

/* Wait until the daemon closes @fd (EOF or reset): 1, or 0 on timeout;
 * *@extra counts bytes received meanwhile. */
int wait_closed(int fd, int ms, size_t *extra)
{
	int64_t end = now_ms() + ms;
	char buf[4096];

	*extra = 0;
	for (;;) {
		struct pollfd pf = { fd, POLLIN, 0 };
		int64_t left = end - now_ms();
		ssize_t k;

		if (left <= 0 || poll(&pf, 1, (int)left) == 0)
			return 0;
		k = recv(fd, buf, sizeof(buf), 0);
		if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN))
			return 1;
		if (k > 0)
			*extra += (size_t)k;
	}
}
