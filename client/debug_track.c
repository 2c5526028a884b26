/*
 * debug_track.c - the in-use bit of each object of a debug cache
 * (SHEAF_CACHE_DEBUG): set by an alloc, cleared by a free, so that a free
 * of an object not allocated is refused (-EALREADY) whatever sheaf it is in.
 *
 * Who may call: the slow paths of the object path (alloc.c, free.c), on
 * an offset already validated as an object of the cache; for a debug
 * cache only (is_debug), but debug_track_commit_free, which is a no-op
 * for any other.
 *
 * The bit and the sheaf change in an order that a killed thread cannot
 * break: alloc sets the bit before the pop, free clears it after the push.
 * A death between the two steps leaves the object in a sheaf (or, once the
 * repair flushed the dead client's sheaves, free in its slab) with its bit
 * set: still allocatable (alloc sets the bit again), and pool_check clears
 * such a bit of an object free in its slab.  The opposite order would lose
 * the object: out of every sheaf with its bit clear, so that no free could
 * ever take it back.
 */
#include <errno.h>
#include "client/internal.h"

static _Atomic uint64_t *inuse_word(struct tcache *t, uint64_t off, uint64_t *bit)
{
	struct shm_pool *p = tshm(t);
	uint32_t f = pool_frame_of(p, off);
	uint32_t idx = (uint32_t)((off - pool_frame_off(p, f)) / t->cache->sc->obj_size);

	*bit = 1ull << (idx % 64);
	return &pool_inuse(p, f)[idx / 64];
}

int debug_track_allocated(struct tcache *t, uint64_t off)
{
	uint64_t bit;
	_Atomic uint64_t *w = inuse_word(t, off, &bit);

	return (at_load_acquire(w) & bit) != 0;
}

void debug_track_mark(struct tcache *t, uint64_t off)
{
	uint64_t bit;
	_Atomic uint64_t *w = inuse_word(t, off, &bit);

	at_fetch_or_acqrel(w, bit);
}

int debug_track_commit_free(struct tcache *t, struct shm_sheaf *s, uint64_t off)
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
