/*
 * ring.c - the lock-free MPMC sheaf ring; protocol and rules in ring.h and
 * docs/design.md.  Every acquire/release below names the edge it pairs
 * with; the labels [R1] [R3] [R4] (releases) and [A1] [A2] [A3] (acquires)
 * are those of docs/design.md, "Memory orders of the ring"; [RR1] and [RR2]
 * are ring_reset's (the rebuild of a spoiled ring, engine/ring_rebuild.c,
 * whose claim is [RB1]).
 */
#include <errno.h>
#include "debug.h"
#include "ring.h"

#ifdef SHEAF_TEST_HOOKS
void (*ring_stop_hook)(int step);

#define STOP(step)                                                 \
	do {                                                       \
		if (unlikely(ring_stop_hook != NULL))              \
			ring_stop_hook(step);                      \
	} while (0)
#else
#define STOP(step) do { } while (0)   /* release builds: no stop points */
#endif

static inline uint64_t slot_make(uint32_t seq, uint32_t id)
{
	return (uint64_t)seq << 32 | id;
}

static inline uint32_t slot_seq(uint64_t v) { return (uint32_t)(v >> 32); }
static inline uint32_t slot_id(uint64_t v) { return (uint32_t)v; }

/* A slot is full iff its sequence is base(p)+1 for some p, i.e. == 1 mod size. */
static inline int slot_is_full(const struct ring_ref *rr, uint64_t v)
{
	return (slot_seq(v) & rr->mask) == 1;
}

/* The slot of position @p: masked with the private geometry, so whatever
 * tail, head or a slot says, the index stays inside the ring. */
static inline _Atomic uint64_t *slot_at(const struct ring_ref *rr, uint32_t p)
{
	return &rr->r->slots[p & rr->mask];
}

static inline void intent_clear(struct ring_intent *in)
{
	at_store_release(&in->op, RING_OP_NONE);
}

void ring_init(struct shm_ring *r, uint32_t id, uint32_t slots, uint32_t nsheaves)
{
	SHEAF_ASSERT(slots >= 2 && (slots & (slots - 1)) == 0 && nsheaves > 0 &&
		     !OWNER_IS_RING(id));
	at_store_relaxed(&r->tail, 0);
	at_store_relaxed(&r->head, 0);
	r->size = slots;
	r->mask = slots - 1;
	r->id = id;
	r->nsheaves = nsheaves;
	/* Slots stay zero: sequence 0 is "free for the producer of position i". */
}

/* The caller's sheaf back from "in the ring" after a put gave up: 0 when a
 * repair took it meanwhile (the caller forgets it), else -ENOBUFS. */
static int put_back(const struct ring_ref *rr, _Atomic uint32_t *owners,
		    uint32_t sheaf, uint32_t me, struct ring_intent *in)
{
	uint32_t exp = OWNER_RING(rr->id);
	/* Relaxed: the sheaf's contents are @me's own writes. */
	int back = at_cas_relaxed(&owners[sheaf], &exp, me);

	intent_clear(in);
	return back ? -ENOBUFS : 0;
}

