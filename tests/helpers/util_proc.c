/*
 * util_proc.c - process, file and socket helpers of the integration tests
 * (see util_proc.h).  No Check calls and nothing test-specific here: the
 * callers assert on what these return (fork_fn only tells REQUIRE that its
 * child is a child).
 */
#include "tests/helpers/util_proc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- time ------------------------------------------------------------------ */

int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ts(struct timespec ts)
{
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

void sleep_us(unsigned us)
{
	sleep_ts((struct timespec){ us / 1000000u, (long)(us % 1000000u) * 1000L });
}

void sleep_ms(unsigned ms)
{
	sleep_ts((struct timespec){ ms / 1000u, (long)(ms % 1000u) * 1000000L });
}

/* ---- descriptors and sockets ------------------------------------------------ */

int read_full(int fd, void *buf, size_t n, int ms)
{
	int64_t end = now_ms() + ms;
	char *p = buf;

	while (n > 0) {
		struct pollfd pf = { fd, POLLIN, 0 };
		int64_t left = end - now_ms();
		ssize_t k;

		if (left <= 0 || poll(&pf, 1, (int)left) == 0)
			return -1;
		k = read(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

int write_full(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

int unix_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = strlen(path);
	int fd;

	if (n >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, n + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

/* ---- files ----------------------------------------------------------------- */

char *read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0, cap = 0, k;

	if (f == NULL)
		return NULL;
	do {
		if (cap - len < 4096) {
			char *nb;

			cap = cap ? cap * 2 : 8192;
			nb = realloc(buf, cap + 1);
			if (nb == NULL) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = nb;
		}
		k = fread(buf + len, 1, cap - len, f);
		len += k;
	} while (k > 0);
	fclose(f);
	buf[len] = '\0';
	return buf;
}

int file_contains(const char *path, const char *needle)
{
	char *s = read_file(path);
	int found = s != NULL && strstr(s, needle) != NULL;

	free(s);
	return found;
}

int count_in_file(const char *path, const char *needle)
{
	char *s = read_file(path), *p;
	int n = 0;

	for (p = s; p != NULL && (p = strstr(p, needle)) != NULL; p += strlen(needle))
		n++;
	free(s);
	return n;
}

int write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	int rc;

	if (f == NULL)
		return -1;
	rc = fputs(text, f) < 0 ? -1 : 0;
	return fclose(f) != 0 ? -1 : rc;
}

void dump_file(const char *title, const char *path, int max_lines)
{
	const char *name = title != NULL ? title : path;
	char *s = read_file(path), *p = s, head[PATH_MAX + 64];
	int lines = 0;

	if (title != NULL)
		snprintf(head, sizeof(head), "%s (%s)", title, path);
	else
		snprintf(head, sizeof(head), "%s", path);
	if (s == NULL) {
		fprintf(stderr, "---- %s: unreadable ----\n", head);
		return;
	}
	if (max_lines > 0)
		for (p = s + strlen(s); p > s; p--)
			if (p[-1] == '\n' && ++lines > max_lines)
				break;
	fprintf(stderr, "---- %s", head);
	if (p > s)
		fprintf(stderr, ", last %d lines", max_lines);
	fprintf(stderr, " ----\n%s---- end of %s ----\n", p, name);
	free(s);
}

int make_temp_dir(char *buf, size_t len, const char *tmpl)
{
	if (strlen(tmpl) >= len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(buf, tmpl, strlen(tmpl) + 1);
	return mkdtemp(buf) != NULL ? 0 : -1;
}

void rm_tree(const char *path)
{
	DIR *dir = opendir(path);
	struct dirent *e;

	if (dir == NULL) {
		unlink(path);
		return;
	}
	while ((e = readdir(dir)) != NULL) {
		char p[PATH_MAX];
		struct stat st;
		int n;

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		n = snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
		if (n < 0 || (size_t)n >= sizeof(p))
			continue;
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
			rm_tree(p);
		else
			unlink(p);
	}
	closedir(dir);
	rmdir(path);
}

int exe_dir(char *buf, size_t len, const char *rel)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	int k;

	if (n <= 0)
		return -1;
	self[n] = '\0';
	k = rel != NULL ? snprintf(buf, len, "%s/%s", dirname(self), rel)
			: snprintf(buf, len, "%s", dirname(self));
	if (k < 0 || (size_t)k >= len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

/* ---- processes ------------------------------------------------------------- */

/* utime + stime in clock ticks from the stat file at @path
 * (/proc/PID/stat or /proc/PID/task/TID/stat), or -1. */
static long long stat_ticks(const char *path)
{
	char *s = read_file(path), *p;
	unsigned long long ut = 0, st = 0;
	long long r = -1;

	if (s == NULL)
		return -1;
	/* Fields after the command (which may hold spaces): state is field 3,
	 * utime 14, stime 15. */
	p = strrchr(s, ')');
	if (p != NULL && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
				&ut, &st) == 2)
		r = (long long)(ut + st);
	free(s);
	return r;
}

double cpu_seconds(pid_t pid)
{
	char path[64];
	long long t;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	t = stat_ticks(path);
	return t < 0 ? -1 : (double)t / (double)sysconf(_SC_CLK_TCK);
}

/* Thread @tid of @pid: its CPU time in ns (schedstat, else its stat's
 * ticks), or -1. */
static int64_t task_cpu_ns(pid_t pid, int tid)
{
	char path[96], *s;
	unsigned long long ns;
	long long t;
	int64_t r = -1;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)pid, tid);
	s = read_file(path);
	if (s != NULL && sscanf(s, "%llu", &ns) == 1)
		r = (int64_t)ns;
	free(s);
	if (r >= 0)
		return r;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, tid);
	t = stat_ticks(path);
	return t < 0 ? -1 : t * (1000000000ll / sysconf(_SC_CLK_TCK));
}

int thread_cpu(pid_t pid, struct thread_cpu *t, int max)
{
	char path[64];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (d == NULL)
		return -1;
	while (n < max && (de = readdir(d)) != NULL) {
		int tid = atoi(de->d_name);
		char *comm;
		int64_t ns;

		if (tid <= 0 || (ns = task_cpu_ns(pid, tid)) < 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid, tid);
		comm = read_file(path);
		t[n].tid = tid;
		snprintf(t[n].comm, sizeof(t[n].comm), "%s", comm != NULL ? comm : "?");
		t[n].comm[strcspn(t[n].comm, "\n")] = '\0';
		free(comm);
		t[n++].ns = (uint64_t)ns;
	}
	closedir(d);
	return n;
}

uint64_t thread_cpu_diff(const struct thread_cpu *then, int nthen,
			 const struct thread_cpu *now, int nnow, char *buf, size_t len)
{
	uint64_t sum = 0;
	size_t at = 0;

	buf[0] = '\0';
	for (int i = 0; i < nnow && at < len; i++) {
		uint64_t base = 0;

		for (int j = 0; j < nthen; j++)
			if (then[j].tid == now[i].tid)
				base = then[j].ns;
		if (now[i].ns <= base)
			continue;
		sum += now[i].ns - base;
		at += (size_t)snprintf(buf + at, len - at, "%s%s %d: %.1f ms", at ? ", " : "",
				       now[i].comm, now[i].tid, (double)(now[i].ns - base) / 1e6);
	}
	if (at == 0)
		snprintf(buf, len, "no thread used any");
	return sum;
}

const char *status_str(int st, char *buf, size_t len)
{
	if (WIFEXITED(st))
		snprintf(buf, len, "exit %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(buf, len, "signal %d", WTERMSIG(st));
	else
		snprintf(buf, len, "status 0x%x", st);
	return buf;
}

int exited_ok(int st)
{
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int wait_pid(pid_t pid, int ms, int *status)
{
	int64_t end = now_ms() + ms;
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	int rc;

	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);
		int64_t left;

		if (r == pid) {
			rc = 1;
			break;
		}
		if (r < 0 && errno != EINTR) {
			rc = -1;
			break;
		}
		left = end - now_ms();
		if (left <= 0) {
			rc = 0;
			break;
		}
		if (pfd >= 0) {
			struct pollfd pf = { pfd, POLLIN, 0 };
			poll(&pf, 1, left > 200 ? 200 : (int)left);
		} else {
			sleep_ms(2);
		}
	}
	if (pfd >= 0)
		close(pfd);
	return rc;
}

#define MAX_TRACK 1024
static pid_t tracked[MAX_TRACK];

void track(pid_t pid)
{
	for (int i = 0; i < MAX_TRACK; i++) {
		if (tracked[i] == 0) {
			tracked[i] = pid;
			return;
		}
	}
}

void untrack(pid_t pid)
{
	for (int i = 0; i < MAX_TRACK; i++)
		if (tracked[i] == pid)
			tracked[i] = 0;
}

void kill_tracked(void)
{
	for (int i = 0; i < MAX_TRACK; i++) {
		if (tracked[i] > 0)
			kill(tracked[i], SIGKILL);
		tracked[i] = 0;
	}
}

pid_t fork_fn(int (*fn)(void *), void *arg)
{
	pid_t pid;

	/* What the parent has buffered is printed once, not by each child
	 * that prints. */
	fflush(stdout);
	fflush(stderr);
	pid = fork();

	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		require_in_child();
		_exit(fn(arg));
	}
	if (pid > 0)
		track(pid);
	return pid;
}

/* In the child: the environment changes of spawn_opts.env. */
static void child_env(const char *const *env)
{
	for (int i = 0; env != NULL && env[i] != NULL; i++) {
		char name[256];
		const char *eq = strchr(env[i], '=');

		if (env[i][0] == '-') {
			unsetenv(env[i] + 1);
			continue;
		}
		if (eq == NULL || (size_t)(eq - env[i]) >= sizeof(name))
			continue;
		memcpy(name, env[i], (size_t)(eq - env[i]));
		name[eq - env[i]] = '\0';
		if (strcmp(eq + 1, "@pid") == 0) {
			char v[32];
			snprintf(v, sizeof(v), "%d", (int)getpid());
			setenv(name, v, 1);
		} else {
			setenv(name, eq + 1, 1);
		}
	}
}

pid_t spawn_proc(const char *const argv[], const struct spawn_opts *o)
{
	static const struct spawn_opts defaults;
	pid_t pid;

	if (o == NULL)
		o = &defaults;
	pid = fork();
	if (pid == 0) {
		int flags = O_WRONLY | O_CREAT | (o->append ? O_APPEND : O_TRUNC);
		int fo, fe, fi = -1, hi[8];

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		fo = open(o->out ? o->out : "/dev/null", flags, 0644);
		if (o->err != NULL && o->out != NULL && strcmp(o->err, o->out) == 0)
			fe = fo;
		else
			fe = open(o->err ? o->err : "/dev/null", flags, 0644);
		if (o->stdin_null)
			fi = open("/dev/null", O_RDONLY);
		if (fo < 0 || fe < 0 || (o->stdin_null && fi < 0))
			_exit(126);
		if (fi >= 0)
			dup2(fi, 0);
		dup2(fo, 1);
		dup2(fe, 2);
		/* Out of the way first: a source may sit at a target. */
		for (int i = 0; i < o->npass && i < 8; i++)
			hi[i] = fcntl(o->pass[i], F_DUPFD, 100);
		for (int i = 0; i < o->npass && i < 8; i++) {
			dup2(hi[i], 3 + i);
			fcntl(3 + i, F_SETFD, 0);
			close(hi[i]);
		}
		child_env(o->env);
		execvp(o->exe ? o->exe : argv[0], (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", o->exe ? o->exe : argv[0], strerror(errno));
		_exit(127);
	}
	return pid;
}

const char *finish_proc(pid_t pid, int ms, const char *what, int *status, char *err,
			size_t len)
{
	*status = 0;
	if (wait_pid(pid, ms, status) != 1) {
		kill(pid, SIGKILL);
		waitpid(pid, status, 0);
		untrack(pid);
		snprintf(err, len, "%s did not finish within %d ms", what, ms);
		return err;
	}
	untrack(pid);
	return NULL;
}

const char *run_proc(const char *const argv[], const struct spawn_opts *o, int ms,
		     int *status, char *err, size_t len)
{
	pid_t pid = spawn_proc(argv, o);

	if (pid < 0) {
		*status = 0;
		snprintf(err, len, "fork: %s", strerror(errno));
		return err;
	}
	track(pid);
	return finish_proc(pid, ms, argv[0], status, err, len);
}

const char *reap_err(pid_t pid, int ms, const char *what, char *err, size_t len)
{
	char buf[64];
	int st = 0;

	if (wait_pid(pid, ms, &st) != 1) {
		snprintf(err, len, "%s (pid %d) did not exit within %d ms", what, (int)pid, ms);
		return err;
	}
	untrack(pid);
	if (!exited_ok(st)) {
		snprintf(err, len, "%s (pid %d) ended with %s", what, (int)pid,
			 status_str(st, buf, sizeof(buf)));
		return err;
	}
	return NULL;
}

const char *start_listening(const char *const argv[], const struct spawn_opts *o,
			    const char *sock, int ms, pid_t *pid, char *err, size_t len)
{
	const char *name = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	int64_t end = now_ms() + ms;

	*pid = spawn_proc(argv, o);
	if (*pid < 0) {
		*pid = 0;
		snprintf(err, len, "fork: %s", strerror(errno));
		return err;
	}
	for (;;) {
		char buf[64];
		int st, fd;

		if (waitpid(*pid, &st, WNOHANG) == *pid) {
			*pid = 0;
			snprintf(err, len, "%s exited at start: %s", name,
				 status_str(st, buf, sizeof(buf)));
			return err;
		}
		fd = unix_connect(sock);
		if (fd >= 0) {
			close(fd);
			return NULL;
		}
		if (fd == -ENAMETOOLONG) {
			snprintf(err, len, "socket path %s is too long", sock);
			return err;
		}
		if (now_ms() >= end) {
			snprintf(err, len, "%s's socket %s not accepting after %d ms", name, sock,
				 ms);
			return err;
		}
		sleep_ms(2);
	}
}

const char *signal_wait(pid_t pid, int sig, int ms, int *status, char *err, size_t len)
{
	char buf[64];
	pid_t r = 0;

	*status = 0;
	if (pid <= 0 || (r = waitpid(pid, status, WNOHANG)) != 0) {
		snprintf(err, len, "pid %d ended before signal %d: %s", (int)pid, sig,
			 pid > 0 && r == pid ? status_str(*status, buf, sizeof(buf))
					     : "not a running child");
		return err;
	}
	if (kill(pid, sig) != 0) {
		snprintf(err, len, "kill(%d, %d): %s", (int)pid, sig, strerror(errno));
		return err;
	}
	if (wait_pid(pid, ms, status) != 1) {
		snprintf(err, len, "pid %d did not end within %d ms of signal %d", (int)pid, ms,
			 sig);
		return err;
	}
	return NULL;
}
