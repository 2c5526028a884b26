/*
 * test_daemon_stress.c - many objects between real client processes of one
 * sheafd (started per test as in test_daemon.c, util_daemon.h):
 *
 *   share          four processes open one cache by name; objects written
 *                  in one are passed (as pointers, through pipes) to the
 *                  next, verified and freed there; the daemon's pool check
 *                  (Check RPC via sheaf_pool_check) passes afterwards.
 *   prodcons       a producer process allocates 10^7 objects (10^6 under
 *                  SHEAF_SAN), a consumer process verifies and frees them,
 *                  checksums agree; after repair and shrink the pool check
 *                  passes and in_use is 0.
 *
 * Every test is one TCase (CK_RUN_CASE=<name> runs one).  Child processes
 * report through pipes, REQUIRE and exit statuses and never call Check.
 */
#include <check.h>
#include <errno.h>
#include <poll.h>
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

/* ---- one cache shared by several processes ------------------------------- */

#define SH_PROCS  4
#define SH_BATCH  1000       /* 8000 bytes of pointers: fits a pipe */
#define SH_OBJ    200

struct share_arg {
	const char *sock;
	int idx;
	int rounds;
	int go[SH_PROCS][2];     /* creator -> openers: the cache exists */
	int data[SH_PROCS][2];   /* process i -> process i+1 */
};

static uint64_t share_word(int sender, int round, int k, int j)
{
	return mix64(((uint64_t)sender << 48) ^ ((uint64_t)round << 32) ^ ((uint64_t)k << 8) ^
		     (uint64_t)j);
}

static int share_child(void *argp)
{
	struct share_arg *a = argp;
	int me = a->idx, prev = (me + SH_PROCS - 1) % SH_PROCS;
	char name[32];
	sheaf_pool_t *pool;
	sheaf_cache_t *c;
	void **mine = calloc(SH_BATCH, sizeof(void *));
	void **got = calloc(SH_BATCH, sizeof(void *));
	const int words = SH_OBJ / 8;

	REQUIRE(mine != NULL && got != NULL, "calloc");
	snprintf(name, sizeof(name), "share-%d", me);
	pool = child_connect(a->sock, name);
	if (me == 0) {
		c = sheaf_cache_create(pool, "shared", SH_OBJ, NULL);
		REQUIRE(c != NULL, "sheaf_cache_create: %s", strerror(errno));
		for (int i = 1; i < SH_PROCS; i++)
			REQUIRE(write_full(a->go[i][1], "g", 1) == 0, "write go");
	} else {
		char g;
		REQUIRE(read_full(a->go[me][0], &g, 1, 60000) == 0, "no go from the creator");
		c = sheaf_cache_open(pool, "shared");
		REQUIRE(c != NULL, "sheaf_cache_open: %s", strerror(errno));
	}
	REQUIRE(sheaf_cache_object_size(c) == SH_OBJ, "object size %zu", sheaf_cache_object_size(c));
	for (int r = 0; r < a->rounds; r++) {
		for (int k = 0; k < SH_BATCH; k++) {
			uint64_t *o = sheaf_alloc(c);
			REQUIRE(o != NULL, "sheaf_alloc: %s", strerror(errno));
			for (int j = 0; j < words; j++)
				o[j] = share_word(me, r, k, j);
			mine[k] = o;
		}
		REQUIRE(write_full(a->data[me][1], mine, SH_BATCH * sizeof(void *)) == 0, "write pointers");
		REQUIRE(read_full(a->data[prev][0], got, SH_BATCH * sizeof(void *), 60000) == 0,
		     "no pointers from process %d in round %d", prev, r);
		for (int k = 0; k < SH_BATCH; k++) {
			uint64_t *o = got[k];
			int rc;
			for (int j = 0; j < words; j++)
				REQUIRE(o[j] == share_word(prev, r, k, j),
				     "round %d object %d (%p) from process %d: word %d is %#llx",
				     r, k, (void *)o, prev, j, (unsigned long long)o[j]);
			memset(o, 0xa5, SH_OBJ);
			rc = sheaf_free(c, o);
			REQUIRE(rc == 0, "sheaf_free(%p) of process %d's object: %d", (void *)o, prev, rc);
		}
	}
	sheaf_disconnect(pool);
	free(mine);
	free(got);
	return 0;
}

