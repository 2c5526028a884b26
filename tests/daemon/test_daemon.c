/*
 * test_daemon.c - sheafd's protocol and life, with real processes: every
 * test starts the sheafd built next to this program (util_daemon.h) on a
 * control socket in a fresh temporary directory, with its log in DIR/log
 * (printed when a test fails), and talks to it from real client processes
 * (forked children that call sheaf_connect themselves) or with raw framed
 * protobuf (util_rpc.h).  Malformed frames are in test_daemon_malformed.c,
 * the multi-process workloads in test_daemon_stress.c, the SIGKILLed
 * clients in test_daemon_kill.c.
 *
 *   uid_refused    (root only) uid 65534 is refused with EACCES and a
 *                  message naming the uid; allowed through --allow-gid.
 *   lifecycle      SIGTERM with two clients attached (exit 0 within 2 s,
 *                  socket removed); a second sheafd on the same socket is
 *                  refused; --help; bad flags exit 2; a config file is
 *                  honoured and flags win over it.
 *   idle_cpu       an idle daemon uses (almost) no CPU over 3 s.
 *   attach_wakes   a daemon with no client starts no grace period; its
 *                  first client gets one at once, not after a nap.
 *   reconnect      a live process that called sheaf_disconnect is no longer
 *                  attached, and 100 connect/disconnect cycles in one
 *                  process do not use up the 64 client slots.
 *   mem_cap        at a small --mem-cap, sheaf_alloc fails promptly with
 *                  ENOMEM and works again after frees.
 *   address_taken  the pool's address taken in the client: EADDRINUSE, or
 *                  a relocated mapping when asked for.
 *   stale_pool     a fresh daemon behind a connected client: ESTALE for its
 *                  control requests, its own sheaves keep serving.
 *
 * Every test is one TCase (CK_RUN_CASE=<name> runs one).  Hot loops use
 * REQUIRE (Check's passing assertions are slow); child processes report
 * through pipes, REQUIRE and exit statuses and never call Check.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <grp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/internal.h"
#include "client/sheaf.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_proc.h"
#include "tests/helpers/util_rpc.h"

/* ---- the daemon process ---------------------------------------------------- */

/* Run a short-lived sheafd to completion: its exit status. */
static int run_sheafd(char *const argv[], const char *out, const char *err, int ms)
{
	struct spawn_opts o = { .out = out, .err = err };
	char buf[256];
	const char *msg;
	int st;

	msg = run_proc((const char *const *)argv, &o, ms, &st, buf, sizeof(buf));
	REQUIRE(msg == NULL, "%s", msg);
	return st;
}

/* ---- unauthorised uid ---------------------------------------------------- */

struct nobody_arg {
	const char *sock;
	int expect_ok;
	int msg[2];
};

static int nobody_child(void *argp)
{
	struct nobody_arg *a = argp;
	char err[256] = "";
	sheaf_pool_t *p;
	int e;

	/* 77: this system cannot make us uid 65534 (e.g. a user namespace
	 * without it): the test is skipped. */
	if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0) {
		fprintf(stderr, "cannot become uid/gid 65534: %s\n", strerror(errno));
		return 77;
	}
	REQUIRE(getuid() == 65534 && geteuid() == 65534, "still uid %d", (int)getuid());
	errno = 0;
	p = sheaf_connect(a->sock, "nobody", 0, err, sizeof(err));
	e = errno;
	write_full(a->msg[1], err, sizeof(err));
	if (a->expect_ok) {
		sheaf_cache_t *c;
		void *o;
		REQUIRE(p != NULL, "nobody (allowed by gid) refused: %s (%s)", strerror(e), err);
		c = sheaf_cache_create(p, "nobody", 64, NULL);
		REQUIRE(c != NULL, "sheaf_cache_create: %s", strerror(errno));
		o = sheaf_alloc(c);
		REQUIRE(o != NULL, "sheaf_alloc: %s", strerror(errno));
		REQUIRE(sheaf_free(c, o) == 0, "sheaf_free");
		sheaf_disconnect(p);
		return 0;
	}
	REQUIRE(p == NULL, "uid 65534 attached to a daemon that allows only uid 0");
	REQUIRE(e == EACCES, "errno %d (%s), expected EACCES; err '%s'", e, strerror(e), err);
	REQUIRE(strstr(err, "uid") != NULL && strstr(err, "65534") != NULL,
	     "the error does not name the uid: '%s'", err);
	return 0;
}

