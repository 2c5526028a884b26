/*
 * test_owned_queue_crash.c - owned caches (SHEAF_CACHE_OWNED) stay exact when
 * a process dies at any step of a shared queue's enqueue or dequeue (single,
 * burst, wait), or of an owned alloc or free, against a real sheafd:
 *
 *   steps    a victim process is stopped at each step of each operation
 *            (queue_stop_hook, owned_stop_hook: libsheaf-test.a's stop
 *            points; per-object steps at the first, a middle and the last
 *            object of a burst), on an MPMC and an SP/SC queue, and
 *            SIGKILLed there.  Once sheafd repaired it: the objects in use
 *            (the checker's walk, and its count) are exactly those in the
 *            queues' slots plus those the test still holds; every object
 *            tagged QUEUED is in a slot and every slot's object is tagged
 *            QUEUED; no tag names the dead victim or REPAIR.  Then the
 *            queues are drained (every free succeeds: nothing was freed
 *            under its slot) and nothing is in use.  Also two dequeuers
 *            racing for one object, one stalled between its staging and
 *            its CAS while the other, which took it, is killed.
 *   torture  workers doing random allocs, enqueues, dequeues (single,
 *            burst, wait) and frees of stamped objects on two MPMC queues
 *            of an owned cache are SIGKILLed at random points (>= 1000
 *            kills; SHEAF_OWNED_KILLS=N for more: `make torture-owned`),
 *            and replaced.  After the last: no stamp seen twice or torn,
 *            in use exactly what the slots hold, the tags agree, and after
 *            a drain nothing is in use and the cache's destroy succeeds.
 *
 * Child processes report through pipes, REQUIRE and exit statuses.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/internal.h"
#include "client/sheaf.h"
#include "shm/owner.h"
#include "shm/queue.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_proc.h"
#include "tests/helpers/util_rpc.h"

#define OBJ       64
#define QCAP      64u
#define QCAP2     8u

static sheaf_pool_t *parent_pool;

/* ---- the pool, seen from the test --------------------------------------------- */

static Sheaf__V1__Response *ask(const char *sock, Sheaf__V1__Request *rq)
{
	int fd = unix_connect(sock), rc = 0;
	Sheaf__V1__Response *r;

	REQUIRE(fd >= 0, "connect %s", sock);
	r = raw_rpc(fd, rq, 10000, &rc);
	REQUIRE(r != NULL, "rpc: %s", strerror(-rc));
	close(fd);
	return r;
}

static int destroy(const char *sock, const char *cache)
{
	Sheaf__V1__CacheDestroyRequest b = SHEAF__V1__CACHE_DESTROY_REQUEST__INIT;
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__Response *r;
	int st;

	b.name = (char *)cache;
	rq.body_case = SHEAF__V1__REQUEST__BODY_CACHE_DESTROY;
	rq.cache_destroy = &b;
	r = ask(sock, &rq);
	st = r->status;
	sheaf__v1__response__free_unpacked(r, NULL);
	return st;
}

/* The checker, required to pass: objects in use (walk and count agree). */
static uint64_t check_in_use(const char *sock, const char *ctx)
{
	Sheaf__V1__Response *r = raw_check(sock);
	uint64_t n = r->check->in_use;

	REQUIRE(r->check->ok, "%s: pool check: %s", ctx, r->check->problem);
	REQUIRE(r->check->counted_in_use == n, "%s: counted in use %llu, walk %llu", ctx,
		(unsigned long long)r->check->counted_in_use, (unsigned long long)n);
	sheaf__v1__response__free_unpacked(r, NULL);
	return n;
}

/* Until sheafd has repaired every client but @keep (attached ones). */
static void wait_clients(const char *sock, int keep)
{
	int64_t end = now_ms() + 30000;
	int n;

	while ((n = info_clients(sock)) != keep) {
		REQUIRE(n >= 0, "DaemonInfo failed");
		REQUIRE(now_ms() < end, "%d clients still attached 30 s after the kill", n);
		sleep_us(1000);
	}
}

/* The objects in filled slots of queue @name (the slots themselves, not
 * the hints). */
static uint64_t filled_slots(sheaf_pool_t *pool, const char *name, uint32_t *vals, uint64_t max)
{
	struct shm_pool *p = &pool->shm;
	int id = pool_queue_find(p, name);
	struct queue_ref q;
	uint64_t n = 0;

	REQUIRE(id >= 0, "queue %s", name);
	q = queue_ref_of(p, &p->queues[id]);
	for (uint32_t k = 0; k < q.size; k++) {
		uint64_t w = at_load_acquire(&q.slots[k]);

		if (((uint32_t)(w >> 32) & q.mask) == 1) {
			if (vals != NULL && n < max)
				vals[n] = (uint32_t)w;
			n++;
		}
	}
	return n;
}

struct tagcount {
	uint64_t queued, mine, repair, kept, other, queued_no_slot, slot_not_queued;
};

