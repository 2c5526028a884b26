/*
 * sheaf.h - libsheaf, the client library of sheaf: fixed-size objects from
 * shared-memory slab pools, with per-thread sheaves.
 *
 * This header is the contract of libsheaf: every public function says
 * what it takes, what it returns and each error it can return.  It
 * includes sheaf_inline.h, the inline fast paths and the private ABI
 * they need (names with two underscores, not for callers).
 *
 * Conventions:
 *   - Constructors (functions returning a pointer: sheaf_pool_create,
 *     sheaf_connect, sheaf_cache_create..., sheaf_queue_create...,
 *     sheaf_topic_create...,
 *     sheaf_prefill, sheaf_alloc, sheaf_malloc...) return NULL and set
 *     errno on failure.
 *   - Functions returning int return 0 (or a count, where said) on success
 *     and a negative errno value on failure; errno is left alone.
 *   - A few calls return a value of their own type and mark a failure with
 *     a sentinel plus errno, since no negative errno fits that type:
 *       sheaf_ptr_to_off       SHEAF_OFF_INVALID, errno set;
 *       sheaf_cache_object_size, sheaf_obj_size
 *                              0 (never a valid size), errno set;
 *       sheaf_off_to_ptr, sheaf_name_get, sheaf_prefill_alloc,
 *       sheaf_obj_cache        NULL, errno set;
 *       sheaf_stat_name        NULL (no errno), sheaf_stat_index  -1.
 *     Test the sentinel, then errno.  Where 0 is a legal value (a
 *     capacity), the call reports through an out-parameter instead
 *     (sheaf_cache_get_capacity).
 *   - Functions taking (char *err, size_t errlen) write a one-line reason
 *     there on failure (err may be NULL).  The library never prints or exits.
 *   - Unknown flag bits are refused with EINVAL.
 *   - Batches: a name ending in _bulk acts on every one of the n objects
 *     and never returns a partial count (sheaf_alloc_bulk: all or none;
 *     sheaf_free_bulk: every valid object is freed).  A name ending in
 *     _burst acts on as many as it can and returns how many
 *     (sheaf_enqueue_burst: as many as fit; sheaf_dequeue_burst: as many as
 *     there are).
 *   - Deprecated names (SHEAF_DEPRECATED: the compiler warns at each use)
 *     stay exported, with their old behaviour, for at least one minor
 *     release after the one that replaced them; removing one breaks the
 *     ABI, so it goes only with a new soname major version.  Deprecated
 *     in 1.2: sheaf_enqueue_bulk and sheaf_dequeue_bulk (use the _burst
 *     names), sheaf_cache_capacity (use sheaf_cache_get_capacity).
 *   - Limits a caller may need: SHEAF_CACHE_NAME_MAX (cache and queue
 *     names), SHEAF_CACHE_HANDLES_MAX (cache handles per process),
 *     SHEAF_NAME_LEN_MAX (object names), SHEAF_STATS_MAX.
 *
 * Threads: every function is thread-safe unless noted.  A thread gets its
 * per-cache sheaves on first use (main, spare, and a stash of up to 32 full
 * and 32 empty ones, at most 512 KiB of objects); they go back to the pool
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
#define SHEAF_DEPRECATED(msg) __attribute__((deprecated(msg)))
/* sheaf_alloc, sheaf_free and a few others are inline where the compiler
 * follows C99's inline rules (sheaf_inline.h, included at the end). */
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
	unsigned nodes;         /* 0: the machine's NUMA memory nodes;
				   1..8: that many simulated nodes, no binding */
	unsigned sheaf_count;   /* sheaves in the pool; 0: 32768 */
	size_t mem_cap;         /* most bytes of slabs; 0: size */
	unsigned wait_ms;       /* longest wait for the engine; 0: 5000 */
	/* Limits, fixed at creation; 0: the default.  Slots never used cost
	 * no memory (sparse), so generous limits are cheap. */
	unsigned max_clients;   /* attached processes, 1..4096; 0: 1024 */
	unsigned max_threads;   /* threads using the pool at once, 10..65536;
				   0: 8192 */
	unsigned max_caches;    /* caches, 1..1024; 0: 256 */
	/* Where each node's pages come from (real nodes only; simulated
	 * nodes have no placement): SHEAF_NUMA_*. */
	unsigned numa_policy;
};

/*
 * Placement policies (struct sheaf_pool_config.numa_policy, sheafd's
 * --numa-policy).  Pool nodes are the machine's memory nodes in ascending
 * kernel id; a thread's home is the memory node nearest its CPU.
 *   PREFERRED   a node's pages come from that node while it has free
 *               memory, then from the nearest others (no OOM kill).
 *   BIND        from that node only, up to a cap per node (its free memory
 *               when the pool is made, less a reserve of an eighth of its
 *               total, at least 32 MiB); an allocation homed on a node at
 *               its cap fails with ENOMEM.
 *   INTERLEAVE  every node's pages spread over all memory nodes.
 */
#define SHEAF_NUMA_PREFERRED  0u
#define SHEAF_NUMA_BIND       1u
#define SHEAF_NUMA_INTERLEAVE 2u

/*
 * Create a local pool: a new shared-memory region whose engine (the barn
 * stocking workers, one per node) runs as threads of this process.  @cfg may
 * be NULL for defaults.
 * Returns the pool, or NULL with errno: EINVAL (a config field out of range,
 * named in @err), ENOMEM, EMFILE (too many pools in this process, max 64), or
 * the error of memfd_create/ftruncate/mmap.
 * Environment: SHEAF_HUGE_PAGES=off|try|on backs the object data with 2 MiB
 * pages (shmem transparent huge pages; sheafd's --huge-pages): "try" (the
 * default when unset) goes on without them when the kernel refuses, "on" fails with EOPNOTSUPP
 * (the reason in @err); another value: EINVAL.
 */
