/*
 * numa_guest.c - the NUMA tests that run inside a QEMU guest of a given
 * topology (tests/numa/test_numa boots it; tests/numa/init runs this
 * program as `numa_guest MODE`).  The guest's kernel has real nodes, so
 * placement is the kernel's word: move_pages(2) gives each page's node,
 * /sys/devices/system/node/ each node's memory and CPUs.  Every test runs
 * a real sheafd (started from /sheaf/build, as util_daemon.h finds it) and
 * requires that its stderr holds nothing from libnuma ("mbind:",
 * "libnuma:") and that the kernel killed nobody for memory.
 *
 * Modes, one suite each (the topology the host boots for it in brackets):
 *   sym          [2 or 4 nodes, memory and a CPU each] the pool has one
 *                node per kernel node; objects homed on node i, by
 *                sheaf_thread_set_node or by running on node i's CPU, live
 *                on kernel node i; `sheafctl info` and `stats -n` say so;
 *                the policy comes from numa_policy= or --numa-policy; under
 *                interleave each region spreads over every node.
 *   memoryless   [a node with CPUs and no memory; SHEAF_NUMA_NEAR names
 *                the memory node nearest to it] the pool has the memory
 *                nodes only; a thread on the memoryless node's CPU is homed
 *                on the nearest memory node and its objects land there; a
 *                local pool (sheaf_pool_create) has the memory nodes only
 *                too, and libsheaf prints nothing.
 *   cpuless      [a node with memory and no CPU] the pool has that node;
 *                sheaf_thread_set_node to it works, its barns get stocked,
 *                its objects land on it.
 *   asym-preferred, asym-bind
 *                [node 1 much smaller than node 0] a client homed on node 1
 *                fills past node 1's memory: under preferred every
 *                allocation succeeds and the overflow lands on node 0;
 *                under bind allocations fail promptly with ENOMEM at the
 *                node's cap (tunable: sheafctl tune --pool node_cap=1:B)
 *                and sheafd logs it; nobody is OOM-killed.
 *   remote       frees of node 0's objects by a node-1 thread count as
 *                free_remote; a node whose share is used up refills from
 *                the other (refill_remote).
 *   shrink       after the objects are freed, `sheafctl shrink` gives
 *                each node's pages back (node Shmem and
 *                pages_by_kernel_node fall).
 *   restart      sheafd SIGKILLed and restarted with the pool's memfds
 *                from a fake systemd's fd store (util_notify.h) adopts the
 *                pool: a client's objects keep their contents and pages.
 */
#include <errno.h>
#include <fcntl.h>
#include <numaif.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/klog.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/sheaf.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_deploy.h"
#include "tests/helpers/util_json.h"
#include "tests/helpers/util_notify.h"
#include "tests/helpers/util_proc.h"
#include "tests/helpers/util_sheafctl.h"

#define MAXN    16
#define PAGE    4096UL
#define MIB     (1024UL * 1024UL)

/* ---- the guest's topology, from sysfs -------------------------------------------- */

/* Parse a kernel list ("0-2,5") into @ids: the count. */
static int parse_list(const char *text, int *ids, int max)
{
	int n = 0;
	const char *p = text;

	while (p != NULL && *p != '\0' && *p != '\n') {
		char *end;
		long a = strtol(p, &end, 10), b = a;

		if (end == p)
			break;
		if (*end == '-')
			b = strtol(end + 1, &end, 10);
		for (long i = a; i <= b && n < max; i++)
			ids[n++] = (int)i;
		p = *end == ',' ? end + 1 : NULL;
	}
	return n;
}

static int sys_list(const char *path, int *ids, int max)
{
	char *text = read_file(path);
	int n;

	REQUIRE(text != NULL, "read %s: %s", path, strerror(errno));
	n = parse_list(text, ids, max);
	free(text);
	return n;
}

/* Kernel nodes with memory, ascending: the pool's nodes. */
static int mem_nodes(int *ids)
{
	return sys_list("/sys/devices/system/node/has_memory", ids, MAXN);
}

static int possible_nodes(int *ids)
{
	return sys_list("/sys/devices/system/node/possible", ids, MAXN);
}

static int node_cpus(int kn, int *cpus)
{
	char path[96];

	fmt(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", kn);
	return sys_list(path, cpus, 64);
}

/* A figure of /sys/devices/system/node/nodeK/meminfo, in KiB. */
static uint64_t node_meminfo_kb(int kn, const char *key)
{
	char path[96], *text, *p;
	char want[64];
	uint64_t v = 0;

	fmt(path, sizeof(path), "/sys/devices/system/node/node%d/meminfo", kn);
	fmt(want, sizeof(want), " %s:", key);
	text = read_file(path);
	REQUIRE(text != NULL, "read %s", path);
	p = strstr(text, want);
	REQUIRE(p != NULL, "no %s in %s", key, path);
	v = strtoull(p + strlen(want), NULL, 10);
	free(text);
	return v;
}

static int index_of(const int *ids, int n, int v)
{
	for (int i = 0; i < n; i++)
		if (ids[i] == v)
			return i;
	return -1;
}

/* ---- placement: move_pages(2) -------------------------------------------------- */

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;

	return x < y ? -1 : x > y;
}

/*
 * The kernel node of each page the @n objects of @size bytes at @objs
 * touch, counted into @per_kn[kernel node] (each page once).  The pages
 * must be resident (the objects written).
 */
static void count_pages(void *const *objs, size_t n, size_t size, uint64_t per_kn[MAXN])
{
	size_t cap = n * (size / PAGE + 2), np = 0;
	void **pages = malloc(cap * sizeof(*pages));
	int *status = malloc(cap * sizeof(*status));
	long rc;

	REQUIRE(pages != NULL && status != NULL, "malloc");
	memset(per_kn, 0, MAXN * sizeof(per_kn[0]));
	for (size_t i = 0; i < n; i++) {
		uintptr_t a = (uintptr_t)objs[i] & ~(PAGE - 1);
		uintptr_t end = ((uintptr_t)objs[i] + size - 1) & ~(PAGE - 1);

		for (; a <= end; a += PAGE)
			if (np == 0 || pages[np - 1] != (void *)a)
				pages[np++] = (void *)a;
	}
	/* Objects out of order may share pages too: sort, drop duplicates. */
	qsort(pages, np, sizeof(*pages), cmp_ptr);
	{
		size_t k = 0;
		for (size_t i = 0; i < np; i++)
			if (k == 0 || pages[k - 1] != pages[i])
				pages[k++] = pages[i];
		np = k;
	}
	rc = move_pages(0, np, pages, NULL, status, 0);
	REQUIRE(rc == 0, "move_pages of %zu pages: %s", np, strerror(errno));
	for (size_t i = 0; i < np; i++) {
		REQUIRE(status[i] >= 0 && status[i] < MAXN, "page %p: move_pages status %d (%s)",
			pages[i], status[i], status[i] < 0 ? strerror(-status[i]) : "?");
		per_kn[status[i]]++;
	}
	free(pages);
	free(status);
}

