/*
 * test_pool_check.c - the pool checker (shm/engine/check.c) must be able to fail.
 *
 * Each test builds a small pool (2 simulated nodes) with one cache, takes
 * objects from the slabs (slab_alloc_objs), puts some of them in a sheaf in
 * the node-0 barn's full ring and some in a sheaf the engine holds, and
 * checks that pool_check passes with the right in-use count and report.
 * Then it breaks one rule by writing the shared structures directly and
 * requires pool_check to return -EUCLEAN with a message (printed): an object
 * twice in a sheaf or in two sheaves, an object both in a sheaf and free in
 * its slab's bitmap, a wrong in-use expectation, a slab's nfree changed, a
 * sheaf whose owner says RING(r) but that is in no ring slot, a sheaf object
 * off its boundary, and more (bitmap, counters, lists, ring slots, sheaf
 * size, debug in-use bits).  Where the corruption is easy to undo, undoing
 * it makes the pool check clean again.  The pool is rebuilt for every test
 * (checked fixture).
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shm/barn.h"
#include "shm/engine/check.h"
#include "shm/engine/engine.h"
#include "shm/pool.h"
#include "shm/engine/slab.h"
#include "tests/helpers/util_check.h"

#define MIB (1024ull * 1024ull)
#define N0 200          /* objects taken on node 0 */
#define N1 100          /* objects taken on node 1 */
#define IN_S1 40        /* of node 0's, in sheaf S1 (in the full ring) */
#define IN_S2 20        /* of node 1's, in sheaf S2 (held by the engine) */
#define IN_USE (N0 + N1 - IN_S1 - IN_S2)

static struct shm_pool P;
static struct engine E;
static int engine_up;
static char ERR[512];
static struct ring_intent IN;
static uint32_t C;                   /* the cache */
static uint64_t objs0[N0], objs1[N1];
static uint32_t S1, S2;

/* ---- fixture --------------------------------------------------------- */

static uint32_t take_empty_sheaf(uint32_t cache, uint32_t node)
{
	int dep = -1;
	uint32_t cap = atomic_load(&P.caches[cache].sheaf_capacity);
	uint32_t s = barn_get_empty(&P, cache, node, cap, OWNER_ENGINE, &IN, &dep);

	ck_assert_uint_ne(s, SHEAF_ID_NONE);
	ck_assert_int_eq(dep, 1);            /* the barn's empty ring is empty */
	ck_assert_uint_eq(atomic_load(&P.owners[s]), OWNER_ENGINE);
	ck_assert_uint_eq(sheaf_size(pool_sheaf(&P, s)), 0);
	ck_assert_uint_eq(pool_sheaf(&P, s)->capacity, cap);
	ck_assert_uint_eq(pool_sheaf(&P, s)->cache, cache);
	ck_assert_uint_eq(pool_sheaf(&P, s)->node, node);
	return s;
}

static void setup(void)
{
	struct pool_params pp = { .size = 64 * MIB, .nodes = 2, .sheaf_count = 1024 };
	struct cache_params cp = { .size = 64, .align = 8, .capacity = -1 };
	struct shm_sheaf *sh;
	int rc;

	memset(&IN, 0, sizeof(IN));
	rc = pool_create(&P, &pp, ERR, sizeof ERR);
	ck_assert_msg(rc == 0, "pool_create: %d %s", rc, ERR);
	rc = engine_init(&E, &P, ERR, sizeof ERR);
	ck_assert_msg(rc == 0, "engine_init: %d %s", rc, ERR);
	engine_up = 1;
	rc = engine_cache_create(&E, "chk", &cp, ERR, sizeof ERR);
	ck_assert_msg(rc >= 0, "engine_cache_create: %d %s", rc, ERR);
	C = (uint32_t)rc;
	ck_assert_uint_ge(atomic_load(&P.caches[C].sheaf_capacity), IN_S1);

	ck_assert_uint_eq(slab_alloc_objs(&P, C, 0, objs0, N0, 0), N0);
	ck_assert_uint_eq(slab_alloc_objs(&P, C, 1, objs1, N1, 0), N1);

	S1 = take_empty_sheaf(C, 0);
	sh = pool_sheaf(&P, S1);
	memcpy(sh->objs, objs0, IN_S1 * sizeof(uint64_t));
	sheaf_set_size(sh, IN_S1);
	ck_assert_uint_eq(barn_put_full(&P, C, 0, S1, OWNER_ENGINE, &IN), 1);
	ck_assert_uint_eq(atomic_load(&P.owners[S1]), OWNER_RING(ring_full_id(C, 0, P.nodes)));

	S2 = take_empty_sheaf(C, 1);
	sh = pool_sheaf(&P, S2);
	memcpy(sh->objs, objs1, IN_S2 * sizeof(uint64_t));
	sheaf_set_size(sh, IN_S2);
}

