/*
 * guest_remote.c - mode remote [2 nodes]: frees of node 0's objects by a
 * node-1 thread count as free_remote; a node whose share is used up
 * refills from the other (refill_remote).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers/util_check.h"
#include "tests/numa/guest_util.h"

#define REM_OBJ 256
#define REM_N   8192

struct freer {
	sheaf_pool_t *pool;
	sheaf_cache_t *cache;
	void **objs;
	size_t n;
	int rc;
};

/* Homed on node 1, free the objects; no REQUIRE off the test's thread. */
static void *freer_main(void *arg)
{
	struct freer *f = arg;

	f->rc = sheaf_thread_set_node(f->pool, 1);
	for (size_t i = 0; i < f->n && f->rc == 0; i++)
		f->rc = sheaf_free(f->cache, f->objs[i]);
	sheaf_thread_exit();
	return NULL;
}

/* Node 0's objects freed by a thread homed on node 1: free_remote counts
 * each; the objects go home and are allocated again on node 0. */
START_TEST(remote_free)
{
	int mem[MAXN];
	void **objs = objs_new(REM_N);
	struct freer f;
	uint64_t per_kn[MAXN], before, after;
	pthread_t th;
	sheaf_pool_t *p;
	sheaf_cache_t *c;

	multi_nodes(mem);
	c = start_with_cache("256M", NULL, "rem", REM_OBJ, &p);
	alloc_homed(p, c, 0, objs, REM_N, REM_OBJ, 4, per_kn);
	require_all_on(per_kn, mem[0], "node 0's objects");
	before = counter(c, -1, "free_remote");
	f = (struct freer){ .pool = p, .cache = c, .objs = objs, .n = REM_N };
	REQUIRE(pthread_create(&th, NULL, freer_main, &f) == 0, "pthread_create");
	pthread_join(th, NULL);
	REQUIRE(f.rc == 0, "the node-1 thread's free: %s", strerror(-f.rc));
	after = counter(c, -1, "free_remote");
	printf("  free_remote %llu -> %llu (node 0 %llu, node 1 %llu)\n",
	       (unsigned long long)before, (unsigned long long)after,
	       (unsigned long long)counter(c, 0, "free_remote"),
	       (unsigned long long)counter(c, 1, "free_remote"));
	REQUIRE(after - before >= REM_N, "free_remote rose by %llu for %d remote frees",
		(unsigned long long)(after - before), REM_N);
	REQUIRE(ctl_counter("rem", "free_remote") >= REM_N, "sheafctl stats -n: free_remote %llu",
		(unsigned long long)ctl_counter("rem", "free_remote"));
	alloc_placed(c, objs, REM_N, REM_OBJ, 5, per_kn);
	require_all_on(per_kn, mem[0], "node 0's objects after the remote frees");
	free_all(c, objs, REM_N);
	free(objs);
	stop_sheafd(p);
}
END_TEST

/* A node whose share of the pool is used up refills from the other node:
 * the allocations go on, refill_remote > 0, the extra objects on kernel
 * node 0. */
START_TEST(remote_refill)
{
	const size_t obj = 4096, n = 48 * MIB / 4096;   /* past node 1's 32 MiB share */
	int mem[MAXN];
	void **objs = objs_new(n);
	uint64_t per_kn[MAXN];
	sheaf_pool_t *p;
	sheaf_cache_t *c;

	multi_nodes(mem);
	c = start_with_cache("64M", NULL, "refill", obj, &p);
	alloc_homed(p, c, 1, objs, n, obj, 6, per_kn);
	show_pages("48 MiB homed on node 1", per_kn);
	printf("  refill_remote: node 0 %llu, node 1 %llu\n",
	       (unsigned long long)counter(c, 0, "refill_remote"),
	       (unsigned long long)counter(c, 1, "refill_remote"));
	REQUIRE(counter(c, -1, "refill_remote") > 0, "refill_remote is 0");
	REQUIRE(per_kn[mem[0]] > 0, "no object came from node 0");
	REQUIRE(per_kn[mem[1]] > 0, "no object came from node 1");
	REQUIRE(ctl_counter("refill", "refill_remote") > 0, "sheafctl stats -n shows no "
		"refill_remote");
	free_all(c, objs, n);
	free(objs);
	stop_sheafd(p);
}
END_TEST

void add_remote(Suite *s, int timeout)
{
	ADD_ALONE(s, remote_free, timeout);
	ADD_ALONE(s, remote_refill, timeout);
}
