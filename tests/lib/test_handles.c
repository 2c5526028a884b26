/*
 * test_handles.c - cache handles and cache destroy (client/sheaf.h,
 * "Handles"; shm/engine/cache.c, engine_cache_destroy):
 *   - a handle of a destroyed cache is stale: every call on it fails with
 *     ESTALE, even once another cache fills its slot, which gets a new
 *     handle (with sheafd, and with a local pool);
 *   - destroy never races live clients: threads allocate and free while
 *     another connection destroys the cache again and again; each destroy
 *     fails with EBUSY or succeeds, and then the checker passes and the
 *     slot's next cache starts empty with exact counts;
 *   - destroy resets the lanes' per-cache base with their counters;
 *   - sheaf_cache_create_or_open: opens a cache of the same geometry,
 *     refuses another with EINVAL, and of racing callers exactly one
 *     creates (local pool: threads; sheafd: processes).
 *
 * Each test is its own TCase: CK_RUN_CASE=<name> runs one.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "client/sheaf.h"
#include "client/internal.h"
#include "proto/sheaf.pb-c.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_pool.h"
#include "tests/helpers/util_proc.h"
#include "tests/helpers/util_rpc.h"

/* CacheDestroy of @name on connection @fd: the reply's status. */
static int rpc_destroy(int fd, const char *name, char *msg, size_t len)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__CacheDestroyRequest dr = SHEAF__V1__CACHE_DESTROY_REQUEST__INIT;
	Sheaf__V1__Response *r;
	int rc, st;

	dr.name = (char *)name;
	rq.id = 7;
	rq.body_case = SHEAF__V1__REQUEST__BODY_CACHE_DESTROY;
	rq.cache_destroy = &dr;
	r = raw_rpc(fd, &rq, 30000, &rc);
	REQUIRE(r != NULL, "CacheDestroy: %s", strerror(-rc));
	st = r->status;
	snprintf(msg, len, "%s", r->error ? r->error : "");
	sheaf__v1__response__free_unpacked(r, NULL);
	return st;
}

/* Every call on stale handle @a fails with ESTALE; @obj is an object of
 * the cache now in its slot. */
