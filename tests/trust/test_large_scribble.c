/*
 * test_large_scribble.c - a hostile client against large-slab metadata,
 * with a real sheafd (2 simulated nodes of 128 MiB):
 *
 *   scribbled_flushes  a hostile client of a 1 MiB cache fills its sheaves
 *                      with pointers into the later frames and the middle
 *                      of its own objects, with objects of another large
 *                      cache (a good client's, stamped), duplicates of
 *                      its own free objects and random offsets, hands
 *                      them to the barn (thread exit), has sheafd flush
 *                      them (shrink), 300 rounds, then dies by SIGKILL
 *                      holding scribbled sheaves (the repair flushes
 *                      them).  sheafd refuses every bad entry
 *                      (flush_invalid), stays up, the good client's
 *                      objects keep their stamps and are its own, the
 *                      checker passes, and what both caches still have
 *                      can be allocated, none overlapping (the good
 *                      cache's at least the objects it freed; the
 *                      hostile's may have lost some, by design).
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/internal.h"
#include "client/sheaf.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_proc.h"

#define MIB (1u << 20)
#define GOOD 8
#define ROUNDS 300

struct shared {
	uint64_t good[GOOD];         /* the good client's objects (offsets) */
	uint64_t stamp[GOOD];
};

struct arg {
	const char *sock;
	struct shared *sh;
	int ready[2];
	int go[2];
};

static int good_client(void *argp)
{
	struct arg *a = argp;
	sheaf_pool_t *p = child_connect(a->sock, "large-good");
	sheaf_cache_t *c = sheaf_cache_create(p, "good-2m", 2 * MIB, NULL);
	unsigned char *o[GOOD];
	char b;

	REQUIRE(c != NULL, "create: %s", strerror(errno));
	for (int i = 0; i < GOOD; i++) {
		o[i] = sheaf_alloc(c);
		REQUIRE(o[i] != NULL, "alloc: %s", strerror(errno));
		a->sh->stamp[i] = mix64((uint64_t)i + 77);
		for (size_t off = 0; off < 2 * MIB; off += 4096)
			memcpy(o[i] + off, &a->sh->stamp[i], 8);
		a->sh->good[i] = (uint64_t)((char *)o[i] - p->shm.base);
	}
	REQUIRE(write_full(a->ready[1], "g", 1) == 0, "write");
	REQUIRE(read_full(a->go[0], &b, 1, 300000) == 0, "no go");
	for (int i = 0; i < GOOD; i++) {
		REQUIRE(sheaf_obj_cache(p, o[i]) == c, "object %d left its cache", i);
		for (size_t off = 0; off < 2 * MIB; off += 4096)
			REQUIRE(memcmp(o[i] + off, &a->sh->stamp[i], 8) == 0,
				"object %d changed at %zu", i, off);
		REQUIRE(sheaf_free(c, o[i]) == 0, "free %d", i);
	}
	sheaf_thread_exit();
	sheaf_disconnect(p);
	return 0;
}

/* A bad entry for the hostile's sheaf: kinds in turn. */
static uint64_t bad_entry(const sheaf_pool_t *p, const struct shared *sh, uint64_t *own,
			  unsigned n, uint64_t r)
{
	uint64_t o = own[r % n];

	switch ((r >> 8) % 7) {
	case 0: return o + SLAB_SIZE;                         /* a later frame */
	case 1: return o + 3 * SLAB_SIZE + 4096;
	case 2: return o + 4096 * (1 + (r >> 16) % 63);     /* inside the first */
	case 3: return sh->good[(r >> 16) % GOOD];          /* another cache's */
	case 4: return sh->good[(r >> 16) % GOOD] + SLAB_SIZE;
	case 5: return o;                                   /* a duplicate */
	default: return p->shm.data_off + (r >> 20) % p->shm.data_len;  /* anywhere */
	}
}

static int hostile(void *argp)
{
	struct arg *a = argp;
	sheaf_pool_t *p = child_connect(a->sock, "large-hostile");
	sheaf_cache_t *c = sheaf_cache_create(p, "hostile-1m", MIB, NULL);
	uint64_t s = 12345, own[4];
	unsigned have = 0;

	REQUIRE(c != NULL, "create: %s", strerror(errno));
	for (int round = 0; round <= ROUNDS; round++) {
		struct shm_sheaf *m;
		unsigned n = 0;
		uint64_t got[4];

		/* its own objects (its cache may be spoiled by now: then the
		 * last ones it had) */
		for (int i = 0; i < 4; i++) {
			void *o = sheaf_alloc(c);

			if (o == NULL)
				break;
			got[n++] = (uint64_t)((char *)o - p->shm.base);
		}
		for (unsigned i = 0; i < n; i++) {
			(void)sheaf_free(c, p->shm.base + got[i]);
			own[i] = got[i];
		}
		if (n > 0)
			have = n;
		REQUIRE(have > 0, "the hostile never allocated: %s", strerror(errno));
		m = (struct shm_sheaf *)(void *)SHEAF__FAST(c)->main;
		/* No sheaf of the pool (none allocated this round: its
		 * libsheaf's own dummy main): that is this process's memory,
		 * not the pool's, and spoiling it spoils only itself. */
		if ((char *)m >= (char *)p->shm.sheaves &&
		    (char *)m < (char *)p->shm.sheaves + sheaf_array_bytes(p->shm.sheaf_count)) {
			for (unsigned i = 0; i < 4; i++)
				m->objs[i] = bad_entry(p, a->sh, own, have, xorshift(&s));
			sheaf_set_size(m, 4);
		}
		if (round == ROUNDS)
			raise(SIGKILL);          /* dies holding them */
		sheaf_thread_exit();             /* the sheaves to the barn ... */
		(void)sheaf_cache_shrink(c);     /* ... and sheafd flushes them */
	}
	return 1;
}

