/*
 * worker.c - the node workers (engine.h: engine_start, engine_stop,
 * engine_node_pass): one thread per node keeps every live cache's barn on
 * its node between its watermarks, and sleeps on the node's doorbell when a
 * pass found nothing to do.
 *
 * Stocking rule per barn (cache c, node n), one pass (with the watermarks
 * clamped to low <= high <= limit, and at most STOCK_PASS_MAX sheaves each
 * way, so that a refill never outgrows what the flush keeps):
 *   full < barn_low, or a client waits on an empty barn: refill sheaves from
 *     n's slabs up to barn_high; short of objects on n, take from other nodes
 *     by try-lock only (a busy remote node is skipped, never waited for).
 *   full > barn_limit (barn_keep while the pool is far from its memory cap:
 *     barn.h, barn_flush_limit): flush the surplus full sheaves to slabs.
 *   A client waits while full sheaves are there, and no empty sheaf is left
 *     in the barn or the depot: a free needs one; flush one per waiter.
 *   Nothing at all to refill with: the barn is starved; waiters get ENOMEM
 *     (BARN_STARVED_MEM).  No empty sheaf to be had, or a refill the full
 *     ring refused: BARN_STARVED_SHEAF, a symptom of a spoiled ring
 *     (engine/ring_rebuild.c): waiters wait for the rebuild, then EAGAIN.
 * Every pass first lets ring_rebuild_verify look at the rings when a look
 * is due; node 0's worker sleeps no longer than until the next one.
 *
 * Who may call: the hosting process.  A pass takes no engine lock: a worker
 * uses only its node's lane, and the slab layer locks each cache-node.
 * engine_start/engine_stop are called with no worker running / from the
 * control side (engine_cache_destroy stops the workers around its work).
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "shm/barn.h"
#include "shm/futex.h"
#include "shm/engine/clients.h"
#include "shm/engine/grace.h"
#include "shm/engine/internal.h"
#include "shm/numa.h"
#include "shm/engine/slab.h"

struct worker_arg {
	struct engine *e;
	uint32_t node;
};

/* Take up to @cap objects from slabs into private @objs: local node
 * first, then the others nearest first (pool.h: refill_order, by the
 * kernel's distances) by trylock only: a remote node whose lock is busy is
 * skipped, never waited for.  A bound pool's node takes from its own
 * slabs only (pool_bound). */
static uint32_t refill_one(struct shm_pool *p, uint32_t c, uint32_t n,
			   uint64_t *objs, uint32_t cap)
{
	uint32_t got = slab_alloc_objs(p, c, n, objs, cap, 0);

	for (uint32_t k = 0; k + 1 < p->nodes && got < cap && !pool_bound(p); k++) {
		uint32_t m = p->refill_order[n][k];
		uint32_t more = slab_alloc_objs(p, c, m, objs + got, cap - got, SLAB_TRYLOCK);
		if (more) {
			got += more;
			engine_stat_add(p, c, n, ST_REFILL_REMOTE, 1);
		}
	}
	return got;
}

/*
 * Publish barn (@c, @n) for its waiters.  If the last one to wait did on
 * this worker's CPU (a hint clients write: only compared), it cannot run
 * while the worker does: yield to it now, before stocking the rest, and
 * note it, so that the worker does not spin after the pass either
 * (worker_main).
 */
static void serve_waiters(struct engine *e, uint32_t c, uint32_t n)
{
	struct shm_pool *p = e->pool;

	barn_publish(p, c, n, 0);
	e->served_waiter[n] = 1;
	if (ut_barn_waiter_on(pool_barn(p, c, n), sched_getcpu())) {
		e->served_here[n] = 1;
		sched_yield();
	}
}

