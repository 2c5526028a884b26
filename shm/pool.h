/*
 * pool.h - one process's view of a pool region: create, map, unmap, and the
 * address arithmetic from offsets (layout.h) to pointers.
 *
 * Who may call: pool_create, pool_meta_readonly_fd, pool_punch and
 * pool_cache_slot_init the engine's hosting process only (sheafd, or a
 * local pool's process); pool_map_fds, pool_unmap and the address helpers
 * any process of the pool.
 * Errors: functions return 0 or a negative errno and fill @err, a caller's
 * buffer; they never print.
 *
 * A region is two memfds mapped back to back inside one reservation of the
 * whole range: META holds [0, off_rw) (engine-owned) and SHARED holds
 * [off_rw, region_size) (client-writable).  Offsets are region offsets
 * either way.  Clients receive META only as a descriptor that cannot write
 * it (pool_meta_readonly_fd; docs/design.md, "Who may write what").
 */
#ifndef SHEAF_SHM_POOL_H
#define SHEAF_SHM_POOL_H

#include <stddef.h>
#include <stdint.h>
#include "debug.h"
#include "layout.h"
#include "numa.h"

/* An owner tag (shm/owner.h): 0, a client id + 1, or a special value. */
typedef uint16_t otag_t;

struct shm_pool {
	char *base;                  /* mapping of the whole region */
	size_t size;
	int meta_fd;                 /* memfd of [0, off_rw) (owned by this struct) */
	int shared_fd;               /* memfd of [off_rw, size) (owned) */
	int meta_ro_fd;              /* pool_meta_readonly_fd's, or -1 (owned) */
	uint32_t nodes;
	uint32_t sheaf_count;
	uint32_t frames_per_node;
	uint32_t node_frame_shift;
	uint32_t frames_total;
	struct shm_header *hdr;
	struct shm_cache *caches;
	struct shm_cache_node *cnodes;
	struct shm_node_alloc *nalloc;
	struct shm_slab *slabs;
	uint64_t *bitmaps;
	_Atomic uint16_t *frame_owner;
	_Atomic uint32_t *owners;
	struct shm_sheaf *sheaves;
	char *rings;
	uint64_t ring_stride;
	struct shm_barn *barns;
	struct shm_node *node;
	struct shm_client *clients;
	struct shm_name *names;      /* the name directory (names.h) */
	struct shm_queue *queues;    /* queue descriptors (META) */
	struct shm_topic *topics;    /* topic descriptors (META) */
	struct shm_lane *lanes;
	struct shm_rcu *rcu;         /* deferred frees (engine/grace.h) */
	_Atomic uint64_t *inuse;
	/* The pool's limits: this process's copies, read once from the
	 * header at create or map (and range-checked there); every bound
	 * sheafd applies to what clients write comes from these. */
	uint32_t max_clients, max_lanes, max_caches;
	_Atomic lane_grant_t *lane_grant;  /* META: who may use each lane */
	char *lane_stats;            /* base + off_lane_stats */
	uint64_t lane_stride;
	_Atomic otag_t *tags;       /* owner tags (owner.h) */
	char *data;                  /* base + off_data */
	uint64_t data_off;           /* off_data */
	uint64_t data_len;           /* nodes * node_bytes */
	char huge_note[320];         /* pool_create, huge_pages=try without
					them: why (empty otherwise) */
	/* NUMA (pool_numa.c): the topology the engine places by (owned;
	 * NULL in a client), and each node's remote-refill order, nearest
	 * first (refill_order[n][0 .. nodes-1)). */
	struct ntopo *topo;
	uint8_t refill_order[SHEAF_MAX_NODES][SHEAF_MAX_NODES];
};

struct pool_params {
	uint64_t size;               /* data bytes over all nodes (default 1 GiB) */
	uint32_t nodes;              /* 0: from libnuma; else simulated nodes */
	uint32_t sheaf_count;        /* 0: default 32768 (rounded to a power of 2) */
	uint64_t mem_cap;            /* 0: no cap below size */
	uint64_t addr_seed;          /* picks the map address's slot (any value;
					sheafd: a hash of its socket path) */
	/* Limits (0: SHEAF_DEFAULT_*; at most SHEAF_MAX_*). */
	uint32_t max_clients, max_lanes, max_caches;
	uint32_t huge;               /* enum huge_mode (huge.h) */
	uint32_t numa_policy;        /* enum numa_policy (numa.h); real nodes only */
	const char *numa_root;       /* the sysfs node tree (NULL: the real one;
					tests point it at a fake tree) */
};