START_TEST(share)
{
	static struct share_arg a;
	struct dmn d;
	pid_t pids[SH_PROCS];
	sheaf_pool_t *pool;
	sheaf_cache_t *c;
	struct sheaf_stats st;
	char err[256] = "";
	int rc;
	int64_t t0 = now_ms();

	dmn_init(&d);
	dmn_start(&d, NULL);
	memset(&a, 0, sizeof(a));
	a.sock = d.sock;
	a.rounds = test_san() ? 20 : 50;
	for (int i = 0; i < SH_PROCS; i++) {
		REQUIRE(pipe(a.go[i]) == 0 && pipe(a.data[i]) == 0, "pipe: %s", strerror(errno));
	}
	/* Every client forks before this process connects. */
	for (int i = 0; i < SH_PROCS; i++) {
		a.idx = i;
		pids[i] = fork_child(share_child, &a);
	}
	for (int i = 0; i < SH_PROCS; i++)
		reap_ok(pids[i], 180000, "sharing client");
	printf("share: %d processes x %d rounds x %d objects passed on in %lld ms\n", SH_PROCS,
	       a.rounds, SH_BATCH, (long long)(now_ms() - t0));

	pool = sheaf_connect(d.sock, "share-check", 0, err, sizeof(err));
	REQUIRE(pool != NULL, "sheaf_connect: %s", err);
	rc = sheaf_pool_check(pool, err, sizeof(err));
	REQUIRE(rc == 0, "pool check after the sharing clients exited: %d: %s", rc, err);
	c = sheaf_cache_open(pool, "shared");
	REQUIRE(c != NULL, "sheaf_cache_open: %s", strerror(errno));
	rc = sheaf_cache_stats(c, -1, &st);
	REQUIRE(rc == 0, "sheaf_cache_stats: %d", rc);
	REQUIRE(st.in_use == 0, "in_use %llu after every object was freed",
		(unsigned long long)st.in_use);
	sheaf_disconnect(pool);
	for (int i = 0; i < SH_PROCS; i++) {
		close(a.go[i][0]);
		close(a.go[i][1]);
		close(a.data[i][0]);
		close(a.data[i][1]);
	}
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- cross-process producer / consumer */

#define PC_BATCH 256
#define PC_OBJ   64

struct pc_arg {
	const char *sock;
	uint64_t n;
	int go[2];               /* producer -> consumer: the cache exists */
	int data[2];             /* pointers */
	int result[2];           /* each side: its checksum and count */
};

static uint64_t pc_value(uint64_t i)
{
	return mix64(i ^ 0x5eafd00dull);
}

static int producer(void *argp)
{
	struct pc_arg *a = argp;
	sheaf_pool_t *pool;
	sheaf_cache_t *c;
	void *batch[PC_BATCH];
	uint64_t sum = 0, res[2];

	close(a->data[0]);
	pool = child_connect(a->sock, "producer");
	c = sheaf_cache_create(pool, "pc", PC_OBJ, NULL);
	REQUIRE(c != NULL, "sheaf_cache_create: %s", strerror(errno));
	REQUIRE(write_full(a->go[1], "g", 1) == 0, "write go");
	for (uint64_t i = 0; i < a->n;) {
		unsigned k = 0;
		for (; k < PC_BATCH && i < a->n; k++, i++) {
			uint64_t *o = sheaf_alloc(c), v = pc_value(i);
			REQUIRE(o != NULL, "sheaf_alloc #%llu: %s", (unsigned long long)i, strerror(errno));
			o[0] = v;
			o[1] = ~v;
			o[7] = i;
			sum += v;
			batch[k] = o;
		}
		REQUIRE(write_full(a->data[1], batch, k * sizeof(void *)) == 0, "write pointers");
	}
	close(a->data[1]);
	res[0] = sum;
	res[1] = a->n;
	REQUIRE(write_full(a->result[1], res, sizeof(res)) == 0, "write result");
	sheaf_disconnect(pool);
	return 0;
}

static int consumer(void *argp)
{
	struct pc_arg *a = argp;
	sheaf_pool_t *pool;
	sheaf_cache_t *c;
	union {
		void *p[PC_BATCH];
		char b[PC_BATCH * sizeof(void *)];
	} u;
	size_t have = 0;
	uint64_t sum = 0, i = 0, res[2];
	char g;

	close(a->data[1]);
	pool = child_connect(a->sock, "consumer");
	REQUIRE(read_full(a->go[0], &g, 1, 60000) == 0, "no go from the producer");
	c = sheaf_cache_open(pool, "pc");
	REQUIRE(c != NULL, "sheaf_cache_open: %s", strerror(errno));
	for (;;) {
		struct pollfd pf = { a->data[0], POLLIN, 0 };
		ssize_t k;
		size_t whole;

		REQUIRE(poll(&pf, 1, 120000) == 1, "no pointers for 120 s after #%llu",
		     (unsigned long long)i);
		k = read(a->data[0], u.b + have, sizeof(u.b) - have);
		if (k < 0 && errno == EINTR)
			continue;
		REQUIRE(k >= 0, "read: %s", strerror(errno));
		if (k == 0)
			break;
		have += (size_t)k;
		whole = have / sizeof(void *);
		for (size_t j = 0; j < whole; j++, i++) {
			uint64_t *o = u.p[j], v = pc_value(i);
			int rc;
			REQUIRE(o[0] == v && o[1] == ~v && o[7] == i,
			     "object #%llu (%p): %#llx %#llx %llu, expected %#llx", (unsigned long long)i,
			     (void *)o, (unsigned long long)o[0], (unsigned long long)o[1],
			     (unsigned long long)o[7], (unsigned long long)v);
			sum += o[0];
			o[0] = o[1] = 0;
			rc = sheaf_free(c, o);
			REQUIRE(rc == 0, "sheaf_free #%llu: %d", (unsigned long long)i, rc);
		}
		memmove(u.b, u.b + whole * sizeof(void *), have - whole * sizeof(void *));
		have -= whole * sizeof(void *);
	}
	REQUIRE(have == 0, "%zu stray bytes at the end of the pointer stream", have);
	res[0] = sum;
	res[1] = i;
	REQUIRE(write_full(a->result[1], res, sizeof(res)) == 0, "write result");
	sheaf_disconnect(pool);
	return 0;
}

START_TEST(prodcons)
{
	static struct pc_arg a;
	struct dmn d;
	pid_t prod, cons;
	uint64_t r1[2], r2[2];
	sheaf_pool_t *pool;
	sheaf_cache_t *c;
	struct sheaf_stats st;
	char err[256] = "";
	int rc, shrunk;
	int64_t t0;

	dmn_init(&d);
	dmn_start(&d, NULL);
	memset(&a, 0, sizeof(a));
	a.sock = d.sock;
	a.n = test_san() ? 1000000 : 10000000;
	REQUIRE(pipe(a.go) == 0 && pipe(a.data) == 0 && pipe(a.result) == 0, "pipe");
	t0 = now_ms();
	cons = fork_child(consumer, &a);
	prod = fork_child(producer, &a);
	close(a.data[0]);
	close(a.data[1]);
	reap_ok(prod, 300000, "producer");
	reap_ok(cons, 300000, "consumer");
	printf("prodcons: %llu objects from producer to consumer in %lld ms\n",
	       (unsigned long long)a.n, (long long)(now_ms() - t0));
	REQUIRE(read_full(a.result[0], r1, sizeof(r1), 1000) == 0 &&
		read_full(a.result[0], r2, sizeof(r2), 1000) == 0, "missing results");
	REQUIRE(r1[1] == a.n && r2[1] == a.n, "counts %llu and %llu, expected %llu",
		(unsigned long long)r1[1], (unsigned long long)r2[1], (unsigned long long)a.n);
	REQUIRE(r1[0] == r2[0], "checksums differ: %#llx vs %#llx", (unsigned long long)r1[0],
		(unsigned long long)r2[0]);

	/* Both processes are gone: wait for the daemon's pidfd repair. */
	wait_no_clients(&d, 30000);
	pool = sheaf_connect(d.sock, "pc-check", 0, err, sizeof(err));
	REQUIRE(pool != NULL, "sheaf_connect: %s", err);
	c = sheaf_cache_open(pool, "pc");
	REQUIRE(c != NULL, "sheaf_cache_open: %s", strerror(errno));
	rc = sheaf_cache_stats(c, -1, &st);
	REQUIRE(rc == 0, "sheaf_cache_stats: %d", rc);
	printf("  before shrink: in_use %llu, slabs %llu, %llu bytes mapped\n",
	       (unsigned long long)st.in_use, (unsigned long long)st.slabs,
	       (unsigned long long)st.bytes_mapped);
	shrunk = sheaf_cache_shrink(c);
	REQUIRE(shrunk >= 0, "sheaf_cache_shrink: %d", shrunk);
	rc = sheaf_pool_check(pool, err, sizeof(err));
	REQUIRE(rc == 0, "pool check after producer/consumer and shrink: %d: %s", rc, err);
	rc = sheaf_cache_stats(c, -1, &st);
	REQUIRE(rc == 0, "sheaf_cache_stats: %d", rc);
	printf("  shrink released %d slabs; after: in_use %llu, slabs %llu\n", shrunk,
	       (unsigned long long)st.in_use, (unsigned long long)st.slabs);
	REQUIRE(st.in_use == 0, "in_use %llu after every object was freed",
		(unsigned long long)st.in_use);
	sheaf_disconnect(pool);
	close(a.go[0]);
	close(a.go[1]);
	close(a.result[0]);
	close(a.result[1]);
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- main ------------------------------------------------------------------- */

int main(void)
{
	Suite *s = suite_create("sheafd-stress");

	require_binaries("test_daemon_stress");
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ADD_ALONE(s, share, 240);
	ADD_ALONE(s, prodcons, 240);
	return run_suite(s);
}
