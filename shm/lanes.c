/* lanes.c - thread lanes: counters, the main sheaf's live record, ring
 * intent (lanes.h). */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "bounds.h"
#include "debug.h"
#include "lanes.h"

/* Fast-path allocs and frees done on a sheaf whose word went from @from to
 * @to: ops = allocs + frees and size change = frees - allocs. */
static void word_delta(uint64_t from, uint64_t to, uint64_t *allocs, uint64_t *frees)
{
	/* Bits 16-63 count modulo 2^48: exact unless one sheaf stays a
	 * thread's main sheaf for 2^48 operations. */
	uint64_t ops = ((to >> 16) - (from >> 16)) & (~0ull >> 16);
	int64_t grew = (int64_t)(to & SHEAF_WORD_SIZE) - (int64_t)(from & SHEAF_WORD_SIZE);

	*frees = (uint64_t)((int64_t)ops + grew) / 2;
	*allocs = ops - *frees;
}

/*
 * Reads of a lane's live record before lane_counts gives up on it: the
 * thread's window (odd seq) is a few stores long, so a sane reader sees it
 * closed within a few retries; one that stays open is a thread stopped
 * there, dead (the repair closes it) or a client that wrote the seq
 * (client-writable: bounds.h).  Every LANE_YIELD_EVERY-th retry yields
 * the CPU, in case the thread is preempted inside its window.
 */
#define LANE_READ_TRIES  32u
#define LANE_YIELD_EVERY 8u

void lane_counts(const struct shm_pool *p, const struct shm_lane *l, uint32_t cache,
		 uint64_t *out)
{
	const struct shm_live *lv = lane_live(p, l, cache);
	const _Atomic uint64_t *stat = lane_stat(p, l, cache);

	/*
	 * A sequence lock without fences (TSan has none): the thread's stores
	 * of the fields below are releases, these loads acquires, so a load
	 * that sees one of a change's stores makes the second load of @seq
	 * see the change begun.
	 */
	for (unsigned tries = 0; tries < LANE_READ_TRIES; tries++) {
		uint32_t seq = at_load_acquire(&lv->seq);
		uint32_t id = at_load_acquire(&lv->sheaf);
		uint64_t from = at_load_acquire(&lv->word), to = from, a, f;

		for (unsigned i = SHEAF_STAT_CLIENT_FIRST; i < SHEAF_STAT_ENGINE_FIRST; i++)
			out[i] = at_load_acquire((_Atomic uint64_t *)&stat[i]);
		if (id < p->sheaf_count)        /* client-written: bounded */
			to = at_load_relaxed(&pool_sheaf(p, id)->word);
		if ((seq & 1) == 0 && at_load_relaxed(&lv->seq) == seq) {
			if (id < p->sheaf_count) {
				word_delta(from, to, &a, &f);
				out[ST_ALLOC_FASTPATH] += a;
				out[ST_FREE_FASTPATH] += f;
			}
			return;
		}
		/* The thread is between two stores of its own; one that died
		 * there is repaired by the engine (lane_live_repair). */
		if (tries % LANE_YIELD_EVERY == LANE_YIELD_EVERY - 1)
			sched_yield();
	}
	/* Never settled: the lane's counters alone (@out holds the last
	 * read), without the live part; a reader never waits on a client. */
	untrusted_note(UT_LANE, 1);
}

int64_t lane_net(const struct shm_pool *p, const struct shm_lane *l, uint32_t cache)
{
	uint64_t st[SHEAF_STAT_ENGINE_FIRST];

	lane_counts(p, l, cache, st);
	/* Client-written counters: wrapping arithmetic (bounds.h). */
	return (int64_t)(st[ST_ALLOC_FASTPATH] + st[ST_ALLOC_SLOWPATH] -
			 st[ST_FREE_FASTPATH] - st[ST_FREE_SLOWPATH] -
			 st[ST_FREE_RCU_SHEAF]);
}

int64_t lane_in_use(const struct shm_pool *p, const struct shm_lane *l, uint32_t cache)
{
	return ut_sub64(lane_net(p, l, cache), at_load_relaxed(lane_base(p, l, cache)));
}

/* Open (odd) and close (even) a change of @lv that readers must not see
 * half done. */
static uint32_t live_begin(struct shm_live *lv)
{
	uint32_t seq = at_load_relaxed(&lv->seq) | 1;

	at_store_relaxed(&lv->seq, seq);
	return seq;
}

static void live_end(struct shm_live *lv, uint32_t seq)
{
	at_store_release(&lv->seq, seq + 1);          /* pairs: reader's first load */
}

/*
 * Death at any step of the two functions below leaves counts that
 * lane_live_repair makes exact: between two steps the thread only loads
 * and computes, so a death anywhere is a death at the step before.
 */
