/*
 * test_deferred.c - deferred frees and read sections (sheaf.h:
 * sheaf_free_deferred, sheaf_read_lock/unlock, sheaf_quiescent,
 * sheaf_synchronize, sheaf_barrier; shm/engine/grace.c): the API on a local pool,
 * a reader holding grace periods back, and with a real sheafd: a stopped
 * reader (reported by sheafctl), a reader killed inside its section, a
 * writer killed with deferred objects pending.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "client/sheaf.h"
#include "client/internal.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_pool.h"
#include "tests/helpers/util_proc.h"
#include "tests/helpers/util_rpc.h"

#define NOBJ 1000

static struct sheaf_pool_config small = { .size = 64u << 20, .nodes = 1 };

START_TEST(api_local)
{
	sheaf_pool_t *p = pool_new(&small);
	sheaf_cache_t *c = mkcache(p, "rcu", 64, SHEAF_CAPACITY_DEFAULT, 0);
	void *o[NOBJ];
	int x = 0;

	ck_assert_int_eq(sheaf_read_unlock(p), -EINVAL);
	ck_assert_int_eq(sheaf_read_lock(p), 0);
	ck_assert_int_eq(sheaf_read_lock(p), 0);          /* nested */
	ck_assert_int_eq(sheaf_quiescent(p), 0);
	ck_assert_int_eq(sheaf_synchronize(p, 100), -EDEADLK);
	ck_assert_int_eq(sheaf_barrier(p, 100), -EDEADLK);
	ck_assert_int_eq(sheaf_read_unlock(p), 0);
	ck_assert_int_eq(sheaf_read_unlock(p), 0);
	ck_assert_int_eq(sheaf_read_unlock(p), -EINVAL);
	ck_assert_int_eq(sheaf_quiescent(p), 0);          /* outside: no-op */
	ck_assert_int_eq(sheaf_synchronize(p, 5000), 0);

	for (int i = 0; i < NOBJ; i++)
		o[i] = xalloc(c);
	ck_assert_int_eq(sheaf_free_deferred(c, NULL), 0);
	ck_assert_int_eq(sheaf_free_deferred(c, &x), -EFAULT);
	for (int i = 0; i < NOBJ; i++)
		ck_assert_int_eq(sheaf_free_deferred(c, o[i]), 0);
	/* Counted as the thread's deferred sheaves are handed over (the
	 * last, partly filled one by the barrier): until then they are in
	 * use. */
	ck_assert_uint_le(stat_count(c, -1, "free_rcu_sheaf"), NOBJ);
	ck_assert_uint_eq(stat_count(c, -1, "free_rcu_sheaf") + cache_stats_of(c, -1).in_use, NOBJ);
	ck_assert_int_eq(sheaf_barrier(p, 5000), 0);
	ck_assert_uint_eq(stat_count(c, -1, "free_rcu_sheaf"), NOBJ);
	ck_assert_uint_eq(cache_stats_of(c, -1).in_use, 0);
	ck_assert_uint_eq(stat_count(c, -1, "rcu_released"), NOBJ);
	ck_assert_uint_eq(stat_count(c, -1, "rcu_waiting"), 0);
	ck_assert_uint_eq(stat_count(c, -1, "free_rcu_sheaf_fail"), 0);
	require_pool_ok(p);
	/* Objects come back after their grace period. */
	for (int i = 0; i < NOBJ; i++)
		o[i] = xalloc(c);
	for (int i = 0; i < NOBJ; i++)
		ck_assert_int_eq(sheaf_free(c, o[i]), 0);
	sheaf_thread_exit();
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/*
 * sheaf.h's inline read sections follow the thread's lane: across pools
 * (alternating), nested, after sheaf_thread_exit, and after a pool is
 * destroyed and another made (perhaps at the same address): each section
 * lands in the right pool (a section of the old one would leave the new
 * one's grace periods free and the old lane's word set).
 */
/* A thread whose inline state names a pool another thread destroys. */
struct stale_arg {
	sheaf_pool_t *pool;          /* written before a step */
	int step;                    /* __atomic: the threads' handshake */
	int rc[4];
};

static void step_to(struct stale_arg *s, int v)
{
	__atomic_store_n(&s->step, v, __ATOMIC_RELEASE);
}

static void step_wait(struct stale_arg *s, int v)
{
	while (__atomic_load_n(&s->step, __ATOMIC_ACQUIRE) != v)
		sleep_ms(1);
}

