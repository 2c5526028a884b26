/*
 * test_large_xproc.c - large objects between real processes against a real
 * sheafd (2 simulated nodes of 128 MiB):
 *
 *   pipeline     a producer fills frames of 1 to 4 MiB (a stamp in every
 *                4 KiB page) and enqueues them on a shared queue; two
 *                consumers dequeue them, check every page and free them
 *                with sheaf_free_any: nothing copied, nothing left in use,
 *                the checker passes.
 *   named        a process names a 2 MiB object and exits; another finds
 *                it by name, reads it and frees it.
 *   owned_killed a holder of 1 MiB objects of an owned cache is SIGKILLed:
 *                sheafd frees them (owner_freed), nothing stays in use.
 *   retain_tune  `sheafctl tune --pool large_retain=0`: 1 MiB objects
 *                written and freed go back to the kernel at once (the
 *                SHARED memfd's blocks), as far as the class's barn; and
 *                `sheafctl shrink` returns the rest.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/internal.h"
#include "client/sheaf.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_proc.h"

#define MIB (1u << 20)
#define FRAMES 120
#define QCAP 8

static size_t frame_size(int i)
{
	static const size_t sz[] = { 1 * MIB, 2 * MIB + 5, 4 * MIB, 3 * MIB, 65537, 1 * MIB + 1 };

	return sz[i % 6];
}

/* The stamp of page @pg of frame @i. */
static uint64_t stamp(int i, size_t pg)
{
	return mix64(((uint64_t)i << 32) | pg);
}

struct pipe_arg {
	const char *sock;
	int who;
	int done[2];
};

static int producer(void *argp)
{
	struct pipe_arg *a = argp;
	sheaf_pool_t *p = child_connect(a->sock, "large-producer");
	sheaf_queue_t *q = sheaf_queue_create(p, "frames", QCAP, 0);

	REQUIRE(q != NULL, "queue_create: %s", strerror(errno));
	for (int i = 0; i < FRAMES; i++) {
		size_t n = frame_size(i);
		unsigned char *o = sheaf_malloc(p, n);
		int rc;

		REQUIRE(o != NULL, "malloc %zu: %s", n, strerror(errno));
		for (size_t pg = 0; pg * 4096 + 8 <= n; pg++)
			memcpy(o + pg * 4096, &(uint64_t){ stamp(i, pg) }, 8);
		o[n - 1] = (unsigned char)i;
		memcpy(o + 8, &i, sizeof(i));
		while ((rc = sheaf_enqueue(q, o)) == -EAGAIN)
			sleep_us(100);
		REQUIRE(rc == 0, "enqueue %d: %s", i, strerror(-rc));
	}
	sheaf_queue_close(q);
	sheaf_thread_exit();
	sheaf_disconnect(p);
	return 0;
}

static int consumer(void *argp)
{
	struct pipe_arg *a = argp;
	sheaf_pool_t *p = child_connect(a->sock, a->who ? "large-consumer-1" : "large-consumer-0");
	sheaf_queue_t *q;
	int64_t end = now_ms() + 120000;

	while ((q = sheaf_queue_open(p, "frames")) == NULL && errno == ENOENT &&
	       now_ms() < end)
		sleep_ms(1);        /* the producer makes it */
	REQUIRE(q != NULL, "queue_open: %s", strerror(errno));
	for (;;) {
		unsigned char *o;
		int rc = sheaf_dequeue(q, (void **)&o), i;
		size_t n;

		if (rc == -EAGAIN) {
			char c;

			/* the producer is done and the queue empty: stop */
			if (read_full(a->done[0], &c, 1, 1) == 0)
				break;
			REQUIRE(now_ms() < end, "consumer %d: no frame for too long", a->who);
			sleep_us(100);
			continue;
		}
		REQUIRE(rc == 0, "dequeue: %s", strerror(-rc));
		memcpy(&i, o + 8, sizeof(i));
		REQUIRE(i >= 0 && i < FRAMES, "frame number %d", i);
		n = frame_size(i);
		REQUIRE(sheaf_obj_size(p, o) >= n, "frame %d: usable %zu < %zu", i,
			sheaf_obj_size(p, o), n);
		for (size_t pg = 0; pg * 4096 + 8 <= n; pg++) {
			uint64_t v;

			memcpy(&v, o + pg * 4096, 8);
			if (pg == 0)
				continue;       /* bytes 8..12 hold the number */
			REQUIRE(v == stamp(i, pg), "frame %d page %zu changed", i, pg);
		}
		REQUIRE(o[n - 1] == (unsigned char)i, "frame %d: last byte", i);
		REQUIRE(sheaf_free_any(p, o) == 0, "free_any of frame %d", i);
	}
	sheaf_queue_close(q);
	sheaf_thread_exit();
	sheaf_disconnect(p);
	return 0;
}