/* Returns 0, or -1 when the system cannot run a uid 65534 process. */
static int nobody_run(struct dmn *d, int expect_ok)
{
	static struct nobody_arg a;
	char err[256] = "", buf[64];
	pid_t p;
	int st = 0;

	/* nobody must be able to reach the socket: the directory searchable,
	 * the socket writable; the daemon's allow lists decide. */
	REQUIRE(chmod(d->dir, 0755) == 0, "chmod: %s", strerror(errno));
	REQUIRE(chmod(d->sock, 0777) == 0, "chmod: %s", strerror(errno));
	a.sock = d->sock;
	a.expect_ok = expect_ok;
	REQUIRE(pipe(a.msg) == 0, "pipe");
	p = fork_child(nobody_child, &a);
	REQUIRE(wait_pid(p, 60000, &st) == 1, "the uid 65534 child hangs");
	untrack(p);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
		close(a.msg[0]);
		close(a.msg[1]);
		return -1;
	}
	REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 0, "uid 65534 client (%s): %s",
		expect_ok ? "allowed by gid" : "to be refused", status_str(st, buf, sizeof(buf)));
	REQUIRE(read_full(a.msg[0], err, sizeof(err), 1000) == 0, "no message from the child");
	err[sizeof(err) - 1] = '\0';
	printf("  uid 65534 %s: '%s'\n", expect_ok ? "attached" : "refused", err);
	close(a.msg[0]);
	close(a.msg[1]);
	return 0;
}

static int root_client(void *argp)
{
	sheaf_pool_t *p = child_connect(argp, "root");

	sheaf_disconnect(p);
	return 0;
}

