/*
 * ring_rebuild.c - the engine verifies the depot, the rcu ring and every
 * live barn ring in full, and rebuilds a spoiled one from its own knowledge
 * (ring_rebuild.h).
 *
 * Why: every ring lives in client-writable memory.  The ring code bounds
 * what it reads (ring.h), so a scribbled ring never crashes anyone, but it
 * can stop working: a head moved past the items, slots of the wrong lap or
 * "never filled" in the middle of [head, tail), ids overwritten, a tail
 * whose slot says "full".  The depot is shared by every cache, so a
 * spoiled depot starves them all (no empty sheaf to refill), and a spoiled
 * barn ring starves its cache.
 *
 * The glance (ring_rebuild_glance, every pass, O(1)): a ring whose
 * positions are impossible (tail - head outside the ring's size, give or
 * take one in-flight operation per lane) is rebuilt at once.
 *
 * The full verification (ring_rebuild_verify, a "look"): every
 * VERIFY_PERIOD_NS, and VERIFY_GAP_NS after the last look on a symptom (a
 * refill that found no empty sheaf or whose put was refused) or while a
 * suspicion waits for its second look.  A waiter is no symptom: a waiters
 * count that never falls would keep the looks at one per gap.  One look walks
 * each verified ring (the depot, the rcu ring, both rings of every live
 * cache-node) from
 * head as ring_get would (a full slot of head's lap: its sheaf reachable
 * when its owner entry names the ring; consumed or later: skipped; not yet
 * filled: the end), at most the ring's private size, and from tail as
 * ring_put would (the slot a put would fill, or one that refuses it); then
 * it reads the whole owner table once.  Spoiled, on two looks at least
 * VERIFY_GAP_NS apart:
 *   - the same sheaf placed in the ring by its owner entry yet unreachable
 *     (a put between its owner CAS and its slot CAS, or a get between its
 *     slot CAS and its owner CAS, is unreachable for a few instructions; a
 *     thread preempted there for the whole gap costs a needless rebuild,
 *     which the ring protocol arbitrates like any other);
 *   - a put refused at the same tail position while fewer sheaves than the
 *     ring's size are in it;
 *   - a get stopped at the same position short of tail (a slot before
 *     tail not filled for its lap: tail passes only filled slots), so the
 *     count promises sheaves nobody can reach.
 * And a sheaf whose owner entry names nobody who will give it back (no
 * ring of the pool, a ring of a free cache slot, a free client slot,
 * nobody) on two looks is claimed and put in the depot with its objects
 * validated back (an orphan).  A look costs O(sheaf_count) reads (the
 * walks stop at tail in a sane ring) and 8 bytes of private memory per
 * sheaf; at the period, well under 0.1% of a CPU.
 *
 * Rebuild (ring_reset, then a claim): the ring is reset to an empty lap; every
 * sheaf the owner table marks as in it is claimed by CAS (a concurrent
 * consumer that loses the CAS looks on, a producer whose sheaf is claimed
 * forgets it: the ring protocol's arbitration, ring.h); the claimed
 * sheaves are put back empty (a full ring's objects go back to the slabs
 * first, each validated): into the ring itself, or for a full ring into
 * the depot (put_back), for the next pass to refill.
 * A depot rebuild also takes in the orphans.  The rcu ring's sheaves hold
 * deferred frees: each is held first (grace_hold: it waits for a grace
 * period that starts after the claim, on top of its own stamp, and
 * gp_released waits for it), keeps its objects, and goes back into the rcu
 * ring itself; one it refuses stays the engine's (rstray), put into the
 * rcu ring again by each look, never the depot.  Every value read is bounded
 * by the pool's private geometry (bounds.h); the sheaf ids come from the
 * engine's own loop.  Counted in UT_REBUILT (sheafd logs it, rate-limited).
 * A sheaf no ring takes back (another ring spoiled meanwhile) stays the
 * engine's, on a private list that each look puts into the depot again
 * (UT_RING counts each refusal).  After a rebuild every barn with a waiter
 * or a verdict is published (verdict cleared), so a client waiting out a
 * rebuild (barn.h, BARN_STARVED_SHEAF) retries at once.
 *
 * A rebuild costs what the ring held at worst (a sheaf a client was about
 * to take is taken by the rebuild instead) and O(sheaf_count) of the
 * worker's time; it happens at most once per REBUILD_VET_GAP_NS per ring.
 *
 * Memory orders (the ring's labels are ring.c's):
 *   [RR1] ring_reset's slot stores, release: pair with [A1]/[A2], a ring
 *         user's acquire load of a slot.
 *   [RR2] ring_reset's head and tail stores, release, after [RR1]: pair
 *         with the acquire loads of tail and head (ring_count, the looks
 *         below); otherwise tail and head are hints moved by relaxed CAS,
 *         and those acquires pair with nothing.
 *   [RB1] the claim, owners[s]: RING(id) (or an orphan's owner) ->
 *         ENGINE, CAS acq_rel: its acquire pairs with [R1] of the put that
 *         placed the sheaf (its contents, which objects_home reads); the
 *         CAS arbitrates against a live [A3] or give-back on the entry
 *         (whoever loses forgets the sheaf).  The put back is ring_put's
 *         own [R1] from ENGINE.
 *   The looks read the slots with acquire ([A1]'s order: a filled slot's
 *   sheaf id) and owners[] relaxed (a hint, confirmed by a second look or
 *   by [RB1]); cache and client states with acquire (pair with the
 *   engine's release stores of CACHE_LIVE and of a client slot's state).
 *
 * Who may call: the engine's workers (engine/worker.c), with no lock held;
 * looks and rebuilds of all workers are serialised by a private mutex
 * (try-lock: a worker never waits for another's rebuild).
 */
