/*
 * w9dpdk.c - W9's in-process upper bound: the hash table of
 * tests/examples/rcu_table.h read by reader threads and updated by one
 * writer thread of ONE process, reclamation by DPDK's rte_rcu QSBR.  It
 * needs no EAL (rte_rcu_qsbr works on memory we give it): no hugepages, no
 * root.  The same work as `rcu_table bench qsbr`: a reader reports a
 * quiescent state every 64 lookups; the writer allocates a new entry,
 * unlinks the old one and retires it.  Retired entries collect in batches
 * of 256 (sheaf's deferred sheaf); a full batch takes a token
 * (rte_rcu_qsbr_start) and is recycled once rte_rcu_qsbr_check passes, into
 * the writer's private free stack (what sheaf's barn is to sheaf).
 * Pinned as rcu_table: the writer to the last CPU allowed, readers to the
 * others.  Output: a line and a JSON line, as rcu_table's.
 * Usage: w9dpdk SECONDS READERS [UPDATES_PER_S]
 */
#define _GNU_SOURCE 1
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rte_rcu_qsbr.h>
#include "tests/examples/rcu_table.h"

#define MAXR    16
#define BATCH   256u
#define NBATCH  4096u                /* batches in flight at most */
#define NENT    (NKEYS + (NBATCH + 2) * BATCH)

struct batch {
	uint64_t token;
	uint32_t n;
	struct entry *e[BATCH];
};

static struct entry *bucket[NB];
static struct rte_rcu_qsbr *qv;
static volatile int stop;
static struct { volatile uint64_t n; char pad[56]; } lookups[MAXR];
static volatile uint64_t updates;
static double rate;
static int cpus[CPU_SETSIZE], ncpu;

/* The writer's memory: a free stack and a FIFO of retired batches. */
static struct entry *ents;
static struct entry **freestk;
static uint32_t nfree;
static struct batch *fifo;           /* NBATCH slots */
static uint32_t fhead, ftail;        /* ftail - fhead batches waiting */
static struct batch *cur;

static void pin(int role)
{
	cpu_set_t one;

	if (ncpu < 2)
		return;
	CPU_ZERO(&one);
	CPU_SET(role < 0 ? cpus[ncpu - 1] : cpus[role % (ncpu - 1)], &one);
	pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
}

static void *reader(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	uint64_t s = mix(id + 1) | 1, n = 0;

	pin((int)id);
	rte_rcu_qsbr_thread_register(qv, id);
	rte_rcu_qsbr_thread_online(qv, id);
	while (!stop) {
		uint64_t k = rnd(&s) % NKEYS;

		rt_find(__atomic_load_n(&bucket[k % NB], __ATOMIC_ACQUIRE), k);
		if ((++n & 63) == 0) {
			rte_rcu_qsbr_quiescent(qv, id);
			lookups[id].n = n;
		}
	}
	rte_rcu_qsbr_thread_offline(qv, id);
	rte_rcu_qsbr_thread_unregister(qv, id);
	return NULL;
}

/* Recycle the oldest batches whose grace period passed; with @wait, the
 * oldest one at least (waiting for it). */
static void reclaim(int wait)
{
	while (fhead != ftail) {
		struct batch *b = &fifo[fhead % NBATCH];

		if (rte_rcu_qsbr_check(qv, b->token, wait && nfree == 0) != 1)
			break;
		for (uint32_t i = 0; i < b->n; i++)
			freestk[nfree++] = b->e[i];
		fhead++;
	}
}

static struct entry *ent_alloc(void)
{
	if (nfree == 0)
		reclaim(1);
	return nfree ? freestk[--nfree] : NULL;
}

static void retire(struct entry *e)
{
	if (cur == NULL) {
		if (ftail - fhead == NBATCH)
			reclaim(1);
		cur = &fifo[ftail % NBATCH];
		cur->n = 0;
	}
	cur->e[cur->n++] = e;
	if (cur->n == BATCH) {
		cur->token = rte_rcu_qsbr_start(qv);
		ftail++;
		cur = NULL;
		reclaim(0);
	}
}

