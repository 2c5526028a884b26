/*
 * test_systemd.c - deployment: the systemd units, `make install`, and
 * sheafd's side of the systemd protocols, without systemd as PID 1 (the
 * test plays systemd's part: it receives the notifications, keeps the fd
 * store, passes descriptors as systemd would).  The build under test is the
 * one this program sits in (ROOT/build[-SAN]/tests/test_systemd); `make
 * install` runs with the same SAN= into temporary DESTDIR trees.
 *
 *   units_static     systemd/sheafd.service and sheafd.socket are
 *                    sheafd@.service/.socket with the instance "sheafd";
 *                    the hardening and fd-store settings are there, and
 *                    what must not be (DynamicUser=, RuntimeDirectory=,
 *                    PrivateUsers=) is not.
 *   units_verify     `systemd-analyze verify` of the four installed units
 *                    (ExecStart pointed at the DESTDIR's sheafd, MANPATH at
 *                    its man pages): exit 0 and no output at all.
 *   units_security   `systemd-analyze security --offline=yes` of both
 *                    services: overall exposure <= 2.0 (printed).
 *   sysusers_tmpfiles systemd-sysusers and systemd-tmpfiles --root on the
 *                    DESTDIR: users sheafd and group sheaf exist, /run/sheafd
 *                    is 0750 sheafd:sheaf, and the units name exactly those.
 *   socket_activation systemd-socket-activate holds the socket and execs
 *                    sheafd on the first connection: two client processes
 *                    attach through the passed socket, allocate, free, and
 *                    the pool check passes; sheafd neither binds nor
 *                    removes the socket file nor takes the lock.
 *   notify           a datagram socket as NOTIFY_SOCKET sees FDSTORE=1 +
 *                    FDNAME=pool carrying the memfd, READY=1 (the socket
 *                    accepts by then), STATUS=, WATCHDOG=1 about every half
 *                    of WATCHDOG_USEC, RELOADING=1 + READY=1 on SIGHUP and
 *                    STOPPING=1 on SIGTERM (exit 0).
 *   restart_crash    sheafd is SIGKILLed five times while a client process
 *                    keeps allocating and freeing (its objects stamped and
 *                    verified); each new sheafd gets the stored memfd as
 *                    systemd passes it (fd 3, LISTEN_FDS=1, LISTEN_PID=its
 *                    pid, LISTEN_FDNAMES=pool), adopts the pool (STATUS says
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
 *                    memfd (LISTEN_FDS=2, LISTEN_FDNAMES=sheafd.socket:pool);
 *                    sheafd is killed, the client's stats request goes out
 *                    while no daemon runs, waits in the socket's backlog and
 *                    succeeds once the next sheafd adopts the pool.
 *   install_pkgconfig `make install DESTDIR=...`: every file in place
 *                    (libsheaf.so.VERSION, .so.0 and .so links, soname
 *                    libsheaf.so.0, only sheaf_* exported); a small client is
 *                    compiled with only `pkg-config --cflags --libs sheaf`
 *                    (PKG_CONFIG_PATH + PKG_CONFIG_SYSROOT_DIR), runs against
 *                    the installed libsheaf (LD_LIBRARY_PATH) and the
 *                    installed sheafd (started with the installed default
 *                    config), allocates and frees; PREFIX=/usr rewrites the
 *                    units' paths; `make uninstall` leaves no file behind.
 *
 * A test whose tool is missing (systemd-analyze, systemd-socket-activate,
 * systemd-sysusers, systemd-tmpfiles, pkg-config, cc) prints SKIP and
 * passes.  Each test is its own TCase: CK_RUN_CASE=<name> runs one.  Loops
 * use REQUIRE (Check's passing assertions are slow); child processes report
 * through pipes and exit statuses and never call Check.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/sheaf.h"
#include "proto/version.h"
#include "tests/util_proc.h"
#include "tests/util_check.h"

static char root_dir[PATH_MAX];          /* the source tree */
static char build_dir[PATH_MAX];         /* ROOT/build[-SAN] */
static char san_name[32];                /* "", "address" or "thread" */
static char sheafd_path[PATH_MAX];
static int san;                          /* a sanitizer build: scale down */

/* ---- small helpers (the generic ones are in util_proc.c) ------------------- */