SHEAF_API sheaf_pool_t *sheaf_pool_create(const struct sheaf_pool_config *cfg,
					  char *err, size_t errlen)
	__asm__("sheaf_pool_create_v2");
/*
 * The ABI rule of struct sheaf_pool_config: a field is only ever added at
 * its end, and each addition gives sheaf_pool_create a new symbol that
 * reads the struct as it is now (the asm label above: the
 * sheaf_pool_create_v2 symbol, since 1.3, reads numa_policy), while every
 * older symbol stays exported and reads only the fields of its own time
 * (the sheaf_pool_create symbol: the struct up to max_caches, with
 * numa_policy SHEAF_NUMA_PREFERRED).  A program built against an older
 * sheaf.h keeps working unchanged; rebuilding it picks up the new symbol.
 */

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
 *   EKEYREVOKED      a client of this uid was revoked and its ban is not
 *                    over (sheafd's revoke_ban);
 *   ETIMEDOUT        sheafd did not answer within the control timeout
 *                    (sheaf_pool_set_timeout; $SHEAF_RPC_TIMEOUT_MS);
 *   EINVAL           unknown @flags; EMFILE  64 pools already open.
 * If sheafd restarts, the next control request (cache create, stats,
 * shrink, check, capacity) reconnects and resumes this client; allocation
 * and free never need the connection.  If the new daemon did not adopt the
 * pool (it started afresh), control requests fail with ESTALE: disconnect
 * and connect again.  While no sheafd runs (none listens on the socket,
 * or the socket is gone), control requests fail with ECONNREFUSED; the
 * first one after a sheafd is back reconnects.
 * A client that sends sheafd what libsheaf never does (more lanes once
 * told it holds its most) is revoked: sheafd takes back its sheaves and
 * lanes at once, and every later control request, and a new thread's
 * request for a lane, fails with EKEYREVOKED (the pool is then unusable:
 * disconnect).
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
 * Set the calling thread's home node in @pool (default: the memory node
 * nearest, by the kernel's NUMA distances, to the CPU it first ran on;
 * simulated nodes map CPU c to node c % nodes).  @node is a pool node
 * index (sheafctl info shows each one's kernel node); any is accepted,
 * a memory node without CPUs too.  Objects
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
 *   another process allocated), as debug caches do; plain caches are not
 *   affected (docs/design.md, "Object ownership").
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

/* The longest cache (and queue) name, in bytes, without the NUL. */
#define SHEAF_CACHE_NAME_MAX 47

/*
 * Handles.  A cache handle names one cache for the life of its pool in this
 * process.  A process has SHEAF_CACHE_HANDLES_MAX handles over all its
 * pools (one per cache it created or opened in a pool; opening a cache
 * again gives the same handle; EMFILE when none is left).  Once the cache
 * is destroyed (`sheafctl destroy`, which sheafd refuses while any thread
 * holds its sheaves or objects are in use), the handle is stale: every
 * call on it fails with ESTALE (sheaf_alloc, sheaf_free, the bulk calls,
 * prefill, stats, get_capacity, shrink; sheaf_cache_object_size returns 0
 * with errno ESTALE), even after a cache of the same name (or another) is
 * created again; create or open that one for a new handle.  A stale
 * handle keeps its slot until the pool is closed.
 */
#define SHEAF_CACHE_HANDLES_MAX 1024
#define SHEAF_CACHE_MAX_SIZE    (1u << 30)   /* a cache's objects, at most */
#define SHEAF_CACHE_LARGE_MIN   65536u       /* larger objects are large */

/*
 * Create cache @name (1..SHEAF_CACHE_NAME_MAX bytes) of objects of @size bytes
 * (1..SHEAF_CACHE_MAX_SIZE, rounded up to the alignment) in @pool; @cfg may
 * be NULL for defaults.  Objects above SHEAF_CACHE_LARGE_MIN are large: a
 * slab of their own above 256 KiB (contiguous frames of one node), sheaves
 * of 1 to 4 objects (at most 4 MiB of them), small barns, and empty slabs
 * kept only within the pool's large_retain budget (sheafctl tune --pool).
 * Returns a handle or NULL with errno: EINVAL (size, align, capacity or
 * flags out of range; SHEAF_CACHE_KEEP without SHEAF_CACHE_OWNED), EFBIG
 * (@size is larger than one node's data), EEXIST (a cache of that name exists; see
 * sheaf_cache_create_or_open), ENOSPC (max_caches caches exist), EMFILE (too many
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

/* Object size of @cache (after rounding to the alignment), or 0 with errno
 * ESTALE for a stale handle. */
SHEAF_API size_t sheaf_cache_object_size(const sheaf_cache_t *cache);

/*
 * The current sheaf capacity of @cache (0..256; 0: sheaves disabled) into
 * *@capacity.  Returns 0, -EINVAL (@cache or @capacity NULL) or -ESTALE (a
 * stale handle); *@capacity is left alone on failure.
 */
SHEAF_API int sheaf_cache_get_capacity(const sheaf_cache_t *cache, unsigned *capacity);

/* Deprecated: the capacity, or 0 with errno ESTALE (0 is also a legal
 * capacity: use sheaf_cache_get_capacity). */
