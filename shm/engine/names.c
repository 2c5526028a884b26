/*
 * names.c - the name directory's writes (names.h: engine_name_set,
 * engine_name_del, names_drop_cache) and its validation at adoption
 * (names_adopt).  The engine is the directory's only writer; the reads and
 * the probing rules are shm/names.c's.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "shm/names.h"
#include "shm/owner.h"
#include "shm/slab_geom.h"
#include "shm/engine/engine.h"
#include "shm/engine/names.h"

#define MASK (SHEAF_DIR_ENTRIES - 1u)
#define WORDS (SHEAF_DIR_NAME_BYTES / 8u)

static void seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* The message of names_check's refusal @rc. */
static int bad_name(int rc, char *err, size_t errlen)
{
	if (rc == -EINVAL)
		seterr(err, errlen, "empty name");
	else
		seterr(err, errlen, "name longer than %u bytes", SHEAF_DIR_NAME_BYTES - 1);
	return rc;
}

/* Whether object @off of @cache is allocated: not free in its slab's
 * bitmap (slab_validate passed).  The engine calls it with the cache-node
 * lock held, or with no engine thread running (adoption). */
static int obj_allocated(const struct shm_pool *p, uint32_t cache, uint64_t off)
{
	uint32_t f = pool_frame_of(p, off);
	uint32_t idx = (uint32_t)((off - pool_frame_off(p, f)) / p->caches[cache].obj_size);

	return (pool_bitmap(p, f)[idx / 64] & (1ull << (idx % 64))) == 0;
}

/*
 * Whether object @off of @cache, not free in its slab, is free in a sheaf
 * as far as the cache records it: a debug cache's in-use bit clear, an
 * owned cache's owner tag naming nobody.  Both are client-written hints
 * (SHARED): a wrong one makes only this check wrong, for a name its
 * client asked for.  A plain cache records nothing (an exact answer would
 * need a scan of sheaves that threads change without locks): 0.
 */
static int obj_free_in_sheaf(const struct shm_pool *p, uint32_t cache, uint64_t off)
{
	const struct shm_cache *sc = &p->caches[cache];
	uint32_t f = pool_frame_of(p, off);
	uint32_t idx = (uint32_t)((off - pool_frame_off(p, f)) / sc->obj_size);

	if (sc->flags & SHEAF_CACHE_F_DEBUG)
		return (at_load_acquire(&pool_inuse(p, f)[idx / 64]) & (1ull << (idx % 64))) == 0;
	if (sc->flags & SHEAF_CACHE_F_OWNED)
		return at_load_acquire(owner_tag(p, sc, off)) == OWNER_TAG_NONE;
	return 0;
}

/* The engine's own view of entry @i (it is the only writer). */
static uint32_t state_of(const struct shm_pool *p, uint32_t i)
{
	return at_load_relaxed(&p->names[i & MASK].state);
}

static void name_of(const struct shm_pool *p, uint32_t i, char *out)
{
	for (uint32_t w = 0; w < WORDS; w++) {
		uint64_t v = at_load_relaxed(&p->names[i & MASK].name[w]);

		memcpy(out + 8 * w, &v, 8);
	}
	out[SHEAF_DIR_NAME_BYTES - 1] = '\0';
}

/*
 * Change entry @i to @state (and, when @r, its contents), under its
 * sequence count: odd while the stores happen, which are releases.  The
 * labels are those of shm/names.c (its readers hold the acquires).  A count
 * left odd by a dead engine is made even here too.
 */
