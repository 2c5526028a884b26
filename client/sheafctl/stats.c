/*
 * stats.c - `sheafctl stats`: every counter (the kernel's names, in the
 * daemon's order) and the slab figures of one cache or of all,
 * per node with -n, once or every INTERVAL seconds (vmstat-like: later
 * reports count the interval).  Also the stats fetch shared with top and
 * metrics.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "client/sheafctl/sheafctl.h"

/* ---- fetching ------------------------------------------------------------ */

void stats_set_free(struct stats_set *s)
{
	for (size_t i = 0; i < s->n_resp; i++)
		ctl_free(s->resp[i]);
	free(s->resp);
	free(s->caches);
	memset(s, 0, sizeof(*s));
}

/* Keep response @r and its caches in @s. */
static int stats_add(struct stats_set *s, Sheaf__V1__Response *r)
{
	const Sheaf__V1__StatsResponse *sr = r->stats;
	Sheaf__V1__Response **rp = realloc(s->resp, (s->n_resp + 1) * sizeof(*rp));
	Sheaf__V1__CacheStats **cp;

	if (rp == NULL)
		return -1;
	s->resp = rp;
	s->resp[s->n_resp++] = r;
	cp = realloc(s->caches, (s->n + sr->n_caches + 1) * sizeof(*cp));
	if (cp == NULL)
		return -1;
	s->caches = cp;
	for (size_t i = 0; i < sr->n_caches; i++)
		s->caches[s->n++] = sr->caches[i];
	return 0;
}

/* `stats -n`: ask for each node's pages by kernel node too. */
static int want_placement;

static int stats_one(struct ctl *c, const char *cache, Sheaf__V1__Response **r)
{
	Sheaf__V1__StatsRequest body = SHEAF__V1__STATS_REQUEST__INIT;
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;

	body.cache = (char *)cache;
	body.placement = want_placement;
	rq.body_case = SHEAF__V1__REQUEST__BODY_STATS;
	rq.stats = &body;
	return ctl_call(c, &rq, r);
}

/*
 * sheafd builds one reply in a bounded arena, so a Stats request for every
 * cache fails (STATUS_INTERNAL, "out of memory") once there are many caches
 * and nodes: then ask cache by cache.
 */
static int stats_each(struct ctl *c, struct stats_set *out)
{
	Sheaf__V1__CacheListRequest body = SHEAF__V1__CACHE_LIST_REQUEST__INIT;
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__Response *list, *r;
	int rc;

	rq.body_case = SHEAF__V1__REQUEST__BODY_CACHE_LIST;
	rq.cache_list = &body;
	if ((rc = ctl_call_or_say(c, &rq, &list)) != CTL_OK)
		return rc;
	for (size_t i = 0; i < list->cache_list->n_caches && rc == CTL_OK; i++) {
		rc = stats_one(c, list->cache_list->caches[i]->name, &r);
		if (rc != CTL_OK && c->status == SHEAF__V1__STATUS__STATUS_NOT_FOUND && c->fd >= 0)
			rc = CTL_OK;            /* destroyed meanwhile */
		else if (rc != CTL_OK)
			ctl_err(rc, "%s", c->err);
		else if (stats_add(out, r) != 0)
			rc = ctl_err(CTL_REFUSED, "out of memory");
	}
	ctl_free(list);
	return rc;
}

int stats_fetch(struct ctl *c, const char *cache, struct stats_set *out)
{
	Sheaf__V1__Response *r;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = stats_one(c, cache != NULL ? cache : "", &r);
	if (rc != CTL_OK && cache == NULL && c->fd >= 0 &&
	    c->status == SHEAF__V1__STATUS__STATUS_INTERNAL) {
		if ((rc = stats_each(c, out)) != CTL_OK)
			stats_set_free(out);
		return rc;
	}
	if (rc != CTL_OK)
		return ctl_err(rc, "%s", c->err);
	if (stats_add(out, r) != 0) {
		ctl_free(r);
		return ctl_err(CTL_REFUSED, "out of memory");
	}
	return CTL_OK;
}

uint64_t stats_counter(const Sheaf__V1__NodeStats *ns, const char *name)
{
	for (size_t k = 0; k < ns->n_counters; k++)
		if (strcmp(ns->counters[k]->name, name) == 0)
			return ns->counters[k]->value;
	return 0;
}

uint64_t stats_counter_sum(const Sheaf__V1__CacheStats *cs, const char *name)
{
	uint64_t v = 0;

	for (size_t n = 0; n < cs->n_nodes; n++)
		v += stats_counter(cs->nodes[n], name);
	return v;
}

const Sheaf__V1__CacheStats *stats_find(const struct stats_set *s, const char *name)
{
	for (size_t i = 0; s != NULL && i < s->n; i++)
		if (s->caches[i]->cache != NULL && strcmp(s->caches[i]->cache->name, name) == 0)
			return s->caches[i];
	return NULL;
}

/* ---- one cache's figures --------------------------------------------------- */

/* The rows of a report, total and per node; NA where a figure has no
 * per-node value. */
