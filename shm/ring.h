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
	_Alignas(SHEAF_CACHELINE) uint32_t size;  /* slots, a power of two; set once */
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
 * Initialise a ring over zero-filled memory; @slots a power of two >= 2, and
 * @nsheaves the size of the owner table (ids found in slots are checked
 * against it: a slot scribbled on by a client is skipped, never followed).
 */
void ring_init(struct shm_ring *r, uint32_t id, uint32_t slots,
	       uint32_t nsheaves);

/*
 * Put sheaf @sheaf, owned by @me (owners[sheaf] == @me), into @r.
 * Returns 0: the sheaf is in the ring (or, if a repair took it meanwhile,
 * no longer the caller's: either way the caller must forget it).
 * Returns -ENOBUFS: the ring is full; the sheaf is still the caller's.
 */
int ring_put(struct shm_ring *r, _Atomic uint32_t *owners, uint32_t sheaf,
	     uint32_t me, struct ring_intent *in);

/*
 * Take one sheaf out of @r for owner @me.  Returns the sheaf id (now owned by
 * @me) or SHEAF_ID_NONE when the ring is empty.  Never waits on another
 * thread: a stalled or dead peer's half-done operation is completed by
 * helping.
 */
uint32_t ring_get(struct shm_ring *r, _Atomic uint32_t *owners, uint32_t me,
		  struct ring_intent *in);

/* Approximate number of items (exact when quiescent).  The acquires pair
 * with nothing (tail and head move by relaxed CAS): the count is a hint. */
static inline uint32_t ring_count(const struct shm_ring *r)
{
	uint32_t t = at_load_acquire((_Atomic uint32_t *)&r->tail);
	uint32_t h = at_load_acquire((_Atomic uint32_t *)&r->head);
	int32_t n = (int32_t)(t - h);
	return n < 0 ? 0 : (uint32_t)n;
}

/*
 * Repair after the death of the owner whose intent is @in (only after the
 * owning process is gone).  A PUT or GET intent whose sheaf is marked
 * RING(r) but sits in no slot of @r was caught between its two steps (put:
 * before the slot CAS; get: between the slot CAS and the owner CAS): the
 * sheaf is given to @dead_owner (returned id), for the caller to reclaim
 * with the dead owner's other sheaves.  Returns SHEAF_ID_NONE when there was
 * nothing to roll back.  Clears the intent.
 */
uint32_t ring_repair_intent(struct shm_ring *r, _Atomic uint32_t *owners,
			    struct ring_intent *in, uint32_t dead_owner);

/*
 * Clear stale slots of @r: full slots whose sheaf is no longer RING(r)
 * (its consumer claimed it and died before clearing the slot), and advance
 * head over them.  Safe against concurrent operations (it only helps).
 * Returns the number of slots cleared.
 */
uint32_t ring_clear_stale(struct shm_ring *r, _Atomic uint32_t *owners);

/*
 * The whole repair of one dead owner @dead: roll back each of its
 * @nintents intents (ring_repair_intent), clear stale slots of the rings the
 * intents name, then collect every sheaf still owned by @dead into @out (at
 * most @max_out ids; they now belong to @reclaimer, who returns them to the
 * pool).  @ring_of maps a ring id to its ring (NULL for an unknown id, which
 * is skipped).  Returns the number of ids written to @out.  Call only once
 * the dead owner's process is gone.
 */
uint32_t ring_reclaim(struct shm_ring *(*ring_of)(void *ctx, uint32_t id),
		      void *ctx, _Atomic uint32_t *owners, uint32_t nsheaves,
		      struct ring_intent *intents, uint32_t nintents,
		      uint32_t dead, uint32_t reclaimer,
		      uint32_t *out, uint32_t max_out);

/* Whether a slot of @r holds @sheaf in the "full" state (for repair/checker). */
int ring_holds(struct shm_ring *r, uint32_t sheaf);

#ifdef SHEAF_TEST_HOOKS
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
