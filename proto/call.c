/* call.c - one control request and its checked response (call.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "proto/call.h"
#include "proto/frame.h"

static int errno_of(Sheaf__V1__Status st)
{
	switch (st) {
	case SHEAF__V1__STATUS__STATUS_OK: return 0;
	case SHEAF__V1__STATUS__STATUS_BAD_REQUEST: return EINVAL;
	case SHEAF__V1__STATUS__STATUS_UNSUPPORTED: return EPROTONOSUPPORT;
	case SHEAF__V1__STATUS__STATUS_DENIED: return EACCES;
	case SHEAF__V1__STATUS__STATUS_NOT_FOUND: return ENOENT;
	case SHEAF__V1__STATUS__STATUS_EXISTS: return EEXIST;
	case SHEAF__V1__STATUS__STATUS_NO_SPACE: return ENOSPC;
	case SHEAF__V1__STATUS__STATUS_NOT_ATTACHED: return ENOTCONN;
	case SHEAF__V1__STATUS__STATUS_BUSY: return EBUSY;
	case SHEAF__V1__STATUS__STATUS_REVOKED: return EKEYREVOKED;
	default: return EIO;
	}
}

static const char *status_name(Sheaf__V1__Status st)
{
	const ProtobufCEnumValue *v =
		protobuf_c_enum_descriptor_get_value(&sheaf__v1__status__descriptor, (int)st);
	return v != NULL ? v->name : "unknown status";
}

static int fail(struct proto_call *call, int rc, const char *fmt, const char *what)
{
	if (call->err != NULL && call->errlen > 0)
		snprintf(call->err, call->errlen, fmt, what);
	for (unsigned i = 0; call->recv_fds != NULL && i < FRAME_MAX_FDS; i++) {
		if (call->recv_fds[i] >= 0)
			close(call->recv_fds[i]);
		call->recv_fds[i] = -1;
	}
	return rc;
}

/* Pack @rq and send it as one frame, then read one frame back. */
static int exchange(struct proto_call *call, Sheaf__V1__Request *rq, uint8_t **in, size_t *len)
{
	size_t n = sheaf__v1__request__get_packed_size(rq);
	uint8_t *buf;
	int rc;

	if (call->sock < 0)
		return -EPIPE;
	if ((buf = malloc(n ? n : 1)) == NULL)
		return -ENOMEM;
	sheaf__v1__request__pack(rq, buf);
	rc = frame_send(call->sock, buf, n, NULL, 0);
	free(buf);
	/* A daemon that refuses us answers at accept and closes: our send may
	 * then fail, and its reply (DENIED) is still there to read. */
	if (rc == -EPIPE)
		rc = frame_recv(call->sock, in, len, call->cap, 50, call->recv_fds) == 0 ? 0 : rc;
	else if (rc == 0)
		rc = frame_recv(call->sock, in, len, call->cap,
				call->timeout_ms ? (int)call->timeout_ms : PROTO_CALL_TIMEOUT_MS,
				call->recv_fds);
	return rc;
}

int proto_call(struct proto_call *call, Sheaf__V1__Request *rq, Sheaf__V1__Response **out)
{
	Sheaf__V1__Response *r;
	uint8_t *in = NULL;
	size_t len = 0;
	int rc;

	*out = NULL;
	call->status = SHEAF__V1__STATUS__STATUS_OK;
	for (unsigned i = 0; call->recv_fds != NULL && i < FRAME_MAX_FDS; i++)
		call->recv_fds[i] = -1;
	rq->id = ++*call->next_id;
	rc = exchange(call, rq, &in, &len);
	if (rc != 0)
		return fail(call, rc, "sheafd connection: %s", strerror(-rc));
	r = sheaf__v1__response__unpack(NULL, len, in);
	free(in);
	if (r == NULL)
		return fail(call, -EPROTO, "sheafd sent an unparsable response%s", "");
	if (r->status != SHEAF__V1__STATUS__STATUS_OK) {
		call->status = r->status;
		rc = fail(call, -errno_of(r->status), "%s",
			  r->error != NULL && r->error[0] ? r->error : status_name(r->status));
		sheaf__v1__response__free_unpacked(r, NULL);
		return rc;
	}
	/* Request and response bodies share their field numbers. */
	if (r->id != rq->id || (int)r->body_case != (int)rq->body_case) {
		sheaf__v1__response__free_unpacked(r, NULL);
		return fail(call, -EBADMSG, "sheafd sent a reply to another request%s", "");
	}
	*out = r;
	return 0;
}