static void show_pages(const char *what, const uint64_t per_kn[MAXN])
{
	printf("  %s:", what);
	for (int k = 0; k < MAXN; k++)
		if (per_kn[k] != 0)
			printf(" node%d=%llu", k, (unsigned long long)per_kn[k]);
	printf("\n");
}

/* Write every page of the objects (make them resident). */
static void touch(void *const *objs, size_t n, size_t size, unsigned char tag)
{
	for (size_t i = 0; i < n; i++)
		memset(objs[i], tag, size);
}

/* ---- the daemon and its checks -------------------------------------------------- */

/* D (util_sheafctl.h) is the test's sheafd: CTLJ() talks to it.  Start it
 * in a fresh directory (dmn_init) with @extra flags (NULL-terminated). */
static void start_sheafd_argv(const char *const *extra)
{
	const char *argv[24] = { "sheafd", "--foreground", "--socket", D.sock, "--log-level",
				 "debug" };
	int n = 6;

	for (int i = 0; extra[i] != NULL; i++) {
		REQUIRE(n < 23, "too many sheafd flags");
		argv[n++] = extra[i];
	}
	argv[n] = NULL;
	dmn_start_argv(&D, (char *const *)argv);
}

/* sheafd with a pool of @size and --numa-policy @policy (NULL: none). */
static void start_sheafd(const char *size, const char *policy)
{
	const char *extra[] = { "--size", size, policy ? "--numa-policy" : NULL, policy, NULL };

	dmn_init(&D);
	start_sheafd_argv(extra);
}

/* Nothing from libnuma in sheafd's stderr (@log). */
static void log_clean(const char *log)
{
	REQUIRE(!file_contains(log, "mbind:"), "libnuma's mbind: error in %s", log);
	REQUIRE(!file_contains(log, "libnuma:"), "a libnuma: line in %s", log);
}

/* The kernel's log holds no OOM kill. */
static void no_oom_kill(void)
{
	int len = klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);
	char *buf;
	int n;

	REQUIRE(len > 0, "klogctl: %s", strerror(errno));
	buf = calloc(1, (size_t)len + 1);
	REQUIRE(buf != NULL, "calloc");
	n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf, len);
	REQUIRE(n >= 0, "klogctl: %s", strerror(errno));
	buf[n] = '\0';
	REQUIRE(strstr(buf, "oom-kill") == NULL && strstr(buf, "Killed process") == NULL,
		"the kernel OOM-killed a process: %s",
		strstr(buf, "Killed process") ? strstr(buf, "Killed process") : strstr(buf, "oom-kill"));
	free(buf);
}

static void end_checks(void)
{
	REQUIRE(dmn_alive(&D), "sheafd died");
	log_clean(D.log);
	no_oom_kill();
}

static sheaf_pool_t *connect_pool(const char *sock)
{
	char err[256] = "";
	sheaf_pool_t *p = sheaf_connect(sock, "numa-guest", 0, err, sizeof(err));

	REQUIRE(p != NULL, "sheaf_connect %s: %s", sock, err);
	return p;
}

static sheaf_cache_t *make_cache(sheaf_pool_t *p, const char *name, size_t size)
{
	sheaf_cache_t *c = sheaf_cache_create(p, name, size, NULL);

	REQUIRE(c != NULL, "cache %s (%zu B): %s", name, size, strerror(errno));
	return c;
}

/* Allocate @n objects into @objs, all required to succeed. */
static void alloc_n(sheaf_cache_t *c, void **objs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		objs[i] = sheaf_alloc(c);
		REQUIRE(objs[i] != NULL, "allocation %zu of %zu: %s", i, n, strerror(errno));
	}
}

static void free_n(sheaf_cache_t *c, void **objs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int rc = sheaf_free(c, objs[i]);
		REQUIRE(rc == 0, "free %zu: %s", i, strerror(-rc));
	}
}

/* `sheafctl info -o json`'s "nodes", required to have @n entries. */
static struct jv *info_nodes(struct jv *info, int n)
{
	struct jv *nodes = jarr(info, "nodes");

	REQUIRE(nodes->n == (size_t)n, "sheafctl info lists %zu nodes, want %d", nodes->n, n);
	return nodes;
}

/* Resident pages of pool node @idx's region on kernel node @kn, from
 * `sheafctl stats CACHE -n -o json`. */
static uint64_t region_pages(const char *cache, int idx, int kn)
{
	struct jv *j = CTLJ("stats", (char *)cache, "-n");
	struct jv *c = jnamed(jarr(j, "caches"), cache);
	struct jv *nodes = jarr(c, "nodes"), *pbk;
	char key[16];
	uint64_t v = 0;

	REQUIRE((size_t)idx < nodes->n, "stats -n: %zu nodes, no node %d", nodes->n, idx);
	pbk = jreq(nodes->v[idx], "pages_by_kernel_node", J_OBJ);
	fmt(key, sizeof(key), "%d", kn);
	if (jget(pbk, key) != NULL)
		v = ju64(pbk, key);
	jv_free(j);
	return v;
}

/* Counter @name of @cache on @node, all nodes when < 0 (sheaf_cache_stats). */
static uint64_t counter(sheaf_cache_t *c, int node, const char *name)
{
	struct sheaf_stats st;
	int i = sheaf_stat_index(name), rc;

	REQUIRE(i >= 0, "no counter %s", name);
	rc = sheaf_cache_stats(c, node, &st);
	REQUIRE(rc == 0, "sheaf_cache_stats: %s", strerror(-rc));
	REQUIRE((unsigned)i < st.nstat, "counter %s beyond nstat %u", name, st.nstat);
	return st.stat[i];
}

/* Counter @name of @cache summed over the nodes of `sheafctl stats -n`. */
static uint64_t ctl_counter(const char *cache, const char *name)
{
	struct jv *j = CTLJ("stats", (char *)cache, "-n");
	struct jv *nodes = jarr(jnamed(jarr(j, "caches"), cache), "nodes");
	uint64_t sum = 0;

	for (size_t i = 0; i < nodes->n; i++)
		sum += ju64(jreq(nodes->v[i], "counters", J_OBJ), name);
	jv_free(j);
	return sum;
}

/* ---- a thread that runs on one CPU ---------------------------------------------- */