START_TEST(uid_refused)
{
	static const char *const only_root[] = { "--allow-uid", "0", NULL };
	static const char *const by_gid[] = { "--allow-uid", "0", "--allow-gid", "65534", NULL };
	struct dmn d;

	if (getuid() != 0)
		SKIP("not root: cannot become uid 65534");
	dmn_init(&d);
	dmn_start(&d, only_root);
	if (nobody_run(&d, 0) != 0) {
		dmn_stop(&d, 10000);
		dmn_cleanup(&d);
		SKIP("this system cannot run a process as uid 65534");
	}
	REQUIRE(file_contains(d.log, "uid 65534"), "sheafd's log does not mention the refused uid");
	/* The allowed uid still attaches. */
	reap_ok(fork_child(root_client, d.sock), 60000, "root client");
	REQUIRE(dmn_alive(&d), "sheafd died");
	dmn_stop(&d, 10000);

	/* Allowed through its group. */
	dmn_start(&d, by_gid);
	REQUIRE(nobody_run(&d, 1) == 0, "uid 65534 unavailable the second time");
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- daemon lifecycle ---------------------------------------------------- */

struct idle_arg {
	const char *sock;
	int ready[2];
	int stop[2];
};

static int idle_client(void *argp)
{
	struct idle_arg *a = argp;
	sheaf_pool_t *p;
	char g;

	close(a->stop[1]);
	p = child_connect(a->sock, "idle");
	REQUIRE(write_full(a->ready[1], "r", 1) == 0, "write ready");
	/* Wait for the parent (EOF), the daemon gone meanwhile. */
	while (read(a->stop[0], &g, 1) < 0 && errno == EINTR)
		;
	sheaf_disconnect(p);
	return 0;
}

START_TEST(lifecycle)
{
	static struct idle_arg a;
	struct dmn d;
	char out[128], err[128], conf[128], buf[64];
	pid_t idle[2];
	int st;
	int64_t t0;
	char g;
	Sheaf__V1__Response *r;

	dmn_init(&d);
	snprintf(out, sizeof(out), "%s/out", d.dir);
	snprintf(err, sizeof(err), "%s/err", d.dir);
	snprintf(conf, sizeof(conf), "%s/sheafd.conf", d.dir);

	/* --help: exit 0, every flag listed. */
	{
		char *argv[] = { (char *)sheafd_bin(), (char *)"--help", NULL };
		static const char *const flags[] = {
			"--socket", "--config", "--size", "--nodes", "--foreground",
			"--log-level", "--allow-uid", "--allow-gid",
		};
		st = run_sheafd(argv, out, err, 20000);
		REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 0, "sheafd --help: %s",
			status_str(st, buf, sizeof(buf)));
		for (unsigned i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
			REQUIRE(file_contains(out, flags[i]), "sheafd --help does not list %s", flags[i]);
	}
	/* A bad flag, a bad value: exit 2 with a message. */
	{
		char *argv[] = { (char *)sheafd_bin(), (char *)"--foreground", (char *)"--no-such-flag", NULL };
		char *argv2[] = { (char *)sheafd_bin(), (char *)"--socket", d.sock, (char *)"--nodes",
				  (char *)"99", NULL };
		st = run_sheafd(argv, out, err, 20000);
		REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 2, "sheafd --no-such-flag: %s",
			status_str(st, buf, sizeof(buf)));
		REQUIRE(file_contains(err, "--no-such-flag"),
			"sheafd --no-such-flag: stderr does not name the flag");
		st = run_sheafd(argv2, out, err, 20000);
		REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 2, "sheafd --nodes 99: %s",
			status_str(st, buf, sizeof(buf)));
		REQUIRE(file_contains(err, "99"), "sheafd --nodes 99: stderr does not name the value");
		REQUIRE(access(d.sock, F_OK) != 0, "a refused sheafd created its socket");
	}

	/* A running daemon; a second one on its socket is refused. */
	dmn_start(&d, NULL);
	{
		char *argv[] = { (char *)sheafd_bin(), (char *)"--foreground", (char *)"--socket", d.sock,
				 (char *)"--nodes", (char *)"1", (char *)"--size", (char *)"16M", NULL };
		st = run_sheafd(argv, out, err, 20000);
		REQUIRE(!(WIFEXITED(st) && WEXITSTATUS(st) == 0),
			"a second sheafd on the same socket started (%s)",
			status_str(st, buf, sizeof(buf)));
		REQUIRE(file_contains(err, d.sock), "the second sheafd's message does not name %s",
			d.sock);
		REQUIRE(info_clients(d.sock) == 0, "the first sheafd no longer answers");
	}

	/* SIGTERM with two idle clients attached. */
	REQUIRE(pipe(a.ready) == 0 && pipe(a.stop) == 0, "pipe");
	a.sock = d.sock;
	for (int i = 0; i < 2; i++) {
		idle[i] = fork_child(idle_client, &a);
		REQUIRE(read_full(a.ready[0], &g, 1, 60000) == 0, "idle client %d did not attach", i);
	}
	REQUIRE(info_clients(d.sock) == 2, "DaemonInfo: %d clients, expected 2",
		info_clients(d.sock));
	t0 = now_ms();
	dmn_stop(&d, 2000);
	printf("lifecycle: SIGTERM with 2 clients attached: exit 0 in %lld ms\n",
	       (long long)(now_ms() - t0));
	REQUIRE(file_contains(d.log, "2 clients attached"), "the log does not say 2 clients were attached");
	close(a.stop[1]);
	for (int i = 0; i < 2; i++)
		reap_ok(idle[i], 30000, "idle client");
	close(a.stop[0]);
	close(a.ready[0]);
	close(a.ready[1]);

	/* A configuration file is honoured; flags win over it. */
	write_text(conf, "# sheafd test\n"
			 "nodes = 4\n"
			 "log_level=debug\n"
			 "size = 64M\n");
	{
		char *argv[] = { (char *)sheafd_bin(), (char *)"--foreground", (char *)"--config", conf,
				 (char *)"--socket", d.sock, (char *)"--nodes", (char *)"2", NULL };
		dmn_start_argv(&d, argv);
	}
	r = daemon_info(d.sock);
	REQUIRE(r != NULL && r->daemon_info->layout != NULL, "DaemonInfo failed");
	printf("  config file + flags: %u nodes (simulated %d), pool %llu bytes\n",
	       r->daemon_info->layout->nodes, (int)r->daemon_info->layout->simulated_nodes,
	       (unsigned long long)r->daemon_info->pool_size);
	REQUIRE(r->daemon_info->layout->nodes == 2, "nodes %u: the flag --nodes 2 did not win over "
		"the file's nodes=4", r->daemon_info->layout->nodes);
	REQUIRE(r->daemon_info->layout->simulated_nodes, "nodes not simulated");
	REQUIRE(r->daemon_info->pool_size == (64u << 20), "pool size %llu: the file's size=64M was "
		"ignored", (unsigned long long)r->daemon_info->pool_size);
	sheaf__v1__response__free_unpacked(r, NULL);
	REQUIRE(file_contains(d.log, " debug: "), "the file's log_level=debug was ignored");
	dmn_stop(&d, 10000);
	/* A bad configuration file: exit 2, naming the file and line. */
	write_text(conf, "nodes = 2\nno_such_key = 1\n");
	{
		char *argv[] = { (char *)sheafd_bin(), (char *)"--foreground", (char *)"--config", conf,
				 (char *)"--socket", d.sock, NULL };
		st = run_sheafd(argv, out, err, 20000);
		REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 2, "bad config file: %s",
			status_str(st, buf, sizeof(buf)));
		REQUIRE(file_contains(err, "sheafd.conf:2"), "bad config file: stderr does not name "
			"the file and line");
	}
	dmn_cleanup(&d);
}
END_TEST

