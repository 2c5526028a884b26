/*
 * names.c - the name directory's reads (names.h): lock-free, by any
 * process.  The writes are the engine's (engine/names.c).
 *
 * The table is open-addressed with linear probing from a name's hash.  A
 * deleted entry becomes a tombstone, so that the chains of the entries
 * behind it stay unbroken for readers that probe without a lock; a
 * tombstone (and the tombstones before it) becomes FREE again as soon as
 * the entry after it is FREE, where no chain can pass.  Entries never move,
 * so a name that exists and does not change is always found.
 *
 * Memory orders: each entry is a seqlock whose every word is an atomic (a
 * reader never reads a torn word).  The writer is engine/names.c's
 * entry_store; the labels are on the accesses:
 *   [NW1] writer: seq := odd, relaxed; ordered before [NR1] by its release.
 *   [NR1] writer: each field (state, cache, cache_gen, off, created_at,
 *         name words), release; pairs with [NA2].
 *   [NR2] writer: seq := even, release; pairs with [NA1].
 *   [NA1] reader: seq, acquire; pairs with [NR2]: an even count read
 *         shows every field the write stored before it.
 *   [NA2] reader: each field, acquire; pairs with [NR1]: a field of a
 *         later write brings that write's odd count ([NW1]) along, so the
 *         final seq load (relaxed, after [NA2] by their acquire) sees the
 *         count moved and the copy is retried.
 */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include "names.h"
#include "slab_geom.h"

#define MASK (SHEAF_DIR_ENTRIES - 1u)
#define WORDS (SHEAF_DIR_NAME_BYTES / 8u)
#define READ_TRIES 4096u

/* FNV-1a, 64 bits. */
uint32_t names_home(const char *name)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const unsigned char *s = (const unsigned char *)name; *s; s++)
		h = (h ^ *s) * 0x100000001b3ull;
	return (uint32_t)(h ^ (h >> 32)) & MASK;
}

int names_check(const char *name)
{
	if (name == NULL || name[0] == '\0')
		return -EINVAL;
	if (strnlen(name, SHEAF_DIR_NAME_BYTES) >= SHEAF_DIR_NAME_BYTES)
		return -ENAMETOOLONG;
	return 0;
}

/* ---- reading (any process) ------------------------------------------- */

/*
 * A consistent copy of entry @e: its state (or -EAGAIN when it kept
 * changing).  Seqlock reader: the loads are acquires ([NA1], [NA2] above),
 * so that the final load of @seq comes after them.
 */
int names_entry_load(const struct shm_name *e, struct name_rec *r)
{
	for (uint32_t tries = 0; tries < READ_TRIES; tries++) {
		/* [NA1] acquire: pairs with [NR2], the writer's even count. */
		uint32_t s = at_load_acquire(&e->seq), st;

		if ((s & 1u) == 0) {
			/* [NA2] acquires: pair with [NR1], the field stores. */
			st = at_load_acquire(&e->state);
			r->cache = at_load_acquire(&e->cache);
			r->cache_gen = at_load_acquire(&e->cache_gen);
			r->off = at_load_acquire(&e->off);
			r->created_at = at_load_acquire(&e->created_at);
			for (uint32_t w = 0; w < WORDS; w++) {
				uint64_t v = at_load_acquire(&e->name[w]);

				memcpy(r->name + 8 * w, &v, 8);
			}
			/* Relaxed: after [NA2] by their acquire. */
			if (at_load_relaxed(&e->seq) == s) {
				r->name[SHEAF_DIR_NAME_BYTES - 1] = '\0';
				return (int)st;
			}
		}
		if (tries % 8 == 7)
			sched_yield();
	}
	return -EAGAIN;
}

/* @r names an object of a live cache of the generation it records. */
int names_rec_valid(const struct shm_pool *p, const struct name_rec *r)
{
	uint32_t st;

	if (r->cache >= p->max_caches)
		return 0;
	st = at_load_acquire(&p->caches[r->cache].state);
	return (st == CACHE_LIVE || st == CACHE_DYING) &&
	       at_load_relaxed(&p->caches[r->cache].generation) == r->cache_gen &&
	       slab_validate(p, r->cache, r->off) == 0;
}

int names_lookup(const struct shm_pool *p, const char *name, struct name_rec *out)
{
	uint32_t home, i;

	if (names_check(name) != 0)
		return -ENOENT;
	home = names_home(name);
	for (i = 0; i < SHEAF_DIR_ENTRIES; i++) {
		int st = names_entry_load(&p->names[(home + i) & MASK], out);

		if (st < 0)
			return st;
		if (st == NAME_FREE)
			break;
		if (st == NAME_USED && strcmp(out->name, name) == 0)
			return names_rec_valid(p, out) ? 0 : -ENOENT;
	}
	return -ENOENT;
}

int names_read(const struct shm_pool *p, uint32_t i, struct name_rec *out)
{
	return i < SHEAF_DIR_ENTRIES && names_entry_load(&p->names[i], out) == NAME_USED &&
	       out->name[0] != '\0' && names_rec_valid(p, out);
}