/* The tags of cache @c's objects, against the slots of @queues. */
static void count_tags(sheaf_pool_t *pool, uint32_t c, const char *const *queues, int nq,
		       struct tagcount *tc)
{
	struct shm_pool *p = &pool->shm;
	const struct shm_cache *sc = &p->caches[c];
	static uint32_t vals[2 * QCAP];
	uint64_t nv = 0;
	otag_t mine = owner_tag_client(pool->client);

	memset(tc, 0, sizeof(*tc));
	for (int i = 0; i < nq; i++)
		nv += filled_slots(pool, queues[i], vals + nv, 2 * QCAP - nv);
	for (uint32_t f = 0; f < p->frames_total; f++) {
		if (at_load_relaxed(&p->frame_owner[f]) != c)
			continue;
		for (uint32_t i = 0; i < sc->objs_per_slab; i++) {
			otag_t t = at_load_relaxed(&p->tags[(uint64_t)f * SLAB_MAX_OBJS + i]);
			uint32_t v = queue_value_at(pool_frame_off(p, f) + (uint64_t)i * sc->obj_size -
						    p->data_off);
			int in_slot = 0;

			for (uint64_t k = 0; k < nv; k++)
				in_slot |= vals[k] == v;
			if (t == OWNER_TAG_QUEUED) {
				tc->queued++;
				tc->queued_no_slot += !in_slot;
			} else if (in_slot) {
				tc->slot_not_queued++;
			}
			if (t == mine)
				tc->mine++;
			else if (t == OWNER_TAG_REPAIR)
				tc->repair++;
			else if (t == OWNER_TAG_KEPT)
				tc->kept++;
			else if (t != OWNER_TAG_NONE && t != OWNER_TAG_QUEUED)
				tc->other++;
		}
	}
}

/*
 * The pool after a repair: in use (checker) == objects in the slots of
 * @queues + @held (the test's); the tags agree.  Returns the slots' count.
 */
static uint64_t require_exact(const char *sock, sheaf_cache_t *c, const char *const *queues,
			      int nq, uint64_t held, const char *ctx)
{
	uint64_t in_use = check_in_use(sock, ctx), slots = 0;
	struct tagcount tc;

	for (int i = 0; i < nq; i++)
		slots += filled_slots(parent_pool, queues[i], NULL, 0);
	count_tags(parent_pool, c->id, queues, nq, &tc);
	REQUIRE(in_use == slots + held, "%s: %llu objects in use, but %llu in the queues' slots "
		"and %llu held by the test (%llu tagged QUEUED, %llu of them in no slot; %llu "
		"tags of another client)", ctx, (unsigned long long)in_use,
		(unsigned long long)slots, (unsigned long long)held,
		(unsigned long long)tc.queued, (unsigned long long)tc.queued_no_slot,
		(unsigned long long)tc.other);
	REQUIRE(tc.queued == slots && tc.queued_no_slot == 0 && tc.slot_not_queued == 0,
		"%s: %llu tagged QUEUED (%llu in no slot), %llu in slots (%llu not QUEUED)", ctx,
		(unsigned long long)tc.queued, (unsigned long long)tc.queued_no_slot,
		(unsigned long long)slots, (unsigned long long)tc.slot_not_queued);
	REQUIRE(tc.other == 0 && tc.repair == 0 && tc.kept == 0 && tc.mine == held,
		"%s: tags: %llu of another client, %llu REPAIR, %llu KEPT, %llu the test's "
		"(%llu held)", ctx, (unsigned long long)tc.other, (unsigned long long)tc.repair,
		(unsigned long long)tc.kept, (unsigned long long)tc.mine,
		(unsigned long long)held);
	return slots;
}

/* Dequeue and free everything in @q: the count. */
static uint64_t drain(sheaf_queue_t *q, sheaf_cache_t *c)
{
	uint64_t n = 0;
	void *o;
	int rc;

	while (sheaf_dequeue(q, &o) == 0) {
		rc = sheaf_free(c, o);
		REQUIRE(rc == 0, "free of a drained object: %s (freed under its slot)",
			strerror(-rc));
		n++;
	}
	return n;
}

/* ---- stopped at each step ----------------------------------------------------- */

enum op {
	OP_ENQ, OP_ENQ_BURST, OP_ENQ_WAIT, OP_ENQ_WAIT_PUT, OP_DEQ, OP_DEQ_BURST,
	OP_DEQ_WAIT, OP_ALLOC, OP_FREE, OP_FREE_OTHER
};
static const char *const op_name[] = {
	"enqueue", "enqueue_burst", "enqueue_wait", "enqueue_wait (room made)", "dequeue",
	"dequeue_burst", "dequeue_wait", "alloc", "free", "free of the test's objects"
};

struct kcase {
	enum op op;
	int step, occ;               /* stop at the occ-th time step is reached */
	int n;                       /* objects of the operation */
	int fill;                    /* objects in the queue before (-1: full) */
	unsigned qflags;
};

/* A victim's case and stop point, shared with the test (MAP_SHARED):
 * the test moves the stop of a victim that waits. */
struct vhook {
	struct kcase k;
	int hook_step, hook_occ, hook_seen;
	int hook_pause;              /* 0: say 'w', go on; 1: say 's', stop;
					2: say 's', go on when told, then say 'e' */
	int pipe_w, resume_r;
};

