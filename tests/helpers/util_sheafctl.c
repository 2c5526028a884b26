/*
 * util_sheafctl.c - the sheafctl test harness (see util_sheafctl.h).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/sheaf.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_json.h"
#include "tests/helpers/util_proc.h"
#include "tests/helpers/util_sheafctl.h"

const char *const kernel_counters[] = {
	"alloc_fastpath", "alloc_slowpath", "free_fastpath", "free_slowpath",
	"sheaf_alloc", "sheaf_free", "barn_get", "barn_get_fail", "barn_put",
	"barn_put_fail", "sheaf_prefill_fast", "sheaf_prefill_slow",
	"sheaf_prefill_oversize", "sheaf_return_fast", "sheaf_return_slow",
	"free_remote", "free_invalid", "alloc_fail", "sheaf_refill", "sheaf_flush",
	"alloc_slab", "free_slab", "flush_invalid", "refill_remote",
	"free_rcu_sheaf", "free_rcu_sheaf_fail", "rcu_released", "rcu_waiting",
};
const size_t NKC = sizeof(kernel_counters) / sizeof(kernel_counters[0]);

/* ---- a daemon per test ------------------------------------------------------------ */

struct dmn D = { .pid = -1 };

void daemon_stop(void)
{
	dmn_end(&D);
}

static void setup(void)
{
	const char *argv[] = { "sheafd", "-f", "-s", D.sock, "--nodes", "2", "--size", "512M",
			       "--sheaves", "2048", "--log-level", "warn", NULL };

	dmn_init_at(&D, "/tmp/sheafctl-test.XXXXXX", "sheafd.log");
	atexit(daemon_stop);               /* also when a test fails */
	dmn_start_argv(&D, (char *const *)argv);
	setenv("SHEAF_SOCKET", "/nonexistent/not-this-one", 1);
}

static void teardown(void)
{
	daemon_stop();
}

void ctl_add(Suite *s, const char *name, const TTest *t, int timeout)
{
	TCase *tc = tcase_create(name);

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, timeout);
	tcase_add_test(tc, t);
	suite_add_tcase(s, tc);
}

/* ---- running sheafctl ------------------------------------------------------------ */

void run_free(struct run *r)
{
	free(r->out);
	free(r->err);
	memset(r, 0, sizeof(*r));
}

/* Read both pipes to EOF (stdout and stderr of sheafctl). */
static void drain(int ofd, int efd, struct run *r)
{
	size_t cap[2] = { 4096, 4096 }, len[2] = { 0, 0 };
	char *buf[2] = { malloc(cap[0]), malloc(cap[1]) };
	struct pollfd p[2] = { { ofd, POLLIN, 0 }, { efd, POLLIN, 0 } };
	int open_fds = 2;

	while (open_fds > 0) {
		REQUIRE(poll(p, 2, 120000) > 0, "sheafctl produced nothing for 120 s");
		for (int i = 0; i < 2; i++) {
			ssize_t k;
			if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (cap[i] - len[i] < 4096)
				buf[i] = realloc(buf[i], cap[i] *= 2);
			k = read(p[i].fd, buf[i] + len[i], cap[i] - len[i] - 1);
			if (k <= 0) {
				close(p[i].fd);
				p[i].fd = -1;
				open_fds--;
			} else {
				len[i] += (size_t)k;
			}
		}
	}
	buf[0][len[0]] = buf[1][len[1]] = '\0';
	r->out = buf[0];
	r->err = buf[1];
}

/* Run sheafctl with @argv (NULL-terminated, without the program name);
 * "-s SOCKET" goes first when @with_socket. */
int run_argv(struct run *r, int with_socket, char **argv)
{
	char *args[64];
	int n = 0, o[2], e[2], st;
	pid_t pid;

	args[n++] = (char *)"sheafctl";
	if (with_socket) {
		args[n++] = (char *)"-s";
		args[n++] = D.sock;
	}
	for (int i = 0; argv[i] != NULL && n < 63; i++)
		args[n++] = argv[i];
	args[n] = NULL;
	ck_assert(pipe2(o, O_CLOEXEC) == 0 && pipe2(e, O_CLOEXEC) == 0);
	pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(o[1], 1);
		dup2(e[1], 2);
		execv(sheafctl_bin(), args);
		_exit(127);
	}
	close(o[1]);
	close(e[1]);
	memset(r, 0, sizeof(*r));
	drain(o[0], e[0], r);
	ck_assert(waitpid(pid, &st, 0) == pid);
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return r->status;
}

