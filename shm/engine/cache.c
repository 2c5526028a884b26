/*
 * cache.c - a cache's life in the engine (engine.h): create, the in-use
 * count by the lanes' counters and its reconciliation with the checker's
 * walk, destroy, and shrink (a cache's or the whole pool's).  The checks
 * of a create request, the defaults and the find by name are any
 * process's (shm/cache_desc.h).
 *
 * Who may call: the hosting process.  Create, destroy and shrink take
 * e->ctl_lock; the do_* helpers below assume it held (they use e->ctl_lane's
 * intent or e->ids).  A cache's descriptor is published by the release store
 * of CACHE_LIVE: readers load the state with acquire before any other field.
 *
 * Destroy and the clients (docs/design.md, "Cache handles and destroy"):
 * destroy marks the cache DYING, then waits until no lane's thread is
 * inside the cache's barns (shm_lane.in_cache; a client slow path that
 * finds the cache DYING leaves and waits), so that what it then checks
 * (holders, objects out of the slabs) cannot change before it decides.
 */
#include <time.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "shm/barn.h"
#include "shm/futex.h"
#include "shm/lanes.h"
#include "shm/names.h"
#include "shm/engine/check.h"
#include "shm/engine/grace.h"
#include "shm/engine/internal.h"
#include "shm/engine/names.h"
#include "shm/engine/slab.h"

/* Fill free slot @sc with cache @name and make it LIVE.  Caller holds
 * e->ctl_lock (no other control call fills slots meanwhile). */
static void do_cache_install(const struct shm_pool *p, struct shm_cache *sc, const char *name,
			     const struct cache_params *cp,
			     uint32_t obj_size, uint32_t per_slab, uint32_t cap)
{
	uint32_t ref = cap ? cap : cache_default_capacity(obj_size);

	memset(sc->name, 0, sizeof(sc->name));
	strncpy(sc->name, name, SHEAF_NAME_MAX - 1);
	sc->obj_size = obj_size;
	sc->align = cp->align > 8 ? cp->align : 8;
	sc->objs_per_slab = per_slab;
	sc->slab_bytes = per_slab * obj_size;
	sc->flags = cp->flags;
	/* A handle of the slot's previous cache is stale from now on. */
	at_store_relaxed(&sc->generation, at_load_relaxed(&sc->generation) + 1);
	at_store_relaxed(&sc->sheaf_capacity, cap);
	at_store_relaxed(&sc->min_partial, cp->min_partial ? cp->min_partial
			 : slab_default_min_partial(obj_size));
	at_store_relaxed(&sc->barn_limit, cp->barn_limit ? cp->barn_limit
			 : (8192 / ref < 8 ? 8 : 8192 / ref > 512 ? 512 : 8192 / ref));
	at_store_relaxed(&sc->barn_keep, cp->barn_keep ? cp->barn_keep
			 : cache_default_keep(p));
	at_store_relaxed(&sc->stash_sheaves, SHEAF_STASH_SHEAVES);
	at_store_relaxed(&sc->stash_bytes, SHEAF_STASH_BYTES);
	at_store_relaxed(&sc->barn_low, cp->barn_low ? cp->barn_low : 4);
	at_store_relaxed(&sc->barn_high, cp->barn_high ? cp->barn_high : 16);
	if (slab_is_large(obj_size)) {
		/* Large objects: a barn of a few sheaves, no slab kept for
		 * min_partial (the pool's large_retain budget decides), no
		 * barn_keep (freed objects reach the slabs, where the budget
		 * applies, once the barn holds its limit). */
		uint32_t lim = cp->barn_limit ? cp->barn_limit : cache_large_barn_limit(obj_size, ref);

		at_store_relaxed(&sc->barn_limit, lim);
		at_store_relaxed(&sc->barn_keep, cp->barn_keep);
		at_store_relaxed(&sc->min_partial, cp->min_partial);
		at_store_relaxed(&sc->barn_low, cp->barn_low ? cp->barn_low : 1);
		at_store_relaxed(&sc->barn_high, cp->barn_high ? cp->barn_high : (lim < 2 ? lim : 2));
	}
	/* Release: a client that finds the cache LIVE sees the rest (pairs
	 * with the acquire loads of state: pool_cache_find, the workers). */
	at_store_release(&sc->state, CACHE_LIVE);
}