struct pinned {
	sheaf_cache_t *cache;
	int cpu;
	size_t n, size;
	void **objs;
	int err;                             /* errno of a failed step, 0 */
	const char *what;
};

/* Pinned to @cpu before its first call into libsheaf: its home node is
 * the one libsheaf derives from that CPU. */
static void *pinned_main(void *arg)
{
	struct pinned *t = arg;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(t->cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0) {
		t->err = errno;
		t->what = "sched_setaffinity";
		return NULL;
	}
	for (size_t i = 0; i < t->n; i++) {
		t->objs[i] = sheaf_alloc(t->cache);
		if (t->objs[i] == NULL) {
			t->err = errno;
			t->what = "sheaf_alloc";
			return NULL;
		}
		memset(t->objs[i], 0x5a, t->size);
	}
	sheaf_thread_exit();
	return NULL;
}

/* @n objects allocated by a new thread on @cpu: their pages per kernel node. */
static void **alloc_on_cpu(sheaf_cache_t *c, int cpu, size_t n, size_t size,
			   uint64_t per_kn[MAXN])
{
	struct pinned t = { .cache = c, .cpu = cpu, .n = n, .size = size };
	pthread_t th;

	t.objs = calloc(n, sizeof(void *));
	REQUIRE(t.objs != NULL, "calloc");
	REQUIRE(pthread_create(&th, NULL, pinned_main, &t) == 0, "pthread_create");
	pthread_join(th, NULL);
	REQUIRE(t.err == 0, "thread on CPU %d: %s: %s", cpu, t.what, strerror(t.err));
	count_pages(t.objs, n, size, per_kn);
	return t.objs;
}

/* Every page counted is on kernel node @kn. */
static void require_all_on(const uint64_t per_kn[MAXN], int kn, const char *what)
{
	uint64_t total = 0;

	for (int k = 0; k < MAXN; k++)
		total += per_kn[k];
	show_pages(what, per_kn);
	REQUIRE(total > 0, "%s: no pages", what);
	REQUIRE(per_kn[kn] == total, "%s: %llu of %llu pages on kernel node %d", what,
		(unsigned long long)per_kn[kn], (unsigned long long)total, kn);
}

/* ---- sym: one pool node per kernel node ----------------------------------------- */

#define SYM_OBJ  1024
#define SYM_N    4096                        /* 4 MiB a node */

/* Objects homed on node i (set_node, then a thread on node i's CPU) are on
 * kernel node i. */
START_TEST(sym_placement)
{
	int mem[MAXN], pos[MAXN], n = mem_nodes(mem);
	void **objs = calloc(SYM_N, sizeof(void *));
	uint64_t per_kn[MAXN];
	char what[96];
	sheaf_pool_t *p;
	sheaf_cache_t *c;

	REQUIRE(objs != NULL, "calloc");
	REQUIRE(n >= 2 && n == possible_nodes(pos), "not a symmetric guest: %d memory nodes", n);
	start_sheafd("256M", NULL);
	p = connect_pool(D.sock);
	REQUIRE(sheaf_pool_nodes(p) == (unsigned)n, "the pool has %u nodes, the guest %d",
		sheaf_pool_nodes(p), n);
	c = make_cache(p, "sym", SYM_OBJ);
	for (int i = 0; i < n; i++) {
		int cpus[64];

		REQUIRE(sheaf_thread_set_node(p, (unsigned)i) == 0, "set_node %d", i);
		alloc_n(c, objs, SYM_N);
		touch(objs, SYM_N, SYM_OBJ, (unsigned char)i);
		count_pages(objs, SYM_N, SYM_OBJ, per_kn);
		fmt(what, sizeof(what), "set_node(%d)", i);
		require_all_on(per_kn, mem[i], what);
		free_n(c, objs, SYM_N);

		REQUIRE(node_cpus(mem[i], cpus) >= 1, "node %d has no CPU", mem[i]);
		void **t = alloc_on_cpu(c, cpus[0], SYM_N, SYM_OBJ, per_kn);
		fmt(what, sizeof(what), "a thread on CPU %d (node %d)", cpus[0], mem[i]);
		require_all_on(per_kn, mem[i], what);
		free_n(c, t, SYM_N);
		free(t);
	}
	free(objs);
	sheaf_disconnect(p);
	end_checks();
	dmn_stop(&D, 10000);
	dmn_cleanup(&D);
}
END_TEST

/* `sheafctl info` names the policy and each node (its kernel node, CPUs,
 * memory, cap); `stats -n` places each node's region on its kernel node. */
START_TEST(sym_info)
{
	int mem[MAXN], n = mem_nodes(mem);
	void **objs = calloc(SYM_N, sizeof(void *));
	struct jv *info, *nodes;
	sheaf_pool_t *p;
	sheaf_cache_t *c;

	start_sheafd("256M", NULL);
	info = CTLJ("info");
	REQUIRE(strcmp(jstr(info, "numa_policy"), "preferred") == 0, "numa_policy %s",
		jstr(info, "numa_policy"));
	nodes = info_nodes(info, n);
	for (int i = 0; i < n; i++) {
		struct jv *e = nodes->v[i], *cpus = jarr(e, "cpus");
		int want[64], nw = node_cpus(mem[i], want);

		REQUIRE(ju64(e, "index") == (uint64_t)i, "node %d: index %llu", i,
			(unsigned long long)ju64(e, "index"));
		REQUIRE(ju64(e, "kernel_node") == (uint64_t)mem[i], "node %d: kernel_node %llu",
			i, (unsigned long long)ju64(e, "kernel_node"));
		REQUIRE(cpus->n == (size_t)nw, "node %d: %zu CPUs, sysfs %d", i, cpus->n, nw);
		for (int k = 0; k < nw; k++)
			REQUIRE(cpus->v[k]->t == J_NUM && atoi(cpus->v[k]->s) == want[k],
				"node %d: cpus[%d] is not %d", i, k, want[k]);
		REQUIRE(ju64(e, "mem_total") > 0, "node %d: mem_total 0", i);
		REQUIRE(ju64(e, "mem_free") <= ju64(e, "mem_total"), "node %d: mem_free > total", i);
		(void)ju64(e, "cap");
	}
	jv_free(info);
	p = connect_pool(D.sock);
	c = make_cache(p, "sym", SYM_OBJ);
	for (int i = 0; i < n; i++) {
		REQUIRE(sheaf_thread_set_node(p, (unsigned)i) == 0, "set_node %d", i);
		alloc_n(c, objs, SYM_N);
		touch(objs, SYM_N, SYM_OBJ, 1);
	}
	for (int i = 0; i < n; i++) {
		for (int k = 0; k < n; k++) {
			uint64_t v = region_pages("sym", i, mem[k]);

			printf("  node %d's region: %llu pages on kernel node %d\n", i,
			       (unsigned long long)v, mem[k]);
			if (k == i)
				REQUIRE(v >= SYM_N * SYM_OBJ / PAGE, "node %d: %llu pages at home", i,
					(unsigned long long)v);
			else
				REQUIRE(v == 0, "node %d: %llu pages on kernel node %d", i,
					(unsigned long long)v, mem[k]);
		}
	}
	sheaf_disconnect(p);
	free(objs);
	end_checks();
	dmn_stop(&D, 10000);
	dmn_cleanup(&D);
}
END_TEST