int ring_put(const struct ring_ref *rr, _Atomic uint32_t *owners, uint32_t sheaf,
	     uint32_t me, struct ring_intent *in)
{
	struct shm_ring *r = rr->r;
	const uint32_t mine = OWNER_RING(rr->id);
	const uint32_t steps = ring_steps_max(rr);

	/* The caller's own arguments only: the ring and owners[] are client-
	 * writable, so never asserted on (debug.h). */
	SHEAF_ASSERT(sheaf < rr->nsheaves && !OWNER_IS_RING(me));
	/* The intent's stores are ordered before [R1] by its release: a
	 * repair that sees owners[sheaf] == RING(r) finds the intent too. */
	at_store_relaxed(&in->ring, rr->id);
	at_store_relaxed(&in->sheaf, sheaf);
	at_store_relaxed(&in->op, RING_OP_PUT);
	STOP(RS_PUT_INTENT);
	/* [R1] release CAS from @me: publishes the sheaf's contents (written
	 * by its owner @me); pairs with [A3], the consumer's owner CAS in
	 * ring_get, and with the repair's acquire of owners[]
	 * (ring_repair_intent).  A CAS, not a store: owners[] is client-
	 * writable, and a sheaf whose entry no longer names @me was passed on
	 * meanwhile (a peer moved the entry, a rebuild or the depot claimed
	 * it) and is someone else's now; the caller forgets it (0, as when a
	 * repair took it) and never takes it back into a ring of its own. */
	uint32_t held = me;
	if (unlikely(!at_cas_release(&owners[sheaf], &held, mine))) {
		intent_clear(in);
		return 0;
	}
	STOP(RS_PUT_OWNER);
	for (uint32_t step = 0;; step++) {
		uint32_t p = at_load_relaxed(&r->tail);   /* a hint: relaxed */
		uint32_t base = p - (p & rr->mask);
		_Atomic uint64_t *slot = slot_at(rr, p);
		/* [A2] acquire: pairs with [R4], the slot CAS of the consumer
		 * that freed it, or [R3], that of a producer that filled it
		 * (then d > 0 and we help tail). */
		uint64_t v = at_load_acquire(slot);

		if (unlikely(step >= steps))
			return put_back(rr, owners, sheaf, me, in);  /* scribbled */
		int32_t d = (int32_t)(slot_seq(v) - base);

		/* A slot "full" (of an earlier lap, or a garbage sequence)
		 * where the ring is not full by its positions (tail - head
		 * below the size): in a sane ring head passes a slot only
		 * once it is consumed, so no get can reach what it holds (a
		 * client moved head past it, or wrote the slot).  It is
		 * reused, by the same CAS from its exact value; a sheaf it
		 * named stays the ring's by its owner entry, out of reach,
		 * for the engine's verification to rebuild the ring and take
		 * it back (engine/ring_rebuild.c).  Off the fast path: a sane
		 * ring never gets here but when full. */
		if (unlikely(d < 0) &&
		    (int32_t)(p - at_load_relaxed(&r->head)) < (int32_t)ring_size(rr))
			d = 0;
		if (d == 0) {
			/* [R3] release: pairs with [A1], the consumer's acquire
			 * load of the slot in ring_get (and with [A2] of a
			 * producer that finds it filled); the linearisation
			 * point of put. */
			if (at_cas_release(slot, &v, slot_make(base + 1, sheaf))) {
				STOP(RS_PUT_SLOT);
				uint32_t exp = p;
				at_cas_relaxed(&r->tail, &exp, p + 1);
				STOP(RS_PUT_TAIL);
				break;
			}
		} else if (d > 0) {
			/* Position p was filled (and maybe consumed) but tail
			 * lags, perhaps for good if its producer died: help. */
			uint32_t exp = p;
			at_cas_relaxed(&r->tail, &exp, p + 1);
		} else {
			/* The slot still holds the item of p - size, and tail
			 * - head says the ring is full: it is.  Take the sheaf
			 * back before dropping the intent, so a death in
			 * between leaves a record for the repair. */
			return put_back(rr, owners, sheaf, me, in);
		}
	}
	intent_clear(in);
	STOP(RS_PUT_DONE);
	return 0;
}

uint32_t ring_get(const struct ring_ref *rr, _Atomic uint32_t *owners, uint32_t me,
		  struct ring_intent *in)
{
	struct shm_ring *r = rr->r;
	const uint32_t mine = OWNER_RING(rr->id);
	const uint32_t steps = ring_steps_max(rr);

	SHEAF_ASSERT(!OWNER_IS_RING(me));
	at_store_relaxed(&in->ring, rr->id);
	at_store_relaxed(&in->sheaf, SHEAF_ID_NONE);
	at_store_relaxed(&in->op, RING_OP_GET);
	STOP(RS_GET_INTENT);
	for (uint32_t step = 0;; step++) {
		uint32_t p = at_load_relaxed(&r->head);   /* a hint: relaxed */
		uint32_t base = p - (p & rr->mask);
		_Atomic uint64_t *slot = slot_at(rr, p);
		/* [A1] acquire: pairs with [R3], the producer's slot CAS (or
		 * with [R4] of a consumer that already took it, d > 0). */
		uint64_t v = at_load_acquire(slot);
		int32_t d = (int32_t)(slot_seq(v) - (base + 1));

		if (unlikely(step >= steps)) {
			intent_clear(in);            /* scribbled: give up */
			return SHEAF_ID_NONE;
		}
		if (d == 0) {
			uint32_t s = slot_id(v);
			uint32_t exp = mine;

			/* Record what we are about to take: if we die between
			 * the slot CAS and the owner CAS, the repair finds the
			 * sheaf marked "in r" but in no slot. */
			at_store_relaxed(&in->sheaf, s);
			STOP(RS_GET_SLOT);
			/* [R4] acq_rel: the slot CAS removes the item of
			 * position p exactly once (the sequence ties it to the
			 * lap: no ABA).  Its release pairs with [A2] of the
			 * producer of p + size; its acquire side (on failure
			 * too) with [R3]/[R4] of whoever changed the slot. */
			if (!at_cas_acqrel(slot, &v,
					   slot_make(base + ring_size(rr), SHEAF_ID_NONE)))
				continue;
			STOP(RS_GET_CLEAR);
			uint32_t eh = p;
			at_cas_relaxed(&r->head, &eh, p + 1);
			STOP(RS_GET_HEAD);
			/* [A3] acq_rel: acquires [R1], the producer's release
			 * store of owners[s] (so the sheaf's contents).  It
			 * fails only if a repair took the sheaf, or the slot
			 * was stale (its sheaf no longer "in r"), or its id is
			 * garbage: then look further. */
			if (s < rr->nsheaves && at_cas_acqrel(&owners[s], &exp, me)) {
				STOP(RS_GET_CLAIM);
				intent_clear(in);
				STOP(RS_GET_DONE);
				return s;
			}
		} else if (d < 0) {
			/* Slot not yet filled for p: tail <= p <= head, empty. */
			intent_clear(in);
			return SHEAF_ID_NONE;
		} else {
			uint32_t eh = p;           /* consumed, head lags: help */
			at_cas_relaxed(&r->head, &eh, p + 1);
		}
	}
}

