/*
 * api_compat.c - the deprecated names of sheaf.h, kept exported for at
 * least one minor release after the one that replaced them, and until the
 * soname's next major version (sheaf.h, "Deprecated names"), each a call
 * of its replacement with the old contract.
 *
 * Deprecated in 1.2:
 *   sheaf_enqueue_bulk    sheaf_enqueue_burst (same behaviour)
 *   sheaf_dequeue_bulk    sheaf_dequeue_burst (same behaviour)
 *   sheaf_cache_capacity  sheaf_cache_get_capacity (0 + errno ESTALE on a
 *                         stale handle, which a capacity of 0 cannot be
 *                         told from)
 *
 * Older symbols of a function whose argument struct grew (sheaf.h, the ABI
 * rule of struct sheaf_pool_config):
 *   sheaf_pool_create     (1.0-1.2) the config up to max_caches; the
 *                         header's name maps to sheaf_pool_create_v2
 */
#include <errno.h>
#include <stddef.h>
#include "client/sheaf.h"

/* struct sheaf_pool_config as sheaf.h 1.0-1.2 had it. */
struct sheaf_pool_config_v1 {
	size_t size;
	unsigned nodes;
	unsigned sheaf_count;
	size_t mem_cap;
	unsigned wait_ms;
	unsigned max_clients;
	unsigned max_threads;
	unsigned max_caches;
};
_Static_assert(offsetof(struct sheaf_pool_config, numa_policy) ==
	       sizeof(struct sheaf_pool_config_v1), "the v1 config is a prefix");

SHEAF_API sheaf_pool_t *sheaf_pool_create_v1(const struct sheaf_pool_config_v1 *cfg,
					     char *err, size_t errlen)
	__asm__("sheaf_pool_create");

sheaf_pool_t *sheaf_pool_create_v1(const struct sheaf_pool_config_v1 *cfg,
				   char *err, size_t errlen)
{
	struct sheaf_pool_config c = { 0 };

	if (cfg != NULL) {
		c.size = cfg->size;
		c.nodes = cfg->nodes;
		c.sheaf_count = cfg->sheaf_count;
		c.mem_cap = cfg->mem_cap;
		c.wait_ms = cfg->wait_ms;
		c.max_clients = cfg->max_clients;
		c.max_threads = cfg->max_threads;
		c.max_caches = cfg->max_caches;
	}
	c.numa_policy = SHEAF_NUMA_PREFERRED;
	return sheaf_pool_create(&c, err, errlen);
}

_Static_assert(SHEAF__HANDLES == SHEAF_CACHE_HANDLES_MAX,
	       "one handle limit: sheaf.h and sheaf_inline.h agree");

int sheaf_enqueue_bulk(sheaf_queue_t *q, void *const *objs, unsigned n)
{
	return sheaf_enqueue_burst(q, objs, n);
}

int sheaf_dequeue_bulk(sheaf_queue_t *q, void **objs, unsigned n)
{
	return sheaf_dequeue_burst(q, objs, n);
}

unsigned sheaf_cache_capacity(const sheaf_cache_t *cache)
{
	unsigned cap;
	int rc = sheaf_cache_get_capacity(cache, &cap);

	if (rc != 0) {
		errno = -rc;
		return 0;
	}
	return cap;
}
