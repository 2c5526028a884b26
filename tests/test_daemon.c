/*
 * test_daemon.c - integration tests of sheafd with real processes: every test
 * fork+execs the sheafd binary built next to this program
 * (dirname(/proc/self/exe)/../daemon/sheafd), on a control socket in a fresh
 * temporary directory, with its log in DIR/log (printed when a test fails),
 * and talks to it over real sockets from real client processes (forked
 * children that call sheaf_connect themselves) or with raw framed protobuf.
 *
 *   share          four processes open one cache by name; objects written
 *                  in one are passed (as pointers, through pipes) to the
 *                  next, verified and freed there; the daemon's pool check
 *                  (Check RPC via sheaf_pool_check) passes afterwards.
 *   prodcons       a producer process allocates 10^7 objects (10^6 under
 *                  SHEAF_SAN), a consumer process verifies and frees them,
 *                  checksums agree; after repair and shrink the pool check
 *                  passes and in_use is 0.
 *   kill9          victims doing random alloc/free are SIGKILLed at random
 *                  moments (50 times; 20 under SHEAF_SAN) while two survivor
 *                  clients run alloc/free loops that must never fail; the
 *                  daemon stays alive, repairs every dead client (DaemonInfo
 *                  clients back to 0), the structural check passes and the
 *                  pool still serves a fresh client.
 *   malformed      oversize, truncated, garbage, unknown-field, unknown-body,
 *                  empty and wrong-version frames on raw connections, while
 *                  a well-behaved client allocates and calls Stats the whole
 *                  time: each gets the documented treatment, the good client
 *                  never fails, the daemon lives and logs the reasons.
 *   uid_refused    (root only) uid 65534 is refused with EACCES and a
 *                  message naming the uid; allowed through --allow-gid.
 *   lifecycle      SIGTERM with two clients attached (exit 0 within 2 s,
 *                  socket removed); a second sheafd on the same socket is
 *                  refused; --help; bad flags exit 2; a config file is
 *                  honoured and flags win over it.
 *   idle_cpu       an idle daemon uses (almost) no CPU over 3 s.
 *   reconnect      a live process that called sheaf_disconnect is no longer
 *                  attached, and 100 connect/disconnect cycles in one
 *                  process do not use up the 64 client slots.
 *
 * Every test is one TCase (CK_RUN_CASE=<name> runs one).  Hot loops use
 * REQUIRE (Check's passing assertions are slow); child processes report
 * through pipes and exit statuses and never call Check.
 */
#include <check.h>
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/sheaf.h"
#include "client/internal.h"
#include "proto/frame.h"
#include "proto/sheaf.pb-c.h"
#include "tests/util_proc.h"
#include "tests/util_check.h"

static int san;                         /* SHEAF_SAN set: scale down */
static char sheafd_path[PATH_MAX];

/* ---- small helpers (the generic ones are in util_proc.c) ------------------- */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* ---- failure handling ------------------------------------------------------ */

struct dmn {
	pid_t pid;
	char dir[64];
	char sock[128];
	char log[128];
};

static struct dmn *cur_dmn;              /* its log is printed on failure */

/* A failing test: stop its children, show the daemon's log. */
static void on_failure(const char *cond, int line)
{
	fprintf(stderr, "test_daemon.c:%d: FAILED: %s\n", line, cond);
	kill_tracked();
	if (cur_dmn != NULL) {
		if (cur_dmn->pid > 0)
			kill(cur_dmn->pid, SIGKILL);
		dump_file("sheafd log", cur_dmn->log, 300);
		fprintf(stderr, "(test directory kept: %s)\n", cur_dmn->dir);
	}
	fflush(stderr);
}

/* Cheap enough for hot loops: nothing happens unless it fails. */
#define REQUIRE(cond, ...)                                              \
	do {                                                            \
		if (__builtin_expect(!(cond), 0)) {                     \
			on_failure(#cond, __LINE__);                    \
			ck_abort_msg(__VA_ARGS__);                      \
		}                                                       \
	} while (0)

/* Fork a client process running @fn(@arg); its return value is its exit
 * status.  It dies with the test process. */
static pid_t fork_child(int (*fn)(void *), void *arg)
{
	pid_t pid = fork_fn(fn, arg);

	REQUIRE(pid > 0, "fork: %s", strerror(errno));
	return pid;
}

/* Wait for a client process and require exit status 0. */
static void reap_ok(pid_t pid, int ms, const char *what)
{
	char err[256];
	const char *msg = reap_err(pid, ms, what, err, sizeof(err));

	REQUIRE(msg == NULL, "%s", msg);
}

/* ---- the daemon process ---------------------------------------------------- */

/* Run a short-lived sheafd to completion: its exit status. */
static int run_sheafd(char *const argv[], const char *out, const char *err, int ms)
{
	struct spawn_opts o = { .out = out, .err = err };
	char buf[256];
	const char *msg;
	int st;

	msg = run_proc((const char *const *)argv, &o, ms, &st, buf, sizeof(buf));
	REQUIRE(msg == NULL, "%s", msg);
	return st;
}

static void dmn_init(struct dmn *d)
{
	memset(d, 0, sizeof(*d));
	REQUIRE(make_temp_dir(d->dir, sizeof(d->dir), "/tmp/sheafd-test-XXXXXX") == 0,
		"mkdtemp: %s", strerror(errno));
	snprintf(d->sock, sizeof(d->sock), "%s/s.sock", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/log", d->dir);
	cur_dmn = d;
}

static int dmn_alive(struct dmn *d)
{
	int st;

	return d->pid > 0 && waitpid(d->pid, &st, WNOHANG) == 0;
}

/* Start sheafd with @argv (stdout and stderr to DIR/log) and wait until its
 * socket accepts. */
static void dmn_start_argv(struct dmn *d, char *const argv[])
{
	struct spawn_opts o = { .out = d->log, .err = d->log };
	char buf[256];
	const char *msg = start_listening((const char *const *)argv, &o, d->sock, 30000, &d->pid,
					  buf, sizeof(buf));

	REQUIRE(msg == NULL, "%s", msg);
}

/* The usual daemon: 2 simulated nodes, 256 MiB, debug log; @extra flags
 * (NULL-terminated, may be NULL) go after the defaults. */
static void dmn_start(struct dmn *d, const char *const *extra)
{
	const char *argv[32] = {
		sheafd_path, "--foreground", "--socket", d->sock, "--nodes", "2",
		"--size", "256M", "--log-level", "debug",
	};
	int n = 10;

	for (int i = 0; extra != NULL && extra[i] != NULL && n < 31; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	dmn_start_argv(d, (char *const *)argv);
}

/* SIGTERM: require exit 0 within @ms and the socket gone. */
static void dmn_stop(struct dmn *d, int ms)
{
	char buf[64], err[256];
	int st = 0;
	int64_t t0 = now_ms();
	const char *msg = signal_wait(d->pid, SIGTERM, ms, &st, err, sizeof(err));

	REQUIRE(msg == NULL, "sheafd: %s", msg);
	d->pid = 0;
	REQUIRE(exited_ok(st), "sheafd ended with %s after SIGTERM",
		status_str(st, buf, sizeof(buf)));
	REQUIRE(access(d->sock, F_OK) != 0 && errno == ENOENT,
		"sheafd left its socket %s behind", d->sock);
	printf("  sheafd stopped in %lld ms\n", (long long)(now_ms() - t0));
}

/* Remove the test directory (only when the test passed). */
static void dmn_cleanup(struct dmn *d)
{
	rm_tree(d->dir);
	if (cur_dmn == d)
		cur_dmn = NULL;
}

/* ---- raw protocol ---------------------------------------------------------- */

static int send_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Send a frame: a length header @hdr_len (normally @len) and @len bytes. */
static int send_frame_hdr(int fd, uint32_t hdr_len, const void *msg, size_t len)
{
	uint8_t *buf = malloc(FRAME_HDR + len);
	int rc;

	if (buf == NULL)
		return -ENOMEM;
	frame_put_len(buf, hdr_len);
	if (len > 0)
		memcpy(buf + FRAME_HDR, msg, len);
	rc = send_all(fd, buf, FRAME_HDR + len);
	free(buf);
	return rc;
}

static int send_frame(int fd, const void *msg, size_t len)
{
	return send_frame_hdr(fd, (uint32_t)len, msg, len);
}

static size_t pack_req(const Sheaf__V1__Request *rq, uint8_t *buf, size_t cap)
{
	size_t n = sheaf__v1__request__get_packed_size(rq);

	REQUIRE(n <= cap, "request of %zu bytes does not fit %zu", n, cap);
	return sheaf__v1__request__pack(rq, buf);
}

/* Receive one Response within @ms: NULL with *@rc (-errno) on failure. */
static Sheaf__V1__Response *recv_resp(int fd, int ms, int *rc)
{
	uint8_t *msg = NULL;
	size_t len = 0;
	Sheaf__V1__Response *r;

	*rc = frame_recv(fd, &msg, &len, 16u << 20, ms, NULL);
	if (*rc != 0)
		return NULL;
	r = sheaf__v1__response__unpack(NULL, len, msg);
	free(msg);
	if (r == NULL)
		*rc = -EPROTO;
	return r;
}

static Sheaf__V1__Response *raw_rpc(int fd, const Sheaf__V1__Request *rq, int ms, int *rc)
{
	uint8_t buf[4096];
	size_t n = pack_req(rq, buf, sizeof(buf));

	*rc = send_frame(fd, buf, n);
	return *rc == 0 ? recv_resp(fd, ms, rc) : NULL;
}

static Sheaf__V1__Response *rpc_info(int fd, uint64_t id, int *rc)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__DaemonInfoRequest di = SHEAF__V1__DAEMON_INFO_REQUEST__INIT;

	rq.id = id;
	rq.body_case = SHEAF__V1__REQUEST__BODY_DAEMON_INFO;
	rq.daemon_info = &di;
	return raw_rpc(fd, &rq, 20000, rc);
}

/* DaemonInfo on a fresh connection (no Attach): NULL on failure. */
static Sheaf__V1__Response *daemon_info(const char *sock)
{
	int fd = unix_connect(sock), rc;
	Sheaf__V1__Response *r;

	if (fd < 0)
		return NULL;
	r = rpc_info(fd, 1, &rc);
	close(fd);
	if (r != NULL && (r->status != SHEAF__V1__STATUS__STATUS_OK ||
			  r->body_case != SHEAF__V1__RESPONSE__BODY_DAEMON_INFO)) {
		sheaf__v1__response__free_unpacked(r, NULL);
		r = NULL;
	}
	return r;
}

/* Attached clients by DaemonInfo, or -1. */
static int info_clients(const char *sock)
{
	Sheaf__V1__Response *r = daemon_info(sock);
	int n = r ? (int)r->daemon_info->clients : -1;

	if (r != NULL)
		sheaf__v1__response__free_unpacked(r, NULL);
	return n;
}

/* Poll DaemonInfo until no client is attached (every dead one repaired). */
static void wait_no_clients(struct dmn *d, int ms)
{
	int64_t t0 = now_ms(), end = t0 + ms;
	int n;

	while ((n = info_clients(d->sock)) != 0) {
		REQUIRE(n >= 0, "DaemonInfo failed");
		REQUIRE(now_ms() < end, "%d clients still attached %d ms after their processes ended",
			n, ms);
		sleep_us(5000);
	}
	printf("  all clients repaired after %lld ms\n", (long long)(now_ms() - t0));
}

/* The Check RPC on a fresh connection. */
static Sheaf__V1__Response *raw_check(const char *sock)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__CheckRequest cr = SHEAF__V1__CHECK_REQUEST__INIT;
	Sheaf__V1__Response *r;
	int fd = unix_connect(sock), rc;

	REQUIRE(fd >= 0, "connect %s: %s", sock, strerror(-fd));
	rq.id = 42;
	rq.body_case = SHEAF__V1__REQUEST__BODY_CHECK;
	rq.check = &cr;
	r = raw_rpc(fd, &rq, 120000, &rc);
	close(fd);
	REQUIRE(r != NULL, "Check RPC: %s", strerror(-rc));
	REQUIRE(r->status == SHEAF__V1__STATUS__STATUS_OK &&
		r->body_case == SHEAF__V1__RESPONSE__BODY_CHECK,
		"Check RPC: status %d (%s)", r->status, r->error);
	return r;
}

/* Wait until the daemon closes @fd (EOF or reset): 1, or 0 on timeout;
 * *@extra counts bytes received meanwhile. */
static int wait_closed(int fd, int ms, size_t *extra)
{
	int64_t end = now_ms() + ms;
	char buf[4096];

	*extra = 0;
	for (;;) {
		struct pollfd pf = { fd, POLLIN, 0 };
		int64_t left = end - now_ms();
		ssize_t k;

		if (left <= 0 || poll(&pf, 1, (int)left) == 0)
			return 0;
		k = recv(fd, buf, sizeof(buf), 0);
		if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN))
			return 1;
		if (k > 0)
			*extra += (size_t)k;
	}
}

