/*
 * layout.h - every structure that lives in a pool's shared-memory region.
 *
 * Who may call: any process of the pool (every module includes it); who
 * may write each structure is listed below.
 *
 * A pool's region holds offsets and indices only, never pointers; each
 * process turns offsets into addresses with its own struct shm_pool
 * (pool.h).  The region is split in two parts, each its own memfd, mapped
 * back to back (offsets are region offsets in both):
 *
 *   [0, off_rw)        META, engine-owned: header, cache descriptors, per
 *                      cache-node slab lists, node frame allocators, the slab
 *                      table, client slots, the name directory, the
 *                      free-object bitmaps, the frame->cache map.  Only the engine (sheafd) writes it;
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
 *   shm_name           engine, under its ctl_lock, each entry under its own
 *                      sequence count (names.h); clients read it, no lock.
 *   shm_lane           the thread that holds it (stats, intent, rcu_ctr);
 *                      readers sum; the grace-period scan reads rcu_ctr.
 *   shm_rcu            clients bump bell/req; the grace-period thread waits.
 *   owner tags         clients of owned caches (alloc, free, queues) and the
 *                      engine's dead-client repair, by the rules of
 *                      shm/owner.h; untrusted hints to the engine.
 *
 * Invariant (checked by pool_check, engine/check.c): every object of every cache is
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
#define SHEAF_LAYOUT_VERSION  7u      /* 3: META and SHARED memfds; 4: per-pool
					 limits, the name directory (off_names),
					 SHARED and the data on 2 MiB (huge.h),
					 deferred frees (off_rcu, RING_RCU),
					 queues (off_queues),
					 owner tags (off_tags); 5: sheaves
					 placed by sheaf_line; 6: the header's
					 frames_released (sheaf.h's hint); 7: a
					 queue record per lane (struct shm_qrec,
					 in the lane's counter block), lane
					 grants in META (off_lane_grant,
					 lanes_hwm), CLIENT_REVOKED,
					 multi-frame slabs (FRAME_TAIL), the
					 large-object retain budget, topics
					 (off_topics) */

#define SHEAF_MAX_NODES       8u
#define SHEAF_NUMA_F_IDS      0x1u       /* kernel_node[] is set */
#define SHEAF_NUMA_F_BOUND    0x2u       /* the data regions have a memory policy */
#define SHEAF_NUMA_F_CAPS     0x4u       /* numa_policy=bind: shm_node_alloc.cap_frames
					    is each node's limit (0: no frame) */
/* Per-pool limits (clients, lanes, caches) are set at creation and kept in
 * the header; these are their upper bounds (validation, id widths) and
 * defaults.  Every array they size is sparse: a slot costs memory once it
 * is first used (docs/design.md, "Sparse metadata"). */
#define SHEAF_MAX_CACHES      1024u
#define SHEAF_MAX_CLIENTS     4096u
#define SHEAF_MAX_LANES       65536u
#define SHEAF_DEFAULT_CACHES  256u
#define SHEAF_DEFAULT_CLIENTS 1024u
#define SHEAF_DEFAULT_LANES   8192u
#define SHEAF_CAP_MAX         256u       /* objects one sheaf can hold */
#define SHEAF_NAME_MAX        48u

#define SLAB_SHIFT            18u        /* 256 KiB slab frames */
#define SLAB_SIZE             (1u << SLAB_SHIFT)
#define SLAB_MIN_OBJ          8u
#define SLAB_MAX_OBJS         (SLAB_SIZE / SLAB_MIN_OBJ)
#define SLAB_BITMAP_WORDS     (SLAB_MAX_OBJS / 64u)
#define SHEAF_MAX_OBJ_SIZE    (1u << 30)  /* a cache's objects, at most */
#define SHEAF_MAX_ALIGN       4096u
/* Objects above this size are large: a cache of them has its own defaults
 * (small sheaves and barns, no empty slab kept beyond the pool's
 * large_retain) and, above SLAB_SIZE, multi-frame slabs of one object
 * (slab_geom.h). */
#define SHEAF_LARGE_MIN       (64u * 1024u)
#define SHEAF_LARGE_RETAIN_DIV 4u    /* default large_retain: the data / 4 */

