/*
 * test_slab.c - unit tests of the slab layer (shm/engine/slab.c) and the pool
 * region (shm/pool.c), driven directly: a pool made with pool_create (1, 2
 * and 4 simulated nodes), caches made with engine_cache_create (the engine
 * is initialised but never started: no worker threads), then
 * slab_alloc_objs / slab_free_objs / slab_shrink called on region offsets.
 *
 * Covers: pool_create parameters and header geometry, a second mapping of
 * the same memfd; cache geometry for sizes 8..65536 and aligns 8..4096 (and
 * the invalid ones); every object distinct, aligned, inside its slab frame,
 * on an object boundary, on the node it was asked for, and writable without
 * overlap; slab list transitions and counters; freeing gives the memfd's
 * blocks back (slab_shrink, min_partial).  After each test pool_check must
 * pass with the number of objects the test holds.  Where the slab layer
 * says no (the memory cap, slab_free_objs refusing bad offsets, the
 * remote-refill try-lock) is in test_slab_refuse.c; the random churn and
 * the race of two nodes at the cap are in test_slab_stress.c; the shared
 * fixture and helpers in util_slab.h.
 *
 * SHEAF_SAN (non-empty) shrinks iteration counts for sanitizer builds.
 */
#include <check.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shm/engine/check.h"
#include "shm/engine/engine.h"
#include "shm/pool.h"
#include "shm/engine/slab.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_slab.h"

/* ---- pool region ----------------------------------------------------- */

START_TEST(test_pool_create_params)
{
	struct shm_pool q;
	struct pool_params pp = { .size = 64 * MIB, .nodes = 9, .sheaf_count = 1024 };
	char err[256] = "";

	ck_assert_int_eq(pool_create(&q, &pp, err, sizeof err), -EINVAL);
	printf("nodes 9 refused: %s\n", err);
	pp.nodes = 2;
	pp.sheaf_count = 32;
	ck_assert_int_eq(pool_create(&q, &pp, err, sizeof err), -EINVAL);
	pp.sheaf_count = (1u << 20) + 1;
	ck_assert_int_eq(pool_create(&q, &pp, err, sizeof err), -EINVAL);
	pp.sheaf_count = 1024;
	pp.size = SLAB_SIZE;       /* less than one frame per node */
	ck_assert_int_eq(pool_create(&q, &pp, err, sizeof err), -EINVAL);

	for (uint32_t nodes = 1; nodes <= 4; nodes *= 2) {
		struct pool_params ok = { .size = 64 * MIB, .nodes = nodes,
					  .sheaf_count = 1000, .mem_cap = 8 * MIB };
		const struct shm_header *h;

		ck_assert_int_eq(pool_create(&P, &ok, ERR, sizeof ERR), 0);
		h = P.hdr;
		ck_assert(h->magic == SHEAF_MAGIC);
		ck_assert_uint_eq(h->version, SHEAF_LAYOUT_VERSION);
		ck_assert_uint_eq(h->nodes, nodes);
		ck_assert_uint_eq(h->simulated, 1);
		ck_assert_uint_eq(h->sheaf_count, 1024);       /* rounded up */
		ck_assert_uint_eq(P.sheaf_count, 1024);
		ck_assert_uint_eq(h->frames_per_node & (h->frames_per_node - 1), 0);
		ck_assert_uint_eq(1u << h->node_frame_shift, h->frames_per_node);
		ck_assert_uint_ge((uint64_t)h->frames_per_node * SLAB_SIZE * nodes, 64 * MIB);
		ck_assert_uint_eq(h->node_bytes, (uint64_t)h->frames_per_node << SLAB_SHIFT);
		ck_assert_uint_eq(P.data_len, nodes * h->node_bytes);
		ck_assert_uint_eq(h->off_data % 4096, 0);
		ck_assert_uint_eq(h->off_rw % 4096, 0);
		ck_assert_uint_lt(h->off_rw, h->off_data);
		ck_assert_uint_eq(h->off_data + P.data_len, h->region_size);
		ck_assert_uint_eq(P.size, h->region_size);
		ck_assert_uint_eq(P.data_off, h->off_data);
		ck_assert_ptr_eq(P.data, P.base + P.data_off);
		ck_assert_uint_eq((uintptr_t)P.base, h->map_addr);
		ck_assert_uint_eq(atomic_load(&h->mem_cap), 8 * MIB);
		ck_assert_uint_eq(atomic_load(&h->frames_used), 0);
		for (uint32_t f = 0; f < P.frames_total; f++)
			REQUIRE(atomic_load(&P.frame_owner[f]) == FRAME_FREE,
				"frame %u owned at creation", f);
		/* Every sheaf starts in the depot. */
		ck_assert_uint_eq(ring_hdr_count(pool_ring(&P, RING_DEPOT)), 1024);
		CHECK_POOL(0);
		pool_unmap(&P);
	}
	/* Default cap is the whole data region. */
	{
		struct pool_params ok = { .size = 64 * MIB, .nodes = 2, .sheaf_count = 64 };
		ck_assert_int_eq(pool_create(&P, &ok, ERR, sizeof ERR), 0);
		ck_assert_uint_eq(atomic_load(&P.hdr->mem_cap), P.data_len);
		pool_unmap(&P);
	}
	memset(&P, 0, sizeof(P));
	P.meta_fd = P.shared_fd = P.meta_ro_fd = -1;
}
END_TEST

