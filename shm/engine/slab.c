/*
 * slab.c - the slab layer (slab.h).  Runs only in the engine; the object
 * geometry that clients check against too is shm/slab_geom.c's.
 *
 * Per cache-node lists (under cn->lock):
 *   SL_PARTIAL  0 < nfree < objs_per_slab
 *   SL_FULL     nfree == 0
 *   SL_EMPTY    nfree == objs_per_slab: kept (refills reuse them first) until
 *               a shrink releases those beyond min_partial, or another
 *               cache of the node needs frames at the memory cap.
 * Per node frame allocator (under nalloc->lock): a bump pointer over never
 * used frames and a stack of released ones (their holes punched).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "shm/debug.h"
#include "shm/engine/owner.h"
#include "shm/engine/slab.h"

uint32_t slab_default_min_partial(uint32_t obj_size)
{
	uint32_t mp = (uint32_t)(31 - __builtin_clz(obj_size)) / 2;
	return mp < 5 ? 5 : mp > 10 ? 10 : mp;
}

/* Bytes of empty large slabs the engine keeps (the header's
 * large_retained): @s enters or leaves the empty list.  Under its
 * cache-node lock; the header word is shared by the pool's caches. */
static void retained_note(struct shm_pool *p, const struct shm_slab *sl, int enter)
{
	const struct shm_cache *c = &p->caches[sl->cache];
	uint64_t bytes;

	if (!slab_is_large(c->obj_size))
		return;
	bytes = (uint64_t)slab_frames_of(c->slab_bytes) << SLAB_SHIFT;
	if (enter)
		at_fetch_add_relaxed(&p->hdr->large_retained, bytes);
	else
		at_fetch_sub_relaxed(&p->hdr->large_retained, bytes);
}

static void list_del(struct shm_pool *p, struct shm_cache_node *cn, uint32_t s)
{
	struct shm_slab *sl = &p->slabs[s];
	struct slab_list_head *h = &cn->lists[sl->list];

	SHEAF_ASSERT(sl->list != SL_NONE && sl->list <= SL_EMPTY && h->count > 0);
	if (sl->list == SL_EMPTY)
		retained_note(p, sl, 0);
	if (sl->prev != SLAB_NONE)
		p->slabs[sl->prev].next = sl->next;
	else
		h->first = sl->next;
	if (sl->next != SLAB_NONE)
		p->slabs[sl->next].prev = sl->prev;
	h->count--;
	sl->list = SL_NONE;
	sl->prev = sl->next = SLAB_NONE;
}

static void list_add(struct shm_pool *p, struct shm_cache_node *cn, uint32_t s,
		     enum slab_list l)
{
	struct shm_slab *sl = &p->slabs[s];
	struct slab_list_head *h = &cn->lists[l];

	SHEAF_ASSERT(sl->list == SL_NONE && l != SL_NONE && l <= SL_EMPTY);
	sl->list = (uint8_t)l;
	sl->prev = SLAB_NONE;
	sl->next = h->first;
	if (h->first != SLAB_NONE)
		p->slabs[h->first].prev = s;
	h->first = s;
	h->count++;
	if (l == SL_EMPTY)
		retained_note(p, sl, 1);
}

static enum slab_list list_for(const struct shm_cache *c, const struct shm_slab *sl)
{
	if (sl->nfree == 0)
		return SL_FULL;
	return sl->nfree == c->objs_per_slab ? SL_EMPTY : SL_PARTIAL;
}

/* Whether @n more frames would take node allocator @na past its cap
 * (numa_policy=bind: shm/numa.h); counts the refusal.  Under na->lock. */
static int node_at_cap(const struct shm_pool *p, struct shm_node_alloc *na, uint32_t n)
{
	if (!(p->hdr->numa_flags & SHEAF_NUMA_F_CAPS) ||
	    (uint64_t)at_load_relaxed(&na->used) + n <= at_load_relaxed(&na->cap_frames))
		return 0;
	at_fetch_add_relaxed(&na->cap_refused, 1);
	return 1;
}

/* The node's stack of released frames is doubly linked (slab prev and
 * next), so that a multi-frame slab can take a run out of its middle.
 * Under na->lock. */
