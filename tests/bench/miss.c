/*
 * miss.c - sheafbench's w6: the latency of an allocation that must wait for
 * the engine (sheafd's node worker, or a local pool's) to stock an empty
 * barn.
 *
 * Per sample: sheaf_cache_shrink() returns the thread's sheaves of the cache
 * (so its next allocation cannot be served from them) and flushes every full
 * sheaf of the barn back to the slabs (so the barn is empty); then one
 * sheaf_alloc is timed: it finds the barn empty, rings the doorbell and
 * waits until the worker has stocked it.  sheaf_cache_stats must show that
 * barn_get_fail rose during the sample, else the sample was not a miss (the
 * barn got stocked in between) and is dropped and counted (non_miss).  The
 * object is freed after the sample, untimed.  Figures: p50, p99 and max in
 * microseconds over the kept samples (nearest rank).  The cache should have
 * a large sheaf capacity (256 by default for w6) so that the refill is the
 * expensive kind.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tests/bench/bench.h"

#define W6_MAX_TRIES_PER_SAMPLE 4

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Nearest-rank percentile @q (0..1] of sorted @v[0..n). */
static double percentile(const double *v, uint64_t n, double q)
{
	uint64_t rank = (uint64_t)(q * (double)n + 0.999999);

	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return v[rank - 1];
}

static uint64_t barn_get_fails(const struct contender *c, int idx,
			       struct sheaf_stats *st)
{
	sheaf_stats_or_die(c, st);
	return st->stat[idx];
}

static void empty_barn(const struct contender *c)
{
	int rc = sheaf_cache_shrink(c->cache);

	if (rc < 0)
		die("sheaf_cache_shrink: %d (%s)", rc, strerror(-rc));
}

/* One sample: its latency in microseconds, or a negative value when the
 * allocation was not a miss. */
static double w6_sample(const struct contender *c, int idx,
			uint64_t *fails, struct sheaf_stats *st)
{
	uint64_t t0, t1, now_fails;
	void *p;

	empty_barn(c);
	t0 = now_ns();
	p = obj_alloc(c, FAM_SHEAF);
	t1 = now_ns();
	now_fails = barn_get_fails(c, idx, st);
	check_refused_frees(c, obj_free(c, FAM_SHEAF, p));
	if (now_fails == *fails)
		return -1.0;
	*fails = now_fails;
	return (double)(t1 - t0) / 1e3;
}

struct result run_w6(const struct contender *c, uint64_t samples,
		     struct sheaf_stats *st)
{
	struct result r = { .metric = "us_p50", .unit = "us (p50)",
			    .latency = true };
	int idx = sheaf_stat_index("barn_get_fail");
	uint64_t fails, got = 0, tries = 0, t0;
	double *us;

	if (idx < 0)
		die("no barn_get_fail counter");
	us = calloc(samples, sizeof(*us));
	if (!us)
		die("no memory for %" PRIu64 " samples", samples);
	check_refused_frees(c, obj_free(c, FAM_SHEAF, obj_alloc(c, FAM_SHEAF)));
	fails = barn_get_fails(c, idx, st);
	t0 = now_ns();
	while (got < samples && tries < samples * W6_MAX_TRIES_PER_SAMPLE) {
		double v = w6_sample(c, idx, &fails, st);

		tries++;
		if (v >= 0)
			us[got++] = v;
	}
	r.seconds = (double)(now_ns() - t0) / 1e9;
	if (got < samples)
		die("w6: only %" PRIu64 " of %" PRIu64 " allocations missed "
		    "the barn (barn_get_fail did not rise)", got, tries);
	qsort(us, got, sizeof(*us), cmp_double);
	r.count = got;
	r.non_miss = tries - got;
	r.p50_us = percentile(us, got, 0.50);
	r.p99_us = percentile(us, got, 0.99);
	r.max_us = us[got - 1];
	r.value = r.p50_us;
	free(us);
	return r;
}
