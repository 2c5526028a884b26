/*
 * test_daemon_kill.c - sheafd repairing clients killed with SIGKILL in the
 * middle of their work (started per test as in test_daemon.c,
 * util_daemon.h):
 *
 *   kill9          victims doing random alloc/free on a cache of sheaf
 *                  capacity 4 (a barn exchange, that is ring operations,
 *                  every few operations) are SIGKILLed 96 times (48 under
 *                  SHEAF_SAN) while two survivor clients run alloc/free
 *                  loops that must never fail.  Three kills in four land
 *                  inside a ring operation on purpose: the victim's
 *                  ring_stop_hook (libsheaf-test.a) stops it at a chosen
 *                  step of ring_hdr_put/ring_hdr_get (every step in turn) and says
 *                  so through a pipe; the fourth lands at a random moment
 *                  after the victim says it runs its hot loop.  After each
 *                  kill sheafd must log the victim's repair ("gone:
 *                  repaired, N sheaves returned"), with N >= 1 where the
 *                  stop leaves a sheaf in flight that only the repair of
 *                  the ring intent returns.  At the end (all clients gone):
 *                  the daemon alive, the pool check passes, the objects in
 *                  use are exactly those the victims held when they died
 *                  (each victim thread publishes bounds around every
 *                  operation), and a newcomer allocates every other object
 *                  of the cache's slabs (stamped, checked, freed).
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

#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "client/sheaf.h"
#include "shm/ring.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_proc.h"
#include "tests/helpers/util_ring.h"
#include "tests/helpers/util_rpc.h"

/* ---- kill -9 of clients during a mixed workload */

#define K9_OBJ       96
#define K9_WORDS     (K9_OBJ / 8)
#define SURV_HOLD    512
#define VICTIM_HOLD  256
#define VICTIM_BULK  16
#define K9_CAPACITY  4        /* objects per sheaf: a barn exchange every few ops */

/*
 * What a victim shares with the test (MAP_SHARED, made before the fork):
 * per thread, bounds on the objects it holds (lo <= held <= hi, the
 * operation in progress counted both ways), and the step it stopped at.
 */
struct k9_shared {
	_Atomic int32_t lo[2], hi[2];
	_Atomic int step;
};

struct k9_arg {
	const char *sock;
	int idx;
	int ready[2];            /* survivors -> parent: running; victims: 's'/'h' */
	int stop[2];             /* parent closes the write end: stop */
	int report[2];           /* survivors -> parent: ops done */
	int threads;             /* victims: 1 or 2 */
	int step;                /* victims: stop at this ring step (0: none) */
	unsigned nth;            /* ... at its nth arrival */
	struct k9_shared *sh;
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
		struct sheaf_cache_config cfg = { .capacity = K9_CAPACITY };

		c = sheaf_cache_create(pool, "k9", K9_OBJ, &cfg);
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
	_Atomic int32_t *lo, *hi;   /* this thread's bounds in k9_shared */
	int ready_fd;               /* 'h' once after the hot loop warmed up */
};

/* The victim's stop point (ring_stop_hook runs in any of its threads). */
static struct {
	struct k9_shared *sh;
	int step, fd;
	atomic_uint left;
} vstop;

/* In a ring operation of the victim: at the chosen arrival at the chosen
 * step, say so and stop there (SIGSTOP stops every thread); the test
 * SIGKILLs the process while it sits inside the operation. */
static void victim_hook(int step)
{
	if (step != vstop.step || atomic_load(&vstop.left) == 0 ||
	    atomic_fetch_sub(&vstop.left, 1) != 1)
		return;
	atomic_store(&vstop.sh->step, step);
	(void)write_full(vstop.fd, "s", 1);
	raise(SIGSTOP);
}

/* Bounds around one operation: @down objects may leave, @up arrive. */
static void held_bounds(struct victim_state *vs, unsigned n, unsigned down, unsigned up)
{
	atomic_store_explicit(vs->lo, (int32_t)(n - down), memory_order_relaxed);
	atomic_store_explicit(vs->hi, (int32_t)(n + up), memory_order_relaxed);
	atomic_signal_fence(memory_order_seq_cst);
}

/* Random alloc/free forever (until SIGKILL); a corrupt object ends the
 * process with status 1, which the parent catches. */