static void teardown(void)
{
	if (engine_up)
		engine_fini(&E);
	engine_up = 0;
	pool_unmap(&P);
}

/* ---- helpers --------------------------------------------------------- */

#define EXPECT_CLEAN(in_use) expect_clean_at((in_use), __LINE__)

static void expect_clean_at(int64_t in_use, int line)
{
	char err[512] = "";
	int rc = pool_check(&P, -1, in_use, NULL, err, sizeof err);

	ck_assert_msg(rc == 0, "line %d: pool_check(expect %lld): %d: %s", line,
		      (long long)in_use, rc, err);
	rc = pool_check(&P, (int)C, in_use, NULL, err, sizeof err);
	ck_assert_msg(rc == 0, "line %d: pool_check(cache %u): %d: %s", line, C, rc, err);
}

/* pool_check must find @what broken: -EUCLEAN and a message containing
 * @needle, both for every cache and for cache C alone. */
static void expect_broken(const char *what, int64_t in_use, const char *needle)
{
	struct check_report rep;
	char err[512] = "", err2[512] = "";
	int rc = pool_check(&P, -1, in_use, &rep, err, sizeof err);
	int rc2 = pool_check(&P, (int)C, in_use, NULL, err2, sizeof err2);

	printf("%-44s -> %d: %s\n", what, rc, err);
	ck_assert_msg(rc == -EUCLEAN, "%s: pool_check returned %d (%s)", what, rc, err);
	ck_assert_msg(err[0] != '\0', "%s: no message", what);
	ck_assert_msg(needle == NULL || strstr(err, needle) != NULL,
		      "%s: message \"%s\" does not name the rule (\"%s\")", what, err, needle);
	ck_assert_msg(rc2 == -EUCLEAN, "%s: pool_check(cache %u) returned %d (%s)",
		      what, C, rc2, err2);
}

static struct shm_sheaf *s1(void) { return pool_sheaf(&P, S1); }
static struct shm_sheaf *s2(void) { return pool_sheaf(&P, S2); }

static uint32_t frame_of(uint64_t off)
{
	return pool_frame_of(&P, off);
}

static uint32_t index_of(uint64_t off)
{
	return (uint32_t)((off - pool_frame_off(&P, frame_of(off))) / P.caches[C].obj_size);
}

/* A free object of node 1's slab (never taken). */
static uint64_t free_obj_node1(void)
{
	uint64_t off = pool_frame_off(&P, frame_of(objs1[0])) + 150ull * P.caches[C].obj_size;
	uint32_t idx = index_of(off);

	ck_assert(pool_bitmap(&P, frame_of(off))[idx / 64] >> (idx % 64) & 1);
	return off;
}

/* ---- the clean pool -------------------------------------------------- */