#define POOL_DEFAULT_SIZE        (1ull << 30)
#define POOL_DEFAULT_SHEAVES     32768u

/*
 * The ranges of a pool's parameters: pool_create refuses a pool_params
 * outside them, the header check refuses a region whose header is, and
 * sheafd's configuration (daemon/config.c) takes its ranges from here, so
 * each range is written once.  Inclusive.
 */
#define POOL_NODES_MIN           1u
#define POOL_NODES_MAX           SHEAF_MAX_NODES
#define POOL_SHEAVES_MIN         64u
#define POOL_SHEAVES_MAX         (1u << 20)
#define POOL_SIZE_MAX            (1ull << 44)   /* data bytes; at least a slab a node */
#define POOL_FRAMES_PER_NODE_MAX (1u << 24)
#define POOL_CLIENTS_MIN         1u
#define POOL_CLIENTS_MAX         SHEAF_MAX_CLIENTS
/* Lanes: the engine's own (one per worker, at most one a node, and the
 * control thread's) and at least one more for a client. */
#define POOL_LANES_MIN           (2u + SHEAF_MAX_NODES)
#define POOL_LANES_MAX           SHEAF_MAX_LANES
#define POOL_CACHES_MIN          1u
#define POOL_CACHES_MAX          SHEAF_MAX_CACHES

/* Create a new region (META and SHARED memfds, sized, sealed against
 * resizing and further seals, mapped read-write, all segments initialised).
 * 0, or -errno with @err filled. */
int pool_create(struct shm_pool *p, const struct pool_params *pp,
		char *err, size_t errlen);

/*
 * Map an existing region from @meta_fd and @shared_fd (this call takes
 * ownership of both on success, of neither on failure).  META is mapped
 * read-only when @client is set, read-write otherwise (the engine adopting
 * a pool: then both memfds must be sealed against resizing).  The header is
 * checked against both memfds' sizes before anything is mapped.  The region
 * is mapped at the address its header publishes; when that range is taken,
 * -EADDRINUSE, unless @relocate, in which case anywhere.
 */
int pool_map_fds(struct shm_pool *p, int meta_fd, int shared_fd, int client,
		 int relocate, char *err, size_t errlen);

/*
 * NUMA hooks of pool_create and pool_map_fds (pool_numa.c, numa.h).
 * pool_numa_discover: the pool's nodes for @pp (pp->nodes when simulated,
 * else the kernel's memory nodes, in *@topo, which the caller passes on to
 * pool_numa_place or frees).  pool_numa_place: record the nodes' kernel ids,
 * policy, memory and bind caps in the new region and give each node's data
 * its memory policy (takes @topo).  pool_numa_adopt: an engine mapping an
 * existing region reads the topology for its workers and refills.
 * pool_numa_order: the default refill order (the ring), for any process.
 */
int pool_numa_discover(const struct pool_params *pp, struct ntopo **topo,
		       uint32_t *nodes, char *err, size_t errlen);
int pool_numa_place(struct shm_pool *p, const struct pool_params *pp,
		    struct ntopo *topo, char *err, size_t errlen);
void pool_numa_adopt(struct shm_pool *p);
void pool_numa_order(struct shm_pool *p);
/* Tune's node_cap:K (tune.h): 0, or -EINVAL with @err (not a bound pool,
 * K no pool node's kernel id, @bytes not in SLAB_SIZE..the node's region);
 * the set takes whole frames, rounded down. */
int pool_numa_cap_check(const struct shm_pool *p, unsigned knode, uint64_t bytes,
			char *err, size_t errlen);
void pool_numa_cap_set(struct shm_pool *p, unsigned knode, uint64_t bytes);
/* The pool index of kernel node @knode, or -1. */
int pool_numa_index(const struct shm_pool *p, unsigned knode);

/* Unmap the region and close every descriptor @p owns. */
void pool_unmap(struct shm_pool *p);

