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

/* Room for one descriptor in a message's control data. */
union frame_cmsg {
	struct cmsghdr h;
	char buf[CMSG_SPACE(sizeof(int))];
};

/* Attach descriptor @fd to @mh as SCM_RIGHTS, in @u. */
static inline void frame_attach_fd(struct msghdr *mh, union frame_cmsg *u, int fd)
{
	struct cmsghdr *c;

	memset(u, 0, sizeof(*u));
	mh->msg_control = u->buf;
	mh->msg_controllen = sizeof(u->buf);
	c = CMSG_FIRSTHDR(mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
}

/*
 * Send one frame (header + @len bytes), blocking until written.  When
 * @pass_fd >= 0 it travels as SCM_RIGHTS with the first byte.
 */
int frame_send(int sock, const void *msg, size_t len, int pass_fd);

/*
 * Receive one frame into a malloc'd buffer (*@msg, *@len; the caller frees
 * it), waiting at most @timeout_ms (< 0: forever).  A descriptor passed with
 * the frame is stored in *@recv_fd (else -1; @recv_fd may be NULL, then any
 * passed descriptor is closed).
 */
int frame_recv(int sock, uint8_t **msg, size_t *len, uint32_t cap,
	       int timeout_ms, int *recv_fd);

#endif
