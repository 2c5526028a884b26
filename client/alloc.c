/*
 * alloc.c - sheaf_alloc / sheaf_free: the fast paths (pop and push on the
 * thread's main sheaf: plain loads and stores, no atomic RMW, no syscall)
 * and the slow paths (main/spare swap, barn exchange, waiting for the
 * engine, remote-node frees, sheaves disabled, debug tracking), and bulk.
 *
 * Exchange sequence (docs/design.md, "The object path"):
 *   alloc: main empty -> swap with spare if it holds objects -> else put the
 *          empty main in the barn's empty ring (or keep it as spare), take a
 *          full sheaf from the barn -> else ring the doorbell and wait for
 *          the engine's verdict -> starved: try other nodes' barns -> ENOMEM.
 *   free:  main full -> swap with spare if it is empty -> else put the full
 *          main in the barn's full ring, take an empty sheaf (barn, depot,
 *          or wait for the engine to flush).
 */
#include <errno.h>
#include "shm/barn.h"
#include "shm/futex.h"
#include "shm/slab.h"
#include "client/internal.h"

static inline struct shm_pool *tshm(const struct tcache *t)
{
	return &t->cache->pool->shm;
}

static inline uint32_t me_of(const struct tcache *t)
{
	return t->cache->pool->client;
}

static inline struct ring_intent *intent_of(const struct tcache *t)
{
	return &t->tp->lane->intent;
}

static inline void stat_inc(struct tcache *t, enum sheaf_stat s)
{
	at_counter_add(&t->stat[s], 1);
}

static uint32_t cache_capacity(const struct tcache *t)
{
	return at_load_relaxed(&t->cache->sc->sheaf_capacity);
}

/* The capacity barn sheaves get when sheaves are disabled for threads. */
static uint32_t barn_capacity(const struct tcache *t)
{
	uint32_t cap = cache_capacity(t);
	return cap ? cap : engine_default_capacity(t->cache->sc->obj_size);
}

/* ---- getting sheaves --------------------------------------------------- */

/*
 * A full sheaf of node @node's barn, waiting for the engine if needed.
 * Returns NULL with errno ENOMEM (starved everywhere) or EAGAIN (timeout).
 */
static struct shm_sheaf *get_full(struct tcache *t, uint32_t node)
{
	struct shm_pool *p = tshm(t);
	uint32_t c = t->cache_id, s;
	int fresh = 0;

	for (;;) {
		s = barn_get_full(p, c, node, me_of(t), intent_of(t));
		if (s != SHEAF_ID_NONE) {
			stat_inc(t, ST_BARN_GET);
			if (ring_count(pool_full_ring(p, c, node)) <
			    at_load_relaxed(&t->cache->sc->barn_low))
				node_ring_doorbell(p, node);   /* restock early */
			return pool_sheaf(p, s);
		}
		stat_inc(t, ST_BARN_GET_FAIL);
		if (at_load_acquire(&pool_barn(p, c, node)->starved)) {
			/* Take what other nodes' barns hold, never waiting. */
			for (uint32_t k = 1; k < p->nodes; k++) {
				uint32_t m = (node + k) % p->nodes;
				s = barn_get_full(p, c, m, me_of(t), intent_of(t));
				if (s != SHEAF_ID_NONE) {
					stat_inc(t, ST_BARN_GET);
					return pool_sheaf(p, s);
				}
			}
			/* Starved by a verdict made after this call began. */
			if (fresh) {
				errno = ENOMEM;
				return NULL;
			}
		}
		if (barn_wait_supply(p, c, node, t->cache->pool->wait_ns) != 0) {
			errno = EAGAIN;
			return NULL;
		}
		fresh = 1;
	}
}

/* An empty sheaf bound to (cache, @node), waiting for the engine's flushes
 * if every sheaf of the pool is full.  NULL with errno EAGAIN on timeout. */
static struct shm_sheaf *get_empty(struct tcache *t, uint32_t node, uint32_t cap)
{
	struct shm_pool *p = tshm(t);
	int64_t end = clock_ns() + t->cache->pool->wait_ns;

	for (;;) {
		int dep;
		uint32_t s = barn_get_empty(p, t->cache_id, node, cap, me_of(t),
					    intent_of(t), &dep);
		if (s != SHEAF_ID_NONE) {
			if (dep)
				stat_inc(t, ST_SHEAF_ALLOC);
			return pool_sheaf(p, s);
		}
		if (clock_ns() >= end ||
		    barn_wait_supply(p, t->cache_id, node, end - clock_ns()) != 0) {
			errno = EAGAIN;
			return NULL;
		}
	}
}

