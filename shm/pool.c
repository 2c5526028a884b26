/*
 * pool.c - create and map a pool region (its META and SHARED memfds); see
 * pool.h and layout.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "bounds.h"
#include "huge.h"
#include "pool.h"

#define PAGE 4096ull

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

static uint32_t pow2_ceil(uint32_t v)
{
	uint32_t r = 1;
	while (r < v)
		r <<= 1;
	return r;
}

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;
	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* Fill the header's geometry and segment offsets; its limits
 * (max_clients, max_lanes, max_caches) are the caller's, already set. */
static void layout_compute(struct shm_header *h, uint32_t nodes,
			   uint32_t frames_per_node, uint32_t sheaves)
{
	uint64_t frames = (uint64_t)nodes * frames_per_node;
	uint64_t o = align_up(sizeof(*h), SHEAF_CACHELINE);
	uint64_t caches = h->max_caches;

	h->nodes = nodes;
	h->sheaf_count = sheaves;
	h->frames_per_node = frames_per_node;
	h->node_frame_shift = (uint32_t)__builtin_ctz(frames_per_node);
	h->node_bytes = (uint64_t)frames_per_node << SLAB_SHIFT;

	h->off_caches = o;       o += caches * sizeof(struct shm_cache);
	h->off_cache_nodes = o;  o += caches * nodes * sizeof(struct shm_cache_node);
	h->off_node_alloc = o;   o += nodes * sizeof(struct shm_node_alloc);
	h->off_slabs = o;        o += frames * sizeof(struct shm_slab);
	h->off_clients = o;      o += (uint64_t)h->max_clients * sizeof(struct shm_client);
	h->off_names = o;        o += SHEAF_DIR_ENTRIES * sizeof(struct shm_name);
	h->off_queues = o;       o += SHEAF_MAX_QUEUES * sizeof(struct shm_queue);
	h->off_lane_grant = o;   o += (uint64_t)h->max_lanes * sizeof(lane_grant_t);
	h->off_topics = o;       o += SHEAF_MAX_TOPICS * sizeof(struct shm_topic);
	o = align_up(o, PAGE);
	h->off_bitmaps = o;      o += frames * SLAB_BITMAP_WORDS * 8;
	/* frame_owner[] starts half-way into a page and off a cache line's
	 * first bytes: sheaves start on a page and every sheaf's word on a
	 * cache line, so a free's load of its frame's entry (at least for the
	 * first 16 frames of a node) never shares its page offset with the
	 * word the previous free stored, which would make the load wait for
	 * that store (4K aliasing). */
	o = align_up(o, PAGE) + PAGE / 2 + SHEAF_CACHELINE / 2;
	h->off_frame_owner = o;  o += frames * 2;
	/* SHARED and the data start on 2 MiB (in the region and in SHARED's
	 * memfd): a huge page of the data maps whole (huge.h).  Sparse. */
	o = align_up(o, HUGE_PAGE_SIZE);
	h->off_rw = o;
	h->off_owners = o;       o += (uint64_t)sheaves * 4;
	o = align_up(o, SHEAF_CACHELINE);
	h->off_sheaves = o;      o += sheaf_array_bytes(sheaves);
	o = align_up(o, PAGE);
	h->ring_stride = align_up(ring_bytes(sheaves), SHEAF_CACHELINE);
	h->off_rings = o;        o += ring_total(h->max_caches, nodes) * h->ring_stride;
	o = align_up(o, PAGE);
	h->off_barns = o;        o += caches * nodes * sizeof(struct shm_barn);
	h->off_nodes = o;        o += nodes * sizeof(struct shm_node);
	h->off_lanes = o;        o += (uint64_t)h->max_lanes * sizeof(struct shm_lane);
	h->off_rcu = o;          o += sizeof(struct shm_rcu);
	o = align_up(o, PAGE);
	h->lane_stride = align_up(SHEAF_LANE_BLOCK_BYTES(caches), PAGE);
	h->off_lane_stats = o;   o += (uint64_t)h->max_lanes * h->lane_stride;
	o = align_up(o, PAGE);
	h->off_inuse = o;        o += frames * SLAB_BITMAP_WORDS * 8;
	o = align_up(o, PAGE);
	h->off_tags = o;         o += frames * SLAB_MAX_OBJS * sizeof(otag_t);
	o = align_up(o, HUGE_PAGE_SIZE);
	h->off_data = o;         o += frames << SLAB_SHIFT;
	h->region_size = o;
	/* Segments in order, the client-writable part page-aligned (META's
	 * memfd holds [0, off_rw), SHARED's the rest), the owner map off its
	 * page's start. */
	SHEAF_ASSERT(h->off_caches < h->off_cache_nodes && h->off_cache_nodes < h->off_node_alloc &&
		     h->off_node_alloc < h->off_slabs && h->off_slabs < h->off_clients &&
		     h->off_clients < h->off_names && h->off_names < h->off_queues &&
		     h->off_queues < h->off_lane_grant && h->off_lane_grant < h->off_bitmaps &&
		     h->off_bitmaps < h->off_frame_owner &&
		     h->off_frame_owner < h->off_rw && h->off_owners < h->off_sheaves &&
		     h->off_sheaves < h->off_rings && h->off_rings < h->off_barns &&
		     h->off_barns < h->off_nodes && h->off_nodes < h->off_lanes &&
		     h->off_lanes < h->off_lane_stats &&
		     h->off_lane_stats < h->off_inuse && h->off_inuse < h->off_tags &&
		     h->off_tags < h->off_data);
	SHEAF_ASSERT(h->off_rw % PAGE == 0 && h->off_owners == h->off_rw &&
		     h->off_data % PAGE == 0 && h->off_sheaves % SHEAF_CACHELINE == 0 &&
		     h->off_frame_owner % PAGE == PAGE / 2 + SHEAF_CACHELINE / 2);
}

