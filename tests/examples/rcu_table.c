/*
 * rcu_table.c - a hash table in a sheaf pool, read without locks by several
 * processes while one process replaces its entries with
 * sheaf_free_deferred (the example of docs/design.md, "Deferred frees").
 * Built against the installed library with plain `cc -O2`
 * (test_example_rcu_table).
 *
 *   rcu_table test SECONDS READERS KILLS   readers and writers killed at
 *       random (SIGKILL) until KILLS kills and SECONDS passed; every entry a
 *       reader reaches must be intact (a reused object is poisoned first:
 *       a use after free shows); grace periods must keep completing; at the
 *       end nothing is lost (the objects in use are the table's, up to one
 *       per writer killed between its allocation and its update: a leak
 *       of the dead writer's), every deferred object was counted once and
 *       released (free_rcu_sheaf == rcu_released) and the pool checks
 *       exactly (walk and counters agree).
 *   rcu_table bench MODE SECONDS READERS [UPDATES_PER_S]    W9: readers'
 *       lookups/s and the writer's updates/s (paced at UPDATES_PER_S when
 *       given: the same write load for every MODE); MODE rcu (read_lock per lookup), qsbr
 *       (sheaf_quiescent every 64 lookups), rwlock (a process-shared
 *       pthread rwlock in the pool), none (unsynchronized reads: the upper
 *       bound; the writer still runs).  Readers only walk (no checks) and
 *       the writer writes no poison (a reader of "none" may walk reused
 *       entries: their links stay pointers to entries).  Pinned: the
 *       writer to the last CPU allowed, readers to the others.  Prints a
 *       line and a JSON line (tests/bench/run.sh, W9).
 *
 * The socket: $SHEAF_SOCKET.  Exit 0 and "rcu_table: ok" on success.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1                /* sched_setaffinity */
#endif
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <sheaf.h>
#include "rcu_table.h"

#define MAXR     16

struct root {
	pthread_rwlock_t lock;       /* rwlock mode only (process-shared) */
	struct entry *b[NB];
};

struct shared {                      /* MAP_SHARED page: children report */
	volatile uint64_t lookups[MAXR];
	volatile uint64_t updates;
	volatile int bad;
	char why[256];
};

static sheaf_pool_t *pool;
static sheaf_cache_t *ec, *rc;
static struct root *root;
static struct shared *sh;
static int mode;                     /* 0 rcu, 1 qsbr, 2 rwlock, 3 none */
static int bench;                    /* readers walk without checking (same work
					in every mode; unsynchronized reads of
					"none" may see reused objects) */

static void fail(const char *fmt, uint64_t a, uint64_t b)
{
	snprintf(sh->why, sizeof(sh->why), fmt, (unsigned long long)a, (unsigned long long)b);
	sh->bad = 1;
	fprintf(stderr, "rcu_table: %s\n", sh->why);
	_exit(1);
}

/* One lookup of @key: walks its chain, checking every entry reached. */
static int lookup(uint64_t key, int check)
{
	uint32_t b = (uint32_t)(key % NB);
	int found = 0;

	if (!check)                          /* the bench: rcu_table.h's walk */
		return rt_find(__atomic_load_n(&root->b[b], __ATOMIC_ACQUIRE), key);
	for (struct entry *e = __atomic_load_n(&root->b[b], __ATOMIC_ACQUIRE); e != NULL;
	     e = __atomic_load_n(&e->next, __ATOMIC_ACQUIRE)) {
		if (check && !intact(e, b))
			fail("use after free: bucket %llu, entry key %llx", b,
			     __atomic_load_n(&e->key, __ATOMIC_RELAXED));
		if (__atomic_load_n(&e->key, __ATOMIC_RELAXED) == key)
			found = 1;
	}
	return found;
}

static void reader(int id, int check)
{
	uint64_t s = mix((uint64_t)getpid() * 7919 + (uint64_t)id) | 1, n = 0;

	if (mode == 1)
		sheaf_read_lock(pool);
	for (;;) {
		if (mode == 0)
			sheaf_read_lock(pool);
		else if (mode == 2)
			pthread_rwlock_rdlock(&root->lock);
		if (!lookup(rnd(&s) % NKEYS, check) && check)
			fail("key lost (reader %llu, lookup %llu)", (uint64_t)id, n);
		if (mode == 0)
			sheaf_read_unlock(pool);
		else if (mode == 2)
			pthread_rwlock_unlock(&root->lock);
		if ((++n & 63) == 0) {
			if (mode == 1)
				sheaf_quiescent(pool);
			sh->lookups[id] = n;
		}
	}
}