struct vshared {
	char sock[128];
	struct vhook v[2];
	uint64_t offs[256];          /* FREE_OTHER: the test's objects */
	_Atomic int freed;           /* FREE_OTHER: frees the victim finished */
};

static struct vshared *vs;
static struct vhook *vh;         /* this victim's */

static void stop_here(int step)
{
	char g;

	if (step != vh->hook_step || ++vh->hook_seen != vh->hook_occ)
		return;
	if (vh->hook_pause == 0) {      /* a wait: say so and go on */
		REQUIRE(write_full(vh->pipe_w, "w", 1) == 0, "pipe");
		return;
	}
	REQUIRE(write_full(vh->pipe_w, "s", 1) == 0, "pipe");
	if (vh->hook_pause == 2) {      /* stalled there until told */
		REQUIRE(read_full(vh->resume_r, &g, 1, 60000) == 0, "resume");
		return;
	}
	for (;;)
		pause();
}

/* A stop at @step's @occ-th time; @pause_there as hook_pause. */
static void arm(int step, int occ, int pause_there)
{
	vh->hook_step = step;
	vh->hook_occ = occ;
	vh->hook_seen = 0;
	vh->hook_pause = pause_there;
}

/* The stop points of @op: the owned cache's alloc and free, or the
 * queues'. */
static void hooks_on(enum op op)
{
	if (op >= OP_ALLOC)
		owned_stop_hook = stop_here;
	else
		queue_stop_hook = stop_here;
}

static int victim(void *argp)
{
	const struct kcase *k;
	sheaf_pool_t *pool;
	sheaf_cache_t *c;
	sheaf_queue_t *q;
	void *objs[256];
	int rc = 0, stall;

	vh = &vs->v[(uintptr_t)argp];
	k = &vh->k;
	stall = vh->hook_pause == 2;
	sheaf_disconnect(parent_pool);
	pool = child_connect(vs->sock, "victim");
	c = sheaf_cache_open(pool, "own");
	q = sheaf_queue_open(pool, k->qflags ? "qs" : "q");
	REQUIRE(c != NULL && q != NULL, "open: %s", strerror(errno));
	if (k->op <= OP_ENQ_WAIT_PUT || k->op == OP_FREE)
		for (int i = 0; i < k->n; i++)
			REQUIRE((objs[i] = sheaf_alloc(c)) != NULL, "alloc");
	if (k->op == OP_FREE_OTHER)
		for (int i = 0; i < k->n; i++)
			objs[i] = pool->shm.base + vs->offs[i];
	if (k->op == OP_ENQ_WAIT_PUT || k->op == OP_DEQ_WAIT)
		/* first a word when it waits, then the stop */
		arm(k->op == OP_DEQ_WAIT ? QS_DEQ_RECORD : QS_ENQ_TAGGED, 2, 0);
	else if (k->op == OP_ENQ_WAIT)
		arm(k->step, k->occ, 0);
	else
		arm(k->step, k->occ, stall ? 2 : 1);
	hooks_on(k->op);
	switch (k->op) {
	case OP_ENQ:
		rc = sheaf_enqueue(q, objs[0]);
		break;
	case OP_ENQ_BURST:
		rc = sheaf_enqueue_burst(q, objs, (unsigned)k->n);
		break;
	case OP_ENQ_WAIT:
	case OP_ENQ_WAIT_PUT:
		rc = sheaf_enqueue_wait(q, objs[0], -1);
		break;
	case OP_DEQ:
		rc = sheaf_dequeue(q, objs);
		break;
	case OP_DEQ_BURST:
		rc = sheaf_dequeue_burst(q, objs, (unsigned)k->n);
		break;
	case OP_DEQ_WAIT:
		rc = sheaf_dequeue_wait(q, objs, -1);
		break;
	case OP_ALLOC:
		for (int i = 0; i < k->n; i++)
			REQUIRE(sheaf_alloc(c) != NULL, "alloc");
		break;
	case OP_FREE:
	case OP_FREE_OTHER:
		for (int i = 0; i < k->n; i++) {
			REQUIRE(sheaf_free(c, objs[i]) == 0, "free");
			vs->freed++;
		}
		break;
	}
	if (stall) {                    /* resumed: done */
		REQUIRE(write_full(vh->pipe_w, "e", 1) == 0, "pipe");
		for (;;)
			pause();
	}
	/* Never here: each case stops at its step. */
	REQUIRE(0, "%s ended (%d) without reaching step %d (%d times)", op_name[k->op], rc,
		vh->hook_step, vh->hook_occ);
	return 1;
}

/* Wait for the victim's word @want. */
static void expect(int fd, char want, pid_t pid)
{
	char g = 0;

	if (read_full(fd, &g, 1, 30000) != 0 || g != want) {
		int st = 0;

		REQUIRE(0, "the victim (pid %d) did not report '%c' (got '%c'): %s", (int)pid,
			want, g ? g : '-', wait_pid(pid, 100, &st) == 1 ? "it ended" : "it hangs");
	}
}