#include <stdlib.h>
#include <string.h>
#include "shm/barn.h"
#include "shm/futex.h"
#include "shm/grace_bell.h"
#include "shm/engine/grace.h"
#include "shm/engine/internal.h"

/* Least time between two rebuilds of one ring. */
#define REBUILD_VET_GAP_NS (50 * 1000 * 1000)
/* A look at least every VERIFY_PERIOD_NS; the second look that confirms a
 * suspicion (and a look on a symptom) at least VERIFY_GAP_NS after the
 * one before: together they bound a spoiled ring's outage, about
 * VERIFY_GAP_NS to 2 * VERIFY_GAP_NS with a client waiting, at most
 * VERIFY_PERIOD_NS + VERIFY_GAP_NS otherwise. */
#define VERIFY_PERIOD_NS   (250 * 1000 * 1000)
#define VERIFY_GAP_NS      (50 * 1000 * 1000)
/* Operations in flight that can skew tail - head transiently (a consumer
 * that helped head past a tail its producer has not moved yet). */
#define REBUILD_SLACK(p)   ((p)->max_lanes + 8u)

/* mark[] values beside "ring id + 1": an orphan, and nothing. */
#define MARK_NONE   0u
#define MARK_ORPHAN 0xffffffffu
/* blocked[] value: no put refused at the last look. */
#define BLOCKED_NONE 0ull

struct ring_rebuild_state {
	pthread_mutex_t lock;
	uint32_t nrings;
	uint32_t *ids;           /* claimed sheaves of one rebuild */
	int64_t *next_vet;       /* per ring: no rebuild before this time */
	/* The looks (all private: the engine's own record of what it saw). */
	int64_t last_look;       /* time of the last look, 0 none */
	int pending;             /* the last look left a suspicion */
	_Atomic int symptom;     /* a worker saw a symptom since the last look */
	uint32_t *where;         /* per sheaf: ring id + 1 it is reachable in */
	uint32_t *mark;          /* per sheaf: the last look's verdict */
	uint64_t *blocked;       /* per ring: 1 << 32 | tail a put was refused at */
	uint64_t *stopped;       /* per ring: 1 << 32 | where a get stopped short
				    of tail */
	uint32_t *owned;         /* per ring: owner entries naming it */
	uint8_t *active;         /* per ring: verified in this look */
	uint8_t *bad;            /* per ring: found spoiled in this look */
	uint32_t *stray;         /* sheaves the engine holds that no ring took */
	uint32_t nstray;
	uint32_t *rstray;        /* deferred sheaves claimed from the rcu ring
				    that it did not take back */
	uint32_t nrstray;
};

