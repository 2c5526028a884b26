/*
 * debug.c - the SHEAF_DEBUG build's assertion failure report and per-thread
 * lock tracking (debug.h).  Empty in a release build.
 */
#include "debug.h"

#if defined(SHEAF_DEBUG) && SHEAF_DEBUG

#include <stdio.h>
#include <stdlib.h>

#define HELD_MAX 8      /* deepest nesting today is 3 (ctl, cache-node, node-alloc) */

struct held_lock {
	const pthread_mutex_t *m;
	int rank;
};

static __thread struct held_lock held[HELD_MAX];
static __thread unsigned nheld;

void sheaf_assert_fail(const char *expr, const char *file, int line,
		       const char *func)
{
	fprintf(stderr, "sheaf: %s:%d: %s: assertion failed: %s\n", file, line,
		func, expr);
	fflush(stderr);
	abort();
}

static int held_index(const pthread_mutex_t *m)
{
	for (unsigned i = 0; i < nheld; i++)
		if (held[i].m == m)
			return (int)i;
	return -1;
}

int lock_debug_held(const pthread_mutex_t *m)
{
	return held_index(m) >= 0;
}

static void lock_fail(const char *what, int rank, const char *file, int line,
		      const char *func)
{
	char msg[160];

	snprintf(msg, sizeof(msg), "%s (rank %d; %u held, innermost rank %d)", what,
		 rank, nheld, nheld ? held[nheld - 1].rank : 0);
	sheaf_assert_fail(msg, file, line, func);
}

void lock_debug_acquire(pthread_mutex_t *m, int rank, int trylock,
			const char *file, int line, const char *func)
{
	if (!trylock) {
		if (held_index(m) >= 0)
			lock_fail("lock_acquire of a lock this thread holds", rank,
				  file, line, func);
		for (unsigned i = 0; i < nheld; i++)
			if (held[i].rank >= rank)
				lock_fail("lock order: blocking on a lock of rank <= "
					  "one held", rank, file, line, func);
		if (pthread_mutex_lock(m) != 0)
			lock_fail("pthread_mutex_lock failed", rank, file, line, func);
	}
	if (nheld >= HELD_MAX)
		lock_fail("too many locks held", rank, file, line, func);
	held[nheld].m = m;
	held[nheld].rank = rank;
	nheld++;
}

void lock_debug_release(pthread_mutex_t *m, const char *file, int line,
			const char *func)
{
	int i = held_index(m);

	if (i < 0)
		lock_fail("lock_release of a lock this thread does not hold", 0,
			  file, line, func);
	held[i] = held[--nheld];        /* order within the set is not needed */
	if (pthread_mutex_unlock(m) != 0)
		lock_fail("pthread_mutex_unlock failed", 0, file, line, func);
}

#else

typedef int sheaf_debug_unused;  /* ISO C wants a declaration in every file */

#endif
