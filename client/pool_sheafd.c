/*
 * pool_sheafd.c - a pool of sheafd: sheaf_connect connects to its socket
 * and attaches (rpc.c), maps the pool's two memfds at the daemon's address
 * (META, the engine-owned pages, read-only: its descriptor cannot write)
 * and gives the pool this file's operations (pool_ops.h, sheafd_pool_ops):
 * each is one request over the pool's connection, since the engine, the
 * cache descriptors and the slab lists are sheafd's.  The numbers of a
 * Stats reply are stats_cache_node's (sheafd sums them the way
 * pool_local.c does).  sheaf_disconnect is sheaf_pool_destroy (pool.c).
 *
 * Who may call: the public API (sheaf_connect, sheaf_disconnect); the
 * operations only through pool->ops, from pool.c, cache.c, stats.c,
 * names.c and queue.c, which checked the arguments.  fork(): a child
 * cannot use its parent's pools (their sheaves and lanes are the
 * parent's); those calls fail with ECHILD until it connects on its own.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "client/internal.h"
#include "client/pool_ops.h"
#include "client/rpc.h"
#include "proto/paths.h"
#include "proto/sheaf.pb-c.h"
#include "shm/engine/engine.h"
#include "shm/tune.h"

sheaf_pool_t *sheaf_connect(const char *path, const char *name, unsigned flags,
			    char *err, size_t errlen)
{
	char def[108], msg[256] = "";
	sheaf_pool_t *pool;
	int fds[2] = { -1, -1 }, rc;

	if (flags & ~SHEAF_CONNECT_RELOCATE) {
		snprintf(msg, sizeof(msg), "unknown flags 0x%x", flags);
		rc = -EINVAL;
		goto out_msg;
	}
	if (path == NULL || path[0] == '\0') {
		sheaf_default_socket(def, sizeof(def), 1);
		path = def;
	}
	pool = calloc(1, sizeof(*pool));
	if (pool == NULL) {
		rc = -ENOMEM;
		snprintf(msg, sizeof(msg), "out of memory");
		goto out_msg;
	}
	pool->ops = &sheafd_pool_ops;
	pthread_mutex_init(&pool->lock, NULL);
	lanes_init(pool);
	pool->shm.meta_fd = pool->shm.shared_fd = pool->shm.meta_ro_fd = -1;
	pool->wait_ns = 5000000000ll;
	rc = rpc_open(&pool->conn, path, msg, sizeof(msg));
	if (rc != 0)
		goto err_free;
	rc = rpc_attach(&pool->conn, name, fds, msg, sizeof(msg));
	if (rc != 0)
		goto err_conn;
	pool->client = pool->conn.client;
	rc = slots_add_pool(pool);
	if (rc != 0) {
		snprintf(msg, sizeof(msg), "too many pools in this process (max %u)",
			 SHEAF_POOLS_MAX);
		goto err_conn;
	}
	rc = pool_map_fds(&pool->shm, fds[0], fds[1], 1,
			  (flags & SHEAF_CONNECT_RELOCATE) != 0, msg, sizeof(msg));
	if (rc != 0) {
		slots_remove_pool(pool);
		goto err_conn;
	}
	return pool;

err_conn:
	for (int i = 0; i < 2; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
	}
	rpc_close(&pool->conn);
err_free:
	pthread_mutex_destroy(&pool->lock);
	free(pool);
out_msg:
	if (err != NULL && errlen > 0)
		snprintf(err, errlen, "%s", msg);
	errno = -rc;
	return NULL;
}

void sheaf_disconnect(sheaf_pool_t *pool)
{
	sheaf_pool_destroy(pool);
}

/*
 * Send @rq over @conn and take its reply: 0 with *@r (the caller frees it
 * with sheaf__v1__response__free_unpacked), rpc_call's error (message in
 * @err), or -EPROTO when the reply's body is not @want (freed then).
 * SHEAF__V1__RESPONSE__BODY__NOT_SET for @want takes any body.
 */
