/*
 * ring.h - bounded lock-free MPMC ring of 32-bit sheaf ids in shared memory,
 * repairable after a client dies at any instruction.
 *
 * Who may call: client threads and the engine (any process of the pool).
 *
 * Fields and writers
 *   tail, head     any producer / consumer, by CAS only; both are hints that
 *                  anyone may advance ("helping"), never a lock.
 *   slots[i]       any producer or consumer, by CAS only.  One 64-bit word:
 *                  high 32 bits a lap-relative sequence, low 32 bits an id.
 *   owners[id]     (not in the ring: the pool's sheaf owner table) says where a
 *                  sheaf logically is: OWNER_RING(r) means "in ring r".
 *
 * The protocol (docs/design.md, "The ring", has the proof sketch)
 *   For position p, slot index i = p & mask, base(p) = p - i.  A slot's stored
 *   sequence is: base(p) "free for the producer of p"; base(p)+1 "holds the
 *   item of p"; base(p)+size "consumed; free for the producer of p+size".
 *   A zero-filled ring is therefore a valid empty ring (no page is touched
 *   until used).
 *
 *   put(S) by owner C:  intent := {PUT, r, S};  owners[S] := RING(r) [R1]
 *     (release, pairs with the consumer's acquire of owners[S], [A3]);
 *     load the slot at tail [A2] (acquire);  CAS slot (base, *) -> (base+1,
 *     S) [R3] (release, pairs with the consumer's acquire load of the slot,
 *     [A1]);  help tail;  intent := NONE.
 *   get() by C:  load slot at head [A1] (acquire); if it holds S:
 *     intent.sheaf := S; CAS the slot to "consumed" [R4] (acq_rel; exact
 *     64-bit value, so it removes the item of that lap exactly once); help
 *     head; CAS owners[S] RING(r) -> C [A3] (acq_rel: acquires the
 *     producer's writes to the sheaf).  The labels are docs/design.md's;
 *     ring.c puts each on the access it names.
 *     A sheaf belongs to exactly one owner; a slot whose sheaf is no longer
 *     RING(r) (taken by a repair) is consumed and skipped.
 *
 * Crash repair (ring_repair_intent, ring_clear_stale) needs only the dead
 * client's intent and the owner table; see the functions below.
 *
 * Trust: every field here is client-writable (layout.h).  The functions
 * take the ring's geometry from a struct ring_ref the caller filled from
 * values it owns, never from the header below.
 */
#ifndef SHEAF_SHM_RING_H
#define SHEAF_SHM_RING_H

#include <stdint.h>
#include <stddef.h>
#include "atomics.h"

#define SHEAF_CACHELINE 64

/* Owner-table values (owners[sheaf id]). */
#define OWNER_RING_BIT   0x80000000u
#define OWNER_RING(r)    (OWNER_RING_BIT | (uint32_t)(r))
#define OWNER_ENGINE     0x7ffffffeu      /* held by the pool engine */
#define OWNER_NONE       0x7fffffffu      /* never handed out */
#define OWNER_IS_RING(o) (((o) & OWNER_RING_BIT) != 0)
#define OWNER_RING_ID(o) ((o) & ~OWNER_RING_BIT)

#define SHEAF_ID_NONE    0xffffffffu

struct shm_ring {
	_Alignas(SHEAF_CACHELINE) _Atomic uint32_t tail;   /* producers */
	char pad0[SHEAF_CACHELINE - sizeof(uint32_t)];
	_Alignas(SHEAF_CACHELINE) _Atomic uint32_t head;   /* consumers */
	char pad1[SHEAF_CACHELINE - sizeof(uint32_t)];
	/* A copy of the geometry, written by ring_init, for tools and tests:
	 * the ring's code reads struct ring_ref instead (client-writable). */
	_Alignas(SHEAF_CACHELINE) uint32_t size;  /* slots, a power of two */
	uint32_t mask;
	uint32_t id;                              /* this ring's number */
	uint32_t nsheaves;                        /* ids must be below this */
	char pad2[SHEAF_CACHELINE - 4 * sizeof(uint32_t)];
	_Atomic uint64_t slots[];
};
_Static_assert(sizeof(struct shm_ring) == 3 * SHEAF_CACHELINE, "ring header");
_Static_assert(_Alignof(struct shm_ring) == SHEAF_CACHELINE, "ring align");
_Static_assert(offsetof(struct shm_ring, head) - offsetof(struct shm_ring, tail)
	       >= SHEAF_CACHELINE, "producer and consumer on separate lines");

/* The intent record of one thread, kept in its lane (client-writable). */
enum ring_op { RING_OP_NONE = 0, RING_OP_PUT = 1, RING_OP_GET = 2 };
struct ring_intent {
	_Atomic uint32_t op;
	_Atomic uint32_t ring;
	_Atomic uint32_t sheaf;
	uint32_t pad;
};
_Static_assert(sizeof(struct ring_intent) == 16, "intent size");