static void stack_push(struct shm_pool *p, struct shm_node_alloc *na, uint32_t f)
{
	p->slabs[f].prev = SLAB_NONE;
	p->slabs[f].next = na->free_first;
	if (na->free_first != SLAB_NONE)
		p->slabs[na->free_first].prev = f;
	na->free_first = f;
	na->free_count++;
}

static void stack_unlink(struct shm_pool *p, struct shm_node_alloc *na, uint32_t f)
{
	struct shm_slab *sl = &p->slabs[f];

	if (sl->prev != SLAB_NONE)
		p->slabs[sl->prev].next = sl->next;
	else
		na->free_first = sl->next;
	if (sl->next != SLAB_NONE)
		p->slabs[sl->next].prev = sl->prev;
	sl->prev = sl->next = SLAB_NONE;
	na->free_count--;
}

/*
 * @k contiguous frames of @node from released ones (a run of FRAME_FREE
 * below the bump pointer, or one that ends at it, completed from the
 * fresh frames above), or SLAB_NONE.  A walk of the node's owner map:
 * only a multi-frame slab that the bump pointer cannot serve pays it.
 * Under na->lock.
 */
static uint32_t run_take(struct shm_pool *p, struct shm_node_alloc *na, uint32_t node,
			 uint32_t k)
{
	uint32_t base = node * p->frames_per_node, run = 0, start = 0;

	for (uint32_t i = 0; i < na->next_fresh && run < k; i++) {
		if (at_load_relaxed(&p->frame_owner[base + i]) != FRAME_FREE) {
			run = 0;
			continue;
		}
		if (run++ == 0)
			start = i;
	}
	/* @run: k frames, or fewer that end at the bump pointer (or none) */
	if (run == 0 || (run < k && p->frames_per_node - na->next_fresh < k - run))
		return SLAB_NONE;
	for (uint32_t j = 0; j < run; j++)
		stack_unlink(p, na, base + start + j);
	if (run < k)
		na->next_fresh += k - run;
	return base + start;
}

/* A new slab of @k contiguous frames for @cache on @node (the first
 * frame), or SLAB_NONE at the pool's cap, the node's cap (bind) or out of
 * frames.  The first frame gets the cache's id in the owner map, the
 * others FRAME_TAIL | id, before it is released (the head last). */
static uint32_t frame_alloc(struct shm_pool *p, uint32_t cache, uint32_t node, uint32_t k)
{
	struct shm_node_alloc *na = &p->nalloc[node];
	uint64_t cap_frames = at_load_relaxed(&p->hdr->mem_cap) >> SLAB_SHIFT;
	uint32_t f = SLAB_NONE;

	uint64_t used = at_load_relaxed(&p->hdr->frames_used);

	/* Reserve the frames under the cap first: nodes allocate concurrently. */
	do {
		if (used + k > cap_frames)
			return SLAB_NONE;
	} while (!at_cas_relaxed(&p->hdr->frames_used, &used, used + k));
	lock_acquire(&na->lock, LOCK_RANK_NODE_ALLOC);
	if (node_at_cap(p, na, k)) {
		/* numa_policy=bind: the node gives no more (sheafd logs it). */
	} else if (k == 1 && na->free_first != SLAB_NONE) {
		f = na->free_first;
		stack_unlink(p, na, f);
	} else if (p->frames_per_node - na->next_fresh >= k) {
		f = node * p->frames_per_node + na->next_fresh;
		na->next_fresh += k;
	} else if (k > 1) {
		f = run_take(p, na, node, k);
	}
	SHEAF_ASSERT(f == SLAB_NONE || (f + k <= p->frames_total &&
		     pool_node_of_frame(p, f) == node &&
		     pool_node_of_frame(p, f + k - 1) == node &&
		     at_load_relaxed(&p->frame_owner[f]) == FRAME_FREE));
	if (f == SLAB_NONE) {
		at_fetch_sub_relaxed(&p->hdr->frames_used, k);   /* no frame left */
	} else {
		at_store_relaxed(&na->used, at_load_relaxed(&na->used) + k);
		for (uint32_t j = k; j-- > 0;) {
			uint16_t o = (uint16_t)(j == 0 ? cache : FRAME_TAIL | cache);

			p->slabs[f + j].cache = o;
			p->slabs[f + j].node = (uint8_t)node;
			p->slabs[f + j].list = SL_NONE;
			/* Clients read frame_owner to validate frees of
			 * objects they got through the rings, which order
			 * after this. */
			at_store_release(&p->frame_owner[f + j], o);
		}
	}
	lock_release(&na->lock);
	return f;
}

