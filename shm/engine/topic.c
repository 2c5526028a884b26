/*
 * topic.c - a topic's life in the engine (engine.h; docs/design.md,
 * "Topics"): create (descriptor in META, storage in whole frames of node 0
 * marked FRAME_QUEUE), destroy, a subscriber's join and leave, the repair
 * of a dead client's part in every topic (engine_topics_reclaim), and
 * adoption.  The log itself is shm/topic.c's.
 *
 * Who may call: the hosting process (sheafd, or a local pool's process).
 * Every entry point but engine_topics_reclaim and engine_topics_adopt
 * takes e->ctl_lock; engine_topics_reclaim runs under it (from
 * engine_reclaim_client).  Every shared word is untrusted: read once per
 * step, never indexed with (the capacity is the descriptor's), every loop
 * one pass over the log; a value is freed only after slab_validate, the
 * check that no record of a live topic still references it, and
 * slab_free_objs' own checks.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "shm/bounds.h"
#include "shm/futex.h"
#include "shm/owner.h"
#include "shm/queue.h"
#include "shm/slab_geom.h"
#include "shm/topic.h"
#include "shm/engine/engine.h"
#include "shm/engine/slab.h"

static uint32_t frames_for(uint32_t capacity)
{
	return (uint32_t)((topic_bytes(capacity) + SLAB_SIZE - 1) >> SLAB_SHIFT);
}

/* The values of messages whose last reference the engine cleared. */
struct topic_frees {
	uint32_t *v;
	uint32_t n, cap;
};

static void frees_add(struct topic_frees *f, uint32_t v)
{
	if (f->n == f->cap) {
		uint32_t cap = f->cap ? 2 * f->cap : 256;
		uint32_t *nv = realloc(f->v, cap * sizeof(*nv));

		if (nv == NULL) {
			untrusted_note(UT_OBJECT, 1);   /* lost: stays allocated */
			return;
		}
		f->v = nv;
		f->cap = cap;
	}
	f->v[f->n++] = v;
}

static int u32_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Mark in @in the candidates (sorted @off[0..n)) that some sheaf of the
 * pool holds: free objects a spoiled value named. */
static void in_sheaves(const struct shm_pool *p, const uint64_t *off, uint32_t n, uint8_t *in)
{
	for (uint32_t s = 0; s < p->sheaf_count; s++) {
		const struct shm_sheaf *sh = pool_sheaf(p, s);
		uint32_t k = (uint32_t)(ut_load64(&sh->word) & SHEAF_WORD_SIZE);

		k = k < SHEAF_CAP_MAX ? k : SHEAF_CAP_MAX;
		for (uint32_t i = 0; i < k; i++) {
			uint64_t o = ut_load64(&sh->objs[i]);
			const uint64_t *hit = bsearch(&o, off, n, sizeof(uint64_t), slab_off_cmp);

			if (hit != NULL)
				in[hit - off] = 1;
		}
	}
}

/* A live client's tag on an object whose last reference sheafd cleared is
 * most often a release that lost its CAS to the sweep and gives the tag
 * back at once: waited for, at most this long per batch. */
#define TOPIC_TAG_WAIT_NS (20ll * 1000 * 1000)

/* The tag of owned object @o goes REPAIR when it says QUEUED or names
 * @dead (>= 0), waiting (until *@until) while a live client holds it: 1,
 * or 0 (refused). */
static int claim_tag(const struct shm_pool *p, const struct shm_cache *sc, uint64_t o,
		     int64_t dead, int64_t until)
{
	_Atomic otag_t *tag = owner_tag(p, sc, o);

	for (;;) {
		otag_t t = at_load_acquire(tag);

		if (t == OWNER_TAG_REPAIR || t == OWNER_TAG_KEPT || t == OWNER_TAG_NONE)
			return 0;
		if (t == OWNER_TAG_QUEUED || (dead >= 0 && t == owner_tag_client((uint32_t)dead))) {
			if (at_cas_acqrel(tag, &t, (otag_t)OWNER_TAG_REPAIR))
				return 1;
			continue;
		}
		if (clock_ns() >= until)
			return 0;
		sched_yield();
	}
}

/* Whether a record of a live topic references value @v, or a publish in
 * flight is storing it: a CLAIMED record whose claim names @v's low bits
 * (its publisher stores the value, then tags the object QUEUED, then
 * publishes).  A claimed record's value field is not looked at: until
 * its publisher stores the new value it still holds the last lap's,
 * most often the very object whose last reference sheafd just cleared
 * (the sweep wakes the blocked publishers, which claim that record). */
