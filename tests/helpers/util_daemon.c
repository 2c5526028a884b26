/*
 * util_daemon.c - a real sheafd per test and its client processes (see
 * util_daemon.h).
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/sheaf.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_proc.h"
#include "tests/helpers/util_rpc.h"

/* ---- the programs under test --------------------------------------------------- */

/* The programs under test, relative to BUILD: the one place that names them. */
#define SHEAFD_REL   "daemon/sheafd"
#define SHEAFCTL_REL "client/sheafctl/sheafctl"

static struct {
	int done;
	char build[PATH_MAX], root[PATH_MAX];
	char sheafd[PATH_MAX + 32], sheafctl[PATH_MAX + 32];
} paths;

static void find_paths(void)
{
	char tmp[PATH_MAX], *end;

	if (paths.done)
		return;
	/*
	 * BUILD/tests/TIER/test_NAME (or BUILD/tests/scale_walks): BUILD is the
	 * parent of the nearest directory named "tests" above the program.
	 */
	if (exe_dir(tmp, sizeof(tmp), NULL) != 0) {
		fprintf(stderr, "the path of /proc/self/exe: %s\n", strerror(errno));
		exit(1);
	}
	for (;;) {
		end = strrchr(tmp, '/');
		if (end == NULL || end == tmp) {
			fprintf(stderr, "no tests/ directory above this program: not run "
				"from BUILD/tests?\n");
			exit(1);
		}
		if (strcmp(end + 1, "tests") == 0)
			break;
		*end = '\0';
	}
	*end = '\0';
	snprintf(paths.build, sizeof(paths.build), "%s", tmp);
	snprintf(paths.root, sizeof(paths.root), "%s", dirname(tmp));
	snprintf(paths.sheafd, sizeof(paths.sheafd), "%s/" SHEAFD_REL, paths.build);
	snprintf(paths.sheafctl, sizeof(paths.sheafctl), "%s/" SHEAFCTL_REL, paths.build);
	paths.done = 1;
}

const char *build_dir(void)
{
	find_paths();
	return paths.build;
}

const char *root_dir(void)
{
	find_paths();
	return paths.root;
}

const char *sheafd_bin(void)
{
	find_paths();
	return paths.sheafd;
}

const char *sheafctl_bin(void)
{
	find_paths();
	return paths.sheafctl;
}

const char *build_san(void)
{
	const char *b = build_dir(), *base = strrchr(b, '/') ? strrchr(b, '/') + 1 : b;

	return strncmp(base, "build-", 6) == 0 ? base + 6 : "";
}

void require_binaries(const char *prog)
{
	const char *bins[] = { sheafd_bin(), sheafctl_bin() };

	for (int i = 0; i < 2; i++) {
		if (access(bins[i], X_OK) != 0) {
			fprintf(stderr, "%s: no %s (build it first)\n", prog, bins[i]);
			exit(1);
		}
	}
}

/* ---- a daemon per test ---------------------------------------------------------- */

static struct dmn *cur_dmn;              /* its log is printed on failure */

/* A failing test: stop its children, show the daemon's log. */
static void on_failure(const char *file, int line, const char *cond)
{
	const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;

	fprintf(stderr, "%s:%d: FAILED: %s\n", base, line, cond);
	kill_tracked();
	if (cur_dmn != NULL) {
		if (cur_dmn->pid > 0)
			kill(cur_dmn->pid, SIGKILL);
		cur_dmn->failed = 1;
		dump_file("sheafd log", cur_dmn->log, 300);
		fprintf(stderr, "(test directory kept: %s)\n", cur_dmn->dir);
	}
	fflush(stderr);
}

