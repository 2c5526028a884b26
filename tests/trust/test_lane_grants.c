/*
 * test_lane_grants.c - no client can take the lanes of another, and a
 * client caught at what libsheaf never does loses its access, not the
 * others (docs/design.md, "What sheafd checks", "What a hostile client can
 * still spoil", "Limits").
 *
 * Against a real sheafd run as systemd runs it (its memfds in the fd
 * store, for an adoptive restart) with 64 lanes, at most CAP per client:
 *   hog: a hostile client (uid nobody when the test runs as root) starts
 *     threads until none gets a lane, then writes its client id, busy and
 *     a bound into every lane header, every 100 us; a good client's new
 *     threads (GOOD_THREADS at once, more than its first grant) each get a
 *     lane and allocate within BOUND_MS; the hostile is not revoked (its
 *     writes cannot be pinned on it); then the same after SIGKILL of
 *     sheafd and an adoptive restart, with more threads (a grant from the
 *     new sheafd).
 *   revoke: a libsheaf client holding sheaves asks for lanes again on its
 *     connection after being told it is at its cap: revoked (EKEYREVOKED
 *     for that request and the next, one log line, `sheafctl clients`
 *     shows it, its uid's next attach refused), while a good client's
 *     objects all stay allocated and intact and the pool checks clean;
 *     after SIGKILL of sheafd and an adoptive restart the ban still holds,
 *     and a second offender (another uid) is revoked by the new sheafd.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/sheaf.h"
#include "client/internal.h"
#include "client/rpc.h"
#include "proto/sheaf.pb-c.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_deploy.h"
#include "tests/helpers/util_notify.h"
#include "tests/helpers/util_pool.h"
#include "tests/helpers/util_proc.h"

#define BOUND_MS     1000
#define CAP          12          /* --max-threads-per-client */
#define GOOD_THREADS 6           /* over the first grants (1, then 4) */
#define HOG_THREADS  80          /* over the pool's 64 lanes */
#define NOBODY       65534u
#define NOBODY2      65533u
#define OBJS         1000

struct run {
	struct notify n;
	struct svc d;
	struct notify_drainer drainer;
};

static int as_root(void)
{
	return geteuid() == 0;
}

/* The socket reachable by the other uids (the directory is 0700 from
 * mkdtemp, the socket 0660 root:root). */
static void open_socket(struct run *R)
{
	if (!as_root())
		return;
	REQUIRE(chmod(test_dir, 0711) == 0, "chmod: %s", strerror(errno));
	REQUIRE(chown(R->d.sock, 0, NOBODY) == 0 && chmod(R->d.sock, 0666) == 0,
		"chown: %s", strerror(errno));
}

static void start(struct run *R, int adopt)
{
	/* Per uid: a uid of its own, the hostile gets up to CAP; sharing the
	 * test's uid (not root), the good client must fit beside it. */
	static const char *const flags[] = {
		"--nodes", "1", "--size", "64M", "--log-level", "debug", "--max-threads", "64",
		"--max-threads-per-client", "12", "--max-threads-per-uid", "32",
		"--revoke-ban", "600", "--allow-uid", "0", "--allow-uid", "65534",
		"--allow-uid", "65533", NULL,
	};
	R->d.flags = flags;
	svc_start(&R->d, &R->n, -1, adopt, 0);
	notify_drainer_start(&R->drainer, &R->n);
	open_socket(R);
}

static void restart(struct run *R)
{
	notify_drainer_stop(&R->drainer);
	svc_stop(&R->d, &R->n, SIGKILL);
	start(R, 1);
	REQUIRE(file_contains(R->d.log, "adopted the pool from the fd store"),
		"the new sheafd did not adopt the pool");
}

static void finish(struct run *R)
{
	notify_drainer_stop(&R->drainer);
	svc_stop(&R->d, &R->n, SIGTERM);
	notify_close(&R->n);
}

