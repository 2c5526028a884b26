/*
 * sheafbench - one allocator, one workload, one run (of one or more
 * processes).
 *
 * This file: the options, the contenders' setup, the post-run proof, the
 * output and main.  The workloads: inproc.c (w1, w2, w3), xproc.c (w3p,
 * --procs N), miss.c (w6), sizes.c (w8p, w8b); declared in bench.h.
 *
 * What it measures (docs/benchmarks.md; objects of --size
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
 *   w3p the same flow between two processes (xproc.c): producer and
 *       consumer are forked children, each connecting to sheafd on its own
 *       (or sharing the mutex pool made before the fork); the ring is a
 *       MAP_SHARED mapping made before the fork.  Figure: Mobj/s.
 *   w6  miss latency (miss.c): per sample, empty the barn, then time one
 *       allocation that must wait for the engine to stock it.  Figure: p50
 *       in microseconds (p99 and max are printed too).  N = samples
 *       (default 1000; --quick: 100).
 *   w8p, w8b  W8 mixed sizes (sizes.c): a fixed seeded sequence of sizes
 *       8..1024 through sheaf_malloc/sheaf_free_any (or malloc/free):
 *       w8p W1-shaped (ns/pair), w8b W2-shaped with --batch B (ns/op).
 *       --sized: each free names the size (sheaf_free_sized; the peer's
 *       sized free, found by name in the preloaded allocator).
 *   w10 W10 large objects (large.c): rounds of --batch B objects of --size
 *       bytes (up to 1 GiB), the first byte of every 4 KiB page written,
 *       then freed, through sheaf_malloc/sheaf_free_any (or malloc/free).
 *       Figure: ns per object.
 *   w12 W12 thread churn (churn.c): threads one after another, each
 *       --count N allocations of mixed sizes 8..1024 (16 live at most)
 *       and their frees, then its exit.  Figure: us per thread, create to
 *       join (default N 100; about 2*10^6 allocations, 500-20000 threads).
 *   w13 W13 footprint (footprint.c): --count T threads (default 16) each
 *       allocate a burst of 4096 objects of 32, 128, 512 and 1024 bytes,
 *       free all but the newest 256, and idle.  Figure: the process's
 *       resident set in MiB after an idle second (after the burst, and
 *       sheaf's cached-but-free bytes at both points, printed too).
 *   w14 W14 server simulation (server.c): 2 threads at once over a table of
 *       8192 live objects, each operation an allocation of 8..1024 bytes
 *       swapped into a random entry and the free of the object taken out
 *       (mostly another thread's); a thread exits after 50000 operations
 *       and another takes its place.  Figure: ns per operation (wall clock;
 *       N default 2*10^7).  --sized: frees name the size.
 *   --procs N  (w1, w2) W4 scaling: N forked processes, each connecting on
 *       its own, run the workload at the same time.  Figure: million
 *       operations per process per second (w1: an operation is an alloc+free
 *       pair), like will-it-scale's per_process_ops.
 *
 * Contenders (--alloc):
 *   sheaf     a sheaf cache; the sheaf capacity is the library default unless
 *             --capacity is given (w6: 256).  A local pool (1 simulated node),
 *             or with --socket PATH sheafd's pool (cache "sb-sheaf-SIZE-cCAP",
 *             created or opened).
 *   sheaf0    the same with sheaf capacity 0: every alloc and free takes a
 *             sheaf from the barn's ring and puts it back (after flushing
 *             the thread's sheaves): the cost of a ring exchange per
 *             operation, NOT the kernel's sheaves-disabled per-CPU slab.
 *   malloc    malloc/free of whatever allocator is loaded: glibc by default,
 *             or jemalloc, tcmalloc, mimalloc... through LD_PRELOAD.
 *   mutexpool the naive multi-process pool of mpool.c: one robust
 *             process-shared mutex over a free stack in a MAP_SHARED region.
 *
 * After the run the contender must show that no object was lost: for sheaf,
 * the cache's in_use is back where it started and sheaf_pool_check passes
 * (local pools: also after the thread returned its sheaves); for mutexpool,
 * every object is free again.  Any failure (an allocation returning NULL, a
 * refused free, a failed check, a child process failing) prints an error and
 * exits with status 1.
 *
 * Run it (normally through tests/bench/run.sh, i.e. `make bench`):
 *   build/tests/bench/sheafbench --alloc sheaf --workload w2 --batch 4096
 *   LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 \
 *       build/tests/bench/sheafbench --alloc malloc --workload w3 --json
 *   build/tests/bench/sheafbench --alloc sheaf --socket S --workload w3p
 *   build/tests/bench/sheafbench --alloc sheaf --socket S --workload w1 --procs 2
 * Options: --alloc sheaf|sheaf0|malloc|mutexpool  --workload w1|w2|w3|w3p|w6|w8p|w8b|w10|w12|w13|w14
 *          --batch B  --size BYTES  --count N  --capacity N  --socket PATH
 *          --procs N  --quick  --json  --owned  --help
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/bench/bench.h"

const char *const alloc_names[ALLOC_NR] = { "sheaf", "sheaf0", "malloc",
					    "mutexpool" };
const char *const workload_names[WL_NR] = { "w1", "w2", "w3", "w3p", "w6",
					       "w8p", "w8b", "w10", "w12", "w13", "w14" };

/* ---- errors ------------------------------------------------------------ */