/* Interleave: every node's region spreads over every memory node, in
 * near-equal shares (the objects' pages, and pages_by_kernel_node). */
START_TEST(sym_interleave)
{
	int mem[MAXN], n = mem_nodes(mem);
	void **objs = calloc(SYM_N, sizeof(void *));
	uint64_t per_kn[MAXN], total = SYM_N * SYM_OBJ / PAGE;
	char what[64];
	sheaf_pool_t *p;
	sheaf_cache_t *c;

	REQUIRE(objs != NULL, "calloc");
	start_sheafd("256M", "interleave");
	p = connect_pool(D.sock);
	c = make_cache(p, "il", SYM_OBJ);
	for (int i = 0; i < n; i++) {
		REQUIRE(sheaf_thread_set_node(p, (unsigned)i) == 0, "set_node %d", i);
		alloc_n(c, objs, SYM_N);
		touch(objs, SYM_N, SYM_OBJ, 8);
		count_pages(objs, SYM_N, SYM_OBJ, per_kn);
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
	sheaf_disconnect(p);
	end_checks();
	dmn_stop(&D, 10000);
	dmn_cleanup(&D);
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
		REQUIRE(strcmp(jstr(info, "numa_policy"), cases[i].want) == 0,
			"config %s, flag %s: numa_policy %s, want %s",
			cases[i].conf ? "numa_policy=interleave" : "none",
			cases[i].flag ? cases[i].flag : "none", jstr(info, "numa_policy"),
			cases[i].want);
		jv_free(info);
		end_checks();
		dmn_stop(&D, 10000);
		dmn_cleanup(&D);
	}
	msg = run_proc(bad, &o, 10000, &st, err, sizeof(err));
	REQUIRE(msg == NULL, "sheafd --numa-policy nearest: %s", msg);
	REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) != 0, "sheafd took --numa-policy nearest (%s)",
		status_str(st, buf, sizeof(buf)));
}
END_TEST

/* ---- memoryless: a node with CPUs and no memory --------------------------------- */

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
	int mem[MAXN], nm = mem_nodes(mem), d[MAXN], nd, best = -1, near;
	char path[96];

	REQUIRE(env != NULL && *env != '\0', "no sheaf.near= on the kernel command line");
	near = atoi(env);
	fmt(path, sizeof(path), "/sys/devices/system/node/node%d/distance", ml);
	{
		char *text = read_file(path);
		char *s = text, *end;

		REQUIRE(text != NULL, "read %s", path);
		for (nd = 0; nd < MAXN; nd++) {
			long v = strtol(s, &end, 10);
			if (end == s)
				break;
			d[nd] = (int)v;
			s = end;
		}
		free(text);
	}
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
	struct jv *info, *nodes;
	sheaf_pool_t *p;

	REQUIRE(np > nm, "no memoryless node: %d nodes, %d with memory", np, nm);
	start_sheafd("256M", NULL);
	p = connect_pool(D.sock);
	log_clean(D.log);                        /* attached: the regions are bound */
	REQUIRE(sheaf_pool_nodes(p) == (unsigned)nm, "the pool has %u nodes; %d have memory",
		sheaf_pool_nodes(p), nm);
	sheaf_disconnect(p);
	info = CTLJ("info");
	nodes = info_nodes(info, nm);
	for (int i = 0; i < nm; i++)
		REQUIRE(ju64(nodes->v[i], "kernel_node") == (uint64_t)mem[i],
			"pool node %d: kernel_node %llu, want %d", i,
			(unsigned long long)ju64(nodes->v[i], "kernel_node"), mem[i]);
	jv_free(info);
	end_checks();
	dmn_stop(&D, 10000);
	dmn_cleanup(&D);
}
END_TEST

/* A thread on the memoryless node's CPU gets the nearest memory node as
 * home; each pool node's objects and region are on its kernel node. */
START_TEST(memoryless_home)
{
	int mem[MAXN], nm = mem_nodes(mem), cpu, ml = memoryless_node(&cpu);
	int near = nearest_memory_node(ml);
	void **objs = calloc(SYM_N, sizeof(void *)), **t;
	uint64_t per_kn[MAXN];
	char what[96];
	sheaf_pool_t *p;
	sheaf_cache_t *c;

	start_sheafd("256M", NULL);
	p = connect_pool(D.sock);
	c = make_cache(p, "ml", SYM_OBJ);
	t = alloc_on_cpu(c, cpu, SYM_N, SYM_OBJ, per_kn);
	fmt(what, sizeof(what), "a thread on CPU %d (memoryless node %d)", cpu, ml);
	require_all_on(per_kn, near, what);
	REQUIRE((unsigned)nm == sheaf_pool_nodes(p), "the pool has %u nodes; %d have memory",
		sheaf_pool_nodes(p), nm);
	for (int i = 0; i < nm; i++) {
		REQUIRE(sheaf_thread_set_node(p, (unsigned)i) == 0, "set_node %d", i);
		alloc_n(c, objs, SYM_N);
		touch(objs, SYM_N, SYM_OBJ, 2);
		count_pages(objs, SYM_N, SYM_OBJ, per_kn);
		fmt(what, sizeof(what), "set_node(%d) (kernel node %d)", i, mem[i]);
		require_all_on(per_kn, mem[i], what);
		for (int k = 0; k < nm; k++) {
			uint64_t v = region_pages("ml", i, mem[k]);
			REQUIRE(k == i ? v > 0 : v == 0, "pool node %d's region: %llu pages on "
				"kernel node %d", i, (unsigned long long)v, mem[k]);
		}
		free_n(c, objs, SYM_N);
	}
	free_n(c, t, SYM_N);
	free(t);
	free(objs);
	sheaf_disconnect(p);
	end_checks();
	dmn_stop(&D, 10000);
	dmn_cleanup(&D);
}
END_TEST

/* A local pool (sheaf_pool_create, real nodes) has the memory nodes only,
 * and libsheaf prints nothing (libnuma's errors included) on the way. */
