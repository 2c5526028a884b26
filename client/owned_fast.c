/*
 * owned_fast.c - the fast paths of an owned cache (SHEAF_CACHE_OWNED,
 * shm/owner.h), out of line: the tag of each object names its holder, and
 * sheaf.h's inline paths cannot write it, so a thread's tcache of an owned
 * cache gives them an unused fast path (thread.c) and they always miss.
 * These are the same pop and push on the main sheaf, with the tag written
 * around them; the main sheaf's word changes as the inline paths change
 * it, so they count as alloc_fastpath / free_fastpath alike.  Debug caches
 * (in-use bits) take the slow path instead.  Also the tag of an object,
 * for the slow paths.
 *
 * Who may call: alloc.c and free.c (their public entries first try these,
 * then their slow paths, which tag through owned_tag_of).  The tags that a
 * shared queue moves are owner_handoff.c's.
 */
#include "shm/owner.h"
#include "shm/bounds.h"
#include "client/internal.h"

#ifdef SHEAF_TEST_HOOKS
void (*owned_stop_hook)(int step);
#endif

/* The tag of object @off (validated: a frame of the cache, an object
 * boundary): its index in the slab by the fast path's exact division
 * (struct sheaf__fast), no divide. */
_Atomic otag_t *owned_tag_of(struct tcache *t, uint64_t off)
{
	const struct shm_pool *p = tshm(t);
	uint64_t rel = off - p->data_off;
	uint32_t q = ((uint32_t)rel & (SLAB_SIZE - 1)) * t->f->div_inv, sh = t->f->div_shift;

	q = (q >> sh) | (q << ((0u - sh) & 31));
	return &p->tags[(rel >> SLAB_SHIFT) * SLAB_MAX_OBJS + q];
}

/* The calling thread's tcache of @c when @c is owned and not debug, else
 * NULL (the slow path then makes one, with errno). */
static inline struct tcache *owned_fast_tcache(sheaf_cache_t *c)
{
	if ((c->sc->flags & (SHEAF_CACHE_F_OWNED | SHEAF_CACHE_F_DEBUG)) != SHEAF_CACHE_F_OWNED)
		return NULL;
	return tcache_get(c);
}

void *owned_alloc_fast(sheaf_cache_t *c)
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
	/* the whole test (owned_tag_of divides by the object size): take
	 * drops an entry that fails */
	if (!SHEAF__FAST_VALID(t->f, t->f->base + off))
		return NULL;
	owner_alloc(owned_tag_of(t, off), me_of(t));  /* before the pop */
	OWNED_STOP(OS_ALLOC_TAGGED);
	at_store_relaxed(&m->word, w + SHEAF_WORD_OP - 1);
	OWNED_STOP(OS_ALLOC_POPPED);
	return t->f->base + off;
}

int owned_free_fast(sheaf_cache_t *c, void *obj, int *rc)
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
	tag = owned_tag_of(t, off);
	own = owner_free_begin(tag, me_of(t));
	if (own != 0) {         /* the repair frees it (and counts it), or nobody held it */
		if (own < 0)
			stat_inc(t, ST_FREE_INVALID);
		*rc = own < 0 ? own : 0;
		return 1;
	}
	*rc = 0;
	OWNED_STOP(OS_FREE_CLAIMED);
	m->objs[sheaf_slot(n)] = off;
	at_store_relaxed(&m->word, w + SHEAF_WORD_OP + 1);
	OWNED_STOP(OS_FREE_PUSHED);
	owner_free_end(tag);                    /* after the push */
	OWNED_STOP(OS_FREE_DONE);
	return 1;
}
