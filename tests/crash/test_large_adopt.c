/*
 * test_large_adopt.c - sheafd SIGKILLed while a client holds large
 * objects (multi-frame slabs of a size class and of a fixed 3 MiB + 1
 * cache), then started again with the fd store's memfds (as systemd
 * does): it adopts the region, rebuilding the slab lists and the node
 * allocators from the frame owner map (first frames and their tails).
 * The client's objects keep their stamps, it frees them and allocates
 * again, the checker passes with nothing in use, and a newcomer gets
 * distinct objects of both caches.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/sheaf.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_deploy.h"
#include "tests/helpers/util_notify.h"
#include "tests/helpers/util_proc.h"

#define MIB (1u << 20)
#define NOBJ 6
#define FIXED (3 * MIB + 1)

struct arg {
	const char *sock;
	int ready[2], go[2];
};

static void stamp(unsigned char *o, size_t n, uint64_t v)
{
	for (size_t off = 0; off + 8 <= n; off += 4096)
		memcpy(o + off, &v, 8);
}

static int stamped(const unsigned char *o, size_t n, uint64_t v)
{
	for (size_t off = 0; off + 8 <= n; off += 4096)
		if (memcmp(o + off, &v, 8) != 0)
			return 0;
	return 1;
}

static int holder(void *argp)
{
	struct arg *a = argp;
	sheaf_pool_t *p = child_connect(a->sock, "large-holder");
	sheaf_cache_t *c = sheaf_cache_create(p, "ad-3m", FIXED, NULL);
	unsigned char *m[NOBJ], *f[NOBJ];
	char b;

	REQUIRE(c != NULL, "create: %s", strerror(errno));
	for (int i = 0; i < NOBJ; i++) {
		m[i] = sheaf_malloc(p, MIB);
		f[i] = sheaf_alloc(c);
		REQUIRE(m[i] != NULL && f[i] != NULL, "alloc %d: %s", i, strerror(errno));
		stamp(m[i], MIB, mix64((uint64_t)i));
		stamp(f[i], FIXED, mix64((uint64_t)i + 100));
	}
	/* some back in sheaves and slabs when sheafd dies */
	REQUIRE(sheaf_free_any(p, m[0]) == 0 && sheaf_free(c, f[0]) == 0, "free");
	REQUIRE(write_full(a->ready[1], "r", 1) == 0, "write");
	REQUIRE(read_full(a->go[0], &b, 1, 120000) == 0, "no go");
	for (int i = 1; i < NOBJ; i++) {
		REQUIRE(stamped(m[i], MIB, mix64((uint64_t)i)), "1 MiB object %d changed", i);
		REQUIRE(stamped(f[i], FIXED, mix64((uint64_t)i + 100)), "3 MiB object %d changed", i);
		REQUIRE(sheaf_free_any(p, m[i]) == 0, "free_any %d", i);
		REQUIRE(sheaf_free(c, f[i]) == 0, "free %d", i);
	}
	for (int i = 0; i < NOBJ; i++) {       /* the engine serves them again */
		m[i] = sheaf_malloc(p, MIB);
		f[i] = sheaf_alloc(c);
		REQUIRE(m[i] != NULL && f[i] != NULL, "alloc after adoption %d: %s", i,
			strerror(errno));
		stamp(m[i], MIB, 1);
		stamp(f[i], FIXED, 2);
	}
	for (int i = 0; i < NOBJ; i++)
		REQUIRE(sheaf_free_any(p, m[i]) == 0 && sheaf_free(c, f[i]) == 0, "free again");
	sheaf_thread_exit();
	sheaf_disconnect(p);
	return 0;
}

static void require_none_in_use(sheaf_pool_t *p, const char *name)
{
	sheaf_cache_t *c = sheaf_cache_open(p, name);
	struct sheaf_stats st;

	REQUIRE(c != NULL && sheaf_cache_stats(c, -1, &st) == 0, "stats %s", name);
	REQUIRE(st.in_use == 0, "%s: %llu in use", name, (unsigned long long)st.in_use);
}

START_TEST(adopt_large)
{
	struct notify n;
	struct notify_drainer dr;
	struct svc d = { 0 };
	struct arg a;
	pid_t h;
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	char err[256] = "", b;
	void *o[2][16];

	make_test_dir();
	notify_open(&n);
	fmt(d.sock, sizeof(d.sock), "%s/s.sock", test_dir);
	svc_start(&d, &n, -1, 0, 0);
	REQUIRE(n.store_fd >= 0 && n.store_shared_fd >= 0, "no memfds in the fd store");
	notify_drainer_start(&dr, &n);
	a.sock = d.sock;
	REQUIRE(pipe(a.ready) == 0 && pipe(a.go) == 0, "pipe");
	h = fork_child(holder, &a);
	REQUIRE(read_full(a.ready[0], &b, 1, 60000) == 0, "holder not ready");
	notify_drainer_stop(&dr);
	svc_stop(&d, &n, SIGKILL);
	svc_start(&d, &n, -1, 1, 0);
	notify_drainer_start(&dr, &n);
	REQUIRE(file_contains(d.log, "adopted the pool from the fd store"),
		"the new sheafd did not adopt the pool");
	REQUIRE(write_full(a.go[1], "g", 1) == 0, "write");
	reap_ok(h, 120000, "holder");
	p = sheaf_connect(d.sock, "large-after", 0, err, sizeof(err));
	REQUIRE(p != NULL, "connect: %s", err);
	REQUIRE(sheaf_pool_check(p, err, sizeof(err)) == 0, "check after adoption: %s", err);
	require_none_in_use(p, "kmalloc-1048576");
	require_none_in_use(p, "ad-3m");
	c = sheaf_cache_open(p, "ad-3m");
	REQUIRE(c != NULL, "open");
	for (int i = 0; i < 16; i++) {
		o[0][i] = sheaf_malloc(p, MIB);
		o[1][i] = sheaf_alloc(c);
		REQUIRE(o[0][i] != NULL && o[1][i] != NULL, "newcomer alloc %d: %s", i,
			strerror(errno));
		memset(o[0][i], i, MIB);
		memset(o[1][i], i, FIXED);
	}
	for (int i = 0; i < 16; i++) {
		REQUIRE(((unsigned char *)o[0][i])[MIB - 1] == (unsigned char)i &&
			((unsigned char *)o[1][i])[FIXED - 1] == (unsigned char)i,
			"object %d overwritten (two objects share memory)", i);
		REQUIRE(sheaf_free_any(p, o[0][i]) == 0 && sheaf_free(c, o[1][i]) == 0, "free");
	}
	sheaf_thread_exit();
	REQUIRE(sheaf_pool_check(p, err, sizeof(err)) == 0, "check: %s", err);
	sheaf_disconnect(p);
	notify_drainer_stop(&dr);
	svc_stop(&d, &n, SIGTERM);
	notify_close(&n);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("large_adopt");

	require_binaries("test_large_adopt");
	ADD_ALONE(s, adopt_large, 300);
	return run_suite(s);
}
