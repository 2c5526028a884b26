/*
 * daemon.h - sheafd's state: the pool it serves, its engine, its control
 * connections.  Who may call: daemon/ only.
 *
 * Threads: the libevent main thread owns everything here except what the
 * engine's node workers touch (the region, through shm/).
 */
#ifndef SHEAF_DAEMON_DAEMON_H
#define SHEAF_DAEMON_DAEMON_H

#include <event2/event.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include "config.h"
#include "shm/engine.h"
#include "shm/pool.h"

#include "proto/version.h"

/* What request handling knows of a connection's peer: plain data, so that
 * rpc_handle can run without a socket (tests, fuzzing). */
struct conn_info {
	pid_t pid;                   /* peer credentials (SO_PEERCRED) */
	uid_t uid;
	gid_t gid;
	gid_t groups[32];            /* supplementary groups (SO_PEERGROUPS) */
	int ngroups;
	int client;                  /* client id once attached, else -1 */
};

struct conn {
	struct daemon *d;
	int fd;
	struct event *ev_read;
	struct event *ev_write;
	uint8_t *in;                 /* bytes received, not yet a whole frame */
	size_t in_len, in_cap;
	uint8_t *out;                /* bytes to send */
	size_t out_len, out_off;
	int out_fd;                  /* descriptor to pass with the next byte */
	struct conn_info peer;
	int closing;                 /* close once out is flushed */
	struct conn *next, *prev;
};

/* An attached client's process, watched through a pidfd: when it ends,
 * the client is repaired (registry.c). */
struct watch {
	struct daemon *d;
	int client;
	int pidfd;
	struct event *ev;
	struct watch *next;
};

struct daemon_counters {
	uint64_t connections;
	uint64_t requests;
	uint64_t bad_frames;         /* unparsable, unknown field or body */
	uint64_t oversize_frames;    /* over max_frame: connection closed */
	uint64_t denied;             /* peer credentials refused */
	uint64_t attached;
	uint64_t reclaimed;          /* dead clients repaired */
};

struct daemon {
	struct config cfg;
	struct shm_pool pool;
	struct engine engine;
	struct event_base *base;
	int listen_fd;
	int lock_fd;
	struct event *ev_listen;
	struct event *ev_signal[3];
	struct event *ev_watchdog;
	struct event *ev_status;     /* STATUS= refresh (under systemd) */
	int adopted;                 /* the pool came from systemd's fd store */
	int socket_activated;        /* the listening socket came from systemd */
	time_t started;
	struct conn *conns;
	struct watch *watches;
	struct daemon_counters n;
};

/* server.c: the control socket (libevent callbacks; calls rpc_handle). */
/* Listen on @activated (a socket passed by systemd) or, when < 0, bind the
 * configured path (refusing when another daemon holds it). */
int server_listen(struct daemon *d, int activated, char *err, size_t errlen);
void server_close_all(struct daemon *d);
/* Answer every whole frame in @c's input buffer (c->in, c->in_len), keep
 * the partial rest; -1 when a frame's length is over max_frame (close @c).
 * Called by on_read; exported for tests/fuzz/fuzz_rpc.c. */
int consume_frames(struct conn *c);

/* registry.c: who may attach, attached clients, dead-client repair. */
int peer_allowed(const struct daemon *d, const struct conn_info *peer);
/* Attach @peer as a new client named @name: its id (also in peer->client),
 * or -errno with @err. */
int daemon_attach(struct daemon *d, struct conn_info *peer, const char *name,
		  char *err, size_t errlen);
/* Re-attach a client that was attached before a daemon restart. */
int daemon_resume(struct daemon *d, struct conn_info *peer, uint32_t id,
		  char *err, size_t errlen);
/* After adopting a pool: watch the clients it lists, repair the dead. */
void daemon_watch_existing(struct daemon *d);
/* Stop watching every client process (shutdown). */
void daemon_unwatch_all(struct daemon *d);
/* @c, attached, closed its connection. */
void daemon_client_gone(struct daemon *d, struct conn *c);
uint32_t daemon_live_clients(const struct daemon *d);

/* status.c: tell systemd how we are doing (STATUS=: clients, caches, slab
 * memory; no-op without NOTIFY_SOCKET).  Called by whoever changes those. */
void daemon_status(struct daemon *d);

/* rpc.c: request handling, with no socket (server.c sends the reply). */
struct rpc_out {
	uint8_t *buf;                /* the packed Response (malloc'd) */
	size_t len;
	int pass_fd;                 /* descriptor to pass with it, or -1 */
	int close_after;             /* close the connection once it is sent */
};

/*
 * Handle request frame @buf (@len bytes, any content) from @peer: parse,
 * act, and fill @out with the reply to send.  Attach binds @peer->client.
 * Returns 0, or -ENOMEM when no reply could be made (@out is then empty and
 * the caller should close the connection).  Free @out with rpc_out_free.
 */
int rpc_handle(struct daemon *d, struct conn_info *peer, const uint8_t *buf,
	       size_t len, struct rpc_out *out);
void rpc_out_free(struct rpc_out *out);

#endif
