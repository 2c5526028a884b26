/*
 * test_sheafctl.c - sheafctl's commands against a real sheafd.  Each test
 * starts its own daemon (2 simulated nodes, a socket in a temporary
 * directory) and runs the CLI with fork/exec, capturing stdout, stderr and
 * the exit status (the harness is util_sheafctl.h).  Workloads are forked
 * children using libsheaf (sheaf_connect, sheaf_cache_open, alloc/free).
 *
 * Covered: info, caches, create, destroy, stats (also in interval mode),
 * clients, shrink, check and the tune errors, each in table and JSON form
 * (JSON parsed by util_json.c, itself tested here first, and checked field
 * by field); exit status and message of bad usage, a dead socket and an
 * out-of-range tunable.  top and metrics are in test_sheafctl_monitor.c,
 * the tests under load (shrink after a burst, tune under a workload) in
 * test_sheafctl_load.c.
 *
 * Each test is its own TCase: CK_RUN_CASE=<name> runs one.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "client/internal.h"
#include "proto/version.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_json.h"
#include "tests/helpers/util_proc.h"
#include "tests/helpers/util_sheafctl.h"

START_TEST(test_json_parser)
{
	static const char *const bad[] = {
		"", "{", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "01", "1.", "-", "\"\\x\"",
		"\"a\nb\"", "{\"a\":1,\"a\":2}", "[1] x", "tru", "\"\\ud800\"",
	};
	struct jv *v = json_parse(" {\"a\": [1, -2.5e3, true, null, \"x\\u00e9\\ud83d\\ude00\"], \"b\": {}} ");

	ck_assert_int_eq((int)jarr(v, "a")->n, 5);
	ck_assert_str_eq(jarr(v, "a")->v[4]->s, "x\xc3\xa9\xf0\x9f\x98\x80");
	jv_free(v);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char err[160];
		struct jv *b = json_try_parse(bad[i], err, sizeof(err));

		REQUIRE(b == NULL, "parser accepted bad JSON '%s'", bad[i]);
	}
}
END_TEST

START_TEST(test_info)
{
	struct run r;
	struct jv *v;

	CTL(&r, "info");
	expect(&r, 0, "info");
	ck_assert_str_eq(r.err, "");
	ck_assert_msg(strstr(line_with(r.out, "version"), SHEAF_VERSION) != NULL, "%s", r.out);
	ck_assert_msg(strstr(line_with(r.out, "nodes"), "2 (simulated)") != NULL, "%s", r.out);
	ck_assert_msg(strstr(line_with(r.out, "socket"), D.sock) != NULL, "%s", r.out);
	ck_assert_msg(strstr(line_with(r.out, "pool_size"), "536870912 bytes") != NULL, "%s", r.out);
	ck_assert_int_eq(table_value(r.out, "max_caches"), SHEAF_DEFAULT_CACHES);
	ck_assert_int_eq(table_value(r.out, "max_clients"), SHEAF_DEFAULT_CLIENTS);
	ck_assert_int_eq(table_value(r.out, "protocol_version"), 2);
	ck_assert(line_with(r.out, "uptime") != NULL);
	run_free(&r);

	v = CTLJ("info");
	ck_assert_str_eq(jstr(v, "version"), SHEAF_VERSION);
	ck_assert_int_eq(ju64(v, "protocol_version"), 2);
	ck_assert_str_eq(jstr(v, "socket"), D.sock);
	ck_assert_int_eq(ju64(v, "node_count"), 2);
	ck_assert(jbool(v, "simulated_nodes"));
	ck_assert_str_eq(jstr(v, "numa_policy"), "");
	ck_assert_int_eq(jarr(v, "nodes")->n, 2);
	ck_assert_int_eq(ju64(v, "sheaf_count"), 2048);
	ck_assert_uint_eq(ju64(v, "pool_size"), 512u << 20);
	ck_assert_uint_eq(ju64(v, "mem_cap"), 512u << 20);
	ck_assert_uint_gt(ju64(v, "region_size"), ju64(v, "pool_size"));
	ck_assert_uint_ne(ju64(v, "map_addr"), 0);
	ck_assert_uint_ge(ju64(v, "layout_version"), 1);
	ck_assert_uint_lt(ju64(v, "uptime_seconds"), 120);
	ck_assert_int_eq(ju64(v, "clients"), 0);
	ck_assert_int_eq(ju64(v, "max_clients"), SHEAF_DEFAULT_CLIENTS);
	ck_assert_int_eq(ju64(v, "max_caches"), SHEAF_DEFAULT_CACHES);
	ck_assert_int_eq(ju64(v, "max_frame"), 1 << 20);
	ck_assert_int_eq(ju64(v, "gp_blockers"), 0);      /* "Deferred frees" */
	ck_assert_int_eq(ju64(v, "rcu_waiting"), 0);
	ck_assert_uint_ge(ju64(v, "gp_started"), ju64(v, "gp_completed"));
	/* the large objects (none yet: the budget is a quarter of the data) */
	ck_assert_int_eq(ju64(v, "large_bytes"), 0);
	ck_assert_int_eq(ju64(v, "large_retained"), 0);
	ck_assert_int_eq(ju64(v, "large_retain"), ju64(v, "pool_size") / 4);
	ck_assert_uint_gt(ju64(v, "shared_allocated"), 0);
	ck_assert_int_eq((int)v->n, 28);                 /* no undocumented field */
	jv_free(v);
}
END_TEST

