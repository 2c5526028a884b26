/*
 * layout.h - every structure that lives in a pool's shared-memory region.
 *
 * A pool's region holds offsets and indices only, never pointers; each
 * process turns offsets into addresses with its own struct shm_pool
 * (pool.h).  The region is split in two parts, each its own memfd, mapped
 * back to back (offsets are region offsets in both):
 *
 *   [0, off_rw)        META, engine-owned: header, cache descriptors, per
 *                      cache-node slab lists, node frame allocators, the slab
 *                      table, client slots, the free-object bitmaps, the
 *                      frame->cache map.  Only the engine (sheafd) writes it;
 *                      clients get it as a read-only descriptor and cannot
 *                      map it writable (pool_meta_readonly_fd).
 *   [off_rw, size)     SHARED: sheaf owner table, sheaves, rings, barns, node
 *                      doorbells, thread lanes, debug in-use bitmaps, owner
 *                      tags and, last, one data region per NUMA node.
 *
 * Who writes what (the rules; functions assume them):
 *   shm_header         engine at creation; then mem_cap, frames_used (engine).
 *   shm_cache          engine; capacity/limits also by the engine (tuning).
 *   shm_cache_node     engine, under ->lock (a process-private mutex: only
 *                      the engine process takes it).  Lock order
 *                      (docs/design.md): engine ctl_lock, cache-node lock,
 *                      node-allocator lock; a second cache-node lock only
 *                      by try-lock.
 *   shm_slab, bitmaps  engine, under the owning cache-node's lock.
 *   frame_owner[]      engine, under the node allocator lock (a leaf);
 *                      clients read it (relaxed) to validate frees.
 *   owners[]           ring protocol (ring.h): CAS by anyone moving a sheaf
 *                      between rings and owners.
 *   shm_sheaf          its current owner only (owners[id] says who); handed
 *                      over through owners[] release/acquire.
 *   shm_barn           rings by the ring protocol; supply/starved by the
 *                      engine; waiters by clients.
 *   shm_node           doorbell bumped by clients, read by the node worker.
 *   shm_client         engine (attach, repair); clients only read it.
 *   shm_lane           the thread that holds it (stats, intent); readers sum.
 *   owner tags         clients of owned caches (alloc, free, queues) and the
 *                      engine's dead-client repair, by the rules of
 *                      shm/owner.h; untrusted hints to the engine.
 *
 * Invariant (checked by pool_check, check.c): every object of every cache is
 * in exactly one place: free in its slab's bitmap, in one sheaf, or in use.
 */
#ifndef SHEAF_SHM_LAYOUT_H
#define SHEAF_SHM_LAYOUT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "atomics.h"
#include "ring.h"
#include "stats.h"

#define SHEAF_MAGIC           0x5348454146504f4fULL  /* "SHEAFPOO" */
#define SHEAF_LAYOUT_VERSION  4u      /* 3: META and SHARED memfds; 4: owner tags */

#define SHEAF_MAX_NODES       8u
#define SHEAF_MAX_CACHES      64u
#define SHEAF_MAX_CLIENTS     64u
#define SHEAF_MAX_LANES       256u
#define SHEAF_CAP_MAX         256u       /* objects one sheaf can hold */
#define SHEAF_NAME_MAX        48u

#define SLAB_SHIFT            18u        /* 256 KiB slab frames */
#define SLAB_SIZE             (1u << SLAB_SHIFT)
#define SLAB_MIN_OBJ          8u
#define SLAB_MAX_OBJS         (SLAB_SIZE / SLAB_MIN_OBJ)
#define SLAB_BITMAP_WORDS     (SLAB_MAX_OBJS / 64u)
#define SHEAF_MAX_OBJ_SIZE    (64u * 1024u)
#define SHEAF_MAX_ALIGN       4096u

#define SLAB_NONE             0xffffffffu
#define FRAME_FREE            0xffffu    /* frame_owner[] of an unused frame */

/* ---- engine-owned part ------------------------------------------------ */

