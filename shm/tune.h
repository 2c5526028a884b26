/*
 * tune.h - the pool's run-time settings ("tunables"): their keys, ranges
 * and the rules that tie them together, in one table that sheafd's Tune
 * request (daemon/rpc_pool.c) and libsheaf's sheaf_cache_set_capacity
 * (client/cache.c, for either kind of pool) both check against.
 *
 * Who may call: any process with the pool mapped; only the pool's engine
 * process should apply (the engine reads the values relaxed).
 *
 * Cache keys: sheaf_capacity, barn_limit, barn_low, barn_high, min_partial.
 * Pool keys: mem_cap; node_cap:K (K a kernel node id: that node's cap in
 * bytes under numa_policy=bind, SLAB_SIZE up to its region's size).
 */
#ifndef SHEAF_SHM_TUNE_H
#define SHEAF_SHM_TUNE_H

#include <stddef.h>
#include <stdint.h>

struct shm_pool;

/* One key=value of a request. */
struct tune_setting {
	const char *key;
	uint64_t value;
};

/*
 * Check @n settings for cache @cache of @p (a cache id; -1: the pool's own
 * settings) as one request, applied whole or not at all: at least one
 * setting, every key known and of @cache's kind (cache or pool), every value
 * in its key's range, and, when it changes any barn watermark, the cache's
 * watermarks as they would stand afterwards in the order
 * barn_low <= barn_high <= barn_limit.  (The engine refills a barn under
 * barn_low up to barn_high and flushes it above barn_limit; out of that
 * order it would refill sheaves only to flush them, forever.)  Returns 0,
 * or -EINVAL with @err (may be NULL) naming the key and its valid range.
 */
int tune_check(const struct shm_pool *p, int cache, const struct tune_setting *s,
	       size_t n, char *err, size_t errlen);

/* Store setting @s, which tune_check passed, for @cache (-1: the pool). */
void tune_apply(struct shm_pool *p, int cache, const struct tune_setting *s);

#endif
