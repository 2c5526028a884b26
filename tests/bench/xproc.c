/*
 * xproc.c - sheafbench's workloads that fork processes:
 *   w3p          the W3 one-way flow between two processes: a producer child
 *                (pinned to the first CPU) allocates, writes the first byte
 *                and pushes each pointer on the SPSC ring; a consumer child
 *                (second CPU) pops and frees.
 *   --procs N    W4: N children run w1 or w2 at the same time.
 *
 * The parent maps one MAP_SHARED|MAP_ANONYMOUS region before forking (start
 * gate, timestamps, per-child results, the ring), then forks; each child
 * connects to sheafd on its own (sheaf, sheaf0), or uses the mutex pool the
 * parent made before the fork.  The parent never connects: it forks a short
 * "probe" child before and after the run that connects, reads the cache's
 * statistics and (after) runs sheaf_pool_check, so that it can prove that
 * no object was lost (in_use back where it was) and report this run's
 * counters.  A child that fails makes the parent kill the others and fail;
 * children die with the parent (PR_SET_PDEATHSIG).
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/bench/bench.h"

#define GATE_POLL_NS 200000   /* parent's poll while children get ready */

struct xgate {
	_Atomic int ready;      /* children waiting at the gate */
	_Atomic int go;
};

struct probe {
	bool check;             /* also run sheaf_pool_check */
	struct sheaf_stats st;
};

struct xshared {
	struct xgate gate;
	uint64_t t_start;               /* w3p: set by the producer */
	uint64_t t_end;                 /* w3p: set by the consumer */
	uint64_t refused;               /* w3p: set by the consumer */
	struct result res[MAX_PROCS];   /* --procs: one per child */
	struct probe probe;
	struct spsc_ring ring;
};

struct kids {
	pid_t pid[MAX_PROCS + 2];
	const char *role[MAX_PROCS + 2];
	bool done[MAX_PROCS + 2];
	int n;
};

/* What a child runs; @idx is its index among the children. */
typedef void (*child_fn)(const struct options *o, struct contender *c,
			 struct xshared *xs, int idx);

/* ---- the shared region and the gate ------------------------------------ */

static struct xshared *xshared_map(void)
{
	struct xshared *xs = mmap(NULL, sizeof(*xs), PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (xs == MAP_FAILED)
		die("mmap of the shared control region: %s", strerror(errno));
	return xs;                      /* zero-filled: an empty ring */
}

void xgate_wait(struct xgate *g)
{
	unsigned spins = 0;

	atomic_fetch_add_explicit(&g->ready, 1, memory_order_acq_rel);
	while (!atomic_load_explicit(&g->go, memory_order_acquire))
		spin_wait(&spins);
}

/* ---- children ---------------------------------------------------------- */

static void describe_status(int status, char *buf, size_t len)
{
	if (WIFEXITED(status))
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "was killed by signal %d (%s)",
			 WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "ended with wait status 0x%x", status);
}

static void kids_kill_rest(struct kids *k)
{
	for (int i = 0; i < k->n; i++)
		if (!k->done[i]) {
			kill(k->pid[i], SIGKILL);
			waitpid(k->pid[i], NULL, 0);
			k->done[i] = true;
		}
}

static int kids_find(const struct kids *k, pid_t pid)
{
	for (int i = 0; i < k->n; i++)
		if (k->pid[i] == pid)
			return i;
	return -1;
}

/* Reap one child (@block: wait for one); a child that did not exit with
 * status 0 fails the run.  Returns false when nothing was reaped. */
static bool kids_reap_one(struct kids *k, bool block)
{
	char how[96];
	int status, i;
	pid_t pid;

	pid = waitpid(-1, &status, block ? 0 : WNOHANG);
	if (pid == 0 || (pid < 0 && errno == EINTR))
		return false;
	if (pid < 0)
		die("waitpid: %s", strerror(errno));
	i = kids_find(k, pid);
	if (i < 0)
		return true;            /* not ours (cannot happen) */
	k->done[i] = true;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return true;
	kids_kill_rest(k);
	describe_status(status, how, sizeof(how));
	die("%s child (pid %d) %s", k->role[i], (int)pid, how);
}

static int kids_live(const struct kids *k)
{
	int live = 0;

	for (int i = 0; i < k->n; i++)
		live += !k->done[i];
	return live;
}

static void kids_wait_all(struct kids *k)
{
	while (kids_live(k))
		kids_reap_one(k, true);
}