/* Give back slab @f of @k frames: punched, then FRAME_FREE (the first
 * frame first: an engine that dies half-way leaves tails without their
 * first frame, which slab_rebuild frees, never a first frame whose tails
 * went elsewhere). */
static void frame_release(struct shm_pool *p, uint32_t f, uint32_t k)
{
	struct shm_node_alloc *na = &p->nalloc[pool_node_of_frame(p, f)];

	SHEAF_ASSERT(f + k <= p->frames_total && p->slabs[f].list == SL_NONE);
	pool_punch(p, pool_frame_off(p, f), (uint64_t)k << SLAB_SHIFT);
	lock_acquire(&na->lock, LOCK_RANK_NODE_ALLOC);
	SHEAF_ASSERT(at_load_relaxed(&p->hdr->frames_used) >= k);
	/* Before the owner map: a client that still finds the count it read
	 * when it allocated an object knows that object's frame stayed its
	 * cache's (sheaf_free_any's hint, client/sheaf.h). */
	at_fetch_add_relaxed(&p->hdr->frames_released, 1);
	for (uint32_t j = 0; j < k; j++) {
		at_store_release(&p->frame_owner[f + j], FRAME_FREE);
		p->slabs[f + j].cache = FRAME_FREE;
		p->slabs[f + j].list = SL_NONE;
		stack_push(p, na, f + j);
	}
	at_store_relaxed(&na->used, at_load_relaxed(&na->used) - k);
	at_fetch_sub_relaxed(&p->hdr->frames_used, k);
	lock_release(&na->lock);
}

/* Frames of one slab of cache @c. */
static uint32_t cache_frames(const struct shm_cache *c)
{
	return slab_frames_of(c->slab_bytes);
}

/*
 * @n contiguous frames of @node for a queue's storage (engine/queue.c),
 * marked FRAME_QUEUE: one from the released stack or the bump pointer,
 * several from the bump pointer only (the stack's frames are not
 * contiguous).  The first frame, or SLAB_NONE at the cap or out of frames.
 */
uint32_t slab_frames_take(struct shm_pool *p, uint32_t node, uint32_t n)
{
	struct shm_node_alloc *na = &p->nalloc[node];
	uint64_t cap_frames = at_load_relaxed(&p->hdr->mem_cap) >> SLAB_SHIFT;
	uint64_t used = at_load_relaxed(&p->hdr->frames_used);
	uint32_t f = SLAB_NONE;

	if (n == 1)
		return frame_alloc(p, FRAME_QUEUE, node, 1);
	do {
		if (used + n > cap_frames)
			return SLAB_NONE;
	} while (!at_cas_relaxed(&p->hdr->frames_used, &used, used + n));
	lock_acquire(&na->lock, LOCK_RANK_NODE_ALLOC);
	if (!node_at_cap(p, na, n) && p->frames_per_node - na->next_fresh >= n) {
		f = node * p->frames_per_node + na->next_fresh;
		na->next_fresh += n;
		at_store_relaxed(&na->used, at_load_relaxed(&na->used) + n);
		for (uint32_t k = 0; k < n; k++) {
			p->slabs[f + k].cache = FRAME_QUEUE;
			p->slabs[f + k].node = (uint8_t)node;
			at_store_release(&p->frame_owner[f + k], FRAME_QUEUE);
		}
	} else {
		at_fetch_sub_relaxed(&p->hdr->frames_used, n);
	}
	lock_release(&na->lock);
	return f;
}

/* Give back what slab_frames_take gave (each frame to the node's stack). */
void slab_frames_give(struct shm_pool *p, uint32_t first, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++)
		frame_release(p, first + k, 1);
}