/* Limits within POOL_*_MIN..POOL_*_MAX (pool.h).  0, or -EINVAL with
 * @err. */
static int limits_check(uint32_t clients, uint32_t lanes, uint32_t caches,
			char *err, size_t errlen)
{
	if (clients < POOL_CLIENTS_MIN || clients > POOL_CLIENTS_MAX)
		return fail(err, errlen, -EINVAL, "max clients %u out of range %u..%u",
			    clients, POOL_CLIENTS_MIN, POOL_CLIENTS_MAX);
	if (lanes < POOL_LANES_MIN || lanes > POOL_LANES_MAX)
		return fail(err, errlen, -EINVAL, "max threads %u out of range %u..%u",
			    lanes, POOL_LANES_MIN, POOL_LANES_MAX);
	if (caches < POOL_CACHES_MIN || caches > POOL_CACHES_MAX)
		return fail(err, errlen, -EINVAL, "max caches %u out of range %u..%u",
			    caches, POOL_CACHES_MIN, POOL_CACHES_MAX);
	return 0;
}

/*
 * The header of a region this process did not create (pool_map_fds: a
 * restarted sheafd adopting it, or a client): its geometry must be one
 * pool_create makes, every offset recomputed from (nodes, frames per node,
 * sheaves), before any of it becomes a pointer or a bound.  0, or -EINVAL
 * with @err.
 */
