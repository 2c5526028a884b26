/*
 * footprint.c - sheafbench's W13: memory footprint.  --count T threads
 * (1..FOOT_THREADS_MAX) each allocate a burst of FOOT_BURST objects over
 * FOOT_CLASSES sizes in turn (FOOT_SIZES, one cache or class each), write
 * every object's first byte, free all but FOOT_LIVE of them (the newest
 * kept, the rest freed oldest first), and then wait, idle and alive, until
 * the main thread lets them free the rest and exit.  The main thread reads
 * the process's resident set (VmRSS: anonymous, file and shared memory
 * pages alike, so sheaf's pool counts) once every thread has its burst
 * behind it, and again after FOOT_IDLE_MS of idling.  Figure: the
 * resident set after the idle second, in MiB; the one after the burst is
 * printed too, and for sheaf the bytes of objects cached but free (out of
 * the slabs, in sheaves, not in use) at both points.
 *
 * sheaf: sheaf_malloc / sheaf_free_any on the contender's pool; malloc:
 * malloc / free.  Afterwards, for sheaf, no object of any class may be in
 * use, and the pool checker must pass.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tests/bench/bench.h"

#define FOOT_BURST        4096u
#define FOOT_LIVE         256u
#define FOOT_CLASSES      4u
#define FOOT_IDLE_MS      1000
static const uint32_t foot_sizes[FOOT_CLASSES] = { 32, 128, 512, 1024 };

struct foot_shared {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint32_t ready;         /* threads past their burst */
	bool release;           /* free the rest and exit */
};

struct foot_arg {
	const struct contender *c;
	struct foot_shared *sh;
	void *objs[FOOT_BURST];
	uint64_t refused;
};

static inline __attribute__((always_inline))
void foot_burst(struct foot_arg *a, enum family f)
{
	for (uint32_t i = 0; i < FOOT_BURST; i++)
		a->objs[i] = class_alloc(a->c, f, foot_sizes[i % FOOT_CLASSES]);
	for (uint32_t i = 0; i < FOOT_BURST - FOOT_LIVE; i++)
		a->refused += sized_free_call(a->c, f, false, a->objs[i], 0);
}

static inline __attribute__((always_inline))
void foot_rest(struct foot_arg *a, enum family f)
{
	for (uint32_t i = FOOT_BURST - FOOT_LIVE; i < FOOT_BURST; i++)
		a->refused += sized_free_call(a->c, f, false, a->objs[i], 0);
}

static void *foot_thread(void *arg)
{
	struct foot_arg *a = arg;
	struct foot_shared *sh = a->sh;

	if (uses_sheaf(a->c))
		foot_burst(a, FAM_SHEAF);
	else
		foot_burst(a, FAM_MALLOC);
	pthread_mutex_lock(&sh->mu);
	sh->ready++;
	pthread_cond_broadcast(&sh->cv);
	while (!sh->release)
		pthread_cond_wait(&sh->cv, &sh->mu);
	pthread_mutex_unlock(&sh->mu);
	if (uses_sheaf(a->c))
		foot_rest(a, FAM_SHEAF);
	else
		foot_rest(a, FAM_MALLOC);
	return NULL;
}

/* VmRSS of this process, in KiB. */
static uint64_t rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long long kib = 0;

	if (f == NULL)
		die("/proc/self/status: %s", strerror(errno));
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "VmRSS: %llu kB", &kib) == 1)
			break;
	fclose(f);
	if (kib == 0)
		die("no VmRSS in /proc/self/status");
	return kib;
}

/* Bytes of the classes' objects out of the slabs but not in use. */
static uint64_t cached_free_bytes(const struct contender *c)
{
	uint64_t n = 0;

	for (uint32_t k = 0; k < FOOT_CLASSES; k++) {
		char name[48];
		struct sheaf_stats st;
		sheaf_cache_t *h;

		snprintf(name, sizeof(name), "kmalloc-%u", foot_sizes[k]);
		h = sheaf_cache_open(c->pool, name);
		if (h == NULL || sheaf_cache_stats(h, -1, &st) != 0)
			die("sheaf: no statistics of %s", name);
		if (st.active_objects > st.in_use)
			n += (st.active_objects - st.in_use) * foot_sizes[k];
	}
	return n;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

struct result run_w13(const struct contender *c, uint64_t threads)
{
	struct result r = { .metric = "rss_idle_mib", .unit = "MiB after 1 s idle" };
	struct foot_shared sh = { .mu = PTHREAD_MUTEX_INITIALIZER,
				  .cv = PTHREAD_COND_INITIALIZER };
	struct foot_arg *a = calloc(threads, sizeof(*a));
	pthread_t *th = calloc(threads, sizeof(*th));
	uint64_t before = 0, refused = 0, t0, t1;

	if (a == NULL || th == NULL)
		die("no memory for %" PRIu64 " threads", threads);
	if (uses_sheaf(c))
		before = classes_in_use(c);
	t0 = now_ns();
	for (uint64_t t = 0; t < threads; t++) {
		int rc;

		a[t].c = c;
		a[t].sh = &sh;
		rc = pthread_create(&th[t], NULL, foot_thread, &a[t]);
		if (rc != 0)
			die("pthread_create: %s", strerror(rc));
	}
	pthread_mutex_lock(&sh.mu);
	while (sh.ready < threads)
		pthread_cond_wait(&sh.cv, &sh.mu);
	pthread_mutex_unlock(&sh.mu);
	t1 = now_ns();
	r.rss_burst_mib = (double)rss_kib() / 1024.0;
	if (uses_sheaf(c))
		r.cached_burst = cached_free_bytes(c);
	sleep_ms(FOOT_IDLE_MS);
	r.value = (double)rss_kib() / 1024.0;
	if (uses_sheaf(c))
		r.cached_idle = cached_free_bytes(c);
	r.footprint = true;
	pthread_mutex_lock(&sh.mu);
	sh.release = true;
	pthread_cond_broadcast(&sh.cv);
	pthread_mutex_unlock(&sh.mu);
	for (uint64_t t = 0; t < threads; t++) {
		int rc = pthread_join(th[t], NULL);

		if (rc != 0)
			die("pthread_join: %s", strerror(rc));
		refused += a[t].refused;
	}
	check_refused_frees(c, refused);
	r.count = threads;
	r.seconds = (double)(t1 - t0) / 1e9;
	classes_unchanged_or_die(c, before, "after every thread exited");
	free(a);
	free(th);
	return r;
}