/* One case: fill, victim, kill, repair, checks, drain. */
static void run_case(const char *sock, sheaf_cache_t *c, sheaf_queue_t *qs[2],
		     const struct kcase *k)
{
	static const char *const names[] = { "q", "qs" };
	sheaf_queue_t *q = qs[k->qflags ? 1 : 0];
	void *held[256];
	int nheld = 0, fill = k->fill < 0 ? (int)QCAP : k->fill, pfd[2], st;
	char ctx[160];
	pid_t pid;

	snprintf(ctx, sizeof(ctx), "%s (%s) stopped at step %d (time %d)", op_name[k->op],
		 k->qflags ? "SP/SC" : "MPMC", k->step, k->occ);
	for (int i = 0; i < fill; i++) {
		void *o = sheaf_alloc(c);

		REQUIRE(o != NULL && sheaf_enqueue(q, o) == 0, "%s: fill %d", ctx, i);
	}
	if (k->op == OP_FREE_OTHER)
		for (int i = 0; i < k->n; i++) {
			held[nheld] = sheaf_alloc(c);
			REQUIRE(held[nheld] != NULL, "alloc");
			vs->offs[nheld] = (uint64_t)((char *)held[nheld] - parent_pool->shm.base);
			nheld++;
		}
	vh = &vs->v[0];
	memset(vh, 0, sizeof(*vh));
	vh->k = *k;
	vh->hook_pause = 1;
	vs->freed = 0;
	REQUIRE(pipe(pfd) == 0, "pipe");
	vh->pipe_w = pfd[1];
	pid = fork_child(victim, (void *)(uintptr_t)0);
	close(pfd[1]);
	if (k->op == OP_ENQ_WAIT_PUT || k->op == OP_DEQ_WAIT) {
		void *o;

		expect(pfd[0], 'w', pid);
		sleep_ms(20);           /* asleep in its wait, or about to be */
		vh->hook_step = k->step;     /* the stop (the victim's copy is shared) */
		vh->hook_occ = k->occ;
		vh->hook_seen = 0;
		vh->hook_pause = 1;
		if (k->op == OP_DEQ_WAIT) {      /* something to take */
			o = sheaf_alloc(c);
			REQUIRE(o != NULL && sheaf_enqueue(q, o) == 0, "enqueue");
		} else {                        /* room to put it */
			REQUIRE(sheaf_dequeue(q, &o) == 0 && sheaf_free(c, o) == 0, "dequeue");
		}
		expect(pfd[0], 's', pid);
	} else if (k->op == OP_ENQ_WAIT) {
		expect(pfd[0], 'w', pid);
		sleep_ms(20);           /* asleep in its wait */
	} else {
		expect(pfd[0], 's', pid);
	}
	close(pfd[0]);
	kill(pid, SIGKILL);
	REQUIRE(wait_pid(pid, 10000, &st) == 1, "victim did not die");
	untrack(pid);
	wait_clients(sock, 1);
	/* The test's objects the victim did not free are the test's still
	 * (the one it was freeing is gone, by its free or the repair). */
	if (k->op == OP_FREE_OTHER) {
		int gone = vs->freed + 1;

		for (int i = gone; i < nheld; i++)
			held[i - gone] = held[i];
		nheld -= gone;
	}
	require_exact(sock, c, names, 2, (uint64_t)nheld, ctx);
	drain(qs[0], c);
	drain(qs[1], c);
	for (int i = 0; i < nheld; i++)
		REQUIRE(sheaf_free(c, held[i]) == 0, "%s: free of the test's object %d", ctx, i);
	REQUIRE(check_in_use(sock, ctx) == 0, "%s: objects in use after the drain", ctx);
}

/*
 * Two dequeuers race for one object: X stages it and stalls before its
 * CAS, D takes it and dies after counting it.  D's repair must free it
 * (X's staged value is a CAS that will lose), and X, resumed, loses,
 * finds the queue empty and holds nothing.
 */