#define SLAB_NONE             0xffffffffu
#define FRAME_FREE            0xffffu    /* frame_owner[] of an unused frame */
#define FRAME_QUEUE           0xfffeu    /* frame_owner[] of a queue's storage */
#define FRAME_TAIL            0x8000u    /* | cache: frame_owner[] of a frame of
					    a multi-frame slab after its first
					    (which holds the cache's id): no
					    object starts there */
_Static_assert(SHEAF_MAX_CACHES <= FRAME_TAIL, "cache ids below FRAME_TAIL");

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
	/* Layout 4: the name directory (names.h), SHEAF_DIR_ENTRIES entries
	 * of struct shm_name in META. */
	uint64_t off_names;
	uint32_t huge_pages;         /* 1: the data was madvised for 2 MiB
					pages (huge.h): clients do it too */
	uint32_t pad1;
	/* NUMA placement (shm/numa.h), engine-written at creation; former
	 * padding.  numa_flags & SHEAF_NUMA_F_IDS: kernel_node[i] is pool
	 * node i's kernel node id (else, an older pool: i itself). */
	uint8_t kernel_node[SHEAF_MAX_NODES];
	uint32_t numa_policy;        /* enum numa_policy (real nodes only) */
	uint32_t numa_flags;         /* SHEAF_NUMA_F_* */
	uint64_t off_topics;         /* topic descriptors (META; layout 7; former padding) */
	/* Layout 4: the pool's limits, fixed at creation (each <= its
	 * SHEAF_MAX_*), and the segments they size. */
	uint32_t max_clients, max_lanes, max_caches;
	/* Lanes [0, lanes_hwm) have been granted at least once (engine,
	 * release; the grant table, below). */
	_Atomic uint32_t lanes_hwm;
	uint64_t off_lane_grant;     /* META: a lane_grant_t per lane */
	uint64_t off_lane_stats;     /* SHARED: per-lane counter blocks */
	uint64_t lane_stride;        /* bytes of one lane's counter block */
	/* High-water marks (engine, release): slots [0, hwm) have been used
	 * at least once, slots past it never were (still zero pages).  Walks
	 * stop there: their cost follows use, not the limits. */
	_Atomic uint32_t clients_hwm;
	_Atomic uint32_t caches_hwm;
	/* Layout 7 (former padding): bytes of empty slabs of large caches
	 * (SHEAF_LARGE_MIN) the engine may keep, a pool tunable; and the
	 * bytes it keeps now (engine/slab.c, written under the cache-node
	 * locks).  Beyond the budget an empty large slab is punched at once. */
	_Atomic uint64_t large_retain;
	_Atomic uint64_t large_retained;
	/* Deferred frees (shm/engine/grace.h), engine-written: clients only read
	 * them, so no client can fake a completed grace period. */
	uint64_t off_rcu;            /* struct shm_rcu, in SHARED */
	_Atomic uint64_t gp_seq;     /* grace periods started */
	_Atomic uint64_t gp_done;    /* grace periods completed */
	_Atomic uint64_t gp_released;/* every deferred sheaf stamped below this
					was handed to its barn or the slabs */
	_Atomic uint32_t gp_wake;    /* futex: bumped at each completion */
	_Atomic uint32_t gp_flags;   /* GP_F_*: how readers must order */
	uint64_t off_queues;         /* queue descriptors (META; layout 4) */
	uint64_t off_tags;           /* owner tags (SHARED, shm/owner.h): one
					otag_t per object slot, SLAB_MAX_OBJS a frame */
	_Atomic uint64_t frames_released; /* slab frames a cache gave back,
					counted before frame_owner says so
					(engine/slab.c): the size-class free's test
					of a thread's last malloc (sheaf.h) */
};
_Static_assert(sizeof(struct shm_header) == 6 * SHEAF_CACHELINE, "header size");

/* A slot's state: FREE, LIVE, DYING while engine_cache_destroy decides
 * (client slow paths wait, then go on if it is LIVE again; engine_adopt
 * makes a DYING cache LIVE again, its destroy having died with the engine),
 * or BROKEN: quarantined at adoption (an invalid descriptor, bounds.h):
 * never served, never reused, its slabs left alone. */
enum cache_state { CACHE_FREE = 0, CACHE_LIVE = 1, CACHE_DYING = 2, CACHE_BROKEN = 3 };
#define SHEAF_CACHE_F_DEBUG 0x1u     /* track in-use bits: catch double frees */
#define SHEAF_CACHE_F_OWNED 0x2u     /* owner tags: a dead client's objects are
					freed (shm/owner.h) ... */
#define SHEAF_CACHE_F_KEEP  0x4u     /* ... or, with this, kept and reported */
#define SHEAF_CACHE_F_ALL   (SHEAF_CACHE_F_DEBUG | SHEAF_CACHE_F_OWNED | SHEAF_CACHE_F_KEEP)

/* A client thread's stash (struct shm_cache, stash_*): the defaults
 * (tunable per cache; chosen from tests/bench/stash_sweep.sh;
 * docs/design.md, "Slow paths")
 * and the most sheaves of each kind a thread keeps. */
#define SHEAF_STASH_SHEAVES 32u
#define SHEAF_STASH_BYTES   (512u << 10)
#define SHEAF_STASH_LIMIT   64u