/* A second mapping of the same memfds sees the same region. */
START_TEST(test_pool_map_second_view)
{
	struct shm_pool q;
	uint32_t c;
	uint64_t obj;
	int mfd, sfd;

	pool_up(2, 64 * MIB);
	c = cache_new("view", 64, 8, 0);
	ck_assert_uint_eq(slab_alloc_objs(&P, c, 1, &obj, 1, 0), 1);
	memset(P.base + obj, 0x5a, 64);

	mfd = dup(P.meta_fd);
	sfd = dup(P.shared_fd);
	ck_assert_int_ge(mfd, 0);
	ck_assert_int_ge(sfd, 0);
	/* Its published address is taken in this process. */
	ck_assert_int_eq(pool_map_fds(&q, mfd, sfd, 1, 0, ERR, sizeof ERR), -EADDRINUSE);
	printf("map at the same address refused: %s\n", ERR);
	ck_assert_int_eq(pool_map_fds(&q, mfd, sfd, 1, 1, ERR, sizeof ERR), 0);
	ck_assert_ptr_ne(q.base, P.base);
	ck_assert_uint_eq(q.size, P.size);
	ck_assert_uint_eq(q.data_off, P.data_off);
	ck_assert_uint_eq(q.frames_total, P.frames_total);
	ck_assert_int_eq(pool_cache_find(&q, "view"), (int)c);
	ck_assert_uint_eq((unsigned char)q.base[obj], 0x5a);
	ck_assert_uint_eq(atomic_load(&q.frame_owner[pool_frame_of(&q, obj)]), c);
	ck_assert_int_eq(slab_validate(&q, c, obj), 0);
	q.base[obj + 1] = 0x11;                /* shared part: writable */
	ck_assert_uint_eq((unsigned char)P.base[obj + 1], 0x11);
	pool_unmap(&q);
	CHECK_POOL(1);
}
END_TEST

/* ---- geometry -------------------------------------------------------- */

static const uint32_t geo_sizes[] = { 8, 24, 64, 100, 256, 1000, 4096, 5000, 65536 };
static const uint32_t geo_aligns[] = { 8, 16, 64, 4096 };
static const uint32_t geo_nodes[] = { 1, 4, 2 };   /* sanitizers: 1 and 4 only */
#define GEO_NSIZES (sizeof(geo_sizes) / sizeof(geo_sizes[0]))

/* How many objects one node gets: a few thousand, or several slabs. */
static uint32_t geo_count(uint32_t per_slab)
{
	uint32_t n = 2 * per_slab + per_slab / 3 + 1;   /* ends in a partial slab */

	if (n < 2000)
		n = 2000;
	if (n > 8 * per_slab)
		n = 8 * per_slab;
	if (test_san() && n > 3 * per_slab)
		n = 3 * per_slab;
	return n;
}

