/*
 * stats.c - names of the counters of stats.h (the kernel's where it has one),
 * and stats_cache_node, the one place that sums a cache's counters and slab
 * and barn occupancy on a node.  Callers: daemon/rpc_pool.c (Stats
 * request), client/pool_local.c (sheaf_cache_stats on a local pool).
 */
#include "bounds.h"
#include "debug.h"
#include "lanes.h"
#include "pool.h"
#include "stats.h"

const char *const sheaf_stat_names[SHEAF_STAT_NR] = {
	[ST_ALLOC_FASTPATH] = "alloc_fastpath",
	[ST_ALLOC_SLOWPATH] = "alloc_slowpath",
	[ST_FREE_FASTPATH] = "free_fastpath",
	[ST_FREE_SLOWPATH] = "free_slowpath",
	[ST_SHEAF_ALLOC] = "sheaf_alloc",
	[ST_SHEAF_FREE] = "sheaf_free",
	[ST_BARN_GET] = "barn_get",
	[ST_BARN_GET_FAIL] = "barn_get_fail",
	[ST_BARN_PUT] = "barn_put",
	[ST_BARN_PUT_FAIL] = "barn_put_fail",
	[ST_SHEAF_PREFILL_FAST] = "sheaf_prefill_fast",
	[ST_SHEAF_PREFILL_SLOW] = "sheaf_prefill_slow",
	[ST_SHEAF_PREFILL_OVERSIZE] = "sheaf_prefill_oversize",
	[ST_SHEAF_RETURN_FAST] = "sheaf_return_fast",
	[ST_SHEAF_RETURN_SLOW] = "sheaf_return_slow",
	[ST_FREE_REMOTE] = "free_remote",
	[ST_FREE_INVALID] = "free_invalid",
	[ST_ALLOC_FAIL] = "alloc_fail",
	[ST_SHEAF_REFILL] = "sheaf_refill",
	[ST_SHEAF_FLUSH] = "sheaf_flush",
	[ST_ALLOC_SLAB] = "alloc_slab",
	[ST_FREE_SLAB] = "free_slab",
	[ST_FLUSH_INVALID] = "flush_invalid",
	[ST_REFILL_REMOTE] = "refill_remote",
	[ST_FREE_RCU_SHEAF] = "free_rcu_sheaf",
	[ST_FREE_RCU_SHEAF_FAIL] = "free_rcu_sheaf_fail",
	[ST_RCU_RELEASED] = "rcu_released",
	[ST_RCU_WAITING] = "rcu_waiting",
};

void stats_cache_node(const struct shm_pool *p, uint32_t cache, uint32_t node,
		      struct stats_sum *sum)
{
	struct shm_cache_node *cn = pool_cnode(p, cache, node);
	struct ring_ref full = pool_full_ref(p, cache, node);
	struct ring_ref empty = pool_empty_ref(p, cache, node);

	/* Client-side counters: every lane whose thread runs on @node, live
	 * or not (a dead thread's lane keeps its counts). */
	for (uint32_t l = 0, used = pool_lanes_used(p); l < used; l++) {
		const struct shm_lane *ln = &p->lanes[l];
		uint64_t st[SHEAF_STAT_ENGINE_FIRST];

		if (at_load_relaxed(&ln->node) != node || !pool_lane_ready(ln))
			continue;
		lane_counts(p, ln, cache, st);
		for (int i = SHEAF_STAT_CLIENT_FIRST; i < SHEAF_STAT_ENGINE_FIRST; i++)
			sum->stat[i] += st[i];
	}
	for (int i = SHEAF_STAT_ENGINE_FIRST; i < SHEAF_STAT_NR; i++)
		sum->stat[i] += at_load_relaxed(&cn->stat[i]);
	/* Slab counts are the engine's, changed under its lock. */
	lock_acquire(&cn->lock, LOCK_RANK_CACHE_NODE);
	sum->objects += cn->total_objects;
	sum->active_objects += cn->total_objects - cn->free_objects;
	sum->slabs += cn->lists[SL_PARTIAL].count + cn->lists[SL_FULL].count +
		      cn->lists[SL_EMPTY].count;
	sum->partial_slabs += cn->lists[SL_PARTIAL].count;
	lock_release(&cn->lock);
	sum->barn_full += ring_count(&full);
	sum->barn_empty += ring_count(&empty);
}
