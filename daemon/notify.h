/*
 * notify.h - the systemd service notification protocol, spoken directly
 * (a datagram to $NOTIFY_SOCKET; no libsystemd dependency: the protocol is
 * a few lines of text and an optional SCM_RIGHTS descriptor), and socket
 * activation ($LISTEN_PID/$LISTEN_FDS/$LISTEN_FDNAMES).
 * Who may call: daemon/main.c and daemon/status.c.  Without $NOTIFY_SOCKET
 * every call is a no-op.
 */
#ifndef SHEAF_DAEMON_NOTIFY_H
#define SHEAF_DAEMON_NOTIFY_H

#include <stdint.h>

/* Send @msg ("READY=1\nSTATUS=..."); with @fd >= 0 it travels as
 * SCM_RIGHTS (for FDSTORE=1).  0, or -errno. */
int notify_send(const char *msg, int fd);

/* The watchdog period in microseconds ($WATCHDOG_USEC for this pid), or 0. */
uint64_t notify_watchdog_usec(void);

/* Descriptors passed by systemd (socket activation, fd store): the first is
 * SD_LISTEN_FDS_START (3).  Returns how many, 0 when none are for us. */
int activation_fds(void);

/* Name systemd gave descriptor @i (0-based) in $LISTEN_FDNAMES, or "". */
const char *activation_fd_name(int i, char *buf, unsigned len);

#define ACTIVATION_FD_START 3

#endif
