/*
 * test_free.c - the contract of sheaf_free under misuse, on local
 * pools: a stale pointer whose frame went back is refused even when it is
 * the object this thread allocated last; double frees (the immediate one
 * refused at once, another caught at flush, exactly once, never handed out
 * twice afterwards); free(NULL); a handle of a destroyed pool; frees that
 * never wait for or fail on sheaves (a pool with few sheaves); and the
 * state a thread killed inside a debug cache's alloc or free leaves
 * (crafted, then resolved by the flush and the checker).
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "client/sheaf.h"
#include "client/internal.h"
#include "shm/engine/check.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_pool.h"

static sheaf_pool_t *mkpool(unsigned sheaves, unsigned wait_ms)
{
	struct sheaf_pool_config cfg = { .nodes = 1, .size = 64 << 20,
					  .sheaf_count = sheaves, .wait_ms = wait_ms };

	return pool_new(&cfg);
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return x < y ? -1 : x > y;
}

/* No pointer twice among @n. */
static void require_distinct(void **o, size_t n)
{
	void **s = malloc(n * sizeof(*s));

	ck_assert_ptr_nonnull(s);
	memcpy(s, o, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_ptr);
	for (size_t i = 1; i < n; i++)
		if (s[i] == s[i - 1])
			ck_abort_msg("object %p handed out twice", s[i]);
	free(s);
}

/* ---- 1. a stale free of the object allocated last ---------------------- */

struct handoff {
	sheaf_cache_t *c;
	void **o;
	int n;
};

/* The other side of a one-way flow: free everything, then flush the barn
 * to the slabs (which releases the emptied frames: min_partial is 0). */
static void *free_and_shrink(void *arg)
{
	struct handoff *h = arg;

	for (int i = 0; i < h->n; i++)
		REQUIRE(sheaf_free(h->c, h->o[i]) == 0, "failed");
	REQUIRE(sheaf_cache_shrink(h->c) >= 1, "failed");
	sheaf_thread_exit();
	return NULL;
}

