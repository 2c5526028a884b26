/*
 * barn.c - barn and depot exchanges, doorbell and supply (barn.h).  Rings
 * are reached through pool_*_ref (bounds.h): their geometry is the
 * pool's, never the ring header's.
 */
#include <limits.h>
#include <sched.h>
#include "barn.h"
#include "bounds.h"
#include "cache_desc.h"
#include "slab_geom.h"
#include "futex.h"

int pool_under_pressure(const struct shm_pool *p, uint32_t node)
{
	uint64_t cap_frames = at_load_relaxed(&p->hdr->mem_cap) >> SLAB_SHIFT;
	uint64_t used = at_load_relaxed(&p->hdr->frames_used);
	uint64_t node_used = at_load_relaxed(&p->nalloc[node].used);
	struct ring_ref depot = pool_depot_ref(p);

	/* The node's own frames count too: a node can run out while the
	 * pool as a whole is far from its cap (frames are per node). */
	return used * 4 > cap_frames * 3 ||
	       node_used * 4 > (uint64_t)p->frames_per_node * 3 ||
	       (uint64_t)ring_count(&depot) * 4 < (uint64_t)p->sheaf_count;
}

/* A large cache without a barn_keep of its own keeps what the unused
 * part of the pool's large_retain covers, in its sheaves, at most
 * SHEAF_LARGE_BARN_KEEP_MAX of them: freed objects the flush would leave
 * in retained slabs anyway (barn.h).  Both figures are hints in the
 * header (clients may write them): clamped. */
static uint32_t large_barn_keep(const struct shm_pool *p, const struct shm_cache *sc)
{
	uint64_t retain = at_load_relaxed(&p->hdr->large_retain);
	uint64_t kept = at_load_relaxed(&p->hdr->large_retained);
	uint32_t cap = at_load_relaxed(&sc->sheaf_capacity);
	uint64_t per, n;

	if (kept >= retain)
		return 0;
	if (cap == 0 || cap > SHEAF_CAP_MAX)
		cap = cache_default_capacity(sc->obj_size);
	per = (uint64_t)sc->obj_size * cap;
	n = per > 0 ? (retain - kept) / per : 0;
	return n > SHEAF_LARGE_BARN_KEEP_MAX ? SHEAF_LARGE_BARN_KEEP_MAX : (uint32_t)n;
}

uint32_t barn_flush_limit(const struct shm_pool *p, const struct shm_cache *sc, uint32_t node)
{
	uint32_t limit = at_load_relaxed(&sc->barn_limit);
	uint32_t keep = at_load_relaxed(&sc->barn_keep);

	if (limit == 0)
		limit = 1;
	if (keep == 0 && slab_is_large(sc->obj_size))
		keep = large_barn_keep(p, sc);
	return keep > limit && !pool_under_pressure(p, node) ? keep : limit;
}

uint32_t barn_get_full(struct shm_pool *p, uint32_t cache, uint32_t node,
		       uint32_t me, struct ring_intent *in)
{
	struct ring_ref rr = pool_full_ref(p, cache, node);

	return ring_get(&rr, p->owners, me, in);
}

/* Put @s into @rr; a ring too scribbled to take it (ring_put gives up) is
 * counted, and the sheaf given to the depot instead, or, when that fails
 * too, kept by @me (lost to the pool until a repair: the cost of the
 * scribble). */
static void put_or_depot(struct shm_pool *p, const struct ring_ref *rr, uint32_t s,
			 uint32_t me, struct ring_intent *in)
{
	struct ring_ref depot;

	if (ring_put(rr, p->owners, s, me, in) == 0)
		return;
	untrusted_note(UT_RING, 1);
	depot = pool_depot_ref(p);
	if (rr->id != RING_DEPOT && ring_put(&depot, p->owners, s, me, in) == 0)
		return;
	untrusted_note(UT_RING, 1);
}

int barn_put_full_try(struct shm_pool *p, uint32_t cache, uint32_t node,
		      uint32_t s, uint32_t me, struct ring_intent *in)
{
	struct ring_ref rr = pool_full_ref(p, cache, node);

	return ring_put(&rr, p->owners, s, me, in);
}

