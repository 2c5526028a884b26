/*
 * bench.h - the pieces shared by sheafbench's source files (sheafbench.c:
 * options, contenders, output, main; inproc.c: the single-process workloads
 * w1, w2, w3; xproc.c: the workloads that fork processes, w3p and --procs N;
 * miss.c: w6; sizes.c: w8p, w8b; churn.c: w12; footprint.c: w13; server.c: w14; mpool.c: the mutex pool).
 *
 * The hot path (obj_alloc / obj_free) is static inline here so that every
 * workload loop gets its own copy per contender family, with no dispatch
 * inside the timed loops; the SPSC ring is in spsc.h.
 */
#ifndef SHEAF_BENCH_H
#define SHEAF_BENCH_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "client/sheaf.h"
#include "tests/bench/mpool.h"
#include "tests/bench/spsc.h"

#define W1_DEFAULT_PAIRS   100000000ull  /* 10^8 alloc+free pairs */
#define W2_DEFAULT_OPS     20000000ull   /* 2*10^7 timed operations */
#define W2_MIN_ROUNDS      3
#define W2_DEFAULT_BATCH   4096
#define W3_DEFAULT_OBJECTS 10000000ull   /* 10^7 objects */
#define W6_DEFAULT_SAMPLES 1000ull
#define W6_CAPACITY        256           /* "a cache with a large capacity" */
#define QUICK_DIVISOR      10
#define POOL_MIN_BYTES     (1ull << 30)  /* 1 GiB, sparse */
#define FIRST_BYTE_MARK    0x5a
#define ERRLEN             256
#define MAX_PROCS          64
#define MPOOL_MIN_OBJECTS  65536u

enum alloc_kind { ALLOC_SHEAF, ALLOC_SHEAF0, ALLOC_MALLOC, ALLOC_MPOOL,
		  ALLOC_NR };
enum workload { WL_W1, WL_W2, WL_W3, WL_W3P, WL_W6, WL_W8P, WL_W8B, WL_W10, WL_W12, WL_W13, WL_W14, WL_NR };
/* How the hot path allocates: one compiled copy of each loop per family. */
enum family { FAM_SHEAF, FAM_MALLOC, FAM_MPOOL };

struct options {
	enum alloc_kind alloc;
	enum workload workload;
	uint64_t batch;
	uint64_t size;
	uint64_t count;         /* 0: the workload's default */
	int capacity;           /* SHEAF_CAPACITY_DEFAULT unless given */
	bool capacity_given;
	const char *socket;     /* sheaf/sheaf0 through this sheafd; NULL: local */
	unsigned procs;         /* w1/w2 in N processes; 0: in this process */
	bool quick;
	bool owned;              /* --owned: SHEAF_CACHE_OWNED caches */
	bool sized;              /* --sized: w8p/w8b/w14 free with the size */
	bool json;
};

struct xgate;

struct contender {
	enum alloc_kind kind;
	size_t size;            /* requested object size */
	sheaf_pool_t *pool;     /* sheaf contenders only */
	sheaf_cache_t *cache;
	bool connected;         /* pool is sheafd's (sheaf_connect) */
	struct mpool *mp;       /* mutexpool only */
	struct xgate *gate;     /* --procs runs: wait here before timing */
};

struct result {
	const char *metric;     /* "ns_per_pair", "ns_per_op", "mobj_per_s", ... */
	const char *unit;       /* for the text line */
	double value;
	double seconds;         /* timed wall-clock seconds */
	uint64_t count;         /* pairs (w1), operations (w2), objects (w3),
				   samples (w6); per process for --procs */
	uint64_t rounds;        /* w2 only */
	unsigned procs;         /* --procs runs: the per-process figures */
	double per_proc[MAX_PROCS];
	bool latency;           /* w6: the percentiles below are set */
	double p50_us, p99_us, max_us;
	uint64_t non_miss;      /* w6: samples dropped, the barn was stocked */
	double cpu_value;       /* w1/w2: like value, from the process's CPU
				   time (all its threads: a local pool's
				   engine too); robust to a loaded machine's
				   time slicing, 0 when not measured */
	bool footprint;         /* w13: the fields below are set */
	double rss_burst_mib;   /* resident set after the burst */
	uint64_t cached_burst, cached_idle;  /* sheaf: cached-but-free bytes */
};