/* Set up a fresh slab in frame @f: every object free. */
static void slab_init(struct shm_pool *p, const struct shm_cache *c, uint32_t f)
{
	uint64_t *bm = pool_bitmap(p, f);
	uint32_t n = c->objs_per_slab, w;

	memset(bm, 0, SLAB_BITMAP_WORDS * 8);  /* a reused frame may hold stale bits */
	for (w = 0; w < n / 64; w++)
		bm[w] = ~0ull;
	if (n % 64)
		bm[w] = (1ull << (n % 64)) - 1;
	p->slabs[f].nfree = n;
	p->slabs[f].hint = 0;
	p->slabs[f].list = SL_NONE;
	owner_slab_init(p, c, f);
}

static uint32_t do_take_from_slab(struct shm_pool *p, const struct shm_cache *c,
				  uint32_t s, uint64_t *out, uint32_t n)
{
	struct shm_slab *sl = &p->slabs[s];
	uint64_t *bm = pool_bitmap(p, s);
	uint64_t base = pool_frame_off(p, s);
	uint32_t words = (c->objs_per_slab + 63) / 64, got = 0, w;

	SHEAF_ASSERT_HELD(&pool_cnode(p, c->id, sl->node)->lock);
	SHEAF_ASSERT(sl->cache == c->id && sl->list == SL_NONE &&
		     sl->nfree <= c->objs_per_slab);
	for (w = sl->hint; w < words && got < n; w++) {
		uint64_t bits = bm[w];
		while (bits != 0 && got < n) {
			uint32_t b = (uint32_t)__builtin_ctzll(bits);
			bits &= bits - 1;
			out[got++] = base + (uint64_t)(w * 64 + b) * c->obj_size;
		}
		bm[w] = bits;
		if (bits != 0)
			break;
	}
	sl->hint = w < words ? w : 0;
	SHEAF_ASSERT(got <= n && got <= sl->nfree);
	sl->nfree -= got;
	return got;
}

/* Take empty slab @s of @c off its list and out of the counts, before
 * frame_release gives its frames back.  Under cn->lock. */
static void do_slab_detach(struct shm_pool *p, struct shm_cache_node *cn,
			   const struct shm_cache *c, uint32_t s)
{
	SHEAF_ASSERT_HELD(&cn->lock);
	SHEAF_ASSERT(p->slabs[s].nfree == c->objs_per_slab && p->slabs[s].list == SL_EMPTY);
	list_del(p, cn, s);
	cn->total_objects -= c->objs_per_slab;
	cn->free_objects -= c->objs_per_slab;
	at_counter_add(&cn->stat[ST_FREE_SLAB], 1);
	SHEAF_ASSERT(cn->free_objects <= cn->total_objects);
}

/*
 * Out of frames (memory cap, or the node's region is used up): release the
 * empty slabs other caches keep on @node beyond their min_partial.  We hold
 * @cache's lock, so the others are only try-locked (no lock order to break).
 */
static uint32_t reclaim_empty(struct shm_pool *p, uint32_t cache, uint32_t node)
{
	uint32_t released = 0;

	SHEAF_ASSERT_HELD(&pool_cnode(p, cache, node)->lock);
	for (uint32_t c = 0, used = pool_caches_used(p); c < used; c++) {
		struct shm_cache_node *cn;
		uint32_t keep;

		if (c == cache || at_load_acquire(&p->caches[c].state) != CACHE_LIVE)
			continue;
		cn = pool_cnode(p, c, node);
		if (lock_tryacquire(&cn->lock, LOCK_RANK_CACHE_NODE) != 0)
			continue;
		keep = at_load_relaxed(&p->caches[c].min_partial);
		while (cn->lists[SL_EMPTY].first != SLAB_NONE &&
		       cn->lists[SL_PARTIAL].count + cn->lists[SL_EMPTY].count > keep) {
			uint32_t s = cn->lists[SL_EMPTY].first;

			do_slab_detach(p, cn, &p->caches[c], s);
			frame_release(p, s, cache_frames(&p->caches[c]));
			released++;
		}
		SHEAF_ASSERT(cn->free_objects <= cn->total_objects);
		lock_release(&cn->lock);
	}
	return released;
}