struct jv *ctl_ok_json(char **argv)
{
	struct run r;
	struct jv *v;

	run_argv(&r, 1, argv);
	REQUIRE(r.status == 0, "sheafctl %s: exit %d\nstdout: %s\nstderr: %s", argv[0], r.status,
		r.out, r.err);
	REQUIRE(r.err[0] == '\0', "sheafctl %s wrote to stderr: %s", argv[0], r.err);
	v = json_parse(r.out);
	run_free(&r);
	return v;
}

void expect(struct run *r, int status, const char *what)
{
	REQUIRE(r->status == status, "%s: exit %d, expected %d\nstdout: %s\nstderr: %s", what,
		r->status, status, r->out, r->err);
}

int starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The line of @text that starts with @prefix (after blanks), or NULL. */
const char *line_with(const char *text, const char *prefix)
{
	for (const char *l = text; l != NULL && *l != '\0';) {
		const char *s = l;
		while (*s == ' ')
			s++;
		if (strncmp(s, prefix, strlen(prefix)) == 0)
			return s;
		l = strchr(l, '\n');
		if (l != NULL)
			l++;
	}
	return NULL;
}

/* The number after @prefix on its line ("  objects   1234"). */
uint64_t table_value(const char *text, const char *prefix)
{
	const char *l = line_with(text, prefix);
	REQUIRE(l != NULL, "no line '%s' in:\n%s", prefix, text);
	l += strlen(prefix);
	while (*l == ' ')
		l++;
	REQUIRE(isdigit((unsigned char)*l), "no number after '%s' in:\n%s", prefix, text);
	return strtoull(l, NULL, 10);
}

/* Every figure of a cache's stats object; per node with @nodes. */
void check_stats_obj(const struct jv *cs, uint64_t in_use, uint64_t size, int nodes)
{
	const struct jv *k = jreq(cs, "counters", J_OBJ);
	uint64_t allocs = ju64(k, "alloc_fastpath") + ju64(k, "alloc_slowpath");
	uint64_t frees = ju64(k, "free_fastpath") + ju64(k, "free_slowpath");

	for (size_t i = 0; i < NKC; i++)
		(void)ju64(k, kernel_counters[i]);
	ck_assert_int_eq((int)k->n, (int)NKC);
	ck_assert_uint_eq(allocs - frees, in_use);
	ck_assert_uint_eq(ju64(cs, "in_use"), in_use);
	ck_assert_uint_eq(ju64(cs, "bytes_in_use"), in_use * size);
	ck_assert_uint_eq(ju64(cs, "object_size"), size);
	ck_assert_uint_ge(ju64(cs, "objects"), in_use);
	ck_assert_uint_ge(ju64(cs, "active_objects"), in_use);
	ck_assert_uint_le(ju64(cs, "active_objects"), ju64(cs, "objects"));
	ck_assert_uint_ge(ju64(cs, "slabs"), (in_use * size) >> 18);
	ck_assert_uint_le(ju64(cs, "partial_slabs"), ju64(cs, "slabs"));
	ck_assert_uint_eq(ju64(cs, "bytes_mapped"), ju64(cs, "slabs") << 18);
	(void)ju64(cs, "barn_full");
	(void)ju64(cs, "barn_empty");
	(void)ju64(cs, "sheaf_capacity");
	(void)ju64(cs, "min_partial");
	if (nodes) {
		const struct jv *ns = jarr(cs, "nodes");
		uint64_t objs = 0, slabs = 0, a = 0;
		ck_assert_int_eq((int)ns->n, 2);
		for (size_t n = 0; n < ns->n; n++) {
			const struct jv *nk = jreq(ns->v[n], "counters", J_OBJ);
			ck_assert_uint_eq(ju64(ns->v[n], "node"), n);
			ck_assert_int_eq((int)nk->n, (int)NKC);
			objs += ju64(ns->v[n], "objects");
			slabs += ju64(ns->v[n], "slabs");
			a += ju64(nk, "alloc_fastpath") + ju64(nk, "alloc_slowpath");
			ck_assert_uint_eq(ju64(ns->v[n], "bytes_mapped"),
					  ju64(ns->v[n], "slabs") << 18);
			(void)ju64(ns->v[n], "active_objects");
			(void)ju64(ns->v[n], "partial_slabs");
			(void)ju64(ns->v[n], "barn_full");
			(void)ju64(ns->v[n], "barn_empty");
			ck_assert(jget(ns->v[n], "in_use") == NULL);
		}
		ck_assert_uint_eq(objs, ju64(cs, "objects"));
		ck_assert_uint_eq(slabs, ju64(cs, "slabs"));
		ck_assert_uint_eq(a, allocs);
	} else {
		ck_assert(jget(cs, "nodes") == NULL);
	}
}

