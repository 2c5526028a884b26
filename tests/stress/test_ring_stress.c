/*
 * test_ring_stress.c - an MPMC stress of the sheaf ring (shm/ring.c): 2
 * producers + 2 consumers handing sheaves over, and 4 threads doing
 * get/put, with a per-sheaf holder check while running and an exact census
 * at the end (every sheaf back in the ring exactly once).  SHEAF_SAN
 * (non-empty) shrinks the stress for sanitizer builds.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shm/ring.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_ring.h"

/* ---- MPMC stress ----------------------------------------------------------- */

#define NTHREADS 4
#define STRESS_SLOTS 1024
#define STRESS_SHEAVES 512

struct failbox {
	_Atomic uint64_t n;
	char msg[256];
};

static void fail_note(struct failbox *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void fail_note(struct failbox *f, const char *fmt, ...)
{
	if (atomic_fetch_add(&f->n, 1) == 0) {
		va_list ap;

		va_start(ap, fmt);
		vsnprintf(f->msg, sizeof(f->msg), fmt, ap);
		va_end(ap);
	}
}

/* Hand-off of owned sheaves from one consumer to its producer. */
struct handoff {
	pthread_mutex_t lock;
	uint32_t q[STRESS_SHEAVES];
	uint32_t head, n;
};

struct stress {
	struct shm_ring *r;
	_Atomic uint32_t *owners;
	_Atomic uint32_t *holder;      /* who the test thinks holds each sheaf */
	uint64_t quota;                /* ring operations per thread */
	_Atomic int stop;
	struct failbox fail;
	pthread_barrier_t go;
	struct handoff hand[NTHREADS / 2];
};

enum role { ROLE_MIXED, ROLE_PRODUCER, ROLE_CONSUMER };

struct worker {
	_Alignas(SHEAF_CACHELINE) struct ring_intent in;
	struct stress *st;
	uint32_t me, partner;
	enum role role;
	int pair;
	uint64_t gets, puts, empties;
	pthread_t tid;
};

/* After a get: the sheaf must be ours in the owner table and held by no one
 * else in the test's own view. */
static int took(struct worker *w, uint32_t s)
{
	struct stress *st = w->st;
	uint32_t prev;

	if (s >= STRESS_SHEAVES) {
		fail_note(&st->fail, "owner %u: ring_hdr_get returned id %u", w->me, s);
		return 0;
	}
	if (own(st->owners, s) != w->me) {
		fail_note(&st->fail, "owner %u got sheaf %u but owners[] says %#x",
			  w->me, s, own(st->owners, s));
		return 0;
	}
	prev = atomic_exchange(&st->holder[s], w->me);
	if (prev != 0) {
		fail_note(&st->fail, "sheaf %u handed to %u while %u still holds it",
			  s, w->me, prev);
		return 0;
	}
	return 1;
}

/* Before a put: give up our hold, then put; a full ring is a failure (the
 * ring has room for every sheaf), retried so the census stays meaningful. */
static void give(struct worker *w, uint32_t s)
{
	struct stress *st = w->st;
	uint32_t prev = atomic_exchange(&st->holder[s], 0);
	int rc;

	if (prev != w->me)
		fail_note(&st->fail, "owner %u returning sheaf %u held by %u",
			  w->me, s, prev);
	for (unsigned tries = 0; (rc = ring_hdr_put(st->r, st->owners, s, w->me, &w->in)) != 0; tries++) {
		if (rc != -ENOBUFS || own(st->owners, s) != w->me) {
			fail_note(&st->fail, "put of %u by %u: %d, owner %#x", s,
				  w->me, rc, own(st->owners, s));
			return;
		}
		if (tries == 0)
			fail_note(&st->fail, "%u-slot ring refused a put with %u sheaves",
				  STRESS_SLOTS, STRESS_SHEAVES);
		if (tries > 1000000) {
			atomic_store(&st->stop, 1);
			return;
		}
		sched_yield();
	}
	w->puts++;
}

static void handoff_push(struct handoff *h, uint32_t s)
{
	pthread_mutex_lock(&h->lock);
	h->q[(h->head + h->n++) % STRESS_SHEAVES] = s;
	pthread_mutex_unlock(&h->lock);
}

static uint32_t handoff_pop(struct handoff *h)
{
	uint32_t s = SHEAF_ID_NONE;

	pthread_mutex_lock(&h->lock);
	if (h->n > 0) {
		s = h->q[h->head];
		h->head = (h->head + 1) % STRESS_SHEAVES;
		h->n--;
	}
	pthread_mutex_unlock(&h->lock);
	return s;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct stress *st = w->st;
	uint64_t ops = 0;

	pthread_barrier_wait(&st->go);
	while (ops < st->quota && !atomic_load_explicit(&st->stop, memory_order_relaxed)) {
		uint32_t s;

		switch (w->role) {
		case ROLE_MIXED:
			s = ring_hdr_get(st->r, st->owners, w->me, &w->in);
			ops++;
			if (s == SHEAF_ID_NONE) {
				/* At most NTHREADS of 512 sheaves are out. */
				fail_note(&st->fail, "get by %u: ring empty", w->me);
				w->empties++;
				continue;
			}
			w->gets++;
			if (took(w, s)) {
				give(w, s);
				ops++;
			}
			break;
		case ROLE_CONSUMER:
			s = ring_hdr_get(st->r, st->owners, w->me, &w->in);
			if (s == SHEAF_ID_NONE) {
				w->empties++;    /* all in hand-off: fine */
				sched_yield();
				continue;
			}
			ops++;
			w->gets++;
			if (!took(w, s))
				break;
			/* Hand the sheaf over: holder then owner, both ours. */
			if (atomic_exchange(&st->holder[s], w->partner) != w->me)
				fail_note(&st->fail, "hand-off of %u: holder changed", s);
			atomic_store_explicit(&st->owners[s], w->partner, memory_order_release);
			handoff_push(&st->hand[w->pair], s);
			break;
		case ROLE_PRODUCER:
			s = handoff_pop(&st->hand[w->pair]);
			if (s == SHEAF_ID_NONE) {
				sched_yield();
				continue;
			}
			if (own(st->owners, s) != w->me)
				fail_note(&st->fail, "producer %u was handed %u owned by %#x",
					  w->me, s, own(st->owners, s));
			give(w, s);
			ops++;
			break;
		}
	}
	return NULL;
}

static void stress_run(int prodcons)
{
	const uint64_t total = test_san() ? 1000000 : 10000000;
	struct stress *st = calloc(1, sizeof(*st));
	struct worker *w = aligned_alloc(SHEAF_CACHELINE, sizeof(*w) * NTHREADS);
	struct ring_intent in;
	uint64_t gets = 0, puts = 0, empties = 0;
	uint32_t count, full;
	struct timespec t0, t1;

	ck_assert(st != NULL && w != NULL);
	memset(w, 0, sizeof(*w) * NTHREADS);
	st->r = ring_new(9, STRESS_SLOTS, STRESS_SHEAVES);
	st->owners = owners_new(STRESS_SHEAVES, OW_SETUP);
	st->holder = calloc(STRESS_SHEAVES, sizeof(*st->holder));
	ck_assert_ptr_nonnull(st->holder);
	st->quota = total / NTHREADS;
	intent_zero(&in);
	for (uint32_t s = 0; s < STRESS_SHEAVES; s++)
		ck_assert_int_eq(ring_hdr_put(st->r, st->owners, s, OW_SETUP, &in), 0);
	ck_assert_uint_eq(ring_hdr_count(st->r), STRESS_SHEAVES);
	ck_assert_int_eq(pthread_barrier_init(&st->go, NULL, NTHREADS + 1), 0);
	for (int p = 0; p < NTHREADS / 2; p++)
		pthread_mutex_init(&st->hand[p].lock, NULL);

	for (int t = 0; t < NTHREADS; t++) {
		w[t].st = st;
		w[t].me = 100 + (uint32_t)t;
		w[t].pair = t / 2;
		w[t].role = !prodcons ? ROLE_MIXED : (t & 1) ? ROLE_PRODUCER : ROLE_CONSUMER;
		w[t].partner = (t & 1) ? w[t].me - 1 : w[t].me + 1;
		ck_assert_int_eq(pthread_create(&w[t].tid, NULL, worker_main, &w[t]), 0);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_barrier_wait(&st->go);
	for (int t = 0; t < NTHREADS; t++) {
		pthread_join(w[t].tid, NULL);
		gets += w[t].gets;
		puts += w[t].puts;
		empties += w[t].empties;
		ck_assert_uint_eq(atomic_load(&w[t].in.op), RING_OP_NONE);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("ring stress (%s): %llu gets, %llu puts, %llu empty gets in %.2f s\n",
	       prodcons ? "2 producers + 2 consumers" : "4 x get/put",
	       (unsigned long long)gets, (unsigned long long)puts,
	       (unsigned long long)empties,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
	fflush(stdout);
	ck_assert_msg(atomic_load(&st->fail.n) == 0, "%llu failures while running; first: %s",
		      (unsigned long long)atomic_load(&st->fail.n), st->fail.msg);
	ck_assert_uint_eq(gets, puts);
	ck_assert_uint_ge(gets + puts, total - 2 * NTHREADS);

	/* Census: every sheaf back in the ring, exactly once. */
	count = ring_hdr_count(st->r);
	full = full_slots(st->r);
	for (uint32_t s = 0; s < STRESS_SHEAVES; s++) {
		ck_assert_msg(own(st->owners, s) == OWNER_RING(9),
			      "sheaf %u owner %#x after the run", s, own(st->owners, s));
		ck_assert_uint_eq(atomic_load(&st->holder[s]), 0);
		ck_assert_msg(slots_holding(st->r, s) == 1,
			      "sheaf %u in %u slots after the run (%u full slots, "
			      "ring_hdr_count %u, %u sheaves)", s, slots_holding(st->r, s),
			      full, count, STRESS_SHEAVES);
		ck_assert(ring_hdr_holds(st->r, s));
	}
	ck_assert_uint_eq(full, STRESS_SHEAVES);
	ck_assert_uint_eq(count, STRESS_SHEAVES);
	ck_assert_uint_eq(ring_hdr_clear_stale(st->r, st->owners), 0);
	/* Drain it: each sheaf exactly once, then empty. */
	for (uint32_t k = 0; k < STRESS_SHEAVES; k++) {
		uint32_t s = ring_hdr_get(st->r, st->owners, OW_B, &in);

		ck_assert_uint_lt(s, STRESS_SHEAVES);
		ck_assert_uint_eq(atomic_exchange(&st->holder[s], OW_B), 0);
	}
	ck_assert_uint_eq(ring_hdr_get(st->r, st->owners, OW_B, &in), SHEAF_ID_NONE);

	pthread_barrier_destroy(&st->go);
	for (int p = 0; p < NTHREADS / 2; p++)
		pthread_mutex_destroy(&st->hand[p].lock);
	free(st->r);
	free((void *)st->owners);
	free((void *)st->holder);
	free(st);
	free(w);
}

START_TEST(test_mpmc_mixed)
{
	stress_run(0);
}
END_TEST

START_TEST(test_mpmc_producers_consumers)
{
	stress_run(1);
}
END_TEST

static Suite *ring_stress_suite(void)
{
	Suite *su = suite_create("ring-stress");
	TCase *tc;

	tc = tcase_create("stress");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_mpmc_mixed);
	tcase_add_test(tc, test_mpmc_producers_consumers);
	suite_add_tcase(su, tc);
	return su;
}

int main(void)
{
	return run_suite(ring_stress_suite());
}
