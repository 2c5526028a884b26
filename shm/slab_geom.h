/*
 * slab_geom.h - a cache's object geometry (object size and objects per slab
 * frame from a requested size and alignment) and the check that an offset
 * is an object of a cache (in the data region, in a frame the frame map
 * gives to the cache, on an object boundary).  Read-only: nothing here
 * writes the pool or takes a lock.
 *
 * Who may call: any process of the pool (libsheaf checks what it frees and
 * what it takes from a sheaf; the engine checks what it gives back to the
 * slabs).
 */
#ifndef SHEAF_SHM_SLAB_GEOM_H
#define SHEAF_SHM_SLAB_GEOM_H

#include <stdint.h>
#include "pool.h"

/* Object geometry of a cache: size rounded to @align; 0 or -EINVAL.
 * Objects of up to SLAB_SIZE share a frame; a larger one has a slab of
 * its own, slab_frames() contiguous frames of one node (the first marked
 * with the cache's id in the frame owner map, the others FRAME_TAIL|id),
 * so an object starts a frame and one lookup still validates a free. */
int slab_geometry(uint32_t size, uint32_t align, uint32_t *obj_size,
		  uint32_t *objs_per_slab);

/* Frames of one slab of a cache whose slabs hold @slab_bytes. */
static inline uint32_t slab_frames_of(uint32_t slab_bytes)
{
	return (uint32_t)(((uint64_t)slab_bytes + SLAB_SIZE - 1) >> SLAB_SHIFT);
}

/* A cache of objects above SHEAF_LARGE_MIN (layout.h). */
static inline int slab_is_large(uint32_t obj_size)
{
	return obj_size > SHEAF_LARGE_MIN;
}

/* Validate one object offset for @cache: 0, or -EFAULT (not in the data
 * region), -EINVAL (not an object of @cache).  The frame map is read with
 * acquire (pairs with the engine's release when it gives a frame to a
 * cache). */
int slab_validate(const struct shm_pool *p, uint32_t cache, uint64_t off);

#endif