static int header_geometry_check(const struct shm_header *h, char *err, size_t errlen)
{
	struct shm_header want;
	uint32_t fpn = h->frames_per_node, n = h->sheaf_count;

	if (h->nodes < POOL_NODES_MIN || h->nodes > POOL_NODES_MAX ||
	    n < POOL_SHEAVES_MIN || n > POOL_SHEAVES_MAX || (n & (n - 1)) != 0 ||
	    fpn == 0 || fpn > POOL_FRAMES_PER_NODE_MAX || (fpn & (fpn - 1)) != 0)
		return fail(err, errlen, -EINVAL, "pool header: geometry out of range "
			    "(%u nodes, %u sheaves, %u frames per node)", h->nodes, n, fpn);
	if (limits_check(h->max_clients, h->max_lanes, h->max_caches, err, errlen) != 0 ||
	    at_load_relaxed(&h->clients_hwm) > h->max_clients ||
	    at_load_relaxed(&h->caches_hwm) > h->max_caches)
		return fail(err, errlen, -EINVAL, "pool header: limits out of range");
	memset(&want, 0, sizeof(want));
	want.max_clients = h->max_clients;
	want.max_lanes = h->max_lanes;
	want.max_caches = h->max_caches;
	layout_compute(&want, h->nodes, fpn, n);
	if (h->node_frame_shift != want.node_frame_shift ||
	    h->node_bytes != want.node_bytes || h->region_size != want.region_size ||
	    memcmp(&h->off_caches, &want.off_caches,
		   offsetof(struct shm_header, mem_cap) -
		   offsetof(struct shm_header, off_caches)) != 0 ||
	    h->off_names != want.off_names ||
	    h->off_lane_grant != want.off_lane_grant || h->off_lane_stats != want.off_lane_stats ||
	    h->lane_stride != want.lane_stride ||
	    h->off_rcu != want.off_rcu ||
	    h->off_queues != want.off_queues ||
	    h->off_topics != want.off_topics ||
	    h->off_tags != want.off_tags)
		return fail(err, errlen, -EINVAL, "pool header: segment offsets do not "
			    "match its geometry");
	return 0;
}

/* Point every field of @p at its segment of the mapping at p->base. */
static void pool_bind(struct shm_pool *p)
{
	struct shm_header *h = (struct shm_header *)p->base;

	p->hdr = h;
	p->nodes = h->nodes;
	p->sheaf_count = h->sheaf_count;
	p->frames_per_node = h->frames_per_node;
	p->node_frame_shift = h->node_frame_shift;
	p->frames_total = h->nodes * h->frames_per_node;
	p->caches = (struct shm_cache *)(p->base + h->off_caches);
	p->cnodes = (struct shm_cache_node *)(p->base + h->off_cache_nodes);
	p->nalloc = (struct shm_node_alloc *)(p->base + h->off_node_alloc);
	p->slabs = (struct shm_slab *)(p->base + h->off_slabs);
	p->bitmaps = (uint64_t *)(p->base + h->off_bitmaps);
	p->frame_owner = (_Atomic uint16_t *)(p->base + h->off_frame_owner);
	p->owners = (_Atomic uint32_t *)(p->base + h->off_owners);
	p->sheaves = (struct shm_sheaf *)(p->base + h->off_sheaves);
	p->rings = p->base + h->off_rings;
	p->ring_stride = h->ring_stride;
	p->barns = (struct shm_barn *)(p->base + h->off_barns);
	p->node = (struct shm_node *)(p->base + h->off_nodes);
	p->clients = (struct shm_client *)(p->base + h->off_clients);
	p->names = (struct shm_name *)(p->base + h->off_names);
	p->queues = (struct shm_queue *)(p->base + h->off_queues);
	p->topics = (struct shm_topic *)(p->base + h->off_topics);
	p->lanes = (struct shm_lane *)(p->base + h->off_lanes);
	p->rcu = (struct shm_rcu *)(p->base + h->off_rcu);
	p->inuse = (_Atomic uint64_t *)(p->base + h->off_inuse);
	p->max_clients = h->max_clients;
	p->max_lanes = h->max_lanes;
	p->max_caches = h->max_caches;
	p->lane_grant = (_Atomic lane_grant_t *)(p->base + h->off_lane_grant);
	p->lane_stats = p->base + h->off_lane_stats;
	p->lane_stride = h->lane_stride;
	p->tags = (_Atomic otag_t *)(p->base + h->off_tags);
	p->data = p->base + h->off_data;
	p->data_off = h->off_data;
	p->data_len = (uint64_t)h->nodes * h->node_bytes;
	pool_numa_order(p);
}