static int referenced(const struct shm_pool *p, uint32_t v)
{
	for (uint32_t i = 0; i < SHEAF_MAX_TOPICS; i++) {
		struct shm_topic *td = &p->topics[i];
		struct topic_ref t;

		if (at_load_acquire(&td->state) != TOPIC_LIVE)
			continue;
		t = topic_ref_of(p, td);
		for (uint32_t r = 0; r < t.size; r++) {
			uint64_t w = at_load_acquire(&t.recs[r].word);

			if ((w & TW_CLAIMED) != 0) {
				if (((w >> TW_CLAIM_V_SHIFT) & TW_CLAIM_V_MASK) ==
				    (v & TW_CLAIM_V_MASK))
					return 1;
			} else if ((w & TW_REFS) != 0 && at_load_relaxed(&t.recs[r].value) == v) {
				return 1;
			}
		}
	}
	return 0;
}

/*
 * Free the collected objects.  Each must be an object of a live cache
 * (slab_validate), referenced by no record of any live topic (a value a
 * scribbler copied from another topic stays), held by no sheaf (a free
 * object), of an owned cache only while its tag says QUEUED or names
 * @dead (>= 0; the tag goes REPAIR during the decision, as in the
 * owned-cache repair, so a racing free backs off), and not free already
 * (slab_free_objs).  Booked as slow-path frees on the control lane, as
 * the owned-cache repair's.  Returns the objects freed.
 */
static uint64_t frees_run(struct engine *e, struct topic_frees *f, int64_t dead)
{
	struct shm_pool *p = e->pool;
	uint64_t freed = 0, *off;
	uint32_t n = 0;
	uint8_t *in, *refd;
	int64_t wait_until = clock_ns() + TOPIC_TAG_WAIT_NS;

	if (f->n == 0)
		return 0;
	qsort(f->v, f->n, sizeof(uint32_t), u32_cmp);
	off = malloc((size_t)f->n * sizeof(uint64_t));
	in = calloc(f->n, 1);
	refd = calloc(f->n, 1);
	if (off == NULL || in == NULL || refd == NULL) {
		untrusted_note(UT_OBJECT, f->n);  /* no memory: stay allocated */
		goto out;
	}
	/* f->v stays sorted for every lookup: a referenced one is marked in
	 * refd[], not overwritten. */
	for (uint32_t i = 0; i < SHEAF_MAX_TOPICS; i++) {
		struct shm_topic *td = &p->topics[i];
		struct topic_ref t;

		if (at_load_acquire(&td->state) != TOPIC_LIVE)
			continue;
		t = topic_ref_of(p, td);
		for (uint32_t r = 0; r < t.size; r++) {
			uint64_t w = at_load_acquire(&t.recs[r].word);
			uint32_t v = at_load_relaxed(&t.recs[r].value);
			uint32_t *hit;

			if ((w & TW_CLAIMED) != 0 || (w & TW_REFS) == 0)
				continue;
			hit = bsearch(&v, f->v, f->n, sizeof(uint32_t), u32_cmp);
			while (hit != NULL && hit > f->v && hit[-1] == v)
				hit--;
			for (; hit != NULL && hit < f->v + f->n && *hit == v; hit++)
				refd[hit - f->v] = 1;     /* referenced: not freed */
		}
	}
	for (uint32_t i = 0; i < f->n; i++) {
		uint64_t rel = queue_rel_at(f->v[i]), o = p->data_off + rel;
		const struct shm_cache *sc;
		uint32_t c;

		if (refd[i]) {
			untrusted_note(UT_OBJECT, 1);
			continue;
		}
		if (f->v[i] == 0 || (i > 0 && f->v[i] == f->v[i - 1]))
			continue;                     /* no object, or twice in the batch */
		c = queue_rel_ok(p->data_len, rel) ?
		    at_load_acquire(&p->frame_owner[rel >> SLAB_SHIFT]) : UINT32_MAX;
		if (c >= p->max_caches || at_load_acquire(&p->caches[c].state) != CACHE_LIVE ||
		    slab_validate(p, c, o) != 0) {
			untrusted_note(UT_OBJECT, 1);
			continue;
		}
		sc = &p->caches[c];
		if (sc->flags & SHEAF_CACHE_F_OWNED) {
			if (!claim_tag(p, sc, o, dead, wait_until)) {
				untrusted_note(UT_OBJECT, 1);
				continue;             /* someone holds it */
			}
			/* Claimed: published again meanwhile (a spoiled
			 * value naming a message in flight)?  Then not ours. */
			if (referenced(p, f->v[i])) {
				otag_t want = OWNER_TAG_REPAIR;

				(void)at_cas_acqrel(owner_tag(p, sc, o), &want,
						    (otag_t)OWNER_TAG_QUEUED);
				untrusted_note(UT_OBJECT, 1);
				continue;
			}
		}
		off[n++] = o;
	}
	qsort(off, n, sizeof(uint64_t), slab_off_cmp);
	in_sheaves(p, off, n, in);
	/* Acquire: pairs with owner_alloc's release fence (owner.h). */
	at_fence_acquire();
	for (uint32_t i = 0; i < n; i++) {
		uint32_t c = at_load_acquire(&p->frame_owner[(off[i] - p->data_off) >> SLAB_SHIFT]);
		const struct shm_cache *sc = &p->caches[c];
		int owned = (sc->flags & SHEAF_CACHE_F_OWNED) != 0;

		if (in[i] || (owned && at_load_acquire(owner_tag(p, sc, off[i])) !=
				       OWNER_TAG_REPAIR)) {
			untrusted_note(UT_OBJECT, 1);
			if (owned) {
				otag_t want = OWNER_TAG_REPAIR;

				(void)at_cas_acqrel(owner_tag(p, sc, off[i]), &want,
						    (otag_t)OWNER_TAG_NONE);
			}
			continue;
		}
		if (slab_free_objs(p, c, &off[i], 1) == 0) {
			at_counter_add(&lane_stat(p, e->ctl_lane, c)[ST_FREE_SLOWPATH], 1);
			freed++;
		}
		if (owned)
			at_store_release(owner_tag(p, sc, off[i]), OWNER_TAG_NONE);
	}
out:
	free(off);
	free(in);
	free(refd);
	f->n = 0;
	return freed;
}

