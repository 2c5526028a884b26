/*
 * test_sheaf.c - the client object path on a local pool (engine threads in
 * this process): fast-path counts, main/spare swaps, barn exchange both
 * ways, empty barn refilled, overfull barn flushed, remote frees with 2 and
 * 4 simulated nodes, bad frees, sheaves disabled, run-time capacity, thread
 * exit, shrink (of slabs and of idle sheaves' pages), where sheaves lie
 * (sheaf_line), and a multi-thread stress run ended by the pool checker
 * (prefill and bulk: test_bulk.c).
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "shm/engine/clients.h"
#include "client/sheaf.h"
#include "client/internal.h"
#include "shm/stats.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_pool.h"

/* The cache's sheaf capacity, or ~0u when sheaf_cache_get_capacity fails. */
static unsigned capacity_of(const sheaf_cache_t *c)
{
	unsigned cap;

	return sheaf_cache_get_capacity(c, &cap) == 0 ? cap : ~0u;
}

static sheaf_pool_t *mkpool(unsigned nodes, size_t size, size_t cap)
{
	struct sheaf_pool_config cfg = { .nodes = nodes, .size = size, .mem_cap = cap,
					  .sheaf_count = 4096 };

	return pool_new(&cfg);
}

/* Wait (bounded) until @cond holds; the engine works asynchronously. */
#define WAIT_FOR(cond)                                                      \
	do {                                                                \
		for (int w_ = 0; w_ < 5000 && !(cond); w_++)                \
			usleep(1000);                                       \
		ck_assert_msg((cond), "timed out waiting for " #cond);      \
	} while (0)

/* xalloc, the object then written: it is mapped and writable. */
static void *xalloc_touch(sheaf_cache_t *c)
{
	void *o = xalloc(c);

	*(volatile char *)o = 1;
	return o;
}

/* ---- fast path, swaps, barn exchange ----------------------------------- */

START_TEST(fast_path_and_swaps)
{
	sheaf_pool_t *p = mkpool(1, 64 << 20, 0);
	sheaf_cache_t *c = mkcache(p, "swap", 64, 8, 0);
	void *o[16];

	/* 16 allocs: two barn exchanges (the first empty main becomes spare). */
	for (int i = 0; i < 16; i++)
		o[i] = xalloc_touch(c);
	ck_assert_uint_eq(stat_count(c, -1, "alloc_slowpath"), 2);
	ck_assert_uint_eq(stat_count(c, -1, "alloc_fastpath"), 14);
	ck_assert_uint_eq(stat_count(c, -1, "barn_get"), 2);
	/* 16 frees: main fills, swaps with the empty spare: no barn trip. */
	for (int i = 0; i < 16; i++)
		REQUIRE(sheaf_free(c, o[i]) == 0, "sheaf_free(%p) failed", (void *)o[i]);
	ck_assert_uint_eq(stat_count(c, -1, "free_fastpath"), 16);
	ck_assert_uint_eq(stat_count(c, -1, "free_slowpath"), 0);
	ck_assert_uint_eq(stat_count(c, -1, "barn_put"), 0);
	/* 16 allocs again: main, then swap with the full spare: all fast. */
	for (int i = 0; i < 16; i++)
		o[i] = xalloc_touch(c);
	ck_assert_uint_eq(stat_count(c, -1, "alloc_fastpath"), 30);
	ck_assert_uint_eq(stat_count(c, -1, "alloc_slowpath"), 2);
	/* Free 16 + 8 more: the third full sheaf stays with the thread, in
	 * its stash (main and spare are full). */
	void *more[8];
	for (int i = 0; i < 8; i++)
		more[i] = xalloc_touch(c);
	ck_assert_uint_eq(stat_count(c, -1, "barn_get"), 3);
	for (int i = 0; i < 16; i++)
		REQUIRE(sheaf_free(c, o[i]) == 0, "sheaf_free(%p) failed", (void *)o[i]);
	for (int i = 0; i < 8; i++)
		REQUIRE(sheaf_free(c, more[i]) == 0, "sheaf_free(%p) failed", (void *)more[i]);
	ck_assert_uint_eq(stat_count(c, -1, "barn_put"), 0);
	ck_assert_uint_eq(stat_count(c, -1, "free_slowpath"), 1);
	ck_assert_uint_eq(cache_stats_of(c, -1).in_use, 0);
	sheaf_thread_exit();
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/*
 * Beyond main and spare a thread keeps up to STASH_MAX full and STASH_MAX
 * empty sheaves (no more than STASH_BYTES of objects in full ones), reused
 * before the barn's, as many as its demand asks: the first burst grows the
 * stash (client/exchange.c), after which a batch that fits goes round
 * without a barn trip; the rest of a bigger one goes to the barn; thread
 * exit returns them all.
 */
START_TEST(stash_bounds)
{
	sheaf_pool_t *p = mkpool(1, 64 << 20, 0);
	sheaf_cache_t *c = mkcache(p, "stash", 64, 8, 0);
	sheaf_cache_t *big = mkcache(p, "stash-big", 4096, 16, 0);
	enum { FIT = 8 * (2 + STASH_MAX), OVER = FIT + 8 * 5 };
	void *o[OVER];
	uint64_t gets, puts;

	for (int r = 0; r < 2; r++) {       /* the first grows the stash */
		puts = stat_count(c, -1, "barn_put");
		for (int i = 0; i < FIT; i++)
			o[i] = xalloc_touch(c);
		for (int i = 0; i < FIT; i++)
			REQUIRE(sheaf_free(c, o[i]) == 0, "sheaf_free(%p) failed", (void *)o[i]);
		if (r == 0)
			ck_assert_uint_gt(stat_count(c, -1, "barn_put"), puts);
	}
	ck_assert_uint_eq(stat_count(c, -1, "barn_put"), puts);  /* all kept */
	puts = stat_count(c, -1, "barn_put");
	gets = stat_count(c, -1, "barn_get");
	for (int r = 0; r < 3; r++) {
		for (int i = 0; i < FIT; i++)
			o[i] = xalloc_touch(c);
		for (int i = 0; i < FIT; i++)
			REQUIRE(sheaf_free(c, o[i]) == 0, "sheaf_free(%p) failed", (void *)o[i]);
	}
	ck_assert_uint_eq(stat_count(c, -1, "barn_get"), gets); /* no barn trip */
	ck_assert_uint_eq(stat_count(c, -1, "barn_put"), puts);
	/* Five sheaves more than main, spare and the stash hold: the barn. */
	for (int i = 0; i < OVER; i++)
		o[i] = xalloc_touch(c);
	for (int i = 0; i < OVER; i++)
		REQUIRE(sheaf_free(c, o[i]) == 0, "sheaf_free(%p) failed", (void *)o[i]);
	ck_assert_uint_eq(stat_count(c, -1, "barn_put") - puts, 5);
	/* 4 KiB objects, 16 a sheaf: 64 KiB each, so eight fit STASH_BYTES;
	 * the second burst finds the stash grown to them. */
	ck_assert_uint_eq(STASH_BYTES / (16 * 4096), 8);
	for (int r = 0; r < 2; r++) {
		for (int i = 0; i < 16 * 12; i++)
			o[i] = xalloc_touch(big);
		puts = stat_count(big, -1, "barn_put");
		for (int i = 0; i < 16 * 12; i++)
			REQUIRE(sheaf_free(big, o[i]) == 0, "sheaf_free(%p) failed", (void *)o[i]);
	}
	ck_assert_uint_eq(stat_count(big, -1, "barn_put") - puts, 12 - 2 - 8);
	sheaf_thread_exit();
	ck_assert_uint_eq(cache_stats_of(c, -1).in_use, 0);
	ck_assert_uint_eq(cache_stats_of(big, -1).in_use, 0);
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

START_TEST(empty_barn_refilled)
{
	sheaf_pool_t *p = mkpool(1, 64 << 20, 0);
	sheaf_cache_t *c = mkcache(p, "refill", 128, 16, 0);
	void *o;

	/* No stocking ahead of demand (a worker pass may have run since the
	 * cache was created): empty the barn, then allocate. */
	at_store_relaxed(&c->sc->barn_low, 0);
	for (int i = 0; i < 1000 && (sheaf_cache_shrink(c), cache_stats_of(c, 0).barn_full) != 0; i++)
		usleep(1000);       /* a pass begun before barn_low changed */
	ck_assert_uint_eq(cache_stats_of(c, 0).barn_full, 0);
	o = xalloc_touch(c);

	/* The barn was empty: the client waited for the engine's refill. */
	ck_assert_uint_ge(stat_count(c, -1, "barn_get_fail"), 1);
	ck_assert_uint_ge(stat_count(c, -1, "sheaf_refill"), 1);
	ck_assert_uint_ge(stat_count(c, -1, "alloc_slab"), 1);
	ck_assert_int_eq(sheaf_free(c, o), 0);
	/* With a low watermark, the engine keeps the barn stocked ahead. */
	at_store_relaxed(&c->sc->barn_low, 4);
	sheaf_cache_shrink(c);
	o = xalloc_touch(c);
	WAIT_FOR(cache_stats_of(c, 0).barn_full >= 4);
	ck_assert_int_eq(sheaf_free(c, o), 0);
	sheaf_thread_exit();
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

START_TEST(overfull_barn_flushed)
{
	sheaf_pool_t *p = mkpool(1, 64 << 20, 0);
	sheaf_cache_t *c = mkcache(p, "flush", 64, 8, 0);
	enum { N = 2000 };
	void **o = calloc(N, sizeof(*o));

	at_store_relaxed(&c->sc->barn_limit, 4);
	at_store_relaxed(&c->sc->barn_keep, 0);     /* barn_limit, cap or not */
	for (int i = 0; i < N; i++)
		o[i] = xalloc_touch(c);
	for (int i = 0; i < N; i++)
		REQUIRE(sheaf_free(c, o[i]) == 0, "sheaf_free(%p) failed", (void *)o[i]);
	/* All but main, spare and the thread's stash go to the barn. */
	ck_assert_uint_ge(stat_count(c, -1, "barn_put"), N / 8 - 3 - STASH_MAX);
	ck_assert_uint_ge(stat_count(c, -1, "barn_put_fail"), 1);
	/* The engine flushes the surplus back to slabs in the background. */
	WAIT_FOR(cache_stats_of(c, 0).barn_full <= 4);
	ck_assert_uint_ge(stat_count(c, -1, "sheaf_flush"), N / 8 - 4 - 16 - STASH_MAX);
	free(o);
	sheaf_thread_exit();
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/* ---- remote frees ------------------------------------------------------ */

struct remote_arg {
	sheaf_pool_t *pool;
	sheaf_cache_t *cache;
	unsigned node;
	void **objs;
	int n;
};

static void *remote_freer(void *arg)
{
	struct remote_arg *ra = arg;

	ck_assert_int_eq(sheaf_thread_set_node(ra->pool, ra->node), 0);
	for (int i = 0; i < ra->n; i++)
		ck_assert_int_eq(sheaf_free(ra->cache, ra->objs[i]), 0);
	sheaf_thread_exit();
	return NULL;
}

/* How many of @objs sit in sheaves of node @node's barn (full ring). */
static int objs_in_barn(sheaf_pool_t *p, sheaf_cache_t *c, unsigned node,
			void **objs, int n)
{
	struct shm_pool *sp = &p->shm;
	struct shm_ring *r = pool_full_ring(sp, c->id, node);
	int found = 0;

	for (uint32_t i = 0; i < r->size; i++) {
		uint64_t v = at_load_acquire(&r->slots[i]);
		uint32_t s = (uint32_t)v;
		if (((uint32_t)(v >> 32) & r->mask) != 1 ||
		    at_load_relaxed(&sp->owners[s]) != OWNER_RING(r->id))
			continue;
		struct shm_sheaf *sh = pool_sheaf(sp, s);
		for (uint32_t k = 0; k < sheaf_size(sh); k++)
			for (int j = 0; j < n; j++)
				found += sp->base + sh->objs[k] == (char *)objs[j];
	}
	return found;
}

static void remote_frees(unsigned nodes)
{
	sheaf_pool_t *p = mkpool(nodes, 64 << 20, 0);
	sheaf_cache_t *c = mkcache(p, "remote", 64, 16, 0);
	enum { N = 160 };          /* 10 whole sheaves */
	void *o[N], *back[N];
	struct remote_arg ra = { p, c, 0, o, N };
	pthread_t th;
	uint64_t full0_before;

	ck_assert_int_eq(sheaf_thread_set_node(p, 0), 0);
	for (int i = 0; i < N; i++)
		o[i] = xalloc_touch(c);
	/* Let the engine settle, then note node 0's barn. */
	usleep(20000);
	full0_before = cache_stats_of(c, 0).barn_full;
	for (unsigned n = 1; n < nodes; n++) {
		ra.node = n;
		ra.n = N / (int)(nodes - 1);
		ra.objs = o + (n - 1) * (unsigned)ra.n;
		if (n == nodes - 1)
			ra.n = N - (int)((n - 1) * (unsigned)(N / (nodes - 1)));
		pthread_create(&th, NULL, remote_freer, &ra);
		pthread_join(th, NULL);
		/* Node n's threads counted the remote frees... */
		ck_assert_uint_ge(stat_count(c, (int)n, "free_remote"), (uint64_t)ra.n);
	}
	ck_assert_uint_eq(stat_count(c, -1, "free_remote"), N);
	/* ...and handed whole sheaves to node 0's barn, none to their own
	 * (the freeing threads exited: their partial sheaves went too). */
	ck_assert_uint_ge(cache_stats_of(c, 0).barn_full, full0_before + N / 16);
	ck_assert_int_eq(objs_in_barn(p, c, 0, o, N), N);
	for (unsigned n = 1; n < nodes; n++)
		ck_assert_int_eq(objs_in_barn(p, c, n, o, N), 0);
	/* Node 0 can allocate them again (the barn hands out whole sheaves). */
	ck_assert_int_eq(sheaf_alloc_bulk(c, back, N), 0);
	ck_assert_int_eq(sheaf_free_bulk(c, back, N), 0);
	sheaf_thread_exit();
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}

START_TEST(remote_frees_2_nodes) { remote_frees(2); }
END_TEST
START_TEST(remote_frees_4_nodes) { remote_frees(4); }
END_TEST

/* ---- bad frees --------------------------------------------------------- */

START_TEST(bad_frees_detected)
{
	sheaf_pool_t *p = mkpool(1, 64 << 20, 0);
	sheaf_cache_t *a = mkcache(p, "a", 64, 8, 0);
	sheaf_cache_t *b = mkcache(p, "b", 64, 8, 0);
	sheaf_cache_t *d = mkcache(p, "dbg", 48, 8, SHEAF_CACHE_DEBUG);
	int local;
	void *x = xalloc_touch(a), *y = xalloc_touch(b), *z = xalloc_touch(d);

	ck_assert_int_eq(sheaf_free(a, NULL), 0);             /* as free(NULL) */
	ck_assert_int_eq(sheaf_free(a, &local), -EFAULT);
	ck_assert_int_eq(sheaf_free(a, y), -EINVAL);          /* other cache */
	ck_assert_int_eq(sheaf_free(a, (char *)x + 1), -EINVAL);  /* boundary */
	ck_assert_int_eq(sheaf_free(a, (char *)x + 8), -EINVAL);
	/* A frame no slab uses: the last frame of the data region. */
	char *last = p->shm.data + p->shm.data_len - 64;
	ck_assert_int_eq(sheaf_free(a, last), -EINVAL);
	ck_assert_uint_eq(stat_count(a, -1, "free_invalid"), 5);
	/* Debug caches catch a double free at once. */
	ck_assert_int_eq(sheaf_free(d, z), 0);
	ck_assert_int_eq(sheaf_free(d, z), -EALREADY);
	ck_assert_uint_eq(stat_count(d, -1, "free_invalid"), 1);
	ck_assert_int_eq(sheaf_free(a, x), 0);
	ck_assert_int_eq(sheaf_free(b, y), 0);
	sheaf_thread_exit();
	require_pool_ok(p);   /* nothing was corrupted */
	/* Other caches: the immediate double free at once, another one
	 * dropped by the engine at flush time, exactly once. */
	x = xalloc_touch(a);
	y = xalloc_touch(a);
	ck_assert_int_eq(sheaf_free(a, x), 0);
	ck_assert_int_eq(sheaf_free(a, x), -EALREADY);
	ck_assert_int_eq(sheaf_free(a, y), 0);
	ck_assert_int_eq(sheaf_free(a, x), 0);
	sheaf_cache_shrink(a);
	ck_assert_uint_eq(stat_count(a, -1, "flush_invalid"), 1);
	sheaf_pool_destroy(p);
}
END_TEST

/* ---- sheaves disabled, run-time capacity ------------------------------- */

START_TEST(sheaves_disabled)
{
	sheaf_pool_t *p = mkpool(1, 64 << 20, 0);
	sheaf_cache_t *c = mkcache(p, "nosheaf", 64, 0, 0);
	enum { N = 500 };
	void *o[N];

	for (int i = 0; i < N; i++)
		o[i] = xalloc_touch(c);
	for (int i = 0; i < N; i++)
		REQUIRE(sheaf_free(c, o[i]) == 0, "sheaf_free(%p) failed", (void *)o[i]);
	ck_assert_uint_eq(stat_count(c, -1, "alloc_fastpath"), 0);
	ck_assert_uint_eq(stat_count(c, -1, "free_fastpath"), 0);
	ck_assert_uint_eq(stat_count(c, -1, "alloc_slowpath"), N);
	ck_assert_uint_eq(stat_count(c, -1, "free_slowpath"), N);
	ck_assert_uint_ge(stat_count(c, -1, "barn_get"), N);
	ck_assert_ptr_eq((void *)sheaf__tls_fast[c->slot].main, (void *)&sheaf_dummy);
	sheaf_thread_exit();
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

START_TEST(capacity_tuned_at_run_time)
{
	sheaf_pool_t *p = mkpool(1, 64 << 20, 0);
	sheaf_cache_t *c = mkcache(p, "tune", 64, 32, 0);
	void *o[200];

	ck_assert_uint_eq(capacity_of(c), 32);
	for (int i = 0; i < 200; i++)
		o[i] = xalloc_touch(c);
	for (int i = 0; i < 200; i++)
		REQUIRE(sheaf_free(c, o[i]) == 0, "sheaf_free(%p) failed", (void *)o[i]);
	ck_assert_int_eq(sheaf_cache_set_capacity(c, 257), -EINVAL);
	ck_assert_int_eq(sheaf_cache_set_capacity(c, 4), 0);
	uint64_t puts = stat_count(c, -1, "barn_put");
	for (int i = 0; i < 200; i++)
		o[i] = xalloc_touch(c);
	for (int i = 0; i < 200; i++)
		REQUIRE(sheaf_free(c, o[i]) == 0, "sheaf_free(%p) failed", (void *)o[i]);
	/* New sheaves hold 4: about 200/4 full sheaves, less those the
	 * thread keeps, go to the barn. */
	ck_assert_uint_ge(stat_count(c, -1, "barn_put") - puts, 200 / 4 - 4 - STASH_MAX);
	ck_assert_uint_eq(sheaf__tls_fast[c->slot].main->capacity, 4);
	sheaf_thread_exit();
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/* ---- fast-path counts read while the thread runs ----------------------- */

struct counting {
	sheaf_cache_t *c;
	uint64_t pairs;
	_Atomic int phase;      /* 1: counting done, 2: may exit */
};

static void *counting_thread(void *arg)
{
	struct counting *k = arg;

	for (uint64_t i = 0; i < k->pairs; i++) {
		void *o = sheaf_alloc(k->c);
		if (o == NULL || sheaf_free(k->c, o) != 0)
			abort();
	}
	atomic_store(&k->phase, 1);
	while (atomic_load(&k->phase) != 2)
		usleep(1000);
	return NULL;
}

/*
 * alloc_fastpath and free_fastpath are not counted per operation: they are
 * read off the sheaf word of each thread's main sheaf (struct shm_live).
 * Another thread's reads while the thread runs never go back, and once it
 * is idle (alive, its main sheaf still in hand) they are exact; its exit
 * changes nothing.
 */
START_TEST(fast_counts_while_running)
{
	sheaf_pool_t *p = mkpool(1, 64 << 20, 0);
	sheaf_cache_t *c = mkcache(p, "live", 64, 16, 0);
	struct counting k = { .c = c, .pairs = test_san() ? 200000 : 3000000 };
	uint64_t last_a = 0, last_f = 0, reads = 0;
	struct sheaf_stats s;
	pthread_t th;

	REQUIRE(pthread_create(&th, NULL, counting_thread, &k) == 0, "pthread_create failed");
	while (atomic_load(&k.phase) == 0) {
		s = cache_stats_of(c, -1);
		uint64_t a = s.stat[sheaf_stat_index("alloc_fastpath")];
		uint64_t f = s.stat[sheaf_stat_index("free_fastpath")];
		if (a < last_a || f < last_f)
			ck_abort_msg("counts went back: %llu/%llu after %llu/%llu",
				     (unsigned long long)a, (unsigned long long)f,
				     (unsigned long long)last_a, (unsigned long long)last_f);
		if (a > k.pairs || f > a + 1 || s.in_use > 1)
			ck_abort_msg("alloc %llu free %llu in use %llu",
				     (unsigned long long)a, (unsigned long long)f,
				     (unsigned long long)s.in_use);
		last_a = a;
		last_f = f;
		reads++;
	}
	s = cache_stats_of(c, -1);
	/* The first alloc found no main sheaf: one slow path. */
	ck_assert_uint_eq(s.stat[sheaf_stat_index("alloc_slowpath")], 1);
	ck_assert_uint_eq(s.stat[sheaf_stat_index("alloc_fastpath")], k.pairs - 1);
	ck_assert_uint_eq(s.stat[sheaf_stat_index("free_fastpath")], k.pairs);
	ck_assert_uint_eq(s.in_use, 0);
	atomic_store(&k.phase, 2);
	REQUIRE(pthread_join(th, NULL) == 0, "pthread_join failed");
	ck_assert_uint_eq(stat_count(c, -1, "alloc_fastpath"), k.pairs - 1);
	ck_assert_uint_eq(stat_count(c, -1, "free_fastpath"), k.pairs);
	printf("  %llu pairs counted on the sheaf word; %llu reads meanwhile, none went back\n",
	       (unsigned long long)k.pairs, (unsigned long long)reads);
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/*
 * The lane side of the fast-path counts, driven by hand on an unused lane
 * and a depot sheaf: the 48-bit operation count wraps and the counts stay
 * exact; a reader of a lane whose thread died inside a change (odd seq)
 * still gets an answer; the repair closes the change without counting it
 * twice, and folds a published sheaf's operations exactly once.
 */
START_TEST(live_counts_wrap_and_repair)
{
	sheaf_pool_t *p = mkpool(1, 64 << 20, 0);
	sheaf_cache_t *c = mkcache(p, "livewrap", 64, 16, 0);
	struct shm_pool *sp = &p->shm;
	struct shm_lane *l = client_lane_acquire(sp, OWNER_ENGINE, 0);
	struct shm_live *lv = lane_live(sp, l, c->id);
	uint32_t s = sp->sheaf_count - 1;
	const uint64_t near_wrap = ((~0ull >> 16) - 2) << 16;   /* 3 ops to wrap */
	uint64_t st[SHEAF_STAT_ENGINE_FIRST];
	struct timespec t0, t1;

	ck_assert_uint_eq(sheaf_size(pool_sheaf(sp, s)), 0);       /* in the depot */
	at_store_relaxed(&pool_sheaf(sp, s)->word, near_wrap | 5);
	lane_live_install(sp, l, c->id, s);
	/* 4 fast allocs and 3 fast frees, as the inline paths count them. */
	at_store_relaxed(&pool_sheaf(sp, s)->word, at_load_relaxed(&pool_sheaf(sp, s)->word) +
			 4 * (SHEAF_WORD_OP - 1) + 3 * (SHEAF_WORD_OP + 1));
	ck_assert_uint_lt(at_load_relaxed(&pool_sheaf(sp, s)->word) >> 16, 8);  /* wrapped */
	lane_counts(sp, l, c->id, st);
	ck_assert_uint_eq(st[ST_ALLOC_FASTPATH], 4);
	ck_assert_uint_eq(st[ST_FREE_FASTPATH], 3);

	/* The thread dies inside its next change: readers give up on the
	 * live part (bounded) rather than wait for it. */
	at_store_relaxed(&lv->seq, at_load_relaxed(&lv->seq) | 1);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	lane_counts(sp, l, c->id, st);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_uint_lt(t1.tv_sec - t0.tv_sec, 5);
	ck_assert_uint_eq(st[ST_ALLOC_FASTPATH], 0);
	lane_live_repair(sp, l);
	ck_assert_uint_eq(at_load_relaxed(&lv->seq) & 1, 0);
	ck_assert_uint_eq(at_load_relaxed(&lv->sheaf), SHEAF_ID_NONE);
	lane_counts(sp, l, c->id, st);
	ck_assert_uint_eq(st[ST_ALLOC_FASTPATH], 0);

	/* Published again, one more fast free (the books balance: 4 and 4),
	 * then a repair folds it once; a second repair adds nothing. */
	lane_live_install(sp, l, c->id, s);
	at_store_relaxed(&pool_sheaf(sp, s)->word,
			 at_load_relaxed(&pool_sheaf(sp, s)->word) + SHEAF_WORD_OP + 1);
	lane_counts(sp, l, c->id, st);
	ck_assert_uint_eq(st[ST_FREE_FASTPATH], 1);
	lane_live_repair(sp, l);
	lane_live_repair(sp, l);
	at_counter_add(&lane_stat(sp, l, c->id)[ST_ALLOC_FASTPATH], 4);  /* the lost window */
	at_counter_add(&lane_stat(sp, l, c->id)[ST_FREE_FASTPATH], 3);
	lane_counts(sp, l, c->id, st);
	ck_assert_uint_eq(st[ST_ALLOC_FASTPATH], 4);
	ck_assert_uint_eq(st[ST_FREE_FASTPATH], 4);
	ck_assert_uint_eq(cache_stats_of(c, -1).in_use, 0);
	sheaf_set_size(pool_sheaf(sp, s), 0);
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/* ---- thread exit, stress ------------------------------------------------ */

static uint32_t sheaves_held_by(sheaf_pool_t *p, uint32_t client)
{
	uint32_t n = 0;
	for (uint32_t s = 0; s < p->shm.sheaf_count; s++)
		n += at_load_relaxed(&p->shm.owners[s]) == client;
	return n;
}

struct user_arg {
	sheaf_cache_t *c;
	int iters;
	unsigned seed;
};

static void *user_thread(void *arg)
{
	struct user_arg *ua = arg;
	void *held[256];
	int n = 0;

	for (int i = 0; i < ua->iters; i++) {
		if (n < 256 && (n == 0 || rand_r(&ua->seed) % 3 != 0)) {
			held[n++] = xalloc_touch(ua->c);
		} else {
			int k = (int)(rand_r(&ua->seed) % (unsigned)n);
			REQUIRE(sheaf_free(ua->c, held[k]) == 0, "sheaf_free(%p) failed", (void *)held[k]);
			held[k] = held[--n];
		}
	}
	for (int k = 0; k < n; k++)
		REQUIRE(sheaf_free(ua->c, held[k]) == 0, "sheaf_free(%p) failed", (void *)held[k]);
	return NULL;             /* thread exit returns the sheaves */
}

START_TEST(thread_exit_returns_sheaves)
{
	sheaf_pool_t *p = mkpool(1, 64 << 20, 0);
	sheaf_cache_t *c = mkcache(p, "exit", 64, 16, 0);
	struct user_arg ua = { c, 5000, 7 };
	pthread_t th;

	pthread_create(&th, NULL, user_thread, &ua);
	pthread_join(th, NULL);
	ck_assert_uint_eq(sheaves_held_by(p, p->client), 0);
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

struct pass_arg {
	sheaf_pool_t *p;
	unsigned node;
	sheaf_cache_t *c;
	void **slots;             /* hand-over slots, NULL when empty */
	int nslots;
	int iters;
	unsigned seed;
};

/* Allocate, write a tag, hand over through shared slots; free what others
 * handed over after checking the tag: cross-thread frees under load. */
static void *pass_thread(void *arg)
{
	struct pass_arg *pa = arg;

	ck_assert_int_eq(sheaf_thread_set_node(pa->p, pa->node), 0);
	for (int i = 0; i < pa->iters; i++) {
		int k = (int)(rand_r(&pa->seed) % (unsigned)pa->nslots);
		uint64_t *o = sheaf_alloc(pa->c);
		REQUIRE(o != NULL, "sheaf_alloc: %s", strerror(errno));
		o[0] = (uint64_t)(uintptr_t)o ^ 0x5a5a5a5a5a5a5a5aull;
		void *old = __atomic_exchange_n(&pa->slots[k], (void *)o, __ATOMIC_ACQ_REL);
		if (old != NULL) {
			uint64_t *q = old;
			REQUIRE(q[0] == ((uint64_t)(uintptr_t)q ^ 0x5a5a5a5a5a5a5a5aull), "object %p changed",
				(void *)q);
			REQUIRE(sheaf_free(pa->c, q) == 0, "sheaf_free(%p) failed", (void *)q);
		}
	}
	return NULL;
}

START_TEST(stress_threads_then_check)
{
	sheaf_pool_t *p = mkpool(2, 256 << 20, 0);
	sheaf_cache_t *c = mkcache(p, "stress", 64, 32, 0);
	enum { T = 4, SLOTS = 4096 };
	void **slots = calloc(SLOTS, sizeof(void *));
	struct pass_arg pa[T];
	pthread_t th[T];
	int iters = test_san() ? 50000 : 400000;

	for (int i = 0; i < T; i++) {
		pa[i] = (struct pass_arg){ p, (unsigned)i % 2, c, slots, SLOTS, iters,
					   (unsigned)i + 1 };
		pthread_create(&th[i], NULL, pass_thread, &pa[i]);
	}
	for (int i = 0; i < T; i++)
		pthread_join(th[i], NULL);
	for (int k = 0; k < SLOTS; k++)
		if (slots[k] != NULL)
			REQUIRE(sheaf_free(c, slots[k]) == 0, "sheaf_free(%p) failed", (void *)slots[k]);
	sheaf_thread_exit();
	ck_assert_uint_eq(cache_stats_of(c, -1).in_use, 0);
	ck_assert_uint_gt(stat_count(c, -1, "free_remote"), 0);
	require_pool_ok(p);
	free(slots);
	sheaf_pool_destroy(p);
}
END_TEST

/* Bytes of the pool's object data that are memory now (the frames the
 * engine released are holes: SEEK_DATA / SEEK_HOLE on the SHARED memfd). */
static uint64_t data_resident(sheaf_pool_t *p)
{
	const struct shm_pool *sp = &p->shm;
	off_t lo = (off_t)(sp->data_off - sp->hdr->off_rw), hi = lo + (off_t)sp->data_len;
	uint64_t total = 0;

	for (off_t pos = lo; pos < hi;) {
		off_t d = lseek(sp->shared_fd, pos, SEEK_DATA), h;

		if (d < 0 || d >= hi)
			break;
		h = lseek(sp->shared_fd, d, SEEK_HOLE);
		ck_assert_int_ge(h, d);
		if (h > hi)
			h = hi;
		total += (uint64_t)(h - d);
		pos = h;
	}
	return total;
}

/* Shrink gives the frames of empty slabs back to the kernel: what stays of
 * the object data is at most the slabs the cache keeps (min_partial).  The
 * data alone is measured: the sheaves the run touched stay memory (they
 * are the pool's, not the cache's), and how many it touches depends on
 * timing (under valgrind, about 10% of the growth).  On 4 KiB pages: a
 * frame punched inside a shmem huge page may stay memory (the kernel
 * zeroes what it cannot split off: 6 frames of 100 stayed, with
 * shmem_enabled=advise), as docs/design.md, "Huge pages", says. */
START_TEST(shrink_releases_memory)
{
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	enum { N = 100000 };     /* ~25 MB */
	void **o = calloc(N, sizeof(*o));
	uint64_t before, peak, after;
	struct sheaf_stats st;

	setenv("SHEAF_HUGE_PAGES", "off", 1);
	p = mkpool(1, 256 << 20, 0);
	unsetenv("SHEAF_HUGE_PAGES");
	c = mkcache(p, "shrink", 256, -1, 0);
	/* No stocking but for a waiter: a worker pass after the shrink
	 * would refill the barn (to barn_high) from the slabs it keeps. */
	at_store_relaxed(&c->sc->barn_low, 0);
	before = data_resident(p);
	for (int i = 0; i < N; i++)
		o[i] = xalloc_touch(c);
	peak = data_resident(p);
	ck_assert_uint_ge(peak - before, (uint64_t)N * 256);
	for (int i = 0; i < N; i++)
		REQUIRE(sheaf_free(c, o[i]) == 0, "sheaf_free(%p) failed", (void *)o[i]);
	ck_assert_int_ge(sheaf_cache_shrink(c), 1);
	after = data_resident(p);
	st = cache_stats_of(c, -1);
	ck_assert_uint_le(st.slabs, c->sc->min_partial);
	ck_assert_msg(after <= before + st.slabs * SLAB_SIZE,
		      "data bytes before %llu peak %llu after %llu, %llu slabs kept",
		      (unsigned long long)before, (unsigned long long)peak,
		      (unsigned long long)after, (unsigned long long)st.slabs);
	ck_assert_uint_ge(stat_count(c, -1, "free_slab"), 1);
	free(o);
	sheaf_thread_exit();
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/* sheaf_line: sheaves in id order, never overlapping, sheaf_at_line its
 * inverse (on every line of a sheaf and of the gap after it), and 25
 * sheaves 2^k ids apart (k = 0..9) use no L1 set for their header and their
 * top entry (objs[255]) more than 4 times of 8 ways (placed back to back,
 * 16 apart: 13 times; W8's main sheaves, docs/design.md, "Where the sheaves
 * lie"). */
START_TEST(sheaf_line_spreads_sets)
{
	const uint64_t lines = sizeof(struct shm_sheaf) / SHEAF_CACHELINE;

	for (uint32_t id = 0; id < (1u << 20); id++) {
		uint64_t l = sheaf_line(id), next = sheaf_line(id + 1);

		REQUIRE(next >= l + lines && next <= l + lines + 2,
			"sheaf %u at line %llu, the next at %llu", id,
			(unsigned long long)l, (unsigned long long)next);
		REQUIRE(sheaf_at_line(l) == id && sheaf_at_line(next - 1) == id &&
			sheaf_at_line(l + lines / 2) == id,
			"sheaf_at_line back from sheaf %u: %u", id, sheaf_at_line(l));
	}
	ck_assert_uint_eq(sheaf_array_bytes(32768), sheaf_line(32768) * SHEAF_CACHELINE);
	/* A line far past any array (the line of a pointer that is no sheaf,
	 * here the one a scribbled dummy main gave): an id past the array at
	 * once (it looped for ever). */
	REQUIRE(sheaf_at_line(848253280314ull) >= (1u << 20), "a far line: sheaf %u",
		sheaf_at_line(848253280314ull));
	REQUIRE(sheaf_at_line(UINT64_MAX / SHEAF_CACHELINE) >= (1u << 20), "the farthest line");
	for (uint32_t step = 1; step <= 512; step *= 2)
		for (uint32_t first = 0; first < 20; first += 7) {
			uint8_t n[64] = { 0 };
			unsigned most = 0;

			for (uint32_t k = 0; k < 25; k++) {
				uint64_t l = sheaf_line(first + k * step);

				n[l & 63]++;
				n[(l + lines - 1) & 63]++;
			}
			for (int i = 0; i < 64; i++)
				most = n[i] > most ? n[i] : most;
			REQUIRE(most <= 4, "25 sheaves %u apart from %u: a set used %u times",
				step, first, most);
		}
}
END_TEST

/* Whether every byte of [@a, @b) of @fd is data (no hole). */
static int all_data(int fd, off_t a, off_t b)
{
	return lseek(fd, a, SEEK_DATA) == a && lseek(fd, a, SEEK_HOLE) >= b;
}

/* A pool-wide shrink punches the pages that only idle sheaves (those in
 * the depot) cover, found by their place in the array (sheaf_line): every
 * sheaf held anywhere else keeps its memory, and its objects. */
START_TEST(shrink_keeps_held_sheaves)
{
	enum { N = 100000, KEEP = 10 };
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	const struct shm_pool *sp;
	void **o = calloc(N, sizeof(*o)), *keep[KEEP];
	off_t base, end;
	uint32_t held = 0;
	char thp[128] = "";
	FILE *f;

	setenv("SHEAF_HUGE_PAGES", "off", 1);
	p = mkpool(1, 64 << 20, 0);
	unsetenv("SHEAF_HUGE_PAGES");
	sp = &p->shm;
	c = mkcache(p, "idle", 64, -1, 0);
	for (int i = 0; i < N; i++)
		o[i] = xalloc_touch(c);
	for (int i = 0; i < N; i++)
		REQUIRE(sheaf_free(c, o[i]) == 0, "sheaf_free(%p) failed", o[i]);
	for (int k = 0; k < KEEP; k++)
		keep[k] = xalloc_touch(c);
	engine_shrink(&p->engine, -1, 1);
	base = (off_t)(sp->hdr->off_sheaves - sp->hdr->off_rw);
	end = base + (off_t)sp->sheaf_count * (off_t)sizeof(struct shm_sheaf);
	for (uint32_t s = 0; s < sp->sheaf_count; s++) {
		uint32_t own = at_load_relaxed(&sp->owners[s]);
		off_t a = base + ((char *)pool_sheaf(sp, s) - (char *)sp->sheaves);

		if (own == OWNER_RING(RING_DEPOT))
			continue;
		held++;
		REQUIRE(all_data(sp->shared_fd, a, a + (off_t)sizeof(struct shm_sheaf)),
			"sheaf %u (owner %#x, at %lld) lost memory", s, own, (long long)a);
	}
	ck_assert_uint_ge(held, 2);            /* the thread's main and spare */
	/* With shmem huge pages forced, a punch may leave zeroed memory. */
	f = fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "r");
	if (f != NULL) {
		if (fgets(thp, sizeof(thp), f) == NULL)
			thp[0] = '\0';
		fclose(f);
	}
	if (strstr(thp, "[always]") == NULL && strstr(thp, "[force]") == NULL)
		ck_assert_msg(!all_data(sp->shared_fd, base, end),
			      "no page of the idle sheaves was given back");
	else
		printf("shrink_keeps_held_sheaves: shmem huge pages forced (%s): "
		       "the release of idle pages not asserted\n", thp);
	for (int k = 0; k < KEEP; k++)
		REQUIRE(sheaf_free(c, keep[k]) == 0, "sheaf_free(%p) failed", keep[k]);
	free(o);
	sheaf_thread_exit();
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

START_TEST(config_errors)
{
	struct sheaf_pool_config bad = { .nodes = 9 };
	char err[256] = "";
	sheaf_pool_t *p;

	ck_assert_ptr_null(sheaf_pool_create(&bad, err, sizeof(err)));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_msg(strstr(err, "nodes") != NULL, "message: %s", err);
	p = mkpool(1, 16 << 20, 0);
	struct sheaf_cache_config cc = { .capacity = 300 };
	ck_assert_ptr_null(sheaf_cache_create(p, "x", 64, &cc));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_null(sheaf_cache_create(p, "x", 0, NULL));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_null(sheaf_cache_create(p, "x", (size_t)SHEAF_CACHE_MAX_SIZE + 1, NULL));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_null(sheaf_cache_create(p, "x", (16 << 20) + 1, NULL)); /* > the node */
	ck_assert_int_eq(errno, EFBIG);
	cc = (struct sheaf_cache_config){ .align = 24, .capacity = -1 };
	ck_assert_ptr_null(sheaf_cache_create(p, "x", 64, &cc));
	ck_assert_int_eq(errno, EINVAL);
	cc = (struct sheaf_cache_config){ .capacity = -1, .flags = 0x80 };
	ck_assert_ptr_null(sheaf_cache_create(p, "x", 64, &cc));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_ptr_nonnull(sheaf_cache_create(p, "x", 64, NULL));
	ck_assert_ptr_null(sheaf_cache_create(p, "x", 64, NULL));
	ck_assert_int_eq(errno, EEXIST);
	ck_assert_ptr_nonnull(sheaf_cache_open(p, "x"));
	ck_assert_ptr_null(sheaf_cache_open(p, "nope"));
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_uint_eq(capacity_of(sheaf_cache_open(p, "x")), 256);
	sheaf_pool_destroy(p);
}
END_TEST

START_TEST(default_capacities)
{
	sheaf_pool_t *p = mkpool(1, 16 << 20, 0);
	/* max(the kernel's 60/28/12/4 steps, 16 KiB of objects), at most
	 * 256; 257 B objects are 264 B with 8-byte alignment. */
	const struct { size_t size; unsigned cap; } t[] = {
		{ 8, 256 }, { 64, 256 }, { 100, 157 }, { 128, 128 }, { 256, 64 },
		{ 257, 62 }, { 512, 32 }, { 1024, 28 }, { 1025, 15 }, { 2048, 12 },
		{ 4096, 12 }, { 4097, 4 }, { 65536, 4 },
	};
	for (unsigned i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		char name[16];
		snprintf(name, sizeof(name), "c%u", i);
		sheaf_cache_t *c = sheaf_cache_create(p, name, t[i].size, NULL);
		ck_assert_ptr_nonnull(c);
		ck_assert_uint_eq(capacity_of(c), t[i].cap);
	}
	sheaf_pool_destroy(p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sheaf");

	ADD_ALONE(s, fast_path_and_swaps, 120);
	ADD_ALONE(s, stash_bounds, 120);
	ADD_ALONE(s, empty_barn_refilled, 120);
	ADD_ALONE(s, overfull_barn_flushed, 120);
	ADD_ALONE(s, remote_frees_2_nodes, 120);
	ADD_ALONE(s, remote_frees_4_nodes, 120);
	ADD_ALONE(s, bad_frees_detected, 120);
	ADD_ALONE(s, sheaves_disabled, 120);
	ADD_ALONE(s, capacity_tuned_at_run_time, 120);
	ADD_ALONE(s, fast_counts_while_running, 120);
	ADD_ALONE(s, live_counts_wrap_and_repair, 120);
	ADD_ALONE(s, thread_exit_returns_sheaves, 120);
	ADD_ALONE(s, stress_threads_then_check, 120);
	ADD_ALONE(s, shrink_releases_memory, 120);
	ADD_ALONE(s, sheaf_line_spreads_sets, 120);
	ADD_ALONE(s, shrink_keeps_held_sheaves, 120);
	ADD_ALONE(s, config_errors, 120);
	ADD_ALONE(s, default_capacities, 120);
	return run_suite(s);
}
