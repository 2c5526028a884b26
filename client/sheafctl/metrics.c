/*
 * metrics.c - `sheafctl metrics`: the daemon and every cache in the
 * Prometheus text exposition format 0.0.4.  Names start with sheaf_,
 * counters end in _total, per-cache samples carry a cache label and
 * per-node ones a node label too; every family has # HELP and # TYPE
 * (also when it has no sample yet).
 */
#include <string.h>
#include "client/sheafctl/sheafctl.h"
#include "client/sheaf.h"

/* Help texts of the counters (sheaf_stat_name); unknown names get a generic one. */
static const struct { const char *name, *help; } counter_help[] = {
	{ "alloc_fastpath", "Allocations served from a thread's main or spare sheaf." },
	{ "alloc_slowpath", "Allocations that had to go to the barn." },
	{ "free_fastpath", "Frees pushed onto a thread's main or spare sheaf." },
	{ "free_slowpath", "Frees that had to go to the barn (or were remote)." },
	{ "sheaf_alloc", "Empty sheaves taken from the depot." },
	{ "sheaf_free", "Empty sheaves given back to the depot." },
	{ "barn_get", "Full sheaves taken from the barn." },
	{ "barn_get_fail", "Barn exchanges that found no full sheaf." },
	{ "barn_put", "Full sheaves put into the barn." },
	{ "barn_put_fail", "Puts into a barn at or over its limit." },
	{ "sheaf_prefill_fast", "Prefill reservations served without waiting." },
	{ "sheaf_prefill_slow", "Prefill reservations that had to wait." },
	{ "sheaf_prefill_oversize", "Prefill reservations larger than a sheaf." },
	{ "sheaf_return_fast", "Prefill returns served without the barn." },
	{ "sheaf_return_slow", "Prefill returns through the barn." },
	{ "free_remote", "Frees of objects of another node." },
	{ "free_invalid", "Frees refused: bad pointer, wrong cache or double free." },
	{ "alloc_fail", "Allocations that failed with ENOMEM." },
	{ "sheaf_refill", "Sheaves filled from slabs by the engine." },
	{ "sheaf_flush", "Sheaves emptied back to slabs by the engine." },
	{ "alloc_slab", "New slabs taken from the node's frames." },
	{ "free_slab", "Empty slabs given back to the kernel." },
	{ "flush_invalid", "Bad objects found in a sheaf and dropped." },
	{ "refill_remote", "Refills served by another node." },
};

static const char *help_of(const char *name)
{
	for (size_t i = 0; i < sizeof(counter_help) / sizeof(counter_help[0]); i++)
		if (strcmp(counter_help[i].name, name) == 0)
			return counter_help[i].help;
	return NULL;
}

/* A metric name part: [a-zA-Z0-9_] kept, anything else becomes '_'. */
static void put_name(const char *s)
{
	for (; *s != '\0'; s++) {
		char ch = *s;
		int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			 (ch >= '0' && ch <= '9') || ch == '_';
		putchar(ok ? ch : '_');
	}
}

/* A label value: backslash, double quote and newline escaped. */
static void put_label_value(const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '\\' || *s == '"')
			printf("\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", stdout);
		else
			putchar(*s);
	}
}

static void family(const char *name, const char *suffix, const char *type, const char *help)
{
	printf("# HELP sheaf_");
	put_name(name);
	printf("%s %s\n# TYPE sheaf_", suffix, help);
	put_name(name);
	printf("%s %s\n", suffix, type);
}

/* One sample; @cache NULL: no labels; @node < 0: no node label. */
static void sample(const char *name, const char *suffix, const char *cache, long node,
		   uint64_t v)
{
	printf("sheaf_");
	put_name(name);
	printf("%s", suffix);
	if (cache != NULL) {
		printf("{cache=\"");
		put_label_value(cache);
		printf("\"");
		if (node >= 0)
			printf(",node=\"%ld\"", node);
		printf("}");
	}
	printf(" %llu\n", (unsigned long long)v);
}

static uint64_t grace_blocked_ms(const Sheaf__V1__DaemonInfoResponse *di)
{
	uint64_t m = 0;

	for (size_t k = 0; k < di->n_gp_blockers; k++)
		if (di->gp_blockers[k]->blocked_ms > m)
			m = di->gp_blockers[k]->blocked_ms;
	return m;
}

