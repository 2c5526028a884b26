/*
 * tune.c - the tunables table and its checks (tune.h).  Each key names a
 * 32-bit field of struct shm_cache, or the pool header's mem_cap; the
 * pool keys node_cap:K are pool_numa.c's (a bound node's cap).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "numa.h"
#include "pool.h"
#include "tune.h"

struct tunable {
	const char *key;
	uint64_t lo, hi;         /* mem_cap: hi is the pool's data size */
	size_t off;              /* in struct shm_cache; POOL_KEY: the header */
};

#define POOL_KEY SIZE_MAX              /* the header's mem_cap */
#define POOL_KEY_RETAIN (SIZE_MAX - 1) /* the header's large_retain */
#define IS_POOL_KEY(t) ((t)->off >= POOL_KEY_RETAIN)

static const struct tunable tunables[] = {
	{ "sheaf_capacity", 0, SHEAF_CAP_MAX, offsetof(struct shm_cache, sheaf_capacity) },
	{ "barn_limit", 1, 65536, offsetof(struct shm_cache, barn_limit) },
	{ "barn_low", 0, 65536, offsetof(struct shm_cache, barn_low) },
	{ "barn_high", 1, 65536, offsetof(struct shm_cache, barn_high) },
	{ "barn_keep", 0, 65536, offsetof(struct shm_cache, barn_keep) },
	{ "stash_sheaves", 0, SHEAF_STASH_LIMIT, offsetof(struct shm_cache, stash_sheaves) },
	{ "stash_bytes", 0, 1u << 30, offsetof(struct shm_cache, stash_bytes) },
	{ "min_partial", 0, 1024, offsetof(struct shm_cache, min_partial) },
	{ "mem_cap", SLAB_SIZE, UINT64_MAX, POOL_KEY },
	{ "large_retain", 0, UINT64_MAX, POOL_KEY_RETAIN },
};

#define KNOWN "sheaf_capacity, barn_limit, barn_low, barn_high, barn_keep, " \
	"stash_sheaves, stash_bytes, min_partial, mem_cap, large_retain"

static const struct tunable *tunable_find(const char *key)
{
	for (size_t i = 0; i < sizeof(tunables) / sizeof(tunables[0]); i++)
		if (strcmp(tunables[i].key, key) == 0)
			return &tunables[i];
	return NULL;
}

static _Atomic uint32_t *cache_field(const struct shm_pool *p, int cache,
				     const struct tunable *t)
{
	return (_Atomic uint32_t *)((char *)&p->caches[cache] + t->off);
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* One setting on its own: known key, right kind, value in range. */
static int check_one(const struct shm_pool *p, int cache, const struct tune_setting *s,
		     char *err, size_t errlen)
{
	const struct tunable *t = tunable_find(s->key);
	uint64_t hi;

	if (t == NULL && ntopo_tune_key(s->key) >= 0)     /* node_cap:K (numa.h) */
		return cache >= 0 ? fail(err, errlen, "'%s' is a pool setting: give no cache",
					 s->key)
				  : pool_numa_cap_check(p, (unsigned)ntopo_tune_key(s->key),
							s->value, err, errlen);
	if (t == NULL)
		return fail(err, errlen, "unknown setting '%s' (known: " KNOWN
			    "; pool, numa_policy=bind: " NTOPO_CAP_KEY "K)", s->key);
	if (IS_POOL_KEY(t) != (cache < 0))
		return fail(err, errlen, IS_POOL_KEY(t) ?
			    "'%s' is a pool setting: give no cache" :
			    "'%s' is a cache setting: name the cache", s->key);
	hi = IS_POOL_KEY(t) ? p->data_len : t->hi;
	if (s->value < t->lo || s->value > hi)
		return fail(err, errlen, "%s=%llu out of range %llu..%llu", s->key,
			    (unsigned long long)s->value, (unsigned long long)t->lo,
			    (unsigned long long)hi);
	return 0;
}

/* The barn watermarks of @cache after a request that changes any of them
 * must be in the engine's order (tune.h). */
static int check_barn(const struct shm_pool *p, int cache, const struct tune_setting *s,
		      size_t n, char *err, size_t errlen)
{
	const struct shm_cache *sc = &p->caches[cache];
	uint64_t low = at_load_relaxed(&sc->barn_low);
	uint64_t high = at_load_relaxed(&sc->barn_high);
	uint64_t limit = at_load_relaxed(&sc->barn_limit);
	int touched = 0;

	for (size_t i = 0; i < n; i++) {
		if (strcmp(s[i].key, "barn_low") == 0)
			low = s[i].value;
		else if (strcmp(s[i].key, "barn_high") == 0)
			high = s[i].value;
		else if (strcmp(s[i].key, "barn_limit") == 0)
			limit = s[i].value;
		else
			continue;
		touched = 1;
	}
	/* A request that leaves the watermarks alone is not refused for them. */
	if (!touched)
		return 0;
	if (low > high)
		return fail(err, errlen, "barn_low (%llu) must not exceed barn_high (%llu)",
			    (unsigned long long)low, (unsigned long long)high);
	if (high > limit)
		return fail(err, errlen, "barn_high (%llu) must not exceed barn_limit (%llu): "
			    "need barn_low <= barn_high <= barn_limit, or the engine "
			    "flushes the sheaves it refills", (unsigned long long)high,
			    (unsigned long long)limit);
	return 0;
}

int tune_check(const struct shm_pool *p, int cache, const struct tune_setting *s,
	       size_t n, char *err, size_t errlen)
{
	int rc;

	if (n == 0)
		return fail(err, errlen, "nothing to tune");
	for (size_t i = 0; i < n; i++)
		if ((rc = check_one(p, cache, &s[i], err, errlen)) != 0)
			return rc;
	return cache >= 0 ? check_barn(p, cache, s, n, err, errlen) : 0;
}

void tune_apply(struct shm_pool *p, int cache, const struct tune_setting *s)
{
	const struct tunable *t = tunable_find(s->key);

	if (t == NULL && ntopo_tune_key(s->key) >= 0)
		pool_numa_cap_set(p, (unsigned)ntopo_tune_key(s->key), s->value);
	if (t == NULL)
		return;
	if (t->off == POOL_KEY)
		at_store_relaxed(&p->hdr->mem_cap, s->value);
	else if (t->off == POOL_KEY_RETAIN)
		at_store_relaxed(&p->hdr->large_retain, s->value);
	else
		at_store_relaxed(cache_field(p, cache, t), (uint32_t)s->value);
}
