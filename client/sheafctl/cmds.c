/*
 * cmds.c - sheafctl's one-request subcommands: info, caches, create,
 * destroy, shrink, tune, clients, check.  Each parses its options,
 * sends one request and prints the reply as a table or as JSON (field
 * names: sheafctl(1)).
 */
#include <string.h>
#include "client/sheafctl/sheafctl.h"

#define REQ(var, body_enum, field, value)                                   \
	Sheaf__V1__Request var = SHEAF__V1__REQUEST__INIT;                  \
	var.body_case = body_enum;                                          \
	var.field = (value)

/* A reply printed as JSON: one object, the document (pretty) on stdout. */
static void json_open(struct jw *w)
{
	jw_init(w, stdout, 1);
	jw_obj(w, NULL);
}

static void json_close(struct jw *w)
{
	jw_end(w, '}');
	jw_done(w);
}

/* Subcommands without options of their own; checks the operand count. */
static int plain_opts(struct ctl *c, int argc, char **argv, int min, int max, int *first)
{
	int rc = ctl_getopt(c, argc, argv, "", NULL, 0, NULL, NULL, first);
	int n = argc - *first;

	if (rc != CTL_OK)
		return rc;
	if (n > max)
		return ctl_usage(c, "unexpected argument '%s'", argv[*first + max]);
	if (n < min)
		return ctl_usage(c, "missing argument");
	return CTL_OK;
}

/* A subcommand without options or operands: its request @rq, the reply in
 * *@r (ctl_free it) when CTL_OK. */
static int plain_call(struct ctl *c, int argc, char **argv, Sheaf__V1__Request *rq,
		      Sheaf__V1__Response **r)
{
	int first, rc = plain_opts(c, argc, argv, 0, 0, &first);

	return rc != CTL_OK ? rc : ctl_call_or_say(c, rq, r);
}

/* ---- info ---------------------------------------------------------------- */

static void info_table(const struct ctl *c, const Sheaf__V1__DaemonInfoResponse *di)
{
	const Sheaf__V1__Layout *l = di->layout;
	char a[32], b[32];

	printf("%-18s %s\n", "version", di->version);
	printf("%-18s %u\n", "protocol_version", di->protocol_version);
	printf("%-18s %s\n", "socket", c->socket);
	printf("%-18s %s (%llu s)\n", "uptime", fmt_duration(a, sizeof(a), di->uptime_seconds),
	       (unsigned long long)di->uptime_seconds);
	if (l != NULL) {
		printf("%-18s %u (%s)\n", "nodes", l->nodes, l->simulated_nodes ? "simulated" : "NUMA");
		printf("%-18s %u\n", "sheaf_count", l->sheaf_count);
	}
	printf("%-18s %s (%llu bytes)\n", "pool_size", fmt_iec(a, sizeof(a), di->pool_size),
	       (unsigned long long)di->pool_size);
	printf("%-18s %s (%llu bytes)\n", "mem_cap", fmt_iec(b, sizeof(b), di->mem_cap),
	       (unsigned long long)di->mem_cap);
	if (l != NULL) {
		printf("%-18s %s (%llu bytes)\n", "region_size", fmt_iec(a, sizeof(a), l->region_size),
		       (unsigned long long)l->region_size);
		printf("%-18s 0x%llx\n", "map_addr", (unsigned long long)l->map_addr);
		printf("%-18s %u\n", "layout_version", l->layout_version);
	}
	printf("%-18s %s (%llu bytes)\n", "large_bytes", fmt_iec(a, sizeof(a), di->large_bytes),
	       (unsigned long long)di->large_bytes);
	printf("%-18s %s of %s\n", "large_retained", fmt_iec(a, sizeof(a), di->large_retained),
	       fmt_iec(b, sizeof(b), di->large_retain));
	printf("%-18s %s (%llu bytes)\n", "shared_allocated",
	       fmt_iec(a, sizeof(a), di->shared_allocated),
	       (unsigned long long)di->shared_allocated);
	printf("%-18s %u\n", "clients", di->clients);
	printf("%-18s %u\n", "max_clients", di->max_clients);
	printf("%-18s %u\n", "max_caches", di->max_caches);
	printf("%-18s %u\n", "max_frame", di->max_frame);
	printf("%-18s %llu started, %llu completed\n", "grace_periods",
	       (unsigned long long)di->gp_started, (unsigned long long)di->gp_completed);
	printf("%-18s %llu objects\n", "rcu_waiting", (unsigned long long)di->rcu_waiting);
	for (size_t k = 0; k < di->n_gp_blockers; k++) {
		const Sheaf__V1__GraceBlocker *gb = di->gp_blockers[k];
		printf("%-18s lane %u client %u pid %u for %llu ms\n", "gp_blocked_by",
		       gb->lane, gb->client_id, gb->pid, (unsigned long long)gb->blocked_ms);
	}
	numa_info_table((const Sheaf__V1__NumaNode *const *)di->numa_nodes, di->n_numa_nodes,
			di->numa_policy);
}

