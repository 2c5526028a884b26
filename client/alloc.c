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
#include "shm/owner.h"
#include "shm/slab_geom.h"
#include "shm/bounds.h"
#include "client/internal.h"
#include "client/vet.h"

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
_Static_assert(SHEAF_CAP_MAX == SHEAF__CAP_MAX && (SHEAF__CAP_MAX & (SHEAF__CAP_MAX - 1)) == 0,
	       "every sheaf has SHEAF__CAP_MAX slots, a power of two (the inline push's mask)");
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

/* A push or pop of the slow path and its count (shm/clients.h). */
static void count_stage(struct tcache *t, struct shm_sheaf *s, uint32_t size,
			enum sheaf_stat st)
{
	lane_count_stage(&t->cache->pool->shm, t->tp->lane, t->f->cache_id, st,
			 sheaf_index(t, s), size);
}

static void count_commit(struct tcache *t)
{
	lane_count_commit(&t->cache->pool->shm, t->tp->lane);
}

static uint32_t cache_capacity(const struct tcache *t)
{
	return at_load_relaxed(&t->cache->sc->sheaf_capacity);
}

/* The capacity barn sheaves get when sheaves are disabled for threads. */
static uint32_t barn_capacity(const struct tcache *t)
{
	uint32_t cap = cache_capacity(t);
	return cap ? cap : cache_default_capacity(t->cache->sc->obj_size);
}

/* ---- getting sheaves --------------------------------------------------- */

/*
 * A full sheaf of node @node's barn, vetted (vet_full), or NULL when the
 * barn has none.  One that held nothing valid goes back as an empty sheaf,
 * and the next is taken (the barn's sheaves bound the loop).
 */
static struct shm_sheaf *take_full(struct tcache *t, uint32_t node)
{
	struct shm_pool *p = tshm(t);
	uint32_t c = t->f->cache_id, s;

	while ((s = barn_get_full(p, c, node, me_of(t), intent_of(t))) != SHEAF_ID_NONE) {
		struct shm_sheaf *sh = vet_full(t, pool_sheaf(p, s));

		if (likely(sheaf_size(sh) > 0))
			return sh;
		barn_put_empty(p, c, node, s, me_of(t), intent_of(t));
	}
	return NULL;
}

/*
 * A full sheaf of node @node's barn, waiting for the engine if needed.
 * Returns NULL with errno ENOMEM (starved everywhere) or EAGAIN (timeout).
 */
static struct shm_sheaf *get_full(struct tcache *t, uint32_t node)
{
	struct shm_pool *p = tshm(t);
	uint32_t c = t->f->cache_id;
	struct shm_sheaf *s;
	int64_t end = 0;
	int fresh = 0;

