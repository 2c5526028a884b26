/*
 * stats.c - sheaf_cache_stats and the counter names of the public API.
 * sheaf_cache_stats is one side of the seam of pool_ops.h: either kind of
 * pool answers with stats_cache_node's sums (shm/stats.c: summed in this
 * process for a local pool, by sheafd for a pool of sheafd), and the public
 * struct is made from them here, the same way for both.
 */
#include <errno.h>
#include <string.h>
#include "client/internal.h"
#include "client/pool_ops.h"

_Static_assert(SHEAF_STAT_NR <= SHEAF_STATS_MAX, "public stats array too small");

const char *sheaf_stat_name(unsigned i)
{
	return i < SHEAF_STAT_NR ? sheaf_stat_names[i] : NULL;
}

int sheaf_stat_index(const char *name)
{
	for (unsigned i = 0; i < SHEAF_STAT_NR; i++)
		if (strcmp(sheaf_stat_names[i], name) == 0)
			return (int)i;
	return -1;
}

int sheaf_cache_stats(sheaf_cache_t *c, int node, struct sheaf_stats *out)
{
	const struct shm_cache *sc = c->sc;
	struct pool_cache_stats cs = { 0 };
	const struct stats_sum *sum = &cs.sum;
	int64_t in_use;
	int rc;

	if (c->pool->forked)
		return -ECHILD;
	if (!cache_handle_live(c))      /* the slot may hold another cache */
		return -ESTALE;
	if (node >= (int)c->pool->shm.nodes)
		return -EINVAL;
	rc = c->pool->ops->cache_stats(c, node, &cs);
	if (rc != 0)
		return rc;
	memset(out, 0, sizeof(*out));
	out->nstat = SHEAF_STAT_NR;
	memcpy(out->stat, sum->stat, sizeof(sum->stat));
	out->objects = sum->objects;
	out->active_objects = sum->active_objects;
	out->slabs = sum->slabs;
	out->partial_slabs = sum->partial_slabs;
	out->barn_full = sum->barn_full;
	out->barn_empty = sum->barn_empty;
	/* Allocated and not freed, by the counters of the lanes summed (over
	 * every node: sheafd's engine_counted_in_use, the same lanes). */
	in_use = (int64_t)(sum->stat[ST_ALLOC_FASTPATH] + sum->stat[ST_ALLOC_SLOWPATH] -
			   sum->stat[ST_FREE_FASTPATH] - sum->stat[ST_FREE_SLOWPATH] -
			   sum->stat[ST_FREE_RCU_SHEAF]);
	out->in_use = in_use > 0 ? (uint64_t)in_use : 0;
	out->bytes_in_use = out->in_use * sc->obj_size;
	out->bytes_mapped = cs.slab_bytes;
	/* The descriptor is mapped in either kind of pool (read-only from
	 * sheafd): read it here. */
	out->sheaf_capacity = at_load_relaxed(&sc->sheaf_capacity);
	out->min_partial = at_load_relaxed(&sc->min_partial);
	return 0;
}
