/*
 * util_check.c - the failure path of REQUIRE and the sanitizer probe
 * (util_check.h says who calls what).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/helpers/util_check.h"

static void (*fail_hook)(const char *file, int line, const char *cond);
static int in_child;

void require_set_hook(void (*hook)(const char *file, int line, const char *cond))
{
	fail_hook = hook;
}

void require_in_child(void)
{
	in_child = 1;
}

void require_failed(const char *file, int line, const char *cond, const char *fmt, ...)
{
	char *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	if (in_child) {
		/* Children never call Check: the parent sees the exit status. */
		const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;

		fprintf(stderr, "[child %d] %s:%d: %s: %s\n", (int)getpid(), base, line, cond,
			msg ? msg : fmt);
		_exit(1);
	}
	if (fail_hook != NULL)
		fail_hook(file, line, cond);
	_ck_assert_failed(file, line, "Failed", "%s", msg ? msg : fmt);
}

void test_skip(const char *file, int line, const char *test, const char *fmt, ...)
{
	const char *ok = getenv("SHEAF_TEST_SKIP_OK");
	char *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	if (ok != NULL && strcmp(ok, "1") == 0) {
		printf("  SKIP %s: %s (SHEAF_TEST_SKIP_OK=1: counted as passed)\n", test,
		       msg ? msg : fmt);
		free(msg);
		return;
	}
	_ck_assert_failed(file, line, "Failed", "%s cannot run here: %s (a skipped test is a "
			  "failure; SHEAF_TEST_SKIP_OK=1 lets it pass)", test, msg ? msg : fmt);
}

int test_san(void)
{
	const char *s = getenv("SHEAF_SAN");

	return s != NULL && s[0] != '\0';
}
