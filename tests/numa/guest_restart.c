/*
 * guest_restart.c - mode restart [2 nodes, or 3 with a memoryless one]:
 * sheafd SIGKILLed and restarted with the pool's memfds from a fake
 * systemd's fd store (util_notify.h) adopts the pool: a client's objects
 * keep their contents and pages, new objects go to their nodes, and the
 * pool keeps its (perhaps sparse) kernel nodes.
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_deploy.h"
#include "tests/helpers/util_json.h"
#include "tests/helpers/util_notify.h"
#include "tests/helpers/util_proc.h"
#include "tests/helpers/util_sheafctl.h"
#include "tests/numa/guest_util.h"

#define RST_OBJ 512
#define RST_N   2048

/* Node @i's objects kept their tag byte and their pages (@before). */
static void require_kept(void **objs, int i, int kn, const uint64_t before[MAXN])
{
	uint64_t after[MAXN];

	for (size_t k = 0; k < RST_N; k++) {
		const unsigned char *b = objs[k];

		for (size_t o = 0; o < RST_OBJ; o++)
			REQUIRE(b[o] == 0x30 + i, "node %d object %zu byte %zu changed", i, k, o);
	}
	count_pages(objs, RST_N, RST_OBJ, after);
	REQUIRE(memcmp(after, before, sizeof(after)) == 0, "node %d's objects moved", i);
	require_all_on(after, kn, "the objects after the restart");
}

/* The adopted pool (`sheafctl info` of @sock) keeps its policy and kernel
 * nodes, and each node's region its pages. */
static void require_adopted(const char *sock, const int *mem, int nm)
{
	struct jv *info;

	fmt(D.sock, sizeof(D.sock), "%s", sock);
	info = CTLJ("info");
	require_policy(info, "preferred");
	require_kernel_nodes(info_nodes(info, nm), mem, nm, " after the restart");
	jv_free(info);
	for (int i = 0; i < nm; i++) {
		uint64_t v = region_pages("rst", i, mem[i]);

		REQUIRE(v >= RST_N * RST_OBJ / PAGE, "pool node %d: %llu pages on kernel node %d "
			"after the restart", i, (unsigned long long)v, mem[i]);
	}
}

START_TEST(restart_adopt)
{
	static const char *const flags[] = { "--size", "256M", "--log-level", "debug", NULL };
	int mem[MAXN], nm = multi_nodes(mem);
	void **objs[MAXN], **more = objs_new(RST_N);
	uint64_t before[MAXN][MAXN], per_kn[MAXN];
	char log1[PATH_MAX];
	struct notify n;
	struct svc d = { .flags = flags };
	struct sheaf_stats st;
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	int rc;

	deploy_init("numa_guest");                /* a failure prints the logs */
	make_test_dir();
	notify_open(&n);
	fmt(d.sock, sizeof(d.sock), "%s/s.sock", test_dir);
	svc_start(&d, &n, -1, 0, 0);
	REQUIRE(notify_wait(&n, &n.fdstore, 2, 5000) && n.store_fd >= 0 && n.store_shared_fd >= 0,
		"sheafd stored no memfds (%d FDSTORE=1)", n.fdstore);
	fmt(log1, sizeof(log1), "%s", d.log);
	p = connect_pool(d.sock);
	c = make_cache(p, "rst", RST_OBJ);
	for (int i = 0; i < nm; i++) {
		objs[i] = objs_new(RST_N);
		alloc_homed(p, c, i, objs[i], RST_N, RST_OBJ, (unsigned char)(0x30 + i), before[i]);
		require_all_on(before[i], mem[i], "the objects before the restart");
	}
	svc_stop(&d, &n, SIGKILL);
	svc_start(&d, &n, -1, 1, 0);
	REQUIRE(file_contains(d.log, "adopted the pool from the fd store"),
		"the new sheafd did not adopt the pool (STATUS=%s)", n.last_status);
	/* A control request reconnects and resumes this client. */
	rc = sheaf_cache_stats(c, -1, &st);
	REQUIRE(rc == 0, "stats after the restart: %s", strerror(-rc));
	REQUIRE(st.in_use >= (uint64_t)nm * RST_N, "in_use %llu after the restart",
		(unsigned long long)st.in_use);
	for (int i = 0; i < nm; i++)
		require_kept(objs[i], i, mem[i], before[i]);
	require_pool_nodes(p, nm, "the pool after the restart");
	/* New objects still go to their node. */
	for (int i = nm - 1; i >= 0; i--) {
		alloc_homed(p, c, i, more, RST_N, RST_OBJ, 9, per_kn);
		require_all_on(per_kn, mem[i], "new objects after the restart");
		free_all(c, more, RST_N);
	}
	free(more);
	/* The adopted pool keeps its kernel nodes (sparse ones too). */
	require_adopted(d.sock, mem, nm);
	for (int i = 0; i < nm; i++) {
		free_all(c, objs[i], RST_N);
		free(objs[i]);
	}
	sheaf_disconnect(p);
	log_clean(log1);
	log_clean(d.log);
	no_oom_kill();
	svc_stop(&d, &n, SIGTERM);
	notify_close(&n);
	test_passed();
}
END_TEST

void add_restart(Suite *s, int timeout)
{
	ADD_ALONE(s, restart_adopt, timeout);
}
