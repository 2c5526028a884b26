/*
 * fuzz_shm.c - libFuzzer target over what a hostile client can write: the
 * client-writable part of a pool region, [off_rw, off_data) (owners,
 * sheaves, rings, barns, node doorbells, lanes, debug in-use bits), filled
 * with fuzzed bytes and then handed to what sheafd runs over it: the
 * stocking pass of each node (refill and flush), then one of (as the flag
 * byte asks) the dead-client repair, the repair of the last client (which
 * reconciles the counters), a pool-wide shrink, a cache destroy, an
 * adoption as after a daemon restart, the checker, the stats readers, or
 * all of them.  Expected: no crash, no hang (libFuzzer -timeout), no
 * sanitizer report, whatever the bytes.
 *
 * Set up once: a small pool on two simulated nodes, its engine (no worker
 * thread: each pass is called here), three caches (plain, debug, large
 * objects, all of 0.5 KiB or more: the walks over every object of a slab
 * stay short; small sheaves and barn watermarks, so that a pass, a flush or a
 * shrink moves a few hundred objects, not thousands), two attached clients
 * that took sheaves from the barns and allocated from them, as a running
 * client leaves the region.  Then the engine-owned and client-writable
 * parts, [0, off_data), become a snapshot (snap.h) that is put back before
 * each input: each input starts from the same state.  The object data
 * stays the pool's shared mapping (nothing here reads it).
 *
 * Speed (one core, ASan+UBSan): the pool's limits are small (FUZZ_LANES,
 * ...), since every walk is bounded by them: an input takes about 0.2 ms
 * (20 ms with the default limits).  The walks over every lane, sheaf and
 * object (checker, stats, owner tags, names) are built without comparison
 * tracing for this target (Makefile).  FUZZ_SNAP_VERIFY set in the
 * environment compares the whole range with the snapshot after each
 * restore.
 *
 * Input: one flag byte (FZ_* below), then patches: a segment byte (enum
 * seg), a 3-byte offset into that segment (modulo its length), a length
 * byte, and that many bytes, written over the segment (cut at its end).
 *
 * Build and run: `make fuzz` (Makefile; build-fuzz/fuzz_shm).  Saved crash
 * inputs: tests/fuzz/crashes_shm/ (README "Testing").  With
 * FUZZ_SHM_VERBOSE set in the environment, the segments and each patch are
 * printed (to read a crashing input).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "shm/barn.h"
#include "shm/engine/check.h"
#include "shm/lanes.h"
#include "shm/engine/clients.h"
#include "shm/engine/engine.h"
#include "shm/engine/ring_rebuild.h"
#include "shm/stats.h"
#include "snap.h"

#define FUZZ_POOL_BYTES (2u << 20)   /* 8 slabs over 2 nodes */
#define FUZZ_NODES      2u
#define FUZZ_SHEAVES    64u
#define FUZZ_CACHES     3u
#define FUZZ_MAX_CACHES 4u           /* FUZZ_CACHES and one never made */
#define FUZZ_CLIENTS    4u
#define FUZZ_LANES      16u          /* the workers', control's and clients' */

/* Flag byte: bits 0-2 the engine operation an input runs over the
 * patched region (one per input: each walks the whole pool, so an input
 * that ran them all would cost their sum), bit 3 no stocking passes
 * before it (the operation meets the patches as written), bits 4-5 the
 * cache destroyed, bits 6-7 the cache whose stats are read (both modulo
 * FUZZ_CACHES). */
enum {
	FZ_OP_RECLAIM   = 0,        /* engine_reclaim_client(client 0) */
	FZ_OP_RECLAIM2  = 1,        /* both clients: no client left, counts reconciled */
	FZ_OP_SHRINK    = 2,        /* engine_shrink(all caches) */
	FZ_OP_DESTROY   = 3,        /* engine_cache_destroy(cache bits 4-5) */
	FZ_OP_ADOPT     = 4,        /* engine_adopt, as a restart would */
	FZ_OP_CHECK     = 5,        /* pool_check */
	FZ_OP_STATS     = 6,        /* the Stats and Clients readers (bits 6-7) */
	FZ_OP_ALL       = 7,        /* all of them, in that order, adoption last */
	FZ_OP_MASK      = 7,
	FZ_NO_PASS      = 1 << 3,
};

/* Client-writable segments an input patches. */
enum seg { SEG_OWNERS, SEG_SHEAVES, SEG_RINGS, SEG_BARNS, SEG_NODES, SEG_LANES,
	   SEG_INUSE, SEG_ALL, SEG_NR };

