/*
 * util_pool.h - local pools (sheaf_pool_create: the engine's threads in the
 * test process) for the tests of the client object path (test_sheaf,
 * test_free, test_counts, test_untrusted, test_vet, test_handles,
 * test_timeout, test_fork): a pool and a cache that must be made, an allocation that
 * must succeed, a cache's counters, and the pool checker that must pass.
 *
 * Failures go through Check (ck_assert): call these in the test process
 * only, never in a forked child.
 */
#ifndef SHEAF_TESTS_UTIL_POOL_H
#define SHEAF_TESTS_UTIL_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "client/sheaf.h"

/* A local pool as @cfg says; the test fails when it cannot be made. */
sheaf_pool_t *pool_new(const struct sheaf_pool_config *cfg);
/* Cache @name of objects of @size, sheaf capacity @cap, @flags
 * (SHEAF_CACHE_*); the test fails when it cannot be made. */
sheaf_cache_t *mkcache(sheaf_pool_t *p, const char *name, size_t size, int cap,
		       unsigned flags);
/* An object of @c; the test fails without one. */
void *xalloc(sheaf_cache_t *c);
/* The stats of @c on @node (-1: every node), required to succeed. */
struct sheaf_stats cache_stats_of(sheaf_cache_t *c, int node);
/* Counter @name (sheaf_stat_index) of @c on @node (-1: every node). */
uint64_t stat_count(sheaf_cache_t *c, int node, const char *name);
/* sheaf_pool_check must pass. */
void require_pool_ok(sheaf_pool_t *p);
/* A small local pool (64 MiB over @nodes simulated nodes, 1024 sheaves)
 * whose allocations wait at most 100 ms for the engine (a scribbled barn
 * may never be stocked): test_untrusted, test_vet. */
sheaf_pool_t *pool_small(unsigned nodes);
/* @n allocs then frees on @c; each object must be one of @c's slabs'
 * (slab_validate), and at least one alloc must succeed. */
void churn_checked(sheaf_cache_t *c, unsigned n);

#endif
