/*
 * ring.c - the lock-free MPMC sheaf ring; protocol and rules in ring.h and
 * docs/design.md.  Every acquire/release below names the edge it pairs with.
 */
#include <errno.h>
#include "ring.h"

void (*ring_stop_hook)(int step);

#define STOP(step)                                                 \
	do {                                                       \
		if (unlikely(ring_stop_hook != NULL))              \
			ring_stop_hook(step);                      \
	} while (0)

static inline uint64_t slot_make(uint32_t seq, uint32_t id)
{
	return (uint64_t)seq << 32 | id;
}

static inline uint32_t slot_seq(uint64_t v) { return (uint32_t)(v >> 32); }
static inline uint32_t slot_id(uint64_t v) { return (uint32_t)v; }

/* A slot is full iff its sequence is base(p)+1 for some p, i.e. == 1 mod size. */
static inline int slot_is_full(const struct shm_ring *r, uint64_t v)
{
	return (slot_seq(v) & r->mask) == 1;
}

static inline void intent_clear(struct ring_intent *in)
{
	at_store_release(&in->op, RING_OP_NONE);
}

void ring_init(struct shm_ring *r, uint32_t id, uint32_t slots, uint32_t nsheaves)
{
	at_store_relaxed(&r->tail, 0);
	at_store_relaxed(&r->head, 0);
	r->size = slots;
	r->mask = slots - 1;
	r->id = id;
	r->nsheaves = nsheaves;
	/* Slots stay zero: sequence 0 is "free for the producer of position i". */
}

