/*
 * test_large_kill.c - clients SIGKILLed at any instruction of large-object
 * allocs and frees, against a real sheafd (2 simulated nodes of 128 MiB):
 *
 *   kill_large   victims allocate and free objects of two owned large
 *                caches (1 MiB: four frames a slab, sheaves of 4; 3 MiB +
 *                1: thirteen frames, sheaves of 1, a barn exchange every
 *                operation), writing every page, with sheaf_alloc,
 *                sheaf_free and sheaf_free_any, and are SIGKILLed at a
 *                random moment 1000 times (200 under SHEAF_SAN), while a
 *                survivor allocs and frees stamped objects that must never
 *                change (nothing handed out twice).  Then: sheafd alive,
 *                every victim repaired, no object in use, the pool checker
 *                passes, and a newcomer gets a node's worth of objects
 *                (nothing lost or wedged).
 *
 * Child processes report through pipes and exit statuses.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/sheaf.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_proc.h"

#define MIB (1u << 20)
#define HOLD 4

static const char *const cache_name[2] = { "lk-1m", "lk-3m" };
static const size_t cache_size[2] = { MIB, 3 * MIB + 1 };

struct arg {
	const char *sock;
	int ready[2];
	int stop[2];
	uint64_t seed;
};

static sheaf_cache_t *open_or_make(sheaf_pool_t *p, int k)
{
	struct sheaf_cache_config cfg = { .capacity = SHEAF_CAPACITY_DEFAULT,
					  .flags = SHEAF_CACHE_OWNED };
	sheaf_cache_t *c = sheaf_cache_create_or_open(p, cache_name[k], cache_size[k], &cfg, NULL);

	REQUIRE(c != NULL, "cache %s: %s", cache_name[k], strerror(errno));
	return c;
}

/* Write the first byte of every page of @o (@n bytes). */
static void touch(unsigned char *o, size_t n, unsigned char v)
{
	for (size_t i = 0; i < n; i += 4096)
		o[i] = v;
}

static int victim(void *argp)
{
	struct arg *a = argp;
	sheaf_pool_t *p = child_connect(a->sock, "large-victim");
	sheaf_cache_t *c[2] = { open_or_make(p, 0), open_or_make(p, 1) };
	unsigned char *held[HOLD];
	int kind[HOLD], n = 0, said = 0;
	uint64_t s = a->seed;

	for (;;) {
		uint64_t r = xorshift(&s);
		int k = (int)(r & 1);

		if (n < HOLD && (n == 0 || (r >> 1) % 3 != 0)) {
			unsigned char *o = sheaf_alloc(c[k]);

			if (o == NULL) {
				REQUIRE(errno == ENOMEM || errno == EAGAIN, "alloc: %s",
					strerror(errno));
				continue;
			}
			touch(o, cache_size[k], (unsigned char)r);
			held[n] = o;
			kind[n++] = k;
		} else if (n > 0) {
			int i = (int)((r >> 8) % (uint64_t)n), rc;

			rc = (r >> 16) & 1 ? sheaf_free_any(p, held[i]) : sheaf_free(c[kind[i]], held[i]);
			REQUIRE(rc == 0, "free: %s", strerror(-rc));
			held[i] = held[--n];
			kind[i] = kind[n];
		}
		if (!said) {
			said = 1;
			REQUIRE(write_full(a->ready[1], "r", 1) == 0, "write");
		}
	}
	return 0;
}

/* Stamped objects, allocated and freed in turn until told to stop: a
 * stamp that changed means an object was handed out twice. */