#define NA UINT64_MAX
#define MAX_ROWS 64
/* Node columns a report holds: sheafd runs at most 8 nodes. */
#define CTL_MAX_NODES 8

struct row {
	const char *name;
	uint64_t total;
	uint64_t node[CTL_MAX_NODES];
};

struct report {
	struct row rows[MAX_ROWS];
	int n_rows, first_counter;
	unsigned nodes;
};

static struct row *add_row(struct report *rep, const char *name, uint64_t total)
{
	struct row *r = &rep->rows[rep->n_rows < MAX_ROWS - 1 ? rep->n_rows++ : rep->n_rows];

	r->name = name;
	r->total = total;
	for (unsigned n = 0; n < CTL_MAX_NODES; n++)
		r->node[n] = NA;
	return r;
}

#define NODE_FIELD_ROW(rep, cs, field, mult)                                    \
	do {                                                                    \
		struct row *r_ = add_row(rep, #field, 0);                       \
		for (size_t n_ = 0; n_ < (cs)->n_nodes && n_ < CTL_MAX_NODES; n_++) { \
			r_->node[n_] = (cs)->nodes[n_]->field * (mult);         \
			r_->total += r_->node[n_];                              \
		}                                                               \
	} while (0)

/* Counter value of @cs, less its value in @prev (NULL: since start). */
static uint64_t delta(uint64_t cur, const Sheaf__V1__NodeStats *prev, const char *name)
{
	uint64_t p = prev != NULL ? stats_counter(prev, name) : 0;
	return cur >= p ? cur - p : cur;
}

static void build_report(struct report *rep, const Sheaf__V1__CacheStats *cs,
			 const Sheaf__V1__CacheStats *prev)
{
	const Sheaf__V1__CacheInfo *ci = cs->cache;
	struct row *r;

	memset(rep, 0, sizeof(*rep));
	rep->nodes = (unsigned)cs->n_nodes;
	add_row(rep, "sheaf_capacity", ci->sheaf_capacity);
	add_row(rep, "min_partial", ci->min_partial);
	NODE_FIELD_ROW(rep, cs, objects, 1);
	NODE_FIELD_ROW(rep, cs, active_objects, 1);
	add_row(rep, "in_use", cs->in_use);
	NODE_FIELD_ROW(rep, cs, slabs, 1);
	NODE_FIELD_ROW(rep, cs, partial_slabs, 1);
	add_row(rep, "bytes_in_use", cs->bytes_in_use);
	r = add_row(rep, "bytes_mapped", cs->bytes_mapped);
	for (size_t n = 0; n < cs->n_nodes && n < CTL_MAX_NODES; n++)
		r->node[n] = cs->nodes[n]->slab_bytes;
	NODE_FIELD_ROW(rep, cs, barn_full, 1);
	NODE_FIELD_ROW(rep, cs, barn_empty, 1);
	if (ci->flags & 2u) {            /* owned: a dead client's objects */
		add_row(rep, "owner_freed", cs->owner_freed);
		add_row(rep, "owner_kept", cs->owner_kept);
	}
	rep->first_counter = rep->n_rows;
	if (cs->n_nodes == 0)
		return;
	for (size_t k = 0; k < cs->nodes[0]->n_counters; k++) {
		const char *name = cs->nodes[0]->counters[k]->name;
		r = add_row(rep, name, 0);
		for (size_t n = 0; n < cs->n_nodes && n < CTL_MAX_NODES; n++) {
			const Sheaf__V1__NodeStats *pn =
				prev != NULL && n < prev->n_nodes ? prev->nodes[n] : NULL;
			r->node[n] = delta(stats_counter(cs->nodes[n], name), pn, name);
			r->total += r->node[n];
		}
	}
}

static void print_report(const struct report *rep, const Sheaf__V1__CacheStats *cs,
			 int per_node, double interval)
{
	const Sheaf__V1__CacheInfo *ci = cs->cache;
	char nb[CTL_ESC_MAX];

	printf("cache %s: id %u, object size %u B, %u objects per slab%s", ctl_esc(nb, ci->name),
	       ci->id,
	       ci->object_size, ci->objects_per_slab, ci->flags & 1u ? ", debug" : "");
	if (interval > 0)
		printf("; counters over the last %g s", interval);
	printf("\n");
	if (per_node) {
		printf("  %-24s %14s", "NAME", "TOTAL");
		for (unsigned n = 0; n < rep->nodes; n++) {
			char h[16];
			snprintf(h, sizeof(h), "node%u", n);
			printf(" %14s", h);
		}
		printf("\n");
	}
	for (int i = 0; i < rep->n_rows; i++) {
		const struct row *r = &rep->rows[i];
		printf("  %-24s %14llu", r->name, (unsigned long long)r->total);
		for (unsigned n = 0; per_node && n < rep->nodes; n++) {
			if (r->node[n] == NA)
				printf(" %14s", "-");
			else
				printf(" %14llu", (unsigned long long)r->node[n]);
		}
		printf("\n");
	}
	if (per_node)
		numa_pages_table(cs);
}

/* Rows as JSON members; counters in an object named "counters". */
static void json_rows(struct jw *w, const struct report *rep, int node)
{
	for (int i = 0; i < rep->n_rows; i++) {
		const struct row *r = &rep->rows[i];
		uint64_t v = node < 0 ? r->total : r->node[node];
		if (i == rep->first_counter)
			jw_obj(w, "counters");
		if (v != NA)
			jw_u64(w, r->name, v);
	}
	if (rep->first_counter < rep->n_rows)
		jw_end(w, '}');
}

static void json_report(struct jw *w, const struct report *rep,
			const Sheaf__V1__CacheStats *cs, int per_node)
{
	const Sheaf__V1__CacheInfo *ci = cs->cache;

	jw_obj(w, NULL);
	jw_str(w, "name", ci->name);
	jw_u64(w, "id", ci->id);
	jw_u64(w, "object_size", ci->object_size);
	jw_u64(w, "objects_per_slab", ci->objects_per_slab);
	json_rows(w, rep, -1);
	if (per_node) {
		jw_arr(w, "nodes");
		for (unsigned n = 0; n < rep->nodes; n++) {
			jw_obj(w, NULL);
			jw_u64(w, "node", cs->nodes[n]->node);
			json_rows(w, rep, (int)n);
			numa_pages_json(w, cs->nodes[n]);
			jw_end(w, '}');
		}
		jw_end(w, ']');
	}
	jw_end(w, '}');
}

/* ---- the command ----------------------------------------------------------- */

struct stats_opts {
	int per_node;
	const char *cache;
	double interval;           /* 0: one report */
	uint64_t count;            /* 0: until interrupted */
};

static int stats_opt(void *arg, int opt, const char *val)
{
	(void)val;
	if (opt == 'n')
		((struct stats_opts *)arg)->per_node = 1;
	return CTL_OK;
}

/* [CACHE] [INTERVAL [COUNT]]: a numeric first operand is an INTERVAL. */
static int stats_operands(struct ctl *c, int n, char **ops, struct stats_opts *o)
{
	double d;
	int i = 0;

	if (n > 3)
		return ctl_usage(c, "unexpected argument '%s'", ops[3]);
	if (n > 0 && (n == 3 || ctl_parse_seconds(ops[0], &d) != 0))
		o->cache = ops[i++];
	if (i < n && ctl_parse_seconds(ops[i], &o->interval) != 0)
		return ctl_usage(c, "bad interval '%s' (seconds, > 0)", ops[i]);
	if (++i < n && (ctl_parse_u64(ops[i], 0, &o->count) != 0 || o->count == 0))
		return ctl_usage(c, "bad count '%s' (a positive integer)", ops[i]);
	return CTL_OK;
}

static void stats_print(const struct ctl *c, const struct stats_opts *o,
			const struct stats_set *cur, const struct stats_set *prev)
{
	double interval = prev != NULL ? o->interval : 0;
	struct report rep;
	struct jw w;

	if (c->json) {
		jw_init(&w, stdout, o->interval == 0);
		jw_obj(&w, NULL);
		jw_u64(&w, "time", (uint64_t)time(NULL));
		jw_num(&w, "interval_seconds", interval);
		jw_arr(&w, "caches");
	}
	for (size_t i = 0; i < cur->n; i++) {
		const Sheaf__V1__CacheStats *cs = cur->caches[i];
		const Sheaf__V1__CacheStats *pc = stats_find(prev, cs->cache->name);
		if (pc != NULL && pc->cache->id != cs->cache->id)
			pc = NULL;              /* destroyed and created again */
		build_report(&rep, cs, prev != NULL ? pc : NULL);
		if (c->json) {
			json_report(&w, &rep, cs, o->per_node);
		} else {
			if (i > 0)
				printf("\n");
			print_report(&rep, cs, o->per_node, prev != NULL && pc != NULL ? interval : 0);
		}
	}
	if (c->json) {
		jw_end(&w, ']');
		stats_json_queues(&w, cur);
		stats_json_topics(&w, cur);
		jw_end(&w, '}');
		jw_done(&w);
	} else if (o->interval > 0) {
		printf("\n");
	}
	fflush(stdout);
}

int cmd_stats(struct ctl *c, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "per-node", no_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	struct stats_opts o = { 0 };
	struct stats_set cur, prev = { 0 };
	int first, have_prev = 0, rc;

	rc = ctl_getopt(c, argc, argv, "n", lo, 0, stats_opt, &o, &first);
	if (rc != CTL_OK || (rc = stats_operands(c, argc - first, argv + first, &o)) != CTL_OK)
		return rc;
	want_placement = o.per_node;
	for (uint64_t i = 0; o.count == 0 || i < o.count; i++) {
		if (i > 0 && ctl_sleep(o.interval) != 0)
			break;
		if ((rc = stats_fetch(c, o.cache, &cur)) != CTL_OK)
			break;
		stats_print(c, &o, &cur, have_prev ? &prev : NULL);
		stats_set_free(&prev);
		prev = cur;
		have_prev = 1;
		if (o.interval == 0)
			break;
	}
	stats_set_free(&prev);
	return rc;
}
