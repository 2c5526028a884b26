/*
 * test_large.c - large objects (above SHEAF_CACHE_LARGE_MIN) on local
 * pools: every large class's boundaries, the frame owner map of a
 * multi-frame slab, frees of pointers into the middle of an object, into
 * its later frames, of a stale object and double frees (refused, nothing
 * corrupted: the pool checker passes), realloc across 64 KiB and between
 * large classes keeping contents, caches of large fixed sizes, names and
 * deferred frees of large objects, and their pages going back to the
 * kernel beyond the pool's large_retain budget (the SHARED memfd's
 * allocated blocks), a batch of them kept in the barn while the pool is
 * far from its cap, and each node's threads getting that node's memory.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "client/sheaf.h"
#include "client/internal.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_pool.h"

#define MIB (1u << 20)
#define POOL_BYTES (256u * MIB)      /* one node: the node size */

static sheaf_pool_t *mkpool(void)
{
	struct sheaf_pool_config cfg = { .nodes = 1, .size = POOL_BYTES };

	return pool_new(&cfg);
}

/* The large classes a 256 MiB node serves without filling it. */
static const size_t large[] = { 128u << 10, 256u << 10, 512u << 10, 1 * MIB, 2 * MIB,
				4 * MIB, 8 * MIB, 16 * MIB, 32 * MIB, 64 * MIB };
#define NLARGE (sizeof(large) / sizeof(large[0]))

static size_t class_of(size_t size)
{
	for (size_t k = 0; k < NLARGE; k++)
		if (large[k] >= size)
			return large[k];
	return 0;
}

/* Allocate @size: its class, page aligned, the first and last byte of the
 * class ours; free it. */
static void one_size(sheaf_pool_t *p, size_t size)
{
	size_t want = class_of(size);
	unsigned char *o = sheaf_malloc(p, size);

	REQUIRE(o != NULL, "sheaf_malloc(%zu): %s", size, strerror(errno));
	REQUIRE(sheaf_obj_size(p, o) == want, "sheaf_malloc(%zu): usable %zu, want %zu",
		size, sheaf_obj_size(p, o), want);
	REQUIRE(((uintptr_t)o & 4095) == 0, "sheaf_malloc(%zu) = %p: not page aligned",
		size, (void *)o);
	o[0] = 1;
	o[want - 1] = 2;
	REQUIRE(sheaf_free_any(p, o) == 0, "sheaf_free_any after sheaf_malloc(%zu)", size);
}