/* Bytes one ring of @slots slots occupies (slots a power of two >= 2). */
static inline size_t ring_bytes(uint32_t slots)
{
	return sizeof(struct shm_ring) + (size_t)slots * sizeof(uint64_t);
}

/*
 * A ring as its users see it: the memory, and its geometry from a source
 * the caller trusts.  The header fields size, mask, id and nsheaves of
 * struct shm_ring are client-writable like the rest of the ring: the
 * functions below never read them (sheafd takes the geometry from its own
 * struct shm_pool, shm/bounds.h's pool_ring_ref).  Slots and tail/head
 * are read as hints: every index is masked with @mask, every id bounded by
 * @nsheaves, every loop bounded (RING_STEPS_MAX), so a scribbled ring costs
 * its users their sheaves at most, never a stray access or an endless spin.
 */
struct ring_ref {
	struct shm_ring *r;
	uint32_t mask;               /* slots - 1; slots a power of two >= 2 */
	uint32_t id;                 /* the ring's number (its owner tag) */
	uint32_t nsheaves;           /* ids must be below this */
};

static inline uint32_t ring_size(const struct ring_ref *rr)
{
	return rr->mask + 1;
}

/*
 * Steps one put or get may take before it gives up (put: -ENOBUFS, get:
 * empty).  Each failed step is another thread's success or a slot that is
 * not what the protocol allows; a sane ring never needs more than its size
 * plus the contention of the few threads that share it.
 */
static inline uint32_t ring_steps_max(const struct ring_ref *rr)
{
	return 4 * ring_size(rr) + 4096;
}

/*
 * Initialise a ring over zero-filled memory; @slots a power of two >= 2, and
 * @nsheaves the size of the owner table.  The header gets a copy of the
 * geometry, for tools and tests only (struct ring_ref above).
 */
void ring_init(struct shm_ring *r, uint32_t id, uint32_t slots,
	       uint32_t nsheaves);

/*
 * Put sheaf @sheaf, owned by @me (owners[sheaf] == @me), into @rr.
 * Returns 0: the sheaf is in the ring (or, if a repair took it meanwhile,
 * or its owner entry no longer named @me at the call, no longer the
 * caller's: either way the caller must forget it).
 * Returns -ENOBUFS: the ring is full, or too broken to take it within
 * ring_steps_max steps; the sheaf is still the caller's.
 */
int ring_put(const struct ring_ref *rr, _Atomic uint32_t *owners, uint32_t sheaf,
	     uint32_t me, struct ring_intent *in);

/*
 * Take one sheaf out of @rr for owner @me.  Returns the sheaf id (now owned
 * by @me, below rr->nsheaves) or SHEAF_ID_NONE when the ring is empty (or
 * gave nothing within ring_steps_max steps).  Never waits on another
 * thread: a stalled or dead peer's half-done operation is completed by
 * helping.
 */
uint32_t ring_get(const struct ring_ref *rr, _Atomic uint32_t *owners, uint32_t me,
		  struct ring_intent *in);

/* Approximate number of items (exact when quiescent), at most the ring's
 * size.  The acquires pair with nothing (tail and head move by relaxed
 * CAS): the count is a hint. */
static inline uint32_t ring_count(const struct ring_ref *rr)
{
	uint32_t t = at_load_acquire(&rr->r->tail);
	uint32_t h = at_load_acquire(&rr->r->head);
	int32_t n = (int32_t)(t - h);

	if (n < 0)
		return 0;
	return (uint32_t)n > ring_size(rr) ? ring_size(rr) : (uint32_t)n;
}

/*
 * Repair after the death of the owner whose intent is @in (only after the
 * owning process is gone).  A PUT or GET intent whose sheaf is marked
 * RING(rr->id) but sits in no slot of the ring was caught between its two
 * steps (put: before the slot CAS; get: between the slot CAS and the owner
 * CAS): the sheaf is given to @dead_owner (returned id), for the caller to
 * reclaim with the dead owner's other sheaves.  Returns SHEAF_ID_NONE when
 * there was nothing to roll back (or the intent names no valid sheaf).
 * Clears the intent.
 */
uint32_t ring_repair_intent(const struct ring_ref *rr, _Atomic uint32_t *owners,
			    struct ring_intent *in, uint32_t dead_owner);

/*
 * Clear stale slots of @rr: full slots whose sheaf is no longer RING(id)
 * (its consumer claimed it and died before clearing the slot) or whose id
 * is garbage, and advance head over them.  Safe against concurrent
 * operations (it only helps).  Returns the number of slots cleared.
 */
uint32_t ring_clear_stale(const struct ring_ref *rr, _Atomic uint32_t *owners);

