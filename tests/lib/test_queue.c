/*
 * test_queue.c - shared queues (client/sheaf.h, "shared queues"), the
 * functional side: the calls and their errors on a local pool; MPMC across
 * processes of a real sheafd (every object exactly once, each producer's
 * objects in order); blocking waits (an idle consumer uses no CPU, the
 * timeout, a producer blocked on a full queue); sheafctl queues.  The kill
 * tests are test_queue_crash.c's.
 *
 * Each test is its own TCase: CK_RUN_CASE=<name> runs one.
 */
#include <check.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "client/internal.h"
#include "client/sheaf.h"
#include "shm/queue.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_pool.h"
#include "tests/helpers/util_proc.h"

static void start_sheafd(struct dmn *d)
{
	const char *argv[] = { sheafd_bin(), "--foreground", "--socket", d->sock,
			       "--nodes", "2", "--size", "64M", NULL };

	dmn_init_at(d, "/tmp/sheaf-queue-XXXXXX", "log");
	dmn_start_argv(d, (char *const *)argv);
}

/* ---- the calls on a local pool ------------------------------------------- */

/* The calls, on a queue of @flags (one thread: the SP/SC contract holds). */
static void calls_local(unsigned flags)
{
	sheaf_pool_t *p = pool_new(NULL);
	sheaf_cache_t *c = mkcache(p, "msg", 64, -1, 0), *c2 = mkcache(p, "big", 1024, -1, 0);
	sheaf_queue_t *q, *q2;
	struct sheaf_queue_stats st;
	void *objs[40], *got[40], *o;
	char local[64];
	int n;

	errno = 0;
	REQUIRE(sheaf_queue_create(p, "", 8, 0) == NULL && errno == EINVAL, "empty name");
	REQUIRE(sheaf_queue_create(p, "q", 8, 4) == NULL && errno == EINVAL, "flags");
	REQUIRE(sheaf_queue_create(p, "q", (1u << 20) + 1, 0) == NULL && errno == EINVAL, "cap");
	REQUIRE(sheaf_queue_open(p, "q") == NULL && errno == ENOENT, "open before create");
	q = sheaf_queue_create(p, "q", 30, flags);       /* rounded up to 32 */
	REQUIRE(q != NULL, "create: %s", strerror(errno));
	REQUIRE(sheaf_queue_create(p, "q", 8, 0) == NULL && errno == EEXIST, "exists");
	q2 = sheaf_queue_open(p, "q");
	REQUIRE(q2 != NULL, "open: %s", strerror(errno));

	REQUIRE(sheaf_dequeue(q, &o) == -EAGAIN, "empty");
	REQUIRE(sheaf_enqueue(q, local) == -EINVAL, "a stack pointer is refused");
	o = xalloc(c);
	REQUIRE(sheaf_enqueue(q, (char *)o + 8) == -EINVAL, "not on an object boundary");
	REQUIRE(sheaf_enqueue(q, o) == 0, "enqueue");
	REQUIRE(sheaf_dequeue(q2, &got[0]) == 0 && got[0] == o, "dequeue through the other handle");
	sheaf_free(c, o);

	/* FIFO, mixed caches, full at the capacity. */
	for (int i = 0; i < 33; i++)
		objs[i] = xalloc(i % 2 ? c : c2);
	for (int i = 0; i < 32; i++)
		REQUIRE(sheaf_enqueue(q, objs[i]) == 0, "enqueue %d", i);
	REQUIRE(sheaf_enqueue(q, objs[32]) == -EAGAIN, "full");
	REQUIRE(sheaf_queue_stats(q, &st) == 0 && st.capacity == 32 && st.depth == 32, "stats");
	REQUIRE(sheaf_dequeue_wait(q, &got[0], 0) == 0 && got[0] == objs[0], "first out");
	n = sheaf_dequeue_burst(q, got + 1, 40);
	REQUIRE(n == 31, "bulk dequeue %d", n);
	for (int i = 0; i < 32; i++)
		REQUIRE(got[i] == objs[i], "order at %d", i);
	REQUIRE(sheaf_dequeue_wait(q, &o, 50) == -ETIMEDOUT, "timeout");

	/* Burst enqueue: partial when it fills; an invalid object refuses all. */
	objs[5] = local;
	REQUIRE(sheaf_enqueue_burst(q, objs, 10) == -EINVAL, "invalid in bulk");
	REQUIRE(sheaf_queue_stats(q, &st) == 0 && st.depth == 0, "none enqueued");
	objs[5] = got[5];
	n = sheaf_enqueue_burst(q, objs, 33);
	REQUIRE(n == 32, "bulk enqueue %d", n);
	REQUIRE(sheaf_queue_destroy(q2) == -EBUSY, "destroy while it holds objects");
	REQUIRE(sheaf_dequeue_burst(q, got, 40) == 32, "drain");
	REQUIRE(sheaf_queue_stats(q, &st) == 0 && st.enqueued == 65 && st.dequeued == 65 &&
		st.depth == 0, "counts %llu %llu", (unsigned long long)st.enqueued,
		(unsigned long long)st.dequeued);
	/* The deprecated _bulk names are the _burst calls. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	REQUIRE(sheaf_enqueue_bulk(q, objs, 33) == 32, "deprecated enqueue_bulk");
	REQUIRE(sheaf_dequeue_bulk(q, got, 40) == 32, "deprecated dequeue_bulk");
#pragma GCC diagnostic pop
	for (int i = 0; i < 32; i++)
		REQUIRE(got[i] == objs[i], "order at %d (deprecated names)", i);
	for (int i = 0; i < 33; i++)
		sheaf_free(i % 2 ? c : c2, objs[i]);
	REQUIRE(sheaf_queue_destroy(q2) == 0, "destroy");
	o = xalloc(c);
	REQUIRE(sheaf_enqueue(q, o) == -ESTALE, "stale handle");
	REQUIRE(sheaf_dequeue(q, &got[0]) == -ESTALE, "stale handle");
	REQUIRE(sheaf_queue_open(p, "q") == NULL && errno == ENOENT, "gone");
	sheaf_queue_close(q);
	/* A new queue takes the slot and its frames again. */
	q = sheaf_queue_create(p, "q", 1u << 16, flags);
	REQUIRE(q != NULL, "create again, 2^16 slots (several frames): %s", strerror(errno));
	REQUIRE(sheaf_enqueue(q, o) == 0 && sheaf_dequeue(q, &got[0]) == 0 && got[0] == o, "again");
	sheaf_free(c, o);
	REQUIRE(sheaf_queue_destroy(q) == 0, "destroy");
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}

