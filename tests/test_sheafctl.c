/*
 * test_sheafctl.c - sheafctl against a real sheafd.  Each test starts its
 * own daemon (dirname(/proc/self/exe)/../daemon/sheafd, 2 simulated nodes,
 * a socket in a temporary directory) and runs the CLI
 * (dirname(/proc/self/exe)/../client/sheafctl/sheafctl) with fork/exec, capturing
 * stdout, stderr and the exit status.  Workloads are forked children using
 * libsheaf (sheaf_connect, sheaf_cache_open, alloc/free).
 *
 * Covered: every subcommand in table and JSON form (JSON parsed by a small
 * recursive-descent parser below and checked field by field); stats in
 * interval mode; tune of sheaf_capacity under a running workload (the
 * barn exchanges per allocation follow, and the pool check passes after);
 * shrink after a burst of 10^6 objects (the memfd's blocks and sheafd's
 * RssShmem fall); the metrics text format; exit status and message of bad
 * usage, a dead socket and an out-of-range tunable; more caches than one
 * Stats reply of sheafd can hold.
 *
 * Each test is its own TCase: CK_RUN_CASE=<name> runs one.
 */
#include <check.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "client/internal.h"
#include "client/sheaf.h"
#include "proto/version.h"
#include "tests/util_proc.h"
#include "tests/util_check.h"

/* Check's ck_assert writes to a pipe on every pass: loops use this. */
#define REQUIRE(cond, ...)                                                  \
	do {                                                                \
		if (!(cond))                                                \
			ck_abort_msg(__VA_ARGS__);                          \
	} while (0)

static const char *const kernel_counters[] = {
	"alloc_fastpath", "alloc_slowpath", "free_fastpath", "free_slowpath",
	"sheaf_alloc", "sheaf_free", "barn_get", "barn_get_fail", "barn_put",
	"barn_put_fail", "sheaf_prefill_fast", "sheaf_prefill_slow",
	"sheaf_prefill_oversize", "sheaf_return_fast", "sheaf_return_slow",
	"free_remote", "free_invalid", "alloc_fail", "sheaf_refill", "sheaf_flush",
	"alloc_slab", "free_slab", "flush_invalid", "refill_remote",
};
#define NKC (sizeof(kernel_counters) / sizeof(kernel_counters[0]))

/* ======================================================================= */
/* A minimal JSON parser (RFC 8259), strict: the test of "valid JSON".      */
/* ======================================================================= */

enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jv {
	enum jtype t;
	int b;
	char *s;                     /* J_STR: the string; J_NUM: its text */
	size_t n;                    /* J_ARR/J_OBJ: members */
	struct jv **v;
	char **k;                    /* J_OBJ: keys */
};

struct jp {
	const char *p;
	char err[160];
};

static struct jv *jp_value(struct jp *p, int depth);

static void jv_free(struct jv *v)
{
	if (v == NULL)
		return;
	for (size_t i = 0; i < v->n; i++) {
		jv_free(v->v[i]);
		if (v->k != NULL)
			free(v->k[i]);
	}
	free(v->v);
	free(v->k);
	free(v->s);
	free(v);
}

static struct jv *jp_fail(struct jp *p, const char *what)
{
	if (p->err[0] == '\0')
		snprintf(p->err, sizeof(p->err), "%s at '%.20s'", what, p->p);
	return NULL;
}

static void jp_ws(struct jp *p)
{
	while (*p->p == ' ' || *p->p == '\t' || *p->p == '\n' || *p->p == '\r')
		p->p++;
}

static void put_utf8(char **o, unsigned cp)
{
	char *s = *o;
	if (cp < 0x80) {
		*s++ = (char)cp;
	} else if (cp < 0x800) {
		*s++ = (char)(0xc0 | cp >> 6);
		*s++ = (char)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		*s++ = (char)(0xe0 | cp >> 12);
		*s++ = (char)(0x80 | ((cp >> 6) & 0x3f));
		*s++ = (char)(0x80 | (cp & 0x3f));
	} else {
		*s++ = (char)(0xf0 | cp >> 18);
		*s++ = (char)(0x80 | ((cp >> 12) & 0x3f));
		*s++ = (char)(0x80 | ((cp >> 6) & 0x3f));
		*s++ = (char)(0x80 | (cp & 0x3f));
	}
	*o = s;
}

static int hex4(const char *s, unsigned *out)
{
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		int c = s[i];
		if (!isxdigit(c))
			return -1;
		v = v * 16 + (unsigned)(isdigit(c) ? c - '0' : (tolower(c) - 'a' + 10));
	}
	*out = v;
	return 0;
}

static char *jp_string(struct jp *p)
{
	const char *s = p->p + 1;
	char *out, *o;

	if (*p->p != '"') {
		jp_fail(p, "expected a string");
		return NULL;
	}
	out = o = malloc(strlen(s) * 3 + 4);
	while (*s != '"') {
		unsigned cp, lo;
		if ((unsigned char)*s < 0x20) {
			jp_fail(p, "control character in string");
			goto bad;
		}
		if (*s != '\\') {
			*o++ = *s++;
			continue;
		}
		s++;
		switch (*s) {
		case '"': case '\\': case '/': *o++ = *s; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'n': *o++ = '\n'; break;
		case 'r': *o++ = '\r'; break;
		case 't': *o++ = '\t'; break;
		case 'u':
			if (hex4(s + 1, &cp) != 0) {
				jp_fail(p, "bad \\u escape");
				goto bad;
			}
			s += 4;
			if (cp >= 0xd800 && cp < 0xdc00) {
				if (s[1] != '\\' || s[2] != 'u' || hex4(s + 3, &lo) != 0 ||
				    lo < 0xdc00 || lo > 0xdfff) {
					jp_fail(p, "lone surrogate");
					goto bad;
				}
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				s += 6;
			}
			put_utf8(&o, cp);
			break;
		default:
			jp_fail(p, "bad escape");
			goto bad;
		}
		s++;
	}
	*o = '\0';
	p->p = s + 1;
	return out;
bad:
	free(out);
	return NULL;
}

static struct jv *jv_new(enum jtype t)
{
	struct jv *v = calloc(1, sizeof(*v));
	v->t = t;
	return v;
}

static struct jv *jp_number(struct jp *p)
{
	const char *s = p->p, *start = s;
	struct jv *v;

	if (*s == '-')
		s++;
	if (*s == '0')
		s++;
	else if (*s >= '1' && *s <= '9')
		while (isdigit((unsigned char)*s))
			s++;
	else
		return jp_fail(p, "bad number");
	if (*s == '.') {
		if (!isdigit((unsigned char)*++s))
			return jp_fail(p, "bad fraction");
		while (isdigit((unsigned char)*s))
			s++;
	}
	if (*s == 'e' || *s == 'E') {
		s++;
		if (*s == '+' || *s == '-')
			s++;
		if (!isdigit((unsigned char)*s))
			return jp_fail(p, "bad exponent");
		while (isdigit((unsigned char)*s))
			s++;
	}
	v = jv_new(J_NUM);
	v->s = strndup(start, (size_t)(s - start));
	p->p = s;
	return v;
}

static void jv_push(struct jv *c, char *key, struct jv *item)
{
	c->v = realloc(c->v, (c->n + 1) * sizeof(*c->v));
	if (c->t == J_OBJ)
		c->k = realloc(c->k, (c->n + 1) * sizeof(*c->k));
	c->v[c->n] = item;
	if (c->t == J_OBJ)
		c->k[c->n] = key;
	c->n++;
}

static struct jv *jp_container(struct jp *p, int depth, char close)
{
	struct jv *c = jv_new(close == '}' ? J_OBJ : J_ARR);

