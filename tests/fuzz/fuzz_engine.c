/*
 * fuzz_engine.c - libFuzzer target over the shared-memory state sheafd
 * reads, field by field, and the engine code that consumes it, in any
 * order: the input is a program of writes into SHARED (named fields of
 * the rings, the owner table, sheaf headers and entries, lanes and their
 * counter blocks, the grace-period words, barns, node doorbells, the
 * queue's control words and slots, owner tags and in-use bits) and of
 * engine steps (a node's stocking pass, a ring's vet and rebuild, a dead
 * client's repair, a grace-period pass, the adoption vet of the shared
 * part, the checker, the stats and queue readers, shrink, cache and queue
 * destroy, the count reconcile, and last an adoption as after a restart).
 * Expected whatever the program: no crash, no hang (libFuzzer -timeout),
 * no sanitizer report, and no engine assertion: the engine's code is
 * built with SHEAF_DEBUG=1 (build-fuzz/debug/, Makefile), so a
 * SHEAF_ASSERT that a client-writable value can reach aborts the input
 * (shm/debug.h: such asserts must not exist).
 *
 * fuzz_shm.c writes raw bytes at offsets and runs the engine once; this
 * target names fields (a mutation lands on a word the engine reads, not in
 * padding), offers values that pass the quick checks (sheaf ids, owner
 * ids, object offsets of each cache, a copy of another entry: a sheaf
 * twice in a ring, an object in two sheaves) and interleaves writes with
 * steps, so a step meets what an earlier one left.
 *
 * Set up once: a pool on two simulated nodes with small limits, its engine
 * (no thread: every step is called here), three caches (plain, owned,
 * debug; objects of 0.5-1 KiB, so that the walks over every object of a
 * slab stay short), a queue, two clients that took sheaves and allocated from them
 * (client 0's owned objects tagged, one enqueued; client 1's last two
 * plain ones freed deferred, their sheaf in the rcu ring), stocked barns.  Then
 * the whole region, [0, size), becomes a snapshot (snap.h) put back before
 * each input, and the engine's private state is put back too (struct
 * engine, its grace-period state, ring_rebuild_reset).  Each input starts
 * from the same state.
 *
 * Input: a sequence of commands.  A byte with bit 7 set is a step (its low
 * bits modulo ST_NR, then one argument byte); else a write: bits 0-4 the
 * field kind (modulo K_NR), bits 5-6 the value's mode, then a 2-byte and a
 * 1-byte index (instance and sub-field), then the value: mode 0 eight raw
 * bytes, 1 one signed byte added to the field, 2 one byte choosing a
 * plausible value (interesting()), 3 one byte naming another instance of
 * the field whose value is copied.  At most MAX_STEPS steps run, then (but
 * after an adoption) a stocking pass of each node, as the workers would.
 *
 * Build and run: `make fuzz` (build-fuzz/fuzz_engine).  With
 * FUZZ_ENGINE_VERBOSE set in the environment each command is printed (to
 * read a crashing input).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "shm/barn.h"
#include "shm/bounds.h"
#include "shm/engine/adopt_vet.h"
#include "shm/engine/check.h"
#include "shm/engine/clients.h"
#include "shm/engine/engine.h"
#include "shm/engine/grace.h"
#include "shm/engine/owner.h"
#include "shm/engine/ring_rebuild.h"
#include "shm/futex.h"
#include "shm/lanes.h"
#include "shm/owner.h"
#include "shm/queue.h"
#include "shm/stats.h"
#include "snap.h"

#define FUZZ_POOL_BYTES (4u << 20)   /* 16 slabs over 2 nodes */
#define FUZZ_NODES      2u
#define FUZZ_SHEAVES    64u
#define FUZZ_CACHES     3u
#define FUZZ_MAX_CACHES 4u           /* FUZZ_CACHES and one never made */
#define FUZZ_CLIENTS    4u
#define FUZZ_LANES      16u
#define FUZZ_QUEUE_CAP  16u
#define MAX_STEPS       8            /* steps one input runs, at most */

enum { C_PLAIN, C_OWNED, C_DEBUG };