struct shm_header {
	uint64_t magic;
	uint32_t version;
	uint32_t nodes;              /* NUMA nodes (real or simulated) */
	uint32_t simulated;          /* 1: nodes are simulated, no binding */
	uint32_t sheaf_count;        /* sheaves in the table (power of two) */
	uint32_t frames_per_node;    /* power of two */
	uint32_t node_frame_shift;   /* log2(frames_per_node) */
	uint64_t region_size;
	uint64_t map_addr;           /* address every process maps it at */
	uint64_t node_bytes;         /* data bytes per node */
	/* segment offsets from the region start */
	uint64_t off_caches, off_cache_nodes, off_node_alloc, off_slabs;
	uint64_t off_bitmaps, off_frame_owner, off_rw;
	uint64_t off_owners, off_sheaves, off_rings, ring_stride, off_barns;
	uint64_t off_nodes, off_clients, off_lanes, off_inuse, off_data;
	_Atomic uint64_t mem_cap;    /* bytes of slab frames allowed */
	_Atomic uint64_t frames_used;
	_Atomic uint64_t created_at; /* CLOCK_REALTIME seconds */
	uint64_t off_tags;           /* owner tags (SHARED, shm/owner.h): one
					byte per object slot, SLAB_MAX_OBJS a frame */
	char pad[32];
};
_Static_assert(sizeof(struct shm_header) == 4 * SHEAF_CACHELINE, "header size");

/* A slot's state: FREE, LIVE, DYING while engine_cache_destroy decides
 * (client slow paths wait, then go on if it is LIVE again; engine_adopt
 * makes a DYING cache LIVE again, its destroy having died with the engine),
 * or BROKEN: quarantined at adoption (an invalid descriptor, untrusted.h):
 * never served, never reused, its slabs left alone. */
enum cache_state { CACHE_FREE = 0, CACHE_LIVE = 1, CACHE_DYING = 2, CACHE_BROKEN = 3 };
#define SHEAF_CACHE_F_DEBUG 0x1u     /* track in-use bits: catch double frees */
#define SHEAF_CACHE_F_OWNED 0x2u     /* owner tags: a dead client's objects are
					freed (shm/owner.h) ... */
#define SHEAF_CACHE_F_KEEP  0x4u     /* ... or, with this, kept and reported */
#define SHEAF_CACHE_F_ALL   (SHEAF_CACHE_F_DEBUG | SHEAF_CACHE_F_OWNED | SHEAF_CACHE_F_KEEP)

struct shm_cache {
	_Atomic uint32_t state;
	uint32_t id;
	uint32_t obj_size;           /* rounded up to align */
	uint32_t align;
	uint32_t objs_per_slab;
	uint32_t slab_bytes;         /* objs_per_slab * obj_size */
	uint64_t reserved;
	uint32_t flags;
	_Atomic uint32_t generation; /* bumped each time the slot is reused: a
					client's handle records it (a handle of
					another generation is stale) */
	_Atomic uint32_t sheaf_capacity;  /* 0: sheaves disabled */
	_Atomic uint32_t min_partial;
	_Atomic uint32_t barn_limit;      /* full sheaves kept before flushing */
	_Atomic uint32_t barn_low;        /* refill when fewer full sheaves */
	_Atomic uint32_t barn_high;       /* ... up to this many */
	uint32_t pad0;
	char name[SHEAF_NAME_MAX];
	/* Owned caches (shm/owner.h): objects of dead clients the engine
	 * freed, and kept (SHEAF_CACHE_F_KEEP).  Engine only; former pad. */
	_Atomic uint64_t owner_freed;
	_Atomic uint64_t owner_kept;
};
_Static_assert(sizeof(struct shm_cache) == 2 * SHEAF_CACHELINE, "cache size");

enum slab_list { SL_NONE = 0, SL_PARTIAL, SL_FULL, SL_EMPTY };

struct slab_list_head {
	uint32_t first;
	uint32_t count;
};

struct shm_cache_node {
	pthread_mutex_t lock;             /* engine-private; see above */
	char pad0[64 - sizeof(pthread_mutex_t) % 64];
	struct slab_list_head lists[4];   /* indexed by enum slab_list */
	uint64_t free_objects;            /* free in this node's slabs */
	uint64_t total_objects;           /* objects in this node's slabs */
	_Atomic uint64_t stat[SHEAF_STAT_NR]; /* engine counters only */
	char pad1[SHEAF_CACHELINE - (4 * 8 + 16 + 8 * SHEAF_STAT_NR) % SHEAF_CACHELINE];
};
_Static_assert(sizeof(struct shm_cache_node) % SHEAF_CACHELINE == 0, "cache node size");

