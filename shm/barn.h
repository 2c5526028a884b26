/*
 * barn.h - a cache's per-node barn: a ring of full sheaves, a ring of empty
 * sheaves, and the doorbell/supply handshake with the node's engine worker.
 * The depot (ring 0) holds sheaves not bound to any cache.
 *
 * Who may call: any process of the pool: client threads (libsheaf's slow
 * paths) and the engine; barn_publish and depot_put the engine only.  @me
 * is the caller's owner id (client id, or OWNER_ENGINE), @in its lane's
 * intent record.
 *
 * Handshake (docs/design.md, "Barn exchanges and waits"):
 *   client: doorbell++ (seq_cst); if worker sleeping: futex_wake(doorbell).
 *   worker: sleeping = 1 (seq_cst); if doorbell unchanged: futex_wait.
 *   Either the client sees sleeping == 1 or the worker sees the new doorbell.
 *   Supply: a waiting client reads supply, registers in waiters, rings, and
 *   futex_waits on supply; the worker bumps supply after each pass over a
 *   barn with waiters and wakes them, so a waiter always sees a verdict
 *   (stocked, or starved) made after its ring.
 */
#ifndef SHEAF_SHM_BARN_H
#define SHEAF_SHM_BARN_H

#include <stdint.h>
#include "pool.h"

/*
 * Full sheaves the barn of @sc may hold before the engine flushes the
 * surplus to slabs: barn_keep while the pool is far from its memory cap
 * (frames used at most 3/4 of mem_cap, and at least a quarter of the pool's
 * sheaves unused in the depot), else barn_limit.  Flushing a full sheaf and
 * refilling one costs a slab round trip through the engine (bitmap writes,
 * then a bitmap scan, and a wake-up between); while memory is plentiful,
 * a large working set's frees are kept in sheaves for its next allocs.
 * A large cache (objects above 64 KiB) with barn_keep 0 keeps, while the
 * pool is far from its cap, as many full sheaves as the unused part of the
 * pool's large_retain budget covers (at most SHEAF_LARGE_BARN_KEEP_MAX):
 * what its flush would leave in retained slabs anyway, without the round
 * trip through the engine; under pressure, barn_limit.
 * Read by the engine (what it flushes) and by clients (when to ring for a
 * flush); the depot's count is a hint, so the two may differ for a moment.
 */
uint32_t barn_flush_limit(const struct shm_pool *p, const struct shm_cache *sc, uint32_t node);

/* The pool, or node @node, is near its memory cap (3/4 of the pool's cap,
 * or of the node's frames), or the pool is short of unused sheaves. */
int pool_under_pressure(const struct shm_pool *p, uint32_t node);

/* A full (non-empty) sheaf of @cache from @node's barn, or SHEAF_ID_NONE. */
uint32_t barn_get_full(struct shm_pool *p, uint32_t cache, uint32_t node,
		       uint32_t me, struct ring_intent *in);

/* Put sheaf @s (holding objects) into the barn's full ring: 0, or -ENOBUFS
 * when the ring refused it (spoiled: rings hold every sheaf of the pool);
 * the sheaf and its objects are then still @me's. */
int barn_put_full_try(struct shm_pool *p, uint32_t cache, uint32_t node,
		      uint32_t s, uint32_t me, struct ring_intent *in);

/* Put sheaf @s (holding objects) into the barn; returns the number of full
 * sheaves now in the barn (for the caller to compare with the limit).  A
 * ring that refuses it costs the sheaf's objects (the sheaf goes to the
 * depot empty): callers that can wait for the engine's rebuild try
 * barn_put_full_try first. */
uint32_t barn_put_full(struct shm_pool *p, uint32_t cache, uint32_t node,
		       uint32_t s, uint32_t me, struct ring_intent *in);

/*
 * An empty sheaf for @cache on @node, from the barn's empty ring or else the
 * depot (*from_depot set), bound to the cache with capacity @cap.  Returns
 * SHEAF_ID_NONE when there is none anywhere.
 */
uint32_t barn_get_empty(struct shm_pool *p, uint32_t cache, uint32_t node,
			uint32_t cap, uint32_t me, struct ring_intent *in,
			int *from_depot);

/* Put an empty sheaf back into the barn's empty ring. */
void barn_put_empty(struct shm_pool *p, uint32_t cache, uint32_t node,
		    uint32_t s, uint32_t me, struct ring_intent *in);

/* Put an empty sheaf back into the depot. */
void depot_put(struct shm_pool *p, uint32_t s, uint32_t me, struct ring_intent *in);

/* Ring @node's doorbell (wakes its worker only if it sleeps): 1 when it
 * woke the worker, else 0. */
int node_ring_doorbell(struct shm_pool *p, uint32_t node);

/*
 * Wait for the engine's next verdict on a barn: returns 0 after a pass of
 * the worker that followed this call (check the rings again, then
 * barn->starved), or -ETIMEDOUT after @timeout_ns.
 */
int barn_wait_supply(struct shm_pool *p, uint32_t cache, uint32_t node,
		     int64_t timeout_ns);

/*
 * A barn's verdict (struct shm_barn.starved), set by barn_publish:
 *   0                   stocked, or nothing to say: look again;
 *   BARN_STARVED_MEM    nothing to refill with: the memory cap, no frame
 *                       (a node at its cap under bind): ENOMEM;
 *   BARN_STARVED_SHEAF  no empty sheaf reachable for a refill, or the
 *                       barn's ring refused it: every sheaf of the pool is
 *                       held, or a ring is spoiled and is being verified
 *                       and rebuilt (engine/ring_rebuild.c).  A client waits
 *                       (barn_wait_rebuild) until its deadline: EAGAIN.
 * Any other value (the word is client-writable) reads as
 * BARN_STARVED_SHEAF: waited out, never ENOMEM.
 */
#define BARN_STARVED_MEM   1
#define BARN_STARVED_SHEAF 2

/* Engine side: announce verdict @starved (above) on a barn to its waiters. */
void barn_publish(struct shm_pool *p, uint32_t cache, uint32_t node, int starved);

/*
 * Wait, at most @timeout_ns, for the engine's next publish on a barn
 * without ringing the doorbell (after a BARN_STARVED_SHEAF verdict: the
 * engine publishes each barn with a waiter when it rebuilt a ring, and
 * ringing would only make its worker pass for nothing meanwhile).  Returns
 * 0 when published, -ETIMEDOUT.
 */
int barn_wait_rebuild(struct shm_pool *p, uint32_t cache, uint32_t node,
		      int64_t timeout_ns);

#endif