/* The position of record @r of @t from its word's tag, placed against the
 * tail hint (untrusted): the lap nearest the tail's.  UINT64_MAX: a tag
 * that places it before position 0. */
static uint64_t rec_pos(const struct topic_ref *t, uint32_t r, uint64_t w, uint64_t tail)
{
	int64_t lap = (int64_t)(tail >> t->shift) +
		      tw_tag_diff(tw_tag(w), topic_tag_of(t, tail));

	return lap < 0 ? UINT64_MAX : ((uint64_t)lap << t->shift) | r;
}

/* An owned object @v tagged QUEUED goes back to dead publisher @dead. */
static void untag_claimed(const struct shm_pool *p, uint32_t v, uint32_t dead)
{
	uint64_t rel = queue_rel_at(v);
	uint32_t c;
	otag_t want = OWNER_TAG_QUEUED;

	if (v == 0 || !queue_rel_ok(p->data_len, rel))
		return;
	c = at_load_acquire(&p->frame_owner[rel >> SLAB_SHIFT]);
	if (c >= p->max_caches || !(p->caches[c].flags & SHEAF_CACHE_F_OWNED) ||
	    slab_validate(p, c, p->data_off + rel) != 0)
		return;
	(void)at_cas_relaxed(owner_tag(p, &p->caches[c], p->data_off + rel), &want,
			     owner_tag_client(dead));
}

/*
 * One pass over @t's log: clear @bits (and HIST on messages more than K
 * behind the tail when @hist_old) from every published record; a record
 * CLAIMED by client @dead (>= 0) becomes a free record of its lap; objects
 * left with no reference go to @f.  Returns the records changed.
 */
static uint32_t sweep(struct topic_ref *t, uint64_t bits, int hist_old, int64_t dead,
		      struct topic_frees *f)
{
	uint64_t tail = ut_load64(&t->ctl->tail);
	uint32_t changed = 0;