/* Replace the entry of @key by a new version: the old one goes to
 * sheaf_free_deferred once unlinked. */
static void update(uint64_t key)
{
	uint32_t b = (uint32_t)(key % NB);
	struct entry **pp = &root->b[b], *old, *e = sheaf_alloc(ec);

	/* A writer that outruns grace periods (a reader descheduled inside
	 * a section holds them back) fills the pool with objects waiting:
	 * it waits for them to come back, then retries. */
	for (int i = 0; e == NULL && errno == ENOMEM && i < 100; i++) {
		sheaf_barrier(pool, 100);
		e = sheaf_alloc(ec);
	}
	if (e == NULL)
		fail("sheaf_alloc: errno %llu (%llu)", (uint64_t)errno, 0);
	/* A recycled object is poisoned before it is filled: a reader still
	 * holding it (a grace period too short) sees the poison. */
	for (int i = 0; i < 8 && !bench; i++)
		__atomic_store_n(&((uint64_t *)e)[i], POISON, __ATOMIC_RELAXED);
	if (mode == 2)
		pthread_rwlock_wrlock(&root->lock);
	while ((old = *pp) != NULL && old->key != key)
		pp = &old->next;
	if (old == NULL)
		fail("writer: key %llx missing", key, 0);
	fill(e, key, old->version + 1);
	e->next = old->next;
	__atomic_store_n(pp, e, __ATOMIC_RELEASE);      /* unlink old, publish e */
	if (mode == 2) {
		pthread_rwlock_unlock(&root->lock);
		sheaf_free(ec, old);
	} else {
		int r = sheaf_free_deferred(ec, old);
		if (r != 0)
			fail("sheaf_free_deferred: %lld (%llu)", (uint64_t)r, 0);
	}
}

/* The bench's writer pace: every 256 updates it sleeps until it is no
 * more than on schedule (0: flat out). */
static double rate;

static void pace(uint64_t n, double *t0p)
{
	double ahead = *t0p + (double)n / rate - now_s();

	if (ahead < -1.0)                    /* a second behind: no catching up */
		*t0p -= ahead + 1.0;
	if (ahead > 0) {
		struct timespec ts = { (time_t)ahead, (long)((ahead - (time_t)ahead) * 1e9) };
		nanosleep(&ts, NULL);
	}
}

static void writer(void)
{
	uint64_t s = mix((uint64_t)getpid()) | 1, n = 0;
	double t0 = now_s();

	for (;;) {
		update(rnd(&s) % NKEYS);
		sh->updates++;
		if (rate > 0 && (++n & 255) == 0)
			pace(n, &t0);
	}
}

/* The bench pins the writer to the last CPU it may use and the readers
 * round-robin to the others (1 reader + 1 writer: one CPU each). */
static void pin(int role)
{
	cpu_set_t all, one;
	int cpus[CPU_SETSIZE], n = 0;

	if (sched_getaffinity(0, sizeof(all), &all) != 0)
		return;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &all))
			cpus[n++] = c;
	if (n < 2)
		return;
	CPU_ZERO(&one);
	CPU_SET(role < 0 ? cpus[n - 1] : cpus[role % (n - 1)], &one);
	sched_setaffinity(0, sizeof(one), &one);
}

/* A child: reconnect (the inherited pool is the parent's) and run. */
static pid_t spawn(int role)          /* -1: writer; else reader id */
{
	pid_t pid = fork();
	char err[256];

	if (pid != 0)
		return pid;
	/* Readers and writers loop for ever: they die with this process
	 * (killed, or a test that gave up), never left spinning. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() == 1)
		_exit(4);
	if (bench)
		pin(role);
	sheaf_disconnect(pool);
	pool = sheaf_connect(NULL, role < 0 ? "rcu-writer" : "rcu-reader", 0, err, sizeof(err));
	if (pool == NULL)
		_exit(3);                    /* no slot yet (repairs lag): respawn */
	ec = sheaf_cache_open(pool, "rcu_entry");
	if (ec == NULL)
		_exit(3);
	if (role < 0)
		writer();
	reader(role, !bench);
	_exit(0);
}