int ring_holds(const struct ring_ref *rr, uint32_t sheaf)
{
	for (uint32_t i = 0; i < ring_size(rr); i++) {
		uint64_t v = at_load_acquire(&rr->r->slots[i]);
		if (slot_is_full(rr, v) && slot_id(v) == sheaf)
			return 1;
	}
	return 0;
}

void ring_reset(const struct ring_ref *rr)
{
	struct shm_ring *r = rr->r;
	uint32_t t = at_load_relaxed(&r->tail), h = at_load_relaxed(&r->head);
	uint32_t far = (int32_t)(t - h) >= 0 ? t : h;
	/* A lap start (a multiple of the size) two laps past both: no
	 * position a concurrent user loaded before can name it. */
	uint32_t lap = (far & ~rr->mask) + 2 * ring_size(rr);

	/* [RR1] release: pairs with [A1]/[A2], a user's acquire load of the
	 * slot: one that reads the new lap's value finds the ring empty from
	 * there. */
	for (uint32_t i = 0; i < ring_size(rr); i++)
		at_store_release(&r->slots[i], slot_make(lap, SHEAF_ID_NONE));
	/* [RR2] release: the new positions go out after every [RR1]; pairs
	 * with the acquire loads of tail and head (ring_count, the rebuild's
	 * vets): a reader that sees the new positions sees the new slots. */
	at_store_release(&r->head, lap);
	at_store_release(&r->tail, lap);
	/* The header's copy of the geometry, for tools (never read here). */
	r->size = ring_size(rr);
	r->mask = rr->mask;
	r->id = rr->id;
	r->nsheaves = rr->nsheaves;
}

uint32_t ring_repair_intent(const struct ring_ref *rr, _Atomic uint32_t *owners,
			    struct ring_intent *in, uint32_t dead_owner)
{
	uint32_t op = at_load_relaxed(&in->op);
	uint32_t s = at_load_relaxed(&in->sheaf);
	uint32_t got = SHEAF_ID_NONE;

	if ((op == RING_OP_PUT || op == RING_OP_GET) && s < rr->nsheaves) {
		uint32_t exp = OWNER_RING(rr->id);
		/* The acquire load and the acq_rel CAS of owners[s] pair with
		 * [R1] of the dead put (or of a live re-put), and arbitrate
		 * against a live [A3] or -ENOBUFS give-back on the same entry.
		 * Marked "in r" but in no slot of r: a put whose slot CAS
		 * never happened, or a get between its slot CAS and its owner
		 * CAS.  A live peer can be in the same window with this sheaf
		 * (a stale intent); the owner CAS arbitrates: whoever loses
		 * forgets the sheaf (ring_put returns 0, ring_get looks on). */
		if (at_load_acquire(&owners[s]) == exp && !ring_holds(rr, s) &&
		    at_cas_acqrel(&owners[s], &exp, dead_owner))
			got = s;
	}
	intent_clear(in);
	return got;
}