/*
 * The descriptor of META to hand to clients (the engine's; made on first
 * call, owned by @p): META's inode is made mode 0400 and reopened O_RDONLY
 * through /proc/self/fd, so its holder can neither write nor map it
 * writable, nor (unless it has sheafd's uid or CAP_DAC_OVERRIDE) reopen it
 * for writing.  The descriptor, or -errno with @err filled.
 */
int pool_meta_readonly_fd(struct shm_pool *p, char *err, size_t errlen);

/* Give a range of the region back to the kernel (fallocate PUNCH_HOLE on
 * whichever memfd holds it). */
int pool_punch(struct shm_pool *p, uint64_t off, uint64_t len);

/*
 * Set up cache slot @cache before its first use (its cache-node locks and
 * lists, its rings) and raise caches_hwm past it: slots never used stay
 * untouched zero pages.  Idempotent below the mark.  The engine, under its
 * control lock (or a process that creates the pool).
 */
void pool_cache_slot_init(struct shm_pool *p, uint32_t cache);

/* The accessors below assert their indices in a SHEAF_DEBUG build: callers
 * validate whatever a client could have written before indexing with it. */
/* ---- limits and high-water marks (docs/design.md, "Limits") ---------- */

static inline uint32_t pool_hwm_clamp(uint32_t v, uint32_t max)
{
	return v < max ? v : max;
}
/* Whether each node's objects come from its own memory only
 * (numa_policy=bind on real nodes): no refill and no exchange crosses
 * nodes, and a node at its cap gives ENOMEM (docs/design.md, "Bind caps"). */
static inline int pool_bound(const struct shm_pool *p)
{
	return !p->hdr->simulated && p->hdr->numa_policy == NUMA_POL_BIND;
}
/* Client slots [0, n) have been used; the rest are zero. */
static inline uint32_t pool_clients_used(const struct shm_pool *p)
{
	return pool_hwm_clamp(at_load_acquire(&p->hdr->clients_hwm), p->max_clients);
}
/* Cache slots [0, n) have been used (and set up); the rest are zero. */
static inline uint32_t pool_caches_used(const struct shm_pool *p)
{
	return pool_hwm_clamp(at_load_acquire(&p->hdr->caches_hwm), p->max_caches);
}
/* Lanes [0, n) have been granted at least once (META). */
static inline uint32_t pool_lanes_used(const struct shm_pool *p)
{
	return pool_hwm_clamp(at_load_acquire(&p->hdr->lanes_hwm), p->max_lanes);
}
/* Whether lane @l was ever taken by a thread (lane_take; SHARED, the
 * holder's: a hint that its records mean something). */
static inline int pool_lane_ready(const struct shm_lane *l)
{
	return at_load_acquire((_Atomic uint32_t *)&l->bound) != 0;
}
static inline uint32_t pool_ring_total(const struct shm_pool *p)
{
	return ring_total(p->max_caches, p->nodes);
}
/* Rings set up so far: the depot and those of caches [0, caches used). */
static inline uint32_t pool_rings_used(const struct shm_pool *p)
{
	return ring_total(pool_caches_used(p), p->nodes);
}
static inline uint32_t pool_lane_index(const struct shm_pool *p, const struct shm_lane *l)
{
	return (uint32_t)(l - p->lanes);
}
/* Who lane @l is granted to (META, engine-written, the truth): a client
 * id, OWNER_ENGINE, or LANE_FREE. */
static inline uint32_t pool_lane_holder(const struct shm_pool *p, const struct shm_lane *l)
{
	lane_grant_t g = at_load_acquire(&p->lane_grant[pool_lane_index(p, l)]);

	if (g == LANE_GRANT_NONE)
		return LANE_FREE;
	return g == LANE_GRANT_ENGINE ? OWNER_ENGINE : g - 1;
}
static inline char *pool_lane_block(const struct shm_pool *p, const struct shm_lane *l)
{
	SHEAF_ASSERT(pool_lane_index(p, l) < p->max_lanes);
	return p->lane_stats + (uint64_t)pool_lane_index(p, l) * p->lane_stride;
}
/* Lane @l's counters of cache @cache (layout.h, SHEAF_LANE_CACHE_BYTES). */
static inline struct shm_live *lane_live(const struct shm_pool *p,
					 const struct shm_lane *l, uint32_t cache)
{
	SHEAF_ASSERT(cache < p->max_caches);
	return (struct shm_live *)pool_lane_block(p, l) + cache;
}
static inline _Atomic int64_t *lane_base(const struct shm_pool *p,
					 const struct shm_lane *l, uint32_t cache)
{
	SHEAF_ASSERT(cache < p->max_caches);
	return (_Atomic int64_t *)(pool_lane_block(p, l) +
				   (uint64_t)p->max_caches * sizeof(struct shm_live)) + cache;
}
static inline _Atomic uint64_t *lane_stat(const struct shm_pool *p,
					  const struct shm_lane *l, uint32_t cache)
{
	SHEAF_ASSERT(cache < p->max_caches);
	return (_Atomic uint64_t *)(pool_lane_block(p, l) + (uint64_t)p->max_caches *
				    (sizeof(struct shm_live) + 8u)) +
		(uint64_t)cache * SHEAF_STAT_NR;
}

