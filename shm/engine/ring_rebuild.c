/*
 * ring_rebuild.c - the engine finds a spoiled ring and rebuilds it from its
 * own knowledge (ring_rebuild.h).
 *
 * Why: every ring lives in client-writable memory.  The ring code bounds
 * what it reads (ring.h), so a scribbled ring never crashes anyone, but it
 * can stop working: a head moved past the items, slots of the wrong lap, a
 * count that says full while nothing is reachable.  The depot is shared by
 * every cache, so a spoiled depot starves them all (no empty sheaf to
 * refill), and a spoiled barn ring starves its cache; without a rebuild
 * both last until sheafd restarts.
 *
 * Vetting (cheap first): ring_rebuild_glance checks a ring's positions in
 * O(1) (tail - head within the ring's size, give or take one in-flight
 * operation per lane) on every pass; ring_rebuild_suspect is called on a
 * symptom and, at most once per REBUILD_VET_GAP_NS per ring (and
 * REBUILD_ANY_GAP_NS for all), looks for a sheaf the owner table
 * (owners[], client-writable but arbitrated by CAS) places in the ring that
 * no consumer can reach (not in a slot of [head, tail) of the right lap).
 * A ring is spoiled when its positions are impossible, or when the same
 * sheaf is unreachable on two vets a gap apart (a put in flight is
 * unreachable for a moment only).
 *
 * Only the glance calls the deep vet (impossible positions: rebuilt at
 * once).  Symptom-driven vets (a refill that found no empty sheaf
 * suspecting the depot; a failed put or get suspecting a barn ring) would
 * also rebuild rings with sane positions but lost sheaves; they are off:
 * they make an idle sheafd (test_hostile's) busy now and then (30-110 ms
 * of CPU in an idle 100 ms), for a cause not found (perhaps the refills
 * a rebuilt depot feeds into a spoiled barn ring, each failing put running
 * to ring_steps_max).
 *
 * Rebuild (ring_reset, then a claim): the ring is reset to an empty lap; every
 * sheaf the owner table marks as in it is claimed by CAS (a concurrent
 * consumer that loses the CAS looks on, a producer whose sheaf is claimed
 * forgets it: the ring protocol's arbitration, ring.h); the claimed
 * sheaves are put back empty (a full ring's objects go back to the slabs
 * first, each validated): into the ring itself, or for a full ring into
 * the depot (put_back), for the next pass to refill.
 * A depot rebuild also takes in the orphans: sheaves whose owner entry
 * names no ring of the pool, a client slot that is free, or nobody at all
 * (their objects validated back too).  Every value read is bounded by the
 * pool's private geometry (bounds.h); the sheaf ids come from the
 * engine's own loop.  Counted in UT_REBUILT (sheafd logs it, rate-limited).
 *
 * A rebuild costs what the ring held at worst (a sheaf a client was about
 * to take is taken by the rebuild instead) and O(sheaf_count) of the
 * worker's time; it happens at most once per vet gap per ring.
 *
 * Memory orders (the ring's labels are ring.c's):
 *   [RR1] ring_reset's slot stores, release: pair with [A1]/[A2], a ring
 *         user's acquire load of a slot.
 *   [RR2] ring_reset's head and tail stores, release, after [RR1]: pair
 *         with the acquire loads of tail and head (ring_count, the vets
 *         below); otherwise tail and head are hints moved by relaxed CAS,
 *         and those acquires pair with nothing.
 *   [RB1] the claim, owners[s]: RING(id) (or an orphan's owner) ->
 *         ENGINE, CAS acq_rel: its acquire pairs with [R1] of the put that
 *         placed the sheaf (its contents, which objects_home reads); the
 *         CAS arbitrates against a live [A3] or give-back on the entry
 *         (whoever loses forgets the sheaf).  The put back is ring_put's
 *         own [R1] from ENGINE.
 *   The vets read the slots with acquire ([A1]'s order: a filled slot's
 *   sheaf id) and owners[] relaxed (a hint, confirmed by a second vet or
 *   by [RB1]); cache and client states with acquire (pair with the
 *   engine's release stores of CACHE_LIVE and of a client slot's state).
 *
 * Who may call: the engine's workers (engine/worker.c), with no lock held;
 * vets and rebuilds of all workers are serialised by a private mutex
 * (try-lock: a worker never waits for another's rebuild).
 */