/* ---- an idle daemon uses no CPU ------------------------------------------ */

static int brief_client(void *argp)
{
	sheaf_pool_t *p = child_connect(argp, "brief");
	sheaf_cache_t *c = sheaf_cache_create(p, "brief", 256, NULL);
	void *objs[1000];

	REQUIRE(c != NULL, "sheaf_cache_create: %s", strerror(errno));
	for (int i = 0; i < 1000; i++)
		REQUIRE((objs[i] = sheaf_alloc(c)) != NULL, "sheaf_alloc: %s", strerror(errno));
	for (int i = 0; i < 1000; i++)
		REQUIRE(sheaf_free(c, objs[i]) == 0, "sheaf_free");
	sheaf_disconnect(p);
	return 0;
}

START_TEST(idle_cpu)
{
	struct dmn d;
	double used;
	volatile uint64_t spin = 0;
	struct thread_cpu t0s[16], t1s[16];
	char why[512];
	int n0, n1;
	int64_t t0;

	/* The probe itself works: 200 ms of CPU burnt here shows up (measured
	 * by this process's own CPU clock, not the wall clock: on a loaded
	 * machine 200 ms of wall time may hold little CPU). */
	n0 = thread_cpu(getpid(), t0s, 16);
	{
		struct timespec a, b;

		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
		for (t0 = now_ms(); now_ms() - t0 < 20000; spin++) {
			clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
			if ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 >= 200)
				break;
		}
	}
	n1 = thread_cpu(getpid(), t1s, 16);
	used = n0 > 0 && n1 > 0 ? (double)thread_cpu_diff(t0s, n0, t1s, n1, why, sizeof(why)) / 1e9 : -1;
	REQUIRE(used >= 0.1, "thread_cpu does not see 200 ms of busy loop (%.3f s)", used);
	dmn_init(&d);
	dmn_start(&d, NULL);
	reap_ok(fork_child(brief_client, d.sock), 60000, "brief client");
	wait_no_clients(&d, 30000);
	n0 = thread_cpu(d.pid, t0s, 16);
	REQUIRE(n0 > 0, "cannot read /proc/%d/task", (int)d.pid);
	sleep_us(3000000);
	n1 = thread_cpu(d.pid, t1s, 16);
	REQUIRE(n1 > 0, "cannot read /proc/%d/task", (int)d.pid);
	used = (double)thread_cpu_diff(t0s, n0, t1s, n1, why, sizeof(why)) / 1e9;
	printf("idle_cpu: sheafd used %.3f s of CPU in 3 s idle (%s)\n", used, why);
	/* The idle engine's work is fixed (a look a second per node, over
	 * every ring slot with atomic loads): 1 ms in 3 s natively.  TSan
	 * makes each atomic load its own synchronisation lookup (perf: 38%
	 * of sheafd's samples in MetaMap::GetSync), and the same work took
	 * 24-66 ms there, commit to commit alike; a spinning thread takes
	 * seconds either way. */
	REQUIRE(used < (test_san() ? 0.25 : 0.05), "an idle sheafd used %.3f s of CPU in 3 s (%s)",
		used, why);
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- a napping engine wakes at attach -------------------------------------- */