/* Field kinds a write names (a: instance, b: sub-field). */
enum kind {
	K_RING_TAIL,     /* ring a */
	K_RING_HEAD,
	K_RING_GEOM,     /* ring a, header word b: size, mask, id, nsheaves */
	K_RING_SLOT,     /* ring a, slot b */
	K_OWNER,         /* owner-table entry of sheaf a */
	K_SHEAF_WORD,    /* sheaf a: size | ops */
	K_SHEAF_HDR,     /* sheaf a, b: capacity, cache, node, flags, id, gp */
	K_SHEAF_OBJ,     /* sheaf a, entry b */
	K_LANE32,        /* lane a, 32-bit word b of struct shm_lane */
	K_LANE64,        /* lane a, 64-bit word b */
	K_LANE_BLOCK,    /* lane a, 64-bit word a >> 4 .. of its counter block */
	K_HWM,           /* a lane's copy of its grant (never trusted) */
	K_RCU,           /* b: bell, sleeping, req */
	K_BARN,          /* barn a, word b */
	K_NODE,          /* node a, b: doorbell, sleeping, cpu */
	K_QCTL,          /* b: tail, head, ne_event, ne_sleep, nf_event,
			    nf_sleep, deq_waits, enq_waits, dropped */
	K_QSLOT,         /* slot b */
	K_TAG,           /* owner tag a of frame b */
	K_INUSE,         /* in-use bitmap word a of frame b */
	K_NR
};

/* Steps (argument byte x). */
enum step {
	ST_PASS,         /* engine_node_pass(node x) */
	ST_REBUILD,      /* ring_rebuild_suspect + glance(ring x) */
	ST_RECLAIM,      /* engine_reclaim_client(client x % 2), once each */
	ST_GRACE,        /* grace_step */
	ST_VET,          /* adopt_vet_shared(OWNER_ENGINE) */
	ST_CHECK,        /* pool_check (x odd: of cache x / 2) */
	ST_STATS,        /* stats, in-use, owner counts, queue stats, grace report */
	ST_SHRINK,       /* engine_shrink(all or cache x, keep_min x & 1) */
	ST_DESTROY,      /* engine_cache_destroy(cache x) */
	ST_QDESTROY,     /* engine_queue_destroy */
	ST_RECONCILE,    /* engine_reconcile_counts */
	ST_QGET,         /* queue_get (a client's dequeue: any process runs it) */
	ST_ADOPT,        /* engine_adopt, a new engine, its passes and the
			    checker; ends the input */
	ST_NR
};

static struct shm_pool pool;
static struct engine eng, eng0;      /* eng0: eng after setup */
static struct grace grace0;          /* the grace state after setup (head) */
static uint32_t client[2];
static int queue_id = -1;
static struct snap snap;
static int verbose;

static void die(const char *what, const char *err)
{
	fprintf(stderr, "fuzz_engine: %s: %s\n", what, err);
	abort();
}

static void make_caches(void)
{
	static const struct { const char *name; struct cache_params cp; } c[FUZZ_CACHES] = {
		[C_PLAIN] = { "plain", { .size = 1024, .capacity = 16, .barn_low = 2, .barn_high = 4,
					 .barn_limit = 8 } },
		[C_OWNED] = { "owned", { .size = 512, .capacity = 8, .flags = SHEAF_CACHE_F_OWNED,
					 .barn_low = 2, .barn_high = 4, .barn_limit = 8 } },
		[C_DEBUG] = { "debug", { .size = 1000, .align = 8, .capacity = 8,
					 .flags = SHEAF_CACHE_F_DEBUG, .barn_high = 4,
					 .barn_limit = 8 } },
	};
	char err[160];

	for (uint32_t k = 0; k < FUZZ_CACHES; k++)
		if (engine_cache_create(&eng, c[k].name, &c[k].cp, err, sizeof(err)) != (int)k)
			die("engine_cache_create", err);
	queue_id = engine_queue_create(&eng, "fuzzq", FUZZ_QUEUE_CAP, 0, err, sizeof(err));
	if (queue_id < 0)
		die("engine_queue_create", err);
}