SHEAF_API SHEAF_DEPRECATED("use sheaf_cache_get_capacity")
unsigned sheaf_cache_capacity(const sheaf_cache_t *cache);

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
 *   EAGAIN  the engine did not stock the barn within wait_ms: no sheafd
 *           runs, or no sheaf could be had for the refill all that time
 *           (every sheaf of the pool held by threads, or a ring another
 *           client spoiled that the engine had not rebuilt yet: it
 *           verifies every ring at least each 250 ms and the call waits
 *           the rebuild out: a spoiled ring ends in EAGAIN only with a
 *           wait_ms under about 1 s);
 *   EMFILE  this thread could not get a lane (max_threads threads use the
 *           pool, or this client's threads hold sheafd's
 *           max_threads_per_client lanes, or its uid's
 *           max_threads_per_uid); EKEYREVOKED  this client was revoked;
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
 *              sheafd runs, or no empty sheaf was reachable all that
 *              time: a spoiled ring not yet rebuilt, as for sheaf_alloc's
 *              EAGAIN); the object stays allocated;
 *   -EMFILE    this thread could not get a lane (the object stays allocated);
 *   -ECHILD    the pool was inherited through fork();
 *   -ESTALE    @cache was destroyed (see "Handles" above).
 * errno is left alone.
 */
SHEAF_API SHEAF__INLINE int sheaf_free(sheaf_cache_t *cache, void *obj);

/*
 * Allocate @n objects into @objs: all or none (a _bulk call, see the
 * conventions).  Returns 0, or the negative errno of sheaf_alloc (nothing
 * is allocated then).
 */
SHEAF_API int sheaf_alloc_bulk(sheaf_cache_t *cache, void **objs, size_t n);

/*
 * Free @n objects: every valid one is freed (a _bulk call).  Returns 0, or
 * the first error of sheaf_free met (the invalid objects are left alone).
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

/* ---- names and offsets ------------------------------------------------- */

/*
 * The name directory: a pool's objects may be given names, by which any
 * process of the pool finds them (a shared table, a queue head, a
 * configuration block).  The directory is sheafd's (engine-owned memory,
 * read-only to clients): setting or deleting a name is a request to sheafd
 * (for a local pool, a call into its engine); reading one is done in this
 * process, with no request and no lock.  It survives a sheafd restart that
 * adopts the pool (entries that no longer name an allocated object of a
 * live cache are dropped then).  Names are listed by `sheafctl names`.
 * Limits: SHEAF_NAMES_MAX names per pool, names of 1..SHEAF_NAME_LEN_MAX
 * bytes (any bytes but NUL).  Names are data: sheafd's log and sheafctl's
 * tables show every name (object, cache, queue, client) escaped, C-style
 * (\n, \x1b, \\; well-formed printable UTF-8 kept: sheafd(8)), so no
 * name can forge a log line or reach a terminal raw; sheafctl's JSON
 * output holds the exact bytes.
 * Rules: a name records its object's cache (and the cache's generation):
 * when the cache is destroyed its names are dropped, and a name never
 * resolves to an object of a cache made again in the same slot.  A name
 * does not keep its object allocated: free a named object only after
 * deleting its name (sheaf_name_get would otherwise return a free object).
 */
#define SHEAF_NAMES_MAX     1024
#define SHEAF_NAME_LEN_MAX  95

/*
 * Name @obj (an allocated object of a live cache of @pool) @name.
 * Returns 0, or:
 *   -EEXIST        the name is taken (nothing changes; delete it first);
 *   -ENOSPC        the pool has SHEAF_NAMES_MAX names;
 *   -ENAMETOOLONG  @name is longer than SHEAF_NAME_LEN_MAX bytes;
 *   -EINVAL        @name is NULL or empty, @obj is not an allocated object
 *                  of a live cache: off an object boundary, a destroyed
 *                  cache's, free in its slab, or free in a sheaf (freed,
 *                  not yet back in its slab) of a cache that records it:
 *                  SHEAF_CACHE_DEBUG (the in-use bits) or
 *                  SHEAF_CACHE_OWNED (the owner tags).  Other caches keep
 *                  no record of an object in a sheaf: such a free object
 *                  is accepted, and its name leads to a free object, as
 *                  when a named object is freed;
 *   -EFAULT        @obj is not in @pool's object memory;
 *   -ECHILD        @pool was inherited through fork();
 *   or the error of the request to sheafd (ETIMEDOUT, ESTALE,
 *   ECONNREFUSED while no sheafd runs, ...).
 */
SHEAF_API int sheaf_name_set(sheaf_pool_t *pool, const char *name, void *obj);

/*
 * The object named @name, read from the directory in this process (no
 * request).  Returns it, or NULL with errno ENOENT (no such name, or its
 * cache was destroyed), EINVAL (@name NULL or empty), ENAMETOOLONG,
 * ECHILD, or EAGAIN (the entry kept changing while read: try again).
 */
SHEAF_API void *sheaf_name_get(sheaf_pool_t *pool, const char *name);

/*
 * Delete name @name (the object stays allocated).  Returns 0, -ENOENT,
 * -EINVAL, -ENAMETOOLONG, -ECHILD, or the error of the request to sheafd.
 */
SHEAF_API int sheaf_name_del(sheaf_pool_t *pool, const char *name);

/*
 * The object named @name, made if there is none: a new object of @cache,
 * zero-filled, named @name.  Of processes racing to create the same name
 * exactly one creates; the others get its object (the object a loser had
 * allocated is freed).  *@created (may be NULL) is set to 1 when this call
 * created it, else 0.  Returns the object or NULL with errno:
 *   EINVAL        @name NULL or empty, @cache NULL or of another pool, or
 *                 the name exists for an object of another cache;
 *   ENAMETOOLONG, ENOSPC (SHEAF_NAMES_MAX names), ECHILD, ESTALE (@cache
 *                 was destroyed), the errors of sheaf_alloc (ENOMEM,
 *                 EAGAIN, ...) and of the request to sheafd;
 *   EAGAIN        also when the name was deleted and set again under this
 *                 call 8 times in a row.
 */
