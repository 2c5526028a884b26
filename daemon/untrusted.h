/*
 * untrusted.h (daemon) - sheafd's log of the engine's refusals of values a
 * client wrote in shared memory (shm/bounds.h): the engine only counts
 * them; this watch logs a line when a counter moved, at most once every
 * UNTRUSTED_LOG_S seconds (a scribbling client cannot flood the log).
 * Who may call: main.c, around serving.
 */
#ifndef SHEAF_DAEMON_UNTRUSTED_H
#define SHEAF_DAEMON_UNTRUSTED_H

#include "daemon.h"

#define UNTRUSTED_LOG_S 5

/* Log what adoption already refused (quarantined caches...), then start
 * the periodic check on @d's event base. */
void untrusted_watch_start(struct daemon *d);
void untrusted_watch_stop(void);

#endif
