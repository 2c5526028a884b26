/*
 * util_sheafctl.h - the harness of the sheafctl tests (test_sheafctl*.c):
 * a sheafd per test as a Check fixture, running the CLI with fork/exec and
 * capturing stdout, stderr and the exit status, reading its table and JSON
 * output (util_json.h), and workloads: forked children using libsheaf
 * (sheaf_connect, sheaf_cache_open, alloc/free) that report through a
 * shared page, never through Check.
 */
#ifndef SHEAF_TESTS_UTIL_SHEAFCTL_H
#define SHEAF_TESTS_UTIL_SHEAFCTL_H

#include <check.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_json.h"

/* The kernel's SLUB counter names, as sheafctl prints them. */
extern const char *const kernel_counters[];
extern const size_t NKC;

/* The test's daemon (2 simulated nodes, 512 MiB, 2048 sheaves), started by
 * the fixture in a fresh /tmp/sheafctl-test.XXXXXX. */
extern struct dmn D;

/* Add test @t to @s in a test case of its own named @name, with the
 * daemon fixture. */
void ctl_add(Suite *s, const char *name, const TTest *t, int timeout);
/* Stop the daemon now (SIGTERM, SIGKILL after 5 s) and remove its directory. */
void daemon_stop(void);

/* ---- running sheafctl ------------------------------------------------------------ */

struct run {
	int status;                  /* exit status, 128+signal when killed */
	char *out, *err;
};

void run_free(struct run *r);
/* Run sheafctl with @argv (NULL-terminated, without the program name);
 * "-s SOCKET" goes first when @with_socket.  Returns the status. */
int run_argv(struct run *r, int with_socket, char **argv);

#define CTL(r, ...) run_argv((r), 1, (char *[]){ __VA_ARGS__, NULL })
#define CTL_NOSOCK(r, ...) run_argv((r), 0, (char *[]){ __VA_ARGS__, NULL })

/* Run (with the socket), require exit 0 and no stderr; the parsed stdout. */
struct jv *ctl_ok_json(char **argv);

#define CTLJ(...) ctl_ok_json((char *[]){ __VA_ARGS__, "-o", "json", NULL })

/* Require exit status @status (the output in the message otherwise). */
void expect(struct run *r, int status, const char *what);
int starts(const char *s, const char *prefix);
/* The line of @text that starts with @prefix (after blanks), or NULL. */
const char *line_with(const char *text, const char *prefix);
/* The number after @prefix on its line ("  objects   1234"). */
uint64_t table_value(const char *text, const char *prefix);
/* `sheafctl create NAME SIZE`, required to succeed. */
void create_cache(const char *name, const char *size);
/* Every figure of a cache's stats object (sheafctl stats -o json); per
 * node with @nodes. */
void check_stats_obj(const struct jv *cs, uint64_t in_use, uint64_t size, int nodes);

/* ---- workloads ------------------------------------------------------------------- */

enum wl_mode {
	WL_HOLD,                     /* allocate n, hold them until stopped */
	WL_LOOP,                     /* allocate and free n, again and again */
	WL_BURST,                    /* allocate and free n once, stay attached */
};

struct wl_ctl {
	_Atomic int stop;            /* parent -> child */
	_Atomic int ready;           /* child -> parent */
	_Atomic uint64_t batches;
	_Atomic int failed;
	char msg[256];
};

struct wl {
	pid_t pid;
	struct wl_ctl *ctl;
};

/* Fork a workload on cache @cache of D. */
void wl_start(struct wl *w, const char *cache, enum wl_mode mode, size_t n);
/* Wait for it to be ready (or, with @batches, that many batches). */
void wl_wait(struct wl *w, uint64_t batches);
/* Stop the workload and require a clean exit. */
void wl_stop(struct wl *w);
/* libsheaf's pool checker from a connected client (forked: this process
 * stays free of pools), required to pass. */
void pool_check_ok(void);

#endif