static void info_json(const struct ctl *c, const Sheaf__V1__DaemonInfoResponse *di)
{
	const Sheaf__V1__Layout *l = di->layout;
	struct jw w;

	json_open(&w);
	jw_str(&w, "version", di->version);
	jw_u64(&w, "protocol_version", di->protocol_version);
	jw_str(&w, "socket", c->socket);
	jw_u64(&w, "uptime_seconds", di->uptime_seconds);
	jw_u64(&w, "node_count", l ? l->nodes : 0);
	jw_bool(&w, "simulated_nodes", l ? l->simulated_nodes : 0);
	numa_info_json(&w, (const Sheaf__V1__NumaNode *const *)di->numa_nodes, di->n_numa_nodes,
		       di->numa_policy, l ? l->nodes : 0);
	jw_u64(&w, "sheaf_count", l ? l->sheaf_count : 0);
	jw_u64(&w, "pool_size", di->pool_size);
	jw_u64(&w, "mem_cap", di->mem_cap);
	jw_u64(&w, "region_size", l ? l->region_size : 0);
	jw_u64(&w, "map_addr", l ? l->map_addr : 0);
	jw_u64(&w, "layout_version", l ? l->layout_version : 0);
	jw_u64(&w, "large_bytes", di->large_bytes);
	jw_u64(&w, "large_retained", di->large_retained);
	jw_u64(&w, "large_retain", di->large_retain);
	jw_u64(&w, "shared_allocated", di->shared_allocated);
	jw_u64(&w, "clients", di->clients);
	jw_u64(&w, "max_clients", di->max_clients);
	jw_u64(&w, "max_caches", di->max_caches);
	jw_u64(&w, "max_frame", di->max_frame);
	jw_u64(&w, "gp_started", di->gp_started);
	jw_u64(&w, "gp_completed", di->gp_completed);
	jw_u64(&w, "rcu_waiting", di->rcu_waiting);
	jw_u64(&w, "gp_blockers", di->n_gp_blockers);
	jw_u64(&w, "gp_blocked_ms", di->n_gp_blockers ? di->gp_blockers[0]->blocked_ms : 0);
	jw_u64(&w, "gp_blocked_pid", di->n_gp_blockers ? di->gp_blockers[0]->pid : 0);
	json_close(&w);
}

int cmd_info(struct ctl *c, int argc, char **argv)
{
	Sheaf__V1__DaemonInfoRequest body = SHEAF__V1__DAEMON_INFO_REQUEST__INIT;
	REQ(rq, SHEAF__V1__REQUEST__BODY_DAEMON_INFO, daemon_info, &body);
	Sheaf__V1__Response *r;
	int rc = plain_call(c, argc, argv, &rq, &r);

	if (rc != CTL_OK)
		return rc;
	if (c->json)
		info_json(c, r->daemon_info);
	else
		info_table(c, r->daemon_info);
	ctl_free(r);
	return CTL_OK;
}