static void kids_spawn(struct kids *k, const char *role, child_fn fn,
		       const struct options *o, struct contender *c,
		       struct xshared *xs)
{
	pid_t parent = getpid(), pid;
	int idx = k->n;

	fflush(NULL);                   /* no stdio buffer twice */
	pid = fork();
	if (pid < 0) {
		kids_kill_rest(k);
		die("fork: %s", strerror(errno));
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		fn(o, c, xs, idx);
		fflush(NULL);
		exit(0);
	}
	k->pid[idx] = pid;
	k->role[idx] = role;
	k->done[idx] = false;
	k->n++;
}

/* Wait until @n children are at the gate (failing if one ends first),
 * then open it. */
static void kids_open_gate(struct kids *k, struct xgate *g, int n)
{
	const struct timespec poll = { 0, GATE_POLL_NS };

	while (atomic_load_explicit(&g->ready, memory_order_acquire) < n) {
		if (kids_reap_one(k, false)) {
			kids_kill_rest(k);
			die("a child ended before the start gate opened");
		}
		nanosleep(&poll, NULL);
	}
	atomic_store_explicit(&g->go, 1, memory_order_release);
}

/* ---- the probe: sheafd's view of the cache, from a short-lived child --- */

static void probe_child(const struct options *o, struct contender *c,
			struct xshared *xs, int idx)
{
	struct contender pc = { 0 };

	(void)c;
	(void)idx;
	contender_open(&pc, o);
	sheaf_stats_or_die(&pc, &xs->probe.st);
	if (xs->probe.check)
		sheaf_check_or_die(&pc, "after the run");
	contender_close(&pc);
}

/* Statistics of the run's sheafd cache; @after: also check the pool. */
static void probe(const struct options *o, struct xshared *xs, bool after,
		  struct sheaf_stats *st)
{
	struct kids k = { 0 };

	xs->probe.check = after;
	kids_spawn(&k, after ? "probe (after the run)" : "probe (before the run)",
		   probe_child, o, NULL, xs);
	kids_wait_all(&k);
	*st = xs->probe.st;
}

static bool probed(const struct options *o)
{
	return o->socket && (o->alloc == ALLOC_SHEAF || o->alloc == ALLOC_SHEAF0);
}

/* After the run: nothing lost, and @st becomes this run's counters. */
static void prove_after(const struct options *o, struct contender *c,
			struct xshared *xs, const struct sheaf_stats *before,
			struct sheaf_stats *st)
{
	if (probed(o)) {
		probe(o, xs, true, st);
		if (st->in_use != before->in_use)
			die("%s: %" PRIu64 " objects in use after the run, %"
			    PRIu64 " before", alloc_names[o->alloc], st->in_use,
			    before->in_use);
		stats_delta(st, before);
	} else if (c->mp && mpool_free_count(c->mp) != mpool_objects(c->mp)) {
		die("mutexpool: %u of %u objects free after the run",
		    mpool_free_count(c->mp), mpool_objects(c->mp));
	}
}

/* A child's contender: the parent's mutex pool, or its own connection. */
static void child_contender(const struct options *o, const struct contender *c,
			    struct contender *mine)
{
	if (c && c->mp) {
		*mine = *c;
		return;
	}
	*mine = (struct contender){ 0 };
	contender_open(mine, o);
}

static void child_contender_close(const struct contender *parent,
				  struct contender *mine)
{
	if (!(parent && parent->mp))
		contender_close(mine);
}

/* ---- w3p --------------------------------------------------------------- */

static inline __attribute__((always_inline))
void w3p_produce(const struct contender *c, struct spsc_ring *ring,
		 uint64_t n, enum family f)
{
	uint64_t head = 0, tail_seen = 0;

	for (uint64_t i = 0; i < n; i++)
		ring_push(ring, &head, &tail_seen, obj_alloc(c, f));
}

static inline __attribute__((always_inline))
uint64_t w3p_consume(const struct contender *c, struct spsc_ring *ring,
		     uint64_t n, enum family f)
{
	uint64_t tail = 0, head_seen = 0, refused = 0;

	for (uint64_t i = 0; i < n; i++)
		refused += obj_free(c, f, ring_pop(ring, &tail, &head_seen));
	return refused;
}

static void w3p_pin(int idx)
{
	int cpu[2];

	if (pick_cpus(cpu, 2) == 2)
		pin_self(cpu[idx]);
}

static void w3p_producer(const struct options *o, struct contender *c,
			 struct xshared *xs, int idx)
{
	struct contender mine;

