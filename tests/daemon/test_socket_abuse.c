/*
 * test_socket_abuse.c - sheafd's control socket under abuse, with
 * the real sheafd (util_daemon.h):
 *
 *   flood_cap      sheafd under `ulimit -n 1024` (its default max_connections
 *                  then 1024 less the reserve): connect/close churn from
 *                  another process, first alone, then with 2,000 idle
 *                  connections open.  sheafd's CPU per churned connection
 *                  (its threads' schedstat over the window) stays within
 *                  1.5 times plus 10 us of what it was without them; the
 *                  churn stays under 5% of a CPU (unsanitised builds); a
 *                  probe (DaemonInfo on a new connection) is answered
 *                  within 100 ms (500 ms under a sanitiser).
 *   flood_emfile   the same with --max-connections far over the descriptor
 *                  limit: accept runs into EMFILE, which must neither spin
 *                  nor starve the probe; the pause is logged.
 *   denied         a peer the allow lists refuse gets DENIED and EOF at
 *                  once, without sending anything; one whose request is
 *                  already there gets DENIED with that request's id;
 *                  sheaf_connect fails with EACCES.
 *   idle           --idle-timeout: a connection that sends nothing, and one
 *                  stalled inside a frame, are closed after it; one that
 *                  spoke and then stays quiet is not.
 *   uid_cap        --max-clients-per-uid 2: the third Attach of the uid
 *                  fails with NO_SPACE (ENOSPC) naming the setting.
 *   socket_dir     sheafd refuses a socket directory other users may write
 *                  (explicit --socket) and a default one ($XDG_RUNTIME_DIR/
 *                  sheaf) that is writable by others or a symbolic link.
 *   check_async    a Check over four million objects does not hold up a
 *                  DaemonInfo sent meanwhile on another connection.
 *   impostor       (root) a server of another uid on the socket: sheaf_connect
 *                  fails with EPERM before reading anything; with
 *                  $SHEAF_SERVER_UID naming that uid it is trusted.
 *
 * Each test is its own TCase: CK_RUN_CASE=<name> runs one.  This process
 * needs many descriptors: main raises its soft RLIMIT_NOFILE to the hard one.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/sheaf.h"
#include "proto/frame.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_deploy.h"
#include "tests/helpers/util_proc.h"
#include "tests/helpers/util_rpc.h"

#define IDLE_CONNS   2000
#define DAEMON_NOFILE 1024
#define WINDOW_MS    3000

/* Start sheafd on d->sock with @extra flags (NULL-terminated), its
 * descriptor limit @nofile (0: ours), log level info (debug would log
 * every connection of a flood). */
