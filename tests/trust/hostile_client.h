/*
 * hostile_client.h - the hostile client of test_hostile
 * (tests/trust/test_hostile.c, whose head comment says what a round does
 * and what the hostile client leaves alone): its state, and its
 * process's main.  Linked into test_hostile only (Makefile, HOSTILE_OBJ).
 */
#ifndef SHEAF_TESTS_HOSTILE_CLIENT_H
#define SHEAF_TESTS_HOSTILE_CLIENT_H

#include <stdint.h>

#include "client/sheaf.h"

struct shm_pool;

struct hostile {
	const char *sock;
	uint64_t seed;
	uint32_t good_client;
	int done[2];                 /* it writes a byte when its burst is over */
	/* in the child */
	sheaf_pool_t *pool;
	struct shm_pool *sp;
	sheaf_cache_t *h[2];
	uint32_t me, good;
	uint64_t rng;
	void *held[2][64];
	unsigned nheld[2];
};

/* The hostile client's process (fork_child): attaches to x->sock, uses its
 * caches h0 and h1, writes its burst of scribbles (seeded by x->seed),
 * writes a byte to x->done[1], then uses its caches until killed. */
int hostile_main(void *arg);

#endif