START_TEST(test_calls_local)
{
	static const unsigned fl[] = { 0, SHEAF_QUEUE_SP, SHEAF_QUEUE_SC,
				       SHEAF_QUEUE_SP | SHEAF_QUEUE_SC };

	for (unsigned i = 0; i < sizeof(fl) / sizeof(fl[0]); i++)
		calls_local(fl[i]);
}
END_TEST

/*
 * The bulk calls look a frame's owner up once for a run of objects in it,
 * and check every object's boundary: a pointer 8 bytes into an object, or
 * on a 64-byte step inside a 1-KiB cache's object, is refused after good
 * objects of the same frame (enqueue); spoiled slot values of both kinds
 * among good ones are dropped and counted, the others kept in order
 * (dequeue).
 */
START_TEST(test_bulk_checks_each_object)
{
	sheaf_pool_t *p = pool_new(NULL);
	sheaf_cache_t *c = mkcache(p, "msg", 64, -1, 0), *c2 = mkcache(p, "big", 1024, -1, 0);
	struct shm_pool *sp = &p->shm;
	struct sheaf_queue_stats st;
	sheaf_queue_t *q = sheaf_queue_create(p, "qb", 64, 0);
	void *objs[10], *got[16], *big = xalloc(c2);
	_Atomic uint64_t *slots;
	int id, n;

	REQUIRE(q != NULL, "create: %s", strerror(errno));
	for (int i = 0; i < 10; i++)
		objs[i] = xalloc(c);
	/* one frame: a fresh cache's first slab */
	for (int i = 1; i < 10; i++)
		REQUIRE(((uintptr_t)objs[i] >> 18) == ((uintptr_t)objs[0] >> 18),
			"objects %d and 0 in different frames", i);

	objs[9] = (char *)objs[8] + 8;
	REQUIRE(sheaf_enqueue_burst(q, objs, 10) == -EINVAL, "8 bytes into an object, last");
	objs[9] = (char *)big + 64;
	REQUIRE(sheaf_enqueue_burst(q, objs, 10) == -EINVAL, "64 bytes into a 1-KiB object");
	REQUIRE(sheaf_queue_stats(q, &st) == 0 && st.depth == 0, "none enqueued");
	objs[9] = big;
	REQUIRE(sheaf_enqueue_burst(q, objs, 10) == 10, "all good");

	/* Spoil slots 3 (8 bytes into objs[2]) and 6 (64 bytes into big). */
	id = pool_queue_find(sp, "qb");
	REQUIRE(id >= 0, "queue not found");
	slots = (_Atomic uint64_t *)(void *)(sp->base + sp->queues[id].off + QUEUE_SLOTS_OFF);
	{
		uint64_t w3 = atomic_load(&slots[3]), w6 = atomic_load(&slots[6]);
		uint64_t r2 = (uint64_t)((char *)objs[2] - sp->base) - sp->data_off;
		uint64_t rb = (uint64_t)((char *)big - sp->base) - sp->data_off;
		uint64_t r3 = (uint64_t)((char *)objs[3] - sp->base) - sp->data_off;

		REQUIRE((uint32_t)w3 == queue_value_at(r3), "slot 3 holds objs[3]");
		REQUIRE((uint32_t)w6 == queue_value_at(r3 + ((char *)objs[6] - (char *)objs[3])),
			"slot 6 holds objs[6]");
		atomic_store(&slots[3], (w3 & ~0xffffffffull) | queue_value_at(r2 + 8));
		atomic_store(&slots[6], (w6 & ~0xffffffffull) | queue_value_at(rb + 64));
	}
	n = sheaf_dequeue_burst(q, got, 16);
	REQUIRE(n == 8, "dequeued %d, want 8", n);
	for (int i = 0, k = 0; i < 10; i++)
		if (i != 3 && i != 6) {
			REQUIRE(got[k] == objs[i], "order: got[%d] is not objs[%d]", k, i);
			k++;
		}
	REQUIRE(sheaf_queue_stats(q, &st) == 0 && st.dropped == 2 && st.depth == 0,
		"dropped %llu, depth %llu", (unsigned long long)st.dropped,
		(unsigned long long)st.depth);
	for (int i = 0; i < 9; i++)
		sheaf_free(c, objs[i]);
	sheaf_free(c2, big);
	REQUIRE(sheaf_queue_destroy(q) == 0, "destroy");
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/* ---- MPMC across processes ---------------------------------------------- */

#define PRODUCERS 2
#define CONSUMERS 2
#define PER_PRODUCER 100000u

struct shared {
	_Atomic uint64_t seen[PRODUCERS * PER_PRODUCER / 64 + 1];
	_Atomic uint64_t dups, disorder, received;
	uint32_t nprod;              /* producers of this run */
	char sock[128];
};

static struct shared *sh;
static sheaf_pool_t *parent_pool;    /* released first by each child */

/* A child's own connection (the parent's mapping, inherited, goes first). */
static sheaf_pool_t *own_connect(const char *name)
{
	if (parent_pool != NULL)
		sheaf_disconnect(parent_pool);
	parent_pool = NULL;
	return child_connect(sh->sock, name);
}

struct msg {
	uint32_t producer;
	uint32_t seq;
	char fill[56];
};

static int producer(void *arg)
{
	uint32_t me = (uint32_t)(uintptr_t)arg;
	sheaf_pool_t *p = own_connect("producer");
	sheaf_cache_t *c = sheaf_cache_open(p, "msg");
	sheaf_queue_t *q = sheaf_queue_open(p, "work");

	REQUIRE(c != NULL && q != NULL, "open: %s", strerror(errno));
	for (uint32_t i = 0; i < PER_PRODUCER; i++) {
		struct msg *m = sheaf_alloc(c);

		REQUIRE(m != NULL, "alloc");
		m->producer = me;
		m->seq = i;
		memset(m->fill, (int)i, sizeof(m->fill));
		REQUIRE(sheaf_enqueue_wait(q, m, 10000) == 0, "enqueue");
	}
	sheaf_queue_close(q);
	sheaf_disconnect(p);
	return 0;
}

static int consumer(void *arg)
{
	sheaf_pool_t *p = own_connect("consumer");
	sheaf_cache_t *c = sheaf_cache_open(p, "msg");
	sheaf_queue_t *q = sheaf_queue_open(p, "work");
	uint32_t last[PRODUCERS];

	(void)arg;
	memset(last, 0xff, sizeof(last));
	REQUIRE(c != NULL && q != NULL, "open: %s", strerror(errno));
	for (;;) {
		void *objs[16];
		int n = sheaf_dequeue_burst(q, objs, 1 + (unsigned)(rand() % 16));

		REQUIRE(n >= 0, "dequeue %d", n);
		if (n == 0) {
			void *o;
			int rc = sheaf_dequeue_wait(q, &o, 300);

			if (rc == -ETIMEDOUT && sh->received == sh->nprod * PER_PRODUCER)
				break;
			if (rc != 0)
				continue;
			objs[0] = o;
			n = 1;
		}
		for (int i = 0; i < n; i++) {
			struct msg *m = objs[i];
			uint64_t id = (uint64_t)m->producer * PER_PRODUCER + m->seq;

			REQUIRE(m->producer < PRODUCERS && m->seq < PER_PRODUCER, "a bad message");
			for (size_t k = 0; k < sizeof(m->fill); k++)
				REQUIRE(m->fill[k] == (char)m->seq, "message %u torn", m->seq);
			if (atomic_fetch_or(&sh->seen[id / 64], 1ull << (id % 64)) &
			    (1ull << (id % 64)))
				sh->dups++;
			/* Per producer, one consumer sees increasing seqs. */
			if (last[m->producer] != UINT32_MAX && m->seq <= last[m->producer])
				sh->disorder++;
			last[m->producer] = m->seq;
			sh->received++;
			sheaf_free(c, m);
		}
	}
	sheaf_queue_close(q);
	sheaf_disconnect(p);
	return 0;
}

static struct shared *shared_new(const char *sock)
{
	struct shared *s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	REQUIRE(s != MAP_FAILED, "mmap");
	memset(s, 0, sizeof(*s));
	snprintf(s->sock, sizeof(s->sock), "%s", sock);
	return s;
}

/* @nprod producers and @ncons consumers on a queue of @flags. */
static void run_processes(unsigned flags, uint32_t nprod, uint32_t ncons)
{
	struct dmn d;
	sheaf_pool_t *p;
	sheaf_queue_t *q;
	pid_t pid[PRODUCERS + CONSUMERS];
	struct sheaf_queue_stats st;
	char err[256];

	start_sheafd(&d);
	sh = shared_new(d.sock);
	sh->nprod = nprod;
	p = parent_pool = child_connect(d.sock, "test");
	REQUIRE(sheaf_cache_create(p, "msg", sizeof(struct msg), NULL) != NULL, "cache");
	q = sheaf_queue_create(p, "work", 256, flags);
	REQUIRE(q != NULL, "queue: %s", strerror(errno));
	for (uint32_t i = 0; i < ncons; i++)
		pid[nprod + i] = fork_child(consumer, NULL);
	for (uint32_t i = 0; i < nprod; i++)
		pid[i] = fork_child(producer, (void *)(uintptr_t)i);
	for (uint32_t i = 0; i < nprod + ncons; i++)
		reap_ok(pid[i], 120000, "queue client");
	REQUIRE(sh->received == nprod * PER_PRODUCER, "received %llu",
		(unsigned long long)sh->received);
	REQUIRE(sh->dups == 0 && sh->disorder == 0, "%llu duplicates, %llu out of order",
		(unsigned long long)sh->dups, (unsigned long long)sh->disorder);
	for (uint64_t id = 0; id < nprod * PER_PRODUCER; id++)
		REQUIRE(sh->seen[id / 64] & (1ull << (id % 64)), "message %llu lost",
			(unsigned long long)id);
	REQUIRE(sheaf_queue_stats(q, &st) == 0 && st.depth == 0 &&
		st.enqueued == nprod * PER_PRODUCER && st.dropped == 0, "stats");
	printf("  flags %u, %u+%u processes: %u messages, %llu consumer waits, %llu producer waits\n",
	       flags, nprod, ncons, nprod * PER_PRODUCER, (unsigned long long)st.dequeue_waits,
	       (unsigned long long)st.enqueue_waits);
	REQUIRE(sheaf_pool_check(p, err, sizeof(err)) == 0, "check: %s", err);
	REQUIRE(sheaf_queue_destroy(q) == 0, "destroy");
	sheaf_disconnect(p);
	parent_pool = NULL;
	munmap(sh, sizeof(*sh));
	dmn_end(&d);
}

START_TEST(test_mpmc_processes)
{
	run_processes(0, PRODUCERS, CONSUMERS);
}
END_TEST

/* SP and SC: one producer or consumer (a process) on its side. */
START_TEST(test_single_processes)
{
	run_processes(SHEAF_QUEUE_SP | SHEAF_QUEUE_SC, 1, 1);
	run_processes(SHEAF_QUEUE_SP, 1, CONSUMERS);
	run_processes(SHEAF_QUEUE_SC, PRODUCERS, 1);
}
END_TEST

/* ---- blocking waits ------------------------------------------------------- */

static int idle_consumer(void *arg)
{
	sheaf_pool_t *p = own_connect("idle");
	sheaf_queue_t *q = sheaf_queue_open(p, "w");
	sheaf_cache_t *c = sheaf_cache_open(p, "msg");
	void *o;

	(void)arg;
	REQUIRE(q != NULL && c != NULL, "open");
	REQUIRE(sheaf_dequeue_wait(q, &o, -1) == 0, "wait for ever");
	sheaf_free(c, o);
	sheaf_disconnect(p);
	return 0;
}

static int full_producer(void *arg)
{
	sheaf_pool_t *p = own_connect("full");
	sheaf_queue_t *q = sheaf_queue_open(p, "w");
	sheaf_cache_t *c = sheaf_cache_open(p, "msg");
	void *o;

	(void)arg;
	REQUIRE(q != NULL && c != NULL, "open");
	o = sheaf_alloc(c);
	REQUIRE(o != NULL, "alloc");
	REQUIRE(sheaf_enqueue_wait(q, o, -1) == 0, "enqueue waits for room");
	sheaf_disconnect(p);
	return 0;
}

/* Waits on a queue of @flags: the parent and one child take turns (the
 * SP/SC contract holds). */
static void waits(unsigned flags)
{
	struct dmn d;
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	sheaf_queue_t *q;
	struct sheaf_queue_stats st;
	void *objs[4], *o;
	double cpu;
	int64_t t0;
	pid_t pid;
	int status;

	start_sheafd(&d);
	sh = shared_new(d.sock);
	p = parent_pool = child_connect(d.sock, "test");
	c = sheaf_cache_create(p, "msg", 64, NULL);
	q = sheaf_queue_create(p, "w", 4, flags);
	REQUIRE(c != NULL && q != NULL, "create");

	/* A consumer waiting on an empty queue sleeps.  Measured once it
	 * is asleep (its connect under a sanitizer on a loaded machine may
	 * take longer than any fixed pause). */
	pid = fork_child(idle_consumer, NULL);
	for (t0 = now_ms(); sheaf_queue_stats(q, &st) == 0 && st.dequeue_waits == 0;
	     sleep_ms(10))
		REQUIRE(now_ms() - t0 < 30000, "the consumer did not wait within 30 s");
	sleep_ms(50);                       /* past the wait's own start */
	cpu = cpu_seconds(pid);
	sleep_ms(1000);
	cpu = cpu_seconds(pid) - cpu;
	REQUIRE(cpu < 0.05, "an idle consumer used %.3f s of CPU in 1 s", cpu);
	REQUIRE(waitpid(pid, &status, WNOHANG) == 0, "the consumer returned early");
	o = xalloc(c);
	t0 = now_ms();
	REQUIRE(sheaf_enqueue(q, o) == 0, "enqueue");
	reap_ok(pid, 5000, "idle consumer");
	printf("  flags %u: idle consumer: %.3f s CPU in 1 s; woken and reaped in %lld ms\n",
	       flags, cpu, (long long)(now_ms() - t0));

	/* Timeout. */
	t0 = now_ms();
	REQUIRE(sheaf_dequeue_wait(q, &o, 200) == -ETIMEDOUT, "timeout");
	REQUIRE(now_ms() - t0 >= 190 && now_ms() - t0 < 2000, "waited %lld ms",
		(long long)(now_ms() - t0));

	/* A producer blocks while the queue is full. */
	for (int i = 0; i < 4; i++) {
		objs[i] = xalloc(c);
		REQUIRE(sheaf_enqueue(q, objs[i]) == 0, "fill");
	}
	pid = fork_child(full_producer, NULL);
	for (t0 = now_ms(); sheaf_queue_stats(q, &st) == 0 && st.enqueue_waits == 0;
	     sleep_ms(10)) {
		REQUIRE(waitpid(pid, &status, WNOHANG) == 0, "the producer did not block");
		REQUIRE(now_ms() - t0 < 30000, "the producer did not wait within 30 s");
	}
	sleep_ms(50);
	REQUIRE(waitpid(pid, &status, WNOHANG) == 0, "the producer did not block");
	REQUIRE(sheaf_queue_stats(q, &st) == 0 && st.enqueue_waits > 0 && st.depth == 4,
		"the producer slept");
	REQUIRE(sheaf_dequeue(q, &o) == 0 && o == objs[0], "make room");
	sheaf_free(c, o);
	reap_ok(pid, 5000, "blocked producer");
	for (int i = 0; i < 4; i++) {
		REQUIRE(sheaf_dequeue(q, &o) == 0, "drain");
		sheaf_free(c, o);
	}
	REQUIRE(sheaf_queue_destroy(q) == 0, "destroy");
	sheaf_disconnect(p);
	parent_pool = NULL;
	munmap(sh, sizeof(*sh));
	dmn_end(&d);
}

START_TEST(test_waits)
{
	waits(0);
	waits(SHEAF_QUEUE_SP | SHEAF_QUEUE_SC);
}
END_TEST

/* ---- sheafctl queues -------------------------------------------------------- */

START_TEST(test_sheafctl_queues)
{
	struct dmn d;
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	sheaf_queue_t *q;
	char cmd[512], *out;
	void *o;
	FILE *f;
	size_t len = 0;

	start_sheafd(&d);
	p = parent_pool = child_connect(d.sock, "test");
	c = sheaf_cache_create(p, "msg", 64, NULL);
	q = sheaf_queue_create(p, "jobs", 100, 0);
	REQUIRE(c != NULL && q != NULL, "create");
	o = xalloc(c);
	REQUIRE(sheaf_enqueue(q, o) == 0, "enqueue");
	snprintf(cmd, sizeof(cmd), "%s --socket %s queues --json", sheafctl_bin(), d.sock);
	f = popen(cmd, "r");
	REQUIRE(f != NULL, "popen");
	out = calloc(1, 65536);
	len = fread(out, 1, 65535, f);
	REQUIRE(pclose(f) == 0 && len > 0, "sheafctl queues --json failed: %s", out);
	REQUIRE(strstr(out, "\"name\": \"jobs\"") != NULL && strstr(out, "\"depth\": 1") != NULL &&
		strstr(out, "\"capacity\": 128") != NULL && strstr(out, "\"enqueued\": 1") != NULL,
		"sheafctl queues --json: %s", out);
	snprintf(cmd, sizeof(cmd), "%s --socket %s stats -o json", sheafctl_bin(), d.sock);
	f = popen(cmd, "r");
	len = fread(out, 1, 65535, f);
	out[len] = '\0';
	REQUIRE(pclose(f) == 0 && strstr(out, "\"queues\"") != NULL &&
		strstr(out, "\"jobs\"") != NULL, "stats --json has no queues: %s", out);
	snprintf(cmd, sizeof(cmd), "%s --socket %s metrics", sheafctl_bin(), d.sock);
	f = popen(cmd, "r");
	len = fread(out, 1, 65535, f);
	out[len] = '\0';
	REQUIRE(pclose(f) == 0 && strstr(out, "sheaf_queue_depth{queue=\"jobs\"} 1") != NULL,
		"metrics have no queue depth: %s", out);
	free(out);
	REQUIRE(sheaf_dequeue(q, &o) == 0, "dequeue");
	sheaf_free(c, o);
	REQUIRE(sheaf_queue_destroy(q) == 0, "destroy");
	sheaf_disconnect(p);
	dmn_end(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("queue");

	require_binaries("test_queue");
	ADD_ALONE(s, test_calls_local, 60);
	ADD_ALONE(s, test_bulk_checks_each_object, 60);
	ADD_ALONE(s, test_mpmc_processes, 300);
	ADD_ALONE(s, test_single_processes, 300);
	ADD_ALONE(s, test_waits, 60);
	ADD_ALONE(s, test_sheafctl_queues, 60);
	return run_suite(s);
}