/*
 * For one object size on one node configuration, every align: allocate on
 * each node, check placement/distinctness/writability, free all (shuffled
 * over nodes), shrink to nothing and check the memfd gave its blocks back.
 */
START_TEST(test_geometry)
{
	uint32_t nodes = geo_nodes[_i / GEO_NSIZES];
	uint32_t size = geo_sizes[_i % GEO_NSIZES];

	pool_up(nodes, 64 * MIB);
	for (uint32_t a = 0; a < 4; a++) {
		uint32_t align = geo_aligns[a], c, per_slab, obj_size;
		uint32_t count, total = 0, n0;
		const struct shm_cache *sc;
		uint64_t *objs, used0 = frames_used();
		int64_t b0, b1, b2;
		char name[32];
		uint64_t freed_slabs;

		if (test_san() && a == 1)
			continue;        /* align 16: like 8 and 64; spare the time */

		snprintf(name, sizeof name, "geo-%u-%u", size, align);
		c = cache_new(name, size, align, 0);
		sc = &P.caches[c];
		obj_size = (size + align - 1) / align * align;
		per_slab = SLAB_SIZE / obj_size;
		ck_assert_uint_eq(sc->obj_size, obj_size);
		ck_assert_uint_eq(sc->align, align);
		ck_assert_uint_eq(sc->objs_per_slab, per_slab);
		ck_assert_uint_eq(sc->slab_bytes, per_slab * obj_size);
		ck_assert_uint_le(sc->slab_bytes, SLAB_SIZE);
		ck_assert_uint_eq(atomic_load(&sc->min_partial),
				  slab_default_min_partial(obj_size));
		ck_assert_uint_eq(atomic_load(&sc->sheaf_capacity),
				  cache_default_capacity(obj_size));
		ck_assert_int_eq(pool_cache_find(&P, name), (int)c);

		count = geo_count(per_slab);
		objs = malloc((size_t)count * nodes * sizeof(*objs));
		ck_assert_ptr_nonnull(objs);
		/* pool_check reads every ring and sheaf page, and a read fault
		 * on a memfd hole allocates a page: run it before measuring. */
		if (a == 0)
			CHECK_POOL(0);
		b0 = fd_blocks();
		for (uint32_t n = 0; n < nodes; n++) {
			uint32_t got = alloc_n(c, n, objs + total, count);
			REQUIRE(got == count, "size %u align %u node %u: got %u of %u",
				size, align, n, got, count);
			verify_placement(c, n, objs + total, count);
			fill_objs(objs + total, count, obj_size, (uint64_t)n << 40 | c);
			/* Counters of the node agree. */
			{
				struct shm_cache_node *cn = pool_cnode(&P, c, n);
				uint32_t slabs = (count + per_slab - 1) / per_slab;
				REQUIRE(cn->total_objects == (uint64_t)slabs * per_slab &&
					cn->free_objects == cn->total_objects - count,
					"node %u counters total %llu free %llu for %u objs",
					n, (unsigned long long)cn->total_objects,
					(unsigned long long)cn->free_objects, count);
				REQUIRE(list_count(c, n, SL_FULL) == count / per_slab &&
					list_count(c, n, SL_PARTIAL) == (count % per_slab != 0) &&
					list_count(c, n, SL_EMPTY) == 0,
					"node %u lists full %u partial %u empty %u", n,
					list_count(c, n, SL_FULL), list_count(c, n, SL_PARTIAL),
					list_count(c, n, SL_EMPTY));
				ck_assert_uint_eq(atomic_load(&cn->stat[ST_ALLOC_SLAB]), slabs);
			}
			total += count;
		}
		/* Verify only after every object of every node is written. */
		for (uint32_t n = 0; n < nodes; n++)
			verify_objs(objs + (size_t)n * count, count, obj_size,
				    (uint64_t)n << 40 | c);
		verify_distinct(objs, total, obj_size);
		b1 = fd_blocks();
		CHECK_POOL(total);

		n0 = total;
		shuffle(objs, total);
		REQUIRE(free_n(c, objs, n0) == 0, "valid frees refused");
		freed_slabs = stat_sum(c, ST_FREE_SLAB);   /* beyond min_partial */
		if (!test_san())         /* pool_check is slow under TSan */
			CHECK_POOL(0);
		for (uint32_t n = 0; n < nodes; n++) {
			freed_slabs += slab_shrink(&P, c, n, 0);
			REQUIRE(list_count(c, n, SL_EMPTY) == 0 &&
				list_count(c, n, SL_PARTIAL) == 0 &&
				list_count(c, n, SL_FULL) == 0 &&
				pool_cnode(&P, c, n)->total_objects == 0 &&
				pool_cnode(&P, c, n)->free_objects == 0,
				"node %u not empty after shrink", n);
		}
		ck_assert_uint_eq(frames_used(), used0);
		ck_assert_uint_eq(freed_slabs, stat_sum(c, ST_ALLOC_SLAB));
		ck_assert_uint_eq(stat_sum(c, ST_FREE_SLAB), stat_sum(c, ST_ALLOC_SLAB));
		b2 = fd_blocks();
		REQUIRE(b1 > b0, "allocations added no blocks (%lld -> %lld)",
			(long long)b0, (long long)b1);
		REQUIRE((b1 - b2) * 5 >= (b1 - b0) * 4,
			"size %u align %u: blocks %lld -> %lld after allocs -> %lld after "
			"shrink: less than 80%% given back", size, align,
			(long long)b0, (long long)b1, (long long)b2);
		if (!test_san() || a == 3)
			CHECK_POOL(0);
		free(objs);
	}
}
END_TEST

