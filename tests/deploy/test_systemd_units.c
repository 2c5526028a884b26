/*
 * test_systemd_units.c - the systemd units and their sysusers.d/tmpfiles.d
 * snippets, as written in systemd/ and as `make install` installs them
 * into a temporary DESTDIR (harness: util_deploy.h).
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
 *
 * A test whose tool is missing (systemd-analyze, systemd-sysusers,
 * systemd-tmpfiles) fails with SKIP (SHEAF_TEST_SKIP_OK=1 lets it pass).
 * Each test is its own TCase:
 * CK_RUN_CASE=<name> runs one.  Loops use REQUIRE (Check's passing
 * assertions are slow); child processes report through pipes, REQUIRE and
 * exit statuses and never call Check.
 */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_deploy.h"
#include "tests/helpers/util_proc.h"

/* ---- units in a DESTDIR --------------------------------------------------- */

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

/* The settings @dflt of sheafd.@kind are those of the template @tmpl
 * (sheafd@.@kind) with %i = sheafd. */
static void require_default_instance(const char *tmpl, const char *dflt, const char *kind)
{
	char *a = replace_all(tmpl, "sheafd@%i", "sheafd");
	char *want = replace_all(a, "%i", "sheafd");

	free(a);
	REQUIRE(strcmp(want, dflt) == 0,
		"sheafd.%s is not sheafd@.%s with %%i=sheafd:\n--- expected\n%s"
		"--- found\n%s", kind, kind, want, dflt);
	free(want);
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
		"FileDescriptorStoreMax=4", "User=sheafd", "Group=sheafd", "UMask=0077",
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
	char *tsvc, *tsock, *dsvc, *dsock;

	fmt(path, sizeof(path), "%s/systemd/sheafd@.service", root_dir());
	tsvc = unit_settings(path);
	fmt(path, sizeof(path), "%s/systemd/sheafd@.socket", root_dir());
	tsock = unit_settings(path);
	fmt(path, sizeof(path), "%s/systemd/sheafd.service", root_dir());
	dsvc = unit_settings(path);
	fmt(path, sizeof(path), "%s/systemd/sheafd.socket", root_dir());
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
	require_default_instance(tsvc, dsvc, "service");
	require_default_instance(tsock, dsock, "socket");
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

/* ---- main ------------------------------------------------------------------- */

int main(void)
{
	Suite *s = suite_create("systemd_units");

	deploy_init("test_systemd_units");
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ADD_ALONE(s, units_static, 300);
	ADD_ALONE(s, units_verify, 300);
	ADD_ALONE(s, units_security, 300);
	ADD_ALONE(s, sysusers_tmpfiles, 300);
	return run_suite(s);
}