START_TEST(stale_free_of_last_object)
{
	sheaf_pool_t *p = mkpool(4096, 0);
	sheaf_cache_t *c = mkcache(p, "stale", 64, 16, 0);
	void *o[16];
	struct handoff h = { c, o, 16 };
	pthread_t th;
	uint64_t off;

	c->sc->min_partial = 0;              /* every empty slab goes back */
	/* No stocking but for a waiter: a worker pass between the shrink and
	 * the check below refilled the barn, from the released frame taken
	 * again (the free stack is LIFO), and the frame was the cache's. */
	at_store_relaxed(&c->sc->barn_low, 0);
	/* One slow path, then 15 fast ones: the main sheaf is empty and its
	 * last object, o[15], is what the inline alloc returned last. */
	for (int i = 0; i < 16; i++)
		o[i] = xalloc(c);
	ck_assert_uint_eq(sheaf_size((struct shm_sheaf *)(void *)
				     sheaf__tls_fast[c->slot].main), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, free_and_shrink, &h), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	off = (uint64_t)((char *)o[15] - p->shm.base);
	ck_assert_uint_ne(p->shm.frame_owner[pool_frame_of(&p->shm, off)], c->id);
	/* The stale pointer is refused like any other; never handed out. */
	ck_assert_int_eq(sheaf_free(c, o[15]), -EINVAL);
	ck_assert_int_eq(sheaf_free(c, o[14]), -EINVAL);
	ck_assert_uint_eq(stat_count(c, -1, "free_invalid"), 2);
	/* Its address may come back only as a new object: the refill of the
	 * allocs below takes the released frame again (the free stack is
	 * LIFO), and a barn's sheaf is handed out lowest address first
	 * (client/vet.c, Order), o[15]'s.  An accepted stale free would
	 * hand it out from the main sheaf before any refill, its frame
	 * still nobody's. */
	for (int i = 0; i < 64; i++) {
		void *x = xalloc(c);
		REQUIRE(x != o[15] ||
			p->shm.frame_owner[pool_frame_of(&p->shm, off)] == c->id, "failed");
		REQUIRE(sheaf_free(c, x) == 0, "failed");
	}
	sheaf_thread_exit();
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/* ---- 2. double frees --------------------------------------------------- */

/* The object on top of the main sheaf, freed again: -EALREADY at once, on
 * the fast path's main and when the main is full (slow path), swaps with
 * the spare and barn exchanges included. */
START_TEST(double_free_immediate)
{
	sheaf_pool_t *p = mkpool(4096, 0);
	sheaf_cache_t *c = mkcache(p, "dfree", 64, 8, 0);
	enum { N = 100 };
	void *o[N], *again[N];

	for (int i = 0; i < N; i++)
		o[i] = xalloc(c);
	for (int i = 0; i < N; i++) {
		REQUIRE(sheaf_free(c, o[i]) == 0, "failed");
		REQUIRE(sheaf_free(c, o[i]) == -EALREADY, "failed");
	}
	ck_assert_uint_eq(stat_count(c, -1, "free_invalid"), N);
	ck_assert_int_eq(sheaf_alloc_bulk(c, again, N), 0);
	require_distinct(again, N);
	ck_assert_int_eq(sheaf_free_bulk(c, again, N), 0);
	sheaf_cache_shrink(c);
	ck_assert_uint_eq(stat_count(c, -1, "flush_invalid"), 0);
	sheaf_thread_exit();
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/* free(x), free(y), free(x): not on top, accepted; the engine drops the
 * second x when the sheaf reaches the slabs, exactly once; nothing is
 * handed out twice afterwards. */
START_TEST(double_free_caught_at_flush)
{
	sheaf_pool_t *p = mkpool(4096, 0);
	sheaf_cache_t *c = mkcache(p, "dflush", 64, 8, 0);
	enum { N = 2000 };
	void *x = xalloc(c), *y = xalloc(c);
	void **o = malloc(N * sizeof(*o));

	ck_assert_ptr_nonnull(o);
	ck_assert_int_eq(sheaf_free(c, x), 0);
	ck_assert_int_eq(sheaf_free(c, y), 0);
	ck_assert_int_eq(sheaf_free(c, x), 0);
	ck_assert_uint_eq(stat_count(c, -1, "free_invalid"), 0);
	sheaf_cache_shrink(c);               /* this thread's sheaves, the barn */
	ck_assert_uint_eq(stat_count(c, -1, "flush_invalid"), 1);
	ck_assert_int_eq(sheaf_alloc_bulk(c, o, N), 0);
	require_distinct(o, N);
	ck_assert_int_eq(sheaf_free_bulk(c, o, N), 0);
	sheaf_cache_shrink(c);
	ck_assert_uint_eq(stat_count(c, -1, "flush_invalid"), 1);
	free(o);
	sheaf_thread_exit();
	sheaf_pool_destroy(p);
}
END_TEST

/* ---- 3. free(NULL), 4. a handle of a destroyed pool -------------------- */

START_TEST(free_null_is_harmless)
{
	sheaf_pool_t *p = mkpool(4096, 0);
	sheaf_cache_t *c = mkcache(p, "null", 64, 8, 0);
	sheaf_cache_t *d = mkcache(p, "nulldbg", 64, 8, SHEAF_CACHE_DEBUG);
	void *x = xalloc(c);

	errno = 1234;
	ck_assert_int_eq(sheaf_free(c, NULL), 0);
	ck_assert_int_eq(sheaf_free(d, NULL), 0);
	ck_assert_int_eq(errno, 1234);
	ck_assert_uint_eq(stat_count(c, -1, "free_invalid"), 0);
	ck_assert_uint_eq(stat_count(d, -1, "free_invalid"), 0);
	ck_assert_int_eq(sheaf_free(c, x), 0);
	sheaf_thread_exit();
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

START_TEST(handle_of_destroyed_pool)
{
	sheaf_pool_t *p = mkpool(4096, 0);
	sheaf_cache_t *c = mkcache(p, "gone", 64, 8, 0);
	sheaf_cache_t *d = mkcache(p, "gonedbg", 64, 8, SHEAF_CACHE_DEBUG);
	void *x = xalloc(c), *y = xalloc(c), *z = xalloc(d);
	sheaf_pool_t *q;
	sheaf_cache_t *e;

	ck_assert_int_eq(sheaf_free(c, y), 0);
	sheaf_pool_destroy(p);               /* x and z were never freed */
	ck_assert_int_eq(sheaf_free(c, x), -EINVAL);
	ck_assert_int_eq(sheaf_free(d, z), -EINVAL);
	ck_assert_int_eq(sheaf_free(c, NULL), 0);
	errno = 0;
	ck_assert_ptr_null(sheaf_alloc(c));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_null(sheaf_prefill(c, 4));
	ck_assert_int_eq(errno, EINVAL);
	{
		void *v[2] = { x, NULL };
		ck_assert_int_eq(sheaf_free_bulk(c, v, 2), -EINVAL);
		ck_assert_int_eq(sheaf_alloc_bulk(c, v, 2), -EINVAL);
		ck_assert_ptr_null(v[0]);
	}
	/* A new pool's handles take other slots: the old ones stay refused. */
	q = mkpool(4096, 0);
	e = mkcache(q, "new", 64, 8, 0);
	ck_assert_ptr_ne(e, c);
	ck_assert_ptr_ne(e, d);
	ck_assert_int_eq(sheaf_free(c, x), -EINVAL);
	x = xalloc(e);
	ck_assert_int_eq(sheaf_free(e, x), 0);
	sheaf_thread_exit();
	require_pool_ok(q);
	sheaf_pool_destroy(q);
}
END_TEST

/* ---- 5. a free never fails or waits for want of a sheaf ---------------- */

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Free every object of @o with 0, none taking @limit_ms or more. */
static void free_all_promptly(sheaf_cache_t *c, void **o, int n, int64_t limit_ms)
{
	int64_t worst = 0;

	for (int i = 0; i < n; i++) {
		int64_t t0 = now_ns();
		int rc = sheaf_free(c, o[i]);
		int64_t dt = now_ns() - t0;

		if (rc != 0)
			ck_abort_msg("free #%d of %d: %d", i, n, rc);
		if (dt > worst)
			worst = dt;
	}
	ck_assert_msg(worst < limit_ms * 1000000, "a free took %lld us",
		      (long long)(worst / 1000));
}

/* 64 sheaves of capacity 1, wait_ms 300.  The barn (barn_limit) and the
 * thread's stash can hold more full sheaves than the pool has: every free
 * must still succeed, none failing with EAGAIN after 300 ms. */
START_TEST(free_needs_no_empty_sheaf_cap1)
{
	sheaf_pool_t *p = mkpool(64, 300);
	sheaf_cache_t *c = mkcache(p, "few", 64, 1, 0);
	enum { N = 2000 };
	void **o = malloc(N * sizeof(*o));

	ck_assert_ptr_nonnull(o);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < N; i++)
			o[i] = xalloc(c);
		errno = 0;
		free_all_promptly(c, o, N, 100);
		ck_assert_int_eq(errno, 0);
	}
	sheaf_thread_exit();
	require_pool_ok(p);
	free(o);
	sheaf_pool_destroy(p);
}
END_TEST

/* The same at the largest capacity, where no sheaf can grow: the engine
 * flushes a full sheaf for a free that waits (shm/engine/worker.c). */
START_TEST(free_needs_no_empty_sheaf_cap256)
{
	sheaf_pool_t *p = mkpool(64, 300);
	sheaf_cache_t *c = mkcache(p, "few256", 64, 256, 0);
	enum { N = 40000 };
	void **o = malloc(N * sizeof(*o));

	ck_assert_ptr_nonnull(o);
	c->sc->barn_limit = 512;             /* the barn may hold every sheaf */
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < N; i++)
			o[i] = xalloc(c);
		free_all_promptly(c, o, N, 100);
	}
	sheaf_thread_exit();
	require_pool_ok(p);
	free(o);
	sheaf_pool_destroy(p);
}
END_TEST