#ifdef SHEAF_TEST_HOOKS
void (*lane_fold_hook)(int step);
#define STEP(step)                                                 \
	do {                                                       \
		if (unlikely(lane_fold_hook != NULL))              \
			lane_fold_hook(step);                      \
	} while (0)
#else
#define STEP(step) do { } while (0)   /* release builds: no stop points */
#endif

void lane_live_install(struct shm_pool *p, struct shm_lane *l, uint32_t cache,
		       uint32_t sheaf)
{
	struct shm_live *lv = lane_live(p, l, cache);
	uint32_t seq;

	/* Only after a fold (or none ever): a death inside leaves @sheaf's
	 * operations since it was installed, which are none yet. */
	/* @sheaf is the caller's; the record's old sheaf is SHARED (a peer
	 * may have written it), so it is overwritten, never asserted on. */
	SHEAF_ASSERT(sheaf < p->sheaf_count);
	seq = live_begin(lv);
	STEP(LF_INSTALL_OPEN);
	at_store_release(&lv->word, at_load_relaxed(&pool_sheaf(p, sheaf)->word));
	STEP(LF_INSTALL_WORD);
	at_store_release(&lv->sheaf, sheaf);
	STEP(LF_INSTALL_SHEAF);
	live_end(lv, seq);
	STEP(LF_INSTALL_DONE);
}

/* The staged fold's second half: its counters are absolute values, so
 * doing it again after a death part-way is doing it once. */
static void fold_apply(struct shm_pool *p, struct shm_lane *l, uint32_t cache)
{
	_Atomic uint64_t *stat = lane_stat(p, l, cache);

	at_store_release(&stat[ST_ALLOC_FASTPATH], at_load_relaxed(&l->fold_alloc));
	STEP(LF_FOLD_ALLOC);
	at_store_release(&stat[ST_FREE_FASTPATH], at_load_relaxed(&l->fold_free));
	STEP(LF_FOLD_FREE);
	at_store_release(&lane_live(p, l, cache)->sheaf, SHEAF_ID_NONE);
	STEP(LF_FOLD_SHEAF);
}

/*
 * Two counters cannot change at once, so the fold is staged: first the
 * counters' new values go to the lane's fold record, then one store (of
 * fold_cache) makes them the truth.  A death before it leaves the counters
 * and the published sheaf untouched (the repair folds from scratch); one
 * after it, a fold the repair completes (fold_apply).
 */
void lane_live_fold(struct shm_pool *p, struct shm_lane *l, uint32_t cache)
{
	struct shm_live *lv = lane_live(p, l, cache);
	_Atomic uint64_t *stat = lane_stat(p, l, cache);
	uint32_t id = at_load_relaxed(&lv->sheaf), seq;
	uint64_t a, f;

	if (id >= p->sheaf_count)
		return;
	word_delta(at_load_relaxed(&lv->word), at_load_relaxed(&pool_sheaf(p, id)->word), &a, &f);
	at_store_relaxed(&l->fold_alloc, at_load_relaxed(&stat[ST_ALLOC_FASTPATH]) + a);
	STEP(LF_STAGE_ALLOC);
	at_store_relaxed(&l->fold_free, at_load_relaxed(&stat[ST_FREE_FASTPATH]) + f);
	STEP(LF_STAGE_FREE);
	/* Release: pairs with the repair's acquire load. */
	at_store_release(&l->fold_cache, cache + 1);
	STEP(LF_STAGED);
	seq = live_begin(lv);
	STEP(LF_FOLD_OPEN);
	fold_apply(p, l, cache);
	live_end(lv, seq);
	STEP(LF_FOLD_CLOSED);
	at_store_release(&l->fold_cache, 0);
	STEP(LF_FOLD_DONE);
}

void lane_count_stage(struct shm_pool *p, struct shm_lane *l, uint32_t cache,
		      uint32_t stat, uint32_t sheaf, uint32_t size)
{
	at_store_relaxed(&l->count_stat, stat);
	at_store_relaxed(&l->count_sheaf, sheaf);
	at_store_relaxed(&l->count_size, size);
	at_store_relaxed(&l->count_val, at_load_relaxed(&lane_stat(p, l, cache)[stat]) + 1);
	/* Release: pairs with the repair's acquire load. */
	at_store_release(&l->count_cache, cache + 1);
	STEP(LC_STAGED);
}

