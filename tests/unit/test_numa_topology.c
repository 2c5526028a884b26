/*
 * test_numa_topology.c - shm/numa.c's topology and placement rules on fake
 * sysfs node trees (a directory laid out as /sys/devices/system/node):
 * two nodes, a memoryless node (CPUs, no memory), a CPU-less memory node
 * (a CXL expander's shape), sparse kernel ids, four nodes of unequal
 * distances; the policy names; the bind cap's default; the Tune key; and a
 * bound pool made over a fake one-node tree (the only node this host can
 * bind to), whose node cap stops the slab layer's frames and counts the
 * refusals.  That a bound pool's nodes never take each other's objects
 * needs two real nodes: the asym-bind guest (tests/numa/guest_asym.c).
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shm/numa.h"
#include "shm/pool.h"
#include "shm/engine/slab.h"
#include "shm/tune.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_slab.h"

static char root[64];

static void put(const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, name);
	f = fopen(path, "w");
	ck_assert_msg(f != NULL, "%s", path);
	fputs(text, f);
	fclose(f);
}

/* Kernel node @id: CPUs @cpus ("" for none), @total and @free_mib MiB of
 * memory, distance line @dist. */
static void node(unsigned id, const char *cpus, unsigned total_mib, unsigned free_mib,
		 const char *dist)
{
	char name[160], text[512];

	snprintf(name, sizeof(name), "%s/node%u", root, id);
	ck_assert_int_eq(mkdir(name, 0755), 0);
	snprintf(name, sizeof(name), "node%u/cpulist", id);
	snprintf(text, sizeof(text), "%s\n", cpus);
	put(name, text);
	snprintf(name, sizeof(name), "node%u/meminfo", id);
	snprintf(text, sizeof(text),
		 "Node %u MemTotal:       %u kB\nNode %u MemFree:        %u kB\n"
		 "Node %u MemUsed:        %u kB\n", id, total_mib * 1024, id, free_mib * 1024,
		 id, (total_mib - free_mib) * 1024);
	put(name, text);
	snprintf(name, sizeof(name), "node%u/distance", id);
	snprintf(text, sizeof(text), "%s\n", dist);
	put(name, text);
}

static void tree_setup(void)
{
	snprintf(root, sizeof(root), "/tmp/sheaf-numa-XXXXXX");
	ck_assert(mkdtemp(root) != NULL);
}

static void tree_teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}

static void read_ok(struct ntopo *t)
{
	char err[256] = "";
	int rc = ntopo_read(t, root, err, sizeof(err));

	ck_assert_msg(rc == 0, "ntopo_read: %d %s", rc, err);
}

START_TEST(test_two_nodes)
{
	struct ntopo t;
	uint8_t order[SHEAF_MAX_NODES];

	put("online", "0-1\n");
	put("possible", "0-1\n");
	put("has_memory", "0-1\n");
	put("has_cpu", "0-1\n");
	node(0, "0-1", 1536, 1200, "10 20");
	node(1, "2-3", 256, 250, "20 10");
	read_ok(&t);
	ck_assert_uint_eq(t.nmem, 2);
	ck_assert_uint_eq(t.mem_ids[0], 0);
	ck_assert_uint_eq(t.mem_ids[1], 1);
	ck_assert_uint_eq(t.k[1].mem_total, 256ull << 20);
	ck_assert_uint_eq(t.k[1].mem_free, 250ull << 20);
	ck_assert_uint_eq(t.k[0].ncpus, 2);
	ck_assert_int_eq(ntopo_node_of_cpu(&t, 3), 1);
	ck_assert_int_eq(ntopo_node_of_cpu(&t, 4), -1);
	ck_assert_uint_eq(ntopo_home_of_cpu(&t, 1, t.mem_ids, t.nmem), 0);
	ck_assert_uint_eq(ntopo_home_of_cpu(&t, 2, t.mem_ids, t.nmem), 1);
	ck_assert_uint_eq(ntopo_distance(&t, 0, 1), 20);
	ck_assert_int_eq(ntopo_worker_node(&t, 1), 1);
	ntopo_refill_order(&t, t.mem_ids, t.nmem, 1, order);
	ck_assert_uint_eq(order[0], 0);
}
END_TEST

/* Node 1 has CPUs and no memory: no pool node; its CPUs' home is node 0. */
START_TEST(test_memoryless)
{
	struct ntopo t;

	put("online", "0-1\n");
	put("has_memory", "0\n");
	put("has_cpu", "0-1\n");
	node(0, "0", 1024, 900, "10 20");
	node(1, "1", 0, 0, "20 10");
	read_ok(&t);
	ck_assert_uint_eq(t.nmem, 1);
	ck_assert_uint_eq(t.mem_ids[0], 0);
	ck_assert(!t.k[1].has_memory && t.k[1].has_cpu);
	ck_assert_uint_eq(ntopo_home_of_cpu(&t, 1, t.mem_ids, t.nmem), 0);
}
END_TEST

