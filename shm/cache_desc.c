/*
 * cache_desc.c - a cache's descriptor as any process reads it
 * (cache_desc.h): the defaults, the checks of a create request, the find
 * by name.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "cache_desc.h"
#include "slab_geom.h"

uint32_t cache_default_keep(const struct shm_pool *p)
{
	uint32_t keep = p->sheaf_count / 4;

	return keep < 65536 ? keep : 65536;
}

uint32_t cache_default_capacity(uint32_t obj_size)
{
	if (slab_is_large(obj_size)) {
		uint32_t n = SHEAF_LARGE_SHEAF_BYTES / obj_size;

		return n < 1 ? 1 : n > 4 ? 4 : n;
	}
	uint32_t kernel = obj_size <= 256 ? 60 : obj_size <= 1024 ? 28 : obj_size <= 4096 ? 12 : 4;
	uint32_t fill = SHEAF_DEFAULT_BYTES / obj_size;

	if (fill > SHEAF_CAP_MAX)
		fill = SHEAF_CAP_MAX;
	return fill > kernel ? fill : kernel;
}

uint32_t cache_large_barn_limit(uint32_t obj_size, uint32_t capacity)
{
	uint64_t n = SHEAF_LARGE_BARN_BYTES / ((uint64_t)obj_size * (capacity ? capacity : 1));

	return n < 2 ? 2 : n > 64 ? 64 : (uint32_t)n;
}

int pool_cache_find(const struct shm_pool *p, const char *name)
{
	for (uint32_t c = 0, used = pool_caches_used(p); c < used; c++) {
		const struct shm_cache *sc = &p->caches[c];
		/* Acquire: pairs with the release store in do_cache_install
		 * (the name is then complete). */
		if (at_load_acquire((_Atomic uint32_t *)&sc->state) == CACHE_LIVE &&
		    strncmp(sc->name, name, SHEAF_NAME_MAX) == 0)
			return (int)c;
	}
	return -ENOENT;
}

int cache_params_geometry(const char *name, const struct cache_params *cp,
			  uint32_t *obj_size, uint32_t *per_slab,
			  char *err, size_t errlen)
{
	if (name == NULL || name[0] == '\0' || strlen(name) >= SHEAF_NAME_MAX) {
		snprintf(err, errlen, "cache name must be 1..%u bytes", SHEAF_NAME_MAX - 1);
		return -EINVAL;
	}
	if (slab_geometry(cp->size, cp->align, obj_size, per_slab) != 0) {
		snprintf(err, errlen, "object size %u / align %u invalid (size 1..%u, "
			 "align a power of two <= %u)", cp->size, cp->align,
			 SHEAF_MAX_OBJ_SIZE, SHEAF_MAX_ALIGN);
		return -EINVAL;
	}
	if (cp->capacity > (int32_t)SHEAF_CAP_MAX || cp->capacity < -1) {
		snprintf(err, errlen, "sheaf capacity %d out of range 0..%u",
			 cp->capacity, SHEAF_CAP_MAX);
		return -EINVAL;
	}
	if ((cp->flags & ~SHEAF_CACHE_F_ALL) ||
	    (cp->flags & (SHEAF_CACHE_F_OWNED | SHEAF_CACHE_F_KEEP)) == SHEAF_CACHE_F_KEEP) {
		snprintf(err, errlen, "unknown cache flags 0x%x", cp->flags);
		return -EINVAL;
	}
	return 0;
}

int cache_params_check(const char *name, const struct cache_params *cp,
		       char *err, size_t errlen)
{
	uint32_t obj_size, per_slab;

	return cache_params_geometry(name, cp, &obj_size, &per_slab, err, errlen);
}