static void entry_store(struct shm_pool *p, uint32_t i, uint32_t state,
			const struct name_rec *r)
{
	struct shm_name *e = &p->names[i & MASK];
	uint32_t s = (at_load_relaxed(&e->seq) + 1u) | 1u;

	/* [NW1] relaxed: ordered before [NR1] by its release. */
	at_store_relaxed(&e->seq, s);
	/* [NR1] releases: pair with the readers' [NA2]. */
	if (r != NULL) {
		at_store_release(&e->cache, r->cache);
		at_store_release(&e->cache_gen, r->cache_gen);
		at_store_release(&e->off, r->off);
		at_store_release(&e->created_at, r->created_at);
		for (uint32_t w = 0; w < WORDS; w++) {
			uint64_t v;

			memcpy(&v, r->name + 8 * w, 8);
			at_store_release(&e->name[w], v);
		}
	}
	at_store_release(&e->state, state);
	/* [NR2] release: pairs with the readers' [NA1]. */
	at_store_release(&e->seq, s + 1u);
}

/*
 * Where @name is (its index), or -ENOENT with *@slot the first entry an
 * insert may take on its chain (a tombstone or the FREE entry that ends
 * it; -1 when the table has none).
 */
static int find_slot(const struct shm_pool *p, const char *name, int *slot)
{
	uint32_t home = names_home(name);
	char buf[SHEAF_DIR_NAME_BYTES];

	*slot = -1;
	for (uint32_t k = 0; k < SHEAF_DIR_ENTRIES; k++) {
		uint32_t i = (home + k) & MASK, st = state_of(p, i);

		if (st == NAME_USED) {
			name_of(p, i, buf);
			if (strcmp(buf, name) == 0)
				return (int)i;
			continue;
		}
		if (*slot < 0)
			*slot = (int)i;
		if (st == NAME_FREE)
			break;
	}
	return -ENOENT;
}

/* Entry @i is no longer used: a tombstone, then FREE with the tombstones
 * before it if the entry after it is FREE (no chain passes there). */
static void entry_delete(struct shm_pool *p, uint32_t i)
{
	entry_store(p, i, NAME_TOMB, NULL);
	if (state_of(p, i + 1) != NAME_FREE)
		return;
	for (uint32_t k = 0; k < SHEAF_DIR_ENTRIES && state_of(p, i - k) == NAME_TOMB; k++)
		entry_store(p, i - k, NAME_FREE, NULL);
}

/* Object @off as an allocated object of a live cache: its cache, or
 * -EINVAL with @err.  Caller holds ctl_lock (no cache changes state). */
static int object_cache(struct shm_pool *p, uint64_t off, char *err, size_t errlen)
{
	struct shm_cache_node *cn;
	uint32_t f, cache;
	int ok;

	if (off - p->data_off >= p->data_len) {
		seterr(err, errlen, "offset %#llx is not in the pool's object data",
		       (unsigned long long)off);
		return -EINVAL;
	}
	f = pool_frame_of(p, off);
	cache = at_load_acquire(&p->frame_owner[f]);
	if (cache >= p->max_caches ||
	    at_load_acquire(&p->caches[cache].state) != CACHE_LIVE ||
	    slab_validate(p, cache, off) != 0) {
		seterr(err, errlen, "offset %#llx is not an object of a live cache",
		       (unsigned long long)off);
		return -EINVAL;
	}
	cn = pool_cnode(p, cache, pool_node_of_frame(p, f));
	lock_acquire(&cn->lock, LOCK_RANK_CACHE_NODE);
	ok = obj_allocated(p, cache, off);
	lock_release(&cn->lock);
	if (!ok) {
		seterr(err, errlen, "the object is free (not allocated) in cache '%s'",
		       p->caches[cache].name);
		return -EINVAL;
	}
	if (obj_free_in_sheaf(p, cache, off)) {
		seterr(err, errlen, "the object is free (in a sheaf, not allocated) in cache '%s'",
		       p->caches[cache].name);
		return -EINVAL;
	}
	return (int)cache;
}

