/*
 * exchange.c - a thread's exchange of whole sheaves with its cache's barns
 * (shm/barn.h), and its stash of sheaves beyond main and spare: take a full
 * sheaf (vetted, vet.c), waiting for the engine when the barn has none;
 * take an empty one, at once or waiting for the engine's flushes; hand a
 * sheaf back; keep a replaced main sheaf as spare or in the stash.
 *
 * Who may call: the slow paths of the object path (alloc.c, free.c), on
 * the calling thread's own tcache, between tcache_enter and tcache_leave.
 *
 * Exchange sequence (docs/design.md, "The object path"):
 *   alloc: main empty -> swap with spare if it holds objects -> else put the
 *          empty main in the barn's empty ring (or keep it as spare), take a
 *          full sheaf from the barn -> else ring the doorbell and wait for
 *          the engine's verdict -> starved: try other nodes' barns (not
 *          under numa_policy=bind) ->
 *          ENOMEM when the verdict is the memory cap (BARN_STARVED_MEM);
 *          no sheaf reachable (BARN_STARVED_SHEAF: a ring being rebuilt)
 *          is waited out until wait_ms: EAGAIN.
 *   free:  main full -> swap with spare if it is empty -> else put the full
 *          main in the barn's full ring, take an empty sheaf (barn, depot,
 *          or wait for the engine to flush, or to rebuild a ring).
 */
#include <errno.h>
#include "shm/barn.h"
#include "shm/futex.h"
#include "shm/bounds.h"
#include "client/internal.h"
#include "client/vet.h"

/*
 * A full sheaf of node @node's barn, vetted (vet_full), or NULL when the
 * barn has none.  One that held nothing valid goes back as an empty sheaf,
 * and the next is taken (the barn's sheaves bound the loop).
 */
static struct shm_sheaf *take_full(struct tcache *t, uint32_t node)
{
	struct shm_pool *p = tshm(t);
	uint32_t c = t->f->cache_id, s;

	while ((s = barn_get_full(p, c, node, me_of(t), intent_of(t))) != SHEAF_ID_NONE) {
		struct shm_sheaf *sh = vet_full(t, pool_sheaf(p, s));

		if (likely(sheaf_size(sh) > 0))
			return sh;
		barn_put_empty(p, c, node, s, me_of(t), intent_of(t));
	}
	return NULL;
}

/* How long a client waits quietly after a BARN_STARVED_SHEAF verdict
 * before it rings again (the engine publishes when it rebuilt a ring). */
#define REBUILD_POLL_NS (10 * 1000 * 1000)

/*
 * Wait for the engine until @end: for its next verdict (barn_wait_supply),
 * or, when the last one was "no sheaf reachable", quietly for a rebuild
 * (barn_wait_rebuild, at most REBUILD_POLL_NS, then ring and look again).
 * 0 to look again, -1 at the deadline.
 */
static int wait_engine(struct shm_pool *p, uint32_t c, uint32_t node, int64_t end)
{
	int64_t left = end - clock_ns();
	uint32_t st = at_load_acquire(&pool_barn(p, c, node)->starved);

	if (left <= 0)
		return -1;
	if (st != 0 && st != BARN_STARVED_MEM) {
		/* No publish for a whole poll: ring, so that the worker's
		 * passes keep seeing the symptom (at most once a poll). */
		if (barn_wait_rebuild(p, c, node, left < REBUILD_POLL_NS ? left : REBUILD_POLL_NS) != 0)
			node_ring_doorbell(p, node);
		return 0;
	}
	return barn_wait_supply(p, c, node, left) == 0 ? 0 : -1;
}

struct shm_sheaf *exchange_get_full(struct tcache *t, uint32_t node)
{
	struct shm_pool *p = tshm(t);
	uint32_t c = t->f->cache_id;
	struct shm_sheaf *s;
	int64_t end = 0;
	int fresh = 0;
	uint32_t st;

	for (;;) {
		s = take_full(t, node);
		if (s != NULL) {
			struct ring_ref full = pool_full_ref(p, c, node);

			stat_inc(t, ST_BARN_GET);
			if (ring_count(&full) < at_load_relaxed(&t->cache->sc->barn_low))
				node_ring_doorbell(p, node);   /* restock early */
			return s;
		}
		stat_inc(t, ST_BARN_GET_FAIL);
		st = at_load_acquire(&pool_barn(p, c, node)->starved);
		if (st != 0) {
			/* Take what other nodes' barns hold, never waiting;
			 * a bound pool's node only its own (pool_bound). */
			for (uint32_t k = 1; k < p->nodes && !pool_bound(p); k++) {
				uint32_t m = (node + k) % p->nodes;
				s = take_full(t, m);
				if (s != NULL) {
					stat_inc(t, ST_BARN_GET);
					return s;
				}
			}
			/* At the memory cap, by a verdict made after this
			 * call began.  Any other verdict (no sheaf reachable:
			 * a ring the engine rebuilds) is waited out. */
			if (fresh && st == BARN_STARVED_MEM) {
				errno = ENOMEM;
				return NULL;
			}
		}
		/* One deadline for every wait of this call: verdicts that
		 * never leave a sheaf for us (others took it, or a ring that
		 * takes nothing) end in EAGAIN, not in an endless loop. */
		if (end == 0)
			end = clock_ns() + t->cache->pool->wait_ns;
		if (wait_engine(p, c, node, end) != 0) {
			errno = EAGAIN;
			return NULL;
		}
		fresh = 1;
	}
}

struct shm_sheaf *exchange_get_empty(struct tcache *t, uint32_t node, uint32_t cap)
{
	struct shm_pool *p = tshm(t);
	int64_t end = 0;

