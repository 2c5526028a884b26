/*
 * inproc.c - sheafbench's workloads inside this one process (sheafbench.c
 * holds the options, the contenders' setup, the post-run proof, the output
 * and main; the figures are described in its header comment):
 *   w1   one thread allocates then frees one object, N times: ns per pair.
 *   w2   one thread allocates --batch B objects, then frees them in
 *        allocation order, rounds after one untimed warm-up: ns per op.
 *   w3   a producer thread allocates and hands each object over an SPSC
 *        ring (spsc.h) to a consumer thread that frees it, both pinned to
 *        the first two CPUs the process may use: Mobj/s.
 * Also here, for xproc.c too: pin_self and pick_cpus (CPU pinning).  run_w1
 * and run_w2 are what each child of a --procs run calls (xproc.c); they
 * wait at its start gate (c->gate) just before timing.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tests/bench/bench.h"

/* --procs runs: line up with the other processes just before timing. */
static void timing_gate(const struct contender *c)
{
	if (c->gate)
		xgate_wait(c->gate);
}

/* ---- w1: alloc+free pairs ---------------------------------------------- */

static inline __attribute__((always_inline))
uint64_t w1_loop(const struct contender *c, enum family f, uint64_t pairs)
{
	uint64_t refused = 0;

	for (uint64_t i = 0; i < pairs; i++) {
		void *p = obj_alloc(c, f);

		refused += obj_free(c, f, p);
	}
	return refused;
}

static uint64_t w1_pairs(const struct contender *c, uint64_t pairs)
{
	switch (family_of(c)) {
	case FAM_SHEAF:
		return w1_loop(c, FAM_SHEAF, pairs);
	case FAM_MPOOL:
		return w1_loop(c, FAM_MPOOL, pairs);
	default:
		return w1_loop(c, FAM_MALLOC, pairs);
	}
}

struct result run_w1(const struct contender *c, uint64_t pairs)
{
	struct result r = { .metric = "ns_per_pair", .unit = "ns/pair",
			    .count = pairs };
	uint64_t t0, t1, c0, c1;

	check_refused_frees(c, w1_pairs(c, pairs / 100 + 1));  /* warm-up */
	timing_gate(c);
	c0 = cpu_now_ns();
	t0 = now_ns();
	check_refused_frees(c, w1_pairs(c, pairs));
	t1 = now_ns();
	c1 = cpu_now_ns();
	r.seconds = (double)(t1 - t0) / 1e9;
	r.value = (double)(t1 - t0) / (double)pairs;
	r.cpu_value = (double)(c1 - c0) / (double)pairs;
	return r;
}

/* ---- w2: batches ------------------------------------------------------- */

static inline __attribute__((always_inline))
uint64_t w2_loop(const struct contender *c, enum family f, void **objs,
		 size_t batch)
{
	uint64_t refused = 0;

	for (size_t i = 0; i < batch; i++)
		objs[i] = obj_alloc(c, f);
	escape(objs);
	for (size_t i = 0; i < batch; i++)
		refused += obj_free(c, f, objs[i]);
	return refused;
}

static uint64_t w2_round(const struct contender *c, void **objs, size_t batch)
{
	switch (family_of(c)) {
	case FAM_SHEAF:
		return w2_loop(c, FAM_SHEAF, objs, batch);
	case FAM_MPOOL:
		return w2_loop(c, FAM_MPOOL, objs, batch);
	default:
		return w2_loop(c, FAM_MALLOC, objs, batch);
	}
}

static uint64_t w2_rounds(const struct contender *c, void **objs,
			  size_t batch, uint64_t rounds)
{
	uint64_t refused = 0;

	for (uint64_t r = 0; r < rounds; r++)
		refused += w2_round(c, objs, batch);
	return refused;
}

struct result run_w2(const struct contender *c, size_t batch,
		     uint64_t target_ops)
{
	struct result r = { .metric = "ns_per_op", .unit = "ns/op" };
	uint64_t ops_per_round = 2 * (uint64_t)batch;
	uint64_t rounds, t0, t1, c0, c1;
	void **objs;

	rounds = (target_ops + ops_per_round - 1) / ops_per_round;
	if (rounds < W2_MIN_ROUNDS)
		rounds = W2_MIN_ROUNDS;
	objs = calloc(batch, sizeof(*objs));
	if (!objs)
		die("no memory for a %zu-pointer array", batch);
	check_refused_frees(c, w2_rounds(c, objs, batch, 1));  /* warm-up */
	timing_gate(c);
	c0 = cpu_now_ns();
	t0 = now_ns();
	check_refused_frees(c, w2_rounds(c, objs, batch, rounds));
	t1 = now_ns();
	c1 = cpu_now_ns();
	free(objs);
	r.rounds = rounds;
	r.count = rounds * ops_per_round;
	r.seconds = (double)(t1 - t0) / 1e9;
	r.value = (double)(t1 - t0) / (double)r.count;
	r.cpu_value = (double)(c1 - c0) / (double)r.count;
	return r;
}

