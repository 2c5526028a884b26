/*
 * guest_cpuless.c - mode cpuless [a node with memory and no CPU]: the pool
 * has that node; sheaf_thread_set_node to it works, its barns get stocked,
 * its objects land on it.
 */
#include <stdlib.h>

#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_json.h"
#include "tests/helpers/util_proc.h"
#include "tests/helpers/util_sheafctl.h"
#include "tests/numa/guest_util.h"

static int cpuless_node(void)
{
	int mem[MAXN], nm = mem_nodes(mem), cpus[64];

	for (int i = 0; i < nm; i++)
		if (node_cpus(mem[i], cpus) == 0)
			return mem[i];
	REQUIRE(0, "no CPU-less memory node in this guest");
	return -1;
}

/* The pool has the CPU-less node (no CPUs in `info`). */
START_TEST(cpuless_pool)
{
	int mem[MAXN], nm = mem_nodes(mem), kn = cpuless_node(), idx = index_of(mem, nm, kn);
	struct jv *info, *nodes;
	sheaf_pool_t *p;

	start_sheafd("256M", NULL);
	p = connect_pool(D.sock);
	require_pool_nodes(p, nm, "the pool");
	sheaf_disconnect(p);
	info = CTLJ("info");
	nodes = info_nodes(info, nm);
	require_kernel_nodes(nodes, mem, nm, "");
	REQUIRE(jarr(nodes->v[idx], "cpus")->n == 0, "the CPU-less node lists CPUs");
	jv_free(info);
	stop_sheafd(NULL);
}
END_TEST

/* set_node to the CPU-less node: its barns get stocked (allocations
 * succeed without waiting out wait_ms), its objects land on it. */
START_TEST(cpuless_alloc)
{
	int mem[MAXN], nm = mem_nodes(mem), kn = cpuless_node(), idx = index_of(mem, nm, kn);
	void **objs = objs_new(NODE_N);
	uint64_t per_kn[MAXN];
	sheaf_pool_t *p;
	sheaf_cache_t *c = start_with_cache("256M", NULL, "cl", NODE_OBJ, &p);

	REQUIRE(sheaf_thread_set_node(p, (unsigned)idx) == 0, "set_node(%d), the CPU-less node",
		idx);
	for (int round = 0; round < 2; round++) {
		int64_t t0 = now_ms(), dt;

		alloc_all(c, objs, NODE_N);
		dt = now_ms() - t0;
		REQUIRE(dt < 4000, "%d allocations took %lld ms (barn not stocked?)", NODE_N,
			(long long)dt);
		touch(objs, NODE_N, NODE_OBJ, 3);
		count_pages(objs, NODE_N, NODE_OBJ, per_kn);
		require_all_on(per_kn, kn, "objects homed on the CPU-less node");
		free_all(c, objs, NODE_N);
	}
	REQUIRE(counter(c, idx, "alloc_fastpath") + counter(c, idx, "alloc_slowpath") >= 2 * NODE_N,
		"the CPU-less node's counters miss the allocations");
	free(objs);
	stop_sheafd(p);
}
END_TEST

void add_cpuless(Suite *s, int timeout)
{
	ADD_ALONE(s, cpuless_pool, timeout);
	ADD_ALONE(s, cpuless_alloc, timeout);
}