/* Without has_memory/has_cpu (an old kernel): from meminfo and cpulist. */
START_TEST(test_memoryless_no_state_lists)
{
	struct ntopo t;

	put("online", "0-1\n");
	node(0, "0", 1024, 900, "10 20");
	node(1, "1", 0, 0, "20 10");
	read_ok(&t);
	ck_assert_uint_eq(t.nmem, 1);
	ck_assert(t.k[1].has_cpu && !t.k[1].has_memory);
}
END_TEST

/* Node 1 has memory and no CPU: a pool node, chosen by no CPU as home;
 * its worker runs on node 0's CPUs. */
START_TEST(test_cpuless)
{
	struct ntopo t;

	put("online", "0-1\n");
	put("has_memory", "0-1\n");
	put("has_cpu", "0\n");
	node(0, "0-1", 1024, 900, "10 30");
	node(1, "", 2048, 2000, "30 10");
	read_ok(&t);
	ck_assert_uint_eq(t.nmem, 2);
	ck_assert_uint_eq(t.mem_ids[1], 1);
	ck_assert(!t.k[1].has_cpu);
	ck_assert_uint_eq(t.k[1].ncpus, 0);
	ck_assert_int_eq(ntopo_worker_node(&t, 1), 0);
	ck_assert_int_eq(ntopo_worker_node(&t, 0), 0);
	ck_assert_uint_eq(ntopo_home_of_cpu(&t, 0, t.mem_ids, t.nmem), 0);
	ck_assert_uint_eq(ntopo_home_of_cpu(&t, 1, t.mem_ids, t.nmem), 0);
}
END_TEST

/* Online 0, 2, 5: memory on 0 and 5; node 2 (CPUs only) is nearer 5. */
START_TEST(test_sparse_ids)
{
	struct ntopo t;
	uint8_t order[SHEAF_MAX_NODES];

	put("online", "0,2,5\n");
	put("has_memory", "0,5\n");
	put("has_cpu", "0,2,5\n");
	node(0, "0", 1024, 900, "10 30 40");
	node(2, "1", 0, 0, "30 10 12");
	node(5, "2-3", 512, 500, "40 12 10");
	read_ok(&t);
	ck_assert_uint_eq(t.nmem, 2);
	ck_assert_uint_eq(t.mem_ids[0], 0);
	ck_assert_uint_eq(t.mem_ids[1], 5);
	ck_assert_uint_eq(ntopo_distance(&t, 2, 5), 12);
	ck_assert_uint_eq(ntopo_distance(&t, 5, 0), 40);
	ck_assert_uint_eq(ntopo_home_of_cpu(&t, 1, t.mem_ids, t.nmem), 1);
	ck_assert_uint_eq(ntopo_home_of_cpu(&t, 0, t.mem_ids, t.nmem), 0);
	ck_assert_uint_eq(ntopo_home_of_cpu(&t, 3, t.mem_ids, t.nmem), 1);
	ck_assert_int_eq(ntopo_worker_node(&t, 5), 5);
	ntopo_refill_order(&t, t.mem_ids, t.nmem, 0, order);
	ck_assert_uint_eq(order[0], 1);
}
END_TEST

/* Four nodes: each refill order is nearest first, ties in ring order. */
START_TEST(test_refill_order_by_distance)
{
	struct ntopo t;
	uint8_t o[SHEAF_MAX_NODES];

	put("online", "0-3\n");
	put("has_memory", "0-3\n");
	put("has_cpu", "0-3\n");
	node(0, "0", 512, 500, "10 21 11 31");
	node(1, "1", 512, 500, "21 10 31 11");
	node(2, "2", 512, 500, "11 31 10 21");
	node(3, "3", 512, 500, "31 11 21 10");
	read_ok(&t);
	ntopo_refill_order(&t, t.mem_ids, t.nmem, 0, o);
	ck_assert_msg(o[0] == 2 && o[1] == 1 && o[2] == 3, "%u %u %u", o[0], o[1], o[2]);
	ntopo_refill_order(&t, t.mem_ids, t.nmem, 3, o);
	ck_assert_msg(o[0] == 1 && o[1] == 2 && o[2] == 0, "%u %u %u", o[0], o[1], o[2]);
	/* Equal distances: the ring from self. */
	ntopo_refill_order(NULL, t.mem_ids, t.nmem, 2, o);
	ck_assert_msg(o[0] == 3 && o[1] == 0 && o[2] == 1, "%u %u %u", o[0], o[1], o[2]);
}
END_TEST

