/*
 * cache.c - the public cache calls on a pool of either kind (create, open,
 * object size, capacity, set_capacity, shrink): one side of the seam of
 * pool_ops.h.  Every call that can fail refuses a pool inherited through
 * fork() (ECHILD) first, then checks its arguments with the checks sheafd
 * applies (engine_cache_check, tune_check), so that a local pool and a
 * pool of sheafd refuse the same, and only then calls pool->ops.
 * Also the process's handle of each cache of a pool.
 */
#include <errno.h>
#include "client/internal.h"
#include "client/pool_ops.h"
#include "shm/debug.h"
#include "shm/tune.h"

/* The process's handle of cache @id (made on first use); NULL with errno
 * EMFILE. */
static sheaf_cache_t *handle_of(sheaf_pool_t *pool, uint32_t id)
{
	sheaf_cache_t *c;

	lock_acquire(&pool->lock, LOCK_RANK_POOL_HANDLES);
	c = pool->handles[id];
	if (c == NULL) {
		c = registry_new_handle(pool, id);
		pool->handles[id] = c;
	}
	lock_release(&pool->lock);
	return c;
}

/* A create request from the public arguments into *@cp: 0, or -EINVAL. */
static int cache_params(const char *name, size_t size, const struct sheaf_cache_config *cfg,
			struct engine_cache_params *cp)
{
	char msg[160];

	/* What does not fit the request's 32-bit fields, and flags the
	 * public API does not know; the engine checks the rest. */
	if (size > SHEAF_MAX_OBJ_SIZE ||
	    (cfg != NULL && (cfg->align > SHEAF_MAX_ALIGN || cfg->flags & ~SHEAF_CACHE_DEBUG)))
		return -EINVAL;
	cp->size = (uint32_t)size;
	cp->capacity = SHEAF_CAPACITY_DEFAULT;
	if (cfg != NULL) {
		cp->align = (uint32_t)cfg->align;
		cp->capacity = cfg->capacity;
		cp->flags = cfg->flags & SHEAF_CACHE_DEBUG ? SHEAF_CACHE_F_DEBUG : 0;
	}
	return engine_cache_check(name, cp, msg, sizeof(msg));
}

sheaf_cache_t *sheaf_cache_create(sheaf_pool_t *pool, const char *name,
				  size_t size, const struct sheaf_cache_config *cfg)
{
	struct engine_cache_params cp = { 0 };
	int id;

	if (pool->forked) {
		errno = ECHILD;
		return NULL;
	}
	id = cache_params(name, size, cfg, &cp);
	if (id == 0)
		id = pool->ops->cache_create(pool, name, &cp);
	if (id < 0) {
		errno = -id;
		return NULL;
	}
	return handle_of(pool, (uint32_t)id);
}

sheaf_cache_t *sheaf_cache_open(sheaf_pool_t *pool, const char *name)
{
	int id;

	if (pool->forked) {
		errno = ECHILD;
		return NULL;
	}
	id = pool_cache_find(&pool->shm, name);   /* the mapped descriptors */
	if (id < 0) {
		errno = ENOENT;
		return NULL;
	}
	return handle_of(pool, (uint32_t)id);
}

size_t sheaf_cache_object_size(const sheaf_cache_t *c)
{
	return c->sc->obj_size;
}

unsigned sheaf_cache_capacity(const sheaf_cache_t *c)
{
	return at_load_relaxed(&c->sc->sheaf_capacity);
}

int sheaf_cache_set_capacity(sheaf_cache_t *c, unsigned capacity)
{
	struct tune_setting s = { "sheaf_capacity", capacity };
	int rc;

	if (c->pool->forked)
		return -ECHILD;
	rc = tune_check(&c->pool->shm, (int)c->id, &s, 1, NULL, 0);
	return rc != 0 ? rc : c->pool->ops->cache_tune(c, &s);
}

int sheaf_cache_shrink(sheaf_cache_t *c)
{
	struct tcache *t;

	if (c->pool->forked)
		return -ECHILD;
	t = tcache_get(c);
	if (t != NULL)
		tcache_flush(t);
	return c->pool->ops->cache_shrink(c);
}