#include <stdlib.h>
#include <string.h>
#include "shm/barn.h"
#include "shm/futex.h"
#include "shm/engine/internal.h"

/* Least time between two deep vets of one ring, and of any two rings: a
 * vet reads the whole owner table, and the symptoms that call for one (a
 * starved barn) can last; the worker's CPU for vets stays near 1%. */
#define REBUILD_VET_GAP_NS (50 * 1000 * 1000)
#define REBUILD_ANY_GAP_NS (10 * 1000 * 1000)
/* Operations in flight that can skew tail - head transiently (a consumer
 * that helped head past a tail its producer has not moved yet). */
#define REBUILD_SLACK(p)   ((p)->max_lanes + 8u)

struct ring_rebuild_state {
	pthread_mutex_t lock;
	uint32_t nrings;
	int64_t next_any;        /* no deep vet of any ring before this time */
	uint32_t *ids;           /* claimed sheaves of one rebuild */
	int64_t *next_vet;       /* per ring: no deep vet before this time */
	uint32_t *suspect;       /* per ring: the unreachable sheaf the last
				    vet found, SHEAF_ID_NONE */
	uint8_t *seen;           /* scratch: sheaves reachable in a ring */
};

int ring_rebuild_init(struct engine *e)
{
	struct ring_rebuild_state *m = calloc(1, sizeof(*m));
	uint32_t nr = pool_ring_total(e->pool);

	if (m == NULL)
		return -1;
	m->nrings = nr;
	m->ids = calloc(e->pool->sheaf_count, sizeof(*m->ids));
	m->next_vet = calloc(nr, sizeof(*m->next_vet));
	m->suspect = malloc(nr * sizeof(*m->suspect));
	m->seen = malloc(e->pool->sheaf_count);
	pthread_mutex_init(&m->lock, NULL);
	e->rebuild = m;
	if (m->ids == NULL || m->next_vet == NULL || m->suspect == NULL || m->seen == NULL) {
		ring_rebuild_fini(e);
		return -1;
	}
	for (uint32_t r = 0; r < nr; r++)
		m->suspect[r] = SHEAF_ID_NONE;
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
	free(m->suspect);
	free(m->seen);
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

/*
 * A sheaf the owner table places in @rr that no consumer can reach now, or
 * SHEAF_ID_NONE.  @seen: scratch of p->sheaf_count bytes.
 */
static uint32_t unreachable_sheaf(struct shm_pool *p, const struct ring_ref *rr,
				  uint8_t *seen)
{
	const uint32_t mine = OWNER_RING(rr->id);
	uint32_t h = at_load_acquire(&rr->r->head), span = ring_count(rr);

	memset(seen, 0, p->sheaf_count);
	for (uint32_t k = 0; k < span; k++) {
		uint32_t pos = h + k;
		/* Acquire: pairs with [R3] (or [RR1] of a reset). */
		uint64_t v = at_load_acquire(&rr->r->slots[pos & rr->mask]);
		uint32_t s = (uint32_t)v;

		if ((uint32_t)(v >> 32) == pos - (pos & rr->mask) + 1 && s < p->sheaf_count)
			seen[s] = 1;
	}
	for (uint32_t s = 0; s < p->sheaf_count; s++)
		if (!seen[s] && at_load_relaxed(&p->owners[s]) == mine)
			return s;
	return SHEAF_ID_NONE;
}

/* Whether owner entry @o names nobody who will ever give its sheaf back:
 * no ring of the pool, a free client slot, or no owner at all. */
static int owner_orphan(const struct shm_pool *p, uint32_t o)
{
	if (OWNER_IS_RING(o))
		return OWNER_RING_ID(o) >= pool_ring_total(p);
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

/*
 * Put the @n claimed (empty) sheaves @ids of rebuilt ring @id back: into
 * the ring itself when it holds empty sheaves (the depot, a barn's empty
 * ring: clean, it was just reset), else (a full ring) into the depot, then
 * the barn's empty ring.  Another ring may be spoiled too, and a put into
 * a spoiled ring runs to its step limit (ring_steps_max, some 10^5 steps)
 * before it gives up: after one failure a ring gets no more, and what no
 * ring takes stays the engine's (lost until an adoption, counted).
 */
static void put_back(struct shm_pool *p, uint32_t id, const uint32_t *ids, uint32_t n,
		     struct ring_intent *in)
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
}

/* Rebuild ring @id (see the header comment); returns the sheaves put back. */
static uint32_t rebuild_ring(struct engine *e, uint32_t id, struct ring_intent *in)
{
	struct shm_pool *p = e->pool;
	struct ring_rebuild_state *m = e->rebuild;
	struct ring_ref rr = pool_ring_ref(p, id);
	const uint32_t mine = OWNER_RING(id);
	uint32_t n = 0;

	ring_reset(&rr);
	/* After the reset: a sheaf put in before it, or while it ran, is
	 * claimed here (its producer forgets it, ring.h). */
	for (uint32_t s = 0; s < p->sheaf_count; s++) {
		uint32_t o = at_load_relaxed(&p->owners[s]);
		int orphan = id == RING_DEPOT && owner_orphan(p, o);

		/* [RB1] acq_rel: acquires [R1] of the put that placed
		 * the sheaf; arbitrates against a live [A3]. */
		if ((o == mine || orphan) &&
		    at_cas_acqrel(&p->owners[s], &o, OWNER_ENGINE)) {
			/* At once: a sheaf the engine holds is the checker's
			 * to walk (an empty one carries no objects). */
			if (orphan || ring_is_full_barn(id))    /* objects */
				objects_home(p, s);
			else
				sheaf_set_size(pool_sheaf(p, s), 0);
			m->ids[n++] = s;
		}
	}
	put_back(p, id, m->ids, n, in);
	untrusted_note(UT_REBUILT, 1);
	return n;
}

void ring_rebuild_suspect(struct engine *e, uint32_t id, struct ring_intent *in)
{
	struct ring_rebuild_state *m = e->rebuild;
	struct shm_pool *p = e->pool;
	int64_t now;

	/* Never the rcu ring: its sheaves wait for a grace period, which a
	 * rebuild (objects straight back to the slabs) would skip. */
	if (m == NULL || id >= m->nrings || id == RING_RCU ||
	    pthread_mutex_trylock(&m->lock) != 0)
		return;
	now = clock_ns();
	if (now >= m->next_vet[id] && now >= m->next_any) {
		struct ring_ref rr = pool_ring_ref(p, id);
		uint32_t s = positions_impossible(p, &rr) ? SHEAF_ID_NONE :
			     unreachable_sheaf(p, &rr, m->seen);

		m->next_vet[id] = now + REBUILD_VET_GAP_NS;
		m->next_any = now + REBUILD_ANY_GAP_NS;
		/* Spoiled: impossible positions, or the same sheaf marked as
		 * in the ring yet unreachable on two vets a gap apart (a put
		 * in flight is unreachable for a few instructions only). */
		if (positions_impossible(p, &rr) || (s != SHEAF_ID_NONE && s == m->suspect[id])) {
			m->suspect[id] = SHEAF_ID_NONE;
			rebuild_ring(e, id, in);
		} else {
			m->suspect[id] = s;
		}
	}
	pthread_mutex_unlock(&m->lock);
}

int ring_rebuild_glance(struct engine *e, uint32_t id, struct ring_intent *in)
{
	struct ring_ref rr = pool_ring_ref(e->pool, id);

	if (!positions_impossible(e->pool, &rr))
		return 0;
	ring_rebuild_suspect(e, id, in);
	return positions_impossible(e->pool, &rr);
}

void ring_rebuild_reset(struct engine *e)
{
	struct ring_rebuild_state *m = e->rebuild;

	if (m == NULL)
		return;
	pthread_mutex_lock(&m->lock);
	m->next_any = 0;
	for (uint32_t r = 0; r < m->nrings; r++) {
		m->next_vet[r] = 0;
		m->suspect[r] = SHEAF_ID_NONE;
	}
	pthread_mutex_unlock(&m->lock);
}
