/*
 * test_vet.c - a client's check of the full sheaves it takes from a barn
 * (client/vet.c; docs/design.md, "What a client checks"): whatever a peer
 * wrote into a sheaf's offsets, sheaf_alloc returns only objects of its own
 * cache's slabs.  A barn's sheaves get another cache's objects and junk;
 * one bad offset of each kind lands in each lane of the four-at-a-time
 * test; that test runs side by side with the scalar one over random
 * mixtures; a sheaf taken hands its objects out in rising addresses, and a
 * client that dies while it copies them loses none.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "client/sheaf.h"
#include "client/internal.h"
#include "client/vet.h"
#include "shm/barn.h"
#include "shm/engine/slab.h"
#include "shm/bounds.h"
#include "shm/engine/clients.h"
#include "shm/engine/engine.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_pool.h"
#include "tests/helpers/util_proc.h"

/* Offsets the clients of this process refused so far (every kind). */
static uint64_t refusals(void)
{
	return untrusted_total();
}

struct grab {
	sheaf_cache_t *c;
	unsigned n, bad;
};

/* In a fresh thread (no sheaf of its own yet): @n allocs, each checked. */
static void *grab_thread(void *arg)
{
	struct grab *g = arg;
	struct shm_pool *sp = &g->c->pool->shm;

	for (unsigned i = 0; i < g->n; i++) {
		void *o = sheaf_alloc(g->c);

		if (o == NULL)
			break;
		if (slab_validate(sp, g->c->id, (uint64_t)((char *)o - sp->base)) != 0)
			g->bad++;
	}
	return NULL;
}

/* Stock cache @a's barn on node 0 (its churn, the worker's refill) until it
 * holds @want full sheaves or 5 s pass; then the sheaves in its full ring's
 * valid slots, at most @max of them, into @out.  Returns their number. */
static unsigned barn_full_sheaves(sheaf_cache_t *a, uint32_t want,
				  struct shm_sheaf **out, unsigned max)
{
	struct shm_pool *sp = &a->pool->shm;
	struct ring_ref full = pool_full_ref(sp, a->id, 0);
	int64_t t0 = now_ms();
	unsigned n = 0;

	churn_checked(a, 10);
	while (ring_count(&full) < want && now_ms() - t0 < 5000) {
		node_ring_doorbell(sp, 0);
		sleep_us(1000);
	}
	for (uint32_t i = 0; i <= full.mask && n < max; i++) {
		uint64_t v = at_load_relaxed(&full.r->slots[i]);
		uint32_t s = (uint32_t)v;

		/* Acquire: pairs with the put's release of the owner entry
		 * (ring.c [R1]), after the worker's stores of the objects. */
		if (((uint32_t)(v >> 32) & full.mask) == 1 && s < sp->sheaf_count &&
		    at_load_acquire(&sp->owners[s]) == OWNER_RING(full.id))
			out[n++] = pool_sheaf(sp, s);
	}
	return n;
}

/* The full sheaves of cache A's barn get offsets of cache B's objects (and
 * garbage): sheaf_alloc on A never returns them. */
START_TEST(barn_sheaf_foreign_offsets)
{
	sheaf_pool_t *p = pool_small(1);
	sheaf_cache_t *a = mkcache(p, "a", 64, 32, 0), *b = mkcache(p, "b", 64, 32, 0);
	struct shm_pool *sp = &p->shm;
	struct shm_sheaf *shv[64];
	void *bo[64];
	uint64_t before = refusals();
	unsigned scribbled;
	struct grab g = { a, 2000, 0 };
	pthread_t t;

	for (int i = 0; i < 64; i++)
		bo[i] = xalloc(b);
	scribbled = barn_full_sheaves(a, 2, shv, 64);
	for (unsigned j = 0; j < scribbled; j++) {
		struct shm_sheaf *sh = shv[j];

		for (uint32_t k = 0; k < sheaf_size(sh); k++)
			sh->objs[k] = k % 3 == 0 ? (uint64_t)((char *)bo[k % 64] - sp->base) :
				      k % 3 == 1 ? 0xdeadbeefull : sp->data_off + 8;
	}
	ck_assert_uint_gt(scribbled, 0);
	ck_assert_int_eq(pthread_create(&t, NULL, grab_thread, &g), 0);
	pthread_join(t, NULL);
	ck_assert_msg(g.bad == 0, "%u objects of another cache or nowhere returned", g.bad);
	ck_assert_uint_gt(refusals(), before);
	printf("barn scribble: %u sheaves, %llu refusals\n", scribbled,
	       (unsigned long long)(refusals() - before));
	for (int i = 0; i < 64; i++)
		ck_assert_int_eq(sheaf_free(b, bo[i]), 0);
	sheaf_pool_destroy(p);
}
END_TEST

