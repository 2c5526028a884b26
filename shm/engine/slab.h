/*
 * slab.h - the slab layer: per cache and node, slabs carved from that node's
 * frames, kept on partial/full/empty lists, objects tracked by a free bitmap
 * outside object memory (a client scribbling on a freed object cannot
 * corrupt it).
 *
 * Who may call: the engine only (sheafd, or the in-process engine of a local
 * pool).  Functions named do_* (slab.c) assume the cache-node lock is held,
 * and assert it in a SHEAF_DEBUG build; the others take it.  The object
 * geometry any process checks against is shm/slab_geom.h's.
 *
 * Lock order (docs/design.md, "Lock order"; ranks in debug.h): the engine's
 * ctl_lock, then one cache-node lock, then the node-allocator lock (a leaf).
 * While holding a cache-node lock, other cache-node locks are only
 * try-locked (reclaim_empty: other caches' empty slabs); a remote node's
 * refill try-locks that node's cache-node lock (slab_alloc_objs @trylock)
 * and skips it when busy.  No lock is held across a futex wait.
 */
#ifndef SHEAF_SHM_ENGINE_SLAB_H
#define SHEAF_SHM_ENGINE_SLAB_H

#include <stdint.h>
#include "shm/pool.h"
#include "shm/slab_geom.h"

/* Kernel-style default min_partial for an object size (5..10). */
uint32_t slab_default_min_partial(uint32_t obj_size);

/*
 * Take up to @n free objects of @cache on @node into @out (offsets).  Uses
 * partial slabs, then empty ones, then new frames while the pool is under
 * its memory cap and the node under its own (numa_policy=bind).  @flags:
 * SLAB_TRYLOCK gives up (returns 0) when the lock is busy, the rule for
 * refilling from a remote node.  Returns the number taken.
 */
#define SLAB_TRYLOCK  0x1
uint32_t slab_alloc_objs(struct shm_pool *p, uint32_t cache, uint32_t node,
			 uint64_t *out, uint32_t n, int flags);

/*
 * Give back @n objects of @cache (any nodes).  Each is validated first (in
 * the data region, in a slab of @cache, on an object boundary, not already
 * free); a bad one is counted in ST_FLUSH_INVALID and skipped, never
 * followed.  Empty slabs beyond min_partial go back to the kernel.  Returns
 * the number of objects refused.
 */
uint32_t slab_free_objs(struct shm_pool *p, uint32_t cache,
			const uint64_t *objs, uint32_t n);

/*
 * slab_free_objs for objects that may hold copies of each other (the
 * sheaves of a dead client: one killed inside vet_rising's copy has each
 * object in two of them): sorts @objs in place and gives each object back
 * once, a second copy refused (ST_FLUSH_INVALID) like one already free.
 * One call for all the copies: freed apart, a worker's refill could take
 * the first copy's object before the second free, which would then free
 * an object a barn holds.  Returns the number refused.
 */
uint32_t slab_free_objs_once(struct shm_pool *p, uint32_t cache, uint64_t *objs, uint32_t n);

/* qsort and bsearch order of object offsets (uint64_t), ascending. */
int slab_off_cmp(const void *a, const void *b);

/* Release every empty slab of @cache on @node beyond @keep slabs on the
 * partial+empty lists (hole punched).  Returns slabs released. */
uint32_t slab_shrink(struct shm_pool *p, uint32_t cache, uint32_t node,
		     uint32_t keep);

/*
 * After adopting a region whose engine died (possibly inside a critical
 * section): re-initialise every engine lock, rebuild each node's frame
 * allocator from the frame owner map and each cache-node's slab lists and
 * counters from the free bitmaps.  Only with no engine thread running.
 */
void slab_rebuild(struct shm_pool *p);

/* Queue storage (engine/queue.c): @n contiguous frames of @node marked
 * FRAME_QUEUE (the first, or SLAB_NONE), and their release. */
uint32_t slab_frames_take(struct shm_pool *p, uint32_t node, uint32_t n);
void slab_frames_give(struct shm_pool *p, uint32_t first, uint32_t n);

#endif
