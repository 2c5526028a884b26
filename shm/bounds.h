/*
 * bounds.h - the trust boundary: bounded reads of the client-writable part
 * of the region ([off_rw, size), layout.h: owners[], sheaves, rings, barns,
 * node doorbells, lanes).  Every such value goes through one of the ut_*
 * helpers below, which bound it by a value the reader owns (its struct
 * shm_pool, filled when the pool was created or mapped, or the
 * engine-owned part [0, off_rw)) before it is used to index, loop or
 * divide.
 *
 * Who may call: any process of the pool (the engine for everything it
 * reads there; libsheaf for what it takes from a barn, client/vet.c).
 * No locks; the counters are relaxed atomics.
 *
 * A value out of bounds is refused (the helpers return a harmless value:
 * no sheaf, a clamped size, a ring that gives up), and counted in the
 * process's refusal counters (untrusted_count, by kind).  The engine never
 * prints: sheafd's periodic code logs when a counter moves
 * (daemon/refusal_log.c), rate-limited.  What a refusal costs is the
 * offending cache's consistency at most (a sheaf or an object lost, a
 * count off), never the engine.  The validation of a whole region that a
 * restarted sheafd adopts is the engine's (engine/adopt_vet.h).
 */
#ifndef SHEAF_SHM_BOUNDS_H
#define SHEAF_SHM_BOUNDS_H

#include <stdint.h>
#include "pool.h"

/* Kinds of refusal (names: untrusted_names[]). */
enum untrusted_kind {
	UT_SHEAF_ID,     /* a sheaf id (slot, intent, lane) out of the table */
	UT_SHEAF_SIZE,   /* a sheaf size or capacity over SHEAF_CAP_MAX */
	UT_SHEAF_HDR,    /* a sheaf's cache or node out of range */
	UT_OBJECT,       /* an object offset not of the sheaf's cache */
	UT_RING,         /* a ring operation gave up (ring_steps_max) */
	UT_LANE,         /* a lane read that gave up on its seq, or a bad field */
	UT_BARN,         /* a barn counter (waiters) out of range */
	UT_OWNER,        /* an owner-table entry that names nobody (adoption) */
	UT_CACHE,        /* a cache descriptor invalid: cache quarantined */
	UT_REBUILT,      /* a spoiled ring rebuilt from the owner table
			    (engine/ring_rebuild.c) */
	UT_NR
};

extern const char *const untrusted_names[UT_NR];

/* This process's refusals so far, by kind (never reset). */
extern _Atomic uint64_t untrusted_count[UT_NR];

static inline void untrusted_note(enum untrusted_kind k, uint64_t n)
{
	at_fetch_add_relaxed(&untrusted_count[k], n);
}

/* Sum over every kind. */
uint64_t untrusted_total(void);

/* Load a client-writable word exactly once (a plain load could be made
 * twice by the compiler: one value checked, another used). */
static inline uint32_t ut_load32(const void *p)
{
	return at_plain_load_relaxed((const uint32_t *)p);
}
static inline uint64_t ut_load64(const void *p)
{
	return at_plain_load_relaxed((const uint64_t *)p);
}

/* @a + @b (and @a - @b) wrapping: sums of counters a client writes (lane
 * stat, base) may be anything; signed overflow would be undefined. */
static inline int64_t ut_add64(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a + (uint64_t)b);
}
static inline int64_t ut_sub64(int64_t a, int64_t b)
{
	return (int64_t)((uint64_t)a - (uint64_t)b);
}

/* ---- rings: geometry from the pool, never from the ring's header ------ */

/* Ring @id of the pool (@id < ring_total(p->nodes): the caller's own). */
static inline struct ring_ref pool_ring_ref(const struct shm_pool *p, uint32_t id)
{
	struct ring_ref rr = {
		pool_ring(p, id), p->sheaf_count - 1, id, p->sheaf_count
	};
	return rr;
}
static inline struct ring_ref pool_full_ref(const struct shm_pool *p,
					    uint32_t cache, uint32_t node)
{
	return pool_ring_ref(p, ring_full_id(cache, node, p->nodes));
}
static inline struct ring_ref pool_empty_ref(const struct shm_pool *p,
					     uint32_t cache, uint32_t node)
{
	return pool_ring_ref(p, ring_empty_id(cache, node, p->nodes));
}
static inline struct ring_ref pool_depot_ref(const struct shm_pool *p)
{
	return pool_ring_ref(p, RING_DEPOT);
}