static void setup(void)
{
	char err[256];
	pthread_rwlockattr_t a;

	pool = sheaf_connect(NULL, "rcu-table", 0, err, sizeof(err));
	if (pool == NULL) {
		fprintf(stderr, "rcu_table: connect: %s\n", err);
		exit(2);
	}
	ec = sheaf_cache_create_or_open(pool, "rcu_entry", sizeof(struct entry), NULL, NULL);
	rc = sheaf_cache_create_or_open(pool, "rcu_root", sizeof(struct root), NULL, NULL);
	root = rc ? sheaf_alloc(rc) : NULL;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ec == NULL || root == NULL || sh == MAP_FAILED) {
		fprintf(stderr, "rcu_table: setup: %s\n", strerror(errno));
		exit(2);
	}
	memset(root, 0, sizeof(*root));
	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_rwlock_init(&root->lock, &a);
	for (uint64_t k = 0; k < NKEYS; k++) {
		struct entry *e = sheaf_alloc(ec);
		if (e == NULL)
			exit(2);
		fill(e, k, 1);
		e->next = root->b[k % NB];
		root->b[k % NB] = e;
	}
}

static uint64_t stat_of(sheaf_cache_t *c, const char *name, uint64_t *in_use)
{
	struct sheaf_stats st;
	int i = sheaf_stat_index(name);

	if (sheaf_cache_stats(c, -1, &st) != 0 || i < 0)
		return ~0ull;
	if (in_use)
		*in_use = st.in_use;
	return st.stat[i];
}

/* A child ended: a reader or writer that found a fault exits 1. */
static void reaped(pid_t pid, int st)
{
	if (WIFEXITED(st) && WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 3) {
		fprintf(stderr, "rcu_table: child %d exited %d: %s\n", (int)pid,
			WEXITSTATUS(st), sh->why);
		exit(1);
	}
}

static int run_test(double secs, int nr, long kills_want)
{
	pid_t r[MAXR], w;
	long kills = 0, wkills = 0, syncs = 0;
	uint64_t s = mix((uint64_t)getpid()) | 1, in_use = 0, entries = 0;
	double t0 = now_s();
	int st;

	for (int i = 0; i < nr; i++)
		r[i] = spawn(i);
	w = spawn(-1);
	while (kills < kills_want || now_s() - t0 < secs) {
		struct timespec ts = { 0, (long)(rnd(&s) % 8000000) + 2000000 };
		int victim = (int)(rnd(&s) % (uint64_t)(nr + 2));   /* nr, nr+1: writer */
		pid_t *vp = victim >= nr ? &w : &r[victim];

		nanosleep(&ts, NULL);
		kill(*vp, SIGKILL);
		waitpid(*vp, &st, 0);
		reaped(*vp, st);
		if (!(WIFEXITED(st) && WEXITSTATUS(st) == 3)) {
			kills++;
			wkills += victim >= nr;
		}
		*vp = spawn(victim >= nr ? -1 : victim);
		if (kills % 100 == 0 && kills > 0) {
			/* Grace periods keep completing whoever was killed. */
			int rc2 = sheaf_synchronize(pool, 10000);
			if (rc2 != 0) {
				fprintf(stderr, "rcu_table: sheaf_synchronize: %s after %ld kills\n",
					strerror(-rc2), kills);
				return 1;
			}
			syncs++;
		}
		if (now_s() - t0 > 10 * secs + 120) {
			fprintf(stderr, "rcu_table: too slow: %ld kills\n", kills);
			return 1;
		}
	}
	for (int i = 0; i < nr; i++) {
		kill(r[i], SIGKILL);
		waitpid(r[i], &st, 0);
		reaped(r[i], st);
	}
	kill(w, SIGKILL);
	waitpid(w, &st, 0);
	reaped(w, st);
	wkills++;
	/* Every killed client repaired (its deferred sheaves handed on),
	 * every grace period done: nothing waits. */
	for (int i = 0; i < 2000; i++) {
		sheaf_barrier(pool, 1000);
		if (stat_of(ec, "rcu_waiting", &in_use) == 0)
			break;
		usleep(10000);
	}
	for (uint32_t b = 0; b < NB; b++)
		for (struct entry *e = root->b[b]; e != NULL; e = e->next) {
			if (!intact(e, b))
				fail("final walk: bucket %llu broken (%llx)", b, e->key);
			entries++;
		}
	stat_of(ec, "rcu_waiting", &in_use);
	printf("rcu_table: %ld kills (%ld writers), %ld synchronize, %llu updates, "
	       "entries %llu, in use %llu, free_rcu_sheaf %llu, rcu_released %llu\n",
	       kills, wkills, syncs, (unsigned long long)sh->updates,
	       (unsigned long long)entries, (unsigned long long)in_use,
	       (unsigned long long)stat_of(ec, "free_rcu_sheaf", NULL),
	       (unsigned long long)stat_of(ec, "rcu_released", NULL));
	if (entries != NKEYS || in_use < entries || in_use - entries > (uint64_t)wkills) {
		fprintf(stderr, "rcu_table: lost objects: %llu entries, %llu in use\n",
			(unsigned long long)entries, (unsigned long long)in_use);
		return 1;
	}
	if (stat_of(ec, "rcu_waiting", NULL) != 0) {
		fprintf(stderr, "rcu_table: deferred objects still waiting\n");
		return 1;
	}
	{
		/* Exact: every deferred object counted once (a writer killed
		 * in a hand-over is completed by sheafd's repair), all of them
		 * released; the walk agrees with the counters. */
		char err[256];
		uint64_t fr = stat_of(ec, "free_rcu_sheaf", NULL), rl = stat_of(ec, "rcu_released", NULL);

		if (fr != rl) {
			fprintf(stderr, "rcu_table: free_rcu_sheaf %llu, rcu_released %llu\n",
				(unsigned long long)fr, (unsigned long long)rl);
			return 1;
		}
		if (sheaf_pool_check(pool, err, sizeof(err)) != 0) {
			fprintf(stderr, "rcu_table: pool check: %s\n", err);
			return 1;
		}
	}
	printf("rcu_table: ok\n");
	return 0;
}

