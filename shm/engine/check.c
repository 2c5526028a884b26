/*
 * check.c - the pool checker (check.h).  Slow and thorough by design.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "shm/bounds.h"
#include "shm/debug.h"
#include "shm/engine/check.h"
#include "shm/slab_geom.h"

enum { M_NONE = 0, M_FREE = 1, M_SHEAF = 2 };

static int bad(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EUCLEAN;
}

/* Whether ring @r is one of cache @cache's (full or empty, any node);
 * every ring when @cache < 0. */
static int ring_of_cache(const struct shm_pool *p, int cache, uint32_t r)
{
	return cache < 0 || (r >= RING_FIRST_BARN && ring_cache_of(r, p->nodes) == (uint32_t)cache);
}

/* Sheaf locations: each sheaf in at most one valid ring slot, matching its
 * owner entry.  With @cache >= 0 only that cache's rings and the sheaves
 * they own (pool_check_cache). */
static int check_sheaves(struct shm_pool *p, int cache, struct check_report *rep,
			 char *err, size_t errlen)
{
	uint8_t *seen = calloc(p->sheaf_count, 1);
	int rc = 0;

	if (seen == NULL)
		return bad(err, errlen, "out of memory");
	for (uint32_t r = 0, used = pool_rings_used(p); r < used && rc == 0; r++) {
		if (!ring_of_cache(p, cache, r))
			continue;
		/* The geometry is the pool's (bounds.h), never the ring
		 * header's: a client may have written anything there. */
		struct ring_ref rr = pool_ring_ref(p, r);
		uint32_t valid = 0, holes = 0, unfilled = 0;

		uint32_t head = at_load_relaxed(&rr.r->head);
		uint32_t count = ring_count(&rr), span = count + 1;

		/* Quiescent: every full slot lies in [head, tail); scanning only
		 * those keeps untouched ring pages untouched. */
		if (span > ring_size(&rr))
			span = ring_size(&rr);
		for (uint32_t k = 0; k < span; k++) {
			uint32_t pos = head + k, i = pos & rr.mask, base = pos - i;
			uint64_t v = at_load_relaxed(&rr.r->slots[i]);
			uint32_t s = (uint32_t)v;
			/* Full for this lap exactly: a full slot of another
			 * lap is one a get stops at (an earlier one) or skips
			 * (a later one), judged below like any other. */
			int full = (uint32_t)(v >> 32) == base + 1;

			if (full && s < p->sheaf_count &&
			    at_load_relaxed(&p->owners[s]) == OWNER_RING(r)) {
				if (seen[s]++) {
					rc = bad(err, errlen, "sheaf %u in two ring slots", s);
					break;
				}
				valid++;
			} else if (k < count) {
				/* A hole in [head, tail): a slot consumed or stale
				 * (full, but its sheaf taken by owner CAS: a repair
				 * of a stale intent that won against a live put,
				 * ring.c ring_repair_intent), which a get skips
				 * (helping head past it); or one never filled for
				 * this lap, at which a get stops: sheaves behind it
				 * are out of reach. */
				if ((int32_t)((uint32_t)(v >> 32) - (base + 1)) >= 0)
					holes++;
				else
					unfilled++;
			}
		}
		if (rc == 0 && unfilled != 0)
			rc = bad(err, errlen, "ring %u: count %u but %u of [head, tail) never filled",
				 r, count, unfilled);
		if (rc == 0 && valid + holes != count)
			rc = bad(err, errlen, "ring %u: count %u but %u valid slots and %u skipped",
				 r, count, valid, holes);
		rep->ring_holes += holes;
		rep->sheaves_in_rings += valid;
	}
	for (uint32_t s = 0; s < p->sheaf_count && rc == 0; s++) {
		uint32_t o = at_load_relaxed(&p->owners[s]);
		if (cache >= 0) {
			if (OWNER_IS_RING(o) && OWNER_RING_ID(o) < pool_rings_used(p) &&
			    ring_of_cache(p, cache, OWNER_RING_ID(o)) && !seen[s])
				rc = bad(err, errlen, "sheaf %u owned by ring %u but in no slot",
					 s, OWNER_RING_ID(o));
			continue;
		}
		if (OWNER_IS_RING(o) && !seen[s])
			rc = bad(err, errlen, "sheaf %u owned by ring %u but in no slot",
				 s, OWNER_RING_ID(o));
		else if (!OWNER_IS_RING(o))
			rep->sheaves_held++;
	}
	free(seen);
	/* Every sheaf counted once, in a ring or held.  The owner table is
	 * client-writable (a scribbler may change it under the walk): a
	 * report, never an assertion (debug.h). */
	if (rc == 0 && cache < 0 &&
	    rep->sheaves_in_rings + rep->sheaves_held != p->sheaf_count)
		rc = bad(err, errlen, "owner table changed during the walk (%llu in rings, "
			 "%llu held, %u sheaves)", (unsigned long long)rep->sheaves_in_rings,
			 (unsigned long long)rep->sheaves_held, p->sheaf_count);
	return rc;
}

