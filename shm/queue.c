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
 * SP (SC) queues: the one producer (consumer) fills (empties) slots with
 * plain release stores and stores tail (head) once per call, after them:
 * put_single, get_single.  No locked instruction, no fence on x86.
 *
 * Memory orders.  Every release and acquire below carries one of these
 * labels and names the edge it pairs with; tail and head are hints (raised
 * by relaxed CAS, read relaxed), so no acquire pairs with their stores.
 *   [QR1] producer's slot CAS (b,*) -> (b+1,v), seq_cst (queue_put): its
 *         release half publishes what the producer wrote into the object;
 *         pairs with [QA1].  Also the store half of the sleep handshake.
 *   [QR2] SP producer's release store of the slot (put_single): as [QR1],
 *         pairs with [QA1].
 *   [QR3] consumer's slot CAS (b+1,v) -> (b+size,0), seq_cst (queue_get):
 *         its release half orders the consumer's read of the slot before
 *         the next lap's fill; pairs with [QA2].  Its acquire half is
 *         [QA1]'s, again.
 *   [QR4] SC consumer's release store of the slot (get_single): as
 *         [QR3], pairs with [QA2].
 *   [QA1] consumer's acquire load of the slot at head (queue_get,
 *         get_single): pairs with [QR1] or [QR2], the fill of that lap.
 *   [QA2] producer's acquire load of the slot at tail (queue_put,
 *         put_single): pairs with [QR3] or [QR4], the consumer that freed
 *         it (or with [QR1]/[QR2] of a producer that filled it: tail lags).
 * The sleep handshake (queue_sleep, wake) is a seq_cst Dekker pair, not a
 * release/acquire edge: see the comment above queue_sleep.
 */
#include <errno.h>
#include <stdio.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include "bounds.h"
#include "futex.h"
#include "queue.h"

#ifdef SHEAF_TEST_HOOKS
void (*queue_stop_hook)(int step);
#endif

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

/*
 * SP: the one producer owns tail.  Only it moves a slot from free (seq
 * base) to filled, and no consumer touches a free slot, so a plain
 * (release) store fills it; tail is stored once, after the slots.  A slot
 * at tail already filled or consumed was filled by a producer that died
 * before storing tail: step over it.  Stores reach memory in program order
 * (x86 TSO; release stores in C11), also those of a killed process, so what
 * a dead producer left is a prefix of its slots: no gap.
 */
static uint32_t put_single(const struct queue_ref *q, const uint32_t *v, uint32_t n)
{
	struct shm_queue_ctl *ctl = q->ctl;
	uint64_t t0 = at_load_relaxed(&ctl->tail), t = t0, steps = queue_steps_max(q, n);
	uint32_t done = 0;

	while (done < n && steps-- > 0) {
		_Atomic uint64_t *s = &q->slots[t & q->mask];
		uint32_t base = (uint32_t)(t & ~q->mask);
		/* [QA2] acquire: pairs with [QR3]/[QR4], the consumer that
		 * freed the slot. */
		uint32_t seq = (uint32_t)(at_load_acquire(s) >> 32);

		if (seq == base) {
			/* [QR2] release: publishes the object; pairs with [QA1]. */
			at_store_release(s, slot_word(base + 1u, v[done]));
			done++;
			QUEUE_STOP(QS_ENQ_SLOT);
		} else if ((int32_t)(seq - base) < 0) {
			break;                /* the previous lap's object: full */
		}
		t++;                          /* filled, or stepped over */
	}
	/* Release: tail goes out after the slots it passes (what a dead
	 * producer left is a prefix); tail is a hint, no acquire pairs. */
	if (t != t0)
		at_store_release(&ctl->tail, t);
	return done;
}

/* SC: the one consumer owns head; only it moves a slot from filled to
 * consumed (a producer writes only free slots), so a plain store marks it.
 * A slot at head already consumed (or refilled for a later lap) was taken
 * by a consumer that died before storing head: step over it.  A consumer
 * killed between its load of the slot and its store took nothing: the
 * next one takes the object. */
static uint32_t get_single(const struct queue_ref *q, uint32_t *v, uint32_t n,
			   struct shm_qrec *rec, uint32_t r0)
{
	struct shm_queue_ctl *ctl = q->ctl;
	uint64_t h0 = at_load_relaxed(&ctl->head), h = h0, steps = queue_steps_max(q, n);
	uint32_t done = 0;

