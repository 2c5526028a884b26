/*
 * test_numa_bind.c - sheafd on this machine's real nodes under
 * --numa-policy bind: `sheafctl info` shows the policy and each node's
 * kernel id, CPUs, memory and cap; `tune --pool node_cap=K:BYTES` moves a
 * cap (and is refused for a node the pool lacks); a client homed on a
 * node at its cap gets NULL with ENOMEM promptly, sheafd logs the episode
 * once, `stats -n` counts the cache's resident pages by kernel node, and
 * `metrics` has each node's cap, use and refusals.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/sheaf.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_json.h"
#include "tests/helpers/util_proc.h"
#include "tests/helpers/util_sheafctl.h"

static struct dmn B;

static struct jv *ctl_json(char **argv)
{
	char *args[16] = { "-s", B.sock, "-o", "json" };
	struct run r;
	struct jv *v;
	int n = 4;

	for (int i = 0; argv[i] != NULL && n < 15; i++)
		args[n++] = argv[i];
	args[n] = NULL;
	run_argv(&r, 0, args);
	REQUIRE(r.status == 0, "sheafctl %s: exit %d: %s", argv[0], r.status, r.err);
	v = json_parse(r.out);
	run_free(&r);
	return v;
}

/* Allocate 1 KiB objects until NULL: 0 when that came with ENOMEM within
 * two seconds (the count in the exit status is not needed). */
static int fill(void *arg)
{
	sheaf_pool_t *p = child_connect(arg, "fill");
	sheaf_cache_t *c = sheaf_cache_open(p, "bound");
	struct timespec a, b;
	unsigned long n = 0;
	void *o;

	REQUIRE(c != NULL, "open: %s", strerror(errno));
	clock_gettime(CLOCK_MONOTONIC, &a);
	while ((o = sheaf_alloc(c)) != NULL) {
		memset(o, 0x5a, 1024);
		n++;
		REQUIRE(n < 100000, "no cap: %lu objects", n);
	}
	REQUIRE(errno == ENOMEM, "NULL with %s", strerror(errno));
	clock_gettime(CLOCK_MONOTONIC, &b);
	REQUIRE(b.tv_sec - a.tv_sec < 3, "ENOMEM took %ld s", (long)(b.tv_sec - a.tv_sec));
	/* 1 MiB cap = 4 frames of 1 KiB objects: 1024 at most. */
	REQUIRE(n > 0 && n <= 1024, "%lu objects under a 1 MiB cap", n);
	return 0;
}

START_TEST(test_bind)
{
	const char *argv[] = { sheafd_bin(), "--foreground", "--socket", B.sock, "--size",
			       "64M", "--sheaves", "1024", "--numa-policy", "bind", NULL };
	struct jv *v, *info, *nodes, *n0, *c, *pages;
	char cap[32], key[24];
	unsigned k0;
	struct run r;
	pid_t pid;

	dmn_init(&B);
	dmn_start_argv(&B, (char *const *)argv);
	v = ctl_json((char *[]){ "info", NULL });
	info = v;
	ck_assert_str_eq(jstr(v, "numa_policy"), "bind");
	ck_assert(!jbool(v, "simulated_nodes"));
	nodes = jarr(v, "nodes");
	ck_assert_uint_ge(nodes->n, 1);
	ck_assert_uint_eq(nodes->n, ju64(v, "node_count"));
	n0 = nodes->v[0];
	ck_assert_uint_eq(ju64(n0, "index"), 0);
	k0 = (unsigned)ju64(n0, "kernel_node");
	ck_assert_uint_gt(ju64(n0, "mem_total"), 0);
	ck_assert_uint_le(ju64(n0, "cap"), ju64(n0, "mem_free"));
	ck_assert(jarr(n0, "cpus") != NULL);

	/* A node the pool lacks, then node 0's cap to 1 MiB. */
	CTL_NOSOCK(&r, "-s", B.sock, "tune", "--pool", "node_cap=63:1M");
	ck_assert_int_eq(r.status, 1);
	ck_assert_msg(strstr(r.err, "no node of this pool") != NULL, "%s", r.err);
	run_free(&r);
	/* Every node's cap to 1 MiB, whichever the child's home is. */
	for (size_t i = 0; i < nodes->n; i++) {
		struct jv *t;

		snprintf(cap, sizeof(cap), "node_cap=%u:1M",
			 (unsigned)ju64(nodes->v[i], "kernel_node"));
		t = ctl_json((char *[]){ "tune", "--pool", cap, NULL });
		ck_assert_uint_eq(ju64(jarr(t, "node_caps")->v[i], "cap"), 1u << 20);
		jv_free(t);
	}
	CTL_NOSOCK(&r, "-s", B.sock, "create", "bound", "1024");
	ck_assert_int_eq(r.status, 0);
	run_free(&r);

	pid = fork_child(fill, B.sock);
	reap_ok(pid, 10000, "fill");
	for (int i = 0; i < 40 && !file_contains(B.log, "is at its cap"); i++)
		usleep(50000);
	ck_assert_msg(file_contains(B.log, "is at its cap"), "no cap line in %s", B.log);
	ck_assert(file_contains(B.log, "(1 MiB) under numa_policy=bind: allocation refused"));

	v = ctl_json((char *[]){ "stats", "bound", "-n", NULL });
	c = jarr(v, "caches")->v[0];
	/* The pages of the node that served the child, on its own kernel
	 * node (bind), at most 1 MiB of 4 KiB pages. */
	for (size_t i = 0; i < nodes->n; i++) {
		pages = jreq(jarr(c, "nodes")->v[i], "pages_by_kernel_node", J_OBJ);
		snprintf(key, sizeof(key), "%u", (unsigned)ju64(nodes->v[i], "kernel_node"));
		if (pages->n == 0)
			continue;
		ck_assert_uint_eq(pages->n, 1);
		ck_assert_uint_gt(ju64(pages, key), 0);
		ck_assert_uint_le(ju64(pages, key), 256);
		k0 = (unsigned)-1;
	}
	ck_assert_msg(k0 == (unsigned)-1, "no resident page found");
	jv_free(v);
	jv_free(info);

	/* metrics: the node families, with the cap and the refusals. */
	CTL_NOSOCK(&r, "-s", B.sock, "metrics");
	ck_assert_int_eq(r.status, 0);
	ck_assert(strstr(r.out, "sheaf_numa_node_cap_bytes{kernel_node=\"") != NULL);
	ck_assert(strstr(r.out, "sheaf_numa_node_used_bytes{kernel_node=\"") != NULL);
	ck_assert(strstr(r.out, "sheaf_numa_node_cap_refused_total{kernel_node=\"") != NULL);
	ck_assert(strstr(r.out, "_cap_bytes{kernel_node=\"") != NULL &&
		  strstr(r.out, "} 1048576\n") != NULL);
	run_free(&r);
	dmn_stop(&B, 5000);
	dmn_cleanup(&B);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("numa_bind");
	TCase *tc = tcase_create("bind");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_bind);
	suite_add_tcase(su, tc);
	return run_suite(su);
}
