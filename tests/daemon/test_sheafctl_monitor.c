/*
 * test_sheafctl_monitor.c - sheafctl's monitoring views against a real
 * sheafd (harness: util_sheafctl.h): top (table, sort keys, JSON
 * snapshots with rates), the metrics text format (Prometheus 0.0.4,
 * checked line by line), and more caches than one Stats reply of sheafd
 * can hold (stats, top and metrics ask cache by cache).
 *
 * Each test is its own TCase: CK_RUN_CASE=<name> runs one.
 */
#include <check.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/version.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_json.h"
#include "tests/helpers/util_sheafctl.h"

START_TEST(test_top)
{
	struct wl w;
	struct run r;
	struct jv *v;
	const char *a, *b;
	char *lines[4];
	int n = 0;

	create_cache("small", "32");
	create_cache("large", "4096");
	wl_start(&w, "small", WL_HOLD, 3000);
	wl_wait(&w, 0);

	CTL(&r, "top", "-o");
	expect(&r, 0, "top -o");
	ck_assert_msg(starts(r.out, "sheafd " SHEAF_VERSION " at "), "%s", r.out);
	ck_assert_msg(strstr(r.out, "Active / Total Objects") && strstr(r.out, "OBJ SIZE") &&
		      strstr(r.out, "CACHE SIZE") && strstr(r.out, "NAME"), "%s", r.out);
	a = strstr(r.out, " small\n");
	b = strstr(r.out, " large\n");
	ck_assert_msg(a && b && a < b, "default sort (objs) puts small first:\n%s", r.out);
	ck_assert_msg(strstr(r.out, "\033[") == NULL, "escape codes with -o");
	run_free(&r);
	CTL(&r, "top", "-o", "-s", "size");
	expect(&r, 0, "top -o -s size");
	a = strstr(r.out, " small\n");
	b = strstr(r.out, " large\n");
	ck_assert_msg(a && b && b < a, "sort by size puts large first:\n%s", r.out);
	run_free(&r);
	CTL(&r, "top", "-o", "--sort", "n");
	expect(&r, 0, "top -o --sort n");
	ck_assert(strstr(r.out, " large\n") < strstr(r.out, " small\n"));
	run_free(&r);

	CTL(&r, "top", "--output", "json", "-n", "2", "-d", "0.2");
	expect(&r, 0, "top json");
	for (char *save, *l = strtok_r(r.out, "\n", &save); l && n < 4; l = strtok_r(NULL, "\n", &save))
		lines[n++] = l;
	ck_assert_int_eq(n, 2);
	for (int i = 0; i < n; i++) {
		struct jv *c, *t;
		v = json_parse(lines[i]);
		t = jreq(v, "totals", J_OBJ);
		ck_assert_uint_eq(ju64(t, "caches"), 2);
		ck_assert_uint_eq(ju64(t, "in_use"), 3000);
		(void)ju64(v, "time");
		(void)ju64(v, "uptime_seconds");
		ck_assert_uint_eq(ju64(v, "nodes"), 2);
		ck_assert_uint_eq(ju64(v, "clients"), 1);
		c = jnamed(jarr(v, "caches"), "small");
		ck_assert_uint_eq(ju64(c, "in_use"), 3000);
		ck_assert_uint_eq(ju64(c, "object_size"), 32);
		ck_assert_uint_ge(ju64(c, "objects"), 3000);
		ck_assert(jnum(c, "use_percent") > 0 && jnum(c, "use_percent") <= 100);
		(void)ju64(c, "active_objects");
		(void)ju64(c, "slabs");
		(void)ju64(c, "objects_per_slab");
		(void)ju64(c, "cache_size");
		(void)ju64(c, "sheaf_capacity");
		(void)ju64(c, "barn_full");
		(void)ju64(c, "barn_empty");
		if (i == 0)
			ck_assert(jreq(c, "alloc_rate", J_NULL) != NULL);
		else
			ck_assert(jnum(c, "alloc_rate") == 0);   /* holding, not allocating */
		jv_free(v);
	}
	run_free(&r);
	v = ctl_ok_json((char *[]){ "-o", "json", "top", "-o", NULL });   /* global -o json */
	ck_assert_int_eq((int)jarr(v, "caches")->n, 2);
	jv_free(v);

	CTL(&r, "top", "-s", "bogus");
	expect(&r, 2, "top -s bogus");
	ck_assert_msg(strstr(r.err, "unknown sort key 'bogus'") != NULL, "%s", r.err);
	run_free(&r);
	CTL(&r, "top", "-d", "0");
	expect(&r, 2, "top -d 0");
	run_free(&r);
	wl_stop(&w);
}
END_TEST

