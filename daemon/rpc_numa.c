/*
 * rpc_numa.c - the NUMA parts of DaemonInfo, Stats and Tune replies
 * (rpc_handlers.h): each pool node's kernel node, CPUs, memory and cap,
 * and where a cache's pages really are.
 */
#include <errno.h>
#include "rpc_handlers.h"
#include "shm/numa.h"

/* Pool node @n as a NumaNode, or NULL when out of memory. */
static Sheaf__V1__NumaNode *numa_node(struct daemon *d, struct arena *a, uint32_t n)
{
	struct shm_pool *p = &d->pool;
	const struct shm_node_alloc *na = &p->nalloc[n];
	Sheaf__V1__NumaNode *nn = ARENA_NEW(a, Sheaf__V1__NumaNode, SHEAF__V1__NUMA_NODE__INIT);
	unsigned k = p->hdr->numa_flags & SHEAF_NUMA_F_IDS ? p->hdr->kernel_node[n] : n;

	if (nn == NULL)
		return NULL;
	nn->index = n;
	nn->kernel_node = k;
	nn->mem_total = na->mem_total;
	nn->mem_free = na->mem_free;
	if (p->hdr->numa_flags & SHEAF_NUMA_F_CAPS)
		nn->cap = (uint64_t)at_load_relaxed(&na->cap_frames) << SLAB_SHIFT;
	nn->cap_refused = at_load_relaxed(&na->cap_refused);
	nn->frames_used = at_load_relaxed(&na->used);
	nn->worker_node = p->topo != NULL ? ntopo_worker_node(p->topo, k) : -1;
	if (p->topo != NULL && k < NTOPO_KNODES && p->topo->k[k].ncpus > 0) {
		const struct ntopo_knode *kn = &p->topo->k[k];

		nn->cpus = arena_alloc(a, kn->ncpus * sizeof(uint32_t));
		if (nn->cpus == NULL)
			return NULL;
		for (unsigned c = 0; c < NTOPO_CPUS && nn->n_cpus < kn->ncpus; c++)
			if ((kn->cpus[c / 64] >> (c % 64)) & 1u)
				nn->cpus[nn->n_cpus++] = c;
	}
	return nn;
}

int rpc_numa_nodes(struct daemon *d, struct arena *a, char **policy,
		   Sheaf__V1__NumaNode ***out, size_t *n)
{
	struct shm_pool *p = &d->pool;

	if (p->hdr->simulated)
		return 0;
	*policy = (char *)numa_policy_name(p->hdr->numa_policy);
	*out = arena_alloc(a, p->nodes * sizeof(void *));
	if (*out == NULL)
		return -ENOMEM;
	for (uint32_t k = 0; k < p->nodes; k++)
		if (((*out)[(*n)++] = numa_node(d, a, k)) == NULL)
			return -ENOMEM;
	return 0;
}

int rpc_numa_pages(struct daemon *d, struct arena *a, uint32_t c, uint32_t n,
		   Sheaf__V1__NodeStats *ns)
{
	struct shm_pool *p = &d->pool;
	uint64_t counts[NTOPO_KNODES] = { 0 };
	uint32_t first = n * p->frames_per_node, end = first + p->frames_per_node;
	uint32_t kinds = 0;

	/* Runs of the cache's frames on the node, each asked for at once. */
	for (uint32_t f = first; f < end;) {
		uint32_t g = f;

		/* a multi-frame slab's later frames too (FRAME_TAIL) */
		while (g < end && (at_load_relaxed(&p->frame_owner[g]) == (uint16_t)c ||
				   at_load_relaxed(&p->frame_owner[g]) == (uint16_t)(FRAME_TAIL | c)))
			g++;
		if (g > f)
			(void)ntopo_pages_by_node(p->shared_fd, pool_frame_off(p, f) - p->hdr->off_rw,
						  (uint64_t)(g - f) << SLAB_SHIFT, counts);
		f = g > f ? g : f + 1;
	}
	for (unsigned k = 0; k < NTOPO_KNODES; k++)
		kinds += counts[k] != 0;
	if (kinds == 0)
		return 0;
	ns->pages_by_kernel_node = arena_alloc(a, kinds * sizeof(void *));
	if (ns->pages_by_kernel_node == NULL)
		return -ENOMEM;
	for (unsigned k = 0; k < NTOPO_KNODES; k++) {
		Sheaf__V1__NodePages *np;

		if (counts[k] == 0)
			continue;
		np = ARENA_NEW(a, Sheaf__V1__NodePages, SHEAF__V1__NODE_PAGES__INIT);
		if (np == NULL)
			return -ENOMEM;
		np->kernel_node = k;
		np->pages = counts[k];
		ns->pages_by_kernel_node[ns->n_pages_by_kernel_node++] = np;
	}
	return 0;
}