SHEAF_API void *sheaf_name_get_or_create(sheaf_pool_t *pool, const char *name,
					 sheaf_cache_t *cache, int *created);

/*
 * Offsets.  A pool is mapped at the same address in every process (each
 * pool at its own address, chosen by sheafd when it creates the pool and
 * kept when a restarted sheafd adopts it, so that a process can attach to
 * several pools), unless a process connected with SHEAF_CONNECT_RELOCATE:
 * then its pointers differ, and what processes exchange should be
 * offsets.  An offset is a pointer's distance from the pool's base, the
 * same in every process of the pool.
 */
#define SHEAF_OFF_INVALID UINT64_MAX

/* Where @pool is mapped in this process (its offset 0). */
SHEAF_API void *sheaf_pool_base(const sheaf_pool_t *pool);

/*
 * The offset of @p, a pointer into @pool's object memory (an object or
 * any byte of one).  Returns it, or SHEAF_OFF_INVALID with errno EFAULT
 * (@p NULL or not in the pool's object memory) or ECHILD.
 */
SHEAF_API uint64_t sheaf_ptr_to_off(const sheaf_pool_t *pool, const void *p);

/*
 * The pointer at offset @off of @pool in this process.  Returns it, or
 * NULL with errno EFAULT (@off, e.g. SHEAF_OFF_INVALID, not in the pool's
 * object memory) or ECHILD.
 */
SHEAF_API void *sheaf_off_to_ptr(const sheaf_pool_t *pool, uint64_t off);

/* ---- deferred frees and read sections ---------------------------------- */

/*
 * Deferred frees (the kernel's kfree_rcu sheaf), for data in the pool that
 * processes read without locks while one of them updates it.
 *
 * The model.  A reader brackets its accesses with sheaf_read_lock(pool) /
 * sheaf_read_unlock(pool) (or stays inside one long section and calls
 * sheaf_quiescent(pool) where it holds no reference: QSBR).  A writer
 * unlinks an object (makes it unreachable from the shared structure) and
 * then calls sheaf_free_deferred(cache, obj): the object is reused only
 * after a grace period, that is after every read section of every
 * process that was in progress when sheaf_free_deferred was called has
 * ended (or passed a sheaf_quiescent).
 *   - What a reader may access: inside a section, any object it reached
 *     from the structure during that section (since its last
 *     sheaf_quiescent), until the section ends.  Never a pointer kept from
 *     an earlier section.  Loads of the links should be (at least)
 *     __atomic acquire/consume loads or READ_ONCE-style volatile loads,
 *     paired with the writer's release stores that publish new objects.
 *   - What a writer needs: its unlink must be a store (any order) made
 *     before sheaf_free_deferred in program order; the library orders it
 *     (a seq_cst fence when the sheaf is handed over).  Initialising a new
 *     object before publishing it is the writer's release store, as with
 *     any lock-free structure.  Several writers need their own mutual
 *     exclusion; sheaf gives only the reclamation.
 *   - Cost: sheaf_read_lock / unlock are inline (below) and write one
 *     word of the thread's lane (no atomic read-modify-write, no system
 *     call, no call into the library once the thread has a lane); when
 *     the kernel has
 *     membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) the engine issues it
 *     before each grace-period scan and readers need no fence, otherwise
 *     sheaf_read_lock adds one full fence.  sheaf_free_deferred is a push
 *     on a per-thread deferred sheaf, as sheaf_free.
 *   - Threads: a thread must have called sheaf_read_lock for its reads to
 *     be protected; a thread that never did (or is between sections)
 *     never delays grace periods.  sheaf_thread_exit(), thread exit and
 *     sheaf_thread_set_node() end the thread's sections.
 *   - fork(): a child's inherited pool fails with ECHILD; objects the
 *     parent reached in a section are not protected for the child.
 *   - Crashes: a reader process killed inside a section stops delaying
 *     grace periods once sheafd sees its death; a writer killed with
 *     deferred objects loses none (they still wait their grace period, then
 *     go back to the pool); a stopped (SIGSTOP) reader delays every grace
 *     period until it runs again (`sheafctl info` names its lane and pid
 *     and how long) and never makes a free early.
 *   - Signals: none of these calls is async-signal-safe.
 */

/*
 * Enter (nested: count) a read section of @pool.  Returns 0, or -EMFILE
 * (no lane left), -ECHILD (a fork() child), -ENOMEM.
 */
SHEAF_API SHEAF__INLINE int sheaf_read_lock(sheaf_pool_t *pool);

/* Leave a read section; 0, or -EINVAL when the thread is in none. */
SHEAF_API SHEAF__INLINE int sheaf_read_unlock(sheaf_pool_t *pool);

/*
 * Inside a read section: declare that the thread holds no reference
 * reached before this call (it stays inside a section: QSBR).  Cheaper
 * than an unlock and a lock.  Outside a section it does nothing.  Returns 0.
 */
SHEAF_API int sheaf_quiescent(sheaf_pool_t *pool);

/*
 * Free @obj (an object of @cache, checked as sheaf_free checks it) after a
 * grace period; returns at once.  The object goes into the thread's
 * deferred sheaf; a full one is handed to the engine whole and goes to the
 * barn once its grace period has passed (counted: free_rcu_sheaf per
 * object).  When no empty sheaf is to be had at once, or the engine's ring
 * refuses a full one (spoiled, until sheafd rebuilds it)
 * (free_rcu_sheaf_fail), it waits for a grace period (at most wait_ms) and
 * frees the object directly; inside a read section it cannot wait and returns -EAGAIN.
 * Returns 0 (also for NULL), -EFAULT / -EINVAL (as sheaf_free), -EAGAIN,
 * -EALREADY (a SHEAF_CACHE_DEBUG cache: @obj is not allocated),
 * -EOPNOTSUPP (a SHEAF_CACHE_OWNED cache),
 * -EMFILE, -ECHILD, -ESTALE.
 */