static uint32_t do_slab_alloc_objs(struct shm_pool *p, uint32_t cache,
				   uint32_t node, uint64_t *out, uint32_t n)
{
	struct shm_cache *c = &p->caches[cache];
	struct shm_cache_node *cn = pool_cnode(p, cache, node);
	uint32_t got = 0;

	SHEAF_ASSERT_HELD(&cn->lock);
	while (got < n) {
		uint32_t s = cn->lists[SL_PARTIAL].first;
		if (s == SLAB_NONE)
			s = cn->lists[SL_EMPTY].first;
		if (s == SLAB_NONE) {
			s = frame_alloc(p, cache, node, cache_frames(c));
			if (s == SLAB_NONE && reclaim_empty(p, cache, node) > 0)
				s = frame_alloc(p, cache, node, cache_frames(c));
			if (s == SLAB_NONE)
				break;
			slab_init(p, c, s);
			cn->total_objects += c->objs_per_slab;
			cn->free_objects += c->objs_per_slab;
			at_counter_add(&cn->stat[ST_ALLOC_SLAB], 1);
		} else {
			list_del(p, cn, s);
		}
		uint32_t k = do_take_from_slab(p, c, s, out + got, n - got);
		SHEAF_ASSERT(k > 0 && k <= cn->free_objects);
		got += k;
		cn->free_objects -= k;
		list_add(p, cn, s, list_for(c, &p->slabs[s]));
	}
	SHEAF_ASSERT(got <= n && cn->free_objects <= cn->total_objects);
	return got;
}

uint32_t slab_alloc_objs(struct shm_pool *p, uint32_t cache, uint32_t node,
			 uint64_t *out, uint32_t n, int flags)
{
	struct shm_cache_node *cn = pool_cnode(p, cache, node);
	uint32_t got;

	if (flags & SLAB_TRYLOCK) {
		if (lock_tryacquire(&cn->lock, LOCK_RANK_CACHE_NODE) != 0)
			return 0;
	} else {
		lock_acquire(&cn->lock, LOCK_RANK_CACHE_NODE);
	}
	got = do_slab_alloc_objs(p, cache, node, out, n);
	lock_release(&cn->lock);
	return got;
}

/* Return one validated object to its slab; -EALREADY if it was free. */
static int do_slab_free_one(struct shm_pool *p, struct shm_cache_node *cn,
			    const struct shm_cache *c, uint64_t off)
{
	uint32_t f = pool_frame_of(p, off);
	struct shm_slab *sl = &p->slabs[f];
	uint32_t idx = (uint32_t)((off - pool_frame_off(p, f)) / c->obj_size);
	uint64_t *w = &pool_bitmap(p, f)[idx / 64];
	uint64_t bit = 1ull << (idx % 64);

	SHEAF_ASSERT_HELD(&cn->lock);
	SHEAF_ASSERT(sl->cache == c->id && idx < c->objs_per_slab);
	if (*w & bit)
		return -EALREADY;
	*w |= bit;
	if (idx / 64 < sl->hint)
		sl->hint = idx / 64;
	sl->nfree++;
	cn->free_objects++;
	SHEAF_ASSERT(sl->nfree <= c->objs_per_slab && sl->list != SL_NONE &&
		     cn->free_objects <= cn->total_objects);
	/* Move lists only on the transitions (full->partial, ->empty). */
	if (sl->nfree == 1 || sl->nfree == c->objs_per_slab) {
		list_del(p, cn, f);
		list_add(p, cn, f, list_for(c, sl));
	}
	/* An empty large slab beyond the pool's retain budget goes back to
	 * the kernel now (its pages punched), not at the next shrink. */
	if (sl->list == SL_EMPTY && slab_is_large(c->obj_size) &&
	    at_load_relaxed(&p->hdr->large_retained) > at_load_relaxed(&p->hdr->large_retain)) {
		do_slab_detach(p, cn, c, f);
		frame_release(p, f, cache_frames(c));
	}
	return 0;
}

