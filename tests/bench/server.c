/*
 * server.c - sheafbench's W14: a server simulation.  SERVER_LANES threads
 * run at once, each lane's pinned to a CPU of its own, over one table of
 * SERVER_TABLE live objects, a part per lane.  An operation allocates an
 * object of the next size of W8's seeded sequence (8..1024, from the
 * thread's own offset), writes its first byte, swaps it into a random
 * entry (an atomic exchange) and frees what it took out: an entry of its
 * lane's part, or one time in SERVER_CROSS of the other lane's, whose
 * objects the other thread allocated.  Each thread does SERVER_THREAD_OPS
 * operations and exits, and its lane starts the next, which frees what
 * its predecessor allocated: workers are replaced over time, as a
 * server's are.  Figure: ns per operation (an allocation and a free),
 * wall clock over all lanes.
 * The parts keep the entries' cache lines mostly on one CPU: a table all
 * lanes share would make every exchange a line transfer, whose cost
 * (several times an allocation's) would be most of the figure, and the
 * pinning keeps the lanes on two CPUs (on one, they would not transfer
 * lines at all, and the figure halves).
 *
 * --sized: each entry keeps its object's size too (in the top 16 bits of
 * the word), and the free names it (sheaf_free_sized; the peer's sized
 * free, as sizes.c finds it), as a server that knows its objects' types
 * frees them.
 *
 * sheaf: sheaf_malloc / sheaf_free_any (or sheaf_free_sized) on the
 * contender's pool; malloc: malloc / free (or the sized free).  The main
 * thread fills the table before and frees it after; then, for sheaf, no
 * object of any class may be in use, and the pool checker must pass.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "tests/bench/bench.h"

#define SERVER_LANES      2u          /* threads at once: this machine's CPUs */
#define SERVER_TABLE      8192u       /* live objects, a power of two */
#define SERVER_PART       (SERVER_TABLE / SERVER_LANES)
#define SERVER_CROSS      8u          /* 1 in 8 exchanges in another lane's part */
#define SERVER_THREAD_OPS 50000ull    /* operations before a thread exits */
#define SERVER_PTR_MASK   ((1ull << 48) - 1)

static _Atomic uint64_t table[SERVER_TABLE];

struct server_arg {
	const struct contender *c;
	bool sized;
	uint32_t lane;
	int cpu;                /* -1: not pinned */
	uint64_t ops;           /* this lane's operations in all */
	uint32_t start;         /* offset into the size sequence */
	uint64_t rng;
	uint64_t refused;
};

static inline uint64_t entry_of(void *p, size_t size)
{
	return (uint64_t)size << 48 | ((uint64_t)(uintptr_t)p & SERVER_PTR_MASK);
}

static inline void *entry_ptr(uint64_t e)
{
	return (void *)(uintptr_t)(e & SERVER_PTR_MASK);
}

static inline size_t entry_size(uint64_t e)
{
	return (size_t)(e >> 48);
}

static inline uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* One thread's @n operations (a copy per family and form: no dispatch). */
static inline __attribute__((always_inline))
void server_loop(struct server_arg *a, uint64_t n, uint32_t *k, enum family f, bool sized)
{
	for (uint64_t i = 0; i < n; i++) {
		size_t size = sizes_at((*k)++);
		void *p = class_alloc(a->c, f, size);
		uint64_t r = rng_next(&a->rng);
		uint32_t part = (r >> 40) % SERVER_CROSS ? a->lane : (a->lane + 1) % SERVER_LANES;
		uint64_t old = atomic_exchange_explicit(&table[part * SERVER_PART +
							       (r & (SERVER_PART - 1))],
							entry_of(p, size), memory_order_acq_rel);

		a->refused += sized_free_call(a->c, f, sized, entry_ptr(old), entry_size(old));
	}
}

struct server_thread {
	struct server_arg *a;
	uint64_t n;
	uint32_t k;
};

static void *server_thread(void *arg)
{
	struct server_thread *t = arg;
	struct server_arg *a = t->a;

	if (uses_sheaf(a->c))
		a->sized ? server_loop(a, t->n, &t->k, FAM_SHEAF, true)
			 : server_loop(a, t->n, &t->k, FAM_SHEAF, false);
	else
		a->sized ? server_loop(a, t->n, &t->k, FAM_MALLOC, true)
			 : server_loop(a, t->n, &t->k, FAM_MALLOC, false);
	return NULL;
}

