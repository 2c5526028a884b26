/*
 * test_spoiled_rings.c - nothing a client writes into the depot, a barn
 * ring or the rcu ring stops a client of another cache for longer than a
 * bound, before and after an adoptive restart (docs/design.md, "What sheafd
 * checks" and "Spoiled rings are rebuilt").
 *
 * A real sheafd (run as systemd would, its memfds in the fd store), a
 * hostile client process with a cache of its own ("h"), and this process
 * as the good client of cache "good".  Each case prepares the good cache
 * so that its next allocations need the spoiled ring, has the hostile
 * client spoil it with plausible positions (so that the O(1) glance at the
 * positions does not catch it), and measures the outage: the longest time
 * from a good call's start (the first one starts right after the spoil)
 * to its success, NULLs retried.  The spoils:
 *   depot_7th     every 7th slot of the depot's [head, tail) overwritten:
 *                 "never filled for this lap", a full slot naming another
 *                 sheaf, or an item of a later lap, in turn;
 *   depot_random  the depot's head and tail moved by a few positions and
 *                 300 random slots of the 2048 after head set to random
 *                 words (seeded: SHEAF_SEED, printed);
 *   barn          both rings of each of the good cache's barns, every 7th
 *                 slot as depot_7th and head moved one past a sheaf;
 *   barn_full     the full ring of each of the good cache's barns made
 *                 full by its positions (tail = head + size): every put
 *                 is refused, and a client's full sheaf must wait for the
 *                 rebuild rather than lose its objects;
 *   rcu_7th       the rcu ring (deferred sheaves, drained at once by the
 *                 grace-period thread, so the spoil is of the positions
 *                 puts go to): every 7th slot of the next 2048 written as
 *                 depot_7th and tail moved 7 on (gets stop short of it);
 *   rcu_random    its head moved a few positions and tail a few more (a
 *                 gap never filled), 300 random slots after tail random;
 *   rcu_full      its tail = head + size (every handover refused), and,
 *                 as the read section ends, the good cache's full rings
 *                 empty by their positions with every slot a later lap's
 *                 (the grace thread's release into them refused).
 * An rcu case (rcu_case) holds a read section over 8192 patterned objects
 * through their deferred frees, the spoil (and the adoption) and the
 * rebuild, while a thread allocates the good cache: no object handed out
 * early, none changed under the reader; then a barrier within the bound
 * after which every object handed over in a sheaf is released (none
 * waiting) and nothing is in use; then a spoil and a barrier at once.
 * Without the fix (main before the rcu ring joined the looks) the barrier
 * returns in a few ms with 1500-4100 of 8192 objects never released; with
 * only the grace thread's release unfixed, the checker fails ("in use 170
 * by the walk"); with only the adoption's requeue unfixed, objects are
 * handed out inside the read section (freed early).
 * Each case runs against the running sheafd, then again spoiled just
 * before a SIGKILL of sheafd and an adoptive restart (the outage then
 * counts from the new sheafd's READY=1).  After each: every allocation and
 * free of a batch that needs the ring again succeeds, sheaf_pool_check
 * passes, and the good cache's in_use is exactly what the good client
 * holds (0).
 *
 * The bound: BOUND_MS (1 s, the design's bound for a spoiled ring: a look
 * at every ring each 250 ms, 50 ms after the last while a client waits,
 * a rebuild on the second look that finds the same sheaf out of reach)
 * plus SLACK_MS (1 s: this machine runs the tests of several checkouts at
 * once on two CPUs, and a loaded scheduler delays the worker's wake-ups
 * and the refills after the rebuild; 5 s under a sanitizer, whose passes
 * run 5-15x slower).  Measured here: 1-100 ms, 300 ms at worst.  Without
 * the verification the outage never ends: the good client's allocations
 * fail (ENOMEM or EAGAIN) until the case's 10 s deadline.  barn_full holds
 * a batch across the spoil and frees it first: without the client's wait
 * for the rebuild (client/exchange.c, put_full) those frees drop full
 * sheaves' objects and the checker fails ("in use N by the walk").  The errno of a good allocation that failed is printed; an
 * ENOMEM, the memory cap's errno, fails the test.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/sheaf.h"
#include "client/internal.h"
#include "shm/bounds.h"
#include "shm/cache_desc.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_deploy.h"
#include "tests/helpers/util_notify.h"
#include "tests/helpers/util_pool.h"
#include "tests/helpers/util_proc.h"

#define BOUND_MS    1000
#define SLACK_MS    1000
#define DEADLINE_MS 10000
#define GOOD_SIZE   96
#define BATCH       8192          /* objects per good batch: ~48 sheaves */

