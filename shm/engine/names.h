/*
 * names.h - the name directory's writes: setting and deleting a name, the
 * names of a destroyed cache, the validation at adoption.  The directory,
 * its rules and its lock-free reads are shm/names.h's.
 *
 * Who may call: the engine only (sheafd, or a local pool's in-process
 * engine): engine_name_set and engine_name_del take the engine's ctl_lock;
 * names_drop_cache and names_adopt assume the caller serialises them
 * (engine_cache_destroy holds ctl_lock; engine_adopt runs before any
 * engine thread).  Errors: 0 or -errno, with a message in @err where
 * there is one.
 */
#ifndef SHEAF_SHM_ENGINE_NAMES_H
#define SHEAF_SHM_ENGINE_NAMES_H

#include <stddef.h>
#include <stdint.h>
#include "shm/names.h"

struct engine;

/*
 * Name object @off (a region offset) @name.  0, -EEXIST (the name is
 * taken; unchanged), -ENOSPC (SHEAF_DIR_ENTRIES names), -EINVAL (not an
 * allocated object of a live cache of this pool), -ENAMETOOLONG.
 */
int engine_name_set(struct engine *e, const char *name, uint64_t off,
		    char *err, size_t errlen);

/* Delete @name: 0, -ENOENT, -EINVAL / -ENAMETOOLONG (a bad name). */
int engine_name_del(struct engine *e, const char *name, char *err, size_t errlen);

/* Drop every name of an object of @cache (being destroyed, or gone).
 * Returns how many.  Caller holds the engine's ctl_lock. */
uint32_t names_drop_cache(struct shm_pool *p, uint32_t cache);

/* Adoption: drop every entry that is not valid now (and any whose write
 * died half-way).  Returns how many were dropped.  No engine thread runs. */
uint32_t names_adopt(struct shm_pool *p);

#endif
