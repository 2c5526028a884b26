/*
 * internal.h - libsheaf's private structures, shared by the files of
 * client/ only (never installed).
 *
 * Per process: struct sheaf_pool (a mapped region and, for a local pool, its
 * engine) and struct sheaf_cache handles, each with a process-wide slot.
 * Per thread: struct tstate (all the thread's tcaches and per-pool lanes,
 * and the array of fast paths by handle slot that sheaf__tls_bias leads
 * the inline paths to; a debug cache's entry stays unused so that it
 * always takes the checked slow path).
 *
 * Lock order (docs/design.md, "Lock order"): pool->lock, then thread.c's
 * registry_lock; pool->conn.lock (rpc.h) and thread.c's numa_lock are
 * leaves (conn.lock is held across a round trip with sheafd).  None of
 * these nests with the engine's locks (shm/engine.h); none is held across
 * a wait for supply.
 */
#ifndef SHEAF_CLIENT_INTERNAL_H
#define SHEAF_CLIENT_INTERNAL_H

#include <pthread.h>
#include "client/rpc.h"
#include "client/sheaf.h"
#include "shm/lanes.h"
#include "shm/engine/engine.h"
#include "shm/pool.h"

/* Pools open at once in a process, and cache handles over all of them
 * (a handle costs every thread that uses the library 72 bytes of its
 * tstate: fast[] and tc[]). */
#define SHEAF_POOLS_MAX    64u
#define SHEAF_HANDLES_MAX  SHEAF__HANDLES
#define STASH_MAX          SHEAF_STASH_SHEAVES  /* defaults: tunable */
#define STASH_BYTES        SHEAF_STASH_BYTES

/*
 * A pool of either kind.  @ops is the kind (pool_ops.h): local.c's, whose
 * @engine runs in this process, or remote.c's, which talks to sheafd over
 * @conn.  Only that kind's files use its fields; the rest are for any
 * file of client/.
 */
struct sheaf_pool {
	struct sheaf__pool_head head; /* first: sheaf.h's size-class fast paths
					 (kmalloc.c fills it) */
	struct shm_pool shm;
	const struct pool_ops *ops;
	struct engine engine;        /* local pools only (local.c) */
	struct rpc_conn conn;        /* pools of sheafd only (connect.c, remote.c) */
	int forked;                  /* this process is a fork() child */
	uint32_t slot;               /* index in the process's pool registry */
	uint32_t gen;                /* registry generation of this pool */
	uint32_t client;             /* our client id in the region */
	int64_t wait_ns;
	_Atomic int rcu_mode;        /* deferred.c: 0 unknown, RCU_NOFENCE, RCU_FENCE */
	pthread_mutex_t lock;        /* handles[]; before registry_lock */
	sheaf_cache_t *handles[SHEAF_MAX_CACHES];   /* by cache id < shm.max_caches */
};

/* A handle: one of the process's SHEAF_HANDLES_MAX slots of handles[]
 * (thread.c), 64 bytes each like the fast paths in tstate.fast[] (see
 * SHEAF__FAST in sheaf.h). */
struct sheaf_cache {
	uint32_t slot;               /* index in handles[], tstate.fast[], tc[] */
	uint32_t id;                 /* cache id in the region */
	sheaf_pool_t *pool;          /* NULL: a free slot */
	struct shm_cache *sc;
	uint32_t gen;                /* sc->generation of the cache it names:
					another one there makes it stale (its
					slot is never reused while @pool lives) */
} __attribute__((aligned(64)));

/* Whether @c still names its cache (LIVE, or DYING while a destroy
 * decides, and of @c's generation); a stale handle fails with ESTALE. */
static inline int cache_handle_live(const sheaf_cache_t *c)
{
	/* Acquire: pairs with the release stores of the state
	 * (shm/engine_cache.c); the generation is written before them. */
	uint32_t st = at_load_acquire(&c->sc->state);

	return (st == CACHE_LIVE || st == CACHE_DYING) &&
	       at_load_relaxed(&c->sc->generation) == c->gen;
}

/* Per thread, per pool. */
struct tpool {
	struct shm_lane *lane;
	uint32_t gen;                /* pool generation the lane belongs to */
	uint32_t node;               /* home node */
	uint32_t rcu_nest;           /* sheaf_read_lock depth (deferred.c) */
};

/* Per thread, per cache handle.  @f is the fast path's state, laid out for
 * sheaf.h's inline sheaf_alloc/sheaf_free: the thread's entry in
 * tstate.fast, or for a debug cache @own (the inline paths then find an
 * unused entry and always call the slow path).  f->main is the struct
 * shm_sheaf of the main sheaf (never NULL: &sheaf_dummy when none),
 * f->owner the frame_owner[] entries of the home node's frames. */
struct tcache {
	struct sheaf__fast *f;
	struct sheaf__fast own;
	uint32_t node;               /* home node */
	_Atomic uint64_t *stat;      /* lane->stat[cache id] */
	struct shm_sheaf *spare;     /* NULL when none */
	/* More sheaves kept by the thread, beyond main and spare: full ones
	 * it filled and empty ones it emptied, reused before the barn's
	 * (alloc.c's stash_room: at most STASH_MAX each, STASH_BYTES of objects) */
	struct shm_sheaf *stash_full[SHEAF_STASH_LIMIT];
	struct shm_sheaf *stash_empty[SHEAF_STASH_LIMIT];
	uint32_t nfull, nempty;
	struct shm_sheaf *remote[SHEAF_MAX_NODES];
	sheaf_cache_t *cache;
	struct tpool *tp;
	uint32_t gen;
	struct shm_sheaf *deferred;  /* deferred frees being collected (deferred.c) */
};