/* Become @uid for good (when run as root). */
static void become(uint32_t uid)
{
	if (!as_root())
		return;
	REQUIRE(setgroups(0, NULL) == 0, "setgroups: %s", strerror(errno));
	REQUIRE(setresgid(NOBODY, NOBODY, NOBODY) == 0, "setresgid: %s", strerror(errno));
	REQUIRE(setresuid(uid, uid, uid) == 0, "setresuid: %s", strerror(errno));
	REQUIRE(prctl(PR_SET_DUMPABLE, 1) == 0, "PR_SET_DUMPABLE");
}

struct pipes {
	const char *sock;
	int go[2];                   /* parent -> child: start */
	int done[2];                 /* child -> parent: one byte per step */
	int stop[2];                 /* parent closes its end: stop */
	uint32_t uid;
};

static void pipes_open(struct pipes *a, const char *sock, uint32_t uid)
{
	a->sock = sock;
	a->uid = uid;
	/* O_CLOEXEC: a restarted sheafd must not hold them open. */
	REQUIRE(pipe2(a->go, O_CLOEXEC) == 0 && pipe2(a->done, O_CLOEXEC) == 0 &&
		pipe2(a->stop, O_CLOEXEC) == 0, "pipe");
}

/* In the parent after the fork. */
static void pipes_parent(struct pipes *a)
{
	close(a->go[0]);
	close(a->done[1]);
	close(a->stop[0]);
}

static void pipes_child(struct pipes *a)
{
	close(a->go[1]);
	close(a->done[0]);
	close(a->stop[1]);
}

static void say(int fd, char c)
{
	REQUIRE(write(fd, &c, 1) == 1, "write: %s", strerror(errno));
}

static char hear(int fd, const char *what)
{
	char c = 0;

	REQUIRE(read_full(fd, &c, 1, 60000) == 0, "no word from %s", what);
	return c;
}

/* ---- the hog ------------------------------------------------------------ */

static pthread_mutex_t hog_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hog_cv = PTHREAD_COND_INITIALIZER;
static int hog_started, hog_laned, hog_stop;

static void *hog_thread(void *arg)
{
	sheaf_cache_t *c = arg;
	void *o = sheaf_alloc(c);

	pthread_mutex_lock(&hog_mu);
	hog_started++;
	hog_laned += o != NULL;
	pthread_cond_broadcast(&hog_cv);
	while (o != NULL && !hog_stop)
		pthread_cond_wait(&hog_cv, &hog_mu);
	pthread_mutex_unlock(&hog_mu);
	return NULL;
}

/* Every lane's header says it is ours, busy, bound: what a client that
 * wants every lane can write. */
static void hog_scribble(struct shm_pool *sp, uint32_t me)
{
	for (uint32_t l = 0; l < sp->max_lanes; l++) {
		at_store_relaxed(&sp->lanes[l].client, me);
		at_store_relaxed(&sp->lanes[l].busy, 1);
		at_store_relaxed(&sp->lanes[l].bound, 1);
	}
}

static int hog_main(void *arg)
{
	struct pipes *a = arg;
	pthread_t th[HOG_THREADS];
	struct pollfd pf;
	sheaf_pool_t *pool;
	sheaf_cache_t *c;
	int n = 0;

	pipes_child(a);
	hear(a->go[0], "the test");
	become(a->uid);
	pool = child_connect(a->sock, "hog");
	c = mkcache(pool, "hog", 64, 0, 0);
	/* Threads until one gets no lane (or all have one). */
	for (; n < HOG_THREADS; n++) {
		REQUIRE(pthread_create(&th[n], NULL, hog_thread, c) == 0, "pthread_create");
		pthread_mutex_lock(&hog_mu);
		while (hog_started < n + 1)
			pthread_cond_wait(&hog_cv, &hog_mu);
		pthread_mutex_unlock(&hog_mu);
		if (hog_laned < n + 1) {
			n++;
			break;
		}
	}
	printf("  the hog: %d of %d threads got a lane\n", hog_laned, n);
	pf.fd = a->stop[0];
	pf.events = POLLIN;
	for (int first = 1;; first = 0) {
		hog_scribble(&pool->shm, pool->client);
		if (first)
			say(a->done[1], 'h');
		if (poll(&pf, 1, 0) != 0)
			break;
		sleep_us(100);
	}
	pthread_mutex_lock(&hog_mu);
	hog_stop = 1;
	pthread_cond_broadcast(&hog_cv);
	pthread_mutex_unlock(&hog_mu);
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	_exit(0);     /* its lanes and sheaves: the repair's */
}