static int request(struct rpc_conn *conn, Sheaf__V1__Request *rq,
		   Sheaf__V1__Response__BodyCase want, Sheaf__V1__Response **r, char *err,
		   size_t errlen)
{
	int rc = rpc_call(conn, rq, r, NULL, err, errlen);

	if (rc != 0)
		return rc;
	if (want != SHEAF__V1__RESPONSE__BODY__NOT_SET && (*r)->body_case != want) {
		sheaf__v1__response__free_unpacked(*r, NULL);
		return -EPROTO;
	}
	return 0;
}

static int sheafd_cache_create(sheaf_pool_t *pool, const char *name,
			       const struct cache_params *cp, uint32_t *gen)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__CacheCreateRequest cc = SHEAF__V1__CACHE_CREATE_REQUEST__INIT;
	Sheaf__V1__Response *r;
	int rc, id;

	cc.name = (char *)name;
	cc.size = cp->size;
	cc.align = cp->align;
	cc.capacity = cp->capacity;
	cc.flags = cp->flags;
	rq.body_case = SHEAF__V1__REQUEST__BODY_CACHE_CREATE;
	rq.cache_create = &cc;
	rc = request(&pool->conn, &rq, SHEAF__V1__RESPONSE__BODY_CACHE_CREATE, &r, NULL, 0);
	if (rc != 0)
		return rc;
	id = r->cache_create->cache && r->cache_create->cache->id < pool->shm.max_caches
		? (int)r->cache_create->cache->id : -EPROTO;
	/* The generation sheafd created (an older sheafd sends none, 0:
	 * the mapped descriptor's, which a destroy since could have moved). */
	if (id >= 0) {
		*gen = r->cache_create->cache->generation;
		if (*gen == 0)
			*gen = at_load_relaxed(&pool->shm.caches[id].generation);
	}
	sheaf__v1__response__free_unpacked(r, NULL);
	return id;
}

/* A Tune request of one setting of @c: the descriptors are sheafd's. */
static int sheafd_cache_tune(sheaf_cache_t *c, const struct tune_setting *s)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__TuneRequest tr = SHEAF__V1__TUNE_REQUEST__INIT;
	Sheaf__V1__Setting st = SHEAF__V1__SETTING__INIT, *sp = &st;
	Sheaf__V1__Response *r;
	int rc;

	st.key = (char *)s->key;
	st.value = s->value;
	tr.cache = c->sc->name;
	tr.n_settings = 1;
	tr.settings = &sp;
	rq.body_case = SHEAF__V1__REQUEST__BODY_TUNE;
	rq.tune = &tr;
	rc = request(&c->pool->conn, &rq, SHEAF__V1__RESPONSE__BODY__NOT_SET, &r, NULL, 0);
	if (rc == 0)
		sheaf__v1__response__free_unpacked(r, NULL);
	return rc;
}

static int sheafd_cache_shrink(sheaf_cache_t *c)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__ShrinkRequest sr = SHEAF__V1__SHRINK_REQUEST__INIT;
	Sheaf__V1__Response *r;
	int rc;

	sr.cache = c->sc->name;
	rq.body_case = SHEAF__V1__REQUEST__BODY_SHRINK;
	rq.shrink = &sr;
	rc = request(&c->pool->conn, &rq, SHEAF__V1__RESPONSE__BODY_SHRINK, &r, NULL, 0);
	if (rc != 0)
		return rc;
	rc = (int)r->shrink->slabs_released;
	sheaf__v1__response__free_unpacked(r, NULL);
	return rc;
}

/* Index of counter @name in enum sheaf_stat, or -1 (a newer sheafd may
 * count more than this library knows). */
static int stat_of(const char *name)
{
	for (int i = 0; i < SHEAF_STAT_NR; i++)
		if (strcmp(sheaf_stat_names[i], name) == 0)
			return i;
	return -1;
}

