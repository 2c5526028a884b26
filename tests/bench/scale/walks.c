/*
 * walks.c - what the requests and repairs that walk clients, lanes and
 * caches cost as the pool fills, and how long attaching takes.
 * Not part of sheafbench (its own main; built beside it, linked with the
 * test utilities: a real sheafd, real forked clients, raw RPCs).
 *
 *   walks [LEVELS...]   (default 1 64 512 2048) at each level N, N client
 *       processes are attached to one sheafd (each opened CACHES caches,
 *       allocated and freed in each, and waits): per request DaemonInfo,
 *       Stats (all caches), Clients and Check, the median and p99 latency
 *       (us) over REQS requests (Check: a tenth) and sheafd's CPU (us per
 *       request, from /proc/PID/schedstat); then REPAIRS clients are SIGKILLed one at a time
 *       (each replaced): the latency from the kill to DaemonInfo counting
 *       one client less, and sheafd's CPU per repair.  Then, in this
 *       process, engine_adopt of a pool with N client slots and N lanes in
 *       use, and pool_check of it (the code paths of a restarted sheafd and
 *       of the checker, without the daemon around them).
 *   walks --attach N    N processes connect at once (released together by a
 *       pipe); each times its connect and first allocation.  Prints the
 *       p50 and p99 (us) over the N: tests/bench/run.sh's attach rows.
 *
 * Output: one line per figure, "name value", for run.sh and the README.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/sheaf.h"
#include "shm/lanes.h"
#include "shm/engine/clients.h"
#include "shm/engine/check.h"
#include "shm/engine/engine.h"
#include "shm/pool.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_proc.h"
#include "tests/helpers/util_rpc.h"

#define CACHES  4
#define REQS    200
#define REPAIRS 8
#define MAXPROC 4096

static struct dmn d;
static pid_t kids[MAXPROC];
static int nkids;
static int ready[2], go[2];

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* sheafd's CPU time in seconds, ns-precise (/proc/PID/schedstat: time
 * on a CPU; /proc/PID/stat counts in 10 ms ticks). */
static double cpu_s(pid_t pid)
{
	char path[64];
	unsigned long long ns = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
	f = fopen(path, "r");
	if (f != NULL) {
		if (fscanf(f, "%llu", &ns) != 1)
			ns = 0;
		fclose(f);
	}
	return ns ? (double)ns / 1e9 : cpu_seconds(pid);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static int64_t pct(int64_t *v, int n, int p)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_i64);
	return v[(n - 1) * p / 100];
}

/* A client: connect, use every cache, say so, wait to be killed. */
static int walk_child(void *arg)
{
	sheaf_pool_t *p = child_connect(d.sock, "walk");
	void *o[16];
	char name[16];

	(void)arg;
	for (int c = 0; c < CACHES; c++) {
		sheaf_cache_t *h;
		snprintf(name, sizeof(name), "c%d", c);
		if ((h = sheaf_cache_open(p, name)) == NULL)
			return 2;
		for (int i = 0; i < 16; i++)
			if ((o[i] = sheaf_alloc(h)) == NULL)
				return 3;
		for (int i = 0; i < 16; i++)
			sheaf_free(h, o[i]);
	}
	if (write_full(ready[1], "r", 1) != 0)
		return 4;
	for (;;)
		pause();
}

static void grow_to(int n)
{
	int from = nkids;
	char b;

	for (; nkids < n; nkids++)
		kids[nkids] = fork_child(walk_child, NULL);
	for (int i = from; i < n; i++)
		REQUIRE(read_full(ready[0], &b, 1, 60000) == 0, "child %d not ready", i);
}

static Sheaf__V1__Response *request(int fd, int kind)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__StatsRequest sr = SHEAF__V1__STATS_REQUEST__INIT;
	Sheaf__V1__ClientsRequest cr = SHEAF__V1__CLIENTS_REQUEST__INIT;
	Sheaf__V1__CheckRequest kr = SHEAF__V1__CHECK_REQUEST__INIT;
	Sheaf__V1__Response *r;
	int rc;

	rq.id = 9;
	switch (kind) {
	case 0: return rpc_info(fd, 9, &rc);
	case 1: rq.body_case = SHEAF__V1__REQUEST__BODY_STATS; rq.stats = &sr; break;
	case 2: rq.body_case = SHEAF__V1__REQUEST__BODY_CLIENTS; rq.clients = &cr; break;
	default: rq.body_case = SHEAF__V1__REQUEST__BODY_CHECK; rq.check = &kr; break;
	}
	r = raw_rpc(fd, &rq, 120000, &rc);
	REQUIRE(r != NULL && r->status == SHEAF__V1__STATUS__STATUS_OK, "request %d failed", kind);
	return r;
}