/* ---- caches -------------------------------------------------------------- */

static int name_width(Sheaf__V1__CacheInfo **ci, size_t n)
{
	int w = 4;

	for (size_t i = 0; i < n; i++)
		if ((int)text_escaped_len(ci[i]->name) > w)
			w = (int)text_escaped_len(ci[i]->name);
	return w;
}

/* A cache's flags in words: "debug", "owned", "owned,keep", "-". */
static const char *flags_str(uint32_t f)
{
	static const char *const names[8] = { "-", "debug", "owned", "debug,owned", "keep",
					      "debug,keep", "owned,keep", "debug,owned,keep" };
	return names[f & 7u];
}

static void caches_table(const Sheaf__V1__CacheListResponse *cl)
{
	int w = name_width(cl->caches, cl->n_caches);

	printf("%3s %-*s %6s %5s %8s %8s %11s %8s %9s %10s %s\n", "ID", w, "NAME", "SIZE",
	       "ALIGN", "OBJ/SLAB", "CAPACITY", "MIN_PARTIAL", "BARN_LOW", "BARN_HIGH",
	       "BARN_LIMIT", "FLAGS");
	for (size_t i = 0; i < cl->n_caches; i++) {
		const Sheaf__V1__CacheInfo *ci = cl->caches[i];
		char nb[CTL_ESC_MAX];

		printf("%3u %-*s %6u %5u %8u %8u %11u %8u %9u %10u %s\n", ci->id, w, ctl_esc(nb, ci->name),
		       ci->object_size, ci->align, ci->objects_per_slab, ci->sheaf_capacity,
		       ci->min_partial, ci->barn_low, ci->barn_high, ci->barn_limit,
		       flags_str(ci->flags));
	}
}

int cmd_caches(struct ctl *c, int argc, char **argv)
{
	Sheaf__V1__CacheListRequest body = SHEAF__V1__CACHE_LIST_REQUEST__INIT;
	REQ(rq, SHEAF__V1__REQUEST__BODY_CACHE_LIST, cache_list, &body);
	Sheaf__V1__Response *r;
	int rc = plain_call(c, argc, argv, &rq, &r);

	if (rc != CTL_OK)
		return rc;
	if (c->json) {
		struct jw w;
		json_open(&w);
		jw_arr(&w, "caches");
		for (size_t i = 0; i < r->cache_list->n_caches; i++)
			jw_cache_info(&w, NULL, r->cache_list->caches[i]);
		jw_end(&w, ']');
		json_close(&w);
	} else {
		caches_table(r->cache_list);
	}
	ctl_free(r);
	return CTL_OK;
}

/* ---- create / destroy ---------------------------------------------------- */

struct create_args {
	struct ctl *c;
	Sheaf__V1__CacheCreateRequest *rq;
};

enum { OPT_ALIGN = 0x200, OPT_CAPACITY, OPT_DEBUG, OPT_POOL, OPT_OWNED, OPT_KEEP };

static int create_opt(void *arg, int opt, const char *val)
{
	struct create_args *a = arg;
	uint64_t v;

	switch (opt) {
	case OPT_ALIGN:
		if (ctl_parse_u64(val, 1, &v) != 0 || v > UINT32_MAX)
			return ctl_usage(a->c, "bad alignment '%s'", val);
		a->rq->align = (uint32_t)v;
		return CTL_OK;
	case OPT_CAPACITY:
		if (ctl_parse_u64(val, 0, &v) != 0 || v > INT32_MAX)
			return ctl_usage(a->c, "bad capacity '%s'", val);
		a->rq->capacity = (int32_t)v;
		return CTL_OK;
	case OPT_DEBUG:
		a->rq->flags |= 1u;
		return CTL_OK;
	case OPT_OWNED:
		a->rq->flags |= 2u;            /* SHEAF_CACHE_OWNED */
		return CTL_OK;
	case OPT_KEEP:
		a->rq->flags |= 2u | 4u;       /* owned, keep */
		return CTL_OK;
	default:
		return ctl_usage(a->c, "unexpected option");
	}
}

