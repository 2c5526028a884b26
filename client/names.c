/*
 * names.c - the public calls on the name directory and on offsets
 * (sheaf_name_*, sheaf_pool_base, sheaf_ptr_to_off, sheaf_off_to_ptr), at
 * the seam of pool_ops.h: reads go to the directory in the mapped region
 * (shm/names.h, no request), changes to pool->ops (sheafd, or a local
 * pool's engine).  Like every public call on a pool, each refuses a pool
 * inherited through fork() (ECHILD).
 */
#include <errno.h>
#include <string.h>
#include "client/internal.h"
#include "client/pool_ops.h"
#include "shm/names.h"

_Static_assert(SHEAF_NAMES_MAX == SHEAF_DIR_ENTRIES, "sheaf.h: SHEAF_NAMES_MAX");
_Static_assert(SHEAF_NAME_LEN_MAX == SHEAF_DIR_NAME_BYTES - 1, "sheaf.h: SHEAF_NAME_LEN_MAX");

/* Offset of @p when it is in @pool's object data, else SHEAF_OFF_INVALID. */
static uint64_t data_off(const sheaf_pool_t *pool, const void *p)
{
	const struct shm_pool *s = &pool->shm;
	uint64_t rel = (uint64_t)((uintptr_t)p - (uintptr_t)s->data);

	return p != NULL && rel < s->data_len ? s->data_off + rel : SHEAF_OFF_INVALID;
}

int sheaf_name_set(sheaf_pool_t *pool, const char *name, void *obj)
{
	uint64_t off;
	int rc;

	if (pool->forked)
		return -ECHILD;
	rc = names_check(name);
	if (rc != 0)
		return rc;
	off = data_off(pool, obj);
	if (off == SHEAF_OFF_INVALID)
		return -EFAULT;
	return pool->ops->name_set(pool, name, off);
}

void *sheaf_name_get(sheaf_pool_t *pool, const char *name)
{
	struct name_rec r;
	int rc;

	if (pool->forked) {
		errno = ECHILD;
		return NULL;
	}
	rc = names_check(name);
	if (rc == 0)
		rc = names_lookup(&pool->shm, name, &r);
	if (rc != 0) {
		errno = -rc;
		return NULL;
	}
	return pool->shm.base + r.off;
}

int sheaf_name_del(sheaf_pool_t *pool, const char *name)
{
	int rc;

	if (pool->forked)
		return -ECHILD;
	rc = names_check(name);
	return rc != 0 ? rc : pool->ops->name_del(pool, name);
}

/*
 * Read the name; when there is none, allocate and zero an object and ask
 * for the name (sheafd decides between racing creators: the losers get
 * EEXIST), freeing the object when another process won, and read again.
 */
void *sheaf_name_get_or_create(sheaf_pool_t *pool, const char *name,
			       sheaf_cache_t *cache, int *created)
{
	struct name_rec r;
	int rc = 0;

	if (created != NULL)
		*created = 0;
	if (pool->forked) {
		errno = ECHILD;
		return NULL;
	}
	rc = names_check(name);
	if (rc == 0 && (cache == NULL || cache->pool != pool))
		rc = -EINVAL;
	else if (rc == 0 && !cache_handle_live(cache))
		rc = -ESTALE;
	for (int round = 0; rc == 0 && round < 8; round++) {
		void *obj;

		rc = names_lookup(&pool->shm, name, &r);
		if (rc == 0) {
			if (r.cache != cache->id || r.cache_gen != cache->gen) {
				rc = -EINVAL;        /* another cache's object */
				break;
			}
			return pool->shm.base + r.off;
		}
		if (rc != -ENOENT)
			break;
		obj = sheaf_alloc(cache);
		if (obj == NULL)
			return NULL;         /* errno: sheaf_alloc's */
		memset(obj, 0, cache->sc->obj_size);
		rc = pool->ops->name_set(pool, name, data_off(pool, obj));
		if (rc == 0) {
			if (created != NULL)
				*created = 1;
			return obj;
		}
		sheaf_free(cache, obj);      /* ours lost (or failed) */
		if (rc == -EEXIST)
			rc = 0;              /* read the winner's */
		else
			break;
		if (round == 7)
			rc = -EAGAIN;
	}
	errno = -rc;
	return NULL;
}

void *sheaf_pool_base(const sheaf_pool_t *pool)
{
	return pool->shm.base;
}

uint64_t sheaf_ptr_to_off(const sheaf_pool_t *pool, const void *p)
{
	uint64_t off;

	if (pool->forked) {
		errno = ECHILD;
		return SHEAF_OFF_INVALID;
	}
	off = data_off(pool, p);
	if (off == SHEAF_OFF_INVALID)
		errno = EFAULT;
	return off;
}

void *sheaf_off_to_ptr(const sheaf_pool_t *pool, uint64_t off)
{
	const struct shm_pool *s = &pool->shm;

	if (pool->forked) {
		errno = ECHILD;
		return NULL;
	}
	if (off - s->data_off >= s->data_len) {
		errno = EFAULT;
		return NULL;
	}
	return s->base + off;
}