enum spoil { SPOIL_DEPOT_7TH = 'a', SPOIL_DEPOT_RANDOM = 'b', SPOIL_BARN = 'c',
	     SPOIL_BARN_FULL = 'd', SPOIL_RCU_7TH = 'e', SPOIL_RCU_RANDOM = 'f',
	     SPOIL_RCU_FULL = 'g', SPOIL_FULL_LATER = 'h', SPOIL_QUIT = 'q' };

struct hostile_arg {
	const char *sock;
	int cmd[2];                  /* parent -> hostile: a spoil */
	int done[2];                 /* hostile -> parent: done */
	uint64_t seed;
};

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* Every 7th position of @rr's [head, tail) overwritten, by turns: never
 * filled for its lap, full naming another sheaf, an item of a later lap. */
static void spoil_7th(const struct ring_ref *rr, uint64_t *rng)
{
	uint32_t h = at_load_relaxed(&rr->r->head), t = at_load_relaxed(&rr->r->tail);
	uint32_t n = (int32_t)(t - h) > 0 ? t - h : 0, size = ring_size(rr);

	if (n > size)
		n = size;
	for (uint32_t k = 0, turn = 0; k < n; k += 7, turn++) {
		uint32_t pos = h + k, base = pos - (pos & rr->mask);
		uint32_t id = (uint32_t)(rng_next(rng) % rr->nsheaves);
		uint64_t v;

		switch (turn % 3) {
		case 0: v = (uint64_t)base << 32 | 0xdeadbeefu; break;
		case 1: v = (uint64_t)(base + 1) << 32 | id; break;
		default: v = (uint64_t)(base + size + 1) << 32 | id; break;
		}
		at_store_relaxed(&rr->r->slots[pos & rr->mask], v);
	}
}

/* Head and tail moved a few positions, 300 random slots random. */
static void spoil_random(const struct ring_ref *rr, uint64_t *rng)
{
	uint32_t h = at_load_relaxed(&rr->r->head), t = at_load_relaxed(&rr->r->tail);

	at_store_relaxed(&rr->r->head, h + (uint32_t)(rng_next(rng) % 48));
	at_store_relaxed(&rr->r->tail, t - (uint32_t)(rng_next(rng) % 48));
	h = at_load_relaxed(&rr->r->head);
	for (int k = 0; k < 300; k++)          /* near head: where gets look */
		at_store_relaxed(&rr->r->slots[(h + rng_next(rng) % 2048) & rr->mask],
				 rng_next(rng));
}

/* The rcu ring's next positions, every 7th slot written as spoil_7th does,
 * and tail moved past the first: the grace thread's gets stop short of
 * tail, and every sheaf put after it is out of their reach. */
static void spoil_rcu_7th(const struct ring_ref *rr, uint64_t *rng)
{
	uint32_t t = at_load_relaxed(&rr->r->tail), size = ring_size(rr);

	for (uint32_t k = 0, turn = 0; k < 2048 && k < size; k += 7, turn++) {
		uint32_t pos = t + k, base = pos - (pos & rr->mask);
		uint32_t id = (uint32_t)(rng_next(rng) % rr->nsheaves);
		uint64_t v;

		switch (turn % 3) {
		case 0: v = (uint64_t)base << 32 | 0xdeadbeefu; break;
		case 1: v = (uint64_t)(base + 1) << 32 | id; break;
		default: v = (uint64_t)(base + size + 1) << 32 | id; break;
		}
		at_store_relaxed(&rr->r->slots[pos & rr->mask], v);
	}
	at_store_relaxed(&rr->r->tail, t + 7);
}

/* The rcu ring's head moved a few positions and its tail a few more (a
 * gap never filled: gets stop there, short of tail), then 300 random slots
 * of the 2048 after tail set to random words. */
static void spoil_rcu_random(const struct ring_ref *rr, uint64_t *rng)
{
	uint32_t h = at_load_relaxed(&rr->r->head), t = at_load_relaxed(&rr->r->tail);
	uint32_t a = (uint32_t)(rng_next(rng) % 24), b = a + 1 + (uint32_t)(rng_next(rng) % 24);

	at_store_relaxed(&rr->r->head, h + a);
	at_store_relaxed(&rr->r->tail, t + b);
	t += b;
	for (int k = 0; k < 300; k++)
		at_store_relaxed(&rr->r->slots[(t + rng_next(rng) % 2048) & rr->mask],
				 rng_next(rng));
}

