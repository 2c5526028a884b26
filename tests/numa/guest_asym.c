/*
 * guest_asym.c - modes asym-preferred and asym-bind [node 1 much smaller
 * than node 0]: a client homed on node 1 fills past node 1's memory.
 * Under preferred every allocation succeeds and the overflow lands on node
 * 0; under bind allocations fail promptly with ENOMEM at the node's cap
 * (tunable: sheafctl tune --pool node_cap=1:B) and sheafd logs it; nobody
 * is OOM-killed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_deploy.h"
#include "tests/helpers/util_proc.h"
#include "tests/helpers/util_sheafctl.h"
#include "tests/numa/guest_util.h"

#define FILL_OBJ 16384
#define POOL_ASYM "512M"                     /* 256 MiB a node: node 1 has less */

struct fill {
	void **objs;
	size_t n, max;
	int err;                             /* errno of the failed allocation */
	int64_t worst_ms;                    /* the slowest allocation */
};

/* The guest's two memory nodes into @mem; sheafd under @policy, tuned with
 * `sheafctl tune --pool @tune` (NULL: not) before a client of it (*@p)
 * makes the cache "fill". */
static sheaf_cache_t *asym_start(int *mem, const char *policy, const char *tune,
				 sheaf_pool_t **p)
{
	int nm = mem_nodes(mem);

	REQUIRE(nm == 2, "an asymmetric guest has 2 memory nodes, not %d", nm);
	start_sheafd(POOL_ASYM, policy);
	if (tune != NULL) {
		struct run r;
		char what[96];

		fmt(what, sizeof(what), "sheafctl tune --pool %s", tune);
		CTL(&r, "tune", "--pool", (char *)tune);
		expect(&r, 0, what);
		run_free(&r);
	}
	*p = connect_pool(D.sock);
	return make_cache(*p, "fill", FILL_OBJ);
}

/* Allocate and write objects homed on pool node @idx until @bytes are
 * allocated or an allocation fails. */
static void fill(sheaf_cache_t *c, sheaf_pool_t *p, int idx, size_t bytes, struct fill *f)
{
	memset(f, 0, sizeof(*f));
	f->max = bytes / FILL_OBJ;
	f->objs = objs_new(f->max);
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
	int mem[MAXN];
	uint64_t small_kb, per_kn[MAXN];
	size_t want;
	struct fill f;
	sheaf_pool_t *p;
	sheaf_cache_t *c = asym_start(mem, "preferred", NULL, &p);

	small_kb = node_meminfo_kb(mem[1], "MemTotal");
	want = (size_t)small_kb * 1024 + 32 * MIB;
	REQUIRE(want < 256 * MIB - 16 * MIB, "node 1 (%llu KiB) is not smaller than its share",
		(unsigned long long)small_kb);
	fill(c, p, 1, want, &f);
	REQUIRE(f.n == f.max, "allocation %zu failed under preferred: %s", f.n, strerror(f.err));
	count_pages(f.objs, f.n, FILL_OBJ, per_kn);
	show_pages("the fill of node 1", per_kn);
	REQUIRE(per_kn[mem[0]] > 0, "no fallback page on kernel node %d", mem[0]);
	REQUIRE(region_pages("fill", 1, mem[0]) > 0, "pages_by_kernel_node of node 1 shows no "
		"page on kernel node %d", mem[0]);
	REQUIRE(region_pages("fill", 1, mem[1]) > 0, "node 1's region has no page on its node");
	free_all(c, f.objs, f.n);
	free(f.objs);
	stop_sheafd(p);
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
 * objects allocatable again.  Frees the fill. */
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
	free_all(c, f->objs, f->n);
	free(f->objs);
	REQUIRE((o = sheaf_alloc(c)) != NULL, "no allocation after the frees: %s",
		strerror(errno));
	REQUIRE(sheaf_free(c, o) == 0, "free");
}

/* Bind: the fill of node 1 stops with ENOMEM inside node 1's memory. */
START_TEST(asym_bind)
{
	int mem[MAXN];
	struct fill f;
	sheaf_pool_t *p;
	sheaf_cache_t *c = asym_start(mem, "bind", NULL, &p);
	uint64_t small_kb = node_meminfo_kb(mem[1], "MemTotal");

	fill(c, p, 1, (size_t)small_kb * 1024 + 32 * MIB, &f);
	bind_stopped(c, &f, mem[1], (size_t)small_kb * 1024);
	stop_sheafd(p);
}
END_TEST

/* Bind with node_cap=1:64M: the fill stops with ENOMEM at that cap. */
START_TEST(asym_bind_tuned)
{
	int mem[MAXN];
	struct fill f;
	sheaf_pool_t *p;
	sheaf_cache_t *c = asym_start(mem, "bind", "node_cap=1:64M", &p);

	fill(c, p, 1, 128 * MIB, &f);
	REQUIRE(f.n * FILL_OBJ >= 32 * MIB, "the fill stopped at %zu MiB, far below the cap",
		f.n * FILL_OBJ / MIB);
	bind_stopped(c, &f, mem[1], 64 * MIB);
	stop_sheafd(p);
}
END_TEST

void add_asym_preferred(Suite *s, int timeout)
{
	ADD_ALONE(s, asym_preferred, timeout);
}

void add_asym_bind(Suite *s, int timeout)
{
	ADD_ALONE(s, asym_bind, timeout);
	ADD_ALONE(s, asym_bind_tuned, timeout);
}
