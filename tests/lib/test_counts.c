/*
 * test_counts.c - counters that stay exact after deaths, and an engine that
 * stays idle whatever barn watermarks it finds, on local pools
 * (engine threads in this process):
 *
 *   fold_death_every_step  a client thread "dies" (lane_fold_hook longjmps
 *                          out) after each store of lane_live_install and
 *                          lane_live_fold in turn; after the engine's repair
 *                          alloc_fastpath and free_fastpath equal what it
 *                          did, the counted in-use equals the objects it
 *                          really holds (pool check), and 0 once they are
 *                          freed; then the cache can be destroyed.
 *   slow_count_death_every_step  the same for the slow paths' staged counts
 *                          (lane_count_stage): a death between a pop or push
 *                          and its count leaves alloc_slowpath and
 *                          free_slowpath exact.
 *   destroy_by_slabs       counters left off by a death (no object behind
 *                          them) do not block destroy; an object really in
 *                          use does.
 *   reconcile_counts       engine_reconcile_counts books the difference
 *                          between counters and the walk, both ways; the
 *                          repair of the last client does it by itself.
 *   bad_watermarks_idle    barn_low=10 barn_high=20 barn_limit=1 (and other
 *                          values Tune refuses) written straight into the
 *                          descriptor: the worker stays near idle and
 *                          alloc/free still work.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "client/sheaf.h"
#include "client/internal.h"
#include "shm/barn.h"
#include "shm/lanes.h"
#include "shm/engine/clients.h"
#include "shm/engine/engine.h"
#include "shm/stats.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_pool.h"

static sheaf_pool_t *mkpool(void)
{
	struct sheaf_pool_config cfg = { .nodes = 1, .size = 64 << 20, .sheaf_count = 1024 };

	return pool_new(&cfg);
}

static void check_pool(sheaf_pool_t *p, int line)
{
	char err[512] = "";
	int rc = sheaf_pool_check(p, err, sizeof(err));

	ck_assert_msg(rc == 0, "line %d: pool check: %s", line, err);
}

/* ---- a client thread that dies at a given step --------------------------- */

static jmp_buf death;
static int hook_calls, die_at;

/* The die_at-th stop point ends the "thread": back to the setjmp. */
static void die_hook(int step)
{
	(void)step;
	if (++hook_calls == die_at)
		longjmp(death, 1);
}

/* What the victim did before it died (globals: they change after setjmp). */
static uint64_t held[64];
static unsigned nheld;
static uint64_t allocs_done, frees_done;

/* The inline fast paths of client/sheaf.h, on sheaf @sh. */
static void fast_alloc(struct shm_sheaf *sh)
{
	uint64_t w = at_load_relaxed(&sh->word);

	held[nheld++] = sh->objs[(w & SHEAF_WORD_SIZE) - 1];
	at_store_relaxed(&sh->word, w + SHEAF_WORD_OP - 1);
	allocs_done++;
}

static void fast_free(struct shm_sheaf *sh)
{
	uint64_t w = at_load_relaxed(&sh->word);

	sh->objs[w & SHEAF_WORD_SIZE] = held[--nheld];
	at_store_relaxed(&sh->word, w + SHEAF_WORD_OP + 1);
	frees_done++;
}

/* A full sheaf of @cache from node 0's barn, as client @me. */
static uint32_t take_full(struct shm_pool *sp, uint32_t cache, uint32_t me,
			  struct ring_intent *in)
{
	for (int tries = 0; tries < 100; tries++) {
		uint32_t s = barn_get_full(sp, cache, 0, me, in);

		if (s != SHEAF_ID_NONE)
			return s;
		barn_wait_supply(sp, cache, 0, 100 * 1000000ll);
	}
	ck_abort_msg("no full sheaf in the barn");
	return SHEAF_ID_NONE;
}

/*
 * Victim: a client with one thread that takes a full sheaf, makes it its
 * main sheaf, allocs 5 and frees 2 on it, folds; installs it again, allocs
 * 3 and frees 4, folds, and would go on.  It dies at the @die-th stop point
 * (0: after all that, between changes).  The objects it still holds stay
 * in held[0..nheld).
 */
/* A victim client's start: attached, a lane, a full sheaf of @cache
 * (returned, holding @min objects at least), the hook armed to stop it at
 * the @die-th stop point. */
