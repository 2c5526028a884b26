/*
 * numa.c - NUMA topology from sysfs and the placement rules (numa.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "numa.h"

#ifndef MPOL_PREFERRED
#define MPOL_PREFERRED  1
#endif
#ifndef MPOL_BIND
#define MPOL_BIND       2
#endif
#ifndef MPOL_INTERLEAVE
#define MPOL_INTERLEAVE 3
#endif
#ifndef MPOL_PREFERRED_MANY
#define MPOL_PREFERRED_MANY 5
#endif

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* Read file @root/@name (at most @cap - 1 bytes, NUL-terminated): the
 * length, or -errno. */
static ssize_t read_small(const char *root, const char *name, char *buf, size_t cap)
{
	char path[512];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", root, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, cap - 1);
	if (n < 0)
		n = -errno;
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

/* Parse a kernel list ("0-3,8,10-11\n", may be empty) into bitmap @bits of
 * @nbits bits (ids past it are left out).  0, or -EINVAL. */
static int parse_list(const char *s, uint64_t *bits, unsigned nbits)
{
	memset(bits, 0, nbits / 8);
	while (*s == ' ' || *s == '\t')
		s++;
	while (*s != '\0' && *s != '\n') {
		char *end;
		unsigned long lo = strtoul(s, &end, 10), hi = lo;

		if (end == s)
			return -EINVAL;
		s = end;
		if (*s == '-') {
			hi = strtoul(s + 1, &end, 10);
			if (end == s + 1 || hi < lo)
				return -EINVAL;
			s = end;
		}
		for (unsigned long i = lo; i <= hi && i < nbits; i++)
			bits[i / 64] |= 1ull << (i % 64);
		if (*s == ',')
			s++;
		else if (*s != '\0' && *s != '\n')
			return -EINVAL;
	}
	return 0;
}

static int bit_test(const uint64_t *bits, unsigned i)
{
	return (bits[i / 64] >> (i % 64)) & 1u;
}

/* A node list file under @root into @bits: 1 read, 0 missing, -EINVAL. */
static int read_list(const char *root, const char *name, uint64_t *bits, unsigned nbits)
{
	char buf[4096];
	ssize_t n = read_small(root, name, buf, sizeof(buf));

	if (n < 0)
		return 0;
	return parse_list(buf, bits, nbits) == 0 ? 1 : -EINVAL;
}

/* The value in kB after "@key:" in a nodeK/meminfo text, in bytes; 0 when
 * absent. */
static uint64_t meminfo_field(const char *text, const char *key)
{
	const char *p = text;
	size_t kl = strlen(key);

	while ((p = strstr(p, key)) != NULL) {
		if ((p == text || p[-1] == ' ') && p[kl] == ':')
			return strtoull(p + kl + 1, NULL, 10) << 10;
		p += kl;
	}
	return 0;
}

int ntopo_meminfo(const char *root, unsigned knode, uint64_t *total, uint64_t *free_b)
{
	char name[64], buf[4096];
	ssize_t n;

	snprintf(name, sizeof(name), "node%u/meminfo", knode);
	n = read_small(root != NULL ? root : NTOPO_ROOT, name, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	*total = meminfo_field(buf, "MemTotal");
	*free_b = meminfo_field(buf, "MemFree");
	return 0;
}

void ntopo_single(struct ntopo *t)
{
	memset(t, 0, sizeof(*t));
	t->nmem = t->nmem_all = 1;
	t->k[0].online = t->k[0].has_memory = t->k[0].has_cpu = 1;
	memset(t->k[0].cpus, 0xff, sizeof(t->k[0].cpus));
	t->k[0].ncpus = NTOPO_CPUS;
	t->k[0].dist[0] = 10;
}

int ntopo_read(struct ntopo *t, const char *root, char *err, size_t errlen)
{
	uint64_t online[NTOPO_KNODES / 64], mem[NTOPO_KNODES / 64], cpu[NTOPO_KNODES / 64];
	int have_mem, have_cpu;
	char name[64], buf[4096];

	if (root == NULL)
		root = NTOPO_ROOT;
	memset(t, 0, sizeof(*t));
	if (read_list(root, "online", online, NTOPO_KNODES) != 1 &&
	    read_list(root, "possible", online, NTOPO_KNODES) != 1)
		return fail(err, errlen, -ENOENT, "%s: no readable node list (online)", root);
	have_mem = read_list(root, "has_memory", mem, NTOPO_KNODES);
	have_cpu = read_list(root, "has_cpu", cpu, NTOPO_KNODES);
	if (have_mem < 0 || have_cpu < 0)
		return fail(err, errlen, -EINVAL, "%s: a node list does not parse", root);
	for (unsigned id = 0; id < NTOPO_KNODES; id++) {
		struct ntopo_knode *k = &t->k[id];

		if (!bit_test(online, id))
			continue;
		k->online = 1;
		snprintf(name, sizeof(name), "node%u/cpulist", id);
		if (read_small(root, name, buf, sizeof(buf)) >= 0)
			(void)parse_list(buf, k->cpus, NTOPO_CPUS);
		for (unsigned w = 0; w < NTOPO_CPUS / 64; w++)
			k->ncpus += (uint32_t)__builtin_popcountll(k->cpus[w]);
		(void)ntopo_meminfo(root, id, &k->mem_total, &k->mem_free);
		k->has_memory = have_mem ? bit_test(mem, id) : k->mem_total > 0;
		k->has_cpu = have_cpu ? bit_test(cpu, id) && k->ncpus > 0 : k->ncpus > 0;
		/* nodeK/distance: one number per online node, in id order. */
		snprintf(name, sizeof(name), "node%u/distance", id);
		if (read_small(root, name, buf, sizeof(buf)) >= 0) {
			char *s = buf, *end;

			for (unsigned j = 0; j < NTOPO_KNODES; j++) {
				unsigned long d;

				if (!bit_test(online, j))
					continue;
				d = strtoul(s, &end, 10);
				if (end == s)
					break;
				k->dist[j] = (uint8_t)(d > 254 ? 254 : d);
				s = end;
			}
		}
		if (k->has_memory) {
			if (t->nmem < SHEAF_MAX_NODES)
				t->mem_ids[t->nmem++] = (uint8_t)id;
			t->nmem_all++;
		}
	}
	if (t->nmem == 0)
		return fail(err, errlen, -ENOENT, "%s: no node with memory", root);
	return 0;
}

unsigned ntopo_distance(const struct ntopo *t, unsigned a, unsigned b)
{
	unsigned d;

	if (a >= NTOPO_KNODES || b >= NTOPO_KNODES)
		return 255;
	d = t->k[a].dist[b];
	if (d == 0)
		return a == b ? 10 : 255;
	return d;
}

int ntopo_node_of_cpu(const struct ntopo *t, unsigned cpu)
{
	if (cpu >= NTOPO_CPUS)
		return -1;
	for (unsigned id = 0; id < NTOPO_KNODES; id++)
		if (t->k[id].online && bit_test(t->k[id].cpus, cpu))
			return (int)id;
	return -1;
}

uint32_t ntopo_nearest_of(const struct ntopo *t, unsigned knode,
			  const uint8_t *ids, uint32_t n)
{
	uint32_t best = 0;
	unsigned bd = 256;

	for (uint32_t i = 0; i < n; i++) {
		unsigned d = ids[i] == knode ? 0 : ntopo_distance(t, knode, ids[i]);

		if (d < bd) {
			bd = d;
			best = i;
		}
	}
	return best;
}

uint32_t ntopo_home_of_cpu(const struct ntopo *t, unsigned cpu,
			   const uint8_t *ids, uint32_t n)
{
	int k = ntopo_node_of_cpu(t, cpu);

	return k < 0 ? 0 : ntopo_nearest_of(t, (unsigned)k, ids, n);
}

int ntopo_worker_node(const struct ntopo *t, unsigned knode)
{
	int best = -1;
	unsigned bd = 256;

	if (knode < NTOPO_KNODES && t->k[knode].has_cpu)
		return (int)knode;
	for (unsigned id = 0; id < NTOPO_KNODES; id++) {
		unsigned d;

		if (!t->k[id].online || !t->k[id].has_cpu)
			continue;
		d = ntopo_distance(t, knode, id);
		if (d < bd) {
			bd = d;
			best = (int)id;
		}
	}
	return best;
}

void ntopo_refill_order(const struct ntopo *t, const uint8_t *ids, uint32_t n,
			uint32_t self, uint8_t *out)
{
	uint32_t m = 0;

	/* The ring order from @self, then a stable insertion sort by
	 * distance: equal distances keep the ring order. */
	for (uint32_t k = 1; k < n; k++)
		out[m++] = (uint8_t)((self + k) % n);
	if (t == NULL)
		return;
	for (uint32_t i = 1; i < m; i++) {
		uint8_t v = out[i];
		unsigned dv = ntopo_distance(t, ids[self], ids[v]);
		uint32_t j = i;

		while (j > 0 && ntopo_distance(t, ids[self], ids[out[j - 1]]) > dv) {
			out[j] = out[j - 1];
			j--;
		}
		out[j] = v;
	}
}

uint64_t ntopo_default_cap(uint64_t mem_total, uint64_t mem_free, uint64_t region)
{
	uint64_t reserve = mem_total / 8, cap;

	if (reserve < NTOPO_RESERVE_MIN)
		reserve = NTOPO_RESERVE_MIN;
	cap = mem_free > reserve ? mem_free - reserve : 0;
	if (cap > region)
		cap = region;
	return cap & ~((uint64_t)SLAB_SIZE - 1);
}

static const char *const policy_names[NUMA_POL_NR] = {
	[NUMA_POL_PREFERRED] = "preferred",
	[NUMA_POL_BIND] = "bind",
	[NUMA_POL_INTERLEAVE] = "interleave",
};

int numa_policy_parse(const char *s)
{
	for (int i = 0; i < NUMA_POL_NR; i++)
		if (s != NULL && strcmp(s, policy_names[i]) == 0)
			return i;
	return -1;
}

const char *numa_policy_name(unsigned policy)
{
	return policy < NUMA_POL_NR ? policy_names[policy] : "unknown";
}

int ntopo_mbind(void *addr, uint64_t len, unsigned policy, unsigned kernel_node,
		const uint8_t *ids, uint32_t n, char *err, size_t errlen)
{
	unsigned long mask[NTOPO_KNODES / (8 * sizeof(unsigned long))] = { 0 };
	const unsigned long bits = 8 * sizeof(unsigned long);
	int mode;
	long rc;

	if (kernel_node >= NTOPO_KNODES)
		return fail(err, errlen, -EINVAL, "kernel node %u out of range", kernel_node);
	if (policy == NUMA_POL_INTERLEAVE) {
		for (uint32_t i = 0; i < n; i++)
			mask[ids[i] / bits] |= 1ul << (ids[i] % bits);
		mode = MPOL_INTERLEAVE;
	} else {
		mask[kernel_node / bits] |= 1ul << (kernel_node % bits);
		mode = policy == NUMA_POL_BIND ? MPOL_BIND : MPOL_PREFERRED_MANY;
	}
	/* maxnode: the kernel reads maxnode - 1 bits. */
	rc = syscall(SYS_mbind, addr, (unsigned long)len, mode, mask,
		     (unsigned long)NTOPO_KNODES + 1, 0ul);
	if (rc != 0 && errno == EINVAL && mode == MPOL_PREFERRED_MANY) {
		mode = MPOL_PREFERRED;       /* a kernel before 5.15 */
		rc = syscall(SYS_mbind, addr, (unsigned long)len, mode, mask,
			     (unsigned long)NTOPO_KNODES + 1, 0ul);
	}
	if (rc != 0)
		return fail(err, errlen, -errno, "mbind(%s, node %u) of %llu bytes: %s",
			    numa_policy_name(policy), kernel_node, (unsigned long long)len,
			    strerror(errno));
	return 0;
}

#define PAGE_Q 4096ull
#define BATCH  512u

int ntopo_pages_by_node(int fd, uint64_t fd_off, uint64_t len,
			uint64_t counts[NTOPO_KNODES])
{
	unsigned char vec[BATCH];
	void *pages[BATCH];
	int status[BATCH];
	char *m;
	int rc = 0;

	if (len == 0)
		return 0;
	m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, (off_t)fd_off);
	if (m == MAP_FAILED)
		return -errno;
	for (uint64_t off = 0; off < len && rc == 0; off += BATCH * PAGE_Q) {
		uint64_t chunk = len - off < BATCH * PAGE_Q ? len - off : BATCH * PAGE_Q;
		unsigned np = (unsigned)((chunk + PAGE_Q - 1) / PAGE_Q), nq = 0;

		if (mincore(m + off, chunk, vec) != 0) {
			rc = -errno;
			break;
		}
		for (unsigned i = 0; i < np; i++) {
			if (!(vec[i] & 1u))
				continue;
			pages[nq] = m + off + (uint64_t)i * PAGE_Q;
			/* A read maps the page the memfd holds (resident:
			 * nothing is allocated). */
			(void)*(volatile char *)pages[nq];
			nq++;
		}
		if (nq == 0)
			continue;
		if (syscall(SYS_move_pages, 0, (unsigned long)nq, pages, NULL, status, 0) != 0) {
			rc = -errno;
			break;
		}
		for (unsigned i = 0; i < nq; i++)
			if (status[i] >= 0 && status[i] < (int)NTOPO_KNODES)
				counts[status[i]]++;
	}
	munmap(m, len);
	return rc;
}

int ntopo_tune_key(const char *key)
{
	size_t kl = sizeof(NTOPO_CAP_KEY) - 1;
	char *end;
	unsigned long k;

	if (key == NULL || strncmp(key, NTOPO_CAP_KEY, kl) != 0 ||
	    key[kl] < '0' || key[kl] > '9')
		return -1;
	k = strtoul(key + kl, &end, 10);
	return *end == '\0' && k < NTOPO_KNODES ? (int)k : -1;
}
