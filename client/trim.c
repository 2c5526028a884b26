/*
 * trim.c - the process's trimmer: a thread that takes the stash of an idle
 * thread back to the barns, so that sheaves a thread kept for a burst do
 * not stay out of every other thread's reach while it does nothing (the
 * kernel flushes an idle CPU's sheaves from another CPU under its lock;
 * tcmalloc's background thread reclaims idle per-CPU caches).
 *
 * A thread's stash grows with its demand (exchange.c, stash_target) each
 * time a sheaf went to the barn for want of room.  Every
 * TRIM_TICK_MS the trimmer looks at each thread's tcaches: one that made
 * no slow path since the last tick (its @enters unchanged) is idle, and
 * its stash, full and empty sheaves alike, goes back to the barns, its
 * target to STASH_TARGET_MIN.  Main and spare stay (a thread's next call finds them): a
 * thread keeps at most those two sheaves per cache once it idles.
 *
 * The trimmer works on a thread's caches of a pool only while it holds
 * that thread's tpool (TP_HOLD_TRIM: tried, never waited for), so that it
 * and the thread never use the thread's lane at once: its ring intents,
 * its counters, its in_cache handshake with a destroy (cache.c).  It does
 * so under slots_lock, which keeps every pool it looks at mapped and every
 * tstate and tcache from being freed (thread.c takes slots_lock for both).
 * sheaf_pool_destroy fences it off a pool before it closes the engine or
 * the connection (slots_close_pool).  It runs while some thread has a stash, and sleeps on a condition
 * otherwise: a process that never stashes never starts it.
 *
 * Who may call: exchange.c (trim_kick, when a sheaf goes into a stash),
 * thread.c (trim_link, trim_unlink, trim_forget_fork).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include "shm/barn.h"
#include "client/internal.h"

#define TRIM_TICK_MS 500

static pthread_mutex_t trim_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t trim_cond = PTHREAD_COND_INITIALIZER;
static int trim_started;               /* under trim_mu */
static _Atomic uint32_t trim_wanted;   /* a stash may be non-empty */
static struct tstate *trim_list;       /* under slots_lock */
static _Atomic uint64_t trim_taken;    /* sheaves taken back (tests) */

void trim_link(struct tstate *ts)
{
	ts->prev = NULL;
	ts->next = trim_list;
	if (trim_list != NULL)
		trim_list->prev = ts;
	trim_list = ts;
}

void trim_unlink(struct tstate *ts)
{
	if (ts->prev != NULL)
		ts->prev->next = ts->next;
	else if (trim_list == ts)
		trim_list = ts->next;
	if (ts->next != NULL)
		ts->next->prev = ts->prev;
	ts->next = ts->prev = NULL;
}

void trim_forget_fork(void)
{
	/* The child has no trimmer (threads do not survive fork()) and
	 * none of the parent's tstates but the forking thread's, whose
	 * caches thread.c drops. */
	pthread_mutex_init(&trim_mu, NULL);
	pthread_cond_init(&trim_cond, NULL);
	trim_started = 0;
	at_store_relaxed(&trim_wanted, 0);
	trim_list = NULL;
}

uint64_t trim_sheaves_taken(void)
{
	return at_load_relaxed(&trim_taken);
}

/* Hold @tp for the trimmer if nobody does. */
static int tp_try(struct tpool *tp)
{
	uint32_t exp = 0;

	return at_cas_acqrel(&tp->hold, &exp, TP_HOLD_TRIM);
}

static void tp_drop(struct tpool *tp)
{
	at_store_release(&tp->hold, 0);
}

/*
 * One tcache at a tick, its tpool held: an idle one gives its stash back.
 * The in_cache handshake as tcache_enter's, without its wait: a cache a
 * destroy is deciding is left for the next tick.  Returns whether the
 * tcache still has a stash.
 */