static struct shm_pool pool;
static struct engine eng;
static uint32_t client[2];
static struct snap snap;             /* [0, off_data) */
static uint64_t seg_off[SEG_NR], seg_len[SEG_NR];
static int verbose;                  /* FUZZ_SHM_VERBOSE set: say each patch */
static const char *const seg_name[SEG_NR] = {
	"owners", "sheaves", "rings", "barns", "nodes", "lanes", "inuse", "all",
};

static void die(const char *what, const char *err)
{
	fprintf(stderr, "fuzz_shm: %s: %s\n", what, err);
	abort();
}

static void make_caches(void)
{
	static const struct { const char *name; struct cache_params cp; } c[FUZZ_CACHES] = {
		{ "plain", { .size = 512, .capacity = 16, .barn_low = 2, .barn_high = 4,
			     .barn_limit = 8 } },
		{ "debug", { .size = 1000, .align = 8, .capacity = 8, .flags = SHEAF_CACHE_F_DEBUG,
			     .barn_low = 2, .barn_high = 4, .barn_limit = 8 } },
		{ "large", { .size = 8192, .capacity = 4, .barn_high = 4, .barn_limit = 8 } },
	};
	char err[160];

	for (uint32_t k = 0; k < FUZZ_CACHES; k++)
		if (engine_cache_create(&eng, c[k].name, &c[k].cp, err, sizeof(err)) != (int)k)
			die("engine_cache_create", err);
}

/*
 * What a client's thread leaves in the region while it runs: a lane, a
 * main sheaf per cache (installed for the fast-path counts) with objects
 * allocated from it on the fast path, and, for client 0, an empty sheaf
 * held and a full one put back.  The debug cache's objects stay in their
 * sheaves (its in-use bits would need the client library).
 */
static void client_activity(uint32_t id, uint32_t node)
{
	struct shm_lane *l = client_lane_acquire(&pool, id, node);

	if (l == NULL)
		die("lane_acquire", "no lane");
	for (uint32_t k = 0; k < FUZZ_CACHES; k++) {
		uint32_t s = barn_get_full(&pool, k, node, id, &l->intent);
		uint32_t cap = at_load_relaxed(&pool.caches[k].sheaf_capacity);
		struct shm_sheaf *sh;
		int dep;

		if (s == SHEAF_ID_NONE)
			continue;
		sh = pool_sheaf(&pool, s);
		lane_live_install(&pool, l, k, s);
		for (int i = 0; i < 2 && k != 1 && sheaf_size(sh) > 0; i++) {
			(void)sheaf_pop(sh);     /* the inline alloc's word step */
			at_store_relaxed(&sh->word, at_load_relaxed(&sh->word) + SHEAF_WORD_OP);
		}
		if (id != client[0])
			continue;
		s = barn_get_empty(&pool, k, node, cap, id, &l->intent, &dep);
		(void)s;                         /* held, empty */
		s = barn_get_full(&pool, k, node, id, &l->intent);
		if (s != SHEAF_ID_NONE)
			barn_put_full(&pool, k, node, s, id, &l->intent);
	}
	lane_release(l);
}

static void segments(void)
{
	const struct shm_header *h = pool.hdr;

	seg_off[SEG_OWNERS] = h->off_owners;   seg_len[SEG_OWNERS] = h->off_sheaves - h->off_owners;
	seg_off[SEG_SHEAVES] = h->off_sheaves; seg_len[SEG_SHEAVES] = h->off_rings - h->off_sheaves;
	seg_off[SEG_RINGS] = h->off_rings;     seg_len[SEG_RINGS] = h->off_barns - h->off_rings;
	seg_off[SEG_BARNS] = h->off_barns;     seg_len[SEG_BARNS] = h->off_nodes - h->off_barns;
	seg_off[SEG_NODES] = h->off_nodes;     seg_len[SEG_NODES] = h->off_lanes - h->off_nodes;
	seg_off[SEG_LANES] = h->off_lanes;     seg_len[SEG_LANES] = h->off_inuse - h->off_lanes;
	seg_off[SEG_INUSE] = h->off_inuse;     seg_len[SEG_INUSE] = h->off_data - h->off_inuse;
	seg_off[SEG_ALL] = h->off_rw;          seg_len[SEG_ALL] = h->off_data - h->off_rw;
}