uint32_t slab_free_objs(struct shm_pool *p, uint32_t cache,
			const uint64_t *objs, uint32_t n)
{
	const struct shm_cache *c = &p->caches[cache];
	struct shm_cache_node *cn = NULL;
	uint32_t bad = 0, locked = SLAB_NONE;

	for (uint32_t i = 0; i < n; i++) {
		uint64_t off = objs[i];
		uint32_t node;

		if (slab_validate(p, cache, off) != 0) {
			bad++;
			continue;
		}
		node = pool_node_of_frame(p, pool_frame_of(p, off));
		if (node != locked) {
			if (cn != NULL)
				lock_release(&cn->lock);
			cn = pool_cnode(p, cache, node);
			lock_acquire(&cn->lock, LOCK_RANK_CACHE_NODE);
			locked = node;
		}
		if (do_slab_free_one(p, cn, c, off) != 0)
			bad++;
	}
	if (cn == NULL && bad) {
		cn = pool_cnode(p, cache, 0);
		lock_acquire(&cn->lock, LOCK_RANK_CACHE_NODE);
	}
	if (cn != NULL) {
		if (bad)
			at_counter_add(&cn->stat[ST_FLUSH_INVALID], bad);
		lock_release(&cn->lock);
	}
	return bad;
}

int slab_off_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

uint32_t slab_free_objs_once(struct shm_pool *p, uint32_t cache, uint64_t *objs, uint32_t n)
{
	uint32_t u = 0, dups;

	if (n == 0)
		return 0;
	qsort(objs, n, sizeof(*objs), slab_off_cmp);
	for (uint32_t i = 0; i < n; i++)
		if (u == 0 || objs[i] != objs[u - 1])
			objs[u++] = objs[i];
	dups = n - u;
	if (dups) {
		struct shm_cache_node *cn = pool_cnode(p, cache, 0);

		lock_acquire(&cn->lock, LOCK_RANK_CACHE_NODE);
		at_counter_add(&cn->stat[ST_FLUSH_INVALID], dups);
		lock_release(&cn->lock);
	}
	return dups + (u ? slab_free_objs(p, cache, objs, u) : 0);
}

uint32_t slab_shrink(struct shm_pool *p, uint32_t cache, uint32_t node,
		     uint32_t keep)
{
	const struct shm_cache *c = &p->caches[cache];
	struct shm_cache_node *cn = pool_cnode(p, cache, node);
	uint32_t released = 0;

	for (;;) {
		uint32_t s;

		lock_acquire(&cn->lock, LOCK_RANK_CACHE_NODE);
		s = cn->lists[SL_EMPTY].first;
		if (s == SLAB_NONE ||
		    cn->lists[SL_PARTIAL].count + cn->lists[SL_EMPTY].count <= keep) {
			lock_release(&cn->lock);
			break;
		}
		do_slab_detach(p, cn, c, s);
		lock_release(&cn->lock);
		frame_release(p, s, cache_frames(c));
		released++;
	}
	return released;
}

/* Frames [0, the returned index) of @node hold every frame some cache
 * owns: the node's bump pointer, raised over any owned frame above it (a
 * scribbled pointer must not hand out a frame a cache still has). */
static uint32_t rebuild_bump(struct shm_pool *p, uint32_t node)
{
	uint32_t fresh = p->nalloc[node].next_fresh;

	if (fresh > p->frames_per_node)
		fresh = p->frames_per_node;
	for (uint32_t k = p->frames_per_node; k-- > fresh;)
		if (at_load_relaxed(&p->frame_owner[node * p->frames_per_node + k]) != FRAME_FREE)
			return k + 1;
	return fresh;
}

/* Free the tails of @node (FRAME_TAIL | c) that follow no first frame c
 * and tails of it: an engine that died in frame_release between a slab's
 * first frame and its others leaves them so. */
static void rebuild_tails(struct shm_pool *p, uint32_t node)
{
	uint32_t base = node * p->frames_per_node;
	uint16_t prev = FRAME_FREE;

	for (uint32_t k = 0; k < p->frames_per_node; k++) {
		uint16_t o = at_load_relaxed(&p->frame_owner[base + k]);

		if ((o & FRAME_TAIL) && o < FRAME_QUEUE &&
		    prev != (o & ~FRAME_TAIL) && prev != o) {
			o = FRAME_FREE;
			at_store_relaxed(&p->frame_owner[base + k], FRAME_FREE);
		}
		prev = o;
	}
}