struct shm_cache {
	_Atomic uint32_t state;
	uint32_t id;
	uint32_t obj_size;           /* rounded up to align */
	uint32_t align;
	uint32_t objs_per_slab;
	uint32_t slab_bytes;         /* objs_per_slab * obj_size */
	_Atomic uint64_t owner_freed; /* owned caches (shm/owner.h): objects of
					dead clients the engine freed; engine
					only; formerly reserved */
	uint32_t flags;
	_Atomic uint32_t generation; /* bumped each time the slot is reused: a
					client's handle records it (a handle of
					another generation is stale) */
	_Atomic uint32_t sheaf_capacity;  /* 0: sheaves disabled */
	_Atomic uint32_t min_partial;
	_Atomic uint32_t barn_limit;      /* full sheaves kept before flushing */
	_Atomic uint32_t barn_low;        /* refill when fewer full sheaves */
	_Atomic uint32_t barn_high;       /* ... up to this many */
	_Atomic uint32_t barn_keep;       /* full sheaves kept while the pool
					     is far from its memory cap
					     (barn_flush_limit); 0: barn_limit
					     always.  Former padding. */
	char name[SHEAF_NAME_MAX];
	/* A client thread's stash (client/exchange.c, stash_room): at most
	 * stash_sheaves full and as many empty sheaves beyond main and spare,
	 * and no more than stash_bytes of objects in the full ones.  Former
	 * padding: 0 in an older pool (no stash). */
	_Atomic uint32_t stash_sheaves;
	_Atomic uint32_t stash_bytes;
	/* Owned caches (shm/owner.h): objects of dead clients the engine
	 * kept (SHEAF_CACHE_F_KEEP); owner_freed (above) those it freed.
	 * Engine only; former padding. */
	_Atomic uint64_t owner_kept;
};
_Static_assert(sizeof(struct shm_cache) == 2 * SHEAF_CACHELINE, "cache size");

/*
 * The name directory (shm/names.h): an open-addressed table of
 * SHEAF_DIR_ENTRIES entries (linear probing from the name's hash; a
 * deleted entry is a tombstone until the chain behind it ends), each naming
 * one object by its offset and its cache's id and generation.  Written by
 * the engine only (under ctl_lock), each entry under its sequence count
 * @seq (odd while it changes); clients read it with no lock and no round
 * trip, and retry when @seq moved.  Every field is an atomic word so that
 * those reads race with nothing.
 */
#define SHEAF_DIR_ENTRIES     1024u      /* power of two */
#define SHEAF_DIR_NAME_BYTES  96u        /* a name and its NUL */
enum name_state { NAME_FREE = 0, NAME_USED = 1, NAME_TOMB = 2 };

struct shm_name {
	_Atomic uint32_t seq;
	_Atomic uint32_t state;      /* enum name_state */
	_Atomic uint32_t cache;      /* the object's cache id ... */
	_Atomic uint32_t cache_gen;  /* ... and that cache's generation */
	_Atomic uint64_t off;        /* the object, a region offset */
	_Atomic uint64_t created_at; /* CLOCK_REALTIME seconds */
	_Atomic uint64_t name[SHEAF_DIR_NAME_BYTES / 8];  /* NUL-terminated */
};
_Static_assert(sizeof(struct shm_name) == 2 * SHEAF_CACHELINE, "name entry size");
_Static_assert((SHEAF_DIR_ENTRIES & (SHEAF_DIR_ENTRIES - 1)) == 0, "directory size");

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
	_Atomic uint32_t used;       /* frames of this node in use (written under
					the lock; read lock-free: barn.h's
					pressure rule) */
	/* numa_policy=bind (shm/numa.h; former padding): the most frames
	 * the node may have in use (when the header's numa_flags has
	 * SHEAF_NUMA_F_CAPS; 0 then means none at all), set at creation and by
	 * Tune; refusals at the cap (a count sheafd watches to log each
	 * episode); the node's memory when the pool was made. */
	_Atomic uint32_t cap_frames;
	uint32_t pad0;
	_Atomic uint64_t cap_refused;
	uint64_t mem_total, mem_free;
	char pad1[SHEAF_CACHELINE * 2 - sizeof(pthread_mutex_t) - 48];
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

/*
 * A shared queue's descriptor (engine-owned, META; shm/queue.h).  The
 * engine writes it under ctl_lock; clients read it to open a queue by name
 * and trust it (it is read-only to them).  @off is the region offset of the
 * queue's struct shm_queue_ctl, in @nframes whole slab frames of node 0
 * marked FRAME_QUEUE in frame_owner[] (slabs, the checker and
 * slab_rebuild leave them alone).  BUSY: being created or destroyed (an
 * adopting engine frees its frames: engine_queues_adopt).
 */