/* The hostile client: a cache of its own, in use; on each command byte
 * it spoils what the command names and answers a byte. */
static int hostile(void *arg)
{
	struct hostile_arg *a = arg;
	sheaf_pool_t *pool = child_connect(a->sock, "hostile");
	struct shm_pool *sp = &pool->shm;
	sheaf_cache_t *h = mkcache(pool, "h", 64, 0, 0);
	uint64_t rng = a->seed | 1;
	char c;

	close(a->cmd[1]);
	close(a->done[0]);
	for (int i = 0; i < 1000; i++)
		sheaf_free(h, xalloc(h));
	while (read(a->cmd[0], &c, 1) == 1 && c != SPOIL_QUIT) {
		struct ring_ref depot = pool_depot_ref(sp);
		int good = pool_cache_find(sp, "good");

		if (c == SPOIL_DEPOT_7TH) {
			spoil_7th(&depot, &rng);
		} else if (c == SPOIL_DEPOT_RANDOM) {
			spoil_random(&depot, &rng);
		} else if (c == SPOIL_BARN_FULL && good >= 0) {
			for (uint32_t n = 0; n < sp->nodes; n++) {
				struct ring_ref rr = pool_full_ref(sp, (uint32_t)good, n);

				at_store_relaxed(&rr.r->tail,
						 at_load_relaxed(&rr.r->head) + ring_size(&rr));
			}
		} else if (c == SPOIL_RCU_7TH || c == SPOIL_RCU_RANDOM || c == SPOIL_RCU_FULL) {
			struct ring_ref rcu = pool_ring_ref(sp, ring_rcu_id(sp->nodes));

			if (c == SPOIL_RCU_7TH)
				spoil_rcu_7th(&rcu, &rng);
			else if (c == SPOIL_RCU_RANDOM)
				spoil_rcu_random(&rcu, &rng);
			else
				at_store_relaxed(&rcu.r->tail,
						 at_load_relaxed(&rcu.r->head) + ring_size(&rcu));
		} else if (c == SPOIL_FULL_LATER && good >= 0) {
			/* The good cache's full rings empty by their positions
			 * and every slot a later lap's: a put there helps tail
			 * on to its step limit and is refused, the count below
			 * the barn's limit (the grace thread's release of a
			 * deferred sheaf into its barn). */
			for (uint32_t n = 0; n < sp->nodes; n++) {
				struct ring_ref rr = pool_full_ref(sp, (uint32_t)good, n);
				uint32_t h = at_load_relaxed(&rr.r->head);

				for (uint32_t k = 0; k < ring_size(&rr); k++) {
					uint32_t pos = h + k, base = pos - (pos & rr.mask);

					at_store_relaxed(&rr.r->slots[pos & rr.mask],
							 (uint64_t)(base + 0x40000000u) << 32 | 1u);
				}
				at_store_relaxed(&rr.r->tail, h);
			}
		} else if (c == SPOIL_BARN && good >= 0) {
			for (uint32_t n = 0; n < sp->nodes; n++) {
				struct ring_ref rr[2] = { pool_full_ref(sp, (uint32_t)good, n),
							  pool_empty_ref(sp, (uint32_t)good, n) };

				for (int k = 0; k < 2; k++) {
					spoil_7th(&rr[k], &rng);
					at_fetch_add_relaxed(&rr[k].r->head, 1);
				}
			}
		}
		REQUIRE(write(a->done[1], &c, 1) == 1, "hostile: answer");
	}
	sheaf_disconnect(pool);
	return 0;
}

/* ---- the good client ------------------------------------------------------ */

struct good {
	sheaf_cache_t *c;
	unsigned n;                  /* objects to allocate, then free */
	void **held;                 /* non-NULL: free these @n first, no allocs */
	int64_t worst_ms;            /* the longest call, NULLs retried */
	unsigned nulls;
	int last_errno;
	int enomem;
	int failed;                  /* a call never succeeded by the deadline */
	char msg[160];
};

/* A batch on a thread of its own (its exit returns its sheaves to the
 * barns): @g->n allocations then as many frees, each retried on failure
 * until DEADLINE_MS. */