START_TEST(memoryless_local)
{
	struct sheaf_pool_config cfg = { .size = 64 * MIB, .nodes = 0 };
	int mem[MAXN], nm = mem_nodes(mem), saved, fd;
	void **objs = calloc(SYM_N, sizeof(void *));
	const char *log = "/tmp/local-stderr.log";
	uint64_t per_kn[MAXN];
	char err[256] = "", what[64];
	sheaf_pool_t *p;
	sheaf_cache_t *c;

	REQUIRE(objs != NULL, "calloc");
	fflush(stderr);
	saved = dup(2);
	fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	REQUIRE(saved >= 0 && fd >= 0 && dup2(fd, 2) == 2, "stderr to %s: %s", log,
		strerror(errno));
	close(fd);
	p = sheaf_pool_create(&cfg, err, sizeof(err));
	if (p != NULL) {
		c = sheaf_cache_create(p, "local", SYM_OBJ, NULL);
		for (int i = 0; c != NULL && i < nm; i++) {
			if (sheaf_thread_set_node(p, (unsigned)i) != 0)
				break;
			for (size_t k = 0; k < SYM_N; k++)
				objs[k] = sheaf_alloc(c);
		}
	}
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	REQUIRE(p != NULL, "sheaf_pool_create: %s", err);
	log_clean(log);
	REQUIRE(sheaf_pool_nodes(p) == (unsigned)nm, "the local pool has %u nodes; %d have memory",
		sheaf_pool_nodes(p), nm);
	c = sheaf_cache_open(p, "local");
	REQUIRE(c != NULL, "cache: %s", strerror(errno));
	for (int i = 0; i < nm; i++) {
		REQUIRE(sheaf_thread_set_node(p, (unsigned)i) == 0, "set_node %d", i);
		alloc_n(c, objs, SYM_N);
		touch(objs, SYM_N, SYM_OBJ, 10);
		count_pages(objs, SYM_N, SYM_OBJ, per_kn);
		fmt(what, sizeof(what), "local pool node %d", i);
		require_all_on(per_kn, mem[i], what);
	}
	free(objs);
	sheaf_pool_destroy(p);
	no_oom_kill();
}
END_TEST

/* ---- cpuless: a node with memory and no CPU ------------------------------------- */

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
	REQUIRE(sheaf_pool_nodes(p) == (unsigned)nm, "the pool has %u nodes; %d have memory",
		sheaf_pool_nodes(p), nm);
	sheaf_disconnect(p);
	info = CTLJ("info");
	nodes = info_nodes(info, nm);
	REQUIRE(ju64(nodes->v[idx], "kernel_node") == (uint64_t)kn, "pool node %d: kernel_node %llu",
		idx, (unsigned long long)ju64(nodes->v[idx], "kernel_node"));
	REQUIRE(jarr(nodes->v[idx], "cpus")->n == 0, "the CPU-less node lists CPUs");
	jv_free(info);
	end_checks();
	dmn_stop(&D, 10000);
	dmn_cleanup(&D);
}
END_TEST

/* set_node to the CPU-less node: its barns get stocked (allocations
 * succeed without waiting out wait_ms), its objects land on it. */
START_TEST(cpuless_alloc)
{
	int mem[MAXN], nm = mem_nodes(mem), kn = cpuless_node(), idx = index_of(mem, nm, kn);
	void **objs = calloc(SYM_N, sizeof(void *));
	uint64_t per_kn[MAXN];
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	int64_t t0;

	start_sheafd("256M", NULL);
	p = connect_pool(D.sock);
	c = make_cache(p, "cl", SYM_OBJ);
	REQUIRE(sheaf_thread_set_node(p, (unsigned)idx) == 0, "set_node(%d), the CPU-less node",
		idx);
	for (int round = 0; round < 2; round++) {
		t0 = now_ms();
		alloc_n(c, objs, SYM_N);
		REQUIRE(now_ms() - t0 < 4000, "%d allocations took %lld ms (barn not stocked?)",
			SYM_N, (long long)(now_ms() - t0));
		touch(objs, SYM_N, SYM_OBJ, 3);
		count_pages(objs, SYM_N, SYM_OBJ, per_kn);
		require_all_on(per_kn, kn, "objects homed on the CPU-less node");
		free_n(c, objs, SYM_N);
	}
	REQUIRE(counter(c, idx, "alloc_fastpath") + counter(c, idx, "alloc_slowpath") >= 2 * SYM_N,
		"the CPU-less node's counters miss the allocations");
	free(objs);
	sheaf_disconnect(p);
	end_checks();
	dmn_stop(&D, 10000);
	dmn_cleanup(&D);
}
END_TEST

/* ---- asym: a fill past the small node's memory ---------------------------------- */

#define FILL_OBJ 16384
#define POOL_ASYM "512M"                     /* 256 MiB a node: node 1 has less */

struct fill {
	void **objs;
	size_t n, max;
	int err;                             /* errno of the failed allocation */
	int64_t worst_ms;                    /* the slowest allocation */
};

/* Allocate and write objects homed on pool node @idx until @bytes are
 * allocated or an allocation fails. */
static void fill(sheaf_cache_t *c, sheaf_pool_t *p, int idx, size_t bytes, struct fill *f)
{
	memset(f, 0, sizeof(*f));
	f->max = bytes / FILL_OBJ;
	f->objs = calloc(f->max, sizeof(void *));
	REQUIRE(f->objs != NULL, "calloc");
	REQUIRE(sheaf_thread_set_node(p, (unsigned)idx) == 0, "set_node %d", idx);
	/* The one to go first if the kernel kills for memory after all. */
	write_text("/proc/self/oom_score_adj", "1000");
	while (f->n < f->max) {
		int64_t t0 = now_ms(), dt;
		void *o = sheaf_alloc(c);

		dt = now_ms() - t0;
		if (dt > f->worst_ms)
			f->worst_ms = dt;
		if (o == NULL) {
			f->err = errno;
			break;
		}
		memset(o, 0xa5, FILL_OBJ);
		f->objs[f->n++] = o;
	}
	printf("  filled %zu MiB of %zu MiB on pool node %d (%s); slowest allocation %lld ms\n",
	       f->n * FILL_OBJ / MIB, bytes / MIB, idx, f->err ? strerror(f->err) : "no failure",
	       (long long)f->worst_ms);
}

/* Preferred: a fill of node 1 past its memory succeeds, the overflow on
 * kernel node 0 (move_pages, pages_by_kernel_node). */