#define SHEAF_MAX_QUEUES      64u
enum queue_state { QUEUE_FREE = 0, QUEUE_LIVE = 1, QUEUE_BUSY = 2, QUEUE_BROKEN = 3 };

struct shm_queue {
	_Atomic uint32_t state;
	uint32_t id;
	_Atomic uint32_t generation; /* bumped each time the slot is reused */
	uint32_t capacity;           /* slots: a power of two */
	uint32_t flags;
	uint32_t nframes;
	uint64_t off;                /* struct shm_queue_ctl */
	uint64_t created_at;         /* CLOCK_REALTIME seconds */
	char name[SHEAF_NAME_MAX];
	char pad[40];
};
_Static_assert(sizeof(struct shm_queue) == 2 * SHEAF_CACHELINE, "queue size");

/*
 * A topic's descriptor (engine-owned, META; shm/topic.h, docs/design.md
 * "Topics").  The engine writes it under ctl_lock; clients read it to open
 * a topic by name and trust it.  @off is the region offset of the topic's
 * struct shm_topic_ctl, in @nframes whole frames of node 0 marked
 * FRAME_QUEUE.  @live: bit i set while subscriber slot i is joined (the
 * engine's release store; a publish loads it after its claim).
 */
#define SHEAF_MAX_TOPICS      32u
#define TOPIC_SUBS_MAX        16u
enum topic_state { TOPIC_FREE = 0, TOPIC_LIVE = 1, TOPIC_BUSY = 2, TOPIC_BROKEN = 3 };

struct shm_topic_slot {
	uint32_t client;             /* client id + 1; 0: free */
	uint32_t generation;         /* bumped at each join of the slot */
	uint64_t joined_at;          /* CLOCK_REALTIME seconds */
};

struct shm_topic {
	_Atomic uint32_t state;
	uint32_t id;
	_Atomic uint32_t generation; /* bumped each time the slot is reused */
	uint32_t capacity;           /* records: a power of two */
	uint32_t history;            /* K: the last K messages kept for joiners */
	uint32_t policy;             /* TOPIC_POLICY_* (shm/topic.h) */
	uint32_t nframes;
	_Atomic uint32_t live;       /* joined subscriber slots */
	uint64_t off;                /* struct shm_topic_ctl */
	uint64_t created_at;         /* CLOCK_REALTIME seconds */
	char name[SHEAF_NAME_MAX];
	char pad[32];
	struct shm_topic_slot subs[TOPIC_SUBS_MAX];
	char pad2[128];
};
_Static_assert(sizeof(struct shm_topic) == 8 * SHEAF_CACHELINE, "topic size");

/* ---- shared part ------------------------------------------------------ */

/*
 * A queue's words in client-writable memory (its frames, data region):
 * positions (tail: next to fill, head: next to take; hints, never locks),
 * the two wait words, slow-path counters, then the slots (from
 * QUEUE_SLOTS_OFF).  Slot = sequence (high 32 bits) | value (low 32: the
 * object's (offset - off_data) / 8 + 1); docs/design.md, "Shared queues".
 */
struct shm_queue_ctl {
	_Atomic uint64_t tail;
	char pad0[SHEAF_CACHELINE - 8];
	_Atomic uint64_t head;
	char pad1[SHEAF_CACHELINE - 8];
	_Atomic uint32_t ne_event;   /* futex: bumped to wake consumers */
	_Atomic uint32_t ne_sleep;   /* 1: a consumer may sleep on ne_event */
	char pad2[SHEAF_CACHELINE - 8];
	_Atomic uint32_t nf_event;   /* futex: bumped to wake producers */
	_Atomic uint32_t nf_sleep;   /* 1: a producer may sleep on nf_event */
	char pad3[SHEAF_CACHELINE - 8];
	_Atomic uint64_t deq_waits;  /* consumers that slept (slow path) */
	_Atomic uint64_t enq_waits;  /* producers that slept */
	_Atomic uint64_t dropped;    /* bad values a dequeue skipped */
	char pad4[SHEAF_CACHELINE - 24];
};
#define QUEUE_SLOTS_OFF       (8u * SHEAF_CACHELINE)
_Static_assert(sizeof(struct shm_queue_ctl) <= QUEUE_SLOTS_OFF, "queue ctl size");

/*
 * A topic's words in client-writable memory (its frames): the tail hint,
 * the two wait words, counters, one block per subscriber slot, then the
 * records (from TOPIC_RECS_OFF): word (shm/topic.h's bits) and value.
 */