static void race_case(const char *sock, sheaf_cache_t *c, sheaf_queue_t *q, int d_step)
{
	static const char *const names[] = { "q", "qs" };
	int px[2], pd[2], pr[2], st;
	pid_t x, dd;
	void *o = sheaf_alloc(c);
	char g = 0;

	REQUIRE(o != NULL && sheaf_enqueue(q, o) == 0, "enqueue");
	REQUIRE(pipe(px) == 0 && pipe(pd) == 0 && pipe(pr) == 0, "pipe");
	memset(&vs->v[1], 0, sizeof(vs->v[1]));
	vs->v[1].k = (struct kcase){ OP_DEQ, QS_DEQ_STAGED, 1, 1, 0, 0 };
	vs->v[1].hook_pause = 2;
	vs->v[1].pipe_w = px[1];
	vs->v[1].resume_r = pr[0];
	x = fork_child(victim, (void *)(uintptr_t)1);
	close(px[1]);
	close(pr[0]);
	expect(px[0], 's', x);
	memset(&vs->v[0], 0, sizeof(vs->v[0]));
	vs->v[0].k = (struct kcase){ OP_DEQ, d_step, 1, 1, 0, 0 };
	vs->v[0].hook_pause = 1;
	vs->v[0].pipe_w = pd[1];
	dd = fork_child(victim, (void *)(uintptr_t)0);
	close(pd[1]);
	expect(pd[0], 's', dd);
	close(pd[0]);
	kill(dd, SIGKILL);
	REQUIRE(wait_pid(dd, 10000, &st) == 1, "victim did not die");
	untrack(dd);
	wait_clients(sock, 2);
	require_exact(sock, c, names, 2, 0, "a dead dequeuer's object that a stalled one staged");
	REQUIRE(write_full(pr[1], "c", 1) == 0, "resume");
	REQUIRE(read_full(px[0], &g, 1, 30000) == 0 && g == 'e', "the stalled dequeuer did "
		"not end its dequeue ('%c')", g ? g : '-');
	require_exact(sock, c, names, 2, 0, "after the stalled dequeuer lost");
	close(px[0]);
	close(pr[1]);
	kill(x, SIGKILL);
	REQUIRE(wait_pid(x, 10000, &st) == 1, "victim did not die");
	untrack(x);
	wait_clients(sock, 1);
	require_exact(sock, c, names, 2, 0, "after both");
}

