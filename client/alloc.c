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

/* sheaf.h's inline fast paths see these structures through its private
 * ABI: keep the two in step. */
_Static_assert(offsetof(struct shm_sheaf, word) == offsetof(struct sheaf__sheaf, word) &&
	       offsetof(struct shm_sheaf, capacity) == offsetof(struct sheaf__sheaf, capacity) &&
	       offsetof(struct shm_sheaf, objs) == offsetof(struct sheaf__sheaf, objs),
	       "struct sheaf__sheaf does not match struct shm_sheaf");
_Static_assert(sizeof(struct sheaf__fast) == 64 && sizeof(struct sheaf_cache) == 64,
	       "handles and fast paths lie 64 bytes apart (SHEAF__FAST)");
_Static_assert(SHEAF_WORD_SIZE == SHEAF__WORD_SIZE && SHEAF_WORD_OP == SHEAF__WORD_OP,
	       "sheaf word");
_Static_assert(SLAB_SHIFT == SHEAF__FRAME_SHIFT, "slab frame size");
_Static_assert(sizeof(uint16_t) == sizeof(_Atomic uint16_t) &&
	       sizeof(uint64_t) == sizeof(_Atomic uint64_t), "atomic sizes");


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
	at_counter_add(&tstat(t)[s], 1);
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
	uint32_t c = t->f->cache_id, s;
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
	int64_t end = 0;

	for (;;) {
		int dep;
		uint32_t s = barn_get_empty(p, t->f->cache_id, node, cap, me_of(t),
					    intent_of(t), &dep);
		if (s != SHEAF_ID_NONE) {
			if (dep)
				stat_inc(t, ST_SHEAF_ALLOC);
			return pool_sheaf(p, s);
		}
		if (end == 0)           /* the clock only when it must wait */
			end = clock_ns() + t->cache->pool->wait_ns;
		if (clock_ns() >= end ||
		    barn_wait_supply(p, t->f->cache_id, node, end - clock_ns()) != 0) {
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

	if (sheaf_size(s) == 0) {
		barn_put_empty(p, t->f->cache_id, s->node, id, me_of(t), intent_of(t));
		return;
	}
	stat_inc(t, ST_BARN_PUT);
	if (barn_put_full(p, t->f->cache_id, s->node, id, me_of(t), intent_of(t)) >
	    at_load_relaxed(&t->cache->sc->barn_limit)) {
		stat_inc(t, ST_BARN_PUT_FAIL);
		node_ring_doorbell(p, s->node);        /* ask for a flush */
	}
}

/* Sheaves of each kind the thread may keep beyond main and spare: at most
 * STASH_MAX, and no more than STASH_BYTES of objects in full ones. */
static uint32_t stash_room(const struct tcache *t)
{
	uint64_t per = (uint64_t)cache_capacity(t) * t->cache->sc->obj_size;
	uint64_t n = per ? STASH_BYTES / per : 0;

	return n < STASH_MAX ? (uint32_t)n : STASH_MAX;
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
	w = inuse_word(t, (uint64_t)((char *)obj - t->f->base), &bit);
	at_fetch_or_acqrel(w, bit);
	return obj;
}

/* ---- alloc -------------------------------------------------------------- */

static inline void *pop(struct tcache *t, struct shm_sheaf *s)
{
	return t->f->base + sheaf_pop(s);
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

static void *alloc_slow(struct tcache *t)
{
	struct shm_sheaf *m, *full;
	void *obj;

	m = tmain(t);
	if (sheaf_size(m) > 0) {                /* debug caches come here */
		stat_inc(t, ST_ALLOC_FASTPATH);
		return debug_mark_alloc(t, pop(t, m));
	}
	if (t->spare != NULL && sheaf_size(t->spare) > 0) {
		tmain_set(t, t->spare);
		t->spare = m == &sheaf_dummy ? NULL : m;
		stat_inc(t, ST_ALLOC_FASTPATH);
		return debug_mark_alloc(t, pop(t, tmain(t)));
	}
	if (cache_capacity(t) == 0) {
		tcache_flush(t);                /* capacity tuned to 0 */
		obj = alloc_nosheaf(t);
	} else {
		full = t->nfull > 0 ? t->stash_full[--t->nfull] : get_full(t, t->node);
		if (full == NULL) {
			stat_inc(t, ST_ALLOC_FAIL);
			return NULL;
		}
		if (m != &sheaf_dummy) {
			if (t->spare == NULL)
				t->spare = m;
			else if (t->nempty < stash_room(t))
				t->stash_empty[t->nempty++] = m;
			else
				put_sheaf(t, m);
		}
		tmain_set(t, full);
		obj = pop(t, full);
	}
	if (obj == NULL) {
		stat_inc(t, ST_ALLOC_FAIL);
		return NULL;
	}
	stat_inc(t, ST_ALLOC_SLOWPATH);
	return debug_mark_alloc(t, obj);
}

void *sheaf__alloc_slow(sheaf_cache_t *c)
{
	struct tcache *t = tcache_get(c);
	void *obj;
	int rc;

	if (t == NULL)
		return NULL;
	rc = tcache_enter(t);           /* no destroy decides meanwhile */
	if (rc != 0) {
		errno = -rc;
		return NULL;
	}
	t->f->last = NULL;
	tcache_fold(t);
	obj = alloc_slow(t);
	tcache_publish(t);
	tcache_leave(t);
	return obj;
}

/* The external definition of sheaf.h's inline sheaf_alloc. */
extern inline void *sheaf_alloc(sheaf_cache_t *cache);

/* ---- free --------------------------------------------------------------- */

/* Full validation; 0 or -EFAULT / -EINVAL / -EALREADY (debug caches). */
static int free_check(struct tcache *t, void *obj, uint64_t off)
{
	int rc;
	uint64_t bit;
	_Atomic uint64_t *w;

	if (!(t->cache->sc->flags & SHEAF_CACHE_F_DEBUG)) {
		/* Mostly a free whose main sheaf was full: the fast path's
		 * test passed already; slab_validate names what is wrong. */
		return SHEAF__FAST_VALID(t->f, obj) ? 0 : slab_validate(tshm(t), t->f->cache_id, off);
	}
	rc = slab_validate(tshm(t), t->f->cache_id, off);
	if (rc != 0)
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
	if (r != NULL && sheaf_size(r) >= r->capacity) {
		put_sheaf(t, r);
		t->remote[node] = r = NULL;
	}
	if (r == NULL) {
		r = get_empty(t, node, barn_capacity(t));
		if (r == NULL)
			return -errno;
		t->remote[node] = r;
	}
	sheaf_push(r, off);
	return 0;
}

/* Sheaves disabled: push into a barn sheaf with room, or a fresh one. */
static int free_nosheaf(struct tcache *t, uint64_t off)
{
	struct shm_pool *p = tshm(t);
	uint32_t id = barn_get_full(p, t->f->cache_id, t->node, me_of(t), intent_of(t));
	struct shm_sheaf *s = id == SHEAF_ID_NONE ? NULL : pool_sheaf(p, id);

	if (s != NULL && sheaf_size(s) >= s->capacity) {
		put_sheaf(t, s);
		s = NULL;
	}
	if (s == NULL) {
		s = get_empty(t, t->node, barn_capacity(t));
		if (s == NULL)
			return -errno;
	}
	sheaf_push(s, off);
	put_sheaf(t, s);
	return 0;
}

static int free_slow(struct tcache *t, void *obj)
{
	uint64_t off;
	uint32_t node, cap;
	struct shm_sheaf *m;
	int rc;

	off = (uint64_t)((char *)obj - t->f->base);
	rc = free_check(t, obj, off);
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
	} else if (sheaf_size(tmain(t)) < tmain(t)->capacity) {
		m = tmain(t);
		sheaf_push(m, off);       /* debug caches come here */
		stat_inc(t, ST_FREE_FASTPATH);
		return 0;
	} else if (t->spare != NULL && sheaf_size(t->spare) == 0) {
		m = tmain(t);
		tmain_set(t, t->spare);
		t->spare = m;
		tmain(t)->capacity = cap;        /* pick up a tuned capacity */
		sheaf_push(tmain(t), off);
		stat_inc(t, ST_FREE_FASTPATH);
		return 0;
	} else {
		struct shm_sheaf *e;

		if (t->nempty > 0) {
			e = t->stash_empty[--t->nempty];
			e->capacity = cap;
		} else {
			e = get_empty(t, t->node, cap);
		}
		m = tmain(t);
		if (e == NULL) {
			rc = -errno;
		} else {
			if (m != &sheaf_dummy) {
				if (t->spare == NULL)
					t->spare = m;
				else if (t->nfull < stash_room(t))
					t->stash_full[t->nfull++] = m;
				else
					put_sheaf(t, m);
			}
			tmain_set(t, e);
			sheaf_push(e, off);
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

int sheaf__free_slow(sheaf_cache_t *c, void *obj)
{
	struct tcache *t = tcache_get(c);
	int rc;

	if (t == NULL)
		return -errno;
	rc = tcache_enter(t);           /* no destroy decides meanwhile */
	if (rc != 0)
		return rc;
	t->f->last = NULL;
	tcache_fold(t);
	rc = free_slow(t, obj);
	tcache_publish(t);
	tcache_leave(t);
	return rc;
}

/* The external definition of sheaf.h's inline sheaf_free. */
extern inline int sheaf_free(sheaf_cache_t *cache, void *obj);

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
