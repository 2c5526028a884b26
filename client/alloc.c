/*
 * alloc.c - the slow path of sheaf_alloc (sheaf__alloc_slow, called by the
 * inline sheaf_alloc of sheaf.h when its pop misses): an owned cache's
 * out-of-line pop first (owned_fast.c), else the pop of a checked entry
 * (take) from the main sheaf, the spare, the stash or a barn's full sheaf
 * (exchange.c), with sheaves disabled a barn's sheaf borrowed for one
 * object.  Also the external definition of sheaf_alloc, and the compile-time
 * checks that sheaf.h's private ABI matches the shared structures.
 *
 * Who may call: sheaf.h's inline sheaf_alloc (sheaf__alloc_slow is part of
 * the library's ABI); nothing else of libsheaf calls into this file.
 */
#include <errno.h>
#include "shm/owner.h"
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

/*
 * Take the object on top of @s; debug caches mark it in use first
 * (debug_track.c), owned caches tag it ours first (shm/owner.h).  The
 * entry is read once and checked (vet_top): the pool's other clients can
 * write a sheaf the thread holds, after its vet too, and an entry that is
 * no object of the cache is dropped, never handed out (the inline pops
 * leave such an entry to this path when it is outside the home node's
 * data).  NULL when @s held no object, or nothing but such entries.
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
	if (is_owned(t)) {
		owner_alloc(owned_tag_of(t, off), me_of(t));
		OWNED_STOP(OS_ALLOC_TAGGED);
	}
	if (is_debug(t))
		debug_track_mark(t, off);
	/* Counted in @st with the pop, exactly if the thread dies between
	 * the two (shm/lanes.h, lane_count_stage). */
	count_stage(t, s, n - 1, st);
	sheaf_set_size(s, n - 1);
	count_commit(t);
	if (is_owned(t))
		OWNED_STOP(OS_ALLOC_POPPED);
	return t->f->base + off;
}

/* Sheaves disabled: every alloc takes a sheaf from the barn and puts it back. */
static void *alloc_nosheaf(struct tcache *t)
{
	struct shm_sheaf *s = exchange_get_full(t, t->node);
	void *obj;

	if (s == NULL)
		return NULL;
	obj = take(t, s, ST_ALLOC_SLOWPATH);
	exchange_put(t, s);
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

		full = barn ? exchange_get_full(t, t->node) : t->stash_full[--t->nfull];
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
		exchange_retire_main(t, m, t->stash_empty, &t->nempty);
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