static void setup(void)
{
	struct pool_params pp = {
		.size = FUZZ_POOL_BYTES, .nodes = FUZZ_NODES, .sheaf_count = FUZZ_SHEAVES,
		/* Small limits: every walk (checker, stats, repair, adoption)
		 * is bounded by them; the defaults made each input walk 8192
		 * lanes' blocks (49 inputs a second, against thousands). */
		.max_clients = FUZZ_CLIENTS, .max_lanes = FUZZ_LANES,
		.max_caches = FUZZ_MAX_CACHES,
	};
	struct check_report rep;
	char err[256];

	if (pool_create(&pool, &pp, err, sizeof(err)) != 0)
		die("pool_create", err);
	if (engine_init(&eng, &pool, err, sizeof(err)) != 0)
		die("engine_init", err);
	make_caches();
	for (uint32_t n = 0; n < pool.nodes; n++)
		engine_node_pass(&eng, n, &eng.worker_lane[n]->intent);
	for (int i = 0; i < 2; i++) {
		int id = client_attach(&pool, (uint32_t)getpid(), (uint32_t)getuid(),
				       i ? "fuzz-1" : "fuzz-0");
		if (id < 0)
			die("client_attach", "no slot");
		client[i] = (uint32_t)id;
	}
	client_activity(client[0], 0);
	client_activity(client[1], 1);
	for (uint32_t n = 0; n < pool.nodes; n++)
		engine_node_pass(&eng, n, &eng.worker_lane[n]->intent);
	if (pool_check(&pool, -1, -1, &rep, err, sizeof(err)) != 0)
		die("the snapshot fails the checker", err);
	segments();
	verbose = getenv("FUZZ_SHM_VERBOSE") != NULL;
	if (verbose)
		for (int k = 0; k < SEG_NR; k++)
			fprintf(stderr, "fuzz_shm: segment %s at %llu, %llu bytes\n", seg_name[k],
				(unsigned long long)seg_off[k], (unsigned long long)seg_len[k]);
	snap_take(&snap, pool.base, pool.data_off);
}

/* Apply the patches of @data (see the header comment). */
static void apply(const uint8_t *data, size_t size)
{
	size_t i = 0;

	while (i + 5 <= size) {
		uint32_t seg = data[i] % SEG_NR;
		uint64_t off = ((uint64_t)data[i + 1] << 16 | (uint64_t)data[i + 2] << 8 |
				data[i + 3]) % seg_len[seg];
		size_t len = data[i + 4];

		i += 5;
		if (len > size - i)
			len = size - i;
		if (len > seg_len[seg] - off)
			len = (size_t)(seg_len[seg] - off);
		if (verbose)
			fprintf(stderr, "fuzz_shm: %zu bytes at %s+%llu (region offset %llu)\n",
				len, seg_name[seg], (unsigned long long)off,
				(unsigned long long)(seg_off[seg] + off));
		memcpy(pool.base + seg_off[seg] + off, data + i, len);
		i += len;
	}
}

/* The readers behind Stats and Clients, for cache @c (each walks every
 * lane: one cache per input, chosen by its flag byte, keeps inputs fast). */
static void read_stats(uint32_t c)
{
	volatile uint64_t sink = 0;

	if (at_load_acquire(&pool.caches[c].state) == CACHE_LIVE) {
		for (uint32_t n = 0; n < pool.nodes; n++) {
			struct stats_sum sum = { 0 };
			stats_cache_node(&pool, c, n, &sum);
			sink += sum.objects + sum.barn_full;
		}
		sink += (uint64_t)engine_counted_in_use(&pool, c);
		for (uint32_t l = 0; l < pool_lanes_used(&pool); l++)
			if (at_load_relaxed(&pool.lanes[l].client) != LANE_FREE)
				sink += (uint64_t)lane_in_use(&pool, &pool.lanes[l], c);
	}
	(void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	struct check_report rep;
	char err[256];
	uint8_t flags, op;

	if (!ready) {
		setup();
		ready = 1;
	}
	if (size < 1)
		return 0;
	snap_restore(&snap);
	ring_rebuild_reset(&eng);
	flags = data[0];
	apply(data + 1, size - 1);

	if (!(flags & FZ_NO_PASS))
		for (uint32_t n = 0; n < pool.nodes; n++)
			engine_node_pass(&eng, n, &eng.worker_lane[n]->intent);
	op = flags & FZ_OP_MASK;
	if (op == FZ_OP_RECLAIM || op == FZ_OP_RECLAIM2 || op == FZ_OP_ALL)
		engine_reclaim_client(&eng, client[0]);
	if (op == FZ_OP_RECLAIM2 || op == FZ_OP_ALL)
		engine_reclaim_client(&eng, client[1]);
	if (op == FZ_OP_SHRINK || op == FZ_OP_ALL)
		engine_shrink(&eng, -1, 1);
	if (op == FZ_OP_DESTROY || op == FZ_OP_ALL)
		engine_cache_destroy(&eng, (flags >> 4) % FUZZ_CACHES, err, sizeof(err));
	if (op == FZ_OP_CHECK || op == FZ_OP_ALL)
		pool_check(&pool, -1, -1, &rep, err, sizeof(err));
	if (op == FZ_OP_STATS || op == FZ_OP_ALL)
		read_stats((flags >> 6) % FUZZ_CACHES);
	if (op == FZ_OP_ADOPT || op == FZ_OP_ALL)
		engine_adopt(&pool);
	return 0;
}