/*
 * Refill up to @want empty sheaves into barn (@c, @n) and put them in its
 * full ring.  Each sheaf put while a client waits on the barn wakes it
 * (@waiters at the start of the pass, then the barn's count read again
 * after each sheaf: a client that came to wait during the pass is not left
 * waiting for its end; a count that stays up, a client's or a scribbled
 * one, costs a wake-up per sheaf, bounded by the pass).  Returns the
 * sheaves refilled; *@starved is set when none could be.
 *
 * The objects are taken into private memory first: if the full ring
 * refuses the sheaf (scribbled: a ring that can hold every sheaf of the
 * pool is never full), they go back to the slabs from that copy, and the
 * barn gets the verdict BARN_STARVED_SHEAF (the worker counts no work: no
 * endless refill of a ring that takes nothing; the rings' next look comes
 * soon).  *@starved: 0, or the verdict (barn.h) when none was refilled.
 */
static uint32_t stock_refill(struct engine *e, uint32_t c, uint32_t n,
			     uint32_t want, uint32_t cap, uint32_t waiters,
			     struct ring_intent *in, int *starved)
{
	struct shm_pool *p = e->pool;
	struct ring_ref full = pool_full_ref(p, c, n);
	uint64_t objs[SHEAF_CAP_MAX];
	uint32_t work = 0;

	SHEAF_ASSERT(cap <= SHEAF_CAP_MAX);
	for (uint32_t k = 0; k < want; k++) {
		int dep;
		uint32_t s = barn_get_empty(p, c, n, cap, OWNER_ENGINE, in, &dep);
		struct shm_sheaf *sh;
		uint32_t got;

		if (s == SHEAF_ID_NONE) {
			/* No empty sheaf reachable: every sheaf held, or a
			 * spoiled depot or empty ring (the next look). */
			ring_rebuild_symptom(e);
			*starved = work == 0 ? BARN_STARVED_SHEAF : 0;
			break;
		}
		sh = pool_sheaf(p, s);
		got = refill_one(p, c, n, objs, cap);
		if (got == 0) {
			barn_put_empty(p, c, n, s, OWNER_ENGINE, in);
			*starved = work == 0 ? BARN_STARVED_MEM : 0;
			break;
		}
		/* Relaxed atomic stores (plain stores on x86): the dead-client
		 * repair may read this sheaf meanwhile (owner.c,
		 * drop_in_sheaves, by ut_load64); a snapshot is all it needs. */
		for (uint32_t i = 0; i < got; i++)
			at_plain_store_relaxed(&sh->objs[i], objs[i]);
		sheaf_set_size(sh, got);
		if (ring_put(&full, p->owners, s, OWNER_ENGINE, in) != 0) {
			untrusted_note(UT_RING, 1);
			slab_free_objs(p, c, objs, got);
			barn_put_empty(p, c, n, s, OWNER_ENGINE, in);
			ring_rebuild_symptom(e);
			*starved = BARN_STARVED_SHEAF;
			break;
		}
		engine_stat_add(p, c, n, ST_SHEAF_REFILL, 1);
		work++;
		/* A client waits on this barn: wake it now, before stocking
		 * the rest (miss latency). */
		if (waiters || ut_barn_waiters(pool_barn(p, c, n)))
			serve_waiters(e, c, n);
		waiters = 0;
	}
	return work;
}

/* Sheaves one pass refills or flushes per barn at most: a pass over every
 * cache stays short whatever the watermarks (more is done by the next). */
#define STOCK_PASS_MAX 256u

struct watermarks {
	uint32_t low, high, limit;
};

/*
 * @sc's barn watermarks as the stocking rule may use them: 1 <= limit,
 * low <= high <= limit.  Tune refuses other values, but the descriptor is
 * shared memory (an older pool, a test) and a refill above what the next
 * pass flushes again would keep the worker busy for ever.
 */
static struct watermarks barn_watermarks(const struct shm_cache *sc)
{
	struct watermarks w = {
		.low = at_load_relaxed(&sc->barn_low),
		.high = at_load_relaxed(&sc->barn_high),
		.limit = at_load_relaxed(&sc->barn_limit),
	};