/* A connected pool, or a child failure. */
static sheaf_pool_t *child_connect(const char *sock, const char *name)
{
	char err[256] = "";
	sheaf_pool_t *p = sheaf_connect(sock, name, 0, err, sizeof(err));

	CREQ(p != NULL, "sheaf_connect(%s): %s (%s)", sock, strerror(errno), err);
	return p;
}

/* ---- 1. one cache shared by several processes ------------------------------ */

#define SH_PROCS  4
#define SH_BATCH  1000       /* 8000 bytes of pointers: fits a pipe */
#define SH_OBJ    200

struct share_arg {
	const char *sock;
	int idx;
	int rounds;
	int go[SH_PROCS][2];     /* creator -> openers: the cache exists */
	int data[SH_PROCS][2];   /* process i -> process i+1 */
};

static uint64_t share_word(int sender, int round, int k, int j)
{
	return mix64(((uint64_t)sender << 48) ^ ((uint64_t)round << 32) ^ ((uint64_t)k << 8) ^
		     (uint64_t)j);
}

static int share_child(void *argp)
{
	struct share_arg *a = argp;
	int me = a->idx, prev = (me + SH_PROCS - 1) % SH_PROCS;
	char name[32];
	sheaf_pool_t *pool;
	sheaf_cache_t *c;
	void **mine = calloc(SH_BATCH, sizeof(void *));
	void **got = calloc(SH_BATCH, sizeof(void *));
	const int words = SH_OBJ / 8;

	CREQ(mine != NULL && got != NULL, "calloc");
	snprintf(name, sizeof(name), "share-%d", me);
	pool = child_connect(a->sock, name);
	if (me == 0) {
		c = sheaf_cache_create(pool, "shared", SH_OBJ, NULL);
		CREQ(c != NULL, "sheaf_cache_create: %s", strerror(errno));
		for (int i = 1; i < SH_PROCS; i++)
			CREQ(write_full(a->go[i][1], "g", 1) == 0, "write go");
	} else {
		char g;
		CREQ(read_full(a->go[me][0], &g, 1, 60000) == 0, "no go from the creator");
		c = sheaf_cache_open(pool, "shared");
		CREQ(c != NULL, "sheaf_cache_open: %s", strerror(errno));
	}
	CREQ(sheaf_cache_object_size(c) == SH_OBJ, "object size %zu", sheaf_cache_object_size(c));
	for (int r = 0; r < a->rounds; r++) {
		for (int k = 0; k < SH_BATCH; k++) {
			uint64_t *o = sheaf_alloc(c);
			CREQ(o != NULL, "sheaf_alloc: %s", strerror(errno));
			for (int j = 0; j < words; j++)
				o[j] = share_word(me, r, k, j);
			mine[k] = o;
		}
		CREQ(write_full(a->data[me][1], mine, SH_BATCH * sizeof(void *)) == 0, "write pointers");
		CREQ(read_full(a->data[prev][0], got, SH_BATCH * sizeof(void *), 60000) == 0,
		     "no pointers from process %d in round %d", prev, r);
		for (int k = 0; k < SH_BATCH; k++) {
			uint64_t *o = got[k];
			int rc;
			for (int j = 0; j < words; j++)
				CREQ(o[j] == share_word(prev, r, k, j),
				     "round %d object %d (%p) from process %d: word %d is %#llx",
				     r, k, (void *)o, prev, j, (unsigned long long)o[j]);
			memset(o, 0xa5, SH_OBJ);
			rc = sheaf_free(c, o);
			CREQ(rc == 0, "sheaf_free(%p) of process %d's object: %d", (void *)o, prev, rc);
		}
	}
	sheaf_disconnect(pool);
	free(mine);
	free(got);
	return 0;
}

