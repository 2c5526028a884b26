/*
 * config.h - sheafd's configuration: defaults, a key=value file, and
 * command-line flags (flags win over the file).
 * Who may call: daemon/main.c (startup and SIGHUP reload).
 */
#ifndef SHEAF_DAEMON_CONFIG_H
#define SHEAF_DAEMON_CONFIG_H

#include <stdint.h>
#include <stdio.h>
#include <sys/un.h>
#include "shm/layout.h"

#define CONFIG_MAX_IDS 16
/* Defaults of the limits that keep the control socket up under abuse. */
#define CONFIG_IDLE_TIMEOUT_MS  10000u
/* max_clients_per_uid when not set: half of max_clients. */
#define CONFIG_CLIENTS_PER_UID(max_clients) ((max_clients) / 2 > 0 ? (max_clients) / 2 : 1)
/* Lane caps when not set (a share of the pool's max_threads, computed
 * at use: an adopted pool keeps the max_threads it was created with), and
 * how long a revoked client's uid may not attach again. */
#define CONFIG_LANES_PER_CLIENT(max_lanes) ((max_lanes) / 8 > 4 ? (max_lanes) / 8 : 4)
#define CONFIG_LANES_PER_UID(max_lanes)    ((max_lanes) / 2 > 4 ? (max_lanes) / 2 : 4)
#define CONFIG_REVOKE_BAN_S 300u
/* Descriptors kept out of the default max_connections: one pidfd per
 * client slot, the pool, the listener, the log, libevent's own. */
#define CONFIG_FD_RESERVE(max_clients) ((max_clients) + 64u)

struct config {
	char socket[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char config_path[512];
	uint64_t size;               /* pool data bytes */
	uint64_t mem_cap;            /* 0: size */
	uint32_t nodes;              /* 0: real NUMA nodes; N: simulated */
	uint32_t sheaves;
	uint32_t huge_pages;         /* enum huge_mode (shm/huge.h) */
	uint32_t numa_policy;        /* enum numa_policy (shm/numa.h) */
	uint32_t max_frame;
	uint32_t max_connections;    /* 0: from RLIMIT_NOFILE (server.c) */
	uint32_t idle_timeout_ms;    /* a connection's first request, or a frame, within this */
	uint32_t max_clients_per_uid; /* 0 until set: CONFIG_CLIENTS_PER_UID */
	uint32_t max_threads_per_client; /* 0: CONFIG_LANES_PER_CLIENT */
	uint32_t max_threads_per_uid;    /* 0: CONFIG_LANES_PER_UID */
	uint32_t revoke_ban_s;       /* a revoked client's uid may not attach */
	/* The pool's limits, fixed at its creation (0: SHEAF_DEFAULT_*). */
	uint32_t max_clients, max_threads, max_caches;
	int foreground;
	int log_level;
	uint32_t allow_uid[CONFIG_MAX_IDS], n_uid;
	uint32_t allow_gid[CONFIG_MAX_IDS], n_gid;
};

void config_defaults(struct config *c);

/*
 * Fill @c from defaults, the file named by --config (if any) and the flags,
 * in that order.  Returns 0; 1 when --help or --version was printed; -1 on a
 * bad flag or file, with the reason in @err.
 */
int config_from_args(struct config *c, int argc, char **argv, char *err, size_t errlen);

/* Re-read the file of @c (SIGHUP): only log_level and the allow-lists may
 * change at run time.  0 or -1 with @err. */
int config_reload(struct config *c, char *err, size_t errlen);

void config_usage(FILE *out);

#endif
