/*
 * util_check.h - the Check boilerplate every test program shares: one test
 * case per test (so that CK_RUN_CASE=<name> runs one alone) and running a
 * suite to its summary line.  Header-only: each test program includes it.
 */
#ifndef SHEAF_TESTS_UTIL_CHECK_H
#define SHEAF_TESTS_UTIL_CHECK_H

#include <check.h>

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
