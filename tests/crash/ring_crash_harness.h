/*
 * ring_crash_harness.h - the kill-point harness of test_ring_crash: a world
 * of two rings (ids 0 and 1), an owner table of NSHEAVES sheaves and one
 * intent record per child in a MAP_SHARED|MAP_ANONYMOUS mapping; forked
 * children (owner CHILD_ID(i)) that move sheaves between the rings forever
 * and stop themselves at a chosen stop point; the parent's repair after a
 * death (ring_hdr_reclaim, then the put-back into ring 0); the census of the
 * quiescent rings; and the verdict, which collects violations by kind and
 * reports them at the end of a test.  Only test_ring_crash.c includes it
 * (and links it: Makefile, TEST_EXTRA);
 * ring_crash_harness.c (built with -DSHEAF_TEST_HOOKS) holds the code.  The
 * calls fail the test (ck_assert) when a system call fails.
 */
#ifndef SHEAF_TESTS_RING_CRASH_HARNESS_H
#define SHEAF_TESTS_RING_CRASH_HARNESS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "shm/ring.h"

#define NSHEAVES   64
#define MAX_CHILD  2
#define CHILD_ID(i) (1000u + (uint32_t)(i))   /* OW_SETUP, OW_RECLAIM: util_ring.h */

extern int san;                          /* SHEAF_SAN set: scale down */
extern _Atomic uint64_t *kills_total;    /* shared by all test processes */

/* CLOCK_MONOTONIC in microseconds (sleep_us is util_proc.h's). */
uint64_t now_us(void);

/* ---- the shared world ---------------------------------------------------- */

struct shared {
	_Alignas(SHEAF_CACHELINE) struct ring_intent intent[MAX_CHILD];
	_Alignas(SHEAF_CACHELINE) struct ring_intent parent_in;   /* setup/reclaimer */
	struct {
		_Alignas(SHEAF_CACHELINE) _Atomic uint64_t n;
	} progress[MAX_CHILD];
	_Alignas(SHEAF_CACHELINE) _Atomic uint32_t done[MAX_CHILD];
	uint32_t arg[MAX_CHILD];                    /* op argument (a sheaf) */
	_Alignas(SHEAF_CACHELINE) _Atomic uint32_t owners[NSHEAVES];
};

struct world {
	struct shared *sh;
	struct shm_ring *ring[2];
	uint32_t slots[2];
	void *map;
	size_t len;
};

/* The owner of sheaf @s. */
uint32_t owner_of(struct world *w, uint32_t s);
/* Empty both rings, then put every sheaf into ring 0 (as OW_SETUP). */
void world_reset(struct world *w);
/* Map a world whose rings have @slots0 and @slots1 slots, and reset it. */
void world_init(struct world *w, uint32_t slots0, uint32_t slots1);
void world_fini(struct world *w);

/* ---- violations ------------------------------------------------------------- */

/*
 * Violations are grouped by kind (a short fixed string); the first example
 * of each kind is kept.  A test goes on after a violation (the world is
 * reset) until its time budget or its budget of stuck children runs out.
 */
#define MAX_KINDS 16

struct verdict {
	unsigned n, kills, stuck;
	unsigned min_kills;      /* fewer kills than this: the test failed */
	int phantoms_ok;         /* live peers may leave phantom slots */
	unsigned phantoms;       /* phantom slots found (and cleared) */
	unsigned holes;          /* consumed slots found between head and tail */
	uint64_t t0;
	struct {
		const char *kind;
		unsigned n;
		char first[320];
	} k[MAX_KINDS];
	unsigned nkinds;
};

/* @min_kills: the test tested nothing with fewer; @phantoms_ok: two
 * children run at once (see check_quiescent). */
void verdict_start(struct verdict *v, unsigned min_kills, int phantoms_ok);
/* Record a violation of @kind (a fixed string); the first of each kind
 * keeps its message. */
void violation(struct verdict *v, const char *kind, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Whether a test should go on: stuck children cost stall_us() each. */
int verdict_more(const struct verdict *v);
/* Print the test's figures and violations; fail it if there were any, or
 * fewer kills than v->min_kills. */
void verdict_report(struct verdict *v, const char *test);

/* ---- checks and repair -------------------------------------------------------- */

/* With no child alive: the census of the rings, ring_hdr_clear_stale, a round
 * trip on each ring; a failure is recorded and the world reset. */
void check_quiescent(struct world *w, struct verdict *v, const char *ctx);
/* Repair after child @idx died: ring_hdr_reclaim, then put what it returns
 * back into ring 0 as the reclaimer (into ring 1 when ring 0 is full by
 * ring_hdr_count: a phantom or hole costs ring 0 a slot).  Safe while other
 * children still run. */
void repair(struct world *w, int idx, struct verdict *v, const char *ctx);

/* ---- children ---------------------------------------------------------------- */

/* First call of a forked child: die with the parent (@parent: its pid
 * before the fork). */
void child_start(pid_t parent);
/* Fork child @idx; with @step != 0 it stops itself the @occ-th time it
 * reaches @step. */
pid_t spawn_child(struct world *w, int idx, int step, unsigned occ);
/* SIGKILL and reap; a child that died some other way is a violation. */
void kill_reap(struct world *w, pid_t pid, struct verdict *v, const char *ctx);

enum { W_PROGRESS = 0, W_STOPPED = 1, W_ENDED = -1, W_STUCK = -2 };

/* Wait until child @idx has made @delta more steps of progress or has
 * stopped itself (W_STOPPED; UINT64_MAX: only that); W_ENDED, W_STUCK. */
int wait_child(struct world *w, pid_t pid, int idx, uint64_t delta);
/* Record a wait that did not end as @want. */
void wait_verdict(struct verdict *v, int rc, int want, const char *who,
		  const char *ctx);
/* The name of stop point @step; "free" for 0 (no stop point). */
const char *step_name(int step);
/* Fork child @idx stopping at (@step, @occ), wait for the stop, check the
 * intent.  Returns the pid, or -1 (recorded; child killed) on failure. */
pid_t spawn_stopped(struct world *w, int idx, int step, unsigned occ,
		    struct verdict *v, const char *ctx);

#endif
