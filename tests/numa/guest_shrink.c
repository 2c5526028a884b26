/*
 * guest_shrink.c - mode shrink [2 nodes]: after the objects are freed,
 * `sheafctl shrink` gives each node's pages back (the node's Shmem and
 * pages_by_kernel_node fall).
 */
#include <stdio.h>
#include <stdlib.h>

#include "tests/helpers/util_check.h"
#include "tests/helpers/util_sheafctl.h"
#include "tests/numa/guest_util.h"

#define SHR_OBJ 4096
#define SHR_N   (64 * MIB / SHR_OBJ)

/* Each kernel node's Shmem (KiB) into @kb. */
static void shmem_kb(const int *mem, int nm, uint64_t *kb)
{
	for (int i = 0; i < nm; i++)
		kb[i] = node_meminfo_kb(mem[i], "Shmem");
}

START_TEST(shrink_per_node)
{
	int mem[MAXN], nm = multi_nodes(mem);
	void **objs[MAXN];
	uint64_t shmem0[MAXN], shmem1[MAXN], shmem2[MAXN], reg1[MAXN], reg2[MAXN], per_kn[MAXN];
	struct run r;
	sheaf_pool_t *p;
	sheaf_cache_t *c = start_with_cache("512M", NULL, "shr", SHR_OBJ, &p);

	shmem_kb(mem, nm, shmem0);
	for (int i = 0; i < nm; i++) {
		objs[i] = objs_new(SHR_N);
		alloc_homed(p, c, i, objs[i], SHR_N, SHR_OBJ, 7, per_kn);
		require_all_on(per_kn, mem[i], "the objects before the shrink");
	}
	shmem_kb(mem, nm, shmem1);
	for (int i = 0; i < nm; i++)
		reg1[i] = region_pages("shr", i, mem[i]);
	for (int i = 0; i < nm; i++) {
		free_all(c, objs[i], SHR_N);
		free(objs[i]);
	}
	sheaf_thread_exit();
	CTL(&r, "shrink");
	expect(&r, 0, "sheafctl shrink");
	run_free(&r);
	shmem_kb(mem, nm, shmem2);
	for (int i = 0; i < nm; i++)
		printf("  kernel node %d: Shmem %llu -> %llu -> %llu KiB\n", mem[i],
		       (unsigned long long)shmem0[i], (unsigned long long)shmem1[i],
		       (unsigned long long)shmem2[i]);
	for (int i = 0; i < nm; i++) {
		REQUIRE(shmem1[i] >= shmem0[i] + 56 * 1024, "node %d: Shmem rose by %lld KiB for "
			"64 MiB of objects", mem[i], (long long)(shmem1[i] - shmem0[i]));
		REQUIRE(shmem2[i] + 48 * 1024 <= shmem1[i], "node %d: Shmem fell by %lld KiB "
			"after the shrink", mem[i], (long long)(shmem1[i] - shmem2[i]));
	}
	for (int i = 0; i < nm; i++) {
		reg2[i] = region_pages("shr", i, mem[i]);
		printf("  pool node %d's pages on kernel node %d: %llu -> %llu\n", i, mem[i],
		       (unsigned long long)reg1[i], (unsigned long long)reg2[i]);
		REQUIRE(reg1[i] >= SHR_N * SHR_OBJ / PAGE, "node %d: %llu pages before", i,
			(unsigned long long)reg1[i]);
		REQUIRE(reg2[i] * 4 <= reg1[i], "node %d: %llu -> %llu pages after the shrink", i,
			(unsigned long long)reg1[i], (unsigned long long)reg2[i]);
	}
	stop_sheafd(p);
}
END_TEST

void add_shrink(Suite *s, int timeout)
{
	ADD_ALONE(s, shrink_per_node, timeout);
}
