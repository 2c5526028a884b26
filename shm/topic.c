/*
 * topic.c - a topic's log of message records and its futex waits
 * (topic.h; docs/design.md, "Topics").
 *
 * Memory orders.  Every release and acquire below names the edge it pairs
 * with; the tail hint is raised by relaxed CAS and read relaxed.
 *   [TR1] a publish's seq_cst store of the word (topic_publish_at): its
 *         release half publishes the value and the object's contents;
 *         pairs with [TA1].  Also the store half of the sleep handshake.
 *   [TR2] every clearing CAS (topic_clear, topic_take), seq_cst: its
 *         release half orders the clearer's reads of the object before a
 *         later claim of the record; pairs with [TA2].
 *   [TA1] a reader's acquire load of the word (topic_take, topic_clear):
 *         pairs with [TR1], then the value is read relaxed.
 *   [TA2] a publisher's acquire load of the word before its claim
 *         (topic_claim): pairs with [TR2] of whoever freed the record.
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include "bounds.h"
#include "futex.h"
#include "topic.h"

static inline void hint_raise(_Atomic uint64_t *h, uint64_t to)
{
	uint64_t cur = at_load_relaxed(h);

	while (cur < to && !at_cas_relaxed(h, &cur, to))
		;
}

int topic_claim(const struct topic_ref *t, uint32_t client, uint32_t v, uint64_t *pos,
		uint64_t *wout)
{
	struct shm_topic_ctl *ctl = t->ctl;
	uint64_t p = at_load_relaxed(&ctl->tail), steps = 4ull * t->size + 4096u, w = 0;

	while (steps-- > 0) {
		struct shm_topic_rec *r = &t->recs[p & t->mask];
		uint32_t cur = topic_tag_of(t, p);
		int32_t d;

		/* [TA2] acquire: pairs with [TR2], the release that freed it. */
		w = at_load_acquire(&r->word);
		d = tw_tag_diff(tw_tag(w), cur);
		if (d < 0) {
			if ((w & (TW_CLAIMED | TW_REFS)) != 0) {
				*pos = p;
				*wout = w;
				return -EAGAIN;       /* an older message: full */
			}
			if (at_cas_seqcst(&r->word, &w,
					  tw_make(cur, TW_CLAIMED | tw_claim(client, v)))) {
				*pos = p;
				return 0;
			}
			continue;                     /* lost: look again */
		}
		/* This lap's already (the hint lags: a publisher is after its
		 * claim) or a later lap's (a spoiled hint): move on. */
		p += d > 0 ? (uint64_t)d << t->shift : 1u;
		hint_raise(&ctl->tail, p);
		if (at_load_relaxed(&ctl->tail) > p)
			p = at_load_relaxed(&ctl->tail);
	}
	*pos = p;
	*wout = w;
	return -EAGAIN;
}

uint64_t topic_publish_at(const struct topic_ref *t, uint64_t pos, uint32_t v,
			  void (*hook)(void *), void *arg)
{
	struct shm_topic_rec *r = &t->recs[pos & t->mask];
	uint32_t live;
	uint64_t w;

	at_store_relaxed(&r->value, v);
	/* After the claim: a subscriber joined before this load gets it. */
	live = topic_live(t);
	w = tw_make(topic_tag_of(t, pos), tw_slot_bits(live) | (t->history ? TW_HIST : 0));
	/* Only for a message someone reads: one nobody reads stays the
	 * publisher's, which frees it. */
	if (hook != NULL && (w & TW_REFS) != 0)
		hook(arg);
	/* [TR1] seq_cst: release of value and object, pairs with [TA1]; the
	 * store half of the sleep handshake. */
	at_store_seqcst(&r->word, w);
	hint_raise(&t->ctl->tail, pos + 1);
	at_fetch_add_relaxed(&t->ctl->published, 1);
	return w;
}

