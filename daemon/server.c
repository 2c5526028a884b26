/*
 * server.c - sheafd's control socket: listening (refusing to start when a
 * live daemon holds the socket), accepting with peer credentials, reading
 * frames, handing each to rpc_handle (rpc.c) and sending the reply it
 * packs (with a descriptor for Attach).  Thin: parsing and acting live in
 * rpc.c, which never calls back here.  Connection state (struct conn) is
 * this file's; registry.c only marks a connection to close.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "daemon.h"
#include "log.h"
#include "proto/frame.h"
#include "proto/sheaf.pb-c.h"

static void on_accept(evutil_socket_t fd, short what, void *arg);
static void on_read(evutil_socket_t fd, short what, void *arg);
static void on_write(evutil_socket_t fd, short what, void *arg);

static int mkdir_parent(const char *path)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash == NULL || slash == dir)
		return 0;
	*slash = '\0';
	if (mkdir(dir, 0750) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int server_listen(struct daemon *d, int activated, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char lock[sizeof(sa.sun_path) + 8];
	int fd, rc;

	if (activated >= 0) {
		/* systemd owns the socket file and guarantees one instance. */
		fcntl(activated, F_SETFL, fcntl(activated, F_GETFL) | O_NONBLOCK);
		d->listen_fd = activated;
		d->socket_activated = 1;
		goto listen;
	}
	rc = mkdir_parent(d->cfg.socket);
	if (rc != 0) {
		snprintf(err, errlen, "cannot create the directory of %s: %s",
			 d->cfg.socket, strerror(-rc));
		return -1;
	}
	/* One daemon per socket: a lock file next to it, held while we run. */
	snprintf(lock, sizeof(lock), "%s.lock", d->cfg.socket);
	d->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (d->lock_fd < 0) {
		snprintf(err, errlen, "%s: %s", lock, strerror(errno));
		return -1;
	}
	if (flock(d->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		snprintf(err, errlen, "another sheafd is serving %s (lock %s held)",
			 d->cfg.socket, lock);
		close(d->lock_fd);
		d->lock_fd = -1;
		return -1;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", d->cfg.socket);
	unlink(sa.sun_path);            /* stale: we hold the lock */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    chmod(sa.sun_path, 0660) < 0 || listen(fd, 128) < 0) {
		snprintf(err, errlen, "listen on %s: %s", d->cfg.socket, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	d->listen_fd = fd;
listen:
	d->ev_listen = event_new(d->base, d->listen_fd, EV_READ | EV_PERSIST, on_accept, d);
	event_add(d->ev_listen, NULL);
	return 0;
}

static void conn_free(struct conn *c)
{
	struct daemon *d = c->d;

	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		d->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	event_free(c->ev_read);
	event_free(c->ev_write);
	close(c->fd);
	free(c->in);
	free(c->out);
	free(c);
}

/* Close a connection; an attached client's repair follows when its process is gone (registry.c). */
static void conn_close(struct conn *c, const char *why)
{
	log_debug("connection of pid %d closed: %s", (int)c->peer.pid, why);
	if (c->peer.client >= 0)
		daemon_client_gone(c->d, c);
	conn_free(c);
}

void server_close_all(struct daemon *d)
{
	while (d->conns != NULL)
		conn_free(d->conns);
	if (d->ev_listen != NULL)
		event_free(d->ev_listen);
	d->ev_listen = NULL;
	if (d->listen_fd >= 0) {
		close(d->listen_fd);
		if (!d->socket_activated)
			unlink(d->cfg.socket);
	}
	d->listen_fd = -1;
	if (d->lock_fd >= 0)
		close(d->lock_fd);
	d->lock_fd = -1;
}

static struct conn *conn_new(struct daemon *d, int fd, const struct ucred *cred)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->d = d;
	c->fd = fd;
	c->peer.pid = cred->pid;
	c->peer.uid = cred->uid;
	c->peer.gid = cred->gid;
	c->peer.client = -1;
	c->out_fd = -1;
	c->ev_read = event_new(d->base, fd, EV_READ | EV_PERSIST, on_read, c);
	c->ev_write = event_new(d->base, fd, EV_WRITE | EV_PERSIST, on_write, c);
	c->next = d->conns;
	if (d->conns != NULL)
		d->conns->prev = c;
	d->conns = c;
	event_add(c->ev_read, NULL);
	return c;
}

static void on_accept(evutil_socket_t lfd, short what, void *arg)
{
	struct daemon *d = arg;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct conn *c;
	int fd;

	(void)what;
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
	    (c = conn_new(d, fd, &cred)) == NULL) {
		close(fd);
		return;
	}
	d->n.connections++;
	len = sizeof(c->peer.groups);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, c->peer.groups, &len) == 0)
		c->peer.ngroups = (int)(len / sizeof(gid_t));
	if (!peer_allowed(d, &c->peer)) {
		d->n.denied++;
		log_warn("refused pid %d uid %u gid %u: not in the allow lists",
			 (int)cred.pid, cred.uid, cred.gid);
		c->closing = 2;     /* answer its first request with DENIED, close */
		return;
	}
	log_debug("connection from pid %d uid %u", (int)cred.pid, cred.uid);
}

