/* frame.c - blocking framed send/receive with descriptor passing (frame.h). */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "frame.h"

static int send_all(int sock, const uint8_t *p, size_t n, int pass_fd)
{
	while (n > 0) {
		struct iovec iov = { (void *)p, n };
		union frame_cmsg u;
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t k;

		if (pass_fd >= 0)
			frame_attach_fd(&mh, &u, pass_fd);
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
		pass_fd = -1;
	}
	return 0;
}

int frame_send(int sock, const void *msg, size_t len, int pass_fd)
{
	uint8_t *buf;
	int rc;

	if (len > UINT32_MAX)
		return -EMSGSIZE;
	buf = malloc(FRAME_HDR + len);
	if (buf == NULL)
		return -ENOMEM;
	frame_put_len(buf, (uint32_t)len);
	if (len > 0)
		memcpy(buf + FRAME_HDR, msg, len);
	rc = send_all(sock, buf, FRAME_HDR + len, pass_fd);
	free(buf);
	return rc;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Read exactly @n bytes, collecting a passed descriptor if any. */
static int recv_all(int sock, uint8_t *p, size_t n, int64_t deadline, int *fd)
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
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
				int got;
				memcpy(&got, CMSG_DATA(c), sizeof(int));
				if (*fd >= 0)
					close(got);     /* one descriptor per frame */
				else
					*fd = got;
			}
		}
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

int frame_recv(int sock, uint8_t **msg, size_t *len, uint32_t cap,
	       int timeout_ms, int *recv_fd)
{
	int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
	uint8_t hdr[FRAME_HDR];
	uint32_t n;
	int fd = -1, rc;

	*msg = NULL;
	*len = 0;
	rc = recv_all(sock, hdr, FRAME_HDR, deadline, &fd);
	if (rc == 0) {
		n = frame_get_len(hdr);
		if (n == 0 || n > cap) {
			rc = -EMSGSIZE;
		} else if ((*msg = malloc(n)) == NULL) {
			rc = -ENOMEM;
		} else {
			rc = recv_all(sock, *msg, n, deadline, &fd);
			if (rc == 0)
				*len = n;
		}
	}
	if (rc != 0) {
		free(*msg);
		*msg = NULL;
		if (fd >= 0)
			close(fd);
		return rc;
	}
	if (recv_fd != NULL)
		*recv_fd = fd;
	else if (fd >= 0)
		close(fd);
	return 0;
}