int topic_clear(const struct topic_ref *t, uint64_t pos, uint64_t bits, unsigned flags,
		uint32_t *v, uint64_t *cleared, topic_last_hook hook, void *arg)
{
	struct shm_topic_rec *r = &t->recs[pos & t->mask];
	uint32_t tag = topic_tag_of(t, pos), val = 0;
	/* [TA1] acquire: pairs with [TR1]; the value is this lap's. */
	uint64_t w = at_load_acquire(&r->word);
	int took = 0;
	int64_t busy_until = 0;

	*cleared = 0;
	for (uint32_t i = 0; i < 65536u; i++) {
		uint64_t want = bits, c, nw;
		int last;

		if (flags & TOPIC_CLEAR_STALE)
			want |= tw_slot_bits(~topic_live(t));
		if (flags & TOPIC_CLEAR_DROP)
			want |= tw_slot_bits(tw_pend_slots(w));
		c = w & want;

		if (tw_tag(w) != tag || (w & TW_CLAIMED) != 0 || c == 0)
			break;
		nw = w & ~c;
		last = (w & TW_REFS) != 0 && (nw & TW_REFS) == 0;
		val = at_load_relaxed(&r->value);
		if (hook != NULL && last && !took) {
			/* Whoever clears the last reference holds the tag: while
			 * another process does (between its take and its CAS),
			 * wait for its CAS or its give-back, then look again
			 * (not counted in the loop's bound). */
			int64_t now = busy_until != 0 ? clock_ns() : 0;

			if (busy_until == 0 || now < busy_until) {
				if (!hook(arg, val, 1)) {
					if (busy_until == 0)
						busy_until = clock_ns() + TOPIC_TAKE_WAIT_NS;
					i--;
					sched_yield();
					w = at_load_acquire(&r->word);
					continue;
				}
			} else {
				(void)hook(arg, val, 2);
			}
			took = 1;
		} else if (hook != NULL && !last && took) {
			(void)hook(arg, val, 0);
			took = 0;
		}
		/* [TR2] seq_cst: pairs with [TA2] of the next claim. */
		if (at_cas_seqcst(&r->word, &w, nw)) {
			*cleared = c;
			if (last) {
				*v = val;
				return 2;
			}
			return 1;
		}
	}
	if (took)
		(void)hook(arg, val, 0);
	return 0;
}

int topic_take(const struct topic_ref *t, uint32_t s, uint64_t *cursor, uint32_t *v,
	       uint64_t *pos)
{
	const uint64_t pend = 1ull << (TW_PEND_SHIFT + s);
	uint64_t c = *cursor, steps = 2ull * t->size + 64u;
	int got = 0;

	while (steps-- > 0) {
		struct shm_topic_rec *r = &t->recs[c & t->mask];
		/* [TA1] acquire: pairs with [TR1], the publish of this lap. */
		uint64_t w = at_load_acquire(&r->word);
		int32_t d = tw_tag_diff(tw_tag(w), topic_tag_of(t, c));
		uint32_t val;

		if (d < 0 || (d == 0 && (w & TW_CLAIMED) != 0))
			break;                        /* not published yet */
		if (d == 0 && (w & pend) != 0) {
			val = at_load_relaxed(&r->value);
			/* [TR2] seq_cst: taken once (the tag guards the lap). */
			if (at_cas_seqcst(&r->word, &w, w & ~pend)) {
				*v = val;
				*pos = c++;
				got = 1;
				break;
			}
			continue;
		}
		c++;          /* not for this slot, or lapped: that one is gone */
	}
	*cursor = c;
	return got;
}

uint32_t topic_adopt_history(const struct topic_ref *t, uint32_t s, uint64_t from, uint64_t to)
{
	const uint64_t mine = tw_slot_bits(1u << s);
	uint32_t n = 0;

	for (uint64_t c = from; c < to && c - from <= t->size; c++) {
		_Atomic uint64_t *wp = &t->recs[c & t->mask].word;
		uint64_t w = at_load_acquire(wp);

		/* While the history holds it: a reference of the slot's own,
		 * queued like a message published to it. */
		while (tw_tag(w) == topic_tag_of(t, c) && (w & TW_CLAIMED) == 0 &&
		       (w & TW_HIST) != 0 && (w & mine) == 0) {
			if (at_cas_seqcst(wp, &w, w | mine)) {
				n++;
				break;
			}
		}
	}
	return n;
}