START_TEST(test_clean_pool)
{
	struct check_report rep;
	uint32_t per = P.caches[C].objs_per_slab;

	ck_assert_int_eq(pool_check(&P, -1, IN_USE, &rep, ERR, sizeof ERR), 0);
	ck_assert_uint_eq(rep.slabs, 2);
	ck_assert_uint_eq(rep.objects, 2ull * per);
	ck_assert_uint_eq(rep.free_in_slabs, 2ull * per - N0 - N1);
	ck_assert_uint_eq(rep.in_sheaves, IN_S1 + IN_S2);
	ck_assert_uint_eq(rep.in_use, IN_USE);
	ck_assert_uint_eq(rep.sheaves_in_rings, P.sheaf_count - 1);
	ck_assert_uint_eq(rep.sheaves_held, 1);
	/* Without an expectation it passes too; cache-restricted as well. */
	ck_assert_int_eq(pool_check(&P, -1, -1, NULL, ERR, sizeof ERR), 0);
	EXPECT_CLEAN(IN_USE);
	printf("clean pool: %llu objects, %llu free, %llu in sheaves, %llu in use, "
	       "%llu sheaves in rings, %llu held\n",
	       (unsigned long long)rep.objects, (unsigned long long)rep.free_in_slabs,
	       (unsigned long long)rep.in_sheaves, (unsigned long long)rep.in_use,
	       (unsigned long long)rep.sheaves_in_rings,
	       (unsigned long long)rep.sheaves_held);
}
END_TEST

/* Legal moves keep it clean: flush S1 back to the slabs through the barn,
 * give S2 to the depot after freeing its objects. */
START_TEST(test_clean_after_flush)
{
	uint32_t s = barn_get_full(&P, C, 0, OWNER_ENGINE, &IN);

	ck_assert_uint_eq(s, S1);
	ck_assert_uint_eq(slab_free_objs(&P, C, s1()->objs, sheaf_size(s1())), 0);
	barn_put_empty(&P, C, 0, S1, OWNER_ENGINE, &IN);
	EXPECT_CLEAN(IN_USE);
	ck_assert_uint_eq(slab_free_objs(&P, C, s2()->objs, sheaf_size(s2())), 0);
	depot_put(&P, S2, OWNER_ENGINE, &IN);
	EXPECT_CLEAN(IN_USE);
	ck_assert_uint_eq(slab_free_objs(&P, C, objs0 + IN_S1, N0 - IN_S1), 0);
	ck_assert_uint_eq(slab_free_objs(&P, C, objs1 + IN_S2, N1 - IN_S2), 0);
	EXPECT_CLEAN(0);
}
END_TEST

/* ---- the rules ------------------------------------------------------- */

START_TEST(test_same_object_twice_in_sheaf)
{
	sheaf_push(s1(), s1()->objs[7]);
	expect_broken("same object twice in a sheaf", IN_USE, "twice");
	sheaf_set_size(s1(), sheaf_size(s1()) - 1);
	EXPECT_CLEAN(IN_USE);
}
END_TEST

START_TEST(test_same_object_in_two_sheaves)
{
	sheaf_push(s2(), s1()->objs[3]);
	expect_broken("one object in two sheaves", IN_USE, "twice");
}
END_TEST

/* The engine frees an object that is still in a sheaf (the slab layer
 * cannot know): now in the sheaf and free in its slab. */
START_TEST(test_object_in_sheaf_and_free)
{
	ck_assert_uint_eq(slab_free_objs(&P, C, &s1()->objs[3], 1), 0);
	expect_broken("object in a sheaf and free in its slab", IN_USE, "twice (slab");
}
END_TEST

/* A never-taken (free) object put into a sheaf. */
START_TEST(test_free_object_put_in_sheaf)
{
	sheaf_push(s2(), free_obj_node1());
	expect_broken("free object put in a sheaf", IN_USE, "twice");
	sheaf_set_size(s2(), sheaf_size(s2()) - 1);
	EXPECT_CLEAN(IN_USE);
}
END_TEST

START_TEST(test_wrong_in_use)
{
	expect_broken("in use expected one more", IN_USE + 1, "in use");
	expect_broken("in use expected one less", IN_USE - 1, "in use");
	expect_broken("in use expected 0", 0, "in use");
	expect_broken("in use counting the sheaves", N0 + N1, "in use");
	EXPECT_CLEAN(IN_USE);
}
END_TEST

