/*
 * internal.h - libsheaf's private structures and the calls its files make
 * of one another, shared by the files of client/ only (never installed).
 * The structures come first; then one block per source file, headed by
 * its name, in the order of the object path (a thread's state, the cache
 * handshake, alloc and free and the files they call, bulk), then the
 * rest.  The two kinds of pool are behind pool_ops.h; the connection to
 * sheafd is rpc.h's, the check of a full sheaf vet.h's, the owner-tag
 * hooks of the shared queues owner_handoff.h's.
 *
 * Per process: struct sheaf_pool (a mapped region and, for a local pool, its
 * engine) and struct sheaf_cache handles, each with a process-wide slot.
 * Per thread: struct tstate (all the thread's tcaches and per-pool lanes,
 * and the array of fast paths by handle slot that sheaf__tls_bias leads
 * the inline paths to; a debug or owned cache's entry stays unused so
 * that it always takes the slow path, checked or tagged).
 *
 * Lock order (docs/design.md, "Lock order"): pool->lock, then thread.c's
 * slots_lock; pool->conn.lock (rpc.h) and thread.c's numa_lock are
 * leaves (conn.lock is held across a round trip with sheafd).  None of
 * these nests with the engine's locks (shm/engine/engine.h); none is held
 * across a wait for supply.
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
 * A pool of either kind.  @ops is the kind (pool_ops.h): pool_local.c's,
 * whose @engine runs in this process, or pool_sheafd.c's, which talks to
 * sheafd over @conn.  Only that kind's file uses its fields; the rest are
 * for any file of client/.
 */
/*
 * The lanes the engine granted this process (META's grant table), which of
 * its threads uses each being this process's own business (thread.c): a
 * thread takes one here, under @mu, never by a SHARED word another client
 * could write.  @known: a bit per lane of the pool, set once the lane is in
 * @idx; @st[i]: LS_NEW (granted, never taken by us), LS_IDLE, LS_BUSY.
 * @at_cap: the engine said we hold our most (asking again would revoke us).
 */
struct lane_set {
	pthread_mutex_t mu;
	uint32_t n, room;
	uint32_t *idx;
	uint8_t *st;
	uint64_t *known;
	int at_cap;
};

struct sheaf_pool {
	struct sheaf__pool_head head; /* first: sheaf.h's size-class fast paths
					 (kmalloc.c fills it) */
	struct shm_pool shm;
	const struct pool_ops *ops;
	struct engine engine;        /* local pools only (pool_local.c) */
	struct rpc_conn conn;        /* pools of sheafd only (pool_sheafd.c;
					pool.c sets its timeout for either) */
	int forked;                  /* this process is a fork() child */
	int closing;                 /* sheaf_pool_destroy began: the trimmer
					leaves it alone (under slots_lock) */
	uint32_t slot;               /* index in the process's pool slots */
	uint32_t gen;                /* generation of this pool in its slot */
	uint32_t client;             /* our client id in the region */
	int64_t wait_ns;
	_Atomic int rcu_mode;        /* deferred.c: 0 unknown, RCU_NOFENCE, RCU_FENCE */
	pthread_mutex_t lock;        /* handles[]; before slots_lock */
	sheaf_cache_t *handles[SHEAF_MAX_CACHES];   /* by cache id < shm.max_caches */
	struct lane_set lanes;       /* thread.c */
	/* kmalloc.c: the handles of the size classes above the inline
	 * table's (head.large[]), by log2 of the class size; atomic
	 * pointers as there. */
	sheaf_cache_t *km_large[SHEAF_KMALLOC_LOG_MAX + 1];
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
	 * (shm/engine/cache.c); the generation is written before them. */
	uint32_t st = at_load_acquire(&c->sc->state);

	return (st == CACHE_LIVE || st == CACHE_DYING) &&
	       at_load_relaxed(&c->sc->generation) == c->gen;
}

/* Per thread, per pool. */
struct tpool {
	struct shm_lane *lane;
	struct shm_qrec *qrec;       /* the lane's queue record (client/queue.c) */
	uint32_t gen;                /* pool generation the lane belongs to */
	uint32_t lane_slot;          /* its index in pool->lanes.idx */
	uint32_t node;               /* home node */
	uint32_t rcu_nest;           /* sheaf_read_lock depth (deferred.c) */
	/* Who may use the lane for the thread's caches of the pool: 0 none,
	 * TP_HOLD_OWNER its thread (tcache_enter to tcache_leave, @depth
	 * deep), TP_HOLD_TRIM the process's trimmer (trim.c), which only
	 * ever tries. */
	_Atomic uint32_t hold;
	uint32_t depth;              /* the thread's own: nested enters */
};