uint32_t ring_clear_stale(const struct ring_ref *rr, _Atomic uint32_t *owners)
{
	struct shm_ring *r = rr->r;
	const uint32_t mine = OWNER_RING(rr->id);
	const uint32_t size = ring_size(rr);
	uint32_t cleared = 0;

	for (uint32_t i = 0; i < size; i++) {
		/* Acquire: pairs with [R3] of the producer that filled it. */
		uint64_t v = at_load_acquire(&r->slots[i]);
		if (!slot_is_full(rr, v))
			continue;
		uint32_t s = slot_id(v);
		/* Acquire: pairs with [R1], or with the [A3] / repair CAS that
		 * took the sheaf out of r. */
		if (s < rr->nsheaves && at_load_acquire(&owners[s]) == mine)
			continue;
		/* Full, but its sheaf is claimed (or garbage): consumed.
		 * Relaxed: only the slot's sequence matters to its next
		 * producer, whose [A2] reads it. */
		if (at_cas_relaxed(&r->slots[i], &v,
				   slot_make(slot_seq(v) - 1 + size, SHEAF_ID_NONE)))
			cleared++;
	}
	/* Advance tail over filled slots (a producer may have died before
	 * moving it), then head over consumed ones.  A sane ring lags by
	 * less than a lap; a scribbled one is left after one. */
	for (uint32_t k = 0; k <= size; k++) {
		uint32_t p = at_load_relaxed(&r->tail);
		uint32_t i = p & rr->mask;
		uint64_t v = at_load_acquire(&r->slots[i]);
		if ((int32_t)(slot_seq(v) - (p - i)) <= 0)
			break;
		uint32_t et = p;
		at_cas_relaxed(&r->tail, &et, p + 1);
	}
	/* Advance head over consumed slots: as ring_get helps, past any slot
	 * no longer full for head's lap (consumed, or already filled again
	 * for the next lap when the ring came round to it). */
	for (uint32_t k = 0; k <= size; k++) {
		uint32_t p = at_load_relaxed(&r->head);
		uint32_t i = p & rr->mask;
		uint64_t v = at_load_acquire(&r->slots[i]);
		if ((int32_t)(slot_seq(v) - (p - i + 1)) <= 0)
			break;
		uint32_t eh = p;
		at_cas_relaxed(&r->head, &eh, p + 1);
	}
	return cleared;
}

uint32_t ring_reclaim(int (*ref_of)(void *ctx, uint32_t id, struct ring_ref *out),
		      void *ctx, _Atomic uint32_t *owners, uint32_t nsheaves,
		      struct ring_intent *intents, uint32_t nintents,
		      uint32_t dead, uint32_t reclaimer,
		      uint32_t *out, uint32_t max_out)
{
	uint32_t n = 0;

	for (uint32_t k = 0; k < nintents; k++) {
		struct ring_intent *in = &intents[k];
		uint32_t op = at_load_acquire(&in->op);
		struct ring_ref rr;

		if (op == RING_OP_NONE)
			continue;
		if (ref_of(ctx, at_load_relaxed(&in->ring), &rr) != 0) {
			intent_clear(in);
			continue;
		}
		(void)ring_repair_intent(&rr, owners, in, dead); /* back to dead */
		ring_clear_stale(&rr, owners);
	}
	for (uint32_t s = 0; s < nsheaves && n < max_out; s++) {
		uint32_t exp = dead;
		/* Acq_rel: acquires the dead owner's last owner CAS ([A3] or
		 * the repair's give-back); the dead process's later writes
		 * to the sheaf are ordered by its death (the caller saw its
		 * pidfd turn readable), not by this CAS. */
		if (at_load_relaxed(&owners[s]) == dead &&
		    at_cas_acqrel(&owners[s], &exp, reclaimer))
			out[n++] = s;
	}
	return n;
}

#ifdef SHEAF_TEST_HOOKS
/* ring_hdr_reclaim (ring.h, tests only): rings found by a ring_of callback,
 * their geometry from their own headers, which the tests trust. */
struct ring_of_shim {
	struct shm_ring *(*ring_of)(void *ctx, uint32_t id);
	void *ctx;
};

static int ref_of_header(void *ctx, uint32_t id, struct ring_ref *out)
{
	struct ring_of_shim *sh = ctx;
	struct shm_ring *r = sh->ring_of(sh->ctx, id);

	if (r == NULL)
		return -1;
	*out = ring_ref_of_header(r);
	return 0;
}

uint32_t ring_hdr_reclaim(struct shm_ring *(*ring_of)(void *ctx, uint32_t id),
			  void *ctx, _Atomic uint32_t *owners, uint32_t nsheaves,
			  struct ring_intent *intents, uint32_t nintents,
			  uint32_t dead, uint32_t reclaimer,
			  uint32_t *out, uint32_t max_out)
{
	struct ring_of_shim sh = { ring_of, ctx };

	return ring_reclaim(ref_of_header, &sh, owners, nsheaves, intents, nintents,
			    dead, reclaimer, out, max_out);
}
#endif
