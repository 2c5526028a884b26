/* frame.c - blocking framed send/receive with descriptor passing (frame.h). */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "frame.h"

static int send_all(int sock, const uint8_t *p, size_t n, const int *fds, unsigned nfds)
{
	while (n > 0) {
		struct iovec iov = { (void *)p, n };
		union frame_cmsg u;
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t k;

		if (nfds > 0)
			frame_attach_fds(&mh, &u, fds, nfds);
		k = sendmsg(sock, &mh, MSG_NOSIGNAL);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				struct pollfd pf = { sock, POLLOUT, 0 };
				poll(&pf, 1, 1000);
				continue;
			}
			return errno == ECONNRESET ? -EPIPE : -errno;
		}
		p += k;
		n -= (size_t)k;
		nfds = 0;
	}
	return 0;
}

int frame_send(int sock, const void *msg, size_t len, const int *fds, unsigned nfds)
{
	uint8_t *buf;
	int rc;

	if (len > UINT32_MAX || nfds > FRAME_MAX_FDS)
		return -EMSGSIZE;
	buf = malloc(FRAME_HDR + len);
	if (buf == NULL)
		return -ENOMEM;
	frame_put_len(buf, (uint32_t)len);
	if (len > 0)
		memcpy(buf + FRAME_HDR, msg, len);
	rc = send_all(sock, buf, FRAME_HDR + len, fds, nfds);
	free(buf);
	return rc;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Keep the descriptors of SCM_RIGHTS message @c in the free slots of
 * @fds[0..FRAME_MAX_FDS); close any that do not fit. */
static void take_fds(struct cmsghdr *c, int *fds)
{
	size_t cnt = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
	unsigned slot = 0;

	for (size_t i = 0; i < cnt; i++) {
		int got;

		memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
		while (slot < FRAME_MAX_FDS && fds[slot] >= 0)
			slot++;
		if (slot < FRAME_MAX_FDS)
			fds[slot] = got;
		else
			close(got);
	}
}

/* Read exactly @n bytes, collecting passed descriptors into @fds. */
static int recv_all(int sock, uint8_t *p, size_t n, int64_t deadline, int *fds)
{
	while (n > 0) {
		struct iovec iov = { p, n };
		union frame_cmsg u;
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
		struct pollfd pf = { sock, POLLIN, 0 };
		int wait = -1;
		ssize_t k;

		if (deadline >= 0) {
			wait = (int)(deadline - now_ms());
			if (wait <= 0)
				return -ETIMEDOUT;
		}
		if (poll(&pf, 1, wait) == 0)
			return -ETIMEDOUT;
		k = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
		if (k < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return errno == ECONNRESET ? -EPIPE : -errno;
		}
		if (k == 0)
			return -EPIPE;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
				take_fds(c, fds);
		}
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Close the descriptors in @fds[0..FRAME_MAX_FDS). */
static void close_fds(int *fds)
{
	for (unsigned i = 0; i < FRAME_MAX_FDS; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
}

int frame_recv(int sock, uint8_t **msg, size_t *len, uint32_t cap,
	       int timeout_ms, int *recv_fds)
{
	int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
	uint8_t hdr[FRAME_HDR];
	uint32_t n;
	int fds[FRAME_MAX_FDS], rc;

	for (unsigned i = 0; i < FRAME_MAX_FDS; i++)
		fds[i] = -1;
	*msg = NULL;
	*len = 0;
	rc = recv_all(sock, hdr, FRAME_HDR, deadline, fds);
	if (rc == 0) {
		n = frame_get_len(hdr);
		if (n == 0 || n > cap) {
			rc = -EMSGSIZE;
		} else if ((*msg = malloc(n)) == NULL) {
			rc = -ENOMEM;
		} else {
			rc = recv_all(sock, *msg, n, deadline, fds);
			if (rc == 0)
				*len = n;
		}
	}
	if (rc != 0) {
		free(*msg);
		*msg = NULL;
		close_fds(fds);
		return rc;
	}
	if (recv_fds != NULL)
		memcpy(recv_fds, fds, sizeof(fds));
	else
		close_fds(fds);
	return 0;
}
