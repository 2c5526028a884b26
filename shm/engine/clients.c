/*
 * clients.c - client slots (clients.h): one per attached process, in the
 * engine-owned part of the region.
 */
#include <errno.h>
#include <string.h>
#include <time.h>
#include "shm/debug.h"
#include "shm/engine/clients.h"

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
		memset(cl->name, 0, sizeof(cl->name));
		if (name != NULL)
			strncpy(cl->name, name, sizeof(cl->name) - 1);
		return (int)c;
	}
	return -EUSERS;
}

void client_detach(struct shm_pool *p, uint32_t client)
{
	/* Client slots are engine-owned: their state may be asserted. */
	SHEAF_ASSERT(client < p->max_clients &&
		     at_load_relaxed(&p->clients[client].state) != CLIENT_FREE);
	at_store_release(&p->clients[client].state, CLIENT_FREE);
}
