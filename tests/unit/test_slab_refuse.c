/*
 * test_slab_refuse.c - where the slab layer (shm/engine/slab.c) says no, driven
 * directly as in test_slab.c (fixture and helpers: util_slab.h): the
 * memory cap (frames stop at it, what the taken frames hold is still
 * served, another cache's kept empty slabs are reclaimed for it);
 * slab_free_objs refusing bad offsets (outside the data region, another
 * cache's slab, off a boundary, never-used or released frame, double free)
 * without corrupting anything; the remote-refill try-lock (a held node
 * lock: nothing, at once).  After each test pool_check must pass with the
 * number of objects the test holds.
 */
#include <check.h>
#include <errno.h>
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

/* ---- memory cap ------------------------------------------------------ */

/* Allocate on nodes 0 and 1 alternately until neither gives more. */
static uint32_t drain(uint32_t c, uint64_t *out)
{
	uint32_t total = 0, done = 0, k = 0;

	while (done != 3) {
		uint32_t node = k++ % 2, got;
		if (done & (1u << node))
			continue;
		got = slab_alloc_objs(&P, c, node, out + total, 50, 0);
		total += got;
		if (got < 50)
			done |= 1u << node;
	}
	return total;
}

START_TEST(test_mem_cap)
{
	const uint64_t cap = 3 * SLAB_SIZE + SLAB_SIZE / 2;
	uint32_t c, per, total = 0, got, k = 0;
	uint64_t *objs;

	pool_up(2, 64 * MIB);
	c = cache_new("cap", 4096, 8, 0);
	per = P.caches[c].objs_per_slab;
	objs = malloc(64 * (size_t)per * sizeof(*objs));
	ck_assert_ptr_nonnull(objs);

	atomic_store(&P.hdr->mem_cap, cap);
	/* Alternate nodes until a call comes back short. */
	for (;;) {
		uint32_t want = 50;
		got = slab_alloc_objs(&P, c, k++ % 2, objs + total, want, 0);
		total += got;
		REQUIRE(frames_used() * SLAB_SIZE <= cap, "frames used %llu over cap",
			(unsigned long long)frames_used());
		if (got < want)
			break;
		REQUIRE(total < 64 * per, "cap never reached");
	}
	ck_assert_uint_eq(frames_used(), cap / SLAB_SIZE);
	ck_assert_uint_le(frames_used() * SLAB_SIZE, cap);
	/* What is left in the frames already taken is still served. */
	total += drain(c, objs + total);
	ck_assert_uint_eq(frames_used(), cap / SLAB_SIZE);
	ck_assert_uint_eq(total, (cap / SLAB_SIZE) * per);
	ck_assert_uint_eq(slab_alloc_objs(&P, c, 0, objs + total, 1, 0), 0);
	ck_assert_uint_eq(slab_alloc_objs(&P, c, 1, objs + total, 1, 0), 0);
	verify_distinct(objs, total, 4096);
	fill_objs(objs, total, 4096, 3);
	verify_objs(objs, total, 4096, 3);
	CHECK_POOL(total);

	/* Free everything: the empty slabs (kept: min_partial) serve again. */
	ck_assert_uint_eq(free_n(c, objs, total), 0);
	CHECK_POOL(0);
	{
		uint32_t again = drain(c, objs);
		ck_assert_uint_eq(again, total);
		ck_assert_uint_eq(frames_used(), cap / SLAB_SIZE);
		ck_assert_uint_eq(free_n(c, objs, again), 0);
	}
	/* After a shrink every frame of the cap can go to one node. */
	ck_assert_uint_eq(slab_shrink(&P, c, 0, 0) + slab_shrink(&P, c, 1, 0),
			  cap / SLAB_SIZE);
	ck_assert_uint_eq(frames_used(), 0);
	ck_assert_uint_eq(alloc_n(c, 1, objs, total), total);
	verify_placement(c, 1, objs, total);
	ck_assert_uint_eq(slab_alloc_objs(&P, c, 0, objs + total, 1, 0), 0);
	CHECK_POOL(total);

	/* A cap below one frame: nothing new. */
	atomic_store(&P.hdr->mem_cap, SLAB_SIZE - 1);
	ck_assert_uint_eq(slab_alloc_objs(&P, c, 0, objs + total, 1, 0), 0);
	/* Raised again: allocation goes on. */
	atomic_store(&P.hdr->mem_cap, P.data_len);
	ck_assert_uint_eq(alloc_n(c, 0, objs + total, 10 * per), 10 * per);
	total += 10 * per;
	verify_distinct(objs, total, 4096);
	CHECK_POOL(total);
	ck_assert_uint_eq(free_n(c, objs, total), 0);
	CHECK_POOL(0);
	free(objs);
}
END_TEST