extern const char *const alloc_names[ALLOC_NR];
extern const char *const workload_names[WL_NR];

/* ---- sheafbench.c ------------------------------------------------------ */

void die(const char *fmt, ...)
	__attribute__((noreturn, format(printf, 1, 2), cold));
void die_alloc_failed(const struct contender *c)
	__attribute__((noreturn, cold));
void check_refused_frees(const struct contender *c, uint64_t refused);
void contender_open(struct contender *c, const struct options *o);
void contender_close(struct contender *c);
void sheaf_stats_or_die(const struct contender *c, struct sheaf_stats *st);
void sheaf_check_or_die(const struct contender *c, const char *when);
void stats_delta(struct sheaf_stats *after, const struct sheaf_stats *before);

/* ---- inproc.c ---------------------------------------------------------- */

void pin_self(int cpu);
int pick_cpus(int *cpu, int n);
struct result run_w1(const struct contender *c, uint64_t pairs);
struct result run_w2(const struct contender *c, size_t batch,
		     uint64_t target_ops);
struct result run_w3(const struct contender *c, uint64_t objects);

/* ---- xproc.c ----------------------------------------------------------- */

struct result run_w3p(const struct options *o, struct contender *c,
		      struct sheaf_stats *st);
struct result run_procs(const struct options *o, struct contender *c,
			struct sheaf_stats *st);
void xgate_wait(struct xgate *g);

/* ---- miss.c ------------------------------------------------------------ */

struct result run_w6(const struct contender *c, uint64_t samples,
		     struct sheaf_stats *st);

/* ---- sizes.c ----------------------------------------------------------- */

/* w8p (@batched false: pairs) and w8b (batches of @batch), @count pairs or
 * operations; sheaf: proves no object of a size class is left in use. */
/* The sized free a --sized run uses: "sheaf_free_sized", the preloaded
 * allocator's (by name), or "free" where it has none. */
const char *sized_free_name(const struct contender *c);
struct result run_w8(const struct contender *c, bool batched, bool sized, size_t batch,
		     uint64_t count);

/* The seeded sequence of sizes (8..1024) w8 and w12 use; sizes_at wraps. */
#define SIZES_N     65536u              /* a power of two: the index wraps */
extern uint16_t sizes[SIZES_N];
void sizes_init(void);
static inline uint16_t sizes_at(uint32_t k)
{
	return sizes[k & (SIZES_N - 1)];
}
/* Objects in use over the size classes the sequence reaches. */
uint64_t classes_in_use(const struct contender *c);
/* Dies unless the size classes have @before objects in use again, and
 * the pool checker passes (sheaf; nothing for the others); @when says
 * when, as "after every free". */
void classes_unchanged_or_die(const struct contender *c, uint64_t before, const char *when);
/* The wall clock in ns even under SHEAF_BENCH_CPUTIME (now_ns): for
 * workloads whose work runs on threads they start. */
uint64_t wall_ns(void);

/* ---- churn.c ----------------------------------------------------------- */

/* w12: threads one after another, each @n allocations of mixed sizes (16
 * live at most) and their frees, then its exit; us per thread. */
struct result run_w12(const struct contender *c, uint64_t n, bool quick);

/* ---- footprint.c ------------------------------------------------------- */

/* w13: @threads threads each keep a few objects of 4 classes after a
 * burst, then idle; MiB resident after the idle second. */
struct result run_w13(const struct contender *c, uint64_t threads);

/* ---- server.c ---------------------------------------------------------- */

/* w14: a server simulation, threads at once over one table of live objects,
 * each replaced after a while; @sized: frees name the size.  ns per op. */
struct result run_w14(const struct contender *c, bool sized, uint64_t count);

/* ---- large.c ----------------------------------------------------------- */

