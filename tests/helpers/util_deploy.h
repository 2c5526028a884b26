/*
 * util_deploy.h - the harness of the deployment tests (test_systemd_units,
 * test_systemd, test_install, test_example_*; test_link takes fmt,
 * find_tool and san_cflags): the build under test and its source tree,
 * a test directory whose logs are printed (and which is kept) when a
 * REQUIRE fails, tools looked up in $PATH (a test whose tool is missing
 * prints SKIP and passes), the sanitizer flag a program built against the
 * build's libsheaf needs, programs run with their output in a log, `make
 * install` into a temporary DESTDIR, and reading unit files.
 *
 * The build under test is the one the test program sits in
 * (ROOT/build[-SAN]/tests/TIER/test_NAME, util_daemon.h); `make install` runs
 * with the same SAN=.  Failures go through REQUIRE (util_check.h).
 */
#ifndef SHEAF_TESTS_UTIL_DEPLOY_H
#define SHEAF_TESTS_UTIL_DEPLOY_H

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* "", "address" or "thread": the SAN= of this build (from BUILD's name). */
extern char san_name[32];
/* The test's directory (make_test_dir), "" when none. */
extern char test_dir[PATH_MAX];

/* In main: find the build and the source tree (exit 1 when they are not
 * there) and take over REQUIRE's failure hook. */
void deploy_init(const char *prog);

/* snprintf that fails the test rather than truncate (paths, commands). */
void fmt(char *buf, size_t len, const char *f, ...) __attribute__((format(printf, 3, 4)));

/* The compiler flag with which a program links the libsheaf of this build:
 * under SAN= the sanitizer's runtime must be in the executable ("" when
 * none). */
const char *san_cflags(void);

/* SKIP: util_check.h's (a skipped test fails unless SHEAF_TEST_SKIP_OK=1). */

/* A fresh directory for the test (removed by test_passed). */
void make_test_dir(void);
/* A file to print when the test fails (8 at most). */
void add_log(const char *path);
/* The test passed: remove its directory, forget its logs. */
void test_passed(void);
/* Path of @name in $PATH (or the usual system directories): 1 if found. */
int find_tool(const char *name, char *out, size_t len);

/*
 * Fork and exec @argv (a bare name is looked up in $PATH) with stdout and
 * stderr to @log (appended; /dev/null when NULL), stdin from /dev/null, out
 * of any make that runs the tests.  @env: "NAME=VALUE" to set ("NAME=" +
 * "@pid" means the child's own pid, as systemd sets LISTEN_PID), or "-NAME"
 * to unset.  @pass: descriptors to place at 3, 4, ... (systemd's fd
 * passing).  The child dies with us; it is tracked.
 */
pid_t spawn(const char *const argv[], const char *const env[], const char *log,
	    const int *pass, int npass);
/* Run through /bin/sh -c (as spawn does; killed after @ms): its wait status. */
int run_sh(const char *cmd, const char *const env[], const char *log, int ms);
/* Output of a shell command (stdout and stderr) in a new string. */
char *capture(const char *cmd, const char *const env[], int *status);

/* make -C ROOT @target SAN=<ours> DESTDIR=@destdir @extra: require success
 * (log in @log). */
void make_target(const char *target, const char *destdir, const char *extra, const char *log);
/* Install into TEST_DIR/dest (PREFIX /usr/local): its path in @dest. */
void install_tree(char *dest, size_t len);
/*
 * Make the test directory, install into it (install_tree: the prefix in
 * @dest) and build tests/examples/@name.c against the installed files as a
 * user would, `cc -O2 $(pkg-config --cflags --libs sheaf)`, into
 * TEST_DIR/@name (REQUIREs success).  0, or -1 when pkg-config or cc is
 * missing (the caller SKIPs).  @ldenv gets "LD_LIBRARY_PATH=<the installed
 * lib>" for running it.
 */
int build_example(const char *name, char *dest, size_t len, char *ldenv, size_t ldlen);

/* The settings of a unit file: its lines without comments and blank lines
 * (a new string). */
char *unit_settings(const char *path);
/* Whether @settings has the line @line. */
int has_line(const char *settings, const char *line);

#endif