/* No object of any large class is in use. */
static void require_large_free(sheaf_pool_t *p)
{
	for (unsigned sz = 128u << 10; sz <= 64 * MIB; sz <<= 1) {
		char name[48];
		sheaf_cache_t *c;
		struct sheaf_stats st;

		snprintf(name, sizeof(name), "kmalloc-%u", sz);
		c = sheaf_cache_open(p, name);
		if (c == NULL)
			continue;
		REQUIRE(sheaf_cache_stats(c, -1, &st) == 0, "stats %s", name);
		REQUIRE(st.in_use == 0, "%s: %llu objects in use", name,
			(unsigned long long)st.in_use);
	}
}

START_TEST(pipeline)
{
	struct dmn d;
	struct pipe_arg pa = { 0 }, c0, c1;
	pid_t prod, cons[2];
	sheaf_pool_t *p;
	sheaf_queue_t *q;
	char err[256] = "";

	dmn_init(&d);
	dmn_start(&d, NULL);
	pa.sock = d.sock;
	REQUIRE(pipe(pa.done) == 0, "pipe");
	c0 = pa;
	c1 = pa;
	c1.who = 1;
	prod = fork_child(producer, &pa);
	cons[0] = fork_child(consumer, &c0);
	cons[1] = fork_child(consumer, &c1);
	reap_ok(prod, 120000, "producer");
	REQUIRE(write_full(pa.done[1], "xx", 2) == 0, "write");  /* one byte each */
	reap_ok(cons[0], 120000, "consumer 0");
	reap_ok(cons[1], 120000, "consumer 1");
	wait_no_clients(&d, 30000);
	/* connected only now: a child must not inherit the mapping */
	p = sheaf_connect(d.sock, "large-check", 0, err, sizeof(err));
	REQUIRE(p != NULL, "connect: %s", err);
	require_large_free(p);
	REQUIRE(sheaf_pool_check(p, err, sizeof(err)) == 0, "check: %s", err);
	q = sheaf_queue_open(p, "frames");
	REQUIRE(q != NULL && sheaf_queue_destroy(q) == 0, "queue destroy");
	printf("pipeline: %d frames of 64 KiB..4 MiB through a queue, 2 consumers\n", FRAMES);
	sheaf_disconnect(p);
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

static int namer(void *argp)
{
	const char *sock = argp;
	sheaf_pool_t *p = child_connect(sock, "large-namer");
	unsigned char *o = sheaf_malloc(p, 2 * MIB);

	REQUIRE(o != NULL, "malloc: %s", strerror(errno));
	for (size_t i = 0; i < 2 * MIB; i += 4096)
		o[i] = (unsigned char)(i >> 12);
	REQUIRE(sheaf_name_set(p, "big-frame", o) == 0, "name_set");
	REQUIRE(sheaf_name_set(p, "big-frame-mid", o + (1u << 18)) != 0,
		"a name for the middle of an object accepted");
	sheaf_thread_exit();
	sheaf_disconnect(p);
	return 0;
}

START_TEST(named)
{
	struct dmn d;
	sheaf_pool_t *p;
	unsigned char *o;
	char err[256] = "";

	dmn_init(&d);
	dmn_start(&d, NULL);
	reap_ok(fork_child(namer, d.sock), 60000, "namer");
	wait_no_clients(&d, 30000);
	p = sheaf_connect(d.sock, "large-reader", 0, err, sizeof(err));
	REQUIRE(p != NULL, "connect: %s", err);
	o = sheaf_name_get(p, "big-frame");
	REQUIRE(o != NULL, "name_get: %s", strerror(errno));
	ck_assert_uint_eq(sheaf_obj_size(p, o), 2 * MIB);
	for (size_t i = 0; i < 2 * MIB; i += 4096)
		REQUIRE(o[i] == (unsigned char)(i >> 12), "page %zu", i >> 12);
	ck_assert_int_eq(sheaf_name_del(p, "big-frame"), 0);
	ck_assert_int_eq(sheaf_free_any(p, o), 0);
	ck_assert_int_eq(sheaf_free_any(p, o), -EALREADY);
	sheaf_thread_exit();
	require_large_free(p);
	REQUIRE(sheaf_pool_check(p, err, sizeof(err)) == 0, "check: %s", err);
	sheaf_disconnect(p);
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

struct hold_arg {
	const char *sock;
	int ready[2];
};

#define HELD 20

static int holder(void *argp)
{
	struct hold_arg *a = argp;
	sheaf_pool_t *p = child_connect(a->sock, "large-holder");
	struct sheaf_cache_config cfg = { .capacity = SHEAF_CAPACITY_DEFAULT,
					  .flags = SHEAF_CACHE_OWNED };
	sheaf_cache_t *c = sheaf_cache_create(p, "frames-owned", MIB, &cfg);

	REQUIRE(c != NULL, "cache_create: %s", strerror(errno));
	for (int i = 0; i < HELD; i++) {
		unsigned char *o = sheaf_alloc(c);

		REQUIRE(o != NULL, "alloc %d: %s", i, strerror(errno));
		memset(o, i, MIB);
	}
	REQUIRE(write_full(a->ready[1], "r", 1) == 0, "write");
	for (;;)
		pause();
	return 0;
}

START_TEST(owned_killed)
{
	struct dmn d;
	struct hold_arg a;
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	struct sheaf_stats st;
	char err[256] = "", b;
	pid_t h;
	int status;

	dmn_init(&d);
	dmn_start(&d, NULL);
	a.sock = d.sock;
	REQUIRE(pipe(a.ready) == 0, "pipe");
	h = fork_child(holder, &a);
	REQUIRE(read_full(a.ready[0], &b, 1, 60000) == 0, "holder not ready");
	kill(h, SIGKILL);
	REQUIRE(wait_pid(h, 10000, &status) == 1, "holder did not die");
	untrack(h);
	wait_no_clients(&d, 30000);
	p = sheaf_connect(d.sock, "large-check", 0, err, sizeof(err));
	REQUIRE(p != NULL, "connect: %s", err);
	c = sheaf_cache_open(p, "frames-owned");
	REQUIRE(c != NULL, "open: %s", strerror(errno));
	REQUIRE(sheaf_cache_stats(c, -1, &st) == 0, "stats");
	REQUIRE(st.in_use == 0, "%llu objects of the dead holder in use",
		(unsigned long long)st.in_use);
	REQUIRE(sheaf_pool_check(p, err, sizeof(err)) == 0, "check: %s", err);
	sheaf_disconnect(p);
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

static uint64_t blocks_of(const sheaf_pool_t *p)
{
	struct stat st;

	REQUIRE(fstat(p->shm.shared_fd, &st) == 0, "fstat");
	return (uint64_t)st.st_blocks * 512;
}

/* sheafctl A1 A2 A3 must succeed; its output in @out when not NULL. */
static void sheafctl_out(struct dmn *d, const char *a1, const char *a2, const char *a3,
			 const char *out)
{
	const char *argv[] = { sheafctl_bin(), "-s", d->sock, a1, a2, a3, NULL };
	struct spawn_opts so = { .out = out };
	char err[256] = "";
	int st;

	REQUIRE(run_proc(argv, out ? &so : NULL, 30000, &st, err, sizeof(err)) == NULL &&
		exited_ok(st), "sheafctl %s %s %s: %s", a1, a2 ? a2 : "", a3 ? a3 : "", err);
}

static void sheafctl(struct dmn *d, const char *a1, const char *a2, const char *a3)
{
	sheafctl_out(d, a1, a2, a3, NULL);
}

START_TEST(retain_tune)
{
	const char *extra[] = { "--huge-pages", "off", NULL };
	struct dmn d;
	sheaf_pool_t *p;
	enum { N = 40 };
	unsigned char *o[N];
	uint64_t base, full, now = 0;
	char err[256] = "", out[256];

	dmn_init(&d);
	dmn_start(&d, extra);
	sheafctl(&d, "tune", "--pool", "large_retain=0");
	p = sheaf_connect(d.sock, "large-retain", 0, err, sizeof(err));
	REQUIRE(p != NULL, "connect: %s", err);
	ck_assert_uint_eq(at_load_relaxed(&p->shm.hdr->large_retain), 0);
	base = blocks_of(p);
	for (int i = 0; i < N; i++) {
		o[i] = sheaf_malloc(p, MIB);
		REQUIRE(o[i] != NULL, "malloc %d: %s", i, strerror(errno));
		memset(o[i], i, MIB);
	}
	full = blocks_of(p);
	REQUIRE(full >= base + (uint64_t)N * MIB, "%llu MiB allocated",
		(unsigned long long)((full - base) >> 20));
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(sheaf_free_any(p, o[i]), 0);
	sheaf_thread_exit();
	/* the barn keeps 16 MiB; 2 MiB of slack for metadata */
	for (int t = 0; t < 1000; t++) {
		now = blocks_of(p);
		if (now <= base + 18 * MIB)
			break;
		sleep_ms(10);
	}
	if (now > base + 18 * MIB) {
		struct sheaf_stats st;
		sheaf_cache_t *c = sheaf_cache_open(p, "kmalloc-1048576");

		REQUIRE(c != NULL && sheaf_cache_stats(c, -1, &st) == 0, "stats");
		fprintf(stderr, "kmalloc-1048576: slabs %llu objects %llu active %llu barn_full %llu "
		       "barn_empty %llu in_use %llu\n", (unsigned long long)st.slabs,
		       (unsigned long long)st.objects, (unsigned long long)st.active_objects,
		       (unsigned long long)st.barn_full, (unsigned long long)st.barn_empty,
		       (unsigned long long)st.in_use);
	}
	REQUIRE(now <= base + 18 * MIB, "%llu MiB still allocated with large_retain=0",
		(unsigned long long)((now - base) >> 20));
	sheafctl(&d, "shrink", NULL, NULL);
	now = blocks_of(p);
	REQUIRE(now <= base + 2 * MIB, "%llu MiB still allocated after sheafctl shrink",
		(unsigned long long)((now - base) >> 20));
	/* sheafctl info shows the figures */
	snprintf(out, sizeof(out), "%s/info.json", d.dir);
	sheafctl_out(&d, "info", "-o", "json", out);
	REQUIRE(file_contains(out, "\"large_retain\": 0") &&
		file_contains(out, "\"large_retained\": 0") &&
		file_contains(out, "\"large_bytes\":") && file_contains(out, "\"shared_allocated\":"),
		"sheafctl info -o json: no large-object figures");
	sheaf_disconnect(p);
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("large_xproc");

	require_binaries("test_large_xproc");
	ADD_ALONE(s, pipeline, 300);
	ADD_ALONE(s, named, 120);
	ADD_ALONE(s, owned_killed, 120);
	ADD_ALONE(s, retain_tune, 120);
	return run_suite(s);
}