static void *good_batch(void *arg)
{
	struct good *g = arg;
	void **o = g->held != NULL ? g->held : calloc(g->n, sizeof(*o));
	int64_t end = now_ms() + DEADLINE_MS;

	if (o == NULL) {
		g->failed = 1;
		return NULL;
	}
	for (unsigned i = 0; i < g->n && !g->failed && g->held == NULL; i++) {
		int64_t t0 = now_ms();

		while ((o[i] = sheaf_alloc(g->c)) == NULL) {
			g->nulls++;
			g->last_errno = errno;
			g->enomem |= errno == ENOMEM;
			if (now_ms() >= end) {
				snprintf(g->msg, sizeof(g->msg), "alloc %u of %u: %s for %lld ms",
					 i, g->n, strerror(errno), (long long)(now_ms() - t0));
				g->failed = 1;
				break;
			}
		}
		if (now_ms() - t0 > g->worst_ms)
			g->worst_ms = now_ms() - t0;
	}
	for (unsigned i = 0; i < g->n && o[i] != NULL; i++) {
		int64_t t0 = now_ms();
		int rc;

		while ((rc = sheaf_free(g->c, o[i])) != 0) {
			g->nulls++;
			g->last_errno = -rc;
			if (rc != -EAGAIN || now_ms() >= end) {
				snprintf(g->msg, sizeof(g->msg), "free %u of %u: %s", i, g->n,
					 strerror(-rc));
				g->failed = 1;
				break;
			}
		}
		if (now_ms() - t0 > g->worst_ms)
			g->worst_ms = now_ms() - t0;
	}
	if (g->held == NULL)
		free(o);
	return NULL;
}

/* A batch on a thread of its own: @n allocations then frees, or (@held)
 * the frees of @n held objects only. */
static struct good run_batch_of(sheaf_cache_t *c, unsigned n, void **held)
{
	struct good g = { .c = c, .n = n, .held = held };
	pthread_t t;

	REQUIRE(pthread_create(&t, NULL, good_batch, &g) == 0, "pthread_create");
	pthread_join(t, NULL);
	return g;
}

static struct good run_batch(sheaf_cache_t *c, unsigned n)
{
	return run_batch_of(c, n, NULL);
}

/* ---- the cases ------------------------------------------------------------ */

struct run {
	struct notify n;
	struct svc d;
	struct notify_drainer drainer;
	struct hostile_arg a;
	sheaf_pool_t *pool;
	sheaf_cache_t *good;
};

static int64_t bound_ms(void)
{
	return BOUND_MS + (test_san() ? 5 * SLACK_MS : SLACK_MS);
}

/* The pool passes the checker (the rotation may still be rebuilding a
 * ring the batch did not need: polled, within the bound) and the good
 * cache has nothing in use. */
static void require_exact(struct run *R, const char *label)
{
	char err[256] = "";
	int64_t t0 = now_ms();
	int rc;

	while ((rc = sheaf_pool_check(R->pool, err, sizeof(err))) != 0 &&
	       now_ms() - t0 < bound_ms())
		sleep_ms(20);
	REQUIRE(rc == 0, "%s: the checker fails after %lld ms: %s", label,
		(long long)(now_ms() - t0), err);
	REQUIRE(cache_stats_of(R->good, -1).in_use == 0, "%s: the good cache has %llu in use, "
		"its client holds none", label,
		(unsigned long long)cache_stats_of(R->good, -1).in_use);
}

/*
 * One case: prepare the good cache (its barn stocked with full sheaves for
 * a barn spoil; emptied into the depot otherwise), spoil, optionally kill
 * sheafd and adopt, then measure.
 */