static void *victim_loop(void *argp)
{
	struct victim_state *vs = argp;
	uint64_t *held[VICTIM_HOLD + VICTIM_BULK], stamps[VICTIM_HOLD + VICTIM_BULK], seq = 0;
	uint64_t base = ((uint64_t)getpid() << 32) | ((uint64_t)(uintptr_t)&seq & 0xff000000u);
	unsigned n = 0;
	uint64_t ops = 0;

	for (;;) {
		uint64_t r = xorshift(&vs->rng);

		if (++ops == 1000 && vs->ready_fd >= 0)
			REQUIRE(write_full(vs->ready_fd, "h", 1) == 0, "victim: write hot");
		if ((r & 15) == 0 && n + VICTIM_BULK <= VICTIM_HOLD) {
			void *objs[VICTIM_BULK];
			int rc;

			held_bounds(vs, n, 0, VICTIM_BULK);
			rc = sheaf_alloc_bulk(vs->c, objs, VICTIM_BULK);
			REQUIRE(rc == 0, "victim: sheaf_alloc_bulk: %d", rc);
			for (int k = 0; k < VICTIM_BULK; k++) {
				stamps[n] = base | ++seq;
				stamp(objs[k], stamps[n]);
				held[n++] = objs[k];
			}
		} else if ((r & 15) == 1 && n >= VICTIM_BULK) {
			void *objs[VICTIM_BULK];
			int rc;

			held_bounds(vs, n, VICTIM_BULK, 0);
			for (int k = 0; k < VICTIM_BULK; k++) {
				n--;
				REQUIRE(stamped(held[n], stamps[n]), "victim: object %p changed under it",
				     (void *)held[n]);
				objs[k] = held[n];
			}
			rc = sheaf_free_bulk(vs->c, objs, VICTIM_BULK);
			REQUIRE(rc == 0, "victim: sheaf_free_bulk: %d", rc);
		} else if (n == 0 || (n < VICTIM_HOLD && (r & 2))) {
			uint64_t *o;

			held_bounds(vs, n, 0, 1);
			o = sheaf_alloc(vs->c);
			REQUIRE(o != NULL, "victim: sheaf_alloc: %s", strerror(errno));
			stamps[n] = base | ++seq;
			stamp(o, stamps[n]);
			held[n++] = o;
		} else {
			unsigned i = (unsigned)((r >> 8) % n);
			int rc;
			REQUIRE(stamped(held[i], stamps[i]), "victim: object %p changed under it",
			     (void *)held[i]);
			held_bounds(vs, n, 1, 0);
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
		vs[i].lo = &a->sh->lo[i];
		vs[i].hi = &a->sh->hi[i];
		vs[i].ready_fd = i == 0 && a->step == 0 ? a->ready[1] : -1;
	}
	if (a->step != 0) {
		vstop.sh = a->sh;
		vstop.step = a->step;
		vstop.fd = a->ready[1];
		atomic_store(&vstop.left, a->nth);
		ring_stop_hook = victim_hook;
	}
	if (a->threads > 1)
		REQUIRE(pthread_create(&t, NULL, victim_loop, &vs[1]) == 0, "pthread_create");
	victim_loop(&vs[0]);
	return 0;
}

/* The N of sheafd's last "gone: repaired, N sheaves returned" line, or -1. */
static int last_repair_sheaves(const char *log)
{
	static const char key[] = "gone: repaired, ";
	char *text = read_file(log), *at = NULL;
	int n = -1;

	if (text == NULL)
		return -1;
	for (char *p = text; (p = strstr(p, key)) != NULL; p++)
		at = p;
	if (at != NULL)
		n = atoi(at + strlen(key));
	free(text);
	return n;
}

/*
 * Whether a victim stopped at @step holds a sheaf that the repair must
 * return: still its own (PUT_INTENT, GET_CLAIM, GET_DONE), or in flight,
 * marked "in the ring" but in no slot, which only the repair of the ring
 * intent gives back (PUT_OWNER, GET_CLEAR, GET_HEAD).  At the other steps
 * the sheaf is in a slot, or none is taken yet.
 */
static int step_holds_sheaf(int step)
{
	switch (step) {
	case RS_PUT_INTENT: case RS_PUT_OWNER:
	case RS_GET_CLEAR: case RS_GET_HEAD: case RS_GET_CLAIM: case RS_GET_DONE:
		return 1;
	default:
		return 0;
	}
}

/* Wait until sheafd has logged @n client repairs. */
static void wait_repairs(struct dmn *d, int n, const char *ctx)
{
	for (int64_t end = now_ms() + 30000; count_in_file(d->log, "gone: repaired") < n;) {
		REQUIRE(now_ms() < end, "%s: sheafd logged %d repairs within 30 s, %d expected",
			ctx, count_in_file(d->log, "gone: repaired"), n);
		sleep_ms(5);
	}
}

struct newcomer_arg {
	const char *sock;
	uint64_t count;          /* objects to allocate */
	int ready[2], stop[2];
};

/* Allocate @count objects of "k9" (stamped), say 'r', wait for the test's
 * look (EOF on stop), then check and free them all. */
static int newcomer(void *argp)
{
	struct newcomer_arg *a = argp;
	uint64_t **objs = calloc(a->count, sizeof(*objs));
	sheaf_pool_t *pool;
	sheaf_cache_t *c;
	char g;

	close(a->stop[1]);
	REQUIRE(objs != NULL, "calloc");
	pool = child_connect(a->sock, "newcomer");
	c = sheaf_cache_open(pool, "k9");
	REQUIRE(c != NULL, "sheaf_cache_open: %s", strerror(errno));
	for (uint64_t i = 0; i < a->count; i++) {
		objs[i] = sheaf_alloc(c);
		REQUIRE(objs[i] != NULL, "newcomer: sheaf_alloc %llu of %llu: %s",
			(unsigned long long)i, (unsigned long long)a->count, strerror(errno));
		stamp(objs[i], ((uint64_t)getpid() << 32) | i);
	}
	REQUIRE(write_full(a->ready[1], "r", 1) == 0, "write ready");
	REQUIRE(read(a->stop[0], &g, 1) == 0, "the test went away");
	for (uint64_t i = 0; i < a->count; i++) {
		REQUIRE(stamped(objs[i], ((uint64_t)getpid() << 32) | i),
			"newcomer: object %llu (%p) changed: handed out twice",
			(unsigned long long)i, (void *)objs[i]);
		REQUIRE(sheaf_free(c, objs[i]) == 0, "newcomer: sheaf_free");
	}
	free(objs);
	sheaf_disconnect(pool);
	return 0;
}

START_TEST(kill9)
{
	static struct k9_arg a;
	static struct newcomer_arg b;
	struct k9_shared *sh;
	struct dmn d;
	pid_t surv[2];
	int kills = test_san() ? 48 : 96, at_steps = 0, hot = 0, must_return = 0;
	uint64_t seed = (uint64_t)now_ms() ^ ((uint64_t)getpid() << 20), rng = seed | 1;
	uint64_t ops[2] = { 0, 0 }, stats = 0, leaked;
	int64_t lo_total = 0, hi_total = 0, sheaves_total = 0;
	Sheaf__V1__Response *r;
	int64_t t0;
	char g;

	printf("kill9: seed %llu\n", (unsigned long long)seed);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	REQUIRE(sh != MAP_FAILED, "mmap: %s", strerror(errno));
	dmn_init(&d);
	dmn_start(&d, NULL);
	memset(&a, 0, sizeof(a));
	a.sock = d.sock;
	a.sh = sh;
	REQUIRE(pipe(a.ready) == 0 && pipe(a.stop) == 0 && pipe(a.report) == 0, "pipe");
	/* Survivor 0 creates the cache before survivor 1 opens it. */
	for (int i = 0; i < 2; i++) {
		a.idx = i;
		surv[i] = fork_child(survivor, &a);
		REQUIRE(read_full(a.ready[0], &g, 1, 60000) == 0, "survivor %d did not start", i);
	}
	t0 = now_ms();
	for (int k = 0; k < kills; k++) {
		pid_t v;
		int st = 0, n;
		char buf[64], ctx[96];

		a.threads = 1 + (k & 1);
		/* Three in four: stopped inside a ring operation, every step in
		 * turn; the fourth: at a random moment of the hot loop. */
		a.step = (k & 3) != 3 ? 1 + at_steps++ % (RS_NR - 1) : 0;
		a.nth = 1 + (unsigned)(xorshift(&rng) % 40);
		memset(sh, 0, sizeof(*sh));
		if (a.step != 0)
			snprintf(ctx, sizeof(ctx), "victim %d (%d threads) stopped at %s #%u", k,
				 a.threads, ring_step_name(a.step), a.nth);
		else
			snprintf(ctx, sizeof(ctx), "victim %d (%d threads) in its hot loop", k,
				 a.threads);
		v = fork_child(victim, &a);
		REQUIRE(read_full(a.ready[0], &g, 1, 30000) == 0 && g == (a.step ? 's' : 'h'),
			"%s: no word from it within 30 s", ctx);
		if (a.step == 0) {
			hot++;
			sleep_us((unsigned)(xorshift(&rng) % 2001));
		}
		kill(v, SIGKILL);
		REQUIRE(wait_pid(v, 30000, &st) == 1, "%s did not die", ctx);
		untrack(v);
		REQUIRE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "%s ended with %s before the kill",
			ctx, status_str(st, buf, sizeof(buf)));
		REQUIRE(a.step == 0 || atomic_load(&sh->step) == a.step,
			"%s: stopped at step %d", ctx, atomic_load(&sh->step));
		/* sheafd repairs it: one log line per dead client, in order. */
		wait_repairs(&d, k + 1, ctx);
		n = last_repair_sheaves(d.log);
		REQUIRE(n >= 0, "%s: no sheaf count in the repair line", ctx);
		if (a.step != 0 && step_holds_sheaf(a.step)) {
			REQUIRE(n >= 1, "%s: its repair returned no sheaf, but one was in flight",
				ctx);
			must_return++;
		}
		sheaves_total += n;
		for (int t = 0; t < a.threads; t++) {
			lo_total += atomic_load(&sh->lo[t]);
			hi_total += atomic_load(&sh->hi[t]);
		}
		REQUIRE(dmn_alive(&d), "sheafd died after %s", ctx);
		for (int i = 0; i < 2; i++) {
			REQUIRE(waitpid(surv[i], &st, WNOHANG) == 0, "survivor %d ended (%s) after %s",
				i, status_str(st, buf, sizeof(buf)), ctx);
		}
		if ((k & 7) == 7)
			REQUIRE(info_clients(d.sock) == 2, "DaemonInfo: %d clients after %s (the 2 "
				"survivors expected)", info_clients(d.sock), ctx);
	}
	printf("kill9: %d victims killed in %lld ms (%d inside a ring operation, %d in the hot "
	       "loop); sheafd repaired each, returning %lld sheaves (%d repairs had to return "
	       "one)\n", kills, (long long)(now_ms() - t0), kills - hot, hot,
	       (long long)sheaves_total, must_return);
	REQUIRE(kills - hot >= 3 * (RS_NR - 1) / 2 && must_return > 0, "too few kills at stops");

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
	       "(counted %llu); the victims held %lld..%lld when killed\n", (int)r->check->ok,
	       (unsigned long long)r->check->objects, (unsigned long long)r->check->free_in_slabs,
	       (unsigned long long)r->check->in_sheaves, (unsigned long long)r->check->in_use,
	       (unsigned long long)r->check->counted_in_use, (long long)lo_total,
	       (long long)hi_total);
	REQUIRE(r->check->ok, "pool check after %d kills: %s", kills, r->check->problem);
	/* Nothing lost: in use are exactly the objects the victims held
	 * (their sheaves went back with the repairs). */
	REQUIRE((int64_t)r->check->in_use >= lo_total && (int64_t)r->check->in_use <= hi_total,
		"%llu objects in use after %d kills; the victims held %lld..%lld",
		(unsigned long long)r->check->in_use, kills, (long long)lo_total,
		(long long)hi_total);
	leaked = r->check->in_use;
	b.count = r->check->objects - leaked;
	sheaf__v1__response__free_unpacked(r, NULL);

	/* Every other object of the slabs can be allocated again, by a
	 * newcomer (nothing wedged, nothing handed out twice). */
	b.sock = d.sock;
	REQUIRE(pipe(b.ready) == 0 && pipe(b.stop) == 0, "pipe");
	{
		pid_t p = fork_child(newcomer, &b);

		close(b.stop[0]);
		REQUIRE(read_full(b.ready[0], &g, 1, 120000) == 0,
			"the newcomer did not allocate %llu objects", (unsigned long long)b.count);
		r = raw_check(d.sock);
		REQUIRE(r->check->ok && r->check->in_use == leaked + b.count,
			"pool check with the newcomer's %llu objects: ok %d, in use %llu (%llu "
			"expected): %s", (unsigned long long)b.count, (int)r->check->ok,
			(unsigned long long)r->check->in_use,
			(unsigned long long)(leaked + b.count), r->check->problem);
		sheaf__v1__response__free_unpacked(r, NULL);
		close(b.stop[1]);
		reap_ok(p, 60000, "newcomer after the kills");
	}
	printf("  a newcomer allocated the %llu other objects\n", (unsigned long long)b.count);
	wait_no_clients(&d, 60000);
	r = raw_check(d.sock);
	REQUIRE(r->check->ok && r->check->in_use == leaked,
		"pool check after the newcomer: ok %d, in use %llu (%llu expected): %s",
		(int)r->check->ok, (unsigned long long)r->check->in_use,
		(unsigned long long)leaked, r->check->problem);
	sheaf__v1__response__free_unpacked(r, NULL);
	dmn_stop(&d, 10000);
	dmn_cleanup(&d);
	munmap(sh, sizeof(*sh));
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