START_TEST(test_invalid_geometry)
{
	static const struct { uint32_t size, align; } bad[] = {
		{ 0, 8 }, { 0, 0 }, { SHEAF_MAX_OBJ_SIZE + 1, 8 }, { SHEAF_MAX_OBJ_SIZE + 1, 0 },
		{ 128u << 20, 8 }, { 1u << 31, 8 },      /* larger than a node's 64 MiB */
		{ UINT32_MAX, 8 }, { 64, 8192 }, { 64, 12 }, { 64, 24 },
		{ 64, 1u << 31 }, { 64, 4097 }, { 64, 100 },
	};
	struct cache_params cp = { .capacity = -1 };
	int id;

	pool_up(1, 64 * MIB);
	for (uint32_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cp.size = bad[i].size;
		cp.align = bad[i].align;
		ERR[0] = '\0';
		id = engine_cache_create(&E, "bad", &cp, ERR, sizeof ERR);
		ck_assert_msg(id == -EINVAL, "size %u align %u accepted (%d)",
			      bad[i].size, bad[i].align, id);
		ck_assert_msg(ERR[0] != '\0', "no message for size %u align %u",
			      bad[i].size, bad[i].align);
	}
	printf("invalid geometry: %s\n", ERR);
	/* Other invalid parameters. */
	cp.size = 64;
	cp.align = 8;
	cp.capacity = SHEAF_CAP_MAX + 1;
	ck_assert_int_eq(engine_cache_create(&E, "bad", &cp, ERR, sizeof ERR), -EINVAL);
	cp.capacity = -2;
	ck_assert_int_eq(engine_cache_create(&E, "bad", &cp, ERR, sizeof ERR), -EINVAL);
	cp.capacity = -1;
	cp.flags = 0x80;
	ck_assert_int_eq(engine_cache_create(&E, "bad", &cp, ERR, sizeof ERR), -EINVAL);
	cp.flags = 0;
	ck_assert_int_eq(engine_cache_create(&E, "", &cp, ERR, sizeof ERR), -EINVAL);
	{
		char longname[SHEAF_NAME_MAX + 1];
		memset(longname, 'x', SHEAF_NAME_MAX);
		longname[SHEAF_NAME_MAX] = '\0';
		ck_assert_int_eq(engine_cache_create(&E, longname, &cp, ERR, sizeof ERR),
				 -EINVAL);
	}
	/* Nothing was created by the refusals. */
	ck_assert_int_eq(pool_cache_find(&P, "bad"), -ENOENT);
	for (uint32_t c = 0; c < P.max_caches; c++)
		ck_assert_uint_eq(atomic_load(&P.caches[c].state), CACHE_FREE);

	/* The edges are valid. */
	cp.size = 1;
	cp.align = 0;
	id = engine_cache_create(&E, "edge1", &cp, ERR, sizeof ERR);
	ck_assert_int_ge(id, 0);
	ck_assert_uint_eq(P.caches[id].obj_size, 8);
	ck_assert_uint_eq(P.caches[id].objs_per_slab, SLAB_SIZE / 8);
	cp.size = SHEAF_LARGE_MIN;
	cp.align = SHEAF_MAX_ALIGN;
	id = engine_cache_create(&E, "edge2", &cp, ERR, sizeof ERR);
	ck_assert_int_ge(id, 0);
	ck_assert_uint_eq(P.caches[id].objs_per_slab, 4);
	ck_assert_int_eq(engine_cache_create(&E, "edge2", &cp, ERR, sizeof ERR), -EEXIST);
	/* a node's whole data: one object per slab of every frame */
	cp.size = 64 * MIB;
	id = engine_cache_create(&E, "edge3", &cp, ERR, sizeof ERR);
	ck_assert_int_ge(id, 0);
	ck_assert_uint_eq(P.caches[id].objs_per_slab, 1);
	ck_assert_uint_eq(P.caches[id].slab_bytes, 64 * MIB);
	CHECK_POOL(0);
}
END_TEST

