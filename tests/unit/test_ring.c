/*
 * test_ring.c - functional tests of the sheaf ring (shm/ring.c): what a
 * put and a get do when every client lives.
 *
 * Covers: empty/FIFO/full semantics and the owner-table transitions; wrap
 * over many laps and across the 32-bit position counters (checked against a
 * model queue); stale and scribbled slots (ring_hdr_get skips them,
 * ring_hdr_clear_stale clears them).  Crash repair of a put or get stopped at
 * each stop point, and repair racing a live peer, are in
 * test_ring_repair.c; the MPMC stress is in test_ring_stress.c, crash
 * repair with real processes in test_ring_crash.c.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>

#include "shm/ring.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_ring.h"

/* ---- semantics -------------------------------------------------------- */

/* The stop-point names the tests print are those of enum ring_step. */
START_TEST(test_step_names_match_enum)
{
	ck_assert(ring_step_names_ok());
	ck_assert_str_eq(ring_step_name(RS_PUT_INTENT), "PUT_INTENT");
	ck_assert_str_eq(ring_step_name(RS_GET_CLEAR), "GET_CLEAR");
	ck_assert_str_eq(ring_step_name(RS_GET_CLAIM), "GET_CLAIM");
	ck_assert_str_eq(ring_step_name(RS_GET_DONE), "GET_DONE");
	ck_assert_str_eq(ring_step_name(0), "?");
	ck_assert_str_eq(ring_step_name(RS_NR), "?");
}
END_TEST

START_TEST(test_empty_after_init)
{
	static const uint32_t sizes[] = { 2, 4, 64, 1024 };

	for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		struct shm_ring *r = ring_new(7, sizes[k], 16);
		_Atomic uint32_t *owners = owners_new(16, OW_A);
		struct ring_intent in;

		intent_zero(&in);
		ck_assert_uint_eq(r->size, sizes[k]);
		ck_assert_uint_eq(r->mask, sizes[k] - 1);
		ck_assert_uint_eq(r->id, 7);
		ck_assert_uint_eq(ring_hdr_count(r), 0);
		ck_assert_uint_eq(full_slots(r), 0);
		for (int i = 0; i < 3; i++)
			ck_assert_uint_eq(ring_hdr_get(r, owners, OW_B, &in), SHEAF_ID_NONE);
		ck_assert_uint_eq(atomic_load(&in.op), RING_OP_NONE);
		ck_assert_uint_eq(ring_hdr_count(r), 0);
		for (uint32_t s = 0; s < 16; s++) {
			ck_assert_uint_eq(own(owners, s), OW_A);
			ck_assert(!ring_hdr_holds(r, s));
		}
		ck_assert_uint_eq(ring_hdr_clear_stale(r, owners), 0);
		ck_assert_uint_eq(ring_hdr_count(r), 0);
		/* Usable after all that: one round trip. */
		ck_assert_int_eq(ring_hdr_put(r, owners, 3, OW_A, &in), 0);
		ck_assert_uint_eq(ring_hdr_get(r, owners, OW_B, &in), 3);
		ck_assert_uint_eq(own(owners, 3), OW_B);
		free(r);
		free(owners);
	}
}
END_TEST

START_TEST(test_fifo_and_owner_transitions)
{
	static const uint32_t order[] = { 5, 2, 7, 0, 3, 6, 1, 4 };
	struct shm_ring *r = ring_new(3, 8, 8);
	_Atomic uint32_t *owners = owners_new(8, OW_A);
	struct ring_intent ina, inb;

	intent_zero(&ina);
	intent_zero(&inb);
	for (uint32_t k = 0; k < 8; k++) {
		uint32_t s = order[k];

		ck_assert(!ring_hdr_holds(r, s));
		ck_assert_int_eq(ring_hdr_put(r, owners, s, OW_A, &ina), 0);
		ck_assert_uint_eq(own(owners, s), OWNER_RING(3));
		ck_assert(ring_hdr_holds(r, s));
		ck_assert_uint_eq(ring_hdr_count(r), k + 1);
		ck_assert_uint_eq(atomic_load(&ina.op), RING_OP_NONE);
	}
	for (uint32_t k = 0; k < 8; k++) {
		uint32_t s = ring_hdr_get(r, owners, OW_B, &inb);

		ck_assert_uint_eq(s, order[k]);
		ck_assert_uint_eq(own(owners, s), OW_B);
		ck_assert(!ring_hdr_holds(r, s));
		ck_assert_uint_eq(ring_hdr_count(r), 7 - k);
		ck_assert_uint_eq(atomic_load(&inb.op), RING_OP_NONE);
	}
	ck_assert_uint_eq(ring_hdr_get(r, owners, OW_B, &inb), SHEAF_ID_NONE);
	ck_assert_uint_eq(full_slots(r), 0);
	free(r);
	free(owners);
}
END_TEST