	for (;;) {
		int dep;
		uint32_t s = barn_get_empty(p, t->f->cache_id, node, cap, me_of(t),
					    intent_of(t), &dep);
		if (s != SHEAF_ID_NONE) {
			if (dep)
				stat_inc(t, ST_SHEAF_ALLOC);
			return pool_sheaf(p, s);
		}
		if (end == 0)           /* the clock only when it must wait */
			end = clock_ns() + t->cache->pool->wait_ns;
		if (wait_engine(p, t->f->cache_id, node, end) != 0) {
			errno = EAGAIN;
			return NULL;
		}
	}
}

struct shm_sheaf *exchange_empty_now(struct tcache *t, uint32_t node, uint32_t cap)
{
	int dep;
	uint32_t s = barn_get_empty(tshm(t), t->f->cache_id, node, cap, me_of(t),
				    intent_of(t), &dep);

	if (s == SHEAF_ID_NONE)
		return NULL;
	if (dep)
		stat_inc(t, ST_SHEAF_ALLOC);
	return pool_sheaf(tshm(t), s);
}

/* A barn over barn_limit: over what the engine keeps now too?  (Only then
 * is a flush worth a doorbell; barn.h, barn_flush_limit.) */
static int barn_put_over(struct tcache *t)
{
	struct ring_ref full;
	uint32_t keep = barn_flush_limit(tshm(t), t->cache->sc, t->node);

	full = pool_full_ref(tshm(t), t->f->cache_id, t->node);
	return ring_count(&full) > keep;
}

/*
 * Full sheaf @id into node @node's barn.  A full ring refusing it is
 * spoiled (rings hold every sheaf of the pool): wait for the engine to
 * rebuild it, ringing the doorbell every REBUILD_POLL_NS, up to wait_ms;
 * only then does the sheaf go to the depot without its objects
 * (barn_put_full), the cost of a spoil the engine did not repair.
 * Returns the full sheaves in the barn.
 */
static uint32_t put_full(struct tcache *t, uint32_t node, uint32_t id)
{
	struct shm_pool *p = tshm(t);
	uint32_t c = t->f->cache_id;
	struct ring_ref full = pool_full_ref(p, c, node);
	int64_t end;

	if (likely(barn_put_full_try(p, c, node, id, me_of(t), intent_of(t)) == 0))
		return ring_count(&full);
	end = clock_ns() + t->cache->pool->wait_ns;
	for (int64_t left; (left = end - clock_ns()) > 0;) {
		node_ring_doorbell(p, node);
		(void)barn_wait_rebuild(p, c, node, left < REBUILD_POLL_NS ? left : REBUILD_POLL_NS);
		if (barn_put_full_try(p, c, node, id, me_of(t), intent_of(t)) == 0)
			return ring_count(&full);
	}
	return barn_put_full(p, c, node, id, me_of(t), intent_of(t));
}

void exchange_put(struct tcache *t, struct shm_sheaf *s)
{
	struct shm_pool *p = tshm(t);
	uint32_t id = sheaf_index(t, s);
	uint32_t node = s->node;        /* once put, the sheaf is another's */

	if (sheaf_size(s) == 0) {
		barn_put_empty(p, t->f->cache_id, node, id, me_of(t), intent_of(t));
		return;
	}
	stat_inc(t, ST_BARN_PUT);
	if (put_full(t, node, id) > at_load_relaxed(&t->cache->sc->barn_limit) &&
	    barn_put_over(t)) {
		stat_inc(t, ST_BARN_PUT_FAIL);
		node_ring_doorbell(p, node);           /* ask for a flush */
	}
}

/* Sheaves of each kind the thread may keep beyond main and spare: at most
 * the cache's stash_sheaves (SHEAF_STASH_LIMIT), and no more than its
 * stash_bytes of objects in full ones (tunables, shm/tune.c). */
static uint32_t stash_room(const struct tcache *t)
{
	const struct shm_cache *sc = t->cache->sc;
	uint64_t per = (uint64_t)cache_capacity(t) * sc->obj_size;
	uint64_t n = per ? at_load_relaxed(&sc->stash_bytes) / per : 0;
	uint32_t max = at_load_relaxed(&sc->stash_sheaves);

	if (max > SHEAF_STASH_LIMIT)
		max = SHEAF_STASH_LIMIT;
	return n < max ? (uint32_t)n : max;
}

/*
 * The stash adapts to the thread's demand: it keeps stash_target sheaves
 * of each kind, STASH_TARGET_MIN at first and again once the trimmer found
 * the thread idle (trim.c, which also takes back what it held), growing by
 * half, plus one, each time a sheaf goes to the barn for want of room (a
 * burst reaches stash_room within about ten such puts).
 */
void exchange_retire_main(struct tcache *t, struct shm_sheaf *m, struct shm_sheaf **stash,
			  uint32_t *n)
{
	uint32_t room;

	if (m == &sheaf_dummy)
		return;
	if (t->spare == NULL) {
		t->spare = m;
		return;
	}
	room = stash_room(t);
	if (*n < room && *n < t->stash_target) {
		stash[(*n)++] = m;
		trim_kick();
		return;
	}
	if (t->stash_target < room) {
		uint32_t grown = t->stash_target + t->stash_target / 2 + 1;

		t->stash_target = grown < room ? grown : room;
	}
	exchange_put(t, m);
}

void exchange_give_back_full(struct tcache *t)
{
	while (t->nfull > 0)
		exchange_put(t, t->stash_full[--t->nfull]);
	if (t->spare != NULL && sheaf_size(t->spare) > 0) {
		exchange_put(t, t->spare);
		t->spare = NULL;
	}
}
