/*
 * numa.c - sheafctl's NUMA output: the pool's nodes in `info`, where a
 * cache's pages are in `stats -n`, and the node_cap=K:BYTES setting of
 * `tune --pool` (sheafctl.h).
 */
#include <stdlib.h>
#include <string.h>
#include "sheafctl.h"

/* "0-3,8" from a sorted CPU list, "-" when empty. */
static const char *cpus_text(char *out, size_t len, const uint32_t *cpus, size_t n)
{
	size_t o = 0;

	out[0] = '\0';
	for (size_t i = 0; i < n && o < len; i++) {
		size_t j = i;

		while (j + 1 < n && cpus[j + 1] == cpus[j] + 1)
			j++;
		o += (size_t)snprintf(out + o, len - o, j > i ? "%s%u-%u" : "%s%u",
				      o ? "," : "", cpus[i], cpus[j]);
		i = j;
	}
	if (out[0] == '\0')
		snprintf(out, len, "-");
	return out;
}

void numa_info_table(const Sheaf__V1__NumaNode *const *nodes, size_t n, const char *policy)
{
	char cpus[96], a[32], b[32], cap[32];

	if (policy == NULL || policy[0] == '\0')
		return;
	printf("%-18s %s\n", "numa_policy", policy);
	printf("  %5s %11s %-16s %11s %11s %11s %11s %6s\n", "INDEX", "KERNEL_NODE", "CPUS",
	       "MEM_TOTAL", "MEM_FREE", "CAP", "USED", "WORKER");
	for (size_t i = 0; i < n; i++) {
		const Sheaf__V1__NumaNode *nn = nodes[i];
		char used[32];

		printf("  %5u %11u %-16s %11s %11s %11s %11s %6d\n", nn->index, nn->kernel_node,
		       cpus_text(cpus, sizeof(cpus), nn->cpus, nn->n_cpus),
		       fmt_iec(a, sizeof(a), nn->mem_total), fmt_iec(b, sizeof(b), nn->mem_free),
		       strcmp(policy, "bind") == 0 ? fmt_iec(cap, sizeof(cap), nn->cap) : "-",
		       fmt_iec(used, sizeof(used), nn->frames_used * (256ull << 10)),
		       nn->worker_node);
	}
}

void numa_info_json(struct jw *w, const Sheaf__V1__NumaNode *const *nodes, size_t n,
		    const char *policy, uint32_t count)
{
	jw_str(w, "numa_policy", policy != NULL ? policy : "");
	jw_arr(w, "nodes");
	for (size_t i = 0; i < n; i++) {
		const Sheaf__V1__NumaNode *nn = nodes[i];

		jw_obj(w, NULL);
		jw_u64(w, "index", nn->index);
		jw_u64(w, "kernel_node", nn->kernel_node);
		jw_arr(w, "cpus");
		for (size_t k = 0; k < nn->n_cpus; k++)
			jw_u64(w, NULL, nn->cpus[k]);
		jw_end(w, ']');
		jw_u64(w, "mem_total", nn->mem_total);
		jw_u64(w, "mem_free", nn->mem_free);
		jw_u64(w, "cap", nn->cap);
		jw_u64(w, "cap_refused", nn->cap_refused);
		jw_u64(w, "frames_used", nn->frames_used);
		jw_i64(w, "worker_node", nn->worker_node);
		jw_end(w, '}');
	}
	/* Simulated nodes: their indices alone. */
	for (uint32_t i = (uint32_t)n; n == 0 && i < count; i++) {
		jw_obj(w, NULL);
		jw_u64(w, "index", i);
		jw_end(w, '}');
	}
	jw_end(w, ']');
}

void numa_pages_table(const Sheaf__V1__CacheStats *cs)
{
	int any = 0;

	for (size_t n = 0; n < cs->n_nodes; n++)
		any |= cs->nodes[n]->n_pages_by_kernel_node > 0;
	if (!any)
		return;
	printf("  %-24s", "pages by kernel node");
	for (size_t n = 0; n < cs->n_nodes; n++) {
		const Sheaf__V1__NodeStats *ns = cs->nodes[n];
		char cell[160];
		size_t o = 0;

		cell[0] = '\0';
		for (size_t k = 0; k < ns->n_pages_by_kernel_node && o < sizeof(cell); k++)
			o += (size_t)snprintf(cell + o, sizeof(cell) - o, "%s%u:%llu", k ? "," : "",
					      ns->pages_by_kernel_node[k]->kernel_node,
					      (unsigned long long)ns->pages_by_kernel_node[k]->pages);
		printf(" node%zu=%s", n, cell[0] ? cell : "-");
	}
	printf("\n");
}

void numa_pages_json(struct jw *w, const Sheaf__V1__NodeStats *ns)
{
	char key[16];

	jw_obj(w, "pages_by_kernel_node");
	for (size_t k = 0; k < ns->n_pages_by_kernel_node; k++) {
		snprintf(key, sizeof(key), "%u", ns->pages_by_kernel_node[k]->kernel_node);
		jw_u64(w, key, ns->pages_by_kernel_node[k]->pages);
	}
	jw_end(w, '}');
}

int numa_cap_setting(struct ctl *c, const char *val, Sheaf__V1__Setting *st, char *key,
		     size_t keylen)
{
	const char *colon = strchr(val, ':');
	char *end;
	unsigned long k;

	k = strtoul(val, &end, 10);
	if (colon == NULL || end != colon || colon == val || k > 63)
		return ctl_usage(c, "bad node_cap '%s': expected K:BYTES (K a kernel node id, "
				 "BYTES with K, M, G, T suffixes)", val);
	if (ctl_parse_u64(colon + 1, 1, &st->value) != 0)
		return ctl_usage(c, "bad node_cap '%s': bytes (K, M, G, T suffixes) after ':'", val);
	snprintf(key, keylen, "node_cap:%lu", k);
	st->key = key;
	return CTL_OK;
}
