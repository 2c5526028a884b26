/*
 * cache.c - the public cache calls on a pool of either kind (create, open,
 * create-or-open, object size, capacity, set_capacity, shrink): one side
 * of the seam of pool_ops.h.  Every call that can fail refuses a pool
 * inherited through fork() (ECHILD) and a stale handle (ESTALE) first,
 * then checks its arguments with the checks sheafd applies
 * (cache_params_check, tune_check), so that a local pool and a pool of
 * sheafd refuse the same, and only then calls pool->ops.
 *
 * Also the process's handle of each cache of a pool, and the handshake of
 * a thread with engine_cache_destroy (tcache_enter, tcache_leave): a handle
 * records its cache's generation, so that a destroyed cache's handle never
 * serves the next cache of its slot (docs/design.md, "Cache handles and
 * destroy").
 */
#include <errno.h>
#include <sched.h>
#include <time.h>
#include "client/internal.h"
#include "client/pool_ops.h"
#include "shm/debug.h"
#include "shm/futex.h"
#include "shm/slab_geom.h"
#include "shm/tune.h"

/*
 * The process's handle of cache @id of generation @gen (made on first
 * use); NULL with errno EMFILE.  A handle of an earlier generation of the
 * slot stays as it is (stale: its calls fail with ESTALE) and keeps its
 * slot, so that it can never come to name another cache.
 */
static sheaf_cache_t *handle_of(sheaf_pool_t *pool, uint32_t id, uint32_t gen)
{
	sheaf_cache_t *c;

	lock_acquire(&pool->lock, LOCK_RANK_POOL_HANDLES);
	c = pool->handles[id];
	if (c == NULL || c->gen != gen) {
		c = slots_new_handle(pool, id);
		if (c != NULL) {
			c->gen = gen;
			pool->handles[id] = c;
		}
	}
	lock_release(&pool->lock);
	return c;
}

/* The live cache @name in the mapped descriptors: its id and generation,
 * or -ENOENT. */
static int cache_find(sheaf_pool_t *pool, const char *name, uint32_t *gen)
{
	int id = pool_cache_find(&pool->shm, name);   /* acquire of the state */

	if (id >= 0)
		*gen = at_load_relaxed(&pool->shm.caches[id].generation);
	return id;
}

/*
 * The thread's hold on its tpool (internal.h): the trimmer (trim.c) only
 * tries for it, between its walks of a thread's caches, for the few
 * microseconds it takes to put a stash back; wait that out.
 */
void tpool_hold(struct tpool *tp)
{
	struct timespec nap = { 0, 20000 };

	if (tp->depth++ > 0)
		return;
	for (unsigned spin = 0;; spin++) {
		uint32_t exp = 0;

		/* Acquire: sees what the trimmer did to the stash. */
		if (likely(at_cas_acqrel(&tp->hold, &exp, TP_HOLD_OWNER)))
			return;
		if (spin < 64)
			sched_yield();
		else
			nanosleep(&nap, NULL);
	}
}

void tpool_unhold(struct tpool *tp)
{
	if (--tp->depth == 0)
		at_store_release(&tp->hold, 0);
}

int tcache_enter(struct tcache *t)
{
	const sheaf_cache_t *c = t->cache;
	struct shm_lane *ln = t->tp->lane;
	struct timespec nap = { 0, 50000 };
	int64_t end = 0;

	tpool_hold(t->tp);
	t->enters++;
	for (;;) {
		uint32_t st;

		/* seq_cst, both: the handshake with engine_cache_destroy's
		 * DYING store and its loads of in_cache (one of the two sees
		 * the other). */
		at_store_seqcst(&ln->in_cache, c->id + 1);
		st = at_load_seqcst(&c->sc->state);
		if (st == CACHE_LIVE && at_load_relaxed(&c->sc->generation) == c->gen)
			return 0;
		at_store_release(&ln->in_cache, 0);
		if (st != CACHE_DYING || at_load_relaxed(&c->sc->generation) != c->gen) {
			tpool_unhold(t->tp);
			return -ESTALE;
		}
		/* A destroy is deciding (milliseconds): wait, at most
		 * wait_ms (its engine may have died: adoption revives). */
		if (end == 0)
			end = clock_ns() + c->pool->wait_ns;
		else if (clock_ns() >= end) {
			tpool_unhold(t->tp);
			return -EAGAIN;
		}
		nanosleep(&nap, NULL);
	}
}

