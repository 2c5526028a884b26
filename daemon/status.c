/*
 * status.c - daemon_status: the one-line STATUS= that systemd shows for
 * sheafd (clients, caches, slab memory).  Sent by main.c at start and after
 * a reload, by registry.c when a client comes or goes, by rpc_caches.c when
 * a cache is created or destroyed, and every STATUS_REFRESH_S seconds by
 * main.c's timer (slab memory moves without any event); an unchanged line
 * is not sent again.
 */
#include <stdio.h>
#include <string.h>
#include "daemon.h"
#include "notify.h"

/* The last line sent: the periodic refresh sends only a changed line. */
static char last[256];

void daemon_status(struct daemon *d)
{
	char msg[sizeof(last)];
	uint32_t caches = 0;
	uint64_t frames = at_load_relaxed(&d->pool.hdr->frames_used);

	for (uint32_t c = 0, used = pool_caches_used(&d->pool); c < used; c++)
		caches += at_load_acquire(&d->pool.caches[c].state) == CACHE_LIVE;
	snprintf(msg, sizeof(msg), "STATUS=%u clients, %u caches, %llu MiB of slabs%s",
		 daemon_live_clients(d), caches,
		 (unsigned long long)((frames * SLAB_SIZE) >> 20),
		 d->adopted ? " (adopted pool)" : "");
	if (strcmp(msg, last) == 0)
		return;
	if (notify_send(msg, -1) == 0)
		memcpy(last, msg, sizeof(last));
}