#define TP_HOLD_OWNER 1u
#define TP_HOLD_TRIM  2u

#define STASH_TARGET_MIN 1u

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
	 * (exchange.c's stash_room: at most STASH_MAX each, STASH_BYTES of objects) */
	struct shm_sheaf *stash_full[SHEAF_STASH_LIMIT];
	struct shm_sheaf *stash_empty[SHEAF_STASH_LIMIT];
	uint32_t nfull, nempty;
	/* How many of each kind the thread keeps now (at most stash_room):
	 * STASH_TARGET_MIN at first and after an idle tick of the trimmer,
	 * which takes the stash back (trim.c); grown each time a sheaf went
	 * to the barn for want of room (exchange.c).  Under the tpool's hold. */
	uint32_t stash_target;
	uint32_t enters;             /* tcache_enter calls: trim.c's clock */
	uint32_t enters_seen;        /* @enters at the trimmer's last tick */
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
	struct tstate *next, *prev;  /* the process's tstates, under slots_lock
					(trim.c walks them) */
} __attribute__((aligned(64)));

extern struct shm_sheaf sheaf_dummy;    /* thread.c */

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

static inline uint32_t sheaf_index(const struct tcache *t, const struct shm_sheaf *s)
{
	return pool_sheaf_id(&t->cache->pool->shm, s);
}

/* ---- thread.c: the process's pool and handle slots, each thread's state -- */

extern __thread struct tstate *tls_state __attribute__((tls_model("initial-exec")));

/* The calling thread's fast paths by handle slot, once it has a tstate
 * (tests read them). */
#define sheaf__tls_fast (tls_state->fast)

struct tcache *tcache_get_slow(sheaf_cache_t *c);   /* NULL + errno */

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
/* The registry lock (docs/design.md, "Lock order"): pool slots, handle
 * slots, every thread's tstate and tcaches as trim.c sees them. */
extern pthread_mutex_t slots_lock;
/* @pool is in its slot, of generation @gen (under slots_lock). */
int slots_pool_live(const sheaf_pool_t *pool, uint32_t gen);
/* Before a pool's engine or connection closes: once this returns the
 * trimmer (trim.c) touches none of its sheaves. */
void slots_close_pool(sheaf_pool_t *pool);
struct tpool *thread_tpool(sheaf_pool_t *pool);     /* NULL + errno */
void thread_flush_pool(sheaf_pool_t *pool);         /* calling thread only */
void lanes_init(sheaf_pool_t *pool);                /* pool constructors */
void lanes_fini(sheaf_pool_t *pool);                /* sheaf_pool_destroy */
/* Put @pool in a free pool slot, with a new generation and its size-class
 * hint (before the pool is given out): 0, or -EMFILE when all
 * SHEAF_POOLS_MAX are taken. */
int slots_add_pool(sheaf_pool_t *pool);
/* Take @pool out of its slot, and free the handle slots of its caches. */
void slots_remove_pool(sheaf_pool_t *pool);
/* A handle for cache @id of @pool in a free handle slot; NULL with errno
 * EMFILE when none is free. */
sheaf_cache_t *slots_new_handle(sheaf_pool_t *pool, uint32_t id);
/* Per pool slot, the generation of the pool connected there (0:
 * none); sheaf.h's inline read sections compare it (never freed). */
extern uint32_t slots_live_gen[SHEAF_POOLS_MAX];
/* What leads sheaf.h's sheaf_malloc and sheaf_free_any to the thread's
 * struct sheaf__km_hint in the pool of slot @pool_slot (a handle slot
 * never given out, KM_HINT_SLOT + @pool_slot: its handle plus
 * sheaf__tls_bias, as for a fast path). */
#define KM_HINT_SLOT SHEAF_HANDLES_MAX
const void *slots_km_hint(uint32_t pool_slot);

/* ---- cache.c: a thread's handshake with a cache destroy, handles by id --- */