int engine_cache_create(struct engine *e, const char *name,
			const struct cache_params *cp,
			char *err, size_t errlen)
{
	struct shm_pool *p = e->pool;
	uint32_t obj_size, per_slab, cap;
	int id = -ENOSPC;
	int rc = cache_params_geometry(name, cp, &obj_size, &per_slab, err, errlen);

	if (rc != 0)
		return rc;
	if (slab_frames_of(per_slab * obj_size) > p->frames_per_node) {
		snprintf(err, errlen, "object size %u is larger than a node's data (%llu bytes)",
			 obj_size, (unsigned long long)p->frames_per_node << SLAB_SHIFT);
		return -EINVAL;
	}
	cap = cp->capacity < 0 ? cache_default_capacity(obj_size) : (uint32_t)cp->capacity;
	lock_acquire(&e->ctl_lock, LOCK_RANK_ENGINE_CTL);
	if (pool_cache_find(p, name) >= 0) {
		snprintf(err, errlen, "cache '%s' exists", name);
		id = -EEXIST;
		goto out;
	}
	for (uint32_t c = 0; c < p->max_caches; c++) {
		/* Relaxed: only control calls, serialised by ctl_lock, write
		 * the state.  A slot past the mark is set up first (sparse:
		 * pool_cache_slot_init). */
		if (at_load_relaxed(&p->caches[c].state) != CACHE_FREE)
			continue;
		pool_cache_slot_init(p, c);
		do_cache_install(p, &p->caches[c], name, cp, obj_size, per_slab, cap);
		id = (int)c;
		break;
	}
	if (id == -ENOSPC)
		snprintf(err, errlen, "all %u cache slots in use (max_caches)", p->max_caches);
out:
	lock_release(&e->ctl_lock);
	return id;
}

int64_t engine_counted_in_use(const struct shm_pool *p, uint32_t cache)
{
	int64_t n = 0;

	for (uint32_t l = 0, used = pool_lanes_used(p); l < used; l++)
		if (pool_lane_ready(&p->lanes[l]))
			n = ut_add64(n, lane_net(p, &p->lanes[l], cache));
	return n;
}

/*
 * Book on the control lane what the counters of each live cache miss
 * against the checker's walk (objects out of slabs and sheaves): too many
 * counted in use as slow-path frees, too few as slow-path allocs.  A cache
 * the checker finds broken keeps its counters (the check reports it).
 * Caller holds e->ctl_lock, with the workers stopped and no client thread
 * in the pool.  Returns the objects booked.
 */
static int64_t do_reconcile_counts(struct engine *e)
{
	struct shm_pool *p = e->pool;
	int64_t booked = 0;
	char err[128];

	SHEAF_ASSERT_HELD(&e->ctl_lock);
	for (uint32_t c = 0, used = pool_caches_used(p); c < used; c++) {
		struct check_report rep;
		int64_t diff;

		if (at_load_acquire(&p->caches[c].state) != CACHE_LIVE ||
		    pool_check(p, (int)c, -1, &rep, err, sizeof(err)) != 0)
			continue;
		/* The counters are client-written: wrapping arithmetic. */
		diff = ut_sub64(engine_counted_in_use(p, c), (int64_t)rep.in_use);
		if (diff > 0)
			at_counter_add(&lane_stat(p, e->ctl_lane, c)[ST_FREE_SLOWPATH], (uint64_t)diff);
		else if (diff < 0)
			at_counter_add(&lane_stat(p, e->ctl_lane, c)[ST_ALLOC_SLOWPATH],
				       0 - (uint64_t)diff);
		booked = ut_add64(booked, diff > 0 ? diff : ut_sub64(0, diff));
	}
	return booked;
}

