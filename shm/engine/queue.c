/*
 * queue.c - a shared queue's life in the engine (engine.h): create
 * (descriptor in META, storage in whole frames of node 0 marked
 * FRAME_QUEUE), destroy, and what an adopting engine does with queues
 * (engine_queues_adopt).  The ring itself, and the check of a create
 * request, are shm/queue.c's.
 *
 * Who may call: the hosting process (sheafd, or a local pool's process).
 * Create and destroy take e->ctl_lock.  A descriptor is published by the
 * release store of QUEUE_LIVE (pool_queue_find loads it with acquire).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "shm/queue.h"
#include "shm/engine/engine.h"
#include "shm/engine/slab.h"

/* Capacity @cap rounded up to a power of two (0: 1024). */
static uint32_t queue_capacity(uint32_t cap)
{
	uint32_t r = QUEUE_CAP_MIN;

	if (cap == 0)
		return 1024u;
	while (r < cap)
		r <<= 1;
	return r;
}

static uint32_t frames_for(uint32_t capacity)
{
	return (uint32_t)((queue_bytes(capacity) + SLAB_SIZE - 1) >> SLAB_SHIFT);
}

int engine_queue_create(struct engine *e, const char *name, uint32_t capacity,
			uint32_t flags, char *err, size_t errlen)
{
	struct shm_pool *p = e->pool;
	struct shm_queue *qd = NULL;
	uint32_t cap, nframes, f;
	int rc = queue_params_check(name, capacity, flags, err, errlen), id = -1;

	if (rc != 0)
		return rc;
	/* A slot holds an object as a 32-bit index of 8-byte units. */
	if ((p->data_len >> 3) >= UINT32_MAX - 1u) {
		snprintf(err, errlen, "queues need a pool of less than 32 GiB of data");
		return -EFBIG;
	}
	cap = queue_capacity(capacity);
	nframes = frames_for(cap);
	lock_acquire(&e->ctl_lock, LOCK_RANK_ENGINE_CTL);
	if (pool_queue_find(p, name) >= 0) {
		snprintf(err, errlen, "queue '%s' exists", name);
		rc = -EEXIST;
		goto out;
	}
	for (uint32_t i = 0; i < SHEAF_MAX_QUEUES && id < 0; i++)
		if (at_load_relaxed(&p->queues[i].state) == QUEUE_FREE)
			id = (int)i;
	if (id < 0) {
		snprintf(err, errlen, "all %u queue slots in use", SHEAF_MAX_QUEUES);
		rc = -ENOSPC;
		goto out;
	}
	qd = &p->queues[id];
	/* BUSY before the frames are taken: an engine dying from here on
	 * leaves a descriptor whose frames its successor gives back. */
	qd->nframes = 0;
	at_store_release(&qd->state, QUEUE_BUSY);
	f = slab_frames_take(p, 0, nframes);
	if (f == SLAB_NONE) {
		at_store_release(&qd->state, QUEUE_FREE);
		snprintf(err, errlen, "no room for a queue of %u slots (%u frames of %u KiB) "
			 "under the memory cap", cap, nframes, SLAB_SIZE >> 10);
		rc = -ENOMEM;
		goto out;
	}
	qd->id = (uint32_t)id;
	qd->capacity = cap;
	qd->flags = flags;
	qd->off = pool_frame_off(p, f);
	qd->nframes = nframes;
	qd->created_at = (uint64_t)time(NULL);
	snprintf(qd->name, sizeof(qd->name), "%s", name);
	/* Frames come zeroed (fresh, or punched when released): every slot
	 * is free for lap 0.  The control block is cleared all the same. */
	memset(p->base + qd->off, 0, QUEUE_SLOTS_OFF);
	at_store_relaxed(&qd->generation, at_load_relaxed(&qd->generation) + 1);
	at_store_release(&qd->state, QUEUE_LIVE);
	rc = id;
out:
	lock_release(&e->ctl_lock);
	return rc;
}

/* Give back a descriptor's frames when they are still marked as a queue's
 * (an adopted descriptor may say anything), and free the slot. */
static void queue_release(struct shm_pool *p, struct shm_queue *qd)
{
	uint64_t rel = qd->off - p->data_off;
	uint32_t f = (uint32_t)(rel >> SLAB_SHIFT);
	int ok = qd->nframes > 0 && rel < p->data_len && (rel & (SLAB_SIZE - 1)) == 0 &&
		 qd->nframes <= p->frames_per_node &&
		 pool_node_of_frame(p, f) == pool_node_of_frame(p, f + qd->nframes - 1);

	for (uint32_t k = 0; ok && k < qd->nframes; k++)
		ok = at_load_relaxed(&p->frame_owner[f + k]) == FRAME_QUEUE;
	if (ok)
		slab_frames_give(p, f, qd->nframes);
	qd->nframes = 0;
	at_store_release(&qd->state, QUEUE_FREE);
}

int engine_queue_destroy(struct engine *e, uint32_t id, char *err, size_t errlen)
{
	struct shm_pool *p = e->pool;
	struct shm_queue *qd = &p->queues[id];
	struct queue_stats st;
	struct queue_ref q;
	int rc = 0;

	lock_acquire(&e->ctl_lock, LOCK_RANK_ENGINE_CTL);
	if (at_load_relaxed(&qd->state) != QUEUE_LIVE) {
		snprintf(err, errlen, "no queue %u", id);
		rc = -ENOENT;
		goto out;
	}
	q = queue_ref_of(p, qd);
	queue_read_stats(&q, &st);
	if (st.depth > 0) {
		snprintf(err, errlen, "queue '%s' holds %llu objects: dequeue them first",
			 qd->name, (unsigned long long)st.depth);
		rc = -EBUSY;
		goto out;
	}
	at_store_release(&qd->state, QUEUE_BUSY);
	queue_release(p, qd);
out:
	lock_release(&e->ctl_lock);
	return rc;
}

void engine_queues_adopt(struct shm_pool *p)
{
	for (uint32_t i = 0; i < SHEAF_MAX_QUEUES; i++) {
		struct shm_queue *qd = &p->queues[i];
		uint32_t st = at_load_relaxed(&qd->state);
		uint64_t rel = qd->off - p->data_off;

		if (st == QUEUE_BUSY) {
			queue_release(p, qd);      /* a create or destroy died */
		} else if (st == QUEUE_LIVE &&
			   (qd->capacity < QUEUE_CAP_MIN || qd->capacity > QUEUE_CAP_MAX ||
			    (qd->capacity & (qd->capacity - 1)) != 0 ||
			    (qd->flags & ~QUEUE_F_ALL) != 0 ||
			    qd->nframes != frames_for(qd->capacity) || rel >= p->data_len ||
			    (rel & (SLAB_SIZE - 1)) != 0 ||
			    rel + (uint64_t)qd->nframes * SLAB_SIZE > p->data_len ||
			    memchr(qd->name, 0, sizeof(qd->name)) == NULL)) {
			at_store_relaxed(&qd->state, QUEUE_BROKEN);
		}
	}
}