/*
 * An align that is not a power of two must be refused whatever its size.
 * slab_geometry() raises any align below 8 to 8 *before* its power-of-two
 * test, so align 3, 5, 6 and 7 are accepted (and shm_cache.align records 3).
 */
START_TEST(test_invalid_small_align)
{
	static const uint32_t aligns[] = { 3, 5, 6, 7 };
	struct cache_params cp = { .size = 64, .capacity = -1 };
	char name[16];

	char accepted[128] = "";
	size_t len = 0;

	pool_up(1, 64 * MIB);
	for (uint32_t i = 0; i < 4; i++) {
		int id;

		cp.align = aligns[i];
		snprintf(name, sizeof name, "align%u", aligns[i]);
		id = engine_cache_create(&E, name, &cp, ERR, sizeof ERR);
		if (id != -EINVAL)
			len += (size_t)snprintf(accepted + len, sizeof accepted - len,
						" %u (cache %d, align recorded %u)", aligns[i],
						id, id >= 0 ? P.caches[id].align : 0);
	}
	CHECK_POOL(0);
	ck_assert_msg(len == 0, "aligns that are not powers of two accepted:%s", accepted);
}
END_TEST

/* ---- slab lists ------------------------------------------------------ */

START_TEST(test_list_transitions)
{
	uint32_t c, per;
	uint64_t *objs, extra;
	struct shm_cache_node *cn;

	pool_up(1, 64 * MIB);
	c = cache_new("lists", 1024, 8, 0);
	per = P.caches[c].objs_per_slab;
	ck_assert_uint_eq(per, 256);
	cn = pool_cnode(&P, c, 0);
	objs = calloc(per, sizeof(*objs));
	ck_assert_ptr_nonnull(objs);

	ck_assert_uint_eq(slab_alloc_objs(&P, c, 0, objs, 1, 0), 1);
	ck_assert_uint_eq(list_count(c, 0, SL_PARTIAL), 1);
	ck_assert_uint_eq(cn->total_objects, per);
	ck_assert_uint_eq(cn->free_objects, per - 1);
	ck_assert_uint_eq(slab_alloc_objs(&P, c, 0, objs + 1, per - 1, 0), per - 1);
	ck_assert_uint_eq(list_count(c, 0, SL_PARTIAL), 0);
	ck_assert_uint_eq(list_count(c, 0, SL_FULL), 1);
	ck_assert_uint_eq(cn->free_objects, 0);
	verify_distinct(objs, per, 1024);
	/* The slab is full: the next object starts a second slab. */
	ck_assert_uint_eq(slab_alloc_objs(&P, c, 0, &extra, 1, 0), 1);
	ck_assert_uint_ne(pool_frame_of(&P, extra), pool_frame_of(&P, objs[0]));
	ck_assert_uint_eq(list_count(c, 0, SL_PARTIAL), 1);
	ck_assert_uint_eq(frames_used(), 2);
	CHECK_POOL(per + 1);

	/* Full -> partial: the freed object is the next one handed out. */
	ck_assert_uint_eq(slab_free_objs(&P, c, &objs[100], 1), 0);
	ck_assert_uint_eq(list_count(c, 0, SL_FULL), 0);
	ck_assert_uint_eq(list_count(c, 0, SL_PARTIAL), 2);
	CHECK_POOL(per);
	ck_assert_uint_eq(slab_free_objs(&P, c, &extra, 1), 0);   /* -> empty */
	ck_assert_uint_eq(list_count(c, 0, SL_EMPTY), 1);
	ck_assert_uint_eq(list_count(c, 0, SL_PARTIAL), 1);
	CHECK_POOL(per - 1);
	{
		uint64_t again;
		ck_assert_uint_eq(slab_alloc_objs(&P, c, 0, &again, 1, 0), 1);
		ck_assert_uint_eq(again, objs[100]);   /* partial before empty */
	}
	ck_assert_uint_eq(list_count(c, 0, SL_FULL), 1);
	CHECK_POOL(per);
	ck_assert_uint_eq(free_n(c, objs, per), 0);
	ck_assert_uint_eq(list_count(c, 0, SL_EMPTY), 2);
	ck_assert_uint_eq(cn->free_objects, 2 * per);
	CHECK_POOL(0);
	ck_assert_uint_eq(slab_shrink(&P, c, 0, 1), 1);
	ck_assert_uint_eq(slab_shrink(&P, c, 0, 1), 0);
	ck_assert_uint_eq(slab_shrink(&P, c, 0, 0), 1);
	ck_assert_uint_eq(frames_used(), 0);
	CHECK_POOL(0);
	free(objs);
}
END_TEST