int64_t engine_reconcile_counts(struct engine *e)
{
	uint32_t workers = e->nworkers;
	int64_t booked;
	char msg[128];

	if (workers)
		engine_stop(e);          /* the walk needs a quiet pool */
	lock_acquire(&e->ctl_lock, LOCK_RANK_ENGINE_CTL);
	booked = do_reconcile_counts(e);
	lock_release(&e->ctl_lock);
	if (workers && engine_start(e, msg, sizeof(msg)) != 0)
		return -EAGAIN;
	return booked;
}

/* Objects of @cache out of its slabs (in use, or in a sheaf), by the slab
 * layer's counts, which follow the bitmaps under each cache-node lock. */
static uint64_t cache_out_of_slabs(struct shm_pool *p, uint32_t cache)
{
	uint64_t out = 0;

	for (uint32_t n = 0; n < p->nodes; n++) {
		struct shm_cache_node *cn = pool_cnode(p, cache, n);

		lock_acquire(&cn->lock, LOCK_RANK_CACHE_NODE);
		out += cn->total_objects - cn->free_objects;
		lock_release(&cn->lock);
	}
	return out;
}

/* A client holding a sheaf of @cache, or OWNER_NONE when none does.  Caller
 * holds e->ctl_lock (with the workers stopped). */
static uint32_t do_cache_holder(const struct shm_pool *p, uint32_t cache)
{
	for (uint32_t s = 0; s < p->sheaf_count; s++) {
		uint32_t o = at_load_relaxed(&p->owners[s]);
		if (!OWNER_IS_RING(o) && o != OWNER_ENGINE && o != OWNER_NONE &&
		    ut_sheaf_cache(p, pool_sheaf(p, s)) == cache)
			return o;
	}
	return OWNER_NONE;
}

/* Flush every full sheaf in @cache's barns back to slabs.  Caller holds
 * e->ctl_lock (@in is the control lane's). */
static void do_cache_flush_barns(struct shm_pool *p, uint32_t cache,
				 struct ring_intent *in)
{
	for (uint32_t n = 0; n < p->nodes; n++) {
		uint32_t s;
		while ((s = barn_get_full(p, cache, n, OWNER_ENGINE, in)) != SHEAF_ID_NONE)
			engine_flush_sheaf(p, cache, n, s, OWNER_ENGINE, in);
	}
}

/*
 * @cache is no longer LIVE: return its sheaves to the depot (objects of any
 * full one to the slabs), release all its slabs, and zero its counters, the
 * cache-node's and the lanes'.  Caller holds e->ctl_lock.
 */
static void do_cache_release(struct shm_pool *p, uint32_t cache, struct ring_intent *in)
{
	for (uint32_t n = 0; n < p->nodes; n++) {
		struct shm_cache_node *cn = pool_cnode(p, cache, n);
		uint32_t s;

		struct ring_ref empty = pool_empty_ref(p, cache, n);

		while ((s = barn_get_full(p, cache, n, OWNER_ENGINE, in)) != SHEAF_ID_NONE) {
			engine_sheaf_to_slabs(p, cache, pool_sheaf(p, s));
			depot_put(p, s, OWNER_ENGINE, in);
		}
		while ((s = ring_get(&empty, p->owners, OWNER_ENGINE, in)) != SHEAF_ID_NONE)
			depot_put(p, s, OWNER_ENGINE, in);
		slab_shrink(p, cache, n, 0);
		lock_acquire(&cn->lock, LOCK_RANK_CACHE_NODE);
		for (int i = 0; i < SHEAF_STAT_NR; i++)
			at_store_relaxed(&cn->stat[i], 0);
		lock_release(&cn->lock);
	}
	/* Counters of the lanes for this cache start again from zero, and so
	 * does each lane's base (net - base is a client's own in use: a base
	 * left behind would make it negative). */
	for (uint32_t l = 0, used = pool_lanes_used(p); l < used; l++) {
		const struct shm_lane *ln = &p->lanes[l];
		_Atomic uint64_t *st = lane_stat(p, ln, cache);

		for (int i = 0; i < SHEAF_STAT_NR; i++)
			at_store_relaxed(&st[i], 0);
		at_store_relaxed(lane_base(p, ln, cache), 0);
		at_store_relaxed(&lane_live(p, ln, cache)->sheaf, SHEAF_ID_NONE);
	}
}

