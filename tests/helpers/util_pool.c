/*
 * util_pool.c - local pools for the object-path tests (see util_pool.h).
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/internal.h"
#include "shm/engine/slab.h"
#include "tests/helpers/util_pool.h"
#include "tests/helpers/util_proc.h"

sheaf_pool_t *pool_new(const struct sheaf_pool_config *cfg)
{
	char err[256] = "";
	sheaf_pool_t *p = sheaf_pool_create(cfg, err, sizeof(err));

	ck_assert_msg(p != NULL, "pool: %s", err);
	return p;
}

sheaf_cache_t *mkcache(sheaf_pool_t *p, const char *name, size_t size, int cap,
		       unsigned flags)
{
	struct sheaf_cache_config cc = { .capacity = cap, .flags = flags };
	sheaf_cache_t *c = sheaf_cache_create(p, name, size, &cc);

	ck_assert_msg(c != NULL, "cache %s: %s", name, strerror(errno));
	return c;
}

void *xalloc(sheaf_cache_t *c)
{
	void *o = sheaf_alloc(c);

	/* EAGAIN: the engine did not stock the barn within the pool's
	 * wait_ms (100 ms for pool_small), as a loaded machine under
	 * valgrind may: look again, 10 s. */
	for (int64_t end = now_ms() + 10000; o == NULL && errno == EAGAIN && now_ms() < end;)
		o = sheaf_alloc(c);
	if (o == NULL)
		ck_abort_msg("alloc: %s", strerror(errno));
	return o;
}

struct sheaf_stats cache_stats_of(sheaf_cache_t *c, int node)
{
	struct sheaf_stats s;

	ck_assert_int_eq(sheaf_cache_stats(c, node, &s), 0);
	return s;
}

uint64_t stat_count(sheaf_cache_t *c, int node, const char *name)
{
	struct sheaf_stats s;
	int i = sheaf_stat_index(name);

	ck_assert_int_ge(i, 0);
	ck_assert_int_eq(sheaf_cache_stats(c, node, &s), 0);
	return s.stat[i];
}

void require_pool_ok(sheaf_pool_t *p)
{
	char err[512] = "";
	int rc = sheaf_pool_check(p, err, sizeof(err));

	ck_assert_msg(rc == 0, "pool check: %s", err);
}

sheaf_pool_t *pool_small(unsigned nodes)
{
	struct sheaf_pool_config cfg = { .nodes = nodes, .size = 64ull << 20,
					  .sheaf_count = 1024, .wait_ms = 100 };

	return pool_new(&cfg);
}

void churn_checked(sheaf_cache_t *c, unsigned n)
{
	struct shm_pool *sp = &c->pool->shm;
	void **o = calloc(n, sizeof(*o));
	unsigned got = 0;

	ck_assert_ptr_nonnull(o);
	for (unsigned i = 0; i < n; i++) {
		o[i] = sheaf_alloc(c);
		/* A fresh cache's first alloc waits for the engine to stock its
		 * barn, at most the pool's wait_ms (pool_small: 100 ms), which a
		 * loaded machine under valgrind can exceed: look again, 10 s. */
		for (int64_t end = now_ms() + 10000;
		     o[i] == NULL && got == 0 && errno == EAGAIN && now_ms() < end;)
			o[i] = sheaf_alloc(c);
		if (o[i] == NULL)
			break;
		ck_assert_int_eq(slab_validate(sp, c->id, (uint64_t)((char *)o[i] - sp->base)), 0);
		got++;
	}
	ck_assert_uint_gt(got, 0);
	for (unsigned i = 0; i < got; i++)
		ck_assert_int_eq(sheaf_free(c, o[i]), 0);
	free(o);
}
