/*
 * test_example_rcu_table.c - runs tests/examples/rcu_table.c (a shared hash
 * table read without locks by several processes, entries replaced with
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
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_deploy.h"
#include "tests/helpers/util_proc.h"

START_TEST(rcu_table_killed)
{
	char dest[PATH_MAX], cmd[4 * PATH_MAX], ldpath[PATH_MAX + 32];
	char sockenv[PATH_MAX + 16];
	const char *runenv[] = { ldpath, sockenv, NULL };
	const char *kills = getenv("RCU_TABLE_KILLS");
	struct dmn d;
	char *out;
	int st;

	if (build_example("rcu_table", dest, sizeof(dest), ldpath, sizeof(ldpath)) != 0)
		SKIP("pkg-config or cc not found");

	dmn_init(&d);
	dmn_start(&d, NULL);
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

	deploy_init("test_example_rcu_table");
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ADD_ALONE(s, rcu_table_killed, 240);
	return run_suite(s);
}