START_TEST(test_nfree_changed)
{
	struct shm_slab *sl = &P.slabs[frame_of(objs0[0])];

	sl->nfree++;
	expect_broken("slab nfree + 1", IN_USE, "nfree");
	sl->nfree -= 2;
	expect_broken("slab nfree - 1", IN_USE, "nfree");
	sl->nfree++;
	EXPECT_CLEAN(IN_USE);
}
END_TEST

/* S2 is held by the engine; its owner entry now claims it is in the full
 * ring of node 1, where no slot holds it. */
START_TEST(test_owner_ring_but_in_no_slot)
{
	atomic_store(&P.owners[S2], OWNER_RING(ring_full_id(C, 1, P.nodes)));
	expect_broken("owner RING(full) but in no slot", IN_USE, "no slot");
	atomic_store(&P.owners[S2], OWNER_ENGINE);
	EXPECT_CLEAN(IN_USE);
}
END_TEST

/* An empty sheaf taken out of the depot, marked back "in the depot". */
START_TEST(test_owner_depot_but_taken)
{
	uint32_t s = ring_hdr_get(pool_ring(&P, RING_DEPOT), P.owners, OWNER_ENGINE, &IN);

	ck_assert_uint_ne(s, SHEAF_ID_NONE);
	EXPECT_CLEAN(IN_USE);
	atomic_store(&P.owners[s], OWNER_RING(RING_DEPOT));
	expect_broken("owner RING(depot) but taken out", IN_USE, "no slot");
}
END_TEST

START_TEST(test_sheaf_object_off_boundary)
{
	s1()->objs[2] += 8;
	expect_broken("sheaf object 8 bytes off its boundary", IN_USE, "boundary");
	s1()->objs[2] -= 7;
	expect_broken("sheaf object 1 byte off its boundary", IN_USE, "boundary");
	s1()->objs[2] -= 1;
	EXPECT_CLEAN(IN_USE);
}
END_TEST

/* ---- more rules ------------------------------------------------------ */

START_TEST(test_sheaf_object_not_in_slab)
{
	uint64_t saved = s2()->objs[0];

	s2()->objs[0] = P.data_off - 64;                          /* metadata */
	expect_broken("sheaf object before the data region", IN_USE, "not in a slab");
	s2()->objs[0] = P.data_off + P.data_len;
	expect_broken("sheaf object past the data region", IN_USE, "not in a slab");
	s2()->objs[0] = pool_frame_off(&P, P.frames_per_node - 1);  /* unused frame */
	expect_broken("sheaf object in an unused frame", IN_USE, "not in a slab");
	s2()->objs[0] = saved;
	EXPECT_CLEAN(IN_USE);
}
END_TEST

START_TEST(test_sheaf_object_of_other_cache)
{
	struct cache_params cp = { .size = 64, .align = 8, .capacity = -1 };
	int other = engine_cache_create(&E, "other", &cp, ERR, sizeof ERR);
	uint64_t o;

	ck_assert_int_ge(other, 0);
	ck_assert_uint_eq(slab_alloc_objs(&P, (uint32_t)other, 0, &o, 1, 0), 1);
	ck_assert_int_eq(pool_check(&P, -1, IN_USE + 1, NULL, ERR, sizeof ERR), 0);
	ck_assert_int_eq(pool_check(&P, (int)C, IN_USE, NULL, ERR, sizeof ERR), 0);
	sheaf_push(s1(), o);
	expect_broken("sheaf holding another cache's object", IN_USE, "not in a slab");
}
END_TEST

START_TEST(test_bitmap_flipped)
{
	uint32_t f = frame_of(objs0[100]), idx = index_of(objs0[100]);
	uint64_t *w = &pool_bitmap(&P, f)[idx / 64];

	*w |= 1ull << (idx % 64);           /* an in-use object marked free */
	expect_broken("in-use object's free bit set", IN_USE, "nfree");
	*w &= ~(1ull << (idx % 64));
	EXPECT_CLEAN(IN_USE);
}
END_TEST