/* How soon after its attach a client sees the first grace period of a
 * sheafd that had none: far below the engine threads' 1 s nap. */
#define WAKE_BOUND_MS 400

static int first_client(void *argp)
{
	int64_t t0 = now_ms(), ms;
	sheaf_pool_t *p = child_connect(argp, "first");
	struct shm_pool *sp = &p->shm;
	uint64_t seq = at_load_acquire(&sp->hdr->gp_seq);

	REQUIRE(seq <= 1, "sheafd started %" PRIu64 " grace periods with no client "
		"attached", seq);
	while (at_load_acquire(&sp->hdr->gp_done) == 0 && now_ms() - t0 < 5000)
		sleep_ms(1);
	ms = now_ms() - t0;
	REQUIRE(at_load_acquire(&sp->hdr->gp_done) > 0, "no grace period 5 s after the attach");
	printf("attach_wakes: the first grace period %lld ms after the connect began\n",
	       (long long)ms);
	REQUIRE(ms < WAKE_BOUND_MS, "the first grace period came %lld ms after the attach: "
		"the engine napped on", (long long)ms);
	sheaf_disconnect(p);
	return 0;
}

/*
 * With no client attached the engine's threads nap up to 1 s and its
 * grace-period thread starts no beat (docs/design.md 5.1, "Sleeping"):
 * 1.3 s after the start, in the middle of a nap, a first client attaches,
 * and client_attach's wake-up makes the beat start a grace period at once.
 */
START_TEST(attach_wakes)
{
	struct dmn d;

	dmn_init(&d);
	dmn_start(&d, NULL);
	sleep_ms(1300);
	reap_ok(fork_child(first_client, d.sock), 60000, "first client");
	wait_no_clients(&d, 30000);
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- signals go to the event loop ---------------------------------------- */

/* Thread @tid of @pid: its name into @comm, its blocked signals (SigBlk). */
static int task_sigblk(pid_t pid, const char *tid, char *comm, size_t len, uint64_t *blk)
{
	char path[384], line[256];
	FILE *f;
	int found = 0;

	snprintf(path, sizeof(path), "/proc/%d/task/%s/comm", (int)pid, tid);
	if ((f = fopen(path, "r")) == NULL || fgets(comm, (int)len, f) == NULL) {
		if (f != NULL)
			fclose(f);
		return -1;
	}
	fclose(f);
	comm[strcspn(comm, "\n")] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/task/%s/status", (int)pid, tid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "SigBlk: %" SCNx64, blk) == 1)
			found = 1;
	fclose(f);
	return found ? 0 : -1;
}

/*
 * sheafd's own threads (node workers, grace) block SIGTERM, SIGINT and
 * SIGHUP, its event loop does not: a process-wide signal reaches the
 * loop.  (A worker that took SIGTERM in a futex wait under TSan held it
 * for good: sheafd never stopped, test_link once.)  Then SIGTERM stops it.
 */
START_TEST(signals_to_the_loop)
{
	const uint64_t want = (1ull << (SIGTERM - 1)) | (1ull << (SIGINT - 1)) |
			      (1ull << (SIGHUP - 1));
	struct dmn d;
	char dir[64], why[160] = "";
	unsigned workers = 0, scans = 0;
	int good = 0;

	dmn_init(&d);
	dmn_start(&d, NULL);
	reap_ok(fork_child(brief_client, d.sock), 60000, "brief client");
	/* A client's end may stop and restart the engine's threads (count
	 * reconciliation): for a moment a thread just made has no name yet,
	 * and glibc starts it with every signal blocked until it sets the
	 * creator's mask.  So wait for the repair, then scan until one scan
	 * finds the two node workers and the grace thread named, each with
	 * the mask, and the loop without it; a wrong mask that stays fails. */
	wait_no_clients(&d, 30000);
	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)d.pid);
	for (int64_t end = now_ms() + 10000; !good && now_ms() < end; sleep_us(20000)) {
		DIR *td;
		struct dirent *de;
		unsigned loops = 0;

		REQUIRE((td = opendir(dir)) != NULL, "%s: %s", dir, strerror(errno));
		workers = 0;
		why[0] = '\0';
		scans++;
		while ((de = readdir(td)) != NULL) {
			char comm[64];
			uint64_t blk;

			if (de->d_name[0] == '.' ||
			    task_sigblk(d.pid, de->d_name, comm, sizeof(comm), &blk) != 0)
				continue;
			if (strncmp(comm, "sheaf-", 6) == 0) {
				if ((blk & want) != want || (blk & (1ull << (SIGSEGV - 1))) != 0)
					snprintf(why, sizeof(why), "thread %.16s (%.16s) blocks %#llx",
						 de->d_name, comm, (unsigned long long)blk);
				workers++;
			} else if (atoi(de->d_name) == (int)d.pid) {
				if ((blk & want) != 0)
					snprintf(why, sizeof(why), "the event loop blocks %#llx",
						 (unsigned long long)blk);
				loops++;
			}
		}
		closedir(td);
		if (why[0] == '\0' && (workers < 3 || loops != 1))
			snprintf(why, sizeof(why), "%u sheaf- threads, %u event loops", workers, loops);
		good = why[0] == '\0';
	}
	REQUIRE(good, "after %u scans in 10 s: %s", scans, why);
	printf("signals_to_the_loop: %u engine threads block them, the loop takes them (%u scans)\n",
	       workers, scans);
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- the memory cap through the daemon ----------------------------------- */

