/*
 * local.c - local pools: a pool region created by this process, with the
 * engine running as threads of this process (the same engine sheafd hosts),
 * and the cache calls that go with a pool handle.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "shm/check.h"
#include "shm/clients.h"
#include "shm/tune.h"
#include "client/internal.h"

static void seterr(char *err, size_t errlen, const char *msg)
{
	if (err != NULL && errlen > 0)
		snprintf(err, errlen, "%s", msg);
}

sheaf_pool_t *sheaf_pool_create(const struct sheaf_pool_config *cfg,
				char *err, size_t errlen)
{
	struct sheaf_pool_config def = { 0 };
	struct pool_params pp = { 0 };
	char msg[256] = "";
	sheaf_pool_t *pool;
	int rc, client;

	if (cfg == NULL)
		cfg = &def;
	pool = calloc(1, sizeof(*pool));
	if (pool == NULL) {
		seterr(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&pool->lock, NULL);
	pool->wait_ns = (int64_t)(cfg->wait_ms ? cfg->wait_ms : 5000) * 1000000;
	pp.size = cfg->size;
	pp.nodes = cfg->nodes;
	pp.sheaf_count = cfg->sheaf_count;
	pp.mem_cap = cfg->mem_cap;
	rc = registry_add_pool(pool);
	if (rc != 0) {
		snprintf(msg, sizeof(msg), "too many pools in this process (max %u)",
			 SHEAF_POOLS_MAX);
		goto err_free;
	}
	rc = pool_create(&pool->shm, &pp, msg, sizeof(msg));
	if (rc != 0)
		goto err_registry;
	client = client_attach(&pool->shm, (uint32_t)getpid(), (uint32_t)getuid(), "local");
	if (client < 0) {
		rc = client;
		snprintf(msg, sizeof(msg), "no client slot");
		goto err_unmap;
	}
	pool->client = (uint32_t)client;
	rc = engine_init(&pool->engine, &pool->shm, msg, sizeof(msg));
	if (rc != 0)
		goto err_unmap;
	rc = engine_start(&pool->engine, msg, sizeof(msg));
	if (rc != 0)
		goto err_engine;
	return pool;

err_engine:
	engine_fini(&pool->engine);
err_unmap:
	pool_unmap(&pool->shm);
err_registry:
	registry_remove_pool(pool);
err_free:
	pthread_mutex_destroy(&pool->lock);
	free(pool);
	seterr(err, errlen, msg);
	errno = -rc;
	return NULL;
}

void sheaf_pool_destroy(sheaf_pool_t *pool)
{
	if (pool == NULL)
		return;
	if (pool->remote) {
		pool_disconnect(pool);
		return;
	}
	if (!pool->forked)
		thread_flush_pool(pool);
	engine_fini(&pool->engine);
	registry_remove_pool(pool);          /* and its handles */
	pool_unmap(&pool->shm);
	pthread_mutex_destroy(&pool->lock);
	free(pool);
}

unsigned sheaf_pool_nodes(const sheaf_pool_t *pool)
{
	return pool->shm.nodes;
}

/* The process's handle of cache @id (made on first use). */
sheaf_cache_t *pool_handle_of(sheaf_pool_t *pool, uint32_t id)
{
	sheaf_cache_t *c;

	pthread_mutex_lock(&pool->lock);
	c = pool->handles[id];
	if (c == NULL) {
		c = registry_new_handle(pool, id);
		pool->handles[id] = c;
	}
	pthread_mutex_unlock(&pool->lock);
	return c;
}

sheaf_cache_t *sheaf_cache_create(sheaf_pool_t *pool, const char *name,
				  size_t size, const struct sheaf_cache_config *cfg)
{
	struct engine_cache_params cp = { 0 };
	char msg[160];
	int id;

	if (pool->forked) {
		errno = ECHILD;
		return NULL;
	}
	if (size == 0 || size > SHEAF_MAX_OBJ_SIZE ||
	    (cfg != NULL && (cfg->align > SHEAF_MAX_ALIGN ||
			     cfg->flags & ~SHEAF_CACHE_DEBUG))) {
		errno = EINVAL;
		return NULL;
	}
	cp.size = (uint32_t)size;
	cp.capacity = SHEAF_CAPACITY_DEFAULT;
	if (cfg != NULL) {
		cp.align = (uint32_t)cfg->align;
		cp.capacity = cfg->capacity;
		cp.flags = cfg->flags & SHEAF_CACHE_DEBUG ? SHEAF_CACHE_F_DEBUG : 0;
	}
	if (pool->remote)
		id = rpc_cache_create(pool, name, cp.size, cp.align, cp.capacity, cp.flags);
	else
		id = engine_cache_create(&pool->engine, name, &cp, msg, sizeof(msg));
	if (id < 0) {
		errno = -id;
		return NULL;
	}
	return pool_handle_of(pool, (uint32_t)id);
}

sheaf_cache_t *sheaf_cache_open(sheaf_pool_t *pool, const char *name)
{
	int id;

	if (pool->forked) {
		errno = ECHILD;
		return NULL;
	}
	id = pool_cache_find(&pool->shm, name);
	if (id < 0) {
		errno = ENOENT;
		return NULL;
	}
	return pool_handle_of(pool, (uint32_t)id);
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
	int rc = tune_check(&c->pool->shm, (int)c->id, &s, 1, NULL, 0);

	if (rc != 0)
		return rc;
	if (c->pool->remote)            /* descriptors are sheafd's: ask it */
		return rpc_tune(c->pool, c->sc->name, "sheaf_capacity", capacity);
	tune_apply(&c->pool->shm, (int)c->id, &s);
	return 0;
}

int sheaf_cache_shrink(sheaf_cache_t *c)
{
	struct tcache *t = tcache_get(c);

	if (t == NULL && c->pool->forked)
		return -ECHILD;
	if (t != NULL)
		tcache_flush(t);
	if (c->pool->remote)
		return rpc_shrink(c->pool, c->sc->name);
	return engine_shrink(&c->pool->engine, (int)c->id, 1);
}

int sheaf_pool_check(sheaf_pool_t *pool, char *err, size_t errlen)
{
	struct shm_pool *p = &pool->shm;
	char msg[256];
	int rc = 0;

	if (pool->forked)
		return -ECHILD;
	if (pool->remote)
		return rpc_check(pool, err, errlen);
	engine_stop(&pool->engine);       /* the checker needs a quiet pool */
	for (uint32_t c = 0; c < SHEAF_MAX_CACHES && rc == 0; c++) {
		int64_t in_use;

		if (at_load_acquire(&p->caches[c].state) != CACHE_LIVE)
			continue;
		in_use = engine_counted_in_use(p, c);
		rc = pool_check(p, (int)c, in_use, NULL, msg, sizeof(msg));
		if (rc != 0 && err != NULL)
			snprintf(err, errlen, "cache '%s': %s", p->caches[c].name, msg);
	}
	if (engine_start(&pool->engine, msg, sizeof(msg)) != 0 && rc == 0) {
		if (err != NULL)
			snprintf(err, errlen, "%s", msg);
		rc = -EAGAIN;
	}
	return rc;
}