static uint32_t victim_start(struct shm_pool *sp, uint32_t cache, int die, uint32_t min,
			     uint32_t *client, struct shm_lane **lane)
{
	int id = client_attach(sp, (uint32_t)getpid(), (uint32_t)getuid(), "victim");
	uint32_t s;

	ck_assert_int_ge(id, 0);
	*lane = client_lane_acquire(sp, (uint32_t)id, 0);
	ck_assert_ptr_nonnull(*lane);
	*client = (uint32_t)id;
	s = take_full(sp, cache, (uint32_t)id, &(*lane)->intent);
	ck_assert_uint_ge(sheaf_size(pool_sheaf(sp, s)), min);
	hook_calls = 0;
	die_at = die;
	lane_fold_hook = die_hook;
	return s;
}

static void victim(struct shm_pool *sp, uint32_t cache, int die, uint32_t *client,
		   struct shm_lane **lane)
{
	uint32_t s = victim_start(sp, cache, die, 8, client, lane);
	struct shm_lane *l = *lane;
	struct shm_sheaf *sh = pool_sheaf(sp, s);

	if (setjmp(death) == 0) {
		lane_live_install(sp, l, cache, s);
		for (int k = 0; k < 5; k++)
			fast_alloc(sh);
		for (int k = 0; k < 2; k++)
			fast_free(sh);
		lane_live_fold(sp, l, cache);
		lane_live_install(sp, l, cache, s);
		for (int k = 0; k < 3; k++)
			fast_alloc(sh);
		for (int k = 0; k < 4; k++)
			fast_free(sh);
		lane_live_fold(sp, l, cache);
		ck_assert_int_eq(die, 0);           /* every stop point was passed */
		ck_assert_int_eq(hook_calls, 2 * (LF_NR - 1));
	}
	lane_fold_hook = NULL;
}

/*
 * After victim number @die's repair: counters @alloc and @free equal what
 * the victims did, the objects it still held join @leaked, the counted
 * in-use equals them, and the walk agrees.
 */
static void check_books(sheaf_pool_t *p, sheaf_cache_t *c, int die, enum sheaf_stat alloc,
			enum sheaf_stat free_, uint64_t *leaked, unsigned *nleaked)
{
	struct sheaf_stats s = cache_stats_of(c, -1);

	ck_assert_msg(s.stat[alloc] == allocs_done && s.stat[free_] == frees_done,
		      "death at stop point %d: counted %llu allocs %llu frees, did %llu %llu",
		      die, (unsigned long long)s.stat[alloc], (unsigned long long)s.stat[free_],
		      (unsigned long long)allocs_done, (unsigned long long)frees_done);
	memcpy(leaked + *nleaked, held, nheld * sizeof(held[0]));
	*nleaked += nheld;
	ck_assert_msg(s.in_use == *nleaked, "death at stop point %d: in use %llu, held %u",
		      die, (unsigned long long)s.in_use, *nleaked);
	check_pool(p, __LINE__);        /* the walk agrees with the counters */
}

/* The dead victims' objects, freed by this thread: nothing in use. */
static void free_leaked(sheaf_pool_t *p, sheaf_cache_t *c, const uint64_t *leaked,
			unsigned nleaked)
{
	ck_assert_uint_gt(nleaked, 0);
	for (unsigned k = 0; k < nleaked; k++)
		ck_assert_int_eq(sheaf_free(c, p->shm.base + leaked[k]), 0);
	ck_assert_uint_eq(cache_stats_of(c, -1).in_use, 0);
	check_pool(p, __LINE__);
}

/* One victim per stop point (and one that passes them all), each repaired
 * before the next; the books must match what the victims did. */
START_TEST(fold_death_every_step)
{
	sheaf_pool_t *p = mkpool();
	sheaf_cache_t *c = mkcache(p, "victims", 64, 16, 0);
	struct shm_pool *sp = &p->shm;
	uint64_t leaked[64 * 2 * (LF_NR - 1)];
	unsigned nleaked = 0;
	char err[256] = "";

	allocs_done = frees_done = 0;
	for (int die = 0; die <= 2 * (LF_NR - 1); die++) {
		uint32_t client;
		struct shm_lane *l;

		nheld = 0;
		victim(sp, c->id, die, &client, &l);
		/* Its process is gone: the engine repairs (a second repair of
		 * a lane adds nothing: every other death repairs twice). */
		if (die & 1)
			lane_live_repair(sp, l);
		ck_assert_int_ge(engine_reclaim_client(&p->engine, client), 1);
		check_books(p, c, die, ST_ALLOC_FASTPATH, ST_FREE_FASTPATH, leaked, &nleaked);
	}
	free_leaked(p, c, leaked, nleaked);
	sheaf_thread_exit();                    /* this thread's sheaves back */
	ck_assert_msg(engine_cache_destroy(&p->engine, c->id, err, sizeof(err)) == 0,
		      "destroy: %s", err);
	sheaf_pool_destroy(p);
}
END_TEST

