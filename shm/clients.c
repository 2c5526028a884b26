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

struct shm_lane *lane_acquire(struct shm_pool *p, uint32_t client, uint32_t node)
{
	for (uint32_t i = 0; i < SHEAF_MAX_LANES; i++) {
		struct shm_lane *l = &p->lanes[i];
		uint32_t exp = LANE_FREE;

		if (at_load_relaxed(&l->client) != LANE_FREE ||
		    !at_cas_acqrel(&l->client, &exp, client))
			continue;
		at_store_relaxed(&l->node, node);
		l->tid = (uint32_t)gettid();
		at_store_relaxed(&l->intent.op, RING_OP_NONE);
		return l;
	}
	return NULL;
}

void lane_release(struct shm_lane *l)
{
	at_store_release(&l->client, LANE_FREE);
}
