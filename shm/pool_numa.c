/*
 * pool_numa.c - a pool's NUMA placement (pool.h's pool_numa_* hooks, on
 * numa.h's topology): which kernel nodes a new pool gets, the memory
 * policy of each node's data region, the per-node caps of
 * numa_policy=bind, and the order in which a node's refill tries the
 * others.
 *
 * Simulated nodes (pool_params.nodes > 0) get none of it: no binding, no
 * policy, no cap, refills in ring order.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "numa.h"
#include "pool.h"

int pool_numa_discover(const struct pool_params *pp, struct ntopo **topo,
		       uint32_t *nodes, char *err, size_t errlen)
{
	struct ntopo *t;

	*topo = NULL;
	if (pp->nodes != 0) {
		*nodes = pp->nodes;
		return 0;
	}
	if (pp->numa_policy >= NUMA_POL_NR) {
		snprintf(err, errlen, "numa_policy %u out of range 0..%u", pp->numa_policy,
			 NUMA_POL_NR - 1);
		return -EINVAL;
	}
	t = malloc(sizeof(*t));
	if (t == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	/* No node tree (a kernel without NUMA, no sysfs): one node, which
	 * nothing binds. */
	if (ntopo_read(t, pp->numa_root, NULL, 0) != 0)
		ntopo_single(t);
	*nodes = t->nmem;
	*topo = t;
	return 0;
}

void pool_numa_order(struct shm_pool *p)
{
	uint8_t ids[SHEAF_MAX_NODES];

	for (uint32_t n = 0; n < p->nodes; n++)
		ids[n] = p->hdr->numa_flags & SHEAF_NUMA_F_IDS ? p->hdr->kernel_node[n]
							      : (uint8_t)n;
	for (uint32_t n = 0; n < p->nodes; n++)
		ntopo_refill_order(p->hdr->simulated ? NULL : p->topo, ids, p->nodes, n,
				   p->refill_order[n]);
}

int pool_numa_place(struct shm_pool *p, const struct pool_params *pp,
		    struct ntopo *t, char *err, size_t errlen)
{
	struct shm_header *h = p->hdr;
	int rc;

	if (t == NULL)                     /* simulated */
		return 0;
	p->topo = t;
	h->numa_policy = pp->numa_policy;
	for (uint32_t n = 0; n < p->nodes; n++) {
		struct shm_node_alloc *na = &p->nalloc[n];
		const struct ntopo_knode *k = &t->k[t->mem_ids[n]];

		h->kernel_node[n] = t->mem_ids[n];
		na->mem_total = k->mem_total;
		na->mem_free = k->mem_free;
		if (pp->numa_policy == NUMA_POL_BIND)
			at_store_relaxed(&na->cap_frames, (uint32_t)(ntopo_default_cap(
				k->mem_total, k->mem_free, h->node_bytes) >> SLAB_SHIFT));
	}
	h->numa_flags = SHEAF_NUMA_F_IDS |
			(pp->numa_policy == NUMA_POL_BIND ? SHEAF_NUMA_F_CAPS : 0);
	/* Every policy goes on while no data page exists (a policy applies to
	 * the pages faulted after it; the data is untouched until its slabs
	 * are used).  One node on its own needs none, unless bound: then the
	 * cap alone keeps its faults from an OOM kill. */
	if (p->nodes > 1 || pp->numa_policy == NUMA_POL_BIND) {
		for (uint32_t n = 0; n < p->nodes; n++) {
			rc = ntopo_mbind(p->data + (uint64_t)n * h->node_bytes, h->node_bytes,
					 pp->numa_policy, t->mem_ids[n], t->mem_ids, p->nodes,
					 err, errlen);
			if (rc != 0)
				return rc;
		}
		h->numa_flags |= SHEAF_NUMA_F_BOUND;
	}
	pool_numa_order(p);
	return 0;
}

void pool_numa_adopt(struct shm_pool *p)
{
	if (p->hdr->simulated || p->topo != NULL)
		return;
	p->topo = malloc(sizeof(*p->topo));
	if (p->topo != NULL && ntopo_read(p->topo, NULL, NULL, 0) != 0)
		ntopo_single(p->topo);
	pool_numa_order(p);
}

int pool_numa_index(const struct shm_pool *p, unsigned knode)
{
	for (uint32_t n = 0; n < p->nodes; n++) {
		unsigned k = p->hdr->numa_flags & SHEAF_NUMA_F_IDS ? p->hdr->kernel_node[n] : n;

		if (k == knode)
			return (int)n;
	}
	return -1;
}

int pool_numa_cap_check(const struct shm_pool *p, unsigned knode, uint64_t bytes,
			char *err, size_t errlen)
{
	if (p->hdr->simulated || p->hdr->numa_policy != NUMA_POL_BIND) {
		snprintf(err, errlen, NTOPO_CAP_KEY "%u: node caps apply under "
			 "numa_policy=bind only (this pool: %s)", knode,
			 p->hdr->simulated ? "simulated nodes" : numa_policy_name(p->hdr->numa_policy));
		return -EINVAL;
	}
	if (pool_numa_index(p, knode) < 0) {
		snprintf(err, errlen, NTOPO_CAP_KEY "%u: kernel node %u is no node of this pool",
			 knode, knode);
		return -EINVAL;
	}
	if (bytes < SLAB_SIZE || bytes > p->hdr->node_bytes) {
		snprintf(err, errlen, NTOPO_CAP_KEY "%u=%llu out of range %u..%llu", knode,
			 (unsigned long long)bytes, SLAB_SIZE,
			 (unsigned long long)p->hdr->node_bytes);
		return -EINVAL;
	}
	return 0;
}

void pool_numa_cap_set(struct shm_pool *p, unsigned knode, uint64_t bytes)
{
	int n = pool_numa_index(p, knode);

	if (n >= 0)
		at_store_relaxed(&p->nalloc[n].cap_frames, (uint32_t)(bytes >> SLAB_SHIFT));
}
