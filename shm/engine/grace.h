/*
 * grace.h - grace periods for deferred frees (client/sheaf.h:
 * sheaf_free_deferred, sheaf_read_lock, sheaf_synchronize, sheaf_barrier),
 * the engine's side.  The clients' side is client/deferred.c, and the
 * thread's doorbell shm/grace_bell.h.
 *
 * Who may call: the engine's hosting process only (sheafd, or a local
 * pool).  grace_start/grace_stop run with engine_start/engine_stop; the
 * rest from the control side (repair, adoption, destroy) or sheafd's
 * request handlers (grace_report: lock-free reads).  No lock: the thread's
 * state is its own; the report's fields are atomics.
 *
 * One grace-period thread per engine
 *   - drains the rcu ring (ring_rcu_id) of deferred sheaves handed over by
 *     clients, each stamped with the gp_seq its writer read after its
 *     unlinks (struct shm_sheaf.gp);
 *   - runs grace periods while sheaves wait, a client asked for one (the
 *     word shm_rcu.req changed since the thread last read it, whatever its
 *     value), or none completed for GRACE_BEAT_NS (what bounds a waiter
 *     whose request a scribbler hid): gp_seq := cur; membarrier (or a
 *     fence); scan the lanes of clients until each rcu_ctr is 0 or
 *     stamped >= cur; gp_done := cur;
 *   - hands a sheaf stamped e to its barn (or flushes it to the slabs)
 *     once gp_done > e, and publishes gp_released: only once every sheaf
 *     the owner table placed in the rcu ring before the drain was drained
 *     (a spoiled ring's sheaves out of reach hold it back until the
 *     rebuild, engine/ring_rebuild.c, claims them back), and never past
 *     the stamp of a sheaf a rebuild held (grace_hold) that waits still.
 * The algorithm and its crash argument: docs/design.md, "Deferred frees".
 */
#ifndef SHEAF_SHM_ENGINE_GRACE_H
#define SHEAF_SHM_ENGINE_GRACE_H

#include <pthread.h>
#include <stdint.h>
#include "shm/pool.h"

struct engine;

struct grace {
	struct engine *e;
	struct shm_lane *lane;           /* the thread's ring intent */
	pthread_t thread;
	int running;
	int membarrier;                  /* GLOBAL_EXPEDITED works here */
	uint64_t cur;                    /* grace period in progress, 0: none */
	int64_t cur_start_ns;
	int64_t done_ns;                 /* when the last one completed */
	uint64_t req_seen;               /* shm_rcu.req as last read */
	uint32_t n;                      /* pending sheaves */
	uint32_t *ids;                   /* [sheaf_count] */
	uint64_t *ep;                    /* their stamps */
	uint64_t *orig;                  /* their stamps before a rebuild's hold */
	uint8_t *node;                   /* the node their waiting count is on */
	/* Per sheaf: the gp_seq at which a rcu ring rebuild claimed it back,
	 * 0 none (grace_hold); read and cleared by the drain.  nhold: how
	 * many are set.  Written by the rebuilding worker, so atomics. */
	_Atomic uint64_t *hold;
	_Atomic uint32_t nhold;
	uint32_t *seen;                  /* [sheaf_count] sheaves in the rcu
					    ring before a drain (stuck check) */
	/* Per lane: since when (CLOCK_MONOTONIC ns) it holds the grace
	 * period in progress back, 0 when it does not (grace_report). */
	_Atomic int64_t block_since[SHEAF_MAX_LANES];
	/* Per lane: a stale rcu_ctr of a lane no client holds was counted
	 * (UT_LANE) and is ignored; cleared when the word is 0 again. */
	uint8_t ignored[SHEAF_MAX_LANES];
};

/* The longest an engine goes without a grace period while idle: a client
 * whose request word was hidden (rewritten to the value the thread last
 * read) waits at most about this, plus the thread's idle wait. */
#define GRACE_BEAT_NS 500000000L

/* Set up / tear down @e's grace-period state (engine_init, engine_fini).
 * 0 or -ENOMEM. */
int grace_init(struct engine *e);
void grace_fini(struct engine *e);

/* Start / stop the grace-period thread (engine_start, engine_stop; the
 * stop flag is the engine's). */
int grace_start(struct engine *e);
void grace_stop(struct engine *e);

/* One pass of the grace-period thread (drain the rcu ring, release what is
 * due, start or finish a grace period), run by the caller while the thread
 * is stopped: for the fuzzer (tests/fuzz/fuzz_engine.c).  1 when it did
 * something. */
int grace_step(struct engine *e);

/*
 * A repair took back sheaf @s (owned by @me now): if it holds deferred
 * frees (SHEAF_F_DEFERRED, client-written), stamp it with gp_seq now (its
 * writer is dead: every unlink it made came before) and put it in the rcu
 * ring (a spoiled ring that refuses it: placed there by its owner entry
 * alone, for the rebuild to claim back).  Returns 1 when it did so (the
 * caller forgets the sheaf), 0 when the sheaf is not deferred.
 */
int grace_requeue(struct shm_pool *p, uint32_t s, uint32_t me, struct ring_intent *in);

/*
 * A rebuild of the rcu ring (engine/ring_rebuild.c) is about to claim
 * sheaf @s back: it waits for a grace period that starts after now, on top
 * of its own stamp, and gp_released stays below its stamp until the drain
 * took it again.  grace_unhold: the claim failed.  Any engine thread.
 */
void grace_hold(struct engine *e, uint32_t s);
void grace_unhold(struct engine *e, uint32_t s);

/* Objects of @cache that wait for a grace period in @e (the thread
 * stopped: engine_cache_destroy refuses the destroy while any do). */
uint64_t grace_cache_waiting(struct engine *e, uint32_t cache);

/* A lane that holds the grace period in progress back. */
struct grace_blocker {
	uint32_t lane;
	uint32_t client;
	uint32_t pid;
	uint64_t blocked_ms;
};

/* Up to @max lanes holding the grace period back, longest first not
 * guaranteed; returns how many were written. */
uint32_t grace_report(struct engine *e, struct grace_blocker *out, uint32_t max);

#endif