START_TEST(asym_preferred)
{
	int mem[MAXN], nm = mem_nodes(mem);
	uint64_t small_kb, per_kn[MAXN];
	size_t want;
	struct fill f;
	sheaf_pool_t *p;
	sheaf_cache_t *c;

	REQUIRE(nm == 2, "an asymmetric guest has 2 memory nodes, not %d", nm);
	small_kb = node_meminfo_kb(mem[1], "MemTotal");
	want = (size_t)small_kb * 1024 + 32 * MIB;
	REQUIRE(want < 256 * MIB - 16 * MIB, "node 1 (%llu KiB) is not smaller than its share",
		(unsigned long long)small_kb);
	start_sheafd(POOL_ASYM, "preferred");
	p = connect_pool(D.sock);
	c = make_cache(p, "fill", FILL_OBJ);
	fill(c, p, 1, want, &f);
	REQUIRE(f.n == f.max, "allocation %zu failed under preferred: %s", f.n, strerror(f.err));
	count_pages(f.objs, f.n, FILL_OBJ, per_kn);
	show_pages("the fill of node 1", per_kn);
	REQUIRE(per_kn[mem[0]] > 0, "no fallback page on kernel node %d", mem[0]);
	REQUIRE(region_pages("fill", 1, mem[0]) > 0, "pages_by_kernel_node of node 1 shows no "
		"page on kernel node %d", mem[0]);
	REQUIRE(region_pages("fill", 1, mem[1]) > 0, "node 1's region has no page on its node");
	free_n(c, f.objs, f.n);
	free(f.objs);
	sheaf_disconnect(p);
	end_checks();
	dmn_stop(&D, 10000);
	dmn_cleanup(&D);
}
END_TEST

/* A line of sheafd's log that names kernel node @kn ("node K", K not
 * followed by a digit) and a cap. */
static int log_names_cap(const char *log, int kn)
{
	char *text = read_file(log), *line, *save = NULL, want[16];
	int found = 0;

	if (text == NULL)
		return 0;
	fmt(want, sizeof(want), "node %d", kn);
	for (line = strtok_r(text, "\n", &save); line && !found; line = strtok_r(NULL, "\n", &save)) {
		for (const char *p = strstr(line, want); p && !found; p = strstr(p + 1, want))
			found = (p[strlen(want)] < '0' || p[strlen(want)] > '9') &&
				strstr(line, "cap") != NULL;
	}
	free(text);
	return found;
}

/* The checks after a bind fill stopped at the cap: ENOMEM promptly, every
 * page on node 1, a log line, the client and sheafd alive, and the freed
 * objects allocatable again. */
static void bind_stopped(sheaf_cache_t *c, struct fill *f, int kn, size_t limit)
{
	uint64_t per_kn[MAXN];
	void *o;

	REQUIRE(f->n < f->max, "the fill of %zu MiB never failed under bind",
		f->max * FILL_OBJ / MIB);
	REQUIRE(f->err == ENOMEM, "the fill failed with %s, want ENOMEM", strerror(f->err));
	REQUIRE(f->worst_ms < 2000, "an allocation took %lld ms (ENOMEM must come promptly)",
		(long long)f->worst_ms);
	REQUIRE(f->n * FILL_OBJ <= limit, "%zu MiB allocated past the limit of %zu MiB",
		f->n * FILL_OBJ / MIB, limit / MIB);
	if (f->n > 0) {
		count_pages(f->objs, f->n, FILL_OBJ, per_kn);
		require_all_on(per_kn, kn, "the fill under bind");
	}
	/* sheafd may log it a moment later. */
	for (int64_t end = now_ms() + 5000; !log_names_cap(D.log, kn) && now_ms() < end;)
		sleep_ms(50);
	REQUIRE(log_names_cap(D.log, kn), "sheafd logged no line naming node %d and its cap", kn);
	/* Still at the cap: the next one fails the same way, at once. */
	errno = 0;
	o = sheaf_alloc(c);
	REQUIRE(o == NULL && errno == ENOMEM, "an allocation at the cap: %p, %s", o,
		strerror(errno));
	free_n(c, f->objs, f->n);
	REQUIRE((o = sheaf_alloc(c)) != NULL, "no allocation after the frees: %s",
		strerror(errno));
	REQUIRE(sheaf_free(c, o) == 0, "free");
}

/* Bind: the fill of node 1 stops with ENOMEM inside node 1's memory. */
START_TEST(asym_bind)
{
	int mem[MAXN], nm = mem_nodes(mem);
	uint64_t small_kb;
	struct fill f;
	sheaf_pool_t *p;
	sheaf_cache_t *c;

	REQUIRE(nm == 2, "an asymmetric guest has 2 memory nodes, not %d", nm);
	small_kb = node_meminfo_kb(mem[1], "MemTotal");
	start_sheafd(POOL_ASYM, "bind");
	p = connect_pool(D.sock);
	c = make_cache(p, "fill", FILL_OBJ);
	fill(c, p, 1, (size_t)small_kb * 1024 + 32 * MIB, &f);
	bind_stopped(c, &f, mem[1], (size_t)small_kb * 1024);
	free(f.objs);
	sheaf_disconnect(p);
	end_checks();
	dmn_stop(&D, 10000);
	dmn_cleanup(&D);
}
END_TEST

/* Bind with node_cap=1:64M: the fill stops with ENOMEM at that cap. */
START_TEST(asym_bind_tuned)
{
	int mem[MAXN], nm = mem_nodes(mem);
	struct fill f;
	struct run r;
	sheaf_pool_t *p;
	sheaf_cache_t *c;

	REQUIRE(nm == 2, "an asymmetric guest has 2 memory nodes, not %d", nm);
	start_sheafd(POOL_ASYM, "bind");
	CTL(&r, "tune", "--pool", "node_cap=1:64M");
	expect(&r, 0, "sheafctl tune --pool node_cap=1:64M");
	run_free(&r);
	p = connect_pool(D.sock);
	c = make_cache(p, "fill", FILL_OBJ);
	fill(c, p, 1, 128 * MIB, &f);
	bind_stopped(c, &f, mem[1], 64 * MIB);
	REQUIRE(f.n * FILL_OBJ >= 32 * MIB, "the fill stopped at %zu MiB, far below the cap",
		f.n * FILL_OBJ / MIB);
	free(f.objs);
	sheaf_disconnect(p);
	end_checks();
	dmn_stop(&D, 10000);
	dmn_cleanup(&D);
}
END_TEST

/* ---- remote: frees and refills across nodes ------------------------------------- */

#define REM_OBJ 256
#define REM_N   8192

