/*
 * adopt_vet.h - what an engine that adopts a region (engine_adopt: sheafd
 * restarted on the memfd of a dead one) checks before it serves from it:
 * the engine-owned cache descriptors (a bad one is quarantined,
 * CACHE_BROKEN) and the shared part (ring headers, owner table).
 * Every repair is counted in the refusal counters (bounds.h).
 *
 * Who may call: the engine only, from engine_adopt, before any engine
 * thread runs.
 */
#ifndef SHEAF_SHM_ENGINE_ADOPT_VET_H
#define SHEAF_SHM_ENGINE_ADOPT_VET_H

#include <stddef.h>
#include <stdint.h>
#include "shm/pool.h"

/*
 * Whether descriptor @sc of a LIVE cache is one engine_cache_create could
 * have made (geometry of slab_geometry, capacity, flags, a terminated name;
 * the barn watermarks are clamped where they are used).  The engine divides
 * by obj_size and loops over objs_per_slab: a bad descriptor must never reach
 * it.  0, or -EUCLEAN with the first bad field in @why.
 */
int adopt_vet_cache(const struct shm_cache *sc, char *why, size_t len);

/*
 * Adoption, before slab_rebuild: quarantine every LIVE cache whose
 * descriptor is invalid (state CACHE_BROKEN: refused by find/open, skipped
 * by workers, shrink, check and destroy, its slot never reused, its slabs
 * left alone).  Returns the number quarantined (counted in UT_CACHE).
 */
uint32_t adopt_vet_quarantine(struct shm_pool *p);

/*
 * Adoption, before the dead engine's sheaves are taken back: make the
 * shared part safe to serve from.  Each ring's header gets the pool's
 * geometry again (tools read it); an owner-table entry that names no ring
 * of the pool, no client slot and neither the engine nor "none" is given
 * to @dead (the dead engine's id: its sheaf is then reclaimed with the
 * engine's, its objects validated).  Lanes need nothing: who holds each
 * is META's grant table.  Returns the entries repaired (counted).
 */
uint32_t adopt_vet_shared(struct shm_pool *p, uint32_t dead);

#endif