	if (w.limit == 0)
		w.limit = 1;
	if (w.high > w.limit)
		w.high = w.limit;
	if (w.low > w.high)
		w.low = w.high;
	return w;
}

/*
 * The waiters of barn (@c, @n) this pass serves: @raw (clients write it,
 * bounded) unless the last pass served them and nothing happened since:
 * the waiter count, the wait starts (`waits`) and the rings' four
 * positions as that pass left them.  A waiter woken by a serve takes a
 * sheaf (or takes an empty one from the depot, and waits again later: a
 * new wait), or gives up and leaves; one that does neither is a count a
 * killed waiter or a peer left behind.
 * Serving it again, pass after pass, kept the worker busy for good: the
 * refill for a phantom waiter on an empty barn is work, so is the flush
 * for one on another barn the next pass, and two barns out of phase
 * alternate for ever (test_hostile's idle sheafd at 40-100 ms of CPU in
 * 100 ms).  Such waiters count 0 until the barn moves: the watermarks
 * alone then decide, and they converge.  A wait that starts later
 * bumps `waits` and is served.
 */
static uint32_t waiters_real(struct engine *e, uint32_t c, uint32_t n, uint32_t raw,
			     const struct ring_ref *full, const struct ring_ref *empty)
{
	const struct barn_served *bs = engine_barn_served(e, c, n);

	if (raw == 0 || !bs->armed || bs->waiters != raw ||
	    bs->waits != at_load_relaxed(&pool_barn(e->pool, c, n)->waits) ||
	    bs->full_head != at_load_relaxed(&full->r->head) ||
	    bs->full_tail != at_load_relaxed(&full->r->tail) ||
	    bs->empty_head != at_load_relaxed(&empty->r->head) ||
	    bs->empty_tail != at_load_relaxed(&empty->r->tail))
		return raw;
	return 0;
}

/* After the pass over barn (@c, @n): note the barn as it is now when the
 * pass served its waiters (or ignored them as phantoms), else forget. */
static void waiters_note(struct engine *e, uint32_t c, uint32_t n, uint32_t raw, int served,
			 const struct ring_ref *full, const struct ring_ref *empty)
{
	struct barn_served *bs = engine_barn_served(e, c, n);

	bs->armed = raw != 0 && served;
	if (!bs->armed)
		return;
	bs->waiters = raw;
	bs->waits = at_load_relaxed(&pool_barn(e->pool, c, n)->waits);
	bs->full_head = at_load_relaxed(&full->r->head);
	bs->full_tail = at_load_relaxed(&full->r->tail);
	bs->empty_head = at_load_relaxed(&empty->r->head);
	bs->empty_tail = at_load_relaxed(&empty->r->tail);
}

/*
 * Whether the barn's rings and the depot claim more sheaves than the pool
 * has (@cnt: the full ring's count), beyond the operations in flight: a
 * sheaf is in one ring at most, so one of them lies.  Positions a peer set
 * within the glance's bounds over slots that look filled do that: each put
 * into such a full ring skipped tail past them and each get head, so a
 * refill (work) took the count from 0 to the ring's size, the next pass's
 * flush (work) back to 0, and so on without a sleep; and positions that
 * moved every pass never stood still for the two looks that rebuild a
 * ring (test_hostile's idle sheafd at 80-100 ms of CPU in 100 ms).  Such a
 * barn is left alone until the look rebuilds the liar.
 */
static int rings_overcount(struct engine *e, uint32_t cnt, const struct ring_ref *empty,
			   const struct ring_ref *depot)
{
	const struct shm_pool *p = e->pool;
	uint64_t sum = (uint64_t)cnt + ring_count(empty) + ring_count(depot);

	if (sum <= (uint64_t)p->sheaf_count + p->max_lanes + 8u)
		return 0;
	untrusted_note(UT_RING, 1);
	ring_rebuild_symptom(e);
	return 1;
}

