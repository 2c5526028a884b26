/*
 * ring_crash_harness.c - the kill-point harness of test_ring_crash (declared,
 * with what each call does, in ring_crash_harness.h): the shared world, the
 * verdict, the census of the quiescent rings, the repair after a death and
 * the children that move sheaves until they are stopped or killed.  Built
 * with -DSHEAF_TEST_HOOKS (the Makefile): the children stop themselves
 * through ring_stop_hook.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shm/ring.h"
#include "tests/crash/ring_crash_harness.h"
#include "tests/helpers/util_proc.h"       /* sleep_us */
#include "tests/helpers/util_ring.h"

int san;                          /* SHEAF_SAN set: scale down */
_Atomic uint64_t *kills_total;    /* shared by all test processes */

uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* How long a child may go without progress before it counts as stuck. */
static unsigned stall_us(void)
{
	return san ? 3000000u : 1000000u;
}

/* ---- the shared world ---------------------------------------------------- */

static size_t round_line(size_t n)
{
	return (n + SHEAF_CACHELINE - 1) & ~(size_t)(SHEAF_CACHELINE - 1);
}

static struct shm_ring *ring_of(void *ctx, uint32_t id)
{
	struct world *w = ctx;

	return id < 2 ? w->ring[id] : NULL;
}

uint32_t owner_of(struct world *w, uint32_t s)
{
	return atomic_load(&w->sh->owners[s]);
}

/* Empty both rings, then put every sheaf into ring 0 (as OW_SETUP). */
void world_reset(struct world *w)
{
	memset(w->map, 0, w->len);
	ring_init(w->ring[0], 0, w->slots[0], NSHEAVES);
	ring_init(w->ring[1], 1, w->slots[1], NSHEAVES);
	for (uint32_t s = 0; s < NSHEAVES; s++) {
		atomic_store(&w->sh->owners[s], OW_SETUP);
		ck_assert_int_eq(ring_hdr_put(w->ring[0], w->sh->owners, s, OW_SETUP,
					      &w->sh->parent_in), 0);
	}
}

