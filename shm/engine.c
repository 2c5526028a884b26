/*
 * engine.c - the pool engine (engine.h): cache creation, the node workers'
 * stocking pass, shrink and dead-client repair.
 *
 * Stocking rule per barn (cache c, node n), one pass:
 *   full < barn_low, or a client waits on an empty barn: refill sheaves from
 *     n's slabs up to barn_high; short of objects on n, take from other nodes
 *     by try-lock only (a busy remote node is skipped, never waited for).
 *   full > barn_limit: flush the surplus full sheaves back to slabs.
 *   Nothing at all to refill with: the barn is starved; waiters get ENOMEM.
 */
#include <errno.h>
#include <numa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "barn.h"
#include "clients.h"
#include "engine.h"
#include "futex.h"
#include "slab.h"

struct worker_arg {
	struct engine *e;
	uint32_t node;
};

uint32_t engine_default_capacity(uint32_t obj_size)
{
	uint32_t kernel = obj_size <= 256 ? 60 : obj_size <= 1024 ? 28 : obj_size <= 4096 ? 12 : 4;
	uint32_t fill = SHEAF_DEFAULT_BYTES / obj_size;

	if (fill > SHEAF_CAP_MAX)
		fill = SHEAF_CAP_MAX;
	return fill > kernel ? fill : kernel;
}

static void stat_add(struct shm_pool *p, uint32_t c, uint32_t n, enum sheaf_stat st,
		     uint64_t v)
{
	at_fetch_add_relaxed(&pool_cnode(p, c, n)->stat[st], v);
}

int engine_init(struct engine *e, struct shm_pool *p, char *err, size_t errlen)
{
	memset(e, 0, sizeof(*e));
	e->pool = p;
	pthread_mutex_init(&e->ctl_lock, NULL);
	e->scratch = calloc(SHEAF_CAP_MAX, sizeof(uint64_t));
	e->ids = calloc(p->sheaf_count, sizeof(uint32_t));
	e->ctl_lane = lane_acquire(p, OWNER_ENGINE, 0);
	for (uint32_t n = 0; n < p->nodes && e->ctl_lane; n++)
		e->worker_lane[n] = lane_acquire(p, OWNER_ENGINE, n);
	if (e->scratch == NULL || e->ids == NULL || e->ctl_lane == NULL ||
	    e->worker_lane[p->nodes - 1] == NULL) {
		engine_fini(e);
		snprintf(err, errlen, "engine: out of memory or lanes");
		return -ENOMEM;
	}
	return 0;
}

int pool_cache_find(const struct shm_pool *p, const char *name)
{
	for (uint32_t c = 0; c < SHEAF_MAX_CACHES; c++) {
		const struct shm_cache *sc = &p->caches[c];
		if (at_load_acquire((_Atomic uint32_t *)&sc->state) == CACHE_LIVE &&
		    strncmp(sc->name, name, SHEAF_NAME_MAX) == 0)
			return (int)c;
	}
	return -ENOENT;
}

