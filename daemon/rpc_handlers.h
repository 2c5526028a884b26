/*
 * rpc_handlers.h - the request handlers behind rpc_handle (daemon.h) and
 * the reply they fill.  Who may call: daemon/rpc*.c only; the handlers
 * are reached through rpc.c's table of request kinds, one row a body.
 *
 * A handler answers one request body: it reads call->body (of the type its
 * row names), acts on the pool, and turns @rp into either a response body
 * (rp->r.body_case and its field) or an error (rpc_fail).  Every
 * allocation of the reply is in rp->a (arena.h), freed once the reply is
 * packed.  A handler never touches a socket: descriptors to pass go in
 * rp->pass_fds, and the connection's fate in rp->close_after, rp->later
 * and rp->deferred, which server.c acts on.
 */
#ifndef SHEAF_DAEMON_RPC_HANDLERS_H
#define SHEAF_DAEMON_RPC_HANDLERS_H

#include "arena.h"
#include "daemon.h"
#include "proto/sheaf.pb-c.h"

struct reply {
	Sheaf__V1__Response r;
	struct arena a;
	char err[256];
	int pass_fds[FRAME_MAX_FDS];
	unsigned npass;
	int close_after;
	int later;                   /* rpc_out.later */
	int deferred;                /* rpc_out.deferred */
};

/* One request as a handler sees it. */
struct rpc_call {
	struct conn_info *peer;      /* who asked (Attach binds peer->client) */
	uint64_t id;                 /* the request's id */
	const ProtobufCMessage *body; /* the body, of the type of its row */
};

/* The body of @call as its message type @type (the row's). */
#define RPC_BODY(call, type) ((const type *)(const void *)(call)->body)

typedef void rpc_handler(struct daemon *d, const struct rpc_call *call, struct reply *rp);

/* The reply becomes an error: status @st, message from @fmt. */
void rpc_fail(struct reply *rp, Sheaf__V1__Status st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The status of an engine call's negative errno @rc. */
Sheaf__V1__Status rpc_status(int rc);

/* rpc_clients.c: Attach, Clients, LaneGrant. */
rpc_handler rpc_attach, rpc_clients, rpc_lane_grant;

/* rpc_caches.c: CacheCreate, CacheOpen, CacheList, CacheDestroy. */
rpc_handler rpc_cache_create, rpc_cache_open, rpc_cache_list, rpc_cache_destroy;
/* Cache @id's descriptor, in @a (NULL: out of memory). */
Sheaf__V1__CacheInfo *rpc_cache_info(struct daemon *d, struct arena *a, uint32_t id);
/* The scope a request names in @name: every cache (*@cache -1) when it is
 * NULL or "", else that cache's id; -1 after failing @rp with NOT_FOUND
 * when no cache has that name. */
int rpc_cache_scope(struct daemon *d, const char *name, int *cache, struct reply *rp);

/* rpc_pool.c: DaemonInfo, Stats, Check, Shrink, Tune. */
rpc_handler rpc_daemon_info, rpc_stats, rpc_check, rpc_shrink, rpc_tune;
/* The pool's layout, in @a (NULL: out of memory). */
Sheaf__V1__Layout *rpc_layout(struct daemon *d, struct arena *a);
/* The Check reply from pool_check's (pool_check_cache's, @cache >= 0)
 * @rc, @rep and @err: inline, or when check.c's thread is done. */
void rpc_check_fill(struct daemon *d, int cache, int rc, const struct check_report *rep,
		    const char *err, struct reply *rp);

/* rpc_numa.c: the pool's NUMA nodes (real nodes only: nothing, 0, when
 * simulated) into *@policy and *@out (an arena array, *@n entries), and
 * cache @c's resident pages on pool node @n by kernel node into @ns.  0 or
 * -ENOMEM. */
int rpc_numa_nodes(struct daemon *d, struct arena *a, char **policy,
		   Sheaf__V1__NumaNode ***out, size_t *n);
int rpc_numa_pages(struct daemon *d, struct arena *a, uint32_t c, uint32_t n,
		   Sheaf__V1__NodeStats *ns);

/* rpc_names.c: NameSet, NameDel, NameList. */
rpc_handler rpc_name_set, rpc_name_del, rpc_name_list;

/* rpc_queues.c: QueueCreate, QueueDestroy, QueueList, and every live
 * queue's numbers for Stats (into *@out, an arena array; 0 or -1). */
rpc_handler rpc_queue_create, rpc_queue_destroy, rpc_queue_list;
int rpc_queue_infos(struct daemon *d, struct arena *a, Sheaf__V1__QueueInfo ***out, size_t *n);

/* rpc_topics.c: TopicCreate, TopicDestroy, TopicList, TopicSubscribe,
 * TopicUnsubscribe; every LIVE topic for Stats (0 or -1). */
rpc_handler rpc_topic_create, rpc_topic_destroy, rpc_topic_list, rpc_topic_subscribe,
	rpc_topic_unsubscribe;
int rpc_topic_infos(struct daemon *d, struct arena *a, Sheaf__V1__TopicInfo ***out, size_t *n);

#endif