static struct queue_ref qref(void)
{
	return queue_ref_of(&pool, &pool.queues[queue_id]);
}

/*
 * What a client's thread leaves in the region while it runs: a lane, a
 * main sheaf per cache (installed for the fast-path counts) with objects
 * allocated from it on the fast path (owned ones tagged first), and for
 * client 0 one owned object enqueued (tagged QUEUED, as client/queue.c
 * does), an empty sheaf held and a full one put back.  The debug cache's
 * objects stay in their sheaves (its in-use bits are the client
 * library's).
 */
static void client_activity(uint32_t id, uint32_t node)
{
	struct shm_lane *l = client_lane_acquire(&pool, id, node);

	if (l == NULL)
		die("lane_acquire", "no lane");
	for (uint32_t k = 0; k < FUZZ_CACHES; k++) {
		const struct shm_cache *sc = &pool.caches[k];
		uint32_t s = barn_get_full(&pool, k, node, id, &l->intent);
		uint32_t cap = at_load_relaxed(&pool.caches[k].sheaf_capacity);
		struct shm_sheaf *sh;
		uint64_t popped[3] = { 0 }, last = 0;
		int dep;

		if (s == SHEAF_ID_NONE)
			continue;
		sh = pool_sheaf(&pool, s);
		lane_live_install(&pool, l, k, s);
		for (int i = 0; i < 3 && k != C_DEBUG && sheaf_size(sh) > 0; i++) {
			uint64_t off = sh->objs[sheaf_slot(sheaf_size(sh) - 1)];

			if (sc->flags & SHEAF_CACHE_F_OWNED)
				owner_alloc(owner_tag(&pool, sc, off), id);
			(void)sheaf_pop(sh);     /* the inline alloc's word step */
			at_store_relaxed(&sh->word, at_load_relaxed(&sh->word) + SHEAF_WORD_OP);
			popped[i] = last = off;
		}
		if (id != client[0] && k == C_PLAIN && popped[1] != 0) {
			/* Two of the objects freed deferred: a sheaf of
			 * them handed to the rcu ring, as client/deferred.c
			 * does, for the grace-period passes to release. */
			struct ring_ref rr = pool_ring_ref(&pool, ring_rcu_id(pool.nodes));
			uint32_t d = barn_get_empty(&pool, k, node, cap, id, &l->intent, &dep);
			struct shm_sheaf *dsh;

			if (d == SHEAF_ID_NONE)
				die("barn_get_empty", "no empty sheaf for the deferred frees");
			dsh = pool_sheaf(&pool, d);
			dsh->flags = SHEAF_F_DEFERRED;
			sheaf_push(dsh, popped[0]);
			sheaf_push(dsh, popped[1]);
			dsh->gp = at_load_seqcst(&pool.hdr->gp_seq);
			if (ring_put(&rr, pool.owners, d, id, &l->intent) != 0)
				die("ring_put", "the rcu ring is full");
		}
		if (id != client[0])
			continue;
		if (k == C_OWNED && last != 0) {
			struct queue_ref q = qref();
			uint32_t v = queue_value_at(last - pool.data_off);

			at_store_relaxed(owner_tag(&pool, sc, last), OWNER_TAG_QUEUED);
			if (queue_put(&q, &v, 1) != 1)
				die("queue_put", "the queue is full");
		}
		s = barn_get_empty(&pool, k, node, cap, id, &l->intent, &dep);
		(void)s;                         /* held, empty */
		s = barn_get_full(&pool, k, node, id, &l->intent);
		if (s != SHEAF_ID_NONE)
			barn_put_full(&pool, k, node, s, id, &l->intent);
	}
	lane_release(l);
}

static void passes(struct engine *e)
{
	for (uint32_t n = 0; n < pool.nodes; n++)
		engine_node_pass(e, n, &e->worker_lane[n]->intent);
}