static void steps_run(void)
{
	static const struct kcase cases[] = {
		/* enqueue: room for it, or full (its tag goes back) */
		{ OP_ENQ, QS_ENQ_RECORD, 1, 1, 10, 0 },
		{ OP_ENQ, QS_ENQ_TAGGED, 1, 1, 10, 0 },
		{ OP_ENQ, QS_ENQ_SLOT, 1, 1, 10, 0 },
		{ OP_ENQ, QS_ENQ_PUT, 1, 1, 10, 0 },
		{ OP_ENQ, QS_ENQ_UNTAGGED, 1, 1, 10, 0 },
		{ OP_ENQ, QS_ENQ_DONE, 1, 1, 10, 0 },
		{ OP_ENQ, QS_ENQ_PUT, 1, 1, -1, 0 },
		{ OP_ENQ, QS_ENQ_UNTAGGED, 1, 1, -1, 0 },
		/* burst: 40 objects, 30 fit */
		{ OP_ENQ_BURST, QS_ENQ_TAGGED, 1, 40, 34, 0 },
		{ OP_ENQ_BURST, QS_ENQ_SLOT, 1, 40, 34, 0 },
		{ OP_ENQ_BURST, QS_ENQ_SLOT, 15, 40, 34, 0 },
		{ OP_ENQ_BURST, QS_ENQ_SLOT, 30, 40, 34, 0 },
		{ OP_ENQ_BURST, QS_ENQ_PUT, 1, 40, 34, 0 },
		{ OP_ENQ_BURST, QS_ENQ_UNTAGGED, 1, 40, 34, 0 },
		{ OP_ENQ_BURST, QS_ENQ_DONE, 1, 40, 34, 0 },
		/* more than one record's worth (64): the second chunk */
		{ OP_ENQ_BURST, QS_ENQ_TAGGED, 2, 100, 0, 0 },
		{ OP_ENQ_BURST, QS_ENQ_SLOT, 40, 100, 0, 0 },
		/* waiting, tagged QUEUED in no slot; woken, put */
		{ OP_ENQ_WAIT, QS_ENQ_TAGGED, 2, 1, -1, 0 },
		{ OP_ENQ_WAIT_PUT, QS_ENQ_SLOT, 1, 1, -1, 0 },
		{ OP_ENQ_WAIT_PUT, QS_ENQ_PUT, 1, 1, -1, 0 },
		/* dequeue */
		{ OP_DEQ, QS_DEQ_RECORD, 1, 1, 10, 0 },
		{ OP_DEQ, QS_DEQ_STAGED, 1, 1, 10, 0 },
		{ OP_DEQ, QS_DEQ_SLOT, 1, 1, 10, 0 },
		{ OP_DEQ, QS_DEQ_COUNTED, 1, 1, 10, 0 },
		{ OP_DEQ, QS_DEQ_GOT, 1, 1, 10, 0 },
		{ OP_DEQ, QS_DEQ_TAGGED, 1, 1, 10, 0 },
		{ OP_DEQ, QS_DEQ_DONE, 1, 1, 10, 0 },
		{ OP_DEQ_BURST, QS_DEQ_STAGED, 20, 40, 50, 0 },
		{ OP_DEQ_BURST, QS_DEQ_SLOT, 1, 40, 50, 0 },
		{ OP_DEQ_BURST, QS_DEQ_SLOT, 20, 40, 50, 0 },
		{ OP_DEQ_BURST, QS_DEQ_SLOT, 40, 40, 50, 0 },
		{ OP_DEQ_BURST, QS_DEQ_COUNTED, 20, 40, 50, 0 },
		{ OP_DEQ_BURST, QS_DEQ_GOT, 1, 40, 50, 0 },
		{ OP_DEQ_BURST, QS_DEQ_TAGGED, 1, 40, 50, 0 },
		{ OP_DEQ_BURST, QS_DEQ_DONE, 1, 40, 50, 0 },
		{ OP_DEQ_BURST, QS_DEQ_SLOT, 50, 100, 64, 0 },
		{ OP_DEQ_BURST, QS_DEQ_GOT, 2, 100, 64, 0 },
		{ OP_DEQ_WAIT, QS_DEQ_SLOT, 1, 1, 0, 0 },
		{ OP_DEQ_WAIT, QS_DEQ_GOT, 1, 1, 0, 0 },
		{ OP_DEQ_WAIT, QS_DEQ_TAGGED, 1, 1, 0, 0 },
		/* SP/SC: plain stores where MPMC has CASes */
		{ OP_ENQ, QS_ENQ_TAGGED, 1, 1, 10, SHEAF_QUEUE_SP | SHEAF_QUEUE_SC },
		{ OP_ENQ, QS_ENQ_SLOT, 1, 1, 10, SHEAF_QUEUE_SP | SHEAF_QUEUE_SC },
		{ OP_ENQ_BURST, QS_ENQ_SLOT, 15, 40, 34, SHEAF_QUEUE_SP | SHEAF_QUEUE_SC },
		{ OP_ENQ_BURST, QS_ENQ_UNTAGGED, 1, 40, 34, SHEAF_QUEUE_SP | SHEAF_QUEUE_SC },
		{ OP_DEQ, QS_DEQ_STAGED, 1, 1, 10, SHEAF_QUEUE_SP | SHEAF_QUEUE_SC },
		{ OP_DEQ, QS_DEQ_SLOT, 1, 1, 10, SHEAF_QUEUE_SP | SHEAF_QUEUE_SC },
		{ OP_DEQ_BURST, QS_DEQ_SLOT, 20, 40, 50, SHEAF_QUEUE_SP | SHEAF_QUEUE_SC },
		{ OP_DEQ_BURST, QS_DEQ_GOT, 1, 40, 50, SHEAF_QUEUE_SP | SHEAF_QUEUE_SC },
		/* alloc and free (capacity-4 sheaves: the first alloc and every
		 * fifth go through the slow path, the others the owned fast
		 * path) */
		{ OP_ALLOC, OS_ALLOC_TAGGED, 1, 12, 0, 0 },
		{ OP_ALLOC, OS_ALLOC_TAGGED, 3, 12, 0, 0 },
		{ OP_ALLOC, OS_ALLOC_TAGGED, 6, 12, 0, 0 },
		{ OP_ALLOC, OS_ALLOC_POPPED, 1, 12, 0, 0 },
		{ OP_ALLOC, OS_ALLOC_POPPED, 3, 12, 0, 0 },
		{ OP_ALLOC, OS_ALLOC_POPPED, 6, 12, 0, 0 },
		{ OP_FREE, OS_FREE_CLAIMED, 1, 12, 0, 0 },
		{ OP_FREE, OS_FREE_CLAIMED, 6, 12, 0, 0 },
		{ OP_FREE, OS_FREE_PUSHED, 1, 12, 0, 0 },
		{ OP_FREE, OS_FREE_PUSHED, 6, 12, 0, 0 },
		{ OP_FREE, OS_FREE_DONE, 1, 12, 0, 0 },
		{ OP_FREE, OS_FREE_DONE, 6, 12, 0, 0 },
		{ OP_FREE_OTHER, OS_FREE_CLAIMED, 1, 12, 0, 0 },
		{ OP_FREE_OTHER, OS_FREE_CLAIMED, 6, 12, 0, 0 },
		{ OP_FREE_OTHER, OS_FREE_PUSHED, 6, 12, 0, 0 },
		{ OP_FREE_OTHER, OS_FREE_DONE, 6, 12, 0, 0 },
	};
	const char *argv[] = { NULL, "--foreground", "--socket", NULL, "--nodes", "1",
			       "--size", "256M", NULL };
	struct sheaf_cache_config cfg = { .capacity = 4, .flags = SHEAF_CACHE_OWNED };
	sheaf_queue_t *qs[2];
	sheaf_cache_t *c;
	struct dmn d;
	int64_t t0 = now_ms();

	dmn_init_at(&d, "/tmp/sheaf-oqcrash-XXXXXX", "log");
	argv[0] = sheafd_bin();
	argv[3] = d.sock;
	dmn_start_argv(&d, (char *const *)argv);
	vs = mmap(NULL, sizeof(*vs), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	REQUIRE(vs != MAP_FAILED, "mmap");
	snprintf(vs->sock, sizeof(vs->sock), "%s", d.sock);
	parent_pool = child_connect(d.sock, "test");
	c = sheaf_cache_create(parent_pool, "own", OBJ, &cfg);
	qs[0] = sheaf_queue_create(parent_pool, "q", QCAP, 0);
	qs[1] = sheaf_queue_create(parent_pool, "qs", QCAP, SHEAF_QUEUE_SP | SHEAF_QUEUE_SC);
	REQUIRE(c != NULL && qs[0] != NULL && qs[1] != NULL, "create: %s", strerror(errno));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_case(d.sock, c, qs, &cases[i]);
	race_case(d.sock, c, qs[0], QS_DEQ_COUNTED);
	race_case(d.sock, c, qs[0], QS_DEQ_GOT);
	printf("steps: %zu victims stopped and killed at each step of enqueue, dequeue, "
	       "their burst and wait forms, alloc and free, and 2 dequeue races: in use "
	       "exact after each (%lld ms)\n", sizeof(cases) / sizeof(cases[0]),
	       (long long)(now_ms() - t0));
	REQUIRE(sheaf_queue_destroy(qs[0]) == 0 && sheaf_queue_destroy(qs[1]) == 0,
		"queue destroy");
	sheaf_disconnect(parent_pool);
	parent_pool = NULL;
	wait_clients(d.sock, 0);
	REQUIRE(destroy(d.sock, "own") == 0, "cache destroy refused");
	munmap(vs, sizeof(*vs));
	dmn_end(&d);
}

START_TEST(steps)
{
	steps_run();
}
END_TEST

/* ---- random kills ------------------------------------------------------------- */

#define NWORK    4
#define HOLD     64
#define MAX_IDS  (1u << 24)

struct msg {
	uint64_t id;
	uint64_t check;              /* ~id: a torn or reused object shows */
};

struct tshared {
	char sock[128];
	_Atomic uint64_t next_id, dups, bad, ops;
	_Atomic uint32_t ready[NWORK];
	_Atomic uint64_t seen[MAX_IDS / 64];
};

static struct tshared *ts;

/* A dequeued object: its stamp intact and seen once. */
static void seen(struct msg *m)
{
	uint64_t id = m->id;

	if (id >= atomic_load(&ts->next_id) || id >= MAX_IDS || m->check != ~id) {
		ts->bad++;
		return;
	}
	if (atomic_fetch_or(&ts->seen[id / 64], 1ull << (id % 64)) & (1ull << (id % 64)))
		ts->dups++;
	/* A new stamp: this holder may enqueue it again. */
	id = atomic_fetch_add(&ts->next_id, 1);
	if (id >= MAX_IDS) {            /* out of ids: wait to be killed */
		for (;;)
			pause();
	}
	m->id = id;
	m->check = ~id;
}

static int worker(void *arg)
{
	int slot = (int)(uintptr_t)arg;
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	sheaf_queue_t *q[2];
	struct msg *held[HOLD];
	uint64_t rnd = mix64((uint64_t)getpid() * 0x9e3779b97f4a7c15ull) | 1;
	unsigned n = 0;

	sheaf_disconnect(parent_pool);
	p = child_connect(ts->sock, "worker");
	c = sheaf_cache_open(p, "own");
	q[0] = sheaf_queue_open(p, "q");
	q[1] = sheaf_queue_open(p, "q2");
	REQUIRE(c != NULL && q[0] != NULL && q[1] != NULL, "open: %s", strerror(errno));
	ts->ready[slot] = 1;
	for (;;) {
		uint64_t r = xorshift(&rnd);
		sheaf_queue_t *qq = q[(r >> 8) & 1];
		unsigned k = 1 + (unsigned)((r >> 16) % 16);
		int got;

		ts->ops++;
		switch (r % 8) {
		case 0:
		case 1:                         /* alloc, stamped */
			for (unsigned i = 0; i < k && n < HOLD; i++) {
				struct msg *m = sheaf_alloc(c);
				uint64_t id = atomic_fetch_add(&ts->next_id, 1);

				REQUIRE(m != NULL, "alloc: %s", strerror(errno));
				if (id >= MAX_IDS) {    /* out of ids: wait to be killed */
					for (;;)
						pause();
				}
				m->id = id;
				m->check = ~id;
				held[n++] = m;
			}
			break;
		case 2:                         /* enqueue one */
			if (n > 0 && sheaf_enqueue(qq, held[n - 1]) == 0)
				n--;
			break;
		case 3:                         /* enqueue a burst */
			if (n > 0) {
				unsigned m = k < n ? k : n;

				got = sheaf_enqueue_burst(qq, (void *const *)(held + n - m), m);
				REQUIRE(got >= 0, "enqueue_burst: %d", got);
				/* the first @got went in: keep the rest */
				for (unsigned i = (unsigned)got; i < m; i++)
					held[n - m + i - (unsigned)got] = held[n - m + i];
				n -= (unsigned)got;
			}
			break;
		case 4:                         /* enqueue, waiting a little */
			if (n > 0 && sheaf_enqueue_wait(qq, held[n - 1], 1) == 0)
				n--;
			break;
		case 5:                         /* dequeue, one or a burst */
			if (n + k <= HOLD) {
				got = (r >> 30) & 1 ? sheaf_dequeue_burst(qq, (void **)(held + n), k)
				      : sheaf_dequeue(qq, (void **)(held + n)) == 0;
				for (int i = 0; i < got; i++)
					seen(held[n + (unsigned)i]);
				n += (unsigned)got;
			}
			break;
		case 6:                         /* dequeue, waiting a little */
			if (n < HOLD && sheaf_dequeue_wait(qq, (void **)(held + n), 1) == 0) {
				seen(held[n]);
				n++;
			}
			break;
		case 7:                         /* free some */
			for (unsigned i = 0; i < k && n > 0; i++) {
				struct msg *m = held[--n];

				REQUIRE(m->check == ~m->id, "a held object changed: freed under its holder");
				REQUIRE(sheaf_free(c, m) == 0, "free");
			}
			break;
		}
	}
	return 0;
}

static pid_t spawn(int slot)
{
	ts->ready[slot] = 0;
	return fork_child(worker, (void *)(uintptr_t)slot);
}

static void kill_reap(pid_t pid)
{
	int st;

	kill(pid, SIGKILL);
	REQUIRE(waitpid(pid, &st, 0) == pid, "waitpid");
	REQUIRE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
		"a worker ended on its own (status 0x%x): see its message above", st);
	untrack(pid);
}