/* Per real NUMA node, label kernel_node (simulated nodes: no sample). */
static void numa_families(const Sheaf__V1__DaemonInfoResponse *di)
{
	int bind = di->numa_policy != NULL && strcmp(di->numa_policy, "bind") == 0;

	family("numa_node_used_bytes", "", "gauge", "Bytes of slab frames of the node in use.");
	for (size_t k = 0; k < di->n_numa_nodes; k++)
		printf("sheaf_numa_node_used_bytes{kernel_node=\"%u\"} %llu\n",
		       di->numa_nodes[k]->kernel_node,
		       (unsigned long long)di->numa_nodes[k]->frames_used << 18);
	family("numa_node_cap_bytes", "", "gauge",
	       "The node's cap under numa_policy=bind (no sample under other policies).");
	for (size_t k = 0; bind && k < di->n_numa_nodes; k++)
		printf("sheaf_numa_node_cap_bytes{kernel_node=\"%u\"} %llu\n",
		       di->numa_nodes[k]->kernel_node, (unsigned long long)di->numa_nodes[k]->cap);
	family("numa_node_cap_refused_total", "", "counter",
	       "Requests for a slab frame the node refused at its cap since sheafd started.");
	for (size_t k = 0; k < di->n_numa_nodes; k++)
		printf("sheaf_numa_node_cap_refused_total{kernel_node=\"%u\"} %llu\n",
		       di->numa_nodes[k]->kernel_node,
		       (unsigned long long)di->numa_nodes[k]->cap_refused);
}

static void daemon_families(const Sheaf__V1__DaemonInfoResponse *di, size_t ncaches)
{
	const Sheaf__V1__Layout *l = di->layout;

	family("build_info", "", "gauge", "Always 1; the version label names sheafd's version.");
	printf("sheaf_build_info{version=\"");
	put_label_value(di->version);
	printf("\"} 1\n");
	family("uptime_seconds", "", "gauge", "Seconds since sheafd started.");
	sample("uptime_seconds", "", NULL, -1, di->uptime_seconds);
	family("pool_size_bytes", "", "gauge", "Data bytes of the pool over all nodes.");
	sample("pool_size_bytes", "", NULL, -1, di->pool_size);
	family("mem_cap_bytes", "", "gauge", "Most bytes of slabs the pool may map.");
	sample("mem_cap_bytes", "", NULL, -1, di->mem_cap);
	family("nodes", "", "gauge", "NUMA nodes of the pool (real or simulated).");
	sample("nodes", "", NULL, -1, l ? l->nodes : 0);
	family("clients", "", "gauge", "Attached client processes.");
	sample("clients", "", NULL, -1, di->clients);
	family("clients_max", "", "gauge", "Most client processes that may attach.");
	sample("clients_max", "", NULL, -1, di->max_clients);
	family("caches", "", "gauge", "Live caches.");
	sample("caches", "", NULL, -1, ncaches);
	family("caches_max", "", "gauge", "Most caches a pool may hold.");
	sample("caches_max", "", NULL, -1, di->max_caches);
	family("grace_periods_total", "", "counter", "Grace periods completed (deferred frees).");
	sample("grace_periods_total", "", NULL, -1, di->gp_completed);
	family("rcu_waiting_objects", "", "gauge", "Deferred objects waiting for a grace period.");
	sample("rcu_waiting_objects", "", NULL, -1, di->rcu_waiting);
	family("grace_blocked_ms", "", "gauge",
	       "How long the longest reader lane holds the grace period back (0: none).");
	sample("grace_blocked_ms", "", NULL, -1, grace_blocked_ms(di));
	numa_families(di);
}

/* Per-cache gauges: label cache only. */
static void cache_families(const struct stats_set *s)
{
	static const struct { const char *name, *help; } g[] = {
		{ "object_size_bytes", "Object size after rounding to the alignment." },
		{ "objects_per_slab", "Objects in one 256 KiB slab." },
		{ "sheaf_capacity", "Objects per sheaf (0: sheaves disabled)." },
		{ "min_partial", "Empty slabs kept per node when shrinking." },
		{ "barn_limit", "Full sheaves a barn holds before the engine flushes." },
		{ "objects_in_use", "Objects allocated and not freed, by the counters." },
		{ "in_use_bytes", "Bytes of objects in use." },
	};

	for (size_t k = 0; k < sizeof(g) / sizeof(g[0]); k++) {
		family(g[k].name, "", "gauge", g[k].help);
		for (size_t i = 0; i < s->n; i++) {
			const Sheaf__V1__CacheStats *cs = s->caches[i];
			const Sheaf__V1__CacheInfo *ci = cs->cache;
			uint64_t v[] = { ci->object_size, ci->objects_per_slab, ci->sheaf_capacity,
					 ci->min_partial, ci->barn_limit, cs->in_use,
					 cs->bytes_in_use };
			sample(g[k].name, "", ci->name, -1, v[k]);
		}
	}
}

