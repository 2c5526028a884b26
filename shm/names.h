/*
 * names.h - the name directory: names for objects, kept in the engine-owned
 * part of the region (layout.h, struct shm_name), so that any client finds
 * an object by name with no round trip, no client can change or spoil the
 * directory, and it survives an adoption.
 *
 * Who may call: any process of the pool (these only read; a client reads
 * its read-only mapping of META).  The writers are the engine's alone
 * (engine/names.h).  Errors: 0 or -errno.
 *
 * The rules:
 *   - a name is 1..SHEAF_DIR_NAME_BYTES-1 bytes (no NUL); at most
 *     SHEAF_DIR_ENTRIES names per pool;
 *   - an entry names an allocated object of a live cache (checked when it
 *     is set: in a slab frame of the cache, on an object boundary, not free
 *     in its slab, nor free in a sheaf by a debug cache's in-use bit or an
 *     owned cache's owner tag), and records that cache's id and
 *     generation: a reader takes an entry whose cache is gone or was made
 *     again for stale (not found);
 *   - destroying a cache drops the names of its objects (only names of
 *     objects freed without their name can be left: destroy is refused
 *     while objects are in use);
 *   - the directory does not keep objects alive: freeing a named object
 *     leaves its name pointing at a free object (delete the name first);
 *   - adoption drops every entry that fails those checks (a bad entry is
 *     dropped, never followed), and entries whose write died with the
 *     previous engine.
 */
#ifndef SHEAF_SHM_NAMES_H
#define SHEAF_SHM_NAMES_H

#include <stddef.h>
#include <stdint.h>
#include "pool.h"

/* One entry as read (a private copy). */
struct name_rec {
	uint32_t cache;
	uint32_t cache_gen;
	uint64_t off;
	uint64_t created_at;
	char name[SHEAF_DIR_NAME_BYTES];
};

/* @name is a valid name: 0, -EINVAL (NULL or empty), -ENAMETOOLONG. */
int names_check(const char *name);

/*
 * Find @name: 0 with *@out filled (an entry whose cache is live, of the
 * recorded generation, and whose offset is an object of that cache),
 * -ENOENT, or -EAGAIN when an entry kept changing under the reader (the
 * engine writes one entry in a few stores; practically never).
 */
int names_lookup(const struct shm_pool *p, const char *name, struct name_rec *out);

/* Entry @i (< SHEAF_DIR_ENTRIES) if it names a live object as
 * names_lookup requires: 1 with *@out, else 0. */
int names_read(const struct shm_pool *p, uint32_t i, struct name_rec *out);

/* The probing rules the writer shares with the readers: the home slot of
 * @name (FNV-1a); a consistent copy of entry @e (its state, or -EAGAIN
 * when it kept changing: a seqlock read of acquire loads); whether @r
 * names an object of a live cache of the generation it records. */
uint32_t names_home(const char *name);
int names_entry_load(const struct shm_name *e, struct name_rec *r);
int names_rec_valid(const struct shm_pool *p, const struct name_rec *r);

#endif
