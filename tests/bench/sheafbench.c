/*
 * sheafbench - one allocator, one workload, one process run.
 *
 * What it measures (docs: /work/shared/BENCHMARKS.md, objects of --size
 * bytes, 64 by default; every allocated object gets its first byte written,
 * on every contender alike):
 *   w1  one thread allocates then frees one object, N times (default 10^8).
 *       Figure: ns per alloc+free pair.
 *   w2  one thread allocates --batch B objects into an array, then frees them
 *       all in allocation order; repeated so that about 2*10^7 operations
 *       are timed (at least 3 rounds), after one untimed warm-up round.
 *       Figure: ns per operation (one alloc or one free).
 *   w3  cross-thread one-way flow: a producer thread allocates N objects
 *       (default 10^7) and hands each over a single-producer single-consumer
 *       ring to a consumer thread that frees it.  Producer and consumer are
 *       pinned to the first two CPUs the process may use (not pinned when it
 *       has only one).  Figure: million objects per second.
 *
 * Contenders (--alloc):
 *   sheaf   a local sheaf pool (1 simulated node) and one cache; the sheaf
 *           capacity is the library default unless --capacity is given.
 *   sheaf0  the same with sheaf capacity 0: sheaves disabled, every alloc
 *           and free goes through the barn (the kernel reports' baseline).
 *   malloc  malloc/free of whatever allocator is loaded: glibc by default,
 *           or jemalloc, tcmalloc, mimalloc... through LD_PRELOAD.
 *
 * For the sheaf contenders, after the run, the cache must show no object in
 * use and sheaf_pool_check must pass (before and after the thread returns
 * its sheaves): this proves that no object was lost.  Any failure (an
 * allocation returning NULL, a refused free, a failed check) prints an
 * error and exits with status 1.
 *
 * Run it (normally through tests/bench/run.sh, i.e. `make bench`):
 *   build/tests/bench/sheafbench --alloc sheaf --workload w2 --batch 4096
 *   LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 \
 *       build/tests/bench/sheafbench --alloc malloc --workload w3 --json
 * Options: --alloc sheaf|sheaf0|malloc  --workload w1|w2|w3  --batch B
 *          --size BYTES  --count N  --capacity N  --quick  --json  --help
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/sheaf.h"

#define W1_DEFAULT_PAIRS   100000000ull  /* 10^8 alloc+free pairs */
#define W2_DEFAULT_OPS     20000000ull   /* 2*10^7 timed operations */
#define W2_MIN_ROUNDS      3
#define W2_DEFAULT_BATCH   4096
#define W3_DEFAULT_OBJECTS 10000000ull   /* 10^7 objects */
#define QUICK_DIVISOR      10
#define POOL_MIN_BYTES     (1ull << 30)  /* 1 GiB, sparse */
#define RING_SLOTS         1024          /* power of two */
#define SPINS_BEFORE_YIELD 4096
#define CACHELINE          64
#define FIRST_BYTE_MARK    0x5a
#define ERRLEN             256

enum alloc_kind { ALLOC_SHEAF, ALLOC_SHEAF0, ALLOC_MALLOC };
enum workload { WL_W1, WL_W2, WL_W3 };

struct options {
	enum alloc_kind alloc;
	enum workload workload;
	uint64_t batch;
	uint64_t size;
	uint64_t count;         /* 0: the workload's default */
	int capacity;           /* SHEAF_CAPACITY_DEFAULT unless given */
	bool capacity_given;
	bool quick;
	bool json;
};

struct contender {
	enum alloc_kind kind;
	size_t size;            /* requested object size */
	sheaf_pool_t *pool;     /* sheaf contenders only */
	sheaf_cache_t *cache;
};

struct result {
	const char *metric;     /* "ns_per_pair", "ns_per_op", "mobj_per_s" */
	const char *unit;       /* for the text line */
	double value;
	double seconds;         /* timed wall-clock seconds */
	uint64_t count;         /* pairs (w1), operations (w2), objects (w3) */
	uint64_t rounds;        /* w2 only */
};