struct freer {
	sheaf_pool_t *pool;
	sheaf_cache_t *cache;
	void **objs;
	size_t n;
	int rc;
};

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
	void **objs = calloc(REM_N, sizeof(void *));
	struct freer f;
	uint64_t per_kn[MAXN], before;
	pthread_t th;
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	int mem[MAXN];

	REQUIRE(mem_nodes(mem) >= 2, "one memory node");
	start_sheafd("256M", NULL);
	p = connect_pool(D.sock);
	c = make_cache(p, "rem", REM_OBJ);
	REQUIRE(sheaf_thread_set_node(p, 0) == 0, "set_node 0");
	alloc_n(c, objs, REM_N);
	touch(objs, REM_N, REM_OBJ, 4);
	count_pages(objs, REM_N, REM_OBJ, per_kn);
	require_all_on(per_kn, mem[0], "node 0's objects");
	before = counter(c, -1, "free_remote");
	f = (struct freer){ .pool = p, .cache = c, .objs = objs, .n = REM_N };
	REQUIRE(pthread_create(&th, NULL, freer_main, &f) == 0, "pthread_create");
	pthread_join(th, NULL);
	REQUIRE(f.rc == 0, "the node-1 thread's free: %s", strerror(-f.rc));
	printf("  free_remote %llu -> %llu (node 0 %llu, node 1 %llu)\n",
	       (unsigned long long)before, (unsigned long long)counter(c, -1, "free_remote"),
	       (unsigned long long)counter(c, 0, "free_remote"),
	       (unsigned long long)counter(c, 1, "free_remote"));
	REQUIRE(counter(c, -1, "free_remote") - before >= REM_N,
		"free_remote rose by %llu for %d remote frees",
		(unsigned long long)(counter(c, -1, "free_remote") - before), REM_N);
	REQUIRE(ctl_counter("rem", "free_remote") >= REM_N, "sheafctl stats -n: free_remote %llu",
		(unsigned long long)ctl_counter("rem", "free_remote"));
	alloc_n(c, objs, REM_N);
	touch(objs, REM_N, REM_OBJ, 5);
	count_pages(objs, REM_N, REM_OBJ, per_kn);
	require_all_on(per_kn, mem[0], "node 0's objects after the remote frees");
	free_n(c, objs, REM_N);
	free(objs);
	sheaf_disconnect(p);
	end_checks();
	dmn_stop(&D, 10000);
	dmn_cleanup(&D);
}
END_TEST

/* A node whose share of the pool is used up refills from the other node:
 * the allocations go on, refill_remote > 0, the extra objects on kernel
 * node 0. */
START_TEST(remote_refill)
{
	const size_t obj = 4096, n = 48 * MIB / 4096;   /* past node 1's 32 MiB share */
	void **objs = calloc(n, sizeof(void *));
	uint64_t per_kn[MAXN];
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	int mem[MAXN];

	REQUIRE(mem_nodes(mem) >= 2, "one memory node");
	start_sheafd("64M", NULL);
	p = connect_pool(D.sock);
	c = make_cache(p, "refill", obj);
	REQUIRE(sheaf_thread_set_node(p, 1) == 0, "set_node 1");
	alloc_n(c, objs, n);
	touch(objs, n, obj, 6);
	count_pages(objs, n, obj, per_kn);
	show_pages("48 MiB homed on node 1", per_kn);
	printf("  refill_remote: node 0 %llu, node 1 %llu\n",
	       (unsigned long long)counter(c, 0, "refill_remote"),
	       (unsigned long long)counter(c, 1, "refill_remote"));
	REQUIRE(counter(c, -1, "refill_remote") > 0, "refill_remote is 0");
	REQUIRE(per_kn[mem[0]] > 0, "no object came from node 0");
	REQUIRE(per_kn[mem[1]] > 0, "no object came from node 1");
	REQUIRE(ctl_counter("refill", "refill_remote") > 0, "sheafctl stats -n shows no "
		"refill_remote");
	free_n(c, objs, n);
	free(objs);
	sheaf_disconnect(p);
	end_checks();
	dmn_stop(&D, 10000);
	dmn_cleanup(&D);
}
END_TEST

/* ---- shrink: each node's pages given back --------------------------------------- */

#define SHR_OBJ 4096
#define SHR_N   (64 * MIB / SHR_OBJ)

START_TEST(shrink_per_node)
{
	int mem[MAXN], nm = mem_nodes(mem);
	void **objs[MAXN];
	uint64_t shmem0[MAXN], shmem1[MAXN], shmem2[MAXN], reg1[MAXN], reg2[MAXN], per_kn[MAXN];
	struct run r;
	sheaf_pool_t *p;
	sheaf_cache_t *c;

	REQUIRE(nm >= 2, "one memory node");
	start_sheafd("512M", NULL);
	p = connect_pool(D.sock);
	c = make_cache(p, "shr", SHR_OBJ);
	for (int i = 0; i < nm; i++)
		shmem0[i] = node_meminfo_kb(mem[i], "Shmem");
	for (int i = 0; i < nm; i++) {
		objs[i] = calloc(SHR_N, sizeof(void *));
		REQUIRE(sheaf_thread_set_node(p, (unsigned)i) == 0, "set_node %d", i);
		alloc_n(c, objs[i], SHR_N);
		touch(objs[i], SHR_N, SHR_OBJ, 7);
		count_pages(objs[i], SHR_N, SHR_OBJ, per_kn);
		require_all_on(per_kn, mem[i], "the objects before the shrink");
	}
	for (int i = 0; i < nm; i++) {
		shmem1[i] = node_meminfo_kb(mem[i], "Shmem");
		reg1[i] = region_pages("shr", i, mem[i]);
	}
	for (int i = 0; i < nm; i++) {
		free_n(c, objs[i], SHR_N);
		free(objs[i]);
	}
	sheaf_thread_exit();
	CTL(&r, "shrink");
	expect(&r, 0, "sheafctl shrink");
	run_free(&r);
	for (int i = 0; i < nm; i++) {
		shmem2[i] = node_meminfo_kb(mem[i], "Shmem");
		printf("  kernel node %d: Shmem %llu -> %llu -> %llu KiB\n", mem[i],
		       (unsigned long long)shmem0[i], (unsigned long long)shmem1[i],
		       (unsigned long long)shmem2[i]);
	}
	for (int i = 0; i < nm; i++) {
		REQUIRE(shmem1[i] >= shmem0[i] + 56 * 1024, "node %d: Shmem rose by %lld KiB for "
			"64 MiB of objects", mem[i], (long long)(shmem1[i] - shmem0[i]));
		REQUIRE(shmem2[i] + 48 * 1024 <= shmem1[i], "node %d: Shmem fell by %lld KiB "
			"after the shrink", mem[i], (long long)(shmem1[i] - shmem2[i]));
	}
	for (int i = 0; i < nm; i++) {
		reg2[i] = region_pages("shr", i, mem[i]);
		printf("  pool node %d's pages on kernel node %d: %llu -> %llu\n", i, mem[i],
		       (unsigned long long)reg1[i], (unsigned long long)reg2[i]);
		REQUIRE(reg1[i] >= SHR_N * SHR_OBJ / PAGE, "node %d: %llu pages before", i,
			(unsigned long long)reg1[i]);
		REQUIRE(reg2[i] * 4 <= reg1[i], "node %d: %llu -> %llu pages after the shrink", i,
			(unsigned long long)reg1[i], (unsigned long long)reg2[i]);
	}
	sheaf_disconnect(p);
	end_checks();
	dmn_stop(&D, 10000);
	dmn_cleanup(&D);
}
END_TEST

