/*
 * util_notify.h - playing systemd's part for sheafd without systemd as
 * PID 1 (test_systemd, test_install): a notification socket that takes
 * sheafd's READY=1, STATUS=, WATCHDOG=1, RELOADING=1, STOPPING=1 and keeps
 * the fd store (FDSTORE=1 with the pool's memfds, FDNAME=pool-meta and
 * pool-shared; FDSTOREREMOVE=1 empties a name's slot), and sheafd started as systemd starts it (NOTIFY_SOCKET,
 * LISTEN_FDS with the socket unit's socket and the stored memfds,
 * WATCHDOG_USEC).  Failures go through
 * REQUIRE; paths are in the test's directory (util_deploy.h).
 */
#ifndef SHEAF_TESTS_UTIL_NOTIFY_H
#define SHEAF_TESTS_UTIL_NOTIFY_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

struct notify {
	int sock;
	char path[108];
	int ready, stopping, reloading, watchdog, fdstore, status;
	int64_t wd_ms[512];
	char last_status[512];
	int store_fd;               /* the fd store: the first stored META memfd */
	int store_shared_fd;        /* ... and SHARED one (FDNAME=pool-shared) */
	int store_same, store_other;/* later FDSTOREs: the same file, or another */
	int fdstore_removed;        /* FDSTOREREMOVE=1 (its FDNAME's slot emptied) */
	char fdname[64];            /* the META memfd's FDNAME */
	char log[PATH_MAX];         /* every message, for failures */
};

/* Bind TEST_DIR/notify (its messages logged to TEST_DIR/notify.log). */
void notify_open(struct notify *n);
void notify_close(struct notify *n);
/* Receive one notification within @ms and account for it: 1, or 0. */
int notify_recv(struct notify *n, int ms);
/* Receive until *@counter reaches @target: 1, or 0 after @ms. */
int notify_wait(struct notify *n, const int *counter, int target, int ms);
/* Take every notification that arrives within @ms. */
void notify_drain(struct notify *n, int ms);

/*
 * systemd's part while a test does other work: a thread that takes
 * sheafd's notifications (STATUS= on each attach and detach), or sheafd's
 * next one blocks once the socket's queue is full, as under a systemd
 * that stopped reading.  Stop it before svc_start/svc_stop read @n.
 */
struct notify_drainer {
	struct notify *n;
	pthread_t thread;
	_Atomic int on;
};
void notify_drainer_start(struct notify_drainer *d, struct notify *n);
void notify_drainer_stop(struct notify_drainer *d);

/* sheafd run as a service. */
struct svc {
	pid_t pid;
	int gen;                    /* how many sheafd processes so far */
	char sock[PATH_MAX];
	char log[PATH_MAX];
	/* sheafd's flags after --foreground --socket SOCK, NULL-terminated;
	 * NULL: --nodes 2 --size 256M --log-level debug (2 simulated nodes). */
	const char *const *flags;
};

/*
 * Start sheafd (the build's) with NOTIFY_SOCKET=@n and the descriptors
 * systemd would pass: @listen_fd (the socket unit's, or -1) then, when
 * @adopt, the fd store's two memfds, with LISTEN_FDS, LISTEN_PID (the new
 * process's own pid) and LISTEN_FDNAMES.  @wd_usec > 0 sets WATCHDOG_USEC/WATCHDOG_PID.
 * Waits for READY=1 and requires that the socket accepts by then.
 */
void svc_start(struct svc *d, struct notify *n, int listen_fd, int adopt, unsigned wd_usec);
/* SIGTERM (STOPPING=1, exit 0) or SIGKILL; waits for the end. */
void svc_stop(struct svc *d, struct notify *n, int sig);

#endif