/* How long destroy waits for a client thread to leave the cache's barns
 * (engine.h: a variable for the fuzzer, whose inputs scribble lanes that
 * look busy in a cache). */
uint32_t engine_quiesce_ms = 250;

/*
 * @cache is DYING: wait until no busy lane's thread is inside its barns
 * (in_cache, set by a client before it loads the state: with this side's
 * DYING store before its loads of in_cache, one of the two sees the other,
 * all seq_cst), at most engine_quiesce_ms.  Every thread that enters later sees
 * DYING and leaves again.  0, or -EBUSY with the client that stayed.
 */
static int do_cache_quiesce(struct shm_pool *p, uint32_t cache, uint32_t *client)
{
	struct timespec nap = { 0, 100000 };
	int64_t end = clock_ns() + (int64_t)engine_quiesce_ms * 1000000;

	for (uint32_t l = 0, used = pool_lanes_used(p); l < used; l++) {
		struct shm_lane *ln = &p->lanes[l];

		/* A lane no thread holds keeps a dead thread's value, if any:
		 * nobody can be inside through it; nor through one no live
		 * client owns (its fields are leftovers or a client's
		 * scribbles: waiting on them made every destroy of the cache
		 * fail with EBUSY after engine_quiesce_ms). */
		while (at_load_seqcst(&ln->in_cache) == cache + 1 &&
		       at_load_acquire(&ln->busy) && ut_lane_live(p, ln)) {
			if (clock_ns() >= end) {
				*client = pool_lane_holder(p, ln);
				return -EBUSY;
			}
			nanosleep(&nap, NULL);
		}
	}
	return 0;
}

void engine_caches_revive(struct shm_pool *p)
{
	for (uint32_t c = 0, used = pool_caches_used(p); c < used; c++) {
		uint32_t dying = CACHE_DYING;

		at_cas_acqrel(&p->caches[c].state, &dying, CACHE_LIVE);
	}
}