int engine_cache_create(struct engine *e, const char *name,
			const struct engine_cache_params *cp,
			char *err, size_t errlen)
{
	struct shm_pool *p = e->pool;
	uint32_t obj_size, per_slab, cap;
	int id = -ENOSPC;

	if (name == NULL || name[0] == '\0' || strlen(name) >= SHEAF_NAME_MAX) {
		snprintf(err, errlen, "cache name must be 1..%u bytes", SHEAF_NAME_MAX - 1);
		return -EINVAL;
	}
	if (slab_geometry(cp->size, cp->align, &obj_size, &per_slab) != 0) {
		snprintf(err, errlen, "object size %u / align %u invalid (size 1..%u, "
			 "align a power of two <= %u)", cp->size, cp->align,
			 SHEAF_MAX_OBJ_SIZE, SHEAF_MAX_ALIGN);
		return -EINVAL;
	}
	if (cp->capacity > (int32_t)SHEAF_CAP_MAX || cp->capacity < -1) {
		snprintf(err, errlen, "sheaf capacity %d out of range 0..%u",
			 cp->capacity, SHEAF_CAP_MAX);
		return -EINVAL;
	}
	if (cp->flags & ~SHEAF_CACHE_F_DEBUG) {
		snprintf(err, errlen, "unknown cache flags 0x%x", cp->flags);
		return -EINVAL;
	}
	cap = cp->capacity < 0 ? engine_default_capacity(obj_size) : (uint32_t)cp->capacity;
	pthread_mutex_lock(&e->ctl_lock);
	if (pool_cache_find(p, name) >= 0) {
		snprintf(err, errlen, "cache '%s' exists", name);
		id = -EEXIST;
		goto out;
	}
	for (uint32_t c = 0; c < SHEAF_MAX_CACHES; c++) {
		struct shm_cache *sc = &p->caches[c];
		uint32_t ref = cap ? cap : engine_default_capacity(obj_size);

		if (at_load_relaxed(&sc->state) != CACHE_FREE)
			continue;
		memset(sc->name, 0, sizeof(sc->name));
		strncpy(sc->name, name, SHEAF_NAME_MAX - 1);
		sc->obj_size = obj_size;
		sc->align = cp->align > 8 ? cp->align : 8;
		sc->objs_per_slab = per_slab;
		sc->slab_bytes = per_slab * obj_size;
		sc->flags = cp->flags;
		sc->generation++;
		at_store_relaxed(&sc->sheaf_capacity, cap);
		at_store_relaxed(&sc->min_partial, cp->min_partial ? cp->min_partial
				 : slab_default_min_partial(obj_size));
		at_store_relaxed(&sc->barn_limit, cp->barn_limit ? cp->barn_limit
				 : (8192 / ref < 8 ? 8 : 8192 / ref > 512 ? 512 : 8192 / ref));
		at_store_relaxed(&sc->barn_low, cp->barn_low ? cp->barn_low : 4);
		at_store_relaxed(&sc->barn_high, cp->barn_high ? cp->barn_high : 16);
		/* Release: a client that finds the cache LIVE sees the rest. */
		at_store_release(&sc->state, CACHE_LIVE);
		id = (int)c;
		break;
	}
	if (id == -ENOSPC)
		snprintf(err, errlen, "all %u cache slots in use", SHEAF_MAX_CACHES);
out:
	pthread_mutex_unlock(&e->ctl_lock);
	return id;
}

/* Fill one empty sheaf from slabs: local node first, then others by trylock. */
static uint32_t refill_one(struct shm_pool *p, uint32_t c, uint32_t n,
			   struct shm_sheaf *sh, uint32_t cap)
{
	uint32_t got = slab_alloc_objs(p, c, n, sh->objs, cap, 0);

	for (uint32_t k = 1; k < p->nodes && got < cap; k++) {
		uint32_t m = (n + k) % p->nodes;
		uint32_t more = slab_alloc_objs(p, c, m, sh->objs + got, cap - got, 1);
		if (more) {
			got += more;
			stat_add(p, c, n, ST_REFILL_REMOTE, 1);
		}
	}
	return got;
}

static void flush_one(struct shm_pool *p, uint32_t c, uint32_t n, uint32_t s,
		      uint32_t me, struct ring_intent *in)
{
	struct shm_sheaf *sh = pool_sheaf(p, s);
	uint32_t limit = at_load_relaxed(&p->caches[c].barn_limit);
	uint32_t size = sheaf_size(sh) > SHEAF_CAP_MAX ? SHEAF_CAP_MAX : sheaf_size(sh);

	slab_free_objs(p, c, sh->objs, size);
	sheaf_set_size(sh, 0);
	stat_add(p, c, n, ST_SHEAF_FLUSH, 1);
	if (ring_count(pool_empty_ring(p, c, n)) > 2 * limit)
		depot_put(p, s, me, in);
	else
		barn_put_empty(p, c, n, s, me, in);
}

static uint32_t stock_barn(struct engine *e, uint32_t c, uint32_t n,
			   struct ring_intent *in)
{
	struct shm_pool *p = e->pool;
	struct shm_cache *sc = &p->caches[c];
	struct shm_barn *b = pool_barn(p, c, n);
	struct shm_ring *full = pool_full_ring(p, c, n);
	uint32_t cnt = ring_count(full);
	uint32_t low = at_load_relaxed(&sc->barn_low);
	uint32_t high = at_load_relaxed(&sc->barn_high);
	uint32_t limit = at_load_relaxed(&sc->barn_limit);
	uint32_t waiters = at_load_acquire(&b->waiters);
	uint32_t cap = at_load_relaxed(&sc->sheaf_capacity);
	uint32_t work = 0;
	int starved = 0;