/*
 * A client of a daemon started with a small --mem-cap allocates until the
 * pool is exhausted: sheaf_alloc must return NULL with ENOMEM promptly
 * (the barn is empty, the node worker's verdict is "starved"), never hang;
 * after freeing, allocation works again.
 */
static int cap_child(void *argp)
{
	enum { MAX = 4 * 4096 + 1 };     /* 4 slabs of 64-byte objects */
	const char *sock = argp;
	sheaf_pool_t *p = child_connect(sock, "cap");
	sheaf_cache_t *c = sheaf_cache_create(p, "cap", 64, NULL);
	void **o = calloc(MAX, sizeof(*o));
	int64_t t0;
	int n = 0;

	REQUIRE(c != NULL && o != NULL, "cache: %s", strerror(errno));
	t0 = now_ms();
	while (n < MAX && (o[n] = sheaf_alloc(c)) != NULL)
		*(char *)o[n++] = 1;
	REQUIRE(n < MAX, "allocated %d objects past a 1 MiB cap", n);
	REQUIRE(errno == ENOMEM, "alloc at the cap: %s, expected ENOMEM", strerror(errno));
	REQUIRE(now_ms() - t0 < 10000, "reaching the cap took %lld ms",
	     (long long)(now_ms() - t0));
	REQUIRE(n >= MAX - 1 - 2 * 60, "only %d objects before ENOMEM", n);
	t0 = now_ms();
	REQUIRE(sheaf_alloc(c) == NULL && errno == ENOMEM, "second try at the cap: %s",
	     strerror(errno));
	REQUIRE(now_ms() - t0 < 2000, "ENOMEM at the cap took %lld ms", (long long)(now_ms() - t0));
	REQUIRE(sheaf_free_bulk(c, o, (size_t)n) == 0, "free_bulk failed");
	REQUIRE(sheaf_alloc_bulk(c, o, 1000) == 0, "alloc after freeing: %s", strerror(errno));
	REQUIRE(sheaf_free_bulk(c, o, 1000) == 0, "free_bulk failed");
	printf("cap: %d objects of 64 B fit a 1 MiB cap; ENOMEM came back promptly\n", n);
	free(o);
	sheaf_disconnect(p);
	return 0;
}

