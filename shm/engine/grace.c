/*
 * grace.c - the engine's grace-period thread and the repairs' hand-over of
 * deferred sheaves (grace.h; docs/design.md, "Deferred frees").  The
 * thread's doorbell, which clients ring too, is shm/grace_bell.c's.
 *
 * Everything read from SHARED memory (the rcu ring's sheaves, their stamp,
 * cache and size, the lanes' rcu_ctr and client, shm_rcu.req) is
 * client-written: read once and bounded (bounds.h).  shm_rcu.req is never
 * compared with a grace period: a change means "asked", and the
 * GRACE_BEAT_NS grace period bounds a request a scribbler hid by writing
 * the old value back.  A lane counts only while it names a client slot
 * that is taken (META): a stale rcu_ctr left in a free or engine lane is
 * counted once (UT_LANE) and ignored.  A client can hold grace periods
 * back by writing a client's lane (as a stopped reader does: reported,
 * never unsafe) or
 * make its own deferred objects of caches it shares reusable early by
 * scribbling their sheaf (it can spoil those objects anyway:
 * docs/design.md, "What a hostile client can still spoil"); it cannot fake
 * gp_seq or gp_done (META).
 */
#include <errno.h>
#include <linux/membarrier.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "shm/engine/clients.h"
#include "shm/barn.h"
#include "shm/futex.h"
#include "shm/grace_bell.h"
#include "shm/lanes.h"
#include "shm/engine/grace.h"
#include "shm/engine/internal.h"
#include "shm/engine/ring_rebuild.h"

#define POLL_MIN_NS   20000L       /* first wait for a blocking reader */
#define POLL_MAX_NS   1000000L     /* then doubling up to this */
#define IDLE_WAIT_NS  100000000L   /* doorbell wait, as a safety net (with
				      no client attached: IDLE_ALONE_NS) */

static int sys_membarrier(int cmd)
{
	return (int)syscall(__NR_membarrier, cmd, 0, 0);
}

static struct ring_ref rcu_ref(const struct shm_pool *p)
{
	return pool_ring_ref(p, ring_rcu_id(p->nodes));
}

