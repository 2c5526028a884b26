/*
 * test_kmalloc.c - the size classes: sheaf_malloc, sheaf_calloc,
 * sheaf_realloc, sheaf_free_any, sheaf_free_sized, sheaf_obj_size,
 * sheaf_obj_cache.  On local pools: every class boundary, calloc, realloc
 * across classes, every kind of bad pointer given to free_any and
 * free_sized (and to obj_size / obj_cache), wrong sizes, a debug
 * class cache made beforehand, objects of an ordinary cache, racing first
 * uses of a class.  Against a real sheafd: an object allocated in one
 * process and freed in another with sheaf_free_any, and the classes seen
 * by sheafctl.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "client/sheaf.h"
#include "client/internal.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_pool.h"
#include "tests/helpers/util_proc.h"

/* The cache's sheaf capacity, or ~0u when sheaf_cache_get_capacity fails. */
static unsigned capacity_of(const sheaf_cache_t *c)
{
	unsigned cap;

	return sheaf_cache_get_capacity(c, &cap) == 0 ? cap : ~0u;
}

static const size_t classes[] = { 8, 16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224,
				  256, 320, 384, 448, 512, 576, 640, 704, 768, 832, 896, 960,
				  1024, 2048, 4096, 8192, 16384, 32768, 65536,
				  /* large classes (test_large.c goes further) */
				  128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20 };
#define NCLASSES (sizeof(classes) / sizeof(classes[0]))
#define POOL_BYTES (256u << 20)     /* mkpool's: one node */

static sheaf_pool_t *mkpool(void)
{
	struct sheaf_pool_config cfg = { .nodes = 1, .size = POOL_BYTES };

	return pool_new(&cfg);
}

/* The class sheaf_malloc must use for @size. */
static size_t class_of(size_t size)
{
	for (size_t k = 0; k < NCLASSES; k++)
		if (classes[k] >= size)
			return classes[k];
	return 0;
}

/* The handle of cache "kmalloc-@size", which must exist. */
static sheaf_cache_t *class_cache(sheaf_pool_t *p, size_t size)
{
	char name[48];
	sheaf_cache_t *c;

	snprintf(name, sizeof(name), "kmalloc-%zu", size);
	c = sheaf_cache_open(p, name);
	REQUIRE(c != NULL, "no cache %s: %s", name, strerror(errno));
	return c;
}

/* Allocate @size, check the class and that the whole usable size is ours,
 * free it. */
static void one_size(sheaf_pool_t *p, size_t size)
{
	size_t want = class_of(size);
	unsigned char *o = sheaf_malloc(p, size);

	REQUIRE(o != NULL, "sheaf_malloc(%zu): %s", size, strerror(errno));
	REQUIRE(sheaf_obj_size(p, o) == want, "sheaf_malloc(%zu): usable %zu, want %zu",
		size, sheaf_obj_size(p, o), want);
	REQUIRE(sheaf_obj_cache(p, o) == class_cache(p, want), "sheaf_malloc(%zu): cache", size);
	REQUIRE(sheaf_cache_object_size(sheaf_obj_cache(p, o)) == want, "object size");
	REQUIRE(((uintptr_t)o & ((want & -want) > 4096 ? 4095 : (want & -want) - 1)) == 0,
		"sheaf_malloc(%zu) = %p: not aligned", size, (void *)o);
	memset(o, 0xa5, want);
	REQUIRE(sheaf_free_any(p, o) == 0, "sheaf_free_any after sheaf_malloc(%zu)", size);
}