	if (cap == 0)
		cap = engine_default_capacity(sc->obj_size);
	if (cnt < low || (waiters && cnt == 0)) {
		uint32_t want = high > cnt ? high - cnt : 1;
		for (uint32_t k = 0; k < want; k++) {
			int dep;
			uint32_t s = barn_get_empty(p, c, n, cap, OWNER_ENGINE, in, &dep);
			struct shm_sheaf *sh;
			uint32_t got;

			if (s == SHEAF_ID_NONE) {
				starved = work == 0;
				break;
			}
			sh = pool_sheaf(p, s);
			got = refill_one(p, c, n, sh, cap);
			if (got == 0) {
				barn_put_empty(p, c, n, s, OWNER_ENGINE, in);
				starved = work == 0;
				break;
			}
			sheaf_set_size(sh, got);
			barn_put_full(p, c, n, s, OWNER_ENGINE, in);
			stat_add(p, c, n, ST_SHEAF_REFILL, 1);
			/* A client waits on this barn: wake it at the first
			 * sheaf, before stocking the rest (miss latency). */
			if (work++ == 0 && waiters)
				barn_publish(p, c, n, 0);
		}
	}
	while (cnt > limit) {
		uint32_t s = barn_get_full(p, c, n, OWNER_ENGINE, in);
		if (s == SHEAF_ID_NONE)
			break;
		flush_one(p, c, n, s, OWNER_ENGINE, in);
		cnt--;
		work++;
	}
	if (waiters || starved || work)
		barn_publish(p, c, n, starved);
	return work;
}

uint32_t engine_node_pass(struct engine *e, uint32_t node, struct ring_intent *in)
{
	struct shm_pool *p = e->pool;
	uint32_t work = 0;

	for (uint32_t c = 0; c < SHEAF_MAX_CACHES; c++)
		if (at_load_acquire(&p->caches[c].state) == CACHE_LIVE)
			work += stock_barn(e, c, node, in);
	return work;
}

static void *worker_main(void *arg)
{
	struct worker_arg *wa = arg;
	struct engine *e = wa->e;
	struct shm_pool *p = e->pool;
	uint32_t node = wa->node;
	struct shm_node *nd = &p->node[node];
	struct ring_intent *in = &e->worker_lane[node]->intent;

	free(wa);
	if (!p->hdr->simulated && p->nodes > 1)
		numa_run_on_node((int)node);
	for (;;) {
		/* Acquire: pairs with the seq_cst bump in node_ring_doorbell. */
		uint32_t bell = at_load_acquire(&nd->doorbell);

		if (atomic_load(&e->stop))
			break;
		if (engine_node_pass(e, node, in) != 0)
			continue;
		atomic_store(&nd->sleeping, 1);          /* seq_cst: Dekker pair */
		if (atomic_load(&nd->doorbell) == bell && !atomic_load(&e->stop))
			futex_wait(&nd->doorbell, bell, -1);
		atomic_store(&nd->sleeping, 0);
	}
	return NULL;
}

int engine_start(struct engine *e, char *err, size_t errlen)
{
	struct shm_pool *p = e->pool;

	for (uint32_t n = 0; n < p->nodes; n++) {
		struct worker_arg *wa = malloc(sizeof(*wa));
		int rc;

		if (wa == NULL) {
			snprintf(err, errlen, "engine: out of memory");
			return -ENOMEM;
		}
		wa->e = e;
		wa->node = n;
		rc = pthread_create(&e->worker[n], NULL, worker_main, wa);
		if (rc != 0) {
			free(wa);
			snprintf(err, errlen, "engine: pthread_create: %s", strerror(rc));
			return -rc;
		}
		e->nworkers = n + 1;
	}
	return 0;
}

