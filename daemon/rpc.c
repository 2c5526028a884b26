/*
 * rpc.c - sheafd's request handling: parse a frame, dispatch its body
 * through the table of request kinds, pack the reply (rpc_handle;
 * server.c sends it).  No socket here: the peer is plain data (struct
 * conn_info), so any bytes can be fed in directly.
 *
 * Every reply goes out with the request's id; a request that cannot be
 * parsed, carries unknown fields or names no known body gets
 * STATUS_BAD_REQUEST and is counted; the connection stays usable.  While
 * the pool check runs (check.c), a request of a kind that changes the
 * pool gets no reply but rpc_out.later (server.c hands it in again
 * afterwards), and Check itself is answered later through rpc_check_reply.
 *
 * The handlers, by subject, are in rpc_clients.c, rpc_caches.c,
 * rpc_pool.c, rpc_names.c and rpc_queues.c (rpc_handlers.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "arena.h"
#include "daemon.h"
#include "log.h"
#include "rpc_handlers.h"
#include "proto/sheaf.pb-c.h"

/* ---- the request kinds --------------------------------------------------- */

/* A kind changes what the pool checker walks (caches, slabs, the engine's
 * state): it waits while a check runs; the others are served. */
#define CHANGES_POOL 1u

struct rpc_kind {
	const char *name;            /* the body's field in Request */
	size_t body;                 /* its offset in Sheaf__V1__Request */
	const ProtobufCMessageDescriptor *type;   /* its message type */
	rpc_handler *handle;
	unsigned flags;              /* CHANGES_POOL */
};

#define KIND(CASE, field, msg, fn, fl)                                        \
	[SHEAF__V1__REQUEST__BODY_##CASE] = {                                 \
		#field, offsetof(Sheaf__V1__Request, field),                  \
		&sheaf__v1__##msg##__descriptor, fn, fl }

/* Indexed by the body's oneof case (its field number); a case with no row
 * (handle NULL) is no known body. */
static const struct rpc_kind kinds[] = {
	KIND(ATTACH, attach, attach_request, rpc_attach, 0),
	KIND(CACHE_CREATE, cache_create, cache_create_request, rpc_cache_create, CHANGES_POOL),
	KIND(CACHE_OPEN, cache_open, cache_open_request, rpc_cache_open, 0),
	KIND(CACHE_LIST, cache_list, cache_list_request, rpc_cache_list, 0),
	KIND(CACHE_DESTROY, cache_destroy, cache_destroy_request, rpc_cache_destroy,
	     CHANGES_POOL),
	KIND(STATS, stats, stats_request, rpc_stats, 0),
	KIND(DAEMON_INFO, daemon_info, daemon_info_request, rpc_daemon_info, 0),
	KIND(CHECK, check, check_request, rpc_check, CHANGES_POOL),
	KIND(SHRINK, shrink, shrink_request, rpc_shrink, CHANGES_POOL),
	KIND(TUNE, tune, tune_request, rpc_tune, CHANGES_POOL),
	KIND(CLIENTS, clients, clients_request, rpc_clients, 0),
	/* NameSet reads slab bitmaps. */
	KIND(NAME_SET, name_set, name_set_request, rpc_name_set, CHANGES_POOL),
	KIND(NAME_DEL, name_del, name_del_request, rpc_name_del, CHANGES_POOL),
	KIND(NAME_LIST, name_list, name_list_request, rpc_name_list, 0),
	KIND(QUEUE_CREATE, queue_create, queue_create_request, rpc_queue_create, CHANGES_POOL),
	KIND(QUEUE_DESTROY, queue_destroy, queue_destroy_request, rpc_queue_destroy,
	     CHANGES_POOL),
	KIND(QUEUE_LIST, queue_list, queue_list_request, rpc_queue_list, 0),
	/* A revocation repairs rings the checker walks. */
	KIND(LANE_GRANT, lane_grant, lane_grant_request, rpc_lane_grant, CHANGES_POOL),
	/* Topics (rpc_topics.c). */
	KIND(TOPIC_CREATE, topic_create, topic_create_request, rpc_topic_create, CHANGES_POOL),
	KIND(TOPIC_DESTROY, topic_destroy, topic_destroy_request, rpc_topic_destroy,
	     CHANGES_POOL),
	KIND(TOPIC_LIST, topic_list, topic_list_request, rpc_topic_list, 0),
	KIND(TOPIC_SUBSCRIBE, topic_subscribe, topic_subscribe_request, rpc_topic_subscribe,
	     CHANGES_POOL),
	KIND(TOPIC_UNSUBSCRIBE, topic_unsubscribe, topic_unsubscribe_request,
	     rpc_topic_unsubscribe, CHANGES_POOL),
};

#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

/* The row of body case @c, or NULL when it has none. */
static const struct rpc_kind *kind_of(Sheaf__V1__Request__BodyCase c)
{
	if ((unsigned)c >= NKINDS || kinds[c].handle == NULL)
		return NULL;
	return &kinds[c];
}

int rpc_kinds_check(char *err, size_t errlen)
{
	const ProtobufCMessageDescriptor *rd = &sheaf__v1__request__descriptor;
	unsigned rows = 0, cases = 0;

	for (size_t i = 0; i < NKINDS; i++)
		rows += kinds[i].handle != NULL;
	for (unsigned i = 0; i < rd->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &rd->fields[i];
		const struct rpc_kind *k;

		if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) == 0)
			continue;
		cases++;
		k = kind_of((Sheaf__V1__Request__BodyCase)f->id);
		if (k == NULL || strcmp(k->name, f->name) != 0 || k->body != f->offset ||
		    k->type != f->descriptor) {
			snprintf(err, errlen, "request body '%s' (case %u) has no matching row",
				 f->name, f->id);
			return -1;
		}
	}
	if (rows != cases) {
		snprintf(err, errlen, "%u request kinds for %u request bodies", rows, cases);
		return -1;
	}
	return 0;
}

