/*
 * guest_daemon.c - the test's sheafd in the guest (D of util_sheafctl.h,
 * started from /sheaf/build as util_daemon.h finds it), the checks every
 * test ends with (sheafd alive, nothing from libnuma in its stderr, no OOM
 * kill), a libsheaf client of it, and what `sheafctl info` and `stats -n`
 * say about its nodes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/klog.h>

#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_deploy.h"
#include "tests/helpers/util_json.h"
#include "tests/helpers/util_proc.h"
#include "tests/helpers/util_sheafctl.h"
#include "tests/numa/guest_util.h"

/* ---- sheafd ---------------------------------------------------------------------- */

void start_sheafd_argv(const char *const *extra)
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

void start_sheafd(const char *size, const char *policy)
{
	const char *extra[] = { "--size", size, policy ? "--numa-policy" : NULL, policy, NULL };

	dmn_init(&D);
	start_sheafd_argv(extra);
}

sheaf_cache_t *start_with_cache(const char *size, const char *policy, const char *name,
				size_t obj, sheaf_pool_t **p)
{
	start_sheafd(size, policy);
	*p = connect_pool(D.sock);
	return make_cache(*p, name, obj);
}

void stop_sheafd(sheaf_pool_t *p)
{
	if (p != NULL)
		sheaf_disconnect(p);
	end_checks();
	dmn_stop(&D, 10000);
	dmn_cleanup(&D);
}

void log_clean(const char *log)
{
	REQUIRE(!file_contains(log, "mbind:"), "libnuma's mbind: error in %s", log);
	REQUIRE(!file_contains(log, "libnuma:"), "a libnuma: line in %s", log);
}

void no_oom_kill(void)
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

void end_checks(void)
{
	REQUIRE(dmn_alive(&D), "sheafd died");
	log_clean(D.log);
	no_oom_kill();
}

/* ---- a libsheaf client ----------------------------------------------------------- */

sheaf_pool_t *connect_pool(const char *sock)
{
	char err[256] = "";
	sheaf_pool_t *p = sheaf_connect(sock, "numa-guest", 0, err, sizeof(err));

	REQUIRE(p != NULL, "sheaf_connect %s: %s", sock, err);
	return p;
}

sheaf_cache_t *make_cache(sheaf_pool_t *p, const char *name, size_t size)
{
	sheaf_cache_t *c = sheaf_cache_create(p, name, size, NULL);

	REQUIRE(c != NULL, "cache %s (%zu B): %s", name, size, strerror(errno));
	return c;
}

void require_pool_nodes(sheaf_pool_t *p, int n, const char *what)
{
	REQUIRE(sheaf_pool_nodes(p) == (unsigned)n, "%s has %u nodes; %d have memory", what,
		sheaf_pool_nodes(p), n);
}

void alloc_all(sheaf_cache_t *c, void **objs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		objs[i] = sheaf_alloc(c);
		REQUIRE(objs[i] != NULL, "allocation %zu of %zu: %s", i, n, strerror(errno));
	}
}

void free_all(sheaf_cache_t *c, void **objs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int rc = sheaf_free(c, objs[i]);
		REQUIRE(rc == 0, "free %zu: %s", i, strerror(-rc));
	}
}

uint64_t counter(sheaf_cache_t *c, int node, const char *name)
{
	struct sheaf_stats st;
	int i = sheaf_stat_index(name), rc;

	REQUIRE(i >= 0, "no counter %s", name);
	rc = sheaf_cache_stats(c, node, &st);
	REQUIRE(rc == 0, "sheaf_cache_stats: %s", strerror(-rc));
	REQUIRE((unsigned)i < st.nstat, "counter %s beyond nstat %u", name, st.nstat);
	return st.stat[i];
}

/* ---- sheafctl's word on the nodes ------------------------------------------------ */

struct jv *info_nodes(struct jv *info, int n)
{
	struct jv *nodes = jarr(info, "nodes");

	REQUIRE(nodes->n == (size_t)n, "sheafctl info lists %zu nodes, want %d", nodes->n, n);
	return nodes;
}

void require_policy(struct jv *info, const char *want)
{
	REQUIRE(strcmp(jstr(info, "numa_policy"), want) == 0, "numa_policy %s, want %s",
		jstr(info, "numa_policy"), want);
}

void require_kernel_nodes(struct jv *nodes, const int *mem, int n, const char *when)
{
	for (int i = 0; i < n; i++)
		REQUIRE(ju64(nodes->v[i], "kernel_node") == (uint64_t)mem[i],
			"pool node %d: kernel_node %llu%s, want %d", i,
			(unsigned long long)ju64(nodes->v[i], "kernel_node"), when, mem[i]);
}

/* The "nodes" of @cache in `sheafctl stats CACHE -n -o json` @j. */
static struct jv *stats_nodes(struct jv *j, const char *cache)
{
	return jarr(jnamed(jarr(j, "caches"), cache), "nodes");
}

uint64_t region_pages(const char *cache, int idx, int kn)
{
	struct jv *j = CTLJ("stats", (char *)cache, "-n");
	struct jv *nodes = stats_nodes(j, cache), *pbk;
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

void require_region_home(const char *cache, int idx, const int *mem, int n, uint64_t home)
{
	for (int k = 0; k < n; k++) {
		uint64_t v = region_pages(cache, idx, mem[k]);

		printf("  pool node %d's region: %llu pages on kernel node %d\n", idx,
		       (unsigned long long)v, mem[k]);
		REQUIRE(k == idx ? v >= home : v == 0, "pool node %d's region: %llu pages on "
			"kernel node %d (%s)", idx, (unsigned long long)v, mem[k],
			k == idx ? "its own, too few" : "not its own");
	}
}

uint64_t ctl_counter(const char *cache, const char *name)
{
	struct jv *j = CTLJ("stats", (char *)cache, "-n");
	struct jv *nodes = stats_nodes(j, cache);
	uint64_t sum = 0;

	for (size_t i = 0; i < nodes->n; i++)
		sum += ju64(jreq(nodes->v[i], "counters", J_OBJ), name);
	jv_free(j);
	return sum;
}