/* ---- w3: SPSC ring between two pinned threads -------------------------- */

struct w3_shared {
	const struct contender *c;
	struct spsc_ring *ring;
	uint64_t objects;
	int cpu[2];                     /* producer, consumer; -1: not pinned */
	_Atomic int ready;              /* threads waiting at the start gate */
	_Atomic bool go;
	uint64_t t_start;               /* set by the producer */
	uint64_t t_end;                 /* set by the consumer */
	uint64_t refused;               /* set by the consumer */
};

void pin_self(int cpu)
{
	cpu_set_t set;
	int rc;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (rc)
		die("pthread_setaffinity_np(cpu %d): %s", cpu, strerror(rc));
}

/* Pin, then wait until both threads are ready and the main thread opens. */
static void w3_start_gate(struct w3_shared *sh, int cpu)
{
	unsigned spins = 0;

	pin_self(cpu);
	atomic_fetch_add_explicit(&sh->ready, 1, memory_order_acq_rel);
	while (!atomic_load_explicit(&sh->go, memory_order_acquire))
		spin_wait(&spins);
}

/* Return the thread's sheaves outside the timed region. */
static void w3_thread_done(const struct contender *c)
{
	if (uses_sheaf(c))
		sheaf_thread_exit();
}

static inline __attribute__((always_inline))
void w3_produce(struct w3_shared *sh, enum family f)
{
	uint64_t head = 0, tail_seen = 0;

	for (uint64_t i = 0; i < sh->objects; i++)
		ring_push(sh->ring, &head, &tail_seen, obj_alloc(sh->c, f));
}

static inline __attribute__((always_inline))
uint64_t w3_consume(struct w3_shared *sh, enum family f)
{
	uint64_t tail = 0, head_seen = 0, refused = 0;

	for (uint64_t i = 0; i < sh->objects; i++)
		refused += obj_free(sh->c, f,
				    ring_pop(sh->ring, &tail, &head_seen));
	return refused;
}

static void *w3_producer(void *arg)
{
	struct w3_shared *sh = arg;

	w3_start_gate(sh, sh->cpu[0]);
	sh->t_start = now_ns();
	switch (family_of(sh->c)) {
	case FAM_SHEAF:
		w3_produce(sh, FAM_SHEAF);
		break;
	case FAM_MPOOL:
		w3_produce(sh, FAM_MPOOL);
		break;
	default:
		w3_produce(sh, FAM_MALLOC);
		break;
	}
	w3_thread_done(sh->c);
	return NULL;
}

static void *w3_consumer(void *arg)
{
	struct w3_shared *sh = arg;

	w3_start_gate(sh, sh->cpu[1]);
	switch (family_of(sh->c)) {
	case FAM_SHEAF:
		sh->refused = w3_consume(sh, FAM_SHEAF);
		break;
	case FAM_MPOOL:
		sh->refused = w3_consume(sh, FAM_MPOOL);
		break;
	default:
		sh->refused = w3_consume(sh, FAM_MALLOC);
		break;
	}
	sh->t_end = now_ns();
	w3_thread_done(sh->c);
	return NULL;
}

/* The first @n CPUs of the process's affinity mask into @cpu; returns how
 * many there are (at most @n); the rest of @cpu is -1. */
int pick_cpus(int *cpu, int n)
{
	cpu_set_t set;
	int found = 0;

	for (int i = 0; i < n; i++)
		cpu[i] = -1;
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return 0;
	for (int i = 0; i < CPU_SETSIZE && found < n; i++)
		if (CPU_ISSET(i, &set))
			cpu[found++] = i;
	return found;
}

static void start_thread(pthread_t *t, void *(*fn)(void *), void *arg)
{
	int rc = pthread_create(t, NULL, fn, arg);

	if (rc)
		die("pthread_create: %s", strerror(rc));
}

struct result run_w3(const struct contender *c, uint64_t objects)
{
	struct result r = { .metric = "mobj_per_s", .unit = "Mobj/s",
			    .count = objects };
	struct w3_shared sh = { .c = c, .objects = objects };
	pthread_t producer, consumer;
	unsigned spins = 0;

	sh.ring = aligned_alloc(CACHELINE, sizeof(*sh.ring));
	if (!sh.ring)
		die("no memory for the ring");
	memset(sh.ring, 0, sizeof(*sh.ring));
	if (pick_cpus(sh.cpu, 2) < 2)
		sh.cpu[0] = sh.cpu[1] = -1;     /* one CPU: do not pin */
	start_thread(&consumer, w3_consumer, &sh);
	start_thread(&producer, w3_producer, &sh);
	while (atomic_load_explicit(&sh.ready, memory_order_acquire) < 2)
		spin_wait(&spins);
	atomic_store_explicit(&sh.go, true, memory_order_release);
	pthread_join(producer, NULL);
	pthread_join(consumer, NULL);
	free(sh.ring);
	check_refused_frees(c, sh.refused);
	r.seconds = (double)(sh.t_end - sh.t_start) / 1e9;
	r.value = (double)objects / r.seconds / 1e6;
	return r;
}