int engine_cache_destroy(struct engine *e, uint32_t cache, char *err, size_t errlen)
{
	struct shm_pool *p = e->pool;
	struct shm_cache *sc = &p->caches[cache];
	struct ring_intent *in;
	char msg[128];
	uint32_t workers = e->nworkers;
	uint32_t holder;
	uint64_t in_use;
	int rc = 0;

	/* No worker may be half-way through a pass over this cache. */
	if (workers)
		engine_stop(e);
	lock_acquire(&e->ctl_lock, LOCK_RANK_ENGINE_CTL);
	in = &e->ctl_lane->intent;
	if (at_load_acquire(&sc->state) != CACHE_LIVE) {
		snprintf(err, errlen, "no cache %u", cache);
		rc = -ENOENT;
		goto out;
	}
	/* Clients stay out of the cache's barns from now on (seq_cst: the
	 * handshake of do_cache_quiesce), so what follows is decided on a
	 * cache nobody changes: no thread can take a sheaf between the
	 * checks and the release. */
	at_store_seqcst(&sc->state, CACHE_DYING);
	if (do_cache_quiesce(p, cache, &holder) != 0) {
		snprintf(err, errlen, "cache '%s': a thread of client %u is in an operation on it",
			 sc->name, holder);
		rc = -EBUSY;
		goto revive;
	}
	holder = do_cache_holder(p, cache);
	if (holder != OWNER_NONE) {
		snprintf(err, errlen, "cache '%s': client %u still holds its sheaves",
			 sc->name, holder);
		rc = -EBUSY;
		goto revive;
	}
	/* The grace-period thread is stopped with the workers. */
	if (grace_cache_waiting(e, cache) != 0) {
		snprintf(err, errlen, "cache '%s': deferred frees wait for a grace period",
			 sc->name);
		rc = -EBUSY;
		goto revive;
	}
	do_cache_flush_barns(p, cache, in);
	/*
	 * No client holds a sheaf and the barns are flushed: what is out of
	 * the slabs now is in use.  The slabs decide, not the counters, which
	 * a killed client may have left off (docs/design.md, "Limits").
	 */
	in_use = cache_out_of_slabs(p, cache);
	if (in_use != 0) {
		snprintf(err, errlen, "cache '%s': %llu objects in use", sc->name,
			 (unsigned long long)in_use);
		rc = -EBUSY;
		goto revive;
	}
	/* Release: pairs with the acquire loads of state (waiting clients
	 * then fail with ESTALE; no refill starts). */
	at_store_release(&sc->state, CACHE_FREE);
	do_cache_release(p, cache, in);
	/* No worker runs: the next cache of this id starts with no serve
	 * pending (worker.c, waiters_real). */
	memset(engine_barn_served(e, cache, 0), 0, SHEAF_MAX_NODES * sizeof(*e->served));
	/* Names of its objects go with it (names.h: only names of objects
	 * freed with their name left can be here). */
	names_drop_cache(p, cache);
	goto out;
revive:
	/* Release: waiting clients go on with the cache as it was. */
	at_store_release(&sc->state, CACHE_LIVE);
out:
	lock_release(&e->ctl_lock);
	if (workers && engine_start(e, msg, sizeof(msg)) != 0 && rc == 0) {
		snprintf(err, errlen, "%s", msg);
		rc = -EAGAIN;
	}
	return rc;
}

/*
 * Give the pages of idle sheaves back to the kernel: take every sheaf out of
 * the depot (so no client can be handed one meanwhile), punch each page of
 * the sheaf table that only they cover, and put them back without touching
 * their memory (a sheaf's header is written when it is next handed out).
 * Caller holds e->ctl_lock (e->ids holds the sheaves taken out).
 */
static void do_release_idle_sheaves(struct engine *e, struct ring_intent *in)
{
	struct shm_pool *p = e->pool;
	struct ring_ref depot = pool_depot_ref(p);
	uint64_t start = (uint64_t)((char *)p->sheaves - p->base);
	uint64_t end = start + sheaf_array_bytes(p->sheaf_count);
	uint64_t first = (start + 4095) & ~4095ull, pages = ((end & ~4095ull) - first) / 4096;
	uint8_t *held = calloc(p->sheaf_count, 1), *keep = calloc(pages + 1, 1);
	uint64_t run = 0;
	uint32_t n = 0, s;

	SHEAF_ASSERT_HELD(&e->ctl_lock);

	if (held == NULL || keep == NULL)
		goto out;
	while (n < p->sheaf_count &&
	       (s = ring_get(&depot, p->owners, OWNER_ENGINE, in)) != SHEAF_ID_NONE) {
		held[s] = 1;
		e->ids[n++] = s;
	}
	/* Keep every whole page any other sheaf touches (gaps between
	 * sheaves belong to nobody: sheaf_line). */
	for (s = 0; s < p->sheaf_count; s++) {
		uint64_t a = start + sheaf_line(s) * SHEAF_CACHELINE;
		uint64_t b = a + sizeof(struct shm_sheaf);

		if (held[s])
			continue;
		for (uint64_t pg = a & ~4095ull; pg < b; pg += 4096)
			if (pg >= first && (pg - first) / 4096 < pages)
				keep[(pg - first) / 4096] = 1;
	}
	/* Punch maximal runs of the others. */
	for (uint64_t i = 0; i <= pages; i++) {
		uint64_t pg = first + i * 4096;
		int idle = i < pages && !keep[i];

		if (idle && run == 0)
			run = pg;
		if (!idle && run != 0) {
			pool_punch(p, run, pg - run);
			run = 0;
		}
	}
	for (uint32_t k = 0; k < n; k++)        /* their pages stay untouched */
		if (ring_put(&depot, p->owners, e->ids[k], OWNER_ENGINE, in) != 0)
			untrusted_note(UT_RING, 1);     /* a scribbled depot */
out:
	free(held);
	free(keep);
}