static void check_cache_info(const struct jv *ci, const char *name, uint64_t size,
			     uint64_t align, uint64_t cap, int debug)
{
	ck_assert_str_eq(jstr(ci, "name"), name);
	(void)ju64(ci, "id");
	ck_assert_uint_eq(ju64(ci, "object_size"), size);
	ck_assert_uint_eq(ju64(ci, "align"), align);
	ck_assert_uint_eq(ju64(ci, "objects_per_slab"), (256u << 10) / size);
	ck_assert_uint_eq(ju64(ci, "sheaf_capacity"), cap);
	ck_assert_uint_ge(ju64(ci, "min_partial"), 5);
	ck_assert_uint_eq(ju64(ci, "barn_low"), 4);
	ck_assert_uint_eq(ju64(ci, "barn_high"), 16);
	ck_assert_uint_gt(ju64(ci, "barn_limit"), 0);
	ck_assert_uint_eq(ju64(ci, "flags"), debug ? 1 : 0);
	ck_assert_int_eq(jbool(ci, "debug"), debug);
	ck_assert_int_eq((int)ci->n, 12);
}

START_TEST(test_caches_create_destroy)
{
	struct run r;
	struct jv *v;

	CTL(&r, "create", "conn", "192");
	expect(&r, 0, "create conn");
	ck_assert_msg(strstr(r.out, "created cache 'conn': id 0, object size 192 B") != NULL,
		      "%s", r.out);
	run_free(&r);
	v = CTLJ("create", "msg", "40", "--align", "64", "--capacity", "16", "--debug");
	check_cache_info(jreq(v, "cache", J_OBJ), "msg", 64, 64, 16, 1);
	jv_free(v);

	CTL(&r, "caches");
	expect(&r, 0, "caches");
	ck_assert_msg(strstr(r.out, "NAME") && strstr(r.out, "OBJ/SLAB"), "%s", r.out);
	ck_assert_msg(line_with(r.out, "0 conn    192") != NULL, "%s", r.out);
	ck_assert_msg(line_with(r.out, "1 msg      64") != NULL && strstr(r.out, "debug"),
		      "%s", r.out);
	run_free(&r);
	v = CTLJ("caches");
	ck_assert_int_eq((int)jarr(v, "caches")->n, 2);
	check_cache_info(jnamed(jarr(v, "caches"), "conn"), "conn", 192, 8, 85, 0);
	check_cache_info(jnamed(jarr(v, "caches"), "msg"), "msg", 64, 64, 16, 1);
	jv_free(v);

	CTL(&r, "create", "conn", "64");                 /* refused: exists */
	expect(&r, 1, "create an existing cache");
	ck_assert_msg(starts(r.err, "sheafctl: ") && strstr(r.err, "conn"), "%s", r.err);
	run_free(&r);
	CTL(&r, "create", "big", "2000000000");          /* refused: size */
	expect(&r, 1, "create too big");
	ck_assert_msg(strstr(r.err, "1073741824") != NULL, "%s", r.err);
	run_free(&r);
	CTL(&r, "create", "big", "300000000");           /* refused: above a node */
	expect(&r, 1, "create larger than a node");
	ck_assert_msg(strstr(r.err, "node") != NULL, "%s", r.err);
	run_free(&r);

	CTL(&r, "destroy", "conn");
	expect(&r, 0, "destroy");
	ck_assert_str_eq(r.out, "destroyed cache 'conn'\n");
	run_free(&r);
	v = CTLJ("destroy", "msg");
	ck_assert_str_eq(jstr(v, "destroyed"), "msg");
	jv_free(v);
	CTL(&r, "destroy", "msg");
	expect(&r, 1, "destroy a missing cache");
	ck_assert_str_eq(r.err, "sheafctl: no cache named 'msg'\n");
	run_free(&r);
	v = CTLJ("caches");
	ck_assert_int_eq((int)jarr(v, "caches")->n, 0);
	jv_free(v);
}
END_TEST

