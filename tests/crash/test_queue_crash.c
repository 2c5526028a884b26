/*
 * test_queue_crash.c - shared queues under SIGKILL: producer and consumer
 * processes of a real sheafd are killed at random points of their
 * enqueue/dequeue loops (>= 1000 kills on an MPMC queue, as many again on
 * SP/SC, SP and SC queues; SHEAF_QUEUE_KILLS=N for more) and replaced.  Afterwards every message is accounted exactly once: freed by
 * a consumer, still in the queue, or in flight in a dead process (a
 * producer killed between allocating and enqueuing, a consumer between
 * dequeuing and recording), never twice; the in-flight count is bounded by
 * what the killed processes could hold; and the queue still works (FIFO
 * through its whole capacity, not wedged).
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "client/sheaf.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_pool.h"
#include "tests/helpers/util_proc.h"

#define CAPACITY  64u
#define MAX_IDS   (1u << 24)
#define BULK_MAX  8u
#define NPROC     4             /* 2 producers, 2 consumers */

struct msg {
	uint64_t id;
	uint64_t check;              /* ~id: a torn or foreign message shows */
	char fill[48];
};

struct shared {
	_Atomic uint64_t next_id;
	_Atomic uint64_t dups, bad, freed;
	_Atomic uint32_t ready[NPROC];
	int nprod;                   /* slots 0..nprod-1 produce, the rest consume */
	char sock[128];
	_Atomic uint64_t seen[MAX_IDS / 64];
};

static struct shared *sh;
static sheaf_pool_t *parent_pool;

static sheaf_pool_t *own_connect(const char *name)
{
	if (parent_pool != NULL)
		sheaf_disconnect(parent_pool);
	parent_pool = NULL;
	return child_connect(sh->sock, name);
}

/* Mark @m seen; a second sighting is a duplicate. */
static void record(struct msg *m)
{
	uint64_t id = m->id;

	if (id >= atomic_load(&sh->next_id) || id >= MAX_IDS || m->check != ~id) {
		sh->bad++;
		return;
	}
	if (atomic_fetch_or(&sh->seen[id / 64], 1ull << (id % 64)) & (1ull << (id % 64)))
		sh->dups++;
}

static int producer(void *arg)
{
	int slot = (int)(uintptr_t)arg;
	sheaf_pool_t *p = own_connect("producer");
	sheaf_cache_t *c = sheaf_cache_open(p, "msg");
	sheaf_queue_t *q = sheaf_queue_open(p, "kq");

	REQUIRE(c != NULL && q != NULL, "open: %s", strerror(errno));
	sh->ready[slot] = 1;
	for (;;) {
		struct msg *m = sheaf_alloc(c);
		uint64_t id;

		REQUIRE(m != NULL, "alloc: %s", strerror(errno));
		id = atomic_fetch_add(&sh->next_id, 1);
		if (id >= MAX_IDS) {
			/* Out of ids (a slow build, a loaded machine): stop
			 * producing and wait to be killed; the id counts as
			 * in flight, as a kill before the enqueue would. */
			sheaf_free(c, m);
			for (;;)
				pause();
		}
		m->id = id;
		m->check = ~id;
		while (sheaf_enqueue_wait(q, m, 5) != 0)
			;
	}
	return 0;
}

static int consumer(void *arg)
{
	int slot = (int)(uintptr_t)arg;
	sheaf_pool_t *p = own_connect("consumer");
	sheaf_cache_t *c = sheaf_cache_open(p, "msg");
	sheaf_queue_t *q = sheaf_queue_open(p, "kq");
	uint64_t rnd = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull | 1;

	REQUIRE(c != NULL && q != NULL, "open: %s", strerror(errno));
	sh->ready[slot] = 1;
	for (;;) {
		void *objs[BULK_MAX];
		int n = sheaf_dequeue_burst(q, objs, 1 + (unsigned)(xorshift(&rnd) % BULK_MAX));

		if (n == 0 && sheaf_dequeue_wait(q, objs, 5) == 0)
			n = 1;
		for (int i = 0; i < n; i++) {
			record(objs[i]);
			sheaf_free(c, objs[i]);
			sh->freed++;
		}
	}
	return 0;
}

static pid_t spawn(int slot)
{
	sh->ready[slot] = 0;
	return fork_child(slot < sh->nprod ? producer : consumer, (void *)(uintptr_t)slot);
}

static void kill_reap(pid_t pid)
{
	int st;

	kill(pid, SIGKILL);
	REQUIRE(waitpid(pid, &st, 0) == pid, "waitpid");
	REQUIRE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
		"a client ended on its own (status 0x%x): see its message above", st);
}

/*
 * @nprod producers and @ncons consumers on a queue of @flags, @kills_want
 * kills.  With SHEAF_QUEUE_SP (SC) there is one producer (consumer), and
 * its successor starts only once it is reaped: the contract of the flag,
 * so what is tested is the takeover after a death at any instruction.
 */
