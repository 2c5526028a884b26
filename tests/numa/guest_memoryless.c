/*
 * guest_memoryless.c - mode memoryless [a node with CPUs and no memory;
 * SHEAF_NUMA_NEAR names the memory node nearest to it]: the pool has the
 * memory nodes only; a thread on the memoryless node's CPU is homed on the
 * nearest memory node and its objects land there; a local pool
 * (sheaf_pool_create) has the memory nodes only too, and libsheaf prints
 * nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/helpers/util_check.h"
#include "tests/helpers/util_deploy.h"
#include "tests/helpers/util_json.h"
#include "tests/helpers/util_sheafctl.h"
#include "tests/numa/guest_util.h"

/* The memoryless node (possible, not in has_memory) and its first CPU. */
static int memoryless_node(int *cpu)
{
	int pos[MAXN], mem[MAXN], np = possible_nodes(pos), nm = mem_nodes(mem), cpus[64];

	for (int i = 0; i < np; i++) {
		if (index_of(mem, nm, pos[i]) < 0) {
			REQUIRE(node_cpus(pos[i], cpus) >= 1, "memoryless node %d has no CPU", pos[i]);
			*cpu = cpus[0];
			return pos[i];
		}
	}
	REQUIRE(0, "no memoryless node in this guest");
	return -1;
}

/* The memory node SHEAF_NUMA_NEAR names (the topology's nearest to the
 * memoryless node), checked against the node's distance row. */
static int nearest_memory_node(int ml)
{
	const char *env = getenv("SHEAF_NUMA_NEAR");
	int mem[MAXN], nm = mem_nodes(mem), d[MAXN], nd = node_distances(ml, d), best = -1, near;

	REQUIRE(env != NULL && *env != '\0', "no sheaf.near= on the kernel command line");
	near = atoi(env);
	for (int i = 0; i < nm; i++)
		if (mem[i] < nd && (best < 0 || d[mem[i]] < d[best]))
			best = mem[i];
	REQUIRE(best == near, "the distances make node %d nearest to node %d, the host says %d",
		best, ml, near);
	return near;
}

/* The pool has the memory nodes only, in ascending kernel order; libnuma
 * printed nothing. */
START_TEST(memoryless_pool)
{
	int mem[MAXN], pos[MAXN], nm = mem_nodes(mem), np = possible_nodes(pos);
	struct jv *info;
	sheaf_pool_t *p;

	REQUIRE(np > nm, "no memoryless node: %d nodes, %d with memory", np, nm);
	start_sheafd("256M", NULL);
	p = connect_pool(D.sock);
	log_clean(D.log);                        /* attached: the regions are bound */
	require_pool_nodes(p, nm, "the pool");
	sheaf_disconnect(p);
	info = CTLJ("info");
	require_kernel_nodes(info_nodes(info, nm), mem, nm, "");
	jv_free(info);
	stop_sheafd(NULL);
}
END_TEST

/* A thread on the memoryless node's CPU gets the nearest memory node as
 * home; each pool node's objects and region are on its kernel node. */
START_TEST(memoryless_home)
{
	int mem[MAXN], nm = mem_nodes(mem), cpu, ml = memoryless_node(&cpu);
	int near = nearest_memory_node(ml);
	void **objs = objs_new(NODE_N), **t;
	uint64_t per_kn[MAXN];
	char what[96];
	sheaf_pool_t *p;
	sheaf_cache_t *c = start_with_cache("256M", NULL, "ml", NODE_OBJ, &p);

	t = alloc_on_cpu(c, cpu, NODE_N, NODE_OBJ, per_kn);
	fmt(what, sizeof(what), "a thread on CPU %d (memoryless node %d)", cpu, ml);
	require_all_on(per_kn, near, what);
	require_pool_nodes(p, nm, "the pool");
	for (int i = 0; i < nm; i++) {
		alloc_homed(p, c, i, objs, NODE_N, NODE_OBJ, 2, per_kn);
		fmt(what, sizeof(what), "set_node(%d) (kernel node %d)", i, mem[i]);
		require_all_on(per_kn, mem[i], what);
		require_region_home("ml", i, mem, nm, 1);
		free_all(c, objs, NODE_N);
	}
	free_all(c, t, NODE_N);
	free(t);
	free(objs);
	stop_sheafd(p);
}
END_TEST

/* A local pool (sheaf_pool_create, real nodes) has the memory nodes only,
 * and libsheaf prints nothing (libnuma's errors included) on the way. */
START_TEST(memoryless_local)
{
	struct sheaf_pool_config cfg = { .size = 64 * MIB, .nodes = 0 };
	int mem[MAXN], nm = mem_nodes(mem), saved, fd;
	void **objs = objs_new(NODE_N);
	const char *log = "/tmp/local-stderr.log";
	uint64_t per_kn[MAXN];
	char err[256] = "", what[64];
	sheaf_pool_t *p;
	sheaf_cache_t *c;

	fflush(stderr);
	saved = dup(2);
	fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	REQUIRE(saved >= 0 && fd >= 0 && dup2(fd, 2) == 2, "stderr to %s: %s", log,
		strerror(errno));
	close(fd);
	/* No REQUIRE while stderr goes to the log: create, allocate on each
	 * node, then look. */
	p = sheaf_pool_create(&cfg, err, sizeof(err));
	if (p != NULL) {
		c = sheaf_cache_create(p, "local", NODE_OBJ, NULL);
		for (int i = 0; c != NULL && i < nm; i++) {
			if (sheaf_thread_set_node(p, (unsigned)i) != 0)
				break;
			for (size_t k = 0; k < NODE_N; k++)
				objs[k] = sheaf_alloc(c);
		}
	}
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	REQUIRE(p != NULL, "sheaf_pool_create: %s", err);
	log_clean(log);
	require_pool_nodes(p, nm, "the local pool");
	c = sheaf_cache_open(p, "local");
	REQUIRE(c != NULL, "cache: %s", strerror(errno));
	for (int i = 0; i < nm; i++) {
		alloc_homed(p, c, i, objs, NODE_N, NODE_OBJ, 10, per_kn);
		fmt(what, sizeof(what), "local pool node %d", i);
		require_all_on(per_kn, mem[i], what);
	}
	free(objs);
	sheaf_pool_destroy(p);
	no_oom_kill();
}
END_TEST

void add_memoryless(Suite *s, int timeout)
{
	ADD_ALONE(s, memoryless_pool, timeout);
	ADD_ALONE(s, memoryless_home, timeout);
	ADD_ALONE(s, memoryless_local, timeout);
}