static const char *const alloc_names[] = { "sheaf", "sheaf0", "malloc" };
static const char *const workload_names[] = { "w1", "w2", "w3" };

/* ---- errors ------------------------------------------------------------ */

static void die(const char *fmt, ...)
	__attribute__((noreturn, format(printf, 1, 2), cold));

static void die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("sheafbench: error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void die_alloc_failed(const struct contender *c)
	__attribute__((noreturn, cold));

static void die_alloc_failed(const struct contender *c)
{
	die("%s: allocation of a %zu-byte object returned NULL (errno %d: %s)",
	    alloc_names[c->kind], c->size, errno, strerror(errno));
}

/* ---- timing and compiler barriers -------------------------------------- */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Make @p visible to "unknown code", so allocation and store stay. */
static inline void escape(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#else
	__asm__ volatile("" : : : "memory");
#endif
}

/* ---- the contenders' hot path ------------------------------------------
 * @use_sheaf is a compile-time constant at every call site (the workload
 * loops are always inlined into one copy per contender family), so the
 * timed loops carry no contender dispatch.
 */

static inline __attribute__((always_inline))
void *obj_alloc(const struct contender *c, bool use_sheaf)
{
	unsigned char *p;

	p = use_sheaf ? sheaf_alloc(c->cache) : malloc(c->size);
	if (__builtin_expect(p == NULL, 0))
		die_alloc_failed(c);
	p[0] = FIRST_BYTE_MARK;
	escape(p);
	return p;
}

/* Returns 1 when the free was refused (sheaf only), else 0. */
static inline __attribute__((always_inline))
unsigned obj_free(const struct contender *c, bool use_sheaf, void *p)
{
	if (use_sheaf)
		return sheaf_free(c->cache, p) != 0;
	free(p);
	return 0;
}

static bool uses_sheaf(const struct contender *c)
{
	return c->kind != ALLOC_MALLOC;
}

static void check_refused_frees(const struct contender *c, uint64_t refused)
{
	if (refused)
		die("%s: %" PRIu64 " frees were refused by sheaf_free",
		    alloc_names[c->kind], refused);
}

/* ---- w1: alloc+free pairs ---------------------------------------------- */

static inline __attribute__((always_inline))
uint64_t w1_loop(const struct contender *c, bool use_sheaf, uint64_t pairs)
{
	uint64_t refused = 0;

	for (uint64_t i = 0; i < pairs; i++) {
		void *p = obj_alloc(c, use_sheaf);

		refused += obj_free(c, use_sheaf, p);
	}
	return refused;
}

static uint64_t w1_pairs(const struct contender *c, uint64_t pairs)
{
	return uses_sheaf(c) ? w1_loop(c, true, pairs)
			     : w1_loop(c, false, pairs);
}

static struct result run_w1(const struct contender *c, uint64_t pairs)
{
	struct result r = { .metric = "ns_per_pair", .unit = "ns/pair",
			    .count = pairs };
	uint64_t t0, t1;

	check_refused_frees(c, w1_pairs(c, pairs / 100 + 1));  /* warm-up */
	t0 = now_ns();
	check_refused_frees(c, w1_pairs(c, pairs));
	t1 = now_ns();
	r.seconds = (double)(t1 - t0) / 1e9;
	r.value = (double)(t1 - t0) / (double)pairs;
	return r;
}

/* ---- w2: batches ------------------------------------------------------- */

static inline __attribute__((always_inline))
uint64_t w2_loop(const struct contender *c, bool use_sheaf, void **objs,
		 size_t batch)
{
	uint64_t refused = 0;

	for (size_t i = 0; i < batch; i++)
		objs[i] = obj_alloc(c, use_sheaf);
	escape(objs);
	for (size_t i = 0; i < batch; i++)
		refused += obj_free(c, use_sheaf, objs[i]);
	return refused;
}

static uint64_t w2_rounds(const struct contender *c, void **objs,
			  size_t batch, uint64_t rounds)
{
	uint64_t refused = 0;

	for (uint64_t r = 0; r < rounds; r++)
		refused += uses_sheaf(c) ? w2_loop(c, true, objs, batch)
					 : w2_loop(c, false, objs, batch);
	return refused;
}

static struct result run_w2(const struct contender *c, size_t batch,
			    uint64_t target_ops)
{
	struct result r = { .metric = "ns_per_op", .unit = "ns/op" };
	uint64_t ops_per_round = 2 * (uint64_t)batch;
	uint64_t rounds, t0, t1;
	void **objs;

	rounds = (target_ops + ops_per_round - 1) / ops_per_round;
	if (rounds < W2_MIN_ROUNDS)
		rounds = W2_MIN_ROUNDS;
	objs = calloc(batch, sizeof(*objs));
	if (!objs)
		die("no memory for a %zu-pointer array", batch);
	check_refused_frees(c, w2_rounds(c, objs, batch, 1));  /* warm-up */
	t0 = now_ns();
	check_refused_frees(c, w2_rounds(c, objs, batch, rounds));
	t1 = now_ns();
	free(objs);
	r.rounds = rounds;
	r.count = rounds * ops_per_round;
	r.seconds = (double)(t1 - t0) / 1e9;
	r.value = (double)(t1 - t0) / (double)r.count;
	return r;
}

/* ---- w3: SPSC ring between two pinned threads --------------------------
 * Each side keeps its own index and a cached copy of the other side's, so it
 * touches the other side's cache line only when the cached copy says the
 * ring is full (producer) or empty (consumer).
 */

struct spsc_ring {
	_Alignas(CACHELINE) _Atomic uint64_t head;  /* written by the producer */
	_Alignas(CACHELINE) _Atomic uint64_t tail;  /* written by the consumer */
	_Alignas(CACHELINE) void *slot[RING_SLOTS];
};

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

/* Spin-wait step: pause, and yield now and then (one CPU, or oversubscribed). */
static inline void spin_wait(unsigned *spins)
{
	if (++*spins % SPINS_BEFORE_YIELD == 0)
		sched_yield();
	else
		cpu_relax();
}

static inline void ring_push(struct spsc_ring *ring, uint64_t *head,
			     uint64_t *tail_seen, void *p)
{
	unsigned spins = 0;

	while (*head - *tail_seen == RING_SLOTS) {
		*tail_seen = atomic_load_explicit(&ring->tail,
						  memory_order_acquire);
		if (*head - *tail_seen == RING_SLOTS)
			spin_wait(&spins);
	}
	ring->slot[*head % RING_SLOTS] = p;
	(*head)++;
	atomic_store_explicit(&ring->head, *head, memory_order_release);
}

static inline void *ring_pop(struct spsc_ring *ring, uint64_t *tail,
			     uint64_t *head_seen)
{
	unsigned spins = 0;
	void *p;

	while (*tail == *head_seen) {
		*head_seen = atomic_load_explicit(&ring->head,
						  memory_order_acquire);
		if (*tail == *head_seen)
			spin_wait(&spins);
	}
	p = ring->slot[*tail % RING_SLOTS];
	(*tail)++;
	atomic_store_explicit(&ring->tail, *tail, memory_order_release);
	return p;
}

static void pin_self(int cpu)
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
void w3_produce(struct w3_shared *sh, bool use_sheaf)
{
	uint64_t head = 0, tail_seen = 0;

	for (uint64_t i = 0; i < sh->objects; i++)
		ring_push(sh->ring, &head, &tail_seen,
			  obj_alloc(sh->c, use_sheaf));
}

static inline __attribute__((always_inline))
uint64_t w3_consume(struct w3_shared *sh, bool use_sheaf)
{
	uint64_t tail = 0, head_seen = 0, refused = 0;

	for (uint64_t i = 0; i < sh->objects; i++)
		refused += obj_free(sh->c, use_sheaf,
				    ring_pop(sh->ring, &tail, &head_seen));
	return refused;
}

static void *w3_producer(void *arg)
{
	struct w3_shared *sh = arg;

	w3_start_gate(sh, sh->cpu[0]);
	sh->t_start = now_ns();
	if (uses_sheaf(sh->c))
		w3_produce(sh, true);
	else
		w3_produce(sh, false);
	w3_thread_done(sh->c);
	return NULL;
}

static void *w3_consumer(void *arg)
{
	struct w3_shared *sh = arg;

	w3_start_gate(sh, sh->cpu[1]);
	sh->refused = uses_sheaf(sh->c) ? w3_consume(sh, true)
					: w3_consume(sh, false);
	sh->t_end = now_ns();
	w3_thread_done(sh->c);
	return NULL;
}

/* The first two CPUs of the process's affinity mask; -1s when fewer. */
static void pick_two_cpus(int cpu[2])
{
	cpu_set_t set;
	int found = 0;

	cpu[0] = cpu[1] = -1;
	if (sched_getaffinity(0, sizeof(set), &set) != 0 ||
	    CPU_COUNT(&set) < 2)
		return;
	for (int i = 0; i < CPU_SETSIZE && found < 2; i++)
		if (CPU_ISSET(i, &set))
			cpu[found++] = i;
}

static void start_thread(pthread_t *t, void *(*fn)(void *), void *arg)
{
	int rc = pthread_create(t, NULL, fn, arg);

	if (rc)
		die("pthread_create: %s", strerror(rc));
}

static struct result run_w3(const struct contender *c, uint64_t objects)
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
	pick_two_cpus(sh.cpu);
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

/* ---- sheaf setup and the post-run proof -------------------------------- */

static size_t pool_bytes_for(const struct options *o)
{
	uint64_t need = 0;

	if (o->workload == WL_W2)  /* the batch, twice over for slab slack */
		need = 4 * o->batch * o->size;
	return need > POOL_MIN_BYTES ? need : POOL_MIN_BYTES;
}

static void contender_open_sheaf(struct contender *c, const struct options *o)
{
	struct sheaf_pool_config pcfg = { .size = pool_bytes_for(o), .nodes = 1 };
	struct sheaf_cache_config ccfg = { .capacity = o->capacity };
	char err[ERRLEN] = "";

	if (c->kind == ALLOC_SHEAF0)
		ccfg.capacity = 0;
	c->pool = sheaf_pool_create(&pcfg, err, sizeof(err));
	if (!c->pool)
		die("sheaf_pool_create: %s (errno %d: %s)", err, errno,
		    strerror(errno));
	c->cache = sheaf_cache_create(c->pool, "bench", c->size, &ccfg);
	if (!c->cache)
		die("sheaf_cache_create(size %zu, capacity %d): errno %d: %s",
		    c->size, ccfg.capacity, errno, strerror(errno));
}

static void contender_open(struct contender *c, const struct options *o)
{
	memset(c, 0, sizeof(*c));
	c->kind = o->alloc;
	c->size = o->size;
	if (uses_sheaf(c))
		contender_open_sheaf(c, o);
}

static void sheaf_check_or_die(const struct contender *c, const char *when)
{
	char err[ERRLEN] = "";
	int rc = sheaf_pool_check(c->pool, err, sizeof(err));

	if (rc)
		die("%s: sheaf_pool_check %s failed (%d: %s): %s",
		    alloc_names[c->kind], when, rc, strerror(-rc), err);
}

static void sheaf_stats_or_die(const struct contender *c,
			       struct sheaf_stats *st)
{
	int rc = sheaf_cache_stats(c->cache, -1, st);

	if (rc)
		die("sheaf_cache_stats: %d (%s)", rc, strerror(-rc));
}

/* Every object was freed, and the checker agrees, with sheaves held and
 * after they went back.  Leaves the final statistics in @st. */
static void sheaf_prove_nothing_lost(const struct contender *c,
				     struct sheaf_stats *st)
{
	sheaf_stats_or_die(c, st);
	if (st->in_use != 0)
		die("%s: %" PRIu64 " objects still in use after every free",
		    alloc_names[c->kind], st->in_use);
	sheaf_check_or_die(c, "with the thread's sheaves held");
	sheaf_thread_exit();
	sheaf_check_or_die(c, "after sheaf_thread_exit");
	sheaf_stats_or_die(c, st);
}

/* ---- output ------------------------------------------------------------ */

static const char *preload_name(void)
{
	const char *p = getenv("LD_PRELOAD");

	return p && *p ? p : "";
}

/* Our strings are paths and names; escape the two JSON specials anyway. */
static void json_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			putchar('\\');
		putchar(*s);
	}
	putchar('"');
}