/* The Prometheus text format 0.0.4, checked line by line. */
static int metric_name_ok(const char *s, size_t n)
{
	if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':'))
		return 0;
	for (size_t i = 1; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == ':'))
			return 0;
	return 1;
}

struct family {
	char name[128];
	char type[16];
	int help, samples;
};

static struct family *family_of(struct family *f, int *nf, const char *name, size_t len)
{
	for (int i = 0; i < *nf; i++)
		if (strlen(f[i].name) == len && strncmp(f[i].name, name, len) == 0)
			return &f[i];
	REQUIRE(*nf < 256 && len < sizeof(f->name), "too many families");
	memset(&f[*nf], 0, sizeof(f[0]));
	memcpy(f[*nf].name, name, len);
	return &f[(*nf)++];
}

/* Labels "{k="v",...}" at @s; returns the end or NULL. */
static const char *labels_ok(const char *s, int *has_cache, int *has_node)
{
	if (*s != '{')
		return s;
	s++;
	while (*s != '}') {
		const char *k = s;
		while (isalnum((unsigned char)*s) || *s == '_')
			s++;
		if (s == k || !metric_name_ok(k, (size_t)(s - k)) || s[0] != '=' || s[1] != '"')
			return NULL;
		*has_cache |= strncmp(k, "cache=", 6) == 0;
		*has_node |= strncmp(k, "node=", 5) == 0;
		for (s += 2; *s != '"'; s++) {
			if (*s == '\0' || *s == '\n')
				return NULL;
			if (*s == '\\' && (s[1] == '\\' || s[1] == '"' || s[1] == 'n'))
				s++;
			else if (*s == '\\')
				return NULL;
		}
		s++;
		if (*s == ',')
			s++;
		else if (*s != '}')
			return NULL;
	}
	return s + 1;
}

static void metrics_check(char *text, int *n_samples)
{
	struct family fam[256];
	int nf = 0;
	char *save;

	*n_samples = 0;
	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (strncmp(l, "# HELP ", 7) == 0 || strncmp(l, "# TYPE ", 7) == 0) {
			char *name = l + 7, *sp = strchr(name, ' ');
			struct family *f;
			REQUIRE(sp != NULL && metric_name_ok(name, (size_t)(sp - name)), "bad: %s", l);
			f = family_of(fam, &nf, name, (size_t)(sp - name));
			REQUIRE(f->samples == 0, "HELP/TYPE after samples: %s", l);
			if (l[2] == 'H') {
				REQUIRE(!f->help && sp[1] != '\0', "second or empty HELP: %s", l);
				f->help = 1;
			} else {
				REQUIRE(!f->type[0], "second TYPE: %s", l);
				REQUIRE(strcmp(sp + 1, "counter") == 0 || strcmp(sp + 1, "gauge") == 0,
					"type: %s", l);
				snprintf(f->type, sizeof(f->type), "%s", sp + 1);
				REQUIRE(strcmp(f->type, "counter") != 0 ||
					(strlen(f->name) > 6 &&
					 strcmp(f->name + strlen(f->name) - 6, "_total") == 0),
					"counter not ending in _total: %s", l);
			}
			continue;
		}
		REQUIRE(l[0] != '#', "unexpected comment: %s", l);
		size_t len = strcspn(l, "{ ");
		int hc = 0, hn = 0;
		struct family *f;
		const char *end;
		char *num_end;
		REQUIRE(metric_name_ok(l, len), "bad metric name: %s", l);
		REQUIRE(strncmp(l, "sheaf_", 6) == 0, "no sheaf_ prefix: %s", l);
		f = family_of(fam, &nf, l, len);
		REQUIRE(f->help && f->type[0], "sample before HELP and TYPE: %s", l);
		end = labels_ok(l + len, &hc, &hn);
		REQUIRE(end != NULL && *end == ' ', "bad labels: %s", l);
		REQUIRE(!hn || hc, "node label without cache: %s", l);
		/* A counter is per cache-node (both labels), or pool-wide
		 * (none: sheaf_grace_periods_total, deferred frees), never
		 * per cache alone. */
		REQUIRE(strcmp(f->type, "counter") != 0 || hc == hn,
			"counter with a cache label but no node label: %s", l);
		strtod(end + 1, &num_end);
		REQUIRE(num_end != end + 1 && *num_end == '\0', "value not numeric: %s", l);
		f->samples++;
		(*n_samples)++;
	}
	for (int i = 0; i < nf; i++)
		REQUIRE(fam[i].help && fam[i].type[0], "family %s lacks HELP or TYPE", fam[i].name);
}

