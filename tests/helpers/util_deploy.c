/*
 * util_deploy.c - the deployment tests' harness (see util_deploy.h).
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_deploy.h"
#include "tests/helpers/util_proc.h"

/* ---- the test directory and its logs ------------------------------------------ */

static char logs[8][PATH_MAX];           /* files printed on failure */
char test_dir[PATH_MAX];                  /* kept on failure */

void add_log(const char *path)
{
	for (int i = 0; i < 8; i++) {
		if (logs[i][0] == '\0' || strcmp(logs[i], path) == 0) {
			fmt(logs[i], sizeof(logs[i]), "%s", path);
			return;
		}
	}
}

/* A failing test: stop its children, show its logs. */
static void on_failure(const char *file, int line, const char *cond)
{
	const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;

	fprintf(stderr, "%s:%d: FAILED: %s\n", base, line, cond);
	kill_tracked();
	for (int i = 0; i < 8; i++)
		if (logs[i][0] != '\0')
			dump_file(NULL, logs[i], 200);
	if (test_dir[0] != '\0')
		fprintf(stderr, "(test directory kept: %s)\n", test_dir);
	fflush(stderr);
}

char san_name[32];

void deploy_init(const char *prog)
{
	char tmp[PATH_MAX];

	snprintf(san_name, sizeof(san_name), "%s", build_san());
	if (access(sheafd_bin(), X_OK) != 0) {
		fprintf(stderr, "%s: no sheafd at %s (build it first)\n", prog, sheafd_bin());
		exit(1);
	}
	snprintf(tmp, sizeof(tmp), "%s/systemd/sheafd@.service", root_dir());
	if (access(tmp, F_OK) != 0) {
		fprintf(stderr, "%s: no %s: not run from the source tree?\n", prog, tmp);
		exit(1);
	}
	require_set_hook(on_failure);
}

void fmt(char *buf, size_t len, const char *f, ...)
{
	va_list ap;
	int n;

	va_start(ap, f);
	n = vsnprintf(buf, len, f, ap);
	va_end(ap);
	REQUIRE(n >= 0 && (size_t)n < len, "'%s...' does not fit in %zu bytes", f, len);
}

const char *san_cflags(void)
{
	if (strcmp(build_san(), "address") == 0)
		return "-fsanitize=address,undefined";
	if (strcmp(build_san(), "thread") == 0)
		return "-fsanitize=thread";
	return "";
}

/* A fresh directory for the test (removed when it passes). */
void make_test_dir(void)
{
	REQUIRE(make_temp_dir(test_dir, sizeof(test_dir), "/tmp/sheaf-systemd-XXXXXX") == 0,
		"mkdtemp: %s", strerror(errno));
}

void test_passed(void)
{
	if (test_dir[0] != '\0')
		rm_tree(test_dir);
	test_dir[0] = '\0';
	memset(logs, 0, sizeof(logs));
}