static void json_sheaf_stats(const struct sheaf_stats *st)
{
	printf(",\"stats\":{");
	for (unsigned i = 0; i < st->nstat; i++) {
		const char *name = sheaf_stat_name(i);

		printf("%s", i ? "," : "");
		json_string(name ? name : "?");
		printf(":%" PRIu64, st->stat[i]);
	}
	printf("},\"slabs\":%" PRIu64 ",\"bytes_mapped\":%" PRIu64,
	       st->slabs, st->bytes_mapped);
}

static void print_json(const struct options *o, const struct contender *c,
		       const struct result *r, const struct sheaf_stats *st)
{
	printf("{\"alloc\":\"%s\",\"workload\":\"%s\",\"size\":%" PRIu64,
	       alloc_names[o->alloc], workload_names[o->workload], o->size);
	printf(",\"batch\":%" PRIu64 ",\"count\":%" PRIu64
	       ",\"rounds\":%" PRIu64, o->workload == WL_W2 ? o->batch : 0,
	       r->count, r->rounds);
	if (uses_sheaf(c))
		printf(",\"object_size\":%zu,\"capacity\":%u",
		       sheaf_cache_object_size(c->cache), st->sheaf_capacity);
	printf(",\"preload\":");
	json_string(uses_sheaf(c) ? "" : preload_name());
	printf(",\"metric\":\"%s\",\"value\":%.4f,\"seconds\":%.4f",
	       r->metric, r->value, r->seconds);
	if (uses_sheaf(c))
		json_sheaf_stats(st);
	printf("}\n");
}