static void measure_requests(int n)
{
	static const char *const names[] = { "info", "stats", "clients", "check" };
	int fd = unix_connect(d.sock);

	REQUIRE(fd >= 0, "connect");
	for (int k = 0; k < 4; k++) {
		int64_t lat[REQS];
		int reqs = k == 3 ? REQS / 10 : REQS;
		double cpu0 = cpu_s(d.pid);

		for (int i = 0; i < reqs; i++) {
			int64_t t0 = now_ns();
			sheaf__v1__response__free_unpacked(request(fd, k), NULL);
			lat[i] = now_ns() - t0;
		}
		printf("N=%d %-8s p50_us %8.1f p99_us %8.1f sheafd_cpu_us %8.1f\n", n, names[k],
		       pct(lat, reqs, 50) / 1e3, pct(lat, reqs, 99) / 1e3,
		       (cpu_s(d.pid) - cpu0) * 1e6 / reqs);
	}
	close(fd);
}

static int clients_now(int fd)
{
	int rc;
	Sheaf__V1__Response *r = rpc_info(fd, 3, &rc);
	int n;

	REQUIRE(r != NULL, "DaemonInfo");
	n = (int)r->daemon_info->clients;
	sheaf__v1__response__free_unpacked(r, NULL);
	return n;
}

static void measure_repairs(int n)
{
	int fd = unix_connect(d.sock);
	int64_t lat[REPAIRS];
	double cpu = 0;

	REQUIRE(fd >= 0, "connect");
	for (int i = 0; i < REPAIRS; i++) {
		pid_t victim = kids[--nkids];
		double c0 = cpu_s(d.pid);
		int64_t t0 = now_ns();
		int st;

		kill(victim, SIGKILL);
		while (clients_now(fd) >= n)
			;
		lat[i] = now_ns() - t0;
		cpu += cpu_s(d.pid) - c0;
		waitpid(victim, &st, 0);
		untrack(victim);
		grow_to(n);
	}
	printf("N=%d %-8s p50_us %8.1f p99_us %8.1f sheafd_cpu_us %8.1f\n", n, "repair",
	       pct(lat, REPAIRS, 50) / 1e3, pct(lat, REPAIRS, 99) / 1e3, cpu * 1e6 / REPAIRS);
	close(fd);
}

/* engine_adopt and pool_check of a default-limits pool with @n clients,
 * each with a lane that used every cache. */
static void measure_adopt(int n)
{
	struct pool_params pp = { .size = 256 << 20, .nodes = 1, .max_clients = MAXPROC,
				  .max_lanes = 2 * MAXPROC };
	struct cache_params cp = { .size = 64, .align = 8, .capacity = -1 };
	struct shm_pool p;
	struct engine e;
	char err[256];
	int64_t t0, t_adopt, t_check;

	REQUIRE(pool_create(&p, &pp, err, sizeof(err)) == 0, "pool_create: %s", err);
	REQUIRE(engine_init(&e, &p, err, sizeof(err)) == 0, "engine_init: %s", err);
	for (int c = 0; c < CACHES; c++) {
		char name[16];
		snprintf(name, sizeof(name), "c%d", c);
		REQUIRE(engine_cache_create(&e, name, &cp, err, sizeof(err)) >= 0, "%s", err);
	}
	for (int i = 0; i < n; i++) {
		int id = client_attach(&p, (uint32_t)getpid(), 0, "walk");
		struct shm_lane *l = client_lane_acquire(&p, (uint32_t)id, 0);
		REQUIRE(id >= 0 && l != NULL, "client %d", i);
		for (uint32_t c = 0; c < CACHES; c++)
			at_counter_add(&lane_stat(&p, l, c)[ST_ALLOC_SLOWPATH], 0);
	}
	engine_fini(&e);
	t0 = now_ns();
	REQUIRE(engine_adopt(&p) >= 0, "engine_adopt");
	t_adopt = now_ns() - t0;
	t0 = now_ns();
	REQUIRE(pool_check(&p, -1, -1, NULL, err, sizeof(err)) == 0, "check: %s", err);
	t_check = now_ns() - t0;
	printf("N=%d %-8s adopt_us %8.1f check_us %8.1f (in process)\n", n, "adopt",
	       t_adopt / 1e3, t_check / 1e3);
	pool_unmap(&p);
}