/* Queue a serialised response on @c (with @pass_fd when >= 0). */
static int conn_send(struct conn *c, const void *msg, size_t len, int pass_fd)
{
	size_t need = c->out_len + FRAME_HDR + len;
	uint8_t *p;

	if (need > c->d->cfg.max_frame * 4u + 64) {
		log_warn("pid %d does not read its replies: closing", (int)c->peer.pid);
		return -1;
	}
	p = realloc(c->out, need);
	if (p == NULL)
		return -1;
	c->out = p;
	if (pass_fd >= 0 && c->out_len == c->out_off)
		c->out_fd = pass_fd;
	frame_put_len(c->out + c->out_len, (uint32_t)len);
	memcpy(c->out + c->out_len + FRAME_HDR, msg, len);
	c->out_len = need;
	event_add(c->ev_write, NULL);
	return 0;
}

static void on_write(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;

	(void)what;
	while (c->out_off < c->out_len) {
		struct iovec iov = { c->out + c->out_off, c->out_len - c->out_off };
		union frame_cmsg u;
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t k;

		if (c->out_fd >= 0)
			frame_attach_fd(&mh, &u, c->out_fd);
		k = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;        /* wait for the next EV_WRITE */
			conn_close(c, strerror(errno));
			return;
		}
		c->out_off += (size_t)k;
		c->out_fd = -1;
	}
	c->out_off = c->out_len = 0;
	event_del(c->ev_write);
	if (c->closing)
		conn_close(c, "closed by the daemon");
}

/* Answer one request frame: rpc.c makes the reply, we queue it.  A reply
 * that cannot be made or queued, or one that says so, closes @c. */
static void handle_frame(struct conn *c, const uint8_t *buf, size_t len)
{
	struct rpc_out out;

	if (rpc_handle(c->d, &c->peer, buf, len, &out) != 0 ||
	    conn_send(c, out.buf, out.len, out.pass_fd) != 0 || out.close_after)
		c->closing = 1;
	rpc_out_free(&out);
}

/* Hand every whole frame in the input buffer to handle_frame (not static:
 * tests/fuzz/fuzz_rpc.c feeds it directly). */
int consume_frames(struct conn *c)
{
	struct daemon *d = c->d;
	size_t off = 0;

	while (c->in_len - off >= FRAME_HDR && !c->closing) {
		uint32_t n = frame_get_len(c->in + off);

		if (n > d->cfg.max_frame) {
			d->n.oversize_frames++;
			log_warn("pid %d sent a %u-byte frame (cap %u): closing", (int)c->peer.pid,
				 n, d->cfg.max_frame);
			return -1;
		}
		if (c->in_len - off < FRAME_HDR + (size_t)n)
			break;
		handle_frame(c, c->in + off + FRAME_HDR, n);
		off += FRAME_HDR + n;
	}
	memmove(c->in, c->in + off, c->in_len - off);
	c->in_len -= off;
	return 0;
}

/* Denied peers get one reply naming the cause, then the door. */
static void deny(struct conn *c)
{
	Sheaf__V1__Response r = SHEAF__V1__RESPONSE__INIT;
	uint8_t buf[256];
	char msg[128];

	snprintf(msg, sizeof(msg), "uid %u is not allowed by sheafd's allow lists",
		 (unsigned)c->peer.uid);
	r.status = SHEAF__V1__STATUS__STATUS_DENIED;
	r.error = msg;
	event_del(c->ev_read);
	c->closing = 1;
	if (sheaf__v1__response__get_packed_size(&r) > sizeof(buf) ||
	    conn_send(c, buf, sheaf__v1__response__pack(&r, buf), -1) != 0)
		conn_close(c, "denied");
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	size_t cap = (size_t)c->d->cfg.max_frame + FRAME_HDR;
	ssize_t k;

	(void)what;
	if (c->closing == 2) {
		deny(c);
		return;
	}
	if (c->in_cap - c->in_len < 4096 && c->in_cap < cap) {
		size_t ncap = c->in_cap ? c->in_cap * 2 : 8192;
		uint8_t *p;
		if (ncap > cap)
			ncap = cap;
		p = realloc(c->in, ncap);
		if (p == NULL) {
			conn_close(c, "out of memory");
			return;
		}
		c->in = p;
		c->in_cap = ncap;
	}
	k = read(fd, c->in + c->in_len, c->in_cap - c->in_len);
	if (k == 0) {
		conn_close(c, c->in_len ? "EOF mid-frame" : "EOF");
		return;
	}
	if (k < 0) {
		if (errno != EAGAIN && errno != EINTR)
			conn_close(c, strerror(errno));
		return;
	}
	c->in_len += (size_t)k;
	if (consume_frames(c) != 0) {
		conn_close(c, "oversize frame");
		return;
	}
	if (c->closing) {
		event_del(c->ev_read);
		if (c->out_len == c->out_off)
			conn_close(c, "closed by the daemon");
	}
}
