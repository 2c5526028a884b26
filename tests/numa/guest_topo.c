/*
 * guest_topo.c - the guest's topology as the kernel states it under
 * /sys/devices/system/node/: which nodes exist and have memory, each node's
 * CPUs, distances and meminfo.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers/util_check.h"
#include "tests/helpers/util_deploy.h"
#include "tests/helpers/util_proc.h"
#include "tests/numa/guest_util.h"

#define NODE_SYS "/sys/devices/system/node"

/* Parse a kernel list ("0-2,5") into @ids: the count. */
static int parse_list(const char *text, int *ids, int max)
{
	int n = 0;
	const char *p = text;

	while (p != NULL && *p != '\0' && *p != '\n') {
		char *end;
		long a = strtol(p, &end, 10), b = a;

		if (end == p)
			break;
		if (*end == '-')
			b = strtol(end + 1, &end, 10);
		for (long i = a; i <= b && n < max; i++)
			ids[n++] = (int)i;
		p = *end == ',' ? end + 1 : NULL;
	}
	return n;
}

/* The text of a sysfs file, required to be readable (free() it). */
static char *sys_text(const char *path)
{
	char *text = read_file(path);

	REQUIRE(text != NULL, "read %s: %s", path, strerror(errno));
	return text;
}

static int sys_list(const char *path, int *ids, int max)
{
	char *text = sys_text(path);
	int n = parse_list(text, ids, max);

	free(text);
	return n;
}

int mem_nodes(int *ids)
{
	return sys_list(NODE_SYS "/has_memory", ids, MAXN);
}

int multi_nodes(int *ids)
{
	int n = mem_nodes(ids);

	REQUIRE(n >= 2, "one memory node");
	return n;
}

int possible_nodes(int *ids)
{
	return sys_list(NODE_SYS "/possible", ids, MAXN);
}

int node_cpus(int kn, int *cpus)
{
	char path[96];

	fmt(path, sizeof(path), NODE_SYS "/node%d/cpulist", kn);
	return sys_list(path, cpus, 64);
}

int node_distances(int kn, int *d)
{
	char path[96], *text, *s, *end;
	int n;

	fmt(path, sizeof(path), NODE_SYS "/node%d/distance", kn);
	text = sys_text(path);
	s = text;
	for (n = 0; n < MAXN; n++) {
		long v = strtol(s, &end, 10);

		if (end == s)
			break;
		d[n] = (int)v;
		s = end;
	}
	free(text);
	return n;
}

uint64_t node_meminfo_kb(int kn, const char *key)
{
	char path[96], want[64], *text, *p;
	uint64_t v;

	fmt(path, sizeof(path), NODE_SYS "/node%d/meminfo", kn);
	fmt(want, sizeof(want), " %s:", key);
	text = sys_text(path);
	p = strstr(text, want);
	REQUIRE(p != NULL, "no %s in %s", key, path);
	v = strtoull(p + strlen(want), NULL, 10);
	free(text);
	return v;
}

int index_of(const int *ids, int n, int v)
{
	for (int i = 0; i < n; i++)
		if (ids[i] == v)
			return i;
	return -1;
}
