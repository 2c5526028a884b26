/*
 * test_bulk.c - the calls that move many objects at once, on a local pool
 * (engine threads in this process): a prefill's guarantee, the bulk calls'
 * runs on the main sheaf (counts, a bad pointer and an immediate double
 * free amid a run, another node's objects amid a run), and bulk alloc
 * all-or-nothing at the pool's memory cap (ENOMEM, promptly).
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "client/sheaf.h"
#include "shm/stats.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_pool.h"

/* A local pool of @size bytes, @cap of memory at most, one node. */
static sheaf_pool_t *mkpool(size_t size, size_t cap)
{
	struct sheaf_pool_config cfg = { .nodes = 1, .size = size, .mem_cap = cap,
					  .sheaf_count = 4096 };

	return pool_new(&cfg);
}

/* ---- prefill, bulk, ENOMEM --------------------------------------------- */

START_TEST(prefill_guarantee)
{
	sheaf_pool_t *p = mkpool(64 << 20, 1 << 20);   /* 4 slabs */
	sheaf_cache_t *c = mkcache(p, "prefill", 64, 32, 0);
	sheaf_prefill_t *pf = sheaf_prefill(c, 100);
	void *o[100];

	ck_assert_ptr_nonnull(pf);
	ck_assert_uint_eq(sheaf_prefill_remaining(pf), 100);
	ck_assert_uint_eq(stat_count(c, -1, "sheaf_prefill_oversize"), 1);
	for (int i = 0; i < 60; i++) {
		o[i] = sheaf_prefill_alloc(pf);
		ck_assert_ptr_nonnull(o[i]);
	}
	ck_assert_uint_eq(cache_stats_of(c, -1).in_use, 100);
	sheaf_prefill_return(pf);        /* 40 come back */
	ck_assert_uint_eq(cache_stats_of(c, -1).in_use, 60);
	ck_assert_uint_eq(stat_count(c, -1, "sheaf_return_fast") + stat_count(c, -1, "sheaf_return_slow"), 1);
	ck_assert_int_eq(sheaf_free_bulk(c, o, 60), 0);
	/* A reservation larger than the pool can hold fails as a whole. */
	pf = sheaf_prefill(c, 65536);
	ck_assert_ptr_null(pf);
	ck_assert_int_eq(errno, ENOMEM);
	ck_assert_uint_eq(cache_stats_of(c, -1).in_use, 0);
	/* Used up: ENOSPC, not a crash. */
	pf = sheaf_prefill(c, 2);
	ck_assert_ptr_nonnull(pf);
	ck_assert_ptr_nonnull(o[0] = sheaf_prefill_alloc(pf));
	ck_assert_ptr_nonnull(o[1] = sheaf_prefill_alloc(pf));
	ck_assert_ptr_null(sheaf_prefill_alloc(pf));
	ck_assert_int_eq(errno, ENOSPC);
	sheaf_prefill_return(pf);
	ck_assert_int_eq(sheaf_free_bulk(c, o, 2), 0);
	ck_assert_ptr_null(sheaf_prefill(c, 0));
	ck_assert_int_eq(errno, EINVAL);
	sheaf_thread_exit();
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/* The bulk calls' runs on the main sheaf: counted as single calls, every
 * object once, a bad pointer or an immediate double free in a run refused
 * alone (the first error returned) while the rest is freed. */
START_TEST(bulk_runs)
{
	sheaf_pool_t *p = mkpool(64 << 20, 0);
	sheaf_cache_t *c = mkcache(p, "runs", 64, 32, 0);
	enum { N = 200 };
	void *o[N], *v[N + 2];
	struct sheaf_stats st;

	ck_assert_int_eq(sheaf_alloc_bulk(c, o, N), 0);
	for (int i = 0; i < N; i++)
		for (int j = i + 1; j < N; j++)
			ck_assert_ptr_ne(o[i], o[j]);
	st = cache_stats_of(c, -1);
	ck_assert_uint_eq(st.stat[ST_ALLOC_FASTPATH] + st.stat[ST_ALLOC_SLOWPATH], N);
	ck_assert_uint_eq(st.in_use, N);
	require_pool_ok(p);
	/* A bad pointer amid a run: -EINVAL, the 100 others freed. */
	memcpy(v, o, 50 * sizeof(*v));
	v[50] = (char *)o[0] + 1;              /* not on an object boundary */
	v[51] = NULL;                            /* as sheaf_free(NULL): 0 */
	memcpy(v + 52, o + 50, 50 * sizeof(*v));
	ck_assert_int_eq(sheaf_free_bulk(c, v, 102), -EINVAL);
	ck_assert_uint_eq(cache_stats_of(c, -1).in_use, N - 100);
	ck_assert_uint_eq(stat_count(c, -1, "free_invalid"), 1);
	/* An immediate double free in a run: -EALREADY, freed once. */
	v[0] = o[100];
	v[1] = o[100];
	v[2] = o[101];
	ck_assert_int_eq(sheaf_free_bulk(c, v, 3), -EALREADY);
	ck_assert_uint_eq(cache_stats_of(c, -1).in_use, N - 102);
	/* The rest, across several sheaves' worth. */
	ck_assert_int_eq(sheaf_free_bulk(c, o + 102, N - 102), 0);
	st = cache_stats_of(c, -1);
	ck_assert_uint_eq(st.in_use, 0);
	ck_assert_uint_eq(st.stat[ST_FREE_FASTPATH] + st.stat[ST_FREE_SLOWPATH], N);
	/* Again, all of it: the objects come back. */
	ck_assert_int_eq(sheaf_alloc_bulk(c, o, N), 0);
	ck_assert_int_eq(sheaf_free_bulk(c, o, N), 0);
	sheaf_thread_exit();
	ck_assert_uint_eq(cache_stats_of(c, -1).in_use, 0);
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

struct node1_arg {
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	void **o;                    /* node 0's objects, interleaved below */
	int n;
};

/* On node 1: free node 0's objects interleaved with our own in one bulk
 * call; the runs stop at each foreign object, which goes the remote way. */
static void *node1_frees(void *arg)
{
	struct node1_arg *a = arg;
	void *mine[64], *mixed[128];

	ck_assert_int_eq(sheaf_thread_set_node(a->p, 1), 0);
	ck_assert_int_eq(sheaf_alloc_bulk(a->c, mine, (size_t)a->n), 0);
	for (int i = 0; i < a->n; i++) {
		mixed[2 * i] = mine[i];
		mixed[2 * i + 1] = a->o[i];
	}
	ck_assert_int_eq(sheaf_free_bulk(a->c, mixed, 2 * (size_t)a->n), 0);
	sheaf_thread_exit();
	return NULL;
}

START_TEST(bulk_free_of_other_nodes_objects)
{
	struct sheaf_pool_config cfg = { .nodes = 2, .size = 64 << 20, .sheaf_count = 4096 };
	sheaf_pool_t *p = pool_new(&cfg);
	sheaf_cache_t *c = mkcache(p, "nodes", 64, 16, 0);
	enum { N = 64 };
	void *o[N];
	struct node1_arg a = { p, c, o, N };
	pthread_t th;

	ck_assert_int_eq(sheaf_thread_set_node(p, 0), 0);
	ck_assert_int_eq(sheaf_alloc_bulk(c, o, N), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, node1_frees, &a), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_uint_eq(stat_count(c, 1, "free_remote"), N);
	ck_assert_uint_eq(cache_stats_of(c, -1).in_use, 0);
	sheaf_thread_exit();
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

START_TEST(bulk_and_enomem_at_cap)
{
	sheaf_pool_t *p = mkpool(64 << 20, 1 << 20);   /* 4 slabs of 4096 */
	sheaf_cache_t *c = mkcache(p, "cap", 64, 32, 0);
	enum { MAX = 4 * 4096 };
	void **o = calloc(MAX + 1, sizeof(*o));
	struct timespec a, b;
	int n = 0;

	ck_assert_int_eq(sheaf_alloc_bulk(c, o, 1000), 0);
	for (int i = 0; i < 1000; i++)
		for (int j = i + 1; j < 1000; j += 97)
			ck_assert_ptr_ne(o[i], o[j]);
	ck_assert_int_eq(sheaf_free_bulk(c, o, 1000), 0);
	/* All or nothing past the cap. */
	ck_assert_int_eq(sheaf_alloc_bulk(c, o, MAX + 1), -ENOMEM);
	ck_assert_uint_eq(cache_stats_of(c, -1).in_use, 0);
	/* One by one until the cap: NULL with ENOMEM, promptly. */
	clock_gettime(CLOCK_MONOTONIC, &a);
	while (n <= MAX && (o[n] = sheaf_alloc(c)) != NULL)
		n++;
	clock_gettime(CLOCK_MONOTONIC, &b);
	ck_assert_int_eq(errno, ENOMEM);
	ck_assert_int_le(n, MAX);
	ck_assert_int_ge(n, MAX - 2 * 32);   /* all but what sits in sheaves */
	ck_assert_int_lt(b.tv_sec - a.tv_sec, 3);
	ck_assert_uint_ge(stat_count(c, -1, "alloc_fail"), 1);
	/* Again: still prompt, still ENOMEM. */
	ck_assert_ptr_null(sheaf_alloc(c));
	ck_assert_int_eq(errno, ENOMEM);
	ck_assert_int_eq(sheaf_free_bulk(c, o, (size_t)n), 0);
	/* Memory is usable again. */
	ck_assert_int_eq(sheaf_alloc_bulk(c, o, 1000), 0);
	ck_assert_int_eq(sheaf_free_bulk(c, o, 1000), 0);
	free(o);
	sheaf_thread_exit();
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("bulk");

	ADD_ALONE(s, prefill_guarantee, 120);
	ADD_ALONE(s, bulk_runs, 60);
	ADD_ALONE(s, bulk_free_of_other_nodes_objects, 60);
	ADD_ALONE(s, bulk_and_enomem_at_cap, 120);
	return run_suite(s);
}