int ring_rebuild_init(struct engine *e)
{
	struct ring_rebuild_state *m = calloc(1, sizeof(*m));
	uint32_t nr = pool_ring_total(e->pool), ns = e->pool->sheaf_count;

	if (m == NULL)
		return -1;
	m->nrings = nr;
	m->ids = calloc(ns, sizeof(*m->ids));
	m->next_vet = calloc(nr, sizeof(*m->next_vet));
	m->where = calloc(ns, sizeof(*m->where));
	m->mark = calloc(ns, sizeof(*m->mark));
	m->stray = calloc(ns, sizeof(*m->stray));
	m->rstray = calloc(ns, sizeof(*m->rstray));
	m->blocked = calloc(nr, sizeof(*m->blocked));
	m->stopped = calloc(nr, sizeof(*m->stopped));
	m->owned = calloc(nr, sizeof(*m->owned));
	m->active = calloc(nr, 1);
	m->bad = calloc(nr, 1);
	pthread_mutex_init(&m->lock, NULL);
	e->rebuild = m;
	if (m->ids == NULL || m->next_vet == NULL || m->where == NULL || m->mark == NULL ||
	    m->stray == NULL || m->rstray == NULL || m->blocked == NULL || m->stopped == NULL || m->owned == NULL ||
	    m->active == NULL ||
	    m->bad == NULL) {
		ring_rebuild_fini(e);
		return -1;
	}
	return 0;
}

void ring_rebuild_fini(struct engine *e)
{
	struct ring_rebuild_state *m = e->rebuild;

	if (m == NULL)
		return;
	pthread_mutex_destroy(&m->lock);
	free(m->ids);
	free(m->next_vet);
	free(m->where);
	free(m->mark);
	free(m->stray);
	free(m->rstray);
	free(m->blocked);
	free(m->stopped);
	free(m->owned);
	free(m->active);
	free(m->bad);
	free(m);
	e->rebuild = NULL;
}

/*
 * Whether @rr's positions are impossible: tail - head outside the ring's
 * size by more than the operations that can be in flight.  Judged on a
 * stable snapshot only (tail, head, tail, head read twice alike): a worker
 * preempted between two loads of a busy ring would otherwise see a head
 * thousands past the tail it read, and rebuild a sane ring.
 */
static int positions_impossible(const struct shm_pool *p, const struct ring_ref *rr)
{
	/* Acquires: pair with [RR2] of a reset, else with nothing (hints). */
	uint32_t t = at_load_acquire(&rr->r->tail), h = at_load_acquire(&rr->r->head);
	int32_t n = (int32_t)(t - h);

	if (n >= -(int32_t)REBUILD_SLACK(p) && n <= (int32_t)(ring_size(rr) + REBUILD_SLACK(p)))
		return 0;
	return at_load_acquire(&rr->r->tail) == t && at_load_acquire(&rr->r->head) == h;
}

/* Whether owner entry @o names nobody who will ever give its sheaf back:
 * no ring of the pool, a barn ring of a cache slot that is free, a free
 * client slot, or no owner at all. */
static int owner_orphan(const struct shm_pool *p, uint32_t o)
{
	if (OWNER_IS_RING(o)) {
		uint32_t r = OWNER_RING_ID(o);

		if (r >= pool_ring_total(p))
			return 1;
		return r >= RING_FIRST_BARN &&
		       at_load_acquire(&p->caches[ring_cache_of(r, p->nodes)].state) == CACHE_FREE;
	}
	if (o < p->max_clients)
		return at_load_acquire(&p->clients[o].state) == CLIENT_FREE;
	return o != OWNER_ENGINE;
}

/* The objects of claimed sheaf @s back to its cache's slabs (validated),
 * when it holds any and its cache is live. */