/* One pass over barn (@c, @n) by the stocking rule above; returns the
 * sheaves refilled or flushed over the limit (at most 2 * STOCK_PASS_MAX;
 * flushes for waiters alone are not counted, see below). */
static uint32_t stock_barn(struct engine *e, uint32_t c, uint32_t n,
			   struct ring_intent *in)
{
	struct shm_pool *p = e->pool;
	struct shm_cache *sc = &p->caches[c];
	struct shm_barn *b = pool_barn(p, c, n);
	struct ring_ref full = pool_full_ref(p, c, n);
	struct ring_ref empty = pool_empty_ref(p, c, n);
	struct ring_ref depot = pool_depot_ref(p);
	uint32_t cnt = ring_count(&full);
	struct watermarks w = barn_watermarks(sc);
	/* A waiter's waiters++ (barn_wait_supply) comes before its doorbell
	 * bump, which the acquire load of the doorbell in worker_main saw
	 * before this pass: a waiter that rang is counted here.  Clients
	 * write it: bounded (one waiter per lane at most). */
	uint32_t raw = ut_barn_waiters(b);
	uint32_t waiters = waiters_real(e, c, n, raw, &full, &empty);
	uint32_t cap = at_load_relaxed(&sc->sheaf_capacity);
	/* Beyond barn_limit while memory is plentiful (barn_flush_limit):
	 * never below it, so a refill (at most high) is never flushed. */
	uint32_t keep = barn_flush_limit(p, sc, n);
	uint32_t limit = keep > w.limit ? keep : w.limit, work = 0, flushed = 0;
	uint32_t regular = cnt > limit ? cnt - limit : 0;    /* flushes over the limit */
	int starved = 0;

	/* A ring whose positions are impossible is rebuilt (engine/ring_rebuild.c);
	 * one still impossible (its rebuild is rate-limited) is left alone
	 * until then: a refill "put" sheaf after sheaf into it (its count
	 * stays 0), every pass, draining the depot (test_hostile's idle
	 * sheafd at 30-60 ms of CPU in 100 ms, until the rebuild). */
	if (ring_rebuild_glance(e, full.id, in) | ring_rebuild_glance(e, empty.id, in) ||
	    rings_overcount(e, cnt, &empty, &depot)) {
		if (waiters)
			barn_publish(p, c, n, BARN_STARVED_SHEAF);
		return 0;
	}
	if (cap == 0)
		cap = cache_default_capacity(sc->obj_size);
	/* The descriptor is engine-owned, but a refill writes objs[cap]:
	 * clamp at the use as well. */
	if (cap > SHEAF_CAP_MAX)
		cap = SHEAF_CAP_MAX;
	/* A waiter while the barn holds full sheaves is a free waiting for
	 * an empty sheaf (an alloc would have taken one): refill nothing for
	 * it, and flush a full sheaf per waiter when no empty one is left
	 * (every sheaf of the pool full: the free would wait for ever).  The
	 * two cases exclude each other within a pass; across passes they can
	 * alternate (the flush leaves the barn under barn_low, the next pass
	 * refills it from the empty sheaves the flush made, the one after
	 * flushes again) for as long as waiters stays up, which a dead waiter
	 * (killed in barn_wait_supply) or a scribbled count makes for ever: so
	 * flushes for waiters are not work that keeps the worker passing (the
	 * waiters are woken by this pass's publish; one that needs more rings
	 * the doorbell again).  Only the flushes over the limit count. */
	if (waiters && cnt > 0 && ring_count(&empty) == 0 && ring_count(&depot) == 0)
		limit = cnt > waiters ? cnt - waiters : 0;
	else if ((cnt < w.low && !(waiters && cnt > 0)) || (waiters && cnt == 0)) {
		uint32_t want = w.high > cnt ? w.high - cnt : 1;

		work = stock_refill(e, c, n, want < STOCK_PASS_MAX ? want : STOCK_PASS_MAX,
				    cap, waiters, in, &starved);
		/* Puts the ring took without counting them (positions a peer
		 * set within the glance's slack: head past tail) are no work
		 * that keeps the worker passing, or it refills the ring pass
		 * after pass, spinning, until the next look rebuilds it.
		 * Clients taking sheaves meanwhile make this a false alarm
		 * at worst: a sooner look, and a sleep until the doorbell.
		 * A count that rose by more than the puts is no symptom here:
		 * a client's frees put full sheaves all the while (cap-1
		 * sheaves: one per free), and a refill then counted as no
		 * work left the flush below to a later pass, a free waiting
		 * meanwhile (test_free under valgrind).  A peer's slots of a
		 * later lap, which each put steps tail past, are caught by
		 * the flush that follows. */
		uint32_t now = ring_count(&full);

		if (work != 0 && now < cnt + work && now <= cnt) {
			ring_rebuild_symptom(e);
			cnt += work;
			work = 0;
		} else {
			cnt += work;    /* at most high (or 1): nothing to flush */
		}
	}
	uint32_t before = cnt;