/*
 * Whether sheaf @s with owner entry @o holds objects of cache @c for the
 * walk: its cache field says so (client-writable).  When @own_rings, the
 * location decides first (pool_check_cache): a sheaf in a ring of another
 * cache or the depot is not @c's, whatever its field says; a held one
 * counts when a client slot or the engine holds it.
 */
static int sheaf_counts_for(const struct shm_pool *p, uint32_t c, uint32_t o,
			    int own_rings)
{
	if (!own_rings)
		return o != OWNER_RING(RING_DEPOT);
	if (OWNER_IS_RING(o))
		return OWNER_RING_ID(o) < pool_rings_used(p) &&
		       (ring_of_cache(p, (int)c, OWNER_RING_ID(o)) ||
			/* deferred sheaves of every cache: by the field */
			OWNER_RING_ID(o) == RING_RCU);
	return o < p->max_clients || o == OWNER_ENGINE;
}

/*
 * Mark in @mark the objects free in slab bitmap @bm (of @objs objects) and
 * return how many; *@beyond is the first bit set past @objs, or UINT32_MAX.
 * Word by word (a slab has up to 32768 objects, most bitmaps are all ones
 * or all zeros): the walk stays cheap enough to run often (the fuzzer
 * runs it per input).
 */
static uint32_t mark_free(const uint64_t *bm, uint32_t objs, uint8_t *mark,
			  uint32_t *beyond)
{
	uint32_t pop = 0;

	*beyond = UINT32_MAX;
	for (uint32_t w = 0; w < SLAB_BITMAP_WORDS; w++) {
		uint32_t first = w * 64;
		uint64_t mine = first >= objs ? 0 :
			objs - first >= 64 ? ~0ull : (1ull << (objs - first)) - 1;
		uint64_t x = bm[w];

		if (x & ~mine) {
			*beyond = first + (uint32_t)__builtin_ctzll(x & ~mine);
			break;
		}
		if (x == 0)
			continue;
		pop += (uint32_t)__builtin_popcountll(x);
		if (x == ~0ull) {
			memset(mark + first, M_FREE, 64);
			continue;
		}
		for (; x != 0; x &= x - 1)
			mark[first + (uint32_t)__builtin_ctzll(x)] = M_FREE;
	}
	return pop;
}

static int check_cache(struct shm_pool *p, uint32_t c, int own_rings,
		       struct check_report *rep, char *err, size_t errlen)
{
	const struct shm_cache *sc = &p->caches[c];
	uint8_t **mark = calloc(p->frames_total, sizeof(*mark));
	uint64_t objects = 0, nfree = 0, insheaf = 0, inuse = 0;
	int rc = 0;

