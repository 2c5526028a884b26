/*
 * engine.h - the pool engine: creates caches, keeps every barn of a node
 * between its watermarks (one worker thread per node, asleep on the node's
 * doorbell when there is nothing to do), shrinks, and repairs after a dead
 * client.  sheafd hosts it; a local pool (client/pool_local.c) hosts it in
 * the application's own process.
 *
 * Who may call: the hosting process only.  engine_* control functions are
 * serialised by the engine's control lock; workers run concurrently.
 * Errors: 0 or -errno, with a message in the caller's @err buffer.
 *
 * shm/engine/ holds what only the engine runs; this header is the API of
 * the first five files, the others have a header each:
 *   engine.c        init/fini, the sheaf flush every part shares
 *   worker.c        node workers and their stocking pass
 *   cache.c         cache create/destroy, in-use counts, shrink
 *   queue.c         shared queue create/destroy, adoption of queues
 *   repair.c        a dead client's repair, adoption after sheafd died
 *   ring_rebuild.c  spoiled rings found and rebuilt (ring_rebuild.h)
 *   grace.c         the grace-period thread of deferred frees (grace.h)
 *   slab.c          slabs and node frame allocators (slab.h)
 *   owner.c         owned caches: a dead client's objects (owner.h)
 *   names.c         the name directory's writes, adoption (names.h)
 *   clients.c       client slots: attach, detach (clients.h)
 *   check.c         the pool checker (check.h)
 *   adopt_vet.c     an adopted region's validation (adopt_vet.h)
 *   internal.h      helpers shared by the engine's own files
 * What any process of the pool may run (the ring, barns, lanes, queues,
 * name reads, the checks of a create request) is in shm/ itself.
 *
 * Lock order (docs/design.md, "Lock order"): ctl_lock, then cache-node locks
 * one at a time (slab.h), then a node-allocator lock.  Workers never take
 * ctl_lock; engine_stop (which joins them) is called with no lock held.  A
 * remote node's slabs are only try-locked by a refill.  No lock is held
 * across the worker's futex wait on its doorbell.
 */
#ifndef SHEAF_SHM_ENGINE_ENGINE_H
#define SHEAF_SHM_ENGINE_ENGINE_H

#include <pthread.h>
#include <stdint.h>
#include "shm/cache_desc.h"
#include "shm/pool.h"

struct engine {
	struct shm_pool *pool;
	pthread_mutex_t ctl_lock;          /* serialises control calls; the
					    * outermost engine lock */
	struct shm_lane *ctl_lane;         /* intent record of control calls */
	struct shm_lane *worker_lane[SHEAF_MAX_NODES];
	pthread_t worker[SHEAF_MAX_NODES];
	uint32_t nworkers;
	/* Each node's worker alone: its last pass served a waiting client
	 * (engine/worker.c: only then does it stay awake a while), and one
	 * of them waited on the worker's own CPU (then it does not). */
	uint8_t served_waiter[SHEAF_MAX_NODES];
	uint8_t served_here[SHEAF_MAX_NODES];
	/* Each node's worker: odd while it is in a pass (engine_shrink waits
	 * for a pass that may hold a sheaf it took from a barn). */
	_Atomic uint32_t pass_seq[SHEAF_MAX_NODES];
	_Atomic int stop;                  /* seq_cst: asks the workers to exit */
	uint32_t *ids;                     /* under ctl_lock: sheaf id buffer */
	struct grace *grace;               /* deferred frees (grace.h) */
	/* Owned caches (owner.h), under ctl_lock: objects of dead clients
	 * freed and kept since start, and repairs that ran out of memory. */
	uint64_t owner_freed, owner_kept, owner_enomem;
	/* Topics (topic.c), under ctl_lock: objects the engine freed for
	 * subscribers that left or died, and at destroys. */
	uint64_t topic_freed;
	struct ring_rebuild_state *rebuild; /* spoiled-ring rebuilds (ring_rebuild.h) */
	/* Per barn (cache * SHEAF_MAX_NODES + node), its node's worker
	 * alone: what the barn looked like after a pass served its waiters
	 * (engine/worker.c, waiters_real). */
	struct barn_served *served;
};

int engine_init(struct engine *e, struct shm_pool *p, char *err, size_t errlen);

/*
 * Adopt a region whose previous engine is gone (sheafd restarted with the
 * memfd from systemd's fd store): rebuild the engine's metadata
 * (slab_rebuild), roll back the dead engine's ring operations and return
 * the sheaves it held (their objects validated back into the slabs).  Call
 * before engine_init.  Returns the number of sheaves recovered.
 */
int engine_adopt(struct shm_pool *p);
/* Make every DYING cache LIVE again (a destroy that died with its engine
 * decided nothing); engine_adopt does it first. */
void engine_caches_revive(struct shm_pool *p);
/* Start one worker per node (threads bound to the node when it is real). */
int engine_start(struct engine *e, char *err, size_t errlen);
/*
 * pthread_create for the engine's threads (node workers, grace) and
 * sheafd's own (the pool check): the new thread blocks every asynchronous
 * signal, so that a process-wide one (SIGTERM, SIGHUP, an application's)
 * goes to a thread that expects it: sheafd's event loop, a local pool's
 * application.  Faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP) stay
 * deliverable.  0 or a positive errno, as pthread_create.
 */
int engine_thread_create(pthread_t *t, void *(*fn)(void *), void *arg);
/* Stop and join the workers (engine_start starts them again). */
void engine_stop(struct engine *e);
/* Stop the workers and release the engine's lanes. */
void engine_fini(struct engine *e);

/* Create cache @name; its id, or -EEXIST / -EINVAL / -ENOSPC. */
int engine_cache_create(struct engine *e, const char *name,
			const struct cache_params *cp,
			char *err, size_t errlen);