/* snprintf that fails the test rather than truncate (paths, commands). */
static void fmt(char *buf, size_t len, const char *f, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- failure handling ------------------------------------------------------ */

static char logs[8][PATH_MAX];           /* files printed on failure */
static char test_dir[PATH_MAX];          /* kept on failure */

static void add_log(const char *path)
{
	for (int i = 0; i < 8; i++) {
		if (logs[i][0] == '\0' || strcmp(logs[i], path) == 0) {
			fmt(logs[i], sizeof(logs[i]), "%s", path);
			return;
		}
	}
}

/* A failing test: stop its children, show its logs. */
static void on_failure(const char *cond, int line)
{
	fprintf(stderr, "test_systemd.c:%d: FAILED: %s\n", line, cond);
	kill_tracked();
	for (int i = 0; i < 8; i++)
		if (logs[i][0] != '\0')
			dump_file(NULL, logs[i], 200);
	if (test_dir[0] != '\0')
		fprintf(stderr, "(test directory kept: %s)\n", test_dir);
	fflush(stderr);
}

/* Cheap enough for loops: nothing happens unless it fails. */
#define REQUIRE(cond, ...)                                              \
	do {                                                            \
		if (__builtin_expect(!(cond), 0)) {                     \
			on_failure(#cond, __LINE__);                    \
			ck_abort_msg(__VA_ARGS__);                      \
		}                                                       \
	} while (0)

static void fmt(char *buf, size_t len, const char *f, ...)
{
	va_list ap;
	int n;

	va_start(ap, f);
	n = vsnprintf(buf, len, f, ap);
	va_end(ap);
	REQUIRE(n >= 0 && (size_t)n < len, "'%s...' does not fit in %zu bytes", f, len);
}

#define SKIP(...)                                                       \
	do {                                                            \
		printf("  SKIP %s: ", __func__);                        \
		printf(__VA_ARGS__);                                    \
		printf("\n");                                           \
		return;                                                 \
	} while (0)

/* A fresh directory for the test (removed when it passes). */
static void make_test_dir(void)
{
	REQUIRE(make_temp_dir(test_dir, sizeof(test_dir), "/tmp/sheaf-systemd-XXXXXX") == 0,
		"mkdtemp: %s", strerror(errno));
}

static void test_passed(void)
{
	if (test_dir[0] != '\0')
		rm_tree(test_dir);
	test_dir[0] = '\0';
	memset(logs, 0, sizeof(logs));
}

/* Path of @name in $PATH (or the usual system directories): 1 if found. */
static int find_tool(const char *name, char *out, size_t len)
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

/*
 * Fork and exec @argv (a bare name is looked up in $PATH) with stdout and
 * stderr to @log (appended; /dev/null when NULL), stdin from /dev/null.
 * @env: "NAME=VALUE" to set ("NAME=" + "@pid" means the child's own pid,
 * as systemd sets LISTEN_PID), or "-NAME" to unset.  @pass: descriptors
 * to place at 3, 4, ... (systemd's fd passing).  The child dies with us.
 */
static pid_t spawn(const char *const argv[], const char *const env[], const char *log,
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
static int run_sh(const char *cmd, const char *const env[], const char *log, int ms)
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

/* Fork a client process running @fn(@arg); its return value is its status. */
static pid_t fork_child(int (*fn)(void *), void *arg)
{
	pid_t pid = fork_fn(fn, arg);

	REQUIRE(pid > 0, "fork: %s", strerror(errno));
	return pid;
}

static void reap_ok(pid_t pid, int ms, const char *what)
{
	char err[256];
	const char *msg = reap_err(pid, ms, what, err, sizeof(err));

	REQUIRE(msg == NULL, "%s", msg);
}

/* ---- `make install` into a temporary tree ---------------------------------- */

/* make -C ROOT install (or @target) SAN=<ours> DESTDIR=@destdir @extra:
 * require success (log in @log). */
static void make_target(const char *target, const char *destdir, const char *extra,
			const char *log)
{
	char cmd[3 * PATH_MAX];
	int st;

	fmt(cmd, sizeof(cmd), "make --no-print-directory -C '%s' %s SAN=%s DESTDIR='%s' %s",
		 root_dir, target, san_name, destdir, extra ? extra : "");
	add_log(log);
	st = run_sh(cmd, NULL, log, 300000);
	REQUIRE(exited_ok(st), "`%s` failed (log %s)", cmd, log);
}

/* Install into TEST_DIR/dest (PREFIX /usr/local): its path in @dest. */
static void install_tree(char *dest, size_t len)
{
	char log[PATH_MAX];

	fmt(dest, len, "%s/dest", test_dir);
	fmt(log, sizeof(log), "%s/make-install.log", test_dir);
	make_target("install", dest, NULL, log);
}

static const char *const unit_names[] = {
	"sheafd@.service", "sheafd@.socket", "sheafd.service", "sheafd.socket",
};

/*
 * Copy the installed units into TEST_DIR/units with ExecStart pointed at the
 * installed sheafd inside @dest (systemd-analyze insists that the binary
 * exists; the unit itself names /usr/local/sbin/sheafd).
 */
static void units_for_analysis(const char *dest, char *dir, size_t len)
{
	fmt(dir, len, "%s/units", test_dir);
	REQUIRE(mkdir(dir, 0755) == 0, "mkdir %s: %s", dir, strerror(errno));
	for (size_t i = 0; i < sizeof(unit_names) / sizeof(unit_names[0]); i++) {
		char src[PATH_MAX], dst[PATH_MAX];
		char *text, *p;
		FILE *f;

		fmt(src, sizeof(src), "%s/usr/local/lib/systemd/system/%s", dest, unit_names[i]);
		fmt(dst, sizeof(dst), "%s/%s", dir, unit_names[i]);
		text = read_file(src);
		REQUIRE(text != NULL, "make install did not install %s", src);
		f = fopen(dst, "w");
		REQUIRE(f != NULL, "%s: %s", dst, strerror(errno));
		for (p = text; *p != '\0';) {
			const char *hit = strstr(p, "/usr/local/sbin/sheafd");
			size_t n = hit ? (size_t)(hit - p) : strlen(p);

			fwrite(p, 1, n, f);
			p += n;
			if (hit != NULL) {
				fprintf(f, "%s/usr/local/sbin/sheafd", dest);
				p += strlen("/usr/local/sbin/sheafd");
			}
		}
		fclose(f);
		free(text);
	}
}

/* ---- units: static checks ---------------------------------------------------- */

/* The settings of a unit file: its lines without comments and blank lines. */
static char *unit_settings(const char *path)
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

/* @s with every @from replaced by @to (a new string). */
static char *replace_all(const char *s, const char *from, const char *to)
{
	size_t n = 0, fl = strlen(from), tl = strlen(to);
	const char *p;
	char *out, *o;

	for (p = s; (p = strstr(p, from)) != NULL; p += fl)
		n++;
	out = malloc(strlen(s) + n * (tl > fl ? tl - fl : 0) + 1);
	REQUIRE(out != NULL, "out of memory");
	for (o = out, p = s;;) {
		const char *hit = strstr(p, from);
		size_t k = hit ? (size_t)(hit - p) : strlen(p);

		memcpy(o, p, k);
		o += k;
		if (hit == NULL)
			break;
		memcpy(o, to, tl);
		o += tl;
		p = hit + fl;
	}
	*o = '\0';
	return out;
}

static int has_line(const char *settings, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = settings; (p = strstr(p, line)) != NULL; p += n)
		if ((p == settings || p[-1] == '\n') && p[n] == '\n')
			return 1;
	return 0;
}

static int has_key(const char *settings, const char *key)
{
	size_t n = strlen(key);

	for (const char *p = settings; (p = strstr(p, key)) != NULL; p += n)
		if ((p == settings || p[-1] == '\n') && p[n] == '=')
			return 1;
	return 0;
}

START_TEST(units_static)
{
	static const char *const svc_required[] = {
		"Type=notify", "Restart=on-failure", "WatchdogSec=30s",
		"FileDescriptorStoreMax=2", "User=sheafd", "Group=sheafd", "UMask=0077",
		"ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes",
		"PrivateDevices=yes", "NoNewPrivileges=yes",
		"RestrictAddressFamilies=AF_UNIX", "SystemCallFilter=@system-service",
		"MemoryDenyWriteExecute=yes", "CapabilityBoundingSet=",
		"ExecReload=/bin/kill -HUP $MAINPID",
		"ExecStart=/usr/local/sbin/sheafd --foreground --socket /run/sheafd/%i.sock "
		"--config /usr/local/etc/sheaf/%i.conf",
	};
	static const char *const svc_forbidden[] = {
		"DynamicUser", "RemoveIPC", "RuntimeDirectory", "PrivateUsers",
	};
	static const char *const sock_required[] = {
		"ListenStream=/run/sheafd/%i.sock", "SocketMode=0660", "SocketGroup=sheaf",
	};
	char path[PATH_MAX];
	char *tsvc, *tsock, *dsvc, *dsock, *want;

	fmt(path, sizeof(path), "%s/systemd/sheafd@.service", root_dir);
	tsvc = unit_settings(path);
	fmt(path, sizeof(path), "%s/systemd/sheafd@.socket", root_dir);
	tsock = unit_settings(path);
	fmt(path, sizeof(path), "%s/systemd/sheafd.service", root_dir);
	dsvc = unit_settings(path);
	fmt(path, sizeof(path), "%s/systemd/sheafd.socket", root_dir);
	dsock = unit_settings(path);

	for (size_t i = 0; i < sizeof(svc_required) / sizeof(svc_required[0]); i++)
		REQUIRE(has_line(tsvc, svc_required[i]), "sheafd@.service lacks '%s'",
			svc_required[i]);
	for (size_t i = 0; i < sizeof(svc_forbidden) / sizeof(svc_forbidden[0]); i++)
		REQUIRE(!has_key(tsvc, svc_forbidden[i]), "sheafd@.service sets %s=",
			svc_forbidden[i]);
	for (size_t i = 0; i < sizeof(sock_required) / sizeof(sock_required[0]); i++)
		REQUIRE(has_line(tsock, sock_required[i]), "sheafd@.socket lacks '%s'",
			sock_required[i]);

	/* The default instance: the template with %i = sheafd. */
	{
		char *a = replace_all(tsvc, "sheafd@%i", "sheafd");
		want = replace_all(a, "%i", "sheafd");
		free(a);
		REQUIRE(strcmp(want, dsvc) == 0,
			"sheafd.service is not sheafd@.service with %%i=sheafd:\n--- expected\n%s"
			"--- found\n%s", want, dsvc);
		free(want);
		a = replace_all(tsock, "sheafd@%i", "sheafd");
		want = replace_all(a, "%i", "sheafd");
		free(a);
		REQUIRE(strcmp(want, dsock) == 0,
			"sheafd.socket is not sheafd@.socket with %%i=sheafd:\n--- expected\n%s"
			"--- found\n%s", want, dsock);
		free(want);
	}
	free(tsvc);
	free(tsock);
	free(dsvc);
	free(dsock);
}
END_TEST

/* ---- units: systemd-analyze ------------------------------------------------ */

START_TEST(units_verify)
{
	char analyze[PATH_MAX], man[PATH_MAX], dest[PATH_MAX], dir[PATH_MAX], log[PATH_MAX];
	char manpath[PATH_MAX + 32], cmd[4 * PATH_MAX];
	const char *env[] = { manpath, NULL };
	char *out;
	int st, use_man;

	if (!find_tool("systemd-analyze", analyze, sizeof(analyze)))
		SKIP("systemd-analyze not found (package systemd)");
	make_test_dir();
	install_tree(dest, sizeof(dest));
	units_for_analysis(dest, dir, sizeof(dir));
	/* Documentation=man:... is checked by running man(1): point it at the
	 * installed pages.  Without man-db the check cannot run at all, and
	 * verify would report each page as failing: --man=no then. */
	use_man = find_tool("man", man, sizeof(man));
	if (!use_man)
		printf("  note: man(1) not found: verifying with --man=no\n");
	fmt(manpath, sizeof(manpath), "MANPATH=%s/usr/local/share/man", dest);
	fmt(log, sizeof(log), "%s/verify.log", test_dir);
	fmt(cmd, sizeof(cmd),
		 "cd '%s' && '%s' verify %s ./sheafd@.service ./sheafd@.socket "
		 "./sheafd.service ./sheafd.socket", dir, analyze, use_man ? "" : "--man=no");
	add_log(log);
	st = run_sh(cmd, env, log, 120000);
	out = read_file(log);
	REQUIRE(out != NULL, "no output file");
	/* No line of output is tolerated: verify prints nothing for units that
	 * are clean (every warning is a line). */
	REQUIRE(exited_ok(st) && out[0] == '\0',
		"systemd-analyze verify: status %d, output:\n%s", st, out);
	printf("  systemd-analyze verify: 4 units, exit 0, no output\n");
	free(out);
	test_passed();
}
END_TEST

START_TEST(units_security)
{
	static const char *const services[] = { "sheafd@.service", "sheafd.service" };
	char analyze[PATH_MAX], dest[PATH_MAX], dir[PATH_MAX];

	if (!find_tool("systemd-analyze", analyze, sizeof(analyze)))
		SKIP("systemd-analyze not found (package systemd)");
	make_test_dir();
	install_tree(dest, sizeof(dest));
	units_for_analysis(dest, dir, sizeof(dir));
	for (size_t i = 0; i < 2; i++) {
		char log[PATH_MAX], cmd[3 * PATH_MAX];
		char *out, *p;
		double score = 99;
		int st;

		fmt(log, sizeof(log), "%s/security-%zu.log", test_dir, i);
		fmt(cmd, sizeof(cmd), "cd '%s' && '%s' security --offline=yes ./%s",
			 dir, analyze, services[i]);
		add_log(log);
		st = run_sh(cmd, NULL, log, 120000);
		out = read_file(log);
		REQUIRE(out != NULL, "no output file");
		p = strstr(out, "Overall exposure level for ");
		REQUIRE(exited_ok(st) && p != NULL,
			"systemd-analyze security %s: status %d, no overall level", services[i], st);
		p = strchr(p, ':');
		REQUIRE(p != NULL && sscanf(p + 1, "%lf", &score) == 1,
			"cannot parse the exposure level of %s", services[i]);
		printf("  %s: overall exposure level %.1f (at most 2.0 allowed)\n",
		       services[i], score);
		REQUIRE(score <= 2.0, "%s: exposure %.1f > 2.0", services[i], score);
		free(out);
	}
	test_passed();
}
END_TEST

/* sysusers.d and tmpfiles.d applied to the DESTDIR tree. */
START_TEST(sysusers_tmpfiles)
{
	char sysusers[PATH_MAX], tmpfiles[PATH_MAX], dest[PATH_MAX], log[PATH_MAX];
	char cmd[3 * PATH_MAX], path[PATH_MAX], line[512];
	unsigned sheafd_uid = 0, sheafd_gid = 0, sheaf_gid = 0, uid, gid;
	struct stat st;
	FILE *f;
	char *units;
	int rc;

	if (!find_tool("systemd-sysusers", sysusers, sizeof(sysusers)) ||
	    !find_tool("systemd-tmpfiles", tmpfiles, sizeof(tmpfiles)))
		SKIP("systemd-sysusers or systemd-tmpfiles not found (package systemd)");
	if (geteuid() != 0)
		SKIP("not root: systemd-tmpfiles cannot give /run/sheafd its owner in the tree");
	make_test_dir();
	install_tree(dest, sizeof(dest));
	fmt(path, sizeof(path), "%s/etc", dest);
	REQUIRE(mkdir(path, 0755) == 0, "mkdir %s: %s", path, strerror(errno));
	fmt(log, sizeof(log), "%s/sysusers.log", test_dir);
	add_log(log);
	fmt(cmd, sizeof(cmd), "'%s' --root='%s' && '%s' --root='%s' --create",
		 sysusers, dest, tmpfiles, dest);
	rc = run_sh(cmd, NULL, log, 60000);
	REQUIRE(exited_ok(rc), "systemd-sysusers/tmpfiles --root failed");

	fmt(path, sizeof(path), "%s/etc/passwd", dest);
	f = fopen(path, "r");
	REQUIRE(f != NULL, "sysusers made no %s", path);
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "sheafd:x:%u:%u:", &uid, &gid) == 2) {
			sheafd_uid = uid;
			sheafd_gid = gid;
		}
	fclose(f);
	fmt(path, sizeof(path), "%s/etc/group", dest);
	f = fopen(path, "r");
	REQUIRE(f != NULL, "sysusers made no %s", path);
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "sheaf:x:%u:", &gid) == 1)
			sheaf_gid = gid;
	fclose(f);
	REQUIRE(sheafd_uid > 0 && sheafd_gid > 0 && sheaf_gid > 0,
		"user sheafd (%u:%u) or group sheaf (%u) missing", sheafd_uid, sheafd_gid,
		sheaf_gid);
	fmt(path, sizeof(path), "%s/run/sheafd", dest);
	REQUIRE(stat(path, &st) == 0 && S_ISDIR(st.st_mode), "tmpfiles made no %s", path);
	REQUIRE((st.st_mode & 07777) == 0750 && st.st_uid == sheafd_uid && st.st_gid == sheaf_gid,
		"/run/sheafd is %o %u:%u, want 750 sheafd(%u):sheaf(%u)",
		(unsigned)(st.st_mode & 07777), (unsigned)st.st_uid, (unsigned)st.st_gid,
		sheafd_uid, sheaf_gid);
	/* The units name the identities sysusers makes. */
	fmt(path, sizeof(path), "%s/usr/local/lib/systemd/system/sheafd@.service", dest);
	units = unit_settings(path);
	REQUIRE(has_line(units, "User=sheafd") && has_line(units, "Group=sheafd"),
		"the service does not run as sheafd:sheafd");
	free(units);
	fmt(path, sizeof(path), "%s/usr/local/lib/systemd/system/sheafd@.socket", dest);
	units = unit_settings(path);
	REQUIRE(has_line(units, "SocketGroup=sheaf"), "the socket is not group sheaf");
	free(units);
	printf("  sysusers: sheafd %u:%u, sheaf %u; tmpfiles: /run/sheafd 0750 sheafd:sheaf\n",
	       sheafd_uid, sheafd_gid, sheaf_gid);
	test_passed();
}
END_TEST

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

	CREQ(pool != NULL, "sheaf_connect(%s): %s", a->sock, err);
	c = sheaf_cache_create(pool, "sd-simple", 48, NULL);
	if (c == NULL && errno == EEXIST)
		c = sheaf_cache_open(pool, "sd-simple");
	CREQ(c != NULL, "cache: %s", strerror(errno));
	objs = calloc((size_t)a->n, sizeof(*objs));
	CREQ(objs != NULL, "calloc");
	for (int i = 0; i < a->n; i++) {
		objs[i] = sheaf_alloc(c);
		CREQ(objs[i] != NULL, "alloc %d: %s", i, strerror(errno));
		objs[i][0] = (uint64_t)(uintptr_t)objs[i] ^ 0x5a5a;
	}
	for (int i = 0; i < a->n; i++) {
		CREQ(objs[i][0] == ((uint64_t)(uintptr_t)objs[i] ^ 0x5a5a), "object %d changed", i);
		CREQ(sheaf_free(c, objs[i]) == 0, "free %d", i);
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

	CREQ(pool != NULL, "sheaf_connect(%s): %s", a->sock, err);
	c = sheaf_cache_open(pool, "sd-simple");
	CREQ(c != NULL, "open: %s", strerror(errno));
	CREQ(sheaf_cache_shrink(c) >= 0, "shrink");
	rc = sheaf_pool_check(pool, err, sizeof(err));
	CREQ(rc == 0, "pool check: %d %s", rc, err);
	sheaf_disconnect(pool);
	return 0;
}

