/*
 * test_owned_caches.c - owned caches (SHEAF_CACHE_OWNED, shm/owner.h) against a
 * real sheafd and real processes:
 *
 *   killed_freed   a worker allocates N objects of an owned cache and is
 *                  SIGKILLed: sheafd frees them (Check in use 0, Stats
 *                  owner_freed N, `clients` showed them held by the worker
 *                  before), and destroy then succeeds.
 *   killed_kept    the same with SHEAF_CACHE_KEEP: they stay (in use N,
 *                  owner_kept N, ClientsResponse.kept), destroy is refused;
 *                  another process frees them, then destroy succeeds.
 *   cross_free     process A allocates, process B frees half of them: the
 *                  tags follow (clients shows A holding the other half, B
 *                  none); A is killed: only that half is freed, none twice.
 *   many_kills     victims doing random alloc/free (sheaf capacity 4: barn
 *                  exchanges all the time) are SIGKILLed >= 100 times while
 *                  a survivor alloc/frees stamped objects: the survivor's
 *                  stamps never change (nothing handed out twice), and at
 *                  the end the checker passes with no object in use.
 *   free_race      20 times: A allocates N, B frees them all while A is
 *                  SIGKILLed: each object is freed once (by B, or by the
 *                  repair while B backs off), counts and checker agree,
 *                  nothing in use at the end.
 *   queued         a producer enqueues N objects of an owned cache on a
 *                  shared queue and is SIGKILLed: none is freed (they are
 *                  QUEUED); a consumer dequeues K and is SIGKILLed: exactly
 *                  those K are freed (they were its own); a drainer takes
 *                  the rest and frees them: nothing in use, none twice.
 *   hostile_tags   a client scribbles random values over the whole tag
 *                  array while a victim holding objects dies: sheafd stays
 *                  up, answers, and the checker passes once all are gone.
 *
 * Child processes report through pipes, REQUIRE and exit statuses.
 */
#include <check.h>
#include <errno.h>
#include <poll.h>
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
#include "shm/owner.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_proc.h"
#include "tests/helpers/util_rpc.h"

#define OBJ 64
#define NOBJ 957

/* What the children share with the test (MAP_SHARED before the fork). */
struct shared {
	_Atomic uint64_t offs[4096];     /* object offsets a child publishes */
	_Atomic uint32_t n;
};

struct arg {
	const char *sock;
	const char *cache;
	unsigned flags;              /* create with these (0: open) */
	int capacity;
	int count;                   /* objects to allocate / free */
	int ready[2];
	struct shared *sh;
	uint64_t seed;
	int close_fd;                /* survivor: the stop pipe's write end */
	int slow;                    /* freer: pause now and then */
};

static struct shared *shared_new(void)
{
	struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	REQUIRE(sh != MAP_FAILED, "mmap");
	return sh;
}

static sheaf_cache_t *cache_get(sheaf_pool_t *pool, const struct arg *a)
{
	sheaf_cache_t *c;

	if (a->flags) {
		struct sheaf_cache_config cfg = { .capacity = a->capacity ? a->capacity : -1,
						  .flags = a->flags };
		c = sheaf_cache_create(pool, a->cache, OBJ, &cfg);
	} else {
		c = sheaf_cache_open(pool, a->cache);
	}
	REQUIRE(c != NULL, "cache %s: %s", a->cache, strerror(errno));
	return c;
}

/* ---- the daemon, asked raw ---------------------------------------------------- */

static Sheaf__V1__Response *ask(const char *sock, Sheaf__V1__Request *rq)
{
	int fd = unix_connect(sock), rc = 0;
	Sheaf__V1__Response *r;

	REQUIRE(fd >= 0, "connect %s", sock);
	r = raw_rpc(fd, rq, 10000, &rc);
	REQUIRE(r != NULL, "rpc: %s", strerror(-rc));
	close(fd);
	return r;
}

/* Stats of @cache: its owner_freed, owner_kept. */
static void owner_stats(const char *sock, const char *cache, uint64_t *freed, uint64_t *kept)
{
	Sheaf__V1__StatsRequest b = SHEAF__V1__STATS_REQUEST__INIT;
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__Response *r;

	b.cache = (char *)cache;
	rq.body_case = SHEAF__V1__REQUEST__BODY_STATS;
	rq.stats = &b;
	r = ask(sock, &rq);
	REQUIRE(r->status == 0 && r->stats->n_caches == 1, "stats %s: %s", cache, r->error);
	*freed = r->stats->caches[0]->owner_freed;
	*kept = r->stats->caches[0]->owner_kept;
	sheaf__v1__response__free_unpacked(r, NULL);
}

