/*
 * dpdkbench - the DPDK peer of sheafbench: W3 one-way flow through an
 * rte_mempool with its per-lcore cache, cross-lcore in one process.
 *
 * The main lcore (producer) takes an object with rte_mempool_get, writes its
 * first byte and hands the pointer over a single-producer single-consumer
 * ring; a worker lcore (consumer) takes it off and gives it back with
 * rte_mempool_put.  The hand-off ring (--handoff):
 *   rte_ring  an rte_ring with RING_F_SP_ENQ | RING_F_SC_DEQ, 1024 slots, one
 *             object per enqueue/dequeue (the default);
 *   spsc      sheafbench's own SPSC ring (spsc.h), the one every other W3
 *             contender uses, so that only the allocator differs.
 * The pool
 * holds --pool objects of --size bytes with a per-lcore cache of --cache
 * objects (rte_mempool_create), so that gets and puts go through the
 * lcores' caches and the pool's common ring in bulk: the closest peer in
 * kind to sheaf's sheaves and barn.
 *
 * Configured fairly: objects packed as sheaf packs them
 * (RTE_MEMPOOL_F_NO_SPREAD | RTE_MEMPOOL_F_NO_CACHE_ALIGN: no padding to
 * spread objects over memory channels, no rounding up to a cache line;
 * --spread gives DPDK's default layout back), and a pool sized like the
 * flow's working set (the hand-off ring plus both lcores' caches at their
 * flush threshold, rounded up to 2^n - 1: 2047 for the defaults) rather
 * than a large one that cycles the common ring FIFO through cold memory.
 * --bulk N gets and puts N objects per call (rte_mempool_get_bulk /
 * put_bulk: the producer writes and hands over each of the N, the
 * consumer gathers N before one put): DPDK's usual burst style.  The two lcores are the first two of the
 * EAL's -l list (pinned by the EAL).  Afterwards every object must be back
 * in the pool (rte_mempool_avail_count, caches included).
 * Figure: million objects per second, the same as sheafbench's w3.
 *
 * Build: only when pkg-config finds libdpdk (the Makefile's DPDK_BENCH).
 * Run (hugepages and a hugetlbfs mount needed; normally through run.sh):
 *   build/tests/bench/dpdkbench -l 0-1 --no-pci --in-memory -m 64 \
 *       --file-prefix sheafbench -- --count 10000000 --json
 * Options after the EAL's "--": --count N (default 10^7)  --size BYTES (64)
 *   --cache N (256)  --pool N (working set, above)  --handoff rte_ring|spsc
 *   (rte_ring)  --bulk N (1)  --spread  --quick (count / 10)  --json  --help
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "tests/bench/spsc.h"

#define DEFAULT_OBJECTS    10000000ull   /* 10^7, as sheafbench's w3 */
#define DEFAULT_CACHE      256
#define MAX_BULK           512           /* --bulk: objects per get/put */
#define HANDOFF_SLOTS      RING_SLOTS    /* as sheafbench's SPSC ring */
#define QUICK_DIVISOR      10
#define FIRST_BYTE_MARK    0x5a

enum handoff { HANDOFF_RTE_RING, HANDOFF_SPSC };
static const char *const handoff_names[] = { "rte_ring", "spsc" };

struct options {
	uint64_t count;
	unsigned size;
	unsigned cache;
	unsigned pool;                  /* 0: the working set (pool_default) */
	unsigned bulk;                  /* objects per get/put */
	enum handoff handoff;
	bool spread;                    /* DPDK's default layout, not packed */
	bool quick;
	bool json;
};

struct flow {
	struct rte_mempool *mp;
	struct rte_ring *ring;          /* --handoff rte_ring */
	struct spsc_ring *spsc;         /* --handoff spsc */
	enum handoff handoff;
	unsigned bulk;
	uint64_t objects;               /* a multiple of bulk */
	_Atomic int ready;
	_Atomic int go;
	uint64_t t_start;       /* set by the producer */
	uint64_t t_end;         /* set by the consumer */
};

static void die(const char *fmt, ...)
	__attribute__((noreturn, format(printf, 1, 2), cold));

