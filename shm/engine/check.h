/*
 * check.h - the pool checker: proves the accounting identity of layout.h.
 *
 * Who may call: the engine's hosting process only (sheafd's Check request,
 * daemon/check.c and daemon/rpc_pool.c; a local pool's check,
 * client/pool_local.c; the count reconciliation, engine/cache.c) and
 * tests, on a quiescent pool
 * (no thread in an alloc, free or ring operation, engine workers asleep or
 * stopped).
 */
#ifndef SHEAF_SHM_ENGINE_CHECK_H
#define SHEAF_SHM_ENGINE_CHECK_H

#include <stdint.h>
#include "shm/pool.h"

struct check_report {
	uint64_t objects;        /* objects in slabs of the cache(s) */
	uint64_t free_in_slabs;
	uint64_t in_sheaves;
	uint64_t in_use;         /* objects - free_in_slabs - in_sheaves */
	uint64_t sheaves_in_rings;
	uint64_t sheaves_held;   /* owned by a client or the engine */
	uint64_t slabs;
	uint64_t ring_holes;     /* consumed or stale slots in [head, tail): gets skip them */
};

/*
 * Walk @cache (every live cache when < 0): every object must be in exactly
 * one place (free in its slab's bitmap, in one sheaf, or in use), slab lists
 * and counters must agree with the bitmaps, every sheaf must be where its
 * owner entry says (in exactly one ring slot, or held), and, for caches with
 * SHEAF_CACHE_F_DEBUG, the in-use bits must match (but a bit set on an
 * object free or in a sheaf, which a thread killed inside an alloc or free
 * leaves: allowed, and cleared when the object is free in its slab; it
 * writes only there).  When @expect_in_use is
 * >= 0 the in-use count must equal it.  Returns 0, or -EUCLEAN with the first
 * broken rule in @err.
 */
int pool_check(struct shm_pool *p, int cache, int64_t expect_in_use,
	       struct check_report *rep, char *err, size_t errlen);

/*
 * The same for @cache alone, whatever other caches' rings and sheaves hold
 * (a client may have spoiled those, docs/design.md, "What a hostile
 * client can still spoil"): its
 * slabs, its rings (each sheaf they own in exactly one slot), and the
 * objects of the sheaves its rings own or a client or the engine holds
 * with @cache in their cache field.  Depot and other caches are not
 * walked.  0, or -EUCLEAN with the first broken rule in @err.
 */
int pool_check_cache(struct shm_pool *p, uint32_t cache, struct check_report *rep,
		     char *err, size_t errlen);

#endif
