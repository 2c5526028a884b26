/*
 * status.c - daemon_status: the one-line STATUS= that systemd shows for
 * sheafd (clients, caches, slab memory).  Sent by main.c at start and after
 * a reload, by registry.c when a client comes or goes and by rpc.c when a
 * cache is created or destroyed.
 */
#include <stdio.h>
#include "daemon.h"
#include "notify.h"

void daemon_status(struct daemon *d)
{
	char msg[256];
	uint32_t caches = 0;
	uint64_t frames = at_load_relaxed(&d->pool.hdr->frames_used);

	for (uint32_t c = 0; c < SHEAF_MAX_CACHES; c++)
		caches += at_load_acquire(&d->pool.caches[c].state) == CACHE_LIVE;
	snprintf(msg, sizeof(msg), "STATUS=%u clients, %u caches, %llu MiB of slabs%s",
		 daemon_live_clients(d), caches,
		 (unsigned long long)((frames * SLAB_SIZE) >> 20),
		 d->adopted ? " (adopted pool)" : "");
	notify_send(msg, -1);
}
