/*
 * util_check.h - what every test program shares around Check: REQUIRE, the
 * one assertion for loops, helpers and child processes; the sanitizer
 * probe; one test case per test (so that CK_RUN_CASE=<name> runs one alone)
 * and running a suite to its summary line.  util_check.c holds the rest.
 */
#ifndef SHEAF_TESTS_UTIL_CHECK_H
#define SHEAF_TESTS_UTIL_CHECK_H

#include <check.h>

/*
 * REQUIRE(cond, fmt, ...): fail the test with the message unless @cond.
 * Nothing happens while it holds (Check's ck_assert_* report a mark point
 * through a pipe on every pass, far too slow for hot loops).  It may be used
 * anywhere: in the test process it runs the failure hook (if one is set)
 * and fails the test through Check; in a child process made by fork_fn
 * (util_proc.h), which must never call Check, it reports on stderr and
 * ends the child with exit status 1, for its parent to notice.
 */
#define REQUIRE(cond, ...)                                                  \
	do {                                                                \
		if (__builtin_expect(!(cond), 0))                           \
			require_failed(__FILE__, __LINE__, #cond, __VA_ARGS__); \
	} while (0)

/*
 * Leave a test that cannot run here (a tool or a privilege missing).  A
 * skipped test never counts as passed: it fails, naming what is missing,
 * unless SHEAF_TEST_SKIP_OK=1 is set, when it prints "SKIP <test>: why"
 * and passes (an explicit choice of whoever runs the tests).
 */
#define SKIP(...)                                                           \
	do {                                                                \
		test_skip(__FILE__, __LINE__, __func__, __VA_ARGS__);       \
		return;                                                     \
	} while (0)

void test_skip(const char *file, int line, const char *test, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

void require_failed(const char *file, int line, const char *cond, const char *fmt, ...)
	__attribute__((noreturn, format(printf, 4, 5)));

/* Run @hook (NULL: none) before a failing REQUIRE fails the test: a program
 * that runs processes stops them and shows their logs there. */
void require_set_hook(void (*hook)(const char *file, int line, const char *cond));

/* Called in a freshly forked child: from now on a failing REQUIRE reports
 * and _exit(1)s instead of calling Check. */
void require_in_child(void);

/* 1 when the tests run under a sanitizer (SHEAF_SAN set and not empty, as
 * `make test SAN=...` does): tests then scale their work down. */
int test_san(void);

/* Add test @fn to @s in a test case of its own named @name. */
static inline void add_alone(Suite *s, const TTest *fn, const char *name, int timeout)
{
	TCase *tc = tcase_create(name);

	tcase_set_timeout(tc, timeout);
	tcase_add_test(tc, fn);
	suite_add_tcase(s, tc);
}

#define ADD_ALONE(s, fn, timeout) add_alone((s), (fn), #fn, (timeout))

/* Run @s and print Check's summary; the exit status: 0 if all passed. */
static inline int run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

#endif
