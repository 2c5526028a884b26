/*
 * util_daemon.h - a real sheafd for a test, and the client processes that
 * talk to it: where the built programs are, a daemon per test in a fresh
 * temporary directory (started, waited for, stopped, its log shown when a
 * REQUIRE fails), and forked clients.  Used by test_daemon*, test_sheafctl*,
 * test_handles, test_timeout, test_fork and others, and (for the paths)
 * by test_systemd, test_systemd_units, test_install and test_link.
 *
 * Failures go through REQUIRE (util_check.h): the calls fail the test.
 */
#ifndef SHEAF_TESTS_UTIL_DAEMON_H
#define SHEAF_TESTS_UTIL_DAEMON_H

#include <sys/types.h>

#include "client/sheaf.h"

/* ---- the programs under test --------------------------------------------------- */

/*
 * A test program runs from BUILD/tests/TIER (BUILD is ROOT/build or
 * ROOT/build-SAN...; TIER is unit, lib, daemon ...): BUILD is the parent of
 * the nearest directory named "tests" above it, and the programs it tests
 * are built there.  These are absolute paths; require_binaries() in main
 * makes sure they exist.
 */
const char *build_dir(void);             /* BUILD */
const char *root_dir(void);              /* ROOT: the source tree */
const char *sheafd_bin(void);            /* BUILD/daemon/sheafd */
const char *sheafctl_bin(void);          /* BUILD/client/sheafctl/sheafctl */
/* "", "address" or "thread": the SAN= of this build (BUILD's name). */
const char *build_san(void);

/* Exit 1 with a message naming @prog unless sheafd and sheafctl are built. */
void require_binaries(const char *prog);

/* ---- a daemon per test ---------------------------------------------------------- */

struct dmn {
	pid_t pid;                       /* 0 (or -1) when none runs */
	int failed;                      /* a REQUIRE failed: keep the directory */
	char dir[64];                    /* the test's temporary directory */
	char sock[128];                  /* DIR/s.sock */
	char log[128];                   /* DIR/LOGNAME: sheafd's stdout and stderr */
};

/*
 * A fresh directory (mkdtemp of @tmpl) with the socket and log paths in it.
 * From now until dmn_cleanup/dmn_end, a failing REQUIRE kills the tracked
 * children and this daemon, prints its log and keeps the directory.
 */
void dmn_init_at(struct dmn *d, const char *tmpl, const char *logname);
/* The same in /tmp/sheafd-test-XXXXXX, the log DIR/log. */
void dmn_init(struct dmn *d);
/* Start sheafd (sheafd_bin(), argv[0] only names it) with @argv, stdout and
 * stderr to the log, and wait until its socket accepts. */
void dmn_start_argv(struct dmn *d, char *const argv[]);
/* The usual daemon: 2 simulated nodes, 256 MiB, debug log; @extra flags
 * (NULL-terminated, may be NULL) go after the defaults. */
void dmn_start(struct dmn *d, const char *const *extra);
/* Whether it still runs (not reaped). */
int dmn_alive(struct dmn *d);
/* SIGTERM: require exit 0 within @ms and the socket gone. */
void dmn_stop(struct dmn *d, int ms);
/* Remove the test directory (when the test passed). */
void dmn_cleanup(struct dmn *d);
/* No verdict: SIGTERM (SIGKILL after 5 s) and remove the directory unless a
 * REQUIRE failed; for fixtures and atexit. */
void dmn_end(struct dmn *d);
/* Poll DaemonInfo until no client is attached (every dead one repaired). */
void wait_no_clients(struct dmn *d, int ms);

/* ---- client processes ------------------------------------------------------------- */

/* Fork a client process running @fn(@arg) (fork_fn); its return value is
 * its exit status.  It dies with the test process. */
pid_t fork_child(int (*fn)(void *), void *arg);
/* Wait for a client process and require exit status 0. */
void reap_ok(pid_t pid, int ms, const char *what);
/* In a client process: a connected pool, or the child fails. */
sheaf_pool_t *child_connect(const char *sock, const char *name);

#endif
