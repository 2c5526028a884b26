/*
 * test_doorbell.c - nothing a client writes to a node's doorbell line stops
 * the node's worker from serving the others for longer than a bound
 * (docs/design.md, "What sheafd checks": the doorbell row).
 *
 * The words a client can write there: the doorbell (a futex word clients
 * bump) and the worker's `sleeping` flag, by which a client decides whether
 * to wake it.  Against a real sheafd, a hostile client (uid nobody when the
 * test runs as root) does, from several threads, for the whole test:
 *   - clear: `sleeping` stored 0 in a loop, so that no client wakes a
 *     worker that went to sleep;
 *   - hold: the doorbell stored back to one value, so that bumps vanish;
 *   - ring: the doorbell bumped and woken in a loop (a worker kept passing).
 * Meanwhile a good client of another cache lets the worker go idle, then
 * takes more objects than the barn stocks, in rounds: every allocation
 * must succeed and none may wait BOUND_MS or more.  Then the same after a
 * SIGKILL of sheafd and an adoptive restart.
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
#include "shm/futex.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_deploy.h"
#include "tests/helpers/util_notify.h"
#include "tests/helpers/util_pool.h"
#include "tests/helpers/util_proc.h"

#define BOUND_MS 1000
#define NOBODY   65534u
#define ROUNDS   8
#define PER_ROUND 3000          /* 4 KiB objects: more than the barn keeps */

struct run {
	struct notify n;
	struct svc d;
	struct notify_drainer drainer;
};

static void start(struct run *R, int adopt)
{
	static const char *const flags[] = {
		"--nodes", "1", "--size", "256M", "--log-level", "debug",
		"--allow-uid", "0", "--allow-uid", "65534", NULL,
	};
	R->d.flags = flags;
	svc_start(&R->d, &R->n, -1, adopt, 0);
	notify_drainer_start(&R->drainer, &R->n);
	if (geteuid() == 0) {
		REQUIRE(chmod(test_dir, 0711) == 0, "chmod: %s", strerror(errno));
		REQUIRE(chown(R->d.sock, 0, NOBODY) == 0 && chmod(R->d.sock, 0666) == 0,
			"chown: %s", strerror(errno));
	}
}

struct bell_arg {
	const char *sock;
	int loud;                    /* ring in a loop; else clear and hold */
	int ready[2];
	int stop[2];
	int go[2];
};

static struct shm_node *bell_node;
static _Atomic int bell_stop;

static void *clearer(void *arg)
{
	(void)arg;
	while (!atomic_load(&bell_stop))
		at_store_relaxed(&bell_node->sleeping, 0);
	return NULL;
}

static void *holder(void *arg)
{
	uint32_t v = at_load_relaxed(&bell_node->doorbell);

	(void)arg;
	while (!atomic_load(&bell_stop))
		at_store_relaxed(&bell_node->doorbell, v);
	return NULL;
}

static void *ringer(void *arg)
{
	(void)arg;
	while (!atomic_load(&bell_stop)) {
		at_fetch_add_relaxed(&bell_node->doorbell, 1);
		futex_wake(&bell_node->doorbell, 1);
		sleep_us(50);
	}
	return NULL;
}

static int bell_main(void *arg)
{
	struct bell_arg *a = arg;
	void *(*quiet[])(void *) = { clearer, clearer, holder };
	void *(*loud[])(void *) = { ringer, ringer, ringer };
	pthread_t th[3];
	sheaf_pool_t *pool;
	char g = 1;

	close(a->ready[0]);
	close(a->stop[1]);
	close(a->go[1]);
	(void)read_full(a->go[0], &g, 1, 60000);      /* sheafd is up */
	if (geteuid() == 0) {
		REQUIRE(setgroups(0, NULL) == 0 && setresgid(NOBODY, NOBODY, NOBODY) == 0 &&
			setresuid(NOBODY, NOBODY, NOBODY) == 0, "drop: %s", strerror(errno));
		prctl(PR_SET_DUMPABLE, 1);
	}
	pool = child_connect(a->sock, "bell");
	bell_node = &pool->shm.node[0];
	for (int i = 0; i < 3; i++)
		REQUIRE(pthread_create(&th[i], NULL, a->loud ? loud[i] : quiet[i], NULL) == 0,
			"pthread_create");
	REQUIRE(write(a->ready[1], &g, 1) == 1, "ready");
	(void)read_full(a->stop[0], &g, 1, 170000);     /* EOF: the parent's word */
	atomic_store(&bell_stop, 1);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	_exit(0);
}