START_TEST(test_full_ring)
{
	struct shm_ring *r = ring_new(1, 4, 6);
	_Atomic uint32_t *owners = owners_new(6, OW_A);
	struct ring_intent in;

	intent_zero(&in);
	for (uint32_t s = 0; s < 4; s++)
		ck_assert_int_eq(ring_hdr_put(r, owners, s, OW_A, &in), 0);
	ck_assert_uint_eq(ring_hdr_count(r), 4);
	for (int k = 0; k < 3; k++) {
		ck_assert_int_eq(ring_hdr_put(r, owners, 4, OW_A, &in), -ENOBUFS);
		ck_assert_uint_eq(own(owners, 4), OW_A);    /* still the caller's */
		ck_assert(!ring_hdr_holds(r, 4));
		ck_assert_uint_eq(atomic_load(&in.op), RING_OP_NONE);
		ck_assert_uint_eq(ring_hdr_count(r), 4);
	}
	ck_assert_uint_eq(full_slots(r), 4);
	/* One out, then the refused sheaf fits. */
	ck_assert_uint_eq(ring_hdr_get(r, owners, OW_B, &in), 0);
	ck_assert_int_eq(ring_hdr_put(r, owners, 4, OW_A, &in), 0);
	ck_assert_int_eq(ring_hdr_put(r, owners, 5, OW_A, &in), -ENOBUFS);
	ck_assert_uint_eq(own(owners, 5), OW_A);
	for (uint32_t s = 1; s <= 4; s++)
		ck_assert_uint_eq(ring_hdr_get(r, owners, OW_B, &in), s);
	ck_assert_uint_eq(ring_hdr_get(r, owners, OW_B, &in), SHEAF_ID_NONE);
	free(r);
	free(owners);
}
END_TEST

static uint64_t xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/*
 * Drive @r (size slots, size + 3 sheaves, all held at first) with @ops random
 * puts and gets against a model FIFO; every result, owner and ring_hdr_count is
 * checked.  Each get is made by a rotating owner id, and the next put of that
 * sheaf by that same owner.
 */
static void model_run(struct shm_ring *r, uint32_t ops, uint64_t seed)
{
	const uint32_t size = r->size, n = r->nsheaves;
	_Atomic uint32_t *owners = owners_new(n, OW_A);
	uint32_t *holder = calloc(n, sizeof(*holder));
	uint32_t *q = calloc(size, sizeof(*q));
	uint32_t qh = 0, qn = 0, next = 0, puts = 0, gets = 0;
	struct ring_intent in;

	ck_assert(holder != NULL && q != NULL);
	intent_zero(&in);
	for (uint32_t s = 0; s < n; s++)
		holder[s] = OW_A;
	for (uint32_t k = 0; k < ops; k++) {
		uint64_t x = xorshift(&seed);
		int want_put = qn == 0 || (qn < size && (x % 3) != 0) ||
			       (qn == size && (x % 7) == 0);

		if (want_put) {
			uint32_t s;

			/* Next sheaf not in the ring (some are, some are held). */
			do
				s = next++ % n;
			while (holder[s] == 0);
			int rc = ring_hdr_put(r, owners, s, holder[s], &in);
			if (qn == size) {
				REQUIRE(rc == -ENOBUFS, "op %u: put into full ring -> %d", k, rc);
				REQUIRE(own(owners, s) == holder[s], "op %u: refused sheaf %u lost", k, s);
			} else {
				REQUIRE(rc == 0, "op %u: put -> %d (count %u)", k, rc, qn);
				REQUIRE(own(owners, s) == OWNER_RING(r->id), "op %u: owner after put", k);
				q[(qh + qn++) % size] = s;
				holder[s] = 0;
				puts++;
			}
		} else {
			uint32_t me = 100 + (uint32_t)(x >> 40) % 5;
			uint32_t s = ring_hdr_get(r, owners, me, &in);

			REQUIRE(s == q[qh], "op %u: get -> %u, model %u", k, s, q[qh]);
			REQUIRE(own(owners, s) == me, "op %u: owner after get", k);
			holder[s] = me;
			qh = (qh + 1) % size;
			qn--;
			gets++;
		}
		REQUIRE(ring_hdr_count(r) == qn, "op %u: ring_hdr_count %u, model %u",
			      k, ring_hdr_count(r), qn);
		REQUIRE(atomic_load(&in.op) == RING_OP_NONE, "op %u: intent left", k);
	}
	ck_assert_uint_eq(full_slots(r), qn);
	/* Drain: exactly the model's content, in order. */
	while (qn > 0) {
		ck_assert_uint_eq(ring_hdr_get(r, owners, OW_B, &in), q[qh]);
		qh = (qh + 1) % size;
		qn--;
	}
	ck_assert_uint_eq(ring_hdr_get(r, owners, OW_B, &in), SHEAF_ID_NONE);
	ck_assert_uint_eq(ring_hdr_count(r), 0);
	ck_assert_uint_ge(puts, ops / 3);
	ck_assert_uint_ge(gets, ops / 3);
	free(owners);
	free(holder);
	free(q);
}

