/*
 * sheaf.h - libsheaf, the client library of sheaf: fixed-size objects from
 * shared-memory slab pools, with per-thread sheaves.
 *
 * This is the only installed header.  Conventions:
 *   - Functions returning a pointer return NULL and set errno on failure.
 *   - Functions returning int return 0 (or a count) on success and a
 *     negative errno value on failure; errno is left alone.
 *   - Functions taking (char *err, size_t errlen) write a one-line reason
 *     there on failure (err may be NULL).  The library never prints or exits.
 *   - Unknown flag bits are refused with EINVAL.
 *
 * Threads: every function is thread-safe unless noted.  A thread gets its
 * per-cache sheaves on first use (main, spare, and a stash of up to 16 full
 * and 16 empty ones, at most 256 KiB of objects); they go back to the pool
 * when the thread exits (or calls sheaf_thread_exit()).
 *
 * Signals: no function here is async-signal-safe.  Do not call any of them
 * (sheaf_alloc and sheaf_free included) from a signal handler: they take
 * locks, and the inline paths change the thread's sheaves with no guard
 * against a handler re-entering them.
 */
#ifndef SHEAF_H
#define SHEAF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SHEAF_API __attribute__((visibility("default")))
/* sheaf_alloc and sheaf_free are inline where the compiler follows C99's
 * inline rules (see "inline fast paths" below). */
#if defined(__GNUC_STDC_INLINE__) || defined(__cplusplus)
#define SHEAF__INLINE inline
#else
#define SHEAF__INLINE
#endif

typedef struct sheaf_pool sheaf_pool_t;
typedef struct sheaf_cache sheaf_cache_t;
typedef struct sheaf_prefill sheaf_prefill_t;

/* ---- pools ------------------------------------------------------------- */

struct sheaf_pool_config {
	size_t size;            /* data bytes over all nodes; 0: 1 GiB (sparse) */
	unsigned nodes;         /* 0: the machine's NUMA nodes (libnuma);
				   1..8: that many simulated nodes, no binding */
	unsigned sheaf_count;   /* sheaves in the pool; 0: 32768 */
	size_t mem_cap;         /* most bytes of slabs; 0: size */
	unsigned wait_ms;       /* longest wait for the engine; 0: 5000 */
};

/*
 * Create a local pool: a new shared-memory region whose engine (the barn
 * stocking workers, one per node) runs as threads of this process.  @cfg may
 * be NULL for defaults.
 * Returns the pool, or NULL with errno: EINVAL (a config field out of range,
 * named in @err), ENOMEM, EMFILE (too many pools in this process, max 8), or
 * the error of memfd_create/ftruncate/mmap.
 */
SHEAF_API sheaf_pool_t *sheaf_pool_create(const struct sheaf_pool_config *cfg,
					  char *err, size_t errlen);

/*
 * Destroy a pool made by sheaf_pool_create.  The calling thread's sheaves are
 * returned first; every other thread that used the pool must have exited or
 * called sheaf_thread_exit() before.  Objects still allocated are lost with
 * the region.
 */
SHEAF_API void sheaf_pool_destroy(sheaf_pool_t *pool);

#define SHEAF_CONNECT_RELOCATE 0x1u  /* map anywhere if the pool's address is taken */

/*
 * Attach to the sheafd serving @path (NULL or "": $SHEAF_SOCKET, else the
 * default socket, see sheafd --help), as @name (shown by `sheafctl
 * clients`; may be NULL).  The pool is mapped at the address sheafd
 * publishes, so object pointers are valid in every process of the pool; the
 * daemon's metadata is mapped read-only.
 * Returns the pool, or NULL with errno (reason in @err):
 *   ENOENT, ECONNREFUSED  no daemon at that path;
 *   EACCES           sheafd's allow lists refuse this uid/gid;
 *   EPROTONOSUPPORT  the daemon speaks another protocol version;
 *   EADDRINUSE       the pool's address range is taken in this process
 *                    (pass SHEAF_CONNECT_RELOCATE to map it elsewhere;
 *                    pointers then differ between processes: pass offsets);
 *   ENOSPC           sheafd has no free client slot;
 *   ETIMEDOUT        sheafd did not answer within the control timeout
 *                    (sheaf_pool_set_timeout; $SHEAF_RPC_TIMEOUT_MS);
 *   EINVAL           unknown @flags; EMFILE  8 pools already open.
 * If sheafd restarts, the next control request (cache create, stats,
 * shrink, check, capacity) reconnects and resumes this client; allocation
 * and free never need the connection.  If the new daemon did not adopt the
 * pool (it started afresh), control requests fail with ESTALE: disconnect
 * and connect again.
 * fork(): a child cannot use the pools its parent had open (their sheaves
 * belong to the parent): every call on them fails with ECHILD.  The child
 * releases them with sheaf_disconnect() and may then connect on its own.
 */