static void kills_run(unsigned flags, int nprod, int ncons, unsigned kills_want)
{
	const char *argv[] = { NULL, "--foreground", "--socket", NULL, "--nodes", "1",
			       "--size", "256M", NULL };
	int nproc = nprod + ncons;
	unsigned kills = 0;
	uint64_t rnd = 0x1234567, accounted = 0, drained = 0, in_flight;
	struct sheaf_queue_stats st;
	struct dmn d;
	sheaf_cache_t *c;
	sheaf_queue_t *q;
	pid_t pid[NPROC];
	void *objs[CAPACITY + 1], *o;
	int64_t t0 = now_ms();

	dmn_init_at(&d, "/tmp/sheaf-qcrash-XXXXXX", "log");
	argv[0] = sheafd_bin();
	argv[3] = d.sock;
	dmn_start_argv(&d, (char *const *)argv);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	REQUIRE(sh != MAP_FAILED, "mmap");
	snprintf(sh->sock, sizeof(sh->sock), "%s", d.sock);
	sh->nprod = nprod;
	parent_pool = child_connect(d.sock, "test");
	c = sheaf_cache_create(parent_pool, "msg", sizeof(struct msg), NULL);
	q = sheaf_queue_create(parent_pool, "kq", CAPACITY, flags);
	REQUIRE(c != NULL && q != NULL, "create: %s", strerror(errno));

	for (int i = 0; i < nproc; i++)
		pid[i] = spawn(i);
	while (kills < kills_want) {
		int v = (int)(xorshift(&rnd) % (unsigned)nproc);
		int64_t until = now_ms() + 5000;

		while (!sh->ready[v]) {     /* connected: now in its loop */
			REQUIRE(now_ms() < until, "child %d never got ready", v);
			sleep_us(100);
		}
		sleep_us((unsigned)(xorshift(&rnd) % 3000));
		kill_reap(pid[v]);
		kills++;
		pid[v] = spawn(v);
	}
	for (int i = 0; i < nproc; i++) {
		kill_reap(pid[i]);
		kills++;
	}

	/* What is left in the queue. */
	while (sheaf_dequeue(q, &o) == 0) {
		record(o);
		sheaf_free(c, o);
		drained++;
	}
	for (uint64_t w = 0; w < (sh->next_id + 63) / 64; w++)
		accounted += (uint64_t)__builtin_popcountll(sh->seen[w]);
	in_flight = sh->next_id - accounted;
	printf("  flags %u, %d+%d: %u kills in %lld ms: %llu messages, %llu freed by consumers, %llu left in "
	       "the queue, %llu in flight in killed processes\n", flags, nprod, ncons, kills,
	       (long long)(now_ms() - t0), (unsigned long long)sh->next_id,
	       (unsigned long long)sh->freed, (unsigned long long)drained,
	       (unsigned long long)in_flight);
	REQUIRE(sh->dups == 0, "%llu messages seen twice", (unsigned long long)sh->dups);
	REQUIRE(sh->bad == 0, "%llu bad messages", (unsigned long long)sh->bad);
	REQUIRE(in_flight <= (uint64_t)kills * BULK_MAX, "%llu messages lost (%u kills)",
		(unsigned long long)in_flight, kills);
	REQUIRE(sh->next_id > 5000, "too little traffic: %llu messages",
		(unsigned long long)sh->next_id);

	/* Not wedged: FIFO through the whole capacity, twice. */
	for (int round = 0; round < 2; round++) {
		for (unsigned i = 0; i < CAPACITY; i++) {
			objs[i] = sheaf_alloc(c);
			REQUIRE(objs[i] != NULL && sheaf_enqueue(q, objs[i]) == 0,
				"enqueue %u after the kills", i);
		}
		objs[CAPACITY] = sheaf_alloc(c);
		REQUIRE(sheaf_enqueue(q, objs[CAPACITY]) == -EAGAIN, "full at the capacity");
		sheaf_free(c, objs[CAPACITY]);
		for (unsigned i = 0; i < CAPACITY; i++) {
			REQUIRE(sheaf_dequeue(q, &o) == 0 && o == objs[i], "FIFO at %u", i);
			sheaf_free(c, o);
		}
		REQUIRE(sheaf_dequeue(q, &o) == -EAGAIN, "empty");
	}
	REQUIRE(sheaf_queue_stats(q, &st) == 0 && st.depth == 0 && st.dropped == 0, "stats");
	REQUIRE(dmn_alive(&d), "sheafd died");
	REQUIRE(sheaf_queue_destroy(q) == 0, "destroy");
	sheaf_disconnect(parent_pool);
	parent_pool = NULL;
	munmap(sh, sizeof(*sh));
	dmn_end(&d);
}

/* SHEAF_QUEUE_KILLS=N: the MPMC run's kills (default 1000); the SP/SC
 * runs take 2/5, 1/5 and 1/5 of that. */
static unsigned kills_env(void)
{
	const char *env = getenv("SHEAF_QUEUE_KILLS");

	return env != NULL ? (unsigned)atoi(env) : 1000;
}

START_TEST(test_kills)
{
	kills_run(0, 2, 2, kills_env());
}
END_TEST

START_TEST(test_kills_single)
{
	unsigned k = kills_env();

	kills_run(SHEAF_QUEUE_SP | SHEAF_QUEUE_SC, 1, 1, k * 2 / 5);
	kills_run(SHEAF_QUEUE_SP, 1, 2, k / 5);
	kills_run(SHEAF_QUEUE_SC, 2, 1, k / 5);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("queue_crash");

	require_binaries("test_queue_crash");
	ADD_ALONE(s, test_kills, 600);
	ADD_ALONE(s, test_kills_single, 600);
	return run_suite(s);
}