static int trim_one(struct tcache *t)
{
	struct shm_lane *ln = t->tp->lane;
	const sheaf_cache_t *c = t->cache;
	uint32_t st;

	if (t->nfull == 0 && t->nempty == 0)
		return 0;
	if (t->enters != t->enters_seen) {          /* busy since the last tick */
		t->enters_seen = t->enters;
		return 1;
	}
	at_store_seqcst(&ln->in_cache, c->id + 1);
	st = at_load_seqcst(&c->sc->state);
	if (st == CACHE_LIVE && at_load_relaxed(&c->sc->generation) == c->gen) {
		uint32_t n = t->nfull + t->nempty;

		while (t->nfull > 0)
			exchange_put(t, t->stash_full[--t->nfull]);
		while (t->nempty > 0)
			exchange_put(t, t->stash_empty[--t->nempty]);
		t->stash_target = STASH_TARGET_MIN;
		at_fetch_add_relaxed(&trim_taken, n);
	}
	at_store_release(&ln->in_cache, 0);
	return t->nfull != 0 || t->nempty != 0;
}

/* A pass over every thread's tcaches: whether some stash is left. */
static int trim_pass(void)
{
	int left = 0;

	lock_acquire(&slots_lock, LOCK_RANK_REGISTRY);
	for (struct tstate *ts = trim_list; ts != NULL; ts = ts->next) {
		for (uint32_t i = 0; i < SHEAF_HANDLES_MAX; i++) {
			struct tcache *t = at_plain_load_acquire(&ts->tc[i]);
			struct tpool *tp;

			if (t == NULL || !slots_pool_live(t->cache->pool, t->gen) ||
			    t->cache->pool->closing)
				continue;
			tp = t->tp;
			if (tp->lane == NULL || tp->gen != t->gen) {
				continue;
			} else if (!tp_try(tp)) {
				left = 1;           /* its thread is in a slow path */
				continue;
			}
			left |= trim_one(t);
			tp_drop(tp);
		}
	}
	lock_release(&slots_lock);
	return left;
}

static void *trim_main(void *arg)
{
	struct timespec tick = { TRIM_TICK_MS / 1000, (TRIM_TICK_MS % 1000) * 1000000L };

	(void)arg;
	for (;;) {
		pthread_mutex_lock(&trim_mu);
		while (at_load_relaxed(&trim_wanted) == 0)
			pthread_cond_wait(&trim_cond, &trim_mu);
		pthread_mutex_unlock(&trim_mu);
		do {
			/* Cleared before the pass: a stash made during it
			 * sets it again, and is seen at the next. */
			at_store_seqcst(&trim_wanted, 0);
			while (nanosleep(&tick, &tick) != 0 && errno == EINTR)
				;
			tick = (struct timespec){ TRIM_TICK_MS / 1000,
						  (TRIM_TICK_MS % 1000) * 1000000L };
		} while (trim_pass() || at_load_seqcst(&trim_wanted) != 0);
	}
	return NULL;
}

/*
 * SHEAF_TRIMMER=0 keeps the trimmer from starting (a process that must not
 * have a thread of the library's: stashes then go back at thread exit and
 * disconnect only); 1 starts it.  Default 1, but 0 in a ThreadSanitizer
 * build, which cannot start a thread in the child of a multi-threaded
 * fork() (it dies), what the tests' client processes are: test_stash sets
 * it to 1.
 */
static int trim_enabled(void)
{
	const char *v = getenv("SHEAF_TRIMMER");

	if (v != NULL && (v[0] == '0' || v[0] == '1') && v[1] == '\0')
		return v[0] == '1';
#if defined(__SANITIZE_THREAD__)
	return 0;
#else
	return 1;
#endif
}

void trim_kick(void)
{
	if (likely(at_load_relaxed(&trim_wanted) != 0))
		return;
	pthread_mutex_lock(&trim_mu);
	at_store_seqcst(&trim_wanted, 1);
	if (!trim_started && !trim_enabled())
		trim_started = 1;       /* never to start */
	if (!trim_started) {
		pthread_attr_t a;
		pthread_t th;

		/* Without a trimmer stashes stay until their thread's next
		 * call or its exit, as before there was one. */
		if (pthread_attr_init(&a) == 0) {
			(void)pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
			(void)pthread_attr_setstacksize(&a, 64 * 1024);
			trim_started = pthread_create(&th, &a, trim_main, NULL) == 0;
			pthread_attr_destroy(&a);
		}
	}
	pthread_cond_signal(&trim_cond);
	pthread_mutex_unlock(&trim_mu);
}