	if (mark == NULL)
		return bad(err, errlen, "out of memory");
	/* Slabs: bitmaps, lists, counters. */
	for (uint32_t n = 0; n < p->nodes && rc == 0; n++) {
		struct shm_cache_node *cn = pool_cnode(p, c, n);
		uint64_t node_free = 0, node_total = 0, on_lists = 0;

		for (int l = SL_PARTIAL; l <= SL_EMPTY && rc == 0; l++) {
			uint32_t cnt = 0;
			for (uint32_t s = cn->lists[l].first; s != SLAB_NONE; s = p->slabs[s].next) {
				if (s >= p->frames_total || ++cnt > p->frames_total ||
				    p->slabs[s].list != l || p->slabs[s].cache != c ||
				    p->slabs[s].node != n) {
					rc = bad(err, errlen, "cache %u node %u: list %d corrupt "
						 "at slab %u", c, n, l, s);
					break;
				}
			}
			if (rc == 0 && cnt != cn->lists[l].count)
				rc = bad(err, errlen, "cache %u node %u: list %d count %u, walked %u",
					 c, n, l, cn->lists[l].count, cnt);
			on_lists += cnt;
		}
		for (uint32_t k = 0; k < p->frames_per_node && rc == 0; k++) {
			uint32_t f = n * p->frames_per_node + k;
			struct shm_slab *sl = &p->slabs[f];
			uint64_t *bm = pool_bitmap(p, f);
			uint32_t pop, beyond;

			if (at_load_relaxed(&p->frame_owner[f]) != c)
				continue;
			if (sl->cache != c || sl->node != n || sl->list == SL_NONE) {
				rc = bad(err, errlen, "slab %u: cache %u node %u list %u inconsistent",
					 f, sl->cache, sl->node, sl->list);
				break;
			}
			/* a multi-frame slab's other frames, in its node */
			for (uint32_t j = 1; j < slab_frames_of(sc->slab_bytes) && rc == 0; j++)
				if (k + j >= p->frames_per_node ||
				    at_load_relaxed(&p->frame_owner[f + j]) != (FRAME_TAIL | c))
					rc = bad(err, errlen, "slab %u: frame %u not its tail", f, j);
			if (rc != 0)
				break;
			mark[f] = calloc(sc->objs_per_slab, 1);
			if (mark[f] == NULL) {
				rc = bad(err, errlen, "out of memory");
				break;
			}
			pop = mark_free(bm, sc->objs_per_slab, mark[f], &beyond);
			if (beyond != UINT32_MAX)
				rc = bad(err, errlen, "slab %u: bit %u beyond its objects", f, beyond);
			if (rc == 0 && pop != sl->nfree)
				rc = bad(err, errlen, "slab %u: nfree %u, bitmap %u", f, sl->nfree, pop);
			if (rc == 0 && ((pop == 0) != (sl->list == SL_FULL) ||
					(pop == sc->objs_per_slab) != (sl->list == SL_EMPTY)))
				rc = bad(err, errlen, "slab %u: on list %u with %u free", f, sl->list, pop);
			node_free += pop;
			node_total += sc->objs_per_slab;
			rep->slabs++;
		}
		if (rc == 0 && (node_free != cn->free_objects || node_total != cn->total_objects))
			rc = bad(err, errlen, "cache %u node %u: counters free %llu total %llu, "
				 "walked %llu/%llu", c, n,
				 (unsigned long long)cn->free_objects,
				 (unsigned long long)cn->total_objects,
				 (unsigned long long)node_free, (unsigned long long)node_total);
		if (rc == 0 && on_lists != node_total / (sc->objs_per_slab ? sc->objs_per_slab : 1))
			rc = bad(err, errlen, "cache %u node %u: %llu slabs on lists, %llu owned",
				 c, n, (unsigned long long)on_lists,
				 (unsigned long long)(node_total / sc->objs_per_slab));
		objects += node_total;
		nfree += node_free;
	}
	/* Sheaves: every object valid, in no other place. */
	for (uint32_t s = 0; s < p->sheaf_count && rc == 0; s++) {
		struct shm_sheaf *sh;
		uint32_t size, capacity;
		/* Depot sheaves are empty; skipping them leaves unused sheaf
		 * pages untouched. */
		if (!sheaf_counts_for(p, c, at_load_relaxed(&p->owners[s]), own_rings))
			continue;
		sh = pool_sheaf(p, s);
		/* Client-writable: each field read once, and the size bounded
		 * before it indexes objs[]. */
		size = (uint32_t)(ut_load64(&sh->word) & SHEAF_WORD_SIZE);
		capacity = ut_load32(&sh->capacity);
		if (size == 0 || ut_sheaf_cache(p, sh) != c)
			continue;
		if (size > capacity || size > SHEAF_CAP_MAX) {
			rc = bad(err, errlen, "sheaf %u: size %u > capacity %u", s,
				 size, capacity);
			break;
		}
		for (uint32_t i = 0; i < size; i++) {
			uint64_t off = ut_load64(&sh->objs[i]);
			uint32_t f, idx;
			if (off - p->data_off >= p->data_len ||
			    mark[f = pool_frame_of(p, off)] == NULL) {
				rc = bad(err, errlen, "sheaf %u: object %#llx not in a slab of cache %u",
					 s, (unsigned long long)off, c);
				break;
			}
			idx = (uint32_t)((off - pool_frame_off(p, f)) / sc->obj_size);
			if ((off - pool_frame_off(p, f)) % sc->obj_size || idx >= sc->objs_per_slab) {
				rc = bad(err, errlen, "sheaf %u: object %#llx off boundary", s,
					 (unsigned long long)off);
				break;
			}
			if (mark[f][idx] != M_NONE) {
				rc = bad(err, errlen, "object %#llx twice (%s and sheaf %u)",
					 (unsigned long long)off,
					 mark[f][idx] == M_FREE ? "slab" : "a sheaf", s);
				break;
			}
			mark[f][idx] = M_SHEAF;
			insheaf++;
		}
	}
	/* In use: the rest; debug caches must agree bit by bit, but for the
	 * state a killed thread leaves (client/debug_track.c sets the bit
	 * before the pop and clears it after the push): an object in a
	 * sheaf or free with its bit set.  Such a bit of an object free in
	 * its slab is cleared here (no live thread can be between those
	 * steps for it: the object is in no sheaf); one in a sheaf is left
	 * to the next alloc or free of the object. */
	if (rc == 0 && !(sc->flags & SHEAF_CACHE_F_DEBUG))
		inuse = objects - nfree - insheaf;     /* each marked once, above */
	for (uint32_t f = 0; f < p->frames_total && rc == 0 &&
			     (sc->flags & SHEAF_CACHE_F_DEBUG); f++) {
		if (mark[f] == NULL)
			continue;
		for (uint32_t i = 0; i < sc->objs_per_slab; i++) {
			int used = mark[f][i] == M_NONE;
			_Atomic uint64_t *w = &pool_inuse(p, f)[i / 64];
			int bit = (int)(at_load_relaxed(w) >> (i % 64) & 1);

			inuse += used;
			if (bit == used)
				continue;
			if (used) {
				rc = bad(err, errlen, "object %u of slab %u: in use by the walk, "
					 "in-use bit clear", i, f);
				break;
			}
			if (mark[f][i] == M_FREE)
				at_fetch_and_acqrel(w, ~(1ull << (i % 64)));
		}
	}
	/* Every object the walk saw was marked exactly once: free, in a sheaf
	 * or (unmarked) in use. */
	SHEAF_ASSERT(rc != 0 || nfree + insheaf + inuse == objects);
	for (uint32_t f = 0; f < p->frames_total; f++)
		free(mark[f]);
	free(mark);
	rep->objects += objects;
	rep->free_in_slabs += nfree;
	rep->in_sheaves += insheaf;
	rep->in_use += inuse;
	return rc;
}

