/*
 * owner.c - the engine's side of object ownership (owner.h): fresh slabs'
 * tags, a dead client's sheaves untagged, its half-done queue operations
 * finished or undone, its objects freed or kept, and the per-client
 * report.  The tag rules and why they are safe are in
 * shm/owner.h.
 *
 * Who may call: the engine (sheafd, or a local pool's engine); owner_reclaim
 * under the engine's ctl_lock, from engine_reclaim_client only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "shm/bounds.h"
#include "shm/engine/owner.h"
#include "shm/engine/slab.h"
#include "shm/queue.h"
#include "shm/slab_geom.h"

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
	/* Raw loads, bounded here: sheaves_to_slabs reads (and counts) the
	 * same fields through bounds.h afterwards. */
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

	qsort(cand->v, cand->n, sizeof(uint64_t), slab_off_cmp);
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
			uint64_t *hit = bsearch(&off, cand->v, cand->n, sizeof(uint64_t), slab_off_cmp);

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

/* ---- half-done queue operations ---------------------------------------- */

/* An object a dead client's queue record names, claimed (tag REPAIR). */
struct qcand {
	uint32_t val;                /* its slot value (shm/queue.h) */
	uint32_t cache;
	uint8_t found;               /* in a slot, or another thread's */
	uint8_t pending;             /* another dequeue's staged value names it */
	uint8_t won;                 /* counted by the dead dequeuer: its CAS won */
};

static int qcand_cmp(const void *a, const void *b)
{
	uint32_t x = ((const struct qcand *)a)->val, y = ((const struct qcand *)b)->val;

	return x < y ? -1 : x > y;
}

/* The tag of slot value @v when it names an object of an owned, live
 * cache (every check: the value is client-written), else NULL; *@c gets
 * the cache. */
static _Atomic otag_t *qval_tag(const struct shm_pool *p, uint32_t v, uint32_t *c)
{
	uint64_t rel = queue_rel_at(v), off;
	uint32_t owner;

	if (v == 0 || !queue_rel_ok(p->data_len, rel))
		return NULL;
	off = p->data_off + rel;
	owner = at_load_relaxed(&p->frame_owner[pool_frame_of(p, off)]);
	if (owner >= pool_caches_used(p) || !cache_owned(p, owner) ||
	    slab_validate(p, owner, off) != 0)
		return NULL;
	*c = owner;
	return owner_tag(p, &p->caches[owner], off);
}

/* The entries [0, *@n) of record @r that say an object is another
 * thread's for sure, and *@pend its staged value (a dequeue's vals[n]),
 * 0 when none.  Read once, bounded (client-written). */
static int qrec_read(const struct shm_qrec *r, uint32_t *n, uint32_t *pend)
{
	uint32_t op = at_load_acquire((_Atomic uint32_t *)&r->op);
	uint32_t k = at_load_relaxed((_Atomic uint32_t *)&r->n);

	*pend = 0;
	if (op != QREC_ENQ && op != QREC_DEQ)
		return 0;
	if (k > QREC_MAX)
		k = QREC_MAX;
	if (op == QREC_DEQ && k < QREC_MAX)
		*pend = at_load_relaxed((_Atomic uint32_t *)&r->vals[k]);
	*n = k;
	return 1;
}

static struct qcand *qcand_find(struct qcand *cv, uint32_t nc, uint32_t v)
{
	struct qcand key = { .val = v };

	return v == 0 ? NULL : bsearch(&key, cv, nc, sizeof(*cv), qcand_cmp);
}

/* Mark the candidates that the records of lanes not @dead's name. */
static void qscan_records(const struct shm_pool *p, uint32_t dead, struct qcand *cv, uint32_t nc)
{
	for (uint32_t l = 0, used = pool_lanes_used(p); l < used; l++) {
		const struct shm_lane *ln = &p->lanes[l];
		const struct shm_qrec *r;
		uint32_t n = 0, pend;
		struct qcand *c;

		if (pool_lane_holder(p, ln) == dead || !pool_lane_ready(ln))
			continue;
		r = lane_qrec(p, ln);
		if (!qrec_read(r, &n, &pend))
			continue;
		for (uint32_t i = 0; i < n; i++)
			if ((c = qcand_find(cv, nc, at_load_relaxed((_Atomic uint32_t *)&r->vals[i]))))
				c->found = 1;
		if ((c = qcand_find(cv, nc, pend)) != NULL)
			c->pending = 1;
	}
}

/* Mark the candidates some live queue's slot holds (filled: sequence 1
 * modulo the capacity).  The geometry is META's (engine-written). */
static void qscan_queues(const struct shm_pool *p, struct qcand *cv, uint32_t nc)
{
	for (uint32_t i = 0; i < SHEAF_MAX_QUEUES; i++) {
		const struct shm_queue *qd = &p->queues[i];
		struct queue_ref q;

		if (at_load_acquire((_Atomic uint32_t *)&qd->state) != QUEUE_LIVE ||
		    qd->capacity < QUEUE_CAP_MIN || qd->capacity > QUEUE_CAP_MAX ||
		    (qd->capacity & (qd->capacity - 1)) != 0 ||
		    qd->off + queue_bytes(qd->capacity) > p->data_off + p->data_len)
			continue;
		q = queue_ref_of(p, qd);
		for (uint32_t k = 0; k < q.size; k++) {
			/* Acquire: pairs with a dequeuer's slot CAS or store,
			 * so its staged value is seen by the scan after. */
			uint64_t w = at_load_acquire(&q.slots[k]);
			struct qcand *c;

			if (((uint32_t)(w >> 32) & q.mask) == 1 &&
			    (c = qcand_find(cv, nc, (uint32_t)w)) != NULL)
				c->found = 1;
		}
	}
}

