/*
 * server.c - sheafd's control socket: listening (in a directory no other
 * user can write, refusing to start when a live daemon holds the socket),
 * accepting with peer credentials, reading frames, handing each to
 * rpc_handle (rpc.c) and sending the reply it packs (with a descriptor for
 * Attach).  Thin: parsing lives in rpc.c and acting in its handlers
 * (rpc_handlers.h), which never call back here; the pool check (check.c)
 * hands its reply to on_check_reply, which this file registers with
 * check_on_done.  Connection state (struct conn) is this file's; registry.c
 * only marks a connection to close.
 *
 * Abuse of the socket costs bounded memory and no spinning:
 *   - at most d->max_conns connections: over it, the oldest connection that
 *     has sent no complete request for PENDING_GRACE_MS is dropped for the
 *     new one, else the new one is closed at once;
 *   - out of descriptors (EMFILE/ENFILE) the listener is paused (the same
 *     eviction first), resumed when a connection closes or after
 *     ACCEPT_RETRY_MS, logged once per episode;
 *   - a peer the allow lists refuse gets DENIED and the door at accept;
 *   - idle_timeout: a connection that sends no complete first request, or
 *     stalls inside a frame, is closed (quiet attached clients are not);
 *   - the input buffer holds one frame (max_frame), the output queue
 *     OUT_CAP(max_frame): a peer that does not read its replies is closed.
 * Logs about a flood are rate-limited (struct ratelimit).
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "daemon.h"
#include "log.h"
#include "proto/frame.h"
#include "proto/paths.h"
#include "proto/sheaf.pb-c.h"

/* A connection silent this long may be dropped for a new one at the cap. */
#define PENDING_GRACE_MS  500
/* Accepting paused (no descriptor): try again this often. */
#define ACCEPT_RETRY_MS   100
/* Connections taken per listener wake-up. */
#define ACCEPT_BATCH      32
/* The most reply bytes queued for a peer that does not read them. */
#define OUT_CAP(max_frame) ((size_t)(max_frame) * 4u + 64u)

static void on_accept(evutil_socket_t fd, short what, void *arg);
static void on_read(evutil_socket_t fd, short what, void *arg);
static void on_write(evutil_socket_t fd, short what, void *arg);
static void on_check_reply(struct daemon *d, struct rpc_out *out);

/* ---- rate-limited logging ------------------------------------------------ */

/* At most RL_BURST lines per RL_WINDOW_S seconds for one kind of event;
 * the next line allowed says how many were left out. */
#define RL_BURST     5
#define RL_WINDOW_S  10

struct ratelimit {
	time_t start;
	unsigned n, dropped;
};

static struct ratelimit rl_cap, rl_denied, rl_idle, rl_out, rl_fds;

/* 1 when a line may be logged now, with *@dropped the lines left out since
 * the last one. */
static int rl_allow(struct ratelimit *r, unsigned *dropped)
{
	time_t now = time(NULL);

	if (now - r->start >= RL_WINDOW_S) {
		r->start = now;
		r->n = 0;
	}
	if (r->n >= RL_BURST) {
		r->dropped++;
		return 0;
	}
	r->n++;
	*dropped = r->dropped;
	r->dropped = 0;
	return 1;
}

static int64_t ms_since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (int64_t)(now.tv_sec - t->tv_sec) * 1000 + (now.tv_nsec - t->tv_nsec) / 1000000;
}

/* ---- the socket's directory ---------------------------------------------- */

/*
 * The directory of the socket must be one no other user can change: owned
 * by us or root, and not writable by group or others unless sticky (there
 * nobody else may remove or rename our socket).  Otherwise another user
 * could swap in a socket of its own and talk to our clients (they check
 * the server's uid too, proto/peer.h).  The default path's directory
 * (/tmp/sheafd-UID, $XDG_RUNTIME_DIR/sheaf) must also not be a symbolic
 * link and not be writable by anyone else at all, sticky or not.  We make
 * it (0750) when it is missing.
 */