	p->p++;
	jp_ws(p);
	if (*p->p == close) {
		p->p++;
		return c;
	}
	for (;;) {
		char *key = NULL;
		struct jv *item;

		jp_ws(p);
		if (close == '}') {
			if ((key = jp_string(p)) == NULL)
				goto bad;
			for (size_t i = 0; i < c->n; i++)
				if (strcmp(c->k[i], key) == 0) {
					free(key);
					jp_fail(p, "duplicate key");
					goto bad;
				}
			jp_ws(p);
			if (*p->p != ':') {
				free(key);
				jp_fail(p, "expected ':'");
				goto bad;
			}
			p->p++;
		}
		if ((item = jp_value(p, depth + 1)) == NULL) {
			free(key);
			goto bad;
		}
		jv_push(c, key, item);
		jp_ws(p);
		if (*p->p == ',') {
			p->p++;
			continue;
		}
		if (*p->p == close) {
			p->p++;
			return c;
		}
		jp_fail(p, "expected ',' or a closing bracket");
		goto bad;
	}
bad:
	jv_free(c);
	return NULL;
}

static struct jv *jp_value(struct jp *p, int depth)
{
	struct jv *v;

	if (depth > 64)
		return jp_fail(p, "too deep");
	jp_ws(p);
	switch (*p->p) {
	case '{': return jp_container(p, depth, '}');
	case '[': return jp_container(p, depth, ']');
	case '"':
		v = jv_new(J_STR);
		if ((v->s = jp_string(p)) == NULL) {
			jv_free(v);
			return NULL;
		}
		return v;
	case 't': case 'f': case 'n': {
		const char *lit = *p->p == 't' ? "true" : *p->p == 'f' ? "false" : "null";
		if (strncmp(p->p, lit, strlen(lit)) != 0)
			return jp_fail(p, "bad literal");
		v = jv_new(*p->p == 'n' ? J_NULL : J_BOOL);
		v->b = *p->p == 't';
		p->p += strlen(lit);
		return v;
	}
	default:
		return jp_number(p);
	}
}

/* Parse a whole document (surrounding whitespace allowed) or fail the test. */
static struct jv *json_parse(const char *text)
{
	struct jp p = { .p = text };
	struct jv *v = jp_value(&p, 0);

	if (v != NULL) {
		jp_ws(&p);
		if (*p.p != '\0') {
			jv_free(v);
			v = jp_fail(&p, "trailing text");
		}
	}
	REQUIRE(v != NULL, "invalid JSON (%s):\n%s", p.err, text);
	return v;
}

static struct jv *jget(const struct jv *o, const char *key)
{
	REQUIRE(o != NULL && o->t == J_OBJ, "not an object looking up '%s'", key);
	for (size_t i = 0; i < o->n; i++)
		if (strcmp(o->k[i], key) == 0)
			return o->v[i];
	return NULL;
}

static struct jv *jreq(const struct jv *o, const char *key, enum jtype t)
{
	struct jv *v = jget(o, key);
	REQUIRE(v != NULL, "JSON field '%s' missing", key);
	REQUIRE(v->t == t, "JSON field '%s' has type %d, expected %d", key, v->t, t);
	return v;
}

static uint64_t ju64(const struct jv *o, const char *key)
{
	struct jv *v = jreq(o, key, J_NUM);
	char *end;
	unsigned long long x;

	REQUIRE(isdigit((unsigned char)v->s[0]), "'%s' = %s: not an unsigned integer", key, v->s);
	errno = 0;
	x = strtoull(v->s, &end, 10);
	REQUIRE(*end == '\0' && errno == 0, "'%s' = %s: not an unsigned integer", key, v->s);
	return x;
}

static double jnum(const struct jv *o, const char *key)
{
	return strtod(jreq(o, key, J_NUM)->s, NULL);
}

static const char *jstr(const struct jv *o, const char *key)
{
	return jreq(o, key, J_STR)->s;
}

static int jbool(const struct jv *o, const char *key)
{
	return jreq(o, key, J_BOOL)->b;
}

static struct jv *jarr(const struct jv *o, const char *key)
{
	return jreq(o, key, J_ARR);
}

/* The element of array @a whose "name" is @name. */
static struct jv *jnamed(const struct jv *a, const char *name)
{
	for (size_t i = 0; i < a->n; i++)
		if (a->v[i]->t == J_OBJ && jget(a->v[i], "name") != NULL &&
		    strcmp(jstr(a->v[i], "name"), name) == 0)
			return a->v[i];
	ck_abort_msg("no element named '%s'", name);
	return NULL;
}

static void json_selftest(void)
{
	static const char *const bad[] = {
		"", "{", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "01", "1.", "-", "\"\\x\"",
		"\"a\nb\"", "{\"a\":1,\"a\":2}", "[1] x", "tru", "\"\\ud800\"",
	};
	struct jv *v = json_parse(" {\"a\": [1, -2.5e3, true, null, \"x\\u00e9\\ud83d\\ude00\"], \"b\": {}} ");

	ck_assert_int_eq((int)jarr(v, "a")->n, 5);
	ck_assert_str_eq(jarr(v, "a")->v[4]->s, "x\xc3\xa9\xf0\x9f\x98\x80");
	jv_free(v);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct jp p = { .p = bad[i] };
		struct jv *b = jp_value(&p, 0);
		if (b != NULL) {
			jp_ws(&p);
			REQUIRE(*p.p != '\0', "parser accepted bad JSON '%s'", bad[i]);
			jv_free(b);
		}
	}
}

/* ======================================================================= */
/* A daemon per test, and running sheafctl                                  */
/* ======================================================================= */

static char sheafd_bin[PATH_MAX + 32], sheafctl_bin[PATH_MAX + 32];

static struct {
	pid_t pid;
	char dir[64];
	char sock[128];
	char log[128];
} D = { .pid = -1 };

static void find_binaries(void)
{
	ck_assert(exe_dir(sheafd_bin, sizeof(sheafd_bin), "../daemon/sheafd") == 0);
	ck_assert(exe_dir(sheafctl_bin, sizeof(sheafctl_bin), "../client/sheafctl/sheafctl") == 0);
	ck_assert_msg(access(sheafd_bin, X_OK) == 0, "no %s", sheafd_bin);
	ck_assert_msg(access(sheafctl_bin, X_OK) == 0, "no %s", sheafctl_bin);
}

/* SIGTERM (SIGKILL after 5 s) and remove the directory. */
static void daemon_stop(void)
{
	int st;

	if (D.pid > 0) {
		kill(D.pid, SIGTERM);
		if (wait_pid(D.pid, 5000, &st) != 1) {
			kill(D.pid, SIGKILL);
			waitpid(D.pid, &st, 0);
		}
		D.pid = -1;
	}
	if (D.dir[0] != '\0') {
		rm_tree(D.dir);
		D.dir[0] = '\0';
	}
}

static void setup(void)
{
	const char *argv[] = { "sheafd", "-f", "-s", D.sock, "--nodes", "2", "--size", "512M",
			       "--sheaves", "2048", "--log-level", "warn", NULL };
	struct spawn_opts o = { .exe = sheafd_bin, .out = D.log, .err = D.log };
	char err[256];
	const char *msg;

	find_binaries();
	ck_assert(make_temp_dir(D.dir, sizeof(D.dir), "/tmp/sheafctl-test.XXXXXX") == 0);
	snprintf(D.sock, sizeof(D.sock), "%s/s.sock", D.dir);
	snprintf(D.log, sizeof(D.log), "%s/sheafd.log", D.dir);
	atexit(daemon_stop);               /* also when a test fails */
	msg = start_listening(argv, &o, D.sock, 30000, &D.pid, err, sizeof(err));
	if (msg != NULL) {
		dump_file("sheafd log", D.log, 0);
		ck_abort_msg("%s", msg);
	}
	setenv("SHEAF_SOCKET", "/nonexistent/not-this-one", 1);
}

static void teardown(void)
{
	daemon_stop();
}

struct run {
	int status;                  /* exit status, 128+signal when killed */
	char *out, *err;
};

static void run_free(struct run *r)
{
	free(r->out);
	free(r->err);
	memset(r, 0, sizeof(*r));
}

/* Read both pipes to EOF. */
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
static int run_argv(struct run *r, int with_socket, char **argv)
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
		execv(sheafctl_bin, args);
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