/* The sleep handshake of shm/queue.c (seq_cst flag store, event read,
 * retry, sleep; the waker's seq_cst word store or CAS, then its flag
 * load): either the retry sees the change or the waker sees the flag. */
static void wake(_Atomic uint32_t *flag, _Atomic uint32_t *event)
{
	if (at_load_seqcst(flag) == 0)
		return;
	if (at_exchange_acqrel(flag, 0) == 0)
		return;
	at_fetch_add_seqcst(event, 1);
	futex_wake(event, INT_MAX);
}

void topic_wake_subs(const struct topic_ref *t)
{
	wake(&t->ctl->ne_sleep, &t->ctl->ne_event);
}

void topic_wake_pubs(const struct topic_ref *t)
{
	wake(&t->ctl->nf_sleep, &t->ctl->nf_event);
}

int topic_sleep(const struct topic_ref *t, int sub, int64_t slice_ns, topic_retry_fn retry,
		void *arg)
{
	struct shm_topic_ctl *ctl = t->ctl;
	_Atomic uint32_t *flag = sub ? &ctl->ne_sleep : &ctl->nf_sleep;
	_Atomic uint32_t *event = sub ? &ctl->ne_event : &ctl->nf_event;
	uint32_t ev;
	int got;

	at_store_seqcst(flag, 1);
	ev = at_load_seqcst(event);
	at_fence_seqcst();
	got = retry(arg);
	if (got != 0)
		return got;
	if (!sub)
		at_fetch_add_relaxed(&ctl->pub_waits, 1);
	futex_wait(event, ev, slice_ns);
	return 0;
}

void topic_read_sub(const struct topic_ref *t, uint32_t s, struct topic_sub_stats *st)
{
	const struct shm_topic_sub *b = &t->subs[s % TOPIC_SUBS_MAX];
	uint64_t tail = ut_load64(&t->ctl->tail), cur = ut_load64(&b->cursor);

	memset(st, 0, sizeof(*st));
	st->delivered = ut_load64(&b->delivered);
	st->released = ut_load64(&b->released);
	st->dropped = ut_load64(&b->dropped);
	st->waits = ut_load64(&b->waits);
	st->held = st->delivered > st->released ? st->delivered - st->released : 0;
	if (st->held > t->size)
		st->held = t->size;
	st->lag = tail > cur ? tail - cur : 0;
	st->depth = st->lag > t->size ? t->size : st->lag;
}

uint32_t topic_capacity(uint32_t cap)
{
	uint32_t r = TOPIC_CAP_MIN;

	if (cap == 0)
		return TOPIC_CAP_DEFAULT;
	while (r < cap && r < TOPIC_CAP_MAX)
		r <<= 1;
	return r;
}

int topic_params_check(const char *name, uint32_t capacity, uint32_t history,
		       uint32_t policy, char *err, size_t errlen)
{
	if (name == NULL || name[0] == '\0' || strlen(name) >= SHEAF_NAME_MAX) {
		snprintf(err, errlen, "topic name must be 1..%u bytes", SHEAF_NAME_MAX - 1);
		return -EINVAL;
	}
	if (capacity > TOPIC_CAP_MAX) {
		snprintf(err, errlen, "topic capacity %u out of range 0..%u", capacity,
			 TOPIC_CAP_MAX);
		return -EINVAL;
	}
	if (history >= topic_capacity(capacity)) {
		snprintf(err, errlen, "topic history %u must be below its capacity %u", history,
			 topic_capacity(capacity));
		return -EINVAL;
	}
	if (policy > TOPIC_POLICY_DROP) {
		snprintf(err, errlen, "unknown topic policy %u", policy);
		return -EINVAL;
	}
	return 0;
}

int pool_topic_find(const struct shm_pool *p, const char *name)
{
	for (uint32_t i = 0; i < SHEAF_MAX_TOPICS; i++) {
		const struct shm_topic *td = &p->topics[i];

		if (at_load_acquire((_Atomic uint32_t *)&td->state) == TOPIC_LIVE &&
		    strncmp(td->name, name, SHEAF_NAME_MAX) == 0)
			return (int)i;
	}
	return -ENOENT;
}