/* Around anything that touches the cache's barns (a slow path, a flush),
 * so that engine_cache_destroy never races it: 0 (then call tcache_leave),
 * -ESTALE (the cache is gone) or -EAGAIN (a destroy stayed undecided for
 * wait_ms: its engine died). */
int tcache_enter(struct tcache *t);
void tcache_leave(struct tcache *t);
/* The thread's hold on @tp alone (tcache_enter takes it first): for what
 * reads or writes its stashes outside a slow path (prefill.c). */
void tpool_hold(struct tpool *tp);
void tpool_unhold(struct tpool *tp);
/* The process's handle of the live cache @id of @pool (made on first
 * use); NULL with errno EINVAL (no live cache there) or EMFILE. */
sheaf_cache_t *cache_handle_by_id(sheaf_pool_t *pool, uint32_t id);

/* ---- the object path: helpers of alloc.c, free.c and the files they call - */

static inline struct shm_pool *tshm(const struct tcache *t)
{
	return &t->cache->pool->shm;
}

/* Our client id in the pool. */
static inline uint32_t me_of(const struct tcache *t)
{
	return t->cache->pool->client;
}

/* The lane's ring intent, for the barn's rings (shm/ring.h). */
static inline struct ring_intent *intent_of(const struct tcache *t)
{
	return &t->tp->lane->intent;
}

static inline void stat_inc(struct tcache *t, enum sheaf_stat s)
{
	at_counter_add(&tstat(t)[s], 1);
}

/* A push or pop of the slow path and its count (shm/lanes.h). */
static inline void count_stage(struct tcache *t, struct shm_sheaf *s, uint32_t size,
			       enum sheaf_stat st)
{
	lane_count_stage(&t->cache->pool->shm, t->tp->lane, t->f->cache_id, st,
			 sheaf_index(t, s), size);
}

static inline void count_commit(struct tcache *t)
{
	lane_count_commit(&t->cache->pool->shm, t->tp->lane);
}

static inline uint32_t cache_capacity(const struct tcache *t)
{
	return at_load_relaxed(&t->cache->sc->sheaf_capacity);
}

/* The capacity barn sheaves get when sheaves are disabled for threads. */
static inline uint32_t barn_capacity(const struct tcache *t)
{
	uint32_t cap = cache_capacity(t);
	return cap ? cap : cache_default_capacity(t->cache->sc->obj_size);
}

/* Debug caches keep an in-use bit per object (debug_track.c). */
static inline int is_debug(const struct tcache *t)
{
	return (t->cache->sc->flags & SHEAF_CACHE_F_DEBUG) != 0;
}

/* Owned caches (shm/owner.h) tag each object with its holder, in the slow
 * path (their inline paths always miss, thread.c; owned_fast.c). */
