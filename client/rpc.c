/*
 * rpc.c - libsheaf's connection to sheafd (rpc.h): connect to its socket,
 * Attach, one request and its response over proto/call.h's round trip, and
 * the reconnect when sheafd restarted.  The control calls built on it are
 * pool_sheafd.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>
#include "client/rpc.h"
#include "proto/call.h"
#include "proto/frame.h"
#include "proto/peer.h"
#include "proto/sheaf.pb-c.h"
#include "shm/atomics.h"
#include "shm/debug.h"

/* The largest reply frame libsheaf accepts. */
#define RPC_REPLY_CAP (FRAME_DEFAULT_CAP * 16)

/* A connected socket to @path, or -errno with @err.  Connecting and
 * sending wait @timeout_ms at most (SO_SNDTIMEO: a daemon that accepts
 * nothing, a full backlog or a full socket buffer never hangs a call).  A
 * server of a uid we do not trust (proto/peer.h) is -EPERM: nothing it
 * would send is read. */
static int connect_socket(const char *path, unsigned timeout_ms, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { (time_t)(timeout_ms / 1000), (suseconds_t)(timeout_ms % 1000) * 1000 };
	int fd, e;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		e = errno == EAGAIN || errno == EINPROGRESS ? ETIMEDOUT : errno;
		snprintf(err, errlen, "cannot reach sheafd at %s: %s", path, strerror(e));
		if (fd >= 0)
			close(fd);
		return -e;
	}
	e = peer_check_server(fd, path, err, errlen);
	if (e != 0) {
		close(fd);
		return e;
	}
	return fd;
}

/* $SHEAF_RPC_TIMEOUT_MS, when set to a valid value; else the default. */
static unsigned timeout_from_env(void)
{
	const char *s = getenv("SHEAF_RPC_TIMEOUT_MS");
	char *end;
	unsigned long v;

	if (s == NULL || *s == '\0')
		return RPC_TIMEOUT_DEFAULT_MS;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || *end != '\0' || v == 0 || v > RPC_TIMEOUT_MAX_MS)
		return RPC_TIMEOUT_DEFAULT_MS;
	return (unsigned)v;
}

int rpc_open(struct rpc_conn *c, const char *path, char *err, size_t errlen)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->path, sizeof(c->path), "%s", path);
	at_store_relaxed(&c->timeout_ms, timeout_from_env());
	c->sock = connect_socket(path, at_load_relaxed(&c->timeout_ms), err, errlen);
	if (c->sock < 0)
		return c->sock;
	pthread_mutex_init(&c->lock, NULL);
	return 0;
}

void rpc_set_timeout(struct rpc_conn *c, unsigned ms)
{
	at_store_relaxed(&c->timeout_ms, ms);
}

void rpc_close(struct rpc_conn *c)
{
	if (c->sock >= 0)
		close(c->sock);
	c->sock = -1;
	pthread_mutex_destroy(&c->lock);
}

/* One request and its response (proto/call.h); the caller holds c->lock. */
static int roundtrip(struct rpc_conn *c, Sheaf__V1__Request *rq, Sheaf__V1__Response **out,
		     int *recv_fds, char *err, size_t errlen)
{
	struct proto_call call = {
		.sock = c->sock, .next_id = &c->next_id, .cap = RPC_REPLY_CAP,
		.recv_fds = recv_fds, .err = err, .errlen = errlen,
		.timeout_ms = at_load_relaxed(&c->timeout_ms),
	};
	int rc = proto_call(&call, rq, out);

	/* libsheaf's calls report any malformed reply as EPROTO. */
	return rc == -EBADMSG ? -EPROTO : rc;
}

/* An Attach request: a new client named @name, or (@resume) client c->client
 * again after a reconnect. */
static void attach_request(const struct rpc_conn *c, const char *name, int resume,
			   Sheaf__V1__Request *rq, Sheaf__V1__AttachRequest *ar)
{
	ar->protocol_version = SHEAF__V1__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT;
	ar->pid = (uint32_t)getpid();
	if (resume) {
		ar->resume = 1;
		ar->client_id = c->client;
	} else {
		ar->name = (char *)(name ? name : "");
	}
	rq->body_case = SHEAF__V1__REQUEST__BODY_ATTACH;
	rq->attach = ar;
}