static int survivor(void *argp)
{
	struct arg *a = argp;
	sheaf_pool_t *p = child_connect(a->sock, "large-survivor");
	sheaf_cache_t *c = open_or_make(p, 0);
	unsigned char *held[HOLD] = { NULL };
	uint64_t stamp[HOLD] = { 0 }, s = a->seed, ops = 0;
	char b;

	REQUIRE(write_full(a->ready[1], "s", 1) == 0, "write");
	while (read_full(a->stop[0], &b, 1, 1) != 0) {
		int i = (int)(xorshift(&s) % HOLD);

		if (held[i] != NULL) {
			for (size_t off = 0; off < MIB; off += 4096)
				REQUIRE(memcmp(held[i] + off, &stamp[i], 8) == 0,
					"object %p changed at %zu while held", (void *)held[i], off);
			REQUIRE(sheaf_free(c, held[i]) == 0, "survivor free");
			held[i] = NULL;
			continue;
		}
		held[i] = sheaf_alloc(c);
		if (held[i] == NULL) {
			REQUIRE(errno == ENOMEM || errno == EAGAIN, "survivor alloc: %s",
				strerror(errno));
			continue;
		}
		stamp[i] = xorshift(&s);
		for (size_t off = 0; off < MIB; off += 4096)
			memcpy(held[i] + off, &stamp[i], 8);
		ops++;
	}
	for (int i = 0; i < HOLD; i++)
		if (held[i] != NULL)
			REQUIRE(sheaf_free(c, held[i]) == 0, "survivor free");
	REQUIRE(ops > 0, "the survivor never allocated");
	sheaf_thread_exit();
	sheaf_disconnect(p);
	return 0;
}

START_TEST(kill_large)
{
	struct dmn d;
	struct arg a = { 0 };
	int kills = test_san() ? 200 : 1000, st;
	uint64_t s = 0x9e3779b97f4a7c15ull;
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	pid_t surv;
	char err[256] = "", b;
	int64_t t0 = now_ms();
	unsigned got = 0;
	void **objs;

	dmn_init(&d);
	dmn_start(&d, NULL);
	a.sock = d.sock;
	REQUIRE(pipe(a.ready) == 0 && pipe(a.stop) == 0, "pipe");
	a.seed = 42;
	surv = fork_child(survivor, &a);
	REQUIRE(read_full(a.ready[0], &b, 1, 30000) == 0 && b == 's', "survivor not ready");
	for (int k = 0; k < kills; k++) {
		pid_t v;

		a.seed = xorshift(&s) | 1;
		v = fork_child(victim, &a);
		REQUIRE(read_full(a.ready[0], &b, 1, 30000) == 0 && b == 'r',
			"victim %d not running", k);
		sleep_us((unsigned)(xorshift(&s) % 3000));
		kill(v, SIGKILL);
		REQUIRE(wait_pid(v, 10000, &st) == 1, "victim %d did not die", k);
		untrack(v);
		REQUIRE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "victim %d: %s", k,
			status_str(st, err, sizeof(err)));
	}
	REQUIRE(write_full(a.stop[1], "x", 1) == 0, "write");
	reap_ok(surv, 60000, "survivor");
	wait_no_clients(&d, 60000);
	REQUIRE(dmn_alive(&d), "sheafd died");
	printf("kill_large: %d victims SIGKILLed in %lld ms\n", kills,
	       (long long)(now_ms() - t0));
	p = sheaf_connect(d.sock, "large-newcomer", 0, err, sizeof(err));
	REQUIRE(p != NULL, "connect: %s", err);
	for (int k = 0; k < 2; k++) {
		struct sheaf_stats cs;

		c = sheaf_cache_open(p, cache_name[k]);
		REQUIRE(c != NULL && sheaf_cache_stats(c, -1, &cs) == 0, "stats %s", cache_name[k]);
		REQUIRE(cs.in_use == 0, "%s: %llu objects in use after the kills", cache_name[k],
			(unsigned long long)cs.in_use);
	}
	REQUIRE(sheaf_pool_check(p, err, sizeof(err)) == 0, "check: %s", err);
	/* a newcomer gets most of the pool's frames as 1 MiB objects */
	c = sheaf_cache_open(p, cache_name[0]);
	objs = calloc(512, sizeof(*objs));
	REQUIRE(objs != NULL, "calloc");
	while (got < 512 && (objs[got] = sheaf_alloc(c)) != NULL) {
		touch(objs[got], MIB, (unsigned char)got);
		got++;
	}
	REQUIRE(got >= 160, "a newcomer got only %u objects of 1 MiB from 256 MiB", got);
	for (unsigned i = 0; i < got; i++)
		REQUIRE(sheaf_free(c, objs[i]) == 0, "newcomer free %u", i);
	free(objs);
	sheaf_thread_exit();
	REQUIRE(sheaf_pool_check(p, err, sizeof(err)) == 0, "check: %s", err);
	sheaf_disconnect(p);
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("large_kill");

	require_binaries("test_large_kill");
	ADD_ALONE(s, kill_large, 600);
	return run_suite(s);
}