START_TEST(test_stats)
{
	struct wl w;
	struct run r;
	struct jv *v;
	char *lines[8];
	int n = 0;

	create_cache("st", "128");
	create_cache("other", "32");
	wl_start(&w, "st", WL_HOLD, 1000);
	wl_wait(&w, 0);

	CTL(&r, "stats", "st");
	expect(&r, 0, "stats st");
	ck_assert_msg(starts(r.out, "cache st: id 0, object size 128 B, 2048 objects per slab\n"), "%s", r.out);
	ck_assert_uint_eq(table_value(r.out, "in_use "), 1000);
	ck_assert_uint_eq(table_value(r.out, "bytes_in_use "), 128000);
	ck_assert_uint_eq(table_value(r.out, "sheaf_capacity "), 128);
	for (size_t i = 0; i < NKC; i++) {
		char pre[64];
		snprintf(pre, sizeof(pre), "%s ", kernel_counters[i]);
		(void)table_value(r.out, pre);
	}
	const char *gauges[] = { "objects ", "active_objects ", "slabs ", "partial_slabs ",
				 "bytes_mapped ", "barn_full ", "barn_empty ", "min_partial " };
	for (size_t i = 0; i < sizeof(gauges) / sizeof(gauges[0]); i++)
		(void)table_value(r.out, gauges[i]);
	ck_assert(strstr(r.out, "other") == NULL);
	run_free(&r);

	CTL(&r, "stats", "-n", "st");
	expect(&r, 0, "stats -n");
	ck_assert_msg(line_with(r.out, "NAME") && strstr(r.out, "node0") && strstr(r.out, "node1"),
		      "%s", r.out);
	ck_assert_msg(strstr(line_with(r.out, "in_use "), " - ") != NULL, "%s", r.out);
	run_free(&r);

	CTL(&r, "stats");                                /* every cache */
	expect(&r, 0, "stats");
	ck_assert(strstr(r.out, "cache st:") && strstr(r.out, "cache other:"));
	run_free(&r);

	v = CTLJ("stats", "st");
	ck_assert_int_eq((int)jarr(v, "caches")->n, 1);
	ck_assert(jnum(v, "interval_seconds") == 0);
	(void)ju64(v, "time");
	check_stats_obj(jnamed(jarr(v, "caches"), "st"), 1000, 128, 0);
	jv_free(v);
	v = CTLJ("stats", "--per-node");
	ck_assert_int_eq((int)jarr(v, "caches")->n, 2);
	check_stats_obj(jnamed(jarr(v, "caches"), "st"), 1000, 128, 1);
	check_stats_obj(jnamed(jarr(v, "caches"), "other"), 0, 32, 1);
	jv_free(v);

	/* Interval mode: the first report since start, then the intervals (the
	 * workload holds its objects: no allocation in between). */
	CTL(&r, "stats", "st", "0.2", "3", "-o", "json");
	expect(&r, 0, "stats st 0.2 3");
	for (char *save, *l = strtok_r(r.out, "\n", &save); l && n < 8; l = strtok_r(NULL, "\n", &save))
		lines[n++] = l;
	ck_assert_int_eq(n, 3);
	for (int i = 0; i < n; i++) {
		v = json_parse(lines[i]);
		const struct jv *k = jreq(jnamed(jarr(v, "caches"), "st"), "counters", J_OBJ);
		ck_assert(jnum(v, "interval_seconds") == (i == 0 ? 0 : 0.2));
		ck_assert_uint_eq(ju64(k, "alloc_fastpath") + ju64(k, "alloc_slowpath"),
				  i == 0 ? 1000 : 0);
		ck_assert_uint_eq(ju64(jnamed(jarr(v, "caches"), "st"), "in_use"), 1000);
		jv_free(v);
	}
	run_free(&r);
	CTL(&r, "stats", "st", "0.1", "2");
	expect(&r, 0, "stats st 0.1 2 (table)");
	ck_assert_msg(strstr(r.out, "counters over the last 0.1 s") != NULL, "%s", r.out);
	run_free(&r);

	CTL(&r, "stats", "nosuch");
	expect(&r, 1, "stats of a missing cache");
	ck_assert_str_eq(r.err, "sheafctl: no cache named 'nosuch'\n");
	run_free(&r);
	wl_stop(&w);
}
END_TEST