void lane_count_commit(struct shm_pool *p, struct shm_lane *l)
{
	/* Staged by this thread, but in SHARED: a peer may have rewritten
	 * them since, so both are bounded again (a scribbled count is
	 * dropped, never stored out of the lane's block). */
	uint32_t cache = at_load_relaxed(&l->count_cache) - 1;
	uint32_t stat = at_load_relaxed(&l->count_stat);

	if (cache < p->max_caches && stat < SHEAF_STAT_ENGINE_FIRST)
		at_store_relaxed(&lane_stat(p, l, cache)[stat], at_load_relaxed(&l->count_val));
	STEP(LC_COUNTED);
	at_store_release(&l->count_cache, 0);
	STEP(LC_DONE);
}

void lane_count_drop(struct shm_lane *l)
{
	at_store_release(&l->count_cache, 0);
}

/* A dead thread's staged count (lane_count_stage): done if its sheaf's
 * size says the push or pop was.  Every field is client-written: bounded
 * (a counter of the client's own lanes at most). */
static void count_repair(struct shm_pool *p, struct shm_lane *l, uint32_t caches)
{
	uint32_t c = at_load_acquire(&l->count_cache);
	uint32_t stat = at_load_relaxed(&l->count_stat);
	uint32_t s = at_load_relaxed(&l->count_sheaf);

	if (c != 0 && c <= caches && s < p->sheaf_count &&
	    stat < SHEAF_STAT_ENGINE_FIRST &&
	    ut_sheaf_size(pool_sheaf(p, s)) == at_load_relaxed(&l->count_size))
		at_store_relaxed(&lane_stat(p, l, c - 1)[stat], at_load_relaxed(&l->count_val));
	at_store_release(&l->count_cache, 0);
}

void lane_live_repair(struct shm_pool *p, struct shm_lane *l)
{
	uint32_t staged = at_load_acquire(&l->fold_cache);

	uint32_t caches = pool_caches_used(p);

	count_repair(p, l, caches);

	if (staged != 0 && staged <= caches) {
		/* Died inside a staged fold: complete it. */
		struct shm_live *lv = lane_live(p, l, staged - 1);
		uint32_t seq = live_begin(lv);

		fold_apply(p, l, staged - 1);
		live_end(lv, seq);
	}
	at_store_release(&l->fold_cache, 0);
	/* Caches never set up were never a thread's: nothing to fold. */
	for (uint32_t c = 0; c < caches; c++) {
		struct shm_live *lv = lane_live(p, l, c);

		if (at_load_relaxed(&lv->seq) & 1) {
			/* Died inside lane_live_install: nothing was done on
			 * the sheaf it published; count nothing. */
			at_store_release(&lv->sheaf, SHEAF_ID_NONE);
			live_end(lv, at_load_relaxed(&lv->seq));
		} else {
			lane_live_fold(p, l, c);
		}
	}
}

static void lane_bind(struct shm_pool *p, struct shm_lane *l, uint32_t node,
		      int new_owner)
{
	/* The new holder is in no read section: a stale rcu_ctr (a
	 * scribble left in a free lane) would hold every grace period back
	 * until its first unlock (engine/grace.h). */
	at_store_relaxed(&l->rcu_ctr, 0);
	at_store_relaxed(&l->node, node);
	l->tid = (uint32_t)gettid();
	at_store_relaxed(&l->intent.op, RING_OP_NONE);
	if (new_owner)
		for (uint32_t c = 0, n = pool_caches_used(p); c < n; c++)
			at_store_relaxed(lane_base(p, l, c), lane_net(p, l, c));
	/* Release, last: a lane below the mark with @bound 0 is still being
	 * set up (lane_fresh); from here on its fields are complete. */
	at_store_release(&l->bound, node + 1);
}

void lane_take(struct shm_pool *p, struct shm_lane *l, uint32_t client, uint32_t node,
	       int first)
{
	SHEAF_ASSERT(node < p->nodes);
	if (first) {
		/* A never-used lane is zero (its live records would name
		 * sheaf 0); one a repair freed names none already.  Either
		 * way, from here on they are this thread's to write. */
		for (uint32_t c = 0; c < p->max_caches; c++) {
			struct shm_live *lv = lane_live(p, l, c);

			if (at_load_relaxed(&lv->seq) & 1)
				at_store_relaxed(&lv->seq, at_load_relaxed(&lv->seq) + 1);
			at_store_relaxed(&lv->sheaf, SHEAF_ID_NONE);
		}
		at_store_relaxed(&l->client, client);
	}
	at_store_relaxed(&l->busy, 1);
	lane_bind(p, l, node, first);
}

void lane_release(struct shm_lane *l)
{
	/* The thread's read sections end with it (engine/grace.h). */
	at_store_release(&l->rcu_ctr, 0);
	at_store_release(&l->busy, 0);
}

void lane_free(struct shm_lane *l)
{
	at_store_release(&l->rcu_ctr, 0);
	at_store_relaxed(&l->busy, 0);
	at_store_release(&l->client, LANE_FREE);
}