/* One attacher: wait for the go, then time connect + open + first alloc. */
static int attach_child(void *arg)
{
	int out = (int)(intptr_t)arg;
	char b, err[256];
	int64_t t0, dt;
	sheaf_pool_t *p;
	sheaf_cache_t *c;

	if (read_full(go[0], &b, 1, 120000) != 0)
		return 2;
	t0 = now_ns();
	p = sheaf_connect(d.sock, "attach", 0, err, sizeof(err));
	if (p == NULL || (c = sheaf_cache_open(p, "c0")) == NULL || sheaf_alloc(c) == NULL)
		return 3;
	dt = now_ns() - t0;
	if (write_full(out, &dt, sizeof(dt)) != 0)
		return 4;
	for (;;)
		pause();
}

static void measure_attach(int n)
{
	int res[2];
	int64_t *lat = calloc((size_t)n, sizeof(*lat));

	REQUIRE(lat != NULL && pipe(res) == 0, "pipe");
	for (int i = 0; i < n; i++)
		kids[nkids++] = fork_child(attach_child, (void *)(intptr_t)res[1]);
	sleep_ms(200);                   /* all forked and waiting */
	for (int i = 0; i < n; i++)
		REQUIRE(write_full(go[1], "g", 1) == 0, "go");
	for (int i = 0; i < n; i++)
		REQUIRE(read_full(res[0], &lat[i], sizeof(lat[i]), 120000) == 0,
			"attacher %d of %d", i, n);
	printf("attach N=%d p50_us %.1f p99_us %.1f\n", n, pct(lat, n, 50) / 1e3,
	       pct(lat, n, 99) / 1e3);
	free(lat);
	close(res[0]);
	close(res[1]);
}

int main(int argc, char **argv)
{
	int levels[8] = { 1, 64, 512, 2048 }, nlev = 4, attach = 0;
	struct rlimit rl;
	sheaf_pool_t *p;
	char err[256];

	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 2 && strcmp(argv[1], "--attach") == 0) {
		attach = atoi(argv[2]);
	} else if (argc > 1) {
		for (nlev = 0; nlev < argc - 1 && nlev < 8; nlev++)
			levels[nlev] = atoi(argv[nlev + 1]);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	require_binaries("walks");
	dmn_init(&d);
	dmn_start(&d, (const char *const[]){ "--nodes", "1", "--max-clients", "4096",
		  "--max-threads", "8192", "--max-connections", "8192",
		  "--max-clients-per-uid", "4096", "--log-level", "warn", NULL });
	p = sheaf_connect(d.sock, "setup", 0, err, sizeof(err));
	REQUIRE(p != NULL, "connect: %s", err);
	for (int c = 0; c < CACHES; c++) {
		char name[16];
		snprintf(name, sizeof(name), "c%d", c);
		REQUIRE(sheaf_cache_create(p, name, 64, NULL) != NULL, "create %s", name);
	}
	sheaf_disconnect(p);
	REQUIRE(pipe(ready) == 0 && pipe(go) == 0, "pipe");
	if (attach > 0) {
		measure_attach(attach);
	} else {
		for (int i = 0; i < nlev; i++) {
			grow_to(levels[i]);
			measure_requests(levels[i]);
			measure_repairs(levels[i]);
			measure_adopt(levels[i]);
		}
	}
	for (int i = 0; i < nkids; i++)
		kill(kids[i], SIGKILL);
	for (int i = 0; i < nkids; i++) {
		waitpid(kids[i], NULL, 0);
		untrack(kids[i]);
	}
	wait_no_clients(&d, 60000);
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
	return 0;
}