static int check_socket_dir(const char *sock, char *err, size_t errlen)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)], def[sizeof(dir)], tmp[sizeof(dir)];
	int is_default;
	struct stat st;

	sheaf_default_socket(def, sizeof(def), 0);
	is_default = strcmp(sock, def) == 0;
	snprintf(tmp, sizeof(tmp), "%s", sock);
	snprintf(dir, sizeof(dir), "%s", dirname(tmp));
	if (mkdir(dir, 0750) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create the directory of %s: %s", sock,
			 strerror(errno));
		return -1;
	}
	if ((is_default ? lstat(dir, &st) : stat(dir, &st)) < 0) {
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s, the directory of the socket, is not a directory%s",
			 dir, S_ISLNK(st.st_mode) ? " but a symbolic link" : "");
		return -1;
	}
	if (st.st_uid != geteuid() && st.st_uid != 0) {
		snprintf(err, errlen, "%s, the directory of the socket, belongs to uid %u: "
			 "that user could replace the socket (remove the directory, or "
			 "choose another with --socket)", dir, (unsigned)st.st_uid);
		return -1;
	}
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) &&
	    (is_default || !(st.st_mode & S_ISVTX))) {
		snprintf(err, errlen, "%s, the directory of the socket, is mode %04o: "
			 "writable by other users, who could replace the socket (chmod "
			 "go-w it, or choose another with --socket)", dir,
			 (unsigned)(st.st_mode & 07777));
		return -1;
	}
	return 0;
}

/* ---- listening ------------------------------------------------------------ */

/* cfg.max_connections, or what the descriptor limit leaves. */
static uint32_t conn_cap(const struct daemon *d)
{
	struct rlimit rl;

	if (d->cfg.max_connections > 0)
		return d->cfg.max_connections;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return 1u << 16;
	if (rl.rlim_cur < CONFIG_FD_RESERVE(d->cfg.max_clients) + 16)
		return 16;
	return rl.rlim_cur - CONFIG_FD_RESERVE(d->cfg.max_clients) > (1u << 16) ? 1u << 16
		: (uint32_t)(rl.rlim_cur - CONFIG_FD_RESERVE(d->cfg.max_clients));
}

static void on_accept_retry(evutil_socket_t fd, short what, void *arg);

/* Each attached client takes two descriptors (its connection and its
 * pidfd): raise the soft RLIMIT_NOFILE towards the hard one when it is
 * below what max_clients needs (the default soft limit, 1024, is). */
static void nofile_raise(const struct daemon *d)
{
	struct rlimit rl;
	rlim_t want = 2 * (rlim_t)d->cfg.max_clients + CONFIG_FD_RESERVE(0) + 64;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur >= want)
		return;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		log_warn("raising RLIMIT_NOFILE to %llu: %s", (unsigned long long)rl.rlim_cur,
			 strerror(errno));
}

/* What every listener needs, activated or bound. */
static int listen_events(struct daemon *d)
{
	nofile_raise(d);
	d->max_conns = conn_cap(d);
	if (d->cfg.idle_timeout_ms > 0) {
		struct timeval tv = { (time_t)(d->cfg.idle_timeout_ms / 1000),
				      (suseconds_t)(d->cfg.idle_timeout_ms % 1000) * 1000 };
		/* One shared duration: libevent keeps such timers in a queue,
		 * not its heap, so thousands cost nothing. */
		d->idle_tv = event_base_init_common_timeout(d->base, &tv);
	}
	d->ev_listen = event_new(d->base, d->listen_fd, EV_READ | EV_PERSIST, on_accept, d);
	d->ev_accept_retry = evtimer_new(d->base, on_accept_retry, d);
	if (d->ev_listen == NULL || d->ev_accept_retry == NULL)
		return -1;
	event_add(d->ev_listen, NULL);
	log_debug("at most %u connections; idle timeout %u ms", d->max_conns,
		  d->cfg.idle_timeout_ms);
	return 0;
}

int server_listen(struct daemon *d, int activated, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char lock[sizeof(sa.sun_path) + 8];
	int fd;

	if (activated >= 0) {
		/* systemd owns the socket file and guarantees one instance. */
		fcntl(activated, F_SETFL, fcntl(activated, F_GETFL) | O_NONBLOCK);
		d->listen_fd = activated;
		d->socket_activated = 1;
		goto listen;
	}
	if (check_socket_dir(d->cfg.socket, err, errlen) != 0)
		return -1;
	/* One daemon per socket: a lock file next to it, held while we run. */
	snprintf(lock, sizeof(lock), "%s.lock", d->cfg.socket);
	d->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
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
	if (listen_events(d) != 0) {
		snprintf(err, errlen, "libevent: cannot make the listener's events");
		return -1;
	}
	return 0;
}

/* ---- connections ---------------------------------------------------------- */

static void pending_remove(struct conn *c)
{
	struct daemon *d = c->d;

	if (c->spoke)
		return;
	c->spoke = 1;
	if (c->pprev != NULL)
		c->pprev->pnext = c->pnext;
	else
		d->pending = c->pnext;
	if (c->pnext != NULL)
		c->pnext->pprev = c->pprev;
	else
		d->pending_tail = c->pprev;
	c->pnext = c->pprev = NULL;
}

