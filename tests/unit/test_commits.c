/*
 * test_commits.c - the commit message checker of .ci/ (.ci/check-commits,
 * which .ci/run runs over the commits after .ci/commit-base): its
 * self-test, which builds scratch repositories and requires good messages
 * to pass and each kind of bad one (subject too long or not "area: what",
 * no blank second line, no body) to fail, merges to be skipped, a missing
 * base to fail in a full clone and to be skipped in a shallow one.
 * Also: .ci/commit-base holds a full commit hash.
 *
 * Needs git (SKIP otherwise).
 */
#include <check.h>
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"

/* Run @cmd through the shell: its exit status (-1: not run), output in @out. */
static int shell(const char *cmd, char *out, size_t len)
{
	FILE *f = popen(cmd, "r");
	size_t n = 0;
	int st;

	if (f == NULL)
		return -1;
	while (n + 1 < len && fgets(out + n, (int)(len - n), f) != NULL)
		n += strlen(out + n);
	out[n] = '\0';
	while (fgetc(f) != EOF)
		;
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(commit_base_is_a_hash)
{
	char path[PATH_MAX], line[128] = "";
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/.ci/commit-base", root_dir());
	f = fopen(path, "r");
	REQUIRE(f != NULL, "no %s", path);
	REQUIRE(fgets(line, sizeof(line), f) != NULL, "%s is empty", path);
	fclose(f);
	n = strcspn(line, "\n");
	REQUIRE(n == 40, "%s: '%.*s' is not a full hash", path, (int)n, line);
	for (size_t i = 0; i < n; i++)
		REQUIRE(isxdigit((unsigned char)line[i]) && !isupper((unsigned char)line[i]),
			"%s: '%.*s' is not a full hash", path, (int)n, line);
}
END_TEST

START_TEST(checker_self_test)
{
	char cmd[PATH_MAX + 64], out[8192];
	int st;

	if (shell("git --version", out, sizeof(out)) != 0)
		SKIP("git not found");
	snprintf(cmd, sizeof(cmd), "'%s/.ci/check-commits' --self-test 2>&1", root_dir());
	st = shell(cmd, out, sizeof(out));
	REQUIRE(st == 0, "check-commits --self-test: status %d:\n%s", st, out);
	printf("  %s", out);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("commits");

	setvbuf(stdout, NULL, _IOLBF, 0);
	ADD_ALONE(s, commit_base_is_a_hash, 30);
	ADD_ALONE(s, checker_self_test, 120);
	return run_suite(s);
}