	for (uint32_t k = 0; cnt > limit && k < STOCK_PASS_MAX; k++) {
		uint32_t s = barn_get_full(p, c, n, OWNER_ENGINE, in);
		if (s == SHEAF_ID_NONE)
			break;
		engine_flush_sheaf(p, c, n, s, OWNER_ENGINE, in);
		cnt--;
		flushed++;
	}
	/* A count that fell by more than the sheaves taken: a peer's slots
	 * of a later lap, which each get steps head past (and each put tail
	 * past, lifting the refill's count over the limit): the flushes
	 * over the limit are no work, else the worker refills and flushes
	 * the barn in turn, never sleeping (test_hostile's idle sheafd at
	 * 70-100% of a CPU for seconds), until the next look rebuilds it or
	 * the lap wears the peer's slots out.  Clients taking sheaves
	 * meanwhile make this a false alarm at worst: a sooner look, and
	 * the rest of the flush at the next doorbell or beat. */
	if (flushed != 0 && ring_count(&full) + flushed < before) {
		ring_rebuild_symptom(e);
		regular = 0;
	}
	work += flushed < regular ? flushed : regular;
	/* Served, or found to be phantoms (waiters 0 with raw not). */
	waiters_note(e, c, n, raw, waiters == 0 || work != 0 || flushed != 0, &full, &empty);
	if (waiters || starved || work || flushed)
		barn_publish(p, c, n, starved);
	if (waiters && work)
		e->served_waiter[n] = 1;
	return work;
}

uint32_t engine_node_pass(struct engine *e, uint32_t node, struct ring_intent *in)
{
	struct shm_pool *p = e->pool;
	uint32_t work = 0;

	(void)ring_rebuild_verify(e, in);
	ring_rebuild_glance(e, RING_DEPOT, in);
	ring_rebuild_glance(e, RING_RCU, in);
	for (uint32_t c = 0, used = pool_caches_used(p); c < used; c++)
		/* Acquire: pairs with the release store of CACHE_LIVE in
		 * engine_cache_create (the cache's fields are then seen). */
		if (at_load_acquire(&p->caches[c].state) == CACHE_LIVE)
			work += stock_barn(e, c, node, in);
	return work;
}

/* Run node @node's worker on the CPUs of its kernel node, or of the
 * nearest node that has CPUs (a CPU-less memory node: numa.h).  Real nodes
 * only; a failure leaves the thread where it was (it only costs
 * locality). */
static void worker_affinity(const struct shm_pool *p, uint32_t node)
{
	const struct ntopo *t = p->topo;
	cpu_set_t set;
	int k;

	if (p->hdr->simulated || t == NULL || p->nodes < 2 ||
	    !(p->hdr->numa_flags & SHEAF_NUMA_F_IDS))
		return;
	k = ntopo_worker_node(t, p->hdr->kernel_node[node]);
	if (k < 0)
		return;
	CPU_ZERO(&set);
	for (unsigned cpu = 0; cpu < NTOPO_CPUS && cpu < CPU_SETSIZE; cpu++)
		if ((t->k[k].cpus[cpu / 64] >> (cpu % 64)) & 1u)
			CPU_SET(cpu, &set);
	(void)sched_setaffinity(0, sizeof(set), &set);
}