/* Objects of @cache held by client @pid (-1: the kept ones), by `clients`. */
static uint64_t clients_held(const char *sock, const char *cache, int pid)
{
	Sheaf__V1__ClientsRequest b = SHEAF__V1__CLIENTS_REQUEST__INIT;
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__Response *r;
	uint64_t n = 0;

	rq.body_case = SHEAF__V1__REQUEST__BODY_CLIENTS;
	rq.clients = &b;
	r = ask(sock, &rq);
	REQUIRE(r->status == 0, "clients: %s", r->error);
	for (size_t i = 0; i < r->clients->n_clients; i++) {
		const Sheaf__V1__ClientInfo *ci = r->clients->clients[i];
		if ((int)ci->pid != pid)
			continue;
		for (size_t k = 0; k < ci->n_owned; k++)
			if (strcmp(ci->owned[k]->cache, cache) == 0)
				n += ci->owned[k]->objects;
	}
	if (pid == -1)
		for (size_t k = 0; k < r->clients->n_kept; k++)
			if (strcmp(r->clients->kept[k]->cache, cache) == 0)
				n += r->clients->kept[k]->objects;
	sheaf__v1__response__free_unpacked(r, NULL);
	return n;
}

static int destroy(const char *sock, const char *cache)
{
	Sheaf__V1__CacheDestroyRequest b = SHEAF__V1__CACHE_DESTROY_REQUEST__INIT;
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__Response *r;
	int st;

	b.name = (char *)cache;
	rq.body_case = SHEAF__V1__REQUEST__BODY_CACHE_DESTROY;
	rq.cache_destroy = &b;
	r = ask(sock, &rq);
	st = r->status;
	sheaf__v1__response__free_unpacked(r, NULL);
	return st;
}

/* The checker, required to pass: objects in use. */
static uint64_t check_in_use(const char *sock, const char *ctx)
{
	Sheaf__V1__Response *r = raw_check(sock);
	uint64_t n = r->check->in_use;

	REQUIRE(r->check->ok, "%s: pool check: %s", ctx, r->check->problem);
	REQUIRE(r->check->counted_in_use == n, "%s: counted in use %llu, walk %llu", ctx,
		(unsigned long long)r->check->counted_in_use, (unsigned long long)n);
	sheaf__v1__response__free_unpacked(r, NULL);
	return n;
}

/* ---- children ------------------------------------------------------------------ */

/* Allocate a->count objects, publish their offsets, say ready, wait. */
static int holder(void *argp)
{
	struct arg *a = argp;
	sheaf_pool_t *pool = child_connect(a->sock, "holder");
	sheaf_cache_t *c = cache_get(pool, a);
	char *base = pool->shm.base;

	close(a->ready[0]);
	for (int i = 0; i < a->count; i++) {
		char *o = sheaf_alloc(c);

		REQUIRE(o != NULL, "alloc %d: %s", i, strerror(errno));
		o[0] = 1;
		a->sh->offs[a->sh->n++] = (uint64_t)(o - base);
	}
	REQUIRE(write_full(a->ready[1], "r", 1) == 0, "ready");
	for (;;)
		pause();
}

/* Free a->count of the published objects (from the end), say done. */
static int freer(void *argp)
{
	struct arg *a = argp;
	sheaf_pool_t *pool = child_connect(a->sock, "freer");
	sheaf_cache_t *c = cache_get(pool, a);
	char *base = pool->shm.base;

	close(a->ready[0]);
	for (int i = 0; i < a->count; i++) {
		uint32_t k = --a->sh->n;
		int rc = sheaf_free(c, base + a->sh->offs[k]);

		if (a->slow && i % 8 == 0)
			sleep_us(20);
		/* Racing with the holder's repair (slow): an object the repair
		 * freed first is refused, never freed twice. */
		REQUIRE(rc == 0 || (a->slow && rc == -EALREADY), "free %u: %s", k, strerror(-rc));
	}
	if (!a->slow && a->count > 1) {
		/* A double free (not the last one: that is refused in every
		 * cache) finds the tag cleared: refused too. */
		int rc = sheaf_free(c, base + a->sh->offs[a->sh->n + a->count - 1]);

		REQUIRE(rc == -EALREADY, "a double free of an owned object: %d", rc);
	}
		REQUIRE(write_full(a->ready[1], "f", 1) == 0, "done");
	for (;;)
		pause();
}

