/*
 * test_ring_crash.c - crash repair of the sheaf ring with real processes:
 * the test cases.  The harness they share (the world in a shared mapping,
 * the children, the repair, the census and the verdict) is in
 * ring_crash_harness.c; the single-step machinery of the last case is here.
 *
 * Two rings (ids 0 and 1), the owner table of 64 sheaves and one intent
 * record per child live in a MAP_SHARED|MAP_ANONYMOUS mapping.  Forked
 * children (owner 1000 + i) move sheaves between the rings forever (get
 * from one ring, put into the other, alternating) and are SIGKILLed:
 *   - stopped at every stop point (ring_stop_hook raises SIGSTOP at the
 *     n-th arrival at a step), for several n;
 *   - at random times;
 *   - with a second child running through the kill and the repair, and
 *     killed (or stopped) later itself;
 *   - after stalling at a stop point while a peer runs, then resuming
 *     (the peer must make progress meanwhile: the ring is lock-free);
 *   - after every single instruction of one put or get (ptrace
 *     single-step), for normal, full-ring, stale-slot and empty cases.
 * After each death the parent runs ring_hdr_reclaim for the dead owner and puts
 * what it returns back into ring 0 (ring 1 when ring 0 is full); when no
 * child is alive it checks that every sheaf sits in exactly one slot of the
 * ring its owner names (with two children, maybe more: a phantom copy), that
 * the counts are exact and that both rings still round-trip a sheaf.  Each
 * violation is recorded (then the state is reset and the run continues) and
 * reported at the end of its test.  SHEAF_SAN (non-empty) scales down.
 */
#include <check.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shm/ring.h"
#include "tests/crash/ring_crash_harness.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_proc.h"       /* sleep_us */
#include "tests/helpers/util_ring.h"

static uint64_t rng_state;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* ---- tests ---------------------------------------------------------------------- */

static const unsigned occs[] = { 1, 2, 7, 50 };
#define NOCCS (sizeof(occs) / sizeof(occs[0]))

START_TEST(test_stop_point_kills)
{
	struct verdict v;
	struct world w;
	const int rounds = san ? 2 : 3;
	char ctx[96];

	verdict_start(&v, (RS_NR - 1) * NOCCS, 0);   /* one round at least */
	world_init(&w, 64, 64);
	for (int round = 0; round < rounds && verdict_more(&v); round++)
		for (int step = 1; step < RS_NR && verdict_more(&v); step++)
			for (unsigned o = 0; o < NOCCS; o++) {
				pid_t pid;

				snprintf(ctx, sizeof(ctx), "killed at %s #%u",
					 step_name(step), occs[o]);
				pid = spawn_stopped(&w, 0, step, occs[o], &v, ctx);
				if (pid > 0) {
					kill_reap(&w, pid, &v, ctx);
					repair(&w, 0, &v, ctx);
				}
				check_quiescent(&w, &v, ctx);
			}
	world_fini(&w);
	verdict_report(&v, "stop-point kills");
}
END_TEST

/* Random kills; half of them with a 32-slot ring 1, so puts meet a full
 * ring and take the -ENOBUFS path. */
START_TEST(test_random_kills)
{
	struct verdict v;
	struct world w;
	const unsigned n = san ? 720 : 800;
	char ctx[96];

	verdict_start(&v, 100, 0);
	for (int small = 0; small < 2; small++) {
		world_init(&w, 64, small ? 32 : 64);
		for (unsigned k = 0; k < n / 2 && verdict_more(&v); k++) {
			unsigned us = (unsigned)(rnd() % 2001);
			pid_t pid = spawn_child(&w, 0, 0, 0);

			snprintf(ctx, sizeof(ctx), "random kill after %u us (ring 1 of "
				 "%u slots)", us, w.slots[1]);
			wait_verdict(&v, wait_child(&w, pid, 0, 1), W_PROGRESS, "child", ctx);
			sleep_us(us);
			kill_reap(&w, pid, &v, ctx);
			repair(&w, 0, &v, ctx);
			check_quiescent(&w, &v, ctx);
		}
		world_fini(&w);
	}
	verdict_report(&v, "random kills");
}
END_TEST

/* ---- the stale-intent race, in one process ---------------------------------- */

static jmp_buf die_jmp;
static struct world *race_w;
static struct verdict *race_v;

