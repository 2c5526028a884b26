/*
 * test_grace_words.c - nothing a client writes to the grace-period words
 * stops another client's grace periods for longer than a bound
 * (docs/design.md, "Deferred frees" and "What sheafd checks").
 *
 * The words a client can write: shm_rcu.req (the request), and the lanes'
 * rcu_ctr.  gp_seq, gp_done and gp_released are META (read-only to
 * clients: test_readonly), and the waits read only those.  Each case
 * scribbles, then requires sheaf_synchronize and sheaf_barrier (with a
 * deferred object to release) to succeed within BOUND_MS each:
 *   - req set to ~0 once, on a local pool;
 *   - req held at one value by a thread storing it in a loop;
 *   - a request whose change the engine never saw (the beat ends it);
 *   - rcu_ctr left odd with epoch 0 in the engine's own lanes, and in a
 *     freed lane, before and after a thread takes it;
 *   - all of them by a client process of a real sheafd, kept up across a
 *     SIGKILL and an adoptive restart (the fd store's memfds), checked by
 *     another client before and after.
 * A reader that stays in its section (a lane of a live client) holds
 * grace periods back by design: test_deferred.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <unistd.h>

#include "shm/engine/clients.h"
#include "client/sheaf.h"
#include "client/internal.h"
#include "shm/grace_bell.h"
#include "shm/lanes.h"
#include "shm/bounds.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_deploy.h"
#include "tests/helpers/util_notify.h"
#include "tests/helpers/util_pool.h"
#include "tests/helpers/util_proc.h"

#define BOUND_MS 1000

/* sheaf_synchronize, then a deferred free of @c and sheaf_barrier, each
 * within BOUND_MS. */
static void grace_prompt(sheaf_pool_t *pool, sheaf_cache_t *c, const char *label)
{
	for (int i = 0; i < 3; i++) {
		int64_t t0 = now_ms();
		void *o = xalloc(c);
		int rc = sheaf_synchronize(pool, BOUND_MS);

		REQUIRE(rc == 0, "%s: sheaf_synchronize: %s after %lld ms", label,
			strerror(-rc), (long long)(now_ms() - t0));
		REQUIRE(sheaf_free_deferred(c, o) == 0, "%s: sheaf_free_deferred", label);
		t0 = now_ms();
		rc = sheaf_barrier(pool, BOUND_MS);
		REQUIRE(rc == 0, "%s: sheaf_barrier: %s after %lld ms", label,
			strerror(-rc), (long long)(now_ms() - t0));
	}
}

/* rcu_ctr odd, epoch 0, in every lane below the mark that no client
 * holds (the engine's, free ones): what a scribbler can leave there. */
static void spoil_unheld_lanes(struct shm_pool *sp)
{
	for (uint32_t l = 0, used = pool_lanes_used(sp); l < used; l++) {
		uint32_t c = pool_lane_holder(sp, &sp->lanes[l]);

		if (c == OWNER_ENGINE || c == LANE_FREE)
			at_store_relaxed(&sp->lanes[l].rcu_ctr, 1);
	}
}

START_TEST(req_all_ones)
{
	sheaf_pool_t *pool = pool_small(1);
	sheaf_cache_t *c = mkcache(pool, "g", 64, 0, 0);

	grace_prompt(pool, c, "before");
	at_store_relaxed(&pool->shm.rcu->req, ~0ull);
	grace_prompt(pool, c, "req = ~0");
	sheaf_pool_destroy(pool);
}
END_TEST

struct holder {
	uint64_t *word;
	uint64_t val;
	_Atomic int stop;
};

static void *hold_main(void *arg)
{
	struct holder *h = arg;

	while (!at_load_relaxed(&h->stop))
		at_store_relaxed((_Atomic uint64_t *)h->word, h->val);
	return NULL;
}

START_TEST(req_held)
{
	sheaf_pool_t *pool = pool_small(1);
	sheaf_cache_t *c = mkcache(pool, "g", 64, 0, 0);
	static struct holder h;
	pthread_t t;

	grace_prompt(pool, c, "before");
	h.word = (uint64_t *)(void *)&pool->shm.rcu->req;
	h.val = at_load_relaxed(&pool->shm.rcu->req);
	REQUIRE(pthread_create(&t, NULL, hold_main, &h) == 0, "thread");
	grace_prompt(pool, c, "req held at its value");
	at_store_relaxed(&h.stop, 1);
	pthread_join(t, NULL);
	sheaf_pool_destroy(pool);
}
END_TEST