/* ---- socket activation ------------------------------------------------------- */

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
			tool, "--listen", sock, "--fdname=sheafd.socket", sheafd_path,
			"--foreground", "--socket", sock, "--nodes", "2", "--size", "256M",
			"--log-level", "debug", NULL,
		};
		act = spawn(argv, NULL, log, NULL, 0);
	}
	for (int64_t end = now_ms() + 10000; access(sock, F_OK) != 0;) {
		REQUIRE(now_ms() < end, "systemd-socket-activate made no %s", sock);
		sleep_ms(5);
	}
	/* Nothing runs sheafd yet: the first client's connection starts it. */
	REQUIRE(!file_contains(log, "serving"), "sheafd started before any connection");
	a1 = (struct simple_arg){ sock, "activated-1", san ? 20000 : 100000 };
	a2 = (struct simple_arg){ sock, "activated-2", san ? 20000 : 100000 };
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

/* ---- the notification socket (playing systemd) -------------------------------- */

struct notify {
	int sock;
	char path[108];
	int ready, stopping, reloading, watchdog, fdstore, status;
	int64_t wd_ms[512];
	char last_status[512];
	int store_fd;               /* the fd store: the first stored memfd */
	int store_same, store_other;/* later FDSTOREs: the same file, or another */
	char fdname[64];
	char log[PATH_MAX];         /* every message, for failures */
};