#define CTL(r, ...) run_argv((r), 1, (char *[]){ __VA_ARGS__, NULL })
#define CTL_NOSOCK(r, ...) run_argv((r), 0, (char *[]){ __VA_ARGS__, NULL })

/* Run and require exit status @want; returns the parsed stdout when @json. */
static struct jv *ctl_ok_json(char **argv)
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

#define CTLJ(...) ctl_ok_json((char *[]){ __VA_ARGS__, "-o", "json", NULL })

static void expect(struct run *r, int status, const char *what)
{
	REQUIRE(r->status == status, "%s: exit %d, expected %d\nstdout: %s\nstderr: %s", what,
		r->status, status, r->out, r->err);
}

static int starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The line of @text that starts with @prefix (after blanks), or NULL. */
static const char *line_with(const char *text, const char *prefix)
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
static uint64_t table_value(const char *text, const char *prefix)
{
	const char *l = line_with(text, prefix);
	REQUIRE(l != NULL, "no line '%s' in:\n%s", prefix, text);
	l += strlen(prefix);
	while (*l == ' ')
		l++;
	REQUIRE(isdigit((unsigned char)*l), "no number after '%s' in:\n%s", prefix, text);
	return strtoull(l, NULL, 10);
}

/* ======================================================================= */
/* Workloads: forked children using libsheaf                                */
/* ======================================================================= */

enum wl_mode { WL_HOLD, WL_LOOP, WL_BURST };

struct wl_ctl {
	_Atomic int stop;            /* parent -> child */
	_Atomic int ready;           /* child -> parent */
	_Atomic uint64_t batches;
	_Atomic int failed;
	char msg[256];
};

struct wl {
	pid_t pid;
	struct wl_ctl *ctl;
};

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

static void wl_start(struct wl *w, const char *cache, enum wl_mode mode, size_t n)
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
static void wl_wait(struct wl *w, uint64_t batches)
{
	for (int64_t t0 = now_ms();; sleep_ms(2)) {
		REQUIRE(!atomic_load(&w->ctl->failed), "workload: %s", w->ctl->msg);
		if (batches ? atomic_load(&w->ctl->batches) >= batches : atomic_load(&w->ctl->ready))
			return;
		REQUIRE(now_ms() - t0 < 120000, "workload not ready within 120 s");
	}
}

/* Stop the workload and require a clean exit. */
static void wl_stop(struct wl *w)
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
static void pool_check_ok(void)
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

static void create_cache(const char *name, const char *size)
{
	struct run r;

	CTL(&r, "create", (char *)name, (char *)size);
	expect(&r, 0, "create");
	run_free(&r);
}

/* Totals of a cache from `stats CACHE -o json`. */
struct snap {
	uint64_t allocs, barn_get, capacity;
};

static struct snap snap_of(const char *cache)
{
	struct jv *v = CTLJ("stats", (char *)cache);
	struct jv *cs = jnamed(jarr(v, "caches"), cache), *k = jreq(cs, "counters", J_OBJ);
	struct snap s = {
		.allocs = ju64(k, "alloc_fastpath") + ju64(k, "alloc_slowpath"),
		.barn_get = ju64(k, "barn_get"),
		.capacity = ju64(cs, "sheaf_capacity"),
	};
	jv_free(v);
	return s;
}

/* ======================================================================= */
/* Tests                                                                     */
/* ======================================================================= */

START_TEST(test_json_parser)
{
	json_selftest();
}
END_TEST

START_TEST(test_info)
{
	struct run r;
	struct jv *v;

	CTL(&r, "info");
	expect(&r, 0, "info");
	ck_assert_str_eq(r.err, "");
	ck_assert_msg(strstr(line_with(r.out, "version"), SHEAF_VERSION) != NULL, "%s", r.out);
	ck_assert_msg(strstr(line_with(r.out, "nodes"), "2 (simulated)") != NULL, "%s", r.out);
	ck_assert_msg(strstr(line_with(r.out, "socket"), D.sock) != NULL, "%s", r.out);
	ck_assert_msg(strstr(line_with(r.out, "pool_size"), "536870912 bytes") != NULL, "%s", r.out);
	ck_assert_int_eq(table_value(r.out, "max_caches"), 64);
	ck_assert_int_eq(table_value(r.out, "max_clients"), 64);
	ck_assert_int_eq(table_value(r.out, "protocol_version"), 1);
	ck_assert(line_with(r.out, "uptime") != NULL);
	run_free(&r);

	v = CTLJ("info");
	ck_assert_str_eq(jstr(v, "version"), SHEAF_VERSION);
	ck_assert_int_eq(ju64(v, "protocol_version"), 1);
	ck_assert_str_eq(jstr(v, "socket"), D.sock);
	ck_assert_int_eq(ju64(v, "nodes"), 2);
	ck_assert(jbool(v, "simulated_nodes"));
	ck_assert_int_eq(ju64(v, "sheaf_count"), 2048);
	ck_assert_uint_eq(ju64(v, "pool_size"), 512u << 20);
	ck_assert_uint_eq(ju64(v, "mem_cap"), 512u << 20);
	ck_assert_uint_gt(ju64(v, "region_size"), ju64(v, "pool_size"));
	ck_assert_uint_ne(ju64(v, "map_addr"), 0);
	ck_assert_uint_ge(ju64(v, "layout_version"), 1);
	ck_assert_uint_lt(ju64(v, "uptime_seconds"), 120);
	ck_assert_int_eq(ju64(v, "clients"), 0);
	ck_assert_int_eq(ju64(v, "max_clients"), 64);
	ck_assert_int_eq(ju64(v, "max_caches"), 64);
	ck_assert_int_eq(ju64(v, "max_frame"), 1 << 20);
	ck_assert_int_eq((int)v->n, 16);                 /* no undocumented field */
	jv_free(v);
}
END_TEST

static void check_cache_info(const struct jv *ci, const char *name, uint64_t size,
			     uint64_t align, uint64_t cap, int debug)
{
	ck_assert_str_eq(jstr(ci, "name"), name);
	(void)ju64(ci, "id");
	ck_assert_uint_eq(ju64(ci, "object_size"), size);
	ck_assert_uint_eq(ju64(ci, "align"), align);
	ck_assert_uint_eq(ju64(ci, "objects_per_slab"), (256u << 10) / size);
	ck_assert_uint_eq(ju64(ci, "sheaf_capacity"), cap);
	ck_assert_uint_ge(ju64(ci, "min_partial"), 5);
	ck_assert_uint_eq(ju64(ci, "barn_low"), 4);
	ck_assert_uint_eq(ju64(ci, "barn_high"), 16);
	ck_assert_uint_gt(ju64(ci, "barn_limit"), 0);
	ck_assert_uint_eq(ju64(ci, "flags"), debug ? 1 : 0);
	ck_assert_int_eq(jbool(ci, "debug"), debug);
	ck_assert_int_eq((int)ci->n, 12);
}