static void *stale_main(void *arg)
{
	struct stale_arg *s = arg;

	s->rc[0] = sheaf_read_lock(s->pool);
	s->rc[1] = sheaf_read_unlock(s->pool);
	step_to(s, 1);
	step_wait(s, 2);
	/* The pool it last used is gone; s->pool is a new one. */
	s->rc[2] = sheaf_read_lock(s->pool);
	step_to(s, 3);
	step_wait(s, 4);
	s->rc[3] = sheaf_read_unlock(s->pool);
	sheaf_thread_exit();
	return NULL;
}

START_TEST(inline_sections_follow_lane)
{
	struct stale_arg st = { 0 };
	pthread_t thr;
	sheaf_pool_t *a = pool_new(&small), *b = pool_new(&small);

	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(sheaf_read_lock(a), 0);
		ck_assert_int_eq(sheaf_read_lock(b), 0);
		ck_assert_int_eq(sheaf_read_lock(a), 0);
		ck_assert_int_eq(sheaf_synchronize(a, 100), -EDEADLK);
		ck_assert_int_eq(sheaf_read_unlock(a), 0);
		ck_assert_int_eq(sheaf_synchronize(a, 100), -EDEADLK);
		ck_assert_int_eq(sheaf_read_unlock(a), 0);
		ck_assert_int_eq(sheaf_synchronize(a, 5000), 0);
		ck_assert_int_eq(sheaf_synchronize(b, 100), -EDEADLK);
		ck_assert_int_eq(sheaf_read_unlock(b), 0);
		ck_assert_int_eq(sheaf_read_unlock(b), -EINVAL);
		ck_assert_int_eq(sheaf_synchronize(b, 5000), 0);
	}
	ck_assert_int_eq(sheaf_read_lock(a), 0);
	sheaf_thread_exit();                          /* ends the section */
	ck_assert_int_eq(sheaf_read_unlock(a), -EINVAL);
	ck_assert_int_eq(sheaf_synchronize(a, 5000), 0);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(sheaf_read_lock(a), 0);
		ck_assert_int_eq(sheaf_read_unlock(a), 0);
		sheaf_pool_destroy(a);
		a = pool_new(&small);
		ck_assert_int_eq(sheaf_read_unlock(a), -EINVAL);
		ck_assert_int_eq(sheaf_read_lock(a), 0);
		ck_assert_int_eq(sheaf_synchronize(a, 100), -EDEADLK);
		ck_assert_int_eq(sheaf_read_unlock(a), 0);
		ck_assert_int_eq(sheaf_synchronize(a, 5000), 0);
	}
	/* Another thread's state of a destroyed pool is never used for a
	 * new pool (at the same address or not). */
	st.pool = a;
	ck_assert_int_eq(pthread_create(&thr, NULL, stale_main, &st), 0);
	step_wait(&st, 1);
	sheaf_pool_destroy(a);
	a = pool_new(&small);
	st.pool = a;
	step_to(&st, 2);
	step_wait(&st, 3);
	ck_assert_int_eq(sheaf_synchronize(a, 200), -ETIMEDOUT);   /* its section */
	step_to(&st, 4);
	pthread_join(thr, NULL);
	ck_assert_int_eq(st.rc[0], 0);
	ck_assert_int_eq(st.rc[1], 0);
	ck_assert_int_eq(st.rc[2], 0);
	ck_assert_int_eq(st.rc[3], 0);
	ck_assert_int_eq(sheaf_synchronize(a, 5000), 0);
	sheaf_thread_exit();
	sheaf_pool_destroy(a);
	sheaf_pool_destroy(b);
}
END_TEST

/* A debug cache defers frees as any cache, and refuses a double free
 * whichever of the two frees is the deferred one; an owned cache refuses
 * deferred frees. */
