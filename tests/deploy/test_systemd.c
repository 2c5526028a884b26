/*
 * test_systemd.c - sheafd's side of the systemd protocols, without systemd
 * as PID 1: the test plays systemd's part (util_notify.h): it receives the
 * notifications, keeps the fd store, passes descriptors as systemd would.
 * The build under test is the one this program sits in
 * (ROOT/build[-SAN]/tests/deploy/test_systemd).  The units themselves are
 * tested in test_systemd_units.c, `make install` in test_install.c.
 *
 *   socket_activation systemd-socket-activate holds the socket and execs
 *                    sheafd on the first connection: two client processes
 *                    attach through the passed socket, allocate, free, and
 *                    the pool check passes; sheafd neither binds nor
 *                    removes the socket file nor takes the lock.
 *   notify           a datagram socket as NOTIFY_SOCKET sees FDSTORE=1 +
 *                    FDNAME=pool-meta / pool-shared carrying the pool's two
 *                    memfds, READY=1 (the socket
 *                    accepts by then), STATUS=, WATCHDOG=1 about every half
 *                    of WATCHDOG_USEC, RELOADING=1 + READY=1 on SIGHUP and
 *                    STOPPING=1 on SIGTERM (exit 0).
 *   restart_crash    sheafd is SIGKILLed five times while a client process
 *                    keeps allocating and freeing (its objects stamped and
 *                    verified before each free) on two caches at once: a
 *                    SHEAF_CACHE_DEBUG one (every object tracked by the
 *                    library) and a plain one (the inline fast paths and
 *                    the stash, which the debug cache never runs), both
 *                    required to see work between restarts; each new
 *                    sheafd gets the stored memfds as systemd passes them
 *                    (fd 3 and 4, LISTEN_FDS=2, LISTEN_PID=its pid,
 *                    LISTEN_FDNAMES=pool-meta:pool-shared), adopts
 *                    the pool (STATUS says
 *                    so, and it sends no second FDSTORE); the client keeps
 *                    going while no daemon runs, never fails an operation,
 *                    reconnects on its next request (sheaf_cache_stats must
 *                    succeed), and at the end frees everything, shrinks, and
 *                    sheaf_pool_check() == 0 with nothing in use.
 *   restart_clean    the same through SIGTERM (STOPPING=1, exit 0): what
 *                    `systemctl restart` does, the fd store being kept for
 *                    the queued start.
 *   restart_socket   systemd's full shape: the test holds the listening
 *                    socket (as sheafd.socket does) and passes it with the
 *                    memfds (LISTEN_FDS=3, LISTEN_FDNAMES=sheafd.socket:
 *                    pool-meta:pool-shared);
 *                    sheafd is killed, the client's stats request goes out
 *                    while no daemon runs, waits in the socket's backlog and
 *                    succeeds once the next sheafd adopts the pool.
 *   restart_other_layout the fd store holds a pool of another layout
 *                    version (a sheafd of another version stored it): the
 *                    new sheafd drops both memfds (FDSTOREREMOVE=1), makes,
 *                    stores and serves a new pool instead of exiting.
 *
 * A test whose tool is missing (systemd-socket-activate) is a SKIP, which
 * fails unless SHEAF_TEST_SKIP_OK=1 (util_check.h).  Each test is its own TCase: CK_RUN_CASE=<name> runs one.  Loops
 * use REQUIRE (Check's passing assertions are slow); child processes report
 * through pipes, REQUIRE and exit statuses and never call Check.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/sheaf.h"
#include "shm/layout.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_deploy.h"
#include "tests/helpers/util_notify.h"
#include "tests/helpers/util_proc.h"

/* ---- a simple client ----------------------------------------------------------- */

struct simple_arg {
	const char *sock;
	const char *name;
	int n;
};