void die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "sheafbench[%d]: error: ", (int)getpid());
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

void die_alloc_failed(const struct contender *c)
{
	die("%s: allocation of a %zu-byte object returned NULL (errno %d: %s)",
	    alloc_names[c->kind], c->size, errno, strerror(errno));
}

void check_refused_frees(const struct contender *c, uint64_t refused)
{
	if (refused)
		die("%s: %" PRIu64 " frees were refused",
		    alloc_names[c->kind], refused);
}

/* ---- contenders: setup ------------------------------------------------- */

static size_t pool_bytes_for(const struct options *o)
{
	uint64_t need = 0;

	if (o->workload == WL_W2)  /* the batch, twice over for slab slack */
		need = 4 * o->batch * o->size;
	if (o->workload == WL_W10) {  /* the batch in its class, and room to keep it */
		uint64_t cls = 1;

		while (cls < o->size)
			cls <<= 1;
		need = 4 * (o->batch + 4) * cls;
		while (need & (need - 1))
			need &= need - 1;
		need <<= 1;
	}
	return need > POOL_MIN_BYTES ? need : POOL_MIN_BYTES;
}

static int capacity_for(const struct options *o, enum alloc_kind kind)
{
	if (kind == ALLOC_SHEAF0)
		return 0;
	if (o->workload == WL_W6 && !o->capacity_given)
		return W6_CAPACITY;
	return o->capacity;
}

static void open_local_pool(struct contender *c, const struct options *o)
{
	struct sheaf_pool_config pcfg = { .size = pool_bytes_for(o), .nodes = 1 };
	char err[ERRLEN] = "";

	c->pool = sheaf_pool_create(&pcfg, err, sizeof(err));
	if (!c->pool)
		die("sheaf_pool_create: %s (errno %d: %s)", err, errno,
		    strerror(errno));
}

static void connect_pool(struct contender *c, const struct options *o)
{
	char err[ERRLEN] = "", name[64];

	snprintf(name, sizeof(name), "sheafbench-%s-%d",
		 workload_names[o->workload], (int)getpid());
	c->pool = sheaf_connect(o->socket, name, 0, err, sizeof(err));
	if (!c->pool)
		die("sheaf_connect(%s): %s (errno %d: %s)", o->socket, err,
		    errno, strerror(errno));
	c->connected = true;
}

/* sheafd's caches outlive us: create ours, or open it when an earlier run
 * (or the other process of this run) made it.  The name carries the size
 * and capacity, so an opened cache is the one asked for. */
static sheaf_cache_t *cache_create_or_open(struct contender *c, int capacity, bool owned)
{
	struct sheaf_cache_config ccfg = { .capacity = capacity,
					   .flags = owned ? SHEAF_CACHE_OWNED : 0 };
	sheaf_cache_t *cache;
	char name[48];

	if (capacity == SHEAF_CAPACITY_DEFAULT)
		snprintf(name, sizeof(name), "sb-sheaf-%zu-cdef%s", c->size,
			 owned ? "-own" : "");
	else
		snprintf(name, sizeof(name), "sb-sheaf-%zu-c%d%s", c->size,
			 capacity, owned ? "-own" : "");
	cache = sheaf_cache_create(c->pool, name, c->size, &ccfg);
	if (!cache && errno == EEXIST && c->connected)
		cache = sheaf_cache_open(c->pool, name);
	if (!cache)
		die("sheaf_cache_create/open('%s', size %zu, capacity %d): "
		    "errno %d: %s", name, c->size, capacity, errno,
		    strerror(errno));
	return cache;
}