START_TEST(debug_cache_deferred)
{
	sheaf_pool_t *p = pool_new(&small);
	sheaf_cache_t *c = mkcache(p, "dbg", 64, SHEAF_CAPACITY_DEFAULT, SHEAF_CACHE_DEBUG);
	sheaf_cache_t *own = mkcache(p, "own", 64, SHEAF_CAPACITY_DEFAULT, SHEAF_CACHE_OWNED);
	void *o = xalloc(c), *q = xalloc(c), *w = xalloc(own);

	ck_assert_int_eq(sheaf_free_deferred(c, o), 0);
	ck_assert_int_eq(sheaf_free_deferred(c, o), -EALREADY);
	ck_assert_int_eq(sheaf_free(c, o), -EALREADY);
	ck_assert_int_eq(sheaf_free(c, q), 0);
	ck_assert_int_eq(sheaf_free_deferred(c, q), -EALREADY);
	ck_assert_int_eq(sheaf_free_deferred(own, w), -EOPNOTSUPP);
	ck_assert_int_eq(sheaf_free(own, w), 0);
	ck_assert_int_eq(sheaf_synchronize(p, 5000), 0);
	sheaf_thread_exit();
	ck_assert_uint_eq(cache_stats_of(c, -1).in_use, 0);
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/* A reader thread of the same process holding a section open. */
struct holder {
	sheaf_pool_t *p;
	int in, out;                 /* __atomic: the threads' handshake */
};

static void *hold_main(void *arg)
{
	struct holder *h = arg;

	if (sheaf_read_lock(h->p) != 0)
		return NULL;
	__atomic_store_n(&h->in, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&h->out, __ATOMIC_ACQUIRE))
		sleep_ms(1);
	sheaf_read_unlock(h->p);
	sheaf_thread_exit();
	return NULL;
}

