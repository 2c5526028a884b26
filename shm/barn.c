/*
 * barn.c - barn and depot exchanges, doorbell and supply (barn.h).
 */
#include <limits.h>
#include "barn.h"
#include "futex.h"

uint32_t barn_get_full(struct shm_pool *p, uint32_t cache, uint32_t node,
		       uint32_t me, struct ring_intent *in)
{
	return ring_get(pool_full_ring(p, cache, node), p->owners, me, in);
}

uint32_t barn_put_full(struct shm_pool *p, uint32_t cache, uint32_t node,
		       uint32_t s, uint32_t me, struct ring_intent *in)
{
	struct shm_ring *r = pool_full_ring(p, cache, node);

	/* Rings hold every sheaf of the pool: never full. */
	(void)ring_put(r, p->owners, s, me, in);
	return ring_count(r);
}

uint32_t barn_get_empty(struct shm_pool *p, uint32_t cache, uint32_t node,
			uint32_t cap, uint32_t me, struct ring_intent *in,
			int *from_depot)
{
	uint32_t s = ring_get(pool_empty_ring(p, cache, node), p->owners, me, in);
	struct shm_sheaf *sh;

	*from_depot = 0;
	if (s == SHEAF_ID_NONE) {
		s = ring_get(pool_ring(p, RING_DEPOT), p->owners, me, in);
		if (s == SHEAF_ID_NONE)
			return s;
		*from_depot = 1;
	}
	sh = pool_sheaf(p, s);
	sheaf_set_size(sh, 0);
	sh->capacity = cap;
	sh->cache = (uint16_t)cache;
	sh->node = (uint8_t)node;
	sh->id = s;
	return s;
}

void barn_put_empty(struct shm_pool *p, uint32_t cache, uint32_t node,
		    uint32_t s, uint32_t me, struct ring_intent *in)
{
	sheaf_set_size(pool_sheaf(p, s), 0);
	(void)ring_put(pool_empty_ring(p, cache, node), p->owners, s, me, in);
}

void depot_put(struct shm_pool *p, uint32_t s, uint32_t me, struct ring_intent *in)
{
	sheaf_set_size(pool_sheaf(p, s), 0);
	(void)ring_put(pool_ring(p, RING_DEPOT), p->owners, s, me, in);
}

void node_ring_doorbell(struct shm_pool *p, uint32_t node)
{
	struct shm_node *nd = &p->node[node];

	at_fetch_add_seqcst(&nd->doorbell, 1);
	/* seq_cst: the Dekker pair with worker_main's seq_cst store of
	 * sleeping and load of the doorbell (one side sees the other). */
	if (at_load_seqcst(&nd->sleeping))
		futex_wake(&nd->doorbell, 1);
}

int barn_wait_supply(struct shm_pool *p, uint32_t cache, uint32_t node,
		     int64_t timeout_ns)
{
	struct shm_barn *b = pool_barn(p, cache, node);
	uint32_t seq = at_load_acquire(&b->supply);
	int64_t end = clock_ns() + timeout_ns;
	int rc = 0;

	at_fetch_add_seqcst(&b->waiters, 1);
	node_ring_doorbell(p, node);
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