START_TEST(test_clients)
{
	struct wl w;
	struct run r;
	struct jv *v, *c = NULL;
	char pid[32];
	uint64_t t0 = (uint64_t)time(NULL);

	create_cache("cl", "256");
	v = CTLJ("clients");
	ck_assert_int_eq((int)jarr(v, "clients")->n, 0);
	jv_free(v);
	wl_start(&w, "cl", WL_HOLD, 500);
	wl_wait(&w, 0);

	snprintf(pid, sizeof(pid), " %d ", (int)w.pid);
	CTL(&r, "clients");
	expect(&r, 0, "clients");
	ck_assert_msg(line_with(r.out, "ID") && strstr(r.out, "ATTACHED") &&
		      strstr(r.out, pid) && strstr(r.out, "sheafctl-test-wl"), "%s", r.out);
	run_free(&r);
	v = CTLJ("clients");
	ck_assert_int_eq((int)jarr(v, "clients")->n, 1);
	c = jarr(v, "clients")->v[0];
	(void)ju64(c, "id");
	ck_assert_uint_eq(ju64(c, "pid"), (uint64_t)w.pid);
	ck_assert_str_eq(jstr(c, "name"), "sheafctl-test-wl");
	ck_assert_uint_eq(ju64(c, "uid"), getuid());
	ck_assert_uint_ge(ju64(c, "attached_since"), t0 - 2);
	ck_assert_uint_le(ju64(c, "attached_since"), (uint64_t)time(NULL) + 2);
	ck_assert_uint_ge(ju64(c, "sheaves_held"), 1);
	ck_assert_uint_eq(ju64(c, "objects_in_use"), 500);
	/* owned: objects held per owned cache (none here: "cl" is plain) */
	ck_assert_int_eq((int)jreq(c, "owned", J_OBJ)->n, 0);
	/* lanes: granted to it (at least its first block); not revoked */
	ck_assert_uint_ge(ju64(c, "lanes"), 1);
	ck_assert_int_eq(jbool(c, "revoked"), 0);
	ck_assert_int_eq((int)c->n, 10);
	jv_free(v);

	CTL(&r, "destroy", "cl");                        /* objects in use */
	expect(&r, 1, "destroy a cache in use");
	ck_assert_msg(starts(r.err, "sheafctl: ") && strchr(r.err, '\n') == strrchr(r.err, '\n'),
		      "%s", r.err);
	run_free(&r);

	wl_stop(&w);
	for (int64_t t = now_ms();; sleep_ms(20)) {      /* the daemon reaps it */
		v = CTLJ("clients");
		size_t n = jarr(v, "clients")->n;
		jv_free(v);
		if (n == 0)
			break;
		REQUIRE(now_ms() - t < 10000, "client still listed 10 s after it exited");
	}
}
END_TEST