/* Close the descriptors in @fds[0..FRAME_MAX_FDS). */
static void close_fds(int *fds)
{
	for (unsigned i = 0; i < FRAME_MAX_FDS; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
}

int rpc_attach(struct rpc_conn *c, const char *name, int pool_fds[2], char *err,
	       size_t errlen)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__AttachRequest ar = SHEAF__V1__ATTACH_REQUEST__INIT;
	Sheaf__V1__Response *r;
	int fds[FRAME_MAX_FDS], rc;

	_Static_assert(FRAME_MAX_FDS == 2, "Attach passes META and SHARED");
	attach_request(c, name, 0, &rq, &ar);
	rc = rpc_call(c, &rq, &r, fds, err, errlen);
	if (rc != 0)
		return rc;
	if (r->body_case != SHEAF__V1__RESPONSE__BODY_ATTACH || fds[0] < 0 || fds[1] < 0) {
		snprintf(err, errlen, "sheafd's attach reply did not carry the pool's two memfds");
		close_fds(fds);
		rc = -EPROTO;
	} else {
		c->client = r->attach->client_id;
		c->attached = 1;
		pool_fds[0] = fds[0];
		pool_fds[1] = fds[1];
	}
	sheaf__v1__response__free_unpacked(r, NULL);
	return rc;
}

/*
 * The daemon went away (restart): connect again and resume our client id.
 * The pool stays mapped; the memfds the reply carries are the same pool's.
 * Caller holds c->lock.
 */
static int reconnect_locked(struct rpc_conn *c)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__AttachRequest ar = SHEAF__V1__ATTACH_REQUEST__INIT;
	Sheaf__V1__Response *r;
	char msg[160];
	int fds[FRAME_MAX_FDS], rc;

	if (c->sock >= 0)
		close(c->sock);
	c->sock = connect_socket(c->path, at_load_relaxed(&c->timeout_ms), msg, sizeof(msg));
	if (c->sock < 0)
		return c->sock;
	attach_request(c, NULL, 1, &rq, &ar);
	rc = roundtrip(c, &rq, &r, fds, NULL, 0);
	close_fds(fds);
	if (rc == 0) {
		c->reconnects++;
		sheaf__v1__response__free_unpacked(r, NULL);
	} else if (rc == -EINVAL) {
		/* The daemon does not know us: it runs a different pool (it
		 * started afresh instead of adopting ours). */
		c->stale = 1;
		rc = -ESTALE;
	}
	return rc;
}

int rpc_call(struct rpc_conn *c, Sheaf__V1__Request *rq, Sheaf__V1__Response **out,
	     int *recv_fds, char *err, size_t errlen)
{
	int rc;

	lock_acquire(&c->lock, LOCK_RANK_POOL_RPC);
	if (c->stale) {
		rc = -ESTALE;
	} else {
		rc = roundtrip(c, rq, out, recv_fds, err, errlen);
		if (rc == -EPIPE && c->attached) {
			int rr = reconnect_locked(c);
			rc = rr == 0 ? roundtrip(c, rq, out, recv_fds, err, errlen)
				     : rr == -ESTALE || rr == -ETIMEDOUT || rr == -EPERM ? rr : rc;
			/* The connection broke and no sheafd took it up again
			 * (none listens, the socket is gone, or the new one
			 * broke too): the outage, as sheaf.h names it. */
			if (rc == -EPIPE) {
				rc = -ECONNREFUSED;
				if (err != NULL)
					snprintf(err, errlen, "no sheafd answers at %s", c->path);
			}
		}
		if (rc == -ETIMEDOUT && c->sock >= 0) {
			/* Out of step: a late reply would answer the next
			 * request.  The next call connects again. */
			close(c->sock);
			c->sock = -1;
		}
	}
	if (rc == -ESTALE && err != NULL)
		snprintf(err, errlen, "sheafd restarted with another pool: this one is stale "
			 "(disconnect and connect again)");
	lock_release(&c->lock);
	return rc;
}