START_TEST(test_wrap_many_laps)
{
	struct shm_ring *r = ring_new(2, 4, 7);
	_Atomic uint32_t *owners = owners_new(7, OW_A);
	struct ring_intent in;

	/* Strict put/get cycles: 100000 laps of one item... */
	intent_zero(&in);
	for (uint32_t k = 0; k < 100000; k++) {
		uint32_t s = k % 7;

		REQUIRE(ring_hdr_put(r, owners, s, OW_A, &in) == 0, "cycle %u: put", k);
		REQUIRE(ring_hdr_count(r) == 1, "cycle %u: count after put", k);
		REQUIRE(ring_hdr_get(r, owners, OW_A, &in) == s, "cycle %u: get", k);
		REQUIRE(ring_hdr_count(r) == 0, "cycle %u: count after get", k);
	}
	ck_assert_uint_eq(atomic_load(&r->tail), 100000);
	ck_assert_uint_eq(atomic_load(&r->head), 100000);
	free(r);
	free(owners);
	/* ...then random fill levels, including full, against a model. */
	r = ring_new(2, 4, 7);
	model_run(r, 200000, 0x9e3779b97f4a7c15ull);
	free(r);
	r = ring_new(5, 2, 5);
	model_run(r, 50000, 12345);
	free(r);
}
END_TEST

START_TEST(test_wrap_u32_positions)
{
	/* Positions near 2^32: head/tail and sequences wrap during the run. */
	const uint32_t p0 = 0xfffffff0u;
	static const uint32_t sizes[] = { 2, 4, 16 };

	for (unsigned k = 0; k < 3; k++) {
		struct shm_ring *r = ring_new(4, sizes[k], sizes[k] + 3);

		atomic_store(&r->tail, p0);
		atomic_store(&r->head, p0);
		for (uint32_t i = 0; i < sizes[k]; i++)  /* "free for p0 + i" */
			atomic_store(&r->slots[i], (uint64_t)p0 << 32);
		model_run(r, 5000, 77 + k);
		ck_assert_uint_lt(atomic_load(&r->tail), p0);   /* did wrap */
		free(r);
	}
}
END_TEST

/* ---- stale and scribbled slots ------------------------------------------ */

START_TEST(test_stale_slot_skipped)
{
	struct shm_ring *r = ring_new(0, 8, 4);
	_Atomic uint32_t *owners = owners_new(4, OW_A);
	struct ring_intent in;
	uint32_t exp = OWNER_RING(0);

	intent_zero(&in);
	for (uint32_t s = 0; s < 3; s++)
		ck_assert_int_eq(ring_hdr_put(r, owners, s, OW_A, &in), 0);
	/* A consumer claimed sheaf 0 (the owner CAS) and died before clearing
	 * its slot. */
	ck_assert(atomic_compare_exchange_strong(&owners[0], &exp, OW_DEAD));
	ck_assert(ring_hdr_holds(r, 0));
	ck_assert_uint_eq(ring_hdr_get(r, owners, OW_B, &in), 1);
	ck_assert_uint_eq(own(owners, 0), OW_DEAD);     /* not taken from it */
	ck_assert_uint_eq(own(owners, 1), OW_B);
	ck_assert(!ring_hdr_holds(r, 0));                   /* skipped and cleared */
	ck_assert_uint_eq(ring_hdr_get(r, owners, OW_B, &in), 2);
	ck_assert_uint_eq(ring_hdr_get(r, owners, OW_B, &in), SHEAF_ID_NONE);
	ck_assert_uint_eq(own(owners, 0), OW_DEAD);
	ck_assert_uint_eq(ring_hdr_count(r), 0);
	ck_assert_uint_eq(full_slots(r), 0);
	free(r);
	free(owners);
}
END_TEST

