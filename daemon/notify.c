/* notify.c - sd_notify protocol and socket activation, done by hand (notify.h). */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "notify.h"
#include "proto/frame.h"

int notify_send(const char *msg, int fd)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct iovec iov = { (void *)msg, strlen(msg) };
	union frame_cmsg u;
	struct msghdr mh = { .msg_name = &sa, .msg_iov = &iov, .msg_iovlen = 1 };
	size_t len;
	int s, rc = 0;

	if (path == NULL || path[0] == '\0')
		return 0;
	len = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sa.sun_path))
		return -EINVAL;
	memcpy(sa.sun_path, path, len);
	if (path[0] == '@')
		sa.sun_path[0] = '\0';          /* abstract namespace */
	mh.msg_namelen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	if (fd >= 0)
		frame_attach_fds(&mh, &u, &fd, 1);
	s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	/* Never block: a notify socket nobody reads must not stall sheafd. */
	if (sendmsg(s, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		rc = -errno;
	close(s);
	return rc;
}

static int env_is_our_pid(const char *name)
{
	const char *v = getenv(name);
	return v != NULL && strtol(v, NULL, 10) == (long)getpid();
}

uint64_t notify_watchdog_usec(void)
{
	const char *v = getenv("WATCHDOG_USEC");

	if (v == NULL || (getenv("WATCHDOG_PID") != NULL && !env_is_our_pid("WATCHDOG_PID")))
		return 0;
	return strtoull(v, NULL, 10);
}

int activation_fds(void)
{
	const char *n = getenv("LISTEN_FDS");
	long k;

	if (n == NULL || !env_is_our_pid("LISTEN_PID"))
		return 0;
	k = strtol(n, NULL, 10);
	if (k <= 0 || k > 64)
		return 0;
	for (long i = 0; i < k; i++)
		fcntl(ACTIVATION_FD_START + (int)i, F_SETFD, FD_CLOEXEC);
	return (int)k;
}

const char *activation_fd_name(int i, char *buf, unsigned len)
{
	const char *names = getenv("LISTEN_FDNAMES");
	const char *p = names;

	buf[0] = '\0';
	if (names == NULL)
		return buf;
	for (int k = 0; k < i && p != NULL; k++) {
		p = strchr(p, ':');
		if (p != NULL)
			p++;
	}
	if (p != NULL) {
		const char *end = strchr(p, ':');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		if (n >= len)
			n = len - 1;
		memcpy(buf, p, n);
		buf[n] = '\0';
	}
	return buf;
}