START_TEST(test_caches_create_destroy)
{
	struct run r;
	struct jv *v;

	CTL(&r, "create", "conn", "192");
	expect(&r, 0, "create conn");
	ck_assert_msg(strstr(r.out, "created cache 'conn': id 0, object size 192 B") != NULL,
		      "%s", r.out);
	run_free(&r);
	v = CTLJ("create", "msg", "40", "--align", "64", "--capacity", "16", "--debug");
	check_cache_info(jreq(v, "cache", J_OBJ), "msg", 64, 64, 16, 1);
	jv_free(v);

	CTL(&r, "caches");
	expect(&r, 0, "caches");
	ck_assert_msg(strstr(r.out, "NAME") && strstr(r.out, "OBJ/SLAB"), "%s", r.out);
	ck_assert_msg(line_with(r.out, "0 conn    192") != NULL, "%s", r.out);
	ck_assert_msg(line_with(r.out, "1 msg      64") != NULL && strstr(r.out, "debug"),
		      "%s", r.out);
	run_free(&r);
	v = CTLJ("caches");
	ck_assert_int_eq((int)jarr(v, "caches")->n, 2);
	check_cache_info(jnamed(jarr(v, "caches"), "conn"), "conn", 192, 8, 85, 0);
	check_cache_info(jnamed(jarr(v, "caches"), "msg"), "msg", 64, 64, 16, 1);
	jv_free(v);

	CTL(&r, "create", "conn", "64");                 /* refused: exists */
	expect(&r, 1, "create an existing cache");
	ck_assert_msg(starts(r.err, "sheafctl: ") && strstr(r.err, "conn"), "%s", r.err);
	run_free(&r);
	CTL(&r, "create", "big", "100000");              /* refused: size */
	expect(&r, 1, "create too big");
	ck_assert_msg(strstr(r.err, "65536") != NULL, "%s", r.err);
	run_free(&r);

	CTL(&r, "destroy", "conn");
	expect(&r, 0, "destroy");
	ck_assert_str_eq(r.out, "destroyed cache 'conn'\n");
	run_free(&r);
	v = CTLJ("destroy", "msg");
	ck_assert_str_eq(jstr(v, "destroyed"), "msg");
	jv_free(v);
	CTL(&r, "destroy", "msg");
	expect(&r, 1, "destroy a missing cache");
	ck_assert_str_eq(r.err, "sheafctl: no cache named 'msg'\n");
	run_free(&r);
	v = CTLJ("caches");
	ck_assert_int_eq((int)jarr(v, "caches")->n, 0);
	jv_free(v);
}
END_TEST

/* Every figure of a cache's stats object; per node with @nodes. */
static void check_stats_obj(const struct jv *cs, uint64_t in_use, uint64_t size, int nodes)
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

START_TEST(test_stats)
{
	struct wl w;
	struct run r;
	struct jv *v;
	char *lines[8];
	int n = 0;

	create_cache("st", "128");
	create_cache("other", "32");
	wl_start(&w, "st", WL_HOLD, 1000);
	wl_wait(&w, 0);

	CTL(&r, "stats", "st");
	expect(&r, 0, "stats st");
	ck_assert_msg(starts(r.out, "cache st: id 0, object size 128 B, 2048 objects per slab\n"), "%s", r.out);
	ck_assert_uint_eq(table_value(r.out, "in_use "), 1000);
	ck_assert_uint_eq(table_value(r.out, "bytes_in_use "), 128000);
	ck_assert_uint_eq(table_value(r.out, "sheaf_capacity "), 128);
	for (size_t i = 0; i < NKC; i++) {
		char pre[64];
		snprintf(pre, sizeof(pre), "%s ", kernel_counters[i]);
		(void)table_value(r.out, pre);
	}
	const char *gauges[] = { "objects ", "active_objects ", "slabs ", "partial_slabs ",
				 "bytes_mapped ", "barn_full ", "barn_empty ", "min_partial " };
	for (size_t i = 0; i < sizeof(gauges) / sizeof(gauges[0]); i++)
		(void)table_value(r.out, gauges[i]);
	ck_assert(strstr(r.out, "other") == NULL);
	run_free(&r);

	CTL(&r, "stats", "-n", "st");
	expect(&r, 0, "stats -n");
	ck_assert_msg(line_with(r.out, "NAME") && strstr(r.out, "node0") && strstr(r.out, "node1"),
		      "%s", r.out);
	ck_assert_msg(strstr(line_with(r.out, "in_use "), " - ") != NULL, "%s", r.out);
	run_free(&r);

	CTL(&r, "stats");                                /* every cache */
	expect(&r, 0, "stats");
	ck_assert(strstr(r.out, "cache st:") && strstr(r.out, "cache other:"));
	run_free(&r);

	v = CTLJ("stats", "st");
	ck_assert_int_eq((int)jarr(v, "caches")->n, 1);
	ck_assert(jnum(v, "interval_seconds") == 0);
	(void)ju64(v, "time");
	check_stats_obj(jnamed(jarr(v, "caches"), "st"), 1000, 128, 0);
	jv_free(v);
	v = CTLJ("stats", "--per-node");
	ck_assert_int_eq((int)jarr(v, "caches")->n, 2);
	check_stats_obj(jnamed(jarr(v, "caches"), "st"), 1000, 128, 1);
	check_stats_obj(jnamed(jarr(v, "caches"), "other"), 0, 32, 1);
	jv_free(v);

	/* Interval mode: the first report since start, then the intervals (the
	 * workload holds its objects: no allocation in between). */
	CTL(&r, "stats", "st", "0.2", "3", "-o", "json");
	expect(&r, 0, "stats st 0.2 3");
	for (char *save, *l = strtok_r(r.out, "\n", &save); l && n < 8; l = strtok_r(NULL, "\n", &save))
		lines[n++] = l;
	ck_assert_int_eq(n, 3);
	for (int i = 0; i < n; i++) {
		v = json_parse(lines[i]);
		const struct jv *k = jreq(jnamed(jarr(v, "caches"), "st"), "counters", J_OBJ);
		ck_assert(jnum(v, "interval_seconds") == (i == 0 ? 0 : 0.2));
		ck_assert_uint_eq(ju64(k, "alloc_fastpath") + ju64(k, "alloc_slowpath"),
				  i == 0 ? 1000 : 0);
		ck_assert_uint_eq(ju64(jnamed(jarr(v, "caches"), "st"), "in_use"), 1000);
		jv_free(v);
	}
	run_free(&r);
	CTL(&r, "stats", "st", "0.1", "2");
	expect(&r, 0, "stats st 0.1 2 (table)");
	ck_assert_msg(strstr(r.out, "counters over the last 0.1 s") != NULL, "%s", r.out);
	run_free(&r);

	CTL(&r, "stats", "nosuch");
	expect(&r, 1, "stats of a missing cache");
	ck_assert_str_eq(r.err, "sheafctl: no cache named 'nosuch'\n");
	run_free(&r);
	wl_stop(&w);
}
END_TEST

START_TEST(test_clients)
{
	struct wl w;
	struct run r;
	struct jv *v, *c = NULL;
	char pid[32];
	uint64_t t0 = (uint64_t)time(NULL);

	create_cache("cl", "256");
	v = CTLJ("clients");
	ck_assert_int_eq((int)jarr(v, "clients")->n, 0);
	jv_free(v);
	wl_start(&w, "cl", WL_HOLD, 500);
	wl_wait(&w, 0);

	snprintf(pid, sizeof(pid), " %d ", (int)w.pid);
	CTL(&r, "clients");
	expect(&r, 0, "clients");
	ck_assert_msg(line_with(r.out, "ID") && strstr(r.out, "ATTACHED") &&
		      strstr(r.out, pid) && strstr(r.out, "sheafctl-test-wl"), "%s", r.out);
	run_free(&r);
	v = CTLJ("clients");
	ck_assert_int_eq((int)jarr(v, "clients")->n, 1);
	c = jarr(v, "clients")->v[0];
	(void)ju64(c, "id");
	ck_assert_uint_eq(ju64(c, "pid"), (uint64_t)w.pid);
	ck_assert_str_eq(jstr(c, "name"), "sheafctl-test-wl");
	ck_assert_uint_eq(ju64(c, "uid"), getuid());
	ck_assert_uint_ge(ju64(c, "attached_since"), t0 - 2);
	ck_assert_uint_le(ju64(c, "attached_since"), (uint64_t)time(NULL) + 2);
	ck_assert_uint_ge(ju64(c, "sheaves_held"), 1);
	ck_assert_uint_eq(ju64(c, "objects_in_use"), 500);
	ck_assert_int_eq((int)c->n, 7);
	jv_free(v);

	CTL(&r, "destroy", "cl");                        /* objects in use */
	expect(&r, 1, "destroy a cache in use");
	ck_assert_msg(starts(r.err, "sheafctl: ") && strchr(r.err, '\n') == strrchr(r.err, '\n'),
		      "%s", r.err);
	run_free(&r);

	wl_stop(&w);
	for (int64_t t = now_ms();; sleep_ms(20)) {      /* the daemon reaps it */
		v = CTLJ("clients");
		size_t n = jarr(v, "clients")->n;
		jv_free(v);
		if (n == 0)
			break;
		REQUIRE(now_ms() - t < 10000, "client still listed 10 s after it exited");
	}
}
END_TEST

