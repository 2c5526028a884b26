/*
 * sheafctl_conn.c - sheafctl's connection to sheafd: connect to the control
 * socket (without attaching: sheafctl holds no client slot), send one
 * framed Request, receive and check its Response.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "client/sheafctl.h"
#include "proto/frame.h"

#define CTL_TIMEOUT_MS 30000

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

static const char *status_name(Sheaf__V1__Status st)
{
	const ProtobufCEnumValue *v =
		protobuf_c_enum_descriptor_get_value(&sheaf__v1__status__descriptor, (int)st);
	return v != NULL ? v->name : "unknown status";
}

/* Send the packed request and read one frame back. */
static int exchange(struct ctl *c, Sheaf__V1__Request *rq, uint8_t **in, size_t *len)
{
	size_t n = sheaf__v1__request__get_packed_size(rq);
	uint8_t *buf = malloc(n ? n : 1);
	int rc;

	if (buf == NULL)
		return conn_fail(c, "sheafd at %s: %s", strerror(ENOMEM));
	sheaf__v1__request__pack(rq, buf);
	rc = frame_send(c->fd, buf, n, -1);
	free(buf);
	if (rc == 0)
		rc = frame_recv(c->fd, in, len, FRAME_DEFAULT_CAP * 64, CTL_TIMEOUT_MS, NULL);
	if (rc == -EPIPE)
		return conn_fail(c, "sheafd at %s closed the connection%s", "");
	if (rc == -ETIMEDOUT)
		return conn_fail(c, "sheafd at %s did not answer within 30 s%s", "");
	if (rc != 0)
		return conn_fail(c, "sheafd at %s: %s", strerror(-rc));
	return CTL_OK;
}

int ctl_call(struct ctl *c, Sheaf__V1__Request *rq, Sheaf__V1__Response **out)
{
	Sheaf__V1__Response *r;
	uint8_t *in = NULL;
	size_t len = 0;

	*out = NULL;
	if (c->fd < 0 && ctl_connect(c) != CTL_OK)
		return CTL_REFUSED;
	rq->id = ++c->next_id;
	if (exchange(c, rq, &in, &len) != CTL_OK)
		return CTL_REFUSED;
	r = sheaf__v1__response__unpack(NULL, len, in);
	free(in);
	if (r == NULL)
		return conn_fail(c, "sheafd at %s sent an unparsable response%s", "");
	if (r->status != SHEAF__V1__STATUS__STATUS_OK) {
		c->status = r->status;
		snprintf(c->err, sizeof(c->err), "%s",
			 r->error != NULL && r->error[0] ? r->error : status_name(r->status));
		ctl_free(r);
		return CTL_REFUSED;
	}
	/* Request and response bodies share their field numbers. */
	if (r->id != rq->id || (int)r->body_case != (int)rq->body_case) {
		ctl_free(r);
		return conn_fail(c, "sheafd at %s sent a reply to another request%s", "");
	}
	*out = r;
	return CTL_OK;
}

int ctl_call_or_say(struct ctl *c, Sheaf__V1__Request *rq, Sheaf__V1__Response **out)
{
	int rc = ctl_call(c, rq, out);

	if (rc != CTL_OK)
		ctl_err(rc, "%s", c->err);
	return rc;
}