void tcache_leave(struct tcache *t)
{
	/* Release: destroy, which acquires it, sees every ring operation the
	 * thread did inside. */
	at_store_release(&t->tp->lane->in_cache, 0);
	tpool_unhold(t->tp);
}

_Static_assert(SHEAF_CACHE_MAX_SIZE == SHEAF_MAX_OBJ_SIZE &&
	       SHEAF_CACHE_LARGE_MIN == SHEAF_LARGE_MIN, "sheaf.h and layout.h agree");

/* The prologue of a create on @pool: a create request from the public
 * arguments into *@cp: 0, -ECHILD (a pool inherited through fork()) or
 * -EINVAL. */
static int cache_params(const sheaf_pool_t *pool, const char *name, size_t size,
			const struct sheaf_cache_config *cfg, struct cache_params *cp)
{
	char msg[160];

	if (pool->forked)
		return -ECHILD;
	/* What does not fit the request's 32-bit fields, and flags the
	 * public API does not know; the engine checks the rest. */
	if (size <= SHEAF_MAX_OBJ_SIZE && size > SLAB_SIZE &&
	    slab_frames_of((uint32_t)size) > pool->shm.frames_per_node)
		return -EFBIG;          /* no slab of it fits a node */
	if (size > SHEAF_MAX_OBJ_SIZE ||
	    (cfg != NULL && (cfg->align > SHEAF_MAX_ALIGN || cfg->flags & ~(SHEAF_CACHE_DEBUG |
					SHEAF_CACHE_OWNED | SHEAF_CACHE_KEEP))))
		return -EINVAL;
	cp->size = (uint32_t)size;
	cp->capacity = SHEAF_CAPACITY_DEFAULT;
	if (cfg != NULL) {
		cp->align = (uint32_t)cfg->align;
		cp->capacity = cfg->capacity;
		cp->flags = (cfg->flags & SHEAF_CACHE_DEBUG ? SHEAF_CACHE_F_DEBUG : 0) |
			    (cfg->flags & SHEAF_CACHE_OWNED ? SHEAF_CACHE_F_OWNED : 0) |
			    (cfg->flags & SHEAF_CACHE_KEEP ? SHEAF_CACHE_F_KEEP : 0);
	}
	return cache_params_check(name, cp, msg, sizeof(msg));
}

sheaf_cache_t *sheaf_cache_create(sheaf_pool_t *pool, const char *name,
				  size_t size, const struct sheaf_cache_config *cfg)
{
	struct cache_params cp = { 0 };
	uint32_t gen = 0;
	int id = cache_params(pool, name, size, cfg, &cp);

	if (id == 0)
		id = pool->ops->cache_create(pool, name, &cp, &gen);
	if (id < 0) {
		errno = -id;
		return NULL;
	}
	return handle_of(pool, (uint32_t)id, gen);
}

/* Whether cache @id has the geometry @cp asks for: the object size after
 * rounding and the alignment, as do_cache_install records them. */
static int same_geometry(const sheaf_pool_t *pool, uint32_t id,
			 const struct cache_params *cp)
{
	const struct shm_cache *sc = &pool->shm.caches[id];
	uint32_t obj_size, per_slab;

	if (slab_geometry(cp->size, cp->align, &obj_size, &per_slab) != 0)
		return 0;
	return sc->obj_size == obj_size && sc->align == (cp->align > 8 ? cp->align : 8);
}

/* Attempts of create-or-open against a cache destroyed and made again
 * between our create and our open. */
