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
 */
#include <errno.h>
#include "client/sheaf.h"

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