/* A descriptor is free again: accept again if we had stopped. */
static void accept_resume(struct daemon *d)
{
	if (!d->accept_paused || d->ev_listen == NULL)
		return;
	d->accept_paused = 0;
	evtimer_del(d->ev_accept_retry);
	event_add(d->ev_listen, NULL);
}

static void conn_free(struct conn *c)
{
	struct daemon *d = c->d;

	pending_remove(c);
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		d->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	if (d->check_conn == c)
		d->check_conn = NULL;
	d->nconns--;
	event_free(c->ev_read);
	event_free(c->ev_write);
	event_free(c->ev_idle);
	close(c->fd);
	free(c->in);
	free(c->out);
	free(c);
	accept_resume(d);
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
	if (d->ev_listen != NULL)
		event_free(d->ev_listen);
	d->ev_listen = NULL;
	if (d->ev_accept_retry != NULL)
		event_free(d->ev_accept_retry);
	d->ev_accept_retry = NULL;
	while (d->conns != NULL)
		conn_free(d->conns);
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

static void on_idle(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	unsigned dropped;

	(void)fd;
	(void)what;
	c->d->n.idle_closed++;
	if (rl_allow(&rl_idle, &dropped))
		log_info("pid %d %s within %u ms: closing (%u more not logged)",
			 (int)c->peer.pid, c->spoke ? "did not finish its frame"
			 : "sent no request", c->d->cfg.idle_timeout_ms, dropped);
	conn_close(c, "idle timeout");
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
	c->out_nfds = 0;
	clock_gettime(CLOCK_MONOTONIC, &c->since);
	c->ev_read = event_new(d->base, fd, EV_READ | EV_PERSIST, on_read, c);
	c->ev_write = event_new(d->base, fd, EV_WRITE | EV_PERSIST, on_write, c);
	c->ev_idle = evtimer_new(d->base, on_idle, c);
	if (c->ev_read == NULL || c->ev_write == NULL || c->ev_idle == NULL) {
		if (c->ev_read != NULL)
			event_free(c->ev_read);
		if (c->ev_write != NULL)
			event_free(c->ev_write);
		if (c->ev_idle != NULL)
			event_free(c->ev_idle);
		free(c);
		return NULL;
	}
	c->next = d->conns;
	if (d->conns != NULL)
		d->conns->prev = c;
	d->conns = c;
	c->pprev = d->pending_tail;
	if (d->pending_tail != NULL)
		d->pending_tail->pnext = c;
	else
		d->pending = c;
	d->pending_tail = c;
	d->nconns++;
	event_add(c->ev_read, NULL);
	if (d->idle_tv != NULL)
		evtimer_add(c->ev_idle, d->idle_tv);
	return c;
}

/* Drop the oldest connection that has sent no complete request for
 * PENDING_GRACE_MS, to make room: 1 when one went. */
static int evict_silent(struct daemon *d)
{
	struct conn *c = d->pending;

	if (c == NULL || ms_since(&c->since) < PENDING_GRACE_MS)
		return 0;
	d->n.evicted++;
	conn_close(c, "dropped for a new connection (silent, at the cap)");
	return 1;
}

/*
 * A peer the allow lists refuse: one DENIED response, then the door, at
 * once.  When its first request is already here, the reply carries its id
 * (else 0).  Never a connection: it costs no memory and no timer.
 */
static void deny_now(struct daemon *d, int fd, const struct ucred *cred)
{
	Sheaf__V1__Response r = SHEAF__V1__RESPONSE__INIT;
	uint8_t in[512], buf[FRAME_HDR + 256];
	char msg[128];
	unsigned dropped;
	ssize_t k = recv(fd, in, sizeof(in), MSG_DONTWAIT);
	size_t n;

	d->n.denied++;
	if (rl_allow(&rl_denied, &dropped))
		log_warn("refused pid %d uid %u gid %u: not in the allow lists "
			 "(%u more not logged)", (int)cred->pid, cred->uid, cred->gid, dropped);
	if (k >= (ssize_t)FRAME_HDR && frame_get_len(in) <= (size_t)k - FRAME_HDR) {
		Sheaf__V1__Request *rq = sheaf__v1__request__unpack(NULL, frame_get_len(in),
								     in + FRAME_HDR);
		if (rq != NULL) {
			r.id = rq->id;
			sheaf__v1__request__free_unpacked(rq, NULL);
		}
	}
	snprintf(msg, sizeof(msg), "uid %u is not allowed by sheafd's allow lists",
		 (unsigned)cred->uid);
	r.status = SHEAF__V1__STATUS__STATUS_DENIED;
	r.error = msg;
	n = sheaf__v1__response__get_packed_size(&r);
	if (n <= sizeof(buf) - FRAME_HDR) {
		frame_put_len(buf, (uint32_t)n);
		sheaf__v1__response__pack(&r, buf + FRAME_HDR);
		/* An empty socket buffer takes it whole; else the peer loses it. */
		(void)send(fd, buf, FRAME_HDR + n, MSG_DONTWAIT | MSG_NOSIGNAL);
	}
	/* Our half closed: the peer reads the reply, then EOF. */
	shutdown(fd, SHUT_WR);
	close(fd);
}

/* Out of descriptors: stop watching the listener (it stays readable, and
 * libevent would call us in a loop) until one frees. */
static void accept_pause(struct daemon *d, int err)
{
	struct timeval tv = { 0, ACCEPT_RETRY_MS * 1000 };

	unsigned dropped;

	if (!d->accept_paused) {
		d->accept_paused = 1;
		d->n.accept_pauses++;
		if (rl_allow(&rl_fds, &dropped))
			log_warn("accept: %s with %u connections open: not accepting until a "
				 "descriptor frees (%u more not logged)", strerror(err),
				 d->nconns, dropped);
	}
	event_del(d->ev_listen);
	evtimer_add(d->ev_accept_retry, &tv);
}

static void on_accept_retry(evutil_socket_t fd, short what, void *arg)
{
	struct daemon *d = arg;

	(void)fd;
	(void)what;
	on_accept(d->listen_fd, EV_READ, d);
}

/* Take one connection from the backlog: 1 taken (or refused), 0 none
 * waiting, -1 accepting paused. */
static int accept_one(struct daemon *d)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	unsigned dropped;
	struct conn *c;
	int fd;

	fd = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
			if (evict_silent(d))
				return 1;
			accept_pause(d, errno);
			return -1;
		}
		return errno == EINTR || errno == ECONNABORTED ? 1 : 0;
	}
	accept_resume(d);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		close(fd);
		return 1;
	}
	d->n.connections++;
	c = NULL;
	{
		struct conn_info peer = { .pid = cred.pid, .uid = cred.uid, .gid = cred.gid };

		len = sizeof(peer.groups);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, peer.groups, &len) == 0)
			peer.ngroups = (int)(len / sizeof(gid_t));
		if (!peer_allowed(d, &peer)) {
			deny_now(d, fd, &cred);
			return 1;
		}
		if (d->nconns >= d->max_conns && !evict_silent(d)) {
			d->n.over_cap++;
			if (rl_allow(&rl_cap, &dropped))
				log_warn("%u connections open (max_connections): closed pid "
					 "%d's new one (%u more not logged)", d->nconns,
					 (int)cred.pid, dropped);
			close(fd);
			return 1;
		}
		c = conn_new(d, fd, &cred);
		if (c == NULL) {
			close(fd);
			return 1;
		}
		memcpy(c->peer.groups, peer.groups, sizeof(peer.groups));
		c->peer.ngroups = peer.ngroups;
	}
	log_debug("connection from pid %d uid %u", (int)cred.pid, cred.uid);
	return 1;
}

