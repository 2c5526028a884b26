/*
 * numa_log.h - what sheafd says about NUMA placement (shm/numa.h): the
 * pool's nodes and policy at start, one line per episode of a node at its
 * cap under numa_policy=bind (the engine only counts refusals:
 * shm_node_alloc.cap_refused), and libnuma's own errors and warnings, which
 * sheafd takes over (numa_error and numa_warn are weak in libnuma) so that
 * they reach its log as its own lines, never stderr bare.
 * Who may call: main.c, around serving.
 */
#ifndef SHEAF_DAEMON_NUMA_LOG_H
#define SHEAF_DAEMON_NUMA_LOG_H

#include "daemon.h"

#define NUMA_LOG_MS 250      /* how often the caps are looked at */

/* Log the pool's nodes, then watch the caps on @d's event base. */
void numa_log_start(struct daemon *d);
void numa_log_stop(void);

/* One watch step (the timer's; tests call it directly): log each node
 * that is at its cap with refusals since the last step, once per episode.
 * Returns the lines logged. */
int numa_log_caps(struct shm_pool *p);

#endif