static void print_cache_line(const char *verb, const Sheaf__V1__CacheInfo *ci)
{
	char nb[CTL_ESC_MAX];

	printf("%s cache '%s': id %u, object size %u B, align %u, %u objects per slab, "
	       "sheaf_capacity %u%s%s\n", verb, ctl_esc(nb, ci->name), ci->id, ci->object_size, ci->align,
	       ci->objects_per_slab, ci->sheaf_capacity, ci->flags ? ", " : "",
	       ci->flags ? flags_str(ci->flags) : "");
}

int cmd_create(struct ctl *c, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "align", required_argument, NULL, OPT_ALIGN },
		{ "capacity", required_argument, NULL, OPT_CAPACITY },
		{ "debug", no_argument, NULL, OPT_DEBUG },
		{ "owned", no_argument, NULL, OPT_OWNED },
		{ "keep", no_argument, NULL, OPT_KEEP },
		{ NULL, 0, NULL, 0 },
	};
	Sheaf__V1__CacheCreateRequest body = SHEAF__V1__CACHE_CREATE_REQUEST__INIT;
	REQ(rq, SHEAF__V1__REQUEST__BODY_CACHE_CREATE, cache_create, &body);
	struct create_args a = { c, &body };
	Sheaf__V1__Response *r;
	uint64_t size;
	int first, rc;

	body.capacity = -1;
	rc = ctl_getopt(c, argc, argv, "", lo, 0, create_opt, &a, &first);
	if (rc != CTL_OK)
		return rc;
	if (argc - first != 2)
		return argc - first < 2 ? ctl_usage(c, "expected NAME SIZE")
					: ctl_usage(c, "unexpected argument '%s'", argv[first + 2]);
	if (ctl_parse_u64(argv[first + 1], 1, &size) != 0 || size > UINT32_MAX)
		return ctl_usage(c, "bad object size '%s'", argv[first + 1]);
	body.name = argv[first];
	body.size = (uint32_t)size;
	if ((rc = ctl_call_or_say(c, &rq, &r)) != CTL_OK)
		return rc;
	if (c->json) {
		struct jw w;
		json_open(&w);
		jw_cache_info(&w, "cache", r->cache_create->cache);
		json_close(&w);
	} else {
		print_cache_line("created", r->cache_create->cache);
	}
	ctl_free(r);
	return CTL_OK;
}

int cmd_destroy(struct ctl *c, int argc, char **argv)
{
	Sheaf__V1__CacheDestroyRequest body = SHEAF__V1__CACHE_DESTROY_REQUEST__INIT;
	REQ(rq, SHEAF__V1__REQUEST__BODY_CACHE_DESTROY, cache_destroy, &body);
	Sheaf__V1__Response *r;
	int first, rc = plain_opts(c, argc, argv, 1, 1, &first);

	if (rc != CTL_OK)
		return rc;
	body.name = argv[first];
	if ((rc = ctl_call_or_say(c, &rq, &r)) != CTL_OK)
		return rc;
	if (c->json) {
		struct jw w;
		json_open(&w);
		jw_str(&w, "destroyed", body.name);
		json_close(&w);
	} else {
		char nb[CTL_ESC_MAX];

		printf("destroyed cache '%s'\n", ctl_esc(nb, body.name));
	}
	ctl_free(r);
	return CTL_OK;
}

/* ---- shrink -------------------------------------------------------------- */