int engine_name_set(struct engine *e, const char *name, uint64_t off,
		    char *err, size_t errlen)
{
	struct shm_pool *p = e->pool;
	struct name_rec r;
	int rc = names_check(name), slot, cache;

	if (rc != 0)
		return bad_name(rc, err, errlen);
	lock_acquire(&e->ctl_lock, LOCK_RANK_ENGINE_CTL);
	cache = object_cache(p, off, err, errlen);
	if (cache < 0) {
		rc = cache;
		goto out;
	}
	if (find_slot(p, name, &slot) >= 0) {
		seterr(err, errlen, "the name '%s' exists", name);
		rc = -EEXIST;
		goto out;
	}
	if (slot < 0) {
		seterr(err, errlen, "the name directory is full (%u names)", SHEAF_DIR_ENTRIES);
		rc = -ENOSPC;
		goto out;
	}
	memset(&r, 0, sizeof(r));
	r.cache = (uint32_t)cache;
	r.cache_gen = at_load_relaxed(&p->caches[cache].generation);
	r.off = off;
	r.created_at = (uint64_t)time(NULL);
	snprintf(r.name, sizeof(r.name), "%s", name);
	entry_store(p, (uint32_t)slot, NAME_USED, &r);
	rc = 0;
out:
	lock_release(&e->ctl_lock);
	return rc;
}

int engine_name_del(struct engine *e, const char *name, char *err, size_t errlen)
{
	int rc = names_check(name), slot, i;

	if (rc != 0)
		return bad_name(rc, err, errlen);
	lock_acquire(&e->ctl_lock, LOCK_RANK_ENGINE_CTL);
	i = find_slot(e->pool, name, &slot);
	if (i >= 0)
		entry_delete(e->pool, (uint32_t)i);
	else
		seterr(err, errlen, "no name '%s'", name);
	lock_release(&e->ctl_lock);
	return i >= 0 ? 0 : -ENOENT;
}

uint32_t names_drop_cache(struct shm_pool *p, uint32_t cache)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < SHEAF_DIR_ENTRIES; i++) {
		if (state_of(p, i) == NAME_USED &&
		    at_load_relaxed(&p->names[i].cache) == cache) {
			entry_delete(p, i);
			n++;
		}
	}
	return n;
}

/* Adoption's test of entry @i (USED, count even): a terminated, non-empty
 * name found first on its own chain, naming an allocated object of a live
 * cache of the recorded generation. */
static int adopt_valid(struct shm_pool *p, uint32_t i)
{
	struct name_rec r;
	int slot;

	if (names_entry_load(&p->names[i], &r) != NAME_USED)
		return 0;
	name_of(p, i, r.name);
	if (names_check(r.name) != 0 ||
	    at_load_relaxed(&p->names[i].name[WORDS - 1]) >> 56 != 0)
		return 0;                    /* the last byte must be the NUL */
	if (!names_rec_valid(p, &r) || at_load_relaxed(&p->caches[r.cache].state) != CACHE_LIVE ||
	    !obj_allocated(p, r.cache, r.off))
		return 0;
	/* The first entry of that name on its chain, and reachable: no FREE
	 * entry between its home and it. */
	return find_slot(p, r.name, &slot) == (int)i;
}

uint32_t names_adopt(struct shm_pool *p)
{
	uint32_t dropped = 0;

	/* Whatever is not a valid USED entry becomes a tombstone (chains
	 * behind it stay whole); a count left odd by the dead engine is made
	 * even (its write is not trusted: dropped). */
	for (uint32_t i = 0; i < SHEAF_DIR_ENTRIES; i++) {
		uint32_t st = state_of(p, i);
		int odd = (at_load_relaxed(&p->names[i].seq) & 1u) != 0;

		if (st == NAME_FREE && !odd)
			continue;
		if (st == NAME_USED && !odd && adopt_valid(p, i))
			continue;
		if (st == NAME_TOMB && !odd)
			continue;
		entry_store(p, i, NAME_TOMB, NULL);
		dropped += st == NAME_USED;
	}
	/* Tombstones before a FREE entry become FREE. */
	for (uint32_t i = 0; i < SHEAF_DIR_ENTRIES; i++)
		if (state_of(p, i) == NAME_TOMB && state_of(p, i + 1) == NAME_FREE)
			entry_delete(p, i);
	return dropped;
}