static void setup(void)
{
	struct pool_params pp = {
		.size = FUZZ_POOL_BYTES, .nodes = FUZZ_NODES, .sheaf_count = FUZZ_SHEAVES,
		.max_clients = FUZZ_CLIENTS, .max_lanes = FUZZ_LANES,
		.max_caches = FUZZ_MAX_CACHES,
	};
	struct check_report rep;
	char err[256];

	if (pool_create(&pool, &pp, err, sizeof(err)) != 0)
		die("pool_create", err);
	if (engine_init(&eng, &pool, err, sizeof(err)) != 0)
		die("engine_init", err);
	engine_quiesce_ms = 0;           /* a destroy meets busy lanes often */
	make_caches();
	passes(&eng);
	for (int i = 0; i < 2; i++) {
		int id = client_attach(&pool, (uint32_t)getpid(), (uint32_t)getuid(),
				       i ? "fuzz-1" : "fuzz-0");
		if (id < 0)
			die("client_attach", "no slot");
		client[i] = (uint32_t)id;
	}
	client_activity(client[0], 0);
	client_activity(client[1], 1);
	passes(&eng);
	if (pool_check(&pool, -1, -1, &rep, err, sizeof(err)) != 0)
		die("the snapshot fails the checker", err);
	/* No membarrier per grace pass (a syscall that interrupts every
	 * CPU): the fence alone, as where membarrier is missing. */
	eng.grace->membarrier = 0;
	eng0 = eng;
	memcpy(&grace0, eng.grace, offsetof(struct grace, block_since));
	verbose = getenv("FUZZ_ENGINE_VERBOSE") != NULL;
	snap_take(&snap, pool.base, pool.size);
}

/* The engine's private state as after setup (the region is snap's). */
static void reset_engine(void)
{
	struct grace *g = eng.grace;

	eng = eng0;
	memcpy(g, &grace0, offsetof(struct grace, block_since));
	memset(g->block_since, 0, pool.max_lanes * sizeof(g->block_since[0]));
	memset(g->ignored, 0, pool.max_lanes);
	g->done_ns = clock_ns();         /* no beat due: steps alone decide */
	ring_rebuild_reset(&eng);
}

/* ---- the fields ---------------------------------------------------------- */

struct field {
	void *at;
	unsigned width;              /* 1, 2, 4 or 8 bytes; 0: none */
};

static uint32_t rings_used(void)
{
	return ring_total(FUZZ_MAX_CACHES, pool.nodes);
}

static struct field field_of(enum kind k, uint32_t a, uint32_t b)
{
	struct field f = { NULL, 0 };
	uint32_t ring = a % rings_used(), sheaf = a % pool.sheaf_count;
	uint32_t lane = a % pool.max_lanes;
	struct shm_ring *r = pool_ring(&pool, ring);
	struct shm_sheaf *sh = pool_sheaf(&pool, sheaf);
	struct queue_ref q = qref();
	uint32_t frame = b % pool.frames_total;

