/*
 * test_scale.c - a pool at the scale of a real multi-process service:
 * SCALE_PROCS (512) client processes attached to one sheafd at once,
 * started with limits that fit them (a config file: max_clients,
 * max_threads, max_connections, max_clients_per_uid).
 *
 *   many_clients   each child connects, opens the cache, allocates and
 *                  frees (its thread keeps sheaves with objects in them),
 *                  says so through a pipe and waits.  Then the Clients RPC
 *                  and `sheafctl clients` list every one of them (by pid);
 *                  all are SIGKILLed together; sheafd repairs every one
 *                  (DaemonInfo: no client left), the pool check passes and
 *                  the objects in use and counted in use are back at the
 *                  baseline taken before the children came.  The whole
 *                  test must take under SCALE_BUDGET_S on a 2-CPU machine.
 *
 * Children report through the pipe and their exit status, never Check.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/sheaf.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_proc.h"
#include "tests/helpers/util_rpc.h"

#define SCALE_PROCS    512
#define SCALE_OBJS     48       /* allocated then freed by each child */
#define SCALE_BUDGET_S 60

static struct dmn d;
static int ready_w = -1;        /* children write one byte when set up */
static int hold_r = -1;         /* children block reading it until killed */

static int scale_child(void *arg)
{
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	void *o[SCALE_OBJS];
	char name[32];

	snprintf(name, sizeof(name), "scale-%d", (int)(intptr_t)arg);
	p = child_connect(d.sock, name);
	c = sheaf_cache_open(p, "scale");
	if (c == NULL)
		return 2;
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < SCALE_OBJS; i++)
			if ((o[i] = sheaf_alloc(c)) == NULL)
				return 3;
		for (int i = 0; i < SCALE_OBJS; i++)
			memset(o[i], i, 64);
		for (int i = SCALE_OBJS; i-- > 0;)
			if (sheaf_free(c, o[i]) != 0)
				return 4;
	}
	if (write_full(ready_w, "r", 1) != 0)
		return 5;
	for (;;) {                       /* until SIGKILL (or the test dies) */
		char b;
		if (read(hold_r, &b, 1) <= 0)
			pause();
	}
	return 0;
}

/* Clients by the Clients RPC: how many, and how many of them are @pids. */
static size_t clients_listed(const pid_t *pids, size_t n, size_t *ours)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__ClientsRequest cr = SHEAF__V1__CLIENTS_REQUEST__INIT;
	Sheaf__V1__Response *r;
	int fd = unix_connect(d.sock), rc;
	size_t total;

	REQUIRE(fd >= 0, "connect: %s", strerror(-fd));
	rq.id = 7;
	rq.body_case = SHEAF__V1__REQUEST__BODY_CLIENTS;
	rq.clients = &cr;
	r = raw_rpc(fd, &rq, 30000, &rc);
	close(fd);
	REQUIRE(r != NULL && r->body_case == SHEAF__V1__RESPONSE__BODY_CLIENTS,
		"Clients RPC: %s", r ? r->error : strerror(-rc));
	total = r->clients->n_clients;
	*ours = 0;
	for (size_t i = 0; i < total; i++)
		for (size_t k = 0; k < n; k++)
			if ((pid_t)r->clients->clients[i]->pid == pids[k]) {
				(*ours)++;
				break;
			}
	sheaf__v1__response__free_unpacked(r, NULL);
	return total;
}

/* In-use figures of the Check RPC (which must pass). */
static void check_pool(uint64_t *in_use, uint64_t *counted, const char *when)
{
	Sheaf__V1__Response *r = raw_check(d.sock);

	ck_assert_msg(r->check->ok, "pool check %s: %s", when, r->check->problem);
	*in_use = r->check->in_use;
	*counted = r->check->counted_in_use;
	sheaf__v1__response__free_unpacked(r, NULL);
}