/* Per thread; sheaf__tls_bias leads the inline paths to @fast while the
 * thread has a tstate. */
struct tstate {
	struct sheaf__fast fast[SHEAF_HANDLES_MAX + SHEAF_POOLS_MAX];
					/* by handle slot; then kmalloc's
					   hint of each pool slot (KM_HINT_SLOT) */
	struct tcache *tc[SHEAF_HANDLES_MAX];
	struct tpool tp[SHEAF_POOLS_MAX];
} __attribute__((aligned(64)));

extern struct shm_sheaf sheaf_dummy;

/* The main sheaf, as the pool's struct. */
static inline struct shm_sheaf *tmain(const struct tcache *t)
{
	return (struct shm_sheaf *)(void *)t->f->main;
}

static inline void tmain_set(struct tcache *t, struct shm_sheaf *s)
{
	t->f->main = (struct sheaf__sheaf *)(void *)s;
}

static inline _Atomic uint64_t *tstat(const struct tcache *t)
{
	return t->stat;
}

/*
 * Counting the fast paths (struct shm_live): before the slow path changes
 * the main sheaf, fold what the fast paths did on it into the lane's
 * counters; after, publish the main sheaf again.
 */
static inline void tcache_fold(struct tcache *t)
{
	lane_live_fold(&t->cache->pool->shm, t->tp->lane, t->f->cache_id);
}

static inline void tcache_publish(struct tcache *t)
{
	if (t->f->main != (struct sheaf__sheaf *)(void *)&sheaf_dummy)
		lane_live_install(&t->cache->pool->shm, t->tp->lane, t->f->cache_id,
				  pool_sheaf_id(&t->cache->pool->shm, tmain(t)));
}

/* thread.c */
struct tcache *tcache_get_slow(sheaf_cache_t *c);   /* NULL + errno */

extern __thread struct tstate *tls_state __attribute__((tls_model("initial-exec")));
/* thread.c: per registry slot, the generation of the pool connected there
 * (0: none); sheaf.h's inline read sections compare it (never freed). */
extern uint32_t registry_live_gen[SHEAF_POOLS_MAX];
/* deferred.c: forget the thread's inline read-section state (its lane in
 * the pool changes, fork, thread exit). */
void rcu_tls_forget(void);

/* The calling thread's fast paths by handle slot, once it has a tstate
 * (tests read them). */
#define sheaf__tls_fast (tls_state->fast)

/* The calling thread's tcache of @c, made on first use; NULL with errno
 * (ENOMEM, ECHILD in a fork() child, EMFILE: no lane, ESTALE: a handle of
 * a destroyed cache). */
static inline struct tcache *tcache_get(sheaf_cache_t *c)
{
	struct tstate *ts = tls_state;
	struct tcache *t;

	if (likely(ts != NULL && !c->pool->forked) && (t = ts->tc[c->slot]) != NULL &&
	    likely(t->cache == c && t->gen == c->pool->gen && cache_handle_live(c)))
		return t;
	return tcache_get_slow(c);
}
void tcache_flush(struct tcache *t);                /* give sheaves back */
struct tpool *thread_tpool(sheaf_pool_t *pool);     /* NULL + errno */
/* deferred.c: hand the thread's deferred sheaf of @t to the rcu ring
 * (tcache_flush calls it: thread exit, set_node, shrink, disconnect). */
void deferred_flush(struct tcache *t);
/* cache.c: around anything that touches the cache's barns (a slow path, a
 * flush), so that engine_cache_destroy never races it: 0 (then call
 * tcache_leave), -ESTALE (the cache is gone) or -EAGAIN (a destroy stayed
 * undecided for wait_ms: its engine died). */
int tcache_enter(struct tcache *t);
void tcache_leave(struct tcache *t);
void thread_flush_pool(sheaf_pool_t *pool);         /* calling thread only */
int registry_add_pool(sheaf_pool_t *pool);
void registry_remove_pool(sheaf_pool_t *pool);
sheaf_cache_t *registry_new_handle(sheaf_pool_t *pool, uint32_t id); /* NULL: EMFILE */
/* kmalloc.c: free what the size-class paths keep for @pool (pool.c, when
 * the pool goes). */
void kmalloc_pool_fini(sheaf_pool_t *pool);
/* thread.c: what leads sheaf.h's sheaf_malloc and sheaf_free_any to the
 * thread's struct sheaf__km_hint in the pool of slot @pool_slot (a handle
 * slot never given out, KM_HINT_SLOT + @pool_slot: its handle plus
 * sheaf__tls_bias, as for a fast path). */
#define KM_HINT_SLOT SHEAF_HANDLES_MAX
const void *registry_km_hint(uint32_t pool_slot);
/* cache.c: the process's handle of the live cache @id of @pool (made on
 * first use); NULL with errno EINVAL (no live cache there) or EMFILE. */
sheaf_cache_t *cache_handle_by_id(sheaf_pool_t *pool, uint32_t id);

static inline uint32_t sheaf_index(const struct tcache *t, const struct shm_sheaf *s)
{
	return pool_sheaf_id(&t->cache->pool->shm, s);
}

#endif