/* Y "dies" at RS_PUT_SLOT: its slot CAS is done, its PUT intent stays. */
static void die_at_put_slot(int step)
{
	if (step == RS_PUT_SLOT)
		longjmp(die_jmp, 1);
}

/* X is between its owner CAS and its slot CAS: Y's whole repair runs. */
static void repair_y_mid_put(int step)
{
	if (step != RS_PUT_OWNER)
		return;
	ring_stop_hook = NULL;
	repair(race_w, 1, race_v, "Y repaired while X re-puts its sheaf");
}

/*
 * The race behind a rare test_two_children failure, made deterministic.  Y
 * put sheaf B into ring 0 and died after its slot CAS (its PUT intent
 * stale); X took B and is re-putting it into ring 0 when Y's repair runs:
 * the repair wins the owner CAS and the reclaimer puts B back, then X's
 * slot CAS lands too, so two slots of ring 0 hold B (docs/design.md, "The
 * ring": a phantom copy).  Then all the other sheaves come back into ring
 * 0 and X dies holding one, A: ring 0 (64 slots for 64 sheaves) holds 63
 * sheaves and the copy, so A's put-back into it is refused and must go to
 * ring 1 (as the children do), and the census must take the copy for the
 * phantom it is.
 */
START_TEST(test_put_back_past_a_phantom_copy)
{
	const uint32_t a = NSHEAVES - 2, b = NSHEAVES - 1;
	struct shared *sh;
	struct verdict v;
	struct world w;
	uint32_t s;

	verdict_start(&v, 0, 1);
	world_init(&w, 64, 64);
	sh = w.sh;
	/* Everything but A and B into ring 1; X takes A, Y takes B. */
	for (uint32_t k = 0; k < NSHEAVES - 2; k++) {
		s = ring_hdr_get(w.ring[0], sh->owners, OW_SETUP, &sh->parent_in);
		ck_assert_uint_eq(s, k);
		ck_assert_int_eq(ring_hdr_put(w.ring[1], sh->owners, s, OW_SETUP,
					      &sh->parent_in), 0);
	}
	ck_assert_uint_eq(ring_hdr_get(w.ring[0], sh->owners, CHILD_ID(0), &sh->intent[0]), a);
	ck_assert_uint_eq(ring_hdr_get(w.ring[0], sh->owners, CHILD_ID(1), &sh->intent[1]), b);
	/* Y puts B and dies after its slot CAS. */
	ring_stop_hook = die_at_put_slot;
	if (setjmp(die_jmp) == 0)
		ck_abort_msg("Y's put of B did not reach RS_PUT_SLOT: %d",
			     ring_hdr_put(w.ring[0], sh->owners, b, CHILD_ID(1), &sh->intent[1]));
	ring_stop_hook = NULL;
	ck_assert_uint_eq(atomic_load(&sh->intent[1].op), RING_OP_PUT);
	/* X takes B; Y's repair runs while X puts it back. */
	ck_assert_uint_eq(ring_hdr_get(w.ring[0], sh->owners, CHILD_ID(0), &sh->intent[0]), b);
	race_w = &w;
	race_v = &v;
	ring_stop_hook = repair_y_mid_put;
	ck_assert_int_eq(ring_hdr_put(w.ring[0], sh->owners, b, CHILD_ID(0), &sh->intent[0]), 0);
	ring_stop_hook = NULL;
	ck_assert_uint_eq(owner_of(&w, b), OWNER_RING(0));
	ck_assert_uint_eq(slots_holding(w.ring[0], b), 2);
	/* The rest back into ring 0: 63 sheaves and B's copy fill its 64 slots. */
	while ((s = ring_hdr_get(w.ring[1], sh->owners, OW_SETUP, &sh->parent_in)) !=
	       SHEAF_ID_NONE)
		ck_assert_int_eq(ring_hdr_put(w.ring[0], sh->owners, s, OW_SETUP,
					      &sh->parent_in), 0);
	ck_assert_uint_eq(full_slots(w.ring[0]), 64);
	/* X dies holding A. */
	ck_assert_uint_eq(owner_of(&w, a), CHILD_ID(0));
	repair(&w, 0, &v, "X died holding A, ring 0 full with B's copy");
	if (owner_of(&w, a) != OWNER_RING(1))
		violation(&v, "A not put back into ring 1", "owner %#x", owner_of(&w, a));
	check_quiescent(&w, &v, "after X's repair");
	world_fini(&w);
	verdict_report(&v, "put-back past a phantom copy");
}
END_TEST