#define CREATE_OR_OPEN_TRIES 8

sheaf_cache_t *sheaf_cache_create_or_open(sheaf_pool_t *pool, const char *name, size_t size,
					  const struct sheaf_cache_config *cfg, int *created)
{
	struct cache_params cp = { 0 };
	uint32_t gen = 0;
	int id = cache_params(pool, name, size, cfg, &cp);

	for (int i = 0; id == 0 && i < CREATE_OR_OPEN_TRIES; i++) {
		/* Create first: sheafd (or the local engine) decides under
		 * its control lock, so of racing callers exactly one creates. */
		id = pool->ops->cache_create(pool, name, &cp, &gen);
		if (id >= 0) {
			if (created != NULL)
				*created = 1;
			return handle_of(pool, (uint32_t)id, gen);
		}
		if (id != -EEXIST)
			break;
		id = cache_find(pool, name, &gen);
		if (id >= 0) {
			if (!same_geometry(pool, (uint32_t)id, &cp)) {
				id = -EINVAL;
				break;
			}
			if (created != NULL)
				*created = 0;
			return handle_of(pool, (uint32_t)id, gen);
		}
		id = 0;                 /* destroyed meanwhile: create again */
	}
	errno = id < 0 ? -id : EAGAIN;
	return NULL;
}

sheaf_cache_t *sheaf_cache_open(sheaf_pool_t *pool, const char *name)
{
	uint32_t gen = 0;
	int id;

	if (pool->forked) {
		errno = ECHILD;
		return NULL;
	}
	id = cache_find(pool, name, &gen);   /* the mapped descriptors */
	if (id < 0) {
		errno = ENOENT;
		return NULL;
	}
	return handle_of(pool, (uint32_t)id, gen);
}

sheaf_cache_t *cache_handle_by_id(sheaf_pool_t *pool, uint32_t id)
{
	const struct shm_cache *sc;
	uint32_t st = CACHE_FREE;

	if (id < SHEAF_MAX_CACHES) {
		sc = &pool->shm.caches[id];
		/* Acquire: pairs with the release stores of the state
		 * (shm/engine/cache.c); the generation is written before them. */
		st = at_load_acquire(&sc->state);
	}
	if (st != CACHE_LIVE && st != CACHE_DYING) {
		errno = EINVAL;
		return NULL;
	}
	return handle_of(pool, id, at_load_relaxed(&sc->generation));
}

size_t sheaf_cache_object_size(const sheaf_cache_t *c)
{
	if (!cache_handle_live(c)) {
		errno = ESTALE;
		return 0;
	}
	return c->sc->obj_size;
}

int sheaf_cache_get_capacity(const sheaf_cache_t *c, unsigned *capacity)
{
	if (c == NULL || capacity == NULL)
		return -EINVAL;
	if (!cache_handle_live(c))
		return -ESTALE;
	*capacity = at_load_relaxed(&c->sc->sheaf_capacity);
	return 0;
}

int sheaf_cache_set_capacity(sheaf_cache_t *c, unsigned capacity)
{
	struct tune_setting s = { "sheaf_capacity", capacity };
	int rc;

	if (c->pool->forked)
		return -ECHILD;
	if (!cache_handle_live(c))
		return -ESTALE;
	rc = tune_check(&c->pool->shm, (int)c->id, &s, 1, NULL, 0);
	return rc != 0 ? rc : c->pool->ops->cache_tune(c, &s);
}

int sheaf_cache_shrink(sheaf_cache_t *c)
{
	struct tcache *t;
	int rc;

	if (c->pool->forked)
		return -ECHILD;
	if (!cache_handle_live(c))
		return -ESTALE;
	t = tcache_get(c);
	if (t != NULL) {
		rc = tcache_enter(t);
		if (rc != 0)
			return rc;
		tcache_flush(t);
		tcache_leave(t);
	}
	return c->pool->ops->cache_shrink(c);
}