/* ---- the good client's new threads --------------------------------------- */

struct good_thread {
	sheaf_cache_t *c;
	pthread_barrier_t *bar;
	int err;
	int64_t ms;
};

static void *good_thread(void *arg)
{
	struct good_thread *g = arg;
	int64_t t0 = now_ms();
	void *o = sheaf_alloc(g->c);

	g->err = o != NULL ? 0 : errno;
	g->ms = now_ms() - t0;
	/* All at once: each holds its lane until every one has one. */
	pthread_barrier_wait(g->bar);
	if (o != NULL)
		sheaf_free(g->c, o);
	sheaf_thread_exit();
	return NULL;
}

/* @n new threads of @c at once: each must get a lane and an object
 * within BOUND_MS. */
static void good_threads(sheaf_cache_t *c, int n, const char *label)
{
	pthread_t th[32];
	struct good_thread g[32];
	pthread_barrier_t bar;

	REQUIRE(n <= 32, "too many");
	pthread_barrier_init(&bar, NULL, (unsigned)n);
	for (int i = 0; i < n; i++) {
		g[i] = (struct good_thread){ .c = c, .bar = &bar };
		REQUIRE(pthread_create(&th[i], NULL, good_thread, &g[i]) == 0, "pthread_create");
	}
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&bar);
	for (int i = 0; i < n; i++) {
		REQUIRE(g[i].err == 0, "%s: thread %d: sheaf_alloc: %s", label, i,
			strerror(g[i].err));
		REQUIRE(g[i].ms < BOUND_MS, "%s: thread %d: %lld ms for its first object",
			label, i, (long long)g[i].ms);
	}
	printf("  %s: %d new threads got a lane and an object\n", label, n);
}

START_TEST(hog_beside_good)
{
	struct run *R = calloc(1, sizeof(*R));
	static struct pipes a;
	char err[256] = "";
	sheaf_pool_t *pool;
	sheaf_cache_t *c;
	pid_t hp;

	REQUIRE(R != NULL, "calloc");
	make_test_dir();
	notify_open(&R->n);
	fmt(R->d.sock, sizeof(R->d.sock), "%s/s.sock", test_dir);
	/* Children first: a process connected to the pool cannot fork one
	 * that connects, and one with threads (the drainer) one that starts
	 * threads (ThreadSanitizer refuses). */
	pipes_open(&a, R->d.sock, NOBODY);
	hp = fork_child(hog_main, &a);
	pipes_parent(&a);
	start(R, 0);
	say(a.go[1], 'g');
	hear(a.done[0], "the hog");

	pool = sheaf_connect(R->d.sock, "good", 0, err, sizeof(err));
	REQUIRE(pool != NULL, "connect: %s", err);
	c = mkcache(pool, "good", 64, 0, 0);
	good_threads(c, GOOD_THREADS, "beside the hog");
	REQUIRE(!file_contains(R->d.log, "revoked"), "a client was revoked for SHARED writes");

	restart(R);
	good_threads(c, CAP - 2, "adopted, beside the hog");
	REQUIRE(!file_contains(R->d.log, "revoked"), "a client was revoked for SHARED writes");

	close(a.stop[1]);
	reap_ok(hp, 30000, "the hog");
	/* No pool check: the bounds the hog wrote make never-taken lanes
	 * look used, so the counters are off (design.md 2.6: counters are
	 * shared memory); the pool's structure, revoke_offenders checks. */
	sheaf_disconnect(pool);
	finish(R);
	test_passed();
}
END_TEST

/* ---- revocation ------------------------------------------------------------ */

/*
 * On @pool's own connection, what libsheaf never sends: LaneGrant until
 * the reply says it holds its most, then once more.  Returns the errno of
 * the last request (EKEYREVOKED when sheafd revoked it).
 */