START_TEST(test_no_tree)
{
	struct ntopo t;
	char err[256] = "";

	ck_assert_int_eq(ntopo_read(&t, root, err, sizeof(err)), -ENOENT);
	ck_assert(strstr(err, "node list") != NULL);
	put("online", "0\n");
	put("has_memory", "\n");
	ck_assert_int_eq(ntopo_read(&t, root, err, sizeof(err)), -ENOENT);
	ck_assert(strstr(err, "no node with memory") != NULL);
	put("online", "0-x\n");
	ck_assert_int_eq(ntopo_read(&t, root, err, sizeof(err)), -ENOENT);
}
END_TEST

START_TEST(test_policy_and_cap)
{
	ck_assert_int_eq(numa_policy_parse("preferred"), NUMA_POL_PREFERRED);
	ck_assert_int_eq(numa_policy_parse("bind"), NUMA_POL_BIND);
	ck_assert_int_eq(numa_policy_parse("interleave"), NUMA_POL_INTERLEAVE);
	ck_assert_int_eq(numa_policy_parse("Bind"), -1);
	ck_assert_int_eq(numa_policy_parse(""), -1);
	ck_assert_str_eq(numa_policy_name(NUMA_POL_BIND), "bind");
	/* 256 MiB node, 250 MiB free: reserve max(32 MiB, 32 MiB) -> 218 MiB. */
	ck_assert_uint_eq(ntopo_default_cap(256ull << 20, 250ull << 20, 512ull << 20),
			  218ull << 20);
	/* 16 GiB node, 10 GiB free: reserve 2 GiB; the region (512 MiB) wins. */
	ck_assert_uint_eq(ntopo_default_cap(16ull << 30, 10ull << 30, 512ull << 20),
			  512ull << 20);
	ck_assert_uint_eq(ntopo_default_cap(16ull << 30, 3ull << 30, 8ull << 30), 1ull << 30);
	/* Less free than the reserve: nothing. */
	ck_assert_uint_eq(ntopo_default_cap(256ull << 20, 20ull << 20, 512ull << 20), 0);
	/* Whole frames. */
	ck_assert_uint_eq(ntopo_default_cap(1ull << 30, (900ull << 20) + 12345, 1ull << 40) %
			  SLAB_SIZE, 0);
	ck_assert_int_eq(ntopo_tune_key("node_cap:1"), 1);
	ck_assert_int_eq(ntopo_tune_key("node_cap:63"), 63);
	ck_assert_int_eq(ntopo_tune_key("node_cap:64"), -1);
	ck_assert_int_eq(ntopo_tune_key("node_cap:"), -1);
	ck_assert_int_eq(ntopo_tune_key("node_cap:1x"), -1);
	ck_assert_int_eq(ntopo_tune_key("mem_cap"), -1);
}
END_TEST

/* A bound pool over a fake tree whose node 0 has 64 MiB free of 256: the
 * default cap is 32 MiB (free less the 32 MiB reserve); at it the slab
 * layer takes no frame and counts the refusal; Tune moves the cap. */