static void objects_home(struct shm_pool *p, uint32_t s)
{
	struct shm_sheaf *sh = pool_sheaf(p, s);
	uint32_t c = ut_sheaf_cache(p, sh);

	if (ut_sheaf_size(sh) != 0 && c < p->max_caches &&
	    at_load_acquire(&p->caches[c].state) == CACHE_LIVE)
		engine_sheaf_to_slabs(p, c, sh);
	sheaf_set_size(sh, 0);
}

/* Keep engine-held sheaf @s for the next look to put in the depot. */
static void stray_keep(struct ring_rebuild_state *m, const struct shm_pool *p, uint32_t s)
{
	if (m->nstray < p->sheaf_count)
		m->stray[m->nstray++] = s;
}

/* The strays into the depot; those it refuses stay (counted). */
static void stray_retry(struct ring_rebuild_state *m, struct shm_pool *p,
			struct ring_intent *in)
{
	struct ring_ref depot = pool_depot_ref(p);
	uint32_t k = 0;

	while (k < m->nstray && ring_put(&depot, p->owners, m->stray[k], OWNER_ENGINE, in) == 0)
		k++;
	if (k < m->nstray)
		untrusted_note(UT_RING, 1);
	memmove(m->stray, m->stray + k, (m->nstray - k) * sizeof(*m->stray));
	m->nstray -= k;
}

/* The deferred sheaves claimed from the rcu ring back into it (never the
 * depot: their objects wait for a grace period); those it refuses stay
 * (counted), each still held (grace_hold). */
static void rstray_retry(struct ring_rebuild_state *m, struct shm_pool *p,
			 struct ring_intent *in)
{
	struct ring_ref rr = pool_ring_ref(p, RING_RCU);
	uint32_t k = 0;

	while (k < m->nrstray && ring_put(&rr, p->owners, m->rstray[k], OWNER_ENGINE, in) == 0)
		k++;
	if (k < m->nrstray)
		untrusted_note(UT_RING, 1);
	if (k > 0)
		grace_bell_ring(p);
	memmove(m->rstray, m->rstray + k, (m->nrstray - k) * sizeof(*m->rstray));
	m->nrstray -= k;
}

/*
 * Put the @n claimed (empty) sheaves @ids of rebuilt ring @id back: into
 * the ring itself when it holds empty sheaves (the depot, a barn's empty
 * ring: clean, it was just reset), else (a full ring) into the depot, then
 * the barn's empty ring.  Another ring may be spoiled too, and a put into
 * a spoiled ring runs to its step limit (ring_steps_max, some 10^5 steps)
 * before it gives up: after one failure a ring gets no more, and what no
 * ring takes stays the engine's, a stray for the next look.
 */
static void put_back(struct ring_rebuild_state *m, struct shm_pool *p, uint32_t id,
		     const uint32_t *ids, uint32_t n, struct ring_intent *in)
{
	struct ring_ref to[2];
	uint32_t nto = 0, k = 0;

	if (!ring_is_full_barn(id)) {              /* depot, an empty ring */
		to[nto++] = pool_ring_ref(p, id);
	} else {
		to[nto++] = pool_depot_ref(p);
		to[nto++] = pool_ring_ref(p, id + 1);      /* the barn's empty ring */
	}
	for (uint32_t r = 0; r < nto && k < n; r++)
		while (k < n && ring_put(&to[r], p->owners, ids[k], OWNER_ENGINE, in) == 0)
			k++;
	if (k < n)
		untrusted_note(UT_RING, n - k);
	if (id == RING_RCU && k > 0)
		grace_bell_ring(p);              /* drain them now */
	for (; k < n; k++) {
		if (id != RING_RCU)
			stray_keep(m, p, ids[k]);
		else if (m->nrstray < p->sheaf_count)
			m->rstray[m->nrstray++] = ids[k];
	}
}

/* Publish every barn with a waiter or a verdict (a ring was rebuilt:
 * what it waited for may be there now, and a stale "no sheaf" verdict
 * would make the next miss wait a poll before it rings). */