START_TEST(test_shrink_check)
{
	struct run r;
	struct jv *v;

	create_cache("sh", "64");
	CTL(&r, "shrink");
	expect(&r, 0, "shrink");
	ck_assert_msg(starts(r.out, "every cache: released "), "%s", r.out);
	run_free(&r);
	CTL(&r, "shrink", "sh");
	expect(&r, 0, "shrink sh");
	ck_assert_msg(starts(r.out, "cache 'sh': released "), "%s", r.out);
	run_free(&r);
	v = CTLJ("shrink", "sh");
	ck_assert_str_eq(jstr(v, "cache"), "sh");
	ck_assert_uint_eq(ju64(v, "bytes_released"), ju64(v, "slabs_released") << 18);
	jv_free(v);
	CTL(&r, "shrink", "nosuch");
	expect(&r, 1, "shrink a missing cache");
	ck_assert_str_eq(r.err, "sheafctl: no cache named 'nosuch'\n");
	run_free(&r);

	CTL(&r, "check");
	expect(&r, 0, "check");
	ck_assert_msg(starts(r.out, "pool check ok: objects "), "%s", r.out);
	run_free(&r);
	v = CTLJ("check");
	ck_assert(jbool(v, "ok"));
	ck_assert_str_eq(jstr(v, "problem"), "");
	ck_assert_uint_eq(ju64(v, "in_use"), ju64(v, "counted_in_use"));
	ck_assert_uint_eq(ju64(v, "objects"),
			  ju64(v, "free_in_slabs") + ju64(v, "in_sheaves") + ju64(v, "in_use"));
	jv_free(v);
}
END_TEST

START_TEST(test_tune_errors)
{
	struct run r;
	struct jv *v;

	create_cache("te", "64");
	CTL(&r, "tune", "te", "sheaf_capacity=300");
	expect(&r, 1, "tune out of range");
	ck_assert_str_eq(r.err, "sheafctl: sheaf_capacity=300 out of range 0..256\n");
	ck_assert_str_eq(r.out, "");
	run_free(&r);
	CTL(&r, "tune", "te", "sheaf_capacity=8", "barn_high=0");   /* all or nothing */
	expect(&r, 1, "tune barn_high=0");
	ck_assert_msg(strstr(r.err, "barn_high=0 out of range 1..") != NULL, "%s", r.err);
	run_free(&r);
	v = CTLJ("caches");
	ck_assert_uint_eq(ju64(jnamed(jarr(v, "caches"), "te"), "sheaf_capacity"), 256);
	jv_free(v);
	CTL(&r, "tune", "te", "barn_low=20", "barn_high=10");
	expect(&r, 1, "tune barn_low > barn_high");
	ck_assert_msg(strstr(r.err, "barn_low") != NULL, "%s", r.err);
	run_free(&r);
	CTL(&r, "tune", "--pool", "mem_cap=1");
	expect(&r, 1, "tune mem_cap=1");
	ck_assert_msg(strstr(r.err, "mem_cap=1 out of range 262144..536870912") != NULL, "%s", r.err);
	run_free(&r);
	CTL(&r, "tune", "nosuch", "sheaf_capacity=8");
	expect(&r, 1, "tune a missing cache");
	ck_assert_str_eq(r.err, "sheafctl: no cache named 'nosuch'\n");
	run_free(&r);

	CTL(&r, "tune", "--pool", "mem_cap=256M");
	expect(&r, 0, "tune --pool");
	ck_assert_str_eq(r.out, "pool: mem_cap=268435456 (256.0 MiB)\n");
	run_free(&r);
	v = CTLJ("tune", "-p", "mem_cap=128M");
	ck_assert_uint_eq(ju64(v, "mem_cap"), 128u << 20);
	ck_assert(jget(v, "cache") == NULL);
	jv_free(v);
	v = CTLJ("info");
	ck_assert_uint_eq(ju64(v, "mem_cap"), 128u << 20);
	jv_free(v);

	/* Bad usage: exit 2 before anything is sent. */
	static const char *const bad[][4] = {
		{ "te", "sheaf_capacity", NULL }, { "te", "foo=1", NULL },
		{ "te", "sheaf_capacity=abc", NULL }, { "te", "sheaf_capacity=-1", NULL },
		{ "te", "mem_cap=1G", NULL }, { "--pool", "sheaf_capacity=8", NULL },
		{ "te", NULL }, { "--pool", NULL }, { "te", "=5", NULL },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *argv[6] = { (char *)"tune" };
		for (int k = 0; bad[i][k] != NULL; k++)
			argv[k + 1] = (char *)bad[i][k];
		run_argv(&r, 1, argv);
		REQUIRE(r.status == 2, "tune case %zu: exit %d (%s)", i, r.status, r.err);
		REQUIRE(starts(r.err, "sheafctl tune: ") &&
			strstr(r.err, "(see sheafctl tune --help)\n") != NULL,
			"tune case %zu: message '%s'", i, r.err);
		run_free(&r);
	}
}
END_TEST