void world_init(struct world *w, uint32_t slots0, uint32_t slots1)
{
	size_t off0 = round_line(sizeof(struct shared));
	size_t off1 = off0 + round_line(ring_bytes(slots0));

	w->len = off1 + round_line(ring_bytes(slots1));
	w->map = mmap(NULL, w->len, PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert(w->map != MAP_FAILED);
	w->sh = w->map;
	w->ring[0] = (struct shm_ring *)((char *)w->map + off0);
	w->ring[1] = (struct shm_ring *)((char *)w->map + off1);
	w->slots[0] = slots0;
	w->slots[1] = slots1;
	world_reset(w);
}

void world_fini(struct world *w)
{
	munmap(w->map, w->len);
}

/* ---- violations ------------------------------------------------------------- */

/* @min_kills: the test tested nothing with fewer; @phantoms_ok: two
 * children run at once (see check_quiescent). */
void verdict_start(struct verdict *v, unsigned min_kills, int phantoms_ok)
{
	memset(v, 0, sizeof(*v));
	v->t0 = now_us();
	v->min_kills = min_kills;
	v->phantoms_ok = phantoms_ok;
}

void violation(struct verdict *v, const char *kind, const char *fmt, ...)
{
	unsigned i;
	va_list ap;

	v->n++;
	for (i = 0; i < v->nkinds; i++)
		if (strcmp(v->k[i].kind, kind) == 0)
			break;
	if (i == v->nkinds) {
		if (i == MAX_KINDS)
			return;
		v->nkinds++;
		v->k[i].kind = kind;
		va_start(ap, fmt);
		vsnprintf(v->k[i].first, sizeof(v->k[i].first), fmt, ap);
		va_end(ap);
	}
	v->k[i].n++;
}

/* Whether a test should go on: stuck children cost stall_us() each. */
int verdict_more(const struct verdict *v)
{
	return v->stuck < 6 && now_us() - v->t0 < (san ? 60000000u : 20000000u);
}

void verdict_report(struct verdict *v, const char *test)
{
	char msg[4096];
	size_t len = 0;

	atomic_fetch_add(kills_total, v->kills);
	printf("%s: %u kills, %u violations, %u phantom slots, %u holes, %.1f s\n", test,
	       v->kills, v->n, v->phantoms, v->holes, (double)(now_us() - v->t0) * 1e-6);
	for (unsigned i = 0; i < v->nkinds && len < sizeof(msg); i++) {
		printf("  %ux %s; first: %s\n", v->k[i].n, v->k[i].kind, v->k[i].first);
		len += (size_t)snprintf(msg + len, sizeof(msg) - len, "[%ux %s; first: %s] ",
					v->k[i].n, v->k[i].kind, v->k[i].first);
	}
	fflush(stdout);
	ck_assert_msg(v->n == 0, "%s: %u violations in %u kills: %s", test, v->n,
		      v->kills, msg);
	ck_assert_msg(v->kills >= v->min_kills, "%s: only %u kills (at least %u "
		      "expected): the test did not test", test, v->kills, v->min_kills);
}

/* ---- checks -------------------------------------------------------------------- */

/*
 * With no child alive, the rings as they are (no ring_hdr_clear_stale first:
 * production has no such pass): every sheaf owned by RING(0) or RING(1)
 * and held by exactly one full slot of that ring, or with @copies_ok by
 * more (the extra ones are phantom copies, counted into *@copies: a
 * stale-intent repair that won its sheaf from a live re-put, whose slot
 * CAS then landed, after the reclaimer had put the sheaf back into the
 * same ring; docs/design.md, "The ring"); any other full slot is a phantom
 * (its sheaf no longer "in" that ring), counted into *@phantoms; a
 * consumed slot between head and tail is a hole, counted into *@holes;
 * ring_hdr_count equal to the full slots and holes; no ring wedged.  Returns
 * 0, or 1 with @kind and @why filled in.
 */
static int census(struct world *w, int copies_ok, uint32_t *phantoms, uint32_t *copies,
		  uint32_t *holes_out, const char **kind, char *why, size_t len)
{
	uint32_t in_ring[2] = { 0, 0 }, copies_in[2] = { 0, 0 };

	*phantoms = 0;
	*copies = 0;
	*holes_out = 0;
	for (uint32_t s = 0; s < NSHEAVES; s++) {
		uint32_t o = owner_of(w, s), h;

		if (!OWNER_IS_RING(o) || OWNER_RING_ID(o) > 1) {
			*kind = "sheaf in no ring";
			snprintf(why, len, "sheaf %u owned by %#x%s", s, o,
				 o >= CHILD_ID(0) && o < CHILD_ID(MAX_CHILD) ?
				 " (a dead child)" : o == OW_RECLAIM ? " (the reclaimer)" : "");
			return 1;
		}
		h = slots_holding(w->ring[OWNER_RING_ID(o)], s);
		if (h == 0 || (h > 1 && !copies_ok)) {
			*kind = h == 0 ? "sheaf lost: owner names a ring, no slot holds it"
				       : "sheaf in two slots (phantom copy)";
			snprintf(why, len, "sheaf %u owner RING(%u) but in %u slots of "
				 "that ring (in %u of the other)%s", s, OWNER_RING_ID(o),
				 h, slots_holding(w->ring[OWNER_RING_ID(o) ^ 1], s),
				 h == 0 ? ": lost" : ": duplicated");
			return 1;
		}
		in_ring[OWNER_RING_ID(o)]++;
		copies_in[OWNER_RING_ID(o)] += h - 1;
	}
	for (uint32_t k = 0; k < 2; k++) {
		struct shm_ring *r = w->ring[k];

		uint32_t full = 0, holes = 0, head = atomic_load(&r->head);

		/* Each sheaf "in" r holds one slot (and maybe copies): the
		 * rest are phantoms. */
		*phantoms += full_slots(r) - in_ring[k] - copies_in[k];
		*copies += copies_in[k];
		/* Positions [head, tail): each full for its lap, or a hole (a
		 * phantom cleared by a repair's ring_hdr_clear_stale behind head,
		 * consumed, costing its slot until head passes it). */
		for (uint32_t p = head; p != atomic_load(&r->tail) && full + holes <= r->size;
		     p++) {
			uint32_t i = p & r->mask;
			uint32_t seq = (uint32_t)(atomic_load(&r->slots[i]) >> 32);

			full += seq == p - i + 1;
			holes += seq == p - i + r->size;
		}
		*holes_out += holes;
		if (ring_hdr_count(r) != full + holes || full != full_slots(r)) {
			*kind = "ring_hdr_count inexact when quiescent";
			snprintf(why, len, "ring %u: ring_hdr_count %u for %u full slots, %u of them "
				 "in [head, tail), and %u holes (%u sheaves; tail %u, head %u)",
				 k, ring_hdr_count(r), full_slots(r), full, holes, in_ring[k],
				 atomic_load(&r->tail), head);
			return 1;
		}
		if (put_would_spin(r)) {
			*kind = "ring wedged: tail on a consumed slot";
			snprintf(why, len, "ring %u wedged: tail %u sits on a consumed "
				 "slot (head %u); every ring_hdr_put spins forever", k,
				 atomic_load(&r->tail), atomic_load(&r->head));
			return 1;
		}
	}
	return 0;
}

/* census() with no phantom allowed, and copies and holes only if @holes_ok
 * (ring_hdr_clear_stale clears neither: a copy's sheaf is "in" its ring). */
static int census_exact(struct world *w, int holes_ok, const char **kind, char *why,
			size_t len)
{
	uint32_t ph, copies, holes;

	if (census(w, holes_ok, &ph, &copies, &holes, kind, why, len))
		return 1;
	if (ph == 0 && ((copies == 0 && holes == 0) || holes_ok))
		return 0;
	*kind = "phantom slots or holes after ring_hdr_clear_stale";
	snprintf(why, len, "%u full slots hold sheaves no longer in their ring, %u "
		 "copies, %u holes between head and tail", ph, copies, holes);
	return 1;
}

/* A get/put round trip on each ring, as the reclaimer. */
static int round_trip(struct world *w, char *why, size_t len)
{
	for (uint32_t k = 0; k < 2; k++) {
		struct shm_ring *r = w->ring[k];
		uint32_t had = ring_hdr_count(r), s;
		int rc;

		s = ring_hdr_get(r, w->sh->owners, OW_RECLAIM, &w->sh->parent_in);
		if (s == SHEAF_ID_NONE) {
			if (had == 0)
				continue;
			snprintf(why, len, "ring %u: get -> none with %u sheaves", k, had);
			return 1;
		}
		if (s >= NSHEAVES || owner_of(w, s) != OW_RECLAIM) {
			snprintf(why, len, "ring %u: get -> %u not ours", k, s);
			return 1;
		}
		rc = ring_hdr_put(r, w->sh->owners, s, OW_RECLAIM, &w->sh->parent_in);
		if (rc != 0 || owner_of(w, s) != OWNER_RING(k)) {
			snprintf(why, len, "ring %u: put back -> %d", k, rc);
			return 1;
		}
	}
	return 0;
}

/*
 * With no child alive: the census of the rings as the repairs left them;
 * phantom slots and holes only where the test runs two children at once (a
 * repair racing a live re-put of the same sheaf leaves a phantom; when a
 * repair's ring_hdr_clear_stale clears one behind head it becomes a hole until
 * head passes it: docs/design.md, "The ring"), and then ring_hdr_clear_stale
 * must clear exactly the phantoms (holes stay); then the census with no
 * phantom, a round trip on each ring and the census again.  On failure
 * record it and start from scratch.
 */
void check_quiescent(struct world *w, struct verdict *v, const char *ctx)
{
	const char *kind = "round trip failed";
	uint32_t ph = 0, copies = 0, holes = 0, cleared;
	char why[256];

	if (census(w, v->phantoms_ok, &ph, &copies, &holes, &kind, why, sizeof(why))) {
		violation(v, kind, "%s (as the repair left the rings): %s", ctx, why);
		world_reset(w);
		return;
	}
	if ((ph != 0 || holes != 0) && !v->phantoms_ok)
		violation(v, "phantom slot left by the repair", "%s: %u full slots hold "
			  "sheaves no longer in their ring, %u holes between head and "
			  "tail (production keeps them)", ctx, ph, holes);
	v->phantoms += ph + copies;
	v->holes += holes;
	cleared = ring_hdr_clear_stale(w->ring[0], w->sh->owners) +
		  ring_hdr_clear_stale(w->ring[1], w->sh->owners);
	if (cleared != ph)
		violation(v, "ring_hdr_clear_stale cleared other than the phantoms",
			  "%s: %u phantom slots, %u cleared", ctx, ph, cleared);
	if (census_exact(w, v->phantoms_ok, &kind, why, sizeof(why)) ||
	    round_trip(w, why, sizeof(why)) ||
	    census_exact(w, v->phantoms_ok, &kind, why, sizeof(why))) {
		violation(v, kind, "%s: %s", ctx, why);
		world_reset(w);
	}
}

/*
 * Repair after child @idx died: ring_hdr_reclaim, then put what it returns back
 * into ring 0 as the reclaimer, or into ring 1 when ring 0 is full, as the
 * children do.  Ring 0 has a slot per sheaf, but a phantom (a copy too) or
 * a hole costs one until a get passes it (docs/design.md, "The ring"), and
 * a child that meets ring 0 full cycles its sheaf through ring 1 and no
 * longer gets from ring 0: so with every other sheaf in ring 0, its last
 * one does not fit.  A refusal while ring_hdr_count says ring 0 is not full is
 * a violation.  Safe while other children still run.
 */
void repair(struct world *w, int idx, struct verdict *v, const char *ctx)
{
	uint32_t out[NSHEAVES], n;

	n = ring_hdr_reclaim(ring_of, w, w->sh->owners, NSHEAVES, &w->sh->intent[idx],
			     1, CHILD_ID(idx), OW_RECLAIM, out, NSHEAVES);
	if (atomic_load(&w->sh->intent[idx].op) != RING_OP_NONE)
		violation(v, "intent not cleared by reclaim", "%s", ctx);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t s = out[i];
		int rc;

		if (s >= NSHEAVES || owner_of(w, s) != OW_RECLAIM) {
			violation(v, "reclaimed sheaf not the reclaimer's", "%s: sheaf %u", ctx, s);
			continue;
		}
		if (put_would_spin(w->ring[0])) {
			violation(v, "ring 0 wedged at put-back", "%s: tail on a "
				  "consumed slot, cannot put back %u", ctx, s);
			continue;
		}
		rc = ring_hdr_put(w->ring[0], w->sh->owners, s, OW_RECLAIM, &w->sh->parent_in);
		if (rc == -ENOBUFS && ring_hdr_count(w->ring[0]) == w->slots[0])
			rc = ring_hdr_put(w->ring[1], w->sh->owners, s, OW_RECLAIM,
					  &w->sh->parent_in);
		if (rc != 0)
			violation(v, "put-back refused", "%s: sheaf %u -> %d (ring 0: "
				  "%u full slots, ring_hdr_count %u; ring 1: %u, %u)", ctx, s,
				  rc, full_slots(w->ring[0]), ring_hdr_count(w->ring[0]),
				  full_slots(w->ring[1]), ring_hdr_count(w->ring[1]));
	}
	for (uint32_t s = 0; s < NSHEAVES; s++)
		if (owner_of(w, s) == CHILD_ID(idx))
			violation(v, "sheaf still owned by the dead after reclaim",
				  "%s: sheaf %u", ctx, s);
}

