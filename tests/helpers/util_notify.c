/*
 * util_notify.c - systemd's side of sd_notify and fd passing, for tests
 * (see util_notify.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shm/atomics.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_deploy.h"
#include "tests/helpers/util_notify.h"
#include "tests/helpers/util_proc.h"

/* ---- the notification socket ---------------------------------------------------- */

void notify_open(struct notify *n)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int buf = 1 << 20;

	memset(n, 0, sizeof(*n));
	n->store_fd = n->store_shared_fd = -1;
	fmt(n->path, sizeof(n->path), "%s/notify", test_dir);
	fmt(n->log, sizeof(n->log), "%s/notify.log", test_dir);
	add_log(n->log);
	n->sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	REQUIRE(n->sock >= 0, "socket: %s", strerror(errno));
	fmt(sa.sun_path, sizeof(sa.sun_path), "%s", n->path);
	REQUIRE(bind(n->sock, (struct sockaddr *)&sa, sizeof(sa)) == 0, "bind %s: %s",
		n->path, strerror(errno));
	setsockopt(n->sock, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
}

void notify_close(struct notify *n)
{
	if (n->sock >= 0)
		close(n->sock);
	if (n->store_fd >= 0)
		close(n->store_fd);
	if (n->store_shared_fd >= 0)
		close(n->store_shared_fd);
	n->sock = n->store_fd = n->store_shared_fd = -1;
}

static int same_file(int a, int b)
{
	struct stat sa, sb;

	return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

/* A memfd made by the pool: /proc/self/fd/N reads "/memfd:sheaf-pool ...". */
static int is_pool_memfd(int fd)
{
	char p[64], target[256];
	ssize_t k;

	fmt(p, sizeof(p), "/proc/self/fd/%d", fd);
	k = readlink(p, target, sizeof(target) - 1);
	if (k <= 0)
		return 0;
	target[k] = '\0';
	return strncmp(target, "/memfd:sheaf-pool", 17) == 0 && fcntl(fd, F_GET_SEALS) >= 0;
}

int notify_recv(struct notify *n, int ms)
{
	char text[4097], *line, *save = NULL;
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int) * 8)];
	} u;
	struct iovec iov = { text, sizeof(text) - 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf) };
	struct pollfd pf = { n->sock, POLLIN, 0 };
	int fds[8], nfd = 0, store = 0, removing = 0;
	char name[64] = "";
	ssize_t k;
	FILE *lf;

	if (poll(&pf, 1, ms) <= 0)
		return 0;
	k = recvmsg(n->sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (k < 0)
		return 0;
	text[k] = '\0';
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int cnt = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			for (int i = 0; i < cnt && nfd < 8; i++)
				memcpy(&fds[nfd++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
		}
	}
	lf = fopen(n->log, "a");
	if (lf != NULL) {
		fprintf(lf, "[%lld ms] %s%s\n", (long long)now_ms(), text,
			nfd ? " (+fd)" : "");
		fclose(lf);
	}
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (strcmp(line, "READY=1") == 0)
			n->ready++;
		else if (strcmp(line, "STOPPING=1") == 0)
			n->stopping++;
		else if (strcmp(line, "RELOADING=1") == 0)
			n->reloading++;
		else if (strcmp(line, "WATCHDOG=1") == 0) {
			if (n->watchdog < 512)
				n->wd_ms[n->watchdog] = now_ms();
			n->watchdog++;
		} else if (strcmp(line, "FDSTORE=1") == 0)
			store = 1;
		else if (strcmp(line, "FDSTOREREMOVE=1") == 0)
			removing = 1;
		else if (strncmp(line, "FDNAME=", 7) == 0)
			fmt(name, sizeof(name), "%s", line + 7);
		else if (strncmp(line, "STATUS=", 7) == 0) {
			n->status++;
			fmt(n->last_status, sizeof(n->last_status), "%s", line + 7);
		}
	}
	/* FDSTOREREMOVE=1 with FDNAME=: the store forgets that descriptor. */
	if (removing && name[0] != '\0') {
		int *slot = strcmp(name, "pool-shared") == 0 ? &n->store_shared_fd
			  : strcmp(name, "pool-meta") == 0 ? &n->store_fd : NULL;

		if (slot != NULL && *slot >= 0) {
			close(*slot);
			*slot = -1;
		}
		n->fdstore_removed++;
	}
	for (int i = 0; i < nfd; i++) {
		if (store && i == 0 && is_pool_memfd(fds[i])) {
			int *slot = strcmp(name, "pool-shared") == 0 ? &n->store_shared_fd
								     : &n->store_fd;
			n->fdstore++;
			if (slot == &n->store_fd)
				fmt(n->fdname, sizeof(n->fdname), "%s", name);
			if (*slot < 0) {
				*slot = fds[i];
				continue;
			}
			if (same_file(*slot, fds[i]))
				n->store_same++;
			else
				n->store_other++;
		}
		close(fds[i]);
	}
	return 1;
}

