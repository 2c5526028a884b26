/*
 * owner_handoff.c - the hooks of owner_handoff.h: move an object's owner
 * tag (shm/owner.h) when a shared queue hands it from one process to
 * another, without a free and an alloc.  Who may call: queue.c.  The tags
 * that an owned cache's alloc and free write are owned_fast.c's and the
 * slow paths'.
 */
#include <sched.h>
#include "client/internal.h"
#include "client/owner_handoff.h"
#include "shm/futex.h"
#include "shm/owner.h"
#include "shm/slab_geom.h"

/* The tag of @obj when it is an object of an owned cache of @pool, else
 * NULL.  The cache is the frame's (the owner map: engine-owned). */
static _Atomic otag_t *tag_of_obj(struct sheaf_pool *pool, void *obj)
{
	struct shm_pool *p = &pool->shm;
	uint64_t off = (uint64_t)((char *)obj - p->base);
	uint32_t c;

	if (obj == NULL || off - p->data_off >= p->data_len)
		return NULL;
	c = at_load_acquire(&p->frame_owner[pool_frame_of(p, off)]);
	if (c >= p->max_caches || !(p->caches[c].flags & SHEAF_CACHE_F_OWNED) ||
	    slab_validate(p, c, off) != 0)
		return NULL;
	return owner_tag(p, &p->caches[c], off);
}

void owner_on_enqueue(struct sheaf_pool *pool, void *obj)
{
	_Atomic otag_t *t = tag_of_obj(pool, obj);

	if (t != NULL)
		at_store_release(t, OWNER_TAG_QUEUED);
}

/* How long a tag held by the repair (REPAIR) is waited for: the repair
 * holds a queued object's tag only while it looks for it in the queues
 * and the records (engine/owner.c); one held longer is a hostile
 * client's, taken all the same. */
#define TAKE_WAIT_NS (1000ll * 1000 * 1000)

void owner_on_dequeue(struct sheaf_pool *pool, void *obj)
{
	_Atomic otag_t *t = tag_of_obj(pool, obj);
	const otag_t mine = owner_tag_client(pool->client);
	int64_t deadline = 0;
	otag_t v;

	if (t == NULL)
		return;
	/* A CAS from the value seen, never a blind store: REPAIR must stay
	 * until the repair decides (it gives the object back QUEUED, as
	 * this thread's queue record names it). */
	v = at_load_acquire(t);
	for (int i = 0; i < 64; i++) {
		if (v == mine)
			return;
		if (v == OWNER_TAG_REPAIR) {
			int64_t now = clock_ns();

			if (deadline == 0) {
				deadline = now + TAKE_WAIT_NS;
			} else if (now > deadline) {
				break;
			}
			i = 0;
			sched_yield();
			v = at_load_acquire(t);
			continue;
		}
		if (at_cas_acqrel(t, &v, mine))
			return;
	}
	at_store_release(t, mine);      /* a tag flipping for ever (hostile) */
}

void owner_on_topic_publish(struct sheaf_pool *pool, void *obj)
{
	_Atomic otag_t *t = tag_of_obj(pool, obj);
	otag_t me = owner_tag_client(pool->client);

	if (t != NULL)
		at_cas_release(t, &me, (otag_t)OWNER_TAG_QUEUED);
}

int owner_on_topic_last(struct sheaf_pool *pool, void *obj, int take)
{
	_Atomic otag_t *t = tag_of_obj(pool, obj);
	otag_t me = owner_tag_client(pool->client);
	otag_t cur;

	if (t == NULL)
		return 1;
	if (take == 0) {
		at_cas_release(t, &me, (otag_t)OWNER_TAG_QUEUED);
		return 1;
	}
	/* From what it says, never over a repair's claim or a free object's
	 * 0; from another client's id only when told (@take 2): that client
	 * may be the one whose CAS clears the last reference, and the tag
	 * must name whoever does, or its death between that CAS and its
	 * free leaves the object QUEUED with no reference, for good. */
	cur = at_load_acquire(t);
	for (int i = 0; i < 64; i++) {
		if (cur == me || cur == OWNER_TAG_REPAIR || cur == OWNER_TAG_KEPT ||
		    cur == OWNER_TAG_NONE)
			return 1;
		if (cur != OWNER_TAG_QUEUED && take == 1)
			return 0;
		if (at_cas_acqrel(t, &cur, me))
			return 1;
	}
	return 1;               /* a tag flipping for ever (hostile) */
}