/* ---- children ---------------------------------------------------------------- */

static int hook_step;
static unsigned hook_occ, hook_seen;

static void stop_hook(int step)
{
	if (step == hook_step && ++hook_seen == hook_occ)
		raise(SIGSTOP);
}

/* Forever: get from ring a, put into the other; the next get is from where
 * the last put went.  A full ring keeps the sheaf in hand and tries the
 * other one. */
static _Noreturn void child_loop(struct world *w, int idx)
{
	const uint32_t me = CHILD_ID(idx);
	struct ring_intent *in = &w->sh->intent[idx];
	_Atomic uint64_t *progress = &w->sh->progress[idx].n;
	uint32_t a = (uint32_t)idx & 1;

	for (;;) {
		uint32_t s = ring_hdr_get(w->ring[a], w->sh->owners, me, in), b;

		if (s == SHEAF_ID_NONE) {
			a ^= 1;
			continue;
		}
		atomic_fetch_add_explicit(progress, 1, memory_order_relaxed);
		b = a ^ 1;
		while (ring_hdr_put(w->ring[b], w->sh->owners, s, me, in) == -ENOBUFS)
			b ^= 1;
		atomic_fetch_add_explicit(progress, 1, memory_order_relaxed);
		a = b;
	}
}

void child_start(pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(0);
}

