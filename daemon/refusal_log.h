/*
 * refusal_log.h - sheafd's log of the values a client wrote in shared
 * memory that the engine refused (the counters are shm/bounds.h's):
 * the engine only counts them; this watch logs one line when a counter
 * moved, at most once every REFUSAL_LOG_S seconds, so a scribbling client
 * cannot flood the log.
 * Who may call: main.c, around serving.
 */
#ifndef SHEAF_DAEMON_REFUSAL_LOG_H
#define SHEAF_DAEMON_REFUSAL_LOG_H

#include "daemon.h"

#define REFUSAL_LOG_S 5

/* Log what adoption already refused (quarantined caches...), then start
 * the periodic check on @d's event base. */
void refusal_log_start(struct daemon *d);
void refusal_log_stop(void);

#endif