void dmn_init_at(struct dmn *d, const char *tmpl, const char *logname)
{
	memset(d, 0, sizeof(*d));
	REQUIRE(make_temp_dir(d->dir, sizeof(d->dir), tmpl) == 0, "mkdtemp: %s", strerror(errno));
	snprintf(d->sock, sizeof(d->sock), "%s/s.sock", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/%s", d->dir, logname);
	cur_dmn = d;
	require_set_hook(on_failure);
}

void dmn_init(struct dmn *d)
{
	dmn_init_at(d, "/tmp/sheafd-test-XXXXXX", "log");
}

int dmn_alive(struct dmn *d)
{
	int st;

	return d->pid > 0 && waitpid(d->pid, &st, WNOHANG) == 0;
}

void dmn_start_argv(struct dmn *d, char *const argv[])
{
	struct spawn_opts o = { .exe = sheafd_bin(), .out = d->log, .err = d->log };
	char buf[256];
	const char *msg = start_listening((const char *const *)argv, &o, d->sock, 30000, &d->pid,
					  buf, sizeof(buf));

	REQUIRE(msg == NULL, "%s", msg);
}

void dmn_start(struct dmn *d, const char *const *extra)
{
	const char *argv[32] = {
		sheafd_bin(), "--foreground", "--socket", d->sock, "--nodes", "2",
		"--size", "256M", "--log-level", "debug",
	};
	int n = 10;

	for (int i = 0; extra != NULL && extra[i] != NULL && n < 31; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	dmn_start_argv(d, (char *const *)argv);
}

void dmn_stop(struct dmn *d, int ms)
{
	char buf[64], err[256];
	int st = 0;
	int64_t t0 = now_ms();
	const char *msg = signal_wait(d->pid, SIGTERM, ms, &st, err, sizeof(err));

	REQUIRE(msg == NULL, "sheafd: %s", msg);
	d->pid = 0;
	REQUIRE(exited_ok(st), "sheafd ended with %s after SIGTERM",
		status_str(st, buf, sizeof(buf)));
	REQUIRE(access(d->sock, F_OK) != 0 && errno == ENOENT,
		"sheafd left its socket %s behind", d->sock);
	printf("  sheafd stopped in %lld ms\n", (long long)(now_ms() - t0));
}

void dmn_cleanup(struct dmn *d)
{
	rm_tree(d->dir);
	if (cur_dmn == d)
		cur_dmn = NULL;
}

void dmn_end(struct dmn *d)
{
	int st;

	if (d->pid > 0) {
		kill(d->pid, SIGTERM);
		if (wait_pid(d->pid, 5000, &st) != 1) {
			kill(d->pid, SIGKILL);
			waitpid(d->pid, &st, 0);
		}
		d->pid = -1;
	}
	if (d->dir[0] != '\0' && !d->failed) {
		rm_tree(d->dir);
		d->dir[0] = '\0';
	}
	if (cur_dmn == d)
		cur_dmn = NULL;
}

void wait_no_clients(struct dmn *d, int ms)
{
	int64_t t0 = now_ms(), end = t0 + ms;
	int n;

	while ((n = info_clients(d->sock)) != 0) {
		REQUIRE(n >= 0, "DaemonInfo failed");
		REQUIRE(now_ms() < end, "%d clients still attached %d ms after their processes ended",
			n, ms);
		sleep_us(5000);
	}
	printf("  all clients repaired after %lld ms\n", (long long)(now_ms() - t0));
}

/* ---- client processes ------------------------------------------------------------- */

pid_t fork_child(int (*fn)(void *), void *arg)
{
	pid_t pid = fork_fn(fn, arg);

	REQUIRE(pid > 0, "fork: %s", strerror(errno));
	return pid;
}

void reap_ok(pid_t pid, int ms, const char *what)
{
	char err[256];
	const char *msg = reap_err(pid, ms, what, err, sizeof(err));

	REQUIRE(msg == NULL, "%s", msg);
}

sheaf_pool_t *child_connect(const char *sock, const char *name)
{
	char err[256] = "";
	sheaf_pool_t *p = sheaf_connect(sock, name, 0, err, sizeof(err));

	REQUIRE(p != NULL, "sheaf_connect(%s): %s (%s)", sock, strerror(errno), err);
	return p;
}