/* ---- 6. debug caches: what a killed thread leaves ---------------------- */

static _Atomic uint64_t *bit_of(sheaf_pool_t *p, sheaf_cache_t *c, void *obj, uint64_t *bit)
{
	uint64_t off = (uint64_t)((char *)obj - p->shm.base);
	uint32_t f = pool_frame_of(&p->shm, off);
	uint32_t idx = (uint32_t)((off - pool_frame_off(&p->shm, f)) / c->sc->obj_size);

	*bit = 1ull << (idx % 64);
	return &pool_inuse(&p->shm, f)[idx / 64];
}

/* The checker without the in-use count (the counters of a killed thread
 * are one off, docs/design.md "Limits"), on a quiet pool. */
static int walk(sheaf_pool_t *p)
{
	char err[512] = "";
	int rc;

	engine_stop(&p->engine);
	rc = pool_check(&p->shm, -1, -1, NULL, err, sizeof(err));
	ck_assert_int_eq(engine_start(&p->engine, err, sizeof(err)), 0);

	if (rc != 0)
		fprintf(stderr, "pool_check: %s\n", err);
	return rc;
}

/* A free killed between its push and the clearing of the bit: the object is
 * in the thread's main sheaf with its bit set.  The checker allows it; once
 * the sheaf is flushed the object is free in its slab, and the checker
 * clears the bit; the object is then allocated and freed as any other. */
