/*
 * stats.c - sheaf_cache_stats and the counter names of the public API.  On a
 * local pool the numbers come from stats_cache_node (shm/stats.c, the same
 * sum sheafd answers Stats with); on a sheafd pool they come from sheafd.
 */
#include <errno.h>
#include <string.h>
#include "shm/stats.h"
#include "client/internal.h"

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
	struct shm_pool *p = &c->pool->shm;
	const struct shm_cache *sc = c->sc;
	struct stats_sum sum = { 0 };
	int64_t in_use;

	if (node >= (int)p->nodes)
		return -EINVAL;
	if (c->pool->remote)
		return rpc_cache_stats(c, node, out);   /* slab lists are sheafd's */
	for (uint32_t n = 0; n < p->nodes; n++)
		if (node < 0 || n == (uint32_t)node)
			stats_cache_node(p, c->id, n, &sum);
	memset(out, 0, sizeof(*out));
	out->nstat = SHEAF_STAT_NR;
	memcpy(out->stat, sum.stat, sizeof(sum.stat));
	out->objects = sum.objects;
	out->active_objects = sum.active_objects;
	out->slabs = sum.slabs;
	out->partial_slabs = sum.partial_slabs;
	out->barn_full = sum.barn_full;
	out->barn_empty = sum.barn_empty;
	in_use = (int64_t)(out->stat[ST_ALLOC_FASTPATH] + out->stat[ST_ALLOC_SLOWPATH]) -
		 (int64_t)(out->stat[ST_FREE_FASTPATH] + out->stat[ST_FREE_SLOWPATH]);
	out->in_use = in_use > 0 ? (uint64_t)in_use : 0;
	out->bytes_in_use = out->in_use * sc->obj_size;
	out->bytes_mapped = out->slabs * SLAB_SIZE;
	out->sheaf_capacity = at_load_relaxed(&sc->sheaf_capacity);
	out->min_partial = at_load_relaxed(&sc->min_partial);
	return 0;
}