/*
 * Two children on the same rings: Y is killed (at a stop point or at a random
 * time) and repaired while X runs (or sits stopped mid-operation at its own
 * stop point); X must keep making progress; then X is killed and repaired;
 * then the census.
 */
START_TEST(test_two_children)
{
	struct verdict v;
	struct world w;
	const unsigned rounds = san ? 60 : 120;
	char ctx[128];

	verdict_start(&v, 40, 1);
	world_init(&w, 64, 64);
	for (unsigned k = 0; k < rounds && verdict_more(&v); k++) {
		int xstep = (k & 1) ? 1 + (int)(rnd() % (RS_NR - 1)) : 0;
		unsigned xocc = 1 + (unsigned)(rnd() % 3000);
		int ystep = (k & 2) ? 1 + (int)(rnd() % (RS_NR - 1)) : 0;
		unsigned yocc = occs[rnd() % NOCCS];
		int x_stopped = 0, rc;
		pid_t x, y;

		snprintf(ctx, sizeof(ctx), "round %u: Y killed at %s #%u, X at %s #%u",
			 k, step_name(ystep), yocc, step_name(xstep), xocc);
		x = spawn_child(&w, 0, xstep, xocc);
		rc = wait_child(&w, x, 0, 1);
		x_stopped = rc == W_STOPPED && xstep != 0;
		if (!x_stopped)
			wait_verdict(&v, rc, W_PROGRESS, "X", ctx);
		if (ystep != 0) {
			y = spawn_stopped(&w, 1, ystep, yocc, &v, ctx);
		} else {
			y = spawn_child(&w, 1, 0, 0);
			wait_verdict(&v, wait_child(&w, y, 1, 1), W_PROGRESS, "Y", ctx);
			sleep_us((unsigned)(rnd() % 2001));
		}
		if (y > 0) {
			kill_reap(&w, y, &v, ctx);
			repair(&w, 1, &v, ctx);          /* X still live */
		}
		if (!x_stopped) {
			/* X goes on after Y's death and repair (or stops itself). */
			rc = wait_child(&w, x, 0, xstep != 0 ? UINT64_MAX : 500);
			wait_verdict(&v, rc, xstep != 0 ? W_STOPPED : W_PROGRESS,
				     "X after Y's death and repair", ctx);
			if (xstep == 0)
				sleep_us((unsigned)(rnd() % 2001));
		}
		kill_reap(&w, x, &v, ctx);
		repair(&w, 0, &v, ctx);
		check_quiescent(&w, &v, ctx);
	}
	world_fini(&w);
	verdict_report(&v, "two children");
}
END_TEST

/*
 * Y stops at a stop point mid-operation; X must keep making progress
 * meanwhile (ring.h: never waits on another thread).  Then Y resumes and
 * must make progress too; both are killed, repaired, and checked.
 */
START_TEST(test_stall_then_resume)
{
	static const unsigned socc[] = { 1, 7 };
	struct verdict v;
	struct world w;
	const int rounds = san ? 1 : 2;
	char ctx[128];

	verdict_start(&v, (RS_NR - 1) * 2 * 2, 1);   /* one round at least */
	world_init(&w, 64, 64);
	for (int round = 0; round < rounds; round++)
		for (int step = 1; step < RS_NR && verdict_more(&v); step++)
			for (unsigned o = 0; o < 2; o++) {
				pid_t x, y;

				snprintf(ctx, sizeof(ctx), "Y stalled at %s #%u, then resumed",
					 step_name(step), socc[o]);
				y = spawn_stopped(&w, 1, step, socc[o], &v, ctx);
				if (y < 0) {
					check_quiescent(&w, &v, ctx);
					continue;
				}
				x = spawn_child(&w, 0, 0, 0);
				wait_verdict(&v, wait_child(&w, x, 0, 2000), W_PROGRESS,
					     "X (while Y stopped)", ctx);
				kill(y, SIGCONT);
				wait_verdict(&v, wait_child(&w, y, 1, 200), W_PROGRESS,
					     "Y (resumed)", ctx);
				sleep_us((unsigned)(rnd() % 1001));
				kill_reap(&w, y, &v, ctx);
				kill_reap(&w, x, &v, ctx);
				repair(&w, 1, &v, ctx);
				repair(&w, 0, &v, ctx);
				check_quiescent(&w, &v, ctx);
			}
	world_fini(&w);
	verdict_report(&v, "stall then resume");
}
END_TEST

