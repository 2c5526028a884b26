/*
 * stats.h - the statistics counters, with the kernel's names (mm/slub.c
 * enum stat_item), shared by the client library, the engine and readers,
 * and the one reader that sums them for a cache (stats_cache_node), used by
 * sheafd's Stats request and by sheaf_cache_stats on local pools.
 *
 * Who may call: any process of the pool: a lane's thread writes its own
 * counters, the engine its cache-node counters; stats_cache_node and the
 * names are for any reader (daemon/rpc_pool.c, client/pool_local.c).
 *
 * Thread-side counters live in a thread's lane (struct shm_lane) and are
 * written only by that thread (at_counter_add); engine-side counters live in
 * struct shm_cache_node and are written only under that cache-node's lock.
 * A reader sums both with relaxed loads; it never stops a writer.
 */
#ifndef SHEAF_SHM_STATS_H
#define SHEAF_SHM_STATS_H

#include <stdint.h>

enum sheaf_stat {
	/* written by client threads */
	ST_ALLOC_FASTPATH,      /* alloc served from main or spare sheaf */
	ST_ALLOC_SLOWPATH,      /* alloc had to go to the barn */
	ST_FREE_FASTPATH,       /* free pushed onto main or spare sheaf */
	ST_FREE_SLOWPATH,       /* free had to go to the barn (or was remote) */
	ST_SHEAF_ALLOC,         /* an empty sheaf taken from the depot */
	ST_SHEAF_FREE,          /* an empty sheaf given back to the depot */
	ST_BARN_GET,            /* full sheaf taken from the barn */
	ST_BARN_GET_FAIL,       /* barn had no full sheaf */
	ST_BARN_PUT,            /* full sheaf put into the barn */
	ST_BARN_PUT_FAIL,       /* barn at or over its limit when put to */
	ST_SHEAF_PREFILL_FAST,
	ST_SHEAF_PREFILL_SLOW,
	ST_SHEAF_PREFILL_OVERSIZE,
	ST_SHEAF_RETURN_FAST,
	ST_SHEAF_RETURN_SLOW,
	ST_FREE_REMOTE,         /* free of an object of another node */
	ST_FREE_INVALID,        /* free refused: bad pointer, wrong cache, double */
	ST_ALLOC_FAIL,          /* alloc returned NULL with ENOMEM */
	ST_FREE_RCU_SHEAF,      /* object freed into a deferred (rcu) sheaf */
	ST_FREE_RCU_SHEAF_FAIL, /* deferred free found no sheaf: waited instead */
	/* written by the engine, under the cache-node lock */
	ST_SHEAF_REFILL,        /* a sheaf filled from slabs */
	ST_SHEAF_FLUSH,         /* a sheaf emptied back to slabs */
	ST_ALLOC_SLAB,          /* a new slab taken from the node's frames */
	ST_FREE_SLAB,           /* an empty slab given back (hole punched) */
	ST_FLUSH_INVALID,       /* bad object found in a sheaf, dropped */
	ST_REFILL_REMOTE,       /* refill served by another node (trylock) */
	ST_RCU_RELEASED,        /* deferred objects released after their grace period */
	ST_RCU_WAITING,         /* deferred objects the engine holds for a grace
				   period (a level, not a count) */
	SHEAF_STAT_NR
};

#define SHEAF_STAT_CLIENT_FIRST ST_ALLOC_FASTPATH
#define SHEAF_STAT_ENGINE_FIRST ST_SHEAF_REFILL

extern const char *const sheaf_stat_names[SHEAF_STAT_NR];

struct shm_pool;

/* What a reader knows of one cache on one node (or summed over nodes). */
struct stats_sum {
	uint64_t stat[SHEAF_STAT_NR];   /* enum sheaf_stat */
	uint64_t objects;               /* objects in the node's slabs */
	uint64_t active_objects;        /* of those, out of slabs (sheaves, in use) */
	uint64_t slabs;                 /* partial + full + empty */
	uint64_t partial_slabs;
	uint64_t barn_full;             /* full sheaves in the barn */
	uint64_t barn_empty;            /* empty sheaves in the barn */
};

/*
 * Add cache @cache's numbers on node @node to @sum (zero it first; calling
 * once per node sums over nodes): the client-side counters of every lane on
 * @node, the engine's counters of the cache-node, its slab counts (taken
 * under the cache-node lock: only a process that runs the engine, sheafd or
 * a local pool, may call this) and its barn occupancy.
 */
void stats_cache_node(const struct shm_pool *p, uint32_t cache, uint32_t node,
		      struct stats_sum *sum);

#endif