START_TEST(share)
{
	static struct share_arg a;
	struct dmn d;
	pid_t pids[SH_PROCS];
	sheaf_pool_t *pool;
	sheaf_cache_t *c;
	struct sheaf_stats st;
	char err[256] = "";
	int rc;
	int64_t t0 = now_ms();

	dmn_init(&d);
	dmn_start(&d, NULL);
	memset(&a, 0, sizeof(a));
	a.sock = d.sock;
	a.rounds = san ? 20 : 50;
	for (int i = 0; i < SH_PROCS; i++) {
		REQUIRE(pipe(a.go[i]) == 0 && pipe(a.data[i]) == 0, "pipe: %s", strerror(errno));
	}
	/* Every client forks before this process connects. */
	for (int i = 0; i < SH_PROCS; i++) {
		a.idx = i;
		pids[i] = fork_child(share_child, &a);
	}
	for (int i = 0; i < SH_PROCS; i++)
		reap_ok(pids[i], 180000, "sharing client");
	printf("share: %d processes x %d rounds x %d objects passed on in %lld ms\n", SH_PROCS,
	       a.rounds, SH_BATCH, (long long)(now_ms() - t0));

	pool = sheaf_connect(d.sock, "share-check", 0, err, sizeof(err));
	REQUIRE(pool != NULL, "sheaf_connect: %s", err);
	rc = sheaf_pool_check(pool, err, sizeof(err));
	REQUIRE(rc == 0, "pool check after the sharing clients exited: %d: %s", rc, err);
	c = sheaf_cache_open(pool, "shared");
	REQUIRE(c != NULL, "sheaf_cache_open: %s", strerror(errno));
	rc = sheaf_cache_stats(c, -1, &st);
	REQUIRE(rc == 0, "sheaf_cache_stats: %d", rc);
	REQUIRE(st.in_use == 0, "in_use %llu after every object was freed",
		(unsigned long long)st.in_use);
	sheaf_disconnect(pool);
	for (int i = 0; i < SH_PROCS; i++) {
		close(a.go[i][0]);
		close(a.go[i][1]);
		close(a.data[i][0]);
		close(a.data[i][1]);
	}
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- 2. cross-process producer / consumer ----------------------------------- */

#define PC_BATCH 256
#define PC_OBJ   64

struct pc_arg {
	const char *sock;
	uint64_t n;
	int go[2];               /* producer -> consumer: the cache exists */
	int data[2];             /* pointers */
	int result[2];           /* each side: its checksum and count */
};

static uint64_t pc_value(uint64_t i)
{
	return mix64(i ^ 0x5eafd00dull);
}

static int producer(void *argp)
{
	struct pc_arg *a = argp;
	sheaf_pool_t *pool;
	sheaf_cache_t *c;
	void *batch[PC_BATCH];
	uint64_t sum = 0, res[2];

	close(a->data[0]);
	pool = child_connect(a->sock, "producer");
	c = sheaf_cache_create(pool, "pc", PC_OBJ, NULL);
	CREQ(c != NULL, "sheaf_cache_create: %s", strerror(errno));
	CREQ(write_full(a->go[1], "g", 1) == 0, "write go");
	for (uint64_t i = 0; i < a->n;) {
		unsigned k = 0;
		for (; k < PC_BATCH && i < a->n; k++, i++) {
			uint64_t *o = sheaf_alloc(c), v = pc_value(i);
			CREQ(o != NULL, "sheaf_alloc #%llu: %s", (unsigned long long)i, strerror(errno));
			o[0] = v;
			o[1] = ~v;
			o[7] = i;
			sum += v;
			batch[k] = o;
		}
		CREQ(write_full(a->data[1], batch, k * sizeof(void *)) == 0, "write pointers");
	}
	close(a->data[1]);
	res[0] = sum;
	res[1] = a->n;
	CREQ(write_full(a->result[1], res, sizeof(res)) == 0, "write result");
	sheaf_disconnect(pool);
	return 0;
}

static int consumer(void *argp)
{
	struct pc_arg *a = argp;
	sheaf_pool_t *pool;
	sheaf_cache_t *c;
	union {
		void *p[PC_BATCH];
		char b[PC_BATCH * sizeof(void *)];
	} u;
	size_t have = 0;
	uint64_t sum = 0, i = 0, res[2];
	char g;

	close(a->data[1]);
	pool = child_connect(a->sock, "consumer");
	CREQ(read_full(a->go[0], &g, 1, 60000) == 0, "no go from the producer");
	c = sheaf_cache_open(pool, "pc");
	CREQ(c != NULL, "sheaf_cache_open: %s", strerror(errno));
	for (;;) {
		struct pollfd pf = { a->data[0], POLLIN, 0 };
		ssize_t k;
		size_t whole;

		CREQ(poll(&pf, 1, 120000) == 1, "no pointers for 120 s after #%llu",
		     (unsigned long long)i);
		k = read(a->data[0], u.b + have, sizeof(u.b) - have);
		if (k < 0 && errno == EINTR)
			continue;
		CREQ(k >= 0, "read: %s", strerror(errno));
		if (k == 0)
			break;
		have += (size_t)k;
		whole = have / sizeof(void *);
		for (size_t j = 0; j < whole; j++, i++) {
			uint64_t *o = u.p[j], v = pc_value(i);
			int rc;
			CREQ(o[0] == v && o[1] == ~v && o[7] == i,
			     "object #%llu (%p): %#llx %#llx %llu, expected %#llx", (unsigned long long)i,
			     (void *)o, (unsigned long long)o[0], (unsigned long long)o[1],
			     (unsigned long long)o[7], (unsigned long long)v);
			sum += o[0];
			o[0] = o[1] = 0;
			rc = sheaf_free(c, o);
			CREQ(rc == 0, "sheaf_free #%llu: %d", (unsigned long long)i, rc);
		}
		memmove(u.b, u.b + whole * sizeof(void *), have - whole * sizeof(void *));
		have -= whole * sizeof(void *);
	}
	CREQ(have == 0, "%zu stray bytes at the end of the pointer stream", have);
	res[0] = sum;
	res[1] = i;
	CREQ(write_full(a->result[1], res, sizeof(res)) == 0, "write result");
	sheaf_disconnect(pool);
	return 0;
}

START_TEST(prodcons)
{
	static struct pc_arg a;
	struct dmn d;
	pid_t prod, cons;
	uint64_t r1[2], r2[2];
	sheaf_pool_t *pool;
	sheaf_cache_t *c;
	struct sheaf_stats st;
	char err[256] = "";
	int rc, shrunk;
	int64_t t0;

	dmn_init(&d);
	dmn_start(&d, NULL);
	memset(&a, 0, sizeof(a));
	a.sock = d.sock;
	a.n = san ? 1000000 : 10000000;
	REQUIRE(pipe(a.go) == 0 && pipe(a.data) == 0 && pipe(a.result) == 0, "pipe");
	t0 = now_ms();
	cons = fork_child(consumer, &a);
	prod = fork_child(producer, &a);
	close(a.data[0]);
	close(a.data[1]);
	reap_ok(prod, 300000, "producer");
	reap_ok(cons, 300000, "consumer");
	printf("prodcons: %llu objects from producer to consumer in %lld ms\n",
	       (unsigned long long)a.n, (long long)(now_ms() - t0));
	REQUIRE(read_full(a.result[0], r1, sizeof(r1), 1000) == 0 &&
		read_full(a.result[0], r2, sizeof(r2), 1000) == 0, "missing results");
	REQUIRE(r1[1] == a.n && r2[1] == a.n, "counts %llu and %llu, expected %llu",
		(unsigned long long)r1[1], (unsigned long long)r2[1], (unsigned long long)a.n);
	REQUIRE(r1[0] == r2[0], "checksums differ: %#llx vs %#llx", (unsigned long long)r1[0],
		(unsigned long long)r2[0]);

	/* Both processes are gone: wait for the daemon's pidfd repair. */
	wait_no_clients(&d, 30000);
	pool = sheaf_connect(d.sock, "pc-check", 0, err, sizeof(err));
	REQUIRE(pool != NULL, "sheaf_connect: %s", err);
	c = sheaf_cache_open(pool, "pc");
	REQUIRE(c != NULL, "sheaf_cache_open: %s", strerror(errno));
	rc = sheaf_cache_stats(c, -1, &st);
	REQUIRE(rc == 0, "sheaf_cache_stats: %d", rc);
	printf("  before shrink: in_use %llu, slabs %llu, %llu bytes mapped\n",
	       (unsigned long long)st.in_use, (unsigned long long)st.slabs,
	       (unsigned long long)st.bytes_mapped);
	shrunk = sheaf_cache_shrink(c);
	REQUIRE(shrunk >= 0, "sheaf_cache_shrink: %d", shrunk);
	rc = sheaf_pool_check(pool, err, sizeof(err));
	REQUIRE(rc == 0, "pool check after producer/consumer and shrink: %d: %s", rc, err);
	rc = sheaf_cache_stats(c, -1, &st);
	REQUIRE(rc == 0, "sheaf_cache_stats: %d", rc);
	printf("  shrink released %d slabs; after: in_use %llu, slabs %llu\n", shrunk,
	       (unsigned long long)st.in_use, (unsigned long long)st.slabs);
	REQUIRE(st.in_use == 0, "in_use %llu after every object was freed",
		(unsigned long long)st.in_use);
	sheaf_disconnect(pool);
	close(a.go[0]);
	close(a.go[1]);
	close(a.result[0]);
	close(a.result[1]);
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- 3. kill -9 of clients during a mixed workload ------------------------- */

#define K9_OBJ       96
#define K9_WORDS     (K9_OBJ / 8)
#define SURV_HOLD    512
#define VICTIM_HOLD  256
#define VICTIM_BULK  16

struct k9_arg {
	const char *sock;
	int idx;
	int ready[2];            /* survivors -> parent: running */
	int stop[2];             /* parent closes the write end: stop */
	int report[2];           /* survivors -> parent: ops done */
	int threads;             /* victims: 1 or 2 */
};

static void stamp(uint64_t *o, uint64_t s)
{
	for (int j = 0; j < K9_WORDS; j++)
		o[j] = s ^ ((uint64_t)j * 0x9e3779b97f4a7c15ull);
}

static int stamped(const uint64_t *o, uint64_t s)
{
	for (int j = 0; j < K9_WORDS; j++)
		if (o[j] != (s ^ ((uint64_t)j * 0x9e3779b97f4a7c15ull)))
			return 0;
	return 1;
}

static int survivor(void *argp)
{
	struct k9_arg *a = argp;
	uint64_t *held[SURV_HOLD], stamps[SURV_HOLD], seq = 0, ops = 0, stats = 0;
	uint64_t rng = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull | 1;
	unsigned n = 0;
	sheaf_pool_t *pool;
	sheaf_cache_t *c;
	char name[32];

	close(a->stop[1]);
	snprintf(name, sizeof(name), "survivor-%d", a->idx);
	pool = child_connect(a->sock, name);
	if (a->idx == 0) {
		c = sheaf_cache_create(pool, "k9", K9_OBJ, NULL);
		CREQ(c != NULL, "sheaf_cache_create: %s", strerror(errno));
	} else {
		c = sheaf_cache_open(pool, "k9");
		CREQ(c != NULL, "sheaf_cache_open: %s", strerror(errno));
	}
	CREQ(write_full(a->ready[1], "r", 1) == 0, "write ready");
	for (;;) {
		uint64_t r = xorshift(&rng);

		if (n == 0 || (n < SURV_HOLD && (r & 1))) {
			uint64_t *o = sheaf_alloc(c);
			CREQ(o != NULL, "survivor %d: sheaf_alloc after %llu ops: %s", a->idx,
			     (unsigned long long)ops, strerror(errno));
			stamps[n] = ((uint64_t)getpid() << 32) | ++seq;
			stamp(o, stamps[n]);
			held[n++] = o;
		} else {
			unsigned i = (unsigned)((r >> 8) % n);
			int rc;
			CREQ(stamped(held[i], stamps[i]),
			     "survivor %d: object %p changed under it (someone else got it)", a->idx,
			     (void *)held[i]);
			rc = sheaf_free(c, held[i]);
			CREQ(rc == 0, "survivor %d: sheaf_free: %d", a->idx, rc);
			held[i] = held[--n];
			stamps[i] = stamps[n];
		}
		if ((++ops & 4095) == 0) {
			struct pollfd pf = { a->stop[0], POLLIN, 0 };
			struct sheaf_stats st;
			int rc = sheaf_cache_stats(c, -1, &st);
			CREQ(rc == 0, "survivor %d: sheaf_cache_stats: %d", a->idx, rc);
			stats++;
			if (poll(&pf, 1, 0) != 0)
				break;
		}
	}
	while (n > 0) {
		n--;
		CREQ(stamped(held[n], stamps[n]), "survivor %d: object %p changed under it",
		     a->idx, (void *)held[n]);
		CREQ(sheaf_free(c, held[n]) == 0, "survivor %d: final sheaf_free", a->idx);
	}
	uint64_t rep[3] = { (uint64_t)a->idx, ops, stats };
	CREQ(write_full(a->report[1], rep, sizeof(rep)) == 0, "write report");
	sheaf_disconnect(pool);
	return 0;
}

struct victim_state {
	sheaf_cache_t *c;
	uint64_t rng;
};

/* Random alloc/free forever (until SIGKILL); a corrupt object ends the
 * process with status 1, which the parent catches. */
static void *victim_loop(void *argp)
{
	struct victim_state *vs = argp;
	uint64_t *held[VICTIM_HOLD + VICTIM_BULK], stamps[VICTIM_HOLD + VICTIM_BULK], seq = 0;
	uint64_t base = ((uint64_t)getpid() << 32) | ((uint64_t)(uintptr_t)&seq & 0xff000000u);
	unsigned n = 0;

	for (;;) {
		uint64_t r = xorshift(&vs->rng);

		if ((r & 15) == 0 && n + VICTIM_BULK <= VICTIM_HOLD) {
			void *objs[VICTIM_BULK];
			int rc = sheaf_alloc_bulk(vs->c, objs, VICTIM_BULK);
			CREQ(rc == 0, "victim: sheaf_alloc_bulk: %d", rc);
			for (int k = 0; k < VICTIM_BULK; k++) {
				stamps[n] = base | ++seq;
				stamp(objs[k], stamps[n]);
				held[n++] = objs[k];
			}
		} else if ((r & 15) == 1 && n >= VICTIM_BULK) {
			void *objs[VICTIM_BULK];
			int rc;
			for (int k = 0; k < VICTIM_BULK; k++) {
				n--;
				CREQ(stamped(held[n], stamps[n]), "victim: object %p changed under it",
				     (void *)held[n]);
				objs[k] = held[n];
			}
			rc = sheaf_free_bulk(vs->c, objs, VICTIM_BULK);
			CREQ(rc == 0, "victim: sheaf_free_bulk: %d", rc);
		} else if (n == 0 || (n < VICTIM_HOLD && (r & 2))) {
			uint64_t *o = sheaf_alloc(vs->c);
			CREQ(o != NULL, "victim: sheaf_alloc: %s", strerror(errno));
			stamps[n] = base | ++seq;
			stamp(o, stamps[n]);
			held[n++] = o;
		} else {
			unsigned i = (unsigned)((r >> 8) % n);
			int rc;
			CREQ(stamped(held[i], stamps[i]), "victim: object %p changed under it",
			     (void *)held[i]);
			rc = sheaf_free(vs->c, held[i]);
			CREQ(rc == 0, "victim: sheaf_free: %d", rc);
			held[i] = held[--n];
			stamps[i] = stamps[n];
		}
	}
	return NULL;
}

static int victim(void *argp)
{
	struct k9_arg *a = argp;
	struct victim_state vs[2];
	sheaf_pool_t *pool;
	sheaf_cache_t *c;
	pthread_t t;

	close(a->stop[1]);
	pool = child_connect(a->sock, "victim");
	c = sheaf_cache_open(pool, "k9");
	CREQ(c != NULL, "sheaf_cache_open: %s", strerror(errno));
	for (int i = 0; i < 2; i++) {
		vs[i].c = c;
		vs[i].rng = mix64((uint64_t)getpid() * 31 + (uint64_t)i) | 1;
	}
	if (a->threads > 1)
		CREQ(pthread_create(&t, NULL, victim_loop, &vs[1]) == 0, "pthread_create");
	victim_loop(&vs[0]);
	return 0;
}

START_TEST(kill9)
{
	static struct k9_arg a;
	struct dmn d;
	pid_t surv[2];
	int kills = san ? 20 : 50;
	uint64_t seed = (uint64_t)now_ms() ^ ((uint64_t)getpid() << 20), rng = seed | 1;
	uint64_t ops[2] = { 0, 0 }, stats = 0;
	Sheaf__V1__Response *r;
	int64_t t0;
	char g;

	printf("kill9: seed %llu\n", (unsigned long long)seed);
	dmn_init(&d);
	dmn_start(&d, NULL);
	memset(&a, 0, sizeof(a));
	a.sock = d.sock;
	REQUIRE(pipe(a.ready) == 0 && pipe(a.stop) == 0 && pipe(a.report) == 0, "pipe");
	/* Survivor 0 creates the cache before survivor 1 opens it. */
	for (int i = 0; i < 2; i++) {
		a.idx = i;
		surv[i] = fork_child(survivor, &a);
		REQUIRE(read_full(a.ready[0], &g, 1, 60000) == 0, "survivor %d did not start", i);
	}
	t0 = now_ms();
	for (int k = 0; k < kills; k++) {
		unsigned delay = (unsigned)(xorshift(&rng) % 20001);
		pid_t v;
		int st = 0;
		char buf[64];

		a.threads = 1 + (k & 1);
		v = fork_child(victim, &a);
		sleep_us(delay);
		kill(v, SIGKILL);
		REQUIRE(wait_pid(v, 30000, &st) == 1, "victim %d did not die", k);
		untrack(v);
		REQUIRE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
			"victim %d (to be killed after %u us) ended with %s before the kill", k,
			delay, status_str(st, buf, sizeof(buf)));
		REQUIRE(dmn_alive(&d), "sheafd died after kill %d (victim killed after %u us)", k,
			delay);
		for (int i = 0; i < 2; i++) {
			REQUIRE(waitpid(surv[i], &st, WNOHANG) == 0,
				"survivor %d ended (%s) during kill %d", i,
				status_str(st, buf, sizeof(buf)), k);
		}
		if ((k & 7) == 7)
			REQUIRE(info_clients(d.sock) >= 2, "DaemonInfo failed after kill %d", k);
	}
	printf("kill9: %d victims killed in %lld ms\n", kills, (long long)(now_ms() - t0));

	close(a.stop[1]);                       /* survivors stop at EOF */
	for (int i = 0; i < 2; i++)
		reap_ok(surv[i], 60000, "survivor");
	for (int i = 0; i < 2; i++) {
		uint64_t rep[3];
		REQUIRE(read_full(a.report[0], rep, sizeof(rep), 1000) == 0, "missing survivor report");
		REQUIRE(rep[0] < 2, "bad report");
		ops[rep[0]] = rep[1];
		stats += rep[2];
	}
	printf("  survivors: %llu and %llu alloc/free ops, %llu Stats calls, no failure\n",
	       (unsigned long long)ops[0], (unsigned long long)ops[1], (unsigned long long)stats);
	REQUIRE(ops[0] > 0 && ops[1] > 0, "a survivor did no work");

	wait_no_clients(&d, 60000);
	r = raw_check(d.sock);
	printf("  check: ok %d, objects %llu, free %llu, in sheaves %llu, in use %llu "
	       "(counted %llu); %d repairs logged\n", (int)r->check->ok,
	       (unsigned long long)r->check->objects, (unsigned long long)r->check->free_in_slabs,
	       (unsigned long long)r->check->in_sheaves, (unsigned long long)r->check->in_use,
	       (unsigned long long)r->check->counted_in_use, count_in_file(d.log, "repaired"));
	REQUIRE(r->check->ok, "pool check after %d kills: %s", kills, r->check->problem);
	/* Objects of killed clients stay allocated: at most what they held. */
	REQUIRE(r->check->in_use <= (uint64_t)kills * 2 * (VICTIM_HOLD + VICTIM_BULK),
		"%llu objects in use after %d kills", (unsigned long long)r->check->in_use, kills);
	sheaf__v1__response__free_unpacked(r, NULL);

	/* The pool still serves a newcomer (nothing wedged). */
	{
		static struct k9_arg b;
		b = a;
		b.idx = 1;
		REQUIRE(pipe(b.stop) == 0, "pipe");
		close(b.stop[1]);                /* stop at the first look */
		pid_t p = fork_child(survivor, &b);
		REQUIRE(read_full(b.ready[0], &g, 1, 60000) == 0, "newcomer did not start");
		reap_ok(p, 60000, "newcomer after the kills");
		close(b.stop[0]);
	}
	wait_no_clients(&d, 60000);
	r = raw_check(d.sock);
	REQUIRE(r->check->ok, "pool check after the newcomer: %s", r->check->problem);
	sheaf__v1__response__free_unpacked(r, NULL);
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- 4. malformed frames --------------------------------------------------- */

struct good_arg {
	const char *sock;
	int ready[2];
	int stop[2];
	int report[2];
};

static int good_client(void *argp)
{
	struct good_arg *a = argp;
	sheaf_pool_t *pool;
	sheaf_cache_t *c;
	uint64_t iters = 0, stats = 0;

	close(a->stop[1]);
	pool = child_connect(a->sock, "good");
	c = sheaf_cache_create(pool, "mf", 128, NULL);
	CREQ(c != NULL, "sheaf_cache_create: %s", strerror(errno));
	CREQ(write_full(a->ready[1], "r", 1) == 0, "write ready");
	for (;;) {
		struct pollfd pf = { a->stop[0], POLLIN, 0 };
		void *objs[64];
		struct sheaf_stats st;
		int rc;

		for (int k = 0; k < 64; k++) {
			objs[k] = sheaf_alloc(c);
			CREQ(objs[k] != NULL, "good client: sheaf_alloc: %s", strerror(errno));
			memset(objs[k], k, 128);
		}
		for (int k = 0; k < 64; k++) {
			CREQ(((unsigned char *)objs[k])[127] == k, "good client: object changed");
			rc = sheaf_free(c, objs[k]);
			CREQ(rc == 0, "good client: sheaf_free: %d", rc);
		}
		rc = sheaf_cache_stats(c, -1, &st);
		CREQ(rc == 0, "good client: sheaf_cache_stats after %llu calls: %d",
		     (unsigned long long)stats, rc);
		stats++;
		iters++;
		if (poll(&pf, 1, 0) != 0)
			break;
	}
	uint64_t rep[2] = { iters, stats };
	CREQ(write_full(a->report[1], rep, sizeof(rep)) == 0, "write report");
	sheaf_disconnect(pool);
	return 0;
}

/* A raw connection to @d, or a failure. */
static int must_connect(struct dmn *d)
{
	int fd = unix_connect(d->sock);

	REQUIRE(fd >= 0, "connect %s: %s", d->sock, strerror(-fd));
	return fd;
}

/* Expect one Response with @status on @fd; returns it (caller frees). */
static Sheaf__V1__Response *expect_status(int fd, int status, const char *what)
{
	int rc;
	Sheaf__V1__Response *r = recv_resp(fd, 20000, &rc);

	REQUIRE(r != NULL, "%s: no response: %s", what, strerror(-rc));
	REQUIRE((int)r->status == status, "%s: status %d (%s), expected %d", what, r->status,
		r->error, status);
	REQUIRE(status == SHEAF__V1__STATUS__STATUS_OK || (r->error != NULL && r->error[0]),
		"%s: an error response without a reason", what);
	return r;
}

/* The connection still works: DaemonInfo gets STATUS_OK with its id. */
static void expect_usable(int fd, uint64_t id, const char *what)
{
	int rc;
	Sheaf__V1__Response *r = rpc_info(fd, id, &rc);

	REQUIRE(r != NULL, "%s: DaemonInfo afterwards: %s", what, strerror(-rc));
	REQUIRE(r->status == SHEAF__V1__STATUS__STATUS_OK &&
		r->body_case == SHEAF__V1__RESPONSE__BODY_DAEMON_INFO && r->id == id,
		"%s: DaemonInfo afterwards: status %d, body %d, id %llu", what, r->status,
		r->body_case, (unsigned long long)r->id);
	sheaf__v1__response__free_unpacked(r, NULL);
}

static void expect_closed(int fd, const char *what)
{
	size_t extra;

	REQUIRE(wait_closed(fd, 20000, &extra) == 1, "%s: the daemon kept the connection open", what);
	REQUIRE(extra == 0, "%s: %zu unexpected bytes before the close", what, extra);
}

static void malformed_round(struct dmn *d, int round)
{
	uint8_t buf[4096];
	size_t n;
	int fd;
	Sheaf__V1__Response *r;
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__DaemonInfoRequest di = SHEAF__V1__DAEMON_INFO_REQUEST__INIT;
	Sheaf__V1__AttachRequest ar = SHEAF__V1__ATTACH_REQUEST__INIT;
	uint64_t id = (uint64_t)round * 100;

	/* (a) oversize length headers: the connection is closed. */
	fd = must_connect(d);
	REQUIRE(send_frame_hdr(fd, 0x7fffffffu, NULL, 0) == 0, "send");
	expect_closed(fd, "0x7fffffff-byte header");
	close(fd);
	fd = must_connect(d);
	memset(buf, 0, sizeof(buf));
	REQUIRE(send_frame_hdr(fd, FRAME_DEFAULT_CAP + 1, buf, 100) == 0, "send");
	expect_closed(fd, "cap+1-byte header");
	close(fd);

	/* (b) a truncated frame, then close: nothing breaks. */
	fd = must_connect(d);
	REQUIRE(send_frame_hdr(fd, 100, "\x08\x01\x82\x01\x00\x00\x00\x00\x00\x00", 10) == 0,
		"send");
	close(fd);
	fd = must_connect(d);
	REQUIRE(send_all(fd, "\x00\x00", 2) == 0, "send");   /* half a header */
	close(fd);

	/* (c) garbage as a payload: BAD_REQUEST, the connection stays usable. */
	fd = must_connect(d);
	static const uint8_t garbage[] = {
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x07,
		'g', 'a', 'r', 'b', 'a', 'g', 'e',
	};
	REQUIRE(send_frame(fd, garbage, sizeof(garbage)) == 0, "send");
	r = expect_status(fd, SHEAF__V1__STATUS__STATUS_BAD_REQUEST, "garbage payload");
	sheaf__v1__response__free_unpacked(r, NULL);
	expect_usable(fd, id + 1, "after garbage");
	/* A field with an invalid wire type (7). */
	REQUIRE(send_frame(fd, "\x0f\x01", 2) == 0, "send");
	r = expect_status(fd, SHEAF__V1__STATUS__STATUS_BAD_REQUEST, "invalid wire type");
	sheaf__v1__response__free_unpacked(r, NULL);
	/* An empty frame: no body. */
	REQUIRE(send_frame(fd, NULL, 0) == 0, "send");
	r = expect_status(fd, SHEAF__V1__STATUS__STATUS_BAD_REQUEST, "empty frame");
	sheaf__v1__response__free_unpacked(r, NULL);
	expect_usable(fd, id + 2, "after an empty frame");

	/* (d) a valid request plus an unknown field (tag 99, varint). */
	rq.id = id + 3;
	rq.body_case = SHEAF__V1__REQUEST__BODY_DAEMON_INFO;
	rq.daemon_info = &di;
	n = pack_req(&rq, buf, sizeof(buf));
	buf[n++] = 0x98;        /* (99 << 3) | 0 */
	buf[n++] = 0x06;
	buf[n++] = 0x01;
	REQUIRE(send_frame(fd, buf, n) == 0, "send");
	r = expect_status(fd, SHEAF__V1__STATUS__STATUS_BAD_REQUEST, "unknown field 99");
	REQUIRE(r->id == id + 3, "unknown field 99: reply id %llu", (unsigned long long)r->id);
	REQUIRE(strstr(r->error, "99") != NULL, "unknown field 99: reason '%s'", r->error);
	sheaf__v1__response__free_unpacked(r, NULL);
	/* ... and inside the body: daemon_info { 99: 1 }. */
	{
		static const uint8_t nested[] = { 0x08, 0x05, 0x82, 0x01, 0x03, 0x98, 0x06, 0x01 };
		REQUIRE(send_frame(fd, nested, sizeof(nested)) == 0, "send");
		r = expect_status(fd, SHEAF__V1__STATUS__STATUS_BAD_REQUEST, "unknown field in body");
		REQUIRE(strstr(r->error, "99") != NULL, "unknown field in body: reason '%s'", r->error);
		sheaf__v1__response__free_unpacked(r, NULL);
	}
	expect_usable(fd, id + 4, "after unknown fields");

	/* (e) an unknown oneof case: tag 40, length-delimited, empty. */
	{
		uint8_t m[] = { 0x08, (uint8_t)(id + 5), 0xc2, 0x02, 0x00 };
		m[1] &= 0x7f;
		REQUIRE(send_frame(fd, m, sizeof(m)) == 0, "send");
		r = expect_status(fd, SHEAF__V1__STATUS__STATUS_BAD_REQUEST, "unknown body 40");
		sheaf__v1__response__free_unpacked(r, NULL);
	}
	/* A request with an id and no body at all. */
	REQUIRE(send_frame(fd, "\x08\x07", 2) == 0, "send");
	r = expect_status(fd, SHEAF__V1__STATUS__STATUS_BAD_REQUEST, "no body");
	REQUIRE(r->id == 7, "no body: reply id %llu", (unsigned long long)r->id);
	sheaf__v1__response__free_unpacked(r, NULL);
	expect_usable(fd, id + 6, "after unknown bodies");
	/* A frame of exactly the cap is read (and refused as garbage). */
	{
		uint8_t *big = calloc(1, FRAME_DEFAULT_CAP);
		REQUIRE(big != NULL, "calloc");
		REQUIRE(send_frame(fd, big, FRAME_DEFAULT_CAP) == 0, "send");
		free(big);
		r = expect_status(fd, SHEAF__V1__STATUS__STATUS_BAD_REQUEST, "frame of the cap");
		sheaf__v1__response__free_unpacked(r, NULL);
		expect_usable(fd, id + 7, "after a frame of the cap");
	}
	/* Several requests in one write are all answered, in order. */
	{
		size_t off = 0;
		for (int k = 0; k < 3; k++) {
			rq.id = id + 10 + (uint64_t)k;
			n = pack_req(&rq, buf + off + FRAME_HDR, sizeof(buf) - off - FRAME_HDR);
			frame_put_len(buf + off, (uint32_t)n);
			off += FRAME_HDR + n;
		}
		REQUIRE(send_all(fd, buf, off) == 0, "send");
		for (int k = 0; k < 3; k++) {
			r = expect_status(fd, SHEAF__V1__STATUS__STATUS_OK, "pipelined DaemonInfo");
			REQUIRE(r->id == id + 10 + (uint64_t)k, "pipelined reply %d has id %llu", k,
				(unsigned long long)r->id);
			sheaf__v1__response__free_unpacked(r, NULL);
		}
	}
	close(fd);

	/* (f) Attach speaking protocol version 2: UNSUPPORTED, then closed. */
	fd = must_connect(d);
	rq = (Sheaf__V1__Request)SHEAF__V1__REQUEST__INIT;
	rq.id = id + 20;
	ar.protocol_version = 2;
	ar.pid = (uint32_t)getpid();
	ar.name = (char *)"from-the-future";
	rq.body_case = SHEAF__V1__REQUEST__BODY_ATTACH;
	rq.attach = &ar;
	n = pack_req(&rq, buf, sizeof(buf));
	REQUIRE(send_frame(fd, buf, n) == 0, "send");
	r = expect_status(fd, SHEAF__V1__STATUS__STATUS_UNSUPPORTED, "Attach version 2");
	REQUIRE(r->id == id + 20, "Attach version 2: reply id %llu", (unsigned long long)r->id);
	sheaf__v1__response__free_unpacked(r, NULL);
	expect_closed(fd, "after Attach version 2");
	close(fd);
}

START_TEST(malformed)
{
	static struct good_arg a;
	struct dmn d;
	pid_t good;
	uint64_t rep[2];
	int rounds = san ? 5 : 20;
	int64_t t0;
	char g;
	static const char *const reasons[] = {
		"2147483647-byte frame", "1048577-byte frame", "unparsable request",
		"unknown field 99", "unknown field 40", "no known body", "EOF mid-frame",
	};

	dmn_init(&d);
	dmn_start(&d, NULL);
	memset(&a, 0, sizeof(a));
	a.sock = d.sock;
	REQUIRE(pipe(a.ready) == 0 && pipe(a.stop) == 0 && pipe(a.report) == 0, "pipe");
	good = fork_child(good_client, &a);
	REQUIRE(read_full(a.ready[0], &g, 1, 60000) == 0, "good client did not start");
	t0 = now_ms();
	for (int i = 0; i < rounds; i++) {
		malformed_round(&d, i);
		REQUIRE(dmn_alive(&d), "sheafd died in round %d", i);
	}
	printf("malformed: %d rounds of bad frames in %lld ms\n", rounds,
	       (long long)(now_ms() - t0));
	close(a.stop[1]);
	reap_ok(good, 60000, "good client");
	REQUIRE(read_full(a.report[0], rep, sizeof(rep), 1000) == 0, "no report from the good client");
	printf("  good client: %llu alloc/free rounds, %llu Stats calls, no failure\n",
	       (unsigned long long)rep[0], (unsigned long long)rep[1]);
	REQUIRE(rep[1] > 0, "the good client made no Stats call");
	REQUIRE(dmn_alive(&d), "sheafd died");
	for (unsigned i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
		REQUIRE(file_contains(d.log, reasons[i]), "sheafd's log does not mention '%s'",
			reasons[i]);
	REQUIRE(file_contains(d.log, "protocol version 2"),
		"sheafd's log does not mention the refused Attach of protocol version 2");
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- 5. unauthorised uid --------------------------------------------------- */

struct nobody_arg {
	const char *sock;
	int expect_ok;
	int msg[2];
};

static int nobody_child(void *argp)
{
	struct nobody_arg *a = argp;
	char err[256] = "";
	sheaf_pool_t *p;
	int e;

	/* 77: this system cannot make us uid 65534 (e.g. a user namespace
	 * without it): the test is skipped. */
	if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0) {
		fprintf(stderr, "cannot become uid/gid 65534: %s\n", strerror(errno));
		return 77;
	}
	CREQ(getuid() == 65534 && geteuid() == 65534, "still uid %d", (int)getuid());
	errno = 0;
	p = sheaf_connect(a->sock, "nobody", 0, err, sizeof(err));
	e = errno;
	write_full(a->msg[1], err, sizeof(err));
	if (a->expect_ok) {
		sheaf_cache_t *c;
		void *o;
		CREQ(p != NULL, "nobody (allowed by gid) refused: %s (%s)", strerror(e), err);
		c = sheaf_cache_create(p, "nobody", 64, NULL);
		CREQ(c != NULL, "sheaf_cache_create: %s", strerror(errno));
		o = sheaf_alloc(c);
		CREQ(o != NULL, "sheaf_alloc: %s", strerror(errno));
		CREQ(sheaf_free(c, o) == 0, "sheaf_free");
		sheaf_disconnect(p);
		return 0;
	}
	CREQ(p == NULL, "uid 65534 attached to a daemon that allows only uid 0");
	CREQ(e == EACCES, "errno %d (%s), expected EACCES; err '%s'", e, strerror(e), err);
	CREQ(strstr(err, "uid") != NULL && strstr(err, "65534") != NULL,
	     "the error does not name the uid: '%s'", err);
	return 0;
}

/* Returns 0, or -1 when the system cannot run a uid 65534 process. */
static int nobody_run(struct dmn *d, int expect_ok)
{
	static struct nobody_arg a;
	char err[256] = "", buf[64];
	pid_t p;
	int st = 0;

	/* nobody must be able to reach the socket: the directory searchable,
	 * the socket writable; the daemon's allow lists decide. */
	REQUIRE(chmod(d->dir, 0755) == 0, "chmod: %s", strerror(errno));
	REQUIRE(chmod(d->sock, 0777) == 0, "chmod: %s", strerror(errno));
	a.sock = d->sock;
	a.expect_ok = expect_ok;
	REQUIRE(pipe(a.msg) == 0, "pipe");
	p = fork_child(nobody_child, &a);
	REQUIRE(wait_pid(p, 60000, &st) == 1, "the uid 65534 child hangs");
	untrack(p);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
		close(a.msg[0]);
		close(a.msg[1]);
		return -1;
	}
	REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 0, "uid 65534 client (%s): %s",
		expect_ok ? "allowed by gid" : "to be refused", status_str(st, buf, sizeof(buf)));
	REQUIRE(read_full(a.msg[0], err, sizeof(err), 1000) == 0, "no message from the child");
	err[sizeof(err) - 1] = '\0';
	printf("  uid 65534 %s: '%s'\n", expect_ok ? "attached" : "refused", err);
	close(a.msg[0]);
	close(a.msg[1]);
	return 0;
}

static int root_client(void *argp)
{
	sheaf_pool_t *p = child_connect(argp, "root");

	sheaf_disconnect(p);
	return 0;
}

START_TEST(uid_refused)
{
	static const char *const only_root[] = { "--allow-uid", "0", NULL };
	static const char *const by_gid[] = { "--allow-uid", "0", "--allow-gid", "65534", NULL };
	struct dmn d;

	if (getuid() != 0) {
		printf("uid_refused: skipped (not root: cannot become uid 65534)\n");
		return;
	}
	dmn_init(&d);
	dmn_start(&d, only_root);
	if (nobody_run(&d, 0) != 0) {
		printf("uid_refused: skipped (this system cannot run a process as uid 65534)\n");
		dmn_stop(&d, 10000);
		dmn_cleanup(&d);
		return;
	}
	REQUIRE(file_contains(d.log, "uid 65534"), "sheafd's log does not mention the refused uid");
	/* The allowed uid still attaches. */
	reap_ok(fork_child(root_client, d.sock), 60000, "root client");
	REQUIRE(dmn_alive(&d), "sheafd died");
	dmn_stop(&d, 10000);

	/* Allowed through its group. */
	dmn_start(&d, by_gid);
	REQUIRE(nobody_run(&d, 1) == 0, "uid 65534 unavailable the second time");
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- 6. daemon lifecycle --------------------------------------------------- */

struct idle_arg {
	const char *sock;
	int ready[2];
	int stop[2];
};

static int idle_client(void *argp)
{
	struct idle_arg *a = argp;
	sheaf_pool_t *p;
	char g;

	close(a->stop[1]);
	p = child_connect(a->sock, "idle");
	CREQ(write_full(a->ready[1], "r", 1) == 0, "write ready");
	/* Wait for the parent (EOF), the daemon gone meanwhile. */
	while (read(a->stop[0], &g, 1) < 0 && errno == EINTR)
		;
	sheaf_disconnect(p);
	return 0;
}

START_TEST(lifecycle)
{
	static struct idle_arg a;
	struct dmn d;
	char out[128], err[128], conf[128], buf[64];
	pid_t idle[2];
	int st;
	int64_t t0;
	char g;
	Sheaf__V1__Response *r;

	dmn_init(&d);
	snprintf(out, sizeof(out), "%s/out", d.dir);
	snprintf(err, sizeof(err), "%s/err", d.dir);
	snprintf(conf, sizeof(conf), "%s/sheafd.conf", d.dir);

	/* --help: exit 0, every flag listed. */
	{
		char *argv[] = { sheafd_path, (char *)"--help", NULL };
		static const char *const flags[] = {
			"--socket", "--config", "--size", "--nodes", "--foreground",
			"--log-level", "--allow-uid", "--allow-gid",
		};
		st = run_sheafd(argv, out, err, 20000);
		REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 0, "sheafd --help: %s",
			status_str(st, buf, sizeof(buf)));
		for (unsigned i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
			REQUIRE(file_contains(out, flags[i]), "sheafd --help does not list %s", flags[i]);
	}
	/* A bad flag, a bad value: exit 2 with a message. */
	{
		char *argv[] = { sheafd_path, (char *)"--foreground", (char *)"--no-such-flag", NULL };
		char *argv2[] = { sheafd_path, (char *)"--socket", d.sock, (char *)"--nodes",
				  (char *)"99", NULL };
		st = run_sheafd(argv, out, err, 20000);
		REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 2, "sheafd --no-such-flag: %s",
			status_str(st, buf, sizeof(buf)));
		REQUIRE(file_contains(err, "--no-such-flag"),
			"sheafd --no-such-flag: stderr does not name the flag");
		st = run_sheafd(argv2, out, err, 20000);
		REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 2, "sheafd --nodes 99: %s",
			status_str(st, buf, sizeof(buf)));
		REQUIRE(file_contains(err, "99"), "sheafd --nodes 99: stderr does not name the value");
		REQUIRE(access(d.sock, F_OK) != 0, "a refused sheafd created its socket");
	}

	/* A running daemon; a second one on its socket is refused. */
	dmn_start(&d, NULL);
	{
		char *argv[] = { sheafd_path, (char *)"--foreground", (char *)"--socket", d.sock,
				 (char *)"--nodes", (char *)"1", (char *)"--size", (char *)"16M", NULL };
		st = run_sheafd(argv, out, err, 20000);
		REQUIRE(!(WIFEXITED(st) && WEXITSTATUS(st) == 0),
			"a second sheafd on the same socket started (%s)",
			status_str(st, buf, sizeof(buf)));
		REQUIRE(file_contains(err, d.sock), "the second sheafd's message does not name %s",
			d.sock);
		REQUIRE(info_clients(d.sock) == 0, "the first sheafd no longer answers");
	}

	/* SIGTERM with two idle clients attached. */
	REQUIRE(pipe(a.ready) == 0 && pipe(a.stop) == 0, "pipe");
	a.sock = d.sock;
	for (int i = 0; i < 2; i++) {
		idle[i] = fork_child(idle_client, &a);
		REQUIRE(read_full(a.ready[0], &g, 1, 60000) == 0, "idle client %d did not attach", i);
	}
	REQUIRE(info_clients(d.sock) == 2, "DaemonInfo: %d clients, expected 2",
		info_clients(d.sock));
	t0 = now_ms();
	dmn_stop(&d, 2000);
	printf("lifecycle: SIGTERM with 2 clients attached: exit 0 in %lld ms\n",
	       (long long)(now_ms() - t0));
	REQUIRE(file_contains(d.log, "2 clients attached"), "the log does not say 2 clients were attached");
	close(a.stop[1]);
	for (int i = 0; i < 2; i++)
		reap_ok(idle[i], 30000, "idle client");
	close(a.stop[0]);
	close(a.ready[0]);
	close(a.ready[1]);

	/* A configuration file is honoured; flags win over it. */
	write_text(conf, "# sheafd test\n"
			 "nodes = 4\n"
			 "log_level=debug\n"
			 "size = 64M\n");
	{
		char *argv[] = { sheafd_path, (char *)"--foreground", (char *)"--config", conf,
				 (char *)"--socket", d.sock, (char *)"--nodes", (char *)"2", NULL };
		dmn_start_argv(&d, argv);
	}
	r = daemon_info(d.sock);
	REQUIRE(r != NULL && r->daemon_info->layout != NULL, "DaemonInfo failed");
	printf("  config file + flags: %u nodes (simulated %d), pool %llu bytes\n",
	       r->daemon_info->layout->nodes, (int)r->daemon_info->layout->simulated_nodes,
	       (unsigned long long)r->daemon_info->pool_size);
	REQUIRE(r->daemon_info->layout->nodes == 2, "nodes %u: the flag --nodes 2 did not win over "
		"the file's nodes=4", r->daemon_info->layout->nodes);
	REQUIRE(r->daemon_info->layout->simulated_nodes, "nodes not simulated");
	REQUIRE(r->daemon_info->pool_size == (64u << 20), "pool size %llu: the file's size=64M was "
		"ignored", (unsigned long long)r->daemon_info->pool_size);
	sheaf__v1__response__free_unpacked(r, NULL);
	REQUIRE(file_contains(d.log, " debug: "), "the file's log_level=debug was ignored");
	dmn_stop(&d, 10000);
	/* A bad configuration file: exit 2, naming the file and line. */
	write_text(conf, "nodes = 2\nno_such_key = 1\n");
	{
		char *argv[] = { sheafd_path, (char *)"--foreground", (char *)"--config", conf,
				 (char *)"--socket", d.sock, NULL };
		st = run_sheafd(argv, out, err, 20000);
		REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 2, "bad config file: %s",
			status_str(st, buf, sizeof(buf)));
		REQUIRE(file_contains(err, "sheafd.conf:2"), "bad config file: stderr does not name "
			"the file and line");
	}
	dmn_cleanup(&d);
}
END_TEST

