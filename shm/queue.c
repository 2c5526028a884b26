/*
 * queue.c - the shared queue's lock-free ring and its waits (queue.h;
 * docs/design.md, "Shared queues").
 *
 * Position p (64-bit, counting from 0) lives in slot i = p & mask; its lap
 * base is b = (uint32_t)(p - i).  A slot's sequence (high half) is
 *   b          free for the producer of p,
 *   b + 1      holding p's object (value in the low half),
 *   b + size   consumed: free for the producer of p + size.
 * put: CAS the slot at tail from (b, *) to (b+1, v) [the linearisation
 * point], then raise tail to p+1.  get: CAS the slot at head from exactly
 * (b+1, v) to (b+size, 0), then raise head.  Anyone finding the slot at
 * tail filled or consumed, or the slot at head consumed, raises the hint
 * itself, so a process killed after its CAS leaves nothing behind.
 *
 * Memory orders: both slot CASes are seq_cst: release and acquire for the
 * object's contents (the consumer sees what the producer wrote), and the
 * store half of the sleep handshake with queue_sleep (on x86 a locked
 * CMPXCHG either way); tail/head are relaxed hints.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include "futex.h"
#include "queue.h"
#include "untrusted.h"

/* Steps one call may take: a few laps of helping, whatever the words hold. */
static inline uint64_t queue_steps_max(const struct queue_ref *q, uint32_t n)
{
	return 4ull * q->size + 4096u + 2ull * n;
}

static inline uint64_t slot_word(uint32_t seq, uint32_t v)
{
	return (uint64_t)seq << 32 | v;
}

/* Raise hint @h to @to (never lowers it). */
static inline void hint_raise(_Atomic uint64_t *h, uint64_t to)
{
	uint64_t cur = at_load_relaxed(h);

	while (cur < to && !at_cas_relaxed(h, &cur, to))
		;
}

uint32_t queue_value_of(const struct shm_pool *p, uint64_t off)
{
	uint64_t rel = off - p->data_off;
	uint32_t f;
	uint16_t owner;
	const struct shm_cache *c;

	if (rel >= p->data_len || (rel >> 3) >= UINT32_MAX - 1u)
		return 0;
	f = (uint32_t)(rel >> SLAB_SHIFT);
	owner = at_load_acquire(&p->frame_owner[f]);
	if (owner >= p->max_caches)
		return 0;
	c = &p->caches[owner];
	if (at_load_acquire((_Atomic uint32_t *)&c->state) != CACHE_LIVE)
		return 0;
	rel &= SLAB_SIZE - 1u;
	if (rel >= c->slab_bytes || c->obj_size == 0 || rel % c->obj_size != 0)
		return 0;
	return (uint32_t)((off - p->data_off) >> 3) + 1u;
}

uint64_t queue_off_of(const struct shm_pool *p, uint32_t v)
{
	uint64_t off;

	if (v == 0)
		return 0;
	off = p->data_off + ((uint64_t)(v - 1u) << 3);
	return queue_value_of(p, off) == v ? off : 0;
}

uint32_t queue_put(const struct queue_ref *q, const uint32_t *v, uint32_t n)
{
	struct shm_queue_ctl *ctl = q->ctl;
	uint64_t t = at_load_relaxed(&ctl->tail), steps = queue_steps_max(q, n);
	uint32_t done = 0;

	while (done < n && steps-- > 0) {
		_Atomic uint64_t *s = &q->slots[t & q->mask];
		uint32_t base = (uint32_t)(t & ~q->mask);
		uint64_t w = at_load_acquire(s);
		uint32_t seq = (uint32_t)(w >> 32);

		if (seq == base) {
			if (atomic_compare_exchange_strong(s, &w, slot_word(base + 1u, v[done]))) {
				done++;
				t++;          /* the next position is likely ours too */
			}
			continue;             /* lost: look again at the same slot */
		}
		if ((int32_t)(seq - base) < 0)
			break;                /* the previous lap's object: full */
		/* Filled or consumed already (tail lags: a producer died or is
		 * slow after its CAS), or a spoiled sequence: help, go on. */
		hint_raise(&ctl->tail, t + 1);
		t = at_load_relaxed(&ctl->tail);
	}
	if (done > 0)
		hint_raise(&ctl->tail, t);
	return done;
}

