/*
 * deferred.c - deferred frees and read sections across processes (sheaf.h:
 * sheaf_free_deferred, sheaf_read_lock/unlock, sheaf_quiescent,
 * sheaf_synchronize, sheaf_barrier): the client side of the kernel's
 * kfree_rcu sheaf.  The engine side (grace periods) is shm/engine/grace.c; the
 * algorithm and its crash argument are in docs/design.md, "Deferred frees".
 *
 * A reader's state is one word in its thread's lane (rcu_ctr, SHARED): 0
 * outside a read section, gp_seq << 1 | 1 inside (the epoch it began or
 * last was quiescent in).  Only the outermost lock and unlock write it
 * (the depth is thread-local).  A writer collects deferred objects in a
 * per-thread, per-cache deferred sheaf; a full one goes whole to the rcu
 * ring, stamped with gp_seq read after a fence that orders the writer's
 * unlinks before it.
 */
#include <errno.h>
#include <string.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "shm/barn.h"
#include "shm/futex.h"
#include "shm/grace_bell.h"
#include "shm/slab_geom.h"
#include "shm/bounds.h"
#include "client/internal.h"

enum { RCU_NOFENCE = 1, RCU_FENCE = 2 };

/*
 * Whether this process's readers may skip the fence after their first
 * store (the engine then makes every running thread of theirs execute one,
 * membarrier GLOBAL_EXPEDITED, before it scans the lanes), decided once per
 * pool: the engine must say it does, and this process must be registered
 * (registration is per process: a fork() child connects, hence decides,
 * anew).  Registration comes before the first section without a fence.
 */
static int rcu_mode(sheaf_pool_t *pool)
{
	int m = at_load_relaxed(&pool->rcu_mode);

	if (likely(m != 0))
		return m;
	m = RCU_FENCE;
	if ((at_load_acquire(&pool->shm.hdr->gp_flags) & GP_F_MEMBARRIER) &&
	    syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0)
		m = RCU_NOFENCE;
	at_store_relaxed(&pool->rcu_mode, m);
	return m;
}

/* The calling thread's lane state in @pool when it has one (the fast
 * case), else NULL. */
static inline struct tpool *tp_now(const sheaf_pool_t *pool)
{
	struct tstate *ts = tls_state;
	struct tpool *tp;

	if (unlikely(ts == NULL))
		return NULL;
	tp = &ts->tp[pool->slot];
	return likely(tp->lane != NULL && tp->gen == pool->gen) ? tp : NULL;
}

/* ---- readers ------------------------------------------------------------ */

/* sheaf.h's inline sections read this (sheaf__rcu: who may write it). */
__thread struct sheaf__rcu sheaf__rcu_tls __attribute__((tls_model("initial-exec")));

void rcu_tls_forget(void)
{
	memset(&sheaf__rcu_tls, 0, sizeof(sheaf__rcu_tls));
}

/* Lead the calling thread's inline sections of @pool to @tp. */
static void rcu_tls_set(sheaf_pool_t *pool, struct tpool *tp)
{
	/* Named, not through a pointer: see sheaf.h. */
	sheaf__rcu_tls.genp = &slots_live_gen[pool->slot];
	sheaf__rcu_tls.gen = pool->gen;
	sheaf__rcu_tls.fence = rcu_mode(pool) == RCU_FENCE;
	sheaf__rcu_tls.nest = &tp->rcu_nest;
	sheaf__rcu_tls.ctr = (uint64_t *)(void *)&tp->lane->rcu_ctr;
	sheaf__rcu_tls.gp_seq = (const uint64_t *)(const void *)&pool->shm.hdr->gp_seq;
	sheaf__rcu_tls.pool = pool;
}

/* sheaf_read_lock when the thread's state is not the inline path's. */
int sheaf__read_lock_slow(sheaf_pool_t *pool)
{
	struct tpool *tp = tp_now(pool);
	uint64_t g;

	if (unlikely(tp == NULL) && (tp = thread_tpool(pool)) == NULL)
		return -errno;
	rcu_tls_set(pool, tp);
	if (tp->rcu_nest++ != 0)
		return 0;
	/* The epoch, then the store; then (no membarrier) a full fence, so
	 * that the store is seen before any pointer this section loads
	 * (docs/design.md, "Deferred frees": the scan's two cases). */
	g = at_load_acquire(&pool->shm.hdr->gp_seq);
	at_store_relaxed(&tp->lane->rcu_ctr, g << 1 | 1);
	if (rcu_mode(pool) == RCU_FENCE)
		at_fence_seqcst();
	else
		at_signal_fence_seqcst();
	return 0;
}