/* Fork child @idx; with @step != 0 it stops itself the @occ-th time it
 * reaches @step. */
pid_t spawn_child(struct world *w, int idx, int step, unsigned occ)
{
	pid_t parent = getpid(), pid;

	atomic_store(&w->sh->progress[idx].n, 0);
	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		child_start(parent);
		hook_step = step;
		hook_occ = occ;
		hook_seen = 0;
		if (step != 0)
			ring_stop_hook = stop_hook;
		child_loop(w, idx);
	}
	return pid;
}

/* SIGKILL and reap; a child that died some other way is a violation. */
void kill_reap(struct world *w, pid_t pid, struct verdict *v, const char *ctx)
{
	int st;

	(void)w;
	kill(pid, SIGKILL);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
		violation(v, "child ended by itself", "%s: status %#x", ctx, st);
	v->kills++;
}


/*
 * Wait until child @idx (@pid) has made @delta more steps of progress or has
 * stopped itself (W_STOPPED; pass UINT64_MAX to wait only for that).
 * W_ENDED: it exited or died; W_STUCK: no progress for stall_us().
 */
int wait_child(struct world *w, pid_t pid, int idx, uint64_t delta)
{
	_Atomic uint64_t *p = &w->sh->progress[idx].n;
	uint64_t start = atomic_load(p), last = start, t_last = now_us();

	for (;;) {
		int st;
		pid_t r = waitpid(pid, &st, WUNTRACED | WNOHANG);
		uint64_t cur = atomic_load(p), t = now_us();

		if (r == pid)
			return WIFSTOPPED(st) ? W_STOPPED : W_ENDED;
		if (cur - start >= delta)
			return W_PROGRESS;
		if (cur != last) {
			last = cur;
			t_last = t;
		} else if (t - t_last > stall_us()) {
			return W_STUCK;
		}
		sleep_us(50);
	}
}