/*
 * Shrink cache-node (@c, @n): flush its full sheaves, move its empty ones
 * to the depot, release its empty slabs beyond min_partial (@keep_min) or
 * all of them (slab_shrink).  Returns the slabs released.  Caller holds e->ctl_lock (@in is the control lane's).
 */
static uint64_t do_shrink_cache_node(struct shm_pool *p, uint32_t c, uint32_t n,
				     int keep_min, struct ring_intent *in)
{
	_Atomic uint64_t *freed = &pool_cnode(p, c, n)->stat[ST_FREE_SLAB];
	uint64_t before = at_load_relaxed(freed);
	struct ring_ref empty = pool_empty_ref(p, c, n);
	uint32_t s;

	/* Slabs emptied by the flush are released on the way (beyond
	 * min_partial); slab_shrink does the rest. */
	while ((s = barn_get_full(p, c, n, OWNER_ENGINE, in)) != SHEAF_ID_NONE)
		engine_flush_sheaf(p, c, n, s, OWNER_ENGINE, in);
	while ((s = ring_get(&empty, p->owners, OWNER_ENGINE, in)) != SHEAF_ID_NONE)
		depot_put(p, s, OWNER_ENGINE, in);
	slab_shrink(p, c, n, keep_min ? at_load_relaxed(&p->caches[c].min_partial) : 0);
	return at_load_relaxed(freed) - before;
}

/*
 * Wait for each worker's pass in progress, if any, to end.  Shrink waits
 * before it flushes: a pass that served a waiter goes on refilling the
 * barn up to barn_high, from the slabs Shrink is about to release (under
 * load, test_free saw 15 of 16 sheaves land after the flush, in a frame
 * released and taken again).  And after: a sheaf a pass took from a barn
 * to flush (over barn_limit) meanwhile is in the slabs, and counted, when
 * Shrink returns.  Bounded: a pass is (engine/worker.c), and takes no
 * engine lock.  A worker that starts a new pass is not waited for.
 */
static void wait_worker_passes(struct engine *e)
{
	for (uint32_t n = 0; n < e->nworkers; n++) {
		uint32_t s = at_load_acquire(&e->pass_seq[n]);

		while ((s & 1) && at_load_acquire(&e->pass_seq[n]) == s)
			sched_yield();
	}
}

int engine_shrink(struct engine *e, int cache, int keep_min)
{
	struct shm_pool *p = e->pool;
	struct ring_intent *in;
	uint64_t released = 0;

	lock_acquire(&e->ctl_lock, LOCK_RANK_ENGINE_CTL);
	in = &e->ctl_lane->intent;
	wait_worker_passes(e);
	for (uint32_t c = 0, used = pool_caches_used(p); c < used; c++) {
		if ((cache >= 0 && (uint32_t)cache != c) ||
		    at_load_acquire(&p->caches[c].state) != CACHE_LIVE)
			continue;
		for (uint32_t n = 0; n < p->nodes; n++)
			released += do_shrink_cache_node(p, c, n, keep_min, in);
	}
	if (cache < 0)              /* sheaves are the pool's, not a cache's */
		do_release_idle_sheaves(e, in);
	wait_worker_passes(e);
	lock_release(&e->ctl_lock);
	return (int)released;
}