static void wake_waiters(struct shm_pool *p)
{
	for (uint32_t c = 0, used = pool_caches_used(p); c < used; c++) {
		if (at_load_acquire(&p->caches[c].state) != CACHE_LIVE)
			continue;
		for (uint32_t n = 0; n < p->nodes; n++) {
			struct shm_barn *b = pool_barn(p, c, n);

			if (ut_barn_waiters(b) || at_load_relaxed(&b->starved) != 0)
				barn_publish(p, c, n, 0);
		}
	}
}

/* Rebuild ring @id (see the header comment); returns the sheaves put back. */
static uint32_t rebuild_ring(struct engine *e, uint32_t id, struct ring_intent *in)
{
	struct shm_pool *p = e->pool;
	struct ring_rebuild_state *m = e->rebuild;
	struct ring_ref rr = pool_ring_ref(p, id);
	const uint32_t mine = OWNER_RING(id);
	uint32_t n = 0;

	m->next_vet[id] = clock_ns() + REBUILD_VET_GAP_NS;
	ring_reset(&rr);
	/* After the reset: a sheaf put in before it, or while it ran, is
	 * claimed here (its producer forgets it, ring.h). */
	for (uint32_t s = 0; s < p->sheaf_count; s++) {
		uint32_t o = at_load_relaxed(&p->owners[s]);
		int orphan = id == RING_DEPOT && owner_orphan(p, o);

		if (o != mine && !orphan)
			continue;
		/* A deferred sheaf keeps waiting: for its own stamp's grace
		 * period and for one that starts after this claim. */
		if (id == RING_RCU)
			grace_hold(e, s);
		/* [RB1] acq_rel: acquires [R1] of the put that placed
		 * the sheaf; arbitrates against a live [A3]. */
		if (!at_cas_acqrel(&p->owners[s], &o, OWNER_ENGINE)) {
			/* Not ours (the grace thread drained it): a hold the
			 * drain took is harmless (a longer wait), one left
			 * would hold gp_released back. */
			if (id == RING_RCU)
				grace_unhold(e, s);
			continue;
		}
		{
			/* At once: a sheaf the engine holds is the checker's
			 * to walk (an empty one carries no objects).  Not a
			 * depot sheaf's header: every taker blanks it
			 * (barn_get_empty), and writing 32768 of them after a
			 * shrink punched their pages faulted each back in
			 * (77 ms of a rebuild, a starved client's wait). */
			if (orphan || ring_is_full_barn(id))    /* objects */
				objects_home(p, s);
			else if (id != RING_DEPOT && id != RING_RCU)
				sheaf_set_size(pool_sheaf(p, s), 0);
			m->ids[n++] = s;
		}
	}
	put_back(m, p, id, m->ids, n, in);
	untrusted_note(UT_REBUILT, 1);
	wake_waiters(p);
	return n;
}

/*
 * Walk @rr as its users would: from head as ring_get does, marking in
 * m->where each sheaf a get can reach (a full slot of its position's lap
 * whose owner entry names the ring); from tail as ring_put does.  Returns
 * BLOCKED_NONE, or 1 << 32 | the position at which a put is refused;
 * *@stop: 0, or 1 << 32 | the position at which a get stops short of the
 * tail read before the walk (tail passes only filled slots, and a slot
 * filled stays so for its lap, consumed or not: a slot before tail that
 * is not filled for its lap is a client's write).
 */
