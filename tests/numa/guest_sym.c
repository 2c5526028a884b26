/*
 * guest_sym.c - mode sym [2 or 4 nodes, memory and a CPU each]: the pool
 * has one node per kernel node; objects homed on node i, by
 * sheaf_thread_set_node or by running on node i's CPU, live on kernel node
 * i; `sheafctl info` and `stats -n` say so; the policy comes from
 * numa_policy= or --numa-policy; under interleave each region spreads over
 * every node.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_deploy.h"
#include "tests/helpers/util_json.h"
#include "tests/helpers/util_proc.h"
#include "tests/helpers/util_sheafctl.h"
#include "tests/numa/guest_util.h"

/* Objects homed on node i (set_node, then a thread on node i's CPU) are on
 * kernel node i. */
START_TEST(sym_placement)
{
	int mem[MAXN], pos[MAXN], n = mem_nodes(mem);
	void **objs = objs_new(NODE_N);
	uint64_t per_kn[MAXN];
	char what[96];
	sheaf_pool_t *p;
	sheaf_cache_t *c;

	REQUIRE(n >= 2 && n == possible_nodes(pos), "not a symmetric guest: %d memory nodes", n);
	c = start_with_cache("256M", NULL, "sym", NODE_OBJ, &p);
	require_pool_nodes(p, n, "the pool");
	for (int i = 0; i < n; i++) {
		int cpus[64];
		void **t;

		alloc_homed(p, c, i, objs, NODE_N, NODE_OBJ, (unsigned char)i, per_kn);
		fmt(what, sizeof(what), "set_node(%d)", i);
		require_all_on(per_kn, mem[i], what);
		free_all(c, objs, NODE_N);

		REQUIRE(node_cpus(mem[i], cpus) >= 1, "node %d has no CPU", mem[i]);
		t = alloc_on_cpu(c, cpus[0], NODE_N, NODE_OBJ, per_kn);
		fmt(what, sizeof(what), "a thread on CPU %d (node %d)", cpus[0], mem[i]);
		require_all_on(per_kn, mem[i], what);
		free_all(c, t, NODE_N);
		free(t);
	}
	free(objs);
	stop_sheafd(p);
}
END_TEST

/* `sheafctl info` names the policy and each node (its kernel node, CPUs,
 * memory, cap); `stats -n` places each node's region on its kernel node. */
START_TEST(sym_info)
{
	int mem[MAXN], n = mem_nodes(mem);
	void **objs = objs_new(NODE_N);
	uint64_t per_kn[MAXN];
	struct jv *info, *nodes;
	sheaf_pool_t *p;
	sheaf_cache_t *c;

	start_sheafd("256M", NULL);
	info = CTLJ("info");
	require_policy(info, "preferred");
	nodes = info_nodes(info, n);
	for (int i = 0; i < n; i++) {
		struct jv *e = nodes->v[i], *cpus = jarr(e, "cpus");
		int want[64], nw = node_cpus(mem[i], want);

		REQUIRE(ju64(e, "index") == (uint64_t)i, "node %d: index %llu", i,
			(unsigned long long)ju64(e, "index"));
		REQUIRE(cpus->n == (size_t)nw, "node %d: %zu CPUs, sysfs %d", i, cpus->n, nw);
		for (int k = 0; k < nw; k++)
			REQUIRE(cpus->v[k]->t == J_NUM && atoi(cpus->v[k]->s) == want[k],
				"node %d: cpus[%d] is not %d", i, k, want[k]);
		REQUIRE(ju64(e, "mem_total") > 0, "node %d: mem_total 0", i);
		REQUIRE(ju64(e, "mem_free") <= ju64(e, "mem_total"), "node %d: mem_free > total", i);
		(void)ju64(e, "cap");
	}
	require_kernel_nodes(nodes, mem, n, "");
	jv_free(info);
	p = connect_pool(D.sock);
	c = make_cache(p, "sym", NODE_OBJ);
	for (int i = 0; i < n; i++)
		alloc_homed(p, c, i, objs, NODE_N, NODE_OBJ, 1, per_kn);
	for (int i = 0; i < n; i++)
		require_region_home("sym", i, mem, n, NODE_N * NODE_OBJ / PAGE);
	free(objs);
	stop_sheafd(p);
}
END_TEST

