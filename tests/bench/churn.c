/*
 * churn.c - sheafbench's W12: thread churn.  Threads start one after
 * another; each does --count N allocations of mixed sizes (W8's seeded
 * sequence, 8..1024 bytes, from an offset of its own), keeping the last
 * CHURN_WINDOW live and freeing the oldest as it goes, frees what it still
 * holds and exits; the main thread joins it before it starts the next.
 * The figure is the wall-clock time per thread, from pthread_create to
 * the end of pthread_join: what a short-lived thread pays for the
 * allocator (its first allocation's set-up, its exit's give-back) on top
 * of the work, which the peers pay too.
 *
 * sheaf: sheaf_malloc / sheaf_free_any on the contender's pool; the
 * thread's sheaves go back at its exit (libsheaf's thread destructor).
 * malloc: malloc / free (glibc, or whatever is LD_PRELOADed).  After the
 * run, for sheaf, no object of any class may be in use, and the pool
 * checker must pass.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <string.h>

#include "tests/bench/bench.h"

#define CHURN_WINDOW   16u
#define CHURN_OPS      2000000ull   /* allocations over the timed threads */
#define CHURN_THREADS_MIN 500ull
#define CHURN_THREADS_MAX 20000ull

struct churn_arg {
	const struct contender *c;
	uint64_t n;             /* allocations */
	uint32_t start;         /* offset into the size sequence */
	uint64_t refused;       /* frees that failed (sheaf) */
};

/* One copy of the loop per family, as sizes.c's: no dispatch inside. */
static inline __attribute__((always_inline))
void churn_loop(struct churn_arg *a, enum family f)
{
	void *live[CHURN_WINDOW] = { 0 };
	uint32_t k = a->start;

	for (uint64_t i = 0; i < a->n; i++) {
		void **slot = &live[i % CHURN_WINDOW];

		if (*slot != NULL)
			a->refused += sized_free_call(a->c, f, false, *slot, 0);
		*slot = class_alloc(a->c, f, sizes_at(k++));
	}
	for (uint32_t i = 0; i < CHURN_WINDOW; i++)
		if (live[i] != NULL)
			a->refused += sized_free_call(a->c, f, false, live[i], 0);
}

static void *churn_thread(void *arg)
{
	struct churn_arg *a = arg;

	if (uses_sheaf(a->c))
		churn_loop(a, FAM_SHEAF);
	else
		churn_loop(a, FAM_MALLOC);
	return NULL;
}

static uint64_t churn_threads(const struct contender *c, uint64_t n, uint64_t threads)
{
	uint64_t refused = 0;

	for (uint64_t t = 0; t < threads; t++) {
		struct churn_arg a = { .c = c, .n = n, .start = (uint32_t)(t * 7919u) };
		pthread_t th;
		int rc = pthread_create(&th, NULL, churn_thread, &a);

		if (rc != 0)
			die("pthread_create: %s", strerror(rc));
		rc = pthread_join(th, NULL);
		if (rc != 0)
			die("pthread_join: %s", strerror(rc));
		refused += a.refused;
	}
	return refused;
}

/* Threads for about CHURN_OPS allocations in all, within bounds. */
static uint64_t churn_thread_count(uint64_t n)
{
	uint64_t t = CHURN_OPS / (n ? n : 1);

	if (t < CHURN_THREADS_MIN)
		t = CHURN_THREADS_MIN;
	if (t > CHURN_THREADS_MAX)
		t = CHURN_THREADS_MAX;
	return t;
}

struct result run_w12(const struct contender *c, uint64_t n, bool quick)
{
	struct result r = { .metric = "us_per_thread", .unit = "us/thread" };
	uint64_t threads = churn_thread_count(n), before = 0, t0, t1;

	if (quick)
		threads = threads / QUICK_DIVISOR + 1;
	sizes_init();
	if (uses_sheaf(c))
		before = classes_in_use(c);
	check_refused_frees(c, churn_threads(c, n, threads / 10 + 1));   /* warm-up */
	t0 = wall_ns();
	check_refused_frees(c, churn_threads(c, n, threads));
	t1 = wall_ns();
	r.count = threads;
	r.seconds = (double)(t1 - t0) / 1e9;
	r.value = (double)(t1 - t0) / 1e3 / (double)threads;
	classes_unchanged_or_die(c, before, "after every thread exited");
	return r;
}
