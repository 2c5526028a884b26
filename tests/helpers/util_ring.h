/*
 * util_ring.h - white-box helpers of the ring tests (test_ring,
 * test_ring_repair, test_ring_stress, test_ring_crash): a ring and an owner
 * table in private memory, a look at the slots through the encoding
 * documented in shm/ring.h, and the names of the test-hook stop points
 * (enum ring_step).
 * Header-only; the allocations fail the test (ck_assert) when they fail.
 */
#ifndef SHEAF_TESTS_UTIL_RING_H
#define SHEAF_TESTS_UTIL_RING_H

#include <check.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shm/ring.h"

/* Owner ids used by the tests (any value that is not a ring owner). */
enum { OW_A = 1, OW_B = 2, OW_C = 3, OW_DEAD = 4, OW_Q = 5, OW_P = 6,
       OW_LIVE = 7, OW_RECLAIM = 8, OW_SETUP = 9, OW_PROBE = 10 };

static inline struct shm_ring *ring_new(uint32_t id, uint32_t slots, uint32_t nsheaves)
{
	size_t bytes = (ring_bytes(slots) + SHEAF_CACHELINE - 1) &
		       ~(size_t)(SHEAF_CACHELINE - 1);
	struct shm_ring *r = aligned_alloc(SHEAF_CACHELINE, bytes);

	ck_assert_ptr_nonnull(r);
	memset(r, 0, bytes);
	ring_init(r, id, slots, nsheaves);
	return r;
}

static inline _Atomic uint32_t *owners_new(uint32_t n, uint32_t owner)
{
	_Atomic uint32_t *o = calloc(n, sizeof(*o));

	ck_assert_ptr_nonnull(o);
	for (uint32_t s = 0; s < n; s++)
		atomic_init(&o[s], owner);
	return o;
}

static inline uint32_t own(_Atomic uint32_t *owners, uint32_t s)
{
	return atomic_load(&owners[s]);
}

/*
 * White-box view of a slot (encoding documented in ring.h): high 32 bits the
 * sequence, low 32 bits the id; a slot is full iff seq == 1 (mod size).
 */
static inline int slot_full(struct shm_ring *r, uint32_t i, uint32_t *id)
{
	uint64_t v = atomic_load(&r->slots[i]);

	if (id != NULL)
		*id = (uint32_t)v;
	return ((uint32_t)(v >> 32) & r->mask) == 1;
}

static inline uint32_t full_slots(struct shm_ring *r)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < r->size; i++)
		n += slot_full(r, i, NULL);
	return n;
}

/* Full slots whose sheaf is @s. */
static inline uint32_t slots_holding(struct shm_ring *r, uint32_t s)
{
	uint32_t n = 0, id;

	for (uint32_t i = 0; i < r->size; i++)
		if (slot_full(r, i, &id) && id == s)
			n++;
	return n;
}

static inline void intent_zero(struct ring_intent *in)
{
	memset(in, 0, sizeof(*in));
}

/* Whether ring_hdr_put on @r would loop forever right now: tail sits on a slot
 * that is already past "full for tail" (consumed), which no put advances. */
static inline int put_would_spin(struct shm_ring *r)
{
	uint32_t t = atomic_load(&r->tail);
	uint32_t base = t - (t & r->mask);
	uint32_t seq = (uint32_t)(atomic_load(&r->slots[t & r->mask]) >> 32);

	return (int32_t)(seq - base) > 1;
}

#ifdef SHEAF_TEST_HOOKS
/*
 * The name of stop point @step (enum ring_step in shm/ring.h), "?" for any
 * other number.  Designated initializers tie each name to its enumerator,
 * so the table cannot drift from the enum's order; a step added to the enum
 * without a name here reads "?", which ring_step_names_ok() catches.
 */
static inline const char *ring_step_name(int step)
{
	static const char *const names[RS_NR] = {
		[RS_PUT_INTENT] = "PUT_INTENT", [RS_PUT_OWNER] = "PUT_OWNER",
		[RS_PUT_SLOT] = "PUT_SLOT",     [RS_PUT_TAIL] = "PUT_TAIL",
		[RS_PUT_DONE] = "PUT_DONE",     [RS_GET_INTENT] = "GET_INTENT",
		[RS_GET_SLOT] = "GET_SLOT",     [RS_GET_CLEAR] = "GET_CLEAR",
		[RS_GET_HEAD] = "GET_HEAD",     [RS_GET_CLAIM] = "GET_CLAIM",
		[RS_GET_DONE] = "GET_DONE",
	};

	return step > 0 && step < RS_NR && names[step] != NULL ? names[step] : "?";
}

/* 1 when every step 1..RS_NR-1 has a name. */
static inline int ring_step_names_ok(void)
{
	for (int s = 1; s < RS_NR; s++)
		if (ring_step_name(s)[0] == '?')
			return 0;
	return 1;
}
#endif

#endif