SHEAF_API int sheaf_free_deferred(sheaf_cache_t *cache, void *obj);

/*
 * Wait for a full grace period of @pool: every read section in progress
 * (in any process) when called has ended.  Returns 0, -ETIMEDOUT after
 * @timeout_ms (a stopped reader; a pool whose engine does not run),
 * -EDEADLK when called inside a read section, -ECHILD.
 */
SHEAF_API int sheaf_synchronize(sheaf_pool_t *pool, unsigned timeout_ms);

/*
 * Wait until every deferred free of the calling thread in @pool, and every
 * deferred sheaf any thread handed over before this call, has had its
 * grace period and gone back to the pool (the thread's partly filled
 * deferred sheaves are handed over first; other threads' partly filled
 * ones go at their exit or their own sheaf_barrier).  Returns 0,
 * -ETIMEDOUT, -EDEADLK (inside a read section), -ECHILD.
 */
SHEAF_API int sheaf_barrier(sheaf_pool_t *pool, unsigned timeout_ms);

/* ---- shared queues ----------------------------------------------------- */

/*
 * A shared queue passes objects of a pool between processes without
 * copying: a bounded, lock-free, multi-producer multi-consumer FIFO of
 * object references, found by name.  Its descriptor is the engine's
 * (sheafd's, read-only to clients); its slots are in the pool's shared
 * memory.  Only objects of this pool's live caches can be enqueued (any
 * cache, mixed).  A process killed at any instruction of an enqueue or a
 * dequeue never wedges the queue and never makes an object appear twice;
 * an object a killed consumer had just dequeued stays allocated (it is the
 * dead process's, as any object it held; sheafd frees it when its cache is
 * owned, SHEAF_CACHE_OWNED, whose queued objects survive their producer).
 * For an owned cache this holds at every instruction, bursts and waits
 * included: an object a killed process was enqueuing or dequeuing ends up
 * in the queue or freed, never lost.  Enqueue and dequeue work in a fork()
 * child of a process that opened the queue (a child's owned objects caught
 * half-way by its death may stay allocated).
 */
typedef struct sheaf_queue sheaf_queue_t;

/*
 * Queue flags (sheaf_queue_create), fixed for the queue's life:
 *   SHEAF_QUEUE_SP  single producer: at most one thread of one process
 *                   enqueues at any time.  Enqueues then use plain stores
 *                   (no atomic read-modify-write, no fence): the fastest
 *                   hand-off.  When the producer dies, another process may
 *                   take over (once the first is known dead, e.g. reaped):
 *                   the queue stays consistent, nothing is lost that was
 *                   enqueued.  Two producers enqueuing at once break the
 *                   contract: objects may be lost (never duplicated).
 *   SHEAF_QUEUE_SC  single consumer, likewise for dequeues.  Two consumers
 *                   dequeuing at once break the contract: an object may
 *                   be dequeued twice.
 * Either, both (the fastest: SP/SC), or neither (0: MPMC).  A waiter on
 * the other side of a plain-store side issues membarrier(2) before it
 * sleeps (the plain-store processes register for it; without it, they
 * fence, or the waiter sleeps 1 ms slices).
 */
#define SHEAF_QUEUE_SP  0x1u
#define SHEAF_QUEUE_SC  0x2u

/*
 * Create queue @name (1..SHEAF_CACHE_NAME_MAX bytes) in @pool with room for @capacity
 * objects (0: 1024; else rounded up to a power of two, at most 2^20) and
 * open it.  @flags: SHEAF_QUEUE_SP, SHEAF_QUEUE_SC or 0 (MPMC).  The
 * queue's slots take whole slab frames (256 KiB each) under the pool's
 * memory cap.
 * Returns the queue, or NULL with errno: EINVAL (bad name, capacity or
 * flags), EEXIST (the name exists: use sheaf_queue_open), ENOSPC (all 64
 * queue slots in use), ENOMEM (no room under the memory cap, or no
 * memory), EFBIG (the pool has 32 GiB of data or more), ECHILD (a pool
 * inherited through fork()), or a control request's error (ETIMEDOUT,
 * ESTALE...; see sheaf_connect).
 */
SHEAF_API sheaf_queue_t *sheaf_queue_create(sheaf_pool_t *pool, const char *name,
					    unsigned capacity, unsigned flags);

/* Open existing queue @name of @pool (no request to sheafd).  NULL with
 * errno ENOENT (no such queue), EINVAL (NULL argument), ECHILD, ENOMEM. */
SHEAF_API sheaf_queue_t *sheaf_queue_open(sheaf_pool_t *pool, const char *name);

/* Release this process's handle (the queue and its objects stay). */
SHEAF_API void sheaf_queue_close(sheaf_queue_t *q);

/*
 * Destroy the queue and close @q.  Refused while it holds objects (dequeue
 * them first) with -EBUSY (@q stays open); -ESTALE when it was destroyed
 * already (@q is closed); -ECHILD; a control request's error.  Other
 * processes' handles fail with -ESTALE afterwards; an enqueue racing the
 * destroy may be lost (the object stays allocated): destroy a queue nobody
 * uses.
 */
SHEAF_API int sheaf_queue_destroy(sheaf_queue_t *q);

/*
 * Enqueue @obj (an object of this pool, allocated).  The object is handed
 * over: the producer must not touch it afterwards.  Returns 0, -EAGAIN
 * (the queue is full), -EINVAL (@obj is not an object of a live cache of
 * this pool: refused, nothing enqueued), -ESTALE (the queue was destroyed).
 */
SHEAF_API int sheaf_enqueue(sheaf_queue_t *q, void *obj);