/* ---- every instruction (ptrace single-step) ------------------------------------------ */

enum scen { SC_PUT, SC_PUT_FULL, SC_GET, SC_GET_STALE, SC_GET_EMPTY, SC_NR };
static const char *const scen_name[SC_NR] = {
	"put", "put into full ring", "get", "get past a stale head slot",
	"get from empty ring",
};

/* Bring the world into the state before the child's one operation. */
static void scen_setup(struct world *w, enum scen sc)
{
	struct shared *sh = w->sh;
	uint32_t exp;

	world_reset(w);
	switch (sc) {
	case SC_PUT_FULL:
		/* Fill ring 1 (32 slots), then hand the child one more. */
		for (uint32_t k = 0; k < w->slots[1]; k++) {
			uint32_t s = ring_hdr_get(w->ring[0], sh->owners, OW_SETUP, &sh->parent_in);
			ck_assert_int_eq(ring_hdr_put(w->ring[1], sh->owners, s, OW_SETUP,
						      &sh->parent_in), 0);
		}
		/* fall through */
	case SC_PUT:
		sh->arg[0] = ring_hdr_get(w->ring[0], sh->owners, CHILD_ID(0), &sh->parent_in);
		ck_assert_uint_lt(sh->arg[0], NSHEAVES);
		break;
	case SC_GET_STALE:
		/* The head sheaf was claimed by a consumer that never cleared its
		 * slot; the parent plays that consumer (owner OW_SETUP). */
		exp = OWNER_RING(0);
		ck_assert(atomic_compare_exchange_strong(&sh->owners[0], &exp, OW_SETUP));
		break;
	case SC_GET:
	case SC_GET_EMPTY:
	case SC_NR:
		break;
	}
}

/*
 * After the child is gone and repaired: give back what the scenario's
 * stand-in consumer holds.  Its stale slot (sheaf 0, claimed by OW_SETUP)
 * is the one phantom the scenario made: still there unless the child's get
 * went past it or the repair (ring_hdr_reclaim) cleared it; ring_hdr_clear_stale
 * must clear exactly it.
 */
static void scen_finish(struct world *w, enum scen sc, struct verdict *v, const char *ctx)
{
	if (sc == SC_GET_STALE && owner_of(w, 0) == OW_SETUP) {
		uint32_t left = slots_holding(w->ring[0], 0) + slots_holding(w->ring[1], 0);
		uint32_t cleared = ring_hdr_clear_stale(w->ring[0], w->sh->owners) +
				   ring_hdr_clear_stale(w->ring[1], w->sh->owners);

		if (left > 1 || cleared != left)
			violation(v, "the scenario's stale slot not cleared exactly",
				  "%s: %u slots hold the stale sheaf 0, %u cleared", ctx,
				  left, cleared);
		ring_hdr_put(w->ring[0], w->sh->owners, 0, OW_SETUP, &w->sh->parent_in);
	}
}

static _Noreturn void stepped_child(struct world *w, enum scen sc, pid_t parent)
{
	struct shared *sh = w->sh;
	struct ring_intent *in = &sh->intent[0];

	child_start(parent);
	if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0)
		_exit(3);
	raise(SIGSTOP);
	switch (sc) {
	case SC_PUT:
	case SC_PUT_FULL:
		(void)ring_hdr_put(w->ring[1], sh->owners, sh->arg[0], CHILD_ID(0), in);
		break;
	case SC_GET:
	case SC_GET_STALE:
		(void)ring_hdr_get(w->ring[0], sh->owners, CHILD_ID(0), in);
		break;
	case SC_GET_EMPTY:
		(void)ring_hdr_get(w->ring[1], sh->owners, CHILD_ID(0), in);
		break;
	case SC_NR:
		break;
	}
	atomic_store(&sh->done[0], 1);
	for (;;)
		pause();
}

/* Where an instruction pointer is, as "function+offset"; returns the
 * function's name, NULL when outside ring.c (or the ip is unknown). */