START_TEST(large_class_boundaries)
{
	sheaf_pool_t *p = mkpool();

	one_size(p, 65536 + 1);
	for (size_t k = 0; k < NLARGE; k++) {
		one_size(p, large[k] - 1);
		one_size(p, large[k]);
		if (k + 1 < NLARGE)
			one_size(p, large[k] + 1);
	}
	/* 65536 stays in the last small class */
	{
		void *o = sheaf_malloc(p, 65536);

		ck_assert_ptr_nonnull(o);
		ck_assert_uint_eq(sheaf_obj_size(p, o), 65536);
		ck_assert_int_eq(sheaf_free_any(p, o), 0);
	}
	/* the largest is the node's data; above it, EFBIG */
	errno = 0;
	ck_assert_ptr_null(sheaf_malloc(p, POOL_BYTES + 1));
	ck_assert_int_eq(errno, EFBIG);
	errno = 0;
	ck_assert_ptr_null(sheaf_malloc(p, (size_t)SHEAF_KMALLOC_MAX + 1));
	ck_assert_int_eq(errno, EFBIG);
	errno = 0;
	ck_assert_ptr_null(sheaf_calloc(p, 2, POOL_BYTES));
	ck_assert_int_eq(errno, EFBIG);
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/* A 1 MiB object's slab: four frames, the first the cache's, the others
 * FRAME_TAIL | cache.  Frees of anything but its start are refused. */
START_TEST(large_bad_frees)
{
	sheaf_pool_t *p = mkpool();
	struct shm_pool *s = &p->shm;
	char *o = sheaf_malloc(p, MIB), *a, *b;
	sheaf_cache_t *c;
	uint32_t f;

	ck_assert_ptr_nonnull(o);
	c = sheaf_obj_cache(p, o);
	ck_assert_ptr_nonnull(c);
	f = pool_frame_of(s, (uint64_t)(o - s->base));
	ck_assert_uint_eq(s->frame_owner[f], c->id);
	for (uint32_t k = 1; k < 4; k++)
		ck_assert_uint_eq(s->frame_owner[f + k], FRAME_TAIL | c->id);
	memset(o, 0x5a, MIB);
	/* inside the object: its first frame, a later one, its last byte */
	ck_assert_int_eq(sheaf_free_any(p, o + 4096), -EINVAL);
	ck_assert_int_eq(sheaf_free_any(p, o + 8), -EINVAL);
	ck_assert_int_eq(sheaf_free_any(p, o + SLAB_SIZE), -EINVAL);
	ck_assert_int_eq(sheaf_free_any(p, o + 3 * SLAB_SIZE), -EINVAL);
	ck_assert_int_eq(sheaf_free_any(p, o + MIB - 8), -EINVAL);
	ck_assert_int_eq(sheaf_free(c, o + SLAB_SIZE), -EINVAL);
	ck_assert_int_eq(sheaf_free(c, o + 2 * SLAB_SIZE), -EINVAL);
	errno = 0;
	ck_assert_uint_eq(sheaf_obj_size(p, o + SLAB_SIZE), 0);
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(sheaf_realloc(p, o + SLAB_SIZE, 2 * MIB));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(sheaf_name_set(p, "large-mid", o + SLAB_SIZE) != 0, 1);
	/* nothing was freed or changed */
	for (size_t i = 0; i < MIB; i += 4096)
		REQUIRE((unsigned char)o[i] == 0x5a, "byte %zu changed", i);
	ck_assert_int_eq(sheaf_free_any(p, o), 0);
	/* the immediate double free, as in any class */
	ck_assert_int_eq(sheaf_free_any(p, o), -EALREADY);
	ck_assert_int_eq(sheaf_free(c, o), -EALREADY);
	/* a class made beforehand with SHEAF_CACHE_DEBUG refuses every one
	 * (one behind another free too), deferred or not */
	{
		struct sheaf_cache_config cfg = { .capacity = SHEAF_CAPACITY_DEFAULT,
						  .flags = SHEAF_CACHE_DEBUG };
		sheaf_cache_t *dbg = sheaf_cache_create(p, "kmalloc-2097152", 2 * MIB, &cfg);

		ck_assert_ptr_nonnull(dbg);
		a = sheaf_malloc(p, 2 * MIB);
		b = sheaf_malloc(p, 2 * MIB - 5);
		ck_assert_ptr_eq(sheaf_obj_cache(p, a), dbg);
		ck_assert_int_eq(sheaf_free_any(p, a), 0);
		ck_assert_int_eq(sheaf_free_any(p, b), 0);
		ck_assert_int_eq(sheaf_free_any(p, a), -EALREADY);
		ck_assert_int_eq(sheaf_free(dbg, b), -EALREADY);
		ck_assert_int_eq(sheaf_free_deferred(dbg, a), -EALREADY);
		a = sheaf_malloc(p, 2 * MIB);
		b = sheaf_malloc(p, 2 * MIB);
		ck_assert_ptr_ne(a, b);             /* none handed out twice */
		ck_assert_int_eq(sheaf_free_any(p, a), 0);
		ck_assert_int_eq(sheaf_free_any(p, b), 0);
		ck_assert_uint_eq(cache_stats_of(dbg, -1).in_use, 0);
	}
	a = sheaf_malloc(p, MIB);
	b = sheaf_malloc(p, MIB);
	o = sheaf_malloc(p, MIB);
	ck_assert_ptr_nonnull(o);
	ck_assert_ptr_ne(a, b);
	ck_assert_ptr_ne(a, o);
	ck_assert_ptr_ne(b, o);
	ck_assert_int_eq(sheaf_free_any(p, a), 0);
	ck_assert_int_eq(sheaf_free_any(p, b), 0);
	/* a stale object: its slab went back (the thread's sheaves flushed,
	 * the cache shrunk), its frames are free */
	ck_assert_int_eq(sheaf_free_any(p, o), 0);
	sheaf_thread_exit();
	ck_assert_int_ge(sheaf_cache_shrink(c), 1);
	ck_assert_uint_eq(s->frame_owner[pool_frame_of(s, (uint64_t)(o - s->base))], FRAME_FREE);
	ck_assert_int_eq(sheaf_free_any(p, o), -EINVAL);
	ck_assert_int_eq(sheaf_free(c, o), -EINVAL);
	ck_assert_uint_eq(cache_stats_of(c, -1).in_use, 0);
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

static void fill(unsigned char *o, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		o[i] = (unsigned char)(i * 7 + (i >> 12) + seed);
}

static void require_fill(const unsigned char *o, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		REQUIRE(o[i] == (unsigned char)(i * 7 + (i >> 12) + seed),
			"byte %zu of %zu lost", i, n);
}

START_TEST(large_realloc_keeps_contents)
{
	sheaf_pool_t *p = mkpool();
	static const size_t steps[] = { 60000, 65536, 65537, 200000, 3 * MIB, 5 * MIB + 3,
					70000, 1000, 16 * MIB, 100 };
	unsigned char *o = sheaf_malloc(p, 1000), *n;
	size_t have = 1000;

	ck_assert_ptr_nonnull(o);
	fill(o, have, 1);
	for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
		n = sheaf_realloc(p, o, steps[k]);
		REQUIRE(n != NULL, "realloc %zu -> %zu: %s", have, steps[k], strerror(errno));
		require_fill(n, have < steps[k] ? have : steps[k], 1);
		o = n;
		have = steps[k];
		fill(o, have, 1);
	}
	/* within a large class: the same object */
	o = sheaf_realloc(p, o, 3 * MIB);
	ck_assert_ptr_nonnull(o);
	ck_assert_ptr_eq(sheaf_realloc(p, o, 2 * MIB + 1), o);
	ck_assert_ptr_eq(sheaf_realloc(p, o, 4 * MIB), o);
	/* too big: refused, the object kept */
	errno = 0;
	ck_assert_ptr_null(sheaf_realloc(p, o, POOL_BYTES + 1));
	ck_assert_int_eq(errno, EFBIG);
	ck_assert_uint_eq(sheaf_obj_size(p, o), 4 * MIB);
	ck_assert_int_eq(sheaf_free_any(p, o), 0);
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/* A cache of a large size that is no power of two (nor of frames): one
 * object per slab of ceil(size / 256 KiB) frames, none overlapping. */
START_TEST(large_fixed_cache)
{
	sheaf_pool_t *p = mkpool();
	size_t size = 3 * MIB + 4097;
	sheaf_cache_t *c = sheaf_cache_create(p, "frames-3m", size, NULL);
	unsigned char *o[8];
	unsigned cap;

	ck_assert_ptr_nonnull(c);
	ck_assert_uint_eq(sheaf_cache_object_size(c), (size + 7) & ~(size_t)7);
	ck_assert_int_eq(sheaf_cache_get_capacity(c, &cap), 0);
	ck_assert_uint_eq(cap, 1);                  /* 4 MiB of them at most */
	for (int i = 0; i < 8; i++) {
		o[i] = sheaf_alloc(c);
		REQUIRE(o[i] != NULL, "alloc %d: %s", i, strerror(errno));
		REQUIRE(((uintptr_t)o[i] & (SLAB_SIZE - 1)) == 0, "object %d starts no frame", i);
		fill(o[i], size, (unsigned)i);
	}
	for (int i = 0; i < 8; i++) {
		require_fill(o[i], size, (unsigned)i);
		for (int j = 0; j < 8; j++)
			REQUIRE(i == j || o[i] + size <= o[j] || o[j] + size <= o[i],
				"objects %d and %d overlap", i, j);
	}
	ck_assert_int_eq(sheaf_free(c, o[0] + 3 * MIB), -EINVAL);
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(sheaf_free_any(p, o[i]), 0);
	ck_assert_uint_eq(cache_stats_of(c, -1).in_use, 0);
	/* larger than a node: EFBIG; above SHEAF_CACHE_MAX_SIZE: EINVAL */
	errno = 0;
	ck_assert_ptr_null(sheaf_cache_create(p, "too-big", POOL_BYTES + 1, NULL));
	ck_assert_int_eq(errno, EFBIG);
	errno = 0;
	ck_assert_ptr_null(sheaf_cache_create(p, "too-big", (size_t)SHEAF_CACHE_MAX_SIZE + 1,
					      NULL));
	ck_assert_int_eq(errno, EINVAL);
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/* Names point at large objects; deferred frees defer them. */
START_TEST(large_names_and_deferred)
{
	sheaf_pool_t *p = mkpool();
	unsigned char *o = sheaf_malloc(p, 2 * MIB), *d;
	sheaf_cache_t *c;

	ck_assert_ptr_nonnull(o);
	fill(o, 2 * MIB, 9);
	ck_assert_int_eq(sheaf_name_set(p, "large-frame", o), 0);
	ck_assert_ptr_eq(sheaf_name_get(p, "large-frame"), o);
	require_fill(sheaf_name_get(p, "large-frame"), 2 * MIB, 9);
	ck_assert_int_eq(sheaf_name_del(p, "large-frame"), 0);
	c = sheaf_obj_cache(p, o);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(sheaf_free_deferred(c, o), 0);
	ck_assert_int_eq(sheaf_synchronize(p, 10000), 0);
	d = sheaf_malloc(p, 2 * MIB);
	ck_assert_ptr_nonnull(d);
	ck_assert_int_eq(sheaf_free_any(p, d), 0);
	sheaf_thread_exit();
	ck_assert_uint_eq(cache_stats_of(c, -1).in_use, 0);
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/* Bytes the SHARED memfd has allocated (its pages in memory). */
static uint64_t shared_bytes(const sheaf_pool_t *p)
{
	struct stat st;

	REQUIRE(fstat(p->shm.shared_fd, &st) == 0, "fstat: %s", strerror(errno));
	return (uint64_t)st.st_blocks * 512;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/*
 * 48 objects of 1 MiB written whole, then freed: beyond what the class's
 * barn keeps (16 MiB of full sheaves) and the pool's large_retain (8 MiB
 * here), their pages go back to the kernel without a shrink, as soon as
 * the engine's worker flushed the barn; a shrink returns the rest.
 */
START_TEST(large_memory_goes_back)
{
	sheaf_pool_t *p;
	enum { N = 48 };
	unsigned char *o[N];
	sheaf_cache_t *c;
	uint64_t base, full, now = 0, retain = 8 * MIB, bound;

	setenv("SHEAF_HUGE_PAGES", "off", 1);       /* 4 KiB pages: exact punches */
	p = mkpool();
	at_store_relaxed(&p->shm.hdr->large_retain, retain);
	base = shared_bytes(p);
	for (int i = 0; i < N; i++) {
		o[i] = sheaf_malloc(p, MIB);
		REQUIRE(o[i] != NULL, "malloc %d: %s", i, strerror(errno));
		memset(o[i], i, MIB);
	}
	full = shared_bytes(p);
	REQUIRE(full >= base + (uint64_t)N * MIB, "%llu bytes allocated, want %u MiB more",
		(unsigned long long)(full - base), N);
	c = sheaf_obj_cache(p, o[0]);
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(sheaf_free_any(p, o[i]), 0);
	sheaf_thread_exit();                        /* the thread's sheaves to the barn */
	/* the barn's limit, the retained slabs and 2 MiB of slack (sheaves,
	 * rings and lanes touched meanwhile) */
	bound = base + 16 * MIB + retain + 2 * MIB;
	for (int t = 0; t < 1000; t++) {
		now = shared_bytes(p);
		if (now <= bound)
			break;
		sleep_ms(10);
	}
	REQUIRE(now <= bound, "%llu MiB still allocated after the frees, want <= %llu",
		(unsigned long long)((now - base) >> 20),
		(unsigned long long)((bound - base) >> 20));
	REQUIRE(at_load_relaxed(&p->shm.hdr->large_retained) <= retain,
		"%llu bytes retained over the budget",
		(unsigned long long)at_load_relaxed(&p->shm.hdr->large_retained));
	ck_assert_int_ge(sheaf_cache_shrink(c), 1);
	now = shared_bytes(p);
	REQUIRE(now <= base + 2 * MIB, "%llu MiB still allocated after the shrink",
		(unsigned long long)((now - base) >> 20));
	ck_assert_uint_eq(at_load_relaxed(&p->shm.hdr->large_retained), 0);
	require_pool_ok(p);
	sheaf_pool_destroy(p);
	unsetenv("SHEAF_HUGE_PAGES");
}
END_TEST

/* Within the budget, freed large slabs stay: the next allocations reuse
 * their pages (no page is allocated again).  The first rounds may still
 * touch fresh frames: the worker refills the drained barn ahead
 * (barn_low) while the thread holds every object, from new slabs; once
 * the objects in circulation cover the batch and that refill, a round
 * allocates nothing. */
START_TEST(large_retained_reused)
{
	sheaf_pool_t *p;
	enum { N = 24 };
	unsigned char *o[N];
	uint64_t base, full, again;

	setenv("SHEAF_HUGE_PAGES", "off", 1);
	p = mkpool();
	for (int round = 0; round < 8; round++) {
		base = shared_bytes(p);
		for (int i = 0; i < N; i++) {
			o[i] = sheaf_malloc(p, 2 * MIB);
			REQUIRE(o[i] != NULL, "malloc %d: %s", i, strerror(errno));
			memset(o[i], round, 2 * MIB);
		}
		full = shared_bytes(p);
		for (int i = 0; i < N; i++)
			ck_assert_int_eq(sheaf_free_any(p, o[i]), 0);
		again = shared_bytes(p);
		REQUIRE(again + 2 * MIB >= full, "pages went back within the budget");
		if (round >= 6)
			REQUIRE(full <= base + 2 * MIB, "round %d allocated %llu MiB again",
				round, (unsigned long long)((full - base) >> 20));
	}
	require_pool_ok(p);
	sheaf_pool_destroy(p);
	unsetenv("SHEAF_HUGE_PAGES");
}
END_TEST

/* Counter @name of @c's statistics. */
static uint64_t stat_of(sheaf_cache_t *c, const char *name)
{
	struct sheaf_stats st;

	REQUIRE(sheaf_cache_stats(c, -1, &st) == 0, "sheaf_cache_stats");
	for (unsigned i = 0; i < st.nstat; i++)
		if (strcmp(sheaf_stat_name(i), name) == 0)
			return st.stat[i];
	REQUIRE(0, "no counter %s", name);
	return 0;
}

/* Far from the memory cap, a batch of large objects freed and allocated
 * again stays in the barn (what the unused large_retain covers): 16
 * objects of 4 MiB (sheaves of one, a barn limit of four) take no flush
 * to the slabs once the batch circulates, and no refill from them each
 * round.  A worker that runs while the batch is out (the allocs took the
 * barn under barn_low and rang) restocks the barn: DEBUG=1 beside two
 * busy loops, 2 refills in 8 rounds, 5 runs in 40; without the keep
 * every round took a refill and a flush. */
START_TEST(large_batch_kept_in_barn)
{
	sheaf_pool_t *p;
	enum { N = 16, WARM = 4, ROUNDS = 12 };
	unsigned char *o[N];
	sheaf_cache_t *c = NULL;
	uint64_t refill = 0, flush = 0;

	setenv("SHEAF_HUGE_PAGES", "off", 1);
	p = mkpool();
	for (int round = 0; round < ROUNDS; round++) {
		if (round == WARM) {
			refill = stat_of(c, "sheaf_refill");
			flush = stat_of(c, "sheaf_flush");
		}
		for (int i = 0; i < N; i++) {
			o[i] = sheaf_malloc(p, 4 * MIB);
			REQUIRE(o[i] != NULL, "malloc %d: %s", i, strerror(errno));
			o[i][0] = (unsigned char)round;
		}
		c = sheaf_obj_cache(p, o[0]);
		for (int i = 0; i < N; i++)
			ck_assert_int_eq(sheaf_free_any(p, o[i]), 0);
		sleep_ms(5);            /* a worker woken by a put over the limit runs */
	}
	REQUIRE(stat_of(c, "sheaf_flush") == flush &&
		stat_of(c, "sheaf_refill") - refill < ROUNDS - WARM,
		"%d rounds of %d objects of 4 MiB: %llu flushes, %llu refills through the engine",
		ROUNDS - WARM, N, (unsigned long long)(stat_of(c, "sheaf_flush") - flush),
		(unsigned long long)(stat_of(c, "sheaf_refill") - refill));
	require_pool_ok(p);
	sheaf_pool_destroy(p);
	unsetenv("SHEAF_HUGE_PAGES");
}
END_TEST

/* A large object lies in its thread's home node, as a small one: each
 * node's threads get objects whose every frame is of that node. */
START_TEST(large_home_node)
{
	struct sheaf_pool_config cfg = { .nodes = 2, .size = POOL_BYTES };
	sheaf_pool_t *p = pool_new(&cfg);
	struct shm_pool *s = &p->shm;

	for (int node = 0; node < 2; node++) {
		unsigned char *o[4];

		ck_assert_int_eq(sheaf_thread_set_node(p, node), 0);
		for (int i = 0; i < 4; i++) {
			uint64_t off;

			o[i] = sheaf_malloc(p, 3 * MIB);
			ck_assert_ptr_nonnull(o[i]);
			off = (uint64_t)((char *)o[i] - s->base);
			ck_assert_uint_eq(pool_node_of_frame(s, pool_frame_of(s, off)), node);
			ck_assert_uint_eq(pool_node_of_frame(s, pool_frame_of(s, off + 4 * MIB - 1)),
					  node);
		}
		for (int i = 0; i < 4; i++)
			ck_assert_int_eq(sheaf_free_any(p, o[i]), 0);
	}
	sheaf_thread_exit();
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("large");

	ADD_ALONE(s, large_class_boundaries, 120);
	ADD_ALONE(s, large_bad_frees, 120);
	ADD_ALONE(s, large_realloc_keeps_contents, 120);
	ADD_ALONE(s, large_fixed_cache, 120);
	ADD_ALONE(s, large_names_and_deferred, 120);
	ADD_ALONE(s, large_memory_goes_back, 120);
	ADD_ALONE(s, large_retained_reused, 120);
	ADD_ALONE(s, large_batch_kept_in_barn, 120);
	ADD_ALONE(s, large_home_node, 120);
	return run_suite(s);
}