static inline int is_owned(const struct tcache *t)
{
	return (t->cache->sc->flags & SHEAF_CACHE_F_OWNED) != 0;
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

/* ---- alloc.c: sheaf_alloc's slow path ------------------------------------ */

/* Nothing for other files: sheaf__alloc_slow is sheaf.h's. */

/* ---- free.c: sheaf_free's slow path -------------------------------------- */

/* Nothing for other files: sheaf__free_slow is sheaf.h's. */

/* ---- owned_fast.c: an owned cache's fast paths, out of line -------------- */

/*
 * The pop and the push of sheaf.h's inline paths, with the object's owner
 * tag (shm/owner.h); for an owned cache that is not a debug cache.  NULL
 * / 0: take the slow path; the free's 1: done, with *@rc (0, or -EALREADY:
 * the object's tag says nobody held it).
 */
void *owned_alloc_fast(sheaf_cache_t *c);
int owned_free_fast(sheaf_cache_t *c, void *obj, int *rc);
/* The owner tag of object @off of @t's cache (validated: a frame of the
 * cache, an object boundary). */
_Atomic otag_t *owned_tag_of(struct tcache *t, uint64_t off);

/* ---- exchange.c: whole sheaves with the barn, and the thread's stash ----- */

/* A full sheaf of node @node's barn (vetted), waiting for the engine if
 * needed; when this node is starved, what other nodes' barns hold.  NULL
 * with errno ENOMEM (starved everywhere) or EAGAIN (timeout). */
struct shm_sheaf *exchange_get_full(struct tcache *t, uint32_t node);
/* An empty sheaf bound to (cache, @node), waiting for the engine's flushes
 * if every sheaf of the pool is full.  NULL with errno EAGAIN on timeout. */
struct shm_sheaf *exchange_get_empty(struct tcache *t, uint32_t node, uint32_t cap);
/* An empty sheaf for (cache, @node) if there is one at once: the barn's
 * empty ring or the depot; else NULL. */
struct shm_sheaf *exchange_empty_now(struct tcache *t, uint32_t node, uint32_t cap);
/* Hand sheaf @s back to its barn: the full ring if it holds objects (and
 * a doorbell for a flush when the barn is over its limit), else the empty
 * ring. */
void exchange_put(struct tcache *t, struct shm_sheaf *s);
/* The main sheaf @m that a new main replaces: the spare when there is none,
 * else kept in @stash (the stash of its kind, *@n in it) while room is
 * left, else back to the barn; the dummy is nobody's. */
void exchange_retire_main(struct tcache *t, struct shm_sheaf *m, struct shm_sheaf **stash,
			  uint32_t *n);
/* Before waiting for an empty sheaf: hand the thread's full sheaves beyond
 * main to the barn, where other threads' allocs can use them and the
 * engine flushes them for a waiting free (shm/engine/worker.c). */
void exchange_give_back_full(struct tcache *t);

/* ---- trim.c: the process's trimmer of idle threads' stashes ------------- */

/* A sheaf went into a stash: wake (or start) the trimmer. */
void trim_kick(void);
/* The process's tstates, for the trimmer's walk: under slots_lock. */
void trim_link(struct tstate *ts);
void trim_unlink(struct tstate *ts);
/* In a fork() child, before anything else (thread.c's atfork_child). */
void trim_forget_fork(void);
/* Sheaves the trimmer took back from idle threads so far (tests). */
uint64_t trim_sheaves_taken(void);

/* ---- debug_track.c: a debug cache's in-use bits --------------------------- */

/* Whether @off (validated) is allocated. */
int debug_track_allocated(struct tcache *t, uint64_t off);
/* Set @off's bit: before the pop that hands it out. */
void debug_track_mark(struct tcache *t, uint64_t off);
/* For a debug cache, after pushing @off onto @s: clear its bit.  By
 * fetch_and, so that of two racing frees of one object exactly one wins;
 * the loser takes its push back (still on top of @s, which this thread
 * holds): -EALREADY.  0 for any other cache. */
int debug_track_commit_free(struct tcache *t, struct shm_sheaf *s, uint64_t off);

/* ---- bulk.c: runs of objects on the main sheaf ---------------------------- */

/* Nothing for other files: sheaf_alloc_bulk and sheaf_free_bulk are
 * public (prefill.c calls them). */

/* ---- deferred.c: deferred frees and read sections ------------------------- */

/* Forget the thread's inline read-section state (its lane in the pool
 * changes, fork, thread exit). */
void rcu_tls_forget(void);
/* Hand the thread's deferred sheaf of @t to the rcu ring (tcache_flush
 * calls it: thread exit, set_node, shrink, disconnect). */
void deferred_flush(struct tcache *t);

/* ---- kmalloc.c: size classes ---------------------------------------------- */

/* Free what the size-class paths keep for @pool (pool.c, when the pool
 * goes). */
void kmalloc_pool_fini(sheaf_pool_t *pool);

/*
 * Test-only stop points of an owned cache's alloc and free, compiled only
 * with -DSHEAF_TEST_HOOKS (the copies of owned_fast.o, alloc.o and free.o
 * in libsheaf-test.a; release builds have none): when non-NULL, called at
 * each step (enum owned_step) so that a crash test can stop the process
 * there as if it died.
 */
#ifdef SHEAF_TEST_HOOKS
extern void (*owned_stop_hook)(int step);
#define OWNED_STOP(step)                                           \
	do {                                                       \
		if (unlikely(owned_stop_hook != NULL))             \
			owned_stop_hook(step);                     \
	} while (0)
#else
#define OWNED_STOP(step) do { } while (0)
#endif
enum owned_step {
	OS_ALLOC_TAGGED = 1,  /* the tag names the thread, the object still in its sheaf */
	OS_ALLOC_POPPED,      /* popped: held */
	OS_FREE_CLAIMED,      /* the tag names the thread, not yet pushed */
	OS_FREE_PUSHED,       /* in the thread's sheaf, tag not yet cleared */
	OS_FREE_DONE,         /* tag cleared */
	OS_NR
};

#endif
