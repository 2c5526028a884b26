/*
 * bounds.c - the refusal counters of the trust boundary and the ring
 * lookup by id that repairs use (bounds.h).
 */
#include "bounds.h"

const char *const untrusted_names[UT_NR] = {
	[UT_SHEAF_ID] = "sheaf_id",
	[UT_SHEAF_SIZE] = "sheaf_size",
	[UT_SHEAF_HDR] = "sheaf_header",
	[UT_OBJECT] = "object",
	[UT_RING] = "ring",
	[UT_LANE] = "lane",
	[UT_BARN] = "barn",
	[UT_OWNER] = "owner",
	[UT_CACHE] = "cache",
	[UT_REBUILT] = "ring_rebuilt",
};

_Atomic uint64_t untrusted_count[UT_NR];

uint64_t untrusted_total(void)
{
	uint64_t n = 0;

	for (int k = 0; k < UT_NR; k++)
		n += at_load_relaxed(&untrusted_count[k]);
	return n;
}

int pool_ref_of(void *ctx, uint32_t id, struct ring_ref *out)
{
	const struct shm_pool *p = ctx;

	if (id >= pool_rings_used(p)) {
		untrusted_note(UT_RING, 1);
		return -1;
	}
	*out = pool_ring_ref(p, id);
	return 0;
}