/* A lane: threads one after another until its operations are done. */
static void *server_lane(void *arg)
{
	struct server_arg *a = arg;
	uint32_t k = a->start;

	for (uint64_t done = 0; done < a->ops;) {
		uint64_t n = a->ops - done < SERVER_THREAD_OPS ? a->ops - done : SERVER_THREAD_OPS;
		struct server_thread t = { .a = a, .n = n, .k = k };
		pthread_attr_t attr;
		pthread_t th;
		int rc;

		pthread_attr_init(&attr);
		if (a->cpu >= 0) {
			cpu_set_t set;

			CPU_ZERO(&set);
			CPU_SET(a->cpu, &set);
			pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
		}
		rc = pthread_create(&th, &attr, server_thread, &t);
		pthread_attr_destroy(&attr);
		if (rc != 0)
			die("pthread_create: %s", strerror(rc));
		rc = pthread_join(th, NULL);
		if (rc != 0)
			die("pthread_join: %s", strerror(rc));
		k = t.k;
		done += n;
	}
	return NULL;
}

/* The @l-th CPU this process may run on, or -1 when it has fewer. */
static int lane_cpu(uint32_t l)
{
	cpu_set_t set;
	uint32_t seen = 0;

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return -1;
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &set) && seen++ == l)
			return cpu;
	return -1;
}

static uint64_t server_run(const struct contender *c, bool sized, uint64_t ops, uint32_t round)
{
	struct server_arg a[SERVER_LANES];
	pthread_t th[SERVER_LANES];
	uint64_t refused = 0;

	for (uint32_t l = 0; l < SERVER_LANES; l++) {
		a[l] = (struct server_arg){ .c = c, .sized = sized, .lane = l, .cpu = lane_cpu(l),
					    .ops = ops / SERVER_LANES,
					    .start = (round * SERVER_LANES + l) * 104729u,
					    .rng = 0x9e3779b97f4a7c15ull * (round * SERVER_LANES + l + 1) };
		int rc = pthread_create(&th[l], NULL, server_lane, &a[l]);

		if (rc != 0)
			die("pthread_create: %s", strerror(rc));
	}
	for (uint32_t l = 0; l < SERVER_LANES; l++) {
		int rc = pthread_join(th[l], NULL);

		if (rc != 0)
			die("pthread_join: %s", strerror(rc));
		refused += a[l].refused;
	}
	return refused;
}

/* The table filled (or emptied) by the calling thread. */
static uint64_t table_fill(const struct contender *c, bool sized)
{
	for (uint32_t i = 0; i < SERVER_TABLE; i++) {
		size_t size = sizes_at(i * 31u);
		void *p = uses_sheaf(c) ? class_alloc(c, FAM_SHEAF, size)
					: class_alloc(c, FAM_MALLOC, size);

		atomic_store_explicit(&table[i], entry_of(p, size), memory_order_relaxed);
	}
	(void)sized;
	return 0;
}

static uint64_t table_empty(const struct contender *c, bool sized)
{
	uint64_t refused = 0;

	for (uint32_t i = 0; i < SERVER_TABLE; i++) {
		uint64_t e = atomic_exchange_explicit(&table[i], 0, memory_order_relaxed);

		refused += uses_sheaf(c) ? sized_free_call(c, FAM_SHEAF, sized, entry_ptr(e),
							   entry_size(e))
					 : sized_free_call(c, FAM_MALLOC, sized, entry_ptr(e),
							   entry_size(e));
	}
	return refused;
}

struct result run_w14(const struct contender *c, bool sized, uint64_t count)
{
	struct result r = { .metric = "ns_per_op", .unit = "ns/op" };
	uint64_t before = 0, t0, t1;

	sizes_init();
	if (sized)
		(void)sized_free_name(c);
	if (uses_sheaf(c))
		before = classes_in_use(c);
	check_refused_frees(c, table_fill(c, sized));
	check_refused_frees(c, server_run(c, sized, count / 10 + SERVER_LANES, 0));  /* warm-up */
	t0 = wall_ns();
	check_refused_frees(c, server_run(c, sized, count, 1));
	t1 = wall_ns();
	check_refused_frees(c, table_empty(c, sized));
	r.count = count / SERVER_LANES * SERVER_LANES;
	r.seconds = (double)(t1 - t0) / 1e9;
	r.value = (double)(t1 - t0) / (double)r.count;
	classes_unchanged_or_die(c, before, "after the table was emptied");
	return r;
}