/*
 * A request the engine never sees change, as when a scribbler writes the
 * word back to the value the engine last read before it looks: a waiter
 * that reads gp_seq, rings and waits, leaving req as it is (the engine's
 * beat must end its wait).
 */
START_TEST(req_hidden)
{
	sheaf_pool_t *pool = pool_small(1);
	sheaf_cache_t *c = mkcache(pool, "g", 64, 0, 0);
	struct shm_pool *sp = &pool->shm;
	uint64_t req, target;
	int64_t t0;

	grace_prompt(pool, c, "before");
	sleep_ms(300);                 /* the engine has read the last request */
	req = at_load_relaxed(&sp->rcu->req);
	at_fence_seqcst();
	target = at_load_seqcst(&sp->hdr->gp_seq) + 1;
	grace_bell_ring(sp);
	t0 = now_ms();
	while (at_load_acquire(&sp->hdr->gp_done) < target && now_ms() - t0 < BOUND_MS)
		sleep_ms(1);
	REQUIRE(at_load_acquire(&sp->hdr->gp_done) >= target,
		"a hidden request: grace period %llu not done after %d ms",
		(unsigned long long)target, BOUND_MS);
	REQUIRE(at_load_relaxed(&sp->rcu->req) == req, "req moved");
	sheaf_pool_destroy(pool);
}
END_TEST

START_TEST(engine_lane_ctr)
{
	sheaf_pool_t *pool = pool_small(1);
	sheaf_cache_t *c = mkcache(pool, "g", 64, 0, 0);

	grace_prompt(pool, c, "before");
	spoil_unheld_lanes(&pool->shm);
	grace_prompt(pool, c, "engine lanes' rcu_ctr odd");
	sheaf_pool_destroy(pool);
}
END_TEST

START_TEST(free_lane_ctr)
{
	sheaf_pool_t *pool = pool_small(1);
	sheaf_cache_t *c = mkcache(pool, "g", 64, 0, 0);
	struct shm_lane *l;

	grace_prompt(pool, c, "before");
	/* A lane taken and freed, as the repair frees a dead client's. */
	l = client_lane_acquire(&pool->shm, pool->client, 0);
	REQUIRE(l != NULL, "lane_acquire");
	client_lane_free(&pool->shm, l);
	at_store_relaxed(&l->rcu_ctr, 1);
	grace_prompt(pool, c, "a free lane's rcu_ctr odd");
	/* Taken again by a thread in no section: the stale word goes. */
	at_store_relaxed(&l->rcu_ctr, 1);
	REQUIRE(client_lane_acquire(&pool->shm, pool->client, 0) == l, "the free lane not taken");
	grace_prompt(pool, c, "a spoiled free lane taken");
	client_lane_free(&pool->shm, l);
	sheaf_pool_destroy(pool);
}
END_TEST

/* ---- against sheafd, across an adoptive restart -------------------------- */

struct run {
	struct notify n;
	struct svc d;
	struct notify_drainer drainer;
};

static pthread_barrier_t pass_bar;

static void *pass_thread(void *arg)
{
	sheaf_cache_t *c = arg;

	sheaf_free(c, xalloc(c));
	pthread_barrier_wait(&pass_bar);     /* all lanes in use at once */
	sheaf_thread_exit();
	return NULL;
}

/* A client whose threads take PASS_THREADS lanes at once, and leaves: its
 * grants are taken back, more lanes than the next client's first grant. */
#define PASS_THREADS 8
static int passer(void *arg)
{
	sheaf_pool_t *pool = child_connect(arg, "passer");
	sheaf_cache_t *c = mkcache(pool, "p", 64, 0, 0);
	pthread_t th[PASS_THREADS];

	pthread_barrier_init(&pass_bar, NULL, PASS_THREADS);
	for (int i = 0; i < PASS_THREADS; i++)
		REQUIRE(pthread_create(&th[i], NULL, pass_thread, c) == 0, "pthread_create");
	for (int i = 0; i < PASS_THREADS; i++)
		pthread_join(th[i], NULL);
	sheaf_disconnect(pool);
	return 0;
}

static int free_lanes(const struct shm_pool *sp)
{
	int n = 0;

	for (uint32_t l = 0, used = pool_lanes_used(sp); l < used; l++)
		n += pool_lane_holder(sp, &sp->lanes[l]) == LANE_FREE;
	return n;
}