	switch (k) {
	case K_RING_TAIL: f = (struct field){ &r->tail, 4 }; break;
	case K_RING_HEAD: f = (struct field){ &r->head, 4 }; break;
	case K_RING_GEOM: f = (struct field){ &r->size + b % 4, 4 }; break;
	case K_RING_SLOT: f = (struct field){ &r->slots[b % pool.sheaf_count], 8 }; break;
	case K_OWNER: f = (struct field){ &pool.owners[sheaf], 4 }; break;
	case K_SHEAF_WORD: f = (struct field){ &sh->word, 8 }; break;
	case K_SHEAF_HDR:
		switch (b % 6) {
		case 0: f = (struct field){ &sh->capacity, 4 }; break;
		case 1: f = (struct field){ &sh->cache, 2 }; break;
		case 2: f = (struct field){ &sh->node, 1 }; break;
		case 3: f = (struct field){ &sh->flags, 1 }; break;
		case 4: f = (struct field){ &sh->id, 4 }; break;
		default: f = (struct field){ &sh->gp, 8 }; break;
		}
		break;
	case K_SHEAF_OBJ: f = (struct field){ &sh->objs[b % SHEAF_CAP_MAX], 8 }; break;
	case K_LANE32:
		f = (struct field){ (uint32_t *)&pool.lanes[lane] + b % (sizeof(struct shm_lane) / 4), 4 };
		break;
	case K_LANE64:
		f = (struct field){ (uint64_t *)&pool.lanes[lane] + b % (sizeof(struct shm_lane) / 8), 8 };
		break;
	case K_LANE_BLOCK: {
		uint64_t words = FUZZ_MAX_CACHES * SHEAF_LANE_CACHE_BYTES / 8;

		f = (struct field){ (uint64_t *)pool_lane_block(&pool, &pool.lanes[lane]) +
				    ((uint32_t)b << 4 | a >> 12) % words, 8 };
		break;
	}
	case K_HWM: f = (struct field){ &pool.lanes[lane].client, 4 }; break;
	case K_RCU:
		switch (b % 3) {
		case 0: f = (struct field){ &pool.rcu->bell, 4 }; break;
		case 1: f = (struct field){ &pool.rcu->sleeping, 4 }; break;
		default: f = (struct field){ &pool.rcu->req, 8 }; break;
		}
		break;
	case K_BARN:
		f = (struct field){ (uint32_t *)&pool.barns[a % (FUZZ_MAX_CACHES * pool.nodes)] + b % 4,
				    4 };
		break;
	case K_NODE: {
		struct shm_node *nd = &pool.node[a % pool.nodes];

		switch (b % 3) {
		case 0: f = (struct field){ &nd->doorbell, 4 }; break;
		case 1: f = (struct field){ &nd->sleeping, 4 }; break;
		default: f = (struct field){ &nd->cpu, 4 }; break;
		}
		break;
	}
	case K_QCTL:
		switch (b % 9) {
		case 0: f = (struct field){ &q.ctl->tail, 8 }; break;
		case 1: f = (struct field){ &q.ctl->head, 8 }; break;
		case 2: f = (struct field){ &q.ctl->ne_event, 4 }; break;
		case 3: f = (struct field){ &q.ctl->ne_sleep, 4 }; break;
		case 4: f = (struct field){ &q.ctl->nf_event, 4 }; break;
		case 5: f = (struct field){ &q.ctl->nf_sleep, 4 }; break;
		case 6: f = (struct field){ &q.ctl->deq_waits, 8 }; break;
		case 7: f = (struct field){ &q.ctl->enq_waits, 8 }; break;
		default: f = (struct field){ &q.ctl->dropped, 8 }; break;
		}
		break;
	case K_QSLOT: f = (struct field){ &q.slots[b % q.size], 8 }; break;
	case K_TAG:
		f = (struct field){ &pool.tags[(uint64_t)frame * SLAB_MAX_OBJS + a % 1024],
				    sizeof(otag_t) };
		break;
	case K_INUSE:
		f = (struct field){ pool_inuse(&pool, frame) + a % SLAB_BITMAP_WORDS, 8 };
		break;
	default:
		break;
	}
	return f;
}

static uint64_t field_get(const struct field *f)
{
	uint64_t v = 0;

	memcpy(&v, f->at, f->width);     /* little-endian */
	return v;
}

static void field_set(const struct field *f, uint64_t v)
{
	memcpy(f->at, &v, f->width);
}

/* An object offset of cache @c: the @i-th object of its first frame on
 * node @i & 1 (a real object, whether in use or free). */
static uint64_t object_of(uint32_t c, uint32_t i)
{
	const struct shm_cache *sc = &pool.caches[c % FUZZ_CACHES];

	for (uint32_t f = 0; f < pool.frames_total; f++) {
		uint32_t fr = (f + (i & 1) * pool.frames_per_node) % pool.frames_total;

		if (at_load_relaxed(&pool.frame_owner[fr]) == c % FUZZ_CACHES)
			return pool_frame_off(&pool, fr) +
			       (uint64_t)((i >> 1) % sc->objs_per_slab) * sc->obj_size;
	}
	return pool.data_off;
}