/* ---- 7. an idle daemon uses no CPU ----------------------------------------- */

static int brief_client(void *argp)
{
	sheaf_pool_t *p = child_connect(argp, "brief");
	sheaf_cache_t *c = sheaf_cache_create(p, "brief", 256, NULL);
	void *objs[1000];

	CREQ(c != NULL, "sheaf_cache_create: %s", strerror(errno));
	for (int i = 0; i < 1000; i++)
		CREQ((objs[i] = sheaf_alloc(c)) != NULL, "sheaf_alloc: %s", strerror(errno));
	for (int i = 0; i < 1000; i++)
		CREQ(sheaf_free(c, objs[i]) == 0, "sheaf_free");
	sheaf_disconnect(p);
	return 0;
}

/* utime + stime of @pid in seconds, or -1. */
static double cpu_seconds(pid_t pid)
{
	char path[64], *s, *p;
	unsigned long long ut = 0, stime = 0;
	double r = -1;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	s = read_file(path);
	if (s == NULL)
		return -1;
	/* Fields after the command (which may hold spaces): state is field 3,
	 * utime 14, stime 15. */
	p = strrchr(s, ')');
	if (p != NULL && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
				&ut, &stime) == 2)
		r = (double)(ut + stime) / (double)sysconf(_SC_CLK_TCK);
	free(s);
	return r;
}

