/*
 * owner.h - the engine's side of object ownership (the tags and their rules
 * are shm/owner.h's): fresh slabs' tags, a dead client's sheaves untagged
 * and its objects freed or kept, adoption's stale claims, the per-client
 * report.
 *
 * Who may call: the engine's hosting process only (sheafd, or a local
 * pool's process); owner_queue_reclaim and owner_reclaim under the
 * engine's ctl_lock, from engine_reclaim_client only.
 */
#ifndef SHEAF_SHM_ENGINE_OWNER_H
#define SHEAF_SHM_ENGINE_OWNER_H

#include <stdint.h>
#include "shm/owner.h"

/* A fresh slab of cache @sc in frame @f: its tags to 0 (a reused frame may
 * hold another cache's).  Caller holds the cache-node lock. */
void owner_slab_init(struct shm_pool *p, const struct shm_cache *sc, uint32_t f);

/* Sheaf @sh, taken back from dead client @dead, is about to go to the
 * slabs: clear the tags its objects still carry of @dead (a free killed
 * between its push and its clear).  No-op for other caches. */
void owner_sheaf_untag(struct shm_pool *p, const struct shm_sheaf *sh, uint32_t dead);

/*
 * After the dead client @dead's sheaves went back (owner_sheaf_untag,
 * take_back_sheaves): every object of an owned, live cache whose tag still
 * names @dead is freed to its slab (counted in @freed[cache]) or, for
 * SHEAF_CACHE_F_KEEP caches, re-tagged OWNER_TAG_KEPT (@kept[cache]).
 * Caller holds the engine's ctl_lock (no cache is created or destroyed
 * meanwhile); client threads and workers may run.  0, or -ENOMEM (nothing
 * freed for the cache that needed memory).
 */
int owner_reclaim(struct shm_pool *p, uint32_t dead, uint64_t *freed, uint64_t *kept);

/*
 * Before owner_reclaim: the enqueues and dequeues of owned caches' objects
 * that dead client @dead was doing, from its lanes' queue records
 * (shm/queue.h, "queue records"; docs/design.md 13.4).  Each object a
 * record names whose tag is QUEUED is claimed (REPAIR), then looked for
 * in every live queue's slots and in the other lanes' records: found, it
 * is queued or another thread's (back to QUEUED); not found, the dead
 * client was its last holder (its tag names @dead, and owner_reclaim
 * frees or keeps it).  The records are cleared.  Caller holds ctl_lock.
 * Returns the objects given back to @dead; -ENOMEM: nothing done.
 */
int owner_queue_reclaim(struct shm_pool *p, uint32_t dead);

/*
 * Adoption (engine_adopt, no engine thread running): a REPAIR tag is a
 * claim of a repair that died with the previous engine; its object goes
 * to 0 when free in its slab, else to OWNER_TAG_KEPT (counted in
 * owner_kept: whether the claim was freed is unknown, so it is kept and
 * reported, never freed twice).
 */
void owner_adopt(struct shm_pool *p);

/*
 * A report: @held[client * @caches + cache] the objects whose tag names the
 * client (client < @clients), @kept[cache] the OWNER_TAG_KEPT ones, for
 * every owned live cache below @caches (tags read once each, racing with
 * their writers: a snapshot).
 */
void owner_count(const struct shm_pool *p, uint64_t *held, uint64_t *kept,
		 uint32_t clients, uint32_t caches);

#endif