/* One bad offset in each full sheaf of A's barn, at a different place in
 * each (every lane of vet.c's four-at-a-time test) and of a different kind
 * each: inside one of A's objects, B's object, before the data, past it,
 * huge, a frame nobody owns.  Each is dropped, the rest served. */
START_TEST(barn_sheaf_one_bad_offset)
{
	sheaf_pool_t *p = pool_small(1);
	sheaf_cache_t *a = mkcache(p, "a", 64, 32, 0), *b = mkcache(p, "b", 64, 32, 0);
	struct shm_pool *sp = &p->shm;
	struct shm_sheaf *shv[64];
	void *bo = xalloc(b);
	uint64_t before, kinds[6];
	unsigned scribbled = 0, got;
	struct grab g = { a, 2000, 0 };
	pthread_t t;

	ck_assert_ptr_nonnull(bo);
	at_store_relaxed(&a->sc->barn_low, 8);
	at_store_relaxed(&a->sc->barn_high, 8);
	got = barn_full_sheaves(a, 8, shv, 64);
	ck_assert_uint_ge(got, 4);
	before = refusals();
	for (unsigned j = 0; j < got; j++) {
		struct shm_sheaf *sh = shv[j];
		uint32_t n = sheaf_size(sh), k;

		if (n == 0)
			continue;
		k = (scribbled * 5 + 1) % n;
		kinds[0] = sh->objs[(k + 1) % n] + 8;                /* inside an object of A */
		kinds[1] = (uint64_t)((char *)bo - sp->base);          /* B's */
		kinds[2] = sp->data_off - 64;                          /* before the data */
		kinds[3] = sp->data_off + sp->data_len;                /* just past it */
		kinds[4] = 1ull << 63;
		kinds[5] = sp->data_off + sp->data_len - SLAB_SIZE;   /* last frame: nobody's */
		sh->objs[k] = kinds[scribbled % 6];
		scribbled++;
	}
	ck_assert_uint_ge(scribbled, 4);
	ck_assert_uint_ne(at_load_relaxed(&sp->frame_owner[sp->frames_total - 1]), a->id);
	ck_assert_int_eq(pthread_create(&t, NULL, grab_thread, &g), 0);
	pthread_join(t, NULL);
	ck_assert_msg(g.bad == 0, "%u bad objects returned", g.bad);
	ck_assert_uint_ge(refusals() - before, scribbled);
	printf("one bad offset: %u sheaves, %llu refusals\n", scribbled,
	       (unsigned long long)(refusals() - before));
	ck_assert_int_eq(sheaf_free(b, bo), 0);
	sheaf_pool_destroy(p);
}
END_TEST

struct order {
	sheaf_cache_t *c;
	unsigned n;
	uintptr_t got[64];
};