/* ---- workloads ------------------------------------------------------------------- */

static void wl_fail(struct wl_ctl *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
	va_end(ap);
	atomic_store(&c->failed, 1);
	_exit(1);
}

static void wl_main(struct wl_ctl *c, const char *cache, enum wl_mode mode, size_t n)
{
	char err[256] = "";
	sheaf_pool_t *pool = sheaf_connect(D.sock, "sheafctl-test-wl", 0, err, sizeof(err));
	sheaf_cache_t *sc;
	void **objs = calloc(n, sizeof(void *));

	if (pool == NULL)
		wl_fail(c, "sheaf_connect: %s", err);
	if ((sc = sheaf_cache_open(pool, cache)) == NULL)
		wl_fail(c, "sheaf_cache_open(%s): %s", cache, strerror(errno));
	sheaf_thread_set_node(pool, 0);
	do {
		for (size_t i = 0; i < n; i++)
			if ((objs[i] = sheaf_alloc(sc)) == NULL)
				wl_fail(c, "alloc %zu: %s", i, strerror(errno));
			else
				memset(objs[i], 0xa5, 8);       /* use it: its page is backed */
		if (mode == WL_HOLD) {
			atomic_store(&c->ready, 1);
			while (!atomic_load(&c->stop))
				usleep(1000);
		}
		for (size_t i = 0; i < n; i++)
			if (sheaf_free(sc, objs[i]) != 0)
				wl_fail(c, "free %zu failed", i);
		atomic_fetch_add(&c->batches, 1);
	} while (mode == WL_LOOP && !atomic_load(&c->stop));
	if (mode == WL_BURST) {                 /* stay mapped until told */
		atomic_store(&c->ready, 1);
		while (!atomic_load(&c->stop))
			usleep(1000);
	}
	sheaf_disconnect(pool);
	free(objs);
	atomic_store(&c->ready, 1);
	_exit(0);
}

void wl_start(struct wl *w, const char *cache, enum wl_mode mode, size_t n)
{
	w->ctl = mmap(NULL, sizeof(*w->ctl), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		      -1, 0);
	ck_assert(w->ctl != MAP_FAILED);
	fflush(NULL);
	w->pid = fork();
	ck_assert(w->pid >= 0);
	if (w->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		wl_main(w->ctl, cache, mode, n);
	}
}

/* Wait for @ready (or, with @batches, that many batches). */
void wl_wait(struct wl *w, uint64_t batches)
{
	for (int64_t t0 = now_ms();; sleep_ms(2)) {
		REQUIRE(!atomic_load(&w->ctl->failed), "workload: %s", w->ctl->msg);
		if (batches ? atomic_load(&w->ctl->batches) >= batches : atomic_load(&w->ctl->ready))
			return;
		REQUIRE(now_ms() - t0 < 120000, "workload not ready within 120 s");
	}
}

/* Stop the workload and require a clean exit. */
void wl_stop(struct wl *w)
{
	int st;

	atomic_store(&w->ctl->stop, 1);
	ck_assert(waitpid(w->pid, &st, 0) == w->pid);
	REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 0, "workload ended with 0x%x: %s", st,
		w->ctl->msg);
	munmap(w->ctl, sizeof(*w->ctl));
}

/* libsheaf's pool checker from a connected client (forked: this process
 * stays free of pools). */
void pool_check_ok(void)
{
	struct wl_ctl *c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t pid;
	int st;

	fflush(NULL);
	pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0) {
		char err[256] = "";
		sheaf_pool_t *p = sheaf_connect(D.sock, "checker", 0, err, sizeof(err));
		if (p == NULL)
			wl_fail(c, "connect: %s", err);
		if (sheaf_pool_check(p, err, sizeof(err)) != 0)
			wl_fail(c, "sheaf_pool_check: %s", err);
		sheaf_disconnect(p);
		_exit(0);
	}
	ck_assert(waitpid(pid, &st, 0) == pid);
	REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 0, "pool check: %s", c->msg);
	munmap(c, sizeof(*c));
}

void create_cache(const char *name, const char *size)
{
	struct run r;

	CTL(&r, "create", (char *)name, (char *)size);
	expect(&r, 0, "create");
	run_free(&r);
}
