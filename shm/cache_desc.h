/*
 * cache_desc.h - a cache's descriptor (struct shm_cache, layout.h) as any
 * process reads it: the parameters a create request takes, their check,
 * the defaults the engine fills in, and the find of a live cache by name.
 * Pure or read-only: nothing here writes the pool.
 *
 * Who may call: any process of the pool (libsheaf checks a request before
 * it sends it to either kind of pool; the engine checks it again in
 * engine_cache_create and fills the descriptor with these defaults).
 * Errors: 0 or -errno, with a message in the caller's @err buffer.
 */
#ifndef SHEAF_SHM_CACHE_DESC_H
#define SHEAF_SHM_CACHE_DESC_H

#include <stddef.h>
#include <stdint.h>
#include "pool.h"

/* Parameters of a new cache; zero fields take defaults. */
struct cache_params {
	uint32_t size;
	uint32_t align;
	int32_t capacity;        /* -1: default by size; 0: sheaves disabled */
	uint32_t flags;          /* SHEAF_CACHE_F_* */
	uint32_t barn_limit, barn_low, barn_high, min_partial;
	uint32_t barn_keep;      /* 0: cache_default_keep */
};

/*
 * Default sheaf capacity for an object size: the kernel's steps (60 up to
 * 256 B, 28 up to 1 KiB, 12 up to 4 KiB, else 4), raised to the objects of
 * SHEAF_DEFAULT_BYTES (at most 256): small objects get more (a sheaf is
 * 2 KiB of offsets whatever its capacity), since each barn exchange costs
 * a few atomic operations (docs/design.md, "Capacity").
 */
#define SHEAF_DEFAULT_BYTES 16384u
/* Large objects (slab_is_large): 1 to 4 objects, at most this many bytes
 * of them (a thread keeps two sheaves' worth per class), and barns of
 * at most SHEAF_LARGE_BARN_BYTES of full sheaves, 2 to 64 of them. */
#define SHEAF_LARGE_SHEAF_BYTES (4u << 20)
#define SHEAF_LARGE_BARN_BYTES  (16ull << 20)
/* While the pool is far from its memory cap, a large barn keeps up to
 * this many full sheaves more, as the unused large_retain covers
 * (barn_flush_limit). */
#define SHEAF_LARGE_BARN_KEEP_MAX 64u
uint32_t cache_default_capacity(uint32_t obj_size);
/* The defaults of a large cache's barn limit and min_partial. */
uint32_t cache_large_barn_limit(uint32_t obj_size, uint32_t capacity);

/* Default barn_keep (barn.h, barn_flush_limit): a quarter of the pool's
 * sheaves, at most 65536 (the tunable's range). */
uint32_t cache_default_keep(const struct shm_pool *p);

/* The checks engine_cache_create applies to its arguments (name, size,
 * align, capacity, flags), alone: 0, or -EINVAL with @err. */
int cache_params_check(const char *name, const struct cache_params *cp,
		       char *err, size_t errlen);
/* The same, with the object geometry in *@obj_size, *@per_slab. */
int cache_params_geometry(const char *name, const struct cache_params *cp,
			  uint32_t *obj_size, uint32_t *per_slab,
			  char *err, size_t errlen);

/* Id of live cache @name, or -ENOENT.  The state is loaded with acquire
 * (pairs with the release store of CACHE_LIVE in the engine's
 * do_cache_install: the name is then complete). */
int pool_cache_find(const struct shm_pool *p, const char *name);

#endif