START_TEST(test_shrink_check)
{
	struct run r;
	struct jv *v;

	create_cache("sh", "64");
	CTL(&r, "shrink");
	expect(&r, 0, "shrink");
	ck_assert_msg(starts(r.out, "every cache: released "), "%s", r.out);
	run_free(&r);
	CTL(&r, "shrink", "sh");
	expect(&r, 0, "shrink sh");
	ck_assert_msg(starts(r.out, "cache 'sh': released "), "%s", r.out);
	run_free(&r);
	v = CTLJ("shrink", "sh");
	ck_assert_str_eq(jstr(v, "cache"), "sh");
	ck_assert_uint_eq(ju64(v, "bytes_released"), ju64(v, "slabs_released") << 18);
	jv_free(v);
	CTL(&r, "shrink", "nosuch");
	expect(&r, 1, "shrink a missing cache");
	ck_assert_str_eq(r.err, "sheafctl: no cache named 'nosuch'\n");
	run_free(&r);

	CTL(&r, "check");
	expect(&r, 0, "check");
	ck_assert_msg(starts(r.out, "pool check ok: objects "), "%s", r.out);
	run_free(&r);
	v = CTLJ("check");
	ck_assert(jbool(v, "ok"));
	ck_assert_str_eq(jstr(v, "problem"), "");
	ck_assert_uint_eq(ju64(v, "in_use"), ju64(v, "counted_in_use"));
	ck_assert_uint_eq(ju64(v, "objects"),
			  ju64(v, "free_in_slabs") + ju64(v, "in_sheaves") + ju64(v, "in_use"));
	jv_free(v);
}
END_TEST

/* RssShmem of @pid (kB): its resident pages of shared memory (the region). */
static long rss_shmem(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	ck_assert(f != NULL);
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "RssShmem: %ld kB", &kb) == 1)
			break;
	fclose(f);
	ck_assert_int_ge(kb, 0);
	return kb;
}

static long blocks_of(int fd)
{
	struct stat st;
	ck_assert(fstat(fd, &st) == 0);
	return (long)st.st_blocks;
}

/*
 * 10^6 objects of 64 B allocated (and written), then freed, by a client
 * that stays attached: shrink must give back at least 80% of the blocks
 * the burst added to the memfd.  (The burst also touches metadata that
 * stays: slab bitmaps, and the sheaves the depot hands out round-robin,
 * 2112 B each; the daemon runs with 2048 sheaves to bound them.)  Resident memory: the client that touched
 * the objects loses those pages (its RssShmem falls by 80% of the burst);
 * sheafd never touches object memory (only metadata: bitmaps, sheaves), so
 * its RssShmem never comes near the burst; what it touched (the sheaves it
 * filled and flushed) a pool-wide shrink gives back: its RssShmem falls.
 */
START_TEST(test_shrink_burst)
{
	const size_t burst = 1000000;
	const long burst_kb = (long)(burst * 64 / 1024);
	char err[256] = "";
	sheaf_pool_t *p;
	struct wl w;
	struct jv *v;
	long b0, b1, b2, c1, c2, d0, d1, d2;
	int fd;

	create_cache("burst", "64");
	/* The region's memfd: libsheaf maps it; keep a descriptor and let go. */
	p = sheaf_connect(D.sock, "memfd-probe", 0, err, sizeof(err));
	ck_assert_msg(p != NULL, "connect: %s", err);
	fd = dup(p->shm.fd);
	ck_assert_int_ge(fd, 0);
	sheaf_disconnect(p);

	b0 = blocks_of(fd);
	d0 = rss_shmem(D.pid);
	wl_start(&w, "burst", WL_BURST, burst);
	wl_wait(&w, 0);
	b1 = blocks_of(fd);
	c1 = rss_shmem(w.pid);
	d1 = rss_shmem(D.pid);
	ck_assert_msg((b1 - b0) / 2 >= burst_kb, "burst added only %ld blocks", b1 - b0);
	ck_assert_msg(c1 >= burst_kb, "client RssShmem %ld kB after the burst", c1);

	v = CTLJ("shrink", "burst");
	ck_assert_uint_ge(ju64(v, "slabs_released"), (uint64_t)(burst * 64 * 8 / 10) >> 18);
	jv_free(v);
	b2 = blocks_of(fd);
	c2 = rss_shmem(w.pid);
	d2 = rss_shmem(D.pid);
	ck_assert_msg(b1 - b2 >= (b1 - b0) * 8 / 10,
		      "memfd blocks %ld -> %ld -> %ld: shrink gave back less than 80%% of the burst",
		      b0, b1, b2);
	ck_assert_msg(c1 - c2 >= burst_kb * 8 / 10, "client RssShmem %ld kB -> %ld kB", c1, c2);
	ck_assert_msg(d1 - d0 < burst_kb / 2 && d2 - d0 < burst_kb / 2,
		      "sheafd RssShmem %ld -> %ld -> %ld kB: it holds object pages", d0, d1, d2);
	/* What sheafd itself touched for the burst is the sheaves it filled
	 * and flushed: a pool-wide shrink gives their pages back, so its
	 * resident memory falls too. */
	ck_assert_msg(d1 - d0 >= 256, "sheafd touched only %ld kB of sheaves", d1 - d0);
	v = CTLJ("shrink");
	jv_free(v);
	{
		long d3 = rss_shmem(D.pid), b3 = blocks_of(fd);
		ck_assert_msg(d2 - d3 >= 128,
			      "sheafd RssShmem %ld -> %ld -> %ld -> %ld kB: the pool-wide shrink "
			      "did not make it fall", d0, d1, d2, d3);
		ck_assert_msg(b3 < b2, "memfd blocks %ld -> %ld after the pool-wide shrink", b2, b3);
		printf("shrink: memfd %ld -> %ld -> %ld -> %ld blocks, sheafd RssShmem %ld -> %ld -> "
		       "%ld -> %ld kB\n", b0, b1, b2, b3, d0, d1, d2, d3);
	}
	wl_stop(&w);
	close(fd);
	pool_check_ok();
}
END_TEST

START_TEST(test_tune_workload)
{
	struct wl w;
	struct jv *v;
	struct snap s0, s1, s2, s3;
	double before, after;
	struct run r;

	create_cache("tw", "64");
	wl_start(&w, "tw", WL_LOOP, 2048);
	wl_wait(&w, 20);
	s0 = snap_of("tw");
	sleep_ms(300);
	s1 = snap_of("tw");
	ck_assert_uint_eq(s1.capacity, 256);

	v = CTLJ("tune", "tw", "sheaf_capacity=8");
	ck_assert_uint_eq(ju64(jreq(v, "cache", J_OBJ), "sheaf_capacity"), 8);
	(void)ju64(v, "mem_cap");
	jv_free(v);
	sleep_ms(300);                                   /* old sheaves cycle out */
	s2 = snap_of("tw");
	sleep_ms(300);
	s3 = snap_of("tw");
	ck_assert_uint_eq(s3.capacity, 8);

	REQUIRE(s1.allocs > s0.allocs && s3.allocs > s2.allocs, "the workload stalled");
	before = (double)(s1.barn_get - s0.barn_get) / (double)(s1.allocs - s0.allocs);
	after = (double)(s3.barn_get - s2.barn_get) / (double)(s3.allocs - s2.allocs);
	ck_assert_msg(after > 3 * before && after > 1.0 / 16,
		      "barn_get per alloc %.4f at capacity 256, %.4f at 8", before, after);

	CTL(&r, "tune", "tw", "barn_low=2", "barn_high=8", "min_partial=3", "barn_limit=64");
	expect(&r, 0, "tune several");
	ck_assert_str_eq(r.out, "cache 'tw': sheaf_capacity=8 barn_limit=64 barn_low=2 "
			 "barn_high=8 min_partial=3\n");
	run_free(&r);
	wl_stop(&w);
	CTL(&r, "check");
	expect(&r, 0, "check after the workload");
	run_free(&r);
	pool_check_ok();
}
END_TEST