static uint64_t walk_ring(struct ring_rebuild_state *m, const struct shm_pool *p,
			  const struct ring_ref *rr, uint64_t *stop)
{
	const uint32_t mine = OWNER_RING(rr->id), size = ring_size(rr);
	/* Acquires: pair with [RR2] of a reset (else hints).  Tail first:
	 * what a get finds before it was filled before this load. */
	uint32_t t = at_load_acquire(&rr->r->tail);
	uint32_t h = at_load_acquire(&rr->r->head);

	*stop = 0;
	for (uint32_t k = 0; k < size; k++) {
		uint32_t pos = h + k, base = pos - (pos & rr->mask);
		/* Acquire: pairs with [R3] (or [RR1] of a reset). */
		uint64_t v = at_load_acquire(&rr->r->slots[pos & rr->mask]);
		int32_t d = (int32_t)((uint32_t)(v >> 32) - (base + 1));
		uint32_t s = (uint32_t)v;

		if (d < 0) {                    /* a get stops here: empty */
			if ((int32_t)(t - pos) > 0)
				*stop = 1ull << 32 | pos;
			break;
		}
		if (d == 0 && s < p->sheaf_count && m->where[s] == 0 &&
		    at_load_relaxed(&p->owners[s]) == mine)
			m->where[s] = rr->id + 1;
	}
	t = at_load_acquire(&rr->r->tail);
	for (uint32_t k = 0; k <= size; k++) {
		uint32_t pos = t + k, base = pos - (pos & rr->mask);
		uint64_t v = at_load_acquire(&rr->r->slots[pos & rr->mask]);
		int32_t d = (int32_t)((uint32_t)(v >> 32) - base);

		if (d == 0)
			return BLOCKED_NONE;    /* a put fills this one */
		if (d < 0)
			return 1ull << 32 | pos;   /* a put is refused here */
	}
	return BLOCKED_NONE;
}

/*
 * One look (the header comment): walk the verified rings, read the owner
 * table, compare with the last look; rebuild what two looks found spoiled
 * and claim what two looks found orphaned.  Under m->lock.
 */
static void look(struct engine *e, struct ring_intent *in)
{
	struct shm_pool *p = e->pool;
	struct ring_rebuild_state *m = e->rebuild;
	uint32_t used = pool_rings_used(p), nr = used < m->nrings ? used : m->nrings;
	int pending = 0, rebuilt = 0;
	int64_t now;

	stray_retry(m, p, in);
	rstray_retry(m, p, in);
	memset(m->active, 0, m->nrings);
	memset(m->bad, 0, m->nrings);
	memset(m->owned, 0, m->nrings * sizeof(*m->owned));
	memset(m->where, 0, p->sheaf_count * sizeof(*m->where));
	m->active[RING_DEPOT] = 1;
	m->active[RING_RCU] = 1;
	for (uint32_t r = RING_FIRST_BARN; r < nr; r++)
		/* Acquire: pairs with the release store of CACHE_LIVE. */
		m->active[r] = at_load_acquire(&p->caches[ring_cache_of(r, p->nodes)].state) ==
			       CACHE_LIVE;
	for (uint32_t r = 0; r < nr; r++) {
		struct ring_ref rr;
		uint64_t b, st;

		if (!m->active[r])
			continue;
		rr = pool_ring_ref(p, r);
		/* Impossible positions are the glance's (rebuilt at once,
		 * rate-limited): no suspicion here that keeps looks coming
		 * every VERIFY_GAP_NS beside a ring spoiled again and again. */
		if (positions_impossible(p, &rr)) {
			/* No worker glances at the rcu ring: rebuilt here. */
			if (r == RING_RCU)
				m->bad[r] = 2;
			else
				m->active[r] = 0;
			continue;
		}
		b = walk_ring(m, p, &rr, &st);
		/* A refusal at the same position twice: compared below, once
		 * the owner table says how many sheaves the ring holds. */
		m->bad[r] = b != BLOCKED_NONE && b == m->blocked[r];
		m->blocked[r] = b;
		/* A get stopped short of tail at the same position twice: a
		 * count that promises sheaves nobody can reach. */
		if (st != 0 && st == m->stopped[r])
			m->bad[r] |= 2;
		m->stopped[r] = st;
		pending |= st != 0;
	}
	for (uint32_t s = 0; s < p->sheaf_count; s++) {
		uint32_t o = at_load_relaxed(&p->owners[s]), was = m->mark[s], now_mark = MARK_NONE;

		if (OWNER_IS_RING(o) && OWNER_RING_ID(o) < nr && m->active[OWNER_RING_ID(o)]) {
			uint32_t r = OWNER_RING_ID(o);

			m->owned[r]++;
			if (m->where[s] != r + 1) {
				now_mark = r + 1;
				if (was == now_mark)
					m->bad[r] |= 2;
			}
		} else if (owner_orphan(p, o)) {
			now_mark = MARK_ORPHAN;
			/* [RB1]: an orphan on two looks, claimed from the
			 * value read now (a change meanwhile wins). */
			if (was == MARK_ORPHAN && at_cas_acqrel(&p->owners[s], &o, OWNER_ENGINE)) {
				objects_home(p, s);
				at_plain_store_relaxed(&pool_sheaf(p, s)->flags, 0);
				stray_keep(m, p, s);
				now_mark = MARK_NONE;
				rebuilt = 1;
			}
		}
		m->mark[s] = now_mark;
		pending |= now_mark != MARK_NONE;
	}
	now = clock_ns();
	for (uint32_t r = 0; r < nr; r++) {
		if (!m->active[r])
			continue;
		pending |= m->blocked[r] != BLOCKED_NONE && m->owned[r] < p->sheaf_count;
		/* A refused put counts only while the ring is not full. */
		if ((m->bad[r] & 2) || (m->bad[r] == 1 && m->owned[r] < p->sheaf_count)) {
			if (now >= m->next_vet[r]) {
				rebuild_ring(e, r, in);
				m->blocked[r] = BLOCKED_NONE;
				m->stopped[r] = 0;
			} else {
				pending = 1;
			}
		}
	}
	if (m->nstray) {
		stray_retry(m, p, in);
		pending |= m->nstray != 0;
		if (rebuilt)
			wake_waiters(p);
	}
	pending |= m->nrstray != 0;
	m->pending = pending;
	m->last_look = clock_ns();
}