SHEAF_API sheaf_pool_t *sheaf_connect(const char *path, const char *name,
				      unsigned flags, char *err, size_t errlen);

/*
 * Detach from sheafd: return the calling thread's sheaves, unmap the pool,
 * close the connection (other threads must have exited or called
 * sheaf_thread_exit()).  Objects still allocated stay allocated (another
 * process may hold them).  Same as sheaf_pool_destroy for a connected pool.
 */
SHEAF_API void sheaf_disconnect(sheaf_pool_t *pool);

/*
 * Control requests (cache create, stats, shrink, check, capacity, and the
 * attach inside sheaf_connect) wait for sheafd at most a timeout: 5000 ms
 * by default, or $SHEAF_RPC_TIMEOUT_MS (1..3600000) when sheaf_connect
 * runs, or what this call sets for later requests of @pool.  A request
 * that times out fails with ETIMEDOUT (a hung or stopped daemon); the
 * connection is then dropped and the next request connects again and
 * resumes this client (a request that reconnects may wait twice the
 * timeout).  sheafd takes a client for dead only when its process is gone,
 * never for a dropped connection.  Allocation and free never wait for a
 * reply; they wait for the engine at most wait_ms (5000 ms for a pool of
 * sheafd) and then fail with EAGAIN.
 * Returns 0, -EINVAL (@ms 0 or over 3600000) or -ECHILD.  A local pool
 * accepts the value and has no use for it.
 */
SHEAF_API int sheaf_pool_set_timeout(sheaf_pool_t *pool, unsigned ms);

/* Number of NUMA nodes (real or simulated) of @pool. */
SHEAF_API unsigned sheaf_pool_nodes(const sheaf_pool_t *pool);

/*
 * Set the calling thread's home node in @pool (default: the node of the CPU
 * it first ran on; simulated nodes map CPU c to node c % nodes).  Objects
 * are allocated from the home node's barn; frees of other nodes' objects
 * are collected per node and handed to that node's barn as whole sheaves.
 * The thread's sheaves of @pool are returned first.
 * Returns 0, or -EINVAL if @node >= sheaf_pool_nodes(pool).
 */
SHEAF_API int sheaf_thread_set_node(sheaf_pool_t *pool, unsigned node);

/*
 * Return every sheaf the calling thread holds (of every pool) and release
 * its lanes.  Called automatically at thread exit; calling it earlier is
 * allowed, and the thread may use the pools again afterwards.
 */
SHEAF_API void sheaf_thread_exit(void);

/* ---- caches ------------------------------------------------------------ */

#define SHEAF_CAPACITY_DEFAULT (-1)
#define SHEAF_CACHE_DEBUG      0x1u   /* track each object: catch double frees */
/*
 * Object ownership (docs/design.md, "Object ownership").  With
 * SHEAF_CACHE_OWNED every object records the client (process) that holds
 * it: sheaf_alloc sets it, sheaf_free clears it (whoever frees: a process
 * may free objects another allocated), a shared queue's dequeue moves it
 * to the dequeuing process.  When a client dies (killed, or gone without
 * freeing), sheafd, after returning its sheaves, frees every object that
 * still names it: the cache's objects in use fall back and destroy
 * succeeds.  With SHEAF_CACHE_OWNED | SHEAF_CACHE_KEEP they stay allocated
 * instead, and are reported: `sheafctl clients` (per cache), `sheafctl
 * stats` (owner_kept); any process may still free them.  owner_freed and
 * owner_kept in the stats count what each dead client left.
 *
 * Semantics and limits:
 * - An object handed to another process by other means than a sheaf
 *   queue (a pipe, a ring of your own) stays its allocator's until freed:
 *   if the allocator dies first, the object is freed (or kept) even though
 *   the other process still uses it.  Hand objects over through a queue,
 *   or use SHEAF_CACHE_KEEP.
 * - A free that races with sheafd freeing the same object for its dead
 *   holder is done once (whichever comes first), never twice; a free of
 *   an object that nobody holds (a double free, or one sheafd already
 *   freed for its dead holder) is refused with -EALREADY.
 * - The tags live in client-writable memory: a hostile client of the
 *   cache can make sheafd free objects that other clients of the same
 *   cache hold (it can spoil those objects anyway), never corrupt sheafd
 *   or the slabs.
 * - Cost: every sheaf_alloc and sheaf_free of an owned cache takes the
 *   library's slow path (a call and one tag store, or a CAS for an object
 *   another process allocated), as debug
 *   caches do; plain caches are not affected (README, "Object ownership").
 *   An owned cache needs a sheafd pool or a local pool alike.
 */
