/*
 * engine.c - the pool engine's setup and teardown (engine_init/engine_fini)
 * and the helper every part of it shares: flushing a full sheaf back to the
 * slabs (engine/internal.h).
 *
 * The engine's files and what each holds: engine.h.
 *
 * Locks: e->ctl_lock serialises control calls (cache create/destroy,
 * shrink, repair) and guards e->ctl_lane and e->ids.  A worker uses only its
 * own node's lane; the slab layer takes the cache-node locks itself.
 *
 * Who may call: the hosting process (sheafd, or a local pool).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "shm/barn.h"
#include "shm/lanes.h"
#include "shm/engine/clients.h"
#include "shm/engine/grace.h"
#include "shm/engine/internal.h"
#include "shm/engine/slab.h"

int engine_init(struct engine *e, struct shm_pool *p, char *err, size_t errlen)
{
	memset(e, 0, sizeof(*e));
	e->pool = p;
	pthread_mutex_init(&e->ctl_lock, NULL);
	e->ids = calloc(p->sheaf_count, sizeof(uint32_t));
	e->served = calloc((size_t)SHEAF_MAX_CACHES * SHEAF_MAX_NODES, sizeof(*e->served));
	e->ctl_lane = client_lane_acquire(p, OWNER_ENGINE, 0);
	for (uint32_t n = 0; n < p->nodes && e->ctl_lane; n++)
		e->worker_lane[n] = client_lane_acquire(p, OWNER_ENGINE, n);
	if (e->ids == NULL || e->served == NULL || e->ctl_lane == NULL || ring_rebuild_init(e) != 0 ||
	    e->worker_lane[p->nodes - 1] == NULL || grace_init(e) != 0) {
		engine_fini(e);
		snprintf(err, errlen, "engine: out of memory or lanes");
		return -ENOMEM;
	}
	return 0;
}

void engine_fini(struct engine *e)
{
	engine_stop(e);
	grace_fini(e);
	for (uint32_t n = 0; n < SHEAF_MAX_NODES; n++)
		if (e->worker_lane[n] != NULL)
			client_lane_free(e->pool, e->worker_lane[n]);
	if (e->ctl_lane != NULL)
		client_lane_free(e->pool, e->ctl_lane);
	memset(e->worker_lane, 0, sizeof(e->worker_lane));
	e->ctl_lane = NULL;
	free(e->ids);
	e->ids = NULL;
	free(e->served);
	e->served = NULL;
	ring_rebuild_fini(e);
	pthread_mutex_destroy(&e->ctl_lock);
}

void engine_sheaf_to_slabs(struct shm_pool *p, uint32_t c, const struct shm_sheaf *sh)
{
	uint64_t objs[SHEAF_CAP_MAX];
	uint32_t n = ut_sheaf_objs(sh, objs);
	uint32_t bad = n ? slab_free_objs(p, c, objs, n) : 0;

	if (bad)
		untrusted_note(UT_OBJECT, bad);
}

void engine_flush_sheaf(struct shm_pool *p, uint32_t c, uint32_t n, uint32_t s,
			uint32_t me, struct ring_intent *in)
{
	struct shm_sheaf *sh = pool_sheaf(p, s);
	uint32_t limit = at_load_relaxed(&p->caches[c].barn_limit);
	struct ring_ref empty = pool_empty_ref(p, c, n);

	engine_sheaf_to_slabs(p, c, sh);
	sheaf_set_size(sh, 0);
	engine_stat_add(p, c, n, ST_SHEAF_FLUSH, 1);
	if (ring_count(&empty) > 2 * (uint64_t)limit)
		depot_put(p, s, me, in);
	else
		barn_put_empty(p, c, n, s, me, in);
}
