/*
 * test_timeout.c - control requests never wait for ever (client/sheaf.h,
 * sheaf_pool_set_timeout): against a socket that accepts and never answers,
 * sheaf_connect fails with ETIMEDOUT within $SHEAF_RPC_TIMEOUT_MS; against a
 * real sheafd stopped with SIGSTOP, a control request of an attached client
 * fails with ETIMEDOUT within its timeout while its objects keep coming from
 * its sheaves, and once the daemon runs again the next request reconnects,
 * resumes the client and succeeds.
 *
 * Each test is its own TCase: CK_RUN_CASE=<name> runs one.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "client/sheaf.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_pool.h"
#include "tests/helpers/util_proc.h"

/* A listener that accepts connections and never answers. */
struct mute {
	int lfd;
	char dir[32];
	char sock[64];
	pthread_t thr;
	int conns[8];
	int n;
};

static void *mute_main(void *arg)
{
	struct mute *m = arg;
	int fd;

	while (m->n < 8 && (fd = accept(m->lfd, NULL, NULL)) >= 0)
		m->conns[m->n++] = fd;       /* held open, never read */
	return NULL;
}

START_TEST(connect_times_out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct mute m = { .n = 0 };
	char err[256] = "";
	sheaf_pool_t *p;
	int64_t t0, ms;

	snprintf(m.dir, sizeof(m.dir), "/tmp/sheaf-timeout-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(m.dir));
	snprintf(m.sock, sizeof(m.sock), "%s/mute.sock", m.dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", m.sock);
	m.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(m.lfd, 0);
	ck_assert_int_eq(bind(m.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(m.lfd, 8), 0);
	ck_assert_int_eq(pthread_create(&m.thr, NULL, mute_main, &m), 0);

	setenv("SHEAF_RPC_TIMEOUT_MS", "300", 1);
	t0 = now_ms();
	errno = 0;
	p = sheaf_connect(m.sock, "mute", 0, err, sizeof(err));
	ms = now_ms() - t0;
	unsetenv("SHEAF_RPC_TIMEOUT_MS");
	ck_assert_msg(p == NULL && errno == ETIMEDOUT,
		      "sheaf_connect to a mute daemon: %p, errno %s (%s)", (void *)p,
		      strerror(errno), err);
	ck_assert_msg(ms >= 250 && ms < 3000, "gave up after %lld ms (timeout 300 ms)",
		      (long long)ms);
	printf("  connect to a daemon that never answers: ETIMEDOUT after %lld ms (%s)\n",
	       (long long)ms, err);

	shutdown(m.lfd, SHUT_RDWR);
	close(m.lfd);
	pthread_join(m.thr, NULL);
	for (int i = 0; i < m.n; i++)
		close(m.conns[i]);
	unlink(m.sock);
	rmdir(m.dir);
}
END_TEST

START_TEST(set_timeout_args)
{
	struct sheaf_pool_config cfg = { .size = 64 << 20, .nodes = 1 };
	sheaf_pool_t *p = pool_new(&cfg);

	ck_assert_int_eq(sheaf_pool_set_timeout(p, 0), -EINVAL);
	ck_assert_int_eq(sheaf_pool_set_timeout(p, 3600001), -EINVAL);
	ck_assert_int_eq(sheaf_pool_set_timeout(p, 1), 0);
	ck_assert_int_eq(sheaf_pool_set_timeout(p, 3600000), 0);
	sheaf_pool_destroy(p);
}
END_TEST

START_TEST(stopped_daemon)
{
	struct sheaf_cache_config cc = { .capacity = 64 };
	struct dmn d;
	struct sheaf_stats st;
	char err[256] = "";
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	void *objs[32];
	int64_t t0, ms;
	int rc;

	dmn_init(&d);
	dmn_start(&d, NULL);
	p = sheaf_connect(d.sock, "timeout", 0, err, sizeof(err));
	ck_assert_msg(p != NULL, "connect: %s", err);
	c = sheaf_cache_create(p, "t", 64, &cc);
	ck_assert_msg(c != NULL, "cache: %s", strerror(errno));
	/* Stock this thread's sheaves before the daemon stops. */
	for (int i = 0; i < 32; i++)
		ck_assert_ptr_nonnull(objs[i] = sheaf_alloc(c));
	for (int i = 0; i < 32; i++)
		ck_assert_int_eq(sheaf_free(c, objs[i]), 0);
	ck_assert_int_eq(sheaf_pool_set_timeout(p, 300), 0);

	ck_assert_int_eq(kill(d.pid, SIGSTOP), 0);
	t0 = now_ms();
	rc = sheaf_cache_stats(c, -1, &st);
	ms = now_ms() - t0;
	ck_assert_msg(rc == -ETIMEDOUT, "stats from a stopped daemon: %d (%s)", rc,
		      strerror(-rc));
	ck_assert_msg(ms >= 250 && ms < 3000, "gave up after %lld ms (timeout 300 ms)",
		      (long long)ms);
	/* A second request: reconnects (sheafd's backlog accepts), waits again. */
	t0 = now_ms();
	rc = sheaf_cache_shrink(c);
	ck_assert_msg(rc == -ETIMEDOUT, "shrink on a stopped daemon: %d", rc);
	ck_assert_msg(now_ms() - t0 < 3000, "second request waited %lld ms",
		      (long long)(now_ms() - t0));
	/* Objects keep coming from the thread's sheaves meanwhile. */
	for (int i = 0; i < 32; i++)
		ck_assert_ptr_nonnull(objs[i] = sheaf_alloc(c));
	for (int i = 0; i < 32; i++)
		ck_assert_int_eq(sheaf_free(c, objs[i]), 0);
	printf("  stopped sheafd: stats ETIMEDOUT after %lld ms; sheaves kept serving\n",
	       (long long)ms);

	ck_assert_int_eq(kill(d.pid, SIGCONT), 0);
	rc = sheaf_cache_stats(c, -1, &st);
	ck_assert_msg(rc == 0, "stats after SIGCONT: %s", strerror(-rc));
	ck_assert_uint_eq(st.in_use, 0);
	ck_assert_msg(sheaf_pool_check(p, err, sizeof(err)) == 0, "check: %s", err);
	sheaf_disconnect(p);
	dmn_stop(&d, 5000);
	dmn_cleanup(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("timeout");

	require_binaries("test_timeout");

	ADD_ALONE(s, connect_times_out, 60);
	ADD_ALONE(s, set_timeout_args, 60);
	ADD_ALONE(s, stopped_daemon, 120);
	return run_suite(s);
}