	for (;;) {
		s = take_full(t, node);
		if (s != NULL) {
			struct ring_ref full = pool_full_ref(p, c, node);

			stat_inc(t, ST_BARN_GET);
			if (ring_count(&full) < at_load_relaxed(&t->cache->sc->barn_low))
				node_ring_doorbell(p, node);   /* restock early */
			return s;
		}
		stat_inc(t, ST_BARN_GET_FAIL);
		if (at_load_acquire(&pool_barn(p, c, node)->starved)) {
			/* Take what other nodes' barns hold, never waiting. */
			for (uint32_t k = 1; k < p->nodes; k++) {
				uint32_t m = (node + k) % p->nodes;
				s = take_full(t, m);
				if (s != NULL) {
					stat_inc(t, ST_BARN_GET);
					return s;
				}
			}
			/* Starved by a verdict made after this call began. */
			if (fresh) {
				errno = ENOMEM;
				return NULL;
			}
		}
		/* One deadline for every wait of this call: verdicts that
		 * never leave a sheaf for us (others took it, or a ring that
		 * takes nothing) end in EAGAIN, not in an endless loop. */
		if (end == 0)
			end = clock_ns() + t->cache->pool->wait_ns;
		if (clock_ns() >= end ||
		    barn_wait_supply(p, c, node, end - clock_ns()) != 0) {
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

/* A barn over barn_limit: over what the engine keeps now too?  (Only then
 * is a flush worth a doorbell; barn.h, barn_flush_limit.) */
static int barn_put_over(struct tcache *t)
{
	struct ring_ref full;
	uint32_t keep = barn_flush_limit(tshm(t), t->cache->sc, t->node);

	full = pool_full_ref(tshm(t), t->f->cache_id, t->node);
	return ring_count(&full) > keep;
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
	    at_load_relaxed(&t->cache->sc->barn_limit) &&
	    barn_put_over(t)) {
		stat_inc(t, ST_BARN_PUT_FAIL);
		node_ring_doorbell(p, s->node);        /* ask for a flush */
	}
}

/* Sheaves of each kind the thread may keep beyond main and spare: at most
 * the cache's stash_sheaves (SHEAF_STASH_LIMIT), and no more than its
 * stash_bytes of objects in full ones (tunables, shm/tune.c). */
static uint32_t stash_room(const struct tcache *t)
{
	const struct shm_cache *sc = t->cache->sc;
	uint64_t per = (uint64_t)cache_capacity(t) * sc->obj_size;
	uint64_t n = per ? at_load_relaxed(&sc->stash_bytes) / per : 0;
	uint32_t max = at_load_relaxed(&sc->stash_sheaves);

	if (max > SHEAF_STASH_LIMIT)
		max = SHEAF_STASH_LIMIT;
	return n < max ? (uint32_t)n : max;
}

/* The main sheaf @m that a new main replaces: the spare when there is none,
 * else kept in @stash (the stash of its kind, *@n in it) while room is
 * left, else back to the barn; the dummy is nobody's. */
static void retire_main(struct tcache *t, struct shm_sheaf *m, struct shm_sheaf **stash,
			uint32_t *n)
{
	if (m == &sheaf_dummy)
		return;
	if (t->spare == NULL)
		t->spare = m;
	else if (*n < stash_room(t))
		stash[(*n)++] = m;
	else
		put_sheaf(t, m);
}

/* ---- debug tracking ---------------------------------------------------- */

/*
 * Debug caches keep an in-use bit per object.  The bit and the sheaf change
 * in an order that a killed thread cannot break: alloc sets the bit before
 * the pop, free clears it after the push.  A death between the two steps
 * leaves the object in a sheaf (or, once the repair flushed the dead
 * client's sheaves, free in its slab) with its bit set: still allocatable
 * (alloc sets the bit again), and pool_check clears such a bit of an object
 * free in its slab.  The opposite order lost the object: out of every
 * sheaf with its bit clear, so that no free could ever take it back.
 */
static int is_debug(const struct tcache *t)
{
	return (t->cache->sc->flags & SHEAF_CACHE_F_DEBUG) != 0;
}

static _Atomic uint64_t *inuse_word(struct tcache *t, uint64_t off, uint64_t *bit)
{
	struct shm_pool *p = tshm(t);
	uint32_t f = pool_frame_of(p, off);
	uint32_t idx = (uint32_t)((off - pool_frame_off(p, f)) / t->cache->sc->obj_size);

	*bit = 1ull << (idx % 64);
	return &pool_inuse(p, f)[idx / 64];
}

/* Debug caches: is @off (validated) allocated? */
static int debug_allocated(struct tcache *t, uint64_t off)
{
	uint64_t bit;
	_Atomic uint64_t *w = inuse_word(t, off, &bit);

	return (at_load_acquire(w) & bit) != 0;
}

/*
 * Debug caches, after pushing @off onto @s: clear its bit.  By fetch_and, so
 * that of two racing frees of one object exactly one wins; the loser takes
 * its push back (still on top of @s, which this thread holds): -EALREADY.
 */
static int debug_commit_free(struct tcache *t, struct shm_sheaf *s, uint64_t off)
{
	uint64_t bit;
	_Atomic uint64_t *w;

	if (!is_debug(t))
		return 0;
	w = inuse_word(t, off, &bit);        /* sets bit: a statement of its own */
	if (at_fetch_and_acqrel(w, ~bit) & bit)
		return 0;
	(void)sheaf_pop(s);
	return -EALREADY;
}

/* ---- owned caches ------------------------------------------------------ */

/* Owned caches (shm/owner.h) tag each object with its holder, in the slow
 * path (their inline paths always miss, thread.c). */
static int is_owned(const struct tcache *t)
{
	return (t->cache->sc->flags & SHEAF_CACHE_F_OWNED) != 0;
}

/* The tag of object @off (validated: a frame of the cache, an object
 * boundary): its index in the slab by the fast path's exact division
 * (struct sheaf__fast), no divide. */
static _Atomic otag_t *tag_of(struct tcache *t, uint64_t off)
{
	const struct shm_pool *p = tshm(t);
	uint64_t rel = off - p->data_off;
	uint32_t q = ((uint32_t)rel & (SLAB_SIZE - 1)) * t->f->div_inv, sh = t->f->div_shift;

	q = (q >> sh) | (q << ((0u - sh) & 31));
	return &p->tags[(rel >> SLAB_SHIFT) * SLAB_MAX_OBJS + q];
}

/*
 * Owned caches' inline paths always miss (thread.c); these are the same
 * fast paths out of line, with the tag (shm/owner.h): the main sheaf's
 * word changes as the inline paths change it, so they count as
 * alloc_fastpath / free_fastpath alike.  Debug caches (in-use bits) take
 * the slow path.  NULL / 0: take the slow path; the free's 1: done, with
 * *@rc (0, or -EALREADY: the object's tag says nobody held it).
 */
static inline struct tcache *owned_fast_tcache(sheaf_cache_t *c)
{
	if ((c->sc->flags & (SHEAF_CACHE_F_OWNED | SHEAF_CACHE_F_DEBUG)) != SHEAF_CACHE_F_OWNED)
		return NULL;
	return tcache_get(c);
}

static void *owned_alloc_fast(sheaf_cache_t *c)
{
	struct tcache *t = owned_fast_tcache(c);
	struct shm_sheaf *m;
	uint64_t w, n, off;

	if (t == NULL)
		return NULL;
	m = tmain(t);
	w = at_load_relaxed(&m->word);
	n = w & SHEAF_WORD_SIZE;
	if (n == 0)
		return NULL;
	off = ut_load64(&m->objs[sheaf_slot(n - 1)]);
	/* the whole test (tag_of divides by the object size): take drops
	 * an entry that fails */
	if (!SHEAF__FAST_VALID(t->f, t->f->base + off))
		return NULL;
	owner_alloc(tag_of(t, off), me_of(t));  /* before the pop */
	at_store_relaxed(&m->word, w + SHEAF_WORD_OP - 1);
	return t->f->base + off;
}

static int owned_free_fast(sheaf_cache_t *c, void *obj, int *rc)
{
	struct tcache *t = owned_fast_tcache(c);
	struct shm_sheaf *m;
	_Atomic otag_t *tag;
	uint64_t w, n, off;
	int own;

	if (t == NULL || !SHEAF__FAST_VALID(t->f, obj))
		return 0;
	m = tmain(t);
	w = at_load_relaxed(&m->word);
	n = w & SHEAF_WORD_SIZE;
	off = (uint64_t)((char *)obj - t->f->base);
	if (n >= m->capacity || (n > 0 && m->objs[sheaf_slot(n - 1)] == off))
		return 0;
	tag = tag_of(t, off);
	own = owner_free_begin(tag, me_of(t));
	if (own != 0) {         /* the repair frees it (and counts it), or nobody held it */
		if (own < 0)
			stat_inc(t, ST_FREE_INVALID);
		*rc = own < 0 ? own : 0;
		return 1;
	}
	*rc = 0;
	m->objs[sheaf_slot(n)] = off;
	at_store_relaxed(&m->word, w + SHEAF_WORD_OP + 1);
	owner_free_end(tag);                    /* after the push */
	return 1;
}

/* ---- alloc -------------------------------------------------------------- */

/*
 * Take the object on top of @s; debug caches mark it in use first (see
 * above), owned caches tag it ours first (shm/owner.h).  The entry is read
 * once and checked (vet_top): the pool's other clients can write a sheaf
 * the thread holds, after its vet too, and an entry that is no object of
 * the cache is dropped, never handed out (the inline pops leave such an
 * entry to this path when it is outside the home node's data).  NULL when
 * @s held no object, or nothing but such entries.
 */
static void *take(struct tcache *t, struct shm_sheaf *s, enum sheaf_stat st)
{
	uint32_t n = sheaf_size(s);
	uint64_t off;

	if (unlikely(n > SHEAF_CAP_MAX))        /* a peer's size: as vet_full */
		n = SHEAF_CAP_MAX;
	for (;; n--) {
		if (n == 0) {
			sheaf_set_size(s, 0);
			return NULL;
		}
		off = ut_load64(&s->objs[sheaf_slot(n - 1)]);
		if (likely(vet_top(t, off)))
			break;
	}
	if (is_owned(t))
		owner_alloc(tag_of(t, off), me_of(t));
	if (is_debug(t)) {
		uint64_t bit;
		_Atomic uint64_t *w = inuse_word(t, off, &bit);

		at_fetch_or_acqrel(w, bit);
	}
	/* Counted in @st with the pop, exactly if the thread dies between
	 * the two (shm/clients.h, lane_count_stage). */
	count_stage(t, s, n - 1, st);
	sheaf_set_size(s, n - 1);
	count_commit(t);
	return t->f->base + off;
}

/* Sheaves disabled: every alloc takes a sheaf from the barn and puts it back. */
static void *alloc_nosheaf(struct tcache *t)
{
	struct shm_sheaf *s = get_full(t, t->node);
	void *obj;

	if (s == NULL)
		return NULL;
	obj = take(t, s, ST_ALLOC_SLOWPATH);
	put_sheaf(t, s);
	if (obj == NULL)                        /* spoiled since its vet */
		errno = EAGAIN;
	return obj;
}

static void *alloc_slow(struct tcache *t)
{
	struct shm_sheaf *m, *full;
	void *obj;

	m = tmain(t);
	/* debug caches come here; so does a main sheaf whose top entry is
	 * outside the home node's data (a peer wrote it: take drops it) */
	if (sheaf_size(m) > 0 && (obj = take(t, m, ST_ALLOC_FASTPATH)) != NULL)
		return obj;
	if (t->spare != NULL && sheaf_size(t->spare) > 0) {
		tmain_set(t, t->spare);
		t->spare = m == &sheaf_dummy ? NULL : m;
		if ((obj = take(t, tmain(t), ST_ALLOC_FASTPATH)) != NULL)
			return obj;
		m = tmain(t);                   /* emptied by take's drops */
	}
	if (cache_capacity(t) == 0) {
		tcache_flush(t);                /* capacity tuned to 0 */
		obj = alloc_nosheaf(t);
	} else {
		int barn = t->nfull == 0;

		full = barn ? get_full(t, t->node) : t->stash_full[--t->nfull];
		if (full == NULL) {
			stat_inc(t, ST_ALLOC_FAIL);
			return NULL;
		}
		/* A barn's sheaf in rising addresses: maybe copied into the
		 * empty main, which is then the full one (vet.c, Order). */
		if (barn && m != &sheaf_dummy && vet_rising(m, full) == m) {
			m = full;
			full = tmain(t);
		}
		retire_main(t, m, t->stash_empty, &t->nempty);
		tmain_set(t, full);
		obj = take(t, full, ST_ALLOC_SLOWPATH);
		if (obj == NULL)                /* spoiled since its vet */
			errno = EAGAIN;
	}
	if (obj == NULL)
		stat_inc(t, ST_ALLOC_FAIL);
	return obj;
}

void *sheaf__alloc_slow(sheaf_cache_t *c)
{
	struct tcache *t;
	void *obj;
	int rc;

	if (c->pool == NULL) {          /* its pool was destroyed or disconnected */
		errno = EINVAL;
		return NULL;
	}
	if ((obj = owned_alloc_fast(c)) != NULL)
		return obj;
	t = tcache_get(c);
	if (t == NULL)
		return NULL;
	rc = tcache_enter(t);           /* no destroy decides meanwhile */
	if (rc != 0) {
		errno = -rc;
		return NULL;
	}
	tcache_fold(t);
	obj = alloc_slow(t);
	tcache_publish(t);
	tcache_leave(t);
	return obj;
}

/* The external definition of sheaf.h's inline sheaf_alloc. */
extern inline void *sheaf_alloc(sheaf_cache_t *cache);

/* ---- free --------------------------------------------------------------- */

/* @off is the object on top of @s: an immediate double free. */
static int on_top(struct shm_sheaf *s, uint64_t off)
{
	uint32_t n = s != NULL ? sheaf_size(s) : 0;

	return n > 0 && s->objs[sheaf_slot(n - 1)] == off;
}

/*
 * Every test before a sheaf is touched; 0 or -EFAULT / -EINVAL / -EALREADY
 * (the object on top of the sheaf it would go to; a debug cache's object
 * whose bit is clear).  *@node: the object's node.
 */
static int free_check(struct tcache *t, void *obj, uint64_t off, uint32_t *node)
{
	struct shm_sheaf *to;
	int rc = 0;

	/* Mostly a free whose main sheaf was full: the fast path's test
	 * passed already; slab_validate names what is wrong. */
	if (is_debug(t) || !SHEAF__FAST_VALID(t->f, obj))
		rc = slab_validate(tshm(t), t->f->cache_id, off);
	if (rc != 0)
		return rc;
	if (is_debug(t) && !debug_allocated(t, off))
		return -EALREADY;
	*node = pool_node_of_frame(tshm(t), pool_frame_of(tshm(t), off));
	to = *node == t->node ? tmain(t) : t->remote[*node];
	return on_top(to, off) ? -EALREADY : 0;
}

/* An empty sheaf for (cache, @node) if there is one at once: the barn's
 * empty ring or the depot. */
static struct shm_sheaf *empty_now(struct tcache *t, uint32_t node, uint32_t cap)
{
	int dep;
	uint32_t s = barn_get_empty(tshm(t), t->f->cache_id, node, cap, me_of(t),
				    intent_of(t), &dep);

	if (s == SHEAF_ID_NONE)
		return NULL;
	if (dep)
		stat_inc(t, ST_SHEAF_ALLOC);
	return pool_sheaf(tshm(t), s);
}

/*
 * Room without an empty sheaf: every sheaf holds SHEAF_CAP_MAX offsets
 * whatever its capacity (a policy), so a full sheaf the thread holds with
 * a smaller capacity grows to that.  Returns @s, or NULL when it cannot grow.
 * Its size is client-writable: one not below SHEAF_CAP_MAX (a scribble)
 * has no room even grown, and the caller's push at objs[size] would land
 * past the sheaf's end, in the next sheaf, maybe another cache's
 * (test_untrusted grow_bounded_by_size; test_hostile: "sheaf 191: object
 * 0x38e9f400 not in a slab of cache 0").
 */
static struct shm_sheaf *grow(struct shm_sheaf *s)
{
	if (s == NULL || s == &sheaf_dummy || s->capacity >= SHEAF_CAP_MAX ||
	    sheaf_size(s) >= SHEAF_CAP_MAX)
		return NULL;
	s->capacity = SHEAF_CAP_MAX;
	return s;
}

/*
 * Before waiting for an empty sheaf: hand the thread's full sheaves beyond
 * main to the barn, where other threads' allocs can use them and the
 * engine flushes them for a waiting free (engine_worker.c).
 */
static void give_back_full(struct tcache *t)
{
	while (t->nfull > 0)
		put_sheaf(t, t->stash_full[--t->nfull]);
	if (t->spare != NULL && sheaf_size(t->spare) > 0) {
		put_sheaf(t, t->spare);
		t->spare = NULL;
	}
}

/* Room on the main sheaf, which is full: the spare if empty, else an empty
 * sheaf (stash, barn, depot), else main grown, else wait for the engine. */
static struct shm_sheaf *main_room(struct tcache *t, uint32_t cap)
{
	struct shm_sheaf *m = tmain(t), *e;

	if (t->spare != NULL && sheaf_size(t->spare) == 0) {
		tmain_set(t, t->spare);
		t->spare = m;
		tmain(t)->capacity = cap;        /* pick up a tuned capacity */
		return tmain(t);
	}
	if (t->nempty > 0) {
		e = t->stash_empty[--t->nempty];
		e->capacity = cap;
	} else {
		e = empty_now(t, t->node, cap);
	}
	if (e == NULL && grow(m) != NULL)
		return m;
	if (e == NULL) {
		give_back_full(t);
		e = get_empty(t, t->node, cap);
		if (e == NULL)
			return NULL;
	}
	retire_main(t, m, t->stash_full, &t->nfull);
	tmain_set(t, e);
	return e;
}

/* A sheaf with room for an object of another node; a full one goes to that
 * node's barn whole (unless no empty sheaf is to be had at once: it grows). */
static struct shm_sheaf *remote_room(struct tcache *t, uint32_t node)
{
	struct shm_sheaf *r = t->remote[node], *e;

	stat_inc(t, ST_FREE_REMOTE);
	if (r != NULL && sheaf_size(r) < r->capacity)
		return r;
	e = empty_now(t, node, barn_capacity(t));
	if (e == NULL && grow(r) != NULL)
		return r;
	if (r != NULL)
		put_sheaf(t, r);
	t->remote[node] = NULL;
	if (e == NULL)
		e = get_empty(t, node, barn_capacity(t));
	t->remote[node] = e;
	return e;
}

/* Sheaves disabled: a barn sheaf with room, or a fresh one (grown when none
 * is to be had at once).  The caller pushes and puts it back. */
static struct shm_sheaf *nosheaf_room(struct tcache *t)
{
	struct shm_pool *p = tshm(t);
	uint32_t id = barn_get_full(p, t->f->cache_id, t->node, me_of(t), intent_of(t));
	struct shm_sheaf *s = id == SHEAF_ID_NONE ? NULL : vet_full(t, pool_sheaf(p, id)), *e;

	if (s != NULL && sheaf_size(s) < s->capacity)
		return s;
	e = empty_now(t, t->node, barn_capacity(t));
	if (e == NULL && grow(s) != NULL)
		return s;
	if (s != NULL)
		put_sheaf(t, s);
	return e != NULL ? e : get_empty(t, t->node, barn_capacity(t));
}

static int free_slow(struct tcache *t, void *obj)
{
	uint64_t off = (uint64_t)((char *)obj - t->f->base);
	uint32_t node, cap;
	struct shm_sheaf *s;
	int rc, fast = 0, nosheaf = 0;

	rc = free_check(t, obj, off, &node);
	if (rc != 0) {
		stat_inc(t, ST_FREE_INVALID);
		return rc;
	}
	/* Owned: ours before the push; the engine's repair may have freed
	 * it for a dead holder already (shm/owner.h). */
	if (is_owned(t)) {
		rc = owner_free_begin(tag_of(t, off), me_of(t));
		if (rc == 1)
			return 0;   /* the repair frees it, and counts it */
		if (rc != 0) {      /* -EALREADY: nobody held it */
			stat_inc(t, ST_FREE_INVALID);
			return rc;
		}
	}
	cap = cache_capacity(t);
	if (node != t->node) {
		s = remote_room(t, node);
	} else if (cap == 0) {
		tcache_flush(t);
		s = nosheaf_room(t);
		nosheaf = 1;
	} else if (sheaf_size(tmain(t)) < tmain(t)->capacity) {
		s = tmain(t);           /* debug caches come here */
		fast = 1;
	} else {
		fast = t->spare != NULL && sheaf_size(t->spare) == 0;
		s = main_room(t, cap);
	}
	/* Only a timeout waiting for the engine leaves no sheaf. */
	if (s == NULL)
		return -EAGAIN;
	/* Counted with the push, exactly if the thread dies between the
	 * two; a push taken back (a debug cache's double free) counts
	 * nothing. */
	count_stage(t, s, sheaf_size(s) + 1, fast ? ST_FREE_FASTPATH : ST_FREE_SLOWPATH);
	sheaf_push(s, off);
	rc = debug_commit_free(t, s, off);
	if (rc == 0)
		count_commit(t);
	else
		lane_count_drop(t->tp->lane);
	if (is_owned(t))
		owner_free_end(tag_of(t, off));
	if (nosheaf)
		put_sheaf(t, s);
	if (rc != 0) {
		stat_inc(t, ST_FREE_INVALID);
		return rc;
	}
	return 0;
}

int sheaf__free_slow(sheaf_cache_t *c, void *obj)
{
	struct tcache *t;
	int rc, saved = errno;  /* int functions leave errno alone */

	if (obj == NULL)                /* as free(NULL) */
		return 0;
	if (c->pool == NULL)            /* its pool was destroyed or disconnected */
		return -EINVAL;
	if (owned_free_fast(c, obj, &rc)) {
		errno = saved;
		return rc;
	}
	t = tcache_get(c);
	if (t == NULL) {
		rc = -errno;
	} else if ((rc = tcache_enter(t)) == 0) {   /* no destroy decides meanwhile */
		tcache_fold(t);
		rc = free_slow(t, obj);
		tcache_publish(t);
		tcache_leave(t);
	}
	errno = saved;
	return rc;
}

/* The external definition of sheaf.h's inline sheaf_free. */
extern inline int sheaf_free(sheaf_cache_t *cache, void *obj);

/* ---- bulk --------------------------------------------------------------- */

/*
 * The bulk calls take and put runs of objects on the thread's main sheaf
 * at once: one store of its word per run (the size and the operation count
 * move by the run's length, so the fast-path counts come out as for single
 * calls), and the slow path, through a single call, when the sheaf runs
 * empty or full.  Each object freed passes the inline path's test and may
 * not equal the object below it (the sheaf's top, as sheaf_free refuses);
 * the first that fails goes through sheaf_free alone.  A thread killed
 * part-way leaves a prefix done, as a loop of single calls would.
 */
int sheaf_alloc_bulk(sheaf_cache_t *c, void **objs, size_t n)
{
	size_t i = 0;

	while (i < n) {
		struct sheaf__fast *f = SHEAF__FAST(c);
		struct sheaf__sheaf *m = f->main;
		uint64_t w = __atomic_load_n(&m->word, __ATOMIC_RELAXED);
		uint64_t have = w & SHEAF__WORD_SIZE, k = 0;

		/* A size over SHEAF__CAP_MAX (a peer's scribble): one at a
		 * time, as sheaf_alloc indexes objs[] (never past the sheaf). */
		if (have != 0 && have <= SHEAF__CAP_MAX) {
			uint64_t want = have < n - i ? have : n - i;

			/* the order of k sheaf_alloc calls, each entry in the
			 * home node's data (sheaf_alloc's test) */
			for (; k < want; k++) {
				char *p = f->base + __atomic_load_n(&m->objs[have - 1 - k],
								    __ATOMIC_RELAXED);

				if (!SHEAF__POP_OK(f, p))
					break;
				objs[i + k] = p;
			}
		}
		if (k > 0) {
			__atomic_store_n(&m->word, w - k + k * SHEAF__WORD_OP, __ATOMIC_RELAXED);
			i += k;
			continue;
		}
		/* empty, or its top for the slow path: one sheaf_alloc */
		if ((objs[i] = sheaf_alloc(c)) == NULL) {
			int rc = -errno;

			sheaf_free_bulk(c, objs, i);
			for (size_t j = 0; j < i; j++)
				objs[j] = NULL;
			return rc;
		}
		i++;
	}
	return 0;
}

int sheaf_free_bulk(sheaf_cache_t *c, void **objs, size_t n)
{
	size_t i = 0;
	int first = 0;

	while (i < n) {
		struct sheaf__fast *f = SHEAF__FAST(c);
		struct sheaf__sheaf *m = f->main;
		uint64_t w = __atomic_load_n(&m->word, __ATOMIC_RELAXED);
		uint64_t size = w & SHEAF__WORD_SIZE, k = 0;
		/* size and capacity are client-writable: room only inside
		 * objs[] (a spoiled sheaf goes through sheaf_free) */
		uint64_t cap = m->capacity < SHEAF__CAP_MAX ? m->capacity : SHEAF__CAP_MAX;
		uint64_t room = size < cap ? cap - size : 0;
		uint64_t below = size > 0 ? m->objs[(size - 1) & (SHEAF__CAP_MAX - 1)] : UINT64_MAX;

		while (k < room && i + k < n) {
			void *obj = objs[i + k];
			uint64_t off = (uint64_t)((char *)obj - f->base);

			if (!SHEAF__FAST_VALID(f, obj) || off == below)
				break;
			m->objs[size + k] = off;     /* above the size: not held yet */
			below = off;
			k++;
		}
		if (k > 0) {
			__atomic_store_n(&m->word, w + k + k * SHEAF__WORD_OP, __ATOMIC_RELAXED);
			i += k;
		}
		if (i < n && (k == 0 || k == room)) {
			/* The sheaf is full, or the run stopped at this object:
			 * alone, through sheaf_free. */
			int rc = sheaf_free(c, objs[i]);

			if (rc != 0 && first == 0)
				first = rc;
			i++;
		}
	}
	return first;
}