/*
 * A node's worker: passes until one finds nothing to do, then sleeps on the
 * doorbell.  Doorbell handshake (barn.h): all four accesses of the Dekker
 * pair are seq_cst (sleeping store and doorbell load here, doorbell bump and
 * sleeping load in node_ring_doorbell), so either the client sees sleeping
 * and wakes us, or we see its bump and do not sleep.
 *
 * The doorbell is client-writable: a client ringing it in a loop would keep
 * the worker passing for nothing.  After IDLE_RINGS_MAX passes in a row
 * that found no work although the doorbell moved, the worker pauses
 * IDLE_PAUSE_NS before the next one (bounded CPU; a real request waits at
 * most that long once).  So is `sleeping`: a client that keeps it 0 (or
 * stores the doorbell back to the value the worker sleeps on) makes every
 * other client's wake-up a no-op, so the worker never sleeps longer than
 * IDLE_BEAT_NS: a client's request then waits at most that long.
 */
#define IDLE_RINGS_MAX 64u
#define IDLE_PAUSE_NS  1000000L
#define IDLE_BEAT_NS   100000000L
#define WORKER_SPIN_NS 1000000

static void *worker_main(void *arg)
{
	struct worker_arg *wa = arg;
	struct engine *e = wa->e;
	struct shm_pool *p = e->pool;
	uint32_t node = wa->node;
	struct shm_node *nd = &p->node[node];
	struct ring_intent *in = &e->worker_lane[node]->intent;
	uint32_t idle = 0;
	int64_t awake_until = 0;        /* stay awake until then (see below) */
	int64_t sleep_ns;
	uint32_t work;

	free(wa);
	worker_affinity(p, node);
	for (;;) {
		/* Acquire: pairs with the seq_cst bump in node_ring_doorbell. */
		uint32_t bell = at_load_acquire(&nd->doorbell);

		/* seq_cst: pairs with the store in engine_stop, which then
		 * bumps the doorbell (a worker about to sleep sees one). */
		if (at_load_seqcst(&e->stop))
			break;
		e->served_waiter[node] = 0;
		e->served_here[node] = 0;
		/* Odd during the pass.  seq_cst read-modify-writes (acquire
		 * and release): the pass's work is seen by an engine_shrink
		 * that loads the even value after it (acquire). */
		at_fetch_add_seqcst(&e->pass_seq[node], 1);
		at_store_relaxed(&nd->cpu, (uint32_t)sched_getcpu() + 1);
		work = engine_node_pass(e, node, in);
		at_fetch_add_seqcst(&e->pass_seq[node], 1);
		if (work != 0) {
			idle = 0;
			if (e->served_here[node])
				awake_until = 0;
			else if (e->served_waiter[node])
				awake_until = clock_ns() + WORKER_SPIN_NS;
			continue;
		}
		/* For WORKER_SPIN_NS after a pass that did work for a client
		 * that waited (a miss), stay awake: that client often misses
		 * again soon, and waking a sleeping worker costs tens of
		 * microseconds on a VM (W6's tail).  The window runs from that
		 * pass: passes in between (a Shrink's doorbell) do not end it,
		 * and a doorbell rung for nothing does not extend it.  Routine
		 * stocking buys no spin (a one-way flow keeps the worker
		 * stocking now and then: a spinning worker would take the CPU
		 * its clients need), nor does serving a client that waited on
		 * this worker's own CPU (the spin would keep it from running). */
		if (awake_until != 0) {
			while (at_load_acquire(&nd->doorbell) == bell &&
			       clock_ns() < awake_until && !at_load_relaxed(&e->stop)) {
				for (int k = 0; k < 32; k++)
					spin_pause();
				at_store_relaxed(&nd->cpu, (uint32_t)sched_getcpu() + 1);
			}
			if (clock_ns() >= awake_until)
				awake_until = 0;
			if (at_load_acquire(&nd->doorbell) != bell)
				continue;
		}
		/* Node 0's worker wakes for the rings' next look (every
		 * 250 ms when idle: ring_rebuild.c), every worker at least
		 * every IDLE_BEAT_NS.  With no client attached nobody is
		 * served: every worker naps up to IDLE_ALONE_NS
		 * (client_attach wakes it). */
		if (!client_any(p)) {
			sleep_ns = IDLE_ALONE_NS;
		} else {
			sleep_ns = node == 0 ? ring_rebuild_verify(e, in) : -1;
			if (sleep_ns < 0 || sleep_ns > IDLE_BEAT_NS)
				sleep_ns = IDLE_BEAT_NS;
		}
		at_store_seqcst(&nd->sleeping, 1);          /* Dekker pair, above */
		if (at_load_seqcst(&nd->doorbell) == bell && !at_load_seqcst(&e->stop)) {
			if (sleep_ns != 0)
				futex_wait(&nd->doorbell, bell, sleep_ns);
			idle = 0;
		} else if (++idle >= IDLE_RINGS_MAX) {
			struct timespec ts = { 0, IDLE_PAUSE_NS };

			nanosleep(&ts, NULL);               /* rung for nothing */
			idle = 0;
		}
		at_store_seqcst(&nd->sleeping, 0);
	}
	return NULL;
}