/* Dequeue the oldest object into *@obj: 0, -EAGAIN (empty), -ESTALE.  The
 * caller owns the object (free it with sheaf_free, or enqueue it on). */
SHEAF_API int sheaf_dequeue(sheaf_queue_t *q, void **obj);

/*
 * Enqueue as many of the @n objects of @objs as fit, in order (a _burst
 * call): returns the number enqueued (less than @n when the queue fills;
 * objs[count..n) stay the caller's), or -EINVAL, -ESTALE.  The objects are
 * checked 64 at a time, before any of those 64 is enqueued: an object that
 * is not an object of a live cache of this pool fails the call with
 * -EINVAL when it is among the first 64 (nothing enqueued), and otherwise
 * ends the burst before its group of 64 (the count enqueued is returned).
 */
SHEAF_API int sheaf_enqueue_burst(sheaf_queue_t *q, void *const *objs, unsigned n);

/* Dequeue as many objects as there are, up to @n, into @objs (a _burst
 * call): the number taken (0: empty), or -ESTALE. */
SHEAF_API int sheaf_dequeue_burst(sheaf_queue_t *q, void **objs, unsigned n);

/* Deprecated names of sheaf_enqueue_burst and sheaf_dequeue_burst, the
 * same functions (their behaviour is a burst's, not a _bulk call's). */
SHEAF_API SHEAF_DEPRECATED("use sheaf_enqueue_burst")
int sheaf_enqueue_bulk(sheaf_queue_t *q, void *const *objs, unsigned n);
SHEAF_API SHEAF_DEPRECATED("use sheaf_dequeue_burst")
int sheaf_dequeue_bulk(sheaf_queue_t *q, void **objs, unsigned n);

/*
 * As sheaf_enqueue and sheaf_dequeue, but wait while the queue is full
 * (empty), asleep on a futex (no CPU), at most @timeout_ms (< 0: no
 * limit; 0: do not wait).  Extra error: -ETIMEDOUT.
 */
SHEAF_API int sheaf_enqueue_wait(sheaf_queue_t *q, void *obj, int timeout_ms);
SHEAF_API int sheaf_dequeue_wait(sheaf_queue_t *q, void **obj, int timeout_ms);

struct sheaf_queue_stats {
	unsigned capacity;
	uint64_t depth;              /* objects in the queue now */
	uint64_t enqueued;           /* enqueues since creation */
	uint64_t dequeued;
	uint64_t dequeue_waits;      /* times a consumer slept: empty */
	uint64_t enqueue_waits;      /* times a producer slept: full */
	uint64_t dropped;            /* spoiled slots a dequeue skipped */
};

/* The queue's numbers (read from shared memory, no request): 0, -ESTALE. */
SHEAF_API int sheaf_queue_stats(sheaf_queue_t *q, struct sheaf_queue_stats *out);

/* ---- topics (publish/subscribe) --------------------------------------- */

/*
 * A topic passes one object of the pool to every subscriber without
 * copying: the publisher hands the object over, each subscriber takes it
 * and releases it, and the last release frees it to its cache, in
 * whichever process that is.  Found by name; its descriptor is the
 * engine's, its log of messages in the pool's shared memory.  Objects of
 * any live cache of the pool can be published, mixed.  A subscriber gets
 * every message published after it subscribed (in order, numbered by
 * seq), plus the topic's history (the last K messages) when it joins.
 * When a subscriber lags by the topic's capacity, the publisher waits
 * (SHEAF_TOPIC_BLOCK) or drops that subscriber's oldest message
 * (SHEAF_TOPIC_DROP, counted; a message taken and not yet released is
 * never dropped).  At most 16 subscribers a topic, 32 topics a pool.
 *
 * A process killed at any instruction never wedges the topic for long and
 * never frees an object another still holds: sheafd releases what a dead
 * subscriber had queued or held, and undoes a dead publisher's half-done
 * publish.  An object of a plain cache being published, or being freed by
 * its last release, when its process dies stays allocated; with
 * SHEAF_CACHE_OWNED nothing is lost.
 *
 * Threads: a topic handle may be shared; a subscription is used by one
 * thread at a time.
 */
typedef struct sheaf_topic sheaf_topic_t;
typedef struct sheaf_sub sheaf_sub_t;

/* Full policies (sheaf_topic_create). */
#define SHEAF_TOPIC_BLOCK  0u
#define SHEAF_TOPIC_DROP   1u

/*
 * Create topic @name (1..SHEAF_CACHE_NAME_MAX bytes) in @pool: a log of
 * @capacity messages (rounded up to a power of two, at most 2^20; 0:
 * 1024), the last @history (< the capacity) kept for new subscribers,
 * @policy SHEAF_TOPIC_BLOCK or SHEAF_TOPIC_DROP.  The log takes whole slab
 * frames (16 bytes a message) under the pool's memory cap.  Returns the
 * topic, or NULL with errno: EINVAL, EEXIST (use sheaf_topic_open),
 * ENOSPC (all 32 topic slots in use), ENOMEM, EFBIG (pool data of 32 GiB
 * or more), ECHILD (a fork() child), or a connection error.
 */
SHEAF_API sheaf_topic_t *sheaf_topic_create(sheaf_pool_t *pool, const char *name,
					    unsigned capacity, unsigned history, unsigned policy);

/* Open existing topic @name (no request).  NULL with errno ENOENT,
 * EINVAL, ECHILD, ENOMEM. */
SHEAF_API sheaf_topic_t *sheaf_topic_open(sheaf_pool_t *pool, const char *name);

/* Release this process's handle (the topic stays; subscriptions made
 * through it must be ended first). */
SHEAF_API void sheaf_topic_close(sheaf_topic_t *t);