int sheaf__read_unlock_slow(sheaf_pool_t *pool)
{
	struct tpool *tp = tp_now(pool);

	if (tp == NULL || tp->rcu_nest == 0)
		return -EINVAL;
	/* Release: every load of the section comes before the engine sees
	 * the lane quiescent (its acquire in the scan). */
	if (--tp->rcu_nest == 0)
		at_store_release(&tp->lane->rcu_ctr, 0);
	return 0;
}

/* The external definitions of sheaf.h's inline sections. */
extern inline int sheaf_read_lock(sheaf_pool_t *pool);
extern inline int sheaf_read_unlock(sheaf_pool_t *pool);

int sheaf_quiescent(sheaf_pool_t *pool)
{
	struct tpool *tp = tp_now(pool);
	uint64_t g;

	if (tp == NULL || tp->rcu_nest == 0)
		return 0;                  /* no section: quiescent already */
	/* A newer epoch with no passage through 0: a delayed store only
	 * delays the grace period, so no fence (the QSBR case). */
	g = at_load_acquire(&pool->shm.hdr->gp_seq);
	at_store_release(&tp->lane->rcu_ctr, g << 1 | 1);
	return 0;
}

/* ---- waiting for grace periods ------------------------------------------ */

/* gp_seq + 1 as of now, after a fence that orders the caller's earlier
 * stores (unlinks, hand-overs) before the read. */
static uint64_t gp_target(const sheaf_pool_t *pool)
{
	at_fence_seqcst();
	return at_load_seqcst(&pool->shm.hdr->gp_seq) + 1;
}

/*
 * Ask for grace period @target: make shm_rcu.req read @target, so that it
 * changed since the engine last read it (a change is the request, its
 * value is not trusted: grace.c), and ring.  Again at every wake-up of
 * the wait, so a word a peer rewrote is set once more; a word a scribbler
 * keeps at the engine's last value costs the engine's beat
 * (GRACE_BEAT_NS), never the timeout.
 */
static void gp_ask(struct shm_pool *p, uint64_t target)
{
	uint64_t req = at_load_relaxed(&p->rcu->req);

	if (req == target)
		return;
	while (req != target && !at_cas_acqrel(&p->rcu->req, &req, target))
		;
	grace_bell_ring(p);
}

/*
 * Ask for grace period @target and wait until it completed (and, with
 * @released, until every deferred sheaf stamped below it was released),
 * at most @timeout_ms.  0 or -ETIMEDOUT.
 */
static int gp_wait(sheaf_pool_t *pool, uint64_t target, int released, unsigned timeout_ms)
{
	struct shm_pool *p = &pool->shm;
	struct shm_header *h = p->hdr;
	int64_t end = clock_ns() + (int64_t)timeout_ms * 1000000;

	for (;;) {
		uint32_t w = at_load_acquire(&h->gp_wake);
		int64_t left;

		/* Truth from META (engine-written, read-only here): a
		 * scribbled SHARED word can neither end the wait early nor
		 * stop it from ending. */
		if (at_load_acquire(&h->gp_done) >= target &&
		    (!released || at_load_acquire(&h->gp_released) >= target))
			return 0;
		left = end - clock_ns();
		if (left <= 0)
			return -ETIMEDOUT;
		gp_ask(p, target);
		/* META is mapped read-only here: FUTEX_WAIT only reads.
		 * Bounded slices: a wake-up lost to a restarting sheafd costs
		 * 10 ms, never the timeout. */
		futex_wait(&h->gp_wake, w, left < 10000000 ? left : 10000000);
	}
}

int sheaf_synchronize(sheaf_pool_t *pool, unsigned timeout_ms)
{
	struct tpool *tp = tp_now(pool);

	if (pool->forked)
		return -ECHILD;
	if (tp != NULL && tp->rcu_nest != 0)
		return -EDEADLK;          /* it would wait for itself */
	return gp_wait(pool, gp_target(pool), 0, timeout_ms);
}

/* ---- deferred frees ----------------------------------------------------- */

/* The capacity of a deferred sheaf: the cache's, or its default when
 * sheaves are disabled for threads. */
static uint32_t deferred_cap(const struct tcache *t)
{
	uint32_t cap = at_load_relaxed(&t->cache->sc->sheaf_capacity);

	return cap ? cap : cache_default_capacity(t->cache->sc->obj_size);
}