struct scrib_arg {
	const char *sock;
	int ready[2];
	int stop[2];
};

/* The scribbler: once the passer's lane is free, req held at ~0 and the
 * unheld lanes' rcu_ctr odd, every 100 us, until its stop pipe closes. */
static int scribbler(void *arg)
{
	struct scrib_arg *a = arg;
	sheaf_pool_t *pool = child_connect(a->sock, "scribbler");
	struct shm_pool *sp = &pool->shm;
	struct pollfd pf = { a->stop[0], POLLIN, 0 };
	int64_t end = now_ms() + 10000;
	char g = 1;

	close(a->stop[1]);
	close(a->ready[0]);
	while (free_lanes(sp) == 0 && now_ms() < end)
		sleep_ms(10);
	REQUIRE(free_lanes(sp) > 0, "the passer's lane was not freed");
	for (int first = 1;; first = 0) {
		at_store_relaxed(&sp->rcu->req, ~0ull);
		spoil_unheld_lanes(sp);
		if (first)
			REQUIRE(write(a->ready[1], &g, 1) == 1, "ready");
		if (poll(&pf, 1, 0) != 0)
			break;          /* EOF: the parent's word */
		sleep_us(100);
	}
	return 0;
}

START_TEST(daemon_scribbler_adopted)
{
	struct run *R = calloc(1, sizeof(*R));
	static struct scrib_arg a;
	char err[256] = "", g;
	sheaf_pool_t *pool;
	sheaf_cache_t *c;
	pid_t pp, sp;

	REQUIRE(R != NULL, "calloc");
	make_test_dir();
	notify_open(&R->n);
	fmt(R->d.sock, sizeof(R->d.sock), "%s/s.sock", test_dir);
	svc_start(&R->d, &R->n, -1, 0, 0);
	REQUIRE(R->n.store_fd >= 0 && R->n.store_shared_fd >= 0, "no memfds in the fd store");
	/* Children first: a process connected to the pool cannot fork
	 * one that connects; and the passer starts threads, which a child
	 * of a process with threads (the drainer) may not under
	 * ThreadSanitizer. */
	pp = fork_child(passer, R->d.sock);
	reap_ok(pp, 30000, "the passer");
	notify_drainer_start(&R->drainer, &R->n);
	a.sock = R->d.sock;
	/* O_CLOEXEC: the restarted sheafd must not hold the stop pipe open. */
	REQUIRE(pipe2(a.ready, O_CLOEXEC) == 0 && pipe2(a.stop, O_CLOEXEC) == 0, "pipe");
	sp = fork_child(scribbler, &a);
	close(a.stop[0]);
	close(a.ready[1]);
	REQUIRE(read_full(a.ready[0], &g, 1, 30000) == 0, "the scribbler did not start");

	pool = sheaf_connect(R->d.sock, "good", 0, err, sizeof(err));
	REQUIRE(pool != NULL, "connect: %s", err);
	c = mkcache(pool, "g", 64, 0, 0);
	grace_prompt(pool, c, "sheafd, scribbled");

	notify_drainer_stop(&R->drainer);
	svc_stop(&R->d, &R->n, SIGKILL);
	svc_start(&R->d, &R->n, -1, 1, 0);
	notify_drainer_start(&R->drainer, &R->n);
	REQUIRE(file_contains(R->d.log, "adopted the pool from the fd store"),
		"the new sheafd did not adopt the pool");
	sleep_ms(50);
	grace_prompt(pool, c, "adopted, scribbled");

	close(a.stop[1]);
	reap_ok(sp, 30000, "the scribbler");
	sheaf_disconnect(pool);
	notify_drainer_stop(&R->drainer);
	svc_stop(&R->d, &R->n, SIGTERM);
	notify_close(&R->n);
	test_passed();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("grace_words");
	TCase *tc = tcase_create("local");

	deploy_init("test_grace_words");
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, req_all_ones);
	tcase_add_test(tc, req_held);
	tcase_add_test(tc, req_hidden);
	tcase_add_test(tc, engine_lane_ctr);
	tcase_add_test(tc, free_lane_ctr);
	suite_add_tcase(s, tc);
	ADD_ALONE(s, daemon_scribbler_adopted, 120);
	return run_suite(s);
}