/* In a fresh thread: @n allocs, their addresses in order. */
static void *order_thread(void *arg)
{
	struct order *o = arg;

	for (unsigned i = 0; i < o->n; i++) {
		void *x = sheaf_alloc(o->c);

		/* EAGAIN: the engine was slower than wait_ms (100 ms) */
		for (int64_t end = now_ms() + 10000; x == NULL && errno == EAGAIN && now_ms() < end;)
			x = sheaf_alloc(o->c);
		o->got[i] = (uintptr_t)x;
	}
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* A sheaf taken from a barn hands its objects out in rising addresses
 * (vet_rising copies them, lowest on top, into the empty main sheaf),
 * whichever way its offsets were stored: the barn's full sheaves sorted up,
 * then (a second pool) down.  A fresh thread's first sheaf has no empty
 * main to go to (popped as stored); its second rises both times.  Without
 * the copy, the sorted-up one (popped from the top, the highest) falls. */
START_TEST(barn_sheaf_rising_order)
{
	for (int down = 0; down < 2; down++) {
		sheaf_pool_t *p = pool_small(1);
		sheaf_cache_t *a = mkcache(p, "a", 64, 32, 0);
		struct shm_sheaf *shv[64];
		struct order o = { a, 64, { 0 } };
		unsigned got = barn_full_sheaves(a, 3, shv, 64);
		pthread_t t;

		ck_assert_uint_ge(got, 2);
		for (unsigned j = 0; j < got; j++) {
			uint32_t n = sheaf_size(shv[j]);

			ck_assert_uint_eq(n, 32);
			qsort(shv[j]->objs, n, sizeof(shv[j]->objs[0]), cmp_u64);
			if (down)
				for (uint32_t i = 0; i < n / 2; i++) {
					uint64_t x = shv[j]->objs[i];

					shv[j]->objs[i] = shv[j]->objs[n - 1 - i];
					shv[j]->objs[n - 1 - i] = x;
				}
		}
		ck_assert_int_eq(pthread_create(&t, NULL, order_thread, &o), 0);
		pthread_join(t, NULL);
		for (unsigned i = 0; i < o.n; i++) {
			ck_assert(o.got[i] != 0);
			if (i > 32)             /* the second sheaf */
				ck_assert_msg(o.got[i] > o.got[i - 1],
					      "sorted %s: alloc %u at %#lx after %#lx",
					      down ? "down" : "up", i,
					      (unsigned long)o.got[i], (unsigned long)o.got[i - 1]);
		}
		for (unsigned i = 0; i < o.n; i++)
			ck_assert_int_eq(sheaf_free(a, (void *)o.got[i]), 0);
		sheaf_pool_destroy(p);
	}
}
END_TEST

static jmp_buf rising_death;

static void rising_die(void)
{
	longjmp(rising_death, 1);
}

/* What the repair's refill hook took from the slabs (see below). */
static uint64_t refill_objs[SHEAF_CAP_MAX];
static uint32_t refill_n;

/* A worker's refill right after the repair gave objects back: takes as
 * many as a sheaf holds, once. */
static void refill_hook(struct shm_pool *p, uint32_t cache)
{
	if (refill_n == 0)
		refill_n = slab_alloc_objs(p, cache, 0, refill_objs, SHEAF_CAP_MAX, 0);
}

/* A client that dies inside vet_rising's copy, after the empty sheaf got
 * the objects and before the full one gave them up (@die; else after
 * vet_rising), is repaired: both its sheaves go back to the slabs, the
 * second copy of each object is refused as already free (flush_invalid,
 * one per object when it died there, none otherwise), none is lost (the
 * walk and the counters agree), and every object of the cache can be
 * allocated again.  With @refill, a refill takes objects from the slabs
 * each time the repair gave some back: none of them is freed again by
 * the repair (a second copy freed after the refill would be). */
static void rising_death_case(int die, int refill)
{
	sheaf_pool_t *p = pool_small(1);
	sheaf_cache_t *c = mkcache(p, "dup", 64, 32, 0);
	struct shm_pool *sp = &p->shm;
	int id = client_attach(sp, (uint32_t)getpid(), (uint32_t)getuid(), "victim");
	struct shm_lane *l;
	uint32_t s = SHEAF_ID_NONE, e = SHEAF_ID_NONE, n;
	uint64_t invalid0 = stat_count(c, -1, "flush_invalid");
	struct sheaf_stats st;
	char err[256] = "";
	int dep;

	ck_assert_int_ge(id, 0);
	ck_assert_ptr_nonnull(l = client_lane_acquire(sp, (uint32_t)id, 0));
	for (int tries = 0; tries < 1000 && s == SHEAF_ID_NONE; tries++) {
		node_ring_doorbell(sp, 0);
		s = barn_get_full(sp, c->id, 0, (uint32_t)id, &l->intent);
		if (s == SHEAF_ID_NONE)
			sleep_us(1000);
	}
	ck_assert_uint_ne(s, SHEAF_ID_NONE);
	e = barn_get_empty(sp, c->id, 0, 32, (uint32_t)id, &l->intent, &dep);
	ck_assert_uint_ne(e, SHEAF_ID_NONE);
	n = sheaf_size(pool_sheaf(sp, s));
	ck_assert_uint_ge(n, 2);
	ck_assert_uint_lt(pool_sheaf(sp, s)->objs[0], pool_sheaf(sp, s)->objs[n - 1]);
	vet_rising_hook = die ? rising_die : NULL;
	if (setjmp(rising_death) == 0) {
		ck_assert_ptr_eq(vet_rising(pool_sheaf(sp, e), pool_sheaf(sp, s)), pool_sheaf(sp, e));
		ck_assert_int_eq(die, 0);
	}
	vet_rising_hook = NULL;
	ck_assert_uint_eq(sheaf_size(pool_sheaf(sp, e)), n);
	ck_assert_uint_eq(sheaf_size(pool_sheaf(sp, s)), die ? n : 0);
	refill_n = 0;
	repair_flushed_hook = refill ? refill_hook : NULL;
	ck_assert_int_ge(engine_reclaim_client(&p->engine, (uint32_t)id), 1);
	repair_flushed_hook = NULL;
	ck_assert_uint_eq(stat_count(c, -1, "flush_invalid") - invalid0, die ? n : 0);
	if (refill) {
		ck_assert_uint_ge(refill_n, n);
		ck_assert_msg(slab_free_objs(sp, c->id, refill_objs, refill_n) == 0,
			      "the repair freed objects a refill had taken after it");
	}
	ck_assert_int_eq(sheaf_cache_stats(c, -1, &st), 0);
	ck_assert_uint_eq(st.in_use, 0);
	ck_assert_msg(sheaf_pool_check(p, err, sizeof(err)) == 0, "check: %s", err);
	sheaf_pool_destroy(p);
}

/* vet_rising reads the size again: one a peer wrote after the check,
 * over objs[], with an empty sheaf whose capacity is as large (both
 * client-writable), gets no copy, and nothing past either objs[] is
 * read as a rise or written (sheaves in heap memory with room after
 * them: rising entries past the full one, a canary past the empty one). */
START_TEST(rising_bounded_size)
{
	struct fake { struct shm_sheaf sh; uint64_t past[64]; };
	struct fake *fs = calloc(1, sizeof(*fs)), *fe = calloc(1, sizeof(*fe));

	ck_assert_ptr_nonnull(fs);
	ck_assert_ptr_nonnull(fe);
	fs->sh.capacity = SHEAF_CAP_MAX;
	for (uint32_t i = 0; i < SHEAF_CAP_MAX; i++)
		fs->sh.objs[i] = 64 + 64 * (uint64_t)i;
	for (uint32_t k = 0; k < 64; k++) {
		fs->past[k] = 1ull << 40;
		fe->past[k] = 0x5a5a5a5a5a5a5a5aull;
	}
	sheaf_set_size(&fs->sh, SHEAF_CAP_MAX + 40);
	fe->sh.capacity = 1000;
	ck_assert_ptr_eq(vet_rising(&fe->sh, &fs->sh), &fs->sh);
	ck_assert_uint_eq(sheaf_size(&fe->sh), 0);
	for (uint32_t k = 0; k < 64; k++)
		ck_assert_uint_eq(fe->past[k], 0x5a5a5a5a5a5a5a5aull);
	/* The same sheaves with a size in bounds: copied, lowest on top. */
	sheaf_set_size(&fs->sh, SHEAF_CAP_MAX);
	ck_assert_ptr_eq(vet_rising(&fe->sh, &fs->sh), &fe->sh);
	ck_assert_uint_eq(sheaf_size(&fe->sh), SHEAF_CAP_MAX);
	ck_assert_uint_eq(sheaf_size(&fs->sh), 0);
	ck_assert_uint_eq(fe->sh.objs[SHEAF_CAP_MAX - 1], 64);
	ck_assert_uint_eq(fe->sh.objs[0], 64 + 64 * (uint64_t)(SHEAF_CAP_MAX - 1));
	ck_assert_uint_eq(fe->past[0], 0x5a5a5a5a5a5a5a5aull);
	free(fs);
	free(fe);
}
END_TEST

START_TEST(rising_copy_death)
{
	rising_death_case(1, 0);
	rising_death_case(0, 0);
	rising_death_case(1, 1);
}
END_TEST

/* vet.c's four-at-a-time test against its scalar one (vet_test_compare,
 * libsheaf-test.a), on offsets of every kind in random mixtures and
 * lengths: valid objects of A from several slabs, B's, inside objects,
 * before, past and far from the data, frame edges.  Without AVX2 the case
 * says so and passes only when SHEAF_TEST_SKIP_OK=1 (util_check.h). */
START_TEST(vet_avx2_matches_scalar)
{
	sheaf_pool_t *p = pool_small(1);
	sheaf_cache_t *a = mkcache(p, "va", 48, 32, 0), *b = mkcache(p, "vb", 64, 32, 0);
	struct shm_pool *sp = &p->shm;
	enum { NA = 20000, NB = 64, ROUNDS = 20000 };
	void **ao = malloc(NA * sizeof(*ao)), *bo[NB];
	uint64_t objs[SHEAF_CAP_MAX], rng = 0x9e3779b97f4a7c15ull, valid_all = 0;

	ck_assert_ptr_nonnull(ao);
	ao[0] = xalloc(a);
	if (vet_test_compare(a, objs, 0) < 0) {
		ck_assert_int_eq(sheaf_free(a, ao[0]), 0);
		free(ao);
		sheaf_pool_destroy(p);
		SKIP("vet_avx2_matches_scalar: no AVX2 on this CPU");
	}
	for (int i = 1; i < NA; i++)           /* A spans several slab frames */
		ao[i] = xalloc(a);
	for (int i = 0; i < NB; i++)
		bo[i] = xalloc(b);
	for (int r = 0; r < ROUNDS; r++) {
		uint32_t n = (uint32_t)(xorshift(&rng) % (SHEAF_CAP_MAX + 1));
		/* Most rounds all valid (one bad entry at most): the case the
		 * fast test must not get wrong either way. */
		uint32_t bad_every = r % 4 == 0 ? 0 : r % 4 == 1 ? n + 1 : 7;

		for (uint32_t i = 0; i < n; i++) {
			uint64_t x = xorshift(&rng);
			uint64_t aoff = (uint64_t)((char *)ao[x % NA] - sp->base);

			objs[i] = aoff;
			if (bad_every && (i % bad_every == 0 || (bad_every == n + 1 && i == x % (n ? n : 1))))
				switch ((x >> 20) % 8) {
				case 0: objs[i] = aoff + 1 + (x >> 40) % 47; break;
				case 1: objs[i] = (uint64_t)((char *)bo[x % NB] - sp->base); break;
				case 2: objs[i] = sp->data_off - 1 - (x >> 40) % 4096; break;
				case 3: objs[i] = sp->data_off + sp->data_len + (x >> 40) % 4096; break;
				case 4: objs[i] = x; break;
				case 5: objs[i] = (aoff & ~(uint64_t)(SLAB_SIZE - 1)) + SLAB_SIZE - 8; break;
				case 6: objs[i] = 1ull << (40 + (x >> 40) % 24); break;
				default: objs[i] = aoff - sp->data_off; break;
				}
		}
		ck_assert_msg(vet_test_compare(a, objs, n) == 1,
			      "round %d: the tests disagree (n %u)", r, n);
		valid_all += bad_every == 0;
	}
	ck_assert_uint_gt(valid_all, ROUNDS / 8);
	for (int i = 0; i < NA; i++)
		ck_assert_int_eq(sheaf_free(a, ao[i]), 0);
	for (int i = 0; i < NB; i++)
		ck_assert_int_eq(sheaf_free(b, bo[i]), 0);
	free(ao);
	sheaf_pool_destroy(p);
}
END_TEST

static Suite *vet_suite(void)
{
	Suite *s = suite_create("vet");
	TCase *tc = tcase_create("vet");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, barn_sheaf_foreign_offsets);
	tcase_add_test(tc, barn_sheaf_one_bad_offset);
	tcase_add_test(tc, vet_avx2_matches_scalar);
	tcase_add_test(tc, barn_sheaf_rising_order);
	tcase_add_test(tc, rising_copy_death);
	tcase_add_test(tc, rising_bounded_size);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(vet_suite());
}
