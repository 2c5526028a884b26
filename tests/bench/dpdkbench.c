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
 * kind to sheaf's sheaves and barn.  The two lcores are the first two of the
 * EAL's -l list (pinned by the EAL).  Afterwards every object must be back
 * in the pool (rte_mempool_avail_count, caches included).
 * Figure: million objects per second, the same as sheafbench's w3.
 *
 * Build: only when pkg-config finds libdpdk (the Makefile's DPDK_BENCH).
 * Run (hugepages and a hugetlbfs mount needed; normally through run.sh):
 *   build/tests/bench/dpdkbench -l 0-1 --no-pci --in-memory -m 256 \
 *       --file-prefix sheafbench -- --count 10000000 --json
 * Options after the EAL's "--": --count N (default 10^7)  --size BYTES (64)
 *   --cache N (256)  --pool N (16383)  --handoff rte_ring|spsc (rte_ring)
 *   --quick (count / 10)  --json  --help
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
#define DEFAULT_POOL       16383         /* 2^n - 1: the mempool's best size */
#define HANDOFF_SLOTS      RING_SLOTS    /* as sheafbench's SPSC ring */
#define QUICK_DIVISOR      10
#define FIRST_BYTE_MARK    0x5a

enum handoff { HANDOFF_RTE_RING, HANDOFF_SPSC };
static const char *const handoff_names[] = { "rte_ring", "spsc" };

struct options {
	uint64_t count;
	unsigned size;
	unsigned cache;
	unsigned pool;
	enum handoff handoff;
	bool quick;
	bool json;
};

struct flow {
	struct rte_mempool *mp;
	struct rte_ring *ring;          /* --handoff rte_ring */
	struct spsc_ring *spsc;         /* --handoff spsc */
	enum handoff handoff;
	uint64_t objects;
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
	if (f->handoff == HANDOFF_SPSC)
		produce_spsc(f);
	else
		produce_rte_ring(f);
}

static void consume(struct flow *f)
{
	if (f->handoff == HANDOFF_SPSC)
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

static void setup(struct flow *f, const struct options *o)
{
	f->mp = rte_mempool_create("sb_pool", o->pool, o->size, o->cache, 0,
				   NULL, NULL, NULL, NULL, (int)rte_socket_id(),
				   0);
	if (!f->mp)
		die("rte_mempool_create(%u objects of %u bytes, cache %u): %s",
		    o->pool, o->size, o->cache, rte_strerror(rte_errno));
	f->handoff = o->handoff;
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
		"                 [--quick] [--json]\n"
		"  W3 through rte_mempool (per-lcore cache) and an SP/SC ring\n"
		"  between the first two lcores; Mobj/s\n");
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
		o->pool = (unsigned)parse_u64("--pool", arg, 2 * HANDOFF_SLOTS,
					      1u << 24);
		break;
	case 'H':
		o->handoff = parse_handoff(arg);
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
			       .cache = DEFAULT_CACHE, .pool = DEFAULT_POOL };
	optind = 1;
	while ((ch = getopt_long(argc, argv, "", long_options, NULL)) != -1)
		parse_one(o, ch, optarg);
	if (optind < argc)
		die("unexpected argument '%s'", argv[optind]);
	if (o->quick)
		o->count = o->count / QUICK_DIVISOR ? o->count / QUICK_DIVISOR : 1;
}

static void print_result(const struct options *o, const struct flow *f)
{
	double seconds = (double)(f->t_end - f->t_start) / 1e9;
	double mobj = (double)o->count / seconds / 1e6;

	if (!o->json) {
		printf("dpdk w3 (rte_mempool cache %u, hand-off %s, lcores %u->%u)"
		       " size=%u count=%" PRIu64 ": %.3f Mobj/s (%.3f s)\n",
		       o->cache, handoff_names[o->handoff], rte_get_main_lcore(),
		       worker_lcore(), o->size, o->count, mobj, seconds);
		return;
	}
	printf("{\"alloc\":\"dpdk\",\"workload\":\"w3\",\"size\":%u,"
	       "\"count\":%" PRIu64 ",\"cache_size\":%u,\"pool_objects\":%u,"
	       "\"handoff\":\"%s\",\"handoff_slots\":%d,\"lcores\":[%u,%u],"
	       "\"metric\":\"mobj_per_s\",\"value\":%.4f,\"seconds\":%.4f}\n",
	       o->size, o->count, o->cache, o->pool,
	       handoff_names[o->handoff], HANDOFF_SLOTS,
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