/* Hand a sheaf back to its barn: full ring if it holds objects. */
static void put_sheaf(struct tcache *t, struct shm_sheaf *s)
{
	struct shm_pool *p = tshm(t);
	uint32_t id = sheaf_index(t, s);

	if (s->size == 0) {
		barn_put_empty(p, t->cache_id, s->node, id, me_of(t), intent_of(t));
		return;
	}
	stat_inc(t, ST_BARN_PUT);
	if (barn_put_full(p, t->cache_id, s->node, id, me_of(t), intent_of(t)) >
	    at_load_relaxed(&t->cache->sc->barn_limit)) {
		stat_inc(t, ST_BARN_PUT_FAIL);
		node_ring_doorbell(p, s->node);        /* ask for a flush */
	}
}

/* ---- debug tracking ---------------------------------------------------- */

static _Atomic uint64_t *inuse_word(struct tcache *t, uint64_t off, uint64_t *bit)
{
	struct shm_pool *p = tshm(t);
	uint32_t f = pool_frame_of(p, off);
	uint32_t idx = (uint32_t)((off - pool_frame_off(p, f)) / t->cache->sc->obj_size);

	*bit = 1ull << (idx % 64);
	return &pool_inuse(p, f)[idx / 64];
}

static void *debug_mark_alloc(struct tcache *t, void *obj)
{
	uint64_t bit;
	_Atomic uint64_t *w;

	if (!(t->cache->sc->flags & SHEAF_CACHE_F_DEBUG))
		return obj;
	w = inuse_word(t, (uint64_t)((char *)obj - t->base), &bit);
	at_fetch_or_acqrel(w, bit);
	return obj;
}

/* ---- alloc -------------------------------------------------------------- */

static inline void *pop(struct tcache *t, struct shm_sheaf *s)
{
	return t->base + s->objs[--s->size];
}

/* Sheaves disabled: every alloc takes a sheaf from the barn and puts it back. */
static void *alloc_nosheaf(struct tcache *t)
{
	struct shm_sheaf *s = get_full(t, t->node);
	void *obj;

	if (s == NULL)
		return NULL;
	obj = pop(t, s);
	put_sheaf(t, s);
	return obj;
}

void *alloc_slow(sheaf_cache_t *c)
{
	struct tcache *t = tcache_get(c);
	struct shm_sheaf *m, *full;
	void *obj;

	if (t == NULL) {
		return NULL;
	}
	m = t->main;
	if (m->size > 0) {                      /* debug caches come here */
		stat_inc(t, ST_ALLOC_FASTPATH);
		return debug_mark_alloc(t, pop(t, m));
	}
	if (t->spare != NULL && t->spare->size > 0) {
		t->main = t->spare;
		t->spare = m == &sheaf_dummy ? NULL : m;
		stat_inc(t, ST_ALLOC_FASTPATH);
		return debug_mark_alloc(t, pop(t, t->main));
	}
	if (cache_capacity(t) == 0) {
		tcache_flush(t);                /* capacity tuned to 0 */
		obj = alloc_nosheaf(t);
	} else {
		full = get_full(t, t->node);
		if (full == NULL) {
			stat_inc(t, ST_ALLOC_FAIL);
			return NULL;
		}
		if (m != &sheaf_dummy) {
			if (t->spare == NULL)
				t->spare = m;
			else
				put_sheaf(t, m);
		}
		t->main = full;
		obj = pop(t, full);
	}
	if (obj == NULL) {
		stat_inc(t, ST_ALLOC_FAIL);
		return NULL;
	}
	stat_inc(t, ST_ALLOC_SLOWPATH);
	return debug_mark_alloc(t, obj);
}

void *sheaf_alloc(sheaf_cache_t *c)
{
	struct tcache *t = tls_fast[c->slot];

	if (likely(t != NULL)) {
		struct shm_sheaf *m = t->main;
		uint32_t n = m->size;
		if (likely(n != 0)) {
			m->size = n - 1;
			at_counter_add(&t->stat[ST_ALLOC_FASTPATH], 1);
			return t->base + m->objs[n - 1];
		}
	}
	return alloc_slow(c);
}

/* ---- free --------------------------------------------------------------- */

/* Full validation; 0 or -EFAULT / -EINVAL / -EALREADY (debug caches). */
static int free_check(struct tcache *t, uint64_t off)
{
	int rc = slab_validate(tshm(t), t->cache_id, off);
	uint64_t bit;
	_Atomic uint64_t *w;

	if (rc != 0 || !(t->cache->sc->flags & SHEAF_CACHE_F_DEBUG))
		return rc;
	w = inuse_word(t, off, &bit);
	if (!(at_fetch_and_acqrel(w, ~bit) & bit))
		return -EALREADY;
	return 0;
}

/* Push onto a sheaf of another node; a full one goes to that node's barn. */
static int free_remote(struct tcache *t, uint64_t off, uint32_t node)
{
	struct shm_sheaf *r = t->remote[node];

	stat_inc(t, ST_FREE_REMOTE);
	if (r != NULL && r->size >= r->capacity) {
		put_sheaf(t, r);
		t->remote[node] = r = NULL;
	}
	if (r == NULL) {
		r = get_empty(t, node, barn_capacity(t));
		if (r == NULL)
			return -errno;
		t->remote[node] = r;
	}
	r->objs[r->size++] = off;
	return 0;
}