START_TEST(test_bit_beyond_objects)
{
	uint32_t f = frame_of(objs0[0]), bit = P.caches[C].objs_per_slab + 5;

	ck_assert_uint_lt(bit, SLAB_MAX_OBJS);
	pool_bitmap(&P, f)[bit / 64] |= 1ull << (bit % 64);
	expect_broken("bitmap bit beyond the slab's objects", IN_USE, "beyond");
}
END_TEST

START_TEST(test_counters_changed)
{
	struct shm_cache_node *cn = pool_cnode(&P, C, 1);

	cn->free_objects++;
	expect_broken("cache-node free_objects + 1", IN_USE, "counters");
	cn->free_objects--;
	cn->total_objects += P.caches[C].objs_per_slab;
	expect_broken("cache-node total_objects + 1 slab", IN_USE, "counters");
	cn->total_objects -= P.caches[C].objs_per_slab;
	EXPECT_CLEAN(IN_USE);
}
END_TEST

START_TEST(test_list_count_changed)
{
	struct shm_cache_node *cn = pool_cnode(&P, C, 0);

	cn->lists[SL_PARTIAL].count++;
	expect_broken("partial list count + 1", IN_USE, "count");
	cn->lists[SL_PARTIAL].count--;
	cn->lists[SL_EMPTY].count = 1;
	expect_broken("empty list count 1, list empty", IN_USE, "count");
	cn->lists[SL_EMPTY].count = 0;
	EXPECT_CLEAN(IN_USE);
}
END_TEST

START_TEST(test_slab_list_field_wrong)
{
	struct shm_slab *sl = &P.slabs[frame_of(objs0[0])];

	ck_assert_uint_eq(sl->list, SL_PARTIAL);
	sl->list = SL_FULL;
	expect_broken("partial slab's list field says full", IN_USE, "list");
	sl->list = SL_PARTIAL;
	EXPECT_CLEAN(IN_USE);
}
END_TEST

/* A slab moved to the wrong list consistently (links and counts right, but
 * its free count says partial). */
START_TEST(test_slab_on_wrong_list)
{
	struct shm_cache_node *cn = pool_cnode(&P, C, 0);
	uint32_t f = frame_of(objs0[0]);

	ck_assert_uint_eq(cn->lists[SL_PARTIAL].first, f);
	cn->lists[SL_PARTIAL].first = SLAB_NONE;
	cn->lists[SL_PARTIAL].count = 0;
	cn->lists[SL_FULL].first = f;
	cn->lists[SL_FULL].count = 1;
	P.slabs[f].list = SL_FULL;
	expect_broken("partial slab kept on the full list", IN_USE, "on list");
}
END_TEST

/*
 * A slab unlinked from its cache-node's list (list head and count updated)
 * while its own list field still says partial: the allocator can never find
 * it again, its free objects are lost.  The checker walks the lists and
 * then the frames, but never compares the two (check_cache computes
 * on_lists and discards it), so this passes unnoticed.
 */
START_TEST(test_slab_missing_from_list)
{
	struct shm_cache_node *cn = pool_cnode(&P, C, 0);
	uint32_t f = frame_of(objs0[0]);
	uint64_t o;

	ck_assert_uint_eq(cn->lists[SL_PARTIAL].first, f);
	cn->lists[SL_PARTIAL].first = SLAB_NONE;
	cn->lists[SL_PARTIAL].count = 0;
	/* The allocator cannot see it: a new frame is taken. */
	ck_assert_uint_eq(slab_alloc_objs(&P, C, 0, &o, 1, 0), 1);
	ck_assert_uint_ne(frame_of(o), f);
	expect_broken("partial slab missing from its list", IN_USE + 1, NULL);
}
END_TEST

/*
 * A wild slab index in a list link must be reported, not followed: the
 * list walk in check_cache reads p->slabs[s] before checking s against
 * frames_total.  Run in a child so a crash fails the test cleanly.
 */