/* Rounds of the search while a live dequeue's staged value is the only
 * trace of a candidate (that thread is a few instructions from counting
 * it, or from dropping it), and the wait between rounds. */
#define QREPAIR_ROUNDS   50
#define QREPAIR_WAIT_NS  (1000 * 1000)

int owner_queue_reclaim(struct shm_pool *p, uint32_t dead)
{
	const otag_t dtag = owner_tag_client(dead);
	struct qcand *cv = NULL;
	uint32_t nc = 0, cap = 0, undone = 0;

	/* 1. Claim what the dead client's records name, tagged QUEUED. */
	for (uint32_t l = 0, used = pool_lanes_used(p); l < used; l++) {
		struct shm_lane *ln = &p->lanes[l];
		struct shm_qrec *r;
		uint32_t n = 0, pend;

		if (pool_lane_holder(p, ln) != dead || !pool_lane_ready(ln))
			continue;
		r = lane_qrec(p, ln);
		if (!qrec_read(r, &n, &pend))
			continue;
		for (uint32_t i = 0; i <= n && i < QREC_MAX; i++) {
			uint32_t v = i < n ? at_load_relaxed(&r->vals[i]) : pend, c = 0;
			_Atomic otag_t *t = qval_tag(p, v, &c);
			otag_t want = OWNER_TAG_QUEUED;

			if (t == NULL)
				continue;
			if (nc == cap) {
				uint32_t ncap = cap ? 2 * cap : 64;
				struct qcand *nv = realloc(cv, ncap * sizeof(*nv));

				if (nv == NULL)
					break;          /* what was claimed is decided below */
				cv = nv;
				cap = ncap;
			}
			/* acq_rel: a live enqueuer's record, written before
			 * its QUEUED tag, is seen by the scans below */
			if (at_cas_acqrel(t, &want, OWNER_TAG_REPAIR))
				cv[nc++] = (struct qcand){
					.val = v, .cache = c,
					.won = at_load_relaxed(&r->op) == QREC_DEQ && i < n };
		}
	}
	/* 2. Look for each in the slots and the other records: records,
	 * slots, records.  While its tag is REPAIR an object can leave a
	 * slot only into a dequeuer's record (staged before its CAS), and
	 * that dequeuer cannot take the tag (owner_on_dequeue waits), so
	 * its record keeps naming it; an enqueuer's record names it until
	 * the slot does. */
	if (nc > 0) {
		qsort(cv, nc, sizeof(*cv), qcand_cmp);
		qscan_records(p, dead, cv, nc);
		qscan_queues(p, cv, nc);
		at_fence_seqcst();
		qscan_records(p, dead, cv, nc);
		/* Staged only: in no slot, so that dequeuer's CAS has lost or
		 * won; a winner counts it, a loser's value goes (the records
		 * alone tell, the slots are done with).  Not when the dead
		 * dequeuer counted it: its CAS won, any other lost. */
		for (int round = 1; round < QREPAIR_ROUNDS; round++) {
			int unsure = 0;

			for (uint32_t k = 0; k < nc; k++)
				unsure |= cv[k].pending && !cv[k].found && !cv[k].won;
			if (!unsure)
				break;
			nanosleep(&(struct timespec){ 0, QREPAIR_WAIT_NS }, NULL);
			for (uint32_t k = 0; k < nc; k++)
				cv[k].pending = 0;
			qscan_records(p, dead, cv, nc);
		}
	}
	/* 3. Decide: found (or, not won by the dead dequeuer, still staged
	 * by another thread after the rounds) goes back to QUEUED; the rest
	 * was the dead client's. */
	for (uint32_t k = 0; k < nc; k++) {
		uint32_t c;
		_Atomic otag_t *t = qval_tag(p, cv[k].val, &c);
		otag_t want = OWNER_TAG_REPAIR;

		if (t == NULL)          /* cannot be: checked above, META is ours */
			continue;
		if (cv[k].found || (cv[k].pending && !cv[k].won)) {
			(void)at_cas_acqrel(t, &want, OWNER_TAG_QUEUED);
		} else if (at_cas_acqrel(t, &want, dtag)) {
			undone++;
		}
	}
	/* 4. The records are done with (the lanes are freed next). */
	for (uint32_t l = 0, used = pool_lanes_used(p); l < used; l++) {
		struct shm_lane *ln = &p->lanes[l];

		if (pool_lane_holder(p, ln) == dead && pool_lane_ready(ln)) {
			struct shm_qrec *r = lane_qrec(p, ln);

			at_store_relaxed(&r->n, 0);
			at_store_release(&r->op, QREC_NONE);
		}
	}
	free(cv);
	return (int)undone;
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
