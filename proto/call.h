/*
 * call.h - the control protocol's round trip, shared by libsheaf
 * (client/rpc.c) and sheafctl (client/sheafctl/conn.c): one Request out as
 * a frame, one Response back, checked.  Built on frame.h; part of libsheaf
 * (hidden), never called by sheafd, which only answers.
 *
 * Blocking; not thread-safe per socket (a caller serialises its calls on a
 * connection, as libsheaf does with struct rpc_conn's lock).  Never prints.
 */
#ifndef SHEAF_PROTO_CALL_H
#define SHEAF_PROTO_CALL_H

#include <stddef.h>
#include <stdint.h>
#include "proto/sheaf.pb-c.h"

/* How long a call waits for its reply unless the caller says otherwise. */
#define PROTO_CALL_TIMEOUT_MS 30000

/* One call on a connection: what the caller sets, and the daemon's status
 * it gets back. */
struct proto_call {
	int sock;                  /* connected control socket; < 0: -EPIPE */
	uint64_t *next_id;         /* the connection's last request id */
	uint32_t cap;              /* the largest reply frame accepted */
	int *recv_fds;             /* FRAME_MAX_FDS slots for the reply's descriptors
	                              (-1: none); NULL: they are closed */
	char *err;                 /* the failure's one-line cause; may be NULL */
	size_t errlen;
	unsigned timeout_ms;       /* longest wait for the reply; 0: PROTO_CALL_TIMEOUT_MS */
	Sheaf__V1__Status status;  /* out: the daemon's refusal, else STATUS_OK */
};

/*
 * Send @rq with the connection's next id (set in rq->id) and receive its
 * response, waiting call->timeout_ms (0: PROTO_CALL_TIMEOUT_MS) at most.
 *
 * Returns 0 with *@out, a reply to this request with STATUS_OK and the
 * request's body case (free it with sheaf__v1__response__free_unpacked);
 * else *@out is NULL, descriptors that came with the reply are closed, and
 * a one-line cause is in call->err:
 *   frame_send/frame_recv's errors: -EPIPE (closed, or no socket),
 *              -ETIMEDOUT, -EMSGSIZE (reply over call->cap), -ENOMEM, ...
 *              (err: "sheafd connection: <strerror>");
 *   -EPROTO    the reply does not parse;
 *   -EBADMSG   the reply answers another request (its id or body differs);
 *   the daemon refused: call->status is its status, err its error text
 *              (the status's name when it sent none), and the return value
 *              maps the status: BAD_REQUEST -EINVAL, UNSUPPORTED
 *              -EPROTONOSUPPORT, DENIED -EACCES, NOT_FOUND -ENOENT, EXISTS
 *              -EEXIST, NO_SPACE -ENOSPC, NOT_ATTACHED -ENOTCONN, BUSY
 *              -EBUSY, INTERNAL and any other -EIO.
 * call->status is STATUS_OK unless the daemon refused.
 */
int proto_call(struct proto_call *call, Sheaf__V1__Request *rq, Sheaf__V1__Response **out);

#endif