#define SHEAF_CACHE_OWNED      0x2u   /* record each object's holder */
#define SHEAF_CACHE_KEEP       0x4u   /* with OWNED: a dead holder's objects
					 are kept and reported, not freed */

struct sheaf_cache_config {
	size_t align;           /* power of two, 8..4096; 0: 8 */
	int capacity;           /* objects per sheaf, 0..256; 0 disables sheaves
				   (every alloc and free goes to the barn);
				   SHEAF_CAPACITY_DEFAULT: the objects of
				   16 KiB (at most 256; 64 B: 256, 256 B:
				   64), at least the kernel's 60 up to 256 B,
				   28 up to 1 KiB, 12 up to 4 KiB, else 4 */
	unsigned flags;         /* SHEAF_CACHE_DEBUG, SHEAF_CACHE_OWNED,
				   SHEAF_CACHE_KEEP (with OWNED; else
				   -EINVAL) */
};

/*
 * Handles.  A cache handle names one cache for the life of its pool in this
 * process.  Once the cache is destroyed (`sheafctl destroy`, which sheafd
 * refuses while any thread holds its sheaves or objects are in use), the
 * handle is stale: every call on it fails with ESTALE (sheaf_alloc,
 * sheaf_free, bulk, prefill, stats, capacity, shrink; object_size and
 * capacity return 0 with errno ESTALE), even after a cache of the same
 * name (or another) is created again; create or open that one for a new
 * handle.  A stale handle keeps one of the process's 128 handle slots until
 * the pool is closed.
 */

/*
 * Create cache @name (1..47 bytes) of objects of @size bytes (1..65536,
 * rounded up to the alignment) in @pool; @cfg may be NULL for defaults.
 * Returns a handle or NULL with errno: EINVAL (size, align, capacity or
 * flags out of range; SHEAF_CACHE_KEEP without SHEAF_CACHE_OWNED), EEXIST (a cache of that name exists; see
 * sheaf_cache_create_or_open), ENOSPC (64 caches exist), EMFILE (too many
 * handles in this process).
 */
SHEAF_API sheaf_cache_t *sheaf_cache_create(sheaf_pool_t *pool, const char *name,
					    size_t size,
					    const struct sheaf_cache_config *cfg);

/*
 * Create cache @name as sheaf_cache_create does, or open it when it exists
 * with the same object size (after rounding) and alignment; its capacity
 * and flags are then the existing cache's.  Of processes racing to create
 * the same name exactly one creates.  *@created (may be NULL) is set to 1
 * when this call created the cache, 0 when it opened it.
 * Returns a handle or NULL with errno as sheaf_cache_create, except that
 * EEXIST is never returned: EINVAL also when the existing cache has
 * another object size or alignment (open it to see which).
 */
SHEAF_API sheaf_cache_t *sheaf_cache_create_or_open(sheaf_pool_t *pool, const char *name,
						    size_t size,
						    const struct sheaf_cache_config *cfg,
						    int *created);

/*
 * Open the existing cache @name.  Returns a handle or NULL with errno ENOENT
 * (no such cache) or EMFILE.
 */
SHEAF_API sheaf_cache_t *sheaf_cache_open(sheaf_pool_t *pool, const char *name);

/* Object size (after rounding) and current sheaf capacity of a cache (0
 * with errno ESTALE for a stale handle). */
SHEAF_API size_t sheaf_cache_object_size(const sheaf_cache_t *cache);
SHEAF_API unsigned sheaf_cache_capacity(const sheaf_cache_t *cache);

/*
 * Set the sheaf capacity of @cache (0..256) at run time.  Threads pick it up
 * at their next sheaf exchange with the barn, without stopping.
 * On a connected pool the request goes to sheafd (a Tune request).
 * Returns 0, -EINVAL, -ESTALE, or for a connected pool the error of the
 * request.
 */
