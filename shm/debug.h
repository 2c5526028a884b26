/*
 * debug.h - assertions and lock-order checks of the SHEAF_DEBUG build
 * (`make DEBUG=1`, into build-debug/); in a release build every macro here
 * compiles to nothing and the lock helpers to the bare pthread calls.
 *
 * Who may call: any module of sheaf (shm/, client/, daemon/).
 *
 *   SHEAF_ASSERT(cond)       abort with file:line, function and the
 *                            expression when @cond is false.  The release
 *                            build does not evaluate @cond (no side effects
 *                            in it).
 *   SHEAF_ASSERT_HELD(m)     the calling thread holds mutex @m, taken with
 *   SHEAF_ASSERT_NOT_HELD(m) lock_acquire/lock_tryacquire (or does not).
 *   lock_acquire(m, rank)    pthread_mutex_lock; in debug also checks the
 *                            lock order: every lock the thread holds has a
 *                            lower rank (enum lock_rank).
 *   lock_tryacquire(m, rank) pthread_mutex_trylock (0 or EBUSY); no order
 *                            check: a try-lock cannot deadlock, which is why
 *                            out-of-order locks are only ever try-locked.
 *   lock_release(m)          pthread_mutex_unlock.
 *
 * Rule: never assert on what a client can write (anything at or after
 * off_rw in the region: rings, owners[], sheaves, lanes): such values are
 * validated and refused, never trusted, so a client's scribble must not be
 * able to abort sheafd even in a debug build.  Assert on the engine-owned
 * part, on process memory and on a caller's own arguments.
 *
 * How "held" is known: each thread keeps, in thread-local memory, the
 * mutexes it took through lock_acquire/lock_tryacquire.  That answers "held
 * by this thread" exactly without reading the mutex: a mutex in the shared
 * region held by another thread or another process is simply not in this
 * thread's set, and nothing is added to the region's layout.  Locks taken
 * with a bare pthread_mutex_lock are unknown to it, so every taker of a lock
 * that some function asserts must go through these helpers (engine/slab.c does).
 */
#ifndef SHEAF_SHM_DEBUG_H
#define SHEAF_SHM_DEBUG_H

#include <pthread.h>

/*
 * Lock ranks: a thread may block on a lock only while every lock it holds
 * has a lower rank; docs/design.md, "Lock order", has the table.  Client-
 * library locks and engine locks never nest with each other today; they
 * are ranked client first so that one total order covers both.
 */
enum lock_rank {
	LOCK_RANK_POOL_HANDLES = 10,   /* client: sheaf_pool.lock (handles[]) */
	LOCK_RANK_REGISTRY     = 20,   /* client: thread.c slots_lock */
	LOCK_RANK_POOL_RPC     = 30,   /* client: rpc_conn.lock (rpc.h, a leaf) */
	LOCK_RANK_NUMA         = 35,   /* client: thread.c numa_lock (a leaf) */
	LOCK_RANK_ENGINE_CTL   = 40,   /* engine: struct engine ctl_lock */
	LOCK_RANK_CACHE_NODE   = 50,   /* engine: shm_cache_node.lock */
	LOCK_RANK_NODE_ALLOC   = 60,   /* engine: shm_node_alloc.lock (a leaf) */
};

#if defined(SHEAF_DEBUG) && SHEAF_DEBUG

__attribute__((noreturn, cold))
void sheaf_assert_fail(const char *expr, const char *file, int line,
		       const char *func);

#define SHEAF_ASSERT(cond)                                                  \
	(__builtin_expect(!!(cond), 1) ? (void)0                             \
		: sheaf_assert_fail(#cond, __FILE__, __LINE__, __func__))

/* debug.c: the calling thread's set of held locks.  lock_debug_acquire
 * checks the order, then locks @m (@trylock 0) or records @m that a
 * successful trylock took (@trylock 1). */
void lock_debug_acquire(pthread_mutex_t *m, int rank, int trylock,
			const char *file, int line, const char *func);
void lock_debug_release(pthread_mutex_t *m, const char *file, int line,
			const char *func);
int lock_debug_held(const pthread_mutex_t *m);

#define SHEAF_ASSERT_HELD(m)     SHEAF_ASSERT(lock_debug_held(m))
#define SHEAF_ASSERT_NOT_HELD(m) SHEAF_ASSERT(!lock_debug_held(m))

#define lock_acquire(m, rank)                                               \
	lock_debug_acquire((m), (rank), 0, __FILE__, __LINE__, __func__)
#define lock_tryacquire(m, rank)                                            \
	lock_debug_try((m), (rank), __FILE__, __LINE__, __func__)
#define lock_release(m)                                                     \
	lock_debug_release((m), __FILE__, __LINE__, __func__)

static inline int lock_debug_try(pthread_mutex_t *m, int rank, const char *file,
				 int line, const char *func)
{
	int rc = pthread_mutex_trylock(m);

	if (rc == 0)
		lock_debug_acquire(m, rank, 1, file, line, func);
	return rc;
}

#else /* release */

#define SHEAF_ASSERT(cond)       ((void)sizeof((cond) ? 1 : 0))
#define SHEAF_ASSERT_HELD(m)     ((void)sizeof(m))
#define SHEAF_ASSERT_NOT_HELD(m) ((void)sizeof(m))

static inline void lock_acquire(pthread_mutex_t *m, int rank)
{
	(void)rank;
	pthread_mutex_lock(m);
}

static inline int lock_tryacquire(pthread_mutex_t *m, int rank)
{
	(void)rank;
	return pthread_mutex_trylock(m);
}

static inline void lock_release(pthread_mutex_t *m)
{
	pthread_mutex_unlock(m);
}

#endif /* SHEAF_DEBUG */

#endif