/*
 * Victim of the slow paths' counts: a client thread pops 3 objects off a
 * full sheaf and pushes 2 back, each as client/alloc.c and free.c do it
 * (staged count, the pop or push, commit), and dies at the @die-th stop
 * point: the hook's (LC_STAGED, LC_COUNTED, LC_DONE) or the one right after
 * each pop or push (a death between the operation and its count).
 */
#define SLOW_STEPS (5 * 4)

static void slow_victim(struct shm_pool *sp, uint32_t cache, int die, uint32_t *client)
{
	struct shm_lane *l;
	uint32_t s = victim_start(sp, cache, die, 4, client, &l);
	struct shm_sheaf *sh = pool_sheaf(sp, s);

	if (setjmp(death) == 0) {
		for (int k = 0; k < 5; k++) {
			int pop = k < 3;

			lane_count_stage(sp, l, cache, pop ? ST_ALLOC_SLOWPATH : ST_FREE_SLOWPATH,
					 s, sheaf_size(sh) + (pop ? -1u : 1u));
			if (pop) {
				held[nheld++] = sheaf_pop(sh);
				allocs_done++;
			} else {
				sheaf_push(sh, held[--nheld]);
				frees_done++;
			}
			die_hook(0);
			lane_count_commit(sp, l);
		}
		ck_assert_int_eq(die, 0);
		ck_assert_int_eq(hook_calls, SLOW_STEPS);
	}
	lane_fold_hook = NULL;
}

/* One victim per stop point of the slow paths' counts; the books must
 * match what each did. */
START_TEST(slow_count_death_every_step)
{
	sheaf_pool_t *p = mkpool();
	sheaf_cache_t *c = mkcache(p, "slow", 64, 16, 0);
	struct shm_pool *sp = &p->shm;
	uint64_t leaked[4 * (SLOW_STEPS + 1)];
	unsigned nleaked = 0;

	allocs_done = frees_done = 0;
	for (int die = 0; die <= SLOW_STEPS; die++) {
		uint32_t client;

		nheld = 0;
		slow_victim(sp, c->id, die, &client);
		ck_assert_int_ge(engine_reclaim_client(&p->engine, client), 1);
		check_books(p, c, die, ST_ALLOC_SLOWPATH, ST_FREE_SLOWPATH, leaked, &nleaked);
	}
	free_leaked(p, c, leaked, nleaked);
	sheaf_thread_exit();
	sheaf_pool_destroy(p);
}
END_TEST

/* A lane of the engine's to drift counters on, as a killed client leaves
 * them (the books no longer match any object). */
static _Atomic uint64_t *counter(sheaf_pool_t *p, uint32_t cache, enum sheaf_stat st)
{
	return &lane_stat(&p->shm, p->engine.worker_lane[0], cache)[st];
}

START_TEST(destroy_by_slabs)
{
	sheaf_pool_t *p = mkpool();
	sheaf_cache_t *c = mkcache(p, "lost", 64, 16, 0);
	sheaf_cache_t *d = mkcache(p, "held", 64, 16, 0);
	char err[256] = "";
	void *o;

	/* Counted in use with nothing behind it, both ways. */
	at_counter_add(counter(p, c->id, ST_ALLOC_SLOWPATH), 251);
	at_counter_add(counter(p, d->id, ST_FREE_SLOWPATH), 5);
	ck_assert_msg(engine_cache_destroy(&p->engine, c->id, err, sizeof(err)) == 0,
		      "destroy with 251 counted and none in use: %s", err);
	/* One object really in use (this thread's sheaves given back first). */
	o = sheaf_alloc(d);
	ck_assert_ptr_nonnull(o);
	sheaf_thread_exit();
	ck_assert_int_eq(engine_cache_destroy(&p->engine, d->id, err, sizeof(err)), -EBUSY);
	ck_assert_msg(strstr(err, "1 objects in use") != NULL, "%s", err);
	ck_assert_int_eq(sheaf_free(d, o), 0);
	sheaf_thread_exit();
	ck_assert_msg(engine_cache_destroy(&p->engine, d->id, err, sizeof(err)) == 0,
		      "destroy once freed: %s", err);
	sheaf_pool_destroy(p);
}
END_TEST