/* Destroy the topic and close @t: its history and any message left are
 * freed.  Refused while a subscriber is joined (-EBUSY); -ESTALE when it
 * is gone already; a connection error.  Destroy a topic nobody publishes
 * to. */
SHEAF_API int sheaf_topic_destroy(sheaf_topic_t *t);

/*
 * Publish @obj (an object of this pool, allocated) to every subscriber
 * joined now: on 0 the object is the topic's (do not touch or free it; a
 * message nobody reads is freed at once).  When the log is full, wait up
 * to @timeout_ms (-1: no limit; 0: do not wait), sleeping, for a release.
 * Returns 0, -EAGAIN (full, @timeout_ms 0), -ETIMEDOUT, -EINVAL (@obj is
 * no object of a live cache of the pool), -ESTALE; on an error the object
 * stays the caller's.
 */
SHEAF_API int sheaf_topic_publish(sheaf_topic_t *t, void *obj, int timeout_ms);

/* Subscribe to @t (a request to sheafd): messages published from now on,
 * and the history.  NULL with errno ENOSPC (16 subscribers), ESTALE,
 * ECHILD, ENOMEM, or a connection error. */
SHEAF_API sheaf_sub_t *sheaf_topic_subscribe(sheaf_topic_t *t);

/* End subscription @s and free it: what it had queued and what it holds
 * (taken, not released) is released by sheafd; objects it holds must not
 * be used afterwards.  0, or a connection error (@s is freed anyway). */
SHEAF_API int sheaf_topic_unsubscribe(sheaf_sub_t *s);

/* A message taken: the object (read-only by convention: every subscriber
 * sees the same one) and its sequence number in the topic (gaps: messages
 * dropped for this subscriber). */
struct sheaf_msg {
	void *obj;
	uint64_t seq;
};

/* Take the next message into *@m, waiting up to @timeout_ms (-1: no
 * limit; 0: do not wait), sleeping.  0, -EAGAIN (none, @timeout_ms 0),
 * -ETIMEDOUT, -ESTALE (the topic or the subscription is gone). */
SHEAF_API int sheaf_topic_take(sheaf_sub_t *s, struct sheaf_msg *m, int timeout_ms);

/* Release message @m taken through @s: the last release frees the object.
 * 0, or -EALREADY (not held by @s: released already, or @s left). */
SHEAF_API int sheaf_topic_release(sheaf_sub_t *s, const struct sheaf_msg *m);

struct sheaf_topic_stats {
	uint32_t capacity;           /* messages in the log */
	uint32_t history;
	uint32_t policy;             /* SHEAF_TOPIC_* */
	uint32_t subscribers;        /* joined now */
	uint64_t published;
	uint64_t unread;             /* freed at publish: nobody to read them */
	uint64_t publish_waits;      /* times a publisher slept: full */
	uint64_t bad;                /* spoiled values skipped, frees refused */
};

struct sheaf_sub_stats {
	uint64_t delivered;          /* messages taken */
	uint64_t released;
	uint64_t dropped;            /* its messages a publisher dropped */
	uint64_t held;               /* taken, not released */
	uint64_t depth;              /* published, not yet taken */
	uint64_t lag;                /* the topic's tail minus its cursor */
};

/* The topic's numbers, and one subscription's (shared memory, no
 * request): 0, -ESTALE. */
SHEAF_API int sheaf_topic_stats(sheaf_topic_t *t, struct sheaf_topic_stats *out);
SHEAF_API int sheaf_sub_stats(sheaf_sub_t *s, struct sheaf_sub_stats *out);

/* ---- size classes (kmalloc) -------------------------------------------- */

/*
 * Objects of any size up to SHEAF_KMALLOC_MAX from one pool, as the
 * kernel's kmalloc: each size goes to the smallest size class that holds
 * it, and each class is an ordinary cache named "kmalloc-<size>", created
 * on first use with sheaf_cache_create_or_open (so sheafd makes it, it
 * outlives restarts and adoption, and sheafctl lists and tunes it like any
 * cache; alignment 8; capacity: the objects of SHEAF_KMALLOC_SHEAF_BYTES,
 * at most 256 and never fewer than SHEAF_CAPACITY_DEFAULT's, so 256 up to
 * 1 KiB, 128 for 2 KiB ... 4 for 64 KiB).  Classes, in
 * bytes: 8 16 32 48 64 80 96 112 128 160 192 224 256 320 384 448 512 576
 * 640 704 768 832 896 960 1024 2048 4096 8192 16384 32768 65536, then the
 * large classes, every power of two from 128 KiB to 1 GiB
 * (SHEAF_KMALLOC_MAX), limited to the pool's node size (the data of one
 * NUMA node: sheafd --size / nodes, a power of two of 256 KiB frames).  A
 * large class is a cache of large objects (sheaf_cache_create): its
 * sheaves hold 4 objects up to 1 MiB, 2 of 2 MiB, 1 above.  An
 * object is aligned to the largest power of two dividing its class's
 * size, at most 4096 (8-byte objects: 8; 96: 32).  A cache of one
 * of these names made beforehand with the same size and alignment is used
 * as it is (e.g. with SHEAF_CACHE_DEBUG, to catch every double free).
 * Racing first uses of a class, in any processes, end with one cache.
 * The classes take up to 45 of the pool's max_caches caches and of the
 * process's SHEAF_CACHE_HANDLES_MAX cache handles.  Local pools and pools
 * of sheafd alike.
 */
#define SHEAF_KMALLOC_MAX     (1u << 30)
#define SHEAF_KMALLOC_LOG_MAX 30
#define SHEAF_KMALLOC_CLASSES 45u
#define SHEAF_KMALLOC_SHEAF_BYTES (256u << 10)  /* a class's sheaf, at most */