SHEAF_API int sheaf_cache_set_capacity(sheaf_cache_t *cache, unsigned capacity);

/*
 * Return the calling thread's sheaves of @cache, flush every full sheaf in
 * the cache's barns back to slabs and give empty slabs beyond min_partial
 * back to the kernel (their memory is released: the region's allocated
 * blocks fall).  Returns the number of slabs released, or a negative errno
 * (-ESTALE for a stale handle).
 */
SHEAF_API int sheaf_cache_shrink(sheaf_cache_t *cache);

/* ---- objects ----------------------------------------------------------- */

/*
 * Allocate one object.  Fast path: pop from the thread's main sheaf, no
 * atomic instruction and no system call.
 * Returns the object, or NULL with errno:
 *   EINVAL  @cache is a handle of a destroyed or disconnected pool;
 *   ENOMEM  the pool is at its memory cap and no object of this cache is
 *           free anywhere; returned promptly, never after a hang.  Free
 *           objects of other caches do not count: their slabs go back to
 *           the pool only once empty (a shrink, or the engine taking
 *           other caches' empty slabs at the cap);
 *   EAGAIN  the engine did not stock the barn within wait_ms;
 *   EMFILE  this thread could not get a lane (256 threads use the pool);
 *   ECHILD  the pool was inherited through fork() (see sheaf_connect);
 *   ESTALE  @cache was destroyed (see "Handles" above).
 */
SHEAF_API SHEAF__INLINE void *sheaf_alloc(sheaf_cache_t *cache);

/*
 * Free an object of @cache.  Every free is checked: the pointer must be in
 * the pool, in a slab of @cache, on an object boundary (a stale pointer
 * whose slab went back is refused as any other); for SHEAF_CACHE_DEBUG
 * caches it must also be allocated.  A refused free changes nothing and is
 * counted in the cache's free_invalid counter.  A free never waits for the
 * engine while the pool has a free sheaf or one it can flush.
 * Double frees: the object on top of the thread's main sheaf (freed last by
 * this thread, not allocated since) is refused with -EALREADY at once, in
 * every cache.  Debug caches refuse every double free so; owned caches
 * (SHEAF_CACHE_OWNED) every one that finds the object's owner cleared
 * (that is, unless the object was allocated again meanwhile).  In other caches
 * any other double free is accepted; if both copies reach the slabs (a
 * flush: the barn over its limit, sheaf_cache_shrink, the repair of a dead
 * client) before the object is allocated again, the engine drops the
 * second and counts flush_invalid (the in_use statistic stays one low);
 * otherwise the object may be handed out twice.
 * Returns 0 (also for @obj NULL, as free(NULL)), or:
 *   -EFAULT    @obj is not in the pool's memory;
 *   -EINVAL    @obj is not an object of @cache (other cache, free slab
 *              frame, or not on an object boundary), or @cache is a handle
 *              of a destroyed or disconnected pool;
 *   -EALREADY  @obj is already free (see above);
 *   -EAGAIN    every sheaf of the pool is full and held, and the engine
 *              freed none within wait_ms (or, for a connected pool, no
 *              sheafd runs); the object stays allocated;
 *   -EMFILE    this thread could not get a lane (the object stays allocated);
 *   -ECHILD    the pool was inherited through fork();
 *   -ESTALE    @cache was destroyed (see "Handles" above).
 * errno is left alone.
 */
SHEAF_API SHEAF__INLINE int sheaf_free(sheaf_cache_t *cache, void *obj);

/*
 * Allocate @n objects into @objs: all or none.  Returns 0, or the negative
 * errno of sheaf_alloc (nothing is allocated then).
 */
SHEAF_API int sheaf_alloc_bulk(sheaf_cache_t *cache, void **objs, size_t n);

/*
 * Free @n objects.  Every valid one is freed; returns 0, or the first error
 * of sheaf_free met (the invalid objects are left alone).
 */
SHEAF_API int sheaf_free_bulk(sheaf_cache_t *cache, void **objs, size_t n);

/* ---- prefilled sheaves ------------------------------------------------- */

/*
 * Reserve @n (1..65536) objects of @cache up front, so that later
 * sheaf_prefill_alloc calls cannot fail (as the kernel's
 * kmem_cache_prefill_sheaf).  Returns the reservation or NULL with errno
 * EINVAL, ENOMEM, EAGAIN (as sheaf_alloc).
 */