START_TEST(reconcile_counts)
{
	sheaf_pool_t *p = mkpool();
	sheaf_cache_t *a = mkcache(p, "a", 64, 16, 0);
	sheaf_cache_t *b = mkcache(p, "b", 64, 16, 0);
	struct shm_pool *sp = &p->shm;
	void *keep[3];
	char err[256] = "";
	uint32_t client;
	struct shm_lane *l;

	for (int k = 0; k < 3; k++)
		ck_assert_ptr_nonnull(keep[k] = sheaf_alloc(b));
	check_pool(p, __LINE__);
	at_counter_add(counter(p, a->id, ST_FREE_SLOWPATH), 5);      /* a: -5 */
	at_counter_add(counter(p, b->id, ST_ALLOC_SLOWPATH), 251);   /* b: +251 */
	ck_assert_int_ne(sheaf_pool_check(p, err, sizeof(err)), 0);
	ck_assert_int_eq(engine_reconcile_counts(&p->engine), 256);
	ck_assert_uint_eq(cache_stats_of(a, -1).in_use, 0);
	ck_assert_uint_eq(cache_stats_of(b, -1).in_use, 3);   /* what this thread holds */
	check_pool(p, __LINE__);
	ck_assert_int_eq(engine_reconcile_counts(&p->engine), 0);

	/* The repair of the last client reconciles by itself: a victim that
	 * took an object and died before counting it (this pool's own client
	 * slot is let go for the while, as if this process were not one). */
	nheld = 0;
	victim(sp, a->id, 0, &client, &l);
	ck_assert_uint_ne(client, p->client);
	client_detach(sp, p->client);
	at_counter_add(&lane_stat(sp, l, a->id)[ST_ALLOC_SLOWPATH], 1);   /* counted, not taken */
	ck_assert_int_ge(engine_reclaim_client(&p->engine, client), 1);
	ck_assert_int_eq(client_attach(sp, (uint32_t)getpid(), (uint32_t)getuid(), "local"),
			 (int)p->client);
	ck_assert_uint_eq(cache_stats_of(a, -1).in_use, nheld);
	check_pool(p, __LINE__);
	for (unsigned k = 0; k < nheld; k++)
		ck_assert_int_eq(sheaf_free(a, sp->base + held[k]), 0);
	for (int k = 0; k < 3; k++)
		ck_assert_int_eq(sheaf_free(b, keep[k]), 0);
	ck_assert_uint_eq(cache_stats_of(a, -1).in_use, 0);
	ck_assert_uint_eq(cache_stats_of(b, -1).in_use, 0);
	check_pool(p, __LINE__);
	sheaf_pool_destroy(p);
}
END_TEST

/* ---- watermarks the engine must survive ---------------------------------- */