void pool_cache_slot_init(struct shm_pool *p, uint32_t c)
{
	pthread_mutexattr_t ma;

	SHEAF_ASSERT(c < p->max_caches);
	if (c < at_load_relaxed(&p->hdr->caches_hwm))
		return;
	pthread_mutexattr_init(&ma);
	p->caches[c].id = c;
	for (uint32_t n = 0; n < p->nodes; n++) {
		struct shm_cache_node *cn = pool_cnode(p, c, n);
		pthread_mutex_init(&cn->lock, &ma);
		for (int l = 0; l < 4; l++)
			cn->lists[l].first = SLAB_NONE;
		ring_init(pool_full_ring(p, c, n), ring_full_id(c, n, p->nodes),
			  p->sheaf_count, p->sheaf_count);
		ring_init(pool_empty_ring(p, c, n), ring_empty_id(c, n, p->nodes),
			  p->sheaf_count, p->sheaf_count);
	}
	pthread_mutexattr_destroy(&ma);
	/* Release: whoever sees the mark past @c sees the slot set up (every
	 * slot below it too: slots are taken lowest first). */
	for (uint32_t k = at_load_relaxed(&p->hdr->caches_hwm); k < c; k++)
		pool_cache_slot_init(p, k);
	at_store_release(&p->hdr->caches_hwm, c + 1);
}

/*
 * Only what every pool needs at once is written here: the slots sized by
 * the limits (caches, client slots, lanes and their counters, rings of
 * caches) stay zero pages until first used (pool_cache_slot_init,
 * client_attach, lane_acquire).
 */
static void pool_init_segments(struct shm_pool *p)
{
	struct ring_intent in = { 0 };
	struct ring_ref depot = pool_depot_ref(p);
	pthread_mutexattr_t ma;

	pthread_mutexattr_init(&ma);
	for (uint32_t n = 0; n < p->nodes; n++) {
		pthread_mutex_init(&p->nalloc[n].lock, &ma);
		p->nalloc[n].free_first = SLAB_NONE;
	}
	pthread_mutexattr_destroy(&ma);
	for (uint32_t f = 0; f < p->frames_total; f++) {
		at_store_relaxed(&p->frame_owner[f], FRAME_FREE);
		p->slabs[f].cache = FRAME_FREE;
		p->slabs[f].prev = p->slabs[f].next = SLAB_NONE;
	}
	ring_init(pool_ring(p, RING_DEPOT), RING_DEPOT, p->sheaf_count, p->sheaf_count);
	ring_init(pool_ring(p, RING_RCU), RING_RCU, p->sheaf_count, p->sheaf_count);
	/* Every sheaf starts in the depot. */
	for (uint32_t s = 0; s < p->sheaf_count; s++) {
		at_store_relaxed(&p->owners[s], OWNER_ENGINE);
		ring_put(&depot, p->owners, s, OWNER_ENGINE, &in);
	}
	SHEAF_ASSERT(ring_count(&depot) == p->sheaf_count);
}

/* Seals of both memfds: their sizes are what the header says for good (a
 * mapping never runs past its file), and no one may add a seal later (a
 * client holding SHARED could otherwise add F_SEAL_FUTURE_WRITE and stop a
 * restarted sheafd from mapping it writable again). */
#define POOL_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

/* A new memfd of @size bytes, sealed: the descriptor, or -errno. */
static int memfd_sealed(const char *name, uint64_t size, char *err, size_t errlen)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING), e;

	if (fd < 0)
		return fail(err, errlen, -errno, "memfd_create: %s", strerror(errno));
	if (ftruncate(fd, (off_t)size) < 0) {
		e = errno;
		close(fd);
		return fail(err, errlen, -e, "ftruncate %s to %llu: %s", name,
			    (unsigned long long)size, strerror(e));
	}
	if (fcntl(fd, F_ADD_SEALS, POOL_SEALS) < 0) {
		e = errno;
		close(fd);
		return fail(err, errlen, -e, "seal %s: %s", name, strerror(e));
	}
	return fd;
}