/* ---- shrink, min_partial, memfd blocks ------------------------------- */

START_TEST(test_min_partial_on_free)
{
	const uint32_t mp = 3, slabs = 10;
	uint32_t c, per, n;
	uint64_t *objs;

	pool_up(2, 64 * MIB);
	c = cache_new("mp", 1000, 8, mp);
	ck_assert_uint_eq(atomic_load(&P.caches[c].min_partial), mp);
	per = P.caches[c].objs_per_slab;
	n = per * slabs;
	objs = malloc((size_t)n * sizeof(*objs));
	ck_assert_ptr_nonnull(objs);
	for (uint32_t node = 0; node < 2; node++) {
		uint64_t used0 = frames_used();

		ck_assert_uint_eq(alloc_n(c, node, objs, n), n);
		fill_objs(objs, n, P.caches[c].obj_size, node);
		ck_assert_uint_eq(frames_used(), used0 + slabs);
		ck_assert_uint_eq(slab_free_objs(&P, c, objs, n), 0);   /* in order */
		/* Empty slabs are kept (refills reuse them) until a shrink. */
		ck_assert_uint_eq(list_count(c, node, SL_EMPTY), slabs);
		ck_assert_uint_eq(list_count(c, node, SL_PARTIAL), 0);
		ck_assert_uint_eq(frames_used(), used0 + slabs);
		ck_assert_uint_eq(atomic_load(&pool_cnode(&P, c, node)->stat[ST_FREE_SLAB]), 0);
		CHECK_POOL(0);
		/* keep = min_partial: that many stay, the rest go back. */
		ck_assert_uint_eq(slab_shrink(&P, c, node, mp), slabs - mp);
		ck_assert_uint_eq(frames_used(), used0 + mp);
		ck_assert_uint_eq(atomic_load(&pool_cnode(&P, c, node)->stat[ST_FREE_SLAB]),
				  slabs - mp);
		ck_assert_uint_eq(slab_shrink(&P, c, node, mp), 0);
		ck_assert_uint_eq(list_count(c, node, SL_EMPTY), mp);
		ck_assert_uint_eq(pool_cnode(&P, c, node)->total_objects, (uint64_t)mp * per);
		ck_assert_uint_eq(pool_cnode(&P, c, node)->free_objects, (uint64_t)mp * per);
		CHECK_POOL(0);
	}
	/* keep 0: all released, blocks back. */
	{
		int64_t before = fd_blocks();
		ck_assert_uint_eq(slab_shrink(&P, c, 0, 0), mp);
		ck_assert_uint_eq(slab_shrink(&P, c, 1, 0), mp);
		ck_assert_uint_eq(frames_used(), 0);
		ck_assert_int_lt(fd_blocks(), before);
	}
	CHECK_POOL(0);
	free(objs);
}
END_TEST

