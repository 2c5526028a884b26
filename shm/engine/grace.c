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
#include "shm/barn.h"
#include "shm/futex.h"
#include "shm/grace_bell.h"
#include "shm/lanes.h"
#include "shm/engine/grace.h"
#include "shm/engine/internal.h"

#define POLL_MIN_NS   20000L       /* first wait for a blocking reader */
#define POLL_MAX_NS   1000000L     /* then doubling up to this */
#define IDLE_WAIT_NS  100000000L   /* doorbell wait, as a safety net */

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
	g->node = calloc(p->sheaf_count, 1);
	g->lane = lane_acquire(p, OWNER_ENGINE, 0);
	g->done_ns = clock_ns();
	/* 0, not the word: a request left by an engine before an adoption
	 * is served by the first pass. */
	g->req_seen = 0;
	if (g->ids == NULL || g->ep == NULL || g->node == NULL || g->lane == NULL) {
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
		lane_free(g->lane);
	free(g->ids);
	free(g->ep);
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

		if (c >= p->max_caches || n >= p->nodes) {
			/* A scribbled sheaf: its objects name no cache. */
			sheaf_set_size(sh, 0);
			depot_put(p, s, OWNER_ENGINE, &g->lane->intent);
			continue;
		}
		/* A stamp from the future is taken as now: the sheaf waits
		 * for the next grace period, never less. */
		g->ids[g->n] = s;
		g->ep[g->n] = ep < seq ? ep : seq;
		g->node[g->n] = (uint8_t)n;
		g->n++;
		stat_waiting(p, c, n, ut_sheaf_size(sh));
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
	} else {
		barn_put_full(p, c, n, s, OWNER_ENGINE, in);
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
	uint32_t c = at_load_acquire((_Atomic uint32_t *)&l->client);

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

/* One pass: drain, release what is due, advance the grace period.
 * Returns 1 when it did something. */
static int pass(struct grace *g)
{
	struct shm_pool *p = g->e->pool;
	struct shm_header *h = p->hdr;
	uint64_t done, seq;
	int work = 0;

	drain(g);
	done = at_load_acquire(&h->gp_done);
	for (uint32_t i = 0; i < g->n;) {
		if (g->ep[i] < done) {
			release(g, i);
			work = 1;
		} else {
			i++;
		}
	}
	/* Everything drained above and stamped below @done is released
	 * (sheaf_barrier waits for it). */
	if (at_load_relaxed(&h->gp_released) != done) {
		at_store_release(&h->gp_released, done);
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
		if (g->n > 0 || asked || now - g->done_ns >= GRACE_BEAT_NS) {
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
			futex_wait(&r->bell, bell, IDLE_WAIT_NS);
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

	if (!(at_plain_load_relaxed(&sh->flags) & SHEAF_F_DEFERRED) ||
	    ut_sheaf_size(sh) == 0)
		return 0;
	/* seq_cst: the writer's death (seen by the caller) came before. */
	sh->gp = at_load_seqcst(&p->hdr->gp_seq);
	if (ring_put(&rr, p->owners, s, me, in) != 0)
		return 0;                  /* never: the ring holds every sheaf */
	grace_bell_ring(p);
	return 1;
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
		uint32_t c = at_load_relaxed(&p->lanes[l].client);

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