START_TEST(reader_holds_grace)
{
	sheaf_pool_t *p = pool_new(&small);
	sheaf_cache_t *c = mkcache(p, "held", 64, 16, 0);
	struct holder h = { .p = p };
	void *o[64];
	pthread_t thr;
	int64_t t0;

	ck_assert_int_eq(pthread_create(&thr, NULL, hold_main, &h), 0);
	while (!__atomic_load_n(&h.in, __ATOMIC_ACQUIRE))
		sleep_ms(1);
	for (int i = 0; i < 64; i++)
		o[i] = xalloc(c);
	for (int i = 0; i < 64; i++) {
		memset(o[i], 0xab, 64);
		ck_assert_int_eq(sheaf_free_deferred(c, o[i]), 0);
	}
	t0 = now_ms();
	ck_assert_int_eq(sheaf_synchronize(p, 200), -ETIMEDOUT);
	ck_assert_int_eq(sheaf_barrier(p, 200), -ETIMEDOUT);
	ck_assert_int_ge(now_ms() - t0, 380);
	/* None of them reused meanwhile: allocate everything the barn has. */
	ck_assert_uint_eq(stat_count(c, -1, "rcu_released"), 0);
	for (int i = 0; i < 64; i++)
		ck_assert_msg(((unsigned char *)o[i])[7] == 0xab, "object %d reused early", i);
	__atomic_store_n(&h.out, 1, __ATOMIC_RELEASE);
	pthread_join(thr, NULL);
	ck_assert_int_eq(sheaf_barrier(p, 5000), 0);
	ck_assert_uint_eq(stat_count(c, -1, "rcu_released"), 64);
	sheaf_thread_exit();
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/* ---- with sheafd ---------------------------------------------------------- */

struct carg {
	const char *sock;
	int fd;                      /* write end: "ready" */
	int what;                    /* 0: reader; 1: writer; 2: writer
					dead before its first push */
	sheaf_pool_t *inherited;     /* the parent's pool: released first */
};

static int child_main(void *arg)
{
	struct carg *a = arg;
	sheaf_pool_t *p;
	char ok = 'r';

	sheaf_disconnect(a->inherited);          /* a fork() child's duty */
	p = child_connect(a->sock, a->what ? "writer" : "reader");

	if (a->what == 0) {
		if (sheaf_read_lock(p) != 0)
			return 2;
	} else if (a->what == 2) {
		/* As if killed between taking a deferred sheaf and its first
		 * push (client/deferred.c, deferred_slow_in): push one object
		 * and take it off again (size 0; the object is this client's
		 * leak, in use by the walk and by the counters alike). */
		sheaf_cache_t *c = sheaf_cache_open(p, "w");
		struct shm_pool *sp = &p->shm;
		void *o = c != NULL ? sheaf_alloc(c) : NULL;
		int found = 0;

		if (o == NULL || sheaf_free_deferred(c, o) != 0)
			return 3;
		for (uint32_t s = 0; s < sp->sheaf_count; s++) {
			struct shm_sheaf *sh = pool_sheaf(sp, s);

			if (at_load_relaxed(&sp->owners[s]) == p->client &&
			    (sh->flags & SHEAF_F_DEFERRED) && sheaf_size(sh) == 1) {
				sheaf_set_size(sh, 0);
				found++;
			}
		}
		if (found != 1)
			return 4;
	} else {
		sheaf_cache_t *c = sheaf_cache_open(p, "w");
		if (c == NULL)
			return 3;
		for (int i = 0; i < 100; i++) {
			void *o = sheaf_alloc(c);
			if (o == NULL || sheaf_free_deferred(c, o) != 0)
				return 4;
		}
	}
	if (write_full(a->fd, &ok, 1) != 0)
		return 5;
	for (;;)
		pause();
}

static pid_t start_child(struct dmn *d, sheaf_pool_t *inherited, int what)
{
	int fds[2];
	struct carg a;
	char ok;
	pid_t pid;

	ck_assert_int_eq(pipe(fds), 0);
	a.sock = d->sock;
	a.fd = fds[1];
	a.what = what;
	a.inherited = inherited;
	pid = fork_child(child_main, &a);
	close(fds[1]);
	ck_assert_msg(read_full(fds[0], &ok, 1, 10000) == 0, "child not ready");
	close(fds[0]);
	return pid;
}

/* sheafctl info's output. */
static char *ctl_info(struct dmn *d)
{
	char cmd[512];
	static char buf[8192];
	FILE *f;
	size_t n;

	snprintf(cmd, sizeof(cmd), "%s -s %s info", sheafctl_bin(), d->sock);
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	pclose(f);
	return buf;
}

START_TEST(stopped_reader_reported)
{
	struct dmn d;
	sheaf_pool_t *p;
	char err[256], want[64], *info;
	pid_t r;

	dmn_init(&d);
	dmn_start(&d, NULL);
	p = sheaf_connect(d.sock, "main", 0, err, sizeof(err));
	ck_assert_msg(p != NULL, "connect: %s", err);
	r = start_child(&d, p, 0);
	ck_assert_int_eq(kill(r, SIGSTOP), 0);
	ck_assert_int_eq(sheaf_synchronize(p, 300), -ETIMEDOUT);
	info = ctl_info(&d);
	snprintf(want, sizeof(want), "pid %d for ", (int)r);
	ck_assert_msg(strstr(info, "gp_blocked_by") != NULL && strstr(info, want) != NULL,
		      "sheafctl info does not name the stopped reader %d:\n%s", (int)r, info);
	printf("  stopped reader reported:\n%s", strstr(info, "grace_periods"));
	ck_assert_int_eq(kill(r, SIGCONT), 0);
	ck_assert_int_eq(sheaf_synchronize(p, 300), -ETIMEDOUT);   /* still inside */
	/* Killed inside its section: sheafd repairs it, grace periods go on. */
	ck_assert_int_eq(kill(r, SIGKILL), 0);
	waitpid(r, NULL, 0);
	ck_assert_int_eq(sheaf_synchronize(p, 10000), 0);
	info = ctl_info(&d);
	ck_assert_msg(strstr(info, "gp_blocked_by") == NULL, "still blocked:\n%s", info);
	sheaf_disconnect(p);
	dmn_stop(&d, 5000);
	dmn_cleanup(&d);
}
END_TEST

/* A sheafd, a connection to it and the writers' cache "w". */
static sheaf_pool_t *writer_world(struct dmn *d, sheaf_cache_t **c)
{
	char err[256];
	sheaf_pool_t *p;

	dmn_init(d);
	dmn_start(d, NULL);
	p = sheaf_connect(d->sock, "main", 0, err, sizeof(err));
	ck_assert_msg(p != NULL, "connect: %s", err);
	*c = sheaf_cache_create(p, "w", 64, NULL);
	ck_assert_ptr_nonnull(*c);
	return p;
}

START_TEST(killed_writer_loses_nothing)
{
	struct dmn d;
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	struct sheaf_stats st;
	char err[256];
	pid_t w;
	int64_t end;

	p = writer_world(&d, &c);
	/* Hold a section so that the killed writer's objects must wait. */
	ck_assert_int_eq(sheaf_read_lock(p), 0);
	w = start_child(&d, p, 1);
	ck_assert_int_eq(kill(w, SIGKILL), 0);
	waitpid(w, NULL, 0);
	/* sheafd repairs it: its partly filled deferred sheaf goes to the
	 * grace-period thread, which holds it while we read. */
	end = now_ms() + 10000;
	do {
		ck_assert_int_eq(sheaf_cache_stats(c, -1, &st), 0);
		if (st.stat[sheaf_stat_index("rcu_waiting")] == 100)
			break;
		sleep_ms(10);
	} while (now_ms() < end);
	sleep_ms(100);
	ck_assert_int_eq(sheaf_cache_stats(c, -1, &st), 0);
	ck_assert_uint_eq(st.stat[sheaf_stat_index("rcu_released")], 0);
	ck_assert_uint_eq(st.stat[sheaf_stat_index("rcu_waiting")], 100);
	ck_assert_int_eq(sheaf_read_unlock(p), 0);
	end = now_ms() + 10000;
	do {
		ck_assert_int_eq(sheaf_cache_stats(c, -1, &st), 0);
		if (st.stat[sheaf_stat_index("rcu_released")] == 100)
			break;
		sleep_ms(10);
	} while (now_ms() < end);
	ck_assert_uint_eq(st.stat[sheaf_stat_index("rcu_released")], 100);
	ck_assert_uint_eq(st.stat[sheaf_stat_index("rcu_waiting")], 0);
	/* The repair counted the sheaf it took back: exactly. */
	ck_assert_uint_eq(st.stat[sheaf_stat_index("free_rcu_sheaf")], 100);
	ck_assert_uint_eq(st.in_use, 0);
	sheaf_thread_exit();
	ck_assert_msg(sheaf_pool_check(p, err, sizeof(err)) == 0, "check: %s", err);
	sheaf_disconnect(p);
	dmn_stop(&d, 5000);
	dmn_cleanup(&d);
}
END_TEST

/* A deferred sheaf its writer died with before the first push goes back
 * blank: no stale SHEAF_F_DEFERRED, which made the next holder's death
 * requeue that one's free objects as deferred frees (counted in
 * free_rcu_sheaf: the counters then fell below the walk). */
START_TEST(killed_writer_empty_deferred_sheaf)
{
	struct dmn d;
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	struct shm_pool *sp;
	char err[256];
	uint32_t stale = 0;
	pid_t w;
	int64_t end;

	p = writer_world(&d, &c);
	sp = &p->shm;
	w = start_child(&d, p, 2);
	ck_assert_int_eq(kill(w, SIGKILL), 0);
	waitpid(w, NULL, 0);
	/* Repaired: its slot detached, which the repair does last, under
	 * ctl_lock (engine/repair.c): no sheaf owned by a client is not
	 * enough, since the repair claims every sheaf of the dead client
	 * first and puts each in the depot (flags cleared) only after all
	 * their objects went back (ASan CI run: 1 sheaf still marked in
	 * between).  We are the one client left, and hold no sheaf. */
	end = now_ms() + 10000;
	for (;;) {
		uint32_t held = 0;
		int n = info_clients(d.sock);

		ck_assert_int_ge(n, 0);
		for (uint32_t s = 0; s < sp->sheaf_count; s++)
			held += at_load_acquire(&sp->owners[s]) < sp->max_clients;
		if (held == 0 && n == 1)
			break;
		ck_assert_msg(now_ms() < end, "%u sheaves still held by clients, %d clients",
			      held, n);
		sleep_ms(10);
	}
	for (uint32_t s = 0; s < sp->sheaf_count; s++)
		stale += (pool_sheaf(sp, s)->flags & SHEAF_F_DEFERRED) != 0;
	ck_assert_msg(stale == 0, "%u sheaves left marked deferred", stale);
	/* The writer's one object is its leak: in use, by both counts. */
	ck_assert_uint_eq(stat_count(c, -1, "free_rcu_sheaf"), 0);
	ck_assert_msg(sheaf_pool_check(p, err, sizeof(err)) == 0, "check: %s", err);
	sheaf_disconnect(p);
	dmn_stop(&d, 5000);
	dmn_cleanup(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("deferred");

	require_binaries("test_deferred");
	ADD_ALONE(s, api_local, 60);
	ADD_ALONE(s, inline_sections_follow_lane, 60);
	ADD_ALONE(s, debug_cache_deferred, 60);
	ADD_ALONE(s, reader_holds_grace, 60);
	ADD_ALONE(s, stopped_reader_reported, 60);
	ADD_ALONE(s, killed_writer_loses_nothing, 60);
	ADD_ALONE(s, killed_writer_empty_deferred_sheaf, 60);
	return run_suite(s);
}