START_TEST(test_clear_stale)
{
	struct shm_ring *r = ring_new(6, 4, 6);
	_Atomic uint32_t *owners = owners_new(6, OW_A);
	struct ring_intent in;
	uint32_t exp;

	intent_zero(&in);
	for (uint32_t s = 0; s < 4; s++)
		ck_assert_int_eq(ring_hdr_put(r, owners, s, OW_A, &in), 0);
	/* Dead consumers claimed 0 (at head) and 2 (in the middle). */
	exp = OWNER_RING(6);
	ck_assert(atomic_compare_exchange_strong(&owners[0], &exp, OW_DEAD));
	exp = OWNER_RING(6);
	ck_assert(atomic_compare_exchange_strong(&owners[2], &exp, OW_DEAD));
	/* Stale slots still occupy the ring. */
	ck_assert_int_eq(ring_hdr_put(r, owners, 4, OW_A, &in), -ENOBUFS);
	ck_assert_uint_eq(own(owners, 4), OW_A);
	ck_assert(ring_hdr_holds(r, 0) && ring_hdr_holds(r, 2));

	ck_assert_uint_eq(ring_hdr_clear_stale(r, owners), 2);
	ck_assert(!ring_hdr_holds(r, 0));
	ck_assert(!ring_hdr_holds(r, 2));
	ck_assert(ring_hdr_holds(r, 1) && ring_hdr_holds(r, 3));
	ck_assert_uint_eq(full_slots(r), 2);
	ck_assert_uint_eq(atomic_load(&r->head), 1);   /* advanced over slot 0 */
	ck_assert_uint_eq(ring_hdr_count(r), 3);           /* 2 is behind 1: approximate */
	ck_assert_uint_eq(ring_hdr_clear_stale(r, owners), 0);
	ck_assert_uint_eq(own(owners, 0), OW_DEAD);
	ck_assert_uint_eq(own(owners, 2), OW_DEAD);

	ck_assert_int_eq(ring_hdr_put(r, owners, 4, OW_A, &in), 0);
	ck_assert_uint_eq(ring_hdr_get(r, owners, OW_B, &in), 1);
	ck_assert_uint_eq(ring_hdr_get(r, owners, OW_B, &in), 3);
	ck_assert_uint_eq(ring_hdr_get(r, owners, OW_B, &in), 4);
	ck_assert_uint_eq(ring_hdr_get(r, owners, OW_B, &in), SHEAF_ID_NONE);
	ck_assert_uint_eq(ring_hdr_count(r), 0);
	ck_assert_uint_eq(own(owners, 0), OW_DEAD);
	ck_assert_uint_eq(own(owners, 2), OW_DEAD);
	free(r);
	free(owners);
}
END_TEST

START_TEST(test_scribbled_slot)
{
	/* A client scribbled a full slot with an id beyond the owner table. */
	for (int clear_first = 0; clear_first < 2; clear_first++) {
		struct shm_ring *r = ring_new(0, 4, 4);
		_Atomic uint32_t *owners = owners_new(4, OW_A);
		struct ring_intent in;

		intent_zero(&in);
		ck_assert_int_eq(ring_hdr_put(r, owners, 0, OW_A, &in), 0);
		atomic_store(&r->slots[1], (uint64_t)1 << 32 | 77u);
		atomic_store(&r->tail, 2);
		ck_assert_int_eq(ring_hdr_put(r, owners, 1, OW_A, &in), 0);
		ck_assert(ring_hdr_holds(r, 77));
		if (clear_first)
			ck_assert_uint_eq(ring_hdr_clear_stale(r, owners), 1);
		ck_assert_uint_eq(ring_hdr_get(r, owners, OW_B, &in), 0);
		ck_assert_uint_eq(ring_hdr_get(r, owners, OW_B, &in), 1);
		ck_assert_uint_eq(ring_hdr_get(r, owners, OW_B, &in), SHEAF_ID_NONE);
		ck_assert(!ring_hdr_holds(r, 77));
		ck_assert_uint_eq(full_slots(r), 0);
		for (uint32_t s = 0; s < 2; s++)
			ck_assert_uint_eq(own(owners, s), OW_B);
		ck_assert_uint_eq(own(owners, 2), OW_A);
		free(r);
		free(owners);
	}
}
END_TEST

static Suite *ring_suite(void)
{
	Suite *su = suite_create("ring");
	TCase *tc;

	tc = tcase_create("semantics");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_step_names_match_enum);
	tcase_add_test(tc, test_empty_after_init);
	tcase_add_test(tc, test_fifo_and_owner_transitions);
	tcase_add_test(tc, test_full_ring);
	tcase_add_test(tc, test_wrap_many_laps);
	tcase_add_test(tc, test_wrap_u32_positions);
	suite_add_tcase(su, tc);

	tc = tcase_create("stale");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_stale_slot_skipped);
	tcase_add_test(tc, test_clear_stale);
	tcase_add_test(tc, test_scribbled_slot);
	suite_add_tcase(su, tc);
	return su;
}

int main(void)
{
	return run_suite(ring_suite());
}