/* CPU time of the pool's engine workers so far, in ns. */
static int64_t workers_cpu_ns(sheaf_pool_t *p)
{
	int64_t ns = 0;

	for (uint32_t n = 0; n < p->engine.nworkers; n++) {
		clockid_t id;
		struct timespec ts;

		ck_assert_int_eq(pthread_getcpuclockid(p->engine.worker[n], &id), 0);
		ck_assert_int_eq(clock_gettime(id, &ts), 0);
		ns += (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	}
	return ns;
}

/* Write @low/@high/@limit into @c's descriptor, wake the worker, let it
 * settle, and require it to stay near idle for a second while alloc and
 * free still work. */
static void expect_idle(sheaf_pool_t *p, sheaf_cache_t *c, uint32_t low, uint32_t high,
			uint32_t limit)
{
	struct shm_cache *sc = &p->shm.caches[c->id];
	void *objs[200];
	int64_t t0;

	at_store_relaxed(&sc->barn_low, low);
	at_store_relaxed(&sc->barn_high, high);
	at_store_relaxed(&sc->barn_limit, limit);
	for (int k = 0; k < 200; k++)
		ck_assert_ptr_nonnull(objs[k] = sheaf_alloc(c));
	for (int k = 0; k < 200; k++)
		ck_assert_int_eq(sheaf_free(c, objs[k]), 0);
	node_ring_doorbell(&p->shm, 0);
	usleep(300 * 1000);
	t0 = workers_cpu_ns(p);
	sleep(1);
	t0 = workers_cpu_ns(p) - t0;
	ck_assert_msg(t0 < 100 * 1000000ll,
		      "barn_low=%u barn_high=%u barn_limit=%u: workers used %lld ms of CPU "
		      "in 1 s", low, high, limit, (long long)(t0 / 1000000));
	for (int k = 0; k < 200; k++)
		ck_assert_ptr_nonnull(objs[k] = sheaf_alloc(c));
	for (int k = 0; k < 200; k++)
		ck_assert_int_eq(sheaf_free(c, objs[k]), 0);
	ck_assert_uint_eq(cache_stats_of(c, -1).in_use, 0);
}

START_TEST(bad_watermarks_idle)
{
	sheaf_pool_t *p = mkpool();
	sheaf_cache_t *c = mkcache(p, "wm", 64, 8, 0);

	expect_idle(p, c, 10, 20, 1);           /* limit under low: refill vs flush */
	expect_idle(p, c, 5, 3, 0);             /* no limit at all */
	expect_idle(p, c, 0xffffffffu, 12, 0xffffffffu);   /* low over high */
	expect_idle(p, c, 4, 16, 64);           /* sane again */
	check_pool(p, __LINE__);
	sheaf_pool_destroy(p);
}
END_TEST

/*
 * A peer rewrites a thread's staged count and live record between its
 * stores (all in SHARED): the thread's commit and install stay inside its
 * lane's block and never assert (DEBUG=1 builds too); the scribbled count
 * is dropped.
 */
START_TEST(scribbled_lane_words)
{
	sheaf_pool_t *p = mkpool();
	sheaf_cache_t *c = mkcache(p, "scrib", 64, 16, 0);
	struct shm_pool *sp = &p->shm;
	static const uint32_t bad[] = { 0xffffffffu, 0x80000000u, SHEAF_STAT_NR, 0x10000u };
	int id = client_attach(sp, (uint32_t)getpid(), (uint32_t)getuid(), "scribbled");
	struct shm_lane *l;
	uint64_t before;

	ck_assert_int_ge(id, 0);
	l = client_lane_acquire(sp, (uint32_t)id, 0);
	ck_assert_ptr_nonnull(l);
	before = at_load_relaxed(&lane_stat(sp, l, c->id)[ST_ALLOC_SLOWPATH]);
	for (unsigned k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		lane_count_stage(sp, l, c->id, ST_ALLOC_SLOWPATH, 0, 1);
		at_store_relaxed(&l->count_stat, bad[k]);
		lane_count_commit(sp, l);
		ck_assert_uint_eq(at_load_relaxed(&l->count_cache), 0);
		lane_count_stage(sp, l, c->id, ST_ALLOC_SLOWPATH, 0, 1);
		at_store_relaxed(&l->count_cache, bad[k]);
		lane_count_commit(sp, l);
		ck_assert_uint_eq(at_load_relaxed(&l->count_cache), 0);
	}
	ck_assert_uint_eq(at_load_relaxed(&lane_stat(sp, l, c->id)[ST_ALLOC_SLOWPATH]), before);
	/* A live record whose sheaf a peer set: installing over it works. */
	at_store_relaxed(&lane_live(sp, l, c->id)->sheaf, 7);
	lane_live_install(sp, l, c->id, 0);
	ck_assert_uint_eq(at_load_relaxed(&lane_live(sp, l, c->id)->sheaf), 0);
	at_store_relaxed(&lane_live(sp, l, c->id)->sheaf, SHEAF_ID_NONE);
	client_lane_free(sp, l);
	sheaf_pool_destroy(p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("counts");

	ADD_ALONE(s, fold_death_every_step, 120);
	ADD_ALONE(s, slow_count_death_every_step, 120);
	ADD_ALONE(s, destroy_by_slabs, 60);
	ADD_ALONE(s, reconcile_counts, 60);
	ADD_ALONE(s, bad_watermarks_idle, 120);
	ADD_ALONE(s, scribbled_lane_words, 60);
	return run_suite(s);
}