int cmd_shrink(struct ctl *c, int argc, char **argv)
{
	Sheaf__V1__ShrinkRequest body = SHEAF__V1__SHRINK_REQUEST__INIT;
	REQ(rq, SHEAF__V1__REQUEST__BODY_SHRINK, shrink, &body);
	Sheaf__V1__Response *r;
	uint64_t bytes;
	char buf[32];
	int first, rc = plain_opts(c, argc, argv, 0, 1, &first);

	if (rc != CTL_OK)
		return rc;
	body.cache = first < argc ? argv[first] : "";
	if ((rc = ctl_call_or_say(c, &rq, &r)) != CTL_OK)
		return rc;
	bytes = r->shrink->bytes_released;
	if (c->json) {
		struct jw w;
		json_open(&w);
		jw_str(&w, "cache", body.cache);
		jw_u64(&w, "slabs_released", r->shrink->slabs_released);
		jw_u64(&w, "bytes_released", bytes);
		json_close(&w);
	} else {
		char nb[CTL_ESC_MAX];

		printf("%s%s%s: released %u slab%s (%s)\n", body.cache[0] ? "cache '" : "every cache",
		       ctl_esc(nb, body.cache), body.cache[0] ? "'" : "", r->shrink->slabs_released,
		       r->shrink->slabs_released == 1 ? "" : "s", fmt_iec(buf, sizeof(buf), bytes));
	}
	ctl_free(r);
	return CTL_OK;
}

/* ---- tune ---------------------------------------------------------------- */

static const char *const cache_keys[] = {
	"sheaf_capacity", "barn_limit", "barn_low", "barn_high", "min_partial",
	"barn_keep", "stash_sheaves", "stash_bytes",
};

static int is_cache_key(const char *k)
{
	for (size_t i = 0; i < sizeof(cache_keys) / sizeof(cache_keys[0]); i++)
		if (strcmp(k, cache_keys[i]) == 0)
			return 1;
	return 0;
}

/* KEY=VALUE into @st (pointing into @arg, or for node_cap into @key). */
static int parse_setting(struct ctl *c, char *arg, int pool, Sheaf__V1__Setting *st,
			 char *key, size_t keylen)
{
	char *eq = strchr(arg, '=');

	if (eq == NULL || eq == arg)
		return ctl_usage(c, "expected KEY=VALUE, got '%s'", arg);
	*eq = '\0';
	st->key = arg;
	if (strcmp(arg, "node_cap") == 0)
		return pool ? numa_cap_setting(c, eq + 1, st, key, keylen)
			    : ctl_usage(c, "'node_cap' is a pool setting: sheafctl tune --pool "
					"node_cap=K:BYTES");
	if ((strcmp(arg, "mem_cap") == 0 || strcmp(arg, "large_retain") == 0) && !pool)
		return ctl_usage(c, "'%s' is a pool setting: sheafctl tune --pool %s=BYTES",
				 arg, arg);
	if (is_cache_key(arg) && pool)
		return ctl_usage(c, "'%s' is a cache setting: sheafctl tune CACHE %s=N", arg, arg);
	if (!is_cache_key(arg) && strcmp(arg, "mem_cap") != 0 && strcmp(arg, "large_retain") != 0)
		return ctl_usage(c, "unknown key '%s' (cache keys: sheaf_capacity, barn_limit, "
				 "barn_low, barn_high, min_partial, barn_keep, stash_sheaves, "
				 "stash_bytes; pool keys: mem_cap, large_retain, node_cap)", arg);
	if (ctl_parse_u64(eq + 1, pool, &st->value) != 0)
		return ctl_usage(c, "bad value '%s' for %s: expected %s", eq + 1, arg,
				 pool ? "bytes (K, M, G, T suffixes)" : "an unsigned integer");
	return CTL_OK;
}

/* -p/--pool, the only option of its own. */
static int tune_opt(void *arg, int opt, const char *val)
{
	(void)opt;
	(void)val;
	*(int *)arg = 1;
	return CTL_OK;
}