static const char *where(unsigned long ip, char *buf, size_t len)
{
	static const struct { const char *name; void *fn; } fns[] = {
		{ "ring_hdr_put", (void *)ring_hdr_put }, { "ring_hdr_get", (void *)ring_hdr_get },
		{ "ring_hdr_holds", (void *)ring_hdr_holds },
		{ "ring_hdr_clear_stale", (void *)ring_hdr_clear_stale },
		{ "ring_hdr_repair_intent", (void *)ring_hdr_repair_intent },
		{ "ring_hdr_reclaim", (void *)ring_hdr_reclaim },
		{ "ring_init", (void *)ring_init },
		/* What the wrappers above call (ring.h, struct ring_ref). */
		{ "ring_put", (void *)ring_put }, { "ring_get", (void *)ring_get },
		{ "ring_holds", (void *)ring_holds },
		{ "ring_clear_stale", (void *)ring_clear_stale },
		{ "ring_repair_intent", (void *)ring_repair_intent },
		{ "ring_reclaim", (void *)ring_reclaim },
	};
	const char *best = NULL;
	unsigned long off = 0;

	for (unsigned k = 0; k < sizeof(fns) / sizeof(fns[0]); k++) {
		unsigned long a = (unsigned long)fns[k].fn;

		if (ip >= a && (best == NULL || ip - a < off)) {
			best = fns[k].name;
			off = ip - a;
		}
	}
	if (best != NULL && off < 0x2000) {
		snprintf(buf, len, "%s+%#lx", best, off);
		return best;
	}
	snprintf(buf, len, "%#lx (outside ring.c)", ip);
	return NULL;
}

/* child_ip() knows the registers of this architecture. */
#if defined(__x86_64__)
#define CHILD_IP_KNOWN 1
#else
#define CHILD_IP_KNOWN 0
#endif

static unsigned long child_ip(pid_t pid)
{
#if defined(__x86_64__)
	struct user_regs_struct regs;

	if (ptrace(PTRACE_GETREGS, pid, NULL, &regs) == 0)
		return regs.rip;
#else
	(void)pid;
#endif
	return 0;
}

#define MAX_STEPS 200000

/*
 * Fork the stepped child, let it execute @steps instructions of its one
 * operation (all of it if @steps is UINT32_MAX), then SIGKILL it.  Returns
 * the number of instructions executed; *ip where it was killed, *finished
 * whether the operation had completed.  Returns UINT32_MAX if ptrace is
 * unavailable.  With @changed (calibration), changed[k] is set when
 * instruction k changed the shared mapping.
 */
static uint32_t step_and_kill(struct world *w, enum scen sc, uint32_t steps,
			      unsigned long *ip, int *finished, struct verdict *v,
			      unsigned char *changed)
{
	char *prev = changed != NULL ? malloc(w->len) : NULL;

	pid_t pid, parent = getpid();
	uint32_t n = 0;
	int st;

	atomic_store(&w->sh->done[0], 0);
	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		stepped_child(w, sc, parent);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	if (WIFEXITED(st))
		return UINT32_MAX;      /* no ptrace here */
	ck_assert(WIFSTOPPED(st) && WSTOPSIG(st) == SIGSTOP);
	if (prev != NULL)
		memcpy(prev, w->map, w->len);
	while (n < steps && !atomic_load(&w->sh->done[0])) {
		ck_assert_int_eq(ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL), 0);
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		ck_assert_msg(WIFSTOPPED(st), "stepped child ended (status %#x)", st);
		ck_assert_uint_lt(n, MAX_STEPS);
		if (prev != NULL && memcmp(prev, w->map, w->len) != 0) {
			changed[n] = 1;
			memcpy(prev, w->map, w->len);
		}
		n++;
	}
	free(prev);
	*finished = atomic_load(&w->sh->done[0]) != 0;
	*ip = child_ip(pid);
	kill(pid, SIGKILL);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFSIGNALED(st));
	v->kills++;
	return n;
}

/*
 * Kill after k instructions of one operation, for every k (sanitizer builds:
 * for every k right after an instruction that changed the shared mapping;
 * the state left between two such instructions is the same, and the
 * instrumented code is thousands of instructions per operation).
 */
/*
 * Without ptrace (a container refusing it) the test is a SKIP, which fails
 * unless SHEAF_TEST_SKIP_OK=1: never a pass without kills.  With it, each
 * operation must have been killed at least min_in_op times with the child
 * inside ring_hdr_put/ring_hdr_get, the operation not yet done.
 */