static void one_case(struct run *R, char what, int adopt, const char *label)
{
	struct good g;
	int64_t t0;
	char c = what;
	void **held = NULL;

	/* Sheaves in the barn, then (for a depot spoil) all of them back in
	 * the depot: the batch after the spoil needs the depot's. */
	g = run_batch(R->good, BATCH);
	REQUIRE(!g.failed, "%s: preparing: %s", label, g.msg);
	if (what != SPOIL_BARN && what != SPOIL_BARN_FULL)
		REQUIRE(sheaf_cache_shrink(R->good) >= 0, "%s: shrink", label);
	/* Full rings full by positions: objects held across the spoil, so
	 * that their frees put full sheaves into the spoiled ring first. */
	if (what == SPOIL_BARN_FULL) {
		held = calloc(BATCH, sizeof(*held));
		REQUIRE(held != NULL, "calloc");
		for (unsigned i = 0; i < BATCH; i++)
			held[i] = xalloc(R->good);
	}
	sleep_ms(20);
	REQUIRE(write(R->a.cmd[1], &c, 1) == 1, "%s: command", label);
	REQUIRE(read_full(R->a.done[0], &c, 1, 10000) == 0, "%s: the hostile client did not "
		"answer", label);
	t0 = now_ms();
	if (adopt) {
		notify_drainer_stop(&R->drainer);
		svc_stop(&R->d, &R->n, SIGKILL);
		svc_start(&R->d, &R->n, -1, 1, 0);
		notify_drainer_start(&R->drainer, &R->n);
		REQUIRE(file_contains(R->d.log, "adopted the pool from the fd store"),
			"%s: the new sheafd did not adopt the pool", label);
		t0 = now_ms();
	}
	if (held != NULL) {
		g = run_batch_of(R->good, BATCH, held);
		printf("%s: frees of held objects: outage %lld ms (%u failed calls retried)\n",
		       label, (long long)g.worst_ms, g.nulls);
		REQUIRE(!g.failed, "%s: the good client's frees: %s", label, g.msg);
		REQUIRE(g.worst_ms <= bound_ms(), "%s: a good free waited %lld ms, bound %lld ms",
			label, (long long)g.worst_ms, (long long)bound_ms());
		free(held);
		require_exact(R, label);
	}
	g = run_batch(R->good, BATCH);
	printf("%s: outage %lld ms (batch of %u in %lld ms; %u failed calls retried, last %s)\n",
	       label, (long long)g.worst_ms, BATCH, (long long)(now_ms() - t0), g.nulls,
	       g.nulls ? strerror(g.last_errno) : "-");
	REQUIRE(!g.failed, "%s: the good client: %s", label, g.msg);
	REQUIRE(!g.enomem, "%s: a good allocation failed with ENOMEM (no cap is near)", label);
	REQUIRE(g.worst_ms <= bound_ms(), "%s: the good client waited %lld ms, bound %lld ms",
		label, (long long)g.worst_ms, (long long)bound_ms());
	/* Again, with the ring needed again: no call waits long now. */
	if (what != SPOIL_BARN && what != SPOIL_BARN_FULL)
		REQUIRE(sheaf_cache_shrink(R->good) >= 0, "%s: shrink", label);
	g = run_batch(R->good, BATCH);
	REQUIRE(!g.failed, "%s: the good client, again: %s", label, g.msg);
	REQUIRE(g.worst_ms <= bound_ms(), "%s: again, the good client waited %lld ms", label,
		(long long)g.worst_ms);
	require_exact(R, label);
}

/* ---- the rcu ring --------------------------------------------------------- */

#define RCU_OBJS 4096              /* objects deferred-freed per half */

static uint64_t pattern(unsigned i, unsigned k)
{
	return 0x5a00000000000000ull | (uint64_t)i << 16 | k;
}

static void fill(void *o, unsigned i)
{
	uint64_t *w = o;

	for (unsigned k = 0; k < GOOD_SIZE / 8; k++)
		w[k] = pattern(i, k);
}

static int intact(const void *o, unsigned i)
{
	const volatile uint64_t *w = o;

	for (unsigned k = 0; k < GOOD_SIZE / 8; k++)
		if (w[k] != pattern(i, k))
			return 0;
	return 1;
}

/* A reader: one read section over @o[0..n) from before their deferred
 * frees until told to stop, checking their contents all along. */
struct reader {
	sheaf_pool_t *pool;
	void **o;
	unsigned n;
	_Atomic int ready, stop;
	int lock_rc, changed;
	unsigned bad;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;

	r->lock_rc = sheaf_read_lock(r->pool);
	at_store_release(&r->ready, 1);
	for (int last = 0; !last && !r->changed;) {
		last = at_load_acquire(&r->stop);
		for (unsigned i = 0; i < r->n; i++)
			if (!intact(r->o[i], i)) {
				r->changed = 1;
				r->bad = i;
			}
	}
	sheaf_read_unlock(r->pool);
	return NULL;
}

/* A churner: allocations of the good cache while the reader reads, each
 * written over and freed; one of the reader's objects handed out is a
 * free before its grace period. */
struct churner {
	sheaf_cache_t *c;
	void **sorted;
	unsigned n;
	_Atomic int stop;
	int early;
	unsigned rounds;
};

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

	return x < y ? -1 : x > y;
}