void engine_stop(struct engine *e)
{
	struct shm_pool *p = e->pool;

	atomic_store(&e->stop, 1);
	for (uint32_t n = 0; n < e->nworkers; n++) {
		at_fetch_add_seqcst(&p->node[n].doorbell, 1);
		futex_wake(&p->node[n].doorbell, 1);
	}
	for (uint32_t n = 0; n < e->nworkers; n++)
		pthread_join(e->worker[n], NULL);
	e->nworkers = 0;
	atomic_store(&e->stop, 0);
}

void engine_fini(struct engine *e)
{
	engine_stop(e);
	for (uint32_t n = 0; n < SHEAF_MAX_NODES; n++)
		if (e->worker_lane[n] != NULL)
			lane_free(e->worker_lane[n]);
	if (e->ctl_lane != NULL)
		lane_free(e->ctl_lane);
	memset(e->worker_lane, 0, sizeof(e->worker_lane));
	e->ctl_lane = NULL;
	free(e->scratch);
	free(e->ids);
	e->scratch = NULL;
	e->ids = NULL;
	pthread_mutex_destroy(&e->ctl_lock);
}

/*
 * Give the pages of idle sheaves back to the kernel: take every sheaf out of
 * the depot (so no client can be handed one meanwhile), punch each page of
 * the sheaf table that only they cover, and put them back without touching
 * their memory (a sheaf's header is written when it is next handed out).
 */
static void release_idle_sheaves(struct engine *e, struct ring_intent *in)
{
	struct shm_pool *p = e->pool;
	struct shm_ring *depot = pool_ring(p, RING_DEPOT);
	uint8_t *held = calloc(p->sheaf_count, 1);
	uint64_t start = (uint64_t)((char *)p->sheaves - p->base);
	uint64_t end = start + (uint64_t)p->sheaf_count * sizeof(struct shm_sheaf);
	uint32_t n = 0, s;

	if (held == NULL)
		return;
	while (n < p->sheaf_count &&
	       (s = ring_get(depot, p->owners, OWNER_ENGINE, in)) != SHEAF_ID_NONE) {
		held[s] = 1;
		e->ids[n++] = s;
	}
	/* Punch maximal runs of pages that only held sheaves cover. */
	uint64_t run = 0;
	for (uint64_t pg = (start + 4095) & ~4095ull; pg + 4096 <= end; pg += 4096) {
		uint32_t first = (uint32_t)((pg - start) / sizeof(struct shm_sheaf));
		uint32_t last = (uint32_t)((pg + 4095 - start) / sizeof(struct shm_sheaf));
		int all = 1;

		for (uint32_t k = first; k <= last && k < p->sheaf_count && all; k++)
			all = held[k];
		if (all && run == 0)
			run = pg;
		if (!all && run != 0) {
			pool_punch(p, run, pg - run);
			run = 0;
		}
	}
	if (run != 0)
		pool_punch(p, run, (end & ~4095ull) - run);
	for (uint32_t k = 0; k < n; k++)
		ring_put(depot, p->owners, e->ids[k], OWNER_ENGINE, in);
	free(held);
}

int engine_shrink(struct engine *e, int cache, int keep_min)
{
	struct shm_pool *p = e->pool;
	struct ring_intent *in;
	uint64_t released = 0;

	pthread_mutex_lock(&e->ctl_lock);
	in = &e->ctl_lane->intent;
	for (uint32_t c = 0; c < SHEAF_MAX_CACHES; c++) {
		if ((cache >= 0 && (uint32_t)cache != c) ||
		    at_load_acquire(&p->caches[c].state) != CACHE_LIVE)
			continue;
		for (uint32_t n = 0; n < p->nodes; n++) {
			_Atomic uint64_t *freed = &pool_cnode(p, c, n)->stat[ST_FREE_SLAB];
			uint64_t before = at_load_relaxed(freed);
			uint32_t s;

			/* Slabs emptied by the flush are released on the way
			 * (beyond min_partial); slab_shrink does the rest. */
			while ((s = barn_get_full(p, c, n, OWNER_ENGINE, in)) != SHEAF_ID_NONE)
				flush_one(p, c, n, s, OWNER_ENGINE, in);
			while ((s = ring_get(pool_empty_ring(p, c, n), p->owners, OWNER_ENGINE,
					     in)) != SHEAF_ID_NONE)
				ring_put(pool_ring(p, RING_DEPOT), p->owners, s, OWNER_ENGINE, in);
			slab_shrink(p, c, n, keep_min ?
				    at_load_relaxed(&p->caches[c].min_partial) : 0);
			released += at_load_relaxed(freed) - before;
		}
	}
	if (cache < 0)              /* sheaves are the pool's, not a cache's */
		release_idle_sheaves(e, in);
	pthread_mutex_unlock(&e->ctl_lock);
	return (int)released;
}

