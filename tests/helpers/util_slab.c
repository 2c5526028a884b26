/*
 * util_slab.c - the pool and engine under test of the slab tests, and
 * helpers that drive and check them (see util_slab.h).
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "shm/engine/check.h"
#include "shm/engine/engine.h"
#include "shm/pool.h"
#include "shm/engine/slab.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_slab.h"

struct shm_pool P;
struct engine E;
char ERR[512];
static int engine_up;                   /* E initialised: pool_down ends it */

double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Deterministic PRNG (xorshift64*). */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

uint32_t rnd_below(uint32_t n)
{
	return (uint32_t)(rnd() % n);
}

void shuffle(uint64_t *a, uint32_t n)
{
	for (uint32_t i = n; i > 1; i--) {
		uint32_t j = rnd_below(i);
		uint64_t t = a[i - 1];
		a[i - 1] = a[j];
		a[j] = t;
	}
}

/* ---- pool, engine and cache helpers ---------------------------------- */

void pool_up(uint32_t nodes, uint64_t size)
{
	/* No sheaves are used here; fewer make pool_check's ring walk cheaper
	 * under the sanitizers. */
	struct pool_params pp = { .size = size, .nodes = nodes,
				  .sheaf_count = test_san() ? 256 : 1024 };
	int rc;

	rc = pool_create(&P, &pp, ERR, sizeof ERR);
	ck_assert_msg(rc == 0, "pool_create(%u nodes): %d %s", nodes, rc, ERR);
	ck_assert_uint_eq(P.nodes, nodes);
	rc = engine_init(&E, &P, ERR, sizeof ERR);
	ck_assert_msg(rc == 0, "engine_init: %d %s", rc, ERR);
	engine_up = 1;
}

void pool_down(void)
{
	if (engine_up)
		engine_fini(&E);
	engine_up = 0;
	if (P.base != NULL || P.meta_fd >= 0)
		pool_unmap(&P);
	memset(&P, 0, sizeof(P));
	P.meta_fd = P.shared_fd = P.meta_ro_fd = -1;
}

void slab_setup(void)
{
	memset(&P, 0, sizeof(P));
	P.meta_fd = P.shared_fd = P.meta_ro_fd = -1;
	engine_up = 0;
	rng_state = 0x9e3779b97f4a7c15ull;
}

void slab_teardown(void)
{
	pool_down();
}

uint32_t cache_new(const char *name, uint32_t size, uint32_t align, uint32_t min_partial)
{
	struct cache_params cp = {
		.size = size, .align = align, .capacity = -1,
		.min_partial = min_partial,
	};
	int id = engine_cache_create(&E, name, &cp, ERR, sizeof ERR);

	ck_assert_msg(id >= 0, "engine_cache_create(%s, %u, %u): %d %s",
		      name, size, align, id, ERR);
	return (uint32_t)id;
}

void check_pool_at(int64_t in_use, int line)
{
	struct check_report rep;
	char err[512] = "";
	int rc = pool_check(&P, -1, in_use, &rep, err, sizeof err);

	REQUIRE(rc == 0, "line %d: pool_check(expect %lld in use): %d: %s",
		line, (long long)in_use, rc, err);
}

int64_t fd_blocks(void)
{
	struct stat st;

	ck_assert_int_eq(fstat(P.shared_fd, &st), 0);   /* the slab frames' memfd */
	return (int64_t)st.st_blocks;
}

uint64_t frames_used(void)
{
	return atomic_load(&P.hdr->frames_used);
}

uint64_t stat_sum(uint32_t c, enum sheaf_stat st)
{
	uint64_t s = 0;

	for (uint32_t n = 0; n < P.nodes; n++)
		s += atomic_load(&pool_cnode(&P, c, n)->stat[st]);
	return s;
}

/* Allocate @n objects in batches of varying size; returns the number got
 * (stops at the first short batch). */
uint32_t alloc_n(uint32_t c, uint32_t node, uint64_t *out, uint32_t n)
{
	static const uint32_t batch[] = { 1, 7, 64, 255, 1000, 3, 4096 };
	uint32_t got = 0, k = 0;

	while (got < n) {
		uint32_t want = batch[k++ % 7], g;

		if (want > n - got)
			want = n - got;
		g = slab_alloc_objs(&P, c, node, out + got, want, 0);
		got += g;
		if (g < want)
			break;
	}
	return got;
}

