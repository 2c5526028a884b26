/*
 * w7dpdk - the DPDK peer of W7 (w7.h): rte_mempool + rte_ring
 * between a primary and a secondary process.  Started twice by w7bench
 * (--peer dpdk or dpdk_b32), never by hand:
 *   primary   (--proc-type=primary, -l <producer CPU>, --role producer)
 *             creates one mempool per message size (8191 objects, packed:
 *             RTE_MEMPOOL_F_NO_SPREAD | RTE_MEMPOOL_F_NO_CACHE_ALIGN, a
 *             256-object per-lcore cache) and two SP/SC rings of 1024 slots
 *             (to the consumer, and back for ping-pong), says so in the
 *             shared block (primary_up), then produces: rte_mempool_get,
 *             write the message whole, rte_ring_enqueue.
 *   secondary (--proc-type=secondary, same --file-prefix, -l <consumer
 *             CPU>, --role consumer) looks them up and consumes:
 *             rte_ring_dequeue, read whole, rte_mempool_put.
 * The large run (w7.h; w7bench --large): per message size a mempool of
 * depth + 3 caches of objects (the producer stays within depth of the
 * consumer, each lcore cache holds up to 1.5 caches), a cache of a quarter
 * of the depth (at most 256), and RTE_MEMPOOL_F_NO_IOVA_CONTIG too (an
 * object may span hugepages: nothing here does DMA).
 * The batch (1, or 32 for dpdk_b32: rte_mempool_get_bulk /
 * rte_ring_enqueue_burst / rte_ring_dequeue_burst / rte_mempool_put_bulk)
 * comes from the shared block.  Options after the EAL's "--": --role
 * producer|consumer, --w7-fd N (the shared block), --tag T (ignored).
 * Multi-process DPDK needs shared hugepage memory: hugepages and a hugetlbfs
 * mount (run.sh sets them up as root); --in-memory and --no-huge cannot
 * share memory with a secondary.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "tests/bench/w7/w7.h"

#define POOL_OBJECTS 8191       /* 2^n - 1: the mempool's best size */
#define POOL_CACHE   256
#define RING_SLOTS   1024

struct dpdk_ctx {
	struct rte_mempool *mp[W7_SIZES];
	struct rte_ring *r[2];
};

static struct w7_shared *sh;

static unsigned d_get(void *ctx, int s, void **m, unsigned n)
{
	struct dpdk_ctx *x = ctx;

	if (n == 1)
		return rte_mempool_get(x->mp[s], m) == 0;
	return rte_mempool_get_bulk(x->mp[s], m, n) == 0 ? n : 0;
}

static unsigned d_send(void *ctx, int s, int dir, void **m, unsigned n)
{
	struct dpdk_ctx *x = ctx;

	(void)s;
	if (n == 1)
		return rte_ring_enqueue(x->r[dir], m[0]) == 0;
	return rte_ring_enqueue_burst(x->r[dir], m, n, NULL);
}

static unsigned d_recv(void *ctx, int s, int dir, void **m, unsigned n)
{
	struct dpdk_ctx *x = ctx;

	(void)s;
	if (n == 1)
		return rte_ring_dequeue(x->r[dir], m) == 0;
	return rte_ring_dequeue_burst(x->r[dir], m, n, NULL);
}

static void d_put(void *ctx, int s, void **m, unsigned n)
{
	struct dpdk_ctx *x = ctx;

	if (n == 1)
		rte_mempool_put(x->mp[s], m[0]);
	else
		rte_mempool_put_bulk(x->mp[s], m, n);
}

static void fail(const char *what)
{
	errno = rte_errno;
	w7_fail(sh, what);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "role", required_argument, NULL, 'r' }, { "w7-fd", required_argument, NULL, 'f' },
		{ "tag", required_argument, NULL, 't' }, { NULL, 0, NULL, 0 },
	};
	static const char *const ring_name[2] = { "w7_to", "w7_back" };
	struct dpdk_ctx x;
	struct w7_ops o = { d_get, d_send, d_recv, d_put, &x };
	int n = rte_eal_init(argc, argv), producer = -1, fd = -1, c;
	char name[32];

	if (n < 0) {
		fprintf(stderr, "w7dpdk: rte_eal_init: %s\n", rte_strerror(rte_errno));
		return 1;
	}
	argc -= n;
	argv += n;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (c == 'r')
			producer = strcmp(optarg, "producer") == 0;
		else if (c == 'f')
			fd = atoi(optarg);
		else if (c != 't')
			return 2;
	}
	if (producer < 0 || fd < 0 || (sh = w7_map_fd(fd)) == NULL) {
		fprintf(stderr, "w7dpdk: needs --role and --w7-fd (run by w7bench)\n");
		return 2;
	}
	for (int s = 0; s < (int)sh->nsizes; s++) {
		unsigned objs = POOL_OBJECTS, cache = POOL_CACHE;
		unsigned flags = RTE_MEMPOOL_F_NO_SPREAD | RTE_MEMPOOL_F_NO_CACHE_ALIGN;

		if (sh->large) {
			cache = sh->depth[s] / 4 < POOL_CACHE ? sh->depth[s] / 4 : POOL_CACHE;
			objs = sh->depth[s] + 3 * cache + 1;
			flags |= RTE_MEMPOOL_F_NO_IOVA_CONTIG;
		}
		snprintf(name, sizeof(name), "w7_%u", sh->size[s]);
		x.mp[s] = producer ? rte_mempool_create(name, objs, sh->size[s], cache, 0,
							NULL, NULL, NULL, NULL, SOCKET_ID_ANY,
							flags)
				   : rte_mempool_lookup(name);
		if (x.mp[s] == NULL)
			fail(producer ? "rte_mempool_create" : "rte_mempool_lookup");
	}
	for (int d = 0; d < 2; d++) {
		x.r[d] = producer ? rte_ring_create(ring_name[d], RING_SLOTS, SOCKET_ID_ANY,
						    RING_F_SP_ENQ | RING_F_SC_DEQ)
				  : rte_ring_lookup(ring_name[d]);
		if (x.r[d] == NULL)
			fail(producer ? "rte_ring_create" : "rte_ring_lookup");
	}
	if (producer) {
		atomic_store(&sh->primary_up, 1);
		w7_producer(&o, sh);
	} else {
		w7_consumer(&o, sh);
	}
	rte_eal_cleanup();
	return 0;
}