/* Reserve @size bytes of address space (no memory) exactly at @want, or
 * anywhere when @want is NULL.  MAP_FAILED with errno EEXIST when @want is
 * taken. */
static void *reserve(void *want, uint64_t size)
{
	void *at = mmap(want, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
			(want != NULL ? MAP_FIXED_NOREPLACE : 0), -1, 0);

	if (at != MAP_FAILED && want != NULL && at != want) {
		munmap(at, size);       /* an old kernel took it as a hint */
		errno = EEXIST;
		return MAP_FAILED;
	}
	return at;
}

/*
 * Reserve room for a new region where other processes are likely to have
 * room for it too: every client maps it at this same address.  The kernel's
 * own choice (the top-down mmap area) is where every process keeps its
 * libraries and thread stacks, so it would often be taken in a client;
 * instead use the middle of the 47-bit user address space, [32 TiB,
 * 96 TiB), which nothing uses by default, cut into slots of the region's
 * size rounded up to a power of two (at least 1 GiB), and fall back to the
 * kernel's choice.  The first slot tried is @seed's (pool_params.addr_seed:
 * sheafd hashes its socket path), so that two pools (two daemons) get
 * different addresses and one process can map both without relocating;
 * the others follow in turn when it is taken here.
 */
#ifndef __SANITIZE_THREAD__
#define POOL_ADDR_LO  0x200000000000ull
#define POOL_ADDR_HI  0x600000000000ull
#else
/* TSan allows application memory only where its shadow mapping says: of
 * its ranges, [64 GiB, 512 GiB) of the low one holds nothing by default
 * (the kernel's choice, in the mmap area, collided with a dlopen()ed
 * library's mapping in another process: test_link). */
#define POOL_ADDR_LO  0x1000000000ull
#define POOL_ADDR_HI  0x8000000000ull
#endif
static void *reserve_new_region(uint64_t size, uint64_t seed)
{
	uint64_t slot = 1ull << 30, nslots;

	while (slot < size)
		slot <<= 1;
	nslots = (POOL_ADDR_HI - POOL_ADDR_LO) / slot;
	for (uint64_t i = 0; i < nslots; i++) {
		uint64_t a = POOL_ADDR_LO + ((seed + i) % nslots) * slot;
		void *at = reserve((void *)(uintptr_t)a, size);

		if (at != MAP_FAILED)
			return at;
	}
	return reserve(NULL, size);
}

/* Map META at @base and SHARED at @base + off_rw over the reservation at
 * @base (which stays the caller's to unmap on failure).  0, or -errno. */
static int map_parts(char *base, const struct shm_header *h, int meta_fd,
		     int shared_fd, int meta_prot)
{
	if (mmap(base, h->off_rw, meta_prot, MAP_SHARED | MAP_FIXED, meta_fd, 0) == MAP_FAILED ||
	    mmap(base + h->off_rw, h->region_size - h->off_rw, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED, shared_fd, 0) == MAP_FAILED)
		return -errno;
	return 0;
}

/*
 * Huge pages for the data of a new pool by @mode (huge.h): off, or asked
 * for when the kernel allows them (try: else none, with a note in
 * p->huge_note), or required (on: else -EOPNOTSUPP with the reason).
 */
static int pool_huge_setup(struct shm_pool *p, uint32_t mode, char *err, size_t errlen)
{
	char why[256] = "";
	int rc = 0;

	if (mode == HUGE_OFF)
		return 0;
	if (!huge_shmem_available(why, sizeof(why)))
		rc = -EOPNOTSUPP;
	else
		rc = huge_advise(p->data, p->data_len, why, sizeof(why));
	if (rc == 0) {
		p->hdr->huge_pages = 1;
		return 0;
	}
	if (mode == HUGE_ON)
		return fail(err, errlen, rc, "huge_pages=on: %s", why);
	snprintf(p->huge_note, sizeof(p->huge_note), "huge_pages=try: none (%s)", why);
	return 0;
}