struct shm_topic_ctl {
	_Atomic uint64_t tail;       /* next position to claim (a hint) */
	char pad0[SHEAF_CACHELINE - 8];
	_Atomic uint32_t ne_event;   /* futex: bumped to wake subscribers */
	_Atomic uint32_t ne_sleep;
	char pad1[SHEAF_CACHELINE - 8];
	_Atomic uint32_t nf_event;   /* futex: bumped to wake publishers */
	_Atomic uint32_t nf_sleep;
	char pad2[SHEAF_CACHELINE - 8];
	_Atomic uint64_t published;  /* publishes done */
	_Atomic uint64_t pub_waits;  /* publishers that slept (full) */
	_Atomic uint64_t unread;     /* messages freed at publish: no reader */
	_Atomic uint64_t bad;        /* spoiled values skipped */
	char pad3[SHEAF_CACHELINE - 32];
};

struct shm_topic_sub {
	_Atomic uint64_t cursor;     /* the subscriber's next position */
	_Atomic uint64_t delivered;  /* takes */
	_Atomic uint64_t released;   /* releases */
	_Atomic uint64_t dropped;    /* its messages a publisher dropped */
	_Atomic uint64_t waits;      /* times it slept */
	_Atomic uint32_t generation; /* the slot generation these count for */
	char pad[SHEAF_CACHELINE - 44];
};
_Static_assert(sizeof(struct shm_topic_sub) == SHEAF_CACHELINE, "topic sub size");

struct shm_topic_rec {
	_Atomic uint64_t word;
	_Atomic uint32_t value;      /* (offset - off_data) / 8 + 1 */
	uint32_t pad;
};
_Static_assert(sizeof(struct shm_topic_rec) == 16, "topic record size");

#define TOPIC_SUBS_OFF        (4u * SHEAF_CACHELINE)
#define TOPIC_RECS_OFF        (TOPIC_SUBS_OFF + TOPIC_SUBS_MAX * SHEAF_CACHELINE)
_Static_assert(sizeof(struct shm_topic_ctl) <= TOPIC_SUBS_OFF, "topic ctl size");




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
	uint32_t pad0;
	uint64_t gp;                 /* SHEAF_F_DEFERRED: gp_seq when handed over */
	char pad[SHEAF_CACHELINE - 32];
	uint64_t objs[SHEAF_CAP_MAX];  /* object offsets from the region start */
};
_Static_assert(sizeof(struct shm_sheaf) % SHEAF_CACHELINE == 0, "sheaf size");
_Static_assert(offsetof(struct shm_sheaf, objs) == SHEAF_CACHELINE, "sheaf header");
_Static_assert(SHEAF_CAP_MAX <= SHEAF_WORD_SIZE, "sheaf size field");

/*
 * Where sheaf @id lies in the sheaf array (off_sheaves), in cache lines: in
 * id order, with one line left out after every 16 sheaves and another after
 * every 256.  A sheaf is 33 lines, so placed back to back its header's L1
 * set is a function of id mod 64 alone, and the sheaves a thread holds at
 * once are often a power of two apart (a cache's barn is stocked with a run
 * of 16 from the depot at its first use): W8's main sheaves, one per size
 * class, would have their headers and top entries (objs[255], 32 lines on)
 * in 4 of the 64 sets, 50 lines in 32 ways (docs/design.md, "Where the
 * sheaves lie").  The gaps make 25 sheaves 2^k apart (k = 0..9) use no set
 * more than 4 times of its 8 ways for those two lines (test_sheaf
 * sheaf_line_spreads_sets), and keep sheaves in id order (a run of ids is a
 * run of memory, which the refills of W2 at 2^20 stream through) for 0.2%
 * more memory.
 */
static inline uint64_t sheaf_line(uint32_t id)
{
	return (uint64_t)id * (sizeof(struct shm_sheaf) / SHEAF_CACHELINE) +
	       (id >> 4) + (id >> 8);
}

/* The id of the sheaf at line @line of the array (a line inside a sheaf
 * or a gap: the sheaf at or before it), sheaf_line's inverse.  A line
 * past the array (a pointer that is no sheaf of it) gives an id at or
 * above the pool's sheaf_count, in constant time. */
static inline uint32_t sheaf_at_line(uint64_t line)
{
	const uint64_t per = sizeof(struct shm_sheaf) / SHEAF_CACHELINE;
	/* 256 sheaves take per * 256 + 16 + 1 lines: an estimate at most
	 * one short (checked for every id below 2^24, POOL_SHEAVES_MAX is
	 * 2^20), then one step.  A loop of steps instead ran for ever on
	 * the line of a pointer far outside the array. */
	const uint64_t run = per * 256 + 17;
	uint64_t est = line / run * 256 + line % run * 256 / run;
	uint32_t id = est < UINT32_MAX ? (uint32_t)est : UINT32_MAX - 1;

	if (sheaf_line(id + 1) <= line)
		id++;
	return id;
}