/* Add one NodeStats of a Stats reply to @out. */
static void add_node(const Sheaf__V1__NodeStats *ns, struct pool_cache_stats *out)
{
	for (size_t k = 0; k < ns->n_counters; k++) {
		int i = stat_of(ns->counters[k]->name);
		if (i >= 0)
			out->sum.stat[i] += ns->counters[k]->value;
	}
	out->sum.objects += ns->objects;
	out->sum.active_objects += ns->active_objects;
	out->sum.slabs += ns->slabs;
	out->sum.partial_slabs += ns->partial_slabs;
	out->sum.barn_full += ns->barn_full;
	out->sum.barn_empty += ns->barn_empty;
	out->slab_bytes += ns->slab_bytes;
}

static int sheafd_cache_stats(sheaf_cache_t *c, int node, struct pool_cache_stats *out)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__StatsRequest sr = SHEAF__V1__STATS_REQUEST__INIT;
	Sheaf__V1__Response *r;
	int rc;

	sr.cache = c->sc->name;
	rq.body_case = SHEAF__V1__REQUEST__BODY_STATS;
	rq.stats = &sr;
	rc = request(&c->pool->conn, &rq, SHEAF__V1__RESPONSE__BODY_STATS, &r, NULL, 0);
	if (rc != 0)
		return rc;
	rc = -EPROTO;
	if (r->stats->n_caches == 1) {
		const Sheaf__V1__CacheStats *cs = r->stats->caches[0];

		for (size_t n = 0; n < cs->n_nodes; n++)
			if (node < 0 || cs->nodes[n]->node == (uint32_t)node)
				add_node(cs->nodes[n], out);
		rc = 0;
	}
	sheaf__v1__response__free_unpacked(r, NULL);
	return rc;
}

static int sheafd_check(sheaf_pool_t *pool, char *err, size_t errlen)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__CheckRequest cr = SHEAF__V1__CHECK_REQUEST__INIT;
	Sheaf__V1__CheckResponse *c;
	Sheaf__V1__Response *r;
	int rc;

	rq.body_case = SHEAF__V1__REQUEST__BODY_CHECK;
	rq.check = &cr;
	rc = request(&pool->conn, &rq, SHEAF__V1__RESPONSE__BODY_CHECK, &r, err, errlen);
	if (rc != 0)
		return rc;
	c = r->check;
	rc = 0;
	if (!c->ok) {
		if (err != NULL)
			snprintf(err, errlen, "%s", c->problem);
		rc = -EUCLEAN;
	} else if (c->in_use != c->counted_in_use) {
		if (err != NULL)
			snprintf(err, errlen, "in use %llu by the walk, %llu by the counters",
				 (unsigned long long)c->in_use,
				 (unsigned long long)c->counted_in_use);
		rc = -EUCLEAN;
	}
	sheaf__v1__response__free_unpacked(r, NULL);
	return rc;
}

static int sheafd_queue_create(sheaf_pool_t *pool, const char *name, uint32_t capacity,
			       uint32_t flags, uint32_t *gen)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__QueueCreateRequest qc = SHEAF__V1__QUEUE_CREATE_REQUEST__INIT;
	Sheaf__V1__Response *r;
	int rc, id;

	qc.name = (char *)name;
	qc.capacity = capacity;
	qc.flags = flags;
	rq.body_case = SHEAF__V1__REQUEST__BODY_QUEUE_CREATE;
	rq.queue_create = &qc;
	rc = request(&pool->conn, &rq, SHEAF__V1__RESPONSE__BODY_QUEUE_CREATE, &r, NULL, 0);
	if (rc != 0)
		return rc;
	id = r->queue_create->queue && r->queue_create->queue->id < SHEAF_MAX_QUEUES
		? (int)r->queue_create->queue->id : -EPROTO;
	if (id >= 0)
		*gen = r->queue_create->queue->generation;
	sheaf__v1__response__free_unpacked(r, NULL);
	return id;
}