	w3p_pin(idx);
	child_contender(o, c, &mine);
	xgate_wait(&xs->gate);
	xs->t_start = now_ns();
	if (uses_sheaf(&mine))
		w3p_produce(&mine, &xs->ring, o->count, FAM_SHEAF);
	else
		w3p_produce(&mine, &xs->ring, o->count, FAM_MPOOL);
	child_contender_close(c, &mine);
}

static void w3p_consumer(const struct options *o, struct contender *c,
			 struct xshared *xs, int idx)
{
	struct contender mine;

	w3p_pin(idx);
	child_contender(o, c, &mine);
	xgate_wait(&xs->gate);
	if (uses_sheaf(&mine))
		xs->refused = w3p_consume(&mine, &xs->ring, o->count, FAM_SHEAF);
	else
		xs->refused = w3p_consume(&mine, &xs->ring, o->count, FAM_MPOOL);
	xs->t_end = now_ns();
	check_refused_frees(&mine, xs->refused);
	child_contender_close(c, &mine);
}

struct result run_w3p(const struct options *o, struct contender *c,
		      struct sheaf_stats *st)
{
	struct result r = { .metric = "mobj_per_s", .unit = "Mobj/s",
			    .count = o->count };
	struct xshared *xs = xshared_map();
	struct sheaf_stats before = { 0 };
	struct kids k = { 0 };

	if (probed(o))
		probe(o, xs, false, &before);
	if (o->alloc == ALLOC_MPOOL)
		contender_open(c, o);   /* before the fork: both children use it */
	kids_spawn(&k, "w3p producer", w3p_producer, o, c, xs);
	kids_spawn(&k, "w3p consumer", w3p_consumer, o, c, xs);
	kids_open_gate(&k, &xs->gate, 2);
	kids_wait_all(&k);
	prove_after(o, c, xs, &before, st);
	r.seconds = (double)(xs->t_end - xs->t_start) / 1e9;
	r.value = (double)o->count / r.seconds / 1e6;
	munmap(xs, sizeof(*xs));
	return r;
}

/* ---- --procs N: W4 ----------------------------------------------------- */

static void procs_child(const struct options *o, struct contender *c,
			struct xshared *xs, int idx)
{
	struct contender mine;
	int cpu[MAX_PROCS];
	int ncpu = pick_cpus(cpu, MAX_PROCS);
	struct result r;

	if (ncpu >= 2)
		pin_self(cpu[idx % ncpu]);
	child_contender(o, c, &mine);
	mine.gate = &xs->gate;
	if (o->workload == WL_W1)
		r = run_w1(&mine, o->count);
	else
		r = run_w2(&mine, (size_t)o->batch, o->count);
	if (uses_sheaf(&mine) && !mine.connected) {
		struct sheaf_stats st;  /* a local pool of its own: prove here */

		sheaf_stats_or_die(&mine, &st);
		if (st.in_use)
			die("%" PRIu64 " objects in use after the run", st.in_use);
		sheaf_check_or_die(&mine, "after the run");
	}
	xs->res[idx] = r;
	child_contender_close(c, &mine);
}

/* Million operations per second of one child (w1: pairs). */
static double per_proc_rate(const struct result *r)
{
	return (double)r->count / r->seconds / 1e6;
}

struct result run_procs(const struct options *o, struct contender *c,
			struct sheaf_stats *st)
{
	struct result r = { .metric = "mops_per_proc_s", .unit = "Mops/proc/s",
			    .procs = o->procs };
	struct xshared *xs = xshared_map();
	struct sheaf_stats before = { 0 };
	struct kids k = { 0 };
	double sum = 0;

	if (probed(o))
		probe(o, xs, false, &before);
	if (o->alloc == ALLOC_MPOOL)
		contender_open(c, o);   /* one pool shared by all children */
	for (unsigned i = 0; i < o->procs; i++)
		kids_spawn(&k, "--procs worker", procs_child, o, c, xs);
	kids_open_gate(&k, &xs->gate, (int)o->procs);
	kids_wait_all(&k);
	prove_after(o, c, xs, &before, st);
	for (unsigned i = 0; i < o->procs; i++) {
		r.per_proc[i] = per_proc_rate(&xs->res[i]);
		sum += r.per_proc[i];
		if (xs->res[i].seconds > r.seconds)
			r.seconds = xs->res[i].seconds;
	}
	r.count = xs->res[0].count;
	r.rounds = xs->res[0].rounds;
	r.value = sum / o->procs;
	munmap(xs, sizeof(*xs));
	return r;
}