static void *churn_main(void *arg)
{
	struct churner *w = arg;
	void *o[512];

	while (!at_load_acquire(&w->stop)) {
		unsigned k = 0;

		/* NULLs (sheafd restarting) end a round early. */
		for (; k < 512 && (o[k] = sheaf_alloc(w->c)) != NULL; k++) {
			if (bsearch(&o[k], w->sorted, w->n, sizeof(*o), cmp_ptr) != NULL)
				w->early = 1;
			memset(o[k], 0xee, GOOD_SIZE);
		}
		for (unsigned i = 0; i < k; i++)
			while (sheaf_free(w->c, o[i]) == -EAGAIN)
				sleep_ms(1);
		w->rounds++;
		if (k < 512)
			sleep_ms(2);
	}
	return NULL;
}

static void kill_and_adopt(struct run *R, const char *label)
{
	notify_drainer_stop(&R->drainer);
	svc_stop(&R->d, &R->n, SIGKILL);
	svc_start(&R->d, &R->n, -1, 1, 0);
	notify_drainer_start(&R->drainer, &R->n);
	REQUIRE(file_contains(R->d.log, "adopted the pool from the fd store"),
		"%s: the new sheafd did not adopt the pool", label);
}

static void spoil(struct run *R, char what, const char *label)
{
	char c = what;

	REQUIRE(write(R->a.cmd[1], &c, 1) == 1, "%s: command", label);
	REQUIRE(read_full(R->a.done[0], &c, 1, 10000) == 0, "%s: the hostile client did not "
		"answer", label);
}

/* After a barrier: every deferred sheaf handed over is released
 * (released objects == objects handed over in sheaves, none waiting), and
 * the good cache has nothing in use, at once. */
static void require_released(struct run *R, uint64_t sh0, uint64_t rel0, const char *label)
{
	uint64_t sh = stat_count(R->good, -1, "free_rcu_sheaf") - sh0;
	uint64_t rel = stat_count(R->good, -1, "rcu_released") - rel0;
	uint64_t wait = stat_count(R->good, -1, "rcu_waiting");
	uint64_t in_use = cache_stats_of(R->good, -1).in_use;

	printf("%s: handed over %llu, released %llu, waiting %llu, in use %llu\n", label,
	       (unsigned long long)sh, (unsigned long long)rel, (unsigned long long)wait,
	       (unsigned long long)in_use);
	REQUIRE(sh > 0 && rel == sh && wait == 0, "%s: after the barrier %llu deferred objects "
		"handed over in sheaves, %llu released, %llu waiting", label,
		(unsigned long long)sh, (unsigned long long)rel, (unsigned long long)wait);
	REQUIRE(in_use == 0, "%s: the good cache has %llu in use, its client holds none", label,
		(unsigned long long)in_use);
}

/*
 * One rcu case.  Phase 1: a reader's section over 2 x RCU_OBJS patterned
 * objects; their deferred frees, half before the spoil and half after it
 * (all before it for SPOIL_RCU_FULL, whose ring refuses every put); the
 * spoil (and the kill and adoption); a churner allocating the good cache
 * until the rcu ring was rebuilt (its head a lap on) and 100 ms more: no
 * object of the reader's handed out, none changed under it.  Then the
 * section ends and a barrier must return within the bound with every
 * deferred sheaf released.  Phase 2: the spoil again, RCU_OBJS deferred
 * frees and a barrier at once: within the bound, all released.
 */