START_TEST(test_usage)
{
	static const char *const cmds[] = {
		"info", "caches", "stats", "top", "tune", "shrink", "clients", "create",
		"destroy", "metrics", "check",
	};
	static const struct { const char *args[6]; const char *msg; } bad[] = {
		{ { "frobnicate" }, "sheafctl: unknown command 'frobnicate' (see sheafctl --help)\n" },
		{ { "--bogus", "info" }, "sheafctl: unknown option '--bogus' (see sheafctl --help)\n" },
		{ { "info", "--bogus" }, "sheafctl info: unknown option '--bogus' (see sheafctl info --help)\n" },
		{ { "info", "-x" }, "sheafctl info: unknown option '-x' (see sheafctl info --help)\n" },
		{ { "info", "extra" }, "sheafctl info: unexpected argument 'extra' (see sheafctl info --help)\n" },
		{ { "-o", "xml", "info" }, "sheafctl: unknown output format 'xml' (table or json) (see sheafctl --help)\n" },
		{ { "caches", "-o" }, "sheafctl caches: option '-o' needs a value (see sheafctl caches --help)\n" },
		{ { "stats", "a", "1", "2", "3" }, "sheafctl stats: unexpected argument '3' (see sheafctl stats --help)\n" },
		{ { "stats", "a", "x" }, "sheafctl stats: bad interval 'x' (seconds, > 0) (see sheafctl stats --help)\n" },
		{ { "stats", "a", "1", "0" }, "sheafctl stats: bad count '0' (a positive integer) (see sheafctl stats --help)\n" },
		{ { "create", "x" }, "sheafctl create: expected NAME SIZE (see sheafctl create --help)\n" },
		{ { "create", "x", "12q" }, "sheafctl create: bad object size '12q' (see sheafctl create --help)\n" },
		{ { "create", "x", "12", "--capacity", "z" }, "sheafctl create: bad capacity 'z' (see sheafctl create --help)\n" },
		{ { "destroy" }, "sheafctl destroy: missing argument (see sheafctl destroy --help)\n" },
		{ { "shrink", "a", "b" }, "sheafctl shrink: unexpected argument 'b' (see sheafctl shrink --help)\n" },
		{ { NULL }, "sheafctl: no command given (see sheafctl --help)\n" },
	};
	struct run r;

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		char want[64];
		snprintf(want, sizeof(want), "Usage: sheafctl %s", cmds[i]);
		run_argv(&r, 1, (char *[]){ (char *)cmds[i], "--help", NULL });
		REQUIRE(r.status == 0 && strncmp(r.out, want, strlen(want)) == 0 && r.err[0] == '\0',
			"%s --help: exit %d, out '%s'", cmds[i], r.status, r.out);
		run_free(&r);
		run_argv(&r, 0, (char *[]){ "help", (char *)cmds[i], NULL });
		REQUIRE(r.status == 0 && strncmp(r.out, want, strlen(want)) == 0,
			"help %s: exit %d", cmds[i], r.status);
		run_free(&r);
	}
	CTL_NOSOCK(&r, "--help");
	expect(&r, 0, "--help");
	ck_assert(starts(r.out, "Usage: sheafctl "));
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		char want[64];
		snprintf(want, sizeof(want), "\n  %s", cmds[i]);
		REQUIRE(strstr(r.out, want) != NULL, "--help does not list %s", cmds[i]);
	}
	run_free(&r);
	CTL_NOSOCK(&r, "--version");
	expect(&r, 0, "--version");
	ck_assert_str_eq(r.out, "sheafctl " SHEAF_VERSION "\n");
	run_free(&r);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *argv[8];
		int k = 0;
		for (; bad[i].args[k] != NULL; k++)
			argv[k] = (char *)bad[i].args[k];
		argv[k] = NULL;
		run_argv(&r, 0, argv);
		REQUIRE(r.status == 2, "case %zu (%s): exit %d", i, bad[i].msg, r.status);
		REQUIRE(strcmp(r.err, bad[i].msg) == 0, "case %zu: message\n  '%s'\nexpected\n  '%s'",
			i, r.err, bad[i].msg);
		REQUIRE(r.out[0] == '\0', "case %zu: stdout '%s'", i, r.out);
		run_free(&r);
	}
}
END_TEST

