/*
 * pool_local.c - a local pool: sheaf_pool_create makes a pool region in
 * this process, with the engine running as threads of this process (the
 * same engine sheafd hosts), and gives the pool this file's operations
 * (pool_ops.h, local_pool_ops), which call that engine directly.
 *
 * Who may call: the public API (sheaf_pool_create); the operations only
 * through pool->ops, from pool.c, cache.c, stats.c, names.c and queue.c,
 * which checked the arguments.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "shm/engine/check.h"
#include "shm/lanes.h"
#include "shm/engine/clients.h"
#include "shm/names.h"
#include "shm/engine/names.h"
#include "shm/huge.h"
#include "shm/slab_geom.h"
#include "shm/tune.h"
#include "client/internal.h"
#include "client/pool_ops.h"

static void seterr(char *err, size_t errlen, const char *msg)
{
	if (err != NULL && errlen > 0)
		snprintf(err, errlen, "%s", msg);
}

static _Atomic uint64_t local_pools_made;

sheaf_pool_t *sheaf_pool_create(const struct sheaf_pool_config *cfg,
				char *err, size_t errlen)
{
	struct sheaf_pool_config def = { 0 };
	struct pool_params pp = { 0 };
	char msg[256] = "";
	sheaf_pool_t *pool;
	int rc, client;

	if (cfg == NULL)
		cfg = &def;
	pool = calloc(1, sizeof(*pool));
	if (pool == NULL) {
		seterr(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	pool->ops = &local_pool_ops;
	pthread_mutex_init(&pool->lock, NULL);
	lanes_init(pool);
	pool->wait_ns = (int64_t)(cfg->wait_ms ? cfg->wait_ms : 5000) * 1000000;
	pp.size = cfg->size;
	pp.nodes = cfg->nodes;
	pp.sheaf_count = cfg->sheaf_count;
	pp.mem_cap = cfg->mem_cap;
	/* A map address of its own for each local pool of each process
	 * (pool_create tries the next slots when it is taken). */
	pp.addr_seed = ((uint64_t)getpid() << 20) ^
		       (uint64_t)at_fetch_add_relaxed(&local_pools_made, 1) * 0x9e3779b97f4a7c15ull;
	pp.max_clients = cfg->max_clients;
	pp.max_lanes = cfg->max_threads;
	pp.max_caches = cfg->max_caches;
	pp.numa_policy = cfg->numa_policy;
	/* $SHEAF_HUGE_PAGES: off, try (default: huge pages when the kernel
	 * allows shmem THP; W2 at B=2^20, docs/design.md, "Huge pages"), on
	 * (shm/huge.h). */
	pp.huge = HUGE_TRY;
	if (getenv("SHEAF_HUGE_PAGES") != NULL) {
		enum huge_mode m;

		if (huge_mode_parse(getenv("SHEAF_HUGE_PAGES"), &m) != 0) {
			seterr(err, errlen, "SHEAF_HUGE_PAGES: expected off, try or on");
			pthread_mutex_destroy(&pool->lock);
			free(pool);
			errno = EINVAL;
			return NULL;
		}
		pp.huge = (uint32_t)m;
	}
	rc = slots_add_pool(pool);
	if (rc != 0) {
		snprintf(msg, sizeof(msg), "too many pools in this process (max %u)",
			 SHEAF_POOLS_MAX);
		goto err_free;
	}
	rc = pool_create(&pool->shm, &pp, msg, sizeof(msg));
	if (rc != 0)
		goto err_slots;
	client = client_attach(&pool->shm, (uint32_t)getpid(), (uint32_t)getuid(), "local");
	if (client < 0) {
		rc = client;
		snprintf(msg, sizeof(msg), "no client slot");
		goto err_unmap;
	}
	pool->client = (uint32_t)client;
	rc = engine_init(&pool->engine, &pool->shm, msg, sizeof(msg));
	if (rc != 0)
		goto err_unmap;
	rc = engine_start(&pool->engine, msg, sizeof(msg));
	if (rc != 0)
		goto err_engine;
	return pool;

err_engine:
	engine_fini(&pool->engine);
err_unmap:
	pool_unmap(&pool->shm);
err_slots:
	slots_remove_pool(pool);
err_free:
	pthread_mutex_destroy(&pool->lock);
	free(pool);
	seterr(err, errlen, msg);
	errno = -rc;
	return NULL;
}

static int local_cache_create(sheaf_pool_t *pool, const char *name,
			      const struct cache_params *cp, uint32_t *gen)
{
	char msg[160];
	int id = engine_cache_create(&pool->engine, name, cp, msg, sizeof(msg));

	/* The engine is ours: only a thread of this process could have
	 * destroyed it since. */
	if (id >= 0)
		*gen = at_load_relaxed(&pool->shm.caches[id].generation);
	return id;
}

static int local_cache_tune(sheaf_cache_t *c, const struct tune_setting *s)
{
	tune_apply(&c->pool->shm, (int)c->id, s);
	return 0;
}

static int local_cache_shrink(sheaf_cache_t *c)
{
	return engine_shrink(&c->pool->engine, (int)c->id, 1);
}