/*
 * The whole repair of one dead owner @dead: roll back each of its
 * @nintents intents (ring_repair_intent), clear stale slots of the rings the
 * intents name, then collect every sheaf still owned by @dead into @out (at
 * most @max_out ids; they now belong to @reclaimer, who returns them to the
 * pool).  @ref_of fills the ring of an id and returns 0, or returns -1 for
 * an unknown id (skipped: intents are client-writable).  Returns the number
 * of ids written to @out.  Call only once the dead owner's process is gone.
 */
uint32_t ring_reclaim(int (*ref_of)(void *ctx, uint32_t id, struct ring_ref *out),
		      void *ctx, _Atomic uint32_t *owners, uint32_t nsheaves,
		      struct ring_intent *intents, uint32_t nintents,
		      uint32_t dead, uint32_t reclaimer,
		      uint32_t *out, uint32_t max_out);

/*
 * Reset @rr to an empty ring on a fresh lap, whatever its slots, tail and
 * head say (sheafd's rebuild of a spoiled ring, shm/engine/ring_rebuild.c): every
 * slot becomes "free for the producer" of a position past both tail and
 * head, then head and tail move there.  Safe against concurrent users: a
 * slot CAS of theirs on an old value fails and they read the new positions;
 * an item that slips in meanwhile is either reachable on the new lap or a
 * stale slot (its sheaf no longer RING(id) once the caller has claimed
 * every sheaf marked so, which it must do after this call).
 */
void ring_reset(const struct ring_ref *rr);

/* Whether a slot of @rr holds @sheaf in the "full" state (repair/checker). */
int ring_holds(const struct ring_ref *rr, uint32_t sheaf);

#ifdef SHEAF_TEST_HOOKS
/*
 * Test-only: a standalone ring (tests/helpers/util_ring.h) whose header the
 * test itself wrote and trusts, under ring_hdr_* names (ring_hdr_put:
 * ring_put on it).  Never for a pool's rings: their header is
 * client-writable (sheafd uses pool_ring_ref, shm/bounds.h); release builds
 * do not have these.
 */
static inline struct ring_ref ring_ref_of_header(struct shm_ring *r)
{
	struct ring_ref rr = { r, r->mask, r->id, r->nsheaves };
	return rr;
}
static inline int ring_hdr_put(struct shm_ring *r, _Atomic uint32_t *owners,
			       uint32_t sheaf, uint32_t me, struct ring_intent *in)
{
	struct ring_ref rr = ring_ref_of_header(r);
	return ring_put(&rr, owners, sheaf, me, in);
}
static inline uint32_t ring_hdr_get(struct shm_ring *r, _Atomic uint32_t *owners,
				    uint32_t me, struct ring_intent *in)
{
	struct ring_ref rr = ring_ref_of_header(r);
	return ring_get(&rr, owners, me, in);
}
static inline uint32_t ring_hdr_count(struct shm_ring *r)
{
	struct ring_ref rr = ring_ref_of_header(r);
	return ring_count(&rr);
}
static inline int ring_hdr_holds(struct shm_ring *r, uint32_t sheaf)
{
	struct ring_ref rr = ring_ref_of_header(r);
	return ring_holds(&rr, sheaf);
}
static inline uint32_t ring_hdr_repair_intent(struct shm_ring *r, _Atomic uint32_t *owners,
					      struct ring_intent *in, uint32_t dead_owner)
{
	struct ring_ref rr = ring_ref_of_header(r);
	return ring_repair_intent(&rr, owners, in, dead_owner);
}
static inline uint32_t ring_hdr_clear_stale(struct shm_ring *r, _Atomic uint32_t *owners)
{
	struct ring_ref rr = ring_ref_of_header(r);
	return ring_clear_stale(&rr, owners);
}
/* ring_reclaim over rings found by @ring_of (NULL: unknown id); ring.c. */
uint32_t ring_hdr_reclaim(struct shm_ring *(*ring_of)(void *ctx, uint32_t id),
			  void *ctx, _Atomic uint32_t *owners, uint32_t nsheaves,
			  struct ring_intent *intents, uint32_t nintents,
			  uint32_t dead, uint32_t reclaimer,
			  uint32_t *out, uint32_t max_out);

/*
 * Test-only stop points, compiled only with -DSHEAF_TEST_HOOKS (the copy of
 * ring.o in libsheaf-test.a that the test programs link; libsheaf.a/.so,
 * sheafd and sheafctl have none): when non-NULL, called with the step
 * number at every step of put/get, so a crash test can stop a child
 * exactly there.
 */
extern void (*ring_stop_hook)(int step);
enum ring_step {
	RS_PUT_INTENT = 1, RS_PUT_OWNER, RS_PUT_SLOT, RS_PUT_TAIL, RS_PUT_DONE,
	RS_GET_INTENT, RS_GET_SLOT, RS_GET_CLEAR, RS_GET_HEAD, RS_GET_CLAIM,
	RS_GET_DONE, RS_NR
};
#endif

#endif