/* slab_shrink's keep counts partial slabs too; min_partial changed live. */
START_TEST(test_shrink_keep)
{
	const uint32_t slabs = 10;
	uint32_t c, per, n;
	uint64_t *objs;
	int64_t b0, b1, b2;

	pool_up(1, 64 * MIB);
	c = cache_new("keep", 256, 64, 100);      /* keep every empty slab */
	per = P.caches[c].objs_per_slab;
	n = per * slabs;
	objs = malloc((size_t)n * sizeof(*objs));
	ck_assert_ptr_nonnull(objs);
	CHECK_POOL(0);           /* its page faults first (see test_geometry) */
	b0 = fd_blocks();
	ck_assert_uint_eq(alloc_n(c, 0, objs, n), n);
	fill_objs(objs, n, 256, 7);
	b1 = fd_blocks();
	/* Free all but objs[0] (its slab stays partial). */
	ck_assert_uint_eq(free_n(c, objs + 1, n - 1), 0);
	ck_assert_uint_eq(list_count(c, 0, SL_EMPTY), slabs - 1);
	ck_assert_uint_eq(list_count(c, 0, SL_PARTIAL), 1);
	CHECK_POOL(1);

	atomic_store(&P.caches[c].min_partial, 3);
	ck_assert_uint_eq(slab_shrink(&P, c, 0, 3), slabs - 3);
	ck_assert_uint_eq(list_count(c, 0, SL_EMPTY), 2);
	ck_assert_uint_eq(list_count(c, 0, SL_PARTIAL), 1);
	CHECK_POOL(1);
	ck_assert_uint_eq(slab_shrink(&P, c, 0, 0), 2);
	ck_assert_uint_eq(list_count(c, 0, SL_EMPTY), 0);
	ck_assert_uint_eq(list_count(c, 0, SL_PARTIAL), 1);   /* never released */
	ck_assert_uint_eq(frames_used(), 1);
	verify_objs(objs, 1, 256, 7);
	CHECK_POOL(1);
	b2 = fd_blocks();
	REQUIRE((b1 - b2) * 5 >= (b1 - b0) * 4,
		"blocks %lld -> %lld -> %lld: less than 80%% given back",
		(long long)b0, (long long)b1, (long long)b2);

	/* Freeing the last object: the partial slab becomes empty, kept
	 * (fewer than min_partial slabs left); then shrink releases it. */
	ck_assert_uint_eq(slab_free_objs(&P, c, objs, 1), 0);
	ck_assert_uint_eq(list_count(c, 0, SL_EMPTY), 1);
	ck_assert_uint_eq(slab_shrink(&P, c, 0, 0), 1);
	ck_assert_uint_eq(frames_used(), 0);
	CHECK_POOL(0);

	/* Released frames are reused (free stack), and come back zeroed. */
	ck_assert_uint_eq(alloc_n(c, 0, objs, n), n);
	verify_placement(c, 0, objs, n);
	verify_distinct(objs, n, 256);
	ck_assert_uint_eq(frames_used(), slabs);
	for (uint32_t i = 0; i < n; i++) {
		const uint64_t *w = (const uint64_t *)(const void *)(P.base + objs[i]);
		for (uint32_t k = 0; k < 256 / 8; k++)
			REQUIRE(w[k] == 0, "reused punched frame not zero at obj %u", i);
	}
	CHECK_POOL(n);
	ck_assert_uint_eq(free_n(c, objs, n), 0);
	CHECK_POOL(0);
	free(objs);
}
END_TEST