START_TEST(test_metrics)
{
	struct wl w;
	struct run r;
	int n;

	CTL(&r, "metrics");                              /* no cache yet */
	expect(&r, 0, "metrics (empty)");
	ck_assert_msg(strstr(r.out, "# TYPE sheaf_alloc_fastpath_total counter\n") != NULL,
		      "%s", r.out);
	metrics_check(r.out, &n);
	run_free(&r);

	create_cache("m1", "96");
	create_cache("m2", "8192");
	wl_start(&w, "m1", WL_HOLD, 777);
	wl_wait(&w, 0);
	CTL(&r, "metrics");
	expect(&r, 0, "metrics");
	ck_assert_str_eq(r.err, "");
	ck_assert_msg(strstr(r.out, "\nsheaf_objects_in_use{cache=\"m1\"} 777\n") != NULL, "%s", r.out);
	ck_assert_msg(strstr(r.out, "\nsheaf_in_use_bytes{cache=\"m1\"} 74592\n") != NULL, "%s", r.out);
	ck_assert_msg(strstr(r.out, "\nsheaf_alloc_fastpath_total{cache=\"m1\",node=\"0\"} ") != NULL,
		      "%s", r.out);
	ck_assert_msg(strstr(r.out, "\nsheaf_slabs{cache=\"m2\",node=\"1\"} ") != NULL, "%s", r.out);
	ck_assert_msg(strstr(r.out, "\nsheaf_nodes 2\n") != NULL, "%s", r.out);
	ck_assert_msg(strstr(r.out, "\nsheaf_clients 1\n") != NULL, "%s", r.out);
	for (size_t i = 0; i < NKC; i++) {
		char t[96];
		snprintf(t, sizeof(t), "# TYPE sheaf_%s_total counter\n", kernel_counters[i]);
		REQUIRE(strstr(r.out, t) != NULL, "no family for %s", kernel_counters[i]);
	}
	metrics_check(r.out, &n);
	ck_assert_int_ge(n, (int)(2 * 2 * NKC));
	run_free(&r);

	CTL(&r, "-o", "json", "metrics");
	expect(&r, 2, "metrics -o json");
	run_free(&r);
	wl_stop(&w);
}
END_TEST

/* More caches than sheafd answers for in one Stats reply (its reply arena
 * holds ~9 caches of 2 nodes): stats, top and metrics ask cache by cache. */
START_TEST(test_many_caches)
{
	struct run r;
	struct jv *v;
	int n;

	for (int i = 0; i < 20; i++) {
		char name[16];
		snprintf(name, sizeof(name), "c%02d", i);
		create_cache(name, "32");
	}
	v = CTLJ("stats");
	ck_assert_int_eq((int)jarr(v, "caches")->n, 20);
	for (size_t i = 0; i < 20; i++) {
		char name[16];
		snprintf(name, sizeof(name), "c%02zu", i);
		check_stats_obj(jnamed(jarr(v, "caches"), name), 0, 32, 0);
	}
	jv_free(v);
	v = ctl_ok_json((char *[]){ "-o", "json", "top", "-o", NULL });
	ck_assert_uint_eq(ju64(jreq(v, "totals", J_OBJ), "caches"), 20);
	jv_free(v);
	CTL(&r, "metrics");
	expect(&r, 0, "metrics");
	ck_assert_msg(strstr(r.out, "\nsheaf_caches 20\n") != NULL, "%s", r.out);
	metrics_check(r.out, &n);
	ck_assert_int_ge(n, (int)(20 * 2 * NKC));
	run_free(&r);
}
END_TEST

/* ======================================================================= */

int main(void)
{
	Suite *s = suite_create("sheafctl-monitor");

	require_binaries("test_sheafctl_monitor");
	ctl_add(s, "top", test_top, 240);
	ctl_add(s, "metrics", test_metrics, 240);
	ctl_add(s, "many_caches", test_many_caches, 240);
	return run_suite(s);
}