uint32_t barn_put_full(struct shm_pool *p, uint32_t cache, uint32_t node,
		       uint32_t s, uint32_t me, struct ring_intent *in)
{
	struct ring_ref rr = pool_full_ref(p, cache, node);

	/* Rings hold every sheaf of the pool: never full, unless scribbled
	 * (then the objects go with the sheaf to the depot: lost, as the
	 * scribbler's cache's consistency is). */
	if (ring_put(&rr, p->owners, s, me, in) != 0) {
		sheaf_set_size(pool_sheaf(p, s), 0);
		put_or_depot(p, &rr, s, me, in);
	}
	return ring_count(&rr);
}

uint32_t barn_get_empty(struct shm_pool *p, uint32_t cache, uint32_t node,
			uint32_t cap, uint32_t me, struct ring_intent *in,
			int *from_depot)
{
	struct ring_ref rr = pool_empty_ref(p, cache, node);
	uint32_t s = ring_get(&rr, p->owners, me, in);
	struct shm_sheaf *sh;

	*from_depot = 0;
	if (s == SHEAF_ID_NONE) {
		rr = pool_depot_ref(p);
		s = ring_get(&rr, p->owners, me, in);
		if (s == SHEAF_ID_NONE)
			return s;
		*from_depot = 1;
	}
	sh = pool_sheaf(p, s);
	sheaf_set_size(sh, 0);
	/* Relaxed atomic stores (plain on x86): sheafd's dead-client repair
	 * reads every sheaf's header meanwhile (engine/owner.c, drop_in_sheaves).
	 * Its flags too, as depot_put does: a sheaf reaches the depot or an
	 * empty ring by other ways (a spoiled ring's put-back, barn_put_empty),
	 * and a stale SHEAF_F_DEFERRED (a scribble) would make its next
	 * holder's repair requeue it as deferred frees of this cache. */
	at_plain_store_relaxed(&sh->flags, 0);
	at_plain_store_relaxed(&sh->capacity, cap <= SHEAF_CAP_MAX ? cap : SHEAF_CAP_MAX);
	at_plain_store_relaxed(&sh->cache, (uint16_t)cache);
	at_plain_store_relaxed(&sh->node, (uint8_t)node);
	at_plain_store_relaxed(&sh->id, s);
	return s;
}

void barn_put_empty(struct shm_pool *p, uint32_t cache, uint32_t node,
		    uint32_t s, uint32_t me, struct ring_intent *in)
{
	struct ring_ref rr = pool_empty_ref(p, cache, node);

	sheaf_set_size(pool_sheaf(p, s), 0);
	put_or_depot(p, &rr, s, me, in);
}

void depot_put(struct shm_pool *p, uint32_t s, uint32_t me, struct ring_intent *in)
{
	struct ring_ref rr = pool_depot_ref(p);
	struct shm_sheaf *sh = pool_sheaf(p, s);

	/* A depot sheaf is blank.  Its flags too: a deferred sheaf a client
	 * died with before its first push (size 0) comes here from the
	 * repair, and a stale SHEAF_F_DEFERRED would make its next holder's
	 * death requeue that one's free objects as deferred frees, counted in
	 * free_rcu_sheaf (deploy/test_example_rcu_table: in use by the walk
	 * N + k, by the counters N). */
	sheaf_set_size(sh, 0);
	at_plain_store_relaxed(&sh->flags, 0);
	put_or_depot(p, &rr, s, me, in);
}
int node_ring_doorbell(struct shm_pool *p, uint32_t node)
{
	struct shm_node *nd = &p->node[node];

	at_fetch_add_seqcst(&nd->doorbell, 1);
	/* seq_cst: the Dekker pair with worker_main's seq_cst store of
	 * sleeping and load of the doorbell (one side sees the other). */
	if (!at_load_seqcst(&nd->sleeping))
		return 0;
	futex_wake(&nd->doorbell, 1);
	return 1;
}

/* How long a waiter spins before it sleeps on supply. */
#define BARN_SPIN_NS 50000