static void start_daemon(struct dmn *d, rlim_t nofile, const char *const *extra)
{
	const char *argv[24] = {
		sheafd_bin(), "--foreground", "--socket", d->sock, "--nodes", "1",
		"--size", "64M", "--log-level", "info",
	};
	struct rlimit old, lim;
	int n = 10;

	for (int i = 0; extra != NULL && extra[i] != NULL && n < 23; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	/* The child inherits the limit at fork; ours comes back after. */
	REQUIRE(getrlimit(RLIMIT_NOFILE, &old) == 0, "getrlimit: %s", strerror(errno));
	lim = old;
	if (nofile > 0)
		lim.rlim_cur = nofile;
	REQUIRE(setrlimit(RLIMIT_NOFILE, &lim) == 0, "setrlimit: %s", strerror(errno));
	dmn_start_argv(d, (char *const *)argv);
	REQUIRE(setrlimit(RLIMIT_NOFILE, &old) == 0, "setrlimit back: %s", strerror(errno));
}

/* A connection that gives up after @ms when the backlog stays full. */
static int connect_within(const char *path, int ms)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

/* DaemonInfo on a new connection: its round trip in ms, or -1. */
static int64_t probe_ms(const char *sock)
{
	int64_t t0 = now_ms(), ms;
	Sheaf__V1__Response *r;
	int fd = connect_within(sock, 1000), rc;

	if (fd < 0)
		return -1;
	r = rpc_info(fd, 7, &rc);
	ms = now_ms() - t0;
	close(fd);
	if (r == NULL || r->status != SHEAF__V1__STATUS__STATUS_OK || r->id != 7)
		ms = -1;
	if (r != NULL)
		sheaf__v1__response__free_unpacked(r, NULL);
	return ms;
}

/* What the churn process is given: how long to run and where to say how
 * many connections it made. */
struct churn_arg {
	int ms;
	int report_fd;
};

/* The churn process: connect and close, about one every 2 ms, for a->ms;
 * the count goes to a->report_fd. */
static int churn(void *arg)
{
	const struct churn_arg *a = arg;
	const char *sock = getenv("SOCKET_ABUSE_SOCK");
	int64_t end = now_ms() + a->ms;
	unsigned n = 0;

	while (now_ms() < end) {
		int fd = connect_within(sock, 100);
		if (fd >= 0)
			close(fd);
		n++;
		sleep_us(2000);
	}
	return write(a->report_fd, &n, sizeof(n)) == (ssize_t)sizeof(n) ? 0 : 1;
}

/* What one window of churn cost sheafd. */
struct churn_cost {
	unsigned conns;         /* connections the churn made */
	double cpu;             /* sheafd's CPU over the window, of one CPU */
	double us_per_conn;     /* sheafd's CPU per connection, in us */
	int worst_ms;           /* the slowest of the 10 probes */
};

/* WINDOW_MS of churn from another process against @d, with a probe
 * (DaemonInfo on a new connection) every tenth of it; sheafd's CPU from
 * its threads' schedstat. */
static struct churn_cost churn_window(struct dmn *d, const char *name)
{
	struct thread_cpu t0[16], t1[16];
	struct churn_arg a = { .ms = WINDOW_MS + 500 };
	struct churn_cost c = { 0 };
	char why[256];
	int p[2], n0, n1;
	uint64_t ns;
	pid_t ch;

	REQUIRE(pipe(p) == 0, "pipe: %s", strerror(errno));
	a.report_fd = p[1];
	setenv("SOCKET_ABUSE_SOCK", d->sock, 1);
	ch = fork_child(churn, &a);
	REQUIRE(ch > 0, "fork: %s", strerror(errno));
	close(p[1]);
	sleep_ms(200);
	n0 = thread_cpu(d->pid, t0, 16);
	REQUIRE(n0 > 0, "cannot read /proc/%d/task", (int)d->pid);
	for (int i = 0; i < 10; i++) {
		int64_t ms;

		sleep_ms(WINDOW_MS / 10);
		ms = probe_ms(d->sock);
		REQUIRE(ms >= 0, "%s: probe %d not answered", name, i);
		if (ms > c.worst_ms)
			c.worst_ms = (int)ms;
	}
	n1 = thread_cpu(d->pid, t1, 16);
	REQUIRE(n1 > 0, "cannot read /proc/%d/task", (int)d->pid);
	ns = thread_cpu_diff(t0, n0, t1, n1, why, sizeof(why));
	reap_ok(ch, 10000, "churn");
	REQUIRE(read(p[0], &c.conns, sizeof(c.conns)) == (ssize_t)sizeof(c.conns) &&
		c.conns > 0, "%s: the churn reported no count", name);
	close(p[0]);
	c.cpu = (double)ns / 1e9 / (WINDOW_MS / 1000.0);
	/* The churn ran 500 ms past the window: count the window's share. */
	c.us_per_conn = (double)ns / 1e3 /
			(c.conns * (double)WINDOW_MS / (WINDOW_MS + 500 - 200));
	return c;
}

/* Connect/close churn without and then with 2,000 idle connections: the
 * idle ones make no connection dearer, and a probe is answered at once. */
static void flood(const char *const *extra, const char *name, const char *logged)
{
	static int conns[IDLE_CONNS];
	struct churn_cost base, full;
	struct dmn d;
	int opened = 0;

	dmn_init(&d);
	start_daemon(&d, DAEMON_NOFILE, extra);
	base = churn_window(&d, name);
	for (int i = 0; i < IDLE_CONNS; i++) {
		conns[i] = connect_within(d.sock, 200);
		opened += conns[i] >= 0;
	}
	REQUIRE(opened >= DAEMON_NOFILE / 2, "only %d of %d connections made", opened,
		IDLE_CONNS);
	sleep_ms(700);          /* past the grace of silent connections */
	full = churn_window(&d, name);
	printf("%s: churn alone %u connections, %.1f us of sheafd's CPU each (%.1f%% of a "
	       "CPU, slowest probe %d ms); with %d idle connections %u, %.1f us each "
	       "(%.1f%%, slowest probe %d ms)\n", name, base.conns, base.us_per_conn,
	       base.cpu * 100, base.worst_ms, opened, full.conns, full.us_per_conn,
	       full.cpu * 100, full.worst_ms);
	/* A walk over the idle connections per event would cost tens of us
	 * per connection; the bound leaves room for the measurement's noise. */
	REQUIRE(full.us_per_conn < base.us_per_conn * 1.5 + 10, "%s: with %d idle "
		"connections a connection cost sheafd %.1f us, without %.1f us", name,
		opened, full.us_per_conn, base.us_per_conn);
	/* Unsanitised, the churn (about 400 connections a second) stays a
	 * small share of a CPU; the sanitisers multiply sheafd's own code. */
	REQUIRE(test_san() || full.cpu < 0.05, "%s: the churn cost sheafd %.1f%% of a CPU",
		name, full.cpu * 100);
	REQUIRE(full.worst_ms <= (test_san() ? 500 : 100), "%s: a probe took %d ms", name,
		full.worst_ms);
	REQUIRE(dmn_alive(&d), "sheafd died");
	REQUIRE(file_contains(d.log, logged), "%s: sheafd's log does not say '%s'", name,
		logged);
	for (int i = 0; i < IDLE_CONNS; i++)
		if (conns[i] >= 0)
			close(conns[i]);
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}

START_TEST(flood_cap)
{
	flood(NULL, "flood_cap", "max_connections");
}
END_TEST

START_TEST(flood_emfile)
{
	/* A daemon sized for 256 clients keeps the descriptor limit it was
	 * given (sheafd raises it only to 2 per client slot). */
	static const char *const many[] = { "--max-connections", "100000",
					    "--max-clients", "256", NULL };

	flood(many, "flood_emfile", "descriptor frees");
}
END_TEST

/* ---- denied peers -------------------------------------------------------- */

/* A uid that is not ours. */
static const char *other_uid(void)
{
	return getuid() == 0 ? "1" : "0";
}

START_TEST(denied)
{
	const char *const only[] = { "--allow-uid", other_uid(), NULL };
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__DaemonInfoRequest di = SHEAF__V1__DAEMON_INFO_REQUEST__INIT;
	Sheaf__V1__Response *r;
	uint8_t buf[64];
	char err[256] = "";
	struct dmn d;
	size_t extra, n;
	int64_t t0;
	int fd, rc;

	dmn_init(&d);
	start_daemon(&d, 0, only);

	/* Silent: the answer and EOF come without a byte sent. */
	fd = connect_within(d.sock, 1000);
	REQUIRE(fd >= 0, "connect: %s", strerror(-fd));
	t0 = now_ms();
	r = recv_resp(fd, 2000, &rc);
	REQUIRE(r != NULL, "no DENIED for a silent refused peer: %s", strerror(-rc));
	REQUIRE(r->status == SHEAF__V1__STATUS__STATUS_DENIED && r->id == 0,
		"status %d id %llu", r->status, (unsigned long long)r->id);
	sheaf__v1__response__free_unpacked(r, NULL);
	REQUIRE(wait_closed(fd, 2000, &extra) == 1 && extra == 0, "no EOF after DENIED");
	printf("denied: a silent refused peer got DENIED and EOF in %lld ms\n",
	       (long long)(now_ms() - t0));
	REQUIRE(now_ms() - t0 < 500, "DENIED took %lld ms", (long long)(now_ms() - t0));
	close(fd);

	/* A request already waiting when sheafd accepts: its id comes back. */
	REQUIRE(kill(d.pid, SIGSTOP) == 0, "SIGSTOP");
	fd = connect_within(d.sock, 1000);
	REQUIRE(fd >= 0, "connect: %s", strerror(-fd));
	rq.id = 4242;
	rq.body_case = SHEAF__V1__REQUEST__BODY_DAEMON_INFO;
	rq.daemon_info = &di;
	n = pack_req(&rq, buf, sizeof(buf));
	REQUIRE(send_frame(fd, buf, n) == 0, "send");
	REQUIRE(kill(d.pid, SIGCONT) == 0, "SIGCONT");
	r = recv_resp(fd, 2000, &rc);
	REQUIRE(r != NULL, "no DENIED reply: %s", strerror(-rc));
	REQUIRE(r->status == SHEAF__V1__STATUS__STATUS_DENIED && r->id == 4242,
		"status %d id %llu (want DENIED, 4242)", r->status, (unsigned long long)r->id);
	sheaf__v1__response__free_unpacked(r, NULL);
	REQUIRE(wait_closed(fd, 2000, &extra) == 1, "no EOF after DENIED");
	close(fd);

	/* libsheaf says so. */
	errno = 0;
	REQUIRE(sheaf_connect(d.sock, "refused", 0, err, sizeof(err)) == NULL &&
		errno == EACCES, "sheaf_connect of a refused uid: errno %s (%s)",
		strerror(errno), err);
	printf("denied: sheaf_connect: EACCES (%s)\n", err);
	REQUIRE(dmn_alive(&d), "sheafd died");
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- idle timeout --------------------------------------------------------- */

START_TEST(idle)
{
	static const char *const quick[] = { "--idle-timeout", "300", NULL };
	Sheaf__V1__Response *r;
	struct dmn d;
	size_t extra;
	uint8_t half[2] = { 0, 0 };
	int silent, stalled, spoke, rc;
	int64_t t0;

	dmn_init(&d);
	start_daemon(&d, 0, quick);
	/* sheafd's timer starts when it accepts, after the connect begins. */
	t0 = now_ms();
	silent = connect_within(d.sock, 1000);
	stalled = connect_within(d.sock, 1000);
	spoke = connect_within(d.sock, 1000);
	REQUIRE(silent >= 0 && stalled >= 0 && spoke >= 0, "connect");
	REQUIRE(send_all(stalled, half, sizeof(half)) == 0, "send half a header");
	r = rpc_info(spoke, 1, &rc);
	REQUIRE(r != NULL && r->status == SHEAF__V1__STATUS__STATUS_OK, "DaemonInfo: %d", rc);
	sheaf__v1__response__free_unpacked(r, NULL);

	REQUIRE(wait_closed(silent, 3000, &extra) == 1, "a silent connection stayed open");
	printf("idle: silent connection closed after %lld ms (timeout 300)\n",
	       (long long)(now_ms() - t0));
	REQUIRE(now_ms() - t0 >= 250, "closed after %lld ms", (long long)(now_ms() - t0));
	REQUIRE(wait_closed(stalled, 3000, &extra) == 1, "a stalled frame stayed open");
	/* The one that spoke is quiet for 1 s, and still served. */
	REQUIRE(wait_closed(spoke, 1000, &extra) == 0, "a connection that spoke was closed");
	r = rpc_info(spoke, 2, &rc);
	REQUIRE(r != NULL && r->status == SHEAF__V1__STATUS__STATUS_OK && r->id == 2,
		"DaemonInfo after 1 s quiet: %d", rc);
	sheaf__v1__response__free_unpacked(r, NULL);
	close(silent);
	close(stalled);
	close(spoke);
	REQUIRE(count_in_file(d.log, "sent no request") >= 1, "the idle close is not logged");
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- per-uid client slots ------------------------------------------------- */

struct holder_arg {
	const char *sock;
	int expect_ok;
	int report[2];           /* 'y' attached, else the errno as a byte */
	int stop[2];
};

static int holder(void *argp)
{
	struct holder_arg *a = argp;
	char err[256] = "", g = 'y';
	sheaf_pool_t *p;

	close(a->stop[1]);
	p = sheaf_connect(a->sock, "holder", 0, err, sizeof(err));
	if (p == NULL) {
		g = (char)errno;
		fprintf(stderr, "  holder: %s\n", err);
	}
	REQUIRE(write_full(a->report[1], &g, 1) == 0, "report");
	while (read(a->stop[0], &g, 1) < 0 && errno == EINTR)
		;
	if (p != NULL)
		sheaf_disconnect(p);
	return 0;
}

START_TEST(uid_cap)
{
	static const char *const two[] = { "--max-clients-per-uid", "2", NULL };
	static struct holder_arg a[3];
	pid_t pid[3];
	struct dmn d;
	char got;

	dmn_init(&d);
	start_daemon(&d, 0, two);
	for (int i = 0; i < 3; i++) {
		a[i].sock = d.sock;
		REQUIRE(pipe(a[i].report) == 0 && pipe(a[i].stop) == 0, "pipe");
		pid[i] = fork_child(holder, &a[i]);
		REQUIRE(read_full(a[i].report[0], &got, 1, 30000) == 0, "holder %d silent", i);
		REQUIRE(i < 2 ? got == 'y' : got == ENOSPC, "holder %d: %s", i,
			got == 'y' ? "attached" : strerror(got));
	}
	REQUIRE(file_contains(d.log, "max_clients_per_uid"), "the refusal is not logged");
	printf("uid_cap: two clients of uid %u attached, the third got ENOSPC\n",
	       (unsigned)getuid());
	for (int i = 0; i < 3; i++) {
		/* A byte, not EOF: the later holders inherited this pipe too. */
		REQUIRE(write_full(a[i].stop[1], "x", 1) == 0, "stop holder");
		close(a[i].stop[1]);
		reap_ok(pid[i], 30000, "holder");
		close(a[i].stop[0]);
		close(a[i].report[0]);
		close(a[i].report[1]);
	}
	wait_no_clients(&d, 30000);
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- the socket's directory ------------------------------------------------ */

/* Run sheafd with @argv and @env to its end: its exit status; its stderr
 * in @errf. */
static int run_once(const char *const argv[], const char *const *env, const char *errf)
{
	struct spawn_opts o = { .exe = sheafd_bin(), .out = errf, .err = errf, .env = env };
	char buf[256];
	const char *msg;
	int st;

	msg = run_proc(argv, &o, 20000, &st, buf, sizeof(buf));
	REQUIRE(msg == NULL, "%s", msg);
	return st;
}

START_TEST(socket_dir)
{
	char dir[128], sock[160], errf[160], xdg[160], env[200], link[160];
	const char *const argv[] = { sheafd_bin(), "--foreground", "--socket", sock, "--nodes",
				     "1", "--size", "64M", NULL };
	const char *const argv_def[] = { sheafd_bin(), "--foreground", "--nodes", "1",
					 "--size", "64M", NULL };
	const char *const envs[] = { env, NULL };
	Sheaf__V1__Response *r;
	int st;

	REQUIRE(make_temp_dir(dir, sizeof(dir), "/tmp/sheafd-dir-XXXXXX") == 0, "mkdtemp");
	fmt(errf, sizeof(errf), "%s/err", dir);
	fmt(xdg, sizeof(xdg), "%s/pub", dir);
	REQUIRE(mkdir(xdg, 0700) == 0, "mkdir");
	fmt(sock, sizeof(sock), "%s/s.sock", xdg);

	/* An explicit socket in a directory others may write: refused. */
	REQUIRE(chmod(xdg, 0777) == 0, "chmod");
	st = run_once(argv, NULL, errf);
	REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 1 && file_contains(errf, "writable by other"),
		"sheafd in a 0777 directory: exit %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	/* Sticky (as /tmp): others cannot remove our socket there; allowed. */
	REQUIRE(chmod(xdg, 01777) == 0, "chmod");
	{
		struct dmn d;
		const char *const dargv[] = { sheafd_bin(), "--foreground", "--socket", sock,
					      "--nodes", "1", "--size", "64M", NULL };

		dmn_init(&d);
		fmt(d.sock, sizeof(d.sock), "%s", sock);
		dmn_start_argv(&d, (char *const *)dargv);
		r = daemon_info(d.sock);     /* served: its signals are set up */
		REQUIRE(r != NULL, "no DaemonInfo from sheafd in a sticky directory");
		sheaf__v1__response__free_unpacked(r, NULL);
		dmn_stop(&d, 10000);
		dmn_cleanup(&d);
	}

	/* The default path ($XDG_RUNTIME_DIR/sheaf) pre-made writable by all. */
	fmt(env, sizeof(env), "XDG_RUNTIME_DIR=%s", dir);
	fmt(link, sizeof(link), "%s/sheaf", dir);
	REQUIRE(mkdir(link, 0777) == 0 && chmod(link, 0777) == 0, "mkdir sheaf");
	st = run_once(argv_def, envs, errf);
	REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 1 && file_contains(errf, "writable by other"),
		"sheafd with a 0777 default directory: exit %d",
		WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	/* ... or a symbolic link to a directory of ours. */
	REQUIRE(rmdir(link) == 0 && chmod(xdg, 0700) == 0 && symlink(xdg, link) == 0, "symlink");
	st = run_once(argv_def, envs, errf);
	REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 1 && file_contains(errf, "symbolic link"),
		"sheafd with a symlinked default directory: exit %d",
		WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	printf("socket_dir: a 0777 directory and a symlinked default one refused\n");
	rm_tree(dir);
}
END_TEST

/* ---- a server of another uid ------------------------------------------------ */

/* Listen on @arg as uid 65534 and accept, never answering. */
static int impostor(void *arg)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0), c;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", (const char *)arg);
	REQUIRE(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "bind");
	/* The peer credentials are taken at listen(): after the switch. */
	REQUIRE(setresgid(65534, 65534, 65534) == 0 && setresuid(65534, 65534, 65534) == 0,
		"setresuid: %s", strerror(errno));
	REQUIRE(listen(fd, 8) == 0, "listen");
	while ((c = accept(fd, NULL, NULL)) >= 0)
		;                    /* held open, never read */
	return 0;
}

START_TEST(impostor_server)
{
	char dir[128], sock[160], err[256] = "";
	sheaf_pool_t *p;
	pid_t pid;
	int fd;

	if (getuid() != 0)
		SKIP("not root: cannot run a server as another uid");
	REQUIRE(make_temp_dir(dir, sizeof(dir), "/tmp/sheafd-imp-XXXXXX") == 0, "mkdtemp");
	snprintf(sock, sizeof(sock), "%s/s.sock", dir);
	pid = fork_child(impostor, sock);
	REQUIRE(pid > 0, "fork");
	for (int i = 0; i < 500 && (fd = unix_connect(sock)) < 0; i++)
		sleep_ms(10);
	REQUIRE(fd >= 0, "the impostor does not listen");
	close(fd);

	errno = 0;
	unsetenv("SHEAF_SERVER_UID");
	p = sheaf_connect(sock, "victim", 0, err, sizeof(err));
	REQUIRE(p == NULL && errno == EPERM && strstr(err, "65534") != NULL,
		"sheaf_connect to a server of uid 65534: errno %s (%s)", strerror(errno), err);
	printf("impostor: sheaf_connect: EPERM (%s)\n", err);

	/* Trusted by name: then the mute server times the call out. */
	setenv("SHEAF_SERVER_UID", "65534", 1);
	setenv("SHEAF_RPC_TIMEOUT_MS", "200", 1);
	errno = 0;
	p = sheaf_connect(sock, "victim", 0, err, sizeof(err));
	unsetenv("SHEAF_SERVER_UID");
	unsetenv("SHEAF_RPC_TIMEOUT_MS");
	REQUIRE(p == NULL && errno == ETIMEDOUT,
		"with SHEAF_SERVER_UID=65534: errno %s (%s)", strerror(errno), err);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	untrack(pid);
	rm_tree(dir);
}
END_TEST

/* ---- Check off the event loop ---------------------------------------------- */

#define CHECK_ASYNC_TRIES 10

START_TEST(check_async)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__CheckRequest cr = SHEAF__V1__CHECK_REQUEST__INIT;
	struct sheaf_cache_config cc = { .capacity = 64 };
	/* Enough that the Check outlasts a probe's round trip: under ASan
	 * 200,000 objects were checked before the probe came, every try of
	 * every run.  TSan, slower, takes fewer to keep the fill short, yet
	 * enough that the Check (7-8 ms over 200,000) is several times the
	 * 1 ms pause and the probe's 1-4 ms. */
	const char *san = getenv("SHEAF_SAN");
	unsigned nobj = san != NULL && strcmp(san, "thread") == 0 ? 1000000 : 4000000;
	static const char *const big[] = { "--size", "512M", NULL };
	Sheaf__V1__Response *r;
	char err[256] = "";
	uint8_t buf[64];
	int64_t t0, info_ms, check_ms;
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	struct dmn d;
	void **objs;
	int a, rc, overlapped = 0;
	size_t n;

	dmn_init(&d);
	start_daemon(&d, 0, big);
	p = sheaf_connect(d.sock, "check", 0, err, sizeof(err));
	REQUIRE(p != NULL, "connect: %s", err);
	c = sheaf_cache_create(p, "many", 64, &cc);
	REQUIRE(c != NULL, "cache: %s", strerror(errno));
	objs = malloc(nobj * sizeof(*objs));
	REQUIRE(objs != NULL, "malloc");
	for (unsigned i = 0; i < nobj; i++)
		REQUIRE((objs[i] = sheaf_alloc(c)) != NULL, "alloc %u: %s", i, strerror(errno));

	/*
	 * A Check on one connection; DaemonInfo on another meanwhile.  The
	 * proof is the order of the replies, not their times: if the event
	 * loop served DaemonInfo only after the Check, the Check's reply would
	 * already be waiting on its connection when DaemonInfo's arrives.  A
	 * Check that ends before the probe proves nothing either way, so a
	 * few are tried.
	 */
	a = unix_connect(d.sock);
	REQUIRE(a >= 0, "connect");
	for (int attempt = 0; attempt < CHECK_ASYNC_TRIES && !overlapped; attempt++) {
		struct pollfd pf = { .fd = a, .events = POLLIN };

		rq.id = 9 + (uint64_t)attempt;
		rq.body_case = SHEAF__V1__REQUEST__BODY_CHECK;
		rq.check = &cr;
		n = pack_req(&rq, buf, sizeof(buf));
		t0 = now_ms();
		REQUIRE(send_frame(a, buf, n) == 0, "send Check");
		sleep_ms(1);            /* the event loop reads the Check first */
		info_ms = probe_ms(d.sock);
		REQUIRE(info_ms >= 0, "DaemonInfo during a Check not answered");
		overlapped = poll(&pf, 1, 0) == 0;      /* Check still running */
		r = recv_resp(a, 120000, &rc);
		check_ms = now_ms() - t0;
		REQUIRE(r != NULL && r->status == SHEAF__V1__STATUS__STATUS_OK &&
			r->id == rq.id && r->body_case == SHEAF__V1__RESPONSE__BODY_CHECK &&
			r->check->ok, "Check: %d %s", rc,
			r != NULL && r->check != NULL ? r->check->problem : "");
		REQUIRE(r->check->in_use == nobj, "Check counted %llu in use, want %u",
			(unsigned long long)r->check->in_use, nobj);
		sheaf__v1__response__free_unpacked(r, NULL);
		printf("check_async: Check over %u objects took %lld ms; DaemonInfo "
		       "meanwhile %lld ms, %s\n", nobj, (long long)check_ms,
		       (long long)info_ms, overlapped ? "answered while the Check ran" :
		       "the Check had ended first");
	}
	close(a);
	REQUIRE(overlapped, "DaemonInfo was never answered while a Check ran "
		"(%d tries): the Check holds the event loop", CHECK_ASYNC_TRIES);
	for (unsigned i = 0; i < nobj; i++)
		REQUIRE(sheaf_free(c, objs[i]) == 0, "free");
	free(objs);
	REQUIRE(sheaf_pool_check(p, err, sizeof(err)) == 0, "check: %s", err);
	sheaf_disconnect(p);
	wait_no_clients(&d, 30000);
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("socket_abuse");
	struct rlimit rl;

	require_binaries("test_socket_abuse");
	/* 2,000 connections and more: as many descriptors as we may have. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < IDLE_CONNS + 256) {
		fprintf(stderr, "test_socket_abuse: needs %d descriptors (RLIMIT_NOFILE hard "
			"limit %llu)\n", IDLE_CONNS + 256, (unsigned long long)rl.rlim_max);
		return 1;
	}
	ADD_ALONE(s, flood_cap, 120);
	ADD_ALONE(s, flood_emfile, 120);
	ADD_ALONE(s, denied, 60);
	ADD_ALONE(s, idle, 60);
	ADD_ALONE(s, uid_cap, 60);
	ADD_ALONE(s, socket_dir, 60);
	ADD_ALONE(s, impostor_server, 60);
	ADD_ALONE(s, check_async, 300);
	return run_suite(s);
}
