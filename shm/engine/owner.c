/*
 * owner.c - the engine's side of object ownership (owner.h): fresh slabs'
 * tags, a dead client's sheaves untagged, its objects freed or kept, and
 * the per-client report.  The tag rules and why they are safe are in
 * shm/owner.h.
 *
 * Who may call: the engine (sheafd, or a local pool's engine); owner_reclaim
 * under the engine's ctl_lock, from engine_reclaim_client only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "shm/bounds.h"
#include "shm/engine/owner.h"
#include "shm/engine/slab.h"

static int cache_owned(const struct shm_pool *p, uint32_t c)
{
	const struct shm_cache *sc = &p->caches[c];

	/* Acquire: pairs with the release store of the state that installs
	 * the cache (engine/cache.c), so its geometry is seen. */
	return at_load_acquire(&sc->state) == CACHE_LIVE && (sc->flags & SHEAF_CACHE_F_OWNED);
}

static _Atomic otag_t *frame_tags(const struct shm_pool *p, uint32_t f)
{
	SHEAF_ASSERT(f < p->frames_total);
	return &p->tags[(uint64_t)f * SLAB_MAX_OBJS];
}

void owner_slab_init(struct shm_pool *p, const struct shm_cache *sc, uint32_t f)
{
	_Atomic otag_t *t = frame_tags(p, f);

	if (!(sc->flags & SHEAF_CACHE_F_OWNED))
		return;
	for (uint32_t i = 0; i < sc->objs_per_slab; i++)
		at_store_relaxed(&t[i], OWNER_TAG_NONE);
}

void owner_sheaf_untag(struct shm_pool *p, const struct shm_sheaf *sh, uint32_t dead)
{
	/* Raw loads, bounded here: sheaf_to_slabs reads (and counts) the
	 * same fields through bounds.h right after. */
	uint32_t c = at_plain_load_relaxed(&sh->cache);
	uint32_t n = (uint32_t)(ut_load64(&sh->word) & SHEAF_WORD_SIZE);

	if (c >= p->max_caches || !cache_owned(p, c))
		return;
	n = n < SHEAF_CAP_MAX ? n : SHEAF_CAP_MAX;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t off = ut_load64(&sh->objs[i]);
		otag_t want = owner_tag_client(dead);

		if (slab_validate(p, c, off) == 0)   /* a bad one: slab_free_objs counts it */
			(void)at_cas_acqrel(owner_tag(p, &p->caches[c], off), &want,
					    OWNER_TAG_NONE);
	}
}

/* A growing array of object offsets. */
struct offs {
	uint64_t *v;
	uint32_t n, cap;
};

static int offs_push(struct offs *o, uint64_t off)
{
	if (o->n == o->cap) {
		uint32_t cap = o->cap ? 2 * o->cap : 1024;
		uint64_t *v = realloc(o->v, cap * sizeof(*v));

		if (v == NULL)
			return -ENOMEM;
		o->v = v;
		o->cap = cap;
	}
	o->v[o->n++] = off;
	return 0;
}

/*
 * The tags of slab @f (cache @sc, whose node lock the caller holds) that
 * name @dtag: an object free in the slab only had a stale tag (cleared,
 * counted as untrusted: owner_sheaf_untag clears a well-behaved one);
 * otherwise kept (re-tagged, counted in *@kept) or claimed for the repair
 * (REPAIR, appended to @cand).
 */
