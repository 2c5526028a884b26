/*
 * rpc_topics.c - sheafd's handlers for topics (shm/topic.h,
 * shm/engine/topic.c): TopicCreate, TopicDestroy, TopicList,
 * TopicSubscribe, TopicUnsubscribe, and the topics' numbers that Stats
 * reports.  Called through rpc.c's table of request kinds only.
 * Subscribe and Unsubscribe act for the connection's attached client.
 */
#include <errno.h>
#include "log.h"
#include "rpc_handlers.h"
#include "shm/bounds.h"
#include "shm/topic.h"

/* Topic @id's descriptor and numbers (shared words read as untrusted). */
static Sheaf__V1__TopicInfo *topic_info(struct daemon *d, struct arena *a, uint32_t id)
{
	struct shm_topic *td = &d->pool.topics[id];
	Sheaf__V1__TopicInfo *ti = ARENA_NEW(a, Sheaf__V1__TopicInfo, SHEAF__V1__TOPIC_INFO__INIT);
	uint32_t live = at_load_acquire(&td->live);
	struct topic_ref t;

	if (ti == NULL)
		return NULL;
	t = topic_ref_of(&d->pool, td);
	ti->id = id;
	ti->name = arena_strdup(a, td->name);
	ti->capacity = td->capacity;
	ti->history = td->history;
	ti->policy = td->policy;
	ti->generation = at_load_relaxed(&td->generation);
	ti->published = ut_load64(&t.ctl->published);
	ti->unread = ut_load64(&t.ctl->unread);
	ti->publish_waits = ut_load64(&t.ctl->pub_waits);
	ti->bad = ut_load64(&t.ctl->bad);
	ti->created_at = td->created_at;
	ti->subscribers = arena_alloc(a, TOPIC_SUBS_MAX * sizeof(void *));
	if (ti->name == NULL || ti->subscribers == NULL)
		return NULL;
	for (uint32_t s = 0; s < TOPIC_SUBS_MAX; s++) {
		Sheaf__V1__TopicSubscriber *ts;
		struct topic_sub_stats st;
		uint32_t c = td->subs[s].client;

		if ((live & (1u << s)) == 0 || c == 0)
			continue;
		ts = ARENA_NEW(a, Sheaf__V1__TopicSubscriber, SHEAF__V1__TOPIC_SUBSCRIBER__INIT);
		if (ts == NULL)
			return NULL;
		topic_read_sub(&t, s, &st);
		ts->slot = s;
		ts->client = (int32_t)c - 1;
		ts->pid = c - 1 < d->pool.max_clients ? (int32_t)d->pool.clients[c - 1].pid : 0;
		ts->generation = td->subs[s].generation;
		ts->delivered = st.delivered;
		ts->released = st.released;
		ts->dropped = st.dropped;
		ts->held = st.held;
		ts->depth = st.depth;
		ts->lag = st.lag;
		ts->waits = st.waits;
		ts->joined_at = td->subs[s].joined_at;
		ti->subscribers[ti->n_subscribers++] = ts;
	}
	return ti;
}

int rpc_topic_infos(struct daemon *d, struct arena *a, Sheaf__V1__TopicInfo ***out, size_t *n)
{
	*n = 0;
	if ((*out = arena_alloc(a, SHEAF_MAX_TOPICS * sizeof(void *))) == NULL)
		return -1;
	for (uint32_t i = 0; i < SHEAF_MAX_TOPICS; i++) {
		if (at_load_acquire(&d->pool.topics[i].state) != TOPIC_LIVE)
			continue;
		if (((*out)[(*n)++] = topic_info(d, a, i)) == NULL)
			return -1;
	}
	return 0;
}

void rpc_topic_create(struct daemon *d, const struct rpc_call *call, struct reply *rp)
{
	const Sheaf__V1__TopicCreateRequest *rq = RPC_BODY(call, Sheaf__V1__TopicCreateRequest);
	Sheaf__V1__TopicCreateResponse *cr;
	char err[160];
	int id = engine_topic_create(&d->engine, rq->name, rq->capacity, rq->history, rq->policy,
				     err, sizeof(err));

	if (id < 0) {
		rpc_fail(rp, rpc_status(id), "%s", err);
		return;
	}
	log_info("topic '%s' created: id %d, capacity %u, history %u, policy %s", rq->name, id,
		 d->pool.topics[id].capacity, rq->history, rq->policy ? "drop" : "block");
	cr = ARENA_NEW(&rp->a, Sheaf__V1__TopicCreateResponse, SHEAF__V1__TOPIC_CREATE_RESPONSE__INIT);
	if (cr == NULL || (cr->topic = topic_info(d, &rp->a, (uint32_t)id)) == NULL) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_TOPIC_CREATE;
	rp->r.topic_create = cr;
}

