/*
 * test_daemon_kill.c - sheafd repairing clients killed with SIGKILL in the
 * middle of their work (started per test as in test_daemon.c,
 * util_daemon.h):
 *
 *   kill9          victims doing random alloc/free are SIGKILLed at random
 *                  moments (50 times; 20 under SHEAF_SAN) while two survivor
 *                  clients run alloc/free loops that must never fail; the
 *                  daemon stays alive, repairs every dead client (DaemonInfo
 *                  clients back to 0), the structural check passes and the
 *                  pool still serves a fresh client.
 *
 * Every test is one TCase (CK_RUN_CASE=<name> runs one).  Child processes
 * report through pipes, REQUIRE and exit statuses and never call Check.
 */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/sheaf.h"
#include "tests/util_check.h"
#include "tests/util_daemon.h"
#include "tests/util_proc.h"
#include "tests/util_rpc.h"

/* ---- kill -9 of clients during a mixed workload */

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
		REQUIRE(c != NULL, "sheaf_cache_create: %s", strerror(errno));
	} else {
		c = sheaf_cache_open(pool, "k9");
		REQUIRE(c != NULL, "sheaf_cache_open: %s", strerror(errno));
	}
	REQUIRE(write_full(a->ready[1], "r", 1) == 0, "write ready");
	for (;;) {
		uint64_t r = xorshift(&rng);

		if (n == 0 || (n < SURV_HOLD && (r & 1))) {
			uint64_t *o = sheaf_alloc(c);
			REQUIRE(o != NULL, "survivor %d: sheaf_alloc after %llu ops: %s", a->idx,
			     (unsigned long long)ops, strerror(errno));
			stamps[n] = ((uint64_t)getpid() << 32) | ++seq;
			stamp(o, stamps[n]);
			held[n++] = o;
		} else {
			unsigned i = (unsigned)((r >> 8) % n);
			int rc;
			REQUIRE(stamped(held[i], stamps[i]),
			     "survivor %d: object %p changed under it (someone else got it)", a->idx,
			     (void *)held[i]);
			rc = sheaf_free(c, held[i]);
			REQUIRE(rc == 0, "survivor %d: sheaf_free: %d", a->idx, rc);
			held[i] = held[--n];
			stamps[i] = stamps[n];
		}
		if ((++ops & 4095) == 0) {
			struct pollfd pf = { a->stop[0], POLLIN, 0 };
			struct sheaf_stats st;
			int rc = sheaf_cache_stats(c, -1, &st);
			REQUIRE(rc == 0, "survivor %d: sheaf_cache_stats: %d", a->idx, rc);
			stats++;
			if (poll(&pf, 1, 0) != 0)
				break;
		}
	}
	while (n > 0) {
		n--;
		REQUIRE(stamped(held[n], stamps[n]), "survivor %d: object %p changed under it",
		     a->idx, (void *)held[n]);
		REQUIRE(sheaf_free(c, held[n]) == 0, "survivor %d: final sheaf_free", a->idx);
	}
	uint64_t rep[3] = { (uint64_t)a->idx, ops, stats };
	REQUIRE(write_full(a->report[1], rep, sizeof(rep)) == 0, "write report");
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
			REQUIRE(rc == 0, "victim: sheaf_alloc_bulk: %d", rc);
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
				REQUIRE(stamped(held[n], stamps[n]), "victim: object %p changed under it",
				     (void *)held[n]);
				objs[k] = held[n];
			}
			rc = sheaf_free_bulk(vs->c, objs, VICTIM_BULK);
			REQUIRE(rc == 0, "victim: sheaf_free_bulk: %d", rc);
		} else if (n == 0 || (n < VICTIM_HOLD && (r & 2))) {
			uint64_t *o = sheaf_alloc(vs->c);
			REQUIRE(o != NULL, "victim: sheaf_alloc: %s", strerror(errno));
			stamps[n] = base | ++seq;
			stamp(o, stamps[n]);
			held[n++] = o;
		} else {
			unsigned i = (unsigned)((r >> 8) % n);
			int rc;
			REQUIRE(stamped(held[i], stamps[i]), "victim: object %p changed under it",
			     (void *)held[i]);
			rc = sheaf_free(vs->c, held[i]);
			REQUIRE(rc == 0, "victim: sheaf_free: %d", rc);
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
	REQUIRE(c != NULL, "sheaf_cache_open: %s", strerror(errno));
	for (int i = 0; i < 2; i++) {
		vs[i].c = c;
		vs[i].rng = mix64((uint64_t)getpid() * 31 + (uint64_t)i) | 1;
	}
	if (a->threads > 1)
		REQUIRE(pthread_create(&t, NULL, victim_loop, &vs[1]) == 0, "pthread_create");
	victim_loop(&vs[0]);
	return 0;
}

START_TEST(kill9)
{
	static struct k9_arg a;
	struct dmn d;
	pid_t surv[2];
	int kills = test_san() ? 20 : 50;
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

/* ---- main ------------------------------------------------------------------- */

int main(void)
{
	Suite *s = suite_create("sheafd-kill");

	require_binaries("test_daemon_kill");
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ADD_ALONE(s, kill9, 240);
	return run_suite(s);
}