int ring_put(struct shm_ring *r, _Atomic uint32_t *owners, uint32_t sheaf,
	     uint32_t me, struct ring_intent *in)
{
	const uint32_t mine = OWNER_RING(r->id);

	at_store_relaxed(&in->ring, r->id);
	at_store_relaxed(&in->sheaf, sheaf);
	at_store_relaxed(&in->op, RING_OP_PUT);
	STOP(RS_PUT_INTENT);
	/* Release: publishes the sheaf's contents; pairs with the acquire CAS
	 * of owners[] in ring_get (and in ring_repair_put). */
	at_store_release(&owners[sheaf], mine);
	STOP(RS_PUT_OWNER);
	for (;;) {
		uint32_t p = at_load_relaxed(&r->tail);
		uint32_t i = p & r->mask;
		uint32_t base = p - i;
		/* Acquire: pairs with the release CAS of the slot by the consumer
		 * that freed it, or by the producer that filled it. */
		uint64_t v = at_load_acquire(&r->slots[i]);
		int32_t d = (int32_t)(slot_seq(v) - base);

		if (d == 0) {
			/* Release: pairs with the acquire load of the slot in
			 * ring_get; the linearisation point of put. */
			if (at_cas_release(&r->slots[i], &v, slot_make(base + 1, sheaf))) {
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
			/* The slot still holds the item of p - size: full.
			 * Take the sheaf back before dropping the intent, so a
			 * death in between leaves a record for the repair. */
			uint32_t exp = mine;
			int back = at_cas_relaxed(&owners[sheaf], &exp, me);
			intent_clear(in);
			return back ? -ENOBUFS : 0;  /* !back: a repair took it */
		}
	}
	intent_clear(in);
	STOP(RS_PUT_DONE);
	return 0;
}

uint32_t ring_get(struct shm_ring *r, _Atomic uint32_t *owners, uint32_t me,
		  struct ring_intent *in)
{
	const uint32_t mine = OWNER_RING(r->id);

	at_store_relaxed(&in->ring, r->id);
	at_store_relaxed(&in->sheaf, SHEAF_ID_NONE);
	at_store_relaxed(&in->op, RING_OP_GET);
	STOP(RS_GET_INTENT);
	for (;;) {
		uint32_t p = at_load_relaxed(&r->head);
		uint32_t i = p & r->mask;
		uint32_t base = p - i;
		/* Acquire: pairs with the producer's release CAS of the slot. */
		uint64_t v = at_load_acquire(&r->slots[i]);
		int32_t d = (int32_t)(slot_seq(v) - (base + 1));

		if (d == 0) {
			uint32_t s = slot_id(v);
			uint32_t exp = mine;

			/* Record what we are about to take: if we die between
			 * the slot CAS and the owner CAS, the repair finds the
			 * sheaf marked "in r" but in no slot. */
			at_store_relaxed(&in->sheaf, s);
			STOP(RS_GET_SLOT);
			/* The slot CAS removes the item of position p exactly
			 * once (the sequence ties it to the lap: no ABA). */
			if (!at_cas_acqrel(&r->slots[i], &v,
					   slot_make(base + r->size, SHEAF_ID_NONE)))
				continue;
			STOP(RS_GET_CLEAR);
			uint32_t eh = p;
			at_cas_relaxed(&r->head, &eh, p + 1);
			STOP(RS_GET_HEAD);
			/* Acq_rel: acquires the producer's release store of
			 * owners[s] (the sheaf's contents).  It fails only if
			 * a repair took the sheaf, or the slot was stale (its
			 * sheaf no longer "in r"): then look further. */
			if (s < r->nsheaves && at_cas_acqrel(&owners[s], &exp, me)) {
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

int ring_holds(struct shm_ring *r, uint32_t sheaf)
{
	for (uint32_t i = 0; i < r->size; i++) {
		uint64_t v = at_load_acquire(&r->slots[i]);
		if (slot_is_full(r, v) && slot_id(v) == sheaf)
			return 1;
	}
	return 0;
}

uint32_t ring_repair_intent(struct shm_ring *r, _Atomic uint32_t *owners,
			    struct ring_intent *in, uint32_t dead_owner)
{
	uint32_t op = at_load_relaxed(&in->op);
	uint32_t s = at_load_relaxed(&in->sheaf);
	uint32_t got = SHEAF_ID_NONE;

	if ((op == RING_OP_PUT || op == RING_OP_GET) && s < r->nsheaves) {
		uint32_t exp = OWNER_RING(r->id);
		/* Marked "in r" but in no slot of r: a put whose slot CAS
		 * never happened, or a get between its slot CAS and its owner
		 * CAS.  A live peer can be in the same window with this sheaf
		 * (a stale intent); the owner CAS arbitrates: whoever loses
		 * forgets the sheaf (ring_put returns 0, ring_get looks on). */
		if (at_load_acquire(&owners[s]) == exp && !ring_holds(r, s) &&
		    at_cas_acqrel(&owners[s], &exp, dead_owner))
			got = s;
	}
	intent_clear(in);
	return got;
}

uint32_t ring_clear_stale(struct shm_ring *r, _Atomic uint32_t *owners)
{
	const uint32_t mine = OWNER_RING(r->id);
	uint32_t cleared = 0;

	for (uint32_t i = 0; i < r->size; i++) {
		uint64_t v = at_load_acquire(&r->slots[i]);
		if (!slot_is_full(r, v))
			continue;
		uint32_t s = slot_id(v);
		if (s < r->nsheaves && at_load_acquire(&owners[s]) == mine)
			continue;
		/* Full, but its sheaf is claimed (or garbage): consumed. */
		if (at_cas_relaxed(&r->slots[i], &v,
				   slot_make(slot_seq(v) - 1 + r->size, SHEAF_ID_NONE)))
			cleared++;
	}
	/* Advance tail over filled slots (a producer may have died before
	 * moving it), then head over consumed ones. */
	for (;;) {
		uint32_t p = at_load_relaxed(&r->tail);
		uint32_t i = p & r->mask;
		uint64_t v = at_load_acquire(&r->slots[i]);
		if ((int32_t)(slot_seq(v) - (p - i)) <= 0)
			break;
		uint32_t et = p;
		at_cas_relaxed(&r->tail, &et, p + 1);
	}
	/* Advance head over consumed slots: as ring_get helps, past any slot
	 * no longer full for head's lap (consumed, or already filled again
	 * for the next lap when the ring came round to it). */
	for (;;) {
		uint32_t p = at_load_relaxed(&r->head);
		uint32_t i = p & r->mask;
		uint64_t v = at_load_acquire(&r->slots[i]);
		if ((int32_t)(slot_seq(v) - (p - i + 1)) <= 0)
			break;
		uint32_t eh = p;
		at_cas_relaxed(&r->head, &eh, p + 1);
	}
	return cleared;
}

uint32_t ring_reclaim(struct shm_ring *(*ring_of)(void *ctx, uint32_t id),
		      void *ctx, _Atomic uint32_t *owners, uint32_t nsheaves,
		      struct ring_intent *intents, uint32_t nintents,
		      uint32_t dead, uint32_t reclaimer,
		      uint32_t *out, uint32_t max_out)
{
	uint32_t n = 0;

	for (uint32_t k = 0; k < nintents; k++) {
		struct ring_intent *in = &intents[k];
		uint32_t op = at_load_acquire(&in->op);
		struct shm_ring *r;

		if (op == RING_OP_NONE)
			continue;
		r = ring_of(ctx, at_load_relaxed(&in->ring));
		if (r == NULL) {
			intent_clear(in);
			continue;
		}
		(void)ring_repair_intent(r, owners, in, dead); /* back to dead */
		ring_clear_stale(r, owners);
	}
	for (uint32_t s = 0; s < nsheaves && n < max_out; s++) {
		uint32_t exp = dead;
		if (at_load_relaxed(&owners[s]) == dead &&
		    at_cas_acqrel(&owners[s], &exp, reclaimer))
			out[n++] = s;
	}
	return n;
}
