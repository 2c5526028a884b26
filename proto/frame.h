/*
 * frame.h - the control protocol's framing, shared by sheafd and libsheaf:
 * a 4-byte big-endian length, then that many bytes of a protobuf message.
 *
 * Who may call: the daemon (frame_get_len on its read buffer) and clients
 * (blocking frame_send / frame_recv).  Errors are negative errnos:
 *   -EMSGSIZE  a frame's length is over the cap (or zero);
 *   -EPIPE     the peer closed the connection (mid-frame included);
 *   -ETIMEDOUT no complete frame within the timeout;
 *   others from the system calls.
 */
#ifndef SHEAF_PROTO_FRAME_H
#define SHEAF_PROTO_FRAME_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#define FRAME_HDR          4u
#define FRAME_DEFAULT_CAP  (1u << 20)

static inline void frame_put_len(uint8_t *hdr, uint32_t len)
{
	hdr[0] = (uint8_t)(len >> 24);
	hdr[1] = (uint8_t)(len >> 16);
	hdr[2] = (uint8_t)(len >> 8);
	hdr[3] = (uint8_t)len;
}

static inline uint32_t frame_get_len(const uint8_t *hdr)
{
	return (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 |
	       (uint32_t)hdr[2] << 8 | hdr[3];
}

/* The most descriptors one frame carries (Attach: the pool's META and
 * SHARED memfds). */
#define FRAME_MAX_FDS      2u

/* Room for FRAME_MAX_FDS descriptors in a message's control data. */
union frame_cmsg {
	struct cmsghdr h;
	char buf[CMSG_SPACE(sizeof(int) * FRAME_MAX_FDS)];
};

/* Attach descriptors @fds[0..@n) (1 <= @n <= FRAME_MAX_FDS) to @mh as one
 * SCM_RIGHTS message, in @u. */
static inline void frame_attach_fds(struct msghdr *mh, union frame_cmsg *u,
				    const int *fds, unsigned n)
{
	struct cmsghdr *c;

	memset(u, 0, sizeof(*u));
	mh->msg_control = u->buf;
	mh->msg_controllen = CMSG_SPACE(sizeof(int) * n);
	c = CMSG_FIRSTHDR(mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * n);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
}

/*
 * Send one frame (header + @len bytes), blocking until written.  When @nfds
 * > 0, @fds[0..@nfds) (at most FRAME_MAX_FDS) travel as SCM_RIGHTS with the
 * first byte.
 */
int frame_send(int sock, const void *msg, size_t len, const int *fds, unsigned nfds);

/*
 * Receive one frame into a malloc'd buffer (*@msg, *@len; the caller frees
 * it), waiting at most @timeout_ms (< 0: forever).  Descriptors passed with
 * the frame are stored in @recv_fds[0..FRAME_MAX_FDS) in the order sent, the
 * rest set to -1 (@recv_fds may be NULL: then any passed descriptor is
 * closed; so are any beyond FRAME_MAX_FDS).
 */
int frame_recv(int sock, uint8_t **msg, size_t *len, uint32_t cap,
	       int timeout_ms, int *recv_fds);

#endif