static int sheafd_queue_destroy(sheaf_pool_t *pool, uint32_t id, const char *name)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__QueueDestroyRequest qd = SHEAF__V1__QUEUE_DESTROY_REQUEST__INIT;
	Sheaf__V1__Response *r;
	int rc;

	(void)id;
	qd.name = (char *)name;
	rq.body_case = SHEAF__V1__REQUEST__BODY_QUEUE_DESTROY;
	rq.queue_destroy = &qd;
	rc = request(&pool->conn, &rq, SHEAF__V1__RESPONSE__BODY_QUEUE_DESTROY, &r, NULL, 0);
	if (rc == 0)
		sheaf__v1__response__free_unpacked(r, NULL);
	return rc;
}

static int sheafd_lanes_grant(sheaf_pool_t *pool, uint32_t have, uint32_t *held, uint32_t *cap)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__LaneGrantRequest lg = SHEAF__V1__LANE_GRANT_REQUEST__INIT;
	Sheaf__V1__Response *r;
	int rc;

	lg.have = have;
	rq.body_case = SHEAF__V1__REQUEST__BODY_LANE_GRANT;
	rq.lane_grant = &lg;
	rc = request(&pool->conn, &rq, SHEAF__V1__RESPONSE__BODY_LANE_GRANT, &r, NULL, 0);
	if (rc != 0)
		return rc;
	rc = (int)r->lane_grant->granted;
	*held = r->lane_grant->held;
	*cap = r->lane_grant->cap;
	sheaf__v1__response__free_unpacked(r, NULL);
	return rc;
}

static int sheafd_topic_create(sheaf_pool_t *pool, const char *name, uint32_t capacity,
			       uint32_t history, uint32_t policy, uint32_t *gen)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__TopicCreateRequest tc = SHEAF__V1__TOPIC_CREATE_REQUEST__INIT;
	Sheaf__V1__Response *r;
	int rc, id;

	tc.name = (char *)name;
	tc.capacity = capacity;
	tc.history = history;
	tc.policy = policy;
	rq.body_case = SHEAF__V1__REQUEST__BODY_TOPIC_CREATE;
	rq.topic_create = &tc;
	rc = request(&pool->conn, &rq, SHEAF__V1__RESPONSE__BODY_TOPIC_CREATE, &r, NULL, 0);
	if (rc != 0)
		return rc;
	id = r->topic_create->topic && r->topic_create->topic->id < SHEAF_MAX_TOPICS
		? (int)r->topic_create->topic->id : -EPROTO;
	if (id >= 0)
		*gen = r->topic_create->topic->generation;
	sheaf__v1__response__free_unpacked(r, NULL);
	return id;
}

static int sheafd_topic_destroy(sheaf_pool_t *pool, uint32_t id, const char *name)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__TopicDestroyRequest td = SHEAF__V1__TOPIC_DESTROY_REQUEST__INIT;
	Sheaf__V1__Response *r;
	int rc;

	(void)id;
	td.name = (char *)name;
	rq.body_case = SHEAF__V1__REQUEST__BODY_TOPIC_DESTROY;
	rq.topic_destroy = &td;
	rc = request(&pool->conn, &rq, SHEAF__V1__RESPONSE__BODY_TOPIC_DESTROY, &r, NULL, 0);
	if (rc == 0)
		sheaf__v1__response__free_unpacked(r, NULL);
	return rc;
}