struct shm_node_alloc {
	pthread_mutex_t lock;        /* engine-private: frame allocation */
	uint32_t next_fresh;         /* frames [next_fresh, frames_per_node) unused */
	uint32_t free_first;         /* stack of released frames (via slab.next) */
	uint32_t free_count;
	uint32_t pad;
	char pad1[SHEAF_CACHELINE * 2 - sizeof(pthread_mutex_t) - 16];
};
_Static_assert(sizeof(struct shm_node_alloc) == 2 * SHEAF_CACHELINE, "node alloc size");

/* One entry per slab frame: index = node * frames_per_node + frame. */
struct shm_slab {
	uint16_t cache;              /* FRAME_FREE when unused */
	uint8_t node;
	uint8_t list;                /* enum slab_list */
	uint32_t nfree;              /* free objects (bits set in the bitmap) */
	uint32_t prev, next;         /* list links, slab indices */
	uint32_t hint;               /* first bitmap word that may hold a 1 */
	uint32_t pad[3];
};
_Static_assert(sizeof(struct shm_slab) == 32, "slab entry size");

/* ---- shared part ------------------------------------------------------ */

/*
 * A sheaf.  Its word holds the size (objects in objs[0..size)) in bits 0-15
 * and, in bits 16-63, a count of the fast-path operations done on it: the
 * inline fast paths of client/sheaf.h change both with one add and one
 * store (alloc: + SHEAF_WORD_OP - 1, free: + SHEAF_WORD_OP + 1), so that
 * alloc_fastpath and free_fastpath need no counter of their own (see
 * struct shm_live).  Every other writer changes the size alone
 * (sheaf_set_size).  Written by the sheaf's owner only; relaxed loads
 * elsewhere.
 */
#define SHEAF_WORD_SIZE  0xffffull
#define SHEAF_WORD_OP    (1ull << 16)

struct shm_sheaf {
	_Atomic uint64_t word;       /* size | fast-path ops << 16 */
	uint32_t capacity;           /* <= SHEAF_CAP_MAX */
	uint16_t cache;
	uint8_t node;
	uint8_t flags;
	uint32_t id;
	char pad[SHEAF_CACHELINE - 20];
	uint64_t objs[SHEAF_CAP_MAX];  /* object offsets from the region start */
};
_Static_assert(sizeof(struct shm_sheaf) % SHEAF_CACHELINE == 0, "sheaf size");
_Static_assert(offsetof(struct shm_sheaf, objs) == SHEAF_CACHELINE, "sheaf header");
_Static_assert(SHEAF_CAP_MAX <= SHEAF_WORD_SIZE, "sheaf size field");

static inline uint32_t sheaf_size(struct shm_sheaf *s)
{
	return (uint32_t)(at_load_relaxed(&s->word) & SHEAF_WORD_SIZE);
}

static inline void sheaf_set_size(struct shm_sheaf *s, uint32_t n)
{
	uint64_t w = at_load_relaxed(&s->word);

	at_store_relaxed(&s->word, (w & ~SHEAF_WORD_SIZE) | n);
}

static inline void sheaf_push(struct shm_sheaf *s, uint64_t off)
{
	uint32_t n = sheaf_size(s);

	s->objs[n] = off;
	sheaf_set_size(s, n + 1);
}

static inline uint64_t sheaf_pop(struct shm_sheaf *s)
{
	uint32_t n = sheaf_size(s) - 1;

	sheaf_set_size(s, n);
	return s->objs[n];
}

struct shm_barn {
	_Atomic uint32_t supply;     /* futex: engine bumps after stocking */
	_Atomic uint32_t waiters;    /* clients sleeping on supply */
	_Atomic uint32_t starved;    /* engine found nothing to refill with */
	uint32_t pad;
	char pad1[SHEAF_CACHELINE - 16];
};
_Static_assert(sizeof(struct shm_barn) == SHEAF_CACHELINE, "barn size");

