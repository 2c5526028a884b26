/*
 * test_example_pubsub.c - the example tests/examples/pubsub.c (a feed
 * process, three strategy processes, a topic) is built with
 * plain `cc -O2` against libsheaf installed into a temporary DESTDIR
 * (util_deploy.h, as test_install does), and run against that install's
 * sheafd: the test fails when the example does (every strategy must get every
 * tick intact, in order).  README shows the example.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_deploy.h"
#include "tests/helpers/util_proc.h"

START_TEST(example_pubsub)
{
	char dest[PATH_MAX], cmd[3 * PATH_MAX], sheafd[PATH_MAX], env_ld[PATH_MAX + 32];
	const char *env[] = { env_ld, NULL };
	struct dmn d;
	char *out;
	int st;

	if (build_example("pubsub", dest, sizeof(dest), env_ld, sizeof(env_ld)) != 0)
		SKIP("pkg-config or cc not found");

	fmt(sheafd, sizeof(sheafd), "%s/usr/local/sbin/sheafd", dest);
	{
		const char *argv[] = { sheafd, "--foreground", "--socket", NULL, "--nodes", "1",
				       "--size", "256M", NULL };

		dmn_init_at(&d, "/tmp/sheaf-pubsub-XXXXXX", "log");
		argv[3] = d.sock;
		dmn_start_argv(&d, (char *const *)argv);
	}
	fmt(cmd, sizeof(cmd), "'%s/pubsub' '%s' 100000", test_dir, d.sock);
	out = capture(cmd, env, &st);
	REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
		strstr(out, "pubsub: 3 strategies got 100000 ticks each\n") != NULL,
		"the pubsub example failed (status 0x%x):\n%s", st, out);
	printf("%s", out);
	free(out);
	dmn_end(&d);
	test_passed();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("example_pubsub");

	deploy_init("test_example_pubsub");
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ADD_ALONE(s, example_pubsub, 300);
	return run_suite(s);
}
