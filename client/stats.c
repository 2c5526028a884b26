/*
 * stats.c - sheaf_cache_stats: counters summed over every lane (live threads
 * keep counting; relaxed loads never stop them) and the engine's per
 * cache-node counters, plus slab and barn occupancy.
 */
#include <errno.h>
#include <string.h>
#include "shm/clients.h"
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
	int64_t in_use = 0;

	if (node >= (int)p->nodes)
		return -EINVAL;
	if (c->pool->remote)
		return rpc_cache_stats(c, node, out);   /* slab lists are sheafd's */
	memset(out, 0, sizeof(*out));
	out->nstat = SHEAF_STAT_NR;
	for (uint32_t l = 0; l < SHEAF_MAX_LANES; l++) {
		struct shm_lane *ln = &p->lanes[l];
		uint64_t st[SHEAF_STAT_ENGINE_FIRST];
		if (node >= 0 && at_load_relaxed(&ln->node) != (uint32_t)node)
			continue;
		lane_counts(p, ln, c->id, st);
		for (unsigned i = SHEAF_STAT_CLIENT_FIRST; i < SHEAF_STAT_ENGINE_FIRST; i++)
			out->stat[i] += st[i];
	}
	for (uint32_t n = 0; n < p->nodes; n++) {
		struct shm_cache_node *cn = pool_cnode(p, c->id, n);
		if (node >= 0 && n != (uint32_t)node)
			continue;
		for (unsigned i = SHEAF_STAT_ENGINE_FIRST; i < SHEAF_STAT_NR; i++)
			out->stat[i] += at_load_relaxed(&cn->stat[i]);
		/* Slab counters are the engine's, changed under its lock. */
		pthread_mutex_lock(&cn->lock);
		out->objects += cn->total_objects;
		out->active_objects += cn->total_objects - cn->free_objects;
		out->slabs += cn->lists[SL_PARTIAL].count + cn->lists[SL_FULL].count +
			      cn->lists[SL_EMPTY].count;
		out->partial_slabs += cn->lists[SL_PARTIAL].count;
		pthread_mutex_unlock(&cn->lock);
		out->barn_full += ring_count(pool_full_ring(p, c->id, n));
		out->barn_empty += ring_count(pool_empty_ring(p, c->id, n));
	}
	in_use = (int64_t)(out->stat[ST_ALLOC_FASTPATH] + out->stat[ST_ALLOC_SLOWPATH]) -
		 (int64_t)(out->stat[ST_FREE_FASTPATH] + out->stat[ST_FREE_SLOWPATH]);
	out->in_use = in_use > 0 ? (uint64_t)in_use : 0;
	out->bytes_in_use = out->in_use * sc->obj_size;
	out->bytes_mapped = out->slabs * SLAB_SIZE;
	out->sheaf_capacity = at_load_relaxed(&sc->sheaf_capacity);
	out->min_partial = at_load_relaxed(&sc->min_partial);
	return 0;
}