SHEAF_API sheaf_prefill_t *sheaf_prefill(sheaf_cache_t *cache, unsigned n);

/* Take one object from a reservation: never fails while
 * sheaf_prefill_remaining() > 0; NULL with errno ENOSPC once used up. */
SHEAF_API void *sheaf_prefill_alloc(sheaf_prefill_t *pf);

/* Objects left in a reservation. */
SHEAF_API unsigned sheaf_prefill_remaining(const sheaf_prefill_t *pf);

/* Free the objects left in a reservation and the reservation itself. */
SHEAF_API void sheaf_prefill_return(sheaf_prefill_t *pf);

/* ---- statistics -------------------------------------------------------- */

#define SHEAF_STATS_MAX 32

struct sheaf_stats {
	unsigned nstat;                   /* counters in stat[] */
	uint64_t stat[SHEAF_STATS_MAX];   /* names: sheaf_stat_name(i) */
	uint64_t objects;                 /* objects in slabs */
	uint64_t active_objects;          /* objects out of slabs (in sheaves or in use) */
	uint64_t in_use;                  /* allocated and not freed */
	uint64_t slabs;
	uint64_t partial_slabs;
	uint64_t bytes_in_use;            /* in_use * object size */
	uint64_t bytes_mapped;            /* slabs * slab size */
	uint64_t barn_full;               /* full sheaves in the barn(s) */
	uint64_t barn_empty;              /* empty sheaves in the barn(s) */
	unsigned sheaf_capacity;
	unsigned min_partial;
};

/*
 * Statistics of @cache on @node (all nodes when < 0), kernel-named counters
 * summed over every thread that used the cache (live threads are not
 * stopped).  Returns 0, -EINVAL (bad node) or -ESTALE (a stale handle).
 */
SHEAF_API int sheaf_cache_stats(sheaf_cache_t *cache, int node,
				struct sheaf_stats *out);

/* Name of counter @i of struct sheaf_stats (e.g. "alloc_fastpath"), or NULL
 * when @i >= nstat. */
SHEAF_API const char *sheaf_stat_name(unsigned i);

/* Index of counter @name, or -1. */
SHEAF_API int sheaf_stat_index(const char *name);

/*
 * The pool checker: on a quiescent pool (no thread allocating or freeing),
 * prove that every object is in exactly one place (free in a slab, in one
 * sheaf, or in use: allocated and not yet freed, by the counters) and that
 * slab lists, rings and sheaves agree.  Returns 0, or -EUCLEAN with the
 * first broken rule in @err.
 */
SHEAF_API int sheaf_pool_check(sheaf_pool_t *pool, char *err, size_t errlen);

/* ---- inline fast paths ------------------------------------------------- */

/*
 * sheaf_alloc and sheaf_free are defined here as inline functions, so that a
 * caller's compiler puts the fast path (a pop or a push on the thread's main
 * sheaf, and the checks of a free) in the caller, as DPDK's rte_mempool_get
 * does; libsheaf also exports them as ordinary functions.  What follows is
 * the library's private ABI, not API: the names with two underscores may
 * change with the soname (libsheaf.so.0) and are not for use by callers.
 */
struct sheaf__sheaf {           /* head of a sheaf in the pool */
	uint64_t word;          /* bits 0-15: objects held, objs[0..size);
				   16-63: fast-path operations, counted */
	uint32_t capacity;
	uint32_t reserved_[13];
	uint64_t objs[];        /* object offsets from the region start */
};

struct sheaf__fast {            /* a thread's fast path for one cache */
	struct sheaf__sheaf *main;
	char *base;             /* region start */
	char *node_data;        /* data of the thread's home node */
	uint64_t node_len;      /* its bytes */
	const uint16_t *owner;  /* cache id owning each frame of that node */
	uint32_t div_inv;       /* a frame offset is an object's iff */
	uint8_t div_shift;      /*   rotr32(off * div_inv, div_shift) */
	uint8_t reserved_;      /*   < per_slab (exact division test) */
	uint16_t cache_id;
	uint32_t per_slab;
	uint32_t reserved2_;
	void *last;             /* unused, always NULL (was the last-object
				   shortcut, which accepted stale frees) */
};                              /* 64 bytes, as a cache handle */