static void notify_open(struct notify *n)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int buf = 1 << 20;

	memset(n, 0, sizeof(*n));
	n->store_fd = -1;
	fmt(n->path, sizeof(n->path), "%s/notify", test_dir);
	fmt(n->log, sizeof(n->log), "%s/notify.log", test_dir);
	add_log(n->log);
	n->sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	REQUIRE(n->sock >= 0, "socket: %s", strerror(errno));
	fmt(sa.sun_path, sizeof(sa.sun_path), "%s", n->path);
	REQUIRE(bind(n->sock, (struct sockaddr *)&sa, sizeof(sa)) == 0, "bind %s: %s",
		n->path, strerror(errno));
	setsockopt(n->sock, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
}

static void notify_close(struct notify *n)
{
	if (n->sock >= 0)
		close(n->sock);
	if (n->store_fd >= 0)
		close(n->store_fd);
	n->sock = n->store_fd = -1;
}

static int same_file(int a, int b)
{
	struct stat sa, sb;

	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

/* A memfd made by the pool: /proc/self/fd/N reads "/memfd:sheaf-pool ...". */
static int is_pool_memfd(int fd)
{
	char p[64], target[256];
	ssize_t k;

	fmt(p, sizeof(p), "/proc/self/fd/%d", fd);
	k = readlink(p, target, sizeof(target) - 1);
	if (k <= 0)
		return 0;
	target[k] = '\0';
	return strncmp(target, "/memfd:sheaf-pool", 17) == 0 && fcntl(fd, F_GET_SEALS) >= 0;
}

/* Receive one notification within @ms and account for it: 1, or 0. */
static int notify_recv(struct notify *n, int ms)
{
	char text[4097], *line, *save = NULL;
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int) * 8)];
	} u;
	struct iovec iov = { text, sizeof(text) - 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	struct pollfd pf = { n->sock, POLLIN, 0 };
	int fds[8], nfd = 0, store = 0;
	char name[64] = "";
	ssize_t k;
	FILE *lf;

	if (poll(&pf, 1, ms) <= 0)
		return 0;
	k = recvmsg(n->sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (k < 0)
		return 0;
	text[k] = '\0';
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int cnt = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			for (int i = 0; i < cnt && nfd < 8; i++)
				memcpy(&fds[nfd++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
		}
	}
	lf = fopen(n->log, "a");
	if (lf != NULL) {
		fprintf(lf, "[%lld ms] %s%s\n", (long long)now_ms(), text,
			nfd ? " (+fd)" : "");
		fclose(lf);
	}
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (strcmp(line, "READY=1") == 0)
			n->ready++;
		else if (strcmp(line, "STOPPING=1") == 0)
			n->stopping++;
		else if (strcmp(line, "RELOADING=1") == 0)
			n->reloading++;
		else if (strcmp(line, "WATCHDOG=1") == 0) {
			if (n->watchdog < 512)
				n->wd_ms[n->watchdog] = now_ms();
			n->watchdog++;
		} else if (strcmp(line, "FDSTORE=1") == 0)
			store = 1;
		else if (strncmp(line, "FDNAME=", 7) == 0)
			fmt(name, sizeof(name), "%s", line + 7);
		else if (strncmp(line, "STATUS=", 7) == 0) {
			n->status++;
			fmt(n->last_status, sizeof(n->last_status), "%s", line + 7);
		}
	}
	for (int i = 0; i < nfd; i++) {
		if (store && i == 0 && is_pool_memfd(fds[i])) {
			n->fdstore++;
			fmt(n->fdname, sizeof(n->fdname), "%s", name);
			if (n->store_fd < 0) {
				n->store_fd = fds[i];
				continue;
			}
			if (same_file(n->store_fd, fds[i]))
				n->store_same++;
			else
				n->store_other++;
		}
		close(fds[i]);
	}
	return 1;
}