static void require_stale(sheaf_cache_t *a, void *obj)
{
	struct sheaf_stats st;
	void *objs[4] = { obj, obj, obj, obj };

	errno = 0;
	REQUIRE(sheaf_alloc(a) == NULL && errno == ESTALE, "alloc on a stale handle: %s",
		strerror(errno));
	REQUIRE(sheaf_free(a, obj) == -ESTALE, "free on a stale handle");
	REQUIRE(sheaf_alloc_bulk(a, objs, 4) == -ESTALE, "alloc_bulk on a stale handle");
	objs[0] = obj;                  /* a failed alloc_bulk may have cleared it */
	REQUIRE(sheaf_free_bulk(a, objs, 1) == -ESTALE, "free_bulk on a stale handle");
	errno = 0;
	REQUIRE(sheaf_prefill(a, 4) == NULL && errno == ESTALE, "prefill: %s", strerror(errno));
	REQUIRE(sheaf_cache_stats(a, -1, &st) == -ESTALE, "stats on a stale handle");
	REQUIRE(sheaf_cache_set_capacity(a, 8) == -ESTALE, "set_capacity on a stale handle");
	REQUIRE(sheaf_cache_shrink(a) == -ESTALE, "shrink on a stale handle");
	errno = 0;
	REQUIRE(sheaf_cache_object_size(a) == 0 && errno == ESTALE, "object_size");
	{
		unsigned cap = 12345;

		REQUIRE(sheaf_cache_get_capacity(a, &cap) == -ESTALE && cap == 12345,
			"get_capacity on a stale handle");
	}
	/* The deprecated name keeps its contract: 0 with errno ESTALE. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	errno = 0;
	REQUIRE(sheaf_cache_capacity(a) == 0 && errno == ESTALE, "capacity");
#pragma GCC diagnostic pop
}

/* @b (a fresh cache of @size-byte objects) works: distinct objects of its
 * size, all freed again, nothing in use. */
static void require_works(sheaf_cache_t *b, size_t size)
{
	enum { N = 1000 };
	static char *objs[N];
	struct sheaf_stats st;

	REQUIRE(sheaf_cache_object_size(b) == size, "object size %zu, want %zu",
		sheaf_cache_object_size(b), size);
	for (int i = 0; i < N; i++) {
		objs[i] = sheaf_alloc(b);
		REQUIRE(objs[i] != NULL, "alloc %d: %s", i, strerror(errno));
		memset(objs[i], 0xa5, size);
	}
	for (int i = 1; i < N; i++) {
		long d = objs[i] - objs[i - 1];
		REQUIRE(d % (long)size == 0, "objects %d and %d %ld bytes apart", i - 1, i, d);
	}
	REQUIRE(sheaf_cache_stats(b, -1, &st) == 0 && st.in_use == N, "in use %llu",
		(unsigned long long)st.in_use);
	for (int i = 0; i < N; i++)
		REQUIRE(sheaf_free(b, objs[i]) == 0, "free %d", i);
	REQUIRE(sheaf_cache_stats(b, -1, &st) == 0 && st.in_use == 0, "in use %llu",
		(unsigned long long)st.in_use);
}

START_TEST(stale_handle_sheafd)
{
	struct dmn d;
	char err[256] = "";
	sheaf_pool_t *p;
	sheaf_cache_t *a, *b, *a2;
	void *objs[300], *o;
	int fd;

	dmn_init(&d);
	dmn_start(&d, NULL);
	p = sheaf_connect(d.sock, "handles", 0, err, sizeof(err));
	ck_assert_msg(p != NULL, "connect: %s", err);
	a = sheaf_cache_create(p, "a", 256, NULL);
	ck_assert_msg(a != NULL, "create a: %s", strerror(errno));
	for (int i = 0; i < 300; i++)
		ck_assert_ptr_nonnull(objs[i] = sheaf_alloc(a));
	for (int i = 0; i < 300; i++)
		ck_assert_int_eq(sheaf_free(a, objs[i]), 0);

	fd = unix_connect(d.sock);
	ck_assert_int_ge(fd, 0);
	/* This thread holds sheaves of a: refused. */
	ck_assert_int_eq(rpc_destroy(fd, "a", err, sizeof(err)), SHEAF__V1__STATUS__STATUS_BUSY);
	ck_assert_msg(strstr(err, "holds its sheaves") != NULL, "%s", err);
	ck_assert_int_ge(sheaf_cache_shrink(a), 0);   /* gives them back */
	ck_assert_msg(rpc_destroy(fd, "a", err, sizeof(err)) == SHEAF__V1__STATUS__STATUS_OK,
		      "destroy a: %s", err);

	b = sheaf_cache_create(p, "b", 64, NULL);
	ck_assert_msg(b != NULL, "create b: %s", strerror(errno));
	ck_assert_uint_eq(b->id, a->id);        /* the same slot... */
	ck_assert_ptr_ne(b, a);                 /* ...a new handle */
	ck_assert_ptr_eq(sheaf_cache_open(p, "b"), b);
	o = sheaf_alloc(b);
	ck_assert_ptr_nonnull(o);
	require_stale(a, o);
	ck_assert_int_eq(sheaf_free(b, o), 0);
	require_works(b, 64);

	/* "a" again, in another slot: still a new handle; the old one stays
	 * stale. */
	a2 = sheaf_cache_create(p, "a", 256, NULL);
	ck_assert_msg(a2 != NULL, "create a again: %s", strerror(errno));
	ck_assert_ptr_ne(a2, a);
	require_stale(a, o);
	require_works(a2, 256);
	printf("  destroyed a (256 B); b (64 B) took its slot with a new handle; "
	       "every call on a's handle: ESTALE\n");

	sheaf_thread_exit();
	{
		Sheaf__V1__Response *r = raw_check(d.sock);
		ck_assert_msg(r->check->ok && r->check->in_use == r->check->counted_in_use,
			      "check: %s", r->check->problem);
		sheaf__v1__response__free_unpacked(r, NULL);
	}
	close(fd);
	sheaf_disconnect(p);
	dmn_stop(&d, 5000);
	dmn_cleanup(&d);
}
END_TEST

START_TEST(stale_handle_local)
{
	struct sheaf_pool_config cfg = { .size = 64 << 20, .nodes = 2 };
	char err[256] = "";
	sheaf_pool_t *p = pool_new(&cfg);
	sheaf_cache_t *a, *b;
	void *o;

	a = sheaf_cache_create(p, "a", 256, NULL);
	ck_assert_ptr_nonnull(a);
	o = sheaf_alloc(a);
	ck_assert_ptr_nonnull(o);
	ck_assert_int_eq(sheaf_free(a, o), 0);
	sheaf_thread_exit();
	ck_assert_msg(engine_cache_destroy(&p->engine, a->id, err, sizeof(err)) == 0,
		      "destroy: %s", err);
	b = sheaf_cache_create(p, "b", 64, NULL);
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq(b->id, a->id);
	ck_assert_ptr_ne(b, a);
	o = sheaf_alloc(b);
	ck_assert_ptr_nonnull(o);
	require_stale(a, o);
	ck_assert_int_eq(sheaf_free(b, o), 0);
	require_works(b, 64);
	sheaf_pool_destroy(p);
}
END_TEST

/* The lanes' base of a destroyed cache starts again from zero with their
 * counters: a client's own in use (net - base) never goes negative. */
START_TEST(destroy_resets_base)
{
	struct sheaf_pool_config cfg = { .size = 64 << 20, .nodes = 1 };
	char err[256] = "";
	sheaf_pool_t *p = pool_new(&cfg);
	sheaf_cache_t *a;
	void *o;

	a = sheaf_cache_create(p, "a", 64, NULL);
	ck_assert_ptr_nonnull(o = sheaf_alloc(a));
	ck_assert_int_eq(sheaf_free(a, o), 0);
	sheaf_thread_exit();
	/* As a lane taken over from a client that had objects in use. */
	for (uint32_t l = 0; l < pool_lanes_used(&p->shm); l++)
		at_store_relaxed(lane_base(&p->shm, &p->shm.lanes[l], a->id), 17);
	ck_assert_msg(engine_cache_destroy(&p->engine, a->id, err, sizeof(err)) == 0,
		      "destroy: %s", err);
	for (uint32_t l = 0; l < pool_lanes_used(&p->shm); l++)
		ck_assert_int_eq(at_load_relaxed(lane_base(&p->shm, &p->shm.lanes[l], a->id)), 0);
	sheaf_pool_destroy(p);
}
END_TEST

/* ---- destroy against live threads -------------------------------------- */

struct racer {
	sheaf_cache_t *c;
	unsigned seed;
	int failed;                  /* an error other than ESTALE */
	char why[128];
	long ops;
};

/* Allocate and free batches, giving every sheaf back between them (so
 * that a destroy can succeed), until the handle goes stale. */
static void *racer_main(void *arg)
{
	struct racer *r = arg;
	static __thread void *objs[600];

	for (;;) {
		unsigned n = 1 + (unsigned)rand_r(&r->seed) % 600;
		unsigned i;

		for (i = 0; i < n; i++) {
			objs[i] = sheaf_alloc(r->c);
			if (objs[i] == NULL)
				break;
		}
		if (i < n && (errno != ESTALE || i > 0)) {
			/* Stale with objects held would be a destroy that
			 * ignored them. */
			snprintf(r->why, sizeof(r->why), "alloc %u of %u: %s", i, n,
				 strerror(errno));
			r->failed = 1;
		}
		for (unsigned k = 0; k < i; k++) {
			int rc = sheaf_free(r->c, objs[k]);
			if (rc != 0 && !r->failed) {
				snprintf(r->why, sizeof(r->why), "free: %s", strerror(-rc));
				r->failed = 1;
			}
		}
		r->ops += i;
		sheaf_thread_exit();
		if (i < n)
			return NULL;
		if (rand_r(&r->seed) % 4 == 0)
			usleep(rand_r(&r->seed) % 500);
	}
}

START_TEST(destroy_races_threads)
{
	enum { THREADS = 3 };
	const int rounds = test_san() ? 8 : 40;
	struct dmn d;
	char err[256] = "";
	sheaf_pool_t *p;
	struct racer rs[THREADS];
	pthread_t thr[THREADS];
	long busy = 0, ops = 0;
	int fd;
	uint32_t slot = SHEAF_MAX_CACHES;

	dmn_init(&d);
	dmn_start(&d, NULL);
	p = sheaf_connect(d.sock, "racers", 0, err, sizeof(err));
	ck_assert_msg(p != NULL, "connect: %s", err);
	fd = unix_connect(d.sock);
	ck_assert_int_ge(fd, 0);
	for (int round = 0; round < rounds; round++) {
		struct sheaf_stats st;
		sheaf_cache_t *c = sheaf_cache_create(p, "race", round % 2 ? 64 : 192, NULL);
		int status;

		ck_assert_msg(c != NULL, "round %d: create: %s", round, strerror(errno));
		if (slot == SHEAF_MAX_CACHES)
			slot = c->id;
		ck_assert_uint_eq(c->id, slot);
		/* The slot's new cache starts empty: nothing leaked into it: no
		 * object in use, no count carried over.  (A node worker's pass
		 * may be stocking its barn right now, so the objects out of the
		 * slabs are not compared with the barn's sheaves; the checker
		 * at the end of the round walks every object.) */
		ck_assert_int_eq(sheaf_cache_stats(c, -1, &st), 0);
		ck_assert_msg(st.in_use == 0 && st.active_objects <= st.objects &&
			      st.stat[sheaf_stat_index("alloc_fastpath")] == 0 &&
			      st.stat[sheaf_stat_index("free_slowpath")] == 0,
			      "round %d: new cache has %llu objects (%llu out of slabs), %llu slabs, "
			      "%llu in use, %llu+%llu barn sheaves", round,
			      (unsigned long long)st.objects, (unsigned long long)st.active_objects,
			      (unsigned long long)st.slabs,
			      (unsigned long long)st.in_use, (unsigned long long)st.barn_full,
			      (unsigned long long)st.barn_empty);
		for (int t = 0; t < THREADS; t++) {
			rs[t] = (struct racer){ .c = c, .seed = (unsigned)(round * 31 + t) };
			ck_assert_int_eq(pthread_create(&thr[t], NULL, racer_main, &rs[t]), 0);
		}
		usleep(2000 + (round % 5) * 1000);
		while ((status = rpc_destroy(fd, "race", err, sizeof(err))) ==
		       SHEAF__V1__STATUS__STATUS_BUSY) {
			busy++;
			usleep(200);
		}
		ck_assert_msg(status == SHEAF__V1__STATUS__STATUS_OK, "round %d: destroy: %d %s",
			      round, status, err);
		for (int t = 0; t < THREADS; t++) {
			pthread_join(thr[t], NULL);
			ck_assert_msg(!rs[t].failed, "round %d thread %d: %s", round, t, rs[t].why);
			ops += rs[t].ops;
		}
		{
			Sheaf__V1__Response *r = raw_check(d.sock);
			ck_assert_msg(r->check->ok && r->check->in_use == r->check->counted_in_use,
				      "round %d: check: %s (in use %llu, counted %llu)", round,
				      r->check->problem, (unsigned long long)r->check->in_use,
				      (unsigned long long)r->check->counted_in_use);
			sheaf__v1__response__free_unpacked(r, NULL);
		}
	}
	printf("  %d destroys under %d allocating threads (%ld objects): %ld refused EBUSY "
	       "first, none leaked\n", rounds, THREADS, ops, busy);
	close(fd);
	sheaf_disconnect(p);
	dmn_stop(&d, 5000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- create or open ---------------------------------------------------- */

static void create_or_open_rules(sheaf_pool_t *p)
{
	struct sheaf_cache_config al = { .align = 64 };
	sheaf_cache_t *c, *o;
	int created = -1;

	c = sheaf_cache_create_or_open(p, "geo", 64, NULL, &created);
	ck_assert_msg(c != NULL, "create: %s", strerror(errno));
	ck_assert_int_eq(created, 1);
	o = sheaf_cache_create_or_open(p, "geo", 64, NULL, &created);
	ck_assert_ptr_eq(o, c);
	ck_assert_int_eq(created, 0);
	/* 60 rounds up to 64 (align 8): the same geometry. */
	ck_assert_ptr_eq(sheaf_cache_create_or_open(p, "geo", 60, NULL, NULL), c);
	errno = 0;
	ck_assert_ptr_null(sheaf_cache_create_or_open(p, "geo", 128, NULL, &created));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(sheaf_cache_create_or_open(p, "geo", 64, &al, NULL));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(sheaf_cache_create_or_open(p, "geo", 0, NULL, NULL));
	ck_assert_int_eq(errno, EINVAL);
	/* Plain create still says EEXIST. */
	errno = 0;
	ck_assert_ptr_null(sheaf_cache_create(p, "geo", 64, NULL));
	ck_assert_int_eq(errno, EEXIST);
	ck_assert_uint_eq(sheaf_cache_object_size(c), 64);
}

#define RACE_NAMES 24

struct opener {
	sheaf_pool_t *p;
	const char *sock;            /* sheafd: connect in the child */
	int *created;                /* [RACE_NAMES] */
	pthread_barrier_t *go;       /* local: threads */
	volatile int *gate;          /* sheafd: shared memory, 1 = go */
};

static int open_all(struct opener *o)
{
	for (int i = 0; i < RACE_NAMES; i++) {
		char name[16];
		sheaf_cache_t *c;

		snprintf(name, sizeof(name), "race%d", i);
		c = sheaf_cache_create_or_open(o->p, name, 32 + 8 * (size_t)i, NULL,
					       &o->created[i]);
		REQUIRE(c != NULL, "%s: %s", name, strerror(errno));
		REQUIRE(sheaf_cache_object_size(c) == 32 + 8 * (size_t)i, "%s: size %zu", name,
			sheaf_cache_object_size(c));
	}
	return 0;
}

static void *opener_thread(void *arg)
{
	struct opener *o = arg;

	pthread_barrier_wait(o->go);
	open_all(o);
	return NULL;
}

static int opener_child(void *arg)
{
	struct opener *o = arg;

	o->p = child_connect(o->sock, "opener");
	while (!__atomic_load_n(o->gate, __ATOMIC_ACQUIRE))
		;
	open_all(o);
	sheaf_disconnect(o->p);
	return 0;
}

static void require_one_creator(int *a, int *b)
{
	for (int i = 0; i < RACE_NAMES; i++)
		ck_assert_msg(a[i] + b[i] == 1, "race%d: created %d and %d times", i, a[i], b[i]);
}

START_TEST(create_or_open_local)
{
	struct sheaf_pool_config cfg = { .size = 64 << 20, .nodes = 1 };
	sheaf_pool_t *p = pool_new(&cfg);
	int created[2][RACE_NAMES];
	pthread_barrier_t go;
	struct opener o[2];
	pthread_t t[2];

	create_or_open_rules(p);
	pthread_barrier_init(&go, NULL, 2);
	for (int i = 0; i < 2; i++) {
		o[i] = (struct opener){ .p = p, .created = created[i], .go = &go };
		ck_assert_int_eq(pthread_create(&t[i], NULL, opener_thread, &o[i]), 0);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	require_one_creator(created[0], created[1]);
	pthread_barrier_destroy(&go);
	sheaf_pool_destroy(p);
}
END_TEST

START_TEST(create_or_open_sheafd)
{
	struct dmn d;
	char err[256] = "";
	sheaf_pool_t *p;
	int *shared;
	struct opener o[2];
	pid_t pid[2];
	int first = 0, second = 0;

	dmn_init(&d);
	dmn_start(&d, NULL);
	/* The racers first: a child must not inherit this process's mapping. */
	shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(shared, MAP_FAILED);
	for (int i = 0; i < 2; i++) {
		o[i] = (struct opener){ .sock = d.sock, .created = shared + 1 + i * RACE_NAMES,
					.gate = shared };
		pid[i] = fork_child(opener_child, &o[i]);
	}
	p = sheaf_connect(d.sock, "rules", 0, err, sizeof(err));
	ck_assert_msg(p != NULL, "connect: %s", err);
	create_or_open_rules(p);
	usleep(200000);                          /* both connected, spinning */
	__atomic_store_n(shared, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 2; i++)
		reap_ok(pid[i], 30000, "opener");
	require_one_creator(shared + 1, shared + 1 + RACE_NAMES);
	for (int i = 0; i < RACE_NAMES; i++)
		*(shared[1 + i] ? &first : &second) += 1;
	printf("  %d names created by racing processes: %d by one, %d by the other\n",
	       RACE_NAMES, first, second);
	munmap(shared, 4096);
	sheaf_disconnect(p);
	dmn_stop(&d, 5000);
	dmn_cleanup(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("handles");

	require_binaries("test_handles");

	ADD_ALONE(s, stale_handle_sheafd, 60);
	ADD_ALONE(s, stale_handle_local, 60);
	ADD_ALONE(s, destroy_resets_base, 60);
	ADD_ALONE(s, destroy_races_threads, 300);
	ADD_ALONE(s, create_or_open_local, 60);
	ADD_ALONE(s, create_or_open_sheafd, 60);
	return run_suite(s);
}