static void on_fault(int sig)
{
	_exit(100 + sig);
}

START_TEST(test_list_link_out_of_range)
{
	struct shm_cache_node *cn = pool_cnode(&P, C, 1);
	pid_t pid;
	int st;

	cn->lists[SL_PARTIAL].first = 0x7ffffff0u;
	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char err[512] = "";
		struct sigaction sa;
		int rc;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_fault;
		sigaction(SIGSEGV, &sa, NULL);
		sigaction(SIGBUS, &sa, NULL);
		rc = pool_check(&P, -1, IN_USE, NULL, err, sizeof err);
		printf("%-44s -> %d: %s\n", "list link out of range", rc, err);
		fflush(stdout);
		_exit(rc == -EUCLEAN ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "pool_check on a slab list link 0x7ffffff0 (frames_total %u): %s",
		      P.frames_total,
		      WIFSIGNALED(st) ? "killed by a signal" :
		      WEXITSTATUS(st) >= 100 ? "crashed (SIGSEGV/SIGBUS)" :
		      "did not return -EUCLEAN");
}
END_TEST

/* S1 put into the full ring a second time: two slots hold it. */
START_TEST(test_sheaf_in_two_slots)
{
	struct shm_ring *r = pool_full_ring(&P, C, 0);

	/* Its entry as if the engine held it (a put is a CAS from it). */
	at_store_relaxed(&P.owners[S1], OWNER_ENGINE);
	ck_assert_int_eq(ring_hdr_put(r, P.owners, S1, OWNER_ENGINE, &IN), 0);
	ck_assert_uint_eq(ring_hdr_count(r), 2);
	expect_broken("sheaf in two ring slots", IN_USE, "two ring slots");
}
END_TEST

/* A ring whose count disagrees with its slots. */
START_TEST(test_ring_count_wrong)
{
	struct shm_ring *r = pool_full_ring(&P, C, 0);

	atomic_fetch_add(&r->tail, 1);
	expect_broken("full ring tail one ahead", IN_USE, "count");
	atomic_fetch_sub(&r->tail, 1);
	EXPECT_CLEAN(IN_USE);
	if (atomic_load(&r->tail) != atomic_load(&r->head)) {
		/* The slot at head full, but for the lap before: a get stops
		 * there, whatever its owner entry says. */
		uint32_t i = atomic_load(&r->head) & r->mask;
		uint64_t v = atomic_load(&r->slots[i]);

		atomic_store(&r->slots[i], v - ((uint64_t)r->size << 32));
		expect_broken("full ring slot of the lap before", IN_USE, "never filled");
		atomic_store(&r->slots[i], v);
		EXPECT_CLEAN(IN_USE);
	}
	if (atomic_load(&r->tail) != atomic_load(&r->head)) {   /* one behind */
		atomic_fetch_sub(&r->tail, 1);
		expect_broken("full ring tail one behind", IN_USE, "count");
		atomic_fetch_add(&r->tail, 1);
		EXPECT_CLEAN(IN_USE);
	}
}
END_TEST

START_TEST(test_sheaf_size_over_capacity)
{
	sheaf_set_size(s2(), s2()->capacity + 1);
	expect_broken("sheaf size over its capacity", IN_USE, "capacity");
	sheaf_set_size(s2(), SHEAF_CAP_MAX + 1);
	s2()->capacity = SHEAF_CAP_MAX + 1;
	expect_broken("sheaf size over SHEAF_CAP_MAX", IN_USE, "capacity");
}
END_TEST