/* ring_reclaim's ref_of for a pool (@ctx): a ring id read from an intent,
 * refused (-1, counted) when the pool has no such ring. */
int pool_ref_of(void *ctx, uint32_t id, struct ring_ref *out);

/* Items in ring @rr, bounded (ring_count); a name for the engine's reads. */
static inline uint32_t ut_ring_count(const struct ring_ref *rr)
{
	return ring_count(rr);
}

/* ---- sheaves ------------------------------------------------------------ */

/* A sheaf id read from client-writable memory: itself when below the
 * pool's table, else SHEAF_ID_NONE (counted). */
static inline uint32_t ut_sheaf_id(const struct shm_pool *p, uint32_t id)
{
	if (id < p->sheaf_count)
		return id;
	untrusted_note(UT_SHEAF_ID, 1);
	return SHEAF_ID_NONE;
}

/* Objects sheaf @sh holds, read once and bounded by SHEAF_CAP_MAX (an
 * objs[] index); a larger size is counted and clamped. */
static inline uint32_t ut_sheaf_size(const struct shm_sheaf *sh)
{
	uint32_t n = (uint32_t)(ut_load64(&sh->word) & SHEAF_WORD_SIZE);

	if (n <= SHEAF_CAP_MAX)
		return n;
	untrusted_note(UT_SHEAF_SIZE, 1);
	return SHEAF_CAP_MAX;
}

/* Sheaf @sh's cache, or p->max_caches (counted) when out of range. */
static inline uint32_t ut_sheaf_cache(const struct shm_pool *p, const struct shm_sheaf *sh)
{
	uint32_t c = at_plain_load_relaxed(&sh->cache);

	if (c < p->max_caches)
		return c;
	untrusted_note(UT_SHEAF_HDR, 1);
	return p->max_caches;
}

/* Sheaf @sh's node, or 0 (counted) when the pool has no such node. */
static inline uint32_t ut_sheaf_node(const struct shm_pool *p, const struct shm_sheaf *sh)
{
	uint32_t n = at_plain_load_relaxed(&sh->node);

	if (n < p->nodes)
		return n;
	untrusted_note(UT_SHEAF_HDR, 1);
	return 0;
}

/*
 * Copy the objects of @sh (at most SHEAF_CAP_MAX, ut_sheaf_size) into the
 * caller's private @out, each read once: what is validated next is what
 * gets used, whatever a client writes meanwhile.  Returns the count.
 */
static inline uint32_t ut_sheaf_objs(const struct shm_sheaf *sh, uint64_t *out)
{
	uint32_t n = ut_sheaf_size(sh);

	for (uint32_t i = 0; i < n; i++)
		out[i] = ut_load64(&sh->objs[i]);
	return n;
}

/* ---- barns and lanes ---------------------------------------------------- */

/* A barn's waiters (clients write it): at most one per lane. */
static inline uint32_t ut_barn_waiters(const struct shm_barn *b)
{
	uint32_t w = at_load_acquire((_Atomic uint32_t *)&b->waiters);

	if (w <= SHEAF_MAX_LANES)
		return w;
	untrusted_note(UT_BARN, 1);
	return SHEAF_MAX_LANES;
}

/* Whether the last client to wait on barn @b ran on CPU @cpu (clients
 * write the hint: any value only makes the worker spin, or not, after
 * serving it; engine/worker.c). */
static inline int ut_barn_waiter_on(const struct shm_barn *b, int cpu)
{
	return cpu >= 0 &&
	       at_load_relaxed((_Atomic uint32_t *)&b->waiter_cpu) == (uint32_t)cpu + 1;
}

/* Whether lane @l is granted to a live client (META): only then can a
 * thread be inside an operation through it.  A lane granted to nobody
 * keeps whatever busy and in_cache were left there. */
static inline int ut_lane_live(const struct shm_pool *p, const struct shm_lane *l)
{
	uint32_t c = pool_lane_holder(p, l);

	return c < p->max_clients && at_load_acquire(&p->clients[c].state) == CLIENT_LIVE;
}

#endif
