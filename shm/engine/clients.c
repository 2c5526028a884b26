/*
 * clients.c - client slots and lane grants (clients.h), in the
 * engine-owned part of the region.
 */
#include <errno.h>
#include <string.h>
#include <time.h>
#include "shm/debug.h"
#include "shm/futex.h"
#include "shm/lanes.h"
#include "shm/engine/clients.h"

/* Every engine thread out of its nap: a doorbell bump and a wake-up
 * whatever `sleeping` says (the flag is client-writable). */
static void engine_threads_wake(struct shm_pool *p)
{
	for (uint32_t n = 0; n < p->nodes; n++) {
		at_fetch_add_seqcst(&p->node[n].doorbell, 1);
		futex_wake(&p->node[n].doorbell, 1);
	}
	at_fetch_add_seqcst(&p->rcu->bell, 1);
	futex_wake(&p->rcu->bell, 1);
}

int client_attach(struct shm_pool *p, uint32_t pid, uint32_t uid, const char *name)
{
	/* A used slot first; a slot past the mark only when none is free
	 * (the engine alone attaches: the mark is its to raise). */
	uint32_t used = pool_clients_used(p);

	for (uint32_t c = 0; c < p->max_clients; c++) {
		struct shm_client *cl = &p->clients[c];
		uint32_t exp = CLIENT_FREE;

		if (c > used)
			break;
		if (!at_cas_acqrel(&cl->state, &exp, CLIENT_LIVE))
			continue;
		if (c == used)
			at_store_release(&p->hdr->clients_hwm, c + 1);
		cl->pid = pid;
		cl->uid = uid;
		cl->generation++;
		cl->attached_at = (uint64_t)time(NULL);
		cl->revoked_at = 0;
		memset(cl->name, 0, sizeof(cl->name));
		if (name != NULL)
			strncpy(cl->name, name, sizeof(cl->name) - 1);
		engine_threads_wake(p);
		return (int)c;
	}
	return -EUSERS;
}

int client_any(const struct shm_pool *p)
{
	for (uint32_t c = 0, used = pool_clients_used(p); c < used; c++)
		if (at_load_acquire(&p->clients[c].state) != CLIENT_FREE)
			return 1;
	return 0;
}

void client_detach(struct shm_pool *p, uint32_t client)
{
	uint32_t st;

	/* Client slots are engine-owned: their state may be asserted. */
	SHEAF_ASSERT(client < p->max_clients);
	st = at_load_relaxed(&p->clients[client].state);
	SHEAF_ASSERT(st != CLIENT_FREE);
	if (st != CLIENT_REVOKED)
		at_store_release(&p->clients[client].state, CLIENT_FREE);
}

void client_revoke(struct shm_pool *p, uint32_t client, uint64_t now)
{
	SHEAF_ASSERT(client < p->max_clients &&
		     at_load_relaxed(&p->clients[client].state) == CLIENT_LIVE);
	p->clients[client].revoked_at = now;
	at_store_release(&p->clients[client].state, CLIENT_REVOKED);
}

void client_release_revoked(struct shm_pool *p, uint32_t client)
{
	SHEAF_ASSERT(client < p->max_clients &&
		     at_load_relaxed(&p->clients[client].state) == CLIENT_REVOKED);
	at_store_release(&p->clients[client].state, CLIENT_FREE);
}

static lane_grant_t grant_of(uint32_t owner)
{
	return owner == OWNER_ENGINE ? LANE_GRANT_ENGINE : owner + 1;
}

uint32_t client_lanes_held(const struct shm_pool *p, uint32_t owner)
{
	lane_grant_t g = grant_of(owner);
	uint32_t n = 0;

	for (uint32_t l = 0, used = pool_lanes_used(p); l < used; l++)
		n += at_load_relaxed(&p->lane_grant[l]) == g;
	return n;
}