START_TEST(test_dead_socket)
{
	char path[160], want[320];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct run r;
	int fd;

	/* No socket at all. */
	snprintf(path, sizeof(path), "%s/none.sock", D.dir);
	run_argv(&r, 0, (char *[]){ "-s", path, "info", NULL });
	expect(&r, 1, "no socket");
	snprintf(want, sizeof(want), "sheafctl: cannot reach sheafd at %s: No such file or directory\n",
		 path);
	ck_assert_str_eq(r.err, want);
	ck_assert_str_eq(r.out, "");
	run_free(&r);

	/* A socket nobody listens on (a dead daemon's leftover). */
	snprintf(path, sizeof(path), "%s/dead.sock", D.dir);
	ck_assert(strlen(path) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	close(fd);
	setenv("SHEAF_SOCKET", path, 1);                 /* no -s: $SHEAF_SOCKET */
	for (size_t i = 0; i < 4; i++) {
		static const char *const c[] = { "stats", "top", "metrics", "clients" };
		run_argv(&r, 0, (char *[]){ (char *)c[i], i == 1 ? "-o" : NULL, NULL });
		expect(&r, 1, c[i]);
		snprintf(want, sizeof(want), "sheafctl: cannot reach sheafd at %s: Connection refused\n",
			 path);
		ck_assert_str_eq(r.err, want);
		run_free(&r);
	}
	unlink(path);

	/* The daemon goes away: the next command says so. */
	daemon_stop();
	run_argv(&r, 0, (char *[]){ "-s", "/tmp/sheafctl-test-nonexistent/s.sock", "caches", NULL });
	expect(&r, 1, "stopped daemon");
	ck_assert_str_eq(r.err, "sheafctl: cannot reach sheafd at "
			 "/tmp/sheafctl-test-nonexistent/s.sock: No such file or directory\n");
	run_free(&r);
}
END_TEST

/* Barn watermarks out of the engine's order (barn_low <= barn_high <=
 * barn_limit) are refused whole: the engine would refill sheaves only to
 * flush them, forever. */
START_TEST(test_tune_barn_order)
{
	struct run r;
	struct jv *v, *ci;

	create_cache("tb", "64");
	CTL(&r, "tune", "tb", "barn_low=10", "barn_high=20", "barn_limit=1");
	expect(&r, 1, "tune barn_high > barn_limit");
	ck_assert_msg(strstr(r.err, "barn_high (20) must not exceed barn_limit (1)") != NULL,
		      "%s", r.err);
	run_free(&r);
	CTL(&r, "tune", "tb", "barn_limit=8");          /* under the default barn_high */
	expect(&r, 1, "tune barn_limit under barn_high");
	ck_assert_msg(strstr(r.err, "must not exceed barn_limit (8)") != NULL, "%s", r.err);
	run_free(&r);
	v = CTLJ("caches");
	ci = jnamed(jarr(v, "caches"), "tb");
	ck_assert_uint_eq(ju64(ci, "barn_low"), 4);
	ck_assert_uint_eq(ju64(ci, "barn_high"), 16);
	jv_free(v);
	CTL(&r, "tune", "tb", "barn_low=8", "barn_high=8", "barn_limit=8");
	expect(&r, 0, "tune barn_low = barn_high = barn_limit");
	run_free(&r);
	CTL(&r, "check");
	expect(&r, 0, "check after the tune");
	run_free(&r);
}
END_TEST

/* ======================================================================= */

int main(void)
{
	Suite *s = suite_create("sheafctl");

	require_binaries("test_sheafctl");
	ctl_add(s, "json_parser", test_json_parser, 240);
	ctl_add(s, "info", test_info, 240);
	ctl_add(s, "caches", test_caches_create_destroy, 240);
	ctl_add(s, "stats", test_stats, 240);
	ctl_add(s, "clients", test_clients, 240);
	ctl_add(s, "shrink_check", test_shrink_check, 240);
	ctl_add(s, "tune_errors", test_tune_errors, 240);
	ctl_add(s, "usage", test_usage, 240);
	ctl_add(s, "dead_socket", test_dead_socket, 240);
	ctl_add(s, "tune_barn_order", test_tune_barn_order, 240);
	return run_suite(s);
}