/*
 * The pool's address taken in a client: sheaf_connect fails with
 * EADDRINUSE and says so, unless the client asks for relocation; a
 * relocated client still allocates and frees.
 */
static int addr_child(void *argp)
{
	const char *sock = argp;
	char err[256] = "";
	sheaf_pool_t *p = child_connect(sock, "addr");
	void *addr = p->shm.base, *o;
	sheaf_cache_t *c;

	sheaf_disconnect(p);
	REQUIRE(mmap(addr, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
		  -1, 0) == addr, "cannot take the pool's address: %s", strerror(errno));
	REQUIRE(sheaf_connect(sock, "addr", 0, err, sizeof(err)) == NULL && errno == EADDRINUSE,
	     "connect with the address taken: %s", strerror(errno));
	REQUIRE(strstr(err, "taken") != NULL, "message: %s", err);
	p = sheaf_connect(sock, "addr", SHEAF_CONNECT_RELOCATE, err, sizeof(err));
	REQUIRE(p != NULL, "relocated connect: %s", err);
	REQUIRE(p->shm.base != addr, "relocated to the same address");
	c = sheaf_cache_create(p, "addr", 64, NULL);
	REQUIRE(c != NULL && (o = sheaf_alloc(c)) != NULL, "alloc: %s", strerror(errno));
	REQUIRE(sheaf_free(c, o) == 0, "free");
	sheaf_disconnect(p);
	munmap(addr, 4096);
	return 0;
}