START_TEST(debug_free_killed_between_steps)
{
	sheaf_pool_t *p = mkpool(4096, 0);
	sheaf_cache_t *c = mkcache(p, "dbgkill", 64, 8, SHEAF_CACHE_DEBUG);
	void *x = xalloc(c), *y;
	struct tcache *t = tls_state->tc[c->slot];
	_Atomic uint64_t *w;
	uint64_t bit;
	int found = 0;

	/* No stocking but for a waiter: a worker pass between the shrink and
	 * the walk refilled the barn, x taken again from its slab into a full
	 * sheaf, where the checker leaves its bit alone (CI, under ASan). */
	at_store_relaxed(&c->sc->barn_low, 0);
	w = bit_of(p, c, x, &bit);
	ck_assert(*w & bit);
	sheaf_push(tmain(t), (uint64_t)((char *)x - p->shm.base));   /* step 1 only */
	ck_assert_int_eq(walk(p), 0);
	ck_assert(*w & bit);                 /* in a sheaf: left alone */
	sheaf_cache_shrink(c);               /* the sheaf reaches the slabs */
	ck_assert(*w & bit);
	ck_assert_int_eq(walk(p), 0);
	ck_assert(!(*w & bit));              /* free in its slab: cleared */
	/* x is an ordinary free object again. */
	for (int i = 0; i < 5000 && !found; i++) {
		y = xalloc(c);
		if (y == x)
			found = 1;
		else
			ck_assert_int_eq(sheaf_free(c, y), 0);
	}
	ck_assert(found);
	ck_assert_int_eq(sheaf_free(c, x), 0);
	ck_assert_int_eq(sheaf_free(c, x), -EALREADY);
	sheaf_thread_exit();
	ck_assert_int_eq(walk(p), 0);
	sheaf_pool_destroy(p);
}
END_TEST

/* An alloc killed between setting the bit and the pop: the object is still
 * on top of the main sheaf with its bit set; the checker allows it, and the
 * next alloc takes it as usual. */
START_TEST(debug_alloc_killed_between_steps)
{
	sheaf_pool_t *p = mkpool(4096, 0);
	sheaf_cache_t *c = mkcache(p, "dbgkilla", 64, 8, SHEAF_CACHE_DEBUG);
	void *x = xalloc(c), *y;
	struct tcache *t = tls_state->tc[c->slot];
	struct shm_sheaf *m = tmain(t);
	_Atomic uint64_t *w;
	uint64_t bit;

	ck_assert_uint_gt(sheaf_size(m), 0);
	y = p->shm.base + m->objs[sheaf_size(m) - 1];
	w = bit_of(p, c, y, &bit);
	ck_assert(!(*w & bit));
	*w |= bit;                           /* step 1 only */
	ck_assert_int_eq(walk(p), 0);
	ck_assert_ptr_eq(xalloc(c), y);
	ck_assert(*w & bit);
	ck_assert_int_eq(sheaf_free(c, y), 0);
	ck_assert(!(*w & bit));
	ck_assert_int_eq(sheaf_free(c, x), 0);
	sheaf_thread_exit();
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

static Suite *free_suite(void)
{
	Suite *s = suite_create("free");

	ADD_ALONE(s, stale_free_of_last_object, 60);
	ADD_ALONE(s, double_free_immediate, 60);
	ADD_ALONE(s, double_free_caught_at_flush, 60);
	ADD_ALONE(s, free_null_is_harmless, 60);
	ADD_ALONE(s, handle_of_destroyed_pool, 60);
	ADD_ALONE(s, free_needs_no_empty_sheaf_cap1, 120);
	ADD_ALONE(s, free_needs_no_empty_sheaf_cap256, 120);
	ADD_ALONE(s, debug_free_killed_between_steps, 60);
	ADD_ALONE(s, debug_alloc_killed_between_steps, 60);
	return s;
}

int main(void)
{
	return run_suite(free_suite());
}
