/*
 * owner.h - object ownership of SHEAF_CACHE_F_OWNED caches: one owner tag
 * per object, saying which client (process) holds it, so that sheafd can
 * free (or keep and report) what a dead client held.  docs/design.md,
 * "Object ownership".
 *
 * Who may call: any process of the pool: libsheaf's alloc and free
 * (owner_alloc, owner_free_begin, owner_free_end; client/alloc.c,
 * client/free.c, client/owned_fast.c) and queue hooks
 * (client/owner_handoff.c), and the engine, whose own side is
 * engine/owner.h.
 *
 * Where the tags live: the SHARED part (client-writable), one 16-bit tag
 * (otag_t: client ids reach 4095) per object slot, SLAB_MAX_OBJS tags per
 * slab frame (layout.h, off_tags),
 * parallel to the frames: object @idx of frame @f has tag
 * tags[f * SLAB_MAX_OBJS + idx].  Sparse: only owned caches' frames touch
 * their pages.
 *
 * Tag values: 0 nobody (free, or in a sheaf), client id + 1
 * (1..max_clients, at most 4096) held by that client, OWNER_TAG_QUEUED in
 * a shared queue, or on its way in or out under the moving thread's queue
 * record (nobody's: a dead producer's repair leaves it; shm/queue.h,
 * "queue records", says how the repair finishes a half-done move),
 * OWNER_TAG_KEPT a dead client's, kept (SHEAF_CACHE_F_KEEP),
 * OWNER_TAG_REPAIR the engine's repair is deciding.
 *
 * Who writes, and the order that makes a death at any instruction safe:
 *   alloc (client)  store tag = me BEFORE the pop that takes the object
 *                   from the thread's sheaf, then a release fence (pairs
 *                   with the repair's acquire fence after its sheaf scan):
 *                   a death between leaves the object in a sheaf the dead
 *                   client owned, which the repair returns first, clearing
 *                   its tag (owner_sheaf_untag).
 *   free (client)   CAS tag = me BEFORE the push (the repair's CAS to
 *                   REPAIR and this CAS are ordered on the one tag: if the
 *                   repair came first, the object is the repair's, the tag
 *                   stays REPAIR and the free is done, owner_free_begin),
 *                   store 0 AFTER the push.
 *   queue hooks     client/owner_handoff.h.
 *   engine          owner_sheaf_untag, owner_reclaim (dead-client repair,
 *                   under the engine's ctl_lock), owner_slab_init (a fresh
 *                   slab: tags 0, under its cache-node lock).
 *
 * The engine treats every tag as an untrusted hint: it names a candidate,
 * never a fact.  An object is freed by the repair only when its tag names
 * the dead client (CAS to REPAIR), its slab bit says it is not free (under
 * the cache-node lock), no sheaf of the cache holds it (a scan), and the
 * tag is still REPAIR after the scan; slab_free_objs validates it again.
 * A hostile tag can at worst make the engine free an object that a live
 * client of the same cache holds; it can never make the engine free an
 * object twice, read out of bounds or corrupt a slab.
 */
#ifndef SHEAF_SHM_OWNER_H
#define SHEAF_SHM_OWNER_H

#include <errno.h>
#include <stdint.h>
#include "pool.h"

#define OWNER_TAG_NONE    0x0000u
#define OWNER_TAG_QUEUED  0xfffdu
#define OWNER_TAG_KEPT    0xfffeu
#define OWNER_TAG_REPAIR  0xffffu

_Static_assert(SHEAF_MAX_CLIENTS < OWNER_TAG_QUEUED, "client tags fit below the specials");

static inline otag_t owner_tag_client(uint32_t client)
{
	return (otag_t)(client + 1);
}

/* The tag of object @off of cache @sc: @off validated by the caller (a
 * frame of the cache, an object boundary). */
static inline _Atomic otag_t *owner_tag(const struct shm_pool *p, const struct shm_cache *sc,
					 uint64_t off)
{
	uint32_t f = pool_frame_of(p, off);
	uint32_t idx = (uint32_t)((off - pool_frame_off(p, f)) / sc->obj_size);

	SHEAF_ASSERT(f < p->frames_total && idx < SLAB_MAX_OBJS);
	return &p->tags[(uint64_t)f * SLAB_MAX_OBJS + idx];
}

/* alloc: the object on top of the caller's sheaf becomes @me's; before the
 * pop (see above). */
static inline void owner_alloc(_Atomic otag_t *tag, uint32_t me)
{
	at_store_relaxed(tag, owner_tag_client(me));
	at_fence_release();
}

/*
 * free, before the push: claim the object for the freeing client @me.
 * Returns 0 (push it, then owner_free_end); 1 when the engine's repair had
 * claimed it for a dead holder: it frees it, the caller's free is done
 * (the tag left REPAIR); or -EALREADY when nobody held it (tag 0: free
 * already, e.g. freed by the repair after its holder died, or a double
 * free): nothing is changed or pushed.  An allocated object's tag is never 0 (owner_alloc
 * sets it before the object leaves its sheaf), so owned caches refuse
 * every double free that finds the object's tag cleared.
 */
static inline int owner_free_begin(_Atomic otag_t *tag, uint32_t me)
{
	otag_t mine = owner_tag_client(me), v = at_load_relaxed(tag);

	/* Ours already (the common case, an object this process allocated):
	 * no repair claims a live client's tag, so no CAS is needed.  Else
	 * a CAS from the value seen, never a blind exchange: REPAIR must
	 * stay for the repair's check after its sheaf scan (engine/owner.c). */
	for (int i = 0; i < 64 && v != mine; i++) {
		if (v == OWNER_TAG_REPAIR)
			return 1;
		if (v == OWNER_TAG_NONE)
			return -EALREADY;
		if (at_cas_acqrel(tag, &v, mine))
			return 0;
	}
	return 0;               /* ours, or a tag flipping for ever (hostile) */
}

/* free, after the push: nobody holds the object. */
static inline void owner_free_end(_Atomic otag_t *tag)
{
	at_store_release(tag, OWNER_TAG_NONE);
}

#endif