/* Sheaves disabled: push into a barn sheaf with room, or a fresh one. */
static int free_nosheaf(struct tcache *t, uint64_t off)
{
	struct shm_pool *p = tshm(t);
	uint32_t id = barn_get_full(p, t->cache_id, t->node, me_of(t), intent_of(t));
	struct shm_sheaf *s = id == SHEAF_ID_NONE ? NULL : pool_sheaf(p, id);

	if (s != NULL && s->size >= s->capacity) {
		put_sheaf(t, s);
		s = NULL;
	}
	if (s == NULL) {
		s = get_empty(t, t->node, barn_capacity(t));
		if (s == NULL)
			return -errno;
	}
	s->objs[s->size++] = off;
	put_sheaf(t, s);
	return 0;
}

int free_slow(sheaf_cache_t *c, void *obj)
{
	struct tcache *t = tcache_get(c);
	uint64_t off;
	uint32_t node, cap;
	struct shm_sheaf *m;
	int rc;

	if (t == NULL)
		return -errno;
	off = (uint64_t)((char *)obj - t->base);
	rc = free_check(t, off);
	if (rc != 0) {
		stat_inc(t, ST_FREE_INVALID);
		return rc;
	}
	node = pool_node_of_frame(tshm(t), pool_frame_of(tshm(t), off));
	cap = cache_capacity(t);
	if (node != t->node) {
		rc = free_remote(t, off, node);
	} else if (cap == 0) {
		tcache_flush(t);
		rc = free_nosheaf(t, off);
	} else if (t->main->size < t->main->capacity) {
		m = t->main;
		m->objs[m->size++] = off;       /* debug caches come here */
		stat_inc(t, ST_FREE_FASTPATH);
		return 0;
	} else if (t->spare != NULL && t->spare->size == 0) {
		m = t->main;
		t->main = t->spare;
		t->spare = m;
		t->main->capacity = cap;        /* pick up a tuned capacity */
		t->main->objs[t->main->size++] = off;
		stat_inc(t, ST_FREE_FASTPATH);
		return 0;
	} else {
		struct shm_sheaf *e = get_empty(t, t->node, cap);
		m = t->main;
		if (e == NULL) {
			rc = -errno;
		} else {
			if (m != &sheaf_dummy) {
				if (t->spare == NULL)
					t->spare = m;
				else
					put_sheaf(t, m);
			}
			t->main = e;
			e->objs[e->size++] = off;
		}
	}
	if (rc != 0) {
		/* Only a timeout waiting for the engine gets here: undo the
		 * debug bit so the caller may retry the free. */
		if (t->cache->sc->flags & SHEAF_CACHE_F_DEBUG) {
			uint64_t bit;
			at_fetch_or_acqrel(inuse_word(t, off, &bit), bit);
		}
		return rc;
	}
	stat_inc(t, ST_FREE_SLOWPATH);
	return 0;
}

int sheaf_free(sheaf_cache_t *c, void *obj)
{
	struct tcache *t = tls_fast[c->slot];

	if (likely(t != NULL)) {
		uint64_t rel = (uint64_t)((char *)obj - t->base) - t->data_off;
		uint64_t in = rel & (SLAB_SIZE - 1);
		uint32_t f = (uint32_t)(rel >> SLAB_SHIFT);

		if (likely(rel < t->data_len &&
			   at_load_relaxed(&t->frame_owner[f]) == t->cache_id &&
			   in < t->slab_bytes &&
			   in * t->div_magic <= t->div_magic - 1 &&
			   (f >> t->node_frame_shift) == t->node)) {
			struct shm_sheaf *m = t->main;
			uint32_t n = m->size;
			if (likely(n < m->capacity)) {
				m->objs[n] = rel + t->data_off;
				m->size = n + 1;
				at_counter_add(&t->stat[ST_FREE_FASTPATH], 1);
				return 0;
			}
		}
	}
	return free_slow(c, obj);
}

/* ---- bulk --------------------------------------------------------------- */

int sheaf_alloc_bulk(sheaf_cache_t *c, void **objs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		objs[i] = sheaf_alloc(c);
		if (objs[i] == NULL) {
			int rc = -errno;
			sheaf_free_bulk(c, objs, i);
			for (size_t k = 0; k < i; k++)
				objs[k] = NULL;
			return rc;
		}
	}
	return 0;
}

int sheaf_free_bulk(sheaf_cache_t *c, void **objs, size_t n)
{
	int first = 0;

	for (size_t i = 0; i < n; i++) {
		int rc = sheaf_free(c, objs[i]);
		if (rc != 0 && first == 0)
			first = rc;
	}
	return first;
}