START_TEST(many_clients)
{
	static pid_t pids[SCALE_PROCS];
	int64_t t0 = now_ms();
	int ready[2], hold[2], st;
	uint64_t base_use, base_counted, use, counted;
	char conf[160], out[160], err[256], *listing;
	struct rlimit rl;
	sheaf_pool_t *p;
	size_t ours;

	/* The test holds nothing per child but its pid; sheafd raises its own
	 * descriptor limit (2 per client) from max_clients. */
	REQUIRE(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
	if (rl.rlim_cur < 4 * SCALE_PROCS && rl.rlim_max >= 4 * SCALE_PROCS) {
		rl.rlim_cur = 4 * SCALE_PROCS;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	dmn_init(&d);
	snprintf(conf, sizeof(conf), "%s/sheafd.conf", d.dir);
	REQUIRE(write_text(conf, "max_clients = 1024\nmax_threads = 2048\nmax_caches = 64\n"
			   "max_connections = 2048\nmax_clients_per_uid = 1024\n") == 0,
		"writing %s", conf);
	dmn_start(&d, (const char *const[]){ "--config", conf, "--log-level", "info", NULL });

	p = child_connect(d.sock, "scale-parent");
	ck_assert_ptr_nonnull(sheaf_cache_create(p, "scale", 64, NULL));
	sheaf_disconnect(p);            /* the children must not inherit it */
	wait_no_clients(&d, 10000);
	check_pool(&base_use, &base_counted, "before");

	REQUIRE(pipe(ready) == 0 && pipe(hold) == 0, "pipe");
	ready_w = ready[1];
	hold_r = hold[0];
	for (int i = 0; i < SCALE_PROCS; i++)
		pids[i] = fork_child(scale_child, (void *)(intptr_t)i);
	close(ready[1]);
	for (int i = 0; i < SCALE_PROCS; i++) {
		char b;
		ck_assert_msg(read_full(ready[0], &b, 1, 30000) == 0,
			      "only %d of %d children got set up in time", i, SCALE_PROCS);
	}
	printf("%d clients attached and working after %.1f s\n", SCALE_PROCS,
	       (double)(now_ms() - t0) / 1000);

	ck_assert_uint_ge(clients_listed(pids, SCALE_PROCS, &ours), SCALE_PROCS);
	ck_assert_uint_eq(ours, SCALE_PROCS);
	snprintf(out, sizeof(out), "%s/clients.txt", d.dir);
	{
		const char *argv[] = { sheafctl_bin(), "--socket", d.sock, "clients", NULL };
		struct spawn_opts o = { .out = out, .err = out, .stdin_null = 1 };
		const char *msg = run_proc(argv, &o, 30000, &st, err, sizeof(err));

		ck_assert_msg(msg == NULL && exited_ok(st), "sheafctl clients: %s",
			      msg ? msg : "failed");
		ck_assert_int_eq(count_in_file(out, " scale-"), SCALE_PROCS);
	}

	/* All at once: every repair in one burst. */
	for (int i = 0; i < SCALE_PROCS; i++)
		kill(pids[i], SIGKILL);
	for (int i = 0; i < SCALE_PROCS; i++) {
		ck_assert_int_eq(waitpid(pids[i], &st, 0), pids[i]);
		ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
		untrack(pids[i]);
	}
	close(ready[0]);
	close(hold[0]);
	close(hold[1]);
	wait_no_clients(&d, 30000);
	ck_assert_msg(dmn_alive(&d), "sheafd died");
	check_pool(&use, &counted, "after the kills");
	ck_assert_uint_eq(use, base_use);
	ck_assert_uint_eq(counted, base_counted);
	listing = read_file(d.log);
	ck_assert_ptr_nonnull(listing);
	ck_assert_int_ge(count_in_file(d.log, "gone: repaired"), SCALE_PROCS);
	free(listing);
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
	printf("many_clients: %.1f s in all\n", (double)(now_ms() - t0) / 1000);
	ck_assert_int_lt(now_ms() - t0, SCALE_BUDGET_S * 1000);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("scale");

	require_binaries("test_scale");
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ADD_ALONE(s, many_clients, 180);
	return run_suite(s);
}