	while (done < n && steps-- > 0) {
		_Atomic uint64_t *s = &q->slots[h & q->mask];
		uint32_t base = (uint32_t)(h & ~q->mask);
		/* [QA1] acquire: pairs with [QR1]/[QR2], the fill of this lap. */
		uint64_t w = at_load_acquire(s);
		uint32_t seq = (uint32_t)(w >> 32);

		if (seq == base + 1u) {
			v[done] = (uint32_t)w;
			if (rec != NULL) {      /* staged before the slot store */
				at_store_relaxed(&rec->vals[r0 + done], (uint32_t)w);
				QUEUE_STOP(QS_DEQ_STAGED);
			}
			/* [QR4] release: the read above comes before the next
			 * lap's fill; pairs with [QA2].  Publishes the staged
			 * value too. */
			at_store_release(s, slot_word(base + q->size, 0));
			done++;
			if (rec != NULL) {
				QUEUE_STOP(QS_DEQ_SLOT);
				at_store_relaxed(&rec->n, r0 + done);
				QUEUE_STOP(QS_DEQ_COUNTED);
			}
		} else if ((int32_t)(seq - base) <= 0) {
			break;                /* not filled yet: empty */
		}
		h++;
	}
	/* Release: head goes out after the slots it passes; a hint, no
	 * acquire pairs. */
	if (h != h0)
		at_store_release(&ctl->head, h);
	if (rec != NULL && r0 + done < QREC_MAX)
		at_store_relaxed(&rec->vals[r0 + done], 0);
	return done;
}