static void tune_print(const struct ctl *c, const Sheaf__V1__TuneResponse *tr)
{
	const Sheaf__V1__CacheInfo *ci = tr->cache;
	char buf[32];

	if (c->json) {
		struct jw w;
		json_open(&w);
		if (ci != NULL)
			jw_cache_info(&w, "cache", ci);
		jw_u64(&w, "mem_cap", tr->mem_cap);
		if (ci == NULL && tr->n_numa_nodes > 0) {
			jw_arr(&w, "node_caps");
			for (size_t k = 0; k < tr->n_numa_nodes; k++) {
				jw_obj(&w, NULL);
				jw_u64(&w, "kernel_node", tr->numa_nodes[k]->kernel_node);
				jw_u64(&w, "cap", tr->numa_nodes[k]->cap);
				jw_end(&w, '}');
			}
			jw_end(&w, ']');
		}
		json_close(&w);
	} else if (ci != NULL) {
		char nb[CTL_ESC_MAX];

		printf("cache '%s': sheaf_capacity=%u barn_limit=%u barn_low=%u barn_high=%u "
		       "min_partial=%u\n", ctl_esc(nb, ci->name), ci->sheaf_capacity, ci->barn_limit,
		       ci->barn_low, ci->barn_high, ci->min_partial);
	} else {
		printf("pool: mem_cap=%llu (%s)", (unsigned long long)tr->mem_cap,
		       fmt_iec(buf, sizeof(buf), tr->mem_cap));
		for (size_t k = 0; k < tr->n_numa_nodes; k++)
			if (tr->numa_nodes[k]->cap != 0)
				printf(" node_cap=%u:%llu (%s)", tr->numa_nodes[k]->kernel_node,
				       (unsigned long long)tr->numa_nodes[k]->cap,
				       fmt_iec(buf, sizeof(buf), tr->numa_nodes[k]->cap));
		printf("\n");
	}
}

int cmd_tune(struct ctl *c, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "pool", no_argument, NULL, OPT_POOL },
		{ NULL, 0, NULL, 0 },
	};
	Sheaf__V1__TuneRequest body = SHEAF__V1__TUNE_REQUEST__INIT;
	REQ(rq, SHEAF__V1__REQUEST__BODY_TUNE, tune, &body);
	Sheaf__V1__Setting st[32], *sp[32];
	char keys[32][24];
	Sheaf__V1__Response *r;
	int first, pool = 0, rc;

	rc = ctl_getopt(c, argc, argv, "p", lo, 0, tune_opt, &pool, &first);
	if (rc != CTL_OK)
		return rc;
	if (!pool && first < argc && strchr(argv[first], '=') == NULL)
		body.cache = argv[first++];
	else if (!pool)
		return ctl_usage(c, "expected CACHE KEY=VALUE... or --pool mem_cap=BYTES");
	if (first == argc)
		return ctl_usage(c, "nothing to tune: give KEY=VALUE");
	if (argc - first > 32)
		return ctl_usage(c, "too many settings (at most 32)");
	for (int i = first; i < argc; i++) {
		size_t k = body.n_settings++;
		sheaf__v1__setting__init(&st[k]);
		sp[k] = &st[k];
		if ((rc = parse_setting(c, argv[i], pool, &st[k], keys[k], sizeof(keys[k]))) != CTL_OK)
			return rc;
	}
	body.settings = sp;
	if ((rc = ctl_call_or_say(c, &rq, &r)) != CTL_OK)
		return rc;
	tune_print(c, r->tune);
	ctl_free(r);
	return CTL_OK;
}

/* ---- clients ------------------------------------------------------------- */

/* Owned caches' objects as "cache=N cache=N", "-" when none; a newline. */
static void owned_print(Sheaf__V1__OwnedObjects *const *o, size_t n)
{
	char nb[CTL_ESC_MAX];

	for (size_t k = 0; k < n; k++)
		printf("%s%s=%llu", k ? " " : "", ctl_esc(nb, o[k]->cache),
		       (unsigned long long)o[k]->objects);
	printf("%s\n", n ? "" : "-");
}

static void owned_json(struct jw *w, const char *key, Sheaf__V1__OwnedObjects *const *o,
		       size_t n)
{
	jw_obj(w, key);
	for (size_t k = 0; k < n; k++)
		jw_u64(w, o[k]->cache, o[k]->objects);
	jw_end(w, '}');
}