/* Bytes of an array of @n sheaves. */
static inline uint64_t sheaf_array_bytes(uint32_t n)
{
	return sheaf_line(n) * SHEAF_CACHELINE;
}

static inline uint32_t sheaf_size(struct shm_sheaf *s)
{
	return (uint32_t)(at_load_relaxed(&s->word) & SHEAF_WORD_SIZE);
}

static inline void sheaf_set_size(struct shm_sheaf *s, uint32_t n)
{
	uint64_t w = at_load_relaxed(&s->word);

	at_store_relaxed(&s->word, (w & ~SHEAF_WORD_SIZE) | n);
}

/*
 * The slot of objs[] that position @i names.  A sheaf's size and capacity
 * are client-writable: a peer may set them past SHEAF_CAP_MAX, so a
 * client's pushes and pops index objs[] modulo SHEAF_CAP_MAX (as the
 * inline paths of client/sheaf.h do) and never leave the sheaf; what the
 * spoiled sheaf then holds is its cache's loss alone.
 */
_Static_assert((SHEAF_CAP_MAX & (SHEAF_CAP_MAX - 1)) == 0, "SHEAF_CAP_MAX a power of two");
static inline uint32_t sheaf_slot(uint64_t i)
{
	return (uint32_t)(i & (SHEAF_CAP_MAX - 1));
}

static inline void sheaf_push(struct shm_sheaf *s, uint64_t off)
{
	uint32_t n = sheaf_size(s);

	s->objs[sheaf_slot(n)] = off;
	sheaf_set_size(s, n + 1);
}

static inline uint64_t sheaf_pop(struct shm_sheaf *s)
{
	uint32_t n = sheaf_size(s) - 1;

	sheaf_set_size(s, n);
	return s->objs[sheaf_slot(n)];
}

struct shm_barn {
	_Atomic uint32_t supply;     /* futex: engine bumps after stocking */
	_Atomic uint32_t waiters;    /* clients sleeping on supply */
	_Atomic uint32_t starved;    /* engine found nothing to refill with */
	_Atomic uint32_t waiter_cpu; /* the last waiter's CPU + 1, 0: none; a
					hint the worker only compares with its
					own (engine/worker.c: served_here) */
	_Atomic uint32_t waits;      /* bumped as each wait starts: a waiter
					count that stays put with waits is no
					new waiter (engine/worker.c,
					waiters_real) */
	char pad1[SHEAF_CACHELINE - 20];
};
_Static_assert(sizeof(struct shm_barn) == SHEAF_CACHELINE, "barn size");

struct shm_node {
	_Atomic uint32_t doorbell;   /* futex: clients bump, worker waits */
	char pad0[SHEAF_CACHELINE - 4];
	_Atomic uint32_t sleeping;   /* worker is (about to be) in futex_wait */
	_Atomic uint32_t cpu;        /* the CPU the worker last ran on, + 1
					(0: not yet): a hint for waiters
					(barn_wait_supply); sheafd never
					reads it */
	char pad1[SHEAF_CACHELINE - 8];
};
_Static_assert(sizeof(struct shm_node) == 2 * SHEAF_CACHELINE, "node size");

/* CLIENT_REVOKED: sheafd caught the client at something libsheaf never
 * does (docs/design.md, "What a hostile client can still spoil"): its
 * sheaves and lanes are taken back, its requests refused, and its uid's
 * attaches refused until @revoked_at + the daemon's revoke_ban; the slot
 * is not reused before both its process is gone and the ban is over. */
enum client_state { CLIENT_FREE = 0, CLIENT_LIVE = 1, CLIENT_DEAD = 2, CLIENT_REVOKED = 3 };

struct shm_client {
	_Atomic uint32_t state;
	uint32_t pid;
	uint32_t uid;
	uint32_t generation;
	uint64_t attached_at;
	char name[32];
	uint64_t revoked_at;         /* CLOCK_REALTIME seconds (REVOKED) */
};
_Static_assert(sizeof(struct shm_client) == SHEAF_CACHELINE, "client size");

#define LANE_FREE 0xffffffffu

/*
 * A lane (its header here, its counters in a block of its own at
 * off_lane_stats, below) belongs to a client (a process) until the client
 * detaches or is repaired, and to one of its threads at a time (@busy): a
 * thread that exits leaves the lane idle for the client's next thread, so
 * the client's counts stay its own.  A lane's counters are never reset, so
 * sums over lanes never go back: a lane freed by one client keeps counting
 * for the next.  To keep per-node sums monotonic a lane stays bound to the
 * node it was first used on (lanes of that node are reused first); @base
 * records, per cache, the objects in use (allocs - frees) the lane showed
 * when its client took it, so that a client's own objects in use are the
 * sum of (net - base).
 */