/* Receive until *@counter reaches @target: 1, or 0 after @ms. */
static int notify_wait(struct notify *n, const int *counter, int target, int ms)
{
	int64_t end = now_ms() + ms;

	while (*counter < target) {
		int64_t left = end - now_ms();
		if (left <= 0)
			return 0;
		notify_recv(n, (int)left);
	}
	return 1;
}

/* Take every notification that arrives within @ms. */
static void notify_drain(struct notify *n, int ms)
{
	int64_t end = now_ms() + ms;

	for (int64_t left = ms; left > 0; left = end - now_ms())
		notify_recv(n, (int)left);
}

/* ---- sheafd as systemd would run it -------------------------------------------- */

struct dmn {
	pid_t pid;
	int gen;                    /* how many sheafd processes so far */
	char sock[PATH_MAX];
	char log[PATH_MAX];
};

/*
 * Start sheafd with NOTIFY_SOCKET=@n and the descriptors systemd would pass:
 * @listen_fd (the socket unit's, or -1) then @pool_fd (the fd store's, or
 * -1), with LISTEN_FDS, LISTEN_PID (the new process's own pid) and
 * LISTEN_FDNAMES.  @wd_usec > 0 sets WATCHDOG_USEC/WATCHDOG_PID.  Waits for
 * READY=1 and requires that the socket accepts by then.
 */
static void dmn_start(struct dmn *d, struct notify *n, int listen_fd, int pool_fd,
		      unsigned wd_usec)
{
	const char *argv[] = {
		sheafd_path, "--foreground", "--socket", d->sock, "--nodes", "2",
		"--size", "256M", "--log-level", "debug", NULL,
	};
	char notify_env[160], fds_env[32], names_env[64], wd_env[48];
	const char *env[8];
	int pass[2], npass = 0, ne = 0, ready0 = n->ready;
	char buf[64];
	int st, fd;

	fmt(d->log, sizeof(d->log), "%s/sheafd.%d.log", test_dir, ++d->gen);
	add_log(d->log);
	fmt(notify_env, sizeof(notify_env), "NOTIFY_SOCKET=%s", n->path);
	env[ne++] = notify_env;
	names_env[0] = '\0';
	if (listen_fd >= 0) {
		pass[npass++] = listen_fd;
		fmt(names_env, sizeof(names_env), "LISTEN_FDNAMES=sheafd.socket");
	}
	if (pool_fd >= 0) {
		pass[npass++] = pool_fd;
		fmt(names_env + strlen(names_env), sizeof(names_env) - strlen(names_env),
			 "%s", npass > 1 ? ":pool" : "LISTEN_FDNAMES=pool");
	}
	if (npass > 0) {
		fmt(fds_env, sizeof(fds_env), "LISTEN_FDS=%d", npass);
		env[ne++] = fds_env;
		env[ne++] = "LISTEN_PID=@pid";
		env[ne++] = names_env;
	} else {
		env[ne++] = "-LISTEN_FDS";
		env[ne++] = "-LISTEN_PID";
	}
	if (wd_usec > 0) {
		fmt(wd_env, sizeof(wd_env), "WATCHDOG_USEC=%u", wd_usec);
		env[ne++] = wd_env;
		env[ne++] = "WATCHDOG_PID=@pid";
	}
	env[ne] = NULL;
	d->pid = spawn(argv, env, d->log, pass, npass);
	for (int64_t end = now_ms() + 30000; n->ready == ready0;) {
		REQUIRE(waitpid(d->pid, &st, WNOHANG) == 0, "sheafd exited at start: %s",
			status_str(st, buf, sizeof(buf)));
		REQUIRE(now_ms() < end, "no READY=1 from sheafd within 30 s");
		notify_recv(n, 100);
	}
	fd = unix_connect(d->sock);
	REQUIRE(fd >= 0, "READY=1 sent before %s accepts", d->sock);
	close(fd);
}

/* SIGTERM (STOPPING=1, exit 0) or SIGKILL; waits for the end. */
static void dmn_stop(struct dmn *d, struct notify *n, int sig)
{
	int st = 0, stopping0 = n->stopping;
	char buf[64], err[256];
	const char *msg = signal_wait(d->pid, sig, 20000, &st, err, sizeof(err));

	REQUIRE(msg == NULL, "sheafd: %s", msg);
	untrack(d->pid);
	d->pid = 0;
	while (notify_recv(n, 0))              /* what it sent before it ended */
		;
	if (sig == SIGKILL) {
		REQUIRE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "sheafd ended with %s",
			status_str(st, buf, sizeof(buf)));
		return;
	}
	REQUIRE(exited_ok(st), "sheafd ended with %s after signal %d",
		status_str(st, buf, sizeof(buf)), sig);
	REQUIRE(notify_wait(n, &n->stopping, stopping0 + 1, 2000), "no STOPPING=1 on signal %d",
		sig);
}

/* ---- notify ---------------------------------------------------------------- */

START_TEST(notify)
{
	struct notify n;
	struct dmn d = { 0 };
	int64_t t0, sum = 0;
	int wd0, ready0, reload0;

	make_test_dir();
	notify_open(&n);
	fmt(d.sock, sizeof(d.sock), "%s/s.sock", test_dir);
	dmn_start(&d, &n, -1, -1, 200000);          /* watchdog: 200 ms */
	REQUIRE(n.fdstore == 1 && n.store_fd >= 0, "no FDSTORE=1 carrying the pool's memfd");
	REQUIRE(strcmp(n.fdname, "pool") == 0, "the stored fd is named '%s', not 'pool'",
		n.fdname);
	REQUIRE(notify_wait(&n, &n.status, 1, 2000), "no STATUS= after READY=1");
	REQUIRE(strstr(n.last_status, "clients") != NULL && strstr(n.last_status, "caches"),
		"STATUS=%s", n.last_status);
	REQUIRE(strstr(n.last_status, "adopted") == NULL, "a fresh pool reported as adopted");

	/* WATCHDOG=1 every half of WATCHDOG_USEC: ~10 in a second. */
	wd0 = n.watchdog;
	t0 = now_ms();
	notify_drain(&n, 1000);
	REQUIRE(n.watchdog - wd0 >= 5 && n.watchdog - wd0 <= 15,
		"%d WATCHDOG=1 in %lld ms with WATCHDOG_USEC=200000 (want ~10)",
		n.watchdog - wd0, (long long)(now_ms() - t0));
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

	dmn_stop(&d, &n, SIGTERM);
	printf("  notify: READY, STATUS (%s), WATCHDOG, RELOADING, STOPPING, FDSTORE "
	       "(FDNAME=%s, a memfd)\n", n.last_status, n.fdname);
	notify_close(&n);
	test_passed();
}
END_TEST

/* ---- restarts with the fd store ------------------------------------------------ */

#define LIVE_MAX 4096

enum { CMD_PROGRESS = 'P', CMD_STATS = 'S', CMD_END = 'E' };