	for (uint32_t r = 0; r < t->size; r++) {
		_Atomic uint64_t *wp = &t->recs[r].word;
		uint64_t w = at_load_acquire(wp), pos, clear = bits, cleared;
		uint32_t v;

		if (w == 0)
			continue;                     /* never used */
		if ((w & TW_CLAIMED) != 0) {
			if (dead >= 0 && (w & TW_CLAIM_ID) == (((uint64_t)dead + 1u) & TW_CLAIM_ID)) {
				v = at_load_relaxed(&t->recs[r].value);
				if (at_cas_seqcst(wp, &w, tw_make(tw_tag(w), 0))) {
					changed++;
					/* Its value stored (the claim's bits match):
					 * an owned object it tagged QUEUED is its
					 * own again, for the owned-cache repair. */
					if (((w >> TW_CLAIM_V_SHIFT) & TW_CLAIM_V_MASK) ==
					    (v & TW_CLAIM_V_MASK))
						untag_claimed(t->p, v, (uint32_t)dead);
				}
			}
			continue;
		}
		pos = rec_pos(t, r, w, tail);
		if (pos == UINT64_MAX)
			continue;
		if (hist_old && pos + t->history < tail)
			clear |= TW_HIST;
		if ((w & clear) == 0)
			continue;
		switch (topic_clear(t, pos, clear, 0, &v, &cleared, NULL, NULL)) {
		case 2:
			frees_add(f, v);
			/* fall through */
		case 1:
			changed++;
			break;
		default:
			break;
		}
	}
	return changed;
}

int engine_topic_create(struct engine *e, const char *name, uint32_t capacity,
			uint32_t history, uint32_t policy, char *err, size_t errlen)
{
	struct shm_pool *p = e->pool;
	struct shm_topic *td;
	uint32_t cap, nframes, f;
	int rc = topic_params_check(name, capacity, history, policy, err, errlen), id = -1;

	if (rc != 0)
		return rc;
	if ((p->data_len >> 3) >= UINT32_MAX - 1u) {
		snprintf(err, errlen, "topics need a pool of less than 32 GiB of data");
		return -EFBIG;
	}
	cap = topic_capacity(capacity);
	nframes = frames_for(cap);
	lock_acquire(&e->ctl_lock, LOCK_RANK_ENGINE_CTL);
	if (pool_topic_find(p, name) >= 0) {
		snprintf(err, errlen, "topic '%s' exists", name);
		rc = -EEXIST;
		goto out;
	}
	for (uint32_t i = 0; i < SHEAF_MAX_TOPICS && id < 0; i++)
		if (at_load_relaxed(&p->topics[i].state) == TOPIC_FREE)
			id = (int)i;
	if (id < 0) {
		snprintf(err, errlen, "all %u topic slots in use", SHEAF_MAX_TOPICS);
		rc = -ENOSPC;
		goto out;
	}
	td = &p->topics[id];
	td->nframes = 0;
	at_store_release(&td->state, TOPIC_BUSY);
	f = slab_frames_take(p, 0, nframes);
	if (f == SLAB_NONE) {
		at_store_release(&td->state, TOPIC_FREE);
		snprintf(err, errlen, "no room for a topic of %u records (%u frames of %u KiB) "
			 "under the memory cap", cap, nframes, SLAB_SIZE >> 10);
		rc = -ENOMEM;
		goto out;
	}
	td->id = (uint32_t)id;
	td->capacity = cap;
	td->history = history;
	td->policy = policy;
	td->off = pool_frame_off(p, f);
	td->nframes = nframes;
	td->created_at = (uint64_t)time(NULL);
	at_store_relaxed(&td->live, 0);
	memset(td->subs, 0, sizeof(td->subs));
	snprintf(td->name, sizeof(td->name), "%s", name);
	/* Frames come zeroed (a zero word is a free record of lap -1); the
	 * control block and subscriber blocks are cleared all the same. */
	memset(p->base + td->off, 0, TOPIC_RECS_OFF);
	at_store_relaxed(&td->generation, at_load_relaxed(&td->generation) + 1);
	at_store_release(&td->state, TOPIC_LIVE);
	rc = id;
out:
	lock_release(&e->ctl_lock);
	return rc;
}

static void topic_release(struct shm_pool *p, struct shm_topic *td)
{
	uint64_t rel = td->off - p->data_off;
	uint32_t f = (uint32_t)(rel >> SLAB_SHIFT);
	int ok = td->nframes > 0 && rel < p->data_len && (rel & (SLAB_SIZE - 1)) == 0 &&
		 td->nframes <= p->frames_per_node &&
		 pool_node_of_frame(p, f) == pool_node_of_frame(p, f + td->nframes - 1);

	for (uint32_t k = 0; ok && k < td->nframes; k++)
		ok = at_load_relaxed(&p->frame_owner[f + k]) == FRAME_QUEUE;
	if (ok)
		slab_frames_give(p, f, td->nframes);
	td->nframes = 0;
	at_store_release(&td->state, TOPIC_FREE);
}