static void contender_open_sheaf(struct contender *c, const struct options *o)
{
	int capacity = capacity_for(o, c->kind);

	if (o->socket)
		connect_pool(c, o);
	else
		open_local_pool(c, o);
	c->cache = cache_create_or_open(c, capacity, o->owned);
	if (capacity >= 0) {
		unsigned got = 0;

		if (sheaf_cache_get_capacity(c->cache, &got) != 0 || got != (unsigned)capacity)
			die("cache capacity is %u, asked for %d", got, capacity);
	}
}

static void contender_open_mpool(struct contender *c, const struct options *o)
{
	uint64_t n = MPOOL_MIN_OBJECTS;

	if (o->workload == WL_W2 && o->batch + 1 > n)
		n = o->batch + 1;
	if (n > UINT32_MAX)
		die("mutexpool: %" PRIu64 " objects are too many", n);
	c->mp = mpool_create(c->size, (uint32_t)n);
	if (!c->mp)
		die("mutexpool of %" PRIu64 " objects: %s", n, strerror(errno));
}

void contender_open(struct contender *c, const struct options *o)
{
	struct xgate *gate = c->gate;

	memset(c, 0, sizeof(*c));
	c->kind = o->alloc;
	c->size = o->size;
	c->gate = gate;
	if (uses_sheaf(c))
		contender_open_sheaf(c, o);
	else if (c->kind == ALLOC_MPOOL)
		contender_open_mpool(c, o);
}

void contender_close(struct contender *c)
{
	if (c->pool && c->connected)
		sheaf_disconnect(c->pool);
	else if (c->pool)
		sheaf_pool_destroy(c->pool);
	if (c->mp)
		mpool_destroy(c->mp);
	c->pool = NULL;
	c->cache = NULL;
	c->mp = NULL;
}

/* ---- the post-run proof ------------------------------------------------ */

void sheaf_check_or_die(const struct contender *c, const char *when)
{
	char err[ERRLEN] = "";
	int rc = sheaf_pool_check(c->pool, err, sizeof(err));

	if (rc)
		die("%s: sheaf_pool_check %s failed (%d: %s): %s",
		    alloc_names[c->kind], when, rc, strerror(-rc), err);
}

void sheaf_stats_or_die(const struct contender *c, struct sheaf_stats *st)
{
	int rc = sheaf_cache_stats(c->cache, -1, st);

	if (rc)
		die("sheaf_cache_stats: %d (%s)", rc, strerror(-rc));
}

/* @after's counters become the change since @before (occupancy stays). */
void stats_delta(struct sheaf_stats *after, const struct sheaf_stats *before)
{
	for (unsigned i = 0; i < after->nstat && i < SHEAF_STATS_MAX; i++)
		after->stat[i] -= before->stat[i];
}

/* Every object was freed (in_use is back at @in_use_before), and the
 * checker agrees, with sheaves held and after they went back.  Leaves the
 * final statistics in @st. */
static void sheaf_prove_nothing_lost(const struct contender *c,
				     struct sheaf_stats *st,
				     uint64_t in_use_before)
{
	sheaf_stats_or_die(c, st);
	if (st->in_use != in_use_before)
		die("%s: %" PRIu64 " objects in use after every free (%" PRIu64
		    " before the run)", alloc_names[c->kind], st->in_use,
		    in_use_before);
	sheaf_check_or_die(c, "with the thread's sheaves held");
	sheaf_thread_exit();
	sheaf_check_or_die(c, "after sheaf_thread_exit");
	sheaf_stats_or_die(c, st);
}