/* A plausible value, chosen by @v: bits 0-3 the class, 4-7 an index. */
static uint64_t interesting(uint8_t v)
{
	uint32_t i = v >> 4;

	switch (v & 15) {
	case 0: return i;                                        /* small */
	case 1: return i < 8 ? ~0ull << (i * 8) >> (i * 8) : (1ull << 31) - 1 + (i & 1);
	case 2: return i % pool.sheaf_count;                     /* a sheaf id */
	case 3: return pool.sheaf_count - 1 + (i & 3);           /* just past */
	case 4: return OWNER_RING(i % (rings_used() + 1));
	case 5: {
		static const uint64_t own[] = { OWNER_ENGINE, OWNER_NONE, SHEAF_ID_NONE,
						LANE_FREE, 0, 1, 2, 3 };
		return own[i % 8] + (i >= 8 ? client[i & 1] : 0);
	}
	case 6: return object_of(C_PLAIN, i);
	case 7: return object_of(C_OWNED, i);
	case 8: return object_of(C_DEBUG, i);
	case 9: return object_of(i % FUZZ_CACHES, i) + 8;        /* off a boundary */
	case 10: return queue_value_at(object_of(i % FUZZ_CACHES, i) - pool.data_off);
	case 11: {
		static const uint64_t tag[] = { OWNER_TAG_NONE, OWNER_TAG_QUEUED, OWNER_TAG_KEPT,
						OWNER_TAG_REPAIR };
		return i < 4 ? tag[i] : owner_tag_client(client[i & 1]) + (i >= 12);
	}
	case 12: return (uint64_t)i << 16 | i;                   /* sheaf word */
	case 13: return at_load_relaxed(&pool.hdr->gp_seq) + i - 8;
	case 14: return ((at_load_relaxed(&pool.hdr->gp_seq) + i - 8) << 1) | 1; /* rcu_ctr */
	default: return (uint64_t)FUZZ_QUEUE_CAP * (i + 1) + (i & 1);      /* positions */
	}
}

/* ---- the steps ----------------------------------------------------------- */

static int reclaimed[2];

static void read_stats(void)
{
	volatile uint64_t sink = 0;
	uint64_t held[FUZZ_CLIENTS * FUZZ_MAX_CACHES], kept[FUZZ_MAX_CACHES];
	struct grace_blocker gb[4];
	struct queue_stats qs;
	struct queue_ref q;

	for (uint32_t c = 0; c < FUZZ_CACHES; c++) {
		if (at_load_acquire(&pool.caches[c].state) != CACHE_LIVE)
			continue;
		for (uint32_t n = 0; n < pool.nodes; n++) {
			struct stats_sum sum = { 0 };

			stats_cache_node(&pool, c, n, &sum);
			sink += sum.objects + sum.barn_full;
		}
		sink += (uint64_t)engine_counted_in_use(&pool, c);
		for (uint32_t l = 0; l < pool_lanes_used(&pool); l++)
			if (at_load_relaxed(&pool.lanes[l].client) != LANE_FREE)
				sink += (uint64_t)lane_in_use(&pool, &pool.lanes[l], c);
		sink += grace_cache_waiting(&eng, c);
	}
	owner_count(&pool, held, kept, FUZZ_CLIENTS, FUZZ_MAX_CACHES);
	if (at_load_acquire(&pool.queues[queue_id].state) == QUEUE_LIVE) {
		q = qref();
		queue_read_stats(&q, &qs);
		sink += qs.depth + qs.dropped;
	}
	sink += grace_report(&eng, gb, 4);
	(void)sink;
}

/* Adoption as after a restart: the old engine is gone (its lanes are
 * freed by the adoption), a new one starts and serves. */
static void adopt(void)
{
	static struct engine e2;
	struct check_report rep;
	char err[256];

	engine_adopt(&pool);
	if (engine_init(&e2, &pool, err, sizeof(err)) != 0)
		return;                  /* no lane left for it: refused */
	e2.grace->membarrier = 0;
	passes(&e2);
	grace_step(&e2);
	pool_check(&pool, -1, -1, &rep, err, sizeof(err));
	engine_fini(&e2);
}

