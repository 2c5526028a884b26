/*
 * sizes.c - sheafbench's W8: mixed sizes through the size-class
 * API, one thread.  Every contender runs the same sequence of sizes:
 * SIZES_N sizes drawn uniformly from 8..1024 by a fixed-seed xorshift64*,
 * taken in order and wrapped (the sequence is made before timing; the
 * loops only index it).
 *   w8p  W1-shaped: allocate an object of the next size, write its first
 *        byte, free it; N pairs (default 10^8).  Figure: ns per pair.
 *   w8b  W2-shaped: allocate --batch B objects (default 4096) of the next B
 *        sizes, then free them in allocation order; about N operations
 *        (default 2*10^7, at least 3 rounds) after one untimed round.
 *        Figure: ns per operation.
 * sheaf: sheaf_malloc / sheaf_free_any on the contender's pool (its
 * kmalloc-<size> caches); malloc: malloc / free (glibc, or whatever is
 * LD_PRELOADed).  --sized: every free names the object's size, as a C++
 * sized delete does: sheaf_free_sized, or the preloaded allocator's own
 * sized free, looked up by name (jemalloc's sdallocx, tcmalloc's
 * tc_free_sized, mimalloc's mi_free_size, C23's free_sized; glibc 2.36
 * has none and frees with free).  After the run, for sheaf, no object of
 * any class may be left in use, and the pool checker must pass.
 */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/bench/bench.h"

#define SIZES_SEED  0x5eedf00dcafe1011ull
#define SIZE_MIN    8u
#define SIZE_MAX_   1024u

uint16_t sizes[SIZES_N];

void sizes_init(void)
{
	uint64_t x = SIZES_SEED;

	for (uint32_t i = 0; i < SIZES_N; i++) {
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		sizes[i] = (uint16_t)(SIZE_MIN + ((x * 0x2545f4914f6cdd1dull) >> 33) %
				      (SIZE_MAX_ - SIZE_MIN + 1));
	}
}

void (*bench_peer_free2)(void *, size_t);
void (*bench_peer_sdallocx)(void *, size_t, int);
static const char *peer_sized_name = "free";

static void peer_sized_init(void)
{
	static const char *const two[] = { "tc_free_sized", "mi_free_size", "free_sized" };
	void *f = dlsym(RTLD_DEFAULT, "sdallocx");

	if (f != NULL) {
		bench_peer_sdallocx = (void (*)(void *, size_t, int))f;
		peer_sized_name = "sdallocx";
		return;
	}
	for (size_t i = 0; i < sizeof(two) / sizeof(two[0]); i++)
		if ((f = dlsym(RTLD_DEFAULT, two[i])) != NULL) {
			bench_peer_free2 = (void (*)(void *, size_t))f;
			peer_sized_name = two[i];
			return;
		}
}

const char *sized_free_name(const struct contender *c)
{
	if (family_of(c) == FAM_SHEAF)
		return "sheaf_free_sized";
	peer_sized_init();
	return peer_sized_name;
}


/* ---- w8p ---------------------------------------------------------------- */

static inline __attribute__((always_inline))
uint64_t w8p_loop(const struct contender *c, enum family f, bool sized, uint64_t pairs)
{
	uint64_t refused = 0;

	for (uint64_t i = 0; i < pairs; i++) {
		size_t size = sizes[i & (SIZES_N - 1)];

		refused += sized_free_call(c, f, sized, class_alloc(c, f, size), size);
	}
	return refused;
}

static uint64_t w8p_pairs(const struct contender *c, bool sized, uint64_t pairs)
{
	if (family_of(c) == FAM_SHEAF)
		return sized ? w8p_loop(c, FAM_SHEAF, true, pairs)
			     : w8p_loop(c, FAM_SHEAF, false, pairs);
	return sized ? w8p_loop(c, FAM_MALLOC, true, pairs) : w8p_loop(c, FAM_MALLOC, false, pairs);
}

/* ---- w8b ---------------------------------------------------------------- */