/* Attach, allocate n objects, verify and free them, pool check. */
static int simple_client(void *p)
{
	struct simple_arg *a = p;
	char err[256];
	sheaf_pool_t *pool = sheaf_connect(a->sock, a->name, 0, err, sizeof(err));
	sheaf_cache_t *c;
	uint64_t **objs;

	REQUIRE(pool != NULL, "sheaf_connect(%s): %s", a->sock, err);
	c = sheaf_cache_create(pool, "sd-simple", 48, NULL);
	if (c == NULL && errno == EEXIST)
		c = sheaf_cache_open(pool, "sd-simple");
	REQUIRE(c != NULL, "cache: %s", strerror(errno));
	objs = calloc((size_t)a->n, sizeof(*objs));
	REQUIRE(objs != NULL, "calloc");
	for (int i = 0; i < a->n; i++) {
		objs[i] = sheaf_alloc(c);
		REQUIRE(objs[i] != NULL, "alloc %d: %s", i, strerror(errno));
		objs[i][0] = (uint64_t)(uintptr_t)objs[i] ^ 0x5a5a;
	}
	for (int i = 0; i < a->n; i++) {
		REQUIRE(objs[i][0] == ((uint64_t)(uintptr_t)objs[i] ^ 0x5a5a), "object %d changed", i);
		REQUIRE(sheaf_free(c, objs[i]) == 0, "free %d", i);
	}
	free(objs);
	sheaf_disconnect(pool);
	return 0;
}

/* Attach once more and run the pool checker (nothing else attached). */
static int check_client(void *p)
{
	struct simple_arg *a = p;
	char err[256];
	sheaf_pool_t *pool = sheaf_connect(a->sock, "checker", 0, err, sizeof(err));
	sheaf_cache_t *c;
	int rc;

	REQUIRE(pool != NULL, "sheaf_connect(%s): %s", a->sock, err);
	c = sheaf_cache_open(pool, "sd-simple");
	REQUIRE(c != NULL, "open: %s", strerror(errno));
	REQUIRE(sheaf_cache_shrink(c) >= 0, "shrink");
	rc = sheaf_pool_check(pool, err, sizeof(err));
	REQUIRE(rc == 0, "pool check: %d %s", rc, err);
	sheaf_disconnect(pool);
	return 0;
}

/* ---- socket activation ------------------------------------------------------- */

/* 1 when a socket listens at @path (/proc/net/unix: the file exists from
 * bind(), but a connect before listen() is refused). */
static int unix_listening(const char *path)
{
	FILE *f = fopen("/proc/net/unix", "r");
	char line[PATH_MAX + 128];
	size_t n = strlen(path);
	int found = 0;

	if (f == NULL)
		return 0;
	while (!found && fgets(line, sizeof(line), f) != NULL) {
		unsigned long flags;
		size_t len = strcspn(line, "\n");

		line[len] = '\0';
		/* Num RefCount Protocol Flags Type St Inode Path */
		if (len > n && strcmp(line + len - n, path) == 0 && line[len - n - 1] == ' ' &&
		    sscanf(line, "%*s %*s %*s %lx", &flags) == 1 && (flags & 0x10000) != 0)
			found = 1;      /* __SO_ACCEPTCON: listen() was called */
	}
	fclose(f);
	return found;
}

