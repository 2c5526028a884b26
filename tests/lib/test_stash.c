/*
 * test_stash.c - a thread's stash of sheaves beyond main and spare, on
 * local pools: it grows with the thread's demand (each time a sheaf went
 * to the barn for want of room, never past stash_room), the
 * process's trimmer (client/trim.c) takes it back once the thread idles a
 * tick, and leaves a busy thread's alone; what it took back is allocated
 * again, each object once, and the pool checks.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "client/sheaf.h"
#include "client/internal.h"
#include "shm/barn.h"
#include "shm/bounds.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_pool.h"

#define CAP     16
#define NOBJ    (CAP * 40)       /* 40 full sheaves freed in a row */

static sheaf_pool_t *mkpool(void)
{
	struct sheaf_pool_config cfg = { .nodes = 1, .size = 64 << 20,
					  .sheaf_count = 4096, .wait_ms = 1000 };

	return pool_new(&cfg);
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0)
		;
}

/* The calling thread's stash of @c, read under its hold (the trimmer
 * writes it under the same). */
static void stash_of(sheaf_cache_t *c, uint32_t *full, uint32_t *empty, uint32_t *target)
{
	struct tcache *t = tls_state->tc[c->slot];

	ck_assert_ptr_nonnull(t);
	tpool_hold(t->tp);
	*full = t->nfull;
	*empty = t->nempty;
	*target = t->stash_target;
	tpool_unhold(t->tp);
}

/* Allocate NOBJ objects, then free them all: the frees fill 40 sheaves. */
static void burst(sheaf_cache_t *c, void **o)
{
	for (int i = 0; i < NOBJ; i++)
		o[i] = xalloc(c);
	for (int i = 0; i < NOBJ; i++)
		ck_assert_int_eq(sheaf_free(c, o[i]), 0);
}

/* A burst's frees grow the stash each time a sheaf went to the barn for
 * want of room, never past what stash_room allows. */
START_TEST(stash_grows_with_demand)
{
	sheaf_pool_t *p = mkpool();
	sheaf_cache_t *c = mkcache(p, "grow", 64, CAP, 0);
	void **o = malloc(NOBJ * sizeof(*o));
	uint32_t full, empty, target;

	ck_assert_ptr_nonnull(o);
	burst(c, o);
	stash_of(c, &full, &empty, &target);
	printf("stash_grows_with_demand: %u full, %u empty, target %u\n", full, empty, target);
	ck_assert_uint_ge(full, 10);
	ck_assert_uint_le(full, target);
	ck_assert_uint_le(target, at_load_relaxed(&c->sc->stash_sheaves));
	/* A limit of 4 stops it at 4. */
	sheaf_thread_exit();
	at_store_relaxed(&c->sc->stash_sheaves, 4);
	burst(c, o);
	stash_of(c, &full, &empty, &target);
	ck_assert_uint_le(full, 4);
	ck_assert_uint_le(target, 4);
	sheaf_thread_exit();
	require_pool_ok(p);
	free(o);
	sheaf_pool_destroy(p);
}
END_TEST

struct idler {
	sheaf_cache_t *c;
	int idle_ms;
	uint32_t before, after, target_after;
	uint64_t barn_before, barn_after;
};

/* A thread that bursts, then idles @idle_ms without a call. */
static void *idle_thread(void *arg)
{
	struct idler *w = arg;
	void **o = malloc(NOBJ * sizeof(*o));
	struct ring_ref full = pool_full_ref(&w->c->pool->shm, w->c->id, 0);
	uint32_t e, tg;

	ck_assert_ptr_nonnull(o);
	burst(w->c, o);
	stash_of(w->c, &w->before, &e, &tg);
	w->barn_before = ring_count(&full);
	sleep_ms(w->idle_ms);
	stash_of(w->c, &w->after, &e, &w->target_after);
	w->barn_after = ring_count(&full);
	free(o);
	return NULL;
}

/* Idle for over four ticks (the trimmer takes it back after one to two):
 * the stash is back in the barn, where the test thread allocates every
 * object of it again, each once. */