struct reply {
	int32_t rc;                 /* 0, or the failing call's -errno */
	uint32_t live;              /* objects the client holds */
	uint64_t ops;               /* allocations + frees so far */
	uint64_t in_use;            /* from the stats */
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

/*
 * The client that lives through the restarts: allocates and frees (a
 * random walk between 0 and LIVE_MAX objects held, each stamped and checked
 * before its free) and never stops, except to answer the test's commands.
 * Any failed operation ends it with status 1.
 */
static int worker(void *p)
{
	struct worker_arg *a = p;
	struct sheaf_cache_config cfg = { .flags = SHEAF_CACHE_DEBUG,
					  .capacity = SHEAF_CAPACITY_DEFAULT };
	struct { uint64_t *obj; uint64_t gen; } *live;
	struct sheaf_stats st;
	struct reply r;
	char err[256];
	sheaf_pool_t *pool;
	sheaf_cache_t *c;
	uint64_t seed = a->seed, ops = 0, gen = 0;
	uint32_t n = 0, target = 0;
	int up = 1;

	live = calloc(LIVE_MAX, sizeof(*live));
	CREQ(live != NULL, "calloc");
	pool = sheaf_connect(a->sock, "restart-worker", 0, err, sizeof(err));
	CREQ(pool != NULL, "sheaf_connect(%s): %s", a->sock, err);
	c = sheaf_cache_create(pool, "sd-restart", 64, &cfg);
	CREQ(c != NULL, "sheaf_cache_create: %s", strerror(errno));
	for (;;) {
		if ((ops & 63) == 0) {
			struct pollfd pf = { a->cmd_fd, POLLIN, 0 };
			char cmd;

			if (poll(&pf, 1, 0) == 1) {
				CREQ(read(a->cmd_fd, &cmd, 1) == 1, "the test went away");
				memset(&r, 0, sizeof(r));
				if (cmd == CMD_STATS || cmd == CMD_END) {
					r.rc = sheaf_cache_stats(c, -1, &st);
					r.in_use = r.rc == 0 ? st.in_use : 0;
					if (r.rc != 0)
						fmt(r.err, sizeof(r.err), "sheaf_cache_stats: %s",
							 strerror(-r.rc));
				}
				if (cmd == CMD_END && r.rc == 0) {
					for (uint32_t i = 0; i < n; i++) {
						CREQ(live[i].obj[0] == stamp_of(live[i].obj, live[i].gen),
						     "object %p changed", (void *)live[i].obj);
						CREQ(sheaf_free(c, live[i].obj) == 0, "free %p",
						     (void *)live[i].obj);
					}
					n = 0;
					sheaf_thread_exit();
					r.rc = sheaf_cache_shrink(c);
					if (r.rc < 0) {
						fmt(r.err, sizeof(r.err), "shrink: %s",
							 strerror(-r.rc));
					} else {
						r.rc = sheaf_pool_check(pool, r.err, sizeof(r.err));
						if (r.rc == 0) {
							r.rc = sheaf_cache_stats(c, -1, &st);
							r.in_use = st.in_use;
						}
					}
				}
				r.live = n;
				r.ops = ops;
				CREQ(write_full(a->rep_fd, &r, sizeof(r)) == 0, "reply");
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
			uint64_t *o = sheaf_alloc(c);

			CREQ(o != NULL, "sheaf_alloc failed after %llu ops: %s",
			     (unsigned long long)ops, strerror(errno));
			live[n].obj = o;
			live[n].gen = ++gen;
			o[0] = stamp_of(o, gen);
			o[7] = ~o[0];
			n++;
		} else if (n > target) {
			uint32_t i = (uint32_t)(xorshift(&seed) % n);
			uint64_t *o = live[i].obj;
			int rc;

			CREQ(o[0] == stamp_of(o, live[i].gen) && o[7] == ~o[0],
			     "object %p changed", (void *)o);
			rc = sheaf_free(c, o);
			CREQ(rc == 0, "sheaf_free failed after %llu ops: %s",
			     (unsigned long long)ops, strerror(-rc));
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
	struct dmn d = { 0 };
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
	dmn_start(&d, &n, lfd, -1, 0);
	REQUIRE(n.store_fd >= 0, "sheafd stored no memfd (FDSTORE=1)");
	worker_start(&w, &wa, d.sock);
	r = worker_cmd(&w, CMD_STATS, 30000);
	REQUIRE(r.rc == 0, "first stats: %s", r.err);

	for (int round = 1; round <= rounds; round++) {
		int64_t t_down, t_up;
		uint64_t ops_before, ops_down = 0;
		int status0, fdstore0;

		sleep_ms(200);                        /* let the worker run a while */
		ops_before = worker_cmd(&w, CMD_PROGRESS, 10000).ops;
		dmn_stop(&d, &n, mode == RESTART_CLEAN ? SIGTERM : SIGKILL);
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
			ops_down = worker_cmd(&w, CMD_PROGRESS, 10000).ops;
			REQUIRE(ops_down > ops_before,
				"the client made no progress while no daemon ran (%llu ops)",
				(unsigned long long)ops_down);
		}
		/* systemd starts sheafd again with the stored memfd. */
		dmn_start(&d, &n, lfd, n.store_fd, 0);
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
	dmn_stop(&d, &n, SIGTERM);
	if (lfd >= 0)
		close(lfd);
	printf("  %d restarts (%s): the client did %llu ops, never failed; every object "
	       "accounted for (pool check 0, in_use 0)\n", rounds, mode_name[mode],
	       (unsigned long long)ops_total);
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

/* ---- make install, pkg-config, an example client ---------------------------------- */

static const char example_c[] =
"/* example.c - the smallest libsheaf client, built by test_systemd with\n"
" * nothing but `pkg-config --cflags --libs sheaf`. */\n"
"#include <errno.h>\n"
"#include <stdio.h>\n"
"#include <string.h>\n"
"#include <sheaf.h>\n"
"\n"
"int main(void)\n"
"{\n"
"	char err[256], line[1024];\n"
"	void *objs[1000];\n"
"	sheaf_pool_t *pool = sheaf_connect(NULL, \"example\", 0, err, sizeof(err));\n"
"	sheaf_cache_t *c;\n"
"	FILE *maps;\n"
"\n"
"	if (pool == NULL) {\n"
"		fprintf(stderr, \"example: sheaf_connect: %s\\n\", err);\n"
"		return 1;\n"
"	}\n"
"	c = sheaf_cache_create(pool, \"example\", 100, NULL);\n"
"	if (c == NULL && errno == EEXIST)\n"
"		c = sheaf_cache_open(pool, \"example\");\n"
"	if (c == NULL) {\n"
"		fprintf(stderr, \"example: cache: %s\\n\", strerror(errno));\n"
"		return 1;\n"
"	}\n"
"	for (int i = 0; i < 1000; i++) {\n"
"		objs[i] = sheaf_alloc(c);\n"
"		if (objs[i] == NULL) {\n"
"			fprintf(stderr, \"example: alloc: %s\\n\", strerror(errno));\n"
"			return 1;\n"
"		}\n"
"		memset(objs[i], i & 0xff, 100);\n"
"	}\n"
"	for (int i = 0; i < 1000; i++) {\n"
"		if (sheaf_free(c, objs[i]) != 0) {\n"
"			fprintf(stderr, \"example: free failed\\n\");\n"
"			return 1;\n"
"		}\n"
"	}\n"
"	sheaf_thread_exit();\n"
"	if (sheaf_cache_shrink(c) < 0 || sheaf_pool_check(pool, err, sizeof(err)) != 0) {\n"
"		fprintf(stderr, \"example: check: %s\\n\", err);\n"
"		return 1;\n"
"	}\n"
"	/* Which libsheaf did the dynamic linker load? */\n"
"	maps = fopen(\"/proc/self/maps\", \"r\");\n"
"	while (maps != NULL && fgets(line, sizeof(line), maps) != NULL) {\n"
"		char *p = strchr(line, '/');\n"
"		if (p != NULL && strstr(p, \"libsheaf.so\") != NULL) {\n"
"			printf(\"example: library %s\", p);\n"
"			break;\n"
"		}\n"
"	}\n"
"	if (maps != NULL)\n"
"		fclose(maps);\n"
"	sheaf_disconnect(pool);\n"
"	printf(\"example: ok\\n\");\n"
"	return 0;\n"
"}\n";

/* Output of a shell command (stdout and stderr) in a new string. */
static char *capture(const char *cmd, const char *const env[], int *status)
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

START_TEST(install_pkgconfig)
{
	static const char *const files[] = {
		"usr/local/sbin/sheafd", "usr/local/bin/sheafctl",
		"usr/local/lib/libsheaf.so.0.1.0", "usr/local/lib/libsheaf.a",
		"usr/local/include/sheaf.h", "usr/local/lib/pkgconfig/sheaf.pc",
		"usr/local/share/man/man8/sheafd.8", "usr/local/share/man/man3/libsheaf.3",
		"usr/local/lib/systemd/system/sheafd@.service",
		"usr/local/lib/systemd/system/sheafd@.socket",
		"usr/local/lib/systemd/system/sheafd.service",
		"usr/local/lib/systemd/system/sheafd.socket",
		"usr/local/lib/sysusers.d/sheafd.conf", "usr/local/lib/tmpfiles.d/sheafd.conf",
		"usr/local/etc/sheaf/sheafd.conf.example", "usr/local/etc/sheaf/sheafd.conf",
	};
	char pkgconfig[PATH_MAX], cc[PATH_MAX], dest[PATH_MAX], path[PATH_MAX], cmd[4 * PATH_MAX];
	char pcpath[PATH_MAX + 32], sysroot[PATH_MAX + 32], ldpath[PATH_MAX + 32];
	char sockenv[PATH_MAX + 16], link[PATH_MAX], conf[PATH_MAX], want[PATH_MAX + 64];
	const char *pcenv[] = { pcpath, sysroot, "-PKG_CONFIG_LIBDIR", NULL };
	const char *runenv[] = { ldpath, sockenv, NULL };
	const char *san_flags = "";
	struct notify n;
	struct dmn d = { 0 };
	char *out, *units;
	ssize_t k;
	int st;

	if (!find_tool("pkg-config", pkgconfig, sizeof(pkgconfig)))
		SKIP("pkg-config not found");
	if (!find_tool("cc", cc, sizeof(cc)))
		SKIP("no C compiler (cc) found");
	make_test_dir();
	install_tree(dest, sizeof(dest));
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		fmt(path, sizeof(path), "%s/%s", dest, files[i]);
		REQUIRE(access(path, F_OK) == 0, "make install did not install /%s", files[i]);
	}
	fmt(path, sizeof(path), "%s/docs/sheafctl.1", root_dir);
	if (access(path, F_OK) == 0) {
		fmt(path, sizeof(path), "%s/usr/local/share/man/man1/sheafctl.1", dest);
		REQUIRE(access(path, F_OK) == 0, "docs/sheafctl.1 exists but was not installed");
	}
	/* The library: versioned file, two links, soname, sheaf_* only. */
	fmt(path, sizeof(path), "%s/usr/local/lib/libsheaf.so.%s", dest, SHEAF_VERSION);
	REQUIRE(access(path, F_OK) == 0, "no libsheaf.so.%s", SHEAF_VERSION);
	fmt(path, sizeof(path), "%s/usr/local/lib/libsheaf.so.0", dest);
	k = readlink(path, link, sizeof(link) - 1);
	REQUIRE(k > 0, "libsheaf.so.0 is not a link");
	link[k] = '\0';
	REQUIRE(strcmp(link, "libsheaf.so." SHEAF_VERSION) == 0, "libsheaf.so.0 -> %s", link);
	fmt(path, sizeof(path), "%s/usr/local/lib/libsheaf.so", dest);
	k = readlink(path, link, sizeof(link) - 1);
	REQUIRE(k > 0, "libsheaf.so is not a link");
	link[k] = '\0';
	REQUIRE(strcmp(link, "libsheaf.so.0") == 0, "libsheaf.so -> %s", link);
	fmt(cmd, sizeof(cmd), "readelf -d '%s/usr/local/lib/libsheaf.so.%s'", dest,
		 SHEAF_VERSION);
	out = capture(cmd, NULL, &st);
	REQUIRE(exited_ok(st) && strstr(out, "Library soname: [libsheaf.so.0]") != NULL,
		"the soname is not libsheaf.so.0:\n%s", out);
	free(out);
	fmt(cmd, sizeof(cmd),
		 "nm -D --defined-only '%s/usr/local/lib/libsheaf.so.%s' | awk '{print $NF}'",
		 dest, SHEAF_VERSION);
	out = capture(cmd, NULL, &st);
	REQUIRE(exited_ok(st), "nm failed:\n%s", out);
	{
		int nsym = 0;
		char *save = NULL;

		for (char *s = strtok_r(out, "\n", &save); s; s = strtok_r(NULL, "\n", &save)) {
			/* ASan's one-definition-rule marker of an exported
			 * variable (sheaf__caches) is the sanitizer's, not ours. */
			if (strcmp(san_name, "address") == 0 &&
			    strncmp(s, "__odr_asan.sheaf_", 17) == 0)
				continue;
			REQUIRE(strncmp(s, "sheaf_", 6) == 0,
				"libsheaf.so exports '%s', not a sheaf_* API symbol", s);
			nsym++;
		}
		REQUIRE(nsym >= 20, "only %d symbols exported", nsym);
		printf("  libsheaf.so.%s: soname libsheaf.so.0, %d symbols exported, all sheaf_*\n",
		       SHEAF_VERSION, nsym);
	}
	free(out);

	/* pkg-config against the tree, the DESTDIR way. */
	fmt(pcpath, sizeof(pcpath), "PKG_CONFIG_PATH=%s/usr/local/lib/pkgconfig", dest);
	fmt(sysroot, sizeof(sysroot), "PKG_CONFIG_SYSROOT_DIR=%s", dest);
	out = capture("pkg-config --modversion sheaf && pkg-config --static --libs sheaf",
		      pcenv, &st);
	REQUIRE(exited_ok(st) && strncmp(out, SHEAF_VERSION "\n", strlen(SHEAF_VERSION) + 1) == 0,
		"pkg-config --modversion sheaf:\n%s", out);
	REQUIRE(strstr(out, "-lsheaf") && strstr(out, "-lprotobuf-c") && strstr(out, "-lnuma") &&
		strstr(out, "-lpthread"), "pkg-config --static --libs sheaf: %s", out);
	free(out);
	fmt(path, sizeof(path), "%s/example.c", test_dir);
	REQUIRE(write_text(path, example_c) == 0, "cannot write %s", path);
	/* An instrumented libsheaf (SAN=) needs the sanitizer runtime in the
	 * executable: the only flags added to pkg-config's. */
	if (strcmp(san_name, "address") == 0)
		san_flags = "-fsanitize=address,undefined";
	else if (strcmp(san_name, "thread") == 0)
		san_flags = "-fsanitize=thread";
	fmt(cmd, sizeof(cmd),
		 "cd '%s' && cc %s -o example example.c $(pkg-config --cflags --libs sheaf)",
		 test_dir, san_flags);
	out = capture(cmd, pcenv, &st);
	REQUIRE(exited_ok(st), "compiling the example failed:\n%s", out);
	free(out);
	/* The installed header in C++ (inline fast paths) and in gnu89 C,
	 * whose inline rules differ: it then calls the library's exported
	 * sheaf_alloc/sheaf_free, which must link. */
	fmt(path, sizeof(path), "%s/hdr.c", test_dir);
	REQUIRE(write_text(path, "#include <sheaf.h>\n"
				 "int use(sheaf_cache_t *c) { void *p = sheaf_alloc(c);\n"
				 "  return sheaf_free(c, p); }\n"
				 "int main(void) { return 0; }\n") == 0, "cannot write %s", path);
	fmt(cmd, sizeof(cmd),
		 "cd '%s' && c++ -Wall -Wextra -Werror -x c++ -c -o hdr_cxx.o hdr.c "
		 "$(pkg-config --cflags sheaf) && cc %s -std=gnu89 -Wall -Werror -o hdr89 hdr.c "
		 "$(pkg-config --cflags --libs sheaf) && nm hdr89 | grep -q ' U sheaf_alloc'",
		 test_dir, san_flags);
	out = capture(cmd, pcenv, &st);
	REQUIRE(exited_ok(st), "the header in C++ or gnu89 C failed:\n%s", out);
	free(out);

	/* The installed sheafd, with the installed default config. */
	notify_open(&n);
	fmt(d.sock, sizeof(d.sock), "%s/s.sock", test_dir);
	fmt(conf, sizeof(conf), "%s/usr/local/etc/sheaf/sheafd.conf", dest);
	fmt(path, sizeof(path), "%s/usr/local/sbin/sheafd", dest);
	{
		const char *argv[] = { path, "--foreground", "--config", conf, "--socket", d.sock,
				       "--size", "256M", NULL };
		char notify_env[160];
		const char *env[] = { notify_env, NULL };

		fmt(notify_env, sizeof(notify_env), "NOTIFY_SOCKET=%s", n.path);
		fmt(d.log, sizeof(d.log), "%s/sheafd.log", test_dir);
		add_log(d.log);
		d.pid = spawn(argv, env, d.log, NULL, 0);
		REQUIRE(notify_wait(&n, &n.ready, 1, 30000),
			"the installed sheafd (with the installed config) sent no READY=1");
	}
	fmt(ldpath, sizeof(ldpath), "LD_LIBRARY_PATH=%s/usr/local/lib", dest);
	fmt(sockenv, sizeof(sockenv), "SHEAF_SOCKET=%s", d.sock);
	fmt(cmd, sizeof(cmd), "'%s/example'", test_dir);
	out = capture(cmd, runenv, &st);
	fmt(want, sizeof(want), "example: library %s/usr/local/lib/libsheaf.so.%s", dest,
		 SHEAF_VERSION);
	REQUIRE(exited_ok(st) && strstr(out, "example: ok") != NULL,
		"the example failed (status %d):\n%s", st, out);
	REQUIRE(strstr(out, want) != NULL, "the example did not load the installed libsheaf:\n%s",
		out);
	free(out);
	dmn_stop(&d, &n, SIGTERM);
	notify_close(&n);
	printf("  example built with pkg-config --cflags --libs sheaf, ran against the "
	       "installed libsheaf and sheafd\n");

	/* PREFIX=/usr: the units follow. */
	{
		char dest2[PATH_MAX], log[PATH_MAX];

		fmt(dest2, sizeof(dest2), "%s/dest-usr", test_dir);
		fmt(log, sizeof(log), "%s/make-install-usr.log", test_dir);
		make_target("install", dest2, "PREFIX=/usr", log);
		fmt(path, sizeof(path), "%s/usr/lib/systemd/system/sheafd@.service", dest2);
		units = unit_settings(path);
		REQUIRE(has_line(units, "ExecStart=/usr/sbin/sheafd --foreground --socket "
				 "/run/sheafd/%i.sock --config /etc/sheaf/%i.conf"),
			"PREFIX=/usr: ExecStart not rewritten:\n%s", units);
		free(units);
		fmt(path, sizeof(path), "%s/etc/sheaf/sheafd.conf", dest2);
		REQUIRE(access(path, F_OK) == 0, "PREFIX=/usr: no /etc/sheaf/sheafd.conf");
		fmt(path, sizeof(path), "%s/usr/lib/pkgconfig/sheaf.pc", dest2);
		REQUIRE(file_contains(path, "prefix=/usr\n"), "PREFIX=/usr: sheaf.pc says otherwise");
	}

	/* make uninstall leaves no file (the default config was unmodified). */
	{
		char log[PATH_MAX];

		fmt(log, sizeof(log), "%s/make-uninstall.log", test_dir);
		make_target("uninstall", dest, NULL, log);
		fmt(cmd, sizeof(cmd), "find '%s' ! -type d", dest);
		out = capture(cmd, NULL, &st);
		REQUIRE(exited_ok(st) && out[0] == '\0', "make uninstall left:\n%s", out);
		free(out);
	}
	printf("  make uninstall: nothing left in the DESTDIR\n");
	test_passed();
}
END_TEST

/* ---- main ------------------------------------------------------------------- */

static void find_paths(void)
{
	char tmp[PATH_MAX];
	const char *base;

	/* ROOT/build[-SAN]/tests/test_systemd */
	if (exe_dir(tmp, sizeof(tmp), NULL) != 0) {     /* .../tests */
		fprintf(stderr, "test_systemd: the path of /proc/self/exe: %s\n", strerror(errno));
		exit(1);
	}
	fmt(build_dir, sizeof(build_dir), "%s", dirname(tmp));
	fmt(tmp, sizeof(tmp), "%s", build_dir);
	base = basename(tmp);
	if (strncmp(base, "build-", 6) == 0)
		fmt(san_name, sizeof(san_name), "%s", base + 6);
	else
		san_name[0] = '\0';
	fmt(tmp, sizeof(tmp), "%s", build_dir);
	fmt(root_dir, sizeof(root_dir), "%s", dirname(tmp));
	fmt(sheafd_path, sizeof(sheafd_path), "%s/daemon/sheafd", build_dir);
	if (access(sheafd_path, X_OK) != 0) {
		fprintf(stderr, "test_systemd: no sheafd at %s (build it first)\n", sheafd_path);
		exit(1);
	}
	fmt(tmp, sizeof(tmp), "%s/systemd/sheafd@.service", root_dir);
	if (access(tmp, F_OK) != 0) {
		fprintf(stderr, "test_systemd: no %s: not run from the source tree?\n", tmp);
		exit(1);
	}
}

int main(void)
{
	Suite *s = suite_create("systemd");
	const char *e = getenv("SHEAF_SAN");

	san = e != NULL && e[0] != '\0';
	find_paths();
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ADD_ALONE(s, units_static, 300);
	ADD_ALONE(s, units_verify, 300);
	ADD_ALONE(s, units_security, 300);
	ADD_ALONE(s, sysusers_tmpfiles, 300);
	ADD_ALONE(s, socket_activation, 300);
	ADD_ALONE(s, notify, 300);
	ADD_ALONE(s, restart_crash, 300);
	ADD_ALONE(s, restart_clean, 300);
	ADD_ALONE(s, restart_socket, 300);
	ADD_ALONE(s, install_pkgconfig, 300);
	return run_suite(s);
}