START_TEST(scribbled_flushes)
{
	struct dmn d;
	struct arg a;
	sheaf_pool_t *p;
	sheaf_cache_t *c[2];
	pid_t g, h;
	char err[256] = "", b;
	int st;
	uint64_t invalid = 0;

	dmn_init(&d);
	dmn_start(&d, NULL);
	a.sock = d.sock;
	a.sh = mmap(NULL, sizeof(*a.sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	REQUIRE(a.sh != MAP_FAILED, "mmap");
	REQUIRE(pipe(a.ready) == 0 && pipe(a.go) == 0, "pipe");
	g = fork_child(good_client, &a);
	REQUIRE(read_full(a.ready[0], &b, 1, 30000) == 0, "good client not ready");
	h = fork_child(hostile, &a);
	REQUIRE(wait_pid(h, 300000, &st) == 1, "hostile did not end");
	untrack(h);
	REQUIRE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "hostile: %s",
		status_str(st, err, sizeof(err)));
	REQUIRE(dmn_alive(&d), "sheafd died");
	REQUIRE(write_full(a.go[1], "v", 1) == 0, "write");
	reap_ok(g, 60000, "good client");
	wait_no_clients(&d, 30000);
	p = sheaf_connect(d.sock, "large-after", 0, err, sizeof(err));
	REQUIRE(p != NULL, "connect: %s", err);
	REQUIRE(sheaf_pool_check(p, err, sizeof(err)) == 0, "check: %s", err);
	c[0] = sheaf_cache_open(p, "hostile-1m");
	c[1] = sheaf_cache_open(p, "good-2m");
	REQUIRE(c[0] != NULL && c[1] != NULL, "open");
	{
		struct sheaf_stats cs;
		int k = sheaf_stat_index("free_invalid"), f = sheaf_stat_index("flush_invalid");

		REQUIRE(sheaf_cache_stats(c[0], -1, &cs) == 0, "stats");
		invalid = (k >= 0 ? cs.stat[k] : 0) + (f >= 0 ? cs.stat[f] : 0);
		REQUIRE(invalid > 0, "no bad entry was refused");
	}
	/* what both caches have can be had again, none overlapping
	 * another: the slabs' metadata is whole */
	{
		enum { MAXO = 256 };
		char **objs = calloc(MAXO, sizeof(*objs));
		size_t size[MAXO];
		unsigned n = 0;

		REQUIRE(objs != NULL, "calloc");
		unsigned per[2] = { 0, 0 };
		int why[2] = { 0, 0 };

		/* the good cache first: the hostile's may have lost objects
		 * (its own, by design), whose memory stays taken */
		for (int k = 1; k >= 0; k--) {
			while (n < MAXO && (objs[n] = sheaf_alloc(c[k])) != NULL) {
				size[n++] = k ? 2 * MIB : MIB;
				per[k]++;
			}
			why[k] = errno;
		}
		REQUIRE(per[1] >= GOOD, "only %u objects of the good cache (then %s; %u of the "
			"hostile's, then %s)", per[1], strerror(why[1]), per[0], strerror(why[0]));
		for (unsigned i = 0; i < n; i++) {
			memset(objs[i], (int)i, size[i]);
			for (unsigned j = 0; j < i; j++)
				REQUIRE(objs[i] + size[i] <= objs[j] || objs[j] + size[j] <= objs[i],
					"objects %u and %u overlap", i, j);
		}
		for (unsigned i = 0; i < n; i++) {
			REQUIRE((unsigned char)objs[i][size[i] - 1] == (unsigned char)i,
				"object %u overwritten", i);
			REQUIRE(sheaf_free_any(p, objs[i]) == 0, "free %u", i);
		}
		free(objs);
	}
	sheaf_thread_exit();
	REQUIRE(sheaf_pool_check(p, err, sizeof(err)) == 0, "check: %s", err);
	printf("scribbled_flushes: %d rounds, %llu bad entries refused\n", ROUNDS,
	       (unsigned long long)invalid);
	sheaf_disconnect(p);
	munmap(a.sh, sizeof(*a.sh));
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("large_scribble");

	require_binaries("test_large_scribble");
	ADD_ALONE(s, scribbled_flushes, 600);
	return run_suite(s);
}