/* Many slabs emptied by one call, double frees mixed in; shrink releases
 * them and every released frame is reused. */
START_TEST(test_free_many_slabs_one_call)
{
	const uint32_t slabs = 40;
	uint32_t c, per, n;
	uint64_t *objs;

	pool_up(2, 64 * MIB);
	c = cache_new("many", 4096, 4096, 1);
	per = P.caches[c].objs_per_slab;
	n = per * slabs;
	objs = malloc((size_t)n * 2 * sizeof(*objs));
	ck_assert_ptr_nonnull(objs);
	ck_assert_uint_eq(alloc_n(c, 0, objs, n), n);
	ck_assert_uint_eq(alloc_n(c, 1, objs + n, n), n);
	fill_objs(objs, 2 * n, 4096, 99);
	verify_objs(objs, 2 * n, 4096, 99);
	ck_assert_uint_eq(frames_used(), 2 * slabs);
	CHECK_POOL(2 * n);
	/* Node 0 in order, in one call: 40 slabs emptied, all kept. */
	ck_assert_uint_eq(slab_free_objs(&P, c, objs, n), 0);
	ck_assert_uint_eq(list_count(c, 0, SL_EMPTY), slabs);
	ck_assert_uint_eq(frames_used(), 2 * slabs);
	CHECK_POOL(n);
	/* Node 1 shuffled with node 0 objects again (double frees) mixed in. */
	shuffle(objs, 2 * n);
	ck_assert_uint_eq(slab_free_objs(&P, c, objs, 2 * n), n);
	ck_assert_uint_eq(list_count(c, 1, SL_EMPTY), slabs);
	ck_assert_uint_eq(slab_shrink(&P, c, 0, 1), slabs - 1);
	ck_assert_uint_eq(slab_shrink(&P, c, 1, 1), slabs - 1);
	ck_assert_uint_eq(frames_used(), 2);
	CHECK_POOL(0);
	/* Reuse every released frame. */
	ck_assert_uint_eq(alloc_n(c, 0, objs, n), n);
	ck_assert_uint_eq(alloc_n(c, 1, objs + n, n), n);
	verify_distinct(objs, 2 * n, 4096);
	verify_placement(c, 0, objs, n);
	verify_placement(c, 1, objs + n, n);
	CHECK_POOL(2 * n);
	ck_assert_uint_eq(free_n(c, objs, 2 * n), 0);
	CHECK_POOL(0);
	free(objs);
}
END_TEST

static Suite *slab_suite(void)
{
	Suite *su = suite_create("slab");
	TCase *tc;

	tc = tcase_create("pool");
	tcase_set_timeout(tc, 30);
	tcase_add_checked_fixture(tc, slab_setup, slab_teardown);
	tcase_add_test(tc, test_pool_create_params);
	tcase_add_test(tc, test_pool_map_second_view);
	suite_add_tcase(su, tc);

	tc = tcase_create("geometry");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, slab_setup, slab_teardown);
	tcase_add_loop_test(tc, test_geometry, 0, (int)(GEO_NSIZES * (test_san() ? 2 : 3)));
	tcase_add_test(tc, test_invalid_geometry);
	tcase_add_test(tc, test_invalid_small_align);
	suite_add_tcase(su, tc);

	tc = tcase_create("lists");
	tcase_set_timeout(tc, 30);
	tcase_add_checked_fixture(tc, slab_setup, slab_teardown);
	tcase_add_test(tc, test_list_transitions);
	tcase_add_test(tc, test_min_partial_on_free);
	tcase_add_test(tc, test_shrink_keep);
	tcase_add_test(tc, test_free_many_slabs_one_call);
	suite_add_tcase(su, tc);
	return su;
}

int main(void)
{
	return run_suite(slab_suite());
}