/* Run step @s with argument @x; 1 when the input ends here. */
static int step(enum step s, uint8_t x)
{
	struct check_report rep;
	char err[256];

	if (verbose)
		fprintf(stderr, "fuzz_engine: step %d (%u)\n", (int)s, x);
	switch (s) {
	case ST_PASS:
		engine_node_pass(&eng, x % pool.nodes, &eng.worker_lane[x % pool.nodes]->intent);
		break;
	case ST_REBUILD: {
		uint32_t id = x % rings_used();
		struct ring_intent *in = &eng.worker_lane[0]->intent;

		/* A look now (the rate limit forgotten): its walks and, when
		 * an earlier look of this input agreed, the rebuild. */
		ring_rebuild_reset(&eng);
		(void)ring_rebuild_verify(&eng, in);
		(void)ring_rebuild_glance(&eng, id, in);
		break;
	}
	case ST_RECLAIM:
		if (!reclaimed[x & 1]) {
			reclaimed[x & 1] = 1;
			engine_reclaim_client(&eng, client[x & 1]);
		}
		break;
	case ST_GRACE:
		grace_step(&eng);
		break;
	case ST_VET:
		adopt_vet_shared(&pool, OWNER_ENGINE);
		break;
	case ST_CHECK:
		if (x & 1)
			pool_check_cache(&pool, (x >> 1) % FUZZ_CACHES, &rep, err, sizeof(err));
		else
			pool_check(&pool, -1, -1, &rep, err, sizeof(err));
		break;
	case ST_STATS:
		read_stats();
		break;
	case ST_SHRINK:
		engine_shrink(&eng, x & 2 ? (int)((x >> 2) % FUZZ_CACHES) : -1, x & 1);
		break;
	case ST_DESTROY:
		engine_cache_destroy(&eng, x % FUZZ_CACHES, err, sizeof(err));
		break;
	case ST_QDESTROY:
		engine_queue_destroy(&eng, (uint32_t)queue_id, err, sizeof(err));
		break;
	case ST_RECONCILE:
		engine_reconcile_counts(&eng);
		break;
	case ST_QGET:
		if (at_load_acquire(&pool.queues[queue_id].state) == QUEUE_LIVE) {
			struct queue_ref q = qref();
			uint32_t v[4];

			(void)queue_get(&q, v, 1 + x % 4, NULL);
		}
		break;
	case ST_ADOPT:
		adopt();
		return 1;
	default:
		break;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	int steps = 0, ended = 0;
	size_t i = 0;

	if (!ready) {
		setup();
		ready = 1;
	}
	snap_restore(&snap);
	reset_engine();
	reclaimed[0] = reclaimed[1] = 0;

	while (i < size && !ended) {
		uint8_t op = data[i++];
		enum kind k;
		struct field f;
		unsigned mode;
		uint64_t v;
		uint32_t a, b;

		if (op & 0x80) {
			if (i >= size || steps++ == MAX_STEPS)
				break;
			ended = step((enum step)((op & 0x7f) % ST_NR), data[i++]);
			continue;
		}
		if (i + 3 > size)
			break;
		k = (enum kind)((op & 0x1f) % K_NR);
		mode = op >> 5 & 3;
		a = (uint32_t)data[i] << 8 | data[i + 1];
		b = data[i + 2];
		i += 3;
		f = field_of(k, a, b);
		if (f.width == 0)
			continue;
		switch (mode) {
		case 0:
			if (i + 8 > size)
				goto out;
			memcpy(&v, data + i, 8);
			i += 8;
			break;
		case 1:
			if (i >= size)
				goto out;
			v = field_get(&f) + (uint64_t)(int64_t)(int8_t)data[i++];
			break;
		case 2:
			if (i >= size)
				goto out;
			v = interesting(data[i++]);
			break;
		default: {
			struct field g;

			if (i >= size)
				goto out;
			g = field_of(k, (uint32_t)data[i] << 4 ^ a, b ^ data[i]);
			i++;
			v = field_get(&g);
			break;
		}
		}
		if (verbose)
			fprintf(stderr, "fuzz_engine: kind %d [%u, %u] = %#llx (was %#llx)\n", (int)k,
				a, b, (unsigned long long)v, (unsigned long long)field_get(&f));
		field_set(&f, v);
	}
out:
	/* What the workers do next anyway: a pass of each node. */
	if (!ended)
		passes(&eng);
	return 0;
}