uint32_t client_lanes_held_uid(const struct shm_pool *p, uint32_t uid)
{
	uint32_t n = 0;

	for (uint32_t l = 0, used = pool_lanes_used(p); l < used; l++) {
		lane_grant_t g = at_load_relaxed(&p->lane_grant[l]);
		uint32_t st;

		if (g == LANE_GRANT_NONE || g == LANE_GRANT_ENGINE || g - 1 >= p->max_clients)
			continue;
		st = at_load_acquire(&p->clients[g - 1].state);
		n += (st == CLIENT_LIVE || st == CLIENT_REVOKED) && p->clients[g - 1].uid == uid;
	}
	return n;
}

/* Lane @l is now @owner's: its SHARED copy of the grant says so, and no
 * thread holds it yet. */
static void grant_one(struct shm_pool *p, uint32_t l, uint32_t owner)
{
	struct shm_lane *ln = &p->lanes[l];

	at_store_relaxed(&ln->busy, 0);
	at_store_relaxed(&ln->rcu_ctr, 0);
	at_store_release(&ln->client, owner);
}

/* One lane no one holds, now granted @g (@from: where to look first, moved
 * past it): its index, or -1 when none is left. */
static int32_t grant_next(struct shm_pool *p, lane_grant_t g, uint32_t *from)
{
	for (uint32_t l = *from, used = pool_lanes_used(p); l < used; l++) {
		lane_grant_t exp = LANE_GRANT_NONE;

		if (at_load_relaxed(&p->lane_grant[l]) == LANE_GRANT_NONE &&
		    at_cas_acqrel(&p->lane_grant[l], &exp, g)) {
			*from = l + 1;
			return (int32_t)l;
		}
	}
	for (;;) {
		uint32_t h = at_load_acquire(&p->hdr->lanes_hwm);
		lane_grant_t exp = LANE_GRANT_NONE;

		if (h >= p->max_lanes)
			return -1;
		/* The entry first, then the mark (release): a reader below
		 * the mark sees the grant.  A failed CAS: another engine
		 * thread took @h and raises the mark. */
		if (!at_cas_acqrel(&p->lane_grant[h], &exp, g))
			continue;
		at_store_release(&p->hdr->lanes_hwm, h + 1);
		*from = h + 1;
		return (int32_t)h;
	}
}

uint32_t client_lanes_grant(struct shm_pool *p, uint32_t owner, uint32_t want)
{
	uint32_t n = 0, from = 0;

	SHEAF_ASSERT(owner == OWNER_ENGINE || owner < p->max_clients);
	for (; n < want; n++) {
		int32_t l = grant_next(p, grant_of(owner), &from);

		if (l < 0)
			break;
		grant_one(p, (uint32_t)l, owner);
	}
	return n;
}

void client_lanes_revoke(struct shm_pool *p, uint32_t owner)
{
	lane_grant_t g = grant_of(owner);

	for (uint32_t l = 0, used = pool_lanes_used(p); l < used; l++) {
		if (at_load_relaxed(&p->lane_grant[l]) != g)
			continue;
		lane_free(&p->lanes[l]);
		at_store_release(&p->lane_grant[l], LANE_GRANT_NONE);
	}
}

uint32_t client_lanes_sweep(struct shm_pool *p)
{
	uint32_t n = 0;

	for (uint32_t l = 0, used = pool_lanes_used(p); l < used; l++) {
		lane_grant_t g = at_load_relaxed(&p->lane_grant[l]);

		if (g == LANE_GRANT_NONE || g == LANE_GRANT_ENGINE ||
		    (g - 1 < p->max_clients &&
		     at_load_acquire(&p->clients[g - 1].state) != CLIENT_FREE))
			continue;
		lane_free(&p->lanes[l]);
		at_store_release(&p->lane_grant[l], LANE_GRANT_NONE);
		n++;
	}
	return n;
}

struct shm_lane *client_lane_acquire(struct shm_pool *p, uint32_t owner, uint32_t node)
{
	uint32_t from = 0;
	int32_t l = grant_next(p, grant_of(owner), &from);

	if (l < 0)
		return NULL;
	grant_one(p, (uint32_t)l, owner);
	lane_take(p, &p->lanes[l], owner, node, 1);
	return &p->lanes[l];
}

void client_lane_free(struct shm_pool *p, struct shm_lane *l)
{
	lane_free(l);
	at_store_release(&p->lane_grant[pool_lane_index(p, l)], LANE_GRANT_NONE);
}