uint32_t queue_put(const struct queue_ref *q, const uint32_t *v, uint32_t n)
{
	struct shm_queue_ctl *ctl = q->ctl;
	uint64_t t = at_load_relaxed(&ctl->tail), steps = queue_steps_max(q, n);
	uint32_t done = 0;

	if (q->flags & QUEUE_F_SP)
		return put_single(q, v, n);
	while (done < n && steps-- > 0) {
		_Atomic uint64_t *s = &q->slots[t & q->mask];
		uint32_t base = (uint32_t)(t & ~q->mask);
		/* [QA2] acquire: pairs with [QR3]/[QR4], the consumer that
		 * freed the slot (or [QR1] of a producer that filled it). */
		uint64_t w = at_load_acquire(s);
		uint32_t seq = (uint32_t)(w >> 32);

		if (seq == base) {
			/* [QR1] seq_cst CAS: release of the object, pairs with
			 * [QA1]; the store half of the sleep handshake (the
			 * waker's flag load in wake comes after it). */
			if (at_cas_seqcst(s, &w, slot_word(base + 1u, v[done]))) {
				done++;
				QUEUE_STOP(QS_ENQ_SLOT);
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

uint32_t queue_get(const struct queue_ref *q, uint32_t *v, uint32_t n, struct shm_qrec *rec)
{
	struct shm_queue_ctl *ctl = q->ctl;
	uint64_t h = at_load_relaxed(&ctl->head), steps = queue_steps_max(q, n);
	uint32_t done = 0, r0 = 0;

	if (rec != NULL) {
		r0 = at_load_relaxed(&rec->n);
		if (unlikely(r0 > QREC_MAX))
			r0 = QREC_MAX;
		if (n > QREC_MAX - r0)
			n = QREC_MAX - r0;
	}
	if (q->flags & QUEUE_F_SC)
		return get_single(q, v, n, rec, r0);
	while (done < n && steps-- > 0) {
		_Atomic uint64_t *s = &q->slots[h & q->mask];
		uint32_t base = (uint32_t)(h & ~q->mask);
		/* [QA1] acquire: pairs with [QR1]/[QR2], the fill of this lap. */
		uint64_t w = at_load_acquire(s);
		uint32_t seq = (uint32_t)(w >> 32);

		if (seq == base + 1u) {
			uint64_t was = w;

			if (rec != NULL) {      /* staged before the CAS */
				at_store_relaxed(&rec->vals[r0 + done], (uint32_t)w);
				QUEUE_STOP(QS_DEQ_STAGED);
			}
			/* [QR3] seq_cst CAS from exactly (b+1, v): takes the
			 * object once; release pairs with [QA2] of the next
			 * lap's producer (and publishes the staged value);
			 * the store half of the handshake. */
			if (at_cas_seqcst(s, &w, slot_word(base + q->size, 0))) {
				v[done++] = (uint32_t)was;
				h++;
				if (rec != NULL) {
					QUEUE_STOP(QS_DEQ_SLOT);
					at_store_relaxed(&rec->n, r0 + done);
					QUEUE_STOP(QS_DEQ_COUNTED);
				}
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
	if (rec != NULL && r0 + done < QREC_MAX)   /* no value being taken */
		at_store_relaxed(&rec->vals[r0 + done], 0);
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
 *
 * SP/SC sides store their slot without a fence, so the waker's flag load
 * could pass its slot store.  Either the waker fences first (queue_fence)
 * or its process is registered for membarrier GLOBAL_EXPEDITED, and then
 * the sleeper, between its flag store and its retry, issues that
 * membarrier: every registered waker then runs a full barrier, so either
 * its slot store was before it (the retry sees the object) or its flag
 * load is after it (it sees the flag).  A sleeper whose membarrier fails
 * sleeps short slices (QUEUE_SLICE_NOMB_NS) instead.
 *
 * The pair: [QS1] the sleeper's seq_cst store of the flag, then its retry's
 * loads of the slots; [QS2] the waker's seq_cst load of the flag, after its
 * slot store ([QR1]/[QR3] seq_cst CAS, or a plain side's release store
 * followed by queue_fence or the sleeper's membarrier).
 */
#define QUEUE_SLICE_NOMB_NS (1000ll * 1000)

static _Atomic int mb_state;    /* 0 undecided, 1 registered, 2 not */

int queue_mb_registered(void)
{
	int m = at_load_relaxed(&mb_state);

	if (likely(m != 0))
		return m == 1;
	m = syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0 ? 1 : 2;
	at_store_relaxed(&mb_state, m);
	return m == 1;
}

void queue_mb_forget(void)
{
	at_store_relaxed(&mb_state, 0);
}

/* Order a plain slot store before the waker's flag load (see above). */
static inline void queue_fence(const struct queue_ref *q, int consumer)
{
	if (queue_side_plain(q, consumer) && !queue_mb_registered())
		at_fence_seqcst();
}

static void wake(_Atomic uint32_t *flag, _Atomic uint32_t *event)
{
	/* [QS2] seq_cst: pairs with [QS1]. */
	if (at_load_seqcst(flag) == 0)
		return;
	if (at_exchange_acqrel(flag, 0) == 0)
		return;
	at_fetch_add_seqcst(event, 1);
	futex_wake(event, INT_MAX);
}

void queue_wake_consumers(const struct queue_ref *q)
{
	queue_fence(q, 0);
	wake(&q->ctl->ne_sleep, &q->ctl->ne_event);
}

void queue_wake_producers(const struct queue_ref *q)
{
	queue_fence(q, 1);
	wake(&q->ctl->nf_sleep, &q->ctl->nf_event);
}

uint32_t queue_sleep(const struct queue_ref *q, int consumer, int64_t slice_ns,
		     queue_retry_fn retry, void *arg)
{
	struct shm_queue_ctl *ctl = q->ctl;
	_Atomic uint32_t *flag = consumer ? &ctl->ne_sleep : &ctl->nf_sleep;
	_Atomic uint32_t *event = consumer ? &ctl->ne_event : &ctl->nf_event;
	uint32_t ev, got;

	/* [QS1] seq_cst: pairs with [QS2], the waker's flag load. */
	at_store_seqcst(flag, 1);
	ev = at_load_seqcst(event);
	at_fence_seqcst();
	/* The other side stores without a fence: make its wakers' stores and
	 * loads meet ours (see above). */
	if (queue_side_plain(q, !consumer) &&
	    syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) != 0 &&
	    slice_ns > QUEUE_SLICE_NOMB_NS)
		slice_ns = QUEUE_SLICE_NOMB_NS;
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

int queue_params_check(const char *name, uint32_t capacity, uint32_t flags,
		       char *err, size_t errlen)
{
	if (name == NULL || name[0] == '\0' || strlen(name) >= SHEAF_NAME_MAX) {
		snprintf(err, errlen, "queue name must be 1..%u bytes", SHEAF_NAME_MAX - 1);
		return -EINVAL;
	}
	if (capacity > QUEUE_CAP_MAX) {
		snprintf(err, errlen, "queue capacity %u out of range 0..%u", capacity,
			 QUEUE_CAP_MAX);
		return -EINVAL;
	}
	if ((flags & ~QUEUE_F_ALL) != 0) {
		snprintf(err, errlen, "unknown queue flags 0x%x", flags);
		return -EINVAL;
	}
	return 0;
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