/* ---- replies ------------------------------------------------------------- */

void rpc_fail(struct reply *rp, Sheaf__V1__Status st, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rp->err, sizeof(rp->err), fmt, ap);
	va_end(ap);
	rp->r.status = st;
	rp->r.error = rp->err;
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY__NOT_SET;
}

Sheaf__V1__Status rpc_status(int rc)
{
	switch (rc) {
	case -EEXIST: return SHEAF__V1__STATUS__STATUS_EXISTS;
	case -ENOENT: return SHEAF__V1__STATUS__STATUS_NOT_FOUND;
	case -ENOSPC: case -EUSERS: case -ENOMEM: return SHEAF__V1__STATUS__STATUS_NO_SPACE;
	case -EBUSY: return SHEAF__V1__STATUS__STATUS_BUSY;
	case -EINVAL: return SHEAF__V1__STATUS__STATUS_BAD_REQUEST;
	case -EKEYREVOKED: return SHEAF__V1__STATUS__STATUS_REVOKED;
	default: return SHEAF__V1__STATUS__STATUS_INTERNAL;
	}
}

/* ---- dispatch ------------------------------------------------------------ */

/* Unknown fields anywhere we look are refused: they mean a peer speaking
 * something this daemon does not understand. */
static int unknown_fields(const ProtobufCMessage *m)
{
	return m != NULL && m->n_unknown_fields > 0 ? (int)m->unknown_fields[0].tag : 0;
}

static void dispatch(struct daemon *d, struct conn_info *peer, const Sheaf__V1__Request *rq,
		     struct reply *rp)
{
	const struct rpc_kind *k = kind_of(rq->body_case);
	struct rpc_call call = { .peer = peer, .id = rq->id };
	int tag;

	if (k != NULL)
		call.body = *(const ProtobufCMessage *const *)((const char *)rq + k->body);
	if ((tag = unknown_fields(&rq->base)) != 0 || (tag = unknown_fields(call.body)) != 0) {
		d->n.bad_frames++;
		log_warn("client pid %d: request %llu has unknown field %d", (int)peer->pid,
			 (unsigned long long)rq->id, tag);
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_BAD_REQUEST,
		     "unknown field %d (newer client?)", tag);
		return;
	}
	if (k == NULL) {
		d->n.bad_frames++;
		log_warn("client pid %d: request %llu has no known body", (int)peer->pid,
			 (unsigned long long)rq->id);
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_BAD_REQUEST, "request has no known body");
		return;
	}
	if (peer->revoked) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_REVOKED,
			 "this client was revoked (sheafd's log says why)");
		return;
	}
	if (check_running(d) && (k->flags & CHANGES_POOL)) {
		rp->later = 1;           /* the checker walks the pool: wait for it */
		return;
	}
	k->handle(d, &call, rp);
}

/* Pack @rp's Response into @out: 0, or -ENOMEM (@out empty). */
static int pack_reply(struct reply *rp, struct rpc_out *out)
{
	out->len = sheaf__v1__response__get_packed_size(&rp->r);
	out->buf = malloc(out->len ? out->len : 1);
	if (out->buf == NULL) {
		out->len = 0;
		return -ENOMEM;
	}
	sheaf__v1__response__pack(&rp->r, out->buf);
	memcpy(out->pass_fds, rp->pass_fds, sizeof(out->pass_fds));
	out->npass = rp->npass;
	out->close_after = rp->close_after;
	return 0;
}

int rpc_handle(struct daemon *d, struct conn_info *peer, const uint8_t *buf,
	       size_t len, struct rpc_out *out)
{
	Sheaf__V1__Request *rq = sheaf__v1__request__unpack(NULL, len, buf);
	struct reply *rp = calloc(1, sizeof(*rp));
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (rp == NULL) {
		if (rq != NULL)
			sheaf__v1__request__free_unpacked(rq, NULL);
		return -ENOMEM;
	}
	sheaf__v1__response__init(&rp->r);
	d->n.requests++;
	if (rq == NULL) {
		d->n.bad_frames++;
		log_warn("client pid %d: unparsable request (%zu bytes)", (int)peer->pid, len);
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_BAD_REQUEST, "unparsable request");
	} else {
		rp->r.id = rq->id;
		dispatch(d, peer, rq, rp);
	}
	if (rp->later || rp->deferred) {
		/* No reply now; a held frame is handed in again (counted then). */
		out->later = rp->later;
		out->deferred = rp->deferred;
		d->n.requests -= rp->later;
	} else {
		rc = pack_reply(rp, out);
	}
	if (rq != NULL)
		sheaf__v1__request__free_unpacked(rq, NULL);
	arena_free(&rp->a);
	free(rp);
	return rc;
}

int rpc_check_reply(struct daemon *d, uint64_t id, int cache, int rc,
		    const struct check_report *rep, const char *err, struct rpc_out *out)
{
	struct reply *rp = calloc(1, sizeof(*rp));
	int ret;

	memset(out, 0, sizeof(*out));
	if (rp == NULL)
		return -ENOMEM;
	sheaf__v1__response__init(&rp->r);
	rp->npass = 0;
	rp->r.id = id;
	rpc_check_fill(d, cache, rc, rep, err, rp);
	ret = pack_reply(rp, out);
	arena_free(&rp->a);
	free(rp);
	return ret;
}

void rpc_out_free(struct rpc_out *out)
{
	free(out->buf);
	out->buf = NULL;
	out->len = 0;
}