int engine_topic_destroy(struct engine *e, uint32_t id, char *err, size_t errlen)
{
	struct shm_pool *p = e->pool;
	struct shm_topic *td = &p->topics[id % SHEAF_MAX_TOPICS];
	struct topic_frees f = { 0 };
	struct topic_ref t;
	int rc = 0;

	lock_acquire(&e->ctl_lock, LOCK_RANK_ENGINE_CTL);
	if (id >= SHEAF_MAX_TOPICS || at_load_relaxed(&td->state) != TOPIC_LIVE) {
		snprintf(err, errlen, "no topic %u", id);
		rc = -ENOENT;
		goto out;
	}
	if (at_load_relaxed(&td->live) != 0) {
		snprintf(err, errlen, "topic '%s' has %d subscribers: they leave first",
			 td->name, __builtin_popcount(at_load_relaxed(&td->live)));
		rc = -EBUSY;
		goto out;
	}
	t = topic_ref_of(p, td);
	/* Every message left (the history, stale bits) is freed; then the
	 * descriptor goes BUSY so the frees' scan skips it. */
	sweep(&t, TW_REFS | TW_PEND_MASK, 0, -1, &f);
	at_store_release(&td->state, TOPIC_BUSY);
	e->topic_freed += frees_run(e, &f, -1);
	topic_release(p, td);
out:
	lock_release(&e->ctl_lock);
	free(f.v);
	return rc;
}

int engine_topic_join(struct engine *e, uint32_t id, uint32_t client, uint32_t *slot,
		      uint32_t *gen, char *err, size_t errlen)
{
	struct shm_pool *p = e->pool;
	struct shm_topic *td = &p->topics[id % SHEAF_MAX_TOPICS];
	struct topic_frees f = { 0 };
	struct topic_ref t;
	uint32_t live;
	int rc = 0, s = -1;

	lock_acquire(&e->ctl_lock, LOCK_RANK_ENGINE_CTL);
	if (id >= SHEAF_MAX_TOPICS || at_load_relaxed(&td->state) != TOPIC_LIVE) {
		snprintf(err, errlen, "no topic %u", id);
		rc = -ENOENT;
		goto out;
	}
	live = at_load_relaxed(&td->live);
	for (uint32_t i = 0; i < TOPIC_SUBS_MAX && s < 0; i++)
		if ((live & (1u << i)) == 0)
			s = (int)i;
	if (s < 0) {
		snprintf(err, errlen, "topic '%s' has all %u subscriber slots taken", td->name,
			 TOPIC_SUBS_MAX);
		rc = -ENOSPC;
		goto out;
	}
	t = topic_ref_of(p, td);
	/* Bits of slots not joined are stale (an earlier holder's): away,
	 * before the slot goes live. */
	sweep(&t, tw_slot_bits(~live), 0, -1, &f);
	e->topic_freed += frees_run(e, &f, -1);
	memset(&t.subs[s], 0, sizeof(t.subs[s]));
	td->subs[s].client = client + 1u;
	td->subs[s].generation++;
	td->subs[s].joined_at = (uint64_t)time(NULL);
	at_store_relaxed(&t.subs[s].generation, td->subs[s].generation);
	at_store_relaxed(&t.subs[s].cursor, ut_load64(&t.ctl->tail));
	/* Release: the slot's record before the bit; pairs with the
	 * publisher's acquire load of live (topic_publish_at). */
	at_fetch_or_acqrel(&td->live, 1u << s);
	*slot = (uint32_t)s;
	*gen = td->subs[s].generation;
out:
	lock_release(&e->ctl_lock);
	free(f.v);
	return rc;
}

/* Slot @s of @td leaves: its bit out of live, then its bits (and every
 * other stale bit) out of the log, its last references freed.  Under
 * ctl_lock. */
static void leave(struct engine *e, struct shm_topic *td, uint32_t s, struct topic_frees *f)
{
	struct topic_ref t = topic_ref_of(e->pool, td);
	uint32_t live;

	at_fetch_and_acqrel(&td->live, ~(1u << s));
	td->subs[s].client = 0;
	live = at_load_relaxed(&td->live);
	if (sweep(&t, tw_slot_bits(~live), 1, -1, f) > 0)
		topic_wake_pubs(&t);
}

