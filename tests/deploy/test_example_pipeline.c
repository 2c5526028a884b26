/*
 * test_example_pipeline.c - the example tests/examples/pipeline.c (a
 * producer process, two consumer processes, a named queue) is built with
 * plain `cc -O2` against libsheaf installed into a temporary DESTDIR
 * (util_deploy.h, as test_install does), and run against that install's
 * sheafd: the test fails when the example does (every message must arrive
 * intact exactly once).  README shows the example.
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

START_TEST(example_pipeline)
{
	char dest[PATH_MAX], cmd[3 * PATH_MAX], sheafd[PATH_MAX], env_ld[PATH_MAX + 32];
	const char *env[] = { env_ld, NULL };
	struct dmn d;
	char *out;
	int st;

	if (build_example("pipeline", dest, sizeof(dest), env_ld, sizeof(env_ld)) != 0)
		SKIP("pkg-config or cc not found");

	fmt(sheafd, sizeof(sheafd), "%s/usr/local/sbin/sheafd", dest);
	{
		const char *argv[] = { sheafd, "--foreground", "--socket", NULL, "--nodes", "1",
				       "--size", "256M", NULL };

		dmn_init_at(&d, "/tmp/sheaf-pipeline-XXXXXX", "log");
		argv[3] = d.sock;
		dmn_start_argv(&d, (char *const *)argv);
	}
	fmt(cmd, sizeof(cmd), "'%s/pipeline' '%s' 200000", test_dir, d.sock);
	out = capture(cmd, env, &st);
	REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
		strstr(out, "pipeline: 200000 of 200000 messages arrived\n") != NULL,
		"the pipeline example failed (status 0x%x):\n%s", st, out);
	printf("%s", out);
	free(out);
	dmn_end(&d);
	test_passed();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("example_pipeline");

	deploy_init("test_example_pipeline");
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ADD_ALONE(s, example_pipeline, 300);
	return run_suite(s);
}