/*
 * Allocate an object of at least @size bytes (not zeroed).  Fast path
 * (inline): the class's handle from a per-pool table by size, then
 * sheaf_alloc.  @size 0 allocates from the 8-byte class (a unique
 * pointer, as glibc's malloc(0)).
 * Returns the object, or NULL with errno:
 *   EFBIG   @size > the largest class the pool serves:
 *           SHEAF_KMALLOC_MAX, or the pool's node size when smaller;
 *   EINVAL  a cache of the class's name exists with another object size
 *           or alignment;
 *   ENOSPC  the class's cache had to be made and max_caches caches exist;
 *   EMFILE  no cache handle left in this process
 *           (SHEAF_CACHE_HANDLES_MAX), or no lane;
 *   any other error of sheaf_cache_create_or_open (for a pool of sheafd:
 *           of the request, e.g. ETIMEDOUT) or of sheaf_alloc (ENOMEM,
 *           EAGAIN, ECHILD).
 * A class whose cache was destroyed (sheafctl destroy) is made again.
 */
SHEAF_API SHEAF__INLINE void *sheaf_malloc(sheaf_pool_t *pool, size_t size);

/*
 * Allocate @n objects' worth (@n * @size bytes) zeroed, as sheaf_malloc.
 * Returns the object, or NULL with errno EOVERFLOW (@n * @size does not
 * fit a size_t), EFBIG (the product above sheaf_malloc's largest), or an error of
 * sheaf_malloc.  @n or @size 0: as sheaf_malloc(pool, 0), zeroed.
 */
SHEAF_API void *sheaf_calloc(sheaf_pool_t *pool, size_t n, size_t size);

/*
 * Resize object @obj to at least @size bytes.  @obj NULL: sheaf_malloc.
 * When @size falls in the class @obj is in, @obj itself is returned;
 * otherwise (another class, or @obj of a cache that is not a size class)
 * a new object of @size's class receives the first min(old usable size,
 * @size) bytes and @obj is freed (as sheaf_free_any).  @size 0 is
 * @size 1: the 8-byte class (a valid pointer, never a free: NULL always
 * means failure).  On failure NULL is returned with errno and @obj is left
 * as it was (contents unchanged):
 *   EFBIG           @size above sheaf_malloc's largest;
 *   EFAULT, EINVAL  @obj is not an object of the pool (not in its data,
 *                   or not on an object boundary of the cache owning its
 *                   frame): checked before anything;
 *   EALREADY, or another error of sheaf_free: the free of @obj after the
 *                   copy was refused (a double free sheaf_free catches);
 *                   the new object is freed again;
 *   an error of sheaf_malloc: the new object could not be had.
 * Whether @obj is allocated is known only as sheaf_free knows it: a
 * realloc within its class of an object already freed returns it.
 */
SHEAF_API void *sheaf_realloc(sheaf_pool_t *pool, void *obj, size_t size);

/*
 * Free @obj, an object of any cache of @pool (a size class or not),
 * without naming its cache: the cache is the one the pool's frame owner
 * map (engine-owned, read-only to clients) names for @obj's slab frame,
 * so the free is checked exactly as sheaf_free checks it.  Fast path
 * (inline): the handle guessed from the calling thread's last sheaf_malloc
 * (when @obj is that object) or from a per-pool table by frame, then
 * sheaf_free's checks and push on that guess.
 * Returns 0 (also for @obj NULL), or:
 *   -EFAULT    @obj is not in the pool's memory (a stack or heap pointer,
 *              the pool's metadata);
 *   -EINVAL    @obj is in the pool's data but in a frame no cache owns, or
 *              not on an object boundary;
 *   -EALREADY  @obj is already free (the cases sheaf_free detects: the
 *              immediate double free; every one in a debug cache);
 *   any other error of sheaf_free (-EAGAIN, -EMFILE, -ECHILD), or -EMFILE
 *              when no handle is left for @obj's cache in this process.
 * errno is left alone.
 */
SHEAF_API SHEAF__INLINE int sheaf_free_any(sheaf_pool_t *pool, void *obj);

/*
 * Free @obj as sheaf_free_any, given @size, the size it was allocated
 * with (sheaf_malloc's @size, sheaf_calloc's @n * @size, the last
 * sheaf_realloc's @size): the size names the class, so the fast path
 * skips sheaf_free_any's lookup of the object's cache, and checks @obj
 * against that class exactly as sheaf_free does.  Unlike C23's free_sized,
 * a wrong @size is not undefined: an object the class's check refuses is
 * freed (or refused) as sheaf_free_any would, at the cost of its lookup.
 * Returns as sheaf_free_any; errno is left alone.
 */
SHEAF_API SHEAF__INLINE int sheaf_free_sized(sheaf_pool_t *pool, void *obj, size_t size);

/*
 * Usable size of @obj (its cache's object size: the class's size for a
 * size class), or 0 with errno EFAULT or EINVAL (as sheaf_free_any: not
 * in the pool, not an object), ECHILD, EMFILE.  Whether @obj is allocated
 * is not checked.
 */
SHEAF_API size_t sheaf_obj_size(sheaf_pool_t *pool, const void *obj);

/*
 * The handle of the cache @obj belongs to (any cache of @pool), for the
 * calls that take one (sheaf_free, sheaf_cache_stats...); NULL with errno
 * as sheaf_obj_size.
 */
SHEAF_API sheaf_cache_t *sheaf_obj_cache(sheaf_pool_t *pool, const void *obj);
/* ---- inline fast paths ------------------------------------------------- */

#define SHEAF__INSIDE_SHEAF_H 1
#include "sheaf_inline.h"
#undef SHEAF__INSIDE_SHEAF_H

#ifdef __cplusplus
}
#endif
#endif