static void on_accept(evutil_socket_t lfd, short what, void *arg)
{
	struct daemon *d = arg;

	(void)lfd;
	(void)what;
	for (int i = 0; i < ACCEPT_BATCH; i++)
		if (accept_one(d) <= 0)
			break;
}

/* ---- requests and replies ------------------------------------------------- */

/* Queue a serialised response on @c (with @fds[0..@nfds) when @nfds > 0):
 * 0, or -1 when the queue would pass its bound (the peer does not read) or
 * memory ran out: the caller closes @c. */
static int conn_send(struct conn *c, const void *msg, size_t len, const int *fds,
		     unsigned nfds)
{
	size_t need = c->out_len + FRAME_HDR + len;
	unsigned dropped;
	uint8_t *p;

	if (need > OUT_CAP(c->d->cfg.max_frame)) {
		if (rl_allow(&rl_out, &dropped))
			log_warn("pid %d does not read its replies (%zu bytes queued): closing "
				 "(%u more not logged)", (int)c->peer.pid, c->out_len - c->out_off,
				 dropped);
		return -1;
	}
	p = realloc(c->out, need);
	if (p == NULL)
		return -1;
	c->out = p;
	if (nfds > 0 && c->out_len == c->out_off) {
		memcpy(c->out_fds, fds, nfds * sizeof(int));
		c->out_nfds = nfds;
	}
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

		if (c->out_nfds > 0)
			frame_attach_fds(&mh, &u, c->out_fds, c->out_nfds);
		k = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;        /* wait for the next EV_WRITE */
			conn_close(c, strerror(errno));
			return;
		}
		c->out_off += (size_t)k;
		c->out_nfds = 0;
	}
	c->out_off = c->out_len = 0;
	event_del(c->ev_write);
	if (c->closing)
		conn_close(c, "closed by the daemon");
}