static void clients_table(const Sheaf__V1__ClientsResponse *cr)
{
	int w = 4;
	char t[32];

	for (size_t i = 0; i < cr->n_clients; i++)
		if ((int)text_escaped_len(cr->clients[i]->name) > w)
			w = (int)text_escaped_len(cr->clients[i]->name);
	printf("%3s %8s %-*s %6s %-19s %8s %6s %12s %s\n", "ID", "PID", w, "NAME", "UID",
	       "ATTACHED", "SHEAVES", "LANES", "IN_USE", "OWNED");
	for (size_t i = 0; i < cr->n_clients; i++) {
		const Sheaf__V1__ClientInfo *ci = cr->clients[i];
		char nb[CTL_ESC_MAX];

		printf("%3u %8u %-*s %6u %-19s %8u %6u %12lld ", ci->id, ci->pid, w,
		       ctl_esc(nb, ci->name), ci->uid,
		       fmt_time(t, sizeof(t), ci->attached_since), ci->sheaves_held,
		       ci->lanes, (long long)ci->objects_in_use);
		if (ci->revoked)
			printf("REVOKED at %s ", fmt_time(t, sizeof(t), ci->revoked_at));
		owned_print(ci->owned, ci->n_owned);
	}
	if (cr->n_kept > 0) {
		printf("kept (of dead clients): ");
		owned_print(cr->kept, cr->n_kept);
	}
}

static void clients_json(const Sheaf__V1__ClientsResponse *cr)
{
	struct jw w;

	json_open(&w);
	jw_arr(&w, "clients");
	for (size_t i = 0; i < cr->n_clients; i++) {
		const Sheaf__V1__ClientInfo *ci = cr->clients[i];
		jw_obj(&w, NULL);
		jw_u64(&w, "id", ci->id);
		jw_u64(&w, "pid", ci->pid);
		jw_str(&w, "name", ci->name);
		jw_u64(&w, "uid", ci->uid);
		jw_u64(&w, "attached_since", ci->attached_since);
		jw_u64(&w, "sheaves_held", ci->sheaves_held);
		jw_i64(&w, "objects_in_use", ci->objects_in_use);
		jw_u64(&w, "lanes", ci->lanes);
		jw_bool(&w, "revoked", ci->revoked);
		if (ci->revoked)
			jw_u64(&w, "revoked_at", ci->revoked_at);
		owned_json(&w, "owned", ci->owned, ci->n_owned);
		jw_end(&w, '}');
	}
	jw_end(&w, ']');
	owned_json(&w, "kept", cr->kept, cr->n_kept);
	json_close(&w);
}

int cmd_clients(struct ctl *c, int argc, char **argv)
{
	Sheaf__V1__ClientsRequest body = SHEAF__V1__CLIENTS_REQUEST__INIT;
	REQ(rq, SHEAF__V1__REQUEST__BODY_CLIENTS, clients, &body);
	Sheaf__V1__Response *r;
	int rc = plain_call(c, argc, argv, &rq, &r);

	if (rc != CTL_OK)
		return rc;
	if (c->json)
		clients_json(r->clients);
	else
		clients_table(r->clients);
	ctl_free(r);
	return CTL_OK;
}

/* ---- names --------------------------------------------------------------- */

static void names_table(const Sheaf__V1__NameListResponse *nr)
{
	int w = 4, wc = 5;
	char t[32];

	for (size_t i = 0; i < nr->n_names; i++) {
		if ((int)text_escaped_len(nr->names[i]->name) > w)
			w = (int)text_escaped_len(nr->names[i]->name);
		if ((int)text_escaped_len(nr->names[i]->cache) > wc)
			wc = (int)text_escaped_len(nr->names[i]->cache);
	}
	printf("%-*s %18s %-*s %8s %-19s\n", w, "NAME", "OFFSET", wc, "CACHE", "OBJSIZE",
	       "CREATED");
	for (size_t i = 0; i < nr->n_names; i++) {
		const Sheaf__V1__NameInfo *ni = nr->names[i];
		char nb[CTL_ESC_MAX], cb[CTL_ESC_MAX];

		printf("%-*s %#18llx %-*s %8u %-19s\n", w, ctl_esc(nb, ni->name),
		       (unsigned long long)ni->offset, wc, ctl_esc(cb, ni->cache), ni->object_size,
		       fmt_time(t, sizeof(t), ni->created_at));
	}
}