/*
 * Bounded whatever the region holds: every loop runs over the pool's own
 * geometry, and a cache is walked only when LIVE, which adoption gives only
 * to caches whose descriptor passed adopt_vet_cache (others are
 * quarantined first).  A frame owned by a cache that is not LIVE (a
 * quarantined one, or a garbage owner entry) stays out of the free stack:
 * left alone, and counted as used.
 */
void slab_rebuild(struct shm_pool *p)
{
	pthread_mutexattr_t ma;
	uint64_t used = 0;

	at_store_relaxed(&p->hdr->large_retained, 0);   /* list_add counts again */

	pthread_mutexattr_init(&ma);
	for (uint32_t n = 0; n < p->nodes; n++) {
		struct shm_node_alloc *na = &p->nalloc[n];

		SHEAF_ASSERT_NOT_HELD(&na->lock);
		pthread_mutex_init(&na->lock, &ma);
		na->free_first = SLAB_NONE;
		na->free_count = 0;
		rebuild_tails(p, n);
		na->next_fresh = rebuild_bump(p, n);
		/* Frames below the bump pointer that no cache owns are free
		 * (one being taken when the engine died included). */
		for (uint32_t k = na->next_fresh; k-- > 0;) {
			uint32_t f = n * p->frames_per_node + k;
			uint16_t o = at_load_relaxed(&p->frame_owner[f]);

			if (o == FRAME_FREE) {
				p->slabs[f].cache = FRAME_FREE;
				stack_push(p, na, f);
			} else if (o >= pool_caches_used(p) ||
				   at_load_relaxed(&p->caches[o].state) != CACHE_LIVE) {
				used++;         /* not walked below: left alone */
			}
		}
		at_store_relaxed(&na->used, na->next_fresh - na->free_count);
	}
	/* Not `used` for the bound: that counts frames (it once shadowed
	 * it, and the loop ran past max_caches over the slab table). */
	for (uint32_t c = 0, ncaches = pool_caches_used(p); c < ncaches; c++) {
		const struct shm_cache *sc = &p->caches[c];
		for (uint32_t n = 0; n < p->nodes; n++) {
			struct shm_cache_node *cn = pool_cnode(p, c, n);

			SHEAF_ASSERT_NOT_HELD(&cn->lock);
			pthread_mutex_init(&cn->lock, &ma);
			for (int l = 0; l < 4; l++) {
				cn->lists[l].first = SLAB_NONE;
				cn->lists[l].count = 0;
			}
			cn->total_objects = cn->free_objects = 0;
			if (at_load_relaxed((_Atomic uint32_t *)&sc->state) != CACHE_LIVE)
				continue;
			for (uint32_t k = 0; k < p->frames_per_node; k++) {
				uint32_t f = n * p->frames_per_node + k;
				struct shm_slab *sl = &p->slabs[f];
				const uint64_t *bm = pool_bitmap(p, f);
				uint32_t pop = 0;

				if (at_load_relaxed(&p->frame_owner[f]) != c)
					continue;
				/* Word by word: the bits of objects 0..objs-1. */
				for (uint32_t i = 0; i < sc->objs_per_slab; i += 64) {
					uint32_t left = sc->objs_per_slab - i;
					uint64_t w = bm[i / 64];

					if (left < 64)
						w &= (1ull << left) - 1;
					pop += (uint32_t)__builtin_popcountll(w);
				}
				sl->cache = (uint16_t)c;
				sl->node = (uint8_t)n;
				sl->nfree = pop;
				sl->hint = 0;
				sl->list = SL_NONE;
				list_add(p, cn, f, list_for(sc, sl));
				cn->total_objects += sc->objs_per_slab;
				cn->free_objects += pop;
				used++;
			}
		}
	}
	pthread_mutexattr_destroy(&ma);
	at_store_relaxed(&p->hdr->frames_used, used);
}
