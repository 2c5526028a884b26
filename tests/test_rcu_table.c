/*
 * test_rcu_table.c - runs tests/examples/rcu_table.c (a shared hash table
 * read without locks by several processes, entries replaced with
 * sheaf_free_deferred) as a user would build it: against the installed
 * library (make install into a temporary DESTDIR) with plain `cc -O2` and
 * pkg-config, then `rcu_table test` against this build's sheafd: readers
 * and writers killed at random (>= 1000 kills, $RCU_TABLE_KILLS), no use
 * after free, nothing lost, grace periods completing.
 */
#include <check.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/util_check.h"
#include "tests/util_daemon.h"
#include "tests/util_deploy.h"
#include "tests/util_proc.h"

START_TEST(rcu_table_killed)
{
	char pkgconfig[PATH_MAX], cc[PATH_MAX], dest[PATH_MAX], cmd[4 * PATH_MAX];
	char pcpath[PATH_MAX + 32], sysroot[PATH_MAX + 32], ldpath[PATH_MAX + 32];
	char sockenv[PATH_MAX + 16];
	const char *pcenv[] = { pcpath, sysroot, "-PKG_CONFIG_LIBDIR", NULL };
	const char *runenv[] = { ldpath, sockenv, NULL };
	const char *kills = getenv("RCU_TABLE_KILLS");
	struct dmn d;
	char *out;
	int st;

	if (!find_tool("pkg-config", pkgconfig, sizeof(pkgconfig)))
		SKIP("pkg-config not found");
	if (!find_tool("cc", cc, sizeof(cc)))
		SKIP("no C compiler (cc) found");
	make_test_dir();
	install_tree(dest, sizeof(dest));
	fmt(pcpath, sizeof(pcpath), "PKG_CONFIG_PATH=%s/usr/local/lib/pkgconfig", dest);
	fmt(sysroot, sizeof(sysroot), "PKG_CONFIG_SYSROOT_DIR=%s", dest);
	fmt(cmd, sizeof(cmd),
	    "cd '%s' && cc -O2 %s -o rcu_table '%s/tests/examples/rcu_table.c' "
	    "$(pkg-config --cflags --libs sheaf)", test_dir, san_cflags(), root_dir());
	out = capture(cmd, pcenv, &st);
	REQUIRE(exited_ok(st), "compiling rcu_table failed:\n%s", out);
	free(out);

	dmn_init(&d);
	dmn_start(&d, NULL);
	fmt(ldpath, sizeof(ldpath), "LD_LIBRARY_PATH=%s/usr/local/lib", dest);
	fmt(sockenv, sizeof(sockenv), "SHEAF_SOCKET=%s", d.sock);
	fmt(cmd, sizeof(cmd), "'%s/rcu_table' test 15 2 %s", test_dir, kills ? kills : "1000");
	out = capture(cmd, runenv, &st);
	REQUIRE(exited_ok(st) && strstr(out, "rcu_table: ok") != NULL,
		"rcu_table failed (status %d):\n%s", st, out);
	printf("  %s", out);
	free(out);
	dmn_stop(&d, 5000);
	dmn_cleanup(&d);
	test_passed();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rcu_table");

	deploy_init("test_rcu_table");
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ADD_ALONE(s, rcu_table_killed, 240);
	return run_suite(s);
}