int notify_wait(struct notify *n, const int *counter, int target, int ms)
{
	int64_t end = now_ms() + ms;

	while (*counter < target) {
		int64_t left = end - now_ms();
		if (left <= 0)
			return 0;
		notify_recv(n, (int)left);
	}
	return 1;
}

void notify_drain(struct notify *n, int ms)
{
	int64_t end = now_ms() + ms;

	for (int64_t left = ms; left > 0; left = end - now_ms())
		notify_recv(n, (int)left);
}

/* ---- sheafd as systemd would run it -------------------------------------------- */

void svc_start(struct svc *d, struct notify *n, int listen_fd, int adopt, unsigned wd_usec)
{
	static const char *const simulated[] = {
		"--nodes", "2", "--size", "256M", "--log-level", "debug", NULL,
	};
	const char *const *flags = d->flags != NULL ? d->flags : simulated;
	const char *argv[32] = { sheafd_bin(), "--foreground", "--socket", d->sock };
	int na = 4;
	char notify_env[160], fds_env[32], names_env[64], wd_env[48];
	const char *env[8];
	int pass[3], npass = 0, ne = 0, ready0 = n->ready;
	char buf[64];
	int st, fd;

	for (int i = 0; flags[i] != NULL; i++) {
		REQUIRE(na < 31, "too many sheafd flags");
		argv[na++] = flags[i];
	}
	argv[na] = NULL;
	fmt(d->log, sizeof(d->log), "%s/sheafd.%d.log", test_dir, ++d->gen);
	add_log(d->log);
	fmt(notify_env, sizeof(notify_env), "NOTIFY_SOCKET=%s", n->path);
	env[ne++] = notify_env;
	names_env[0] = '\0';
	if (listen_fd >= 0) {
		pass[npass++] = listen_fd;
		fmt(names_env, sizeof(names_env), "LISTEN_FDNAMES=sheafd.socket");
	}
	if (adopt) {
		REQUIRE(n->store_fd >= 0 && n->store_shared_fd >= 0,
			"the fd store lacks the pool's memfds");
		pass[npass++] = n->store_fd;
		pass[npass++] = n->store_shared_fd;
		fmt(names_env + strlen(names_env), sizeof(names_env) - strlen(names_env),
			 "%s", npass > 2 ? ":pool-meta:pool-shared"
					 : "LISTEN_FDNAMES=pool-meta:pool-shared");
	}
	if (npass > 0) {
		fmt(fds_env, sizeof(fds_env), "LISTEN_FDS=%d", npass);
		env[ne++] = fds_env;
		env[ne++] = "LISTEN_PID=@pid";
		env[ne++] = names_env;
	} else {
		env[ne++] = "-LISTEN_FDS";
		env[ne++] = "-LISTEN_PID";
	}
	if (wd_usec > 0) {
		fmt(wd_env, sizeof(wd_env), "WATCHDOG_USEC=%u", wd_usec);
		env[ne++] = wd_env;
		env[ne++] = "WATCHDOG_PID=@pid";
	}
	env[ne] = NULL;
	d->pid = spawn(argv, env, d->log, pass, npass);
	for (int64_t end = now_ms() + 30000; n->ready == ready0;) {
		REQUIRE(waitpid(d->pid, &st, WNOHANG) == 0, "sheafd exited at start: %s",
			status_str(st, buf, sizeof(buf)));
		REQUIRE(now_ms() < end, "no READY=1 from sheafd within 30 s");
		notify_recv(n, 100);
	}
	fd = unix_connect(d->sock);
	REQUIRE(fd >= 0, "READY=1 sent before %s accepts", d->sock);
	close(fd);
}

void svc_stop(struct svc *d, struct notify *n, int sig)
{
	int st = 0, stopping0 = n->stopping;
	char buf[64], err[256];
	const char *msg = signal_wait(d->pid, sig, 20000, &st, err, sizeof(err));

	REQUIRE(msg == NULL, "sheafd: %s", msg);
	untrack(d->pid);
	d->pid = 0;
	while (notify_recv(n, 0))              /* what it sent before it ended */
		;
	if (sig == SIGKILL) {
		REQUIRE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "sheafd ended with %s",
			status_str(st, buf, sizeof(buf)));
		return;
	}
	REQUIRE(exited_ok(st), "sheafd ended with %s after signal %d",
		status_str(st, buf, sizeof(buf)), sig);
	REQUIRE(notify_wait(n, &n->stopping, stopping0 + 1, 2000), "no STOPPING=1 on signal %d",
		sig);
}

static void *drainer_main(void *arg)
{
	struct notify_drainer *d = arg;

	while (at_load_acquire(&d->on))
		notify_recv(d->n, 50);
	return NULL;
}

void notify_drainer_start(struct notify_drainer *d, struct notify *n)
{
	d->n = n;
	at_store_release(&d->on, 1);
	REQUIRE(pthread_create(&d->thread, NULL, drainer_main, d) == 0, "drain thread");
}

void notify_drainer_stop(struct notify_drainer *d)
{
	at_store_release(&d->on, 0);
	pthread_join(d->thread, NULL);
}