int barn_wait_supply(struct shm_pool *p, uint32_t cache, uint32_t node,
		     int64_t timeout_ns)
{
	struct shm_barn *b = pool_barn(p, cache, node);
	uint32_t seq = at_load_acquire(&b->supply);
	int64_t end = clock_ns() + timeout_ns;
	int rc = 0, woke;

	/* Where this waiter runs, for the worker (stock_refill): a hint,
	 * racing other waiters' is harmless. */
	at_store_relaxed(&b->waiter_cpu, (uint32_t)(sched_getcpu() + 1));
	at_fetch_add_relaxed(&b->waits, 1);
	at_fetch_add_seqcst(&b->waiters, 1);
	woke = node_ring_doorbell(p, node);
	/* First a short spin (BARN_SPIN_NS): a worker awake publishes within
	 * it, and a waiter asleep would wait for a wake-up of its own too
	 * (tens of microseconds on a VM: W6).  But never on the worker's CPU,
	 * where the spin would keep it from running: a worker this call woke
	 * may have been queued here, so until it runs (sleeping still set)
	 * each turn yields; once it runs on this CPU (its cpu hint), the
	 * waiter sleeps at once.  seq_cst: as below. */
	for (int64_t spin_end = clock_ns() + BARN_SPIN_NS;
	     at_load_seqcst(&b->supply) == seq && clock_ns() < spin_end; ) {
		struct shm_node *nd = &p->node[node];

		for (int k = 0; k < 32; k++)
			spin_pause();
		if (at_load_relaxed(&nd->sleeping)) {
			if (woke)
				sched_yield();
		} else if (at_load_relaxed(&nd->cpu) == (uint32_t)sched_getcpu() + 1) {
			break;
		}
	}
	/* seq_cst: pairs with the seq_cst bump of supply in barn_publish
	 * (a release, so the waiter sees starved and the rings as of that
	 * pass), and with the seq_cst waiters++ above orders against
	 * barn_publish's waiters load (Dekker): either it sees us counted
	 * and wakes us, or this load sees its bump. */
	while (at_load_seqcst(&b->supply) == seq) {
		int64_t left = end - clock_ns();
		if (left <= 0) {
			rc = -ETIMEDOUT;
			break;
		}
		futex_wait(&b->supply, seq, left);
	}
	/* Relaxed: a waiter gone too early costs one needless wake. */
	at_fetch_sub_relaxed(&b->waiters, 1);
	return rc;
}

void barn_publish(struct shm_pool *p, uint32_t cache, uint32_t node, int starved)
{
	struct shm_barn *b = pool_barn(p, cache, node);

	at_store_relaxed(&b->starved, (uint32_t)starved);
	/* seq_cst (a release at least): pairs with the acquire load of
	 * supply in barn_wait_supply (the waiter then sees starved and the
	 * rings as of this pass).  seq_cst with the seq_cst load of waiters
	 * below: a waiter counted by its seq_cst waiters++ is woken; one not
	 * yet counted reads supply after it (and futex_wait rechecks). */
	at_fetch_add_seqcst(&b->supply, 1);
	if (at_load_seqcst(&b->waiters))
		futex_wake(&b->supply, INT_MAX);
}

int barn_wait_rebuild(struct shm_pool *p, uint32_t cache, uint32_t node,
		      int64_t timeout_ns)
{
	struct shm_barn *b = pool_barn(p, cache, node);
	uint32_t seq = at_load_acquire(&b->supply);
	int64_t end = clock_ns() + timeout_ns;
	int rc = 0;

	/* seq_cst: the Dekker pair with barn_publish, as in
	 * barn_wait_supply (counted, or this load sees its bump). */
	at_fetch_add_relaxed(&b->waits, 1);
	at_fetch_add_seqcst(&b->waiters, 1);
	while (at_load_seqcst(&b->supply) == seq) {
		int64_t left = end - clock_ns();

		if (left <= 0) {
			rc = -ETIMEDOUT;
			break;
		}
		futex_wait(&b->supply, seq, left);
	}
	at_fetch_sub_relaxed(&b->waiters, 1);
	return rc;
}
