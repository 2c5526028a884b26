/*
 * numa.h - the machine's NUMA topology as the kernel reports it in sysfs
 * (/sys/devices/system/node), and the pool's placement rules built on it:
 * which kernel nodes become pool nodes, a thread's home node, where a
 * node's worker runs, the order of remote refills, and the per-node cap of
 * numa_policy=bind (docs/design.md, "NUMA placement").
 *
 * Pool nodes are the kernel nodes with memory (N_MEMORY: the node list in
 * has_memory), in ascending kernel id, at most SHEAF_MAX_NODES: pool index
 * i is kernel node mem_ids[i].  Ids may be sparse.  A node with CPUs and no
 * memory is no pool node: its CPUs' home is the nearest memory node by the
 * kernel's distance table.  A memory node without CPUs is a pool node like
 * any other; its worker runs on the CPUs of the nearest node that has CPUs.
 *
 * Nothing here prints or calls libnuma: discovery parses files under a
 * root directory (a unit test points it at a fake tree), placement uses
 * the raw mbind and move_pages system calls.  Functions return 0 or a
 * negative errno and fill a caller's @err.
 *
 * Who may call: anyone (pool creation, the engine's workers, libsheaf's
 * home-node choice, sheafd's reports).  A struct ntopo is plain data, read
 * once and then only read.
 */
#ifndef SHEAF_SHM_NUMA_H
#define SHEAF_SHM_NUMA_H

#include <stddef.h>
#include <stdint.h>
#include "layout.h"

/* Placement policies (the same values as sheaf.h's SHEAF_NUMA_*). */
enum numa_policy {
	NUMA_POL_PREFERRED = 0,      /* a node's pages from it, then the nearest others */
	NUMA_POL_BIND = 1,           /* from that node only, under a per-node cap */
	NUMA_POL_INTERLEAVE = 2,     /* every region spread over every memory node */
	NUMA_POL_NR
};

#define NTOPO_KNODES      64u       /* kernel node ids understood: 0..63 */
#define NTOPO_CPUS        1024u     /* CPU ids understood: 0..1023 */
#define NTOPO_ROOT        "/sys/devices/system/node"

struct ntopo_knode {
	uint8_t online;
	uint8_t has_memory;
	uint8_t has_cpu;
	uint8_t pad;
	uint32_t ncpus;
	uint64_t mem_total;          /* bytes (nodeK/meminfo MemTotal) */
	uint64_t mem_free;           /* bytes (MemFree), when read */
	uint64_t cpus[NTOPO_CPUS / 64];
	uint8_t dist[NTOPO_KNODES];  /* to kernel node j (nodeK/distance); 0: unknown */
};

struct ntopo {
	uint32_t nmem;               /* pool nodes: memory nodes, <= SHEAF_MAX_NODES */
	uint32_t nmem_all;           /* memory nodes the kernel lists (may be more) */
	uint8_t mem_ids[SHEAF_MAX_NODES];   /* pool index -> kernel node id */
	struct ntopo_knode k[NTOPO_KNODES]; /* by kernel node id */
};

/* Read the topology under @root (NULL: NTOPO_ROOT).  0, or -errno with
 * @err: no node list, or no node with memory. */
int ntopo_read(struct ntopo *t, const char *root, char *err, size_t errlen);

/* A one-node topology (kernel node 0 with every CPU): what a machine
 * without the sysfs node tree is taken for. */
void ntopo_single(struct ntopo *t);

/* The distance from kernel node @a to @b (10 for itself when the table
 * says nothing; 255 for an unknown pair). */
unsigned ntopo_distance(const struct ntopo *t, unsigned a, unsigned b);

/* The kernel node CPU @cpu belongs to, or -1. */
int ntopo_node_of_cpu(const struct ntopo *t, unsigned cpu);

/*
 * The index into @ids[0..n) (kernel node ids, a pool's nodes) of the node
 * nearest to kernel node @knode (itself when listed; ties: the lower
 * index).  0 when @knode is unknown or n is 0.
 */
uint32_t ntopo_nearest_of(const struct ntopo *t, unsigned knode,
			  const uint8_t *ids, uint32_t n);

/* The home pool index of CPU @cpu for a pool of nodes @ids[0..n). */
uint32_t ntopo_home_of_cpu(const struct ntopo *t, unsigned cpu,
			   const uint8_t *ids, uint32_t n);

/* The kernel node whose CPUs serve kernel node @knode's worker: @knode
 * itself when it has CPUs, else the nearest node that has; -1 when no
 * node lists a CPU. */
int ntopo_worker_node(const struct ntopo *t, unsigned knode);

/*
 * The other pool indices of a pool of nodes @ids[0..n), nearest first from
 * pool index @self, into @out[0..n-1) (ties: the one after @self first,
 * round the ring, so that equal nodes spread their refills).
 */
void ntopo_refill_order(const struct ntopo *t, const uint8_t *ids, uint32_t n,
			uint32_t self, uint8_t *out);

/* Re-read nodeK/meminfo's MemTotal and MemFree for kernel node @knode
 * under @root (NULL: NTOPO_ROOT).  0 or -errno. */
int ntopo_meminfo(const char *root, unsigned knode, uint64_t *total, uint64_t *free_b);

/*
 * The default cap of a node under numa_policy=bind: its free memory at
 * pool creation less a reserve for everything else on the node (an eighth
 * of its total, at least NTOPO_RESERVE_MIN), at most @region bytes (the
 * node's region), rounded down to whole slab frames.  In bytes.
 */
#define NTOPO_RESERVE_MIN (32ull << 20)
uint64_t ntopo_default_cap(uint64_t mem_total, uint64_t mem_free, uint64_t region);

/* "preferred" | "bind" | "interleave": the policy, or -1. */
int numa_policy_parse(const char *s);
const char *numa_policy_name(unsigned policy);

/*
 * Give [@addr, +@len) of a mapping its memory policy for pool node
 * @kernel_node under @policy, over a pool of kernel nodes @ids[0..n):
 * preferred (MPOL_PREFERRED_MANY where the kernel has it, else
 * MPOL_PREFERRED), bind (MPOL_BIND), interleave (MPOL_INTERLEAVE over all
 * of @ids).  Raw mbind(2): nothing printed.  0, or -errno with @err.
 */
int ntopo_mbind(void *addr, uint64_t len, unsigned policy, unsigned kernel_node,
		const uint8_t *ids, uint32_t n, char *err, size_t errlen);

/*
 * Count where the resident pages of [@addr, +@len) lie: @counts[k] gains
 * the pages on kernel node k.  Pages not in memory are not counted and
 * nothing is allocated: the range is mapped read-only from @fd at @fd_off
 * (a memfd), its resident pages found by mincore(2), touched (a read maps
 * the page there is) and asked for by move_pages(2).  0 or -errno.
 */
int ntopo_pages_by_node(int fd, uint64_t fd_off, uint64_t len,
			uint64_t counts[NTOPO_KNODES]);

/*
 * A pool key of the Tune request: "node_cap:K" (K: a kernel node id) sets
 * that node's cap under numa_policy=bind.  ntopo_tune_key gives K, or -1
 * when @key is not of that form.
 */
#define NTOPO_CAP_KEY "node_cap:"
int ntopo_tune_key(const char *key);

#endif
