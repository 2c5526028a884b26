/*
 * conn.c - sheafctl's connection to sheafd: connect to the control socket
 * (without attaching: sheafctl holds no client slot), check who serves it
 * (proto/peer.h), and make one request
 * with the protocol's round trip (proto/call.h), wording its failures.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "client/sheafctl/sheafctl.h"
#include "proto/call.h"
#include "proto/frame.h"
#include "proto/peer.h"

/* The largest reply frame sheafctl accepts. */
#define CTL_REPLY_CAP (FRAME_DEFAULT_CAP * 64)

static int conn_fail(struct ctl *c, const char *fmt, const char *what)
{
	snprintf(c->err, sizeof(c->err), fmt, c->socket, what);
	c->status = SHEAF__V1__STATUS__STATUS_INTERNAL;
	ctl_close(c);
	return CTL_REFUSED;
}

static int ctl_connect(struct ctl *c)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", c->socket);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return conn_fail(c, "cannot reach sheafd at %s: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		close(fd);
		return conn_fail(c, "cannot reach sheafd at %s: %s", strerror(e));
	}
	/* Who serves the socket: another user's impostor gets no request. */
	if (peer_check_server(fd, c->socket, c->err, sizeof(c->err)) != 0) {
		close(fd);
		c->status = SHEAF__V1__STATUS__STATUS_DENIED;
		ctl_close(c);
		return CTL_REFUSED;
	}
	c->fd = fd;
	return CTL_OK;
}

void ctl_close(struct ctl *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

void ctl_free(Sheaf__V1__Response *r)
{
	if (r != NULL)
		sheaf__v1__response__free_unpacked(r, NULL);
}

/* Word a failure that is not the daemon's refusal, naming the socket. */
static int call_fail(struct ctl *c, int rc)
{
	char secs[16];

	switch (rc) {
	case -EPIPE: return conn_fail(c, "sheafd at %s closed the connection%s", "");
	case -ETIMEDOUT:
		snprintf(secs, sizeof(secs), "%d s", PROTO_CALL_TIMEOUT_MS / 1000);
		return conn_fail(c, "sheafd at %s did not answer within %s", secs);
	case -EPROTO: return conn_fail(c, "sheafd at %s sent an unparsable response%s", "");
	case -EBADMSG: return conn_fail(c, "sheafd at %s sent a reply to another request%s", "");
	default: return conn_fail(c, "sheafd at %s: %s", strerror(-rc));
	}
}

int ctl_call(struct ctl *c, Sheaf__V1__Request *rq, Sheaf__V1__Response **out)
{
	struct proto_call call = {
		.next_id = &c->next_id, .cap = CTL_REPLY_CAP,
		.err = c->err, .errlen = sizeof(c->err),
	};
	int rc;

	*out = NULL;
	if (c->fd < 0 && ctl_connect(c) != CTL_OK)
		return CTL_REFUSED;
	call.sock = c->fd;
	rc = proto_call(&call, rq, out);
	if (rc == 0)
		return CTL_OK;
	if (call.status == SHEAF__V1__STATUS__STATUS_OK)
		return call_fail(c, rc);
	c->status = call.status;     /* refused: c->err holds the daemon's text */
	return CTL_REFUSED;
}

int ctl_call_or_say(struct ctl *c, Sheaf__V1__Request *rq, Sheaf__V1__Response **out)
{
	int rc = ctl_call(c, rq, out);

	if (rc != CTL_OK)
		ctl_err(rc, "%s", c->err);
	return rc;
}