static int run_bench(double secs, int nr)
{
	pid_t r[MAXR], w = 0;
	uint64_t l0 = 0, l1 = 0, u0, u1;
	double t0, t1;
	int st;

	for (int i = 0; i < nr; i++)
		r[i] = spawn(i);
	w = spawn(-1);
	/* Connected (slow on a loaded machine) and warm: every child made
	 * progress, then one more second. */
	for (int i = 0, up = 0; !up && i < 3000; i++) {
		up = sh->updates > 0;
		for (int j = 0; j < nr; j++)
			up &= sh->lookups[j] > 0;
		usleep(10000);
	}
	sleep(1);
	for (int i = 0; i < nr; i++)
		l0 += sh->lookups[i];
	u0 = sh->updates;
	t0 = now_s();
	usleep((useconds_t)(secs * 1e6));
	for (int i = 0; i < nr; i++)
		l1 += sh->lookups[i];
	u1 = sh->updates;
	t1 = now_s();
	for (int i = 0; i < nr; i++) {
		kill(r[i], SIGKILL);
		waitpid(r[i], &st, 0);
	}
	if (w) {
		kill(w, SIGKILL);
		waitpid(w, &st, 0);
	}
	if (sh->bad) {
		fprintf(stderr, "rcu_table: %s\n", sh->why);
		return 1;
	}
	{
		const char *m = mode == 0 ? "rcu" : mode == 1 ? "qsbr" : mode == 2 ? "rwlock" : "none";
		double lps = (double)(l1 - l0) / (t1 - t0), ups = (double)(u1 - u0) / (t1 - t0);

		printf("W9 %-6s readers %d  lookups/s %.0f (per reader %.0f)  updates/s %.0f\n",
		       m, nr, lps, lps / nr, ups);
		/* tests/bench/run.sh reads this line */
		printf("{\"mode\":\"%s\",\"readers\":%d,\"pace\":%.0f,\"mlookups_per_s\":%.4f,"
		       "\"mupdates_per_s\":%.4f}\n", m, nr, rate, lps / 1e6, ups / 1e6);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 5 && strcmp(argv[1], "test") == 0) {
		int nr = atoi(argv[3]);
		if (nr < 1 || nr > MAXR)
			return 2;
		setup();
		return run_test(atof(argv[2]), nr, atol(argv[4]));
	}
	if (argc >= 5 && strcmp(argv[1], "bench") == 0) {
		int nr = atoi(argv[4]);
		const char *m = argv[2];
		mode = !strcmp(m, "rcu") ? 0 : !strcmp(m, "qsbr") ? 1 : !strcmp(m, "rwlock") ? 2 :
		       !strcmp(m, "none") ? 3 : -1;
		if (mode < 0 || nr < 1 || nr > MAXR)
			return 2;
		bench = 1;
		rate = argc >= 6 ? atof(argv[5]) : 0;
		setup();
		return run_bench(atof(argv[3]), nr);
	}
	fprintf(stderr, "usage: rcu_table test SECONDS READERS KILLS | "
		"bench rcu|qsbr|rwlock|none SECONDS READERS [UPDATES_PER_S]\n");
	return 2;
}