void ring_rebuild_symptom(struct engine *e)
{
	if (e->rebuild != NULL)
		at_store_relaxed(&e->rebuild->symptom, 1);
}

/* When the next look is due (ns, clock_ns), by the rule above. */
static int64_t look_due(const struct ring_rebuild_state *m)
{
	if (m->last_look == 0)
		return 0;
	if (m->pending || at_load_relaxed(&m->symptom))
		return m->last_look + VERIFY_GAP_NS;
	return m->last_look + VERIFY_PERIOD_NS;
}

int64_t ring_rebuild_verify(struct engine *e, struct ring_intent *in)
{
	struct ring_rebuild_state *m = e->rebuild;
	int64_t now, due;

	if (m == NULL)
		return -1;
	if (pthread_mutex_trylock(&m->lock) != 0)
		return VERIFY_GAP_NS;           /* another worker looks */
	now = clock_ns();
	if (now >= look_due(m)) {
		at_store_relaxed(&m->symptom, 0);
		look(e, in);
	}
	due = look_due(m) - clock_ns();
	pthread_mutex_unlock(&m->lock);
	return due > 0 ? due : 0;
}

int ring_rebuild_glance(struct engine *e, uint32_t id, struct ring_intent *in)
{
	struct ring_rebuild_state *m = e->rebuild;
	struct ring_ref rr = pool_ring_ref(e->pool, id);

	if (!positions_impossible(e->pool, &rr))
		return 0;
	if (m == NULL || id >= m->nrings || pthread_mutex_trylock(&m->lock) != 0)
		return 1;
	if (clock_ns() >= m->next_vet[id] && positions_impossible(e->pool, &rr))
		rebuild_ring(e, id, in);
	pthread_mutex_unlock(&m->lock);
	return positions_impossible(e->pool, &rr);
}

void ring_rebuild_reset(struct engine *e)
{
	struct ring_rebuild_state *m = e->rebuild;

	if (m == NULL)
		return;
	pthread_mutex_lock(&m->lock);
	for (uint32_t r = 0; r < m->nrings; r++) {
		m->next_vet[r] = 0;
		m->blocked[r] = BLOCKED_NONE;
		m->stopped[r] = 0;
	}
	memset(m->mark, 0, m->nrings ? e->pool->sheaf_count * sizeof(*m->mark) : 0);
	m->last_look = 0;
	m->pending = 0;
	m->nstray = 0;
	m->nrstray = 0;
	at_store_relaxed(&m->symptom, 0);
	pthread_mutex_unlock(&m->lock);
}