uint32_t queue_get(const struct queue_ref *q, uint32_t *v, uint32_t n)
{
	struct shm_queue_ctl *ctl = q->ctl;
	uint64_t h = at_load_relaxed(&ctl->head), steps = queue_steps_max(q, n);
	uint32_t done = 0;

	while (done < n && steps-- > 0) {
		_Atomic uint64_t *s = &q->slots[h & q->mask];
		uint32_t base = (uint32_t)(h & ~q->mask);
		uint64_t w = at_load_acquire(s);
		uint32_t seq = (uint32_t)(w >> 32);

		if (seq == base + 1u) {
			if (atomic_compare_exchange_strong(s, &w, slot_word(base + q->size, 0))) {
				v[done++] = (uint32_t)w;
				h++;
			}
			continue;
		}
		if ((int32_t)(seq - base) <= 0)
			break;                /* not filled yet: empty */
		/* Consumed already (head lags), filled for a later lap, or a
		 * spoiled sequence: help, go on. */
		hint_raise(&ctl->head, h + 1);
		h = at_load_relaxed(&ctl->head);
	}
	if (done > 0)
		hint_raise(&ctl->head, h);
	return done;
}

/*
 * The sleep handshake.  A sleeper sets the sleep flag (seq_cst), reads the
 * event word, tries once more (@retry), and sleeps on the event word only
 * if that found nothing.  A waker's put (seq_cst CAS) comes before its
 * seq_cst load of the flag: either the sleeper's retry sees the object or
 * the waker sees the flag, clears it, bumps the event and wakes every
 * sleeper (each sets the flag again before it sleeps again).  A flag left
 * set by a killed sleeper costs one extra wake; a waker killed between its
 * put and its wake costs at most one sleep slice.
 */
static void wake(_Atomic uint32_t *flag, _Atomic uint32_t *event)
{
	if (at_load_seqcst(flag) == 0)
		return;
	if (at_exchange_acqrel(flag, 0) == 0)
		return;
	at_fetch_add_seqcst(event, 1);
	futex_wake(event, INT_MAX);
}

void queue_wake_consumers(const struct queue_ref *q)
{
	wake(&q->ctl->ne_sleep, &q->ctl->ne_event);
}

void queue_wake_producers(const struct queue_ref *q)
{
	wake(&q->ctl->nf_sleep, &q->ctl->nf_event);
}

uint32_t queue_sleep(const struct queue_ref *q, int consumer, int64_t slice_ns,
		     queue_retry_fn retry, void *arg)
{
	struct shm_queue_ctl *ctl = q->ctl;
	_Atomic uint32_t *flag = consumer ? &ctl->ne_sleep : &ctl->nf_sleep;
	_Atomic uint32_t *event = consumer ? &ctl->ne_event : &ctl->nf_event;
	uint32_t ev, got;

	at_store_seqcst(flag, 1);
	ev = at_load_seqcst(event);
	at_fence_seqcst();
	got = retry(q, arg);
	if (got != 0)
		return got;
	at_fetch_add_relaxed(consumer ? &ctl->deq_waits : &ctl->enq_waits, 1);
	futex_wait(event, ev, slice_ns);
	return 0;
}

void queue_read_stats(const struct queue_ref *q, struct queue_stats *st)
{
	uint64_t tail = ut_load64(&q->ctl->tail), head = ut_load64(&q->ctl->head);

	memset(st, 0, sizeof(*st));
	st->enqueued = tail;
	st->dequeued = head;
	st->depth = tail > head ? tail - head : 0;
	if (st->depth > q->size)
		st->depth = q->size;
	st->deq_waits = ut_load64(&q->ctl->deq_waits);
	st->enq_waits = ut_load64(&q->ctl->enq_waits);
	st->dropped = ut_load64(&q->ctl->dropped);
}

int pool_queue_find(const struct shm_pool *p, const char *name)
{
	for (uint32_t i = 0; i < SHEAF_MAX_QUEUES; i++) {
		const struct shm_queue *qd = &p->queues[i];

		if (at_load_acquire((_Atomic uint32_t *)&qd->state) == QUEUE_LIVE &&
		    strncmp(qd->name, name, SHEAF_NAME_MAX) == 0)
			return (int)i;
	}
	return -ENOENT;
}
