/*
 * large.c - sheafbench's W10: large objects, one thread.  A round
 * allocates --batch B objects of --size bytes (B 1: single), writes the
 * first byte of every 4 KiB page of each, then frees them in allocation
 * order; about N objects (default 2*10^4) are timed after two untimed
 * rounds.  Figure: ns per object (its alloc, page writes and free).
 * sheaf: sheaf_malloc / sheaf_free_any on the contender's local pool (its
 * large kmalloc classes); malloc: malloc / free (glibc, or whatever is
 * LD_PRELOADed).  A large allocator that gives pages back at every free,
 * or maps fresh ones at every alloc, pays a page fault per page here;
 * one that keeps them pays the page writes alone.  After the run, for
 * sheaf, no object of the size's class may be in use and the pool
 * checker must pass.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tests/bench/bench.h"

#define PAGE 4096u

static inline __attribute__((always_inline))
void *large_alloc(const struct contender *c, enum family f, size_t size)
{
	unsigned char *p = f == FAM_SHEAF ? sheaf_malloc(c->pool, size) : malloc(size);

	if (__builtin_expect(p == NULL, 0))
		die("%s: allocation of %zu bytes returned NULL (errno %d)",
		    alloc_names[c->kind], size, errno);
	for (size_t off = 0; off < size; off += PAGE)
		p[off] = FIRST_BYTE_MARK;
	escape(p);
	return p;
}

static inline __attribute__((always_inline))
uint64_t w10_round(const struct contender *c, enum family f, void **objs, size_t batch,
		   size_t size)
{
	uint64_t refused = 0;

	for (size_t i = 0; i < batch; i++)
		objs[i] = large_alloc(c, f, size);
	escape(objs);
	for (size_t i = 0; i < batch; i++) {
		if (f == FAM_SHEAF)
			refused += sheaf_free_any(c->pool, objs[i]) != 0;
		else
			free(objs[i]);
	}
	return refused;
}

static uint64_t w10_rounds(const struct contender *c, void **objs, size_t batch,
			   size_t size, uint64_t rounds)
{
	uint64_t refused = 0;

	for (uint64_t r = 0; r < rounds; r++) {
		if (family_of(c) == FAM_SHEAF)
			refused += w10_round(c, FAM_SHEAF, objs, batch, size);
		else
			refused += w10_round(c, FAM_MALLOC, objs, batch, size);
	}
	return refused;
}

/* Objects in use in the class of @size. */
static uint64_t class_in_use(const struct contender *c, size_t size)
{
	char name[48];
	struct sheaf_stats st;
	sheaf_cache_t *k;
	size_t cls = 1;

	while (cls < size)
		cls <<= 1;
	snprintf(name, sizeof(name), "kmalloc-%zu", cls);
	k = sheaf_cache_open(c->pool, name);
	if (k == NULL)
		return 0;
	if (sheaf_cache_stats(k, -1, &st) != 0)
		die("sheaf_cache_stats(%s) failed", name);
	return st.in_use;
}

struct result run_w10(const struct contender *c, size_t batch, size_t size, uint64_t count)
{
	struct result r = { .metric = "ns_per_obj", .unit = "ns/obj" };
	uint64_t before = 0, t0, t1, rounds = (count + batch - 1) / batch;
	void **objs = calloc(batch, sizeof(*objs));

	if (!objs)
		die("no memory for a %zu-pointer array", batch);
	if (rounds < 3)
		rounds = 3;
	if (uses_sheaf(c))
		before = class_in_use(c, size);
	check_refused_frees(c, w10_rounds(c, objs, batch, size, 2));    /* warm-up */
	t0 = now_ns();
	check_refused_frees(c, w10_rounds(c, objs, batch, size, rounds));
	t1 = now_ns();
	free(objs);
	r.rounds = rounds;
	r.count = rounds * batch;
	r.seconds = (double)(t1 - t0) / 1e9;
	r.value = (double)(t1 - t0) / (double)r.count;
	if (uses_sheaf(c)) {
		uint64_t after = class_in_use(c, size);

		if (after != before)
			die("sheaf: %" PRIu64 " objects of %zu bytes in use after every free "
			    "(%" PRIu64 " before)", after, size, before);
		sheaf_check_or_die(c, "with the thread's sheaves held");
	}
	return r;
}