START_TEST(idle_cpu)
{
	struct dmn d;
	double c0, c1;
	volatile uint64_t spin = 0;
	int64_t t0;

	/* The probe itself works: 200 ms of busy loop here shows up. */
	c0 = cpu_seconds(getpid());
	for (t0 = now_ms(); now_ms() - t0 < 200;)
		spin++;
	c1 = cpu_seconds(getpid());
	REQUIRE(c0 >= 0 && c1 - c0 >= 0.05, "cpu_seconds does not see a 200 ms busy loop "
		"(%.3f -> %.3f s)", c0, c1);
	dmn_init(&d);
	dmn_start(&d, NULL);
	reap_ok(fork_child(brief_client, d.sock), 60000, "brief client");
	wait_no_clients(&d, 30000);
	c0 = cpu_seconds(d.pid);
	REQUIRE(c0 >= 0, "cannot read /proc/%d/stat", (int)d.pid);
	sleep_us(3000000);
	c1 = cpu_seconds(d.pid);
	REQUIRE(c1 >= 0, "cannot read /proc/%d/stat", (int)d.pid);
	printf("idle_cpu: sheafd used %.3f s of CPU in 3 s idle (%.3f s in all)\n", c1 - c0, c1);
	REQUIRE(c1 - c0 < 0.05, "an idle sheafd used %.3f s of CPU in 3 s", c1 - c0);
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- 9. the memory cap through the daemon ------------------------------------ */

/*
 * A client of a daemon started with a small --mem-cap allocates until the
 * pool is exhausted: sheaf_alloc must return NULL with ENOMEM promptly
 * (the barn is empty, the node worker's verdict is "starved"), never hang;
 * after freeing, allocation works again.
 */
static int cap_child(void *argp)
{
	enum { MAX = 4 * 4096 + 1 };     /* 4 slabs of 64-byte objects */
	const char *sock = argp;
	sheaf_pool_t *p = child_connect(sock, "cap");
	sheaf_cache_t *c = sheaf_cache_create(p, "cap", 64, NULL);
	void **o = calloc(MAX, sizeof(*o));
	int64_t t0;
	int n = 0;

	CREQ(c != NULL && o != NULL, "cache: %s", strerror(errno));
	t0 = now_ms();
	while (n < MAX && (o[n] = sheaf_alloc(c)) != NULL)
		*(char *)o[n++] = 1;
	CREQ(n < MAX, "allocated %d objects past a 1 MiB cap", n);
	CREQ(errno == ENOMEM, "alloc at the cap: %s, expected ENOMEM", strerror(errno));
	CREQ(now_ms() - t0 < 10000, "reaching the cap took %lld ms",
	     (long long)(now_ms() - t0));
	CREQ(n >= MAX - 1 - 2 * 60, "only %d objects before ENOMEM", n);
	t0 = now_ms();
	CREQ(sheaf_alloc(c) == NULL && errno == ENOMEM, "second try at the cap: %s",
	     strerror(errno));
	CREQ(now_ms() - t0 < 2000, "ENOMEM at the cap took %lld ms", (long long)(now_ms() - t0));
	CREQ(sheaf_free_bulk(c, o, (size_t)n) == 0, "free_bulk failed");
	CREQ(sheaf_alloc_bulk(c, o, 1000) == 0, "alloc after freeing: %s", strerror(errno));
	CREQ(sheaf_free_bulk(c, o, 1000) == 0, "free_bulk failed");
	printf("cap: %d objects of 64 B fit a 1 MiB cap; ENOMEM came back promptly\n", n);
	free(o);
	sheaf_disconnect(p);
	return 0;
}

/*
 * The pool's address taken in a client: sheaf_connect fails with
 * EADDRINUSE and says so, unless the client asks for relocation; a
 * relocated client still allocates and frees.
 */
static int addr_child(void *argp)
{
	const char *sock = argp;
	char err[256] = "";
	sheaf_pool_t *p = child_connect(sock, "addr");
	void *addr = p->shm.base, *o;
	sheaf_cache_t *c;

	sheaf_disconnect(p);
	CREQ(mmap(addr, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
		  -1, 0) == addr, "cannot take the pool's address: %s", strerror(errno));
	CREQ(sheaf_connect(sock, "addr", 0, err, sizeof(err)) == NULL && errno == EADDRINUSE,
	     "connect with the address taken: %s", strerror(errno));
	CREQ(strstr(err, "taken") != NULL, "message: %s", err);
	p = sheaf_connect(sock, "addr", SHEAF_CONNECT_RELOCATE, err, sizeof(err));
	CREQ(p != NULL, "relocated connect: %s", err);
	CREQ(p->shm.base != addr, "relocated to the same address");
	c = sheaf_cache_create(p, "addr", 64, NULL);
	CREQ(c != NULL && (o = sheaf_alloc(c)) != NULL, "alloc: %s", strerror(errno));
	CREQ(sheaf_free(c, o) == 0, "free");
	sheaf_disconnect(p);
	munmap(addr, 4096);
	return 0;
}

START_TEST(address_taken)
{
	struct dmn d;

	dmn_init(&d);
	dmn_start(&d, NULL);
	reap_ok(fork_child(addr_child, d.sock), 60000, "address client");
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

/*
 * sheafd restarted without the pool (a fresh daemon, not an adoption): the
 * client's next control request fails with ESTALE and says why, its own
 * sheaves keep serving it, and a new connection works.
 */
struct stale_arg {
	const char *sock;
	int ready, go;            /* pipes: child -> parent, parent -> child */
};

static int stale_child(void *argp)
{
	struct stale_arg *a = argp;
	char err[256] = "", b = 1;
	struct sheaf_stats st;
	sheaf_pool_t *p = child_connect(a->sock, "stale");
	sheaf_cache_t *c = sheaf_cache_create(p, "stale", 64, NULL);
	void *o;
	int rc;

	CREQ(c != NULL && (o = sheaf_alloc(c)) != NULL, "alloc: %s", strerror(errno));
	CREQ(sheaf_free(c, o) == 0, "free");
	CREQ(write_full(a->ready, &b, 1) == 0 && read_full(a->go, &b, 1, 60000) == 0,
	     "handshake with the test");
	rc = sheaf_cache_stats(c, -1, &st);
	CREQ(rc == -ESTALE, "stats after a fresh daemon: %d (%s), expected -ESTALE", rc,
	     strerror(-rc));
	CREQ(sheaf_pool_check(p, err, sizeof(err)) == -ESTALE && strstr(err, "stale") != NULL,
	     "check after a fresh daemon: %s", err);
	CREQ((o = sheaf_alloc(c)) != NULL, "the thread's own sheaf stopped serving: %s",
	     strerror(errno));
	CREQ(sheaf_free(c, o) == 0, "free on the old mapping");
	sheaf_disconnect(p);
	p = child_connect(a->sock, "stale-again");
	c = sheaf_cache_create(p, "stale", 64, NULL);
	CREQ(c != NULL && (o = sheaf_alloc(c)) != NULL, "alloc on the new pool: %s",
	     strerror(errno));
	CREQ(sheaf_free(c, o) == 0, "free on the new pool");
	sheaf_disconnect(p);
	return 0;
}

START_TEST(stale_pool)
{
	int ready[2], go[2];
	struct stale_arg a;
	struct dmn d;
	pid_t pid;
	char b;

	REQUIRE(pipe(ready) == 0 && pipe(go) == 0, "pipe: %s", strerror(errno));
	dmn_init(&d);
	dmn_start(&d, NULL);
	a = (struct stale_arg){ d.sock, ready[1], go[0] };
	pid = fork_child(stale_child, &a);
	REQUIRE(read_full(ready[0], &b, 1, 60000) == 0, "the client never got ready");
	dmn_stop(&d, 10000);
	dmn_start(&d, NULL);              /* afresh: a new, empty pool */
	REQUIRE(write_full(go[1], &b, 1) == 0, "the client is gone");
	reap_ok(pid, 60000, "stale client");
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
	close(ready[0]);
	close(ready[1]);
	close(go[0]);
	close(go[1]);
}
END_TEST

START_TEST(mem_cap)
{
	const char *extra[] = { "--mem-cap", "1M", NULL };
	struct dmn d;

	dmn_init(&d);
	dmn_start(&d, extra);
	reap_ok(fork_child(cap_child, d.sock), 60000, "cap client");
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- 8. connect / disconnect cycles in one live process --------------------- */

/*
 * sheaf_disconnect detaches from sheafd: a process that connects and
 * disconnects again and again (a tool, a plugin reloaded, a pool reopened
 * after an error) must not use up the daemon's 64 client slots, and once it
 * has disconnected DaemonInfo must no longer count it as attached.
 */
static int reconnect_child(void *argp)
{
	const char *sock = argp;
	char err[256] = "";

	for (int i = 0; i < 100; i++) {
		sheaf_pool_t *p = sheaf_connect(sock, "reconnect", 0, err, sizeof(err));
		CREQ(p != NULL, "connect/disconnect cycle %d: sheaf_connect: %s (%s)", i,
		     strerror(errno), err);
		sheaf_disconnect(p);
	}
	return 0;
}

struct linger_arg {
	const char *sock;
	int ready[2];
	int stop[2];
};

static int linger_child(void *argp)
{
	struct linger_arg *a = argp;
	sheaf_pool_t *p;
	char g;

	close(a->stop[1]);
	p = child_connect(a->sock, "linger");
	sheaf_disconnect(p);
	CREQ(write_full(a->ready[1], "d", 1) == 0, "write");
	while (read(a->stop[0], &g, 1) < 0 && errno == EINTR)
		;
	return 0;
}

START_TEST(reconnect)
{
	static struct linger_arg a;
	struct dmn d;
	pid_t p;
	int64_t end;
	int n, st = 0;
	char g, buf[64];

	dmn_init(&d);
	dmn_start(&d, NULL);
	/* 100 connect/disconnect cycles in one process (64 client slots). */
	p = fork_child(reconnect_child, d.sock);
	REQUIRE(wait_pid(p, 60000, &st) == 1, "reconnecting client hangs");
	untrack(p);
	/* A disconnected but live process is no longer an attached client. */
	a.sock = d.sock;
	REQUIRE(pipe(a.ready) == 0 && pipe(a.stop) == 0, "pipe");
	wait_no_clients(&d, 30000);
	p = fork_child(linger_child, &a);
	REQUIRE(read_full(a.ready[0], &g, 1, 60000) == 0, "linger client did not start");
	for (end = now_ms() + 5000; (n = info_clients(d.sock)) != 0 && now_ms() < end;)
		sleep_us(20000);
	close(a.stop[1]);
	reap_ok(p, 30000, "linger client");
	REQUIRE(WIFEXITED(st) && WEXITSTATUS(st) == 0 && n == 0,
		"client slots leak on sheaf_disconnect: 100 connect/disconnect cycles in one "
		"process: %s (see its message above); a live process that disconnected still "
		"counts as attached after 5 s: %d client(s)", status_str(st, buf, sizeof(buf)), n);
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- main ------------------------------------------------------------------- */

static void find_sheafd(void)
{
	if (exe_dir(sheafd_path, sizeof(sheafd_path), "../daemon/sheafd") != 0) {
		fprintf(stderr, "test_daemon: the path of /proc/self/exe: %s\n", strerror(errno));
		exit(1);
	}
	if (access(sheafd_path, X_OK) != 0) {
		fprintf(stderr, "test_daemon: no sheafd at %s (build it first)\n", sheafd_path);
		exit(1);
	}
}

int main(void)
{
	Suite *s = suite_create("sheafd");
	const char *e = getenv("SHEAF_SAN");

	san = e != NULL && e[0] != '\0';
	find_sheafd();
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ADD_ALONE(s, share, 240);
	ADD_ALONE(s, prodcons, 240);
	ADD_ALONE(s, kill9, 240);
	ADD_ALONE(s, malformed, 240);
	ADD_ALONE(s, uid_refused, 240);
	ADD_ALONE(s, lifecycle, 240);
	ADD_ALONE(s, idle_cpu, 240);
	ADD_ALONE(s, reconnect, 240);
	ADD_ALONE(s, mem_cap, 240);
	ADD_ALONE(s, address_taken, 240);
	ADD_ALONE(s, stale_pool, 240);
	return run_suite(s);
}