/* ---- restart: sheafd adopts the pool on a multi-node guest ---------------------- */

#define RST_OBJ 512
#define RST_N   2048

START_TEST(restart_adopt)
{
	static const char *const flags[] = { "--size", "256M", "--log-level", "debug", NULL };
	int mem[MAXN], nm = mem_nodes(mem);
	void **objs[MAXN];
	uint64_t before[MAXN][MAXN], after[MAXN];
	char log1[PATH_MAX];
	struct notify n;
	struct svc d = { .flags = flags };
	struct sheaf_stats st;
	struct jv *info, *nodes;
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	int rc;

	REQUIRE(nm >= 2, "one memory node");
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
		objs[i] = calloc(RST_N, sizeof(void *));
		REQUIRE(sheaf_thread_set_node(p, (unsigned)i) == 0, "set_node %d", i);
		alloc_n(c, objs[i], RST_N);
		touch(objs[i], RST_N, RST_OBJ, (unsigned char)(0x30 + i));
		count_pages(objs[i], RST_N, RST_OBJ, before[i]);
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
	for (int i = 0; i < nm; i++) {
		for (size_t k = 0; k < RST_N; k++) {
			const unsigned char *b = objs[i][k];
			for (size_t o = 0; o < RST_OBJ; o++)
				REQUIRE(b[o] == 0x30 + i, "node %d object %zu byte %zu changed", i, k, o);
		}
		count_pages(objs[i], RST_N, RST_OBJ, after);
		REQUIRE(memcmp(after, before[i], sizeof(after)) == 0, "node %d's objects moved",
			i);
		require_all_on(after, mem[i], "the objects after the restart");
	}
	REQUIRE(sheaf_pool_nodes(p) == (unsigned)nm, "%u nodes after the restart",
		sheaf_pool_nodes(p));
	/* New objects still go to their node. */
	for (int i = nm - 1; i >= 0; i--) {
		void **more = calloc(RST_N, sizeof(void *));
		uint64_t per_kn[MAXN];

		REQUIRE(sheaf_thread_set_node(p, (unsigned)i) == 0, "set_node %d", i);
		alloc_n(c, more, RST_N);
		touch(more, RST_N, RST_OBJ, 9);
		count_pages(more, RST_N, RST_OBJ, per_kn);
		require_all_on(per_kn, mem[i], "new objects after the restart");
		free_n(c, more, RST_N);
		free(more);
	}
	/* The adopted pool keeps its kernel nodes (sparse ones too). */
	fmt(D.sock, sizeof(D.sock), "%s", d.sock);
	info = CTLJ("info");
	REQUIRE(strcmp(jstr(info, "numa_policy"), "preferred") == 0, "numa_policy %s",
		jstr(info, "numa_policy"));
	nodes = info_nodes(info, nm);
	for (int i = 0; i < nm; i++) {
		REQUIRE(ju64(nodes->v[i], "kernel_node") == (uint64_t)mem[i],
			"pool node %d: kernel_node %llu after the restart, want %d", i,
			(unsigned long long)ju64(nodes->v[i], "kernel_node"), mem[i]);
		REQUIRE(region_pages("rst", i, mem[i]) >= RST_N * RST_OBJ / PAGE,
			"pool node %d: %llu pages on kernel node %d after the restart", i,
			(unsigned long long)region_pages("rst", i, mem[i]), mem[i]);
	}
	jv_free(info);
	for (int i = 0; i < nm; i++) {
		free_n(c, objs[i], RST_N);
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

/* ---- main ----------------------------------------------------------------------- */

/* Each test takes seconds; a hung one is reported well before the host's
 * limit on the whole boot (tests/numa/test_numa.c, 180 s). */
#define GUEST_TIMEOUT 60

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	Suite *s = suite_create(mode);

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	require_binaries("numa_guest");
	if (strcmp(mode, "sym") == 0) {
		ADD_ALONE(s, sym_placement, GUEST_TIMEOUT);
		ADD_ALONE(s, sym_info, GUEST_TIMEOUT);
		ADD_ALONE(s, sym_policy, GUEST_TIMEOUT);
		ADD_ALONE(s, sym_interleave, GUEST_TIMEOUT);
	} else if (strcmp(mode, "memoryless") == 0) {
		ADD_ALONE(s, memoryless_pool, GUEST_TIMEOUT);
		ADD_ALONE(s, memoryless_home, GUEST_TIMEOUT);
		ADD_ALONE(s, memoryless_local, GUEST_TIMEOUT);
	} else if (strcmp(mode, "cpuless") == 0) {
		ADD_ALONE(s, cpuless_pool, GUEST_TIMEOUT);
		ADD_ALONE(s, cpuless_alloc, GUEST_TIMEOUT);
	} else if (strcmp(mode, "asym-preferred") == 0) {
		ADD_ALONE(s, asym_preferred, GUEST_TIMEOUT);
	} else if (strcmp(mode, "asym-bind") == 0) {
		ADD_ALONE(s, asym_bind, GUEST_TIMEOUT);
		ADD_ALONE(s, asym_bind_tuned, GUEST_TIMEOUT);
	} else if (strcmp(mode, "remote") == 0) {
		ADD_ALONE(s, remote_free, GUEST_TIMEOUT);
		ADD_ALONE(s, remote_refill, GUEST_TIMEOUT);
	} else if (strcmp(mode, "shrink") == 0) {
		ADD_ALONE(s, shrink_per_node, GUEST_TIMEOUT);
	} else if (strcmp(mode, "restart") == 0) {
		ADD_ALONE(s, restart_adopt, GUEST_TIMEOUT);
	} else {
		fprintf(stderr, "numa_guest: unknown mode '%s' (sym, memoryless, cpuless, "
			"asym-preferred, asym-bind, remote, shrink, restart)\n", mode);
		return 2;
	}
	return run_suite(s);
}