START_TEST(idle_thread_gives_back)
{
	sheaf_pool_t *p = mkpool();
	sheaf_cache_t *c = mkcache(p, "idle", 64, CAP, 0);
	struct idler w = { .c = c, .idle_ms = 2200 };
	uint64_t taken0 = trim_sheaves_taken();
	void **o = malloc(NOBJ * sizeof(*o));
	pthread_t th;

	ck_assert_ptr_nonnull(o);
	at_store_relaxed(&c->sc->barn_limit, 4096);   /* no flush of the surplus */
	at_store_relaxed(&c->sc->barn_keep, 4096);
	ck_assert_int_eq(pthread_create(&th, NULL, idle_thread, &w), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	printf("idle_thread_gives_back: stash %u -> %u full sheaves, barn %llu -> %llu, "
	       "trimmer took %llu\n", w.before, w.after, (unsigned long long)w.barn_before,
	       (unsigned long long)w.barn_after,
	       (unsigned long long)(trim_sheaves_taken() - taken0));
	ck_assert_uint_ge(w.before, 10);
	ck_assert_uint_eq(w.after, 0);
	ck_assert_uint_eq(w.target_after, STASH_TARGET_MIN);
	ck_assert_uint_ge(w.barn_after, w.barn_before + w.before);
	ck_assert_uint_ge(trim_sheaves_taken() - taken0, w.before);
	/* The thread's exit put its main and spare back; every object is
	 * free and can be had once. */
	ck_assert_uint_eq(cache_stats_of(c, -1).in_use, 0);
	for (int i = 0; i < NOBJ; i++)
		o[i] = xalloc(c);
	for (int i = 1; i < NOBJ; i++)
		for (int j = 0; j < i; j += 97)
			ck_assert_ptr_ne(o[i], o[j]);
	for (int i = 0; i < NOBJ; i++)
		ck_assert_int_eq(sheaf_free(c, o[i]), 0);
	sheaf_thread_exit();
	require_pool_ok(p);
	free(o);
	sheaf_pool_destroy(p);
}
END_TEST

struct busy {
	sheaf_cache_t *c;
	_Atomic int stop;
	uint32_t min_full;       /* the least the stash held between bursts */
};

/* Bursts every 20 ms until told to stop: never idle for a tick. */
static void *busy_thread(void *arg)
{
	struct busy *b = arg;
	void **o = malloc(NOBJ * sizeof(*o));
	uint32_t f, e, tg;
	int rounds = 0;

	ck_assert_ptr_nonnull(o);
	b->min_full = UINT32_MAX;
	while (!atomic_load(&b->stop)) {
		burst(b->c, o);
		stash_of(b->c, &f, &e, &tg);
		if (rounds++ > 0 && f < b->min_full)
			b->min_full = f;
		sleep_ms(20);
	}
	sheaf_thread_exit();
	free(o);
	return NULL;
}

/* A thread that keeps making slow paths keeps its stash across ticks. */
START_TEST(busy_thread_keeps_stash)
{
	sheaf_pool_t *p = mkpool();
	sheaf_cache_t *c = mkcache(p, "busy", 64, CAP, 0);
	struct busy b = { .c = c };
	uint64_t taken0 = trim_sheaves_taken();
	pthread_t th;

	ck_assert_int_eq(pthread_create(&th, NULL, busy_thread, &b), 0);
	sleep_ms(1600);                  /* three ticks */
	atomic_store(&b.stop, 1);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	printf("busy_thread_keeps_stash: at least %u full sheaves kept, trimmer took %llu\n",
	       b.min_full, (unsigned long long)(trim_sheaves_taken() - taken0));
	ck_assert_uint_ge(b.min_full, 10);
	ck_assert_uint_eq(trim_sheaves_taken() - taken0, 0);
	ck_assert_uint_eq(cache_stats_of(c, -1).in_use, 0);
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/* An idle thread's cache destroyed, and its pool destroyed, while the
 * trimmer may walk it: nothing breaks, the pool checks. */
START_TEST(destroy_while_idle)
{
	sheaf_pool_t *p = mkpool();
	sheaf_cache_t *c = mkcache(p, "gone", 64, CAP, 0);
	struct idler w = { .c = c, .idle_ms = 10 };
	pthread_t th;

	ck_assert_int_eq(pthread_create(&th, NULL, idle_thread, &w), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	ck_assert_uint_eq(cache_stats_of(c, -1).in_use, 0);
	for (int k = 0; k < 3; k++) {
		void **o = malloc(NOBJ * sizeof(*o));

		ck_assert_ptr_nonnull(o);
		burst(c, o);             /* this thread's stash, then idle */
		free(o);
		sleep_ms(300 + 200 * k); /* before, at and after a tick */
	}
	require_pool_ok(p);
	sheaf_pool_destroy(p);       /* with this thread's stash held */
	p = mkpool();
	c = mkcache(p, "again", 64, CAP, 0);
	churn_checked(c, 2000);
	sleep_ms(1100);
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

static Suite *stash_suite(void)
{
	Suite *s = suite_create("stash");

	ADD_ALONE(s, stash_grows_with_demand, 60);
	ADD_ALONE(s, idle_thread_gives_back, 60);
	ADD_ALONE(s, busy_thread_keeps_stash, 60);
	ADD_ALONE(s, destroy_while_idle, 60);
	return s;
}

int main(void)
{
	/* On even in a ThreadSanitizer build (client/trim.c): this
	 * program's cases start from a single-threaded fork. */
	setenv("SHEAF_TRIMMER", "1", 1);
	return run_suite(stash_suite());
}
