/*
 * refusal_log.c - the rate-limited log of the engine's refusals of
 * client-written values (refusal_log.h; the counters: shm/bounds.h).
 */
#include <stdio.h>
#include <string.h>
#include "log.h"
#include "shm/bounds.h"
#include "refusal_log.h"

static struct event *ev_watch;
static uint64_t logged[UT_NR];      /* the counts the last line showed */

/* One line with every kind that moved since the last line; nothing when
 * none did. */
static void log_moved(struct daemon *d)
{
	char line[512];
	size_t len = 0;

	for (int k = 0; k < UT_NR; k++) {
		uint64_t now = at_load_relaxed(&untrusted_count[k]);

		if (now == logged[k])
			continue;
		len += (size_t)snprintf(line + len, len < sizeof(line) ? sizeof(line) - len : 0,
					" %s +%llu", untrusted_names[k],
					(unsigned long long)(now - logged[k]));
		logged[k] = now;
		if (len >= sizeof(line))
			len = sizeof(line) - 1;
	}
	if (len > 0)
		log_warn("refused client-written values in the pool (a client scribbled on "
			 "shared memory; %llu in all since start):%s%s",
			 (unsigned long long)untrusted_total(), line,
			 d->adopted ? " (adopted pool)" : "");
}

static void on_watch(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	log_moved(arg);
}

void refusal_log_start(struct daemon *d)
{
	struct timeval tv = { REFUSAL_LOG_S, 0 };

	log_moved(d);
	ev_watch = event_new(d->base, -1, EV_PERSIST, on_watch, d);
	if (ev_watch != NULL)
		event_add(ev_watch, &tv);
}

void refusal_log_stop(void)
{
	if (ev_watch != NULL)
		event_free(ev_watch);
	ev_watch = NULL;
}
