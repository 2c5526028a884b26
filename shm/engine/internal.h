/*
 * internal.h - helpers shared by the engine's own files: counting on a
 * cache-node, flushing a sheaf back to the slabs.
 *
 * Who may call: the files of shm/engine/ only (engine.c, worker.c,
 * cache.c, repair.c, grace.c, ring_rebuild.c); nothing else may include
 * it: callers use engine.h.
 */
#ifndef SHEAF_SHM_ENGINE_INTERNAL_H
#define SHEAF_SHM_ENGINE_INTERNAL_H

#include "shm/bounds.h"
#include "shm/debug.h"
#include "shm/engine/engine.h"
#include "shm/engine/ring_rebuild.h"

/*
 * A barn as its node's worker left it after a pass that served its
 * waiters (engine/worker.c, waiters_real): the raw waiter count, the wait
 * starts and the four ring positions then.  armed is 0 when no serve is
 * pending.
 */
struct barn_served {
	uint32_t armed, waiters, waits;
	uint32_t full_head, full_tail, empty_head, empty_tail;
};

static inline struct barn_served *engine_barn_served(struct engine *e, uint32_t c,
						     uint32_t n)
{
	return &e->served[(size_t)c * SHEAF_MAX_NODES + n];
}

/* Add @v to the engine counter @st of cache-node (@c, @n).  Relaxed: the
 * counters are statistics, read by sums that order nothing. */
static inline void engine_stat_add(struct shm_pool *p, uint32_t c, uint32_t n,
				   enum sheaf_stat st, uint64_t v)
{
	at_fetch_add_relaxed(&pool_cnode(p, c, n)->stat[st], v);
}

/*
 * Give the objects of sheaf @sh back to cache @c's slabs: copied first into
 * private memory (ut_sheaf_objs: the size bounded, each offset read once),
 * then each validated by slab_free_objs (a bad one counted in
 * flush_invalid and in the UT_OBJECT refusals, never followed).  The sheaf
 * is client-writable even while the engine owns it.
 */
void engine_sheaf_to_slabs(struct shm_pool *p, uint32_t c, const struct shm_sheaf *sh);

/*
 * Flush full sheaf @s of cache @c (taken by @me from node @n's barn) back to
 * the slabs, count it, and put the empty sheaf in the barn's empty ring, or
 * in the depot when that ring already holds twice barn_limit.  Takes no
 * engine lock (the slab layer locks the cache-node); a worker, shrink and
 * cache destroy all call it.
 */
void engine_flush_sheaf(struct shm_pool *p, uint32_t c, uint32_t n, uint32_t s,
			uint32_t me, struct ring_intent *in);

#endif