/*
 * Destroy cache @cache: refused with -EBUSY while objects are in use, a
 * client holds one of its sheaves, or a client thread stays inside its
 * barns (it is DYING meanwhile: client slow paths wait); otherwise its
 * barns are emptied, its slabs released and its slot freed (a later cache
 * there gets a new generation).  0 or -errno with @err.
 */
int engine_cache_destroy(struct engine *e, uint32_t cache, char *err, size_t errlen);
/* How long (ms) a destroy waits for a client thread to leave the cache's
 * barns: 250; the fuzzer (tests/fuzz/fuzz_engine.c) sets 0. */
extern uint32_t engine_quiesce_ms;

/* Objects of @cache allocated and not freed, by the lanes' counters. */
int64_t engine_counted_in_use(const struct shm_pool *p, uint32_t cache);

/*
 * Make every live cache's counted in-use equal the checker's walk (a client
 * killed between taking an object and counting it leaves its counters one
 * off): the difference is booked on the control lane as slow-path frees or
 * allocs.  Call with no lock held and no client thread inside the pool
 * (engine_reclaim_client calls it when the last client is gone); it stops
 * and restarts the workers.  Returns the objects booked, or -EAGAIN when the
 * workers could not be restarted.
 */
int64_t engine_reconcile_counts(struct engine *e);

/* One stocking pass over every cache of @node (what a worker does when its
 * doorbell rings).  Returns the number of sheaves refilled or flushed. */
uint32_t engine_node_pass(struct engine *e, uint32_t node, struct ring_intent *in);

/*
 * Flush every full sheaf in the barns of @cache (all caches when < 0) back
 * to slabs and release empty slabs beyond min_partial (@keep_min) or all of
 * them (!@keep_min); a pool-wide shrink (@cache < 0) also gives back the
 * pages of idle sheaves.  Returns slabs released.
 */
int engine_shrink(struct engine *e, int cache, int keep_min);

/*
 * Repair after client @client died (its process must be gone): finish or
 * roll back its ring operations, complete its threads' fast-path counts,
 * flush every sheaf it held back to slabs (all at once per cache, each
 * object once), then free (or keep) the objects
 * of owned caches it still held (owner.h: e->owner_freed, owner_kept and
 * each cache's counters), take back its lane grants and free its slot (a revoked
 * slot stays revoked: engine_revoke_client).
 * When no client is left, the counters are reconciled with the pool
 * (engine_reconcile_counts).  Returns the number of sheaves reclaimed.
 * Call with no lock held (it may stop and restart the workers).
 */
int engine_reclaim_client(struct engine *e, uint32_t client);
#ifdef SHEAF_TEST_HOOKS
/* Tests only (libsheaf-test.a): called by the repair each time objects of
 * @cache went back to the slabs, where a worker's refill may take them. */
extern void (*repair_flushed_hook)(struct shm_pool *p, uint32_t cache);
#endif

/*
 * Revoke live client @client, whose process may still run (sheafd caught
 * it at what libsheaf never does): the same repair as
 * engine_reclaim_client, but its slot becomes CLIENT_REVOKED, stamped
 * @now (seconds), not free.  The repair when its process is gone
 * (engine_reclaim_client) takes back what it grabbed meanwhile and keeps
 * the slot revoked.  Returns the number of sheaves reclaimed.
 */
int engine_revoke_client(struct engine *e, uint32_t client, uint64_t now);

/*
 * Shared queues (engine/queue.c; the ring is shm/queue.c's, and so is the
 * check of a create request, queue_params_check).  Create queue @name of
 * @capacity slots (0: 1024; else rounded up to a power of two, at most 2^20):
 * its id, or -EEXIST, -EINVAL, -ENOSPC (no descriptor slot), -ENOMEM (no
 * frames under the cap), -EFBIG (a pool of 32 GiB of data or more).  Destroy
 * queue @id: 0, or -ENOENT, -EBUSY while it holds objects.
 * engine_queues_adopt (engine_adopt): give back the frames of a create or
 * destroy that died, quarantine (QUEUE_BROKEN) descriptors that no create
 * makes.
 */
int engine_queue_create(struct engine *e, const char *name, uint32_t capacity,
			uint32_t flags, char *err, size_t errlen);
int engine_queue_destroy(struct engine *e, uint32_t id, char *err, size_t errlen);
void engine_queues_adopt(struct shm_pool *p);

/*
 * Topics (engine/topic.c; the log is shm/topic.c's, and so is the check of
 * a create request).  Create topic @name: its id.  Destroy topic @id: 0,
 * -ENOENT, -EBUSY while a subscriber is joined.  Join topic @id for client
 * @client: 0 with the slot and its generation; -ENOSPC when all slots are
 * taken.  Leave slot @slot (it must be @client's): 0 or -ENOENT.
 * engine_topics_reclaim (engine_reclaim_client, under ctl_lock, before the
 * owned-cache repair): dead @client's subscriptions left, its claims
 * undone, its objects in topics tagged QUEUED.  engine_topics_adopt
 * (engine_adopt): as engine_queues_adopt.
 */
int engine_topic_create(struct engine *e, const char *name, uint32_t capacity,
			uint32_t history, uint32_t policy, char *err, size_t errlen);
int engine_topic_destroy(struct engine *e, uint32_t id, char *err, size_t errlen);
int engine_topic_join(struct engine *e, uint32_t id, uint32_t client, uint32_t *slot,
		      uint32_t *gen, char *err, size_t errlen);
int engine_topic_leave(struct engine *e, uint32_t id, uint32_t slot, uint32_t client,
		       char *err, size_t errlen);
void engine_topics_reclaim(struct engine *e, uint32_t client);
void engine_topics_adopt(struct shm_pool *p);
#endif
