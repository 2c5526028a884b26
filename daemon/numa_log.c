/*
 * numa_log.c - sheafd's NUMA lines (numa_log.h).
 */
#include <errno.h>
#include <numa.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "log.h"
#include "numa_log.h"
#include "shm/numa.h"

static struct event *ev_watch;
static uint64_t seen[SHEAF_MAX_NODES];     /* cap_refused at the last step */
static uint8_t at_cap[SHEAF_MAX_NODES];    /* an episode is on */

/* libnuma's hooks (weak there): sheafd's log, never bare stderr.
 * Default visibility: libnuma.so must bind to these. */
__attribute__((visibility("default"))) void numa_error(char *where)
{
	log_warn("libnuma: %s: %s", where, strerror(errno));
}

__attribute__((visibility("default"))) void numa_warn(int num, char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	line[strcspn(line, "\n")] = '\0';
	log_warn("libnuma (%d): %s", num, line);
}

static unsigned knode(const struct shm_pool *p, uint32_t n)
{
	return p->hdr->numa_flags & SHEAF_NUMA_F_IDS ? p->hdr->kernel_node[n] : n;
}

/* "256 MiB" */
static const char *mib(char *b, size_t len, uint64_t bytes)
{
	snprintf(b, len, "%llu MiB", (unsigned long long)(bytes >> 20));
	return b;
}

int numa_log_caps(struct shm_pool *p)
{
	int lines = 0;
	char b[32];

	for (uint32_t n = 0; n < p->nodes; n++) {
		struct shm_node_alloc *na = &p->nalloc[n];
		uint64_t r = at_load_relaxed(&na->cap_refused);
		uint32_t cap = at_load_relaxed(&na->cap_frames);

		if (r != seen[n] && !at_cap[n]) {
			at_cap[n] = 1;
			log_warn("node %u is at its cap (%s) under numa_policy=%s: allocation refused",
				 knode(p, n), mib(b, sizeof(b), (uint64_t)cap << SLAB_SHIFT),
				 numa_policy_name(p->hdr->numa_policy));
			lines++;
		} else if (r == seen[n] && at_cap[n] && at_load_relaxed(&na->used) < cap) {
			at_cap[n] = 0;
			log_info("node %u is below its cap (%s) again", knode(p, n),
				 mib(b, sizeof(b), (uint64_t)cap << SLAB_SHIFT));
		}
		seen[n] = r;
	}
	return lines;
}

static void on_watch(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	numa_log_caps(arg);
}

/* "0-3,8" from a CPU bitmap, "none" when empty. */
static void cpus_text(const struct ntopo_knode *k, char *out, size_t len)
{
	size_t o = 0;

	out[0] = '\0';
	for (unsigned c = 0; c < NTOPO_CPUS && o < len; c++) {
		unsigned e = c;

		if (!((k->cpus[c / 64] >> (c % 64)) & 1u))
			continue;
		while (e + 1 < NTOPO_CPUS && ((k->cpus[(e + 1) / 64] >> ((e + 1) % 64)) & 1u))
			e++;
		o += (size_t)snprintf(out + o, len - o, e > c ? "%s%u-%u" : "%s%u",
				      o ? "," : "", c, e);
		c = e;
	}
	if (out[0] == '\0')
		snprintf(out, len, "none");
}

static void log_nodes(const struct shm_pool *p)
{
	char cpus[128], b1[32], b2[32], b3[32];

	if (p->hdr->simulated || p->topo == NULL)
		return;
	log_info("numa_policy=%s over %u memory node%s%s", numa_policy_name(p->hdr->numa_policy),
		 p->nodes, p->nodes == 1 ? "" : "s",
		 p->topo->nmem_all > p->nodes ? " (more memory nodes than a pool holds: "
						"the lowest ids)" : "");
	for (uint32_t n = 0; n < p->nodes; n++) {
		const struct shm_node_alloc *na = &p->nalloc[n];
		unsigned k = knode(p, n);
		uint32_t cap = at_load_relaxed(&na->cap_frames);
		int bound = p->hdr->numa_flags & SHEAF_NUMA_F_CAPS;
		int w = ntopo_worker_node(p->topo, k);

		if (k < NTOPO_KNODES)
			cpus_text(&p->topo->k[k], cpus, sizeof(cpus));
		else
			snprintf(cpus, sizeof(cpus), "unknown");
		log_info("pool node %u = kernel node %u: cpus %s, %s total, %s free%s%s; "
			 "worker on node %d", n, k, cpus, mib(b1, sizeof(b1), na->mem_total),
			 mib(b2, sizeof(b2), na->mem_free), bound ? ", cap " : "",
			 bound ? mib(b3, sizeof(b3), (uint64_t)cap << SLAB_SHIFT) : "", w);
		if (bound && cap == 0)
			log_warn("node %u has less free memory than its reserve: it gets no slab "
				 "under numa_policy=bind (sheafctl tune --pool node_cap=%u:BYTES "
				 "gives it some)", k, k);
	}
	for (unsigned k = 0; k < NTOPO_KNODES; k++)
		if (p->topo->k[k].online && p->topo->k[k].has_cpu && !p->topo->k[k].has_memory) {
			uint8_t ids[SHEAF_MAX_NODES];

			for (uint32_t n = 0; n < p->nodes; n++)
				ids[n] = (uint8_t)knode(p, n);
			log_info("kernel node %u has CPUs and no memory: its threads' home is "
				 "pool node %u", k, ntopo_nearest_of(p->topo, k, ids, p->nodes));
		}
}

void numa_log_start(struct daemon *d)
{
	struct timeval tv = { 0, NUMA_LOG_MS * 1000 };

	log_nodes(&d->pool);
	if (d->pool.hdr->simulated)
		return;
	for (uint32_t n = 0; n < d->pool.nodes; n++)
		seen[n] = at_load_relaxed(&d->pool.nalloc[n].cap_refused);
	ev_watch = event_new(d->base, -1, EV_PERSIST, on_watch, &d->pool);
	if (ev_watch != NULL)
		event_add(ev_watch, &tv);
}

void numa_log_stop(void)
{
	if (ev_watch != NULL)
		event_free(ev_watch);
	ev_watch = NULL;
}