/* Free @n objects in batches; returns the number refused. */
uint32_t free_n(uint32_t c, const uint64_t *objs, uint32_t n)
{
	static const uint32_t batch[] = { 5, 300, 1, 2048, 77 };
	uint32_t done = 0, k = 0, bad = 0;

	while (done < n) {
		uint32_t m = batch[k++ % 5];
		if (m > n - done)
			m = n - done;
		bad += slab_free_objs(&P, c, objs + done, m);
		done += m;
	}
	return bad;
}

/* Every object of @objs: in the data range of @node, in a slab frame of
 * cache @c on @node, inside [frame, frame + slab_bytes), on an object
 * boundary, aligned to the cache's align (offset and address). */
void verify_placement(uint32_t c, uint32_t node, const uint64_t *objs, uint32_t n)
{
	const struct shm_cache *sc = &P.caches[c];
	uint64_t node_lo = P.data_off + (uint64_t)node * P.hdr->node_bytes;
	uint64_t node_hi = node_lo + P.hdr->node_bytes;

	for (uint32_t i = 0; i < n; i++) {
		uint64_t off = objs[i];
		uint32_t f;
		uint64_t rel;

		REQUIRE(off >= P.data_off && off - P.data_off < P.data_len,
			"obj %u %#llx outside the data region", i, (unsigned long long)off);
		REQUIRE(off >= node_lo && off < node_hi,
			"obj %u %#llx not in node %u's data range", i,
			(unsigned long long)off, node);
		f = pool_frame_of(&P, off);
		REQUIRE(pool_node_of_frame(&P, f) == node,
			"obj %u in frame %u of node %u, asked node %u", i, f,
			pool_node_of_frame(&P, f), node);
		REQUIRE(atomic_load(&P.frame_owner[f]) == c && P.slabs[f].cache == c &&
			P.slabs[f].node == node,
			"obj %u frame %u owner %u slab cache %u node %u", i, f,
			atomic_load(&P.frame_owner[f]), P.slabs[f].cache, P.slabs[f].node);
		rel = off - pool_frame_off(&P, f);
		REQUIRE(rel < sc->slab_bytes && rel + sc->obj_size <= sc->slab_bytes,
			"obj %u rel %llu beyond slab bytes %u", i,
			(unsigned long long)rel, sc->slab_bytes);
		REQUIRE(rel % sc->obj_size == 0, "obj %u rel %llu off boundary (size %u)",
			i, (unsigned long long)rel, sc->obj_size);
		REQUIRE(off % sc->align == 0 &&
			(uintptr_t)(P.base + off) % sc->align == 0,
			"obj %u %#llx not aligned to %u", i, (unsigned long long)off,
			sc->align);
		REQUIRE(slab_validate(&P, c, off) == 0, "slab_validate refuses obj %u", i);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* All distinct and non-overlapping (objects of @size bytes). */
void verify_distinct(const uint64_t *objs, uint32_t n, uint32_t size)
{
	uint64_t *s = malloc((size_t)n * sizeof(*s) + 1);

	ck_assert_ptr_nonnull(s);
	memcpy(s, objs, (size_t)n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_u64);
	for (uint32_t i = 1; i < n; i++)
		REQUIRE(s[i] - s[i - 1] >= size,
			"objects %#llx and %#llx overlap (size %u)",
			(unsigned long long)s[i - 1], (unsigned long long)s[i], size);
	free(s);
}

static uint64_t pattern(uint64_t seed, uint32_t i, uint32_t w)
{
	return (seed ^ ((uint64_t)i << 20) ^ w) * 0x9e3779b97f4a7c15ull + i;
}

/* Write every byte of every object: memset, then a per-object pattern. */
void fill_objs(const uint64_t *objs, uint32_t n, uint32_t size, uint64_t seed)
{
	for (uint32_t i = 0; i < n; i++) {
		uint64_t *w = (uint64_t *)(void *)(P.base + objs[i]);

		memset(w, 0xa5, size);
		for (uint32_t k = 0; k < size / 8; k++)
			w[k] = pattern(seed, i, k);
	}
}

void verify_objs(const uint64_t *objs, uint32_t n, uint32_t size, uint64_t seed)
{
	for (uint32_t i = 0; i < n; i++) {
		const uint64_t *w = (const uint64_t *)(const void *)(P.base + objs[i]);

		for (uint32_t k = 0; k < size / 8; k++)
			REQUIRE(w[k] == pattern(seed, i, k),
				"obj %u (%#llx) word %u overwritten", i,
				(unsigned long long)objs[i], k);
	}
}

uint32_t list_count(uint32_t c, uint32_t node, enum slab_list l)
{
	return pool_cnode(&P, c, node)->lists[l].count;
}
