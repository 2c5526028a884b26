/*
 * fuzz_rpc.c - libFuzzer target over sheafd's control protocol: the bytes
 * one connection sends (4-byte length prefixes and protobuf Requests, any
 * content) go through server.c's frame splitting (consume_frames) into
 * rpc.c's request handling (rpc_handle) and every handler behind it, with
 * no socket and no event loop running.
 *
 * Set up once, as daemon/main.c does: a struct daemon with its default
 * configuration, an event base (Attach adds a pidfd watch to it), a small
 * pool on two simulated nodes and its engine, without its threads (node
 * workers, grace period).  The peer of every input is this process (its
 * pid, so that pidfd_open works).
 *
 * No engine thread runs an input: the handlers run with nworkers 0 (as
 * they do between an engine_stop and its engine_start), so an input's
 * effects do not depend on when a worker's pass came, and no thread is
 * created or joined per input.  The handlers that restart the engine after
 * stopping it (Check's) call engine_start, which this target links wrapped
 * (-Wl,--wrap=engine_start, Makefile): __wrap_engine_start below starts
 * nothing.  A Check still runs the checker on its own thread (check.c),
 * joined before the input ends.  (Running threads would cost each input
 * their joins and restarts, and the TLB shootdowns that every unmap and
 * copy-on-write fault of this thread sends them.)
 *
 * State between inputs: what an input leaves that would make later inputs
 * fail for the wrong reason is undone after it (the attached client is
 * detached, the connection's output and closing mark are cleared, mem_cap
 * is put back); caches accumulate, and all of them are destroyed once
 * FUZZ_CACHE_CAP are live, so the 64 slots never run out.  A resident
 * client, attached at setup and re-attached when an input detached it,
 * keeps a detach from reconciling the pool's counters (which restarts the
 * workers) on every input.
 *
 * Build and run: `make fuzz` (Makefile; build-fuzz/fuzz_rpc).  Seed corpus:
 * tests/fuzz/corpus_rpc/ (tests/fuzz/gen_corpus_rpc.c).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "daemon/daemon.h"
#include "daemon/log.h"
#include "shm/lanes.h"

#define FUZZ_CACHE_CAP   4u           /* live caches before all go */
#define FUZZ_POOL_BYTES  (4u << 20)   /* 16 slabs over 2 nodes */
#define FUZZ_NODES       2u
#define FUZZ_SHEAVES     256u
/* Small limits: Stats, Clients and Info walk every lane and client slot
 * (the defaults, 8192 lanes, cost each Stats more than the rest of an
 * input). */
#define FUZZ_CLIENTS     8u
#define FUZZ_LANES       32u
#define FUZZ_CACHES      16u

static struct daemon d;
static struct conn conn;
static struct conn_info resident;     /* keeps one client attached */
static uint64_t mem_cap0;

static void die(const char *what, const char *err)
{
	fprintf(stderr, "fuzz_rpc: %s: %s\n", what, err);
	abort();
}

/* The peer of every input: this process, as SO_PEERCRED would say. */
static void peer_self(struct conn_info *peer)
{
	memset(peer, 0, sizeof(*peer));
	peer->pid = getpid();
	peer->uid = getuid();
	peer->gid = getgid();
	peer->client = -1;
}

static void resident_attach(void)
{
	char err[160];

	peer_self(&resident);
	if (daemon_attach(&d, &resident, "fuzz-resident", err, sizeof(err)) < 0)
		die("attaching the resident client", err);
}

/* The engine's threads are never started (header comment). */
int __wrap_engine_start(struct engine *e, char *err, size_t errlen);

int __wrap_engine_start(struct engine *e, char *err, size_t errlen)
{
	(void)e;
	(void)err;
	(void)errlen;
	return 0;
}

static void on_never(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
}