/* Path of @name in $PATH (or the usual system directories): 1 if found. */
int find_tool(const char *name, char *out, size_t len)
{
	const char *path = getenv("PATH");
	char buf[4096];
	char *save = NULL, *dir;

	fmt(buf, sizeof(buf), "%s:/usr/bin:/usr/sbin:/bin:/sbin",
		 path != NULL ? path : "");
	for (dir = strtok_r(buf, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		fmt(out, len, "%s/%s", dir[0] ? dir : ".", name);
		if (access(out, X_OK) == 0)
			return 1;
	}
	return 0;
}

/* ---- processes ------------------------------------------------------------- */

/* spawn_proc with the test's log and environment (util_deploy.h says how). */
pid_t spawn(const char *const argv[], const char *const env[], const char *log,
	    const int *pass, int npass)
{
	/* A clean make, not a part of the make that runs the tests. */
	const char *e[24] = { "-MAKEFLAGS", "-MAKELEVEL", "-MFLAGS" };
	struct spawn_opts o = { .out = log, .err = log, .append = 1, .stdin_null = 1,
				.env = e, .pass = pass, .npass = npass };
	int n = 3;
	pid_t pid;

	for (int i = 0; env != NULL && env[i] != NULL; i++) {
		REQUIRE(n < 23, "too many environment changes for %s", argv[0]);
		e[n++] = env[i];
	}
	pid = spawn_proc(argv, &o);
	REQUIRE(pid > 0, "fork: %s", strerror(errno));
	track(pid);
	return pid;
}

/* Run through /bin/sh -c (as spawn does; killed after @ms): its wait status. */
int run_sh(const char *cmd, const char *const env[], const char *log, int ms)
{
	const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	pid_t pid = spawn(argv, env, log, NULL, 0);
	char err[1024];
	const char *msg;
	int st;

	msg = finish_proc(pid, ms, cmd, &st, err, sizeof(err));
	REQUIRE(msg == NULL, "%s", msg);
	return st;
}

/* Output of a shell command (stdout and stderr) in a new string. */
char *capture(const char *cmd, const char *const env[], int *status)
{
	char log[PATH_MAX];
	char *out;

	fmt(log, sizeof(log), "%s/capture.log", test_dir);
	unlink(log);
	*status = run_sh(cmd, env, log, 120000);
	out = read_file(log);
	REQUIRE(out != NULL, "no output of `%s`", cmd);
	return out;
}

/* ---- `make install` into a temporary tree ---------------------------------- */

void make_target(const char *target, const char *destdir, const char *extra, const char *log)
{
	char cmd[3 * PATH_MAX];
	int st;

	fmt(cmd, sizeof(cmd), "make --no-print-directory -C '%s' %s SAN=%s DESTDIR='%s' %s",
		 root_dir(), target, san_name, destdir, extra ? extra : "");
	add_log(log);
	st = run_sh(cmd, NULL, log, 300000);
	REQUIRE(exited_ok(st), "`%s` failed (log %s)", cmd, log);
}

void install_tree(char *dest, size_t len)
{
	char log[PATH_MAX];

	fmt(dest, len, "%s/dest", test_dir);
	fmt(log, sizeof(log), "%s/make-install.log", test_dir);
	make_target("install", dest, NULL, log);
}

/* ---- unit files ------------------------------------------------------------ */

/* The settings of a unit file: its lines without comments and blank lines. */
char *unit_settings(const char *path)
{
	char *text = read_file(path), *out, *o, *line, *save = NULL;

	REQUIRE(text != NULL, "cannot read %s", path);
	out = calloc(1, strlen(text) + 1);
	REQUIRE(out != NULL, "out of memory");
	o = out;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (line[0] == '#' || line[0] == ';' || line[strspn(line, " \t")] == '\0')
			continue;
		o += sprintf(o, "%s\n", line);
	}
	free(text);
	return out;
}

int has_line(const char *settings, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = settings; (p = strstr(p, line)) != NULL; p += n)
		if ((p == settings || p[-1] == '\n') && p[n] == '\n')
			return 1;
	return 0;
}

int build_example(const char *name, char *dest, size_t len, char *ldenv, size_t ldlen)
{
	char tool[PATH_MAX], cmd[4 * PATH_MAX];
	char pcpath[PATH_MAX + 32], sysroot[PATH_MAX + 32];
	const char *pcenv[] = { pcpath, sysroot, "-PKG_CONFIG_LIBDIR", NULL };
	char *out;
	int st;

	if (!find_tool("pkg-config", tool, sizeof(tool)) || !find_tool("cc", tool, sizeof(tool)))
		return -1;
	make_test_dir();
	install_tree(dest, len);
	fmt(pcpath, sizeof(pcpath), "PKG_CONFIG_PATH=%s/usr/local/lib/pkgconfig", dest);
	fmt(sysroot, sizeof(sysroot), "PKG_CONFIG_SYSROOT_DIR=%s", dest);
	fmt(cmd, sizeof(cmd), "cd '%s' && cc -O2 %s -o '%s' '%s/tests/examples/%s.c' "
	    "$(pkg-config --cflags --libs sheaf)", test_dir, san_cflags(), name, root_dir(), name);
	out = capture(cmd, pcenv, &st);
	REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		"building the example %s against the installed tree:\n%s", name, out);
	free(out);
	fmt(ldenv, ldlen, "LD_LIBRARY_PATH=%s/usr/local/lib", dest);
	return 0;
}