/*
 * A lane's main sheaf of one cache, for the fast-path counts: @word is the
 * sheaf's word when it became the thread's main sheaf, so the operations
 * done on it since are (word now - @word) (struct shm_sheaf).  The lane's
 * thread writes it under the sequence count @seq (odd while it changes);
 * readers retry when @seq moved (lanes.c, lane_counts).
 */
struct shm_live {
	_Atomic uint32_t seq;
	_Atomic uint32_t sheaf;      /* SHEAF_ID_NONE: nothing to count */
	_Atomic uint64_t word;
};
_Static_assert(sizeof(struct shm_live) == 16, "live size");

struct shm_lane {
	_Atomic uint32_t client;     /* a copy of its grant (engine, at grant and
					free): client id, OWNER_ENGINE or
					LANE_FREE; never trusted */
	_Atomic uint32_t node;       /* the node the lane counts for */
	_Atomic uint32_t busy;       /* a thread of the client holds it */
	_Atomic uint32_t bound;      /* 0: never used; else node + 1 */
	struct ring_intent intent;
	uint32_t tid;
	/* A staged fold (lanes.c, lane_live_fold): 0, or the cache + 1 whose
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
	/* Reader state (client/deferred.c, shm/engine/grace.c): 0 outside a read
	 * section, else (gp_seq when it began or last was quiescent) << 1 | 1.
	 * Written by the lane's thread only; cleared by lane_release,
	 * lane_free and the dead-client repair.  Its own line: the
	 * grace-period scan reads it. */
	_Atomic uint64_t rcu_ctr;
	/* A staged count of a deferred sheaf handed over (client/deferred.c,
	 * handover): 0, or the cache + 1 whose free_rcu_sheaf must become
	 * @rcu_fold_val, which counts sheaf @rcu_fold_sheaf's objects; the
	 * dead-client repair completes it (engine/repair.c).  Former
	 * padding (zero in older pools: nothing staged). */
	_Atomic uint32_t rcu_fold_cache;
	_Atomic uint32_t rcu_fold_sheaf;
	_Atomic uint64_t rcu_fold_val;
	/* A staged count of a slow path's push or pop (lanes.c,
	 * lane_count_stage): 0, or the cache + 1 whose counter @count_stat
	 * must become @count_val if sheaf @count_sheaf holds @count_size
	 * objects (the push or pop done); the dead-client repair completes
	 * it.  Former padding (zero in older pools: nothing staged). */
	_Atomic uint32_t count_cache;
	_Atomic uint32_t count_stat;
	_Atomic uint32_t count_sheaf;
	_Atomic uint32_t count_size;
	_Atomic uint64_t count_val;
	char rcu_pad[SHEAF_CACHELINE - 48];
};
_Static_assert(sizeof(struct shm_lane) == 2 * SHEAF_CACHELINE, "lane size");
_Static_assert(offsetof(struct shm_lane, fold_alloc) == 40, "lane header");

/*
 * A lane's per-cache counters: a block of header->lane_stride bytes (page
 * aligned) at off_lane_stats + lane * lane_stride, holding, for the pool's
 * max_caches caches, live[max_caches] (struct shm_live), then
 * base[max_caches] (int64), then stat[max_caches][SHEAF_STAT_NR] (uint64),
 * then the lane's queue record (struct shm_qrec, below).  pool.h's
 * lane_live, lane_base, lane_stat and lane_qrec find them.  A lane's block
 * is touched only for the caches its threads use (and the record, for a
 * thread that dequeues or enqueues objects of an owned cache).
 */
#define SHEAF_LANE_CACHE_BYTES (sizeof(struct shm_live) + 8u + 8u * SHEAF_STAT_NR)

/*
 * A lane's queue record (SHARED, client-written, untrusted): what the
 * lane's thread is doing to a shared queue, so that the dead-client repair
 * can complete or undo it for objects of owned caches (shm/queue.h,
 * "queue records"; docs/design.md, "Object ownership").  It lies in the
 * lane's counter block, after the counters (pool.h's lane_qrec), on its own
 * cache lines.  @op: QREC_NONE, QREC_ENQ (@vals[0, n) are being enqueued:
 * tagged QUEUED, some maybe in slots) or QREC_DEQ (@vals[0, n) were taken
 * from slots, @vals[n], when not 0 and n < QREC_MAX, is being taken).
 * Values are slot values
 * (shm/queue.h).  Zero in a lane never used; cleared by its thread after
 * each operation and by the repair.
 */