/*
 * Hand the thread's deferred sheaf to the rcu ring, stamped, and count its
 * objects in free_rcu_sheaf.  The count is staged in the lane first (the
 * new value and the sheaf; one release store arms it), so that a thread
 * killed at any instruction counts each object exactly once: the
 * dead-client repair completes an armed count, and counts a deferred
 * sheaf it takes back only when no armed count covers it
 * (docs/design.md, "Deferred frees").
 */
static void handover(struct tcache *t)
{
	struct shm_pool *p = &t->cache->pool->shm;
	struct shm_sheaf *d = t->deferred;
	struct shm_lane *ln = t->tp->lane;
	struct ring_ref rr = pool_ring_ref(p, ring_rcu_id(p->nodes));
	uint32_t s = sheaf_index(t, d);
	uint64_t v = at_load_relaxed(&t->stat[ST_FREE_RCU_SHEAF]) + sheaf_size(d);

	t->deferred = NULL;
	at_store_relaxed(&ln->rcu_fold_val, v);
	at_store_relaxed(&ln->rcu_fold_sheaf, s);
	/* Release: pairs with the repair's acquire load. */
	at_store_release(&ln->rcu_fold_cache, t->f->cache_id + 1u);
	/* Every unlink before this call comes before the stamp's read
	 * (seq_cst fence): grace period stamp + 1 starts after them. */
	d->gp = gp_target(t->cache->pool) - 1;
	if (ring_put(&rr, p->owners, s, t->cache->pool->client, &ln->intent) != 0) {
		/* Refused: the ring holds every sheaf, so it is spoiled; the
		 * sheaf stays the thread's until the engine rebuilt it. */
		at_store_release(&ln->rcu_fold_cache, 0);
		t->deferred = d;
		return;
	}
	at_store_relaxed(&t->stat[ST_FREE_RCU_SHEAF], v);
	at_store_release(&ln->rcu_fold_cache, 0);
	grace_bell_ring(p);
}

void deferred_flush(struct tcache *t)
{
	struct shm_sheaf *d = t->deferred;

	if (d == NULL)
		return;
	if (sheaf_size(d) > 0) {
		handover(t);
	} else {
		t->deferred = NULL;
		d->flags = 0;
		barn_put_empty(&t->cache->pool->shm, t->f->cache_id, d->node,
			       sheaf_index(t, d), t->cache->pool->client, &t->tp->lane->intent);
	}
}

/* A new deferred sheaf, from the barn's empty ring or the depot at once;
 * NULL when there is none. */
static struct shm_sheaf *deferred_new(struct tcache *t)
{
	struct shm_pool *p = &t->cache->pool->shm;
	int dep;
	uint32_t s = barn_get_empty(p, t->f->cache_id, t->node, deferred_cap(t),
				    t->cache->pool->client, &t->tp->lane->intent, &dep);
	struct shm_sheaf *d;

	if (s == SHEAF_ID_NONE)
		return NULL;
	if (dep)
		at_counter_add(&t->stat[ST_SHEAF_ALLOC], 1);
	d = pool_sheaf(p, s);
	d->flags = SHEAF_F_DEFERRED;
	d->gp = 0;
	return d;
}

/* Under tcache_enter: validate, make room, push.  1: no sheaf to be had
 * (the caller falls back), else 0 or -errno. */
static int deferred_slow_in(struct tcache *t, void *obj)
{
	struct shm_pool *p = &t->cache->pool->shm;
	uint64_t off = (uint64_t)((char *)obj - t->f->base);
	struct shm_sheaf *d;
	uint32_t node;
	int rc;

	if (!SHEAF__FAST_VALID(t->f, obj) &&
	    (rc = slab_validate(p, t->f->cache_id, off)) != 0) {
		at_counter_add(&t->stat[ST_FREE_INVALID], 1);
		return rc;
	}
	node = pool_node_of_frame(p, pool_frame_of(p, off));
	if (t->deferred != NULL && sheaf_size(t->deferred) >= t->deferred->capacity) {
		handover(t);
		if (t->deferred != NULL)
			return 1;        /* refused: the fallback below */
	}
	if (t->deferred == NULL && (t->deferred = deferred_new(t)) == NULL)
		return 1;
	d = t->deferred;
	if (node != d->node)
		d->flags |= SHEAF_F_MIXED;    /* released to the slabs, not a barn */
	sheaf_push(d, off);              /* counted at the hand-over */
	return 0;
}