/* Lane @l's queue record (layout.h, struct shm_qrec). */
static inline struct shm_qrec *lane_qrec(const struct shm_pool *p, const struct shm_lane *l)
{
	return (struct shm_qrec *)(pool_lane_block(p, l) + SHEAF_LANE_QREC_OFF(p->max_caches));
}

static inline struct shm_ring *pool_ring(const struct shm_pool *p, uint32_t id)
{
	SHEAF_ASSERT(id < pool_ring_total(p));
	return (struct shm_ring *)(p->rings + (uint64_t)id * p->ring_stride);
}
static inline struct shm_sheaf *pool_sheaf(const struct shm_pool *p, uint32_t id)
{
	SHEAF_ASSERT(id < p->sheaf_count);
	return (struct shm_sheaf *)((char *)p->sheaves + sheaf_line(id) * SHEAF_CACHELINE);
}
/* The id of sheaf @s of the pool's array (pool_sheaf's inverse). */
static inline uint32_t pool_sheaf_id(const struct shm_pool *p, const struct shm_sheaf *s)
{
	return sheaf_at_line((uint64_t)((const char *)s - (const char *)p->sheaves) /
			     SHEAF_CACHELINE);
}
static inline uint32_t pool_cn(const struct shm_pool *p, uint32_t cache, uint32_t node)
{
	SHEAF_ASSERT(cache < p->max_caches && node < p->nodes);
	return cache * p->nodes + node;
}
static inline struct shm_cache_node *pool_cnode(const struct shm_pool *p,
						uint32_t cache, uint32_t node)
{
	return &p->cnodes[pool_cn(p, cache, node)];
}
static inline struct shm_barn *pool_barn(const struct shm_pool *p,
					 uint32_t cache, uint32_t node)
{
	return &p->barns[pool_cn(p, cache, node)];
}
static inline struct shm_ring *pool_full_ring(const struct shm_pool *p,
					      uint32_t cache, uint32_t node)
{
	return pool_ring(p, ring_full_id(cache, node, p->nodes));
}
static inline struct shm_ring *pool_empty_ring(const struct shm_pool *p,
					       uint32_t cache, uint32_t node)
{
	return pool_ring(p, ring_empty_id(cache, node, p->nodes));
}
/* Global frame index of data offset @off (relative to the region start). */
static inline uint32_t pool_frame_of(const struct shm_pool *p, uint64_t off)
{
	return (uint32_t)((off - p->data_off) >> SLAB_SHIFT);
}
static inline uint64_t pool_frame_off(const struct shm_pool *p, uint32_t frame)
{
	return p->data_off + ((uint64_t)frame << SLAB_SHIFT);
}
static inline uint32_t pool_node_of_frame(const struct shm_pool *p, uint32_t frame)
{
	return frame >> p->node_frame_shift;
}
static inline uint64_t *pool_bitmap(const struct shm_pool *p, uint32_t frame)
{
	SHEAF_ASSERT(frame < p->frames_total);
	return &p->bitmaps[(uint64_t)frame * SLAB_BITMAP_WORDS];
}
static inline _Atomic uint64_t *pool_inuse(const struct shm_pool *p, uint32_t frame)
{
	SHEAF_ASSERT(frame < p->frames_total);
	return &p->inuse[(uint64_t)frame * SLAB_BITMAP_WORDS];
}

#endif
