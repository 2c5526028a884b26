/*
 * pool_ops.h - the seam between libsheaf's public pool and cache calls and
 * the two kinds of pool behind them.  Private to client/.
 *
 *   pool.c, cache.c, stats.c,  the public calls: they refuse a pool
 *   names.c, queue.c           inherited through fork() (ECHILD) and check
 *                              every argument, then call pool->ops->X;
 *   pool_local.c               a local pool (local_pool_ops): the engine
 *                              runs in this process and is called directly;
 *   pool_sheafd.c              a pool of sheafd (sheafd_pool_ops): each
 *                              operation is a request over rpc.c's
 *                              connection.
 *
 * An operation may assume its caller did both (not forked, arguments valid:
 * the same checks sheafd applies, so either kind refuses the same).  Each
 * returns what it says, or -errno.
 */
#ifndef SHEAF_CLIENT_POOL_OPS_H
#define SHEAF_CLIENT_POOL_OPS_H

#include <stddef.h>
#include <stdint.h>
#include "client/sheaf.h"
#include "shm/stats.h"

struct cache_params;
struct tune_setting;

/* What sheaf_cache_stats reads of a cache, on one node or summed over all. */
struct pool_cache_stats {
	struct stats_sum sum;        /* as stats_cache_node sums it */
	uint64_t slab_bytes;         /* bytes of those slabs */
};

struct pool_ops {
	/* Create cache @name as @cp says: its id, and its generation in
	 * *@gen (-EEXIST when the name exists). */
	int (*cache_create)(sheaf_pool_t *pool, const char *name,
			    const struct cache_params *cp, uint32_t *gen);
	/* Apply setting @s of cache @c (tune_check passed it): 0. */
	int (*cache_tune)(sheaf_cache_t *c, const struct tune_setting *s);
	/* Flush @c's barns and release its empty slabs beyond min_partial
	 * (the calling thread's sheaves are back already): slabs released. */
	int (*cache_shrink)(sheaf_cache_t *c);
	/* @c's numbers on node @node (< 0: summed over every node): 0. */
	int (*cache_stats)(sheaf_cache_t *c, int node, struct pool_cache_stats *out);
	/* The pool checker (sheaf_pool_check): 0, or -EUCLEAN with @err. */
	int (*check)(sheaf_pool_t *pool, char *err, size_t errlen);
	/* Create queue @name (queue_params_check passed): its id, and its
	 * generation in *@gen.  Destroy queue @name: 0.  Both -errno. */
	int (*queue_create)(sheaf_pool_t *pool, const char *name, uint32_t capacity,
			    uint32_t flags, uint32_t *gen);
	int (*queue_destroy)(sheaf_pool_t *pool, uint32_t id, const char *name);
	/* Create topic @name (topic_params_check passed): its id, and its
	 * generation in *@gen.  Destroy topic @id (@name): 0.  Join it as
	 * this client: 0 with the subscriber slot and its generation.  Leave
	 * slot @slot: 0.  All -errno. */
	int (*topic_create)(sheaf_pool_t *pool, const char *name, uint32_t capacity,
			    uint32_t history, uint32_t policy, uint32_t *gen);
	int (*topic_destroy)(sheaf_pool_t *pool, uint32_t id, const char *name);
	int (*topic_join)(sheaf_pool_t *pool, uint32_t id, const char *name, uint32_t *slot,
			  uint32_t *gen);
	int (*topic_leave)(sheaf_pool_t *pool, uint32_t id, const char *name, uint32_t slot);
	/*
	 * Release what this kind of pool holds besides the region (the
	 * engine; the connection), before pool.c unmaps the region and frees
	 * @pool.  In a fork() child (pool->forked) the engine and the
	 * pool's shared state are the parent's: only this process's copies
	 * go.
	 */
	void (*close)(sheaf_pool_t *pool);
	/* Name object @off (region offset) @name (names_check passed it):
	 * engine_name_set's 0, -EEXIST, -ENOSPC, -EINVAL. */
	int (*name_set)(sheaf_pool_t *pool, const char *name, uint64_t off);
	/* Delete @name: 0 or -ENOENT. */
	int (*name_del)(sheaf_pool_t *pool, const char *name);
	/* More lanes for our threads (thread.c, with @have lanes granted to
	 * us in META): how many were granted (0: none now), with the lanes we
	 * hold in *@held and our most in *@cap; -errno (-EKEYREVOKED). */
	int (*lanes_grant)(sheaf_pool_t *pool, uint32_t have, uint32_t *held, uint32_t *cap);
};

extern const struct pool_ops local_pool_ops;    /* pool_local.c */
extern const struct pool_ops sheafd_pool_ops;   /* pool_sheafd.c */

#endif