START_TEST(test_tune_errors)
{
	struct run r;
	struct jv *v;

	create_cache("te", "64");
	CTL(&r, "tune", "te", "sheaf_capacity=300");
	expect(&r, 1, "tune out of range");
	ck_assert_str_eq(r.err, "sheafctl: sheaf_capacity=300 out of range 0..256\n");
	ck_assert_str_eq(r.out, "");
	run_free(&r);
	CTL(&r, "tune", "te", "sheaf_capacity=8", "barn_high=0");   /* all or nothing */
	expect(&r, 1, "tune barn_high=0");
	ck_assert_msg(strstr(r.err, "barn_high=0 out of range 1..") != NULL, "%s", r.err);
	run_free(&r);
	v = CTLJ("caches");
	ck_assert_uint_eq(ju64(jnamed(jarr(v, "caches"), "te"), "sheaf_capacity"), 256);
	jv_free(v);
	CTL(&r, "tune", "te", "barn_low=20", "barn_high=10");
	expect(&r, 1, "tune barn_low > barn_high");
	ck_assert_msg(strstr(r.err, "barn_low") != NULL, "%s", r.err);
	run_free(&r);
	CTL(&r, "tune", "--pool", "mem_cap=1");
	expect(&r, 1, "tune mem_cap=1");
	ck_assert_msg(strstr(r.err, "mem_cap=1 out of range 262144..536870912") != NULL, "%s", r.err);
	run_free(&r);
	CTL(&r, "tune", "nosuch", "sheaf_capacity=8");
	expect(&r, 1, "tune a missing cache");
	ck_assert_str_eq(r.err, "sheafctl: no cache named 'nosuch'\n");
	run_free(&r);

	CTL(&r, "tune", "--pool", "mem_cap=256M");
	expect(&r, 0, "tune --pool");
	ck_assert_str_eq(r.out, "pool: mem_cap=268435456 (256.0 MiB)\n");
	run_free(&r);
	v = CTLJ("tune", "-p", "mem_cap=128M");
	ck_assert_uint_eq(ju64(v, "mem_cap"), 128u << 20);
	ck_assert(jget(v, "cache") == NULL);
	jv_free(v);
	v = CTLJ("info");
	ck_assert_uint_eq(ju64(v, "mem_cap"), 128u << 20);
	jv_free(v);

	/* Bad usage: exit 2 before anything is sent. */
	static const char *const bad[][4] = {
		{ "te", "sheaf_capacity", NULL }, { "te", "foo=1", NULL },
		{ "te", "sheaf_capacity=abc", NULL }, { "te", "sheaf_capacity=-1", NULL },
		{ "te", "mem_cap=1G", NULL }, { "--pool", "sheaf_capacity=8", NULL },
		{ "te", NULL }, { "--pool", NULL }, { "te", "=5", NULL },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *argv[6] = { (char *)"tune" };
		for (int k = 0; bad[i][k] != NULL; k++)
			argv[k + 1] = (char *)bad[i][k];
		run_argv(&r, 1, argv);
		REQUIRE(r.status == 2, "tune case %zu: exit %d (%s)", i, r.status, r.err);
		REQUIRE(starts(r.err, "sheafctl tune: ") &&
			strstr(r.err, "(see sheafctl tune --help)\n") != NULL,
			"tune case %zu: message '%s'", i, r.err);
		run_free(&r);
	}
}
END_TEST

START_TEST(test_top)
{
	struct wl w;
	struct run r;
	struct jv *v;
	const char *a, *b;
	char *lines[4];
	int n = 0;

	create_cache("small", "32");
	create_cache("large", "4096");
	wl_start(&w, "small", WL_HOLD, 3000);
	wl_wait(&w, 0);

	CTL(&r, "top", "-o");
	expect(&r, 0, "top -o");
	ck_assert_msg(starts(r.out, "sheafd " SHEAF_VERSION " at "), "%s", r.out);
	ck_assert_msg(strstr(r.out, "Active / Total Objects") && strstr(r.out, "OBJ SIZE") &&
		      strstr(r.out, "CACHE SIZE") && strstr(r.out, "NAME"), "%s", r.out);
	a = strstr(r.out, " small\n");
	b = strstr(r.out, " large\n");
	ck_assert_msg(a && b && a < b, "default sort (objs) puts small first:\n%s", r.out);
	ck_assert_msg(strstr(r.out, "\033[") == NULL, "escape codes with -o");
	run_free(&r);
	CTL(&r, "top", "-o", "-s", "size");
	expect(&r, 0, "top -o -s size");
	a = strstr(r.out, " small\n");
	b = strstr(r.out, " large\n");
	ck_assert_msg(a && b && b < a, "sort by size puts large first:\n%s", r.out);
	run_free(&r);
	CTL(&r, "top", "-o", "--sort", "n");
	expect(&r, 0, "top -o --sort n");
	ck_assert(strstr(r.out, " large\n") < strstr(r.out, " small\n"));
	run_free(&r);

	CTL(&r, "top", "--output", "json", "-n", "2", "-d", "0.2");
	expect(&r, 0, "top json");
	for (char *save, *l = strtok_r(r.out, "\n", &save); l && n < 4; l = strtok_r(NULL, "\n", &save))
		lines[n++] = l;
	ck_assert_int_eq(n, 2);
	for (int i = 0; i < n; i++) {
		struct jv *c, *t;
		v = json_parse(lines[i]);
		t = jreq(v, "totals", J_OBJ);
		ck_assert_uint_eq(ju64(t, "caches"), 2);
		ck_assert_uint_eq(ju64(t, "in_use"), 3000);
		(void)ju64(v, "time");
		(void)ju64(v, "uptime_seconds");
		ck_assert_uint_eq(ju64(v, "nodes"), 2);
		ck_assert_uint_eq(ju64(v, "clients"), 1);
		c = jnamed(jarr(v, "caches"), "small");
		ck_assert_uint_eq(ju64(c, "in_use"), 3000);
		ck_assert_uint_eq(ju64(c, "object_size"), 32);
		ck_assert_uint_ge(ju64(c, "objects"), 3000);
		ck_assert(jnum(c, "use_percent") > 0 && jnum(c, "use_percent") <= 100);
		(void)ju64(c, "active_objects");
		(void)ju64(c, "slabs");
		(void)ju64(c, "objects_per_slab");
		(void)ju64(c, "cache_size");
		(void)ju64(c, "sheaf_capacity");
		(void)ju64(c, "barn_full");
		(void)ju64(c, "barn_empty");
		if (i == 0)
			ck_assert(jreq(c, "alloc_rate", J_NULL) != NULL);
		else
			ck_assert(jnum(c, "alloc_rate") == 0);   /* holding, not allocating */
		jv_free(v);
	}
	run_free(&r);
	v = ctl_ok_json((char *[]){ "-o", "json", "top", "-o", NULL });   /* global -o json */
	ck_assert_int_eq((int)jarr(v, "caches")->n, 2);
	jv_free(v);

	CTL(&r, "top", "-s", "bogus");
	expect(&r, 2, "top -s bogus");
	ck_assert_msg(strstr(r.err, "unknown sort key 'bogus'") != NULL, "%s", r.err);
	run_free(&r);
	CTL(&r, "top", "-d", "0");
	expect(&r, 2, "top -d 0");
	run_free(&r);
	wl_stop(&w);
}
END_TEST

/* The Prometheus text format 0.0.4, checked line by line. */
static int metric_name_ok(const char *s, size_t n)
{
	if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':'))
		return 0;
	for (size_t i = 1; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == ':'))
			return 0;
	return 1;
}

struct family {
	char name[128];
	char type[16];
	int help, samples;
};

static struct family *family_of(struct family *f, int *nf, const char *name, size_t len)
{
	for (int i = 0; i < *nf; i++)
		if (strlen(f[i].name) == len && strncmp(f[i].name, name, len) == 0)
			return &f[i];
	REQUIRE(*nf < 256 && len < sizeof(f->name), "too many families");
	memset(&f[*nf], 0, sizeof(f[0]));
	memcpy(f[*nf].name, name, len);
	return &f[(*nf)++];
}

