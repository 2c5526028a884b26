/*
 * adopt_vet.c - the validation a restarted engine runs over a region before
 * it serves from it (adopt_vet.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "shm/bounds.h"
#include "shm/lanes.h"
#include "shm/slab_geom.h"
#include "shm/engine/adopt_vet.h"

static int why_bad(char *why, size_t len, const char *fmt, unsigned v)
{
	if (why != NULL && len > 0)
		snprintf(why, len, fmt, v);
	return -EUCLEAN;
}

int adopt_vet_cache(const struct shm_cache *sc, char *why, size_t len)
{
	uint32_t obj_size, per_slab, cap = at_load_relaxed(&sc->sheaf_capacity);

	/* The geometry engine_cache_create computes for (obj_size, align):
	 * obj_size is already rounded, so it must come back unchanged. */
	if (sc->align < 8 || sc->align > SHEAF_MAX_ALIGN || (sc->align & (sc->align - 1)))
		return why_bad(why, len, "align %u", sc->align);
	if (slab_geometry(sc->obj_size, sc->align, &obj_size, &per_slab) != 0 ||
	    obj_size != sc->obj_size)
		return why_bad(why, len, "object size %u", sc->obj_size);
	if (sc->objs_per_slab != per_slab || per_slab == 0 || per_slab > SLAB_MAX_OBJS)
		return why_bad(why, len, "objects per slab %u", sc->objs_per_slab);
	if (sc->slab_bytes != per_slab * obj_size)
		return why_bad(why, len, "slab bytes %u", sc->slab_bytes);
	if (cap > SHEAF_CAP_MAX)
		return why_bad(why, len, "sheaf capacity %u", cap);
	if (sc->flags & ~SHEAF_CACHE_F_ALL)
		return why_bad(why, len, "flags 0x%x", sc->flags);
	if (memchr(sc->name, '\0', SHEAF_NAME_MAX) == NULL || sc->name[0] == '\0')
		return why_bad(why, len, "name (%u bytes, unterminated or empty)", SHEAF_NAME_MAX);
	return 0;
}

uint32_t adopt_vet_quarantine(struct shm_pool *p)
{
	uint32_t n = 0;

	for (uint32_t c = 0, used = pool_caches_used(p); c < used; c++) {
		struct shm_cache *sc = &p->caches[c];
		uint32_t st = at_load_acquire(&sc->state);

		/* A state no engine writes is as bad as a bad descriptor. */
		if (st == CACHE_FREE || st == CACHE_BROKEN ||
		    (st == CACHE_LIVE && sc->id == c &&
		     adopt_vet_cache(sc, NULL, 0) == 0))
			continue;
		at_store_release(&sc->state, CACHE_BROKEN);
		n++;
	}
	untrusted_note(UT_CACHE, n);
	return n;
}

/* Whether owner-table value @o names someone: a ring of the pool, the
 * engine, "none", or a client slot. */
static int owner_known(const struct shm_pool *p, uint32_t o)
{
	if (OWNER_IS_RING(o))
		return OWNER_RING_ID(o) < pool_rings_used(p);
	return o == OWNER_ENGINE || o == OWNER_NONE || o < pool_clients_used(p);
}

uint32_t adopt_vet_shared(struct shm_pool *p, uint32_t dead)
{
	uint32_t fixed = 0;

	for (uint32_t r = 0, used = pool_rings_used(p); r < used; r++) {
		struct ring_ref rr = pool_ring_ref(p, r);
		struct shm_ring *ring = rr.r;

		/* Only rewrite a header that differs: an untouched ring's
		 * pages stay untouched. */
		if (ring->size != ring_size(&rr) || ring->mask != rr.mask ||
		    ring->id != rr.id || ring->nsheaves != rr.nsheaves) {
			ring->size = ring_size(&rr);
			ring->mask = rr.mask;
			ring->id = rr.id;
			ring->nsheaves = rr.nsheaves;
		}
	}
	for (uint32_t s = 0; s < p->sheaf_count; s++) {
		uint32_t o = at_load_relaxed(&p->owners[s]);

		/* CAS: a live client may move a sheaf meanwhile, but never
		 * from a value that names nobody. */
		if (!owner_known(p, o) && at_cas_acqrel(&p->owners[s], &o, dead))
			fixed++;
	}
	/* Lanes: who holds each is META's grant table, not the lanes'
	 * SHARED fields; engine_adopt takes back the grants of free slots
	 * (client_lanes_sweep). */
	untrusted_note(UT_OWNER, fixed);
	return fixed;
}