int engine_reclaim_client(struct engine *e, uint32_t client)
{
	struct shm_pool *p = e->pool;
	struct ring_intent *in;
	uint32_t n;

	pthread_mutex_lock(&e->ctl_lock);
	in = &e->ctl_lane->intent;
	/* Count what its threads did on their main sheaves before those go. */
	for (uint32_t l = 0; l < SHEAF_MAX_LANES; l++)
		if (at_load_acquire(&p->lanes[l].client) == client)
			lane_live_repair(p, &p->lanes[l]);
	for (uint32_t l = 0; l < SHEAF_MAX_LANES; l++) {
		struct shm_lane *ln = &p->lanes[l];
		if (at_load_acquire(&ln->client) == client)
			ring_reclaim(pool_ring_of, p, p->owners, p->sheaf_count,
				     &ln->intent, 1, client, OWNER_ENGINE, e->ids, 0);
	}
	n = ring_reclaim(pool_ring_of, p, p->owners, p->sheaf_count, NULL, 0,
			 client, OWNER_ENGINE, e->ids, p->sheaf_count);
	for (uint32_t k = 0; k < n; k++) {
		struct shm_sheaf *sh = pool_sheaf(p, e->ids[k]);
		uint32_t c = sh->cache;

		/* Its contents were written by the dead client: validate every
		 * object on the way back to the slabs (slab_free_objs). */
		if (sheaf_size(sh) > 0 && c < SHEAF_MAX_CACHES &&
		    at_load_acquire(&p->caches[c].state) == CACHE_LIVE) {
			uint32_t node = sh->node < p->nodes ? sh->node : 0;
			uint32_t size = sheaf_size(sh) > SHEAF_CAP_MAX ? SHEAF_CAP_MAX
								       : sheaf_size(sh);
			slab_free_objs(p, c, sh->objs, size);
			stat_add(p, c, node, ST_SHEAF_FLUSH, 1);
		}
		depot_put(p, e->ids[k], OWNER_ENGINE, in);
	}
	for (uint32_t l = 0; l < SHEAF_MAX_LANES; l++) {
		struct shm_lane *ln = &p->lanes[l];
		if (at_load_acquire(&ln->client) == client)
			lane_free(ln);
	}
	client_detach(p, client);
	pthread_mutex_unlock(&e->ctl_lock);
	return (int)n;
}

int64_t engine_counted_in_use(const struct shm_pool *p, uint32_t cache)
{
	int64_t n = 0;

	for (uint32_t l = 0; l < SHEAF_MAX_LANES; l++)
		n += lane_net(p, &p->lanes[l], cache);
	return n;
}