static void rcu_case(struct run *R, char what, int adopt, const char *label)
{
	struct shm_pool *sp = &R->pool->shm;
	struct ring_ref rcu = pool_ring_ref(sp, ring_rcu_id(sp->nodes));
	const unsigned n = 2 * RCU_OBJS;
	void **o = calloc(n, sizeof(*o)), **sorted = calloc(n, sizeof(*o));
	struct reader *rd = calloc(1, sizeof(*rd));
	struct churner *w = calloc(1, sizeof(*w));
	uint64_t sh0 = stat_count(R->good, -1, "free_rcu_sheaf");
	uint64_t rel0 = stat_count(R->good, -1, "rcu_released");
	pthread_t rt, wt;
	struct good g;
	int64_t t0, dt;
	uint32_t h1;
	int rebuilt = 0, rc;

	REQUIRE(o != NULL && sorted != NULL && rd != NULL && w != NULL, "calloc");
	g = run_batch(R->good, BATCH);
	REQUIRE(!g.failed, "%s: preparing: %s", label, g.msg);
	REQUIRE(sheaf_cache_shrink(R->good) >= 0, "%s: shrink", label);
	for (unsigned i = 0; i < n; i++) {
		o[i] = xalloc(R->good);
		fill(o[i], i);
	}
	memcpy(sorted, o, n * sizeof(*o));
	qsort(sorted, n, sizeof(*o), cmp_ptr);
	*rd = (struct reader){ .pool = R->pool, .o = o, .n = n };
	REQUIRE(pthread_create(&rt, NULL, reader_main, rd) == 0, "pthread_create");
	while (!at_load_acquire(&rd->ready))
		sleep_ms(1);
	REQUIRE(rd->lock_rc == 0, "%s: sheaf_read_lock: %d", label, rd->lock_rc);
	for (unsigned i = 0; i < (what == SPOIL_RCU_FULL ? n : RCU_OBJS); i++)
		REQUIRE((rc = sheaf_free_deferred(R->good, o[i])) == 0,
			"%s: sheaf_free_deferred: %s", label, strerror(-rc));
	spoil(R, what, label);
	h1 = at_load_acquire(&rcu.r->head);
	t0 = now_ms();
	if (adopt)
		kill_and_adopt(R, label);
	for (unsigned i = RCU_OBJS; what != SPOIL_RCU_FULL && i < n; i++)
		REQUIRE((rc = sheaf_free_deferred(R->good, o[i])) == 0,
			"%s: sheaf_free_deferred after the spoil: %s", label, strerror(-rc));
	w->c = R->good;
	w->sorted = sorted;
	w->n = n;
	REQUIRE(pthread_create(&wt, NULL, churn_main, w) == 0, "pthread_create");
	while (!(rebuilt = (int32_t)(at_load_acquire(&rcu.r->head) - h1) >=
			   (int32_t)ring_size(&rcu)) && now_ms() - t0 < bound_ms())
		sleep_ms(5);
	printf("%s: rcu ring %s after %lld ms\n", label, rebuilt ? "rebuilt" : "NOT rebuilt",
	       (long long)(now_ms() - t0));
	sleep_ms(100);
	at_store_release(&w->stop, 1);
	pthread_join(wt, NULL);
	/* The deferred sheaves go to the full rings as the section ends:
	 * those refuse them now. */
	if (what == SPOIL_RCU_FULL)
		spoil(R, SPOIL_FULL_LATER, label);
	at_store_release(&rd->stop, 1);
	pthread_join(rt, NULL);
	REQUIRE(rebuilt, "%s: the rcu ring was not rebuilt within %lld ms", label,
		(long long)bound_ms());
	REQUIRE(!w->early, "%s: an object freed deferred was handed out inside a read section "
		"begun before its free", label);
	REQUIRE(!rd->changed, "%s: object %u changed under a read section begun before its "
		"deferred free", label, rd->bad);
	REQUIRE(w->rounds > 0, "%s: the churner never ran", label);
	t0 = now_ms();
	rc = sheaf_barrier(R->pool, DEADLINE_MS);
	dt = now_ms() - t0;
	printf("%s: barrier after the section: %lld ms (churner rounds %u)\n", label,
	       (long long)dt, w->rounds);
	REQUIRE(rc == 0, "%s: sheaf_barrier: %s", label, strerror(-rc));
	REQUIRE(dt <= bound_ms(), "%s: the barrier took %lld ms, bound %lld ms", label,
		(long long)dt, (long long)bound_ms());
	require_released(R, sh0, rel0, label);
	require_exact(R, label);

	/* Phase 2: the barrier right after the spoil. */
	sh0 = stat_count(R->good, -1, "free_rcu_sheaf");
	rel0 = stat_count(R->good, -1, "rcu_released");
	for (unsigned i = 0; i < RCU_OBJS; i++)
		o[i] = xalloc(R->good);
	spoil(R, what, label);
	t0 = now_ms();
	for (unsigned i = 0; i < RCU_OBJS; i++)
		REQUIRE((rc = sheaf_free_deferred(R->good, o[i])) == 0,
			"%s: sheaf_free_deferred, again: %s", label, strerror(-rc));
	rc = sheaf_barrier(R->pool, DEADLINE_MS);
	dt = now_ms() - t0;
	printf("%s: frees and barrier right after a spoil: %lld ms\n", label, (long long)dt);
	REQUIRE(rc == 0, "%s: sheaf_barrier, again: %s", label, strerror(-rc));
	REQUIRE(dt <= bound_ms(), "%s: frees and barrier took %lld ms, bound %lld ms", label,
		(long long)dt, (long long)bound_ms());
	require_released(R, sh0, rel0, label);
	require_exact(R, label);
	free(o);
	free(sorted);
	free(rd);
	free(w);
}