/* Record a wait that did not end as @want. */
void wait_verdict(struct verdict *v, int rc, int want, const char *who,
			 const char *ctx)
{
	if (rc == want)
		return;
	if (rc == W_STUCK) {
		v->stuck++;
		violation(v, "child stuck: no progress while peers were dead, "
			  "stopped or repaired", "%s: %s stuck", ctx, who);
	} else {
		violation(v, "child did not behave as expected", "%s: %s %s", ctx, who,
			  rc == W_ENDED ? "ended" : rc == W_STOPPED ? "stopped" :
			  "made progress instead of stopping");
	}
}

const char *step_name(int step)
{
	return step == 0 ? "free" : ring_step_name(step);
}

/* The intent op a child stopped at @step must show (repair depends on it
 * being recorded before the owner store or claim, and gone when done);
 * UINT32_MAX where the protocol leaves it open. */
static uint32_t intent_at(int step)
{
	switch (step) {
	case RS_PUT_INTENT: case RS_PUT_OWNER:
		return RING_OP_PUT;
	case RS_GET_INTENT: case RS_GET_SLOT:
		return RING_OP_GET;
	case RS_PUT_DONE: case RS_GET_DONE:
		return RING_OP_NONE;
	default:
		return UINT32_MAX;
	}
}

/* Fork child @idx stopping at (@step, @occ), wait for the stop, check the
 * intent.  Returns the pid, or -1 (recorded; child killed) on failure. */
pid_t spawn_stopped(struct world *w, int idx, int step, unsigned occ,
			   struct verdict *v, const char *ctx)
{
	pid_t pid = spawn_child(w, idx, step, occ);
	int rc = wait_child(w, pid, idx, UINT64_MAX);
	uint32_t op;

	if (rc != W_STOPPED) {
		wait_verdict(v, rc, W_STOPPED, "child stopping itself", ctx);
		kill_reap(w, pid, v, ctx);
		repair(w, idx, v, ctx);
		return -1;
	}
	op = atomic_load(&w->sh->intent[idx].op);
	if (intent_at(step) != UINT32_MAX && op != intent_at(step))
		violation(v, "wrong intent op at a stop point", "%s: stopped at %s "
			  "with intent op %u", ctx, step_name(step), op);
	return pid;
}