static int ask_past_cap(sheaf_pool_t *pool)
{
#ifdef SHEAF__V1__LANE_GRANT_REQUEST__INIT
	for (int i = 0; i < 64; i++) {
		Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
		Sheaf__V1__LaneGrantRequest lg = SHEAF__V1__LANE_GRANT_REQUEST__INIT;
		Sheaf__V1__Response *r = NULL;
		uint32_t held = 0, cap = 0;
		int rc;

		for (uint32_t l = 0; l < pool_lanes_used(&pool->shm); l++)
			lg.have += at_load_acquire(&pool->shm.lane_grant[l]) == pool->client + 1;
		rq.body_case = SHEAF__V1__REQUEST__BODY_LANE_GRANT;
		rq.lane_grant = &lg;
		rc = rpc_call(&pool->conn, &rq, &r, NULL, NULL, 0);
		if (rc != 0)
			return -rc;
		held = r->lane_grant->held;
		cap = r->lane_grant->cap;
		sheaf__v1__response__free_unpacked(r, NULL);
		REQUIRE(held <= cap && cap == CAP, "held %u, cap %u", held, cap);
	}
	REQUIRE(0, "64 LaneGrant requests past the cap, none refused");
#else
	(void)pool;
	REQUIRE(0, "this protocol has no LaneGrant request: lanes are not granted");
#endif
	return 0;
}

/* A libsheaf client holding sheaves of a cache of its own, then the
 * offence; it reports 'r' when revoked as expected. */
static int offender_main(void *arg)
{
	struct pipes *a = arg;
	sheaf_pool_t *pool;
	sheaf_cache_t *c;
	int rc;

	pipes_child(a);
	become(a->uid);
	hear(a->go[0], "the test");
	pool = child_connect(a->sock, "offender");
	c = mkcache(pool, a->uid == NOBODY ? "off1" : "off2", 256, 0, 0);
	for (int i = 0; i < 100; i++)
		REQUIRE(sheaf_alloc(c) != NULL, "alloc");
	rc = ask_past_cap(pool);
	REQUIRE(rc == EKEYREVOKED, "the request past the cap: %s", strerror(rc));
	/* Later requests: refused the same way. */
	REQUIRE(sheaf_cache_create(pool, "after", 64, NULL) == NULL && errno == EKEYREVOKED,
		"a request after the revocation: %s", strerror(errno));
	say(a->done[1], 'r');
	hear(a->go[0], "the test");     /* stay alive: its mappings stay */
	_exit(0);
}

/* A later client of a banned uid: its attach is refused. */
static int banned_main(void *arg)
{
	struct pipes *a = arg;
	char err[256] = "";
	sheaf_pool_t *pool;

	pipes_child(a);
	become(a->uid);
	for (;;) {
		if (hear(a->go[0], "the test") == 'q')
			_exit(0);
		pool = sheaf_connect(a->sock, "banned", 0, err, sizeof(err));
		REQUIRE(pool == NULL && errno == EKEYREVOKED, "attach of a banned uid: %s (%s)",
			pool ? "accepted" : strerror(errno), err);
		REQUIRE(strstr(err, "banned") != NULL, "no reason given: %s", err);
		say(a->done[1], 'b');
	}
}

/* The good client's objects, each filled with its index. */
static void fill(void **o, sheaf_cache_t *c)
{
	for (int i = 0; i < OBJS; i++) {
		o[i] = sheaf_alloc(c);
		REQUIRE(o[i] != NULL, "good alloc %d", i);
		memset(o[i], i & 0xff, 128);
	}
}

static void verify(void **o, sheaf_pool_t *pool, const char *label)
{
	char err[256] = "";

	for (int i = 0; i < OBJS; i++)
		for (int b = 0; b < 128; b++)
			REQUIRE(((unsigned char *)o[i])[b] == (i & 0xff), "%s: object %d changed",
				label, i);
	REQUIRE(sheaf_pool_check(pool, err, sizeof(err)) == 0, "%s: check: %s", label, err);
}