/* w10: rounds of @batch objects of @size bytes (every page written), about
 * @count objects; sheaf: proves none of the class is left in use. */
struct result run_w10(const struct contender *c, size_t batch, size_t size, uint64_t count);

/* ---- timing and compiler barriers -------------------------------------- */

/* CPU time of the whole process (every thread), ns. */
static inline uint64_t cpu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* SHEAF_BENCH_CPUTIME=1: the calling thread's CPU time instead of the
 * wall clock (one-thread rows on a loaded machine, where wall time counts
 * the other processes' slices too; not for rows that wait or use threads). */
static inline uint64_t now_ns(void)
{
	static int clk = -1;
	struct timespec ts;

	if (clk < 0) {
		const char *e = getenv("SHEAF_BENCH_CPUTIME");

		clk = e != NULL && e[0] == '1' ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
	}
	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Make @p visible to "unknown code", so allocation and store stay. */
static inline void escape(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

/* ---- the contenders' hot path ------------------------------------------
 * @f is a compile-time constant at every call site (the workload loops are
 * always inlined into one copy per family), so the timed loops carry no
 * contender dispatch.
 */

static inline enum family family_of(const struct contender *c)
{
	switch (c->kind) {
	case ALLOC_SHEAF:
	case ALLOC_SHEAF0:
		return FAM_SHEAF;
	case ALLOC_MPOOL:
		return FAM_MPOOL;
	default:
		return FAM_MALLOC;
	}
}

static inline bool uses_sheaf(const struct contender *c)
{
	return family_of(c) == FAM_SHEAF;
}

static inline __attribute__((always_inline))
void *obj_alloc(const struct contender *c, enum family f)
{
	unsigned char *p;

	if (f == FAM_SHEAF)
		p = sheaf_alloc(c->cache);
	else if (f == FAM_MPOOL)
		p = mpool_alloc(c->mp);
	else
		p = malloc(c->size);
	if (__builtin_expect(p == NULL, 0))
		die_alloc_failed(c);
	p[0] = FIRST_BYTE_MARK;
	escape(p);
	return p;
}

/* Returns 1 when the free was refused (sheaf and mutexpool), else 0. */
static inline __attribute__((always_inline))
unsigned obj_free(const struct contender *c, enum family f, void *p)
{
	if (f == FAM_SHEAF)
		return sheaf_free(c->cache, p) != 0;
	if (f == FAM_MPOOL)
		return mpool_free(c->mp, p) != 0;
	free(p);
	return 0;
}

/* The size classes' allocation of @size bytes (sheaf_malloc or malloc),
 * its first byte written; dies on NULL. */
static inline __attribute__((always_inline))
void *class_alloc(const struct contender *c, enum family f, size_t size)
{
	unsigned char *p = f == FAM_SHEAF ? sheaf_malloc(c->pool, size) : malloc(size);

	if (__builtin_expect(p == NULL, 0))
		die("%s: allocation of %zu bytes returned NULL (errno %d)",
		    alloc_names[c->kind], size, errno);
	p[0] = FIRST_BYTE_MARK;
	escape(p);
	return p;
}

/* The preloaded allocator's sized free, of one shape or the other, or
 * neither (sizes.c's sized_free_name finds it). */
extern void (*bench_peer_free2)(void *, size_t);
extern void (*bench_peer_sdallocx)(void *, size_t, int);

/* The size classes' free of @p (sheaf or malloc); @sized: with @size, the
 * size @p was asked for.  Returns 1 when sheaf refused it, else 0. */
static inline __attribute__((always_inline))
unsigned sized_free_call(const struct contender *c, enum family f, bool sized, void *p,
			 size_t size)
{
	if (f == FAM_SHEAF)
		return (sized ? sheaf_free_sized(c->pool, p, size) : sheaf_free_any(c->pool, p)) != 0;
	if (!sized)
		free(p);
	else if (bench_peer_sdallocx != NULL)
		bench_peer_sdallocx(p, size, 0);
	else if (bench_peer_free2 != NULL)
		bench_peer_free2(p, size);
	else
		free(p);
	return 0;
}

#endif