/* A debug cache: the in-use bits (a client's job) must match the walk. */
START_TEST(test_debug_inuse_bits)
{
	struct cache_params cp = { .size = 128, .align = 8, .capacity = -1,
					  .flags = SHEAF_CACHE_F_DEBUG };
	int d = engine_cache_create(&E, "dbg", &cp, ERR, sizeof ERR);
	uint64_t o[10];
	char err[512] = "";
	int rc;

	ck_assert_int_ge(d, 0);
	ck_assert_uint_eq(slab_alloc_objs(&P, (uint32_t)d, 1, o, 10, 0), 10);
	/* Nobody set their in-use bits yet. */
	rc = pool_check(&P, d, 10, NULL, err, sizeof err);
	printf("%-44s -> %d: %s\n", "debug cache, in-use bits not set", rc, err);
	ck_assert_int_eq(rc, -EUCLEAN);
	ck_assert_ptr_nonnull(strstr(err, "in-use bit"));
	for (int i = 0; i < 10; i++) {
		uint32_t f = pool_frame_of(&P, o[i]);
		uint32_t idx = (uint32_t)((o[i] - pool_frame_off(&P, f)) / 128);
		atomic_fetch_or(&pool_inuse(&P, f)[idx / 64], 1ull << (idx % 64));
	}
	ck_assert_int_eq(pool_check(&P, d, 10, NULL, ERR, sizeof ERR), 0);
	ck_assert_int_eq(pool_check(&P, -1, IN_USE + 10, NULL, ERR, sizeof ERR), 0);
	/* An extra bit on an object free in its slab: what a client killed
	 * inside an alloc or free leaves (client/debug_track.c); allowed, and
	 * cleared. */
	{
		uint32_t f = pool_frame_of(&P, o[0]);
		atomic_fetch_or(&pool_inuse(&P, f)[1], 1ull);    /* object 64: free */
		rc = pool_check(&P, d, 10, NULL, err, sizeof err);
		printf("%-44s -> %d: %s\n", "debug cache, bit set on a free object", rc, err);
		ck_assert_int_eq(rc, 0);
		ck_assert_uint_eq(atomic_load(&pool_inuse(&P, f)[1]) & 1ull, 0);
		ck_assert_int_eq(pool_check(&P, d, 10, NULL, ERR, sizeof ERR), 0);
	}
}
END_TEST

static Suite *check_suite(void)
{
	Suite *su = suite_create("check");
	TCase *tc;

	tc = tcase_create("clean");
	tcase_set_timeout(tc, 30);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_clean_pool);
	tcase_add_test(tc, test_clean_after_flush);
	suite_add_tcase(su, tc);

	tc = tcase_create("rules");
	tcase_set_timeout(tc, 30);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_same_object_twice_in_sheaf);
	tcase_add_test(tc, test_same_object_in_two_sheaves);
	tcase_add_test(tc, test_object_in_sheaf_and_free);
	tcase_add_test(tc, test_free_object_put_in_sheaf);
	tcase_add_test(tc, test_wrong_in_use);
	tcase_add_test(tc, test_nfree_changed);
	tcase_add_test(tc, test_owner_ring_but_in_no_slot);
	tcase_add_test(tc, test_owner_depot_but_taken);
	tcase_add_test(tc, test_sheaf_object_off_boundary);
	suite_add_tcase(su, tc);

	tc = tcase_create("more");
	tcase_set_timeout(tc, 30);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_sheaf_object_not_in_slab);
	tcase_add_test(tc, test_sheaf_object_of_other_cache);
	tcase_add_test(tc, test_bitmap_flipped);
	tcase_add_test(tc, test_bit_beyond_objects);
	tcase_add_test(tc, test_counters_changed);
	tcase_add_test(tc, test_list_count_changed);
	tcase_add_test(tc, test_slab_list_field_wrong);
	tcase_add_test(tc, test_slab_on_wrong_list);
	tcase_add_test(tc, test_slab_missing_from_list);
	tcase_add_test(tc, test_list_link_out_of_range);
	tcase_add_test(tc, test_sheaf_in_two_slots);
	tcase_add_test(tc, test_ring_count_wrong);
	tcase_add_test(tc, test_sheaf_size_over_capacity);
	tcase_add_test(tc, test_debug_inuse_bits);
	suite_add_tcase(su, tc);
	return su;
}

int main(void)
{
	return run_suite(check_suite());
}