static int claim_slab(struct shm_pool *p, const struct shm_cache *sc, uint32_t f,
		      otag_t dtag, struct offs *cand, uint64_t *kept)
{
	_Atomic otag_t *t = frame_tags(p, f);
	const uint64_t *bm = pool_bitmap(p, f);
	const int keep = (sc->flags & SHEAF_CACHE_F_KEEP) != 0;

	for (uint32_t i = 0; i < sc->objs_per_slab; i++) {
		otag_t want = dtag;

		if (at_load_relaxed(&t[i]) != dtag)
			continue;
		if (bm[i / 64] & (1ull << (i % 64))) {
			if (at_cas_acqrel(&t[i], &want, OWNER_TAG_NONE))
				untrusted_note(UT_OBJECT, 1);
			continue;
		}
		if (!at_cas_acqrel(&t[i], &want, keep ? OWNER_TAG_KEPT : OWNER_TAG_REPAIR))
			continue;           /* a live client took it meanwhile */
		if (keep) {
			(*kept)++;
		} else if (offs_push(cand, pool_frame_off(p, f) + (uint64_t)i * sc->obj_size) != 0) {
			at_store_release(&t[i], dtag);   /* left as it was */
			return -ENOMEM;
		}
	}
	return 0;
}

/* Claim, node by node under each cache-node lock, every object of cache @c
 * that names @dtag (claim_slab).  Full and partial slabs only: an empty
 * slab holds no object in use. */
static int claim_cache(struct shm_pool *p, uint32_t c, otag_t dtag, struct offs *cand,
		       uint64_t *kept)
{
	const struct shm_cache *sc = &p->caches[c];
	static const enum slab_list lists[] = { SL_PARTIAL, SL_FULL };
	int rc = 0;

	for (uint32_t n = 0; n < p->nodes && rc == 0; n++) {
		struct shm_cache_node *cn = pool_cnode(p, c, n);

		lock_acquire(&cn->lock, LOCK_RANK_CACHE_NODE);
		for (uint32_t l = 0; l < 2 && rc == 0; l++) {
			uint32_t s = cn->lists[lists[l]].first;

			/* META is the engine's: the count bounds the walk
			 * all the same. */
			for (uint32_t k = 0; k < cn->lists[lists[l]].count && s != SLAB_NONE &&
			     s < p->frames_total && rc == 0; k++, s = p->slabs[s].next)
				rc = claim_slab(p, sc, s, dtag, cand, kept);
		}
		lock_release(&cn->lock);
	}
	return rc;
}

static int off_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Of the claimed objects @cand of cache @c, drop those a sheaf holds (free
 * objects: a hostile tag, or a well-behaved one this scan cannot tell
 * from it): their tags go back to 0.  Without memory for the scan, every
 * claim goes back to @dtag and nothing is freed.  Sheaves move without locks, so the
 * scan is a snapshot; what makes it enough is owner.h's order (an object
 * enters a sheaf only by a free, which sees REPAIR and backs off; one that
 * leaves a sheaf by an alloc was re-tagged first, checked after the scan).
 */
static void drop_in_sheaves(struct shm_pool *p, uint32_t c, otag_t dtag, struct offs *cand)
{
	uint32_t kept = 0;
	uint8_t *in = calloc(cand->n, 1);

	qsort(cand->v, cand->n, sizeof(uint64_t), off_cmp);
	if (in == NULL) {       /* no scan, no free: the claims go back */
		for (uint32_t k = 0; k < cand->n; k++) {
			otag_t want = OWNER_TAG_REPAIR;

			(void)at_cas_acqrel(owner_tag(p, &p->caches[c], cand->v[k]), &want, dtag);
		}
		cand->n = 0;
		return;
	}
	for (uint32_t s = 0; s < p->sheaf_count; s++) {
		const struct shm_sheaf *sh = pool_sheaf(p, s);
		uint32_t n;

		if (at_plain_load_relaxed(&sh->cache) != c)
			continue;
		n = (uint32_t)(ut_load64(&sh->word) & SHEAF_WORD_SIZE);
		n = n < SHEAF_CAP_MAX ? n : SHEAF_CAP_MAX;
		for (uint32_t i = 0; i < n; i++) {
			uint64_t off = ut_load64(&sh->objs[i]);
			uint64_t *hit = bsearch(&off, cand->v, cand->n, sizeof(uint64_t), off_cmp);

			if (hit != NULL)
				in[hit - cand->v] = 1;
		}
	}
	/* Acquire: pairs with owner_alloc's release fence, so an object an
	 * alloc popped during the scan shows its new tag below. */
	at_fence_acquire();
	for (uint32_t k = 0; k < cand->n; k++) {
		_Atomic otag_t *t = owner_tag(p, &p->caches[c], cand->v[k]);
		otag_t want = OWNER_TAG_REPAIR;

		if (in[k]) {
			untrusted_note(UT_OBJECT, 1);
			(void)at_cas_acqrel(t, &want, OWNER_TAG_NONE);
		} else if (at_load_acquire(t) == OWNER_TAG_REPAIR) {
			cand->v[kept++] = cand->v[k];
		}
	}
	free(in);
	cand->n = kept;
}

