/*
 * test_install.c - `make install` and `make uninstall` into temporary
 * DESTDIR trees, with the same SAN= as the build this program sits in
 * (harness: util_deploy.h), and a client built against the result.
 *
 *   install_pkgconfig `make install DESTDIR=...`: every file in place
 *                    (libsheaf.so.VERSION, .so.MAJOR and .so links, soname
 *                    libsheaf.so.MAJOR, only sheaf_* exported); a small client is
 *                    compiled with only `pkg-config --cflags --libs sheaf`
 *                    (PKG_CONFIG_PATH + PKG_CONFIG_SYSROOT_DIR), runs against
 *                    the installed libsheaf (LD_LIBRARY_PATH) and the
 *                    installed sheafd (started with the installed default
 *                    config), allocates and frees; PREFIX=/usr rewrites the
 *                    units' paths; `make uninstall` leaves no file behind.
 *
 * A test whose tool is missing (pkg-config, cc) fails with SKIP
 * (SHEAF_TEST_SKIP_OK=1 lets it pass).
 * Each test is its own TCase: CK_RUN_CASE=<name> runs one.  Loops use
 * REQUIRE (Check's passing assertions are slow); child processes report
 * through pipes, REQUIRE and exit statuses and never call Check.
 */
#include <check.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "proto/version.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_deploy.h"
#include "tests/helpers/util_notify.h"
#include "tests/helpers/util_proc.h"

/* ---- make install, pkg-config, an example client ---------------------------------- */

static const char example_c[] =
"/* example.c - the smallest libsheaf client, built by test_install with\n"
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

START_TEST(install_pkgconfig)
{
	static const char *const files[] = {
		"usr/local/sbin/sheafd", "usr/local/bin/sheafctl",
		"usr/local/lib/libsheaf.a",
		"usr/local/include/sheaf.h", "usr/local/include/sheaf_inline.h",
		"usr/local/lib/pkgconfig/sheaf.pc",
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
	char soname[64];
	const char *pcenv[] = { pcpath, sysroot, "-PKG_CONFIG_LIBDIR", NULL };
	const char *runenv[] = { ldpath, sockenv, NULL };
	struct notify n;
	struct svc d = { 0 };
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
	fmt(path, sizeof(path), "%s/docs/sheafctl.1", root_dir());
	if (access(path, F_OK) == 0) {
		fmt(path, sizeof(path), "%s/usr/local/share/man/man1/sheafctl.1", dest);
		REQUIRE(access(path, F_OK) == 0, "docs/sheafctl.1 exists but was not installed");
	}
	/* The library: versioned file, two links, soname, sheaf_* only. */
	fmt(path, sizeof(path), "%s/usr/local/lib/libsheaf.so.%s", dest, SHEAF_VERSION);
	REQUIRE(access(path, F_OK) == 0, "no libsheaf.so.%s", SHEAF_VERSION);
	fmt(soname, sizeof(soname), "libsheaf.so.%.*s", (int)strcspn(SHEAF_VERSION, "."),
	    SHEAF_VERSION);
	fmt(path, sizeof(path), "%s/usr/local/lib/%s", dest, soname);
	k = readlink(path, link, sizeof(link) - 1);
	REQUIRE(k > 0, "%s is not a link", soname);
	link[k] = '\0';
	REQUIRE(strcmp(link, "libsheaf.so." SHEAF_VERSION) == 0, "%s -> %s", soname, link);
	fmt(path, sizeof(path), "%s/usr/local/lib/libsheaf.so", dest);
	k = readlink(path, link, sizeof(link) - 1);
	REQUIRE(k > 0, "libsheaf.so is not a link");
	link[k] = '\0';
	REQUIRE(strcmp(link, soname) == 0, "libsheaf.so -> %s", link);
	fmt(cmd, sizeof(cmd), "readelf -d '%s/usr/local/lib/libsheaf.so.%s'", dest,
		 SHEAF_VERSION);
	out = capture(cmd, NULL, &st);
	fmt(want, sizeof(want), "Library soname: [%s]", soname);
	REQUIRE(exited_ok(st) && strstr(out, want) != NULL, "the soname is not %s:\n%s", soname,
		out);
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
			 * variable is the sanitizer's, not ours. */
			if (strcmp(san_name, "address") == 0 &&
			    strncmp(s, "__odr_asan.sheaf_", 17) == 0)
				continue;
			REQUIRE(strncmp(s, "sheaf_", 6) == 0,
				"libsheaf.so exports '%s', not a sheaf_* API symbol", s);
			nsym++;
		}
		REQUIRE(nsym >= 20, "only %d symbols exported", nsym);
		printf("  libsheaf.so.%s: soname %s, %d symbols exported, all sheaf_*\n",
		       SHEAF_VERSION, soname, nsym);
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
	 * executable: the only flags added to pkg-config's (san_cflags). */
	fmt(cmd, sizeof(cmd),
		 "cd '%s' && cc %s -o example example.c $(pkg-config --cflags --libs sheaf)",
		 test_dir, san_cflags());
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
		 test_dir, san_cflags());
	out = capture(cmd, pcenv, &st);
	REQUIRE(exited_ok(st), "the header in C++ or gnu89 C failed:\n%s", out);
	free(out);
	/* sheaf_inline.h is sheaf.h's: included alone it stops with its #error. */
	fmt(path, sizeof(path), "%s/inl.c", test_dir);
	REQUIRE(write_text(path, "#include <sheaf_inline.h>\nint main(void) { return 0; }\n") == 0,
		"cannot write %s", path);
	fmt(cmd, sizeof(cmd), "cd '%s' && cc -c -o inl.o inl.c $(pkg-config --cflags sheaf) 2>&1",
	    test_dir);
	out = capture(cmd, pcenv, &st);
	REQUIRE(!exited_ok(st) && strstr(out, "#error") != NULL &&
		strstr(out, "#include <sheaf.h> instead") != NULL,
		"including sheaf_inline.h directly did not stop with its #error:\n%s", out);
	free(out);
	printf("  sheaf_inline.h included alone: refused with its #error\n");

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
	svc_stop(&d, &n, SIGTERM);
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

int main(void)
{
	Suite *s = suite_create("install");

	deploy_init("test_install");
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ADD_ALONE(s, install_pkgconfig, 300);
	return run_suite(s);
}