#define QREC_MAX 64u
enum qrec_op { QREC_NONE = 0, QREC_ENQ = 1, QREC_DEQ = 2 };
struct shm_qrec {
	_Atomic uint32_t op;
	_Atomic uint32_t n;
	uint32_t pad[2];
	_Atomic uint32_t vals[QREC_MAX];
	char pad2[SHEAF_CACHELINE - 16];
};
_Static_assert(sizeof(struct shm_qrec) % SHEAF_CACHELINE == 0, "queue record size");
/* Where a lane's record lies in its counter block, and the block's bytes
 * (layout_compute's lane_stride). */
#define SHEAF_LANE_QREC_OFF(caches) \
	(((uint64_t)(caches) * SHEAF_LANE_CACHE_BYTES + SHEAF_CACHELINE - 1) & \
	 ~(uint64_t)(SHEAF_CACHELINE - 1))
#define SHEAF_LANE_BLOCK_BYTES(caches) (SHEAF_LANE_QREC_OFF(caches) + sizeof(struct shm_qrec))

/*
 * Lane grants (META, engine-written; shm/engine/clients.h): who may use
 * each lane.  0: nobody; LANE_GRANT_ENGINE: the engine's own threads; else
 * the client slot + 1.  The engine grants lanes to a client by blocks (at
 * attach and on its request, up to the client's and its uid's caps) and
 * takes them back with the client; the lane's @client field in SHARED is
 * only a copy, never trusted.  A lane below lanes_hwm whose @bound is 0
 * was granted and never taken by a thread.
 */
typedef uint32_t lane_grant_t;
#define LANE_GRANT_NONE   0u
#define LANE_GRANT_ENGINE 0xffffffffu

/*
 * Deferred frees (shm/engine/grace.h): one per pool, client-writable.  @bell is
 * the grace-period thread's doorbell (clients bump it after handing a
 * deferred sheaf to the rcu ring or asking for a grace period; the thread
 * futex-waits on it while @sleeping); @req is set by a waiter to the grace
 * period it waits for (untrusted: the engine reads only whether it
 * changed, and runs one at least every GRACE_BEAT_NS anyway).
 */
struct shm_rcu {
	_Atomic uint32_t bell;
	_Atomic uint32_t sleeping;
	_Atomic uint64_t req;
	char pad[SHEAF_CACHELINE - 16];
};
_Static_assert(sizeof(struct shm_rcu) == SHEAF_CACHELINE, "rcu size");

#define GP_F_MEMBARRIER 0x1u    /* the engine issues membarrier(GLOBAL_EXPEDITED)
				   before each scan: registered readers need no fence */

/* A sheaf's flags (struct shm_sheaf.flags). */
#define SHEAF_F_DEFERRED 0x1u   /* holds deferred frees: never to the slabs
				   before its grace period (repair included) */
#define SHEAF_F_MIXED    0x2u   /* objects of several nodes: flushed, not barned */
#define SHEAF_F_WAITING  0x4u   /* the grace-period thread counts its objects in
				   rcu_waiting (engine-set while it holds it) */

/* Ring numbering: 0 is the depot of unused sheaves, 1 holds deferred
 * sheaves waiting for the grace-period thread (engine/grace.h); then each
 * cache-node barn has a ring of full sheaves and one of empty sheaves
 * (every ring of cache c comes before those of c + 1: the rings of caches
 * [0, n) are ring_total(n, ..) long). */
#define RING_DEPOT 0u
#define RING_RCU   1u
#define RING_FIRST_BARN 2u
static inline uint32_t ring_full_id(uint32_t cache, uint32_t node, uint32_t nodes)
{
	return RING_FIRST_BARN + 2u * (cache * nodes + node);
}
static inline uint32_t ring_empty_id(uint32_t cache, uint32_t node, uint32_t nodes)
{
	return RING_FIRST_BARN + 1u + 2u * (cache * nodes + node);
}
/* The cache a barn ring (id >= RING_FIRST_BARN) belongs to. */
static inline uint32_t ring_cache_of(uint32_t id, uint32_t nodes)
{
	return (id - RING_FIRST_BARN) / 2u / nodes;
}
static inline uint32_t ring_total(uint32_t caches, uint32_t nodes)
{
	return RING_FIRST_BARN + 2u * caches * nodes;
}
static inline uint32_t ring_rcu_id(uint32_t nodes)
{
	(void)nodes;
	return RING_RCU;
}
/* Whether ring @id is a barn's ring of full sheaves (its empty ring is
 * @id + 1).  Ask this, never the id's parity: RING_RCU takes id 1, so a
 * barn ring's parity is no rule. */
static inline int ring_is_full_barn(uint32_t id)
{
	return id >= RING_FIRST_BARN && (id - RING_FIRST_BARN) % 2u == 0;
}

#endif