void rpc_topic_destroy(struct daemon *d, const struct rpc_call *call, struct reply *rp)
{
	const Sheaf__V1__TopicDestroyRequest *rq = RPC_BODY(call, Sheaf__V1__TopicDestroyRequest);
	char err[160];
	int id = pool_topic_find(&d->pool, rq->name), rc;

	if (id < 0) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_NOT_FOUND, "no topic named '%s'", rq->name);
		return;
	}
	rc = engine_topic_destroy(&d->engine, (uint32_t)id, err, sizeof(err));
	if (rc != 0) {
		rpc_fail(rp, rpc_status(rc), "%s", err);
		return;
	}
	log_info("topic '%s' destroyed", rq->name);
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_TOPIC_DESTROY;
	rp->r.topic_destroy = ARENA_NEW(&rp->a, Sheaf__V1__TopicDestroyResponse,
					SHEAF__V1__TOPIC_DESTROY_RESPONSE__INIT);
	if (rp->r.topic_destroy == NULL)
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
}

void rpc_topic_list(struct daemon *d, const struct rpc_call *call, struct reply *rp)
{
	Sheaf__V1__TopicListResponse *lr = ARENA_NEW(&rp->a, Sheaf__V1__TopicListResponse,
						     SHEAF__V1__TOPIC_LIST_RESPONSE__INIT);

	(void)call;
	if (lr == NULL || rpc_topic_infos(d, &rp->a, &lr->topics, &lr->n_topics) != 0) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_TOPIC_LIST;
	rp->r.topic_list = lr;
}

void rpc_topic_subscribe(struct daemon *d, const struct rpc_call *call, struct reply *rp)
{
	const Sheaf__V1__TopicSubscribeRequest *rq =
		RPC_BODY(call, Sheaf__V1__TopicSubscribeRequest);
	Sheaf__V1__TopicSubscribeResponse *sr;
	char err[160];
	uint32_t slot, gen;
	int id = pool_topic_find(&d->pool, rq->name), rc;

	if (call->peer->client < 0) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_NOT_ATTACHED, "attach first");
		return;
	}
	if (id < 0) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_NOT_FOUND, "no topic named '%s'", rq->name);
		return;
	}
	rc = engine_topic_join(&d->engine, (uint32_t)id, (uint32_t)call->peer->client, &slot,
			       &gen, err, sizeof(err));
	if (rc != 0) {
		rpc_fail(rp, rpc_status(rc), "%s", err);
		return;
	}
	sr = ARENA_NEW(&rp->a, Sheaf__V1__TopicSubscribeResponse,
		       SHEAF__V1__TOPIC_SUBSCRIBE_RESPONSE__INIT);
	if (sr == NULL) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	sr->topic = (uint32_t)id;
	sr->slot = slot;
	sr->generation = gen;
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_TOPIC_SUBSCRIBE;
	rp->r.topic_subscribe = sr;
}

void rpc_topic_unsubscribe(struct daemon *d, const struct rpc_call *call, struct reply *rp)
{
	const Sheaf__V1__TopicUnsubscribeRequest *rq =
		RPC_BODY(call, Sheaf__V1__TopicUnsubscribeRequest);
	char err[160];
	int id = pool_topic_find(&d->pool, rq->name), rc;

	if (call->peer->client < 0) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_NOT_ATTACHED, "attach first");
		return;
	}
	if (id < 0) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_NOT_FOUND, "no topic named '%s'", rq->name);
		return;
	}
	rc = engine_topic_leave(&d->engine, (uint32_t)id, rq->slot,
				(uint32_t)call->peer->client, err, sizeof(err));
	if (rc != 0) {
		rpc_fail(rp, rpc_status(rc), "%s", err);
		return;
	}
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_TOPIC_UNSUBSCRIBE;
	rp->r.topic_unsubscribe = ARENA_NEW(&rp->a, Sheaf__V1__TopicUnsubscribeResponse,
					    SHEAF__V1__TOPIC_UNSUBSCRIBE_RESPONSE__INIT);
	if (rp->r.topic_unsubscribe == NULL)
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
}