int pool_check(struct shm_pool *p, int cache, int64_t expect_in_use,
	       struct check_report *rep, char *err, size_t errlen)
{
	struct check_report local;
	int rc;

	SHEAF_ASSERT(cache < (int)p->max_caches);
	if (rep == NULL)
		rep = &local;
	memset(rep, 0, sizeof(*rep));
	rc = check_sheaves(p, -1, rep, err, errlen);
	for (uint32_t c = 0, used = pool_caches_used(p); c < used && rc == 0; c++) {
		if ((cache >= 0 && (uint32_t)cache != c) ||
		    at_load_acquire(&p->caches[c].state) != CACHE_LIVE)
			continue;
		rc = check_cache(p, c, 0, rep, err, errlen);
	}
	if (rc == 0 && expect_in_use >= 0 && rep->in_use != (uint64_t)expect_in_use)
		rc = bad(err, errlen, "in use %llu, expected %lld",
			 (unsigned long long)rep->in_use, (long long)expect_in_use);
	return rc;
}

int pool_check_cache(struct shm_pool *p, uint32_t cache, struct check_report *rep,
		     char *err, size_t errlen)
{
	struct check_report local;
	int rc;

	if (rep == NULL)
		rep = &local;
	memset(rep, 0, sizeof(*rep));
	if (cache >= pool_caches_used(p) || at_load_acquire(&p->caches[cache].state) != CACHE_LIVE)
		return bad(err, errlen, "cache %u is not live", cache);
	rc = check_sheaves(p, (int)cache, rep, err, errlen);
	if (rc == 0)
		rc = check_cache(p, cache, 1, rep, err, errlen);
	return rc;
}