int engine_thread_create(pthread_t *t, void *(*fn)(void *), void *arg)
{
	static const int faults[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP };
	sigset_t all, old;
	int rc;

	/* Under TSan a signal that lands on a thread blocked in a raw futex
	 * wait is held until that thread next calls into the runtime: a
	 * SIGTERM to an idle sheafd would never be handled. */
	sigfillset(&all);
	for (unsigned i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
		sigdelset(&all, faults[i]);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

int engine_start(struct engine *e, char *err, size_t errlen)
{
	struct shm_pool *p = e->pool;

	for (uint32_t n = 0; n < p->nodes; n++) {
		struct worker_arg *wa = malloc(sizeof(*wa));
		int rc;

		if (wa == NULL) {
			snprintf(err, errlen, "engine: out of memory");
			return -ENOMEM;
		}
		wa->e = e;
		wa->node = n;
		rc = engine_thread_create(&e->worker[n], worker_main, wa);
		if (rc != 0) {
			free(wa);
			snprintf(err, errlen, "engine: pthread_create: %s", strerror(rc));
			return -rc;
		}
		/* Named for /proc/PID/task/TID/comm (test_hostile's idle
		 * check names the thread that used the CPU). */
		{
			char name[32];

			snprintf(name, sizeof(name), "sheaf-node%u", n);
			name[15] = '\0';            /* the kernel's limit */
			(void)pthread_setname_np(e->worker[n], name);
		}
		e->nworkers = n + 1;
	}
	if (grace_start(e) != 0) {
		snprintf(err, errlen, "engine: cannot start the grace-period thread");
		return -EAGAIN;
	}
	return 0;
}

void engine_stop(struct engine *e)
{
	struct shm_pool *p = e->pool;

	/* seq_cst, then a doorbell bump: pairs with the worker's loads of
	 * stop, before its pass and before it sleeps. */
	at_store_seqcst(&e->stop, 1);
	for (uint32_t n = 0; n < e->nworkers; n++) {
		at_fetch_add_seqcst(&p->node[n].doorbell, 1);
		futex_wake(&p->node[n].doorbell, 1);
	}
	for (uint32_t n = 0; n < e->nworkers; n++)
		pthread_join(e->worker[n], NULL);
	grace_stop(e);
	e->nworkers = 0;
	at_store_seqcst(&e->stop, 0);
}
