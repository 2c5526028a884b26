/*
 * test_example_prefork.c - the example tests/examples/prefork_server.c is
 * a test: `make install` into a temporary DESTDIR (the same SAN= as this
 * build), the example built against that installed tree with a plain
 * `cc -O2` and `pkg-config --cflags --libs sheaf` (and nothing from the
 * source tree), then run against a real sheafd with the installed
 * libsheaf (LD_LIBRARY_PATH): 4 workers, each connected on its own,
 * count requests in a table they find by name (sheaf_name_get_or_create).
 * It must exit 0; a second run finds the table the first created, and
 * `sheafctl names` lists it.
 *
 * A missing tool (pkg-config, cc) fails with SKIP (SHEAF_TEST_SKIP_OK=1
 * lets it pass).
 */
#include <check.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_deploy.h"
#include "tests/helpers/util_proc.h"

START_TEST(prefork_server)
{
	char dest[PATH_MAX], cmd[4 * PATH_MAX], ldpath[PATH_MAX + 32];
	char sockenv[PATH_MAX + 16];
	const char *runenv[] = { ldpath, sockenv, NULL };
	struct dmn d;
	char *out;
	int st;

	if (build_example("prefork_server", dest, sizeof(dest), ldpath, sizeof(ldpath)) != 0)
		SKIP("pkg-config or cc not found");

	dmn_init_at(&d, "/tmp/sheaf-prefork-XXXXXX", "log");
	{
		const char *argv[] = { sheafd_bin(), "--foreground", "--socket", d.sock,
				       "--nodes", "2", "--size", "64M", NULL };
		dmn_start_argv(&d, (char *const *)argv);
	}
	fmt(sockenv, sizeof(sockenv), "SHEAF_SOCKET=%s", d.sock);
	fmt(cmd, sizeof(cmd), "'%s/prefork_server' 4 %d", test_dir, test_san() ? 2000 : 20000);
	out = capture(cmd, runenv, &st);
	REQUIRE(exited_ok(st) && strstr(out, "prefork: ok") && strstr(out, "table created"),
		"the example failed (status %d):\n%s", st, out);
	printf("%s", out);
	free(out);
	out = capture(cmd, runenv, &st);
	REQUIRE(exited_ok(st) && strstr(out, "prefork: ok") && strstr(out, "table found"),
		"the second run failed (status %d):\n%s", st, out);
	free(out);
	fmt(cmd, sizeof(cmd), "'%s' -s '%s' names", sheafctl_bin(), d.sock);
	out = capture(cmd, NULL, &st);
	REQUIRE(exited_ok(st) && strstr(out, "prefork.table"), "sheafctl names:\n%s", out);
	free(out);
	dmn_stop(&d, 5000);
	dmn_cleanup(&d);
	test_passed();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("example_prefork");

	require_binaries("test_example_prefork");
	deploy_init("test_example_prefork");
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ADD_ALONE(s, prefork_server, 300);
	return run_suite(s);
}