START_TEST(socket_activation)
{
	char tool[PATH_MAX], sock[PATH_MAX], log[PATH_MAX], lock[PATH_MAX + 8];
	struct simple_arg a1, a2, ac;
	pid_t act, c1, c2, cc;
	int st;
	char buf[64];

	if (!find_tool("systemd-socket-activate", tool, sizeof(tool)))
		SKIP("systemd-socket-activate not found (package systemd)");
	make_test_dir();
	fmt(sock, sizeof(sock), "%s/s.sock", test_dir);
	fmt(log, sizeof(log), "%s/sheafd.log", test_dir);
	fmt(lock, sizeof(lock), "%s.lock", sock);
	add_log(log);
	{
		const char *argv[] = {
			tool, "--listen", sock, "--fdname=sheafd.socket", sheafd_bin(),
			"--foreground", "--socket", sock, "--nodes", "2", "--size", "256M",
			"--log-level", "debug", NULL,
		};
		act = spawn(argv, NULL, log, NULL, 0);
	}
	for (int64_t end = now_ms() + 10000; !unix_listening(sock);) {
		REQUIRE(now_ms() < end, "systemd-socket-activate listens on no %s", sock);
		sleep_ms(5);
	}
	/* Nothing runs sheafd yet: the first client's connection starts it. */
	REQUIRE(!file_contains(log, "serving"), "sheafd started before any connection");
	a1 = (struct simple_arg){ sock, "activated-1", test_san() ? 20000 : 100000 };
	a2 = (struct simple_arg){ sock, "activated-2", test_san() ? 20000 : 100000 };
	c1 = fork_child(simple_client, &a1);
	c2 = fork_child(simple_client, &a2);
	reap_ok(c1, 60000, "client 1");
	reap_ok(c2, 60000, "client 2");
	ac = (struct simple_arg){ sock, "checker", 0 };
	cc = fork_child(check_client, &ac);
	reap_ok(cc, 60000, "checker");
	REQUIRE(file_contains(log, "(socket activated)"),
		"sheafd does not say it serves a passed socket");
	REQUIRE(file_contains(log, "Execing"),
		"systemd-socket-activate did not exec sheafd (its pid is sheafd's)");
	REQUIRE(access(lock, F_OK) != 0, "sheafd took %s though systemd owns the socket", lock);
	REQUIRE(kill(act, SIGTERM) == 0, "kill: %s", strerror(errno));
	REQUIRE(wait_pid(act, 10000, &st) == 1, "sheafd did not stop within 10 s of SIGTERM");
	untrack(act);
	REQUIRE(exited_ok(st), "sheafd ended with %s", status_str(st, buf, sizeof(buf)));
	/* The socket file is the activator's (systemd's): sheafd leaves it. */
	REQUIRE(access(sock, F_OK) == 0, "sheafd removed the passed socket's file");
	printf("  socket activation: 2 clients attached through the passed socket, "
	       "pool check passed\n");
	test_passed();
}
END_TEST

/* ---- notify ---------------------------------------------------------------- */

START_TEST(notify)
{
	struct notify n;
	struct svc d = { 0 };
	int64_t t0, sum = 0;
	int wd0, ready0, reload0;

	make_test_dir();
	notify_open(&n);
	fmt(d.sock, sizeof(d.sock), "%s/s.sock", test_dir);
	svc_start(&d, &n, -1, 0, 200000);           /* watchdog: 200 ms */
	notify_wait(&n, &n.fdstore, 2, 2000);
	REQUIRE(n.fdstore == 2 && n.store_fd >= 0 && n.store_shared_fd >= 0,
		"no two FDSTORE=1 carrying the pool's memfds (%d)", n.fdstore);
	REQUIRE(strcmp(n.fdname, "pool-meta") == 0, "the stored fd is named '%s', not 'pool-meta'",
		n.fdname);
	REQUIRE(notify_wait(&n, &n.status, 1, 2000), "no STATUS= after READY=1");
	REQUIRE(strstr(n.last_status, "clients") != NULL && strstr(n.last_status, "caches"),
		"STATUS=%s", n.last_status);
	REQUIRE(strstr(n.last_status, "adopted") == NULL, "a fresh pool reported as adopted");

	/* WATCHDOG=1 every half of WATCHDOG_USEC: ~10 in a second.  The
	 * bounds follow the time the drain really took (a loaded machine
	 * overshoots it): at least one ping per WATCHDOG_USEC, at most 1.5
	 * per half of it. */
	wd0 = n.watchdog;
	t0 = now_ms();
	notify_drain(&n, 1000);
	{
		int64_t el = now_ms() - t0;
		int got = n.watchdog - wd0;

		REQUIRE(got >= el / 200 && got <= el * 3 / 200 + 1,
			"%d WATCHDOG=1 in %lld ms with WATCHDOG_USEC=200000 (want %lld-%lld)",
			got, (long long)el, (long long)(el / 200), (long long)(el * 3 / 200 + 1));
	}
	for (int i = wd0 + 1; i < n.watchdog && i < 512; i++)
		sum += n.wd_ms[i] - n.wd_ms[i - 1];
	printf("  watchdog: %d pings in 1 s, mean interval %lld ms (WATCHDOG_USEC 200 ms)\n",
	       n.watchdog - wd0, (long long)(n.watchdog - wd0 > 1 ? sum / (n.watchdog - wd0 - 1)
								   : 0));

	/* SIGHUP: RELOADING=1, then READY=1 again. */
	ready0 = n.ready;
	reload0 = n.reloading;
	REQUIRE(kill(d.pid, SIGHUP) == 0, "kill: %s", strerror(errno));
	REQUIRE(notify_wait(&n, &n.reloading, reload0 + 1, 5000), "no RELOADING=1 on SIGHUP");
	REQUIRE(notify_wait(&n, &n.ready, ready0 + 1, 5000), "no READY=1 after the reload");

	/* STATUS= follows slab memory, which moves without any event (no
	 * attach, no cache created): the periodic refresh reports it. */
	{
		struct sheaf_cache_config cc = { .capacity = 4 };
		char err[256] = "";
		sheaf_pool_t *p = sheaf_connect(d.sock, "status", 0, err, sizeof(err));
		sheaf_cache_t *c;
		void *objs[640];
		unsigned mib = 0;
		int64_t end;

		REQUIRE(p != NULL, "connect: %s", err);
		c = sheaf_cache_create(p, "status", 4096, &cc);
		REQUIRE(c != NULL, "cache: %s", strerror(errno));
		notify_drain(&n, 300);           /* the attach's and create's STATUS= */
		for (int i = 0; i < 640; i++)
			REQUIRE((objs[i] = sheaf_alloc(c)) != NULL, "alloc %d: %s", i,
				strerror(errno));
		for (end = now_ms() + 15000; now_ms() < end && mib < 2;) {
			notify_drain(&n, 500);
			if (sscanf(strstr(n.last_status, "caches, ") ? strstr(n.last_status,
				   "caches, ") + 8 : "", "%u MiB", &mib) != 1)
				mib = 0;
		}
		REQUIRE(mib >= 2, "STATUS= did not follow 2.5 MiB of new slabs within 15 s: %s",
			n.last_status);
		printf("  STATUS refreshed without an event: %s\n", n.last_status);
		for (int i = 0; i < 640; i++)
			REQUIRE(sheaf_free(c, objs[i]) == 0, "free %d", i);
		sheaf_disconnect(p);
	}

	svc_stop(&d, &n, SIGTERM);
	printf("  notify: READY, STATUS (%s), WATCHDOG, RELOADING, STOPPING, FDSTORE "
	       "(FDNAME=%s, a memfd)\n", n.last_status, n.fdname);
	notify_close(&n);
	test_passed();
}
END_TEST