/* At the cap, another cache's kept empty slabs are reclaimed for a cache
 * that needs frames (beyond the other cache's min_partial). */
START_TEST(test_cap_reclaims_other_caches_empty_slabs)
{
	uint32_t a, b, per, got;
	uint64_t *objs;

	pool_up(1, 64 * MIB);
	a = cache_new("a", 4096, 8, 1);
	b = cache_new("b", 4096, 8, 1);
	per = P.caches[a].objs_per_slab;
	objs = malloc(8 * (size_t)per * sizeof(*objs));
	ck_assert_ptr_nonnull(objs);
	atomic_store(&P.hdr->mem_cap, 4 * (uint64_t)SLAB_SIZE);
	ck_assert_uint_eq(alloc_n(a, 0, objs, 4 * per), 4 * per);
	ck_assert_uint_eq(free_n(a, objs, 4 * per), 0);
	ck_assert_uint_eq(list_count(a, 0, SL_EMPTY), 4);   /* kept */
	ck_assert_uint_eq(frames_used(), 4);
	/* b takes 3 frames: a keeps its min_partial (1). */
	got = alloc_n(b, 0, objs, 4 * per);
	ck_assert_uint_eq(got, 3 * per);
	ck_assert_uint_eq(list_count(a, 0, SL_EMPTY), 1);
	ck_assert_uint_eq(stat_sum(a, ST_FREE_SLAB), 3);
	ck_assert_uint_le(frames_used(), 4);
	CHECK_POOL(got);
	ck_assert_uint_eq(free_n(b, objs, got), 0);
	CHECK_POOL(0);
	free(objs);
}
END_TEST

/* ---- slab_free_objs validation ---------------------------------------- */

static uint32_t free_one(uint32_t c, uint64_t off)
{
	return slab_free_objs(&P, c, &off, 1);
}