static inline __attribute__((always_inline))
uint64_t w8b_loop(const struct contender *c, enum family f, bool sized, void **objs,
		  size_t batch, uint64_t *next)
{
	uint64_t refused = 0, k = *next;

	for (size_t i = 0; i < batch; i++)
		objs[i] = class_alloc(c, f, sizes[(k + i) & (SIZES_N - 1)]);
	escape(objs);
	for (size_t i = 0; i < batch; i++)
		refused += sized_free_call(c, f, sized, objs[i], sizes[(k + i) & (SIZES_N - 1)]);
	*next = k + batch;
	return refused;
}

static uint64_t w8b_rounds(const struct contender *c, bool sized, void **objs, size_t batch,
			   uint64_t rounds, uint64_t *next)
{
	uint64_t refused = 0;

	for (uint64_t r = 0; r < rounds; r++) {
		if (family_of(c) == FAM_SHEAF)
			refused += sized ? w8b_loop(c, FAM_SHEAF, true, objs, batch, next)
					 : w8b_loop(c, FAM_SHEAF, false, objs, batch, next);
		else
			refused += sized ? w8b_loop(c, FAM_MALLOC, true, objs, batch, next)
					 : w8b_loop(c, FAM_MALLOC, false, objs, batch, next);
	}
	return refused;
}

/* ---- the proof and the run ---------------------------------------------- */

/* Objects in use over the classes the sequence reaches (8..1024). */
uint64_t classes_in_use(const struct contender *c)
{
	static const unsigned cls[] = { 8, 16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224,
		256, 320, 384, 448, 512, 576, 640, 704, 768, 832, 896, 960, 1024 };
	uint64_t n = 0;

	for (size_t i = 0; i < sizeof(cls) / sizeof(cls[0]); i++) {
		char name[48];
		struct sheaf_stats st;
		sheaf_cache_t *k;

		snprintf(name, sizeof(name), "kmalloc-%u", cls[i]);
		k = sheaf_cache_open(c->pool, name);
		if (k == NULL)
			continue;       /* not used (yet) */
		if (sheaf_cache_stats(k, -1, &st) != 0)
			die("sheaf_cache_stats(%s) failed", name);
		n += st.in_use;
	}
	return n;
}

void classes_unchanged_or_die(const struct contender *c, uint64_t before, const char *when)
{
	uint64_t after;

	if (!uses_sheaf(c))
		return;
	after = classes_in_use(c);
	if (after != before)
		die("sheaf: %" PRIu64 " objects of the size classes in use %s (%" PRIu64
		    " before)", after, when, before);
	sheaf_check_or_die(c, when);
}

uint64_t wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct result run_w8(const struct contender *c, bool batched, bool sized, size_t batch,
		     uint64_t count)
{
	struct result r = { .metric = batched ? "ns_per_op" : "ns_per_pair",
			    .unit = batched ? "ns/op" : "ns/pair" };
	uint64_t before = 0, t0, t1, next = 0, rounds = 0;
	void **objs = NULL;

	sizes_init();
	if (sized)
		(void)sized_free_name(c);
	if (uses_sheaf(c))
		before = classes_in_use(c);
	if (!batched) {
		check_refused_frees(c, w8p_pairs(c, sized, count / 100 + 1));  /* warm-up */
		t0 = now_ns();
		check_refused_frees(c, w8p_pairs(c, sized, count));
		t1 = now_ns();
		r.count = count;
	} else {
		rounds = (count + 2 * batch - 1) / (2 * batch);
		if (rounds < W2_MIN_ROUNDS)
			rounds = W2_MIN_ROUNDS;
		objs = calloc(batch, sizeof(*objs));
		if (!objs)
			die("no memory for a %zu-pointer array", batch);
		check_refused_frees(c, w8b_rounds(c, sized, objs, batch, 1, &next));
		t0 = now_ns();
		check_refused_frees(c, w8b_rounds(c, sized, objs, batch, rounds, &next));
		t1 = now_ns();
		free(objs);
		r.rounds = rounds;
		r.count = rounds * 2 * batch;
	}
	r.seconds = (double)(t1 - t0) / 1e9;
	r.value = (double)(t1 - t0) / (double)r.count;
	classes_unchanged_or_die(c, before, "after every free, with the thread's sheaves held");
	return r;
}
