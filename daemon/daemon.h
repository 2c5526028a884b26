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
#include "shm/engine/check.h"
#include "shm/engine/engine.h"
#include "shm/pool.h"
#include "proto/frame.h"
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
	int lanes_at_cap;            /* LaneGrant told it it holds its most */
	int revoked;                 /* its client was revoked: refuse all */
};

struct conn {
	struct daemon *d;
	int fd;
	struct event *ev_read;
	struct event *ev_write;
	struct event *ev_idle;       /* idle_timeout: no first request, or a stalled frame */
	uint8_t *in;                 /* bytes received, not yet a whole frame */
	size_t in_len, in_cap;
	uint8_t *out;                /* bytes to send */
	size_t out_len, out_off;
	int out_fds[FRAME_MAX_FDS];  /* descriptors to pass with the next byte */
	unsigned out_nfds;           /* how many (0: none) */
	struct conn_info peer;
	int closing;                 /* close once out is flushed */
	int spoke;                   /* a complete request arrived */
	int waiting;                 /* reading paused until the pool check ends */
	struct timespec since;       /* accepted at (CLOCK_MONOTONIC) */
	struct conn *next, *prev;
	struct conn *pnext, *pprev;  /* the pending list: accepted, not spoken yet */
};

/* An attached client's process, watched through a pidfd: when it ends,
 * the client is repaired (registry.c). */
struct watch {
	struct daemon *d;
	int client;
	int pidfd;
	struct event *ev;
	int exited;                  /* the process ended during a pool check */
	int detach_pending;          /* its connection closed during a pool check */
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
	uint64_t revoked;            /* clients revoked (daemon_revoke) */
	uint64_t over_cap;           /* closed at once: max_connections reached */
	uint64_t evicted;            /* silent connections dropped for a new one */
	uint64_t idle_closed;        /* closed by idle_timeout */
	uint64_t accept_pauses;      /* times accepting stopped: out of descriptors */
};

struct check_job;

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
	uint32_t nconns;             /* open control connections */
	uint32_t max_conns;          /* cfg.max_connections, or derived from RLIMIT_NOFILE */
	struct conn *pending, *pending_tail;   /* oldest first */
	struct event *ev_accept_retry;         /* accepting paused: try again */
	int accept_paused;
	const struct timeval *idle_tv;         /* libevent common timeout, or NULL */
	struct conn *check_conn;     /* waits for the running pool check's reply */
	struct check_job *check;     /* the pool check off the event loop (check.c) */
	struct watch *watches;
	struct daemon_counters n;
};

/* What rpc_handle gives server.c for one request frame. */
struct rpc_out {
	uint8_t *buf;                /* the packed Response (malloc'd) */
	size_t len;
	int pass_fds[FRAME_MAX_FDS]; /* descriptors to pass with it (not owned) */
	unsigned npass;              /* how many (0: none) */
	int close_after;             /* close the connection once it is sent */
	int later;                   /* no reply: a pool check runs; hand the same
					frame in again once it ended */
	int deferred;                /* no reply yet: the pool check started; its
					reply comes through check_on_done's
					completion */
};

/* server.c: the control socket (libevent callbacks; calls rpc_handle). */
/* Listen on @activated (a socket passed by systemd) or, when < 0, bind the
 * configured path (refusing when another daemon holds it). */
int server_listen(struct daemon *d, int activated, char *err, size_t errlen);
void server_close_all(struct daemon *d);
/* Answer every whole frame in @c's input buffer (c->in, c->in_len), keep
 * the partial rest: 0, or -1 when @c must be closed now.  Called by
 * on_read; exported for tests/fuzz/fuzz_rpc.c. */
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
/* The pool check ended: the repairs it held back (dead or detached
 * clients) now. */
void daemon_after_check(struct daemon *d);
uint32_t daemon_live_clients(const struct daemon *d);
/*
 * Client @id did what libsheaf never does (@why, logged): revoke it now.
 * Its sheaves and lanes are taken back as for a dead client (its process
 * may live on: it keeps its mappings, which sheafd cannot take), its
 * connections refuse every later request (STATUS_REVOKED), and attaches
 * of its uid are refused for revoke_ban seconds (registry.c).
 */
void daemon_revoke(struct daemon *d, int id, const char *why);
/* The lane caps of @d's pool (config, or the defaults of its max_threads). */
uint32_t daemon_lanes_per_client(const struct daemon *d);
uint32_t daemon_lanes_per_uid(const struct daemon *d);

/* status.c: tell systemd how we are doing (STATUS=: clients, caches, slab
 * memory; no-op without NOTIFY_SOCKET).  Called by whoever changes those. */
void daemon_status(struct daemon *d);

/* rpc.c: request handling, with no socket (server.c sends the reply). */

/*
 * Handle request frame @buf (@len bytes, any content) from @peer: parse,
 * act, and fill @out with the reply to send.  Attach binds @peer->client.
 * Returns 0, or -ENOMEM when no reply could be made (@out is then empty and
 * the caller should close the connection).  Free @out with rpc_out_free.
 */
int rpc_handle(struct daemon *d, struct conn_info *peer, const uint8_t *buf,
	       size_t len, struct rpc_out *out);
void rpc_out_free(struct rpc_out *out);
/* Pack the reply to Check request @id (of @cache, -1: the pool):
 * pool_check's (pool_check_cache's) @rc, @rep and @err. */
int rpc_check_reply(struct daemon *d, uint64_t id, int cache, int rc,
		    const struct check_report *rep, const char *err, struct rpc_out *out);
/* Whether every request body of the protocol has its row in rpc.c's table
 * of request kinds, matching the body's field: 0, or -1 with @err. */
int rpc_kinds_check(char *err, size_t errlen);

/*
 * check.c: the pool check (a walk of every slab, long on a big pool) on a
 * thread of its own, so that the event loop goes on serving.  The engine is
 * stopped meanwhile (the checker needs it quiet); requests that change the
 * pool wait (rpc.c answers them with rpc_out.later) and so do the repairs
 * of clients that end (registry.c).  Without an event loop (d->base NULL:
 * rpc_handle called directly) the check runs inline.
 */
int check_running(const struct daemon *d);
/* Start the check for Check request @id of @cache (-1: the pool): 0 (its
 * reply comes through the completion of check_on_done), or -errno when it
 * could not start off the loop (the caller then runs it inline). */
int check_start(struct daemon *d, uint64_t id, int cache);
/* What the pool check's end calls, on the event loop, after it restarted
 * the engine and let registry.c's held-back repairs go: @reply is the
 * packed Check reply (buf NULL when none could be made), freed by check.c
 * after the call. */
typedef void check_done_fn(struct daemon *d, struct rpc_out *reply);
/* Have @done called whenever a check started with check_start ends (the
 * layer holding the connection that waits for the reply: server.c, once
 * rpc_handle answered rpc_out.deferred).  Kept until check_fini. */
void check_on_done(struct daemon *d, check_done_fn *done);
/* Shutdown: wait for a running check and free what check.c holds. */
void check_fini(struct daemon *d);

#endif