static int do_pool_create(struct shm_pool *p, const struct pool_params *pp,
			  uint32_t nodes, char *err, size_t errlen)
{
	struct shm_header h;
	uint64_t size = pp->size ? pp->size : POOL_DEFAULT_SIZE;
	uint32_t sheaves = pp->sheaf_count ? pp->sheaf_count : POOL_DEFAULT_SHEAVES;
	uint64_t fpn;
	char *base;
	int rc;

	if (sheaves < POOL_SHEAVES_MIN || sheaves > POOL_SHEAVES_MAX)
		return fail(err, errlen, -EINVAL, "sheaf count %u out of range %u..%u",
			    sheaves, POOL_SHEAVES_MIN, POOL_SHEAVES_MAX);
	if (size < (uint64_t)nodes * SLAB_SIZE || size > POOL_SIZE_MAX)
		return fail(err, errlen, -EINVAL,
			    "pool size %llu out of range %llu..%llu bytes",
			    (unsigned long long)size,
			    (unsigned long long)nodes * SLAB_SIZE, POOL_SIZE_MAX);
	sheaves = pow2_ceil(sheaves);
	fpn = (size / nodes + SLAB_SIZE - 1) >> SLAB_SHIFT;
	if (fpn > POOL_FRAMES_PER_NODE_MAX)
		return fail(err, errlen, -EINVAL, "pool too large per node");
	memset(&h, 0, sizeof(h));
	h.max_clients = pp->max_clients ? pp->max_clients : SHEAF_DEFAULT_CLIENTS;
	h.max_lanes = pp->max_lanes ? pp->max_lanes : SHEAF_DEFAULT_LANES;
	h.max_caches = pp->max_caches ? pp->max_caches : SHEAF_DEFAULT_CACHES;
	rc = limits_check(h.max_clients, h.max_lanes, h.max_caches, err, errlen);
	if (rc != 0)
		return rc;
	layout_compute(&h, nodes, pow2_ceil((uint32_t)fpn), sheaves);

	p->meta_fd = memfd_sealed("sheaf-pool-meta", h.off_rw, err, errlen);
	if (p->meta_fd < 0)
		return p->meta_fd;
	p->shared_fd = memfd_sealed("sheaf-pool-shared", h.region_size - h.off_rw, err, errlen);
	if (p->shared_fd < 0) {
		rc = p->shared_fd;
		goto out_close;
	}
	base = reserve_new_region(h.region_size, pp->addr_seed);
	if (base == MAP_FAILED) {
		rc = fail(err, errlen, -errno, "reserving %llu bytes of address space: %s",
			  (unsigned long long)h.region_size, strerror(errno));
		goto out_close;
	}
	rc = map_parts(base, &h, p->meta_fd, p->shared_fd, PROT_READ | PROT_WRITE);
	if (rc != 0) {
		munmap(base, h.region_size);
		fail(err, errlen, rc, "mmap %llu bytes: %s",
		     (unsigned long long)h.region_size, strerror(-rc));
		goto out_close;
	}
	p->base = base;
	p->size = h.region_size;
	h.magic = SHEAF_MAGIC;
	h.version = SHEAF_LAYOUT_VERSION;
	h.simulated = pp->nodes != 0;
	h.map_addr = (uint64_t)(uintptr_t)p->base;
	memcpy(p->base, &h, sizeof(h));
	pool_bind(p);
	at_store_relaxed(&p->hdr->mem_cap,
			 pp->mem_cap && pp->mem_cap < p->data_len ? pp->mem_cap : p->data_len);
	at_store_relaxed(&p->hdr->created_at, (uint64_t)time(NULL));
	at_store_relaxed(&p->hdr->large_retain, p->data_len / SHEAF_LARGE_RETAIN_DIV);
	pool_init_segments(p);
	rc = pool_huge_setup(p, pp->huge, err, errlen);
	if (rc != 0) {
		pool_unmap(p);
		return rc;
	}
	return 0;

out_close:
	if (p->shared_fd >= 0)
		close(p->shared_fd);
	close(p->meta_fd);
	p->meta_fd = p->shared_fd = -1;
	return rc;
}