enum frame_fate { FRAME_DONE, FRAME_HELD, FRAME_DROP };

/* Answer one request frame: rpc.c makes the reply, we queue it.  HELD:
 * the frame waits for the pool check (not consumed) or is the check (its
 * reply comes later); DROP: close @c now. */
static enum frame_fate handle_frame(struct conn *c, const uint8_t *buf, size_t len,
				    int *consumed)
{
	struct rpc_out out;
	enum frame_fate fate = FRAME_DONE;

	*consumed = 1;
	if (rpc_handle(c->d, &c->peer, buf, len, &out) != 0)
		return FRAME_DROP;
	if (out.later || out.deferred) {
		*consumed = out.deferred;
		if (out.deferred) {
			c->d->check_conn = c;
			check_on_done(c->d, on_check_reply);
		}
		fate = FRAME_HELD;
	} else if (conn_send(c, out.buf, out.len, out.pass_fds, out.npass) != 0) {
		fate = FRAME_DROP;
	} else if (out.close_after) {
		c->closing = 1;
	}
	rpc_out_free(&out);
	return fate;
}

/* Hand every whole frame in the input buffer to handle_frame, in order:
 * 0, or -1 when @c must be closed now (not static: tests/fuzz/fuzz_rpc.c
 * feeds it directly). */
int consume_frames(struct conn *c)
{
	struct daemon *d = c->d;
	size_t off = 0;
	int took = 0, rc = 0;

	while (c->in_len - off >= FRAME_HDR && !c->closing) {
		uint32_t n = frame_get_len(c->in + off);
		enum frame_fate fate;
		int consumed;

		if (n > d->cfg.max_frame) {
			d->n.oversize_frames++;
			log_warn("pid %d sent a %u-byte frame (cap %u): closing", (int)c->peer.pid,
				 n, d->cfg.max_frame);
			return -1;
		}
		if (c->in_len - off < FRAME_HDR + (size_t)n)
			break;
		fate = handle_frame(c, c->in + off + FRAME_HDR, n, &consumed);
		if (fate == FRAME_DROP)
			return -1;
		pending_remove(c);
		if (consumed) {
			off += FRAME_HDR + n;
			took = 1;
		}
		if (fate == FRAME_HELD) {
			c->waiting = 1;
			break;
		}
	}
	memmove(c->in, c->in + off, c->in_len - off);
	c->in_len -= off;
	/* The idle timer: off once the peer spoke and nothing is half-read or
	 * held; (re)started when a new frame begins. */
	if (c->waiting || (c->in_len == 0 && c->spoke))
		evtimer_del(c->ev_idle);
	else if (c->in_len > 0 && d->idle_tv != NULL &&
		 (took || !evtimer_pending(c->ev_idle, NULL)))
		evtimer_add(c->ev_idle, d->idle_tv);
	return rc;
}

/* After consume_frames: close what must close, pause what waits. */
static void after_input(struct conn *c, int rc)
{
	if (rc != 0) {
		conn_close(c, "oversize frame, or replies not read");
		return;
	}
	if (c->waiting) {
		event_del(c->ev_read);
		return;
	}
	if (c->closing) {
		event_del(c->ev_read);
		if (c->out_len == c->out_off)
			conn_close(c, "closed by the daemon");
	}
}

/* The pool check ended: send @out (its reply) to the connection that asked,
 * when still open, then let paused connections go on. */
static void on_check_reply(struct daemon *d, struct rpc_out *out)
{
	struct conn *c = d->check_conn, *next;

	d->check_conn = NULL;
	if (c != NULL && (out->buf == NULL || conn_send(c, out->buf, out->len, NULL, 0) != 0))
		conn_close(c, "no reply to its check could be queued");
	/* Every paused connection goes on, in list order; one may start the
	 * next check, and those after it pause again. */
	for (c = d->conns; c != NULL; c = next) {
		next = c->next;
		if (!c->waiting || d->check_conn == c)
			continue;
		c->waiting = 0;
		if (!c->closing)
			event_add(c->ev_read, NULL);
		after_input(c, consume_frames(c));
	}
}

static void on_read(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	size_t cap = (size_t)c->d->cfg.max_frame + FRAME_HDR;
	ssize_t k;

	(void)what;
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
	after_input(c, consume_frames(c));
}