struct shm_node {
	_Atomic uint32_t doorbell;   /* futex: clients bump, worker waits */
	char pad0[SHEAF_CACHELINE - 4];
	_Atomic uint32_t sleeping;   /* worker is (about to be) in futex_wait */
	char pad1[SHEAF_CACHELINE - 4];
};
_Static_assert(sizeof(struct shm_node) == 2 * SHEAF_CACHELINE, "node size");

enum client_state { CLIENT_FREE = 0, CLIENT_LIVE = 1, CLIENT_DEAD = 2 };

struct shm_client {
	_Atomic uint32_t state;
	uint32_t pid;
	uint32_t uid;
	uint32_t generation;
	uint64_t attached_at;
	char name[32];
	char pad[SHEAF_CACHELINE - 56];
};
_Static_assert(sizeof(struct shm_client) == SHEAF_CACHELINE, "client size");

#define LANE_FREE 0xffffffffu

/*
 * A lane belongs to a client (a process) until the client detaches or is
 * repaired, and to one of its threads at a time (@busy): a thread that exits
 * leaves the lane idle for the client's next thread, so the client's counts
 * stay its own.  A lane's counters are never reset, so sums over lanes never
 * go back: a lane freed by one client keeps counting for the next.  To keep
 * per-node sums monotonic a lane stays bound to the node it was first used
 * on (lanes of that node are reused first); @base records, per cache, the
 * objects in use (allocs - frees) the lane showed when its client took it,
 * so that a client's own objects in use are the sum of (net - base).
 */
/*
 * A lane's main sheaf of one cache, for the fast-path counts: @word is the
 * sheaf's word when it became the thread's main sheaf, so the operations
 * done on it since are (word now - @word) (struct shm_sheaf).  The lane's
 * thread writes it under the sequence count @seq (odd while it changes);
 * readers retry when @seq moved (clients.c, lane_counts).
 */
struct shm_live {
	_Atomic uint32_t seq;
	_Atomic uint32_t sheaf;      /* SHEAF_ID_NONE: nothing to count */
	_Atomic uint64_t word;
};
_Static_assert(sizeof(struct shm_live) == 16, "live size");

struct shm_lane {
	_Atomic uint32_t client;     /* owning client id, LANE_FREE */
	_Atomic uint32_t node;       /* the node the lane counts for */
	_Atomic uint32_t busy;       /* a thread of the client holds it */
	_Atomic uint32_t bound;      /* 0: never used; else node + 1 */
	struct ring_intent intent;
	uint32_t tid;
	/* A staged fold (clients.c, lane_live_fold): 0, or the cache + 1 whose
	 * alloc_fastpath and free_fastpath must become @fold_alloc and
	 * @fold_free.  Former padding (zero in older pools: nothing staged). */
	_Atomic uint32_t fold_cache;
	_Atomic uint64_t fold_alloc;
	_Atomic uint64_t fold_free;
	/* The cache + 1 whose barns the lane's thread may touch now (a
	 * client slow path or flush, client/cache.c's tcache_enter), 0 when
	 * none: engine_cache_destroy waits for it.  Former padding. */
	_Atomic uint32_t in_cache;
	uint32_t reserved;
	_Atomic int64_t base[SHEAF_MAX_CACHES];
	_Atomic uint64_t stat[SHEAF_MAX_CACHES][SHEAF_STAT_NR];
	struct shm_live live[SHEAF_MAX_CACHES];
};
_Static_assert(sizeof(struct shm_lane) % SHEAF_CACHELINE == 0, "lane size");
_Static_assert(offsetof(struct shm_lane, fold_alloc) == 40 &&
	       offsetof(struct shm_lane, base) == SHEAF_CACHELINE, "lane header");

/* Ring numbering: 0 is the depot of unused sheaves; each cache-node barn
 * has a ring of full sheaves and one of empty sheaves. */
#define RING_DEPOT 0u
static inline uint32_t ring_full_id(uint32_t cache, uint32_t node, uint32_t nodes)
{
	return 1u + 2u * (cache * nodes + node);
}
static inline uint32_t ring_empty_id(uint32_t cache, uint32_t node, uint32_t nodes)
{
	return 2u + 2u * (cache * nodes + node);
}
static inline uint32_t ring_total(uint32_t nodes)
{
	return 1u + 2u * SHEAF_MAX_CACHES * nodes;
}

#endif