START_TEST(test_bind_cap)
{
	struct pool_params pp = { .size = 128ull << 20, .sheaf_count = 256,
				  .numa_policy = NUMA_POL_BIND, .numa_root = root };
	struct tune_setting set = { "node_cap:0", 8ull << 20 };
	uint64_t *objs = malloc(sizeof(uint64_t) * 65536);
	uint32_t c, got = 0, k;
	char err[256] = "";

	put("online", "0\n");
	put("has_memory", "0\n");
	put("has_cpu", "0\n");
	node(0, "0-1023", 256, 64, "10");
	ck_assert_int_eq(pool_create(&P, &pp, ERR, sizeof(ERR)), 0);
	ck_assert_int_eq(engine_init(&E, &P, ERR, sizeof(ERR)), 0);
	ck_assert_uint_eq(P.nodes, 1);
	ck_assert(!P.hdr->simulated);
	ck_assert_uint_eq(P.hdr->numa_policy, NUMA_POL_BIND);
	ck_assert(P.hdr->numa_flags & SHEAF_NUMA_F_IDS);
	ck_assert(P.hdr->numa_flags & SHEAF_NUMA_F_BOUND);
	ck_assert_uint_eq(P.hdr->kernel_node[0], 0);
	ck_assert_uint_eq(P.nalloc[0].mem_free, 64ull << 20);
	ck_assert_uint_eq(at_load_relaxed(&P.nalloc[0].cap_frames), (32u << 20) >> SLAB_SHIFT);

	/* Tune: checked (range, node), then applied. */
	ck_assert_int_eq(tune_check(&P, -1, &set, 1, err, sizeof(err)), 0);
	tune_apply(&P, -1, &set);
	ck_assert_uint_eq(at_load_relaxed(&P.nalloc[0].cap_frames), 32);
	set.key = "node_cap:3";
	ck_assert_int_eq(tune_check(&P, -1, &set, 1, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "no node of this pool") != NULL, "%s", err);
	set.key = "node_cap:0";
	set.value = 1ull << 40;
	ck_assert_int_eq(tune_check(&P, -1, &set, 1, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(tune_check(&P, 0, &set, 1, err, sizeof(err)), -EINVAL);

	/* 8 MiB = 32 frames of 64 KiB objects (4 a frame): 128 objects. */
	c = cache_new("big", 65536, 8, 0);
	while ((k = slab_alloc_objs(&P, c, 0, objs + got, 16, 0)) > 0)
		got += k;
	ck_assert_uint_eq(got, 32 * (SLAB_SIZE / 65536));
	ck_assert_uint_eq(at_load_relaxed(&P.nalloc[0].used), 32);
	ck_assert_uint_gt(at_load_relaxed(&P.nalloc[0].cap_refused), 0);
	/* A raised cap gives frames again. */
	set.value = 16ull << 20;
	tune_apply(&P, -1, &set);
	ck_assert_uint_gt(slab_alloc_objs(&P, c, 0, objs + got, 16, 0), 0);
	free(objs);
	engine_fini(&E);
	pool_down();
}
END_TEST

/* A node with less free memory than its reserve: cap 0, no frame at
 * all (never "no cap"); the other policies have no cap. */
START_TEST(test_bind_cap_zero)
{
	struct pool_params pp = { .size = 64ull << 20, .sheaf_count = 256,
				  .numa_policy = NUMA_POL_BIND, .numa_root = root };
	uint64_t objs[16];
	uint32_t c;

	put("online", "0\n");
	put("has_memory", "0\n");
	node(0, "0-1023", 256, 20, "10");
	ck_assert_int_eq(pool_create(&P, &pp, ERR, sizeof(ERR)), 0);
	ck_assert_int_eq(engine_init(&E, &P, ERR, sizeof(ERR)), 0);
	ck_assert(P.hdr->numa_flags & SHEAF_NUMA_F_CAPS);
	ck_assert_uint_eq(at_load_relaxed(&P.nalloc[0].cap_frames), 0);
	c = cache_new("none", 4096, 8, 0);
	ck_assert_uint_eq(slab_alloc_objs(&P, c, 0, objs, 16, 0), 0);
	ck_assert_uint_eq(at_load_relaxed(&P.nalloc[0].used), 0);
	ck_assert_uint_eq(at_load_relaxed(&P.nalloc[0].cap_refused), 1);
	engine_fini(&E);
	pool_down();

	pp.numa_policy = NUMA_POL_PREFERRED;
	ck_assert_int_eq(pool_create(&P, &pp, ERR, sizeof(ERR)), 0);
	ck_assert_int_eq(engine_init(&E, &P, ERR, sizeof(ERR)), 0);
	ck_assert(!(P.hdr->numa_flags & SHEAF_NUMA_F_CAPS));
	c = cache_new("some", 4096, 8, 0);
	ck_assert_uint_eq(slab_alloc_objs(&P, c, 0, objs, 16, 0), 16);
	ck_assert_uint_eq(slab_free_objs(&P, c, objs, 16), 0);
	engine_fini(&E);
	pool_down();
}
END_TEST

/* Simulated nodes: no policy, no ids, the ring order. */
START_TEST(test_simulated_order)
{
	pool_up(4, 64ull << 20);
	ck_assert(P.hdr->simulated);
	ck_assert_uint_eq(P.hdr->numa_flags, 0);
	ck_assert_uint_eq(P.refill_order[1][0], 2);
	ck_assert_uint_eq(P.refill_order[1][1], 3);
	ck_assert_uint_eq(P.refill_order[1][2], 0);
	pool_down();
}
END_TEST

static Suite *numa_suite(void)
{
	Suite *su = suite_create("numa_topology");
	TCase *tc = tcase_create("topology");

	tcase_add_checked_fixture(tc, tree_setup, tree_teardown);
	tcase_add_test(tc, test_two_nodes);
	tcase_add_test(tc, test_memoryless);
	tcase_add_test(tc, test_memoryless_no_state_lists);
	tcase_add_test(tc, test_cpuless);
	tcase_add_test(tc, test_sparse_ids);
	tcase_add_test(tc, test_refill_order_by_distance);
	tcase_add_test(tc, test_no_tree);
	tcase_add_test(tc, test_policy_and_cap);
	suite_add_tcase(su, tc);

	tc = tcase_create("pool");
	tcase_set_timeout(tc, 30);
	tcase_add_checked_fixture(tc, tree_setup, tree_teardown);
	tcase_add_checked_fixture(tc, slab_setup, slab_teardown);
	tcase_add_test(tc, test_bind_cap);
	tcase_add_test(tc, test_bind_cap_zero);
	tcase_add_test(tc, test_simulated_order);
	suite_add_tcase(su, tc);
	return su;
}

int main(void)
{
	return run_suite(numa_suite());
}
