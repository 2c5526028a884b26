/*
 * rpc_caches.c - sheafd's handlers for caches: CacheCreate, CacheOpen,
 * CacheList, CacheDestroy, and the cache descriptor and scope that other
 * handlers report or take (rpc_handlers.h).  Called through rpc.c's table
 * of request kinds only.
 */
#include "log.h"
#include "rpc_handlers.h"
#include "shm/engine/engine.h"

Sheaf__V1__CacheInfo *rpc_cache_info(struct daemon *d, struct arena *a, uint32_t id)
{
	const struct shm_cache *sc = &d->pool.caches[id];
	Sheaf__V1__CacheInfo *ci = ARENA_NEW(a, Sheaf__V1__CacheInfo, SHEAF__V1__CACHE_INFO__INIT);

	if (ci == NULL)
		return NULL;
	ci->id = id;
	ci->name = arena_strdup(a, sc->name);
	ci->object_size = sc->obj_size;
	ci->align = sc->align;
	ci->sheaf_capacity = at_load_relaxed(&sc->sheaf_capacity);
	ci->objects_per_slab = sc->objs_per_slab;
	ci->flags = sc->flags;
	ci->min_partial = at_load_relaxed(&sc->min_partial);
	ci->barn_limit = at_load_relaxed(&sc->barn_limit);
	ci->barn_low = at_load_relaxed(&sc->barn_low);
	ci->barn_high = at_load_relaxed(&sc->barn_high);
	ci->generation = at_load_relaxed(&sc->generation);
	return ci->name != NULL ? ci : NULL;
}

int rpc_cache_scope(struct daemon *d, const char *name, int *cache, struct reply *rp)
{
	*cache = -1;
	if (name == NULL || name[0] == '\0')
		return 0;
	*cache = pool_cache_find(&d->pool, name);
	if (*cache >= 0)
		return 0;
	rpc_fail(rp, SHEAF__V1__STATUS__STATUS_NOT_FOUND, "no cache named '%s'", name);
	return -1;
}

void rpc_cache_create(struct daemon *d, const struct rpc_call *call, struct reply *rp)
{
	const Sheaf__V1__CacheCreateRequest *rq = RPC_BODY(call, Sheaf__V1__CacheCreateRequest);
	struct cache_params cp = {
		.size = rq->size, .align = rq->align, .capacity = rq->capacity,
		.flags = rq->flags,
	};
	Sheaf__V1__CacheCreateResponse *cr;
	char err[160];
	int id = engine_cache_create(&d->engine, rq->name, &cp, err, sizeof(err));

	if (id < 0) {
		rpc_fail(rp, rpc_status(id), "%s", err);
		return;
	}
	log_info("cache '%s' created: id %d, object size %u", rq->name, id,
		 d->pool.caches[id].obj_size);
	daemon_status(d);
	cr = ARENA_NEW(&rp->a, Sheaf__V1__CacheCreateResponse, SHEAF__V1__CACHE_CREATE_RESPONSE__INIT);
	if (cr == NULL || (cr->cache = rpc_cache_info(d, &rp->a, (uint32_t)id)) == NULL) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_CACHE_CREATE;
	rp->r.cache_create = cr;
}

void rpc_cache_open(struct daemon *d, const struct rpc_call *call, struct reply *rp)
{
	const Sheaf__V1__CacheOpenRequest *rq = RPC_BODY(call, Sheaf__V1__CacheOpenRequest);
	Sheaf__V1__CacheOpenResponse *cr;
	int id = pool_cache_find(&d->pool, rq->name);

	if (id < 0) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_NOT_FOUND, "no cache named '%s'", rq->name);
		return;
	}
	cr = ARENA_NEW(&rp->a, Sheaf__V1__CacheOpenResponse, SHEAF__V1__CACHE_OPEN_RESPONSE__INIT);
	if (cr == NULL || (cr->cache = rpc_cache_info(d, &rp->a, (uint32_t)id)) == NULL) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_CACHE_OPEN;
	rp->r.cache_open = cr;
}

void rpc_cache_list(struct daemon *d, const struct rpc_call *call, struct reply *rp)
{
	Sheaf__V1__CacheListResponse *lr = ARENA_NEW(&rp->a, Sheaf__V1__CacheListResponse,
					       SHEAF__V1__CACHE_LIST_RESPONSE__INIT);
	uint32_t used = pool_caches_used(&d->pool);

	(void)call;
	if (lr == NULL || (lr->caches = arena_alloc(&rp->a, (used + 1) * sizeof(void *))) == NULL)
		goto oom;
	for (uint32_t c = 0; c < used; c++) {
		if (at_load_acquire(&d->pool.caches[c].state) != CACHE_LIVE)
			continue;
		if ((lr->caches[lr->n_caches++] = rpc_cache_info(d, &rp->a, c)) == NULL)
			goto oom;
	}
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_CACHE_LIST;
	rp->r.cache_list = lr;
	return;
oom:
	rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
}

void rpc_cache_destroy(struct daemon *d, const struct rpc_call *call, struct reply *rp)
{
	const Sheaf__V1__CacheDestroyRequest *rq = RPC_BODY(call, Sheaf__V1__CacheDestroyRequest);
	char err[160];
	int id = pool_cache_find(&d->pool, rq->name), rc;

	if (id < 0) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_NOT_FOUND, "no cache named '%s'", rq->name);
		return;
	}
	rc = engine_cache_destroy(&d->engine, (uint32_t)id, err, sizeof(err));
	if (rc != 0) {
		rpc_fail(rp, rpc_status(rc), "%s", err);
		return;
	}
	log_info("cache '%s' destroyed", rq->name);
	daemon_status(d);
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_CACHE_DESTROY;
	rp->r.cache_destroy = ARENA_NEW(&rp->a, Sheaf__V1__CacheDestroyResponse,
				  SHEAF__V1__CACHE_DESTROY_RESPONSE__INIT);
	if (rp->r.cache_destroy == NULL)
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
}
