/* clients.c - client slots and thread lanes (clients.h). */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "clients.h"

int client_attach(struct shm_pool *p, uint32_t pid, uint32_t uid, const char *name)
{
	for (uint32_t c = 0; c < SHEAF_MAX_CLIENTS; c++) {
		struct shm_client *cl = &p->clients[c];
		uint32_t exp = CLIENT_FREE;

		if (!at_cas_acqrel(&cl->state, &exp, CLIENT_LIVE))
			continue;
		cl->pid = pid;
		cl->uid = uid;
		cl->generation++;
		cl->attached_at = (uint64_t)time(NULL);
		memset(cl->name, 0, sizeof(cl->name));
		if (name != NULL)
			strncpy(cl->name, name, sizeof(cl->name) - 1);
		return (int)c;
	}
	return -EUSERS;
}

void client_detach(struct shm_pool *p, uint32_t client)
{
	at_store_release(&p->clients[client].state, CLIENT_FREE);
}

/* Allocs minus frees the lane has counted for @cache. */
int64_t lane_net(struct shm_lane *l, uint32_t cache)
{
	_Atomic uint64_t *st = l->stat[cache];

	return (int64_t)(at_load_relaxed(&st[ST_ALLOC_FASTPATH]) +
			 at_load_relaxed(&st[ST_ALLOC_SLOWPATH])) -
	       (int64_t)(at_load_relaxed(&st[ST_FREE_FASTPATH]) +
			 at_load_relaxed(&st[ST_FREE_SLOWPATH]));
}

int64_t lane_in_use(struct shm_lane *l, uint32_t cache)
{
	return lane_net(l, cache) - at_load_relaxed(&l->base[cache]);
}

static void lane_bind(struct shm_lane *l, uint32_t node, int new_owner)
{
	at_store_relaxed(&l->bound, node + 1);
	at_store_relaxed(&l->node, node);
	l->tid = (uint32_t)gettid();
	at_store_relaxed(&l->intent.op, RING_OP_NONE);
	if (new_owner)
		for (uint32_t c = 0; c < SHEAF_MAX_CACHES; c++)
			at_store_relaxed(&l->base[c], lane_net(l, c));
}

/*
 * A lane for a thread of @client on @node: an idle lane of the client bound
 * to @node first; then a free lane bound to @node, a never used one, any
 * free one (its past counts then move to @node), and last an idle lane of
 * the client bound elsewhere.
 */
struct shm_lane *lane_acquire(struct shm_pool *p, uint32_t client, uint32_t node)
{
	for (int pass = 0; pass < 5; pass++) {
		for (uint32_t i = 0; i < SHEAF_MAX_LANES; i++) {
			struct shm_lane *l = &p->lanes[i];
			uint32_t owner = at_load_relaxed(&l->client), exp;

			if (pass == 0 || pass == 4) {
				exp = 0;
				if (owner != client ||
				    (pass == 0 && at_load_relaxed(&l->bound) != node + 1) ||
				    !at_cas_acqrel(&l->busy, &exp, 1))
					continue;
				lane_bind(l, node, 0);
				return l;
			}
			exp = LANE_FREE;
			if (owner != LANE_FREE ||
			    (pass == 1 && at_load_relaxed(&l->bound) != node + 1) ||
			    (pass == 2 && at_load_relaxed(&l->bound) != 0) ||
			    !at_cas_acqrel(&l->client, &exp, client))
				continue;
			at_store_relaxed(&l->busy, 1);
			lane_bind(l, node, 1);
			return l;
		}
	}
	return NULL;
}

void lane_release(struct shm_lane *l)
{
	at_store_release(&l->busy, 0);
}

void lane_free(struct shm_lane *l)
{
	at_store_relaxed(&l->busy, 0);
	at_store_release(&l->client, LANE_FREE);
}
