/*
 * slab_geom.c - a cache's object geometry and the check of one object
 * offset against it (slab_geom.h).
 */
#include <errno.h>
#include "slab_geom.h"

int slab_geometry(uint32_t size, uint32_t align, uint32_t *obj_size,
		  uint32_t *objs_per_slab)
{
	uint32_t a = align ? align : 8;

	if (size == 0 || size > SHEAF_MAX_OBJ_SIZE)
		return -EINVAL;
	if ((a & (a - 1)) != 0 || a > SHEAF_MAX_ALIGN)
		return -EINVAL;
	if (a < 8)
		a = 8;
	size = (size + a - 1) & ~(a - 1);
	*obj_size = size;
	/* Above a frame: one object per slab of slab_frames() frames. */
	*objs_per_slab = size > SLAB_SIZE ? 1 : SLAB_SIZE / size;
	return 0;
}

int slab_validate(const struct shm_pool *p, uint32_t cache, uint64_t off)
{
	const struct shm_cache *c = &p->caches[cache];
	uint32_t f;
	uint64_t rel;

	if (off - p->data_off >= p->data_len)
		return -EFAULT;
	f = pool_frame_of(p, off);
	if (at_load_acquire(&p->frame_owner[f]) != cache)
		return -EINVAL;
	/* A multi-frame slab's object starts its first frame: rel is then 0
	 * (a pointer into a later frame met FRAME_TAIL above). */
	rel = off - pool_frame_off(p, f);
	if (rel >= c->slab_bytes || rel % c->obj_size != 0)
		return -EINVAL;
	return 0;
}