static void mpool_prove_nothing_lost(const struct contender *c)
{
	uint32_t n = mpool_free_count(c->mp);

	if (n != mpool_objects(c->mp))
		die("mutexpool: %u of %u objects free after every free", n,
		    mpool_objects(c->mp));
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

static void json_extras(const struct result *r)
{
	if (r->procs) {
		printf(",\"procs\":%u,\"per_proc\":[", r->procs);
		for (unsigned i = 0; i < r->procs; i++)
			printf("%s%.4f", i ? "," : "", r->per_proc[i]);
		printf("]");
	}
	if (r->cpu_value > 0)
		printf(",\"cpu_value\":%.4f", r->cpu_value);
	if (r->latency)
		printf(",\"p50_us\":%.3f,\"p99_us\":%.3f,\"max_us\":%.3f"
		       ",\"non_miss\":%" PRIu64, r->p50_us, r->p99_us,
		       r->max_us, r->non_miss);
	if (r->footprint)
		printf(",\"rss_burst_mib\":%.2f,\"cached_burst\":%" PRIu64
		       ",\"cached_idle\":%" PRIu64, r->rss_burst_mib, r->cached_burst,
		       r->cached_idle);
}

static void print_json(const struct options *o, const struct contender *c,
		       const struct result *r, const struct sheaf_stats *st)
{
	printf("{\"alloc\":\"%s\",\"workload\":\"%s\",\"size\":%" PRIu64,
	       alloc_names[o->alloc], workload_names[o->workload], o->size);
	if (o->sized)
		printf(",\"sized\":\"%s\"", sized_free_name(c));
	printf(",\"batch\":%" PRIu64 ",\"count\":%" PRIu64
	       ",\"rounds\":%" PRIu64, o->workload == WL_W2 || o->workload == WL_W8B ? o->batch : 0,
	       r->count, r->rounds);
	if (uses_sheaf(c))
		printf(",\"via\":\"%s\",\"capacity\":%u",
		       o->socket ? "sheafd" : "local", st->sheaf_capacity);
	json_extras(r);
	printf(",\"preload\":");
	json_string(c->kind == ALLOC_MALLOC ? preload_name() : "");
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
	if (c->kind == ALLOC_MALLOC)
		printf("(%s)", *preload_name() ? preload_name() : "glibc");
	printf(" %s size=%" PRIu64, workload_names[o->workload], o->size);
	if (o->sized)
		printf(" sized=%s", sized_free_name(c));
	if (o->workload == WL_W2 || o->workload == WL_W8B)
		printf(" batch=%" PRIu64 " rounds=%" PRIu64, o->batch,
		       r->rounds);
	if (uses_sheaf(c))
		printf(" capacity=%u via=%s", st->sheaf_capacity,
		       o->socket ? "sheafd" : "local");
	if (r->procs)
		printf(" procs=%u", r->procs);
	printf(" count=%" PRIu64 ": %.3f %s (%.3f s)", r->count, r->value,
	       r->unit, r->seconds);
	if (r->latency)
		printf(" p50 %.1f us, p99 %.1f us, max %.1f us, %" PRIu64
		       " non-miss samples dropped", r->p50_us, r->p99_us,
		       r->max_us, r->non_miss);
	for (unsigned i = 0; i < r->procs; i++)
		printf("%s%.3f", i ? " " : " per process: ", r->per_proc[i]);
	if (r->footprint)
		printf(" (after the burst %.2f MiB; cached but free: %" PRIu64
		       " bytes after the burst, %" PRIu64 " after the idle second)",
		       r->rss_burst_mib, r->cached_burst, r->cached_idle);
	printf("\n");
}

/* ---- options ----------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sheafbench [--alloc sheaf|sheaf0|malloc|mutexpool]\n"
		"                  [--workload w1|w2|w3|w3p|w6|w8p|w8b|w10|w12|w13|w14] [--batch B]\n"
		"                  [--size BYTES] [--count N] [--capacity N]\n"
		"                  [--socket PATH] [--procs N] [--quick] [--json]\n"
		"                  [--owned] [--sized]\n"
		"  w1: alloc+free pairs (N default 10^8), ns/pair\n"
		"  w2: batches of B (default %d) allocs then frees, N timed ops\n"
		"      (default 2*10^7, at least %d rounds), ns/op\n"
		"  w3: producer->SPSC ring->consumer frees, N objects (default 10^7), Mobj/s\n"
		"  w3p: w3 between two processes (sheaf/sheaf0 with --socket, or mutexpool)\n"
		"  w6: miss latency, N samples (default %llu), p50/p99/max us (sheaf)\n"
		"  w8p/w8b: sizes 8..1024 (fixed seed) via sheaf_malloc/sheaf_free_any\n"
		"      or malloc/free: w1-shaped (ns/pair), w2-shaped batches of B (ns/op)\n"
		"  w13: footprint, N threads (default 16) each keep 256 of a burst of\n"
		"      4096 objects of 4 sizes, then idle: MiB resident after 1 s idle\n"
		"  w14: server simulation, 2 threads at once over a table of 8192 objects\n"
		"      (alloc 8..1024, swap into a random entry, free the one taken out),\n"
		"      each thread replaced after 50000, N ops (default 2*10^7), ns/op\n"
		"  --sized: w8p/w8b/w14 free with the size (sheaf_free_sized; the preloaded\n"
		"      malloc's sdallocx, tc_free_sized, mi_free_size or free_sized)\n"
		"  --socket: sheaf/sheaf0 use the pool of the sheafd at PATH\n"
		"  --procs: w1/w2 in N processes at once (max %d), Mops/proc/s\n"
		"  --capacity: sheaf capacity 0..256 (--alloc sheaf only)\n"
		"  --quick: divide N by %d\n"
		"  --owned: the cache is SHEAF_CACHE_OWNED (sheaf/sheaf0)\n"
		"  malloc uses whatever allocator is LD_PRELOADed (glibc if none)\n",
		W2_DEFAULT_BATCH, W2_MIN_ROUNDS, W6_DEFAULT_SAMPLES, MAX_PROCS,
		QUICK_DIVISOR);
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
	{ "socket",   required_argument, NULL, 'S' },
	{ "procs",    required_argument, NULL, 'p' },
	{ "quick",    no_argument,       NULL, 'q' },
	{ "owned",    no_argument,       NULL, 'o' },
	{ "sized",    no_argument,       NULL, 'z' },
	{ "json",     no_argument,       NULL, 'j' },
	{ "help",     no_argument,       NULL, 'h' },
	{ NULL, 0, NULL, 0 }
};

static void parse_one(struct options *o, int ch, const char *arg)
{
	switch (ch) {
	case 'a':
		o->alloc = parse_name("--alloc", arg, alloc_names, ALLOC_NR);
		break;
	case 'w':
		o->workload = parse_name("--workload", arg, workload_names,
					 WL_NR);
		break;
	case 'b':
		o->batch = parse_u64("--batch", arg, 1, 1ull << 30);
		break;
	case 's':
		o->size = parse_u64("--size", arg, 1, 1u << 30);
		break;
	case 'n':
		o->count = parse_u64("--count", arg, 1, UINT64_MAX / 4);
		break;
	case 'c':
		o->capacity = (int)parse_u64("--capacity", arg, 0, 256);
		o->capacity_given = true;
		break;
	case 'S':
		o->socket = arg;
		break;
	case 'p':
		o->procs = (unsigned)parse_u64("--procs", arg, 1, MAX_PROCS);
		break;
	case 'q':
		o->quick = true;
		break;
	case 'o':
		o->owned = true;
		break;
	case 'z':
		o->sized = true;
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
	case WL_W8P:
		return W1_DEFAULT_PAIRS;
	case WL_W2:
	case WL_W8B:
		return W2_DEFAULT_OPS;
	case WL_W6:
		return W6_DEFAULT_SAMPLES;
	case WL_W10:
		return 20000;
	case WL_W12:
		return 100;
	case WL_W13:
		return 16;
	case WL_W14:
		return 20000000;
	default:
		return W3_DEFAULT_OBJECTS;
	}
}

/* Combinations that make no sense are refused before anything runs. */
static void check_options(const struct options *o)
{
	bool sheaf = o->alloc == ALLOC_SHEAF || o->alloc == ALLOC_SHEAF0;

	if (o->capacity_given && o->alloc != ALLOC_SHEAF)
		die("--capacity applies to --alloc sheaf only");
	if (o->socket && !sheaf)
		die("--socket applies to --alloc sheaf and sheaf0 only");
	if (o->procs && o->workload != WL_W1 && o->workload != WL_W2)
		die("--procs applies to --workload w1 and w2 only");
	if (o->workload == WL_W3P && !(o->socket && sheaf) &&
	    o->alloc != ALLOC_MPOOL)
		die("w3p needs --alloc sheaf or sheaf0 with --socket, or "
		    "--alloc mutexpool (pointers must mean the same in both "
		    "processes)");
	if (o->workload == WL_W6 && o->alloc != ALLOC_SHEAF)
		die("w6 needs --alloc sheaf (it measures the barn's refill)");
	if ((o->workload == WL_W8P || o->workload == WL_W8B) &&
	    o->alloc != ALLOC_SHEAF && o->alloc != ALLOC_MALLOC)
		die("w8p and w8b need --alloc sheaf or malloc (size classes)");
	if (o->sized && o->workload != WL_W8P && o->workload != WL_W8B && o->workload != WL_W14)
		die("--sized applies to --workload w8p, w8b and w14 only");
	if ((o->workload == WL_W12 || o->workload == WL_W13 || o->workload == WL_W14) &&
	    o->alloc != ALLOC_SHEAF && o->alloc != ALLOC_MALLOC)
		die("w12, w13 and w14 need --alloc sheaf or malloc (size classes)");
	if (o->workload == WL_W13 && o->count > 256)
		die("w13: --count is the threads, 1..256");
	if (o->workload == WL_W10 && o->alloc != ALLOC_SHEAF && o->alloc != ALLOC_MALLOC)
		die("w10 needs --alloc sheaf or malloc (size classes)");
	if (o->workload != WL_W10 && o->size > 65536)
		die("--size above 65536 applies to --workload w10 only");
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
	check_options(o);
	if (!o->count)
		o->count = default_count(o->workload);
	/* w12's count is each thread's work, w13's the threads: --quick
	 * runs w12 with fewer threads, w13 as it is */
	if (o->quick && o->workload != WL_W12 && o->workload != WL_W13)
		o->count = o->count / QUICK_DIVISOR ? o->count / QUICK_DIVISOR : 1;
}

/* ---- main -------------------------------------------------------------- */

static struct result run_workload(const struct options *o,
				  const struct contender *c,
				  struct sheaf_stats *st)
{
	switch (o->workload) {
	case WL_W1:
		return run_w1(c, o->count);
	case WL_W2:
		return run_w2(c, (size_t)o->batch, o->count);
	case WL_W6:
		return run_w6(c, o->count, st);
	case WL_W8P:
	case WL_W8B:
		return run_w8(c, o->workload == WL_W8B, o->sized, (size_t)o->batch, o->count);
	case WL_W10:
		return run_w10(c, (size_t)o->batch, (size_t)o->size, o->count);
	case WL_W12:
		return run_w12(c, o->count, o->quick);
	case WL_W13:
		return run_w13(c, o->count);
	case WL_W14:
		return run_w14(c, o->sized, o->count);
	default:
		return run_w3(c, o->count);
	}
}

/* One process: open, run, prove that nothing was lost. */
static struct result run_here(const struct options *o, struct contender *c,
			      struct sheaf_stats *st)
{
	struct sheaf_stats before = { 0 };
	struct result r;

	contender_open(c, o);
	if (uses_sheaf(c))
		sheaf_stats_or_die(c, &before);
	r = run_workload(o, c, st);
	if (uses_sheaf(c)) {
		sheaf_prove_nothing_lost(c, st, before.in_use);
		if (c->connected)       /* sheafd's cache: report this run only */
			stats_delta(st, &before);
	} else if (c->kind == ALLOC_MPOOL) {
		mpool_prove_nothing_lost(c);
	}
	return r;
}

int main(int argc, char **argv)
{
	struct options o;
	struct contender c = { 0 };
	struct result r;
	struct sheaf_stats st = { 0 };

	parse_options(&o, argc, argv);
	if (o.workload == WL_W3P)
		r = run_w3p(&o, &c, &st);
	else if (o.procs)
		r = run_procs(&o, &c, &st);
	else
		r = run_here(&o, &c, &st);
	c.kind = o.alloc;               /* xproc runs leave c unopened */
	if (o.json)
		print_json(&o, &c, &r, &st);
	else
		print_text(&o, &c, &r, &st);
	contender_close(&c);
	return 0;
}