START_TEST(test_free_validation)
{
	uint32_t a, b, t, n_a = 0;
	uint64_t objs_a[512], obj_b[4], obj_t, inv0;
	uint32_t last_f;

	pool_up(2, 64 * MIB);
	a = cache_new("val-a", 64, 8, 0);
	b = cache_new("val-b", 64, 8, 0);
	t = cache_new("val-t", 5000, 8, 0);       /* slab_bytes < SLAB_SIZE */
	ck_assert_uint_lt(P.caches[t].slab_bytes, SLAB_SIZE);
	ck_assert_uint_eq(alloc_n(a, 0, objs_a, 256), 256);
	ck_assert_uint_eq(alloc_n(a, 1, objs_a + 256, 256), 256);
	n_a = 512;
	ck_assert_uint_eq(slab_alloc_objs(&P, b, 0, obj_b, 2, 0), 2);
	ck_assert_uint_eq(slab_alloc_objs(&P, b, 1, obj_b + 2, 2, 0), 2);
	ck_assert_uint_eq(slab_alloc_objs(&P, t, 0, &obj_t, 1, 0), 1);
	fill_objs(objs_a, n_a, 64, 1);
	CHECK_POOL(n_a + 4 + 1);
	inv0 = stat_sum(a, ST_FLUSH_INVALID);

	/* Outside the data region. */
	{
		const uint64_t outside[] = {
			0, 64, P.hdr->off_caches, P.hdr->off_slabs, P.hdr->off_rw,
			P.data_off - 64, P.data_off - 1, P.data_off + P.data_len,
			P.data_off + P.data_len + 64, P.size, UINT64_MAX,
			UINT64_MAX - P.data_off, (uint64_t)1 << 63,
		};
		uint32_t k = sizeof(outside) / sizeof(outside[0]);

		for (uint32_t i = 0; i < k; i++)
			ck_assert_int_eq(slab_validate(&P, a, outside[i]), -EFAULT);
		ck_assert_uint_eq(slab_free_objs(&P, a, outside, k), k);
		ck_assert_uint_eq(stat_sum(a, ST_FLUSH_INVALID), inv0 + k);
		inv0 += k;
	}
	CHECK_POOL(n_a + 5);
	/* A slab of another cache (same geometry). */
	ck_assert_int_eq(slab_validate(&P, a, obj_b[0]), -EINVAL);
	ck_assert_uint_eq(slab_free_objs(&P, a, obj_b, 4), 4);
	ck_assert_uint_eq(stat_sum(a, ST_FLUSH_INVALID), inv0 + 4);
	inv0 += 4;
	ck_assert_uint_eq(free_one(b, objs_a[0]), 1);   /* and the other way */
	CHECK_POOL(n_a + 5);
	ck_assert_int_eq(pool_check(&P, (int)b, 4, NULL, ERR, sizeof ERR), 0);
	ck_assert_int_eq(pool_check(&P, (int)a, n_a, NULL, ERR, sizeof ERR), 0);
	/* Off an object boundary. */
	{
		const uint64_t offb[] = { objs_a[3] + 1, objs_a[3] + 8, objs_a[3] + 63,
					  objs_a[300] + 32, obj_t + 8, obj_t + 4999 };
		for (uint32_t i = 0; i < 4; i++)
			ck_assert_int_eq(slab_validate(&P, a, offb[i]), -EINVAL);
		ck_assert_uint_eq(slab_free_objs(&P, a, offb, 4), 4);
		ck_assert_uint_eq(slab_free_objs(&P, t, offb + 4, 2), 2);
		ck_assert_uint_eq(stat_sum(a, ST_FLUSH_INVALID), inv0 + 4);
		inv0 += 4;
	}
	/* In the slab tail past the last object (slab_bytes..SLAB_SIZE). */
	{
		uint64_t fs = pool_frame_off(&P, pool_frame_of(&P, obj_t));
		uint64_t tail[] = { fs + P.caches[t].slab_bytes,
				    fs + P.caches[t].slab_bytes + 8,
				    fs + SLAB_SIZE - 8 };
		uint64_t tinv = stat_sum(t, ST_FLUSH_INVALID);
		ck_assert_int_eq(slab_validate(&P, t, tail[0]), -EINVAL);
		ck_assert_uint_eq(slab_free_objs(&P, t, tail, 3), 3);
		ck_assert_uint_ge(stat_sum(t, ST_FLUSH_INVALID), tinv + 3);
	}
	CHECK_POOL(n_a + 5);
	/* A never-used frame (node 0 and node 1). */
	last_f = P.frames_per_node - 1;
	{
		uint64_t never[] = { pool_frame_off(&P, last_f),
				     pool_frame_off(&P, last_f) + 64,
				     pool_frame_off(&P, P.frames_per_node + last_f) };
		ck_assert_uint_eq(atomic_load(&P.frame_owner[last_f]), FRAME_FREE);
		ck_assert_int_eq(slab_validate(&P, a, never[0]), -EINVAL);
		ck_assert_uint_eq(slab_free_objs(&P, a, never, 3), 3);
		ck_assert_uint_eq(stat_sum(a, ST_FLUSH_INVALID), inv0 + 3);
		inv0 += 3;
		/* Nothing in the frame was touched. */
		ck_assert_uint_eq(atomic_load(&P.frame_owner[last_f]), FRAME_FREE);
		ck_assert_uint_eq(P.slabs[last_f].cache, FRAME_FREE);
		ck_assert_uint_eq(P.slabs[last_f].nfree, 0);
	}
	CHECK_POOL(n_a + 5);
	/* Double free: a second call, and twice in one call. */
	ck_assert_uint_eq(free_one(a, objs_a[10]), 0);
	ck_assert_uint_eq(free_one(a, objs_a[10]), 1);
	ck_assert_uint_eq(stat_sum(a, ST_FLUSH_INVALID), inv0 + 1);
	inv0 += 1;
	{
		uint64_t twice[] = { objs_a[11], objs_a[300], objs_a[11], objs_a[300] };
		ck_assert_uint_eq(slab_free_objs(&P, a, twice, 4), 2);
		ck_assert_uint_eq(stat_sum(a, ST_FLUSH_INVALID), inv0 + 2);
		inv0 += 2;
	}
	n_a -= 3;
	CHECK_POOL(n_a + 5);
	/* Good and bad mixed in one call: the good ones are freed. */
	{
		uint64_t mix[] = { objs_a[20], UINT64_MAX, objs_a[21] + 4, objs_a[400],
				   obj_b[1], objs_a[22], objs_a[20] };
		ck_assert_uint_eq(slab_free_objs(&P, a, mix, 7), 4);
		ck_assert_uint_eq(stat_sum(a, ST_FLUSH_INVALID), inv0 + 4);
		inv0 += 4;
		n_a -= 3;
	}
	CHECK_POOL(n_a + 5);
	/* Objects of a released frame. */
	{
		uint64_t keep[512];
		uint32_t nk = 0, f0 = pool_frame_of(&P, objs_a[0]);

		for (uint32_t i = 0; i < 512; i++) {
			if (i == 10 || i == 11 || i == 300 || i == 20 || i == 22 || i == 400)
				continue;
			keep[nk++] = objs_a[i];
		}
		ck_assert_uint_eq(nk, n_a);
		ck_assert_uint_eq(free_n(a, keep, nk), 0);
		ck_assert_uint_eq(slab_shrink(&P, a, 0, 0) + slab_shrink(&P, a, 1, 0), 2);
		ck_assert_uint_eq(atomic_load(&P.frame_owner[f0]), FRAME_FREE);
		ck_assert_uint_eq(free_one(a, objs_a[0]), 1);
		ck_assert_uint_eq(free_one(a, objs_a[300]), 1);
		ck_assert_uint_eq(stat_sum(a, ST_FLUSH_INVALID), inv0 + 2);
		n_a = 0;
	}
	/* Data untouched by all that (b's objects still intact and in use). */
	CHECK_POOL(5);
	ck_assert_int_eq(pool_check(&P, (int)b, 4, NULL, ERR, sizeof ERR), 0);
	ck_assert_int_eq(pool_check(&P, (int)t, 1, NULL, ERR, sizeof ERR), 0);
	ck_assert_uint_eq(slab_free_objs(&P, b, obj_b, 4), 0);
	ck_assert_uint_eq(free_one(t, obj_t), 0);
	CHECK_POOL(0);
}
END_TEST