/* Interleave: every node's region spreads over every memory node, in
 * near-equal shares (the objects' pages, and pages_by_kernel_node). */
START_TEST(sym_interleave)
{
	int mem[MAXN], n = mem_nodes(mem);
	void **objs = objs_new(NODE_N);
	uint64_t per_kn[MAXN], total = NODE_N * NODE_OBJ / PAGE;
	char what[64];
	sheaf_pool_t *p;
	sheaf_cache_t *c = start_with_cache("256M", "interleave", "il", NODE_OBJ, &p);

	for (int i = 0; i < n; i++) {
		alloc_homed(p, c, i, objs, NODE_N, NODE_OBJ, 8, per_kn);
		fmt(what, sizeof(what), "pool node %d's objects, interleaved", i);
		show_pages(what, per_kn);
		for (int k = 0; k < n; k++) {
			REQUIRE(per_kn[mem[k]] * 2 * (uint64_t)n >= total, "pool node %d: %llu of %llu "
				"pages on kernel node %d", i, (unsigned long long)per_kn[mem[k]],
				(unsigned long long)total, mem[k]);
			REQUIRE(region_pages("il", i, mem[k]) > 0, "pool node %d's region: no page "
				"on kernel node %d (pages_by_kernel_node)", i, mem[k]);
		}
	}
	free(objs);
	stop_sheafd(p);
}
END_TEST

/* The policy from the config file (numa_policy=) or the flag, the flag
 * winning, as `sheafctl info` reports it; an unknown policy is refused. */
START_TEST(sym_policy)
{
	static const struct {
		const char *conf, *flag, *want;
	} cases[] = {
		{ "numa_policy=interleave\n", NULL, "interleave" },
		{ "numa_policy=interleave\n", "bind", "bind" },
		{ NULL, "bind", "bind" },
		{ NULL, "interleave", "interleave" },
		{ NULL, "preferred", "preferred" },
	};
	const char *bad[] = { "sheafd", "--foreground", "--socket", "/tmp/bad.sock",
			      "--numa-policy", "nearest", NULL };
	struct spawn_opts o = { .exe = sheafd_bin(), .out = "/tmp/bad.log", .err = "/tmp/bad.log",
				.stdin_null = 1 };
	char conf[PATH_MAX], err[256], buf[64];
	const char *msg;
	int st = 0;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *extra[8] = { "--size", "64M" };
		int n = 2;
		struct jv *info;

		dmn_init(&D);
		if (cases[i].conf != NULL) {
			fmt(conf, sizeof(conf), "%s/sheafd.conf", D.dir);
			REQUIRE(write_text(conf, cases[i].conf) == 0, "write %s", conf);
			extra[n++] = "-c";
			extra[n++] = conf;
		}
		if (cases[i].flag != NULL) {
			extra[n++] = "--numa-policy";
			extra[n++] = cases[i].flag;
		}
		extra[n] = NULL;
		start_sheafd_argv(extra);
		info = CTLJ("info");
		printf("  config %s, flag %s: numa_policy %s\n",
		       cases[i].conf ? "numa_policy=interleave" : "none",
		       cases[i].flag ? cases[i].flag : "none", jstr(info, "numa_policy"));
		require_policy(info, cases[i].want);
		jv_free(info);
		stop_sheafd(NULL);
	}
	msg = run_proc(bad, &o, 10000, &st, err, sizeof(err));
	REQUIRE(msg == NULL, "sheafd --numa-policy nearest: %s", msg);
	REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) != 0, "sheafd took --numa-policy nearest (%s)",
		status_str(st, buf, sizeof(buf)));
}
END_TEST

void add_sym(Suite *s, int timeout)
{
	ADD_ALONE(s, sym_placement, timeout);
	ADD_ALONE(s, sym_info, timeout);
	ADD_ALONE(s, sym_policy, timeout);
	ADD_ALONE(s, sym_interleave, timeout);
}