/* `sheafctl clients` lists a revoked client. */
static void shows_revoked(const char *sock, const char *label)
{
	char path[PATH_MAX], err[256] = "", *out;
	const char *argv[] = { sheafctl_bin(), "--socket", sock, "-o", "json", "clients", NULL };
	const char *msg;
	int st;

	fmt(path, sizeof(path), "%s/clients.json", test_dir);
	msg = run_proc(argv, &(struct spawn_opts){ .out = path }, 20000, &st, err, sizeof(err));
	REQUIRE(msg == NULL && exited_ok(st), "%s: sheafctl clients: %s", label,
		msg ? msg : "failed");
	out = read_file(path);
	REQUIRE(out != NULL, "%s: no output", label);
	REQUIRE(strstr(out, "\"revoked\":true") != NULL || strstr(out, "\"revoked\": true") != NULL,
		"%s: sheafctl clients shows no revoked client:\n%s", label, out);
	free(out);
}

START_TEST(revoke_offenders)
{
	struct run *R = calloc(1, sizeof(*R));
	static struct pipes o1, o2, b;
	static void *objs[OBJS];
	char err[256] = "";
	sheaf_pool_t *pool;
	sheaf_cache_t *c;
	pid_t p1, p2, pb;

	REQUIRE(R != NULL, "calloc");
	if (!as_root())
		SKIP("needs root to run the offenders as other uids (a ban of the test's "
		     "own uid would refuse the good client)");
	make_test_dir();
	notify_open(&R->n);
	fmt(R->d.sock, sizeof(R->d.sock), "%s/s.sock", test_dir);
	pipes_open(&o1, R->d.sock, NOBODY);
	p1 = fork_child(offender_main, &o1);
	pipes_parent(&o1);
	pipes_open(&o2, R->d.sock, NOBODY2);
	p2 = fork_child(offender_main, &o2);
	pipes_parent(&o2);
	pipes_open(&b, R->d.sock, NOBODY);
	pb = fork_child(banned_main, &b);
	pipes_parent(&b);
	start(R, 0);

	pool = sheaf_connect(R->d.sock, "good", 0, err, sizeof(err));
	REQUIRE(pool != NULL, "connect: %s", err);
	c = mkcache(pool, "good", 128, 0, 0);
	fill(objs, c);

	say(o1.go[1], 'g');
	hear(o1.done[0], "the first offender");
	REQUIRE(count_in_file(R->d.log, "revoked:") == 1, "not one log line of the revocation");
	shows_revoked(R->d.sock, "revoked");
	say(b.go[1], 'g');
	hear(b.done[0], "the banned client");
	verify(objs, pool, "after the revocation");
	good_threads(c, GOOD_THREADS, "after the revocation");

	restart(R);
	say(b.go[1], 'g');
	hear(b.done[0], "the banned client, adopted");
	shows_revoked(R->d.sock, "adopted");
	say(o2.go[1], 'g');
	hear(o2.done[0], "the second offender");
	REQUIRE(count_in_file(R->d.log, "revoked:") == 1,
		"not one log line of the revocation by the new sheafd");
	verify(objs, pool, "adopted, after the second revocation");
	good_threads(c, GOOD_THREADS, "adopted, after the second revocation");

	say(o1.go[1], 'q');
	say(o2.go[1], 'q');
	say(b.go[1], 'q');
	reap_ok(p1, 30000, "the first offender");
	reap_ok(p2, 30000, "the second offender");
	reap_ok(pb, 30000, "the banned client");
	for (int i = 0; i < OBJS; i++)
		REQUIRE(sheaf_free(c, objs[i]) == 0, "free %d", i);
	REQUIRE(sheaf_pool_check(pool, err, sizeof(err)) == 0, "check: %s", err);
	sheaf_disconnect(pool);
	finish(R);
	test_passed();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lane_grants");

	deploy_init("test_lane_grants");
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ADD_ALONE(s, hog_beside_good, 120);
	ADD_ALONE(s, revoke_offenders, 120);
	return run_suite(s);
}