/* ---- try-lock -------------------------------------------------------- */

struct holder {
	pthread_mutex_t *lock;
	_Atomic int held, release;
};

static void *holder_main(void *arg)
{
	struct holder *h = arg;

	pthread_mutex_lock(h->lock);
	atomic_store(&h->held, 1);
	while (!atomic_load(&h->release))
		sched_yield();
	pthread_mutex_unlock(h->lock);
	return NULL;
}

START_TEST(test_trylock)
{
	struct holder h;
	pthread_t th;
	uint32_t c, c2, busy, other_node, other_cache;
	uint64_t objs[64], o2;
	double t0, dt;

	pool_up(2, 64 * MIB);
	c = cache_new("try", 256, 8, 0);
	c2 = cache_new("try2", 256, 8, 0);
	ck_assert_uint_eq(slab_alloc_objs(&P, c, 0, objs, 8, 1), 8);   /* free lock */
	memset(&h, 0, sizeof(h));
	h.lock = &pool_cnode(&P, c, 0)->lock;
	ck_assert_int_eq(pthread_create(&th, NULL, holder_main, &h), 0);
	while (!atomic_load(&h.held))
		sched_yield();

	/* While it is held (no assertion until the holder is released: with
	 * CK_FORK=no a failed one would leave the holder spinning). */
	t0 = now_s();
	busy = slab_alloc_objs(&P, c, 0, objs + 8, 8, 1);
	dt = now_s() - t0;
	/* Another node's lock is free: served. */
	other_node = slab_alloc_objs(&P, c, 1, objs + 8 + busy, 8, 1);
	/* Another cache on the same node: its own lock. */
	other_cache = slab_alloc_objs(&P, c2, 0, &o2, 1, 1);
	atomic_store(&h.release, 1);
	pthread_join(th, NULL);

	ck_assert_msg(busy == 0, "trylock alloc on a held lock took %u objects", busy);
	ck_assert_msg(dt < 0.5, "trylock alloc on a held lock took %.3f s", dt);
	ck_assert_uint_eq(other_node, 8);
	verify_placement(c, 1, objs + 8, 8);
	ck_assert_uint_eq(other_cache, 1);
	ck_assert_uint_eq(slab_free_objs(&P, c2, &o2, 1), 0);
	ck_assert_uint_eq(slab_alloc_objs(&P, c, 0, objs + 16, 8, 1), 8);
	verify_placement(c, 0, objs + 16, 8);
	verify_distinct(objs, 24, 256);
	CHECK_POOL(24);
	ck_assert_uint_eq(free_n(c, objs, 24), 0);
	CHECK_POOL(0);
}
END_TEST

static Suite *slab_refuse_suite(void)
{
	Suite *su = suite_create("slab_refuse");
	TCase *tc;

	tc = tcase_create("cap");
	tcase_set_timeout(tc, 30);
	tcase_add_checked_fixture(tc, slab_setup, slab_teardown);
	tcase_add_test(tc, test_mem_cap);
	tcase_add_test(tc, test_cap_reclaims_other_caches_empty_slabs);
	suite_add_tcase(su, tc);

	tc = tcase_create("free");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, slab_setup, slab_teardown);
	tcase_add_test(tc, test_free_validation);
	tcase_add_test(tc, test_trylock);
	suite_add_tcase(su, tc);
	return su;
}

int main(void)
{
	return run_suite(slab_refuse_suite());
}