static int sheafd_topic_join(sheaf_pool_t *pool, uint32_t id, const char *name,
			     uint32_t *slot, uint32_t *gen)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__TopicSubscribeRequest ts = SHEAF__V1__TOPIC_SUBSCRIBE_REQUEST__INIT;
	Sheaf__V1__Response *r;
	int rc;

	ts.name = (char *)name;
	rq.body_case = SHEAF__V1__REQUEST__BODY_TOPIC_SUBSCRIBE;
	rq.topic_subscribe = &ts;
	rc = request(&pool->conn, &rq, SHEAF__V1__RESPONSE__BODY_TOPIC_SUBSCRIBE, &r, NULL, 0);
	if (rc != 0)
		return rc;
	if (r->topic_subscribe->topic != id || r->topic_subscribe->slot >= TOPIC_SUBS_MAX) {
		rc = -EPROTO;
	} else {
		*slot = r->topic_subscribe->slot;
		*gen = r->topic_subscribe->generation;
	}
	sheaf__v1__response__free_unpacked(r, NULL);
	return rc;
}

static int sheafd_topic_leave(sheaf_pool_t *pool, uint32_t id, const char *name, uint32_t slot)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__TopicUnsubscribeRequest tu = SHEAF__V1__TOPIC_UNSUBSCRIBE_REQUEST__INIT;
	Sheaf__V1__Response *r;
	int rc;

	(void)id;
	tu.name = (char *)name;
	tu.slot = slot;
	rq.body_case = SHEAF__V1__REQUEST__BODY_TOPIC_UNSUBSCRIBE;
	rq.topic_unsubscribe = &tu;
	rc = request(&pool->conn, &rq, SHEAF__V1__RESPONSE__BODY_TOPIC_UNSUBSCRIBE, &r, NULL, 0);
	if (rc == 0)
		sheaf__v1__response__free_unpacked(r, NULL);
	return rc;
}

/* Close the connection: sheafd counts us detached.  A fork() child closes
 * only its copy of the socket; the parent's connection stays. */
static void sheafd_close(sheaf_pool_t *pool)
{
	rpc_close(&pool->conn);
}

/* The name directory is sheafd's to change: one request each. */
static int sheafd_name_set(sheaf_pool_t *pool, const char *name, uint64_t off)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__NameSetRequest nr = SHEAF__V1__NAME_SET_REQUEST__INIT;
	Sheaf__V1__Response *r;
	int rc;

	nr.name = (char *)name;
	nr.offset = off;
	rq.body_case = SHEAF__V1__REQUEST__BODY_NAME_SET;
	rq.name_set = &nr;
	rc = request(&pool->conn, &rq, SHEAF__V1__RESPONSE__BODY_NAME_SET, &r, NULL, 0);
	if (rc == 0)
		sheaf__v1__response__free_unpacked(r, NULL);
	return rc;
}

static int sheafd_name_del(sheaf_pool_t *pool, const char *name)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__NameDelRequest nr = SHEAF__V1__NAME_DEL_REQUEST__INIT;
	Sheaf__V1__Response *r;
	int rc;

	nr.name = (char *)name;
	rq.body_case = SHEAF__V1__REQUEST__BODY_NAME_DEL;
	rq.name_del = &nr;
	rc = request(&pool->conn, &rq, SHEAF__V1__RESPONSE__BODY_NAME_DEL, &r, NULL, 0);
	if (rc == 0)
		sheaf__v1__response__free_unpacked(r, NULL);
	return rc;
}

const struct pool_ops sheafd_pool_ops = {
	.cache_create = sheafd_cache_create,
	.cache_tune = sheafd_cache_tune,
	.cache_shrink = sheafd_cache_shrink,
	.cache_stats = sheafd_cache_stats,
	.check = sheafd_check,
	.queue_create = sheafd_queue_create,
	.queue_destroy = sheafd_queue_destroy,
	.topic_create = sheafd_topic_create,
	.topic_destroy = sheafd_topic_destroy,
	.topic_join = sheafd_topic_join,
	.topic_leave = sheafd_topic_leave,
	.close = sheafd_close,
	.lanes_grant = sheafd_lanes_grant,
	.name_set = sheafd_name_set,
	.name_del = sheafd_name_del,
};
