/*
 * guest_place.c - where objects are: allocating and writing them (from
 * this thread on a pool node, or from a thread pinned to one CPU) and
 * counting their pages per kernel node by move_pages(2).
 */
#include <errno.h>
#include <numaif.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/helpers/util_check.h"
#include "tests/numa/guest_util.h"

void **objs_new(size_t n)
{
	void **objs = calloc(n, sizeof(void *));

	REQUIRE(objs != NULL, "calloc");
	return objs;
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)*(void *const *)a, y = (uintptr_t)*(void *const *)b;

	return x < y ? -1 : x > y;
}

void count_pages(void *const *objs, size_t n, size_t size, uint64_t per_kn[MAXN])
{
	size_t cap = n * (size / PAGE + 2), np = 0, k = 0;
	void **pages = malloc(cap * sizeof(*pages));
	int *status = malloc(cap * sizeof(*status));
	long rc;

	REQUIRE(pages != NULL && status != NULL, "malloc");
	memset(per_kn, 0, MAXN * sizeof(per_kn[0]));
	for (size_t i = 0; i < n; i++) {
		uintptr_t a = (uintptr_t)objs[i] & ~(PAGE - 1);
		uintptr_t end = ((uintptr_t)objs[i] + size - 1) & ~(PAGE - 1);

		for (; a <= end; a += PAGE)
			if (np == 0 || pages[np - 1] != (void *)a)
				pages[np++] = (void *)a;
	}
	/* Objects out of order may share pages too: sort, drop duplicates. */
	qsort(pages, np, sizeof(*pages), cmp_ptr);
	for (size_t i = 0; i < np; i++)
		if (k == 0 || pages[k - 1] != pages[i])
			pages[k++] = pages[i];
	np = k;
	rc = move_pages(0, np, pages, NULL, status, 0);
	REQUIRE(rc == 0, "move_pages of %zu pages: %s", np, strerror(errno));
	for (size_t i = 0; i < np; i++) {
		REQUIRE(status[i] >= 0 && status[i] < MAXN, "page %p: move_pages status %d (%s)",
			pages[i], status[i], status[i] < 0 ? strerror(-status[i]) : "?");
		per_kn[status[i]]++;
	}
	free(pages);
	free(status);
}

void show_pages(const char *what, const uint64_t per_kn[MAXN])
{
	printf("  %s:", what);
	for (int k = 0; k < MAXN; k++)
		if (per_kn[k] != 0)
			printf(" node%d=%llu", k, (unsigned long long)per_kn[k]);
	printf("\n");
}

void require_all_on(const uint64_t per_kn[MAXN], int kn, const char *what)
{
	uint64_t total = 0;

	for (int k = 0; k < MAXN; k++)
		total += per_kn[k];
	show_pages(what, per_kn);
	REQUIRE(total > 0, "%s: no pages", what);
	REQUIRE(per_kn[kn] == total, "%s: %llu of %llu pages on kernel node %d", what,
		(unsigned long long)per_kn[kn], (unsigned long long)total, kn);
}

void touch(void *const *objs, size_t n, size_t size, unsigned char tag)
{
	for (size_t i = 0; i < n; i++)
		memset(objs[i], tag, size);
}

void alloc_placed(sheaf_cache_t *c, void **objs, size_t n, size_t size, unsigned char tag,
		  uint64_t per_kn[MAXN])
{
	alloc_all(c, objs, n);
	touch(objs, n, size, tag);
	count_pages(objs, n, size, per_kn);
}

void alloc_homed(sheaf_pool_t *p, sheaf_cache_t *c, int idx, void **objs, size_t n,
		 size_t size, unsigned char tag, uint64_t per_kn[MAXN])
{
	REQUIRE(sheaf_thread_set_node(p, (unsigned)idx) == 0, "set_node %d", idx);
	alloc_placed(c, objs, n, size, tag, per_kn);
}

/* ---- a thread that runs on one CPU ---------------------------------------------- */

struct pinned {
	sheaf_cache_t *cache;
	int cpu;
	size_t n, size;
	void **objs;
	int err;                             /* errno of a failed step, 0 */
	const char *what;
};

/* Pinned to its CPU before its first call into libsheaf: its home node is
 * the one libsheaf derives from that CPU.  No REQUIRE here: the test's
 * thread reports what failed. */
static void *pinned_main(void *arg)
{
	struct pinned *t = arg;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(t->cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0) {
		t->err = errno;
		t->what = "sched_setaffinity";
		return NULL;
	}
	for (size_t i = 0; i < t->n; i++) {
		t->objs[i] = sheaf_alloc(t->cache);
		if (t->objs[i] == NULL) {
			t->err = errno;
			t->what = "sheaf_alloc";
			return NULL;
		}
		memset(t->objs[i], 0x5a, t->size);
	}
	sheaf_thread_exit();
	return NULL;
}

void **alloc_on_cpu(sheaf_cache_t *c, int cpu, size_t n, size_t size, uint64_t per_kn[MAXN])
{
	struct pinned t = { .cache = c, .cpu = cpu, .n = n, .size = size, .objs = objs_new(n) };
	pthread_t th;

	REQUIRE(pthread_create(&th, NULL, pinned_main, &t) == 0, "pthread_create");
	pthread_join(th, NULL);
	REQUIRE(t.err == 0, "thread on CPU %d: %s: %s", cpu, t.what, strerror(t.err));
	count_pages(t.objs, n, size, per_kn);
	return t.objs;
}
