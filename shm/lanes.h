/*
 * lanes.h - thread lanes (struct shm_lane, one per thread using the pool, in
 * the client-writable part of the region): the thread's counters, the live
 * record of its main sheaves' fast-path operations, and its ring intent.
 *
 * Who may call: lane_take, lane_release, lane_live_install,
 * lane_live_fold and lane_count_* the thread that holds the lane;
 * lane_counts, lane_net and lane_in_use any thread of any process (they
 * only read); lane_live_repair and lane_free the engine (a dead client's
 * lanes, its own lanes at fini).
 *
 * Which lanes a client may take is the engine's to say (the grant table in
 * META, shm/engine/clients.h); which of them each of its threads uses is
 * the client process's own business (client/thread.c), never a SHARED
 * word.  No locks here (docs/design.md, "Lock order"); lane_counts
 * readers retry on the lane's sequence count, never wait.  Callable with
 * any lock held.
 */
#ifndef SHEAF_SHM_LANES_H
#define SHEAF_SHM_LANES_H

#include <stdint.h>
#include "pool.h"

/*
 * A thread of @client (a client id, or OWNER_ENGINE) starts using lane @l,
 * granted to @client (META) and used by no other thread of it, on @node.
 * @first: the first time @client takes it since the grant (its live
 * records are reset and its objects in use start from what the lane
 * shows now).
 */
void lane_take(struct shm_pool *p, struct shm_lane *l, uint32_t client, uint32_t node,
	       int first);

/*
 * The lane's client-side counters of @cache (out[SHEAF_STAT_CLIENT_FIRST ..
 * SHEAF_STAT_ENGINE_FIRST)), with the fast-path operations done on its
 * thread's main sheaf so far (struct shm_live).  Any thread or process.
 * Bounded: a lane whose seq stays odd (a stopped, dead or scribbling
 * client) is given up after a few retries and counted without the live
 * part (a UT_LANE refusal, bounds.h).
 */
void lane_counts(const struct shm_pool *p, const struct shm_lane *l, uint32_t cache,
		 uint64_t *out);

/* Allocs minus frees the lane has ever counted for @cache. */
int64_t lane_net(const struct shm_pool *p, const struct shm_lane *l, uint32_t cache);

/* Objects of @cache allocated and not freed by the lane's client. */
int64_t lane_in_use(const struct shm_pool *p, const struct shm_lane *l, uint32_t cache);

/*
 * The lane's thread makes sheaf @sheaf its main sheaf of @cache
 * (lane_live_install), or stops using it as such (lane_live_fold: the
 * operations done on it go into the lane's counters).  Every change to the
 * main sheaf other than the inline fast paths' happens between the two.
 * Who may call: the lane's thread (a dead thread's, lane_live_repair).
 */
void lane_live_install(struct shm_pool *p, struct shm_lane *l, uint32_t cache,
		       uint32_t sheaf);
void lane_live_fold(struct shm_pool *p, struct shm_lane *l, uint32_t cache);

/*
 * A slow path's push onto or pop from a sheaf its thread holds, counted in
 * counter @stat (alloc_slowpath...) exactly whatever instruction the thread
 * dies at: lane_count_stage stages the counter's next value and the size
 * sheaf @sheaf has once the push or pop is done; the thread does it, then
 * lane_count_commit stores the value and disarms (lane_count_drop: the
 * operation was taken back, count nothing).  The repair of a dead thread
 * stores the staged value if the sheaf's size says the operation was done.
 * The sheaf must stay the thread's until the commit.
 * Who may call: the lane's thread, in its slow path (tcache_enter).
 */
void lane_count_stage(struct shm_pool *p, struct shm_lane *l, uint32_t cache,
		      uint32_t stat, uint32_t sheaf, uint32_t size);
void lane_count_commit(struct shm_pool *p, struct shm_lane *l);
void lane_count_drop(struct shm_lane *l);

/*
 * A dead client's lane: fold what its thread left, however it stopped.  The
 * counts are then exact whatever instruction of lane_live_install or
 * lane_live_fold the thread died at (the fold is staged in the lane's fold
 * record; the repair completes a staged one).  Doing it twice is doing it
 * once.
 */
void lane_live_repair(struct shm_pool *p, struct shm_lane *l);

#ifdef SHEAF_TEST_HOOKS
/*
 * Test-only stop points, compiled only with -DSHEAF_TEST_HOOKS (the copy of
 * clients.o in libsheaf-test.a; release builds have none): when non-NULL,
 * called after every store of lane_live_install and lane_live_fold (and of
 * the repair's completion of a fold), and after the arming store of
 * lane_count_stage and each store of lane_count_commit, so a test can stop
 * a thread there as if it died.
 */
extern void (*lane_fold_hook)(int step);
#endif
enum lane_fold_step {
	LF_INSTALL_OPEN = 1, LF_INSTALL_WORD, LF_INSTALL_SHEAF, LF_INSTALL_DONE,
	LF_STAGE_ALLOC, LF_STAGE_FREE, LF_STAGED, LF_FOLD_OPEN, LF_FOLD_ALLOC,
	LF_FOLD_FREE, LF_FOLD_SHEAF, LF_FOLD_CLOSED, LF_FOLD_DONE, LF_NR,
	/* lane_count_stage and lane_count_commit (the same hook) */
	LC_STAGED = LF_NR, LC_COUNTED, LC_DONE
};

/* A thread is done with its lane: it stays the client's, idle. */
void lane_release(struct shm_lane *l);

/* The client is gone or detached: the lane is free for any client; its
 * counters stay (they keep counting for the next), so sums never go back. */
void lane_free(struct shm_lane *l);

#endif