int owner_reclaim(struct shm_pool *p, uint32_t dead, uint64_t *freed, uint64_t *kept)
{
	const otag_t dtag = owner_tag_client(dead);
	struct offs cand = { 0 };
	int rc = 0;

	for (uint32_t c = 0; c < SHEAF_MAX_CACHES; c++) {
		freed[c] = kept[c] = 0;
		if (c >= pool_caches_used(p) || !cache_owned(p, c))
			continue;
		cand.n = 0;
		if (claim_cache(p, c, dtag, &cand, &kept[c]) != 0)
			rc = -ENOMEM;   /* what was claimed is still freed below */
		if (cand.n == 0)
			continue;
		drop_in_sheaves(p, c, dtag, &cand);
		/* slab_free_objs validates each again and refuses one already
		 * free (counted in flush_invalid): never freed twice. */
		freed[c] = cand.n - slab_free_objs(p, c, cand.v, cand.n);
		/* After the slab free, not before: a racing free must find
		 * REPAIR until the object is back (owner_free_begin). */
		for (uint32_t k = 0; k < cand.n; k++) {
			otag_t want = OWNER_TAG_REPAIR;

			(void)at_cas_acqrel(owner_tag(p, &p->caches[c], cand.v[k]), &want,
					    OWNER_TAG_NONE);
		}
	}
	free(cand.v);
	return rc;
}

void owner_adopt(struct shm_pool *p)
{
	for (uint32_t f = 0; f < p->frames_total; f++) {
		uint32_t c = at_load_relaxed(&p->frame_owner[f]);
		struct shm_cache *sc;
		_Atomic otag_t *t;

		if (c >= p->max_caches || !cache_owned(p, c))
			continue;
		sc = &p->caches[c];
		t = frame_tags(p, f);
		for (uint32_t i = 0; i < sc->objs_per_slab; i++) {
			otag_t want = OWNER_TAG_REPAIR;
			int free_bit = (pool_bitmap(p, f)[i / 64] >> (i % 64)) & 1;

			if (at_load_relaxed(&t[i]) != OWNER_TAG_REPAIR ||
			    !at_cas_acqrel(&t[i], &want, free_bit ? OWNER_TAG_NONE : OWNER_TAG_KEPT))
				continue;
			if (!free_bit)
				at_counter_add(&sc->owner_kept, 1);
		}
	}
}

void owner_count(const struct shm_pool *p, uint64_t *held, uint64_t *kept,
		 uint32_t clients, uint32_t caches)
{
	for (uint32_t f = 0; f < p->frames_total; f++) {
		uint32_t c = at_load_relaxed(&p->frame_owner[f]);
		const _Atomic otag_t *t;

		if (c >= caches || !cache_owned(p, c))
			continue;
		t = &p->tags[(uint64_t)f * SLAB_MAX_OBJS];
		for (uint32_t i = 0; i < p->caches[c].objs_per_slab; i++) {
			otag_t v = at_load_relaxed(&t[i]);

			if (v == OWNER_TAG_KEPT)
				kept[c]++;
			else if (v != OWNER_TAG_NONE && v <= clients)
				held[(uint32_t)(v - 1) * caches + c]++;
		}
	}
}