static void names_json(const Sheaf__V1__NameListResponse *nr)
{
	struct jw w;

	json_open(&w);
	jw_arr(&w, "names");
	for (size_t i = 0; i < nr->n_names; i++) {
		const Sheaf__V1__NameInfo *ni = nr->names[i];
		jw_obj(&w, NULL);
		jw_str(&w, "name", ni->name);
		jw_u64(&w, "offset", ni->offset);
		jw_str(&w, "cache", ni->cache);
		jw_u64(&w, "cache_id", ni->cache_id);
		jw_u64(&w, "cache_generation", ni->cache_generation);
		jw_u64(&w, "object_size", ni->object_size);
		jw_u64(&w, "created_at", ni->created_at);
		jw_end(&w, '}');
	}
	jw_end(&w, ']');
	json_close(&w);
}

int cmd_names(struct ctl *c, int argc, char **argv)
{
	Sheaf__V1__NameListRequest body = SHEAF__V1__NAME_LIST_REQUEST__INIT;
	REQ(rq, SHEAF__V1__REQUEST__BODY_NAME_LIST, name_list, &body);
	Sheaf__V1__Response *r;
	int rc = plain_call(c, argc, argv, &rq, &r);

	if (rc != CTL_OK)
		return rc;
	if (c->json)
		names_json(r->name_list);
	else
		names_table(r->name_list);
	ctl_free(r);
	return CTL_OK;
}

/* ---- check --------------------------------------------------------------- */

int cmd_check(struct ctl *c, int argc, char **argv)
{
	Sheaf__V1__CheckRequest body = SHEAF__V1__CHECK_REQUEST__INIT;
	REQ(rq, SHEAF__V1__REQUEST__BODY_CHECK, check, &body);
	Sheaf__V1__Response *r;
	const Sheaf__V1__CheckResponse *k;
	int ok, rc = plain_call(c, argc, argv, &rq, &r);

	if (rc != CTL_OK)
		return rc;
	k = r->check;
	ok = k->ok && k->in_use == k->counted_in_use;
	if (c->json) {
		struct jw w;
		json_open(&w);
		jw_bool(&w, "ok", ok);
		jw_str(&w, "problem", k->problem);
		jw_u64(&w, "objects", k->objects);
		jw_u64(&w, "free_in_slabs", k->free_in_slabs);
		jw_u64(&w, "in_sheaves", k->in_sheaves);
		jw_u64(&w, "in_use", k->in_use);
		jw_u64(&w, "counted_in_use", k->counted_in_use);
		json_close(&w);
	} else {
		printf("pool check %s: objects %llu, free in slabs %llu, in sheaves %llu, "
		       "in use %llu (counted %llu)\n", ok ? "ok" : "FAILED",
		       (unsigned long long)k->objects, (unsigned long long)k->free_in_slabs,
		       (unsigned long long)k->in_sheaves, (unsigned long long)k->in_use,
		       (unsigned long long)k->counted_in_use);
	}
	if (!k->ok)
		rc = ctl_err(CTL_REFUSED, "pool check failed: %s", k->problem);
	else if (!ok)
		rc = ctl_err(CTL_REFUSED, "pool check failed: in use %llu by the walk, %llu by "
			     "the counters (is a client still running?)",
			     (unsigned long long)k->in_use, (unsigned long long)k->counted_in_use);
	ctl_free(r);
	return rc;
}