/* Labels "{k="v",...}" at @s; returns the end or NULL. */
static const char *labels_ok(const char *s, int *has_cache, int *has_node)
{
	if (*s != '{')
		return s;
	s++;
	while (*s != '}') {
		const char *k = s;
		while (isalnum((unsigned char)*s) || *s == '_')
			s++;
		if (s == k || !metric_name_ok(k, (size_t)(s - k)) || s[0] != '=' || s[1] != '"')
			return NULL;
		*has_cache |= strncmp(k, "cache=", 6) == 0;
		*has_node |= strncmp(k, "node=", 5) == 0;
		for (s += 2; *s != '"'; s++) {
			if (*s == '\0' || *s == '\n')
				return NULL;
			if (*s == '\\' && (s[1] == '\\' || s[1] == '"' || s[1] == 'n'))
				s++;
			else if (*s == '\\')
				return NULL;
		}
		s++;
		if (*s == ',')
			s++;
		else if (*s != '}')
			return NULL;
	}
	return s + 1;
}

static void metrics_check(char *text, int *n_samples)
{
	struct family fam[256];
	int nf = 0;
	char *save;

	*n_samples = 0;
	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (strncmp(l, "# HELP ", 7) == 0 || strncmp(l, "# TYPE ", 7) == 0) {
			char *name = l + 7, *sp = strchr(name, ' ');
			struct family *f;
			REQUIRE(sp != NULL && metric_name_ok(name, (size_t)(sp - name)), "bad: %s", l);
			f = family_of(fam, &nf, name, (size_t)(sp - name));
			REQUIRE(f->samples == 0, "HELP/TYPE after samples: %s", l);
			if (l[2] == 'H') {
				REQUIRE(!f->help && sp[1] != '\0', "second or empty HELP: %s", l);
				f->help = 1;
			} else {
				REQUIRE(!f->type[0], "second TYPE: %s", l);
				REQUIRE(strcmp(sp + 1, "counter") == 0 || strcmp(sp + 1, "gauge") == 0,
					"type: %s", l);
				snprintf(f->type, sizeof(f->type), "%s", sp + 1);
				REQUIRE(strcmp(f->type, "counter") != 0 ||
					(strlen(f->name) > 6 &&
					 strcmp(f->name + strlen(f->name) - 6, "_total") == 0),
					"counter not ending in _total: %s", l);
			}
			continue;
		}
		REQUIRE(l[0] != '#', "unexpected comment: %s", l);
		size_t len = strcspn(l, "{ ");
		int hc = 0, hn = 0;
		struct family *f;
		const char *end;
		char *num_end;
		REQUIRE(metric_name_ok(l, len), "bad metric name: %s", l);
		REQUIRE(strncmp(l, "sheaf_", 6) == 0, "no sheaf_ prefix: %s", l);
		f = family_of(fam, &nf, l, len);
		REQUIRE(f->help && f->type[0], "sample before HELP and TYPE: %s", l);
		end = labels_ok(l + len, &hc, &hn);
		REQUIRE(end != NULL && *end == ' ', "bad labels: %s", l);
		REQUIRE(!hn || hc, "node label without cache: %s", l);
		REQUIRE(strcmp(f->type, "counter") != 0 || (hc && hn),
			"counter without cache and node labels: %s", l);
		strtod(end + 1, &num_end);
		REQUIRE(num_end != end + 1 && *num_end == '\0', "value not numeric: %s", l);
		f->samples++;
		(*n_samples)++;
	}
	for (int i = 0; i < nf; i++)
		REQUIRE(fam[i].help && fam[i].type[0], "family %s lacks HELP or TYPE", fam[i].name);
}

START_TEST(test_metrics)
{
	struct wl w;
	struct run r;
	int n;

	CTL(&r, "metrics");                              /* no cache yet */
	expect(&r, 0, "metrics (empty)");
	ck_assert_msg(strstr(r.out, "# TYPE sheaf_alloc_fastpath_total counter\n") != NULL,
		      "%s", r.out);
	metrics_check(r.out, &n);
	run_free(&r);

	create_cache("m1", "96");
	create_cache("m2", "8192");
	wl_start(&w, "m1", WL_HOLD, 777);
	wl_wait(&w, 0);
	CTL(&r, "metrics");
	expect(&r, 0, "metrics");
	ck_assert_str_eq(r.err, "");
	ck_assert_msg(strstr(r.out, "\nsheaf_objects_in_use{cache=\"m1\"} 777\n") != NULL, "%s", r.out);
	ck_assert_msg(strstr(r.out, "\nsheaf_in_use_bytes{cache=\"m1\"} 74592\n") != NULL, "%s", r.out);
	ck_assert_msg(strstr(r.out, "\nsheaf_alloc_fastpath_total{cache=\"m1\",node=\"0\"} ") != NULL,
		      "%s", r.out);
	ck_assert_msg(strstr(r.out, "\nsheaf_slabs{cache=\"m2\",node=\"1\"} ") != NULL, "%s", r.out);
	ck_assert_msg(strstr(r.out, "\nsheaf_nodes 2\n") != NULL, "%s", r.out);
	ck_assert_msg(strstr(r.out, "\nsheaf_clients 1\n") != NULL, "%s", r.out);
	for (size_t i = 0; i < NKC; i++) {
		char t[96];
		snprintf(t, sizeof(t), "# TYPE sheaf_%s_total counter\n", kernel_counters[i]);
		REQUIRE(strstr(r.out, t) != NULL, "no family for %s", kernel_counters[i]);
	}
	metrics_check(r.out, &n);
	ck_assert_int_ge(n, (int)(2 * 2 * NKC));
	run_free(&r);

	CTL(&r, "-o", "json", "metrics");
	expect(&r, 2, "metrics -o json");
	run_free(&r);
	wl_stop(&w);
}
END_TEST

/* More caches than sheafd answers for in one Stats reply (its reply arena
 * holds ~9 caches of 2 nodes): stats, top and metrics ask cache by cache. */
START_TEST(test_many_caches)
{
	struct run r;
	struct jv *v;
	int n;

	for (int i = 0; i < 20; i++) {
		char name[16];
		snprintf(name, sizeof(name), "c%02d", i);
		create_cache(name, "32");
	}
	v = CTLJ("stats");
	ck_assert_int_eq((int)jarr(v, "caches")->n, 20);
	for (size_t i = 0; i < 20; i++) {
		char name[16];
		snprintf(name, sizeof(name), "c%02zu", i);
		check_stats_obj(jnamed(jarr(v, "caches"), name), 0, 32, 0);
	}
	jv_free(v);
	v = ctl_ok_json((char *[]){ "-o", "json", "top", "-o", NULL });
	ck_assert_uint_eq(ju64(jreq(v, "totals", J_OBJ), "caches"), 20);
	jv_free(v);
	CTL(&r, "metrics");
	expect(&r, 0, "metrics");
	ck_assert_msg(strstr(r.out, "\nsheaf_caches 20\n") != NULL, "%s", r.out);
	metrics_check(r.out, &n);
	ck_assert_int_ge(n, (int)(20 * 2 * NKC));
	run_free(&r);
}
END_TEST