static pid_t start(int (*fn)(void *), struct arg *a, const char *what)
{
	char g;
	pid_t p;

	REQUIRE(pipe(a->ready) == 0, "pipe");
	p = fork_child(fn, a);
	close(a->ready[1]);
	if (read_full(a->ready[0], &g, 1, 30000) != 0) {
		/* A child that ended before its word (read sees EOF) and one
		 * that hangs are told apart: what it printed says why. */
		int st = 0, gone = wait_pid(p, 100, &st);

		REQUIRE(0, "%s (pid %d) did not report: %s %d", what, (int)p,
			gone != 1 ? "still running after 30 s, pid" :
			WIFSIGNALED(st) ? "it was killed by signal" : "it exited with status",
			gone != 1 ? (int)p : WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	}
	close(a->ready[0]);
	return p;
}

static void kill_wait(pid_t p)
{
	int st;

	kill(p, SIGKILL);
	REQUIRE(wait_pid(p, 10000, &st) == 1, "child %d did not die", (int)p);
	untrack(p);
}

/* ---- tests ------------------------------------------------------------------------ */

START_TEST(killed_freed)
{
	struct dmn d;
	struct arg a = { .cache = "own", .flags = SHEAF_CACHE_OWNED, .count = NOBJ };
	uint64_t freed, kept;
	pid_t p;

	dmn_init(&d);
	dmn_start(&d, NULL);
	a.sock = d.sock;
	a.sh = shared_new();
	p = start(holder, &a, "holder");
	REQUIRE(clients_held(d.sock, "own", p) == NOBJ, "clients: %llu held (%d expected)",
		(unsigned long long)clients_held(d.sock, "own", p), NOBJ);
	REQUIRE(destroy(d.sock, "own") != 0, "destroy with objects in use succeeded");
	kill_wait(p);
	wait_no_clients(&d, 30000);
	REQUIRE(check_in_use(d.sock, "after the kill") == 0, "objects still in use");
	owner_stats(d.sock, "own", &freed, &kept);
	REQUIRE(freed == NOBJ && kept == 0, "owner_freed %llu, owner_kept %llu",
		(unsigned long long)freed, (unsigned long long)kept);
	REQUIRE(destroy(d.sock, "own") == 0, "destroy after the repair refused");
	printf("killed_freed: %d objects of a SIGKILLed worker freed by sheafd\n", NOBJ);
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

START_TEST(killed_kept)
{
	struct dmn d;
	struct arg a = { .cache = "keep", .flags = SHEAF_CACHE_OWNED | SHEAF_CACHE_KEEP,
			 .count = NOBJ };
	uint64_t freed, kept;
	pid_t p;

	dmn_init(&d);
	dmn_start(&d, NULL);
	a.sock = d.sock;
	a.sh = shared_new();
	p = start(holder, &a, "holder");
	kill_wait(p);
	wait_no_clients(&d, 30000);
	REQUIRE(check_in_use(d.sock, "after the kill") == NOBJ, "kept objects not in use");
	owner_stats(d.sock, "keep", &freed, &kept);
	REQUIRE(freed == 0 && kept == NOBJ, "owner_freed %llu, owner_kept %llu",
		(unsigned long long)freed, (unsigned long long)kept);
	REQUIRE(clients_held(d.sock, "keep", -1) == NOBJ, "clients: kept %llu",
		(unsigned long long)clients_held(d.sock, "keep", -1));
	REQUIRE(destroy(d.sock, "keep") != 0, "destroy with kept objects succeeded");
	/* Anyone may free them. */
	a.flags = 0;
	p = start(freer, &a, "freer");
	REQUIRE(clients_held(d.sock, "keep", -1) == 0, "kept after the frees");
	kill_wait(p);
	wait_no_clients(&d, 30000);
	REQUIRE(check_in_use(d.sock, "after the frees") == 0, "objects still in use");
	REQUIRE(destroy(d.sock, "keep") == 0, "destroy refused");
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

START_TEST(cross_free)
{
	struct dmn d;
	struct arg a = { .cache = "x", .flags = SHEAF_CACHE_OWNED, .count = NOBJ };
	struct arg b;
	uint64_t freed, kept;
	pid_t pa, pb;
	const int half = NOBJ / 2;

	dmn_init(&d);
	dmn_start(&d, NULL);
	a.sock = d.sock;
	a.sh = shared_new();
	pa = start(holder, &a, "holder");
	b = a;
	b.flags = 0;
	b.count = half;
	pb = start(freer, &b, "freer");
	REQUIRE(clients_held(d.sock, "x", pa) == (uint64_t)(NOBJ - half) &&
		clients_held(d.sock, "x", pb) == 0, "clients after B freed half: A %llu, B %llu",
		(unsigned long long)clients_held(d.sock, "x", pa),
		(unsigned long long)clients_held(d.sock, "x", pb));
	kill_wait(pa);
	kill_wait(pb);
	wait_no_clients(&d, 30000);
	REQUIRE(check_in_use(d.sock, "after the kills") == 0, "objects still in use");
	owner_stats(d.sock, "x", &freed, &kept);
	REQUIRE(freed == (uint64_t)(NOBJ - half), "owner_freed %llu (%d expected)",
		(unsigned long long)freed, NOBJ - half);
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

START_TEST(free_race)
{
	struct dmn d;
	struct arg a = { .cache = "race", .flags = SHEAF_CACHE_OWNED, .count = NOBJ };
	uint64_t freed, kept;
	const int rounds = 20;

	dmn_init(&d);
	dmn_start(&d, NULL);
	a.sock = d.sock;
	a.sh = shared_new();
	for (int r = 0; r < rounds; r++) {
		struct arg b;
		pid_t pa, pb;

		a.sh->n = 0;
		pa = start(holder, &a, "holder");
		a.flags = 0;                    /* the next rounds open it */
		b = a;
		b.count = NOBJ;
		b.slow = 1;                     /* B's frees take a few ms */
		REQUIRE(pipe(b.ready) == 0, "pipe");
		pb = fork_child(freer, &b);
		close(b.ready[1]);
		sleep_us(2000 + (unsigned)(r * 400));   /* the kill lands anywhere */
		kill_wait(pa);
		{
			char g;
			REQUIRE(read_full(b.ready[0], &g, 1, 30000) == 0, "freer did not finish");
		}
		close(b.ready[0]);
		kill_wait(pb);
		wait_no_clients(&d, 30000);
		{
			uint64_t n = check_in_use(d.sock, "after a race");
			uint64_t fr, kp;

			owner_stats(d.sock, "race", &fr, &kp);
			REQUIRE(n == 0, "round %d: %llu objects in use (owner_freed %llu so far)",
				r, (unsigned long long)n, (unsigned long long)fr);
		}
	}
	owner_stats(d.sock, "race", &freed, &kept);
	printf("free_race: %d rounds; sheafd freed %llu of the %d objects, the freer the rest\n",
	       rounds, (unsigned long long)freed, rounds * NOBJ);
	REQUIRE(destroy(d.sock, "race") == 0, "destroy refused");
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- many kills ---------------------------------------------------------------- */

#define HOLD 64

static int victim(void *argp)
{
	struct arg *a = argp;
	sheaf_pool_t *pool = child_connect(a->sock, "victim");
	sheaf_cache_t *c = cache_get(pool, a);
	void *held[HOLD];
	uint64_t rng = a->seed | 1;
	unsigned n = 0;

	close(a->ready[0]);
	REQUIRE(write_full(a->ready[1], "r", 1) == 0, "ready");
	for (;;) {
		if (n < HOLD && (n == 0 || xorshift(&rng) % 3 != 0)) {
			held[n] = sheaf_alloc(c);
			REQUIRE(held[n] != NULL, "victim alloc: %s", strerror(errno));
			n++;
		} else if (n > 0) {
			unsigned k = (unsigned)(xorshift(&rng) % n);
			REQUIRE(sheaf_free(c, held[k]) == 0, "victim free");
			held[k] = held[--n];
		}
	}
}

/* Alloc/free stamped objects until the test closes its stop pipe (here
 * a->ready: [0] stop, read end; [1] ready, write end); check the stamps. */
static int survivor(void *argp)
{
	struct arg *a = argp;
	sheaf_pool_t *pool = child_connect(a->sock, "survivor");
	sheaf_cache_t *c = cache_get(pool, a);
	uint64_t *held[HOLD], rng = 7, seq = 0;
	unsigned n = 0;

	close(a->close_fd);
	REQUIRE(write_full(a->ready[1], "r", 1) == 0, "ready");
	for (;;) {
		struct pollfd pf = { a->ready[0], POLLIN, 0 };

		if (poll(&pf, 1, 0) != 0)
			break;
		for (int r = 0; r < 256; r++) {
			if (n < HOLD && xorshift(&rng) % 2) {
				held[n] = sheaf_alloc(c);
				REQUIRE(held[n] != NULL, "survivor alloc: %s", strerror(errno));
				held[n][1] = ++seq;
				held[n][0] = held[n][7] = (uint64_t)(uintptr_t)held[n] ^ seq;
				n++;
			} else if (n > 0) {
				unsigned k = (unsigned)(xorshift(&rng) % n);
				uint64_t *o = held[k];
				REQUIRE(o[0] == ((uint64_t)(uintptr_t)o ^ o[1]) && o[7] == o[0],
					"survivor's object %p changed: handed out twice", (void *)o);
				REQUIRE(sheaf_free(c, o) == 0, "survivor free");
				held[k] = held[--n];
			}
		}
	}
	while (n > 0)
		REQUIRE(sheaf_free(c, held[--n]) == 0, "survivor free at the end");
	sheaf_disconnect(pool);
	return 0;
}

START_TEST(many_kills)
{
	struct dmn d;
	struct arg a = { .cache = "mk", .flags = SHEAF_CACHE_OWNED, .capacity = 4 };
	struct arg s;
	int kills = test_san() ? 100 : 200, stop[2], ready[2];
	uint64_t seed = 1, freed, kept;
	char g;
	pid_t ps;

	dmn_init(&d);
	dmn_start(&d, NULL);
	a.sock = d.sock;
	a.sh = shared_new();
	/* The survivor creates the cache and runs until @stop closes. */
	REQUIRE(pipe(stop) == 0 && pipe(ready) == 0, "pipe");
	s = a;
	s.ready[0] = stop[0];
	s.ready[1] = ready[1];
	s.close_fd = stop[1];
	ps = fork_child(survivor, &s);
	close(stop[0]);
	close(ready[1]);
	REQUIRE(read_full(ready[0], &g, 1, 30000) == 0, "survivor did not start");
	a.flags = 0;
	for (int k = 0; k < kills; k++) {
		pid_t p;

		a.seed = mix64(seed++);
		p = start(victim, &a, "victim");
		sleep_us((unsigned)(xorshift(&seed) % 3000));
		kill_wait(p);
		REQUIRE(dmn_alive(&d), "sheafd died after kill %d", k);
	}
	close(stop[1]);
	reap_ok(ps, 30000, "survivor");
	wait_no_clients(&d, 60000);
	REQUIRE(check_in_use(d.sock, "after the kills") == 0, "objects lost");
	owner_stats(d.sock, "mk", &freed, &kept);
	printf("many_kills: %d victims killed; sheafd freed %llu objects they held; "
	       "the checker passes with nothing in use\n", kills, (unsigned long long)freed);
	REQUIRE(freed > 0 && kept == 0, "owner_freed %llu, owner_kept %llu",
		(unsigned long long)freed, (unsigned long long)kept);
	REQUIRE(destroy(d.sock, "mk") == 0, "destroy refused");
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- hostile tags ------------------------------------------------------------- */

static int scribbler(void *argp)
{
	struct arg *a = argp;
	sheaf_pool_t *pool = child_connect(a->sock, "scribbler");
	sheaf_cache_t *c = cache_get(pool, a);
	struct shm_pool *p = &pool->shm;
	uint64_t rng = 99;

	for (int i = 0; i < 100; i++)          /* a slab of its own */
		REQUIRE(sheaf_alloc(c) != NULL, "alloc");
	for (int round = 0; round < 4; round++) {
		for (uint32_t f = 0; f < p->frames_total; f++) {
			if (at_load_relaxed(&p->frame_owner[f]) == FRAME_FREE)
				continue;
			for (uint32_t i = 0; i < SLAB_MAX_OBJS; i++)
				at_store_relaxed(&p->tags[(uint64_t)f * SLAB_MAX_OBJS + i],
						 (otag_t)xorshift(&rng));
		}
		if (round == 0)
			REQUIRE(write_full(a->ready[1], "s", 1) == 0, "ready");
	}
	for (;;)
		pause();
}

START_TEST(hostile_tags)
{
	struct dmn d;
	struct arg a = { .cache = "h", .flags = SHEAF_CACHE_OWNED, .count = NOBJ };
	struct arg h;
	pid_t pv, ph;

	dmn_init(&d);
	dmn_start(&d, NULL);
	a.sock = d.sock;
	a.sh = shared_new();
	pv = start(holder, &a, "holder");
	h = a;
	h.flags = 0;
	ph = start(scribbler, &h, "scribbler");
	kill_wait(pv);
	sleep_ms(200);
	REQUIRE(dmn_alive(&d), "sheafd died repairing over scribbled tags");
	(void)clients_held(d.sock, "h", ph);       /* the report reads them too */
	kill_wait(ph);
	wait_no_clients(&d, 30000);
	REQUIRE(dmn_alive(&d), "sheafd died");
	(void)check_in_use(d.sock, "after the scribble");
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- a shared queue moves ownership ------------------------------------------- */

#define QN 300
#define QK 100

/* producer: create the owned cache and queue "q", enqueue QN objects. */
static int q_producer(void *argp)
{
	struct arg *a = argp;
	sheaf_pool_t *pool = child_connect(a->sock, "producer");
	sheaf_cache_t *c = cache_get(pool, a);
	sheaf_queue_t *q = sheaf_queue_create(pool, "q", 1024, 0);

	close(a->ready[0]);
	REQUIRE(q != NULL, "queue create: %s", strerror(errno));
	for (int i = 0; i < QN; i++) {
		char *o = sheaf_alloc(c);

		REQUIRE(o != NULL, "alloc %d: %s", i, strerror(errno));
		REQUIRE(sheaf_enqueue(q, o) == 0, "enqueue %d", i);
	}
	REQUIRE(write_full(a->ready[1], "r", 1) == 0, "ready");
	for (;;)
		pause();
}

/* consumer: dequeue a->count objects and keep them; drainer (a->slow):
 * dequeue everything and free it. */
static int q_consumer(void *argp)
{
	struct arg *a = argp;
	sheaf_pool_t *pool = child_connect(a->sock, "consumer");
	sheaf_cache_t *c = cache_get(pool, a);
	sheaf_queue_t *q = sheaf_queue_open(pool, "q");
	void *o;
	int n = 0;

	close(a->ready[0]);
	REQUIRE(q != NULL, "queue open: %s", strerror(errno));
	while ((a->slow || n < a->count) && sheaf_dequeue(q, &o) == 0) {
		if (a->slow)
			REQUIRE(sheaf_free(c, o) == 0, "free of a dequeued object");
		n++;
	}
	REQUIRE(n == a->count, "dequeued %d of %d", n, a->count);
	REQUIRE(write_full(a->ready[1], "r", 1) == 0, "ready");
	for (;;)
		pause();
}

START_TEST(queued)
{
	struct dmn d;
	struct arg a = { .cache = "qown", .flags = SHEAF_CACHE_OWNED };
	uint64_t freed, kept;
	pid_t p;

	dmn_init(&d);
	dmn_start(&d, NULL);
	a.sock = d.sock;
	p = start(q_producer, &a, "producer");
	kill_wait(p);
	wait_no_clients(&d, 30000);
	REQUIRE(check_in_use(d.sock, "after the producer's death") == QN,
		"queued objects freed with their producer");
	a.flags = 0;
	a.count = QK;
	p = start(q_consumer, &a, "consumer");
	REQUIRE(clients_held(d.sock, "qown", p) == QK, "consumer holds %llu (%d expected)",
		(unsigned long long)clients_held(d.sock, "qown", p), QK);
	kill_wait(p);
	wait_no_clients(&d, 30000);
	REQUIRE(check_in_use(d.sock, "after the consumer's death") == QN - QK,
		"the dead consumer's objects not freed, or queued ones freed");
	owner_stats(d.sock, "qown", &freed, &kept);
	REQUIRE(freed == QK && kept == 0, "owner_freed %llu, owner_kept %llu",
		(unsigned long long)freed, (unsigned long long)kept);
	a.count = QN - QK;
	a.slow = 1;
	p = start(q_consumer, &a, "drainer");
	kill_wait(p);
	wait_no_clients(&d, 30000);
	REQUIRE(check_in_use(d.sock, "after the drain") == 0, "objects left in use");
	printf("queued: %d queued objects survive their producer; a dead consumer's %d freed\n",
	       QN, QK);
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("owned_caches");

	require_binaries("test_owned_caches");
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ADD_ALONE(s, killed_freed, 60);
	ADD_ALONE(s, killed_kept, 60);
	ADD_ALONE(s, cross_free, 60);
	ADD_ALONE(s, free_race, 120);
	ADD_ALONE(s, many_kills, 300);
	ADD_ALONE(s, hostile_tags, 60);
	ADD_ALONE(s, queued, 60);
	return run_suite(s);
}