static void run_start(struct run *R)
{
	make_test_dir();
	notify_open(&R->n);
	fmt(R->d.sock, sizeof(R->d.sock), "%s/s.sock", test_dir);
	svc_start(&R->d, &R->n, -1, 0, 0);
	REQUIRE(R->n.store_fd >= 0 && R->n.store_shared_fd >= 0, "no memfds in the fd store");
	notify_drainer_start(&R->drainer, &R->n);
}

static void run_cases(char what, const char *name)
{
	int rcu = what == SPOIL_RCU_7TH || what == SPOIL_RCU_RANDOM || what == SPOIL_RCU_FULL;
	struct run *R = calloc(1, sizeof(*R));
	char err[256] = "", label[96];
	const char *seed_env = getenv("SHEAF_SEED");
	pid_t hp;

	REQUIRE(R != NULL, "calloc");
	R->a.seed = seed_env != NULL && *seed_env ? strtoull(seed_env, NULL, 0)
						  : (uint64_t)time(NULL) ^ (uint64_t)getpid();
	printf("%s: SHEAF_SEED=%llu\n", name, (unsigned long long)R->a.seed);
	run_start(R);
	R->a.sock = R->d.sock;
	/* O_CLOEXEC: the restarted sheafd must not hold the pipes open. */
	REQUIRE(pipe2(R->a.cmd, O_CLOEXEC) == 0 && pipe2(R->a.done, O_CLOEXEC) == 0, "pipe");
	/* The hostile process first: a process connected to the pool cannot
	 * fork one that connects. */
	hp = fork_child(hostile, &R->a);
	close(R->a.cmd[0]);
	close(R->a.done[1]);
	R->pool = sheaf_connect(R->d.sock, "good", 0, err, sizeof(err));
	REQUIRE(R->pool != NULL, "connect: %s", err);
	R->good = mkcache(R->pool, "good", GOOD_SIZE, 0, 0);

	snprintf(label, sizeof(label), "%s, sheafd running", name);
	(rcu ? rcu_case : one_case)(R, what, 0, label);
	snprintf(label, sizeof(label), "%s, across an adoptive restart", name);
	(rcu ? rcu_case : one_case)(R, what, 1, label);

	{
		char q = SPOIL_QUIT;

		REQUIRE(write(R->a.cmd[1], &q, 1) == 1, "quit");
	}
	reap_ok(hp, 30000, "the hostile client");
	close(R->a.cmd[1]);
	close(R->a.done[0]);
	sheaf_disconnect(R->pool);
	notify_drainer_stop(&R->drainer);
	svc_stop(&R->d, &R->n, SIGTERM);
	notify_close(&R->n);
	free(R);
	test_passed();
}

START_TEST(depot_7th)
{
	run_cases(SPOIL_DEPOT_7TH, "depot, every 7th slot");
}
END_TEST

START_TEST(depot_random)
{
	run_cases(SPOIL_DEPOT_RANDOM, "depot, random positions and slots");
}
END_TEST

START_TEST(barn_rings)
{
	run_cases(SPOIL_BARN, "the good cache's barn rings");
}
END_TEST

START_TEST(barn_full)
{
	run_cases(SPOIL_BARN_FULL, "the good cache's full rings, full by positions");
}
END_TEST

START_TEST(rcu_7th)
{
	run_cases(SPOIL_RCU_7TH, "the rcu ring, every 7th slot");
}
END_TEST

START_TEST(rcu_random)
{
	run_cases(SPOIL_RCU_RANDOM, "the rcu ring, random positions and slots");
}
END_TEST

START_TEST(rcu_full)
{
	run_cases(SPOIL_RCU_FULL, "the rcu ring full by positions, the full rings refusing");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("spoiled_rings");

	deploy_init("test_spoiled_rings");
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ADD_ALONE(s, depot_7th, 120);
	ADD_ALONE(s, depot_random, 120);
	ADD_ALONE(s, barn_rings, 120);
	ADD_ALONE(s, barn_full, 120);
	ADD_ALONE(s, rcu_7th, 120);
	ADD_ALONE(s, rcu_random, 120);
	ADD_ALONE(s, rcu_full, 120);
	return run_suite(s);
}