/* ROUNDS rounds: the worker left idle, then PER_ROUND objects taken and
 * given back, none waiting BOUND_MS. */
static void rounds(sheaf_cache_t *c, const char *label)
{
	static void *o[PER_ROUND];
	int64_t worst = 0;

	for (int r = 0; r < ROUNDS; r++) {
		sleep_ms(30);           /* the worker goes to sleep */
		for (int i = 0; i < PER_ROUND; i++) {
			int64_t t0 = now_ms(), dt;

			o[i] = sheaf_alloc(c);
			dt = now_ms() - t0;
			REQUIRE(o[i] != NULL, "%s: round %d, alloc %d: %s after %lld ms", label, r,
				i, strerror(errno), (long long)dt);
			REQUIRE(dt < BOUND_MS, "%s: round %d, alloc %d waited %lld ms", label, r, i,
				(long long)dt);
			if (dt > worst)
				worst = dt;
		}
		for (int i = 0; i < PER_ROUND; i++)
			REQUIRE(sheaf_free(c, o[i]) == 0, "%s: free", label);
	}
	printf("  %s: %d allocations, the longest %lld ms\n", label, ROUNDS * PER_ROUND,
	       (long long)worst);
}

static void scribbled(int loud)
{
	struct run *R = calloc(1, sizeof(*R));
	static struct bell_arg a;
	char err[256] = "", g = 1;
	sheaf_pool_t *pool;
	sheaf_cache_t *c;
	pid_t bp;

	REQUIRE(R != NULL, "calloc");
	make_test_dir();
	notify_open(&R->n);
	fmt(R->d.sock, sizeof(R->d.sock), "%s/s.sock", test_dir);
	a.sock = R->d.sock;
	a.loud = loud;
	/* O_CLOEXEC: a restarted sheafd must not hold the stop pipe open.
	 * The child is forked before this process has threads (the
	 * drainer): it starts threads of its own (ThreadSanitizer). */
	REQUIRE(pipe2(a.ready, O_CLOEXEC) == 0 && pipe2(a.stop, O_CLOEXEC) == 0 &&
		pipe2(a.go, O_CLOEXEC) == 0, "pipe");
	bp = fork_child(bell_main, &a);
	close(a.ready[1]);
	close(a.stop[0]);
	close(a.go[0]);
	start(R, 0);
	REQUIRE(write(a.go[1], &g, 1) == 1, "go");
	REQUIRE(read_full(a.ready[0], &g, 1, 30000) == 0, "the bell scribbler did not start");

	pool = sheaf_connect(R->d.sock, "good", 0, err, sizeof(err));
	REQUIRE(pool != NULL, "connect: %s", err);
	c = mkcache(pool, "good", 4096, 0, 0);
	rounds(c, "doorbell scribbled");

	notify_drainer_stop(&R->drainer);
	svc_stop(&R->d, &R->n, SIGKILL);
	start(R, 1);
	REQUIRE(file_contains(R->d.log, "adopted the pool from the fd store"),
		"the new sheafd did not adopt the pool");
	rounds(c, "adopted, doorbell scribbled");

	close(a.stop[1]);
	reap_ok(bp, 30000, "the bell scribbler");
	REQUIRE(sheaf_pool_check(pool, err, sizeof(err)) == 0, "check: %s", err);
	sheaf_disconnect(pool);
	notify_drainer_stop(&R->drainer);
	svc_stop(&R->d, &R->n, SIGTERM);
	notify_close(&R->n);
	test_passed();
}

START_TEST(cleared_and_held)
{
	scribbled(0);
}
END_TEST

START_TEST(rung)
{
	scribbled(1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("doorbell");

	deploy_init("test_doorbell");
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ADD_ALONE(s, cleared_and_held, 180);
	ADD_ALONE(s, rung, 180);
	return run_suite(s);
}