static void update(uint64_t key)
{
	struct entry **pp = &bucket[key % NB], *old, *e = ent_alloc();

	if (e == NULL)
		abort();                     /* never: NENT covers every batch */
	while ((old = *pp) != NULL && old->key != key)
		pp = &old->next;
	fill(e, key, old->version + 1);
	e->next = old->next;
	__atomic_store_n(pp, e, __ATOMIC_RELEASE);
	retire(old);
}

static void *writer(void *arg)
{
	uint64_t s = mix(99) | 1, n = 0;
	double t0 = now_s();

	(void)arg;
	pin(-1);
	while (!stop) {
		update(rnd(&s) % NKEYS);
		updates = ++n;
		if (rate > 0 && (n & 255) == 0) {
			double ahead = t0 + (double)n / rate - now_s();

			if (ahead < -1.0)
				t0 -= ahead + 1.0;
			if (ahead > 0) {
				struct timespec ts = { (time_t)ahead,
						       (long)((ahead - (time_t)ahead) * 1e9) };
				nanosleep(&ts, NULL);
			}
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	double secs = argc >= 3 ? atof(argv[1]) : 0, t0, t1;
	int nr = argc >= 3 ? atoi(argv[2]) : 0;
	uint64_t l0 = 0, l1 = 0, u0, u1;
	pthread_t rt[MAXR], wt;
	cpu_set_t all;

	if (secs <= 0 || nr < 1 || nr > MAXR) {
		fprintf(stderr, "usage: w9dpdk SECONDS READERS [UPDATES_PER_S]\n");
		return 2;
	}
	rate = argc >= 4 ? atof(argv[3]) : 0;
	if (sched_getaffinity(0, sizeof(all), &all) == 0)
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &all))
				cpus[ncpu++] = c;
	qv = aligned_alloc(RTE_CACHE_LINE_SIZE, rte_rcu_qsbr_get_memsize((uint32_t)nr));
	ents = aligned_alloc(64, (size_t)NENT * sizeof(*ents));
	freestk = malloc((size_t)NENT * sizeof(*freestk));
	fifo = malloc((size_t)NBATCH * sizeof(*fifo));
	if (qv == NULL || ents == NULL || freestk == NULL || fifo == NULL ||
	    rte_rcu_qsbr_init(qv, (uint32_t)nr) != 0) {
		fprintf(stderr, "w9dpdk: setup failed\n");
		return 2;
	}
	for (uint64_t k = 0; k < NKEYS; k++) {
		fill(&ents[k], k, 1);
		ents[k].next = bucket[k % NB];
		bucket[k % NB] = &ents[k];
	}
	for (uint32_t i = NKEYS; i < NENT; i++)
		freestk[nfree++] = &ents[i];
	for (int i = 0; i < nr; i++)
		pthread_create(&rt[i], NULL, reader, (void *)(uintptr_t)i);
	pthread_create(&wt, NULL, writer, NULL);
	sleep(1);                            /* warm */
	for (int i = 0; i < nr; i++)
		l0 += lookups[i].n;
	u0 = updates;
	t0 = now_s();
	usleep((useconds_t)(secs * 1e6));
	for (int i = 0; i < nr; i++)
		l1 += lookups[i].n;
	u1 = updates;
	t1 = now_s();
	stop = 1;
	for (int i = 0; i < nr; i++)
		pthread_join(rt[i], NULL);
	pthread_join(wt, NULL);
	{
		double lps = (double)(l1 - l0) / (t1 - t0), ups = (double)(u1 - u0) / (t1 - t0);

		printf("W9 dpdk   readers %d  lookups/s %.0f (per reader %.0f)  updates/s %.0f\n",
		       nr, lps, lps / nr, ups);
		printf("{\"mode\":\"dpdk\",\"readers\":%d,\"pace\":%.0f,\"mlookups_per_s\":%.4f,"
		       "\"mupdates_per_s\":%.4f}\n", nr, rate, lps / 1e6, ups / 1e6);
	}
	return 0;
}