int engine_topic_leave(struct engine *e, uint32_t id, uint32_t slot, uint32_t client,
		       char *err, size_t errlen)
{
	struct shm_pool *p = e->pool;
	struct shm_topic *td = &p->topics[id % SHEAF_MAX_TOPICS];
	struct topic_frees f = { 0 };
	int rc = 0;

	lock_acquire(&e->ctl_lock, LOCK_RANK_ENGINE_CTL);
	if (id >= SHEAF_MAX_TOPICS || at_load_relaxed(&td->state) != TOPIC_LIVE) {
		snprintf(err, errlen, "no topic %u", id);
		rc = -ENOENT;
		goto out;
	}
	if (slot >= TOPIC_SUBS_MAX || (at_load_relaxed(&td->live) & (1u << slot)) == 0 ||
	    td->subs[slot].client != client + 1u) {
		snprintf(err, errlen, "topic '%s' has no subscriber %u of this client", td->name,
			 slot);
		rc = -ENOENT;
		goto out;
	}
	leave(e, td, slot, &f);
	e->topic_freed += frees_run(e, &f, -1);
out:
	lock_release(&e->ctl_lock);
	free(f.v);
	return rc;
}

/* Owned caches: a referenced object still tagged as dead @client's (its
 * publisher died before handing it to the topic) becomes QUEUED, so the
 * owner repair leaves it. */
static void retag(struct shm_pool *p, struct topic_ref *t, uint32_t client)
{
	for (uint32_t r = 0; r < t->size; r++) {
		uint64_t w = at_load_acquire(&t->recs[r].word);
		uint64_t rel = queue_rel_at(at_load_relaxed(&t->recs[r].value));
		uint32_t c;
		otag_t want = owner_tag_client(client);

		if ((w & TW_CLAIMED) != 0 || (w & TW_REFS) == 0 || !queue_rel_ok(p->data_len, rel))
			continue;
		c = at_load_acquire(&p->frame_owner[rel >> SLAB_SHIFT]);
		if (c >= p->max_caches || !(p->caches[c].flags & SHEAF_CACHE_F_OWNED) ||
		    slab_validate(p, c, p->data_off + rel) != 0)
			continue;
		at_cas_relaxed(owner_tag(p, &p->caches[c], p->data_off + rel), &want,
			       (otag_t)OWNER_TAG_QUEUED);
	}
}

void engine_topics_reclaim(struct engine *e, uint32_t client)
{
	struct shm_pool *p = e->pool;
	struct topic_frees f = { 0 };

	for (uint32_t i = 0; i < SHEAF_MAX_TOPICS; i++) {
		struct shm_topic *td = &p->topics[i];
		struct topic_ref t;

		if (at_load_acquire(&td->state) != TOPIC_LIVE)
			continue;
		t = topic_ref_of(p, td);
		/* Its subscriptions: left (queued and held messages alike). */
		for (uint32_t s = 0; s < TOPIC_SUBS_MAX; s++)
			if ((at_load_relaxed(&td->live) & (1u << s)) != 0 &&
			    td->subs[s].client == client + 1u)
				leave(e, td, s, &f);
		/* Its publishes: a claim undone, old history released. */
		if (sweep(&t, tw_slot_bits(~at_load_relaxed(&td->live)), 1, client, &f) > 0) {
			topic_wake_pubs(&t);
			topic_wake_subs(&t);
		}
		retag(p, &t, client);
	}
	e->topic_freed += frees_run(e, &f, client);
	free(f.v);
}

void engine_topics_adopt(struct shm_pool *p)
{
	for (uint32_t i = 0; i < SHEAF_MAX_TOPICS; i++) {
		struct shm_topic *td = &p->topics[i];
		uint32_t st = at_load_relaxed(&td->state);
		uint64_t rel = td->off - p->data_off;

		if (st == TOPIC_BUSY) {
			topic_release(p, td);
		} else if (st == TOPIC_LIVE &&
			   (td->capacity < TOPIC_CAP_MIN || td->capacity > TOPIC_CAP_MAX ||
			    (td->capacity & (td->capacity - 1)) != 0 ||
			    td->history >= td->capacity || td->policy > TOPIC_POLICY_DROP ||
			    td->nframes != frames_for(td->capacity) || rel >= p->data_len ||
			    (rel & (SLAB_SIZE - 1)) != 0 ||
			    rel + (uint64_t)td->nframes * SLAB_SIZE > p->data_len ||
			    memchr(td->name, 0, sizeof(td->name)) == NULL)) {
			at_store_relaxed(&td->state, TOPIC_BROKEN);
		}
	}
}