#define SHEAF__HANDLES      128
#define SHEAF__FRAME_SHIFT  18  /* slab frames of 256 KiB */
#define SHEAF__WORD_SIZE    0xffffu
#define SHEAF__WORD_OP      0x10000u   /* one operation in sheaf__sheaf.word */

/*
 * How the inline paths find the thread's fast path of a cache: a handle
 * points into libsheaf's own array of handles, 64 bytes apart, and each
 * thread's fast paths lie 64 bytes apart in the same order, so the entry is
 * the handle's address plus a per-thread constant, sheaf__tls_bias, which
 * the library sets (an addition, with one thread-local load).  The inline
 * paths use no exported data object: an executable may get its own copy of
 * one (a copy relocation) that the library never sees.  sheaf__tls_bias is
 * 8 bytes of initial-exec TLS, which dlopen() can place.  Until the
 * thread's first slow path it leads to unused fast paths (an empty main
 * sheaf and node_len 0: both paths miss).
 */
SHEAF_API extern __thread uintptr_t sheaf__tls_bias
	__attribute__((tls_model("initial-exec")));
#define SHEAF__FAST(cache)                                                     \
	((struct sheaf__fast *)((uintptr_t)(const void *)(cache) + sheaf__tls_bias))
SHEAF_API void *sheaf__alloc_slow(sheaf_cache_t *cache);
SHEAF_API int sheaf__free_slow(sheaf_cache_t *cache, void *obj);

/* C99 inline definitions (libsheaf provides the external ones); a gnu89
 * compiler, whose inline rules differ, calls the library's. */
#if defined(__GNUC_STDC_INLINE__) || defined(__cplusplus)
inline void *sheaf_alloc(sheaf_cache_t *cache)
{
	struct sheaf__fast *f = SHEAF__FAST(cache);
	struct sheaf__sheaf *m = f->main;
	uint64_t w = __atomic_load_n(&m->word, __ATOMIC_RELAXED);
	uint64_t n = w & SHEAF__WORD_SIZE;

	if (__builtin_expect(n != 0, 1)) {
		/* size - 1, one more operation (the alloc_fastpath count;
		 * other threads and processes read the word) */
		__atomic_store_n(&m->word, w + (SHEAF__WORD_OP - 1), __ATOMIC_RELAXED);
		return f->base + m->objs[n - 1];
	}
	return sheaf__alloc_slow(cache);
}

/*
 * @obj is an object of the cache in the thread's home node: in that node's
 * data, on an object boundary of a slab frame the cache owns (no pointer is
 * taken on trust: a stale one may name a frame the cache gave back).
 */
#define SHEAF__FAST_VALID(f, obj) __extension__ ({                             \
	uint64_t rel_ = (uint64_t)((char *)(obj) - (f)->node_data);            \
	uint32_t q_ = ((uint32_t)rel_ & ((1u << SHEAF__FRAME_SHIFT) - 1)) *    \
		      (f)->div_inv;                                            \
	q_ = (q_ >> (f)->div_shift) | (q_ << ((0u - (f)->div_shift) & 31));    \
	rel_ < (f)->node_len &&                                                \
		__atomic_load_n(&(f)->owner[rel_ >> SHEAF__FRAME_SHIFT],       \
				__ATOMIC_RELAXED) == (f)->cache_id &&          \
		q_ < (f)->per_slab; })

/*
 * The push needs room in the main sheaf and refuses the object already on
 * its top (the immediate double free, as glibc's fasttop test): the slow
 * path then returns -EALREADY.
 */
inline int sheaf_free(sheaf_cache_t *cache, void *obj)
{
	struct sheaf__fast *f = SHEAF__FAST(cache);

	if (__builtin_expect(SHEAF__FAST_VALID(f, obj), 1)) {
		struct sheaf__sheaf *m = f->main;
		uint64_t w = __atomic_load_n(&m->word, __ATOMIC_RELAXED);
		uint64_t n = w & SHEAF__WORD_SIZE;
		uint64_t off = (uint64_t)((char *)obj - f->base);

		if (__builtin_expect(n < m->capacity, 1) &&
		    __builtin_expect(n == 0 || m->objs[n - 1] != off, 1)) {
			m->objs[n] = off;
			__atomic_store_n(&m->word, w + (SHEAF__WORD_OP + 1), __ATOMIC_RELAXED);
			return 0;
		}
	}
	return sheaf__free_slow(cache, obj);
}
#endif

#ifdef __cplusplus
}
#endif
#endif
