/*
 * mpool.h - the naive multi-process peer of docs/benchmarks.md: a pool of
 * fixed-size objects in one MAP_SHARED region, every allocation and free
 * under one process-shared robust pthread mutex.  The free objects are a
 * stack of indices kept outside the objects.  Created before fork(), the
 * pool is shared by the children (same address in each).
 */
#ifndef SHEAF_BENCH_MPOOL_H
#define SHEAF_BENCH_MPOOL_H

#include <stddef.h>
#include <stdint.h>

struct mpool;

/* A pool of @nobj objects of @obj_size bytes (rounded up to 8); NULL with
 * errno on failure. */
struct mpool *mpool_create(size_t obj_size, uint32_t nobj);
void mpool_destroy(struct mpool *mp);

/* One object, or NULL with errno ENOMEM when the pool is empty. */
void *mpool_alloc(struct mpool *mp);

/* Returns 0, or -EINVAL when @p is not an object of the pool (nothing
 * changes then), or -EALREADY when the pool is already full (a double free
 * of the last objects; others go unnoticed: the naive design). */
int mpool_free(struct mpool *mp, void *p);

/* Objects free in the pool, and the pool's size. */
uint32_t mpool_free_count(struct mpool *mp);
uint32_t mpool_objects(const struct mpool *mp);

#endif