/* The region first, then its NUMA placement (pool_numa.c), before any
 * data page is touched. */
int pool_create(struct shm_pool *p, const struct pool_params *pp,
		char *err, size_t errlen)
{
	struct ntopo *topo = NULL;
	uint32_t nodes = 1;
	int rc;

	memset(p, 0, sizeof(*p));
	p->meta_fd = p->shared_fd = p->meta_ro_fd = -1;
	if (pp->nodes > POOL_NODES_MAX)        /* 0: discovered */
		return fail(err, errlen, -EINVAL, "nodes %u out of range %u..%u",
			    pp->nodes, POOL_NODES_MIN, POOL_NODES_MAX);
	rc = pool_numa_discover(pp, &topo, &nodes, err, errlen);
	if (rc != 0)
		return rc;
	rc = do_pool_create(p, pp, nodes, err, errlen);
	if (rc != 0) {
		free(topo);
		return rc;
	}
	rc = pool_numa_place(p, pp, topo, err, errlen);
	if (rc != 0)
		pool_unmap(p);
	return rc;
}

/* The size of memfd @fd, which must carry @seals when they are not 0:
 * -1 when it cannot be read or lacks them. */
static int64_t memfd_size(int fd, int seals)
{
	struct stat st;
	int have;

	if (fstat(fd, &st) < 0)
		return -1;
	if (seals != 0 && ((have = fcntl(fd, F_GET_SEALS)) < 0 || (have & seals) != seals))
		return -1;
	return (int64_t)st.st_size;
}

/* Check what the header in META says against the two memfds, before any of
 * it is trusted for mapping.  0, or -errno with @err filled. */
static int header_check(const struct shm_header *h, int meta_fd, int shared_fd,
			int seals, char *err, size_t errlen)
{
	if (h->magic != SHEAF_MAGIC)
		return fail(err, errlen, -EINVAL, "not a sheaf pool (bad magic)");
	if (h->version != SHEAF_LAYOUT_VERSION)
		return fail(err, errlen, -EPROTO, "layout version %u, expected %u",
			    h->version, SHEAF_LAYOUT_VERSION);
	if (h->off_rw < sizeof(*h) || h->off_rw % PAGE != 0 || h->region_size % PAGE != 0 ||
	    h->off_rw >= h->region_size || h->map_addr == 0 || h->map_addr % PAGE != 0)
		return fail(err, errlen, -EINVAL, "region geometry out of range "
			    "(off_rw %llu, size %llu)", (unsigned long long)h->off_rw,
			    (unsigned long long)h->region_size);
	if (memfd_size(meta_fd, seals) != (int64_t)h->off_rw ||
	    memfd_size(shared_fd, seals) != (int64_t)(h->region_size - h->off_rw))
		return fail(err, errlen, -EINVAL, "the pool's memfds do not match its header "
			    "(sizes, or seals against resizing)");
	return 0;
}