static int deferred_slow(sheaf_cache_t *c, struct tcache *t, void *obj)
{
	int rc = tcache_enter(t);

	if (rc != 0)
		return rc;
	rc = deferred_slow_in(t, obj);
	tcache_leave(t);
	if (rc != 1)
		return rc;
	/* No empty sheaf anywhere (free_rcu_sheaf_fail): wait for a grace
	 * period here, then free at once; never inside a read section. */
	at_counter_add(&t->stat[ST_FREE_RCU_SHEAF_FAIL], 1);
	if (t->tp->rcu_nest != 0 ||
	    sheaf_synchronize(c->pool, (unsigned)(c->pool->wait_ns / 1000000)) != 0)
		return -EAGAIN;
	return sheaf_free(c, obj);
}

/*
 * A debug cache's deferred free: the object is pushed on the deferred
 * sheaf, then its in-use bit
 * cleared, in debug_track's order (a death between the two leaves it in
 * the sheaf with its bit set: still allocatable); a bit already clear is a
 * double free, refused with the object popped back off.
 */
static int deferred_debug(sheaf_cache_t *c, struct tcache *t, void *obj)
{
	uint64_t off = (uint64_t)((char *)obj - t->f->base);
	int rc = tcache_enter(t);

	if (rc != 0)
		return rc;
	rc = deferred_slow_in(t, obj);
	if (rc == 0)
		rc = debug_track_commit_free(t, t->deferred, off);
	tcache_leave(t);
	if (rc != 1)
		return rc;
	at_counter_add(&t->stat[ST_FREE_RCU_SHEAF_FAIL], 1);
	if (t->tp->rcu_nest != 0 ||
	    sheaf_synchronize(c->pool, (unsigned)(c->pool->wait_ns / 1000000)) != 0)
		return -EAGAIN;
	return sheaf_free(c, obj);
}

int sheaf_free_deferred(sheaf_cache_t *c, void *obj)
{
	struct tcache *t;
	struct shm_sheaf *d;
	int rc, saved = errno;

	if (obj == NULL)
		return 0;
	if (c->pool == NULL)
		return -EINVAL;
	t = tcache_get(c);
	if (unlikely(t == NULL)) {
		rc = -errno;
		errno = saved;
		return rc;
	}
	if (unlikely(t->f == &t->own)) {    /* a debug or an owned cache */
		if (c->sc->flags & SHEAF_CACHE_F_OWNED)
			return -EOPNOTSUPP;
		rc = deferred_debug(c, t, obj);
		errno = saved;
		return rc;
	}
	d = t->deferred;
	/* The fast case: room, and an object of the home node that passes
	 * the free fast path's test (a plain push, as sheaf_free). */
	if (likely(d != NULL && sheaf_size(d) < d->capacity && SHEAF__FAST_VALID(t->f, obj))) {
		sheaf_push(d, (uint64_t)((char *)obj - t->f->base));
		return 0;
	}
	rc = deferred_slow(c, t, obj);
	errno = saved;
	return rc;
}

int sheaf_barrier(sheaf_pool_t *pool, unsigned timeout_ms)
{
	struct tstate *ts = tls_state;
	struct tpool *tp = tp_now(pool);

	if (pool->forked)
		return -ECHILD;
	if (tp != NULL && tp->rcu_nest != 0)
		return -EDEADLK;
	int64_t end = clock_ns() + (int64_t)timeout_ms * 1000000;

	for (uint32_t i = 0; ts != NULL && i < SHEAF_HANDLES_MAX; i++) {
		struct tcache *t = ts->tc[i];

		if (t == NULL || t->cache->pool != pool || t->deferred == NULL ||
		    t->gen != pool->gen || tcache_enter(t) != 0)
			continue;
		deferred_flush(t);
		/* The rcu ring refused it (spoiled): wait for the engine's
		 * rebuild (it publishes every barn with a waiter), try again. */
		while (t->deferred != NULL && clock_ns() < end) {
			int64_t left = end - clock_ns();

			barn_wait_rebuild(&pool->shm, t->f->cache_id, t->node,
					  left < 50000000 ? left : 50000000);
			deferred_flush(t);
		}
		tcache_leave(t);
		if (t->deferred != NULL)
			return -ETIMEDOUT;
	}
	{
		int64_t left = end - clock_ns();

		return gp_wait(pool, gp_target(pool), 1,
			       left > 0 ? (unsigned)((left + 999999) / 1000000) : 0);
	}
}
