/*
 * util_proc.h - process, file and socket helpers shared by the integration
 * tests that run real processes (test_daemon*, test_sheafctl*, test_systemd,
 * test_systemd_units, test_install, test_link, test_socket_abuse, test_fork,
 * test_timeout and others).
 *
 * Nothing here calls Check or knows about a test: every function reports
 * through its return value (a status, -errno, or a message in a caller's
 * buffer, NULL meaning success), and each test puts its own REQUIRE or
 * ck_assert around the call.  The one piece of state is the table of
 * tracked child processes, which a test's failure hook ends with
 * kill_tracked().
 */
#ifndef SHEAF_TESTS_UTIL_PROC_H
#define SHEAF_TESTS_UTIL_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tests/helpers/util_check.h"

/* ---- time ------------------------------------------------------------------ */

int64_t now_ms(void);                   /* CLOCK_MONOTONIC */
void sleep_us(unsigned us);             /* through EINTR */
void sleep_ms(unsigned ms);

static inline uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* A 64-bit mixer (murmur3's finaliser): test patterns from counters. */
static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* ---- descriptors and sockets ------------------------------------------------ */

/* Read exactly @n bytes within @ms: 0, or -1 on EOF, error or timeout. */
int read_full(int fd, void *buf, size_t n, int ms);
/* Write all @n bytes: 0, or -1. */
int write_full(int fd, const void *buf, size_t n);
/* A connected SOCK_STREAM Unix socket (close-on-exec), or -errno
 * (-ENAMETOOLONG when @path does not fit sun_path). */
int unix_connect(const char *path);

/* ---- files ----------------------------------------------------------------- */

/* The whole file as a NUL-terminated string (free it), or NULL. */
char *read_file(const char *path);
/* 1 when the file exists and contains @needle. */
int file_contains(const char *path, const char *needle);
/* Occurrences of @needle in the file (0 when unreadable). */
int count_in_file(const char *path, const char *needle);
/* Replace the file's contents with @text: 0, or -1. */
int write_text(const char *path, const char *text);
/* Print the last @max_lines lines of a file (all when @max_lines <= 0) to
 * stderr between marker lines naming @title (NULL: the path). */
void dump_file(const char *title, const char *path, int max_lines);
/* mkdtemp of template @tmpl (ending in XXXXXX) into @buf: 0, or -1 with
 * errno (ENAMETOOLONG when it does not fit). */
int make_temp_dir(char *buf, size_t len, const char *tmpl);
/* Remove @path and, when it is a directory, everything below it. */
void rm_tree(const char *path);
/* The directory of this program (/proc/self/exe), followed by "/@rel"
 * when @rel is not NULL: 0, or -1 with errno. */
int exe_dir(char *buf, size_t len, const char *rel);

/* ---- processes ------------------------------------------------------------- */

/* CPU time (utime + stime, /proc/@pid/stat) of process @pid in seconds,
 * or -1. */
double cpu_seconds(pid_t pid);

/* One thread's CPU time: its id, name (/proc/PID/task/TID/comm) and time
 * on a CPU in ns (schedstat; utime + stime where the kernel has none). */
struct thread_cpu {
	int tid;
	char comm[16];
	uint64_t ns;
};

/* The threads of process @pid, at most @max of them, into @t: how many,
 * or -1 when /proc/@pid/task cannot be read. */
int thread_cpu(pid_t pid, struct thread_cpu *t, int max);

/* The CPU in ns the threads of @now used since @then (the same process,
 * read before); "comm tid: N ms, ..." of those that used any into @buf. */
uint64_t thread_cpu_diff(const struct thread_cpu *then, int nthen,
		     const struct thread_cpu *now, int nnow, char *buf, size_t len);
/* "exit N", "signal N" or "status 0xN" for a wait status. */
const char *status_str(int st, char *buf, size_t len);
/* The wait status of a normal exit 0. */
int exited_ok(int st);
/* Wait up to @ms for child @pid to end (pidfd + poll, no busy wait).
 * Returns 1 with *@status, 0 on timeout, -1 when @pid is not our child. */
int wait_pid(pid_t pid, int ms, int *status);

/* Children to end when a test fails (64 at most; more are not tracked). */
void track(pid_t pid);
void untrack(pid_t pid);
void kill_tracked(void);                /* SIGKILL each, and forget them */

/* Fork a child running _exit(@fn(@arg)) that dies with this process; it is
 * tracked, and a failing REQUIRE in it ends it with status 1 (it never calls
 * Check).  Returns its pid, or -1 with errno. */
pid_t fork_fn(int (*fn)(void *), void *arg);

/* How spawn_proc starts a program. */
struct spawn_opts {
	const char *exe;             /* the program; NULL: argv[0] ($PATH when bare) */
	const char *out, *err;       /* stdout, stderr (NULL: /dev/null); the same
					string for both shares one descriptor */
	int append;                  /* O_APPEND rather than O_TRUNC */
	int stdin_null;              /* stdin from /dev/null (else inherited) */
	const char *const *env;      /* "NAME=VALUE" to set ("NAME=@pid": the
					child's own pid), "-NAME" to unset */
	const int *pass;             /* descriptors to place at 3, 4, ... */
	int npass;                   /* at most 8 */
};

/* Fork and exec @argv as @o says (NULL: the defaults); the child dies with
 * this process and is not tracked.  Its pid, or -1 with errno. */
pid_t spawn_proc(const char *const argv[], const struct spawn_opts *o);

/* Wait up to @ms for child @pid to end (then kill and reap it); untrack
 * it: NULL with *@status, or what went wrong (naming it @what). */
const char *finish_proc(pid_t pid, int ms, const char *what, int *status, char *err,
			size_t len);

/* Run @argv to its end, tracked meanwhile (killed and reaped after @ms):
 * NULL with *@status, or what went wrong (in @err). */
const char *run_proc(const char *const argv[], const struct spawn_opts *o, int ms,
		     int *status, char *err, size_t len);

/* Wait up to @ms for client process @pid (tracked) and require exit 0:
 * NULL (untracked), or what went wrong, naming it @what. */
const char *reap_err(pid_t pid, int ms, const char *what, char *err, size_t len);

/* Start a server with @argv (as @o says) and wait up to @ms until Unix
 * socket @sock accepts a connection.  NULL with *@pid; or what went wrong,
 * *@pid then its pid when it still runs, 0 when it exited (reaped). */
const char *start_listening(const char *const argv[], const struct spawn_opts *o,
			    const char *sock, int ms, pid_t *pid, char *err, size_t len);

/* Require that child @pid still runs, send it @sig and wait up to @ms for
 * its end: NULL with *@status (not untracked), or what went wrong. */
const char *signal_wait(pid_t pid, int sig, int ms, int *status, char *err, size_t len);

/* CREQ: another name of REQUIRE (util_check.h), which works in a child
 * process too; code written with CREQ builds with it. */
#define CREQ(cond, ...) REQUIRE(cond, __VA_ARGS__)

#endif