START_TEST(test_kill_at_every_instruction)
{
	static unsigned char changed[MAX_STEPS];
	const uint32_t min_in_op = san ? 3 : 20;
	const char *sanenv = getenv("SHEAF_SAN");
	const int tsan = sanenv != NULL && strcmp(sanenv, "thread") == 0;
	struct verdict v;
	struct world w;
	char ctx[192], at[64];

	verdict_start(&v, SC_NR * min_in_op, 0);
	world_init(&w, 64, 32);
	for (int sc = 0; sc < SC_NR; sc++) {
		unsigned long ip;
		int finished;
		uint32_t total, trials = 0, in_op = 0;

		/* Calibrate: how many instructions until the op is done, and
		 * which of them write the shared mapping. */
		memset(changed, 0, sizeof(changed));
		scen_setup(&w, (enum scen)sc);
		total = step_and_kill(&w, (enum scen)sc, UINT32_MAX, &ip, &finished,
				      &v, changed);
		if (total == UINT32_MAX) {
			world_fini(&w);
			SKIP("ptrace refused (PTRACE_TRACEME failed): no instruction-level "
			     "kills");
		}
		ck_assert_msg(finished, "%s: op did not finish", scen_name[sc]);
		repair(&w, 0, &v, scen_name[sc]);
		scen_finish(&w, (enum scen)sc, &v, scen_name[sc]);
		check_quiescent(&w, &v, scen_name[sc]);
		for (uint32_t k = 0; k <= total; k++) {
			const char *fn;
			uint32_t did;

			/* Killed after k instructions: the state instruction k-1 left. */
			if (san && k > 0 && k < total && !changed[k - 1])
				continue;
			trials++;
			scen_setup(&w, (enum scen)sc);
			did = step_and_kill(&w, (enum scen)sc, k, &ip, &finished, &v, NULL);
			fn = where(ip, at, sizeof(at));
			if (!finished && fn != NULL &&
			    (strcmp(fn, "ring_hdr_put") == 0 || strcmp(fn, "ring_hdr_get") == 0 ||
			     strcmp(fn, "ring_put") == 0 || strcmp(fn, "ring_get") == 0))
				in_op++;
			snprintf(ctx, sizeof(ctx), "%s, killed after %u/%u instructions "
				 "at %s%s", scen_name[sc], did, total, at,
				 finished ? " (op done)" : "");
			repair(&w, 0, &v, ctx);
			scen_finish(&w, (enum scen)sc, &v, ctx);
			check_quiescent(&w, &v, ctx);
		}
		printf("  %s: %u instructions, %u kills, %u inside ring_hdr_put/ring_hdr_get\n",
		       scen_name[sc], total, trials, in_op);
		/* Under TSan every shared store is a call into its runtime, so
		 * the instructions that change the mapping are all outside
		 * ring.c: where a kill lands cannot be told there. */
		if (CHILD_IP_KNOWN && !tsan && in_op < min_in_op)
			violation(&v, "too few kills inside the operation", "%s: %u kills "
				  "inside ring_hdr_put/ring_hdr_get, at least %u expected",
				  scen_name[sc], in_op, min_in_op);
	}
	world_fini(&w);
	verdict_report(&v, "kill at every instruction");
}
END_TEST

static Suite *crash_suite(void)
{
	Suite *su = suite_create("ring_crash");
	TCase *tc = tcase_create("crash");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_stop_point_kills);
	tcase_add_test(tc, test_random_kills);
	tcase_add_test(tc, test_two_children);
	tcase_add_test(tc, test_put_back_past_a_phantom_copy);
	tcase_add_test(tc, test_stall_then_resume);
	tcase_add_test(tc, test_kill_at_every_instruction);
	suite_add_tcase(su, tc);
	return su;
}

int main(void)
{
	const char *seed = getenv("SHEAF_SEED");
	int failed;

	san = test_san();
	rng_state = seed != NULL ? strtoull(seed, NULL, 0) : (uint64_t)time(NULL);
	if (rng_state == 0)
		rng_state = 1;
	printf("ring crash test: seed %llu (SHEAF_SEED to repeat)\n",
	       (unsigned long long)rng_state);
	kills_total = mmap(NULL, sizeof(*kills_total), PROT_READ | PROT_WRITE,
			   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (kills_total == MAP_FAILED)
		return 1;
	failed = run_suite(crash_suite());
	printf("ring crash test: %llu kills in total\n",
	       (unsigned long long)atomic_load(kills_total));
	return failed;
}
