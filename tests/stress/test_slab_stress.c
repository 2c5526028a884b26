/*
 * test_slab_stress.c - the slab layer (shm/engine/slab.c) under load, driven
 * directly as in test_slab.c (fixture and helpers: util_slab.h): two nodes
 * racing for the one frame a 1-frame memory cap allows, and a random
 * alloc/free/shrink churn over four caches checked against a model (no
 * object handed out twice, none overwritten, double frees refused and
 * counted), pool_check passing along the way.
 *
 * SHEAF_SAN (non-empty) shrinks iteration counts for sanitizer builds.
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shm/engine/check.h"
#include "shm/engine/engine.h"
#include "shm/pool.h"
#include "shm/engine/slab.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_slab.h"

/* ---- memory cap: two nodes at once ------------------------------------- */

/*
 * Two node allocators taking a frame at the same moment must not together
 * go past the cap (one engine worker per node does exactly this).  The test
 * thread and one helper race, each on its own node, for the one frame a
 * 1-frame cap allows; the test thread waits a varying few cycles after the
 * start signal so the two calls sweep across each other.
 */
struct race_arg {
	uint32_t cache;
	_Atomic uint32_t go, done, quit, delay;
	uint64_t obj;
	uint32_t got;
};

static void *race_main(void *arg)
{
	struct race_arg *a = arg;
	uint32_t seen = 0;

	for (;;) {
		uint32_t g;

		while ((g = atomic_load(&a->go)) == seen && !atomic_load(&a->quit))
			;
		if (atomic_load(&a->quit))
			break;
		seen = g;
		for (volatile uint32_t d = 0, n = atomic_load(&a->delay); d < n; d++)
			;
		a->got = slab_alloc_objs(&P, a->cache, 1, &a->obj, 1, 0);
		atomic_store(&a->done, g);
	}
	return NULL;
}

START_TEST(test_mem_cap_two_nodes_at_once)
{
	static struct race_arg a;
	pthread_t th;
	uint32_t c, rounds = test_san() ? 20000 : 200000, r, over = 0;
	uint64_t worst = 0;
	double t0 = now_s(), limit = test_san() ? 3.0 : 4.0;
	const char *broken = NULL;

	pool_up(2, 64 * MIB);
	c = cache_new("race", 65536, 8, 1);
	atomic_store(&P.hdr->mem_cap, SLAB_SIZE);      /* one frame */
	memset(&a, 0, sizeof(a));
	a.cache = c;
	ck_assert_int_eq(pthread_create(&th, NULL, race_main, &a), 0);
	for (r = 1; r <= rounds && (r % 16 || now_s() - t0 < limit); r++) {
		uint64_t used, mine;
		uint32_t got, delay = rnd_below(96), spins = 0;

		/* Delay one side or the other by a few cycles. */
		atomic_store(&a.delay, delay < 48 ? 48 - delay : 0);
		delay = delay < 48 ? 0 : delay - 48;
		atomic_store(&a.go, r);
		for (volatile uint32_t d = 0; d < delay; d++)
			;
		got = slab_alloc_objs(&P, c, 0, &mine, 1, 0);
		while (atomic_load(&a.done) != r)
			if (++spins % 1024 == 0)
				sched_yield();
		used = frames_used();
		if (used > 1) {
			over++;
			if (used > worst)
				worst = used;
		}
		if (got && slab_free_objs(&P, c, &mine, 1) != 0)
			broken = "a free was refused";
		if (a.got && slab_free_objs(&P, c, &a.obj, 1) != 0)
			broken = "a free was refused";
		slab_shrink(&P, c, 0, 0);
		slab_shrink(&P, c, 1, 0);
		if (frames_used() != 0)
			broken = "frames left after free and shrink";
		if (over > 0 || broken != NULL)
			break;
	}
	/* Stop the helper before any assertion (CK_FORK=no keeps going). */
	atomic_store(&a.quit, 1);
	pthread_join(th, NULL);
	ck_assert_msg(broken == NULL, "round %u: %s", r, broken);
	printf("cap race: %u rounds in %.2f s, %u over the 1-frame cap (worst %llu "
	       "frames)\n", r, now_s() - t0, over, (unsigned long long)worst);
	CHECK_POOL(0);
	ck_assert_msg(over == 0,
		      "frame_alloc() let nodes 0 and 1 together pass a 1-frame cap in "
		      "%u of %u rounds (frames_used reached %llu): it tests the global "
		      "frames_used against the cap under the per-node allocator lock "
		      "only", over, r, (unsigned long long)worst);
}
END_TEST

/* ---- random churn against a model ------------------------------------ */