int grace_init(struct engine *e)
{
	struct shm_pool *p = e->pool;
	struct grace *g = calloc(1, sizeof(*g));
	int q;

	if (g == NULL)
		return -ENOMEM;
	g->e = e;
	g->ids = calloc(p->sheaf_count, sizeof(*g->ids));
	g->ep = calloc(p->sheaf_count, sizeof(*g->ep));
	g->orig = calloc(p->sheaf_count, sizeof(*g->orig));
	g->hold = calloc(p->sheaf_count, sizeof(*g->hold));
	g->seen = calloc(p->sheaf_count, sizeof(*g->seen));
	g->node = calloc(p->sheaf_count, 1);
	g->lane = client_lane_acquire(p, OWNER_ENGINE, 0);
	g->done_ns = clock_ns();
	/* 0, not the word: a request left by an engine before an adoption
	 * is served by the first pass. */
	g->req_seen = 0;
	if (g->ids == NULL || g->ep == NULL || g->orig == NULL || g->hold == NULL ||
	    g->seen == NULL || g->node == NULL || g->lane == NULL) {
		e->grace = g;
		grace_fini(e);
		return -ENOMEM;
	}
	/* Readers may skip their fence only if this engine can make every
	 * running thread of theirs execute one (the membarrier flavour of
	 * userspace RCU); the flag lives in META, for them to read. */
	q = sys_membarrier(MEMBARRIER_CMD_QUERY);
	g->membarrier = q > 0 && (q & MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0;
	at_store_release(&p->hdr->gp_flags, g->membarrier ? GP_F_MEMBARRIER : 0u);
	e->grace = g;
	return 0;
}

void grace_fini(struct engine *e)
{
	struct grace *g = e->grace;

	if (g == NULL)
		return;
	if (g->lane != NULL)
		client_lane_free(e->pool, g->lane);
	free(g->ids);
	free(g->ep);
	free(g->orig);
	free((void *)g->hold);
	free(g->seen);
	free(g->node);
	free(g);
	e->grace = NULL;
}

static void stat_waiting(struct shm_pool *p, uint32_t c, uint32_t n, int64_t v)
{
	engine_stat_add(p, c, n, ST_RCU_WAITING, (uint64_t)v);
}

/* Take every sheaf from the rcu ring into the pending list. */
static void drain(struct grace *g)
{
	struct shm_pool *p = g->e->pool;
	struct ring_ref rr = rcu_ref(p);
	uint64_t seq = at_load_seqcst(&p->hdr->gp_seq);
	uint32_t s;

	while (g->n < p->sheaf_count &&
	       (s = ring_get(&rr, p->owners, OWNER_ENGINE, &g->lane->intent)) != SHEAF_ID_NONE) {
		struct shm_sheaf *sh = pool_sheaf(p, s);
		uint64_t ep = ut_load64(&sh->gp);
		uint32_t c = ut_sheaf_cache(p, sh), n = ut_sheaf_node(p, sh);
		/* A rebuild's hold (grace_hold): acq_rel pairs with its CAS. */
		uint64_t held = at_exchange_acqrel(&g->hold[s], 0);

		if (held != 0)
			at_fetch_sub_relaxed(&g->nhold, 1);

		if (c >= p->max_caches || n >= p->nodes) {
			/* A scribbled sheaf: its objects name no cache. */
			sheaf_set_size(sh, 0);
			depot_put(p, s, OWNER_ENGINE, &g->lane->intent);
			continue;
		}
		/* A stamp from the future is taken as now: the sheaf waits
		 * for the next grace period, never less. */
		g->ids[g->n] = s;
		g->orig[g->n] = ep < seq ? ep : seq;
		/* Held: it waits for a grace period that started after the
		 * claim too (never less than its own stamp says). */
		g->ep[g->n] = held > g->orig[g->n] ? held : g->orig[g->n];
		g->node[g->n] = (uint8_t)n;
		g->n++;
		stat_waiting(p, c, n, ut_sheaf_size(sh));
		/* For an adoption's requeue, which takes the count back. */
		at_plain_store_relaxed(&sh->flags,
				       (uint8_t)(at_plain_load_relaxed(&sh->flags) | SHEAF_F_WAITING));
	}
}

/* Sheaf @i of the pending list has had its grace period: to its barn, or
 * to the slabs when the barn is at its limit or its objects are of several
 * nodes. */
static void release(struct grace *g, uint32_t i)
{
	struct shm_pool *p = g->e->pool;
	struct ring_intent *in = &g->lane->intent;
	uint32_t s = g->ids[i], n = g->node[i];
	struct shm_sheaf *sh = pool_sheaf(p, s);
	uint32_t c = ut_sheaf_cache(p, sh), size = ut_sheaf_size(sh);
	uint8_t flags = at_plain_load_relaxed(&sh->flags);
	struct ring_ref full;

	g->ids[i] = g->ids[g->n - 1];
	g->ep[i] = g->ep[g->n - 1];
	g->orig[i] = g->orig[g->n - 1];
	g->node[i] = g->node[g->n - 1];
	g->n--;
	if (c >= p->max_caches) {       /* changed since the drain */
		sheaf_set_size(sh, 0);
		depot_put(p, s, OWNER_ENGINE, in);
		return;
	}
	stat_waiting(p, c, n, -(int64_t)size);
	engine_stat_add(p, c, n, ST_RCU_RELEASED, size);
	sh->flags = 0;
	sh->node = (uint8_t)n;
	/* Acquire: pairs with the release stores of the cache state. */
	if (at_load_acquire(&p->caches[c].state) != CACHE_LIVE) {
		sheaf_set_size(sh, 0);         /* destroy waits for us: no case */
		depot_put(p, s, OWNER_ENGINE, in);
		return;
	}
	full = pool_full_ref(p, c, n);
	if ((flags & SHEAF_F_MIXED) || size == 0 ||
	    ring_count(&full) >= at_load_relaxed(&p->caches[c].barn_limit)) {
		engine_flush_sheaf(p, c, n, s, OWNER_ENGINE, in);
	} else if (barn_put_full_try(p, c, n, s, OWNER_ENGINE, in) != 0) {
		/* The full ring refused it (spoiled: rings hold every sheaf
		 * of the pool): the objects go to the slabs, not lost, and
		 * the next look at the rings comes sooner. */
		untrusted_note(UT_RING, 1);
		ring_rebuild_symptom(g->e);
		engine_flush_sheaf(p, c, n, s, OWNER_ENGINE, in);
	}
}

/* Order every reader's accesses before the scan (docs/design.md, "Deferred
 * frees"): 0, or -1 when membarrier failed (the scan must wait: a reader
 * without a fence is not seen safely). */
static int order_readers(struct grace *g)
{
	at_fence_seqcst();
	if (!g->membarrier)
		return 0;
	if (sys_membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0 ||
	    sys_membarrier(MEMBARRIER_CMD_GLOBAL) == 0)
		return 0;
	return -1;
}

/*
 * Whether lane @l names no client that can be reading: free, the engine's
 * (its threads never read in a section), or a client slot that is free
 * (META).  Read after order_readers, like rcu_ctr: a thread that takes a
 * lane stores its client before its section's fence (or membarrier), so a
 * stale name seen here is as safe as an rcu_ctr of 0 (docs/design.md,
 * "Deferred frees": the scan's two cases).
 */
static int lane_unheld(const struct shm_pool *p, const struct shm_lane *l)
{
	uint32_t c = pool_lane_holder(p, l);

	return c == LANE_FREE || c == OWNER_ENGINE || c >= p->max_clients ||
	       at_load_acquire(&p->clients[c].state) == CLIENT_FREE;
}

/* Whether every lane has passed grace period g->cur. */
static int scan(struct grace *g)
{
	struct shm_pool *p = g->e->pool;
	int ok = 1;

	for (uint32_t l = 0, used = pool_lanes_used(p); l < used; l++) {
		/* Acquire: pairs with the reader's release store at unlock
		 * or quiescent: its reads came before. */
		uint64_t v = at_load_acquire(&p->lanes[l].rcu_ctr);

		if (v == 0)
			g->ignored[l] = 0;
		if (v == 0 || (v >> 1) >= g->cur) {
			at_store_relaxed(&g->block_since[l], 0);
			continue;
		}
		if (lane_unheld(p, &p->lanes[l])) {
			if (!g->ignored[l])
				untrusted_note(UT_LANE, 1);
			g->ignored[l] = 1;
			at_store_relaxed(&g->block_since[l], 0);
			continue;
		}
		ok = 0;
		if (at_load_relaxed(&g->block_since[l]) == 0)
			at_store_relaxed(&g->block_since[l], g->cur_start_ns);
	}
	return ok;
}

/* The sheaves the owner table places in the rcu ring (before a drain):
 * into g->seen; returns how many. */
static uint32_t rcu_placed(struct grace *g)
{
	const struct shm_pool *p = g->e->pool;
	const uint32_t mine = OWNER_RING(ring_rcu_id(p->nodes));
	uint32_t k = 0;

	for (uint32_t s = 0; s < p->sheaf_count; s++)
		if (at_load_relaxed(&p->owners[s]) == mine)
			g->seen[k++] = s;
	return k;
}

/* Whether a sheaf placed in the rcu ring before the drain is there still
 * (out of reach: a spoiled ring, or a put between its owner and slot
 * CAS), or one a rebuild claimed back waits to be drained. */
static int rcu_stuck(struct grace *g, uint32_t k)
{
	const struct shm_pool *p = g->e->pool;
	const uint32_t mine = OWNER_RING(ring_rcu_id(p->nodes));

	if (at_load_acquire(&g->nhold) != 0)
		return 1;
	for (uint32_t i = 0; i < k; i++)
		if (at_load_relaxed(&p->owners[g->seen[i]]) == mine)
			return 1;
	return 0;
}

/* One pass: drain, release what is due, advance the grace period.
 * Returns 1 when it did something. */
static int pass(struct grace *g)
{
	struct shm_pool *p = g->e->pool;
	struct shm_header *h = p->hdr;
	uint64_t done, seq, rel;
	uint32_t placed = 0;
	int work = 0;
	/* gp_released may move: then check first that the drain reaches
	 * every sheaf in the ring (one read of the owner table). */
	int publish = at_load_relaxed(&h->gp_done) > at_load_relaxed(&h->gp_released);

	if (publish)
		placed = rcu_placed(g);
	drain(g);
	publish = publish && !rcu_stuck(g, placed);
	done = at_load_acquire(&h->gp_done);
	rel = done;
	for (uint32_t i = 0; i < g->n;) {
		if (g->ep[i] < done) {
			release(g, i);
			work = 1;
		} else {
			/* A held sheaf waits past its own stamp: gp_released
			 * stays at that stamp until it is released. */
			if (g->orig[i] < rel)
				rel = g->orig[i];
			i++;
		}
	}
	/* Everything drained above and stamped below @rel is released
	 * (sheaf_barrier waits for it), and nothing in the ring was out of
	 * the drain's reach. */
	if (publish && rel > at_load_relaxed(&h->gp_released)) {
		at_store_release(&h->gp_released, rel);
		at_fetch_add_seqcst(&h->gp_wake, 1);
		futex_wake(&h->gp_wake, 1 << 30);
	}
	seq = at_load_relaxed(&h->gp_seq);
	if (g->cur == 0) {
		/* Read only between grace periods: a request changed the
		 * word after its waiter read gp_seq, so one started after
		 * this read covers it.  A word that never changes asks
		 * nothing; one held at the old value waits for the beat. */
		int64_t now = clock_ns();
		uint64_t req = ut_load64(&p->rcu->req);
		int asked = req != g->req_seen;

		g->req_seen = req;
		if (g->n > 0 || asked ||
		    (now - g->done_ns >= GRACE_BEAT_NS && client_any(p))) {
			g->cur = seq + 1;
			g->cur_start_ns = now;
			at_store_seqcst(&h->gp_seq, g->cur);
		}
	}
	if (g->cur == 0)
		return work;
	if (order_readers(g) == 0 && scan(g)) {
		at_store_release(&h->gp_done, g->cur);
		at_fetch_add_seqcst(&h->gp_wake, 1);
		futex_wake(&h->gp_wake, 1 << 30);
		g->cur = 0;
		g->done_ns = clock_ns();
		return 1;
	}
	return work;
}

static void *grace_main(void *arg)
{
	struct grace *g = arg;
	struct engine *e = g->e;
	struct shm_rcu *r = e->pool->rcu;
	long poll = POLL_MIN_NS;

	for (;;) {
		uint32_t bell = at_load_acquire(&r->bell);
		int work;

		if (at_load_seqcst(&e->stop))
			break;
		work = pass(g);
		if (g->cur != 0) {          /* a reader holds it back: poll */
			struct timespec ts = { 0, poll };

			nanosleep(&ts, NULL);
			poll = poll * 2 > POLL_MAX_NS ? POLL_MAX_NS : poll * 2;
			continue;
		}
		poll = POLL_MIN_NS;
		if (work)
			continue;
		at_store_seqcst(&r->sleeping, 1);
		if (at_load_seqcst(&r->bell) == bell && !at_load_seqcst(&e->stop))
			futex_wait(&r->bell, bell,
				   client_any(e->pool) ? IDLE_WAIT_NS : IDLE_ALONE_NS);
		at_store_seqcst(&r->sleeping, 0);
	}
	return NULL;
}

int grace_start(struct engine *e)
{
	struct grace *g = e->grace;
	int rc;

	if (g == NULL || g->running)
		return 0;
	rc = engine_thread_create(&g->thread, grace_main, g);
	if (rc != 0)
		return -rc;
	(void)pthread_setname_np(g->thread, "sheaf-grace");
	g->running = 1;
	return 0;
}

void grace_stop(struct engine *e)
{
	struct grace *g = e->grace;

	if (g == NULL || !g->running)
		return;
	/* e->stop is set (seq_cst) by engine_stop before this. */
	grace_bell_ring(e->pool);
	futex_wake(&e->pool->rcu->bell, 1);
	pthread_join(g->thread, NULL);
	g->running = 0;
}

int grace_step(struct engine *e)
{
	return e->grace != NULL && !e->grace->running ? pass(e->grace) : 0;
}

int grace_requeue(struct shm_pool *p, uint32_t s, uint32_t me, struct ring_intent *in)
{
	struct shm_sheaf *sh = pool_sheaf(p, s);
	struct ring_ref rr = rcu_ref(p);

	uint8_t flags = at_plain_load_relaxed(&sh->flags);
	uint32_t c = ut_sheaf_cache(p, sh), n = ut_sheaf_node(p, sh);

	if (!(flags & SHEAF_F_DEFERRED) || ut_sheaf_size(sh) == 0)
		return 0;
	/* A dead engine's pending sheaf: counted waiting by its drain, and
	 * again by the next one. */
	if ((flags & SHEAF_F_WAITING) && c < p->max_caches && n < p->nodes) {
		stat_waiting(p, c, n, -(int64_t)ut_sheaf_size(sh));
		at_plain_store_relaxed(&sh->flags, (uint8_t)(flags & ~SHEAF_F_WAITING));
	}
	/* seq_cst: the writer's death (seen by the caller) came before. */
	sh->gp = at_load_seqcst(&p->hdr->gp_seq);
	if (ring_put(&rr, p->owners, s, me, in) != 0) {
		/* Refused (the ring holds every sheaf: spoiled).  Never to
		 * the slabs: placed in the rcu ring by its owner entry alone
		 * (release: publishes the stamp), for the look to find it out
		 * of reach and the rebuild to claim it back (ring_rebuild.c);
		 * gp_released waits for it meanwhile. */
		uint32_t held = me;

		untrusted_note(UT_RING, 1);
		if (!at_cas_release(&p->owners[s], &held, OWNER_RING(rr.id)))
			return 1;          /* passed on meanwhile: not ours */
	}
	grace_bell_ring(p);
	return 1;
}

/* gp_seq now, never 0 (a hold of 0 is none: 1 only waits longer). */
static uint64_t hold_seq(struct engine *e)
{
	/* seq_cst: a grace period that starts after this load starts after
	 * the claim that follows. */
	uint64_t seq = at_load_seqcst(&e->pool->hdr->gp_seq);

	return seq != 0 ? seq : 1;
}

void grace_hold(struct engine *e, uint32_t s)
{
	struct grace *g = e->grace;
	uint64_t zero = 0;

	if (g == NULL || s >= e->pool->sheaf_count)
		return;
	if (at_cas_acqrel(&g->hold[s], &zero, hold_seq(e)))
		at_fetch_add_relaxed(&g->nhold, 1);
}

void grace_unhold(struct engine *e, uint32_t s)
{
	struct grace *g = e->grace;

	if (g == NULL || s >= e->pool->sheaf_count)
		return;
	if (at_exchange_acqrel(&g->hold[s], 0) != 0)
		at_fetch_sub_relaxed(&g->nhold, 1);
}

uint64_t grace_cache_waiting(struct engine *e, uint32_t cache)
{
	struct grace *g = e->grace;
	uint64_t n = 0;

	if (g == NULL)
		return 0;
	drain(g);
	for (uint32_t i = 0; i < g->n; i++)
		if (ut_sheaf_cache(e->pool, pool_sheaf(e->pool, g->ids[i])) == cache)
			n += ut_sheaf_size(pool_sheaf(e->pool, g->ids[i]));
	return n;
}

uint32_t grace_report(struct engine *e, struct grace_blocker *out, uint32_t max)
{
	struct grace *g = e->grace;
	struct shm_pool *p = e->pool;
	int64_t now = clock_ns();
	uint32_t k = 0;

	if (g == NULL)
		return 0;
	for (uint32_t l = 0, used = pool_lanes_used(p); l < used && k < max; l++) {
		int64_t since = at_load_relaxed(&g->block_since[l]);
		uint32_t c = pool_lane_holder(p, &p->lanes[l]);

		if (since == 0)
			continue;
		out[k].lane = l;
		out[k].client = c;
		out[k].pid = c < p->max_clients ? p->clients[c].pid : 0;
		out[k].blocked_ms = now > since ? (uint64_t)(now - since) / 1000000u : 0;
		k++;
	}
	return k;
}