/* Per-node gauges: labels cache and node. */
static void node_families(const struct stats_set *s)
{
	static const struct { const char *name, *help; } g[] = {
		{ "objects", "Objects in the cache's slabs." },
		{ "active_objects", "Objects out of slabs (in sheaves or in use)." },
		{ "slabs", "Slabs of the cache." },
		{ "partial_slabs", "Partially used slabs." },
		{ "mapped_bytes", "Bytes of the cache's slabs." },
		{ "barn_full_sheaves", "Full sheaves in the barn." },
		{ "barn_empty_sheaves", "Empty sheaves in the barn." },
	};

	for (size_t k = 0; k < sizeof(g) / sizeof(g[0]); k++) {
		family(g[k].name, "", "gauge", g[k].help);
		for (size_t i = 0; i < s->n; i++) {
			const Sheaf__V1__CacheStats *cs = s->caches[i];
			for (size_t n = 0; n < cs->n_nodes; n++) {
				const Sheaf__V1__NodeStats *ns = cs->nodes[n];
				uint64_t v[] = { ns->objects, ns->active_objects, ns->slabs,
						 ns->partial_slabs, ns->slab_bytes,
						 ns->barn_full, ns->barn_empty };
				sample(g[k].name, "", cs->cache->name, (long)ns->node, v[k]);
			}
		}
	}
}

/* Counters: one family per counter name, in the daemon's order (the first
 * cache's first node; names missing there but present elsewhere follow). */
static void counter_family(const struct stats_set *s, const char *name)
{
	const char *help = help_of(name);
	char generic[96];

	if (help == NULL) {
		snprintf(generic, sizeof(generic), "sheaf counter %s.", name);
		help = generic;
	}
	family(name, "_total", "counter", help);
	for (size_t i = 0; i < s->n; i++) {
		const Sheaf__V1__CacheStats *cs = s->caches[i];
		for (size_t n = 0; n < cs->n_nodes; n++)
			sample(name, "_total", cs->cache->name, (long)cs->nodes[n]->node,
			       stats_counter(cs->nodes[n], name));
	}
}

static int seen_before(const struct stats_set *s, size_t ci, size_t ni, size_t ki)
{
	const char *name = s->caches[ci]->nodes[ni]->counters[ki]->name;

	for (size_t i = 0; i <= ci; i++)
		for (size_t n = 0; n < s->caches[i]->n_nodes && (i < ci || n <= ni); n++) {
			const Sheaf__V1__NodeStats *ns = s->caches[i]->nodes[n];
			size_t upto = (i == ci && n == ni) ? ki : ns->n_counters;
			for (size_t k = 0; k < upto; k++)
				if (strcmp(ns->counters[k]->name, name) == 0)
					return 1;
		}
	return 0;
}

static void counter_families(const struct stats_set *s)
{
	/* No sample: the families still exist, named by libsheaf's list (the
	 * daemon's counters, in its order). */
	if (s->n == 0) {
		for (unsigned k = 0; sheaf_stat_name(k) != NULL; k++)
			counter_family(s, sheaf_stat_name(k));
		return;
	}
	for (size_t i = 0; i < s->n; i++)
		for (size_t n = 0; n < s->caches[i]->n_nodes; n++)
			for (size_t k = 0; k < s->caches[i]->nodes[n]->n_counters; k++)
				if (!seen_before(s, i, n, k))
					counter_family(s, s->caches[i]->nodes[n]->counters[k]->name);
}

int cmd_metrics(struct ctl *c, int argc, char **argv)
{
	Sheaf__V1__DaemonInfoRequest body = SHEAF__V1__DAEMON_INFO_REQUEST__INIT;
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__Response *info;
	struct stats_set s;
	int first, rc;

	rc = ctl_getopt(c, argc, argv, "", NULL, 0, NULL, NULL, &first);
	if (rc != CTL_OK)
		return rc;
	if (first < argc)
		return ctl_usage(c, "unexpected argument '%s'", argv[first]);
	if (c->json)
		return ctl_usage(c, "metrics has one format, Prometheus text: drop -o json");
	rq.body_case = SHEAF__V1__REQUEST__BODY_DAEMON_INFO;
	rq.daemon_info = &body;
	if ((rc = ctl_call_or_say(c, &rq, &info)) != CTL_OK)
		return rc;
	if ((rc = stats_fetch(c, NULL, &s)) != CTL_OK) {
		ctl_free(info);
		return rc;
	}
	daemon_families(info->daemon_info, s.n);
	cache_families(&s);
	node_families(&s);
	counter_families(&s);
	metrics_queues(&s);
	metrics_topics(&s);
	stats_set_free(&s);
	ctl_free(info);
	return CTL_OK;
}