START_TEST(test_churn)
{
	static const uint32_t sizes[] = { 8, 64, 1000, 8192 };
	const uint32_t steps = test_san() ? 1500 : 8000, max_held = 60000;
	uint32_t cache[4], nheld[4] = { 0 }, limit[4];
	uint64_t *held[4];
	uint64_t *mark;                      /* 1 bit per 8 data bytes */
	uint64_t *buf;
	uint64_t refused = 0;

	pool_up(2, 64 * MIB);
	mark = calloc(P.data_len / 8 / 64, sizeof(uint64_t));
	buf = malloc(4096 * sizeof(*buf));
	ck_assert_ptr_nonnull(mark);
	ck_assert_ptr_nonnull(buf);
	for (int k = 0; k < 4; k++) {
		char name[16];
		snprintf(name, sizeof name, "churn%d", k);
		cache[k] = cache_new(name, sizes[k], 8, k == 3 ? 1 : 0);
		held[k] = malloc(max_held * sizeof(uint64_t));
		limit[k] = (uint32_t)(4 * MIB / P.caches[cache[k]].obj_size);
		if (limit[k] > max_held)
			limit[k] = max_held;
		ck_assert_ptr_nonnull(held[k]);
	}
	for (uint32_t s = 0; s < steps; s++) {
		int k = (int)rnd_below(4);
		uint32_t c = cache[k], osz = P.caches[c].obj_size;
		uint32_t op = rnd_below(10);

		uint32_t want = 1 + rnd_below(k == 3 ? 64 : 1024);

		if (op < 5 && nheld[k] + want <= limit[k]) {
			uint32_t node = rnd_below(2);
			uint32_t got = slab_alloc_objs(&P, c, node, buf, want, 0);
			REQUIRE(got == want, "step %u: got %u of %u", s, got, want);
			verify_placement(c, node, buf, got);
			for (uint32_t i = 0; i < got; i++) {
				uint64_t bit = (buf[i] - P.data_off) / 8;
				REQUIRE(!(mark[bit / 64] >> (bit % 64) & 1),
					"step %u: %#llx handed out twice", s,
					(unsigned long long)buf[i]);
				mark[bit / 64] |= 1ull << (bit % 64);
				*(uint64_t *)(void *)(P.base + buf[i]) = buf[i] ^ osz;
				held[k][nheld[k]++] = buf[i];
			}
		} else if (op < 9 && nheld[k] > 0) {
			uint32_t m = 1 + rnd_below(nheld[k] < 1024 ? nheld[k] : 1024);
			for (uint32_t i = 0; i < m; i++) {
				uint32_t j = rnd_below(nheld[k]);
				uint64_t off = held[k][j], bit = (off - P.data_off) / 8;
				REQUIRE(*(uint64_t *)(void *)(P.base + off) == (off ^ osz),
					"step %u: object %#llx overwritten", s,
					(unsigned long long)off);
				buf[i] = off;
				held[k][j] = held[k][--nheld[k]];
				mark[bit / 64] &= ~(1ull << (bit % 64));
			}
			REQUIRE(slab_free_objs(&P, c, buf, m) == 0, "step %u: frees refused", s);
			if (rnd_below(4) == 0) {      /* double free of one of them */
				REQUIRE(slab_free_objs(&P, c, buf + rnd_below(m), 1) == 1,
					"step %u: double free accepted", s);
				refused++;
			}
		} else {
			slab_shrink(&P, c, rnd_below(2), rnd_below(3));
		}
		if (s % 1000 == 999) {
			uint64_t tot = 0;
			for (int q = 0; q < 4; q++) {
				char err[512];
				int rc = pool_check(&P, (int)cache[q], nheld[q], NULL, err, sizeof err);
				REQUIRE(rc == 0, "step %u cache %d: %s", s, q, err);
				tot += nheld[q];
			}
			CHECK_POOL((int64_t)tot);
		}
	}
	{
		uint64_t tot = 0, inv = 0;
		for (int k = 0; k < 4; k++) {
			tot += nheld[k];
			inv += stat_sum(cache[k], ST_FLUSH_INVALID);
		}
		CHECK_POOL((int64_t)tot);
		ck_assert_uint_eq(inv, refused);
		printf("churn: %u steps, %llu objects held at the end, %llu double "
		       "frees refused, %llu frames used\n", steps,
		       (unsigned long long)tot, (unsigned long long)refused,
		       (unsigned long long)frames_used());
	}
	for (int k = 0; k < 4; k++) {
		ck_assert_uint_eq(free_n(cache[k], held[k], nheld[k]), 0);
		for (uint32_t n = 0; n < 2; n++)
			slab_shrink(&P, cache[k], n, 0);
		free(held[k]);
	}
	ck_assert_uint_eq(frames_used(), 0);
	CHECK_POOL(0);
	free(mark);
	free(buf);
}
END_TEST

static Suite *slab_stress_suite(void)
{
	Suite *su = suite_create("slab-stress");
	TCase *tc;

	tc = tcase_create("cap");
	tcase_set_timeout(tc, 30);
	tcase_add_checked_fixture(tc, slab_setup, slab_teardown);
	tcase_add_test(tc, test_mem_cap_two_nodes_at_once);
	suite_add_tcase(su, tc);

	tc = tcase_create("free");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, slab_setup, slab_teardown);
	tcase_add_test(tc, test_churn);
	suite_add_tcase(su, tc);
	return su;
}

int main(void)
{
	return run_suite(slab_stress_suite());
}
