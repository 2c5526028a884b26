/*
 * guest_util.h - what the in-guest NUMA tests (tests/numa/guest_*.c, the
 * program numa_guest) share: the guest's topology from sysfs
 * (guest_topo.c), where pages are by move_pages(2) and threads pinned to a
 * CPU (guest_place.c), and the test's sheafd, its checks and its client
 * (guest_daemon.c).  Every helper fails the running Check test (REQUIRE)
 * rather than return an error.
 */
#ifndef SHEAF_TESTS_NUMA_GUEST_UTIL_H
#define SHEAF_TESTS_NUMA_GUEST_UTIL_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "client/sheaf.h"
#include "tests/helpers/util_json.h"

#define MAXN    16
#define PAGE    4096UL
#define MIB     (1024UL * 1024UL)

/* The objects most tests allocate per node: 4 MiB of 1 KiB objects. */
#define NODE_OBJ  1024
#define NODE_N    4096

/* ---- the guest's topology, from sysfs (guest_topo.c) ----------------------------- */

/* Kernel nodes with memory, ascending (the pool's nodes): the count. */
int mem_nodes(int *ids);
/* mem_nodes, required to be at least 2. */
int multi_nodes(int *ids);
/* Every possible kernel node, memoryless ones included: the count. */
int possible_nodes(int *ids);
/* The CPUs of kernel node @kn (at most 64): the count. */
int node_cpus(int kn, int *cpus);
/* Kernel node @kn's distance to each node (at most MAXN): the count. */
int node_distances(int kn, int *d);
/* A figure of /sys/devices/system/node/nodeK/meminfo, in KiB. */
uint64_t node_meminfo_kb(int kn, const char *key);
/* The index of @v among the @n @ids, -1 if absent. */
int index_of(const int *ids, int n, int v);

/* ---- placement (guest_place.c) --------------------------------------------------- */

/* calloc of @n object pointers, required to succeed. */
void **objs_new(size_t n);
/* The kernel node of each page the @n objects of @size bytes at @objs
 * touch, counted into @per_kn[kernel node] (each page once).  The pages
 * must be resident (the objects written). */
void count_pages(void *const *objs, size_t n, size_t size, uint64_t per_kn[MAXN]);
void show_pages(const char *what, const uint64_t per_kn[MAXN]);
/* Every page counted is on kernel node @kn (and there is one). */
void require_all_on(const uint64_t per_kn[MAXN], int kn, const char *what);
/* Write @tag into every byte of the @n objects of @size at @objs (make
 * their pages resident). */
void touch(void *const *objs, size_t n, size_t size, unsigned char tag);
/* Allocate @n objects of @size into @objs (all required to succeed),
 * touch them with @tag and count their pages into @per_kn. */
void alloc_placed(sheaf_cache_t *c, void **objs, size_t n, size_t size, unsigned char tag,
		  uint64_t per_kn[MAXN]);
/* alloc_placed by this thread homed on pool node @idx first. */
void alloc_homed(sheaf_pool_t *p, sheaf_cache_t *c, int idx, void **objs, size_t n,
		 size_t size, unsigned char tag, uint64_t per_kn[MAXN]);
/* @n objects allocated and written by a new thread pinned to @cpu before
 * its first call into libsheaf (so homed on that CPU's node): the objects
 * (free them with free()), their pages per kernel node in @per_kn. */
void **alloc_on_cpu(sheaf_cache_t *c, int cpu, size_t n, size_t size, uint64_t per_kn[MAXN]);

/* ---- the test's sheafd and its client (guest_daemon.c) --------------------------- */

/* Start D (util_sheafctl.h), CTL() and CTLJ()'s daemon, in the directory
 * dmn_init made, with @extra flags (NULL-terminated) after the usual. */
void start_sheafd_argv(const char *const *extra);
/* dmn_init, then sheafd with a pool of @size and --numa-policy @policy
 * (NULL: none). */
void start_sheafd(const char *size, const char *policy);
/* start_sheafd, a client of it in *@p and its cache @name of @obj bytes. */
sheaf_cache_t *start_with_cache(const char *size, const char *policy, const char *name,
				size_t obj, sheaf_pool_t **p);
/* Disconnect @p (NULL: none), then end_checks and stop D and remove its
 * directory. */
void stop_sheafd(sheaf_pool_t *p);
/* Nothing from libnuma in sheafd's stderr (@log). */
void log_clean(const char *log);
/* The kernel's log holds no OOM kill. */
void no_oom_kill(void);
/* D alive, its log clean, no OOM kill. */
void end_checks(void);

sheaf_pool_t *connect_pool(const char *sock);
sheaf_cache_t *make_cache(sheaf_pool_t *p, const char *name, size_t size);
/* The pool has @n nodes, as many as have memory. */
void require_pool_nodes(sheaf_pool_t *p, int n, const char *what);
/* Allocate @n objects into @objs, all required to succeed. */
void alloc_all(sheaf_cache_t *c, void **objs, size_t n);
void free_all(sheaf_cache_t *c, void **objs, size_t n);
/* Counter @name of @c on pool node @node, all nodes when < 0. */
uint64_t counter(sheaf_cache_t *c, int node, const char *name);

/* `sheafctl info -o json`'s "nodes", required to have @n entries. */
struct jv *info_nodes(struct jv *info, int n);
/* `sheafctl info` of D names numa_policy @want. */
void require_policy(struct jv *info, const char *want);
/* Pool node i of @nodes (info_nodes) is on kernel node @mem[i]. */
void require_kernel_nodes(struct jv *nodes, const int *mem, int n, const char *when);
/* Resident pages of pool node @idx's region on kernel node @kn, from
 * `sheafctl stats CACHE -n -o json`. */
uint64_t region_pages(const char *cache, int idx, int kn);
/* Pool node @idx's region of @cache has at least @home pages on its kernel
 * node @mem[idx] and none on the other @n - 1. */
void require_region_home(const char *cache, int idx, const int *mem, int n, uint64_t home);
/* Counter @name of @cache summed over the nodes of `sheafctl stats -n`. */
uint64_t ctl_counter(const char *cache, const char *name);

/* ---- the suites, one file each (guest_main.c picks one by mode) ------------------ */

void add_sym(Suite *s, int timeout);              /* guest_sym.c */
void add_memoryless(Suite *s, int timeout);       /* guest_memoryless.c */
void add_cpuless(Suite *s, int timeout);          /* guest_cpuless.c */
void add_asym_preferred(Suite *s, int timeout);   /* guest_asym.c */
void add_asym_bind(Suite *s, int timeout);        /* guest_asym.c */
void add_remote(Suite *s, int timeout);           /* guest_remote.c */
void add_shrink(Suite *s, int timeout);           /* guest_shrink.c */
void add_restart(Suite *s, int timeout);          /* guest_restart.c */

#endif