static void setup(void)
{
	struct pool_params pp = {
		.size = FUZZ_POOL_BYTES, .nodes = FUZZ_NODES, .sheaf_count = FUZZ_SHEAVES,
		.max_clients = FUZZ_CLIENTS, .max_lanes = FUZZ_LANES,
		.max_caches = FUZZ_CACHES,
	};
	char err[256];
	int sv[2];

	/* No systemd here: daemon_status must stay a no-op. */
	unsetenv("NOTIFY_SOCKET");
	config_defaults(&d.cfg);
	d.cfg.foreground = 1;
	log_threshold = getenv("FUZZ_LOG") ? LOG_DEBUG : LOG_ERR;
	d.listen_fd = d.lock_fd = -1;
	d.started = time(NULL);
	d.base = event_base_new();
	if (d.base == NULL)
		die("event_base_new", "failed");
	if (pool_create(&d.pool, &pp, err, sizeof(err)) != 0)
		die("pool_create", err);
	if (engine_init(&d.engine, &d.pool, err, sizeof(err)) != 0)
		die("engine_init", err);
	mem_cap0 = at_load_relaxed(&d.pool.hdr->mem_cap);
	resident_attach();

	/* One connection for every input; its events are never dispatched
	 * (conn_send only adds ev_write): one end of a socket pair that no
	 * one reads or writes. */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		die("socketpair", strerror(errno));
	conn.d = &d;
	conn.fd = sv[0];
	conn.out_nfds = 0;
	conn.ev_read = event_new(d.base, sv[0], EV_READ, on_never, NULL);
	conn.ev_write = event_new(d.base, sv[0], EV_WRITE, on_never, NULL);
	conn.ev_idle = evtimer_new(d.base, on_never, NULL);
	if (conn.ev_read == NULL || conn.ev_write == NULL || conn.ev_idle == NULL)
		die("event_new", "failed");
	peer_self(&conn.peer);
}

static uint32_t live_caches(void)
{
	uint32_t n = 0;

	for (uint32_t c = 0; c < pool_caches_used(&d.pool); c++)
		n += at_load_acquire(&d.pool.caches[c].state) == CACHE_LIVE;
	return n;
}

/* Undo what one input changed that later inputs should not inherit. */
static void after_input(void)
{
	char err[160];

	if (conn.peer.client >= 0)
		daemon_client_gone(&d, &conn);    /* holds nothing: detached */
	peer_self(&conn.peer);
	conn.closing = 0;
	free(conn.out);                          /* balanced mallocs: no leak */
	conn.out = NULL;                         /* rerun by libFuzzer */
	conn.out_len = conn.out_off = 0;
	conn.out_nfds = 0;                        /* the pool's fd: not ours */
	free(conn.in);
	conn.in = NULL;
	conn.in_len = conn.in_cap = 0;
	if (at_load_acquire(&d.pool.clients[resident.client].state) != CLIENT_LIVE)
		resident_attach();
	at_store_relaxed(&d.pool.hdr->mem_cap, mem_cap0);
	if (live_caches() >= FUZZ_CACHE_CAP)
		for (uint32_t c = 0; c < pool_caches_used(&d.pool); c++)
			if (at_load_acquire(&d.pool.caches[c].state) == CACHE_LIVE &&
			    engine_cache_destroy(&d.engine, c, err, sizeof(err)) != 0)
				die("destroying a fuzzed cache", err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;

	if (!ready) {
		setup();
		ready = 1;
	}
	/* The input is what the connection received: its frames, as on_read
	 * hands them over (a partial last frame stays in the buffer). */
	conn.in = malloc(size ? size : 1);
	if (conn.in == NULL)
		return 0;
	memcpy(conn.in, data, size);
	conn.in_len = conn.in_cap = size;
	consume_frames(&conn);
	/* A Check runs on its own thread (daemon/check.c) and answers through
	 * the event loop: run it until that answer is queued, so the next
	 * input does not find the pool check still running. */
	while (check_running(&d))
		event_base_loop(d.base, EVLOOP_ONCE);
	conn.waiting = 0;
	after_input();
	return 0;
}