static unsigned kills_env(void)
{
	const char *env = getenv("SHEAF_OWNED_KILLS");

	return env != NULL && atoi(env) > 0 ? (unsigned)atoi(env) : 1000;
}

START_TEST(torture)
{
	static const char *const names[] = { "q", "q2" };
	const char *argv[] = { NULL, "--foreground", "--socket", NULL, "--nodes", "1",
			       "--size", "256M", NULL };
	struct sheaf_cache_config cfg = { .capacity = 8, .flags = SHEAF_CACHE_OWNED };
	unsigned kills = 0, kills_want = kills_env();
	uint64_t rnd = 0x7654321, slots, drained;
	sheaf_queue_t *q[2];
	sheaf_cache_t *c;
	pid_t pid[NWORK];
	struct dmn d;
	int64_t t0 = now_ms();

	dmn_init_at(&d, "/tmp/sheaf-oqtort-XXXXXX", "log");
	argv[0] = sheafd_bin();
	argv[3] = d.sock;
	dmn_start_argv(&d, (char *const *)argv);
	ts = mmap(NULL, sizeof(*ts), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	REQUIRE(ts != MAP_FAILED, "mmap");
	snprintf(ts->sock, sizeof(ts->sock), "%s", d.sock);
	parent_pool = child_connect(d.sock, "test");
	c = sheaf_cache_create(parent_pool, "own", sizeof(struct msg) < OBJ ? OBJ : sizeof(struct msg),
			       &cfg);
	q[0] = sheaf_queue_create(parent_pool, "q", QCAP, 0);
	q[1] = sheaf_queue_create(parent_pool, "q2", QCAP2, 0);
	REQUIRE(c != NULL && q[0] != NULL && q[1] != NULL, "create: %s", strerror(errno));
	for (int i = 0; i < NWORK; i++)
		pid[i] = spawn(i);
	while (kills < kills_want) {
		int v = (int)(xorshift(&rnd) % NWORK);
		int64_t until = now_ms() + 10000;

		while (!ts->ready[v]) {
			REQUIRE(now_ms() < until, "worker %d never got ready", v);
			sleep_us(100);
		}
		sleep_us((unsigned)(xorshift(&rnd) % 2000));
		kill_reap(pid[v]);
		kills++;
		pid[v] = spawn(v);
		if (kills % 200 == 0)
			REQUIRE(dmn_alive(&d), "sheafd died after %u kills", kills);
	}
	for (int i = 0; i < NWORK; i++) {
		kill_reap(pid[i]);
		kills++;
	}
	wait_clients(d.sock, 1);
	slots = require_exact(d.sock, c, names, 2, 0, "after the kills");
	drained = drain(q[0], c) + drain(q[1], c);
	REQUIRE(drained == slots, "drained %llu of %llu queued", (unsigned long long)drained,
		(unsigned long long)slots);
	REQUIRE(check_in_use(d.sock, "after the drain") == 0, "objects in use after the drain");
	printf("torture: %u kills in %lld ms, %llu operations, %llu objects stamped, %llu left "
	       "in the queues: in use exact, the tags agree, nothing leaked\n", kills,
	       (long long)(now_ms() - t0), (unsigned long long)ts->ops,
	       (unsigned long long)ts->next_id, (unsigned long long)slots);
	REQUIRE(ts->dups == 0 && ts->bad == 0, "%llu objects seen twice, %llu torn or reused",
		(unsigned long long)ts->dups, (unsigned long long)ts->bad);
	REQUIRE(ts->next_id > 1000, "too little traffic: %llu objects",
		(unsigned long long)ts->next_id);
	REQUIRE(sheaf_queue_destroy(q[0]) == 0 && sheaf_queue_destroy(q[1]) == 0, "queue destroy");
	sheaf_disconnect(parent_pool);
	parent_pool = NULL;
	wait_clients(d.sock, 0);
	REQUIRE(destroy(d.sock, "own") == 0, "cache destroy refused");
	munmap(ts, sizeof(*ts));
	dmn_end(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("owned_queue_crash");

	require_binaries("test_owned_queue_crash");
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ADD_ALONE(s, steps, 300);
	ADD_ALONE(s, torture, 3600);
	return run_suite(s);
}