static void print_text(const struct options *o, const struct contender *c,
		       const struct result *r, const struct sheaf_stats *st)
{
	printf("%s", alloc_names[o->alloc]);
	if (!uses_sheaf(c))
		printf("(%s)", *preload_name() ? preload_name() : "glibc");
	printf(" %s size=%" PRIu64, workload_names[o->workload], o->size);
	if (o->workload == WL_W2)
		printf(" batch=%" PRIu64 " rounds=%" PRIu64, o->batch,
		       r->rounds);
	if (uses_sheaf(c))
		printf(" capacity=%u", st->sheaf_capacity);
	printf(" count=%" PRIu64 ": %.3f %s (%.3f s)\n", r->count, r->value,
	       r->unit, r->seconds);
}

/* ---- options ----------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sheafbench [--alloc sheaf|sheaf0|malloc] [--workload w1|w2|w3]\n"
		"                  [--batch B] [--size BYTES] [--count N] [--capacity N]\n"
		"                  [--quick] [--json]\n"
		"  w1: alloc+free pairs (N default 10^8), ns/pair\n"
		"  w2: batches of B (default %d) allocs then frees, N timed ops\n"
		"      (default 2*10^7, at least %d rounds), ns/op\n"
		"  w3: producer->SPSC ring->consumer frees, N objects (default 10^7), Mobj/s\n"
		"  --capacity: sheaf capacity 0..256 (--alloc sheaf only)\n"
		"  --quick: divide N by %d\n"
		"  malloc uses whatever allocator is LD_PRELOADed (glibc if none)\n",
		W2_DEFAULT_BATCH, W2_MIN_ROUNDS, QUICK_DIVISOR);
}

static uint64_t parse_u64(const char *opt, const char *s, uint64_t min,
			  uint64_t max)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end || *s == '-' || v < min || v > max)
		die("%s: '%s' is not a number in %" PRIu64 "..%" PRIu64, opt,
		    s, min, max);
	return v;
}

static int parse_name(const char *opt, const char *s,
		      const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	die("%s: unknown value '%s'", opt, s);
}

static const struct option long_options[] = {
	{ "alloc",    required_argument, NULL, 'a' },
	{ "workload", required_argument, NULL, 'w' },
	{ "batch",    required_argument, NULL, 'b' },
	{ "size",     required_argument, NULL, 's' },
	{ "count",    required_argument, NULL, 'n' },
	{ "capacity", required_argument, NULL, 'c' },
	{ "quick",    no_argument,       NULL, 'q' },
	{ "json",     no_argument,       NULL, 'j' },
	{ "help",     no_argument,       NULL, 'h' },
	{ NULL, 0, NULL, 0 }
};

static void parse_one(struct options *o, int ch, const char *arg)
{
	switch (ch) {
	case 'a':
		o->alloc = parse_name("--alloc", arg, alloc_names, 3);
		break;
	case 'w':
		o->workload = parse_name("--workload", arg, workload_names, 3);
		break;
	case 'b':
		o->batch = parse_u64("--batch", arg, 1, 1ull << 30);
		break;
	case 's':
		o->size = parse_u64("--size", arg, 1, 65536);
		break;
	case 'n':
		o->count = parse_u64("--count", arg, 1, UINT64_MAX / 4);
		break;
	case 'c':
		o->capacity = (int)parse_u64("--capacity", arg, 0, 256);
		o->capacity_given = true;
		break;
	case 'q':
		o->quick = true;
		break;
	case 'j':
		o->json = true;
		break;
	case 'h':
		usage(stdout);
		exit(0);
	default:
		usage(stderr);
		exit(2);
	}
}

static uint64_t default_count(enum workload w)
{
	switch (w) {
	case WL_W1:
		return W1_DEFAULT_PAIRS;
	case WL_W2:
		return W2_DEFAULT_OPS;
	default:
		return W3_DEFAULT_OBJECTS;
	}
}

static void parse_options(struct options *o, int argc, char **argv)
{
	int ch;

	*o = (struct options){ .alloc = ALLOC_SHEAF, .workload = WL_W1,
			       .batch = W2_DEFAULT_BATCH, .size = 64,
			       .capacity = SHEAF_CAPACITY_DEFAULT };
	while ((ch = getopt_long(argc, argv, "", long_options, NULL)) != -1)
		parse_one(o, ch, optarg);
	if (optind < argc)
		die("unexpected argument '%s' (see --help)", argv[optind]);
	if (o->capacity_given && o->alloc != ALLOC_SHEAF)
		die("--capacity applies to --alloc sheaf only");
	if (!o->count)
		o->count = default_count(o->workload);
	if (o->quick)
		o->count = o->count / QUICK_DIVISOR ? o->count / QUICK_DIVISOR : 1;
}

/* ---- main -------------------------------------------------------------- */

static struct result run_workload(const struct options *o,
				  const struct contender *c)
{
	switch (o->workload) {
	case WL_W1:
		return run_w1(c, o->count);
	case WL_W2:
		return run_w2(c, (size_t)o->batch, o->count);
	default:
		return run_w3(c, o->count);
	}
}

int main(int argc, char **argv)
{
	struct options o;
	struct contender c;
	struct result r;
	struct sheaf_stats st = { 0 };

	parse_options(&o, argc, argv);
	contender_open(&c, &o);
	r = run_workload(&o, &c);
	if (uses_sheaf(&c))
		sheaf_prove_nothing_lost(&c, &st);
	if (o.json)
		print_json(&o, &c, &r, &st);
	else
		print_text(&o, &c, &r, &st);
	if (uses_sheaf(&c))
		sheaf_pool_destroy(c.pool);
	return 0;
}