/* ---- restarts with the fd store ------------------------------------------------ */

#define LIVE_MAX 4096

enum { CMD_PROGRESS = 'P', CMD_STATS = 'S', CMD_END = 'E' };

/* The worker's two caches: [CACHE_DEBUG] made with SHEAF_CACHE_DEBUG,
 * [CACHE_PLAIN] without (the inline fast paths and the stash run there). */
enum { CACHE_DEBUG, CACHE_PLAIN, NCACHES };

struct reply {
	int32_t rc;                 /* 0, or the failing call's -errno */
	uint32_t live;              /* objects the client holds */
	uint64_t ops;               /* allocations + frees so far */
	uint64_t cache_ops[NCACHES]; /* the same, per cache */
	uint64_t in_use;            /* from the stats, both caches */
	uint32_t reconnect_ok;
	char err[200];
};

struct worker_arg {
	const char *sock;
	int cmd_fd;                 /* commands from the test */
	int rep_fd;                 /* replies to it */
	uint64_t seed;
};

static uint64_t stamp_of(const void *p, uint64_t gen)
{
	return ((uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull) ^ gen;
}

/* Stats of both caches: 0 and the sum of in_use in *@in_use, or -errno
 * with @err filled in. */
static int worker_stats(sheaf_cache_t *const c[NCACHES], uint64_t *in_use, char *err,
			size_t len)
{
	struct sheaf_stats st;

	*in_use = 0;
	for (int k = 0; k < NCACHES; k++) {
		int rc = sheaf_cache_stats(c[k], -1, &st);

		if (rc != 0) {
			fmt(err, len, "sheaf_cache_stats(cache %d): %s", k, strerror(-rc));
			return rc;
		}
		*in_use += st.in_use;
	}
	return 0;
}

/*
 * The client that lives through the restarts: allocates and frees (a
 * random walk between 0 and LIVE_MAX objects held, each on one of the two
 * caches at random, stamped, and checked before its free) and never stops,
 * except to answer the test's commands.  Any failed operation ends it with
 * status 1.
 */
static int worker(void *p)
{
	static const char *const names[NCACHES] = { "sd-restart", "sd-restart-plain" };
	struct worker_arg *a = p;
	struct sheaf_cache_config cfg[NCACHES] = {
		[CACHE_DEBUG] = { .flags = SHEAF_CACHE_DEBUG, .capacity = SHEAF_CAPACITY_DEFAULT },
		[CACHE_PLAIN] = { .flags = 0, .capacity = SHEAF_CAPACITY_DEFAULT },
	};
	struct { uint64_t *obj; uint64_t gen; int cache; } *live;
	struct reply r;
	char err[256];
	sheaf_pool_t *pool;
	sheaf_cache_t *c[NCACHES];
	uint64_t seed = a->seed, ops = 0, gen = 0, cache_ops[NCACHES] = { 0, 0 };
	uint32_t n = 0, target = 0;
	int up = 1;

	live = calloc(LIVE_MAX, sizeof(*live));
	REQUIRE(live != NULL, "calloc");
	pool = sheaf_connect(a->sock, "restart-worker", 0, err, sizeof(err));
	REQUIRE(pool != NULL, "sheaf_connect(%s): %s", a->sock, err);
	for (int k = 0; k < NCACHES; k++) {
		c[k] = sheaf_cache_create(pool, names[k], 64, &cfg[k]);
		REQUIRE(c[k] != NULL, "sheaf_cache_create(%s): %s", names[k], strerror(errno));
	}
	for (;;) {
		if ((ops & 63) == 0) {
			struct pollfd pf = { a->cmd_fd, POLLIN, 0 };
			char cmd;

			if (poll(&pf, 1, 0) == 1) {
				REQUIRE(read(a->cmd_fd, &cmd, 1) == 1, "the test went away");
				memset(&r, 0, sizeof(r));
				if (cmd == CMD_STATS || cmd == CMD_END)
					r.rc = worker_stats(c, &r.in_use, r.err, sizeof(r.err));
				if (cmd == CMD_END && r.rc == 0) {
					for (uint32_t i = 0; i < n; i++) {
						REQUIRE(live[i].obj[0] == stamp_of(live[i].obj, live[i].gen),
						     "object %p changed", (void *)live[i].obj);
						REQUIRE(sheaf_free(c[live[i].cache], live[i].obj) == 0,
							"free %p", (void *)live[i].obj);
					}
					n = 0;
					sheaf_thread_exit();
					for (int k = 0; k < NCACHES && r.rc == 0; k++) {
						r.rc = sheaf_cache_shrink(c[k]);
						if (r.rc < 0)
							fmt(r.err, sizeof(r.err), "shrink %s: %s",
							    names[k], strerror(-r.rc));
						else
							r.rc = 0;
					}
					if (r.rc == 0)
						r.rc = sheaf_pool_check(pool, r.err, sizeof(r.err));
					if (r.rc == 0)
						r.rc = worker_stats(c, &r.in_use, r.err, sizeof(r.err));
				}
				r.live = n;
				r.ops = ops;
				memcpy(r.cache_ops, cache_ops, sizeof(r.cache_ops));
				REQUIRE(write_full(a->rep_fd, &r, sizeof(r)) == 0, "reply");
				if (cmd == CMD_END) {
					sheaf_disconnect(pool);
					free(live);
					return r.rc == 0 ? 0 : 2;
				}
			}
		}
		if (n == target) {
			up = !up;
			target = up ? (uint32_t)(n + xorshift(&seed) % (LIVE_MAX - n + 1))
				    : (uint32_t)(xorshift(&seed) % (n + 1));
		}
		if (n < target) {
			int k = (int)(xorshift(&seed) & 1);
			uint64_t *o = sheaf_alloc(c[k]);

			REQUIRE(o != NULL, "sheaf_alloc(%s) failed after %llu ops: %s", names[k],
			     (unsigned long long)ops, strerror(errno));
			cache_ops[k]++;
			live[n].obj = o;
			live[n].cache = k;
			live[n].gen = ++gen;
			o[0] = stamp_of(o, gen);
			o[7] = ~o[0];
			n++;
		} else if (n > target) {
			uint32_t i = (uint32_t)(xorshift(&seed) % n);
			uint64_t *o = live[i].obj;
			int rc;

			REQUIRE(o[0] == stamp_of(o, live[i].gen) && o[7] == ~o[0],
			     "object %p of %s changed", (void *)o, names[live[i].cache]);
			rc = sheaf_free(c[live[i].cache], o);
			REQUIRE(rc == 0, "sheaf_free(%s) failed after %llu ops: %s",
			     names[live[i].cache], (unsigned long long)ops, strerror(-rc));
			cache_ops[live[i].cache]++;
			live[i] = live[--n];
		}
		ops++;
	}
}

struct worker {
	pid_t pid;
	int cmd, rep;
};

static void worker_start(struct worker *w, struct worker_arg *a, const char *sock)
{
	int c[2], r[2];

	REQUIRE(pipe2(c, O_CLOEXEC) == 0 && pipe2(r, O_CLOEXEC) == 0, "pipe: %s",
		strerror(errno));
	*a = (struct worker_arg){ sock, c[0], r[1], 0x2545f4914f6cdd1dull ^ (uint64_t)getpid() };
	w->pid = fork_child(worker, a);
	close(c[0]);
	close(r[1]);
	w->cmd = c[1];
	w->rep = r[0];
}

static struct reply worker_cmd(struct worker *w, char cmd, int ms)
{
	struct reply r;
	int st;

	REQUIRE(write_full(w->cmd, &cmd, 1) == 0, "the client (pid %d) is gone", (int)w->pid);
	if (read_full(w->rep, &r, sizeof(r), ms) != 0) {
		char buf[64];
		int ended = waitpid(w->pid, &st, WNOHANG) == w->pid;

		REQUIRE(0, "no reply to '%c' from the client within %d ms%s%s", cmd, ms,
			ended ? ": it ended with " : "",
			ended ? status_str(st, buf, sizeof(buf)) : "");
	}
	return r;
}

enum restart_mode { RESTART_CRASH, RESTART_CLEAN, RESTART_SOCKET };

/*
 * The scenario of restart_crash/_clean/_socket: @rounds restarts of sheafd
 * with the fd store while the worker runs; see the head of the file.
 */
static void restart_scenario(enum restart_mode mode, int rounds)
{
	static const char *const mode_name[] = { "SIGKILL", "SIGTERM", "SIGKILL, socket held" };
	struct notify n;
	struct svc d = { 0 };
	struct worker w;
	struct worker_arg wa;
	struct reply r;
	int lfd = -1;
	uint64_t ops_total = 0;

	make_test_dir();
	notify_open(&n);
	fmt(d.sock, sizeof(d.sock), "%s/s.sock", test_dir);
	if (mode == RESTART_SOCKET) {
		/* The socket unit's part: the socket outlives every sheafd. */
		struct sockaddr_un sa = { .sun_family = AF_UNIX };

		lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		REQUIRE(lfd >= 0, "socket: %s", strerror(errno));
		fmt(sa.sun_path, sizeof(sa.sun_path), "%s", d.sock);
		REQUIRE(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(lfd, 128) == 0,
			"bind/listen %s: %s", d.sock, strerror(errno));
	}
	svc_start(&d, &n, lfd, 0, 0);
	REQUIRE(n.store_fd >= 0 && n.store_shared_fd >= 0, "sheafd stored no memfds (FDSTORE=1)");
	worker_start(&w, &wa, d.sock);
	r = worker_cmd(&w, CMD_STATS, 30000);
	REQUIRE(r.rc == 0, "first stats: %s", r.err);

	for (int round = 1; round <= rounds; round++) {
		int64_t t_down, t_up;
		uint64_t ops_before, ops_down = 0;
		struct reply before, down;
		int status0, fdstore0;

		sleep_ms(200);                        /* let the worker run a while */
		before = worker_cmd(&w, CMD_PROGRESS, 10000);
		ops_before = before.ops;
		svc_stop(&d, &n, mode == RESTART_CLEAN ? SIGTERM : SIGKILL);
		t_down = now_ms();
		status0 = n.status;
		fdstore0 = n.fdstore;
		if (mode == RESTART_SOCKET) {
			/* A request while no daemon runs: it waits in the backlog. */
			char cmd = CMD_STATS;
			REQUIRE(write_full(w.cmd, &cmd, 1) == 0, "the client is gone");
		}
		sleep_ms(300);                        /* no daemon for 300 ms */
		if (mode != RESTART_SOCKET) {
			down = worker_cmd(&w, CMD_PROGRESS, 10000);
			ops_down = down.ops;
			/* Both caches: the debug one and the plain one's fast paths. */
			REQUIRE(down.cache_ops[CACHE_DEBUG] > before.cache_ops[CACHE_DEBUG] &&
				down.cache_ops[CACHE_PLAIN] > before.cache_ops[CACHE_PLAIN],
				"the client made no progress on both caches while no daemon ran "
				"(debug %llu -> %llu, plain %llu -> %llu ops)",
				(unsigned long long)before.cache_ops[CACHE_DEBUG],
				(unsigned long long)down.cache_ops[CACHE_DEBUG],
				(unsigned long long)before.cache_ops[CACHE_PLAIN],
				(unsigned long long)down.cache_ops[CACHE_PLAIN]);
		}
		/* systemd starts sheafd again with the stored memfds. */
		svc_start(&d, &n, lfd, 1, 0);
		t_up = now_ms();
		REQUIRE(notify_wait(&n, &n.status, status0 + 1, 5000), "no STATUS= from the new sheafd");
		REQUIRE(strstr(n.last_status, "(adopted pool)") != NULL,
			"the new sheafd did not adopt the stored pool: STATUS=%s", n.last_status);
		/* The adopted memfd is in the store already: no second FDSTORE. */
		REQUIRE(n.fdstore == fdstore0 && n.store_other == 0,
			"the new sheafd stored a file again (fdstore %d, was %d; other %d)",
			n.fdstore, fdstore0, n.store_other);
		REQUIRE(file_contains(d.log, "adopted the pool from the fd store"),
			"no adoption in the new sheafd's log");
		REQUIRE(file_contains(d.log, "carried over from the previous daemon"),
			"the new sheafd does not watch the attached client");
		if (mode == RESTART_SOCKET) {
			REQUIRE(read_full(w.rep, &r, sizeof(r), 30000) == 0,
				"the request made while no daemon ran got no reply");
		} else {
			r = worker_cmd(&w, CMD_STATS, 30000);
		}
		REQUIRE(r.rc == 0, "the client's first request after restart %d failed: %s",
			round, r.err);
		REQUIRE(r.cache_ops[CACHE_DEBUG] > before.cache_ops[CACHE_DEBUG] &&
			r.cache_ops[CACHE_PLAIN] > before.cache_ops[CACHE_PLAIN],
			"restart %d: the client did not work on both caches across it (debug "
			"%llu -> %llu, plain %llu -> %llu ops)", round,
			(unsigned long long)before.cache_ops[CACHE_DEBUG],
			(unsigned long long)r.cache_ops[CACHE_DEBUG],
			(unsigned long long)before.cache_ops[CACHE_PLAIN],
			(unsigned long long)r.cache_ops[CACHE_PLAIN]);
		REQUIRE(file_contains(d.log, "resumed"), "the client did not resume its id");
		if (mode == RESTART_SOCKET)
			printf("  restart %d (%s): no daemon for %lld ms; the stats request sent "
			       "meanwhile waited in the backlog and succeeded (%u objects held)\n",
			       round, mode_name[mode], (long long)(t_up - t_down), r.live);
		else
			printf("  restart %d (%s): no daemon for %lld ms, the client did %llu ops "
			       "meanwhile and reconnected (%u objects held)\n", round,
			       mode_name[mode], (long long)(t_up - t_down),
			       (unsigned long long)(ops_down - ops_before), r.live);
	}
	sleep_ms(200);
	r = worker_cmd(&w, CMD_END, 60000);
	REQUIRE(r.rc == 0, "at the end: %s", r.err);
	REQUIRE(r.in_use == 0, "%llu objects still in use after freeing everything",
		(unsigned long long)r.in_use);
	ops_total = r.ops;
	reap_ok(w.pid, 30000, "the client");
	close(w.cmd);
	close(w.rep);
	svc_stop(&d, &n, SIGTERM);
	if (lfd >= 0)
		close(lfd);
	printf("  %d restarts (%s): the client did %llu ops (%llu on the debug cache, %llu "
	       "on the plain one), never failed; every object accounted for (pool check "
	       "0, in_use 0)\n", rounds, mode_name[mode], (unsigned long long)ops_total,
	       (unsigned long long)r.cache_ops[CACHE_DEBUG],
	       (unsigned long long)r.cache_ops[CACHE_PLAIN]);
	notify_close(&n);
	test_passed();
}

START_TEST(restart_crash)
{
	restart_scenario(RESTART_CRASH, 5);
}
END_TEST

START_TEST(restart_clean)
{
	restart_scenario(RESTART_CLEAN, 2);
}
END_TEST

START_TEST(restart_socket)
{
	restart_scenario(RESTART_SOCKET, 2);
}
END_TEST

/*
 * A stored pool of another layout (what a sheafd of another version left
 * in the fd store, as a restart after an upgrade passes it): sheafd
 * cannot adopt it and must neither exit (systemd would restart it on the
 * same descriptors for ever) nor map it.  It drops both from the store
 * (FDSTOREREMOVE=1 with each FDNAME), makes a new pool, stores that one,
 * and serves it.  The stored pair here is a META memfd holding a header of
 * layout version SHEAF_LAYOUT_VERSION - 1 (the header is all a sheafd
 * reads before it refuses) and an empty SHARED one.
 */
START_TEST(restart_other_layout)
{
	struct notify n;
	struct svc d = { 0 };
	struct shm_header h;
	char err[256] = "";
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	void *o;

	make_test_dir();
	notify_open(&n);
	fmt(d.sock, sizeof(d.sock), "%s/s.sock", test_dir);
	memset(&h, 0, sizeof(h));
	h.magic = SHEAF_MAGIC;
	h.version = SHEAF_LAYOUT_VERSION - 1;
	n.store_fd = memfd_create("sheaf-meta", MFD_CLOEXEC);
	n.store_shared_fd = memfd_create("sheaf-shared", MFD_CLOEXEC);
	REQUIRE(n.store_fd >= 0 && n.store_shared_fd >= 0, "memfd_create: %s", strerror(errno));
	REQUIRE(pwrite(n.store_fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h), "pwrite: %s",
		strerror(errno));
	svc_start(&d, &n, -1, 1, 0);              /* READY=1, the socket accepts */
	REQUIRE(notify_wait(&n, &n.fdstore_removed, 2, 5000),
		"%d FDSTOREREMOVE=1 for the unadoptable pair (want 2)", n.fdstore_removed);
	REQUIRE(notify_wait(&n, &n.fdstore, 2, 5000) && n.store_fd >= 0 && n.store_shared_fd >= 0,
		"the new pool's memfds were not stored (%d FDSTORE=1)", n.fdstore);
	REQUIRE(file_contains(d.log, "another layout"), "no word of the dropped pool in the log");
	REQUIRE(!file_contains(d.log, "adopted the pool"), "an unadoptable pool reported adopted");
	p = sheaf_connect(d.sock, "other-layout", 0, err, sizeof(err));
	REQUIRE(p != NULL, "connect: %s", err);
	c = sheaf_cache_create(p, "c", 64, NULL);
	REQUIRE(c != NULL, "cache: %s", strerror(errno));
	REQUIRE((o = sheaf_alloc(c)) != NULL, "alloc: %s", strerror(errno));
	REQUIRE(sheaf_free(c, o) == 0, "free");
	REQUIRE(sheaf_pool_check(p, err, sizeof(err)) == 0, "pool check: %s", err);
	sheaf_disconnect(p);
	svc_stop(&d, &n, SIGTERM);
	printf("  a stored pool of layout %u: dropped from the store, a new pool served\n",
	       h.version);
	notify_close(&n);
	test_passed();
}
END_TEST

/* ---- main ------------------------------------------------------------------- */

int main(void)
{
	Suite *s = suite_create("systemd");

	deploy_init("test_systemd");
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ADD_ALONE(s, socket_activation, 300);
	ADD_ALONE(s, notify, 300);
	ADD_ALONE(s, restart_crash, 300);
	ADD_ALONE(s, restart_clean, 300);
	ADD_ALONE(s, restart_socket, 300);
	ADD_ALONE(s, restart_other_layout, 300);
	return run_suite(s);
}