START_TEST(test_usage)
{
	static const char *const cmds[] = {
		"info", "caches", "stats", "top", "tune", "shrink", "clients", "create",
		"destroy", "metrics", "check",
	};
	static const struct { const char *args[6]; const char *msg; } bad[] = {
		{ { "frobnicate" }, "sheafctl: unknown command 'frobnicate' (see sheafctl --help)\n" },
		{ { "--bogus", "info" }, "sheafctl: unknown option '--bogus' (see sheafctl --help)\n" },
		{ { "info", "--bogus" }, "sheafctl info: unknown option '--bogus' (see sheafctl info --help)\n" },
		{ { "info", "-x" }, "sheafctl info: unknown option '-x' (see sheafctl info --help)\n" },
		{ { "info", "extra" }, "sheafctl info: unexpected argument 'extra' (see sheafctl info --help)\n" },
		{ { "-o", "xml", "info" }, "sheafctl: unknown output format 'xml' (table or json) (see sheafctl --help)\n" },
		{ { "caches", "-o" }, "sheafctl caches: option '-o' needs a value (see sheafctl caches --help)\n" },
		{ { "stats", "a", "1", "2", "3" }, "sheafctl stats: unexpected argument '3' (see sheafctl stats --help)\n" },
		{ { "stats", "a", "x" }, "sheafctl stats: bad interval 'x' (seconds, > 0) (see sheafctl stats --help)\n" },
		{ { "stats", "a", "1", "0" }, "sheafctl stats: bad count '0' (a positive integer) (see sheafctl stats --help)\n" },
		{ { "create", "x" }, "sheafctl create: expected NAME SIZE (see sheafctl create --help)\n" },
		{ { "create", "x", "12q" }, "sheafctl create: bad object size '12q' (see sheafctl create --help)\n" },
		{ { "create", "x", "12", "--capacity", "z" }, "sheafctl create: bad capacity 'z' (see sheafctl create --help)\n" },
		{ { "destroy" }, "sheafctl destroy: missing argument (see sheafctl destroy --help)\n" },
		{ { "shrink", "a", "b" }, "sheafctl shrink: unexpected argument 'b' (see sheafctl shrink --help)\n" },
		{ { NULL }, "sheafctl: no command given (see sheafctl --help)\n" },
	};
	struct run r;

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		char want[64];
		snprintf(want, sizeof(want), "Usage: sheafctl %s", cmds[i]);
		run_argv(&r, 1, (char *[]){ (char *)cmds[i], "--help", NULL });
		REQUIRE(r.status == 0 && strncmp(r.out, want, strlen(want)) == 0 && r.err[0] == '\0',
			"%s --help: exit %d, out '%s'", cmds[i], r.status, r.out);
		run_free(&r);
		run_argv(&r, 0, (char *[]){ "help", (char *)cmds[i], NULL });
		REQUIRE(r.status == 0 && strncmp(r.out, want, strlen(want)) == 0,
			"help %s: exit %d", cmds[i], r.status);
		run_free(&r);
	}
	CTL_NOSOCK(&r, "--help");
	expect(&r, 0, "--help");
	ck_assert(starts(r.out, "Usage: sheafctl "));
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		char want[64];
		snprintf(want, sizeof(want), "\n  %s", cmds[i]);
		REQUIRE(strstr(r.out, want) != NULL, "--help does not list %s", cmds[i]);
	}
	run_free(&r);
	CTL_NOSOCK(&r, "--version");
	expect(&r, 0, "--version");
	ck_assert_str_eq(r.out, "sheafctl " SHEAF_VERSION "\n");
	run_free(&r);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *argv[8];
		int k = 0;
		for (; bad[i].args[k] != NULL; k++)
			argv[k] = (char *)bad[i].args[k];
		argv[k] = NULL;
		run_argv(&r, 0, argv);
		REQUIRE(r.status == 2, "case %zu (%s): exit %d", i, bad[i].msg, r.status);
		REQUIRE(strcmp(r.err, bad[i].msg) == 0, "case %zu: message\n  '%s'\nexpected\n  '%s'",
			i, r.err, bad[i].msg);
		REQUIRE(r.out[0] == '\0', "case %zu: stdout '%s'", i, r.out);
		run_free(&r);
	}
}
END_TEST

START_TEST(test_dead_socket)
{
	char path[160], want[320];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct run r;
	int fd;

	/* No socket at all. */
	snprintf(path, sizeof(path), "%s/none.sock", D.dir);
	run_argv(&r, 0, (char *[]){ "-s", path, "info", NULL });
	expect(&r, 1, "no socket");
	snprintf(want, sizeof(want), "sheafctl: cannot reach sheafd at %s: No such file or directory\n",
		 path);
	ck_assert_str_eq(r.err, want);
	ck_assert_str_eq(r.out, "");
	run_free(&r);

	/* A socket nobody listens on (a dead daemon's leftover). */
	snprintf(path, sizeof(path), "%s/dead.sock", D.dir);
	ck_assert(strlen(path) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	close(fd);
	setenv("SHEAF_SOCKET", path, 1);                 /* no -s: $SHEAF_SOCKET */
	for (size_t i = 0; i < 4; i++) {
		static const char *const c[] = { "stats", "top", "metrics", "clients" };
		run_argv(&r, 0, (char *[]){ (char *)c[i], i == 1 ? "-o" : NULL, NULL });
		expect(&r, 1, c[i]);
		snprintf(want, sizeof(want), "sheafctl: cannot reach sheafd at %s: Connection refused\n",
			 path);
		ck_assert_str_eq(r.err, want);
		run_free(&r);
	}
	unlink(path);

	/* The daemon goes away: the next command says so. */
	daemon_stop();
	run_argv(&r, 0, (char *[]){ "-s", "/tmp/sheafctl-test-nonexistent/s.sock", "caches", NULL });
	expect(&r, 1, "stopped daemon");
	ck_assert_str_eq(r.err, "sheafctl: cannot reach sheafd at "
			 "/tmp/sheafctl-test-nonexistent/s.sock: No such file or directory\n");
	run_free(&r);
}
END_TEST

/* Barn watermarks out of the engine's order (barn_low <= barn_high <=
 * barn_limit) are refused whole: the engine would refill sheaves only to
 * flush them, forever. */
START_TEST(test_tune_barn_order)
{
	struct run r;
	struct jv *v, *ci;

	create_cache("tb", "64");
	CTL(&r, "tune", "tb", "barn_low=10", "barn_high=20", "barn_limit=1");
	expect(&r, 1, "tune barn_high > barn_limit");
	ck_assert_msg(strstr(r.err, "barn_high (20) must not exceed barn_limit (1)") != NULL,
		      "%s", r.err);
	run_free(&r);
	CTL(&r, "tune", "tb", "barn_limit=8");          /* under the default barn_high */
	expect(&r, 1, "tune barn_limit under barn_high");
	ck_assert_msg(strstr(r.err, "must not exceed barn_limit (8)") != NULL, "%s", r.err);
	run_free(&r);
	v = CTLJ("caches");
	ci = jnamed(jarr(v, "caches"), "tb");
	ck_assert_uint_eq(ju64(ci, "barn_low"), 4);
	ck_assert_uint_eq(ju64(ci, "barn_high"), 16);
	jv_free(v);
	CTL(&r, "tune", "tb", "barn_low=8", "barn_high=8", "barn_limit=8");
	expect(&r, 0, "tune barn_low = barn_high = barn_limit");
	run_free(&r);
	CTL(&r, "check");
	expect(&r, 0, "check after the tune");
	run_free(&r);
}
END_TEST

/* ======================================================================= */

static void add(Suite *s, const char *name, const TTest *t, int timeout)
{
	TCase *tc = tcase_create(name);

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, timeout);
	tcase_add_test(tc, t);
	suite_add_tcase(s, tc);
}

static Suite *sheafctl_suite(void)
{
	Suite *s = suite_create("sheafctl");

	add(s, "json_parser", test_json_parser, 240);
	add(s, "info", test_info, 240);
	add(s, "caches", test_caches_create_destroy, 240);
	add(s, "stats", test_stats, 240);
	add(s, "clients", test_clients, 240);
	add(s, "shrink_check", test_shrink_check, 240);
	add(s, "shrink_burst", test_shrink_burst, 600);
	add(s, "tune_workload", test_tune_workload, 240);
	add(s, "tune_errors", test_tune_errors, 240);
	add(s, "top", test_top, 240);
	add(s, "metrics", test_metrics, 240);
	add(s, "many_caches", test_many_caches, 240);
	add(s, "usage", test_usage, 240);
	add(s, "dead_socket", test_dead_socket, 240);
	add(s, "tune_barn_order", test_tune_barn_order, 240);
	return s;
}

int main(void)
{
	return run_suite(sheafctl_suite());
}