int pool_map_fds(struct shm_pool *p, int meta_fd, int shared_fd, int client,
		 int relocate, char *err, size_t errlen)
{
	struct shm_header h;
	char *want, *at;
	int rc;

	memset(p, 0, sizeof(*p));
	p->meta_fd = p->shared_fd = p->meta_ro_fd = -1;
	if (pread(meta_fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		return fail(err, errlen, -EINVAL, "region too small for a header");
	rc = header_check(&h, meta_fd, shared_fd, client ? 0 : F_SEAL_SHRINK | F_SEAL_GROW,
			  err, errlen);
	if (rc != 0)
		return rc;
	if (header_geometry_check(&h, err, errlen) != 0)
		return -EINVAL;
	want = (char *)(uintptr_t)h.map_addr;
	at = reserve(want, h.region_size);
	if (at == MAP_FAILED && errno == EEXIST && relocate)
		at = reserve(NULL, h.region_size);
	if (at == MAP_FAILED) {
		if (errno == EEXIST)
			return fail(err, errlen, -EADDRINUSE,
				    "pool address %p..+%llu is taken in this process",
				    (void *)want, (unsigned long long)h.region_size);
		return fail(err, errlen, -errno, "mmap: %s", strerror(errno));
	}
	rc = map_parts(at, &h, meta_fd, shared_fd, client ? PROT_READ : PROT_READ | PROT_WRITE);
	if (rc != 0) {
		munmap(at, h.region_size);
		return fail(err, errlen, rc, "mmap: %s", strerror(-rc));
	}
	p->base = at;
	p->size = h.region_size;
	p->meta_fd = meta_fd;
	p->shared_fd = shared_fd;
	pool_bind(p);
	if (!client)
		pool_numa_adopt(p);
	/* The pool was made with huge pages: this process's mapping asks for
	 * them too (its faults are the ones that allocate); a refusal only
	 * costs speed. */
	if (p->hdr->huge_pages) {
		char why[160];

		(void)huge_advise(p->data, p->data_len, why, sizeof(why));
	}
	return 0;
}

void pool_unmap(struct shm_pool *p)
{
	if (p->base != NULL)
		munmap(p->base, p->size);
	if (p->meta_ro_fd >= 0)
		close(p->meta_ro_fd);
	if (p->shared_fd >= 0)
		close(p->shared_fd);
	if (p->meta_fd >= 0)
		close(p->meta_fd);
	p->base = NULL;
	p->meta_fd = p->shared_fd = p->meta_ro_fd = -1;
	free(p->topo);
	p->topo = NULL;
}

int pool_meta_readonly_fd(struct shm_pool *p, char *err, size_t errlen)
{
	struct stat st, ro;
	char path[64];
	int fd;

	if (p->meta_ro_fd >= 0)
		return p->meta_ro_fd;
	/* Mode 0400: only sheafd's uid may open the inode at all, and only
	 * for reading; sheafd itself writes through the O_RDWR descriptor it
	 * made (or adopted), which no mode change affects. */
	if (fchmod(p->meta_fd, 0400) < 0 || fstat(p->meta_fd, &st) < 0)
		return fail(err, errlen, -errno, "fchmod of the pool's META memfd: %s",
			    strerror(errno));
	snprintf(path, sizeof(path), "/proc/self/fd/%d", p->meta_fd);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(err, errlen, -errno, "reopening the pool's META memfd read-only "
			    "(%s): %s; is /proc mounted?", path, strerror(errno));
	if (fstat(fd, &ro) < 0 || ro.st_ino != st.st_ino || ro.st_dev != st.st_dev ||
	    (fcntl(fd, F_GETFL) & O_ACCMODE) != O_RDONLY) {
		close(fd);
		return fail(err, errlen, -EIO, "%s is not the pool's META memfd", path);
	}
	p->meta_ro_fd = fd;
	return fd;
}

/* Punch [off, off + len) of the memfd that holds region offsets from
 * @start (the memfd's offset 0) to @end. */
static int punch_part(int fd, uint64_t start, uint64_t end, uint64_t off, uint64_t len)
{
	uint64_t lo = off > start ? off : start;
	uint64_t hi = off + len < end ? off + len : end;

	if (lo >= hi)
		return 0;
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      (off_t)(lo - start), (off_t)(hi - lo)) < 0)
		return -errno;
	return 0;
}

int pool_punch(struct shm_pool *p, uint64_t off, uint64_t len)
{
	uint64_t rw = p->hdr->off_rw;
	int rc = punch_part(p->meta_fd, 0, rw, off, len);

	return rc != 0 ? rc : punch_part(p->shared_fd, rw, p->size, off, len);
}