int engine_cache_destroy(struct engine *e, uint32_t cache, char *err, size_t errlen)
{
	struct shm_pool *p = e->pool;
	struct shm_cache *sc = &p->caches[cache];
	struct ring_intent *in;
	char msg[128];
	uint32_t workers = e->nworkers;
	int rc = 0;

	/* No worker may be half-way through a pass over this cache. */
	if (workers)
		engine_stop(e);
	pthread_mutex_lock(&e->ctl_lock);
	in = &e->ctl_lane->intent;
	if (at_load_acquire(&sc->state) != CACHE_LIVE) {
		snprintf(err, errlen, "no cache %u", cache);
		rc = -ENOENT;
		goto out;
	}
	for (uint32_t s = 0; s < p->sheaf_count; s++) {
		uint32_t o = at_load_relaxed(&p->owners[s]);
		if (!OWNER_IS_RING(o) && o != OWNER_ENGINE && o != OWNER_NONE &&
		    pool_sheaf(p, s)->cache == cache) {
			snprintf(err, errlen, "cache '%s': client %u still holds its sheaves",
				 sc->name, o);
			rc = -EBUSY;
			goto out;
		}
	}
	for (uint32_t n = 0; n < p->nodes; n++) {
		uint32_t s;
		while ((s = barn_get_full(p, cache, n, OWNER_ENGINE, in)) != SHEAF_ID_NONE)
			flush_one(p, cache, n, s, OWNER_ENGINE, in);
	}
	if (engine_counted_in_use(p, cache) != 0) {
		snprintf(err, errlen, "cache '%s': %lld objects in use", sc->name,
			 (long long)engine_counted_in_use(p, cache));
		rc = -EBUSY;
		goto out;
	}
	/* No new refill may start once the state is not LIVE. */
	at_store_release(&sc->state, CACHE_FREE);
	for (uint32_t n = 0; n < p->nodes; n++) {
		struct shm_cache_node *cn = pool_cnode(p, cache, n);
		uint32_t s;

		while ((s = barn_get_full(p, cache, n, OWNER_ENGINE, in)) != SHEAF_ID_NONE) {
			slab_free_objs(p, cache, pool_sheaf(p, s)->objs, sheaf_size(pool_sheaf(p, s)));
			depot_put(p, s, OWNER_ENGINE, in);
		}
		while ((s = ring_get(pool_empty_ring(p, cache, n), p->owners,
				     OWNER_ENGINE, in)) != SHEAF_ID_NONE)
			depot_put(p, s, OWNER_ENGINE, in);
		slab_shrink(p, cache, n, 0);
		pthread_mutex_lock(&cn->lock);
		for (int i = 0; i < SHEAF_STAT_NR; i++)
			at_store_relaxed(&cn->stat[i], 0);
		pthread_mutex_unlock(&cn->lock);
	}
	/* Counters of the lanes for this cache start again from zero. */
	for (uint32_t l = 0; l < SHEAF_MAX_LANES; l++) {
		for (int i = 0; i < SHEAF_STAT_NR; i++)
			at_store_relaxed(&p->lanes[l].stat[cache][i], 0);
		at_store_relaxed(&p->lanes[l].live[cache].sheaf, SHEAF_ID_NONE);
	}
out:
	pthread_mutex_unlock(&e->ctl_lock);
	if (workers && engine_start(e, msg, sizeof(msg)) != 0 && rc == 0) {
		snprintf(err, errlen, "%s", msg);
		rc = -EAGAIN;
	}
	return rc;
}

int engine_adopt(struct shm_pool *p)
{
	const uint32_t me = OWNER_NONE;          /* the recovery's owner id */
	struct ring_intent in = { 0 };
	uint32_t *ids = calloc(p->sheaf_count, sizeof(uint32_t));
	uint32_t n;

	if (ids == NULL)
		return -ENOMEM;
	slab_rebuild(p);
	for (uint32_t l = 0; l < SHEAF_MAX_LANES; l++) {
		struct shm_lane *ln = &p->lanes[l];
		if (at_load_acquire(&ln->client) == OWNER_ENGINE)
			ring_reclaim(pool_ring_of, p, p->owners, p->sheaf_count,
				     &ln->intent, 1, OWNER_ENGINE, me, ids, 0);
	}
	n = ring_reclaim(pool_ring_of, p, p->owners, p->sheaf_count, NULL, 0,
			 OWNER_ENGINE, me, ids, p->sheaf_count);
	for (uint32_t k = 0; k < n; k++) {
		struct shm_sheaf *sh = pool_sheaf(p, ids[k]);
		uint32_t c = sh->cache;

		/* A sheaf the engine was filling or flushing: whatever it holds
		 * goes back to the slabs; objects already back are refused by
		 * the bitmap (counted in flush_invalid), never freed twice. */
		if (sheaf_size(sh) > 0 && c < SHEAF_MAX_CACHES &&
		    at_load_acquire(&p->caches[c].state) == CACHE_LIVE)
			slab_free_objs(p, c, sh->objs, sheaf_size(sh) > SHEAF_CAP_MAX
						       ? SHEAF_CAP_MAX : sheaf_size(sh));
		depot_put(p, ids[k], me, &in);
	}
	for (uint32_t l = 0; l < SHEAF_MAX_LANES; l++)
		if (at_load_acquire(&p->lanes[l].client) == OWNER_ENGINE)
			lane_free(&p->lanes[l]);
	free(ids);
	return (int)n;
}