START_TEST(class_boundaries)
{
	sheaf_pool_t *p = mkpool();

	one_size(p, 0);
	one_size(p, 1);
	for (size_t k = 0; k < NCLASSES; k++) {
		one_size(p, classes[k] - 1);
		one_size(p, classes[k]);
		if (k + 1 < NCLASSES)
			one_size(p, classes[k] + 1);
	}
	errno = 0;
	ck_assert_ptr_null(sheaf_malloc(p, SHEAF_KMALLOC_MAX + 1));
	ck_assert_int_eq(errno, EFBIG);
	errno = 0;                          /* above the node's data */
	ck_assert_ptr_null(sheaf_malloc(p, POOL_BYTES + 1));
	ck_assert_int_eq(errno, EFBIG);
	errno = 0;
	ck_assert_ptr_null(sheaf_malloc(p, SIZE_MAX));
	ck_assert_int_eq(errno, EFBIG);
	/* every class is an ordinary cache, object size = class */
	for (size_t k = 0; k < NCLASSES; k++)
		ck_assert_uint_eq(sheaf_cache_object_size(class_cache(p, classes[k])), classes[k]);
	/* capacity: the objects of SHEAF_KMALLOC_SHEAF_BYTES, at most 256
	 * (above the default rule's for every class), tunable as any cache;
	 * large classes 4 objects of at most 4 MiB in all, at least one */
	for (size_t k = 0; k < NCLASSES; k++) {
		size_t want = classes[k] > SHEAF_CACHE_LARGE_MIN ?
			((4u << 20) / classes[k] > 4 ? 4 : (4u << 20) / classes[k]) :
			SHEAF_KMALLOC_SHEAF_BYTES / classes[k];

		REQUIRE(capacity_of(class_cache(p, classes[k])) == (want > 256 ? 256 : want),
			"kmalloc-%zu: capacity %u", classes[k],
			capacity_of(class_cache(p, classes[k])));
	}
	ck_assert_int_eq(sheaf_cache_set_capacity(class_cache(p, 1024), 28), 0);
	ck_assert_uint_eq(capacity_of(class_cache(p, 1024)), 28);
	one_size(p, 1000);
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

START_TEST(calloc_zeroes_and_overflows)
{
	sheaf_pool_t *p = mkpool();
	unsigned char *o = sheaf_malloc(p, 200), *z;

	memset(o, 0xff, 256);
	ck_assert_int_eq(sheaf_free_any(p, o), 0);
	z = sheaf_calloc(p, 25, 8);           /* 200: the same class, the same object */
	ck_assert_ptr_nonnull(z);
	for (int i = 0; i < 200; i++)
		REQUIRE(z[i] == 0, "byte %d not zeroed", i);
	ck_assert_int_eq(sheaf_free_any(p, z), 0);
	errno = 0;
	ck_assert_ptr_null(sheaf_calloc(p, SIZE_MAX / 2, 3));
	ck_assert_int_eq(errno, EOVERFLOW);
	errno = 0;
	ck_assert_ptr_null(sheaf_calloc(p, 1 << 20, 1 << 20));
	ck_assert_int_eq(errno, EFBIG);
	z = sheaf_calloc(p, 0, 16);
	ck_assert_ptr_nonnull(z);
	ck_assert_uint_eq(sheaf_obj_size(p, z), 8);
	ck_assert_int_eq(sheaf_free_any(p, z), 0);
	sheaf_pool_destroy(p);
}
END_TEST

static void fill(unsigned char *o, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		o[i] = (unsigned char)(i * 7 + seed);
}

static void require_fill(const unsigned char *o, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		REQUIRE(o[i] == (unsigned char)(i * 7 + seed), "byte %zu of %zu lost", i, n);
}

START_TEST(realloc_across_classes)
{
	sheaf_pool_t *p = mkpool();
	unsigned char *o = sheaf_realloc(p, NULL, 5), *n;   /* NULL: malloc */
	size_t have = 5;

	ck_assert_ptr_nonnull(o);
	ck_assert_uint_eq(sheaf_obj_size(p, o), 8);
	fill(o, have, 3);
	/* up through every class, then down again */
	for (size_t k = 1; k < NCLASSES; k++) {
		n = sheaf_realloc(p, o, classes[k]);
		REQUIRE(n != NULL && n != o, "realloc to %zu: %s", classes[k], strerror(errno));
		require_fill(n, have, 3);
		o = n;
		have = classes[k];
		fill(o, have, 3);
		/* the same class: the same object */
		REQUIRE(sheaf_realloc(p, o, classes[k - 1] + 1) == o, "same class moved");
	}
	for (size_t k = NCLASSES - 1; k-- > 0;) {
		n = sheaf_realloc(p, o, classes[k]);
		REQUIRE(n != NULL && n != o, "realloc down to %zu", classes[k]);
		require_fill(n, classes[k], 3);
		o = n;
	}
	/* too big: refused, the object unchanged */
	errno = 0;
	ck_assert_ptr_null(sheaf_realloc(p, o, SHEAF_KMALLOC_MAX + 1));
	ck_assert_int_eq(errno, EFBIG);
	errno = 0;
	ck_assert_ptr_null(sheaf_realloc(p, o, POOL_BYTES + 1));
	ck_assert_int_eq(errno, EFBIG);
	require_fill(o, 8, 3);
	/* size 0: the 8-byte class, never a free */
	n = sheaf_realloc(p, o, 0);
	ck_assert_ptr_eq(n, o);
	o = sheaf_realloc(p, o, 100);
	ck_assert_ptr_nonnull(o);
	n = sheaf_realloc(p, o, 0);
	ck_assert_ptr_nonnull(n);
	ck_assert_uint_eq(sheaf_obj_size(p, n), 8);
	require_fill(n, 8, 3);
	/* a bad pointer: refused, nothing allocated */
	errno = 0;
	ck_assert_ptr_null(sheaf_realloc(p, (char *)n + 1, 64));
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(sheaf_free_any(p, n), 0);
	for (size_t k = 0; k < NCLASSES; k++)
		ck_assert_uint_eq(cache_stats_of(class_cache(p, classes[k]), -1).in_use, 0);
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/*
 * kmalloc-16384: 16 objects a frame, capacity 16.  The first malloc makes
 * the class and refills; the 15 others take the fast path, so the
 * thread's main sheaf ends empty and the hint names @objs[15].  Returns
 * the class's cache, every empty slab of which goes back (min_partial 0).
 */
static sheaf_cache_t *malloc_one_frame(sheaf_pool_t *p, char **objs)
{
	sheaf_cache_t *c;

	for (int i = 0; i < 16; i++) {
		objs[i] = sheaf_malloc(p, 16384);
		ck_assert_ptr_nonnull(objs[i]);
	}
	c = sheaf_obj_cache(p, objs[15]);
	ck_assert_ptr_nonnull(c);
	c->sc->min_partial = 0;
	return c;
}

/* The thread's hint (the last sheaf_malloc's object and fast path) is a
 * guess, checked as any free: once that object's frame went back to the
 * pool, its free_any is refused. */
START_TEST(hint_checked_like_any_free)
{
	sheaf_pool_t *p = mkpool();
	char *objs[16], *o, *a;
	const struct sheaf__km_hint *hint;
	sheaf_cache_t *c;
	uint64_t off;

	c = malloc_one_frame(p, objs);
	o = objs[15];
	hint = (const struct sheaf__km_hint *)((uintptr_t)p->head.hint + sheaf__tls_bias);
	ck_assert_ptr_eq(hint->obj, o);
	for (int i = 0; i < 16; i++)              /* not through the hint */
		ck_assert_int_eq(sheaf_free(c, objs[i]), 0);
	/* No worker meanwhile: one still stocking the barn after the first
	 * malloc's refill took a frame again after the shrink, the one the
	 * shrink released (the free stack is LIFO), for the same cache
	 * (SAN=thread, CI run here). */
	engine_stop(&p->engine);
	ck_assert_int_ge(sheaf_cache_shrink(c), 1);       /* its slab goes back */
	off = (uint64_t)(o - p->shm.base);
	ck_assert_uint_ne(p->shm.frame_owner[pool_frame_of(&p->shm, off)], c->id);
	ck_assert_ptr_eq(hint->obj, o);
	ck_assert_int_eq(sheaf_free_any(p, o), -EINVAL);
	{
		char err[128];

		ck_assert_msg(engine_start(&p->engine, err, sizeof(err)) == 0, "%s", err);
	}
	/* malloc and free_any of the same object, again and again */
	for (int i = 0; i < 1000; i++) {
		a = sheaf_malloc(p, 1 + (size_t)i % 1024);
		ck_assert_ptr_nonnull(a);
		ck_assert_int_eq(sheaf_free_any(p, a), 0);
		ck_assert_int_eq(sheaf_free_any(p, a), -EALREADY);
	}
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/* Another thread frees @o[0..16) through the class's handle, then shrinks
 * the cache: its sheaves and the barn go back to the slabs, and the
 * emptied frame is released (min_partial 0). */
struct stale_arg {
	sheaf_cache_t *c;
	char **o;
};

static void *free_all_and_shrink(void *arg)
{
	struct stale_arg *a = arg;

	for (int i = 0; i < 16; i++)
		REQUIRE(sheaf_free(a->c, a->o[i]) == 0, "free %d", i);
	REQUIRE(sheaf_cache_shrink(a->c) >= 1, "shrink released nothing");
	sheaf_thread_exit();
	return NULL;
}

/*
 * The hint's own check: the thread's main sheaf of the class is empty,
 * with room (the 16 mallocs emptied it), the hint names the last object,
 * and another thread has freed it and released its frame.  sheaf_free_any
 * of it must be refused on the hint's path itself (a push there would be
 * accepted: this fails when the hint checks no frame owner), and the
 * object never comes back twice.
 */
START_TEST(hint_stale_with_room)
{
	sheaf_pool_t *p = mkpool();
	char *objs[16], *o;
	const struct sheaf__km_hint *hint;
	struct stale_arg a;
	sheaf_cache_t *c;
	pthread_t th;
	uint64_t off;

	c = malloc_one_frame(p, objs);
	o = objs[15];
	/* No stocking but for a waiter: a worker pass after the shrink would
	 * take the released frame again for this cache (LIFO). */
	at_store_relaxed(&c->sc->barn_low, 0);
	ck_assert_uint_eq(sheaf_size((struct shm_sheaf *)(void *)SHEAF__FAST(c)->main), 0);
	ck_assert_uint_gt(((struct shm_sheaf *)(void *)SHEAF__FAST(c)->main)->capacity, 0);
	hint = (const struct sheaf__km_hint *)((uintptr_t)p->head.hint + sheaf__tls_bias);
	ck_assert_ptr_eq(hint->obj, o);
	a.c = c;
	a.o = objs;
	ck_assert_int_eq(pthread_create(&th, NULL, free_all_and_shrink, &a), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	off = (uint64_t)(o - p->shm.base);
	ck_assert_uint_ne(p->shm.frame_owner[pool_frame_of(&p->shm, off)], c->id);
	ck_assert_ptr_eq(hint->obj, o);
	ck_assert_int_eq(sheaf_free_any(p, o), -EINVAL);
	ck_assert_uint_eq(sheaf_size((struct shm_sheaf *)(void *)SHEAF__FAST(c)->main), 0);
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/* The calling thread's hint in @p (sheaf.h, struct sheaf__km_hint). */
static struct sheaf__km_hint *hint_of(sheaf_pool_t *p)
{
	return (struct sheaf__km_hint *)((uintptr_t)p->head.hint + sheaf__tls_bias);
}

/*
 * The hint trusts its object only while no frame of the pool went back
 * since the count it holds was read: once one has (here another cache's),
 * the free of the last malloc takes the frame lookup, still frees, and
 * leaves the hint empty with the new count, so the next malloc's object
 * is trusted again.  Each pool has its own hint.
 */
START_TEST(hint_follows_released_frames)
{
	sheaf_pool_t *p = mkpool(), *q = mkpool();
	char *objs[16], *o, *x, *y, *keep;
	struct sheaf__km_hint *hint;
	sheaf_cache_t *c;
	uint64_t before, after;
	uint32_t n;

	c = malloc_one_frame(p, objs);
	for (int i = 0; i < 16; i++)              /* not through the hint */
		ck_assert_int_eq(sheaf_free(c, objs[i]), 0);
	/* the class made, its fast path set (the slow path sets no hint) */
	ck_assert_int_eq(sheaf_free_any(p, sheaf_malloc(p, 64)), 0);
	ck_assert_int_eq(sheaf_free_any(q, sheaf_malloc(q, 64)), 0);
	keep = sheaf_malloc(p, 64);               /* room in the main sheaf */
	ck_assert_ptr_nonnull(keep);
	o = sheaf_malloc(p, 64);
	ck_assert_ptr_nonnull(o);
	hint = hint_of(p);
	ck_assert_ptr_eq(hint->obj, o);
	/* another pool's malloc leaves this pool's hint alone */
	y = sheaf_malloc(q, 64);
	ck_assert_ptr_nonnull(y);
	ck_assert_ptr_eq(hint_of(q)->obj, y);
	ck_assert_ptr_eq(hint->obj, o);
	ck_assert_int_eq(sheaf_free_any(p, y), -EFAULT);
	ck_assert_int_eq(sheaf_free_any(q, y), 0);
	/* a frame of kmalloc-16384 goes back (no worker to take it again) */
	engine_stop(&p->engine);
	before = at_load_relaxed(&p->shm.hdr->frames_released);
	ck_assert_int_ge(sheaf_cache_shrink(c), 1);
	after = at_load_relaxed(&p->shm.hdr->frames_released);
	ck_assert_uint_gt(after, before);
	n = sheaf_size((struct shm_sheaf *)(void *)SHEAF__FAST(class_cache(p, 64))->main);
	ck_assert_int_eq(sheaf_free_any(p, o), 0);     /* through its frame */
	ck_assert_uint_eq(sheaf_size((struct shm_sheaf *)(void *)
				     SHEAF__FAST(class_cache(p, 64))->main), n + 1);
	ck_assert_ptr_null(hint->obj);
	ck_assert_uint_eq(hint->released, after);
	/* a cleared hint keeps its fast path: free(NULL) must not push */
	ck_assert_int_eq(sheaf_free_any(p, NULL), 0);
	ck_assert_uint_eq(sheaf_size((struct shm_sheaf *)(void *)
				     SHEAF__FAST(class_cache(p, 64))->main), n + 1);
	{
		char err[128];

		ck_assert_msg(engine_start(&p->engine, err, sizeof(err)) == 0, "%s", err);
	}
	x = sheaf_malloc(p, 64);
	ck_assert_ptr_eq(x, o);                    /* the top of the main sheaf */
	ck_assert_ptr_eq(hint->obj, x);
	ck_assert_int_eq(sheaf_free_any(p, x), 0);
	ck_assert_int_eq(sheaf_free_any(p, x), -EALREADY);
	ck_assert_int_eq(sheaf_free_any(p, keep), 0);
	ck_assert_uint_eq(cache_stats_of(class_cache(p, 64), -1).in_use, 0);
	require_pool_ok(p);
	require_pool_ok(q);
	sheaf_pool_destroy(q);
	sheaf_pool_destroy(p);
}
END_TEST

/*
 * While the count stands, the free of the last malloc takes the hint and
 * no frame lookup: a wrong guess planted in by_frame for the object's
 * frame (another class's handle) is left as it is (the lookup's miss would
 * have gone to the slow path, which writes the right handle there).
 */
START_TEST(hint_used_while_count_stands)
{
	sheaf_pool_t *p = mkpool();
	sheaf_cache_t *c64, *c128, **slot;
	char *o;

	ck_assert_int_eq(sheaf_free_any(p, sheaf_malloc(p, 64)), 0);    /* both classes */
	ck_assert_int_eq(sheaf_free_any(p, sheaf_malloc(p, 128)), 0);
	c64 = class_cache(p, 64);
	c128 = class_cache(p, 128);
	o = sheaf_malloc(p, 64);
	ck_assert_ptr_nonnull(o);
	ck_assert_ptr_eq(hint_of(p)->obj, o);
	slot = &p->head.by_frame[(uint64_t)(o - p->head.data) >> SHEAF__FRAME_SHIFT];
	*slot = c128;
	ck_assert_int_eq(sheaf_free_any(p, o), 0);
	ck_assert_ptr_eq(*slot, c128);             /* no lookup was made */
	/* the same free without the hint: the lookup misses, the slow path
	 * frees and puts the right guess there */
	o = sheaf_malloc(p, 64);
	hint_of(p)->obj = NULL;
	ck_assert_int_eq(sheaf_free_any(p, o), 0);
	ck_assert_ptr_ne(*slot, c128);
	ck_assert_uint_eq(cache_stats_of(c64, -1).in_use, 0);
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/*
 * A thread moved to another node (sheaf_thread_set_node) has no hint: its
 * class's next malloc takes the slow path (which sets none), so a hint
 * kept from node 0 would push that node's object on the node-1 main sheaf.
 */
START_TEST(hint_dropped_by_set_node)
{
	struct sheaf_pool_config cfg = { .nodes = 2, .size = 256 << 20 };
	sheaf_pool_t *p = pool_new(&cfg);
	struct shm_sheaf *m;
	char *o, *a;

	ck_assert_int_eq(sheaf_thread_set_node(p, 0), 0);
	ck_assert_int_eq(sheaf_free_any(p, sheaf_malloc(p, 64)), 0);  /* the slow path */
	o = sheaf_malloc(p, 64);
	ck_assert_ptr_nonnull(o);
	ck_assert_ptr_eq(hint_of(p)->obj, o);
	ck_assert_int_eq(sheaf_thread_set_node(p, 1), 0);
	ck_assert_ptr_null(hint_of(p)->obj);
	a = sheaf_malloc(p, 64);                   /* node 1, the slow path */
	ck_assert_ptr_nonnull(a);
	ck_assert_int_eq(sheaf_free_any(p, o), 0); /* a remote free */
	m = (struct shm_sheaf *)(void *)SHEAF__FAST(class_cache(p, 64))->main;
	for (uint32_t i = 0; i < sheaf_size(m); i++)
		ck_assert_ptr_ne(p->shm.base + m->objs[i], o);
	ck_assert_int_eq(sheaf_free_any(p, a), 0);
	sheaf_thread_exit();
	ck_assert_uint_eq(cache_stats_of(class_cache(p, 64), -1).in_use, 0);
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/* The free_invalid count of class @size's cache. */
static uint64_t invalid_of(sheaf_pool_t *p, size_t size)
{
	return stat_count(class_cache(p, size), -1, "free_invalid");
}

START_TEST(free_any_bad_pointers)
{
	sheaf_pool_t *p = mkpool(), *q = mkpool();
	int on_stack = 0;
	void *heap = malloc(64);
	char *o = sheaf_malloc(p, 64), *keep = sheaf_malloc(p, 64), *other = sheaf_malloc(q, 64);
	uint64_t inv = invalid_of(p, 64);

	ck_assert_ptr_nonnull(o);
	ck_assert_int_eq(sheaf_free_any(p, NULL), 0);
	ck_assert_int_eq(sheaf_free_any(p, &on_stack), -EFAULT);
	ck_assert_int_eq(sheaf_free_any(p, heap), -EFAULT);
	ck_assert_int_eq(sheaf_free_any(p, p->shm.hdr), -EFAULT);           /* META */
	ck_assert_int_eq(sheaf_free_any(p, (char *)p->shm.frame_owner), -EFAULT);
	ck_assert_int_eq(sheaf_free_any(p, p->shm.sheaves), -EFAULT);       /* SHARED, not data */
	ck_assert_int_eq(sheaf_free_any(p, other), -EFAULT);                /* another pool */
	ck_assert_int_eq(sheaf_free_any(p, o + 8), -EINVAL);                /* inside an object */
	ck_assert_int_eq(sheaf_free_any(p, o + 1), -EINVAL);
	/* the last frame of the data: no cache owns it */
	ck_assert_int_eq(sheaf_free_any(p, p->shm.data + p->shm.data_len - 64), -EINVAL);
	ck_assert_uint_eq(invalid_of(p, 64), inv + 2);    /* the two in a slab of it */
	/* obj_size and obj_cache refuse the same */
	errno = 0;
	ck_assert_uint_eq(sheaf_obj_size(p, &on_stack), 0);
	ck_assert_int_eq(errno, EFAULT);
	errno = 0;
	ck_assert_ptr_null(sheaf_obj_cache(p, o + 8));
	ck_assert_int_eq(errno, EINVAL);
	/* nothing was freed: o is still ours, then the immediate double free */
	ck_assert_int_eq(sheaf_free_any(p, o), 0);
	ck_assert_int_eq(sheaf_free_any(p, o), -EALREADY);
	/* errno is left alone */
	errno = 1234;
	ck_assert_int_eq(sheaf_free_any(p, heap), -EFAULT);
	ck_assert_int_eq(errno, 1234);
	ck_assert_int_eq(sheaf_free_any(p, keep), 0);
	ck_assert_int_eq(sheaf_free_any(q, other), 0);
	free(heap);
	require_pool_ok(p);
	sheaf_pool_destroy(q);
	sheaf_pool_destroy(p);
}
END_TEST

/*
 * sheaf_free_sized: every class boundary freed with its size; a wrong size
 * (another class, a class never used, above the classes) and an object of
 * another node or of an ordinary cache freed as sheaf_free_any frees them;
 * bad pointers refused as sheaf_free_any refuses them, nothing freed.
 */
START_TEST(free_sized_as_free_any)
{
	struct sheaf_pool_config cfg = { .nodes = 2, .size = POOL_BYTES };
	sheaf_pool_t *p = pool_new(&cfg);
	sheaf_cache_t *plain = mkcache(p, "plain", 64, 0, 0);
	int on_stack = 0;
	void *heap = malloc(64);
	char *o, *a, *r, *big, *remote, *po;

	ck_assert_int_eq(sheaf_thread_set_node(p, 0), 0);
	for (size_t k = 0; k < NCLASSES; k++) {
		size_t s[] = { classes[k] - 1, classes[k], classes[k] + 1 };

		for (size_t i = 0; i < 3; i++) {
			o = sheaf_malloc(p, s[i]);
			REQUIRE(o != NULL, "sheaf_malloc(%zu): %s", s[i], strerror(errno));
			REQUIRE(sheaf_free_sized(p, o, s[i]) == 0, "sheaf_free_sized(%zu)", s[i]);
		}
	}
	o = sheaf_malloc(p, 0);
	ck_assert_int_eq(sheaf_free_sized(p, o, 0), 0);
	/* calloc's product and realloc's last size */
	o = sheaf_calloc(p, 10, 30);
	ck_assert_int_eq(sheaf_free_sized(p, o, 300), 0);
	r = sheaf_realloc(p, sheaf_malloc(p, 100), 3000);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(sheaf_free_sized(p, r, 3000), 0);
	/* wrong sizes: another class, one never used, none at all */
	o = sheaf_malloc(p, 64);
	a = sheaf_malloc(p, 64);
	ck_assert_int_eq(sheaf_free_sized(p, o, 1000), 0);
	ck_assert_int_eq(sheaf_free_sized(p, o, 64), -EALREADY);     /* on top of its main */
	ck_assert_int_eq(sheaf_free_sized(p, a, 5u << 20), 0);       /* no such class yet */
	big = sheaf_malloc(p, 1u << 20);
	ck_assert_ptr_nonnull(big);
	ck_assert_int_eq(sheaf_free_sized(p, big, 64), 0);
	/* an object of node 1 freed from node 0; an ordinary cache's */
	ck_assert_int_eq(sheaf_thread_set_node(p, 1), 0);
	remote = sheaf_malloc(p, 64);
	ck_assert_ptr_nonnull(remote);
	ck_assert_int_eq(sheaf_thread_set_node(p, 0), 0);
	ck_assert_int_eq(sheaf_free_sized(p, remote, 64), 0);
	po = xalloc(plain);
	ck_assert_uint_eq(cache_stats_of(plain, -1).in_use, 1);
	ck_assert_int_eq(sheaf_free_sized(p, po, 64), 0);
	ck_assert_uint_eq(cache_stats_of(plain, -1).in_use, 0);
	/* bad pointers: refused, errno left alone, nothing freed */
	o = sheaf_malloc(p, 64);
	errno = 4321;
	ck_assert_int_eq(sheaf_free_sized(p, NULL, 64), 0);
	ck_assert_int_eq(sheaf_free_sized(p, &on_stack, 64), -EFAULT);
	ck_assert_int_eq(sheaf_free_sized(p, heap, 64), -EFAULT);
	ck_assert_int_eq(sheaf_free_sized(p, p->shm.sheaves, 64), -EFAULT);
	ck_assert_int_eq(sheaf_free_sized(p, o + 8, 64), -EINVAL);
	ck_assert_int_eq(sheaf_free_sized(p, o + 8, 1000), -EINVAL);
	ck_assert_int_eq(errno, 4321);
	ck_assert_uint_eq(cache_stats_of(class_cache(p, 64), -1).in_use, 1);
	ck_assert_int_eq(sheaf_free_sized(p, o, 64), 0);
	sheaf_thread_exit();
	for (size_t k = 0; k < NCLASSES; k++)
		REQUIRE(cache_stats_of(class_cache(p, classes[k]), -1).in_use == 0,
			"kmalloc-%zu: %llu in use", classes[k],
			(unsigned long long)cache_stats_of(class_cache(p, classes[k]), -1).in_use);
	ck_assert_uint_eq(cache_stats_of(plain, -1).in_use, 0);
	free(heap);
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/* A class cache made beforehand with SHEAF_CACHE_DEBUG is used as it is:
 * every double free is refused. */
START_TEST(debug_class_catches_double_free)
{
	sheaf_pool_t *p = mkpool();
	struct sheaf_cache_config cfg = { .capacity = SHEAF_CAPACITY_DEFAULT,
					  .flags = SHEAF_CACHE_DEBUG };
	sheaf_cache_t *dbg = sheaf_cache_create(p, "kmalloc-256", 256, &cfg);
	void *a, *b;

	ck_assert_ptr_nonnull(dbg);
	a = sheaf_malloc(p, 240);
	b = sheaf_malloc(p, 256);
	ck_assert_ptr_eq(sheaf_obj_cache(p, a), dbg);
	ck_assert_int_eq(sheaf_free_any(p, a), 0);
	ck_assert_int_eq(sheaf_free_any(p, b), 0);
	ck_assert_int_eq(sheaf_free_any(p, a), -EALREADY);    /* not the immediate one */
	errno = 0;
	ck_assert_ptr_null(sheaf_realloc(p, a, 1000));
	ck_assert_int_eq(errno, EALREADY);
	ck_assert_uint_eq(cache_stats_of(dbg, -1).in_use, 0);
	ck_assert_uint_eq(cache_stats_of(class_cache(p, 1024), -1).in_use, 0);
	/* a cache of a class's name with another geometry: sheaf_malloc says so */
	ck_assert_ptr_nonnull(sheaf_cache_create(p, "kmalloc-512", 500, NULL));
	errno = 0;
	ck_assert_ptr_null(sheaf_malloc(p, 500));
	ck_assert_int_eq(errno, EINVAL);
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/* free_any, obj_size and obj_cache work for every cache of the pool. */
START_TEST(ordinary_cache_objects)
{
	sheaf_pool_t *p = mkpool();
	sheaf_cache_t *c = mkcache(p, "plain", 100, SHEAF_CAPACITY_DEFAULT, 0);
	void *o[1000];

	for (int i = 0; i < 1000; i++)
		o[i] = xalloc(c);
	ck_assert_ptr_eq(sheaf_obj_cache(p, o[0]), c);
	ck_assert_uint_eq(sheaf_obj_size(p, o[0]), 104);
	/* realloc out of an ordinary cache into a class */
	memset(o[1], 0x3c, 104);
	o[1] = sheaf_realloc(p, o[1], 150);
	ck_assert_ptr_nonnull(o[1]);
	ck_assert_uint_eq(sheaf_obj_size(p, o[1]), 160);
	for (int i = 0; i < 104; i++)
		REQUIRE(((unsigned char *)o[1])[i] == 0x3c, "byte %d", i);
	for (int i = 0; i < 1000; i++)
		REQUIRE(sheaf_free_any(p, o[i]) == 0, "free_any of object %d", i);
	ck_assert_uint_eq(cache_stats_of(c, -1).in_use, 0);
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/* Many objects of mixed sizes at once, in and out of every sheaf path
 * (barn exchanges, the inline free's guesses going wrong as frames move
 * between caches after a shrink). */
START_TEST(mixed_sizes_many)
{
	sheaf_pool_t *p = mkpool();
	enum { N = 20000 };
	void **o = calloc(N, sizeof(*o));
	uint64_t s = 42;

	ck_assert_ptr_nonnull(o);
	for (int round = 0; round < 4; round++) {
		for (int i = 0; i < N; i++) {
			size_t size = 1 + xorshift(&s) % (round == 3 ? 8192 : 1024);
			o[i] = sheaf_malloc(p, size);
			REQUIRE(o[i] != NULL, "malloc %zu: %s", size, strerror(errno));
			memset(o[i], i & 0xff, size < 16 ? size : 16);
		}
		for (int i = 0; i < N; i++) {
			REQUIRE(((unsigned char *)o[i])[0] == (i & 0xff), "object %d overwritten", i);
			REQUIRE(sheaf_free_any(p, o[i]) == 0, "free_any %d", i);
		}
		sheaf_thread_exit();
		for (size_t k = 0; k < 10; k++)
			sheaf_cache_shrink(class_cache(p, classes[k]));
	}
	for (size_t k = 0; k < NCLASSES; k++) {
		char name[48];
		sheaf_cache_t *c;

		snprintf(name, sizeof(name), "kmalloc-%zu", classes[k]);
		c = sheaf_cache_open(p, name);
		if (c != NULL)
			ck_assert_uint_eq(cache_stats_of(c, -1).in_use, 0);
	}
	free(o);
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/* Racing first uses of a class end with one cache and one handle. */
struct race {
	sheaf_pool_t *p;
	pthread_barrier_t *go;
	sheaf_cache_t *got;
};

static void *race_thread(void *arg)
{
	struct race *r = arg;
	void *o;

	pthread_barrier_wait(r->go);
	o = sheaf_malloc(r->p, 120);
	REQUIRE(o != NULL, "malloc: %s", strerror(errno));
	r->got = sheaf_obj_cache(r->p, o);
	REQUIRE(sheaf_free_any(r->p, o) == 0, "free_any");
	sheaf_thread_exit();
	return NULL;
}

START_TEST(racing_first_use)
{
	enum { T = 8 };
	sheaf_pool_t *p = mkpool();
	pthread_barrier_t go;
	pthread_t th[T];
	struct race r[T];

	pthread_barrier_init(&go, NULL, T);
	for (int i = 0; i < T; i++) {
		r[i] = (struct race){ p, &go, NULL };
		ck_assert_int_eq(pthread_create(&th[i], NULL, race_thread, &r[i]), 0);
	}
	for (int i = 0; i < T; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < T; i++)
		ck_assert_ptr_eq(r[i].got, class_cache(p, 128));
	pthread_barrier_destroy(&go);
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/* ---- across processes, against sheafd ------------------------------------ */

#define XP_SIZES 64

struct xp_arg {
	const char *sock;
	int ptrs[2];            /* producer -> consumer: object pointers */
	int done[2];            /* consumer -> producer: all freed */
};

static size_t xp_size(int i)
{
	/* every class, at its size and just under it; and 0 */
	return i == 0 ? 0 : classes[i % NCLASSES] - (size_t)(i / NCLASSES);
}

static int xp_producer(void *argp)
{
	struct xp_arg *a = argp;
	sheaf_pool_t *p = child_connect(a->sock, "km-producer");
	char b;

	for (int i = 0; i < XP_SIZES; i++) {
		unsigned char *o = sheaf_malloc(p, xp_size(i));
		size_t n = xp_size(i) < 16 ? xp_size(i) : 16;

		REQUIRE(o != NULL, "malloc %zu: %s", xp_size(i), strerror(errno));
		memset(o, i, n);
		REQUIRE(write_full(a->ptrs[1], &o, sizeof(o)) == 0, "write");
	}
	REQUIRE(read_full(a->done[0], &b, 1, 60000) == 0, "consumer did not finish");
	sheaf_disconnect(p);
	return 0;
}

static int xp_consumer(void *argp)
{
	struct xp_arg *a = argp;
	sheaf_pool_t *p = child_connect(a->sock, "km-consumer");
	unsigned char *last = NULL;
	char b = 1;

	for (int i = 0; i < XP_SIZES; i++) {
		unsigned char *o;
		size_t n = xp_size(i) < 16 ? xp_size(i) : 16;

		REQUIRE(read_full(a->ptrs[0], &o, sizeof(o), 60000) == 0, "read");
		for (size_t k = 0; k < n; k++)
			REQUIRE(o[k] == (unsigned char)i, "object %d: byte %zu", i, k);
		REQUIRE(sheaf_obj_size(p, o) >= xp_size(i), "obj_size %zu < %zu",
			sheaf_obj_size(p, o), xp_size(i));
		REQUIRE(sheaf_free_any(p, o) == 0, "free_any of object %d (%zu bytes)", i,
			xp_size(i));
		last = o;
	}
	REQUIRE(sheaf_free_any(p, last) == -EALREADY, "the immediate double free");
	REQUIRE(sheaf_free_any(p, last + 8) == -EINVAL, "inside an object");
	sheaf_thread_exit();
	REQUIRE(write_full(a->done[1], &b, 1) == 0, "write");
	sheaf_disconnect(p);
	return 0;
}

START_TEST(cross_process_free_any)
{
	struct dmn d;
	struct xp_arg a;
	pid_t prod, cons;
	sheaf_pool_t *p;
	char err[256] = "", out[4096] = "";
	const char *argv[] = { sheafctl_bin(), "-s", NULL, "caches", NULL };
	struct spawn_opts so = { .out = NULL };
	int st;

	dmn_init(&d);
	dmn_start(&d, NULL);
	a.sock = d.sock;
	REQUIRE(pipe(a.ptrs) == 0 && pipe(a.done) == 0, "pipe");
	prod = fork_child(xp_producer, &a);
	cons = fork_child(xp_consumer, &a);
	reap_ok(prod, 60000, "producer");
	reap_ok(cons, 60000, "consumer");
	/* every class's objects are back: none in use */
	p = sheaf_connect(d.sock, "km-check", 0, err, sizeof(err));
	REQUIRE(p != NULL, "connect: %s", err);
	for (size_t k = 0; k < NCLASSES; k++) {
		char name[48];
		sheaf_cache_t *c;

		snprintf(name, sizeof(name), "kmalloc-%zu", classes[k]);
		c = sheaf_cache_open(p, name);
		for (int i = 0; i < XP_SIZES; i++)
			if (class_of(xp_size(i)) == classes[k])
				REQUIRE(c != NULL, "no cache %s", name);
		if (c != NULL)
			REQUIRE(cache_stats_of(c, -1).in_use == 0, "%s: objects left in use", name);
	}
	sheaf_disconnect(p);
	/* sheafctl lists them as any cache */
	snprintf(out, sizeof(out), "%s/caches.out", d.dir);
	so.out = out;
	argv[2] = d.sock;
	REQUIRE(run_proc(argv, &so, 30000, &st, err, sizeof(err)) == NULL && exited_ok(st),
		"sheafctl caches: %s", err);
	REQUIRE(file_contains(out, "kmalloc-96") && file_contains(out, "kmalloc-16384"),
		"sheafctl caches does not list the classes");
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

/* A class destroyed by the operator (sheafctl destroy) is made again by
 * the next sheaf_malloc of its sizes; free_any follows. */
START_TEST(class_remade_after_destroy)
{
	struct dmn d;
	sheaf_pool_t *p;
	char err[256] = "";
	const char *argv[] = { sheafctl_bin(), "-s", NULL, "destroy", "kmalloc-64", NULL };
	sheaf_cache_t *before;
	void *o;
	int st;

	dmn_init(&d);
	dmn_start(&d, NULL);
	argv[2] = d.sock;
	p = sheaf_connect(d.sock, "km-destroy", 0, err, sizeof(err));
	REQUIRE(p != NULL, "connect: %s", err);
	o = sheaf_malloc(p, 50);
	ck_assert_ptr_nonnull(o);
	before = sheaf_obj_cache(p, o);
	ck_assert_int_eq(sheaf_free_any(p, o), 0);
	sheaf_thread_exit();            /* no sheaf of it held: destroy may go */
	REQUIRE(run_proc(argv, NULL, 30000, &st, err, sizeof(err)) == NULL && exited_ok(st),
		"sheafctl destroy kmalloc-64: %s", err);
	o = sheaf_malloc(p, 64);
	REQUIRE(o != NULL, "malloc after destroy: %s", strerror(errno));
	ck_assert_ptr_ne(sheaf_obj_cache(p, o), before);
	ck_assert_ptr_eq(sheaf_obj_cache(p, o), class_cache(p, 64));
	ck_assert_int_eq(sheaf_free_any(p, o), 0);
	ck_assert_uint_eq(cache_stats_of(class_cache(p, 64), -1).in_use, 0);
	sheaf_disconnect(p);
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("kmalloc");

	require_binaries("test_kmalloc");
	ADD_ALONE(s, class_boundaries, 120);
	ADD_ALONE(s, calloc_zeroes_and_overflows, 120);
	ADD_ALONE(s, realloc_across_classes, 120);
	ADD_ALONE(s, free_any_bad_pointers, 120);
	ADD_ALONE(s, free_sized_as_free_any, 120);
	ADD_ALONE(s, hint_checked_like_any_free, 120);
	ADD_ALONE(s, hint_stale_with_room, 120);
	ADD_ALONE(s, hint_follows_released_frames, 120);
	ADD_ALONE(s, hint_used_while_count_stands, 120);
	ADD_ALONE(s, hint_dropped_by_set_node, 120);
	ADD_ALONE(s, debug_class_catches_double_free, 120);
	ADD_ALONE(s, ordinary_cache_objects, 120);
	ADD_ALONE(s, mixed_sizes_many, 240);
	ADD_ALONE(s, racing_first_use, 120);
	ADD_ALONE(s, cross_process_free_any, 240);
	ADD_ALONE(s, class_remade_after_destroy, 240);
	return run_suite(s);
}