START_TEST(address_taken)
{
	struct dmn d;

	dmn_init(&d);
	dmn_start(&d, NULL);
	reap_ok(fork_child(addr_child, d.sock), 60000, "address client");
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

/*
 * sheafd restarted without the pool (a fresh daemon, not an adoption): the
 * client's next control request fails with ESTALE and says why, its own
 * sheaves keep serving it, and a new connection works.
 */
struct stale_arg {
	const char *sock;
	int ready, go;            /* pipes: child -> parent, parent -> child */
};

static int stale_child(void *argp)
{
	struct stale_arg *a = argp;
	char err[256] = "", b = 1;
	struct sheaf_stats st;
	sheaf_pool_t *p = child_connect(a->sock, "stale");
	sheaf_cache_t *c = sheaf_cache_create(p, "stale", 64, NULL);
	void *o;
	int rc;

	REQUIRE(c != NULL && (o = sheaf_alloc(c)) != NULL, "alloc: %s", strerror(errno));
	REQUIRE(sheaf_free(c, o) == 0, "free");
	REQUIRE(write_full(a->ready, &b, 1) == 0 && read_full(a->go, &b, 1, 60000) == 0,
	     "handshake with the test");
	rc = sheaf_cache_stats(c, -1, &st);
	REQUIRE(rc == -ESTALE, "stats after a fresh daemon: %d (%s), expected -ESTALE", rc,
	     strerror(-rc));
	REQUIRE(sheaf_pool_check(p, err, sizeof(err)) == -ESTALE && strstr(err, "stale") != NULL,
	     "check after a fresh daemon: %s", err);
	REQUIRE((o = sheaf_alloc(c)) != NULL, "the thread's own sheaf stopped serving: %s",
	     strerror(errno));
	REQUIRE(sheaf_free(c, o) == 0, "free on the old mapping");
	sheaf_disconnect(p);
	p = child_connect(a->sock, "stale-again");
	c = sheaf_cache_create(p, "stale", 64, NULL);
	REQUIRE(c != NULL && (o = sheaf_alloc(c)) != NULL, "alloc on the new pool: %s",
	     strerror(errno));
	REQUIRE(sheaf_free(c, o) == 0, "free on the new pool");
	sheaf_disconnect(p);
	return 0;
}

START_TEST(stale_pool)
{
	int ready[2], go[2];
	struct stale_arg a;
	struct dmn d;
	pid_t pid;
	char b;

	REQUIRE(pipe(ready) == 0 && pipe(go) == 0, "pipe: %s", strerror(errno));
	dmn_init(&d);
	dmn_start(&d, NULL);
	a = (struct stale_arg){ d.sock, ready[1], go[0] };
	pid = fork_child(stale_child, &a);
	REQUIRE(read_full(ready[0], &b, 1, 60000) == 0, "the client never got ready");
	dmn_stop(&d, 10000);
	dmn_start(&d, NULL);              /* afresh: a new, empty pool */
	REQUIRE(write_full(go[1], &b, 1) == 0, "the client is gone");
	reap_ok(pid, 60000, "stale client");
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
	close(ready[0]);
	close(ready[1]);
	close(go[0]);
	close(go[1]);
}
END_TEST

START_TEST(mem_cap)
{
	const char *extra[] = { "--mem-cap", "1M", NULL };
	struct dmn d;

	dmn_init(&d);
	dmn_start(&d, extra);
	reap_ok(fork_child(cap_child, d.sock), 60000, "cap client");
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- connect / disconnect cycles in one live process --------------------- */

/*
 * sheaf_disconnect detaches from sheafd: a process that connects and
 * disconnects again and again (a tool, a plugin reloaded, a pool reopened
 * after an error) must not use up the daemon's 64 client slots, and once it
 * has disconnected DaemonInfo must no longer count it as attached.
 */
static int reconnect_child(void *argp)
{
	const char *sock = argp;
	char err[256] = "";

	for (int i = 0; i < 100; i++) {
		sheaf_pool_t *p = sheaf_connect(sock, "reconnect", 0, err, sizeof(err));
		REQUIRE(p != NULL, "connect/disconnect cycle %d: sheaf_connect: %s (%s)", i,
		     strerror(errno), err);
		sheaf_disconnect(p);
	}
	return 0;
}

struct linger_arg {
	const char *sock;
	int ready[2];
	int stop[2];
};

static int linger_child(void *argp)
{
	struct linger_arg *a = argp;
	sheaf_pool_t *p;
	char g;

	close(a->stop[1]);
	p = child_connect(a->sock, "linger");
	sheaf_disconnect(p);
	REQUIRE(write_full(a->ready[1], "d", 1) == 0, "write");
	while (read(a->stop[0], &g, 1) < 0 && errno == EINTR)
		;
	return 0;
}

START_TEST(reconnect)
{
	static struct linger_arg a;
	struct dmn d;
	pid_t p;
	int64_t end;
	int n, st = 0;
	char g, buf[64];

	dmn_init(&d);
	dmn_start(&d, NULL);
	/* 100 connect/disconnect cycles in one process (64 client slots). */
	p = fork_child(reconnect_child, d.sock);
	REQUIRE(wait_pid(p, 60000, &st) == 1, "reconnecting client hangs");
	untrack(p);
	/* A disconnected but live process is no longer an attached client. */
	a.sock = d.sock;
	REQUIRE(pipe(a.ready) == 0 && pipe(a.stop) == 0, "pipe");
	wait_no_clients(&d, 30000);
	p = fork_child(linger_child, &a);
	REQUIRE(read_full(a.ready[0], &g, 1, 60000) == 0, "linger client did not start");
	for (end = now_ms() + 5000; (n = info_clients(d.sock)) != 0 && now_ms() < end;)
		sleep_us(20000);
	close(a.stop[1]);
	reap_ok(p, 30000, "linger client");
	REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 0 && n == 0,
		"client slots leak on sheaf_disconnect: 100 connect/disconnect cycles in one "
		"process: %s (see its message above); a live process that disconnected still "
		"counts as attached after 5 s: %d client(s)", status_str(st, buf, sizeof(buf)), n);
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- main ------------------------------------------------------------------- */

int main(void)
{
	Suite *s = suite_create("sheafd");

	require_binaries("test_daemon");
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ADD_ALONE(s, uid_refused, 240);
	ADD_ALONE(s, lifecycle, 240);
	ADD_ALONE(s, idle_cpu, 240);
	ADD_ALONE(s, attach_wakes, 240);
	ADD_ALONE(s, signals_to_the_loop, 240);
	ADD_ALONE(s, reconnect, 240);
	ADD_ALONE(s, mem_cap, 240);
	ADD_ALONE(s, address_taken, 240);
	ADD_ALONE(s, stale_pool, 240);
	return run_suite(s);
}