/* stats_cache_node per node, as sheafd's Stats does (daemon/rpc_pool.c). */
static int local_cache_stats(sheaf_cache_t *c, int node, struct pool_cache_stats *out)
{
	const struct shm_pool *p = &c->pool->shm;

	for (uint32_t n = 0; n < p->nodes; n++)
		if (node < 0 || n == (uint32_t)node)
			stats_cache_node(p, c->id, n, &out->sum);
	out->slab_bytes = out->sum.slabs * slab_frames_of(p->caches[c->id].slab_bytes) * SLAB_SIZE;
	return 0;
}

static int local_check(sheaf_pool_t *pool, char *err, size_t errlen)
{
	struct shm_pool *p = &pool->shm;
	char msg[256];
	int rc = 0;

	engine_stop(&pool->engine);       /* the checker needs a quiet pool */
	for (uint32_t c = 0, used = pool_caches_used(p); c < used && rc == 0; c++) {
		int64_t in_use;

		if (at_load_acquire(&p->caches[c].state) != CACHE_LIVE)
			continue;
		in_use = engine_counted_in_use(p, c);
		rc = pool_check(p, (int)c, in_use, NULL, msg, sizeof(msg));
		if (rc != 0 && err != NULL)
			snprintf(err, errlen, "cache '%s': %s", p->caches[c].name, msg);
	}
	if (engine_start(&pool->engine, msg, sizeof(msg)) != 0 && rc == 0) {
		if (err != NULL)
			snprintf(err, errlen, "%s", msg);
		rc = -EAGAIN;
	}
	return rc;
}

static int local_queue_create(sheaf_pool_t *pool, const char *name, uint32_t capacity,
			      uint32_t flags, uint32_t *gen)
{
	char msg[160];
	int id = engine_queue_create(&pool->engine, name, capacity, flags, msg, sizeof(msg));

	if (id >= 0)
		*gen = at_load_relaxed(&pool->shm.queues[id].generation);
	return id;
}

static int local_queue_destroy(sheaf_pool_t *pool, uint32_t id, const char *name)
{
	char msg[160];

	(void)name;
	return engine_queue_destroy(&pool->engine, id, msg, sizeof(msg));
}

static int local_topic_create(sheaf_pool_t *pool, const char *name, uint32_t capacity,
			      uint32_t history, uint32_t policy, uint32_t *gen)
{
	char msg[160];
	int id = engine_topic_create(&pool->engine, name, capacity, history, policy, msg,
				     sizeof(msg));

	if (id >= 0)
		*gen = at_load_relaxed(&pool->shm.topics[id].generation);
	return id;
}

static int local_topic_destroy(sheaf_pool_t *pool, uint32_t id, const char *name)
{
	char msg[160];

	(void)name;
	return engine_topic_destroy(&pool->engine, id, msg, sizeof(msg));
}

static int local_topic_join(sheaf_pool_t *pool, uint32_t id, const char *name,
			    uint32_t *slot, uint32_t *gen)
{
	char msg[160];

	(void)name;
	return engine_topic_join(&pool->engine, id, pool->client, slot, gen, msg, sizeof(msg));
}

static int local_topic_leave(sheaf_pool_t *pool, uint32_t id, const char *name, uint32_t slot)
{
	char msg[160];

	(void)name;
	return engine_topic_leave(&pool->engine, id, slot, pool->client, msg, sizeof(msg));
}

/*
 * Stop the engine and release its lanes.  A fork() child has a copy of the
 * engine but not its worker threads, and the lanes in the region are the
 * parent's engine's: engine_fini there would join threads that do not
 * exist and free lanes the parent's workers still use.  The child frees
 * only its copy of the engine's private memory.
 */
static void local_close(sheaf_pool_t *pool)
{
	if (pool->forked) {
		free(pool->engine.ids);
		pool->engine.ids = NULL;
		return;
	}
	engine_fini(&pool->engine);
}

static int local_name_set(sheaf_pool_t *pool, const char *name, uint64_t off)
{
	return engine_name_set(&pool->engine, name, off, NULL, 0);
}

static int local_name_del(sheaf_pool_t *pool, const char *name)
{
	return engine_name_del(&pool->engine, name, NULL, 0);
}

/* Our one client's lanes: no cap but the pool's max_threads. */
static int local_lanes_grant(sheaf_pool_t *pool, uint32_t have, uint32_t *held, uint32_t *cap)
{
	struct shm_pool *p = &pool->shm;
	uint32_t h = client_lanes_held(p, pool->client);
	uint32_t n = client_lanes_grant(p, pool->client, client_lanes_want(h));

	(void)have;
	*held = h + n;
	*cap = p->max_lanes;
	return (int)n;
}

const struct pool_ops local_pool_ops = {
	.lanes_grant = local_lanes_grant,
	.cache_create = local_cache_create,
	.cache_tune = local_cache_tune,
	.cache_shrink = local_cache_shrink,
	.cache_stats = local_cache_stats,
	.check = local_check,
	.queue_create = local_queue_create,
	.queue_destroy = local_queue_destroy,
	.topic_create = local_topic_create,
	.topic_destroy = local_topic_destroy,
	.topic_join = local_topic_join,
	.topic_leave = local_topic_leave,
	.close = local_close,
	.name_set = local_name_set,
	.name_del = local_name_del,
};