static void die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("dpdkbench: error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void escape(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

/* ---- the flow ---------------------------------------------------------- */

static inline __attribute__((always_inline)) void *get_object(struct flow *f)
{
	unsigned spins = 0;
	unsigned char *p;
	void *obj;

	while (rte_mempool_get(f->mp, &obj) != 0)
		spin_wait(&spins);      /* pool empty: the consumer is behind */
	p = obj;
	p[0] = FIRST_BYTE_MARK;
	escape(p);
	return obj;
}

/* --bulk: @n objects at once, each with its first byte written. */
static inline void get_objects(struct flow *f, void **objs, unsigned n)
{
	unsigned spins = 0;

	while (rte_mempool_get_bulk(f->mp, objs, n) != 0)
		spin_wait(&spins);      /* pool empty: the consumer is behind */
	for (unsigned i = 0; i < n; i++) {
		unsigned char *p = objs[i];

		p[0] = FIRST_BYTE_MARK;
		escape(p);
	}
}

static void produce_bulk(struct flow *f)
{
	void *objs[MAX_BULK];
	uint64_t head = 0, tail_seen = 0;

	for (uint64_t i = 0; i < f->objects; i += f->bulk) {
		get_objects(f, objs, f->bulk);
		for (unsigned k = 0; k < f->bulk; k++) {
			unsigned spins = 0;

			if (f->handoff == HANDOFF_SPSC)
				ring_push(f->spsc, &head, &tail_seen, objs[k]);
			else
				while (rte_ring_sp_enqueue(f->ring, objs[k]) != 0)
					spin_wait(&spins);
		}
	}
}

static void consume_bulk(struct flow *f)
{
	void *objs[MAX_BULK];
	uint64_t tail = 0, head_seen = 0;

	for (uint64_t i = 0; i < f->objects; i += f->bulk) {
		for (unsigned k = 0; k < f->bulk; k++) {
			unsigned spins = 0;

			if (f->handoff == HANDOFF_SPSC)
				objs[k] = ring_pop(f->spsc, &tail, &head_seen);
			else
				while (rte_ring_sc_dequeue(f->ring, &objs[k]) != 0)
					spin_wait(&spins);
		}
		rte_mempool_put_bulk(f->mp, objs, f->bulk);
	}
}

static void produce_rte_ring(struct flow *f)
{
	for (uint64_t i = 0; i < f->objects; i++) {
		void *obj = get_object(f);
		unsigned spins = 0;

		while (rte_ring_sp_enqueue(f->ring, obj) != 0)
			spin_wait(&spins);
	}
}

static void consume_rte_ring(struct flow *f)
{
	for (uint64_t i = 0; i < f->objects; i++) {
		unsigned spins = 0;
		void *obj;

		while (rte_ring_sc_dequeue(f->ring, &obj) != 0)
			spin_wait(&spins);
		rte_mempool_put(f->mp, obj);
	}
}

static void produce_spsc(struct flow *f)
{
	uint64_t head = 0, tail_seen = 0;

	for (uint64_t i = 0; i < f->objects; i++)
		ring_push(f->spsc, &head, &tail_seen, get_object(f));
}

static void consume_spsc(struct flow *f)
{
	uint64_t tail = 0, head_seen = 0;

	for (uint64_t i = 0; i < f->objects; i++)
		rte_mempool_put(f->mp, ring_pop(f->spsc, &tail, &head_seen));
}

static void produce(struct flow *f)
{
	if (f->bulk > 1)
		produce_bulk(f);
	else if (f->handoff == HANDOFF_SPSC)
		produce_spsc(f);
	else
		produce_rte_ring(f);
}

static void consume(struct flow *f)
{
	if (f->bulk > 1)
		consume_bulk(f);
	else if (f->handoff == HANDOFF_SPSC)
		consume_spsc(f);
	else
		consume_rte_ring(f);
}

static void wait_for_go(struct flow *f)
{
	unsigned spins = 0;

	while (!atomic_load_explicit(&f->go, memory_order_acquire))
		spin_wait(&spins);
}

static int consumer_main(void *arg)
{
	struct flow *f = arg;

	atomic_store_explicit(&f->ready, 1, memory_order_release);
	wait_for_go(f);
	consume(f);
	f->t_end = now_ns();
	return 0;
}

static unsigned worker_lcore(void)
{
	unsigned lcore = rte_get_next_lcore(-1, 1, 0);

	if (lcore >= RTE_MAX_LCORE)
		die("need two lcores (EAL -l with two CPUs), have %u",
		    rte_lcore_count());
	return lcore;
}

static void run_flow(struct flow *f)
{
	unsigned worker = worker_lcore(), spins = 0;
	int rc;

	rc = rte_eal_remote_launch(consumer_main, f, worker);
	if (rc)
		die("rte_eal_remote_launch: %d", rc);
	while (!atomic_load_explicit(&f->ready, memory_order_acquire))
		spin_wait(&spins);
	f->t_start = now_ns();
	atomic_store_explicit(&f->go, 1, memory_order_release);
	produce(f);
	rc = rte_eal_wait_lcore(worker);
	if (rc)
		die("consumer lcore returned %d", rc);
}

/*
 * The flow's working set: what the hand-off ring holds, what each lcore's
 * cache holds at most before it flushes (1.5 x its size, DPDK's flush
 * threshold), and a bulk in each lcore's hands; rounded up to 2^n - 1
 * (the mempool's best size: its ring holds 2^n - 1).
 */
static unsigned pool_default(const struct options *o)
{
	uint64_t need = (uint64_t)HANDOFF_SLOTS + 2 * ((uint64_t)o->cache * 3 / 2) +
			2 * (uint64_t)o->bulk, n = 1;

	while (n - 1 < need)
		n <<= 1;
	return (unsigned)(n - 1);
}

static void setup(struct flow *f, const struct options *o)
{
	unsigned flags = o->spread ? 0 :
		RTE_MEMPOOL_F_NO_SPREAD | RTE_MEMPOOL_F_NO_CACHE_ALIGN;

	f->mp = rte_mempool_create("sb_pool", o->pool, o->size, o->cache, 0,
				   NULL, NULL, NULL, NULL, (int)rte_socket_id(),
				   flags);
	if (!f->mp)
		die("rte_mempool_create(%u objects of %u bytes, cache %u, flags %#x): %s",
		    o->pool, o->size, o->cache, flags, rte_strerror(rte_errno));
	f->handoff = o->handoff;
	f->bulk = o->bulk;
	f->objects = o->count;
	if (o->handoff == HANDOFF_SPSC) {
		f->spsc = rte_zmalloc("sb_spsc", sizeof(*f->spsc), CACHELINE);
		if (!f->spsc)
			die("rte_zmalloc of the SPSC ring failed");
		return;
	}
	f->ring = rte_ring_create("sb_handoff", HANDOFF_SLOTS,
				  (int)rte_socket_id(),
				  RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (!f->ring)
		die("rte_ring_create: %s", rte_strerror(rte_errno));
}

/* Every object is back in the pool (the lcores' caches included). */
static void prove_nothing_lost(const struct flow *f, const struct options *o)
{
	unsigned avail = rte_mempool_avail_count(f->mp);

	if (avail != o->pool)
		die("%u of %u objects back in the pool after the run", avail,
		    o->pool);
}

/* ---- options and output ------------------------------------------------ */

static void usage(FILE *out)
{
	fprintf(out,
		"usage: dpdkbench [EAL options] -- [--count N] [--size BYTES]\n"
		"                 [--cache N] [--pool N] [--handoff rte_ring|spsc]\n"
		"                 [--bulk N] [--spread] [--quick] [--json]\n"
		"  W3 through rte_mempool (per-lcore cache) and an SP/SC ring\n"
		"  between the first two lcores; Mobj/s\n"
		"  objects packed (NO_SPREAD | NO_CACHE_ALIGN) unless --spread;\n"
		"  --pool default: the working set (ring + both caches), 2^n - 1;\n"
		"  --bulk N: get_bulk/put_bulk of N objects (default 1: single)\n");
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

static enum handoff parse_handoff(const char *s)
{
	for (unsigned i = 0; i < sizeof(handoff_names) / sizeof(*handoff_names); i++)
		if (strcmp(s, handoff_names[i]) == 0)
			return (enum handoff)i;
	die("--handoff: unknown value '%s' (rte_ring or spsc)", s);
}

static const struct option long_options[] = {
	{ "count", required_argument, NULL, 'n' },
	{ "size",  required_argument, NULL, 's' },
	{ "cache", required_argument, NULL, 'c' },
	{ "pool",  required_argument, NULL, 'p' },
	{ "handoff", required_argument, NULL, 'H' },
	{ "bulk",  required_argument, NULL, 'b' },
	{ "spread", no_argument,      NULL, 'S' },
	{ "quick", no_argument,       NULL, 'q' },
	{ "json",  no_argument,       NULL, 'j' },
	{ "help",  no_argument,       NULL, 'h' },
	{ NULL, 0, NULL, 0 }
};

static void parse_one(struct options *o, int ch, const char *arg)
{
	switch (ch) {
	case 'n':
		o->count = parse_u64("--count", arg, 1, UINT64_MAX / 4);
		break;
	case 's':
		o->size = (unsigned)parse_u64("--size", arg, 1, 65536);
		break;
	case 'c':
		o->cache = (unsigned)parse_u64("--cache", arg, 0,
					       RTE_MEMPOOL_CACHE_MAX_SIZE);
		break;
	case 'p':
		o->pool = (unsigned)parse_u64("--pool", arg, HANDOFF_SLOTS + 2,
					      1u << 24);
		break;
	case 'H':
		o->handoff = parse_handoff(arg);
		break;
	case 'b':
		o->bulk = (unsigned)parse_u64("--bulk", arg, 1, MAX_BULK);
		break;
	case 'S':
		o->spread = true;
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

/* The arguments after the EAL's (argv[0] is the program name again). */
static void parse_options(struct options *o, int argc, char **argv)
{
	int ch;

	*o = (struct options){ .count = DEFAULT_OBJECTS, .size = 64,
			       .cache = DEFAULT_CACHE, .bulk = 1 };
	optind = 1;
	while ((ch = getopt_long(argc, argv, "", long_options, NULL)) != -1)
		parse_one(o, ch, optarg);
	if (optind < argc)
		die("unexpected argument '%s'", argv[optind]);
	if (o->quick)
		o->count = o->count / QUICK_DIVISOR ? o->count / QUICK_DIVISOR : 1;
	/* Whole bulks only (at least one). */
	o->count = o->count < o->bulk ? o->bulk : o->count - o->count % o->bulk;
	if (o->pool == 0)
		o->pool = pool_default(o);
	if (o->pool < HANDOFF_SLOTS + 2 * o->bulk)
		die("--pool %u: below the hand-off ring (%d) and two bulks", o->pool,
		    HANDOFF_SLOTS);
}

static void print_result(const struct options *o, const struct flow *f)
{
	double seconds = (double)(f->t_end - f->t_start) / 1e9;
	double mobj = (double)o->count / seconds / 1e6;

	if (!o->json) {
		printf("dpdk w3 (rte_mempool %u objects %s, cache %u, bulk %u, "
		       "hand-off %s, lcores %u->%u)"
		       " size=%u count=%" PRIu64 ": %.3f Mobj/s (%.3f s)\n",
		       o->pool, o->spread ? "spread" : "packed", o->cache, o->bulk,
		       handoff_names[o->handoff], rte_get_main_lcore(),
		       worker_lcore(), o->size, o->count, mobj, seconds);
		return;
	}
	printf("{\"alloc\":\"dpdk\",\"workload\":\"w3\",\"size\":%u,"
	       "\"count\":%" PRIu64 ",\"cache_size\":%u,\"pool_objects\":%u,"
	       "\"bulk\":%u,\"packed\":%s,"
	       "\"handoff\":\"%s\",\"handoff_slots\":%d,\"lcores\":[%u,%u],"
	       "\"metric\":\"mobj_per_s\",\"value\":%.4f,\"seconds\":%.4f}\n",
	       o->size, o->count, o->cache, o->pool, o->bulk,
	       o->spread ? "false" : "true", handoff_names[o->handoff], HANDOFF_SLOTS,
	       rte_get_main_lcore(), worker_lcore(), mobj, seconds);
}

int main(int argc, char **argv)
{
	struct options o;
	struct flow f = { 0 };
	int used;

	used = rte_eal_init(argc, argv);
	if (used < 0)
		die("rte_eal_init: %s", rte_strerror(rte_errno));
	parse_options(&o, argc - used, argv + used);
	setup(&f, &o);
	run_flow(&f);
	prove_nothing_lost(&f, &o);
	print_result(&o, &f);
	rte_ring_free(f.ring);          /* both accept NULL */
	rte_free(f.spsc);
	rte_mempool_free(f.mp);
	rte_eal_cleanup();
	return 0;
}
