/* stats.c - names of the counters of stats.h (the kernel's where it has one). */
#include "stats.h"

const char *const sheaf_stat_names[SHEAF_STAT_NR] = {
	[ST_ALLOC_FASTPATH] = "alloc_fastpath",
	[ST_ALLOC_SLOWPATH] = "alloc_slowpath",
	[ST_FREE_FASTPATH] = "free_fastpath",
	[ST_FREE_SLOWPATH] = "free_slowpath",
	[ST_SHEAF_ALLOC] = "sheaf_alloc",
	[ST_SHEAF_FREE] = "sheaf_free",
	[ST_BARN_GET] = "barn_get",
	[ST_BARN_GET_FAIL] = "barn_get_fail",
	[ST_BARN_PUT] = "barn_put",
	[ST_BARN_PUT_FAIL] = "barn_put_fail",
	[ST_SHEAF_PREFILL_FAST] = "sheaf_prefill_fast",
	[ST_SHEAF_PREFILL_SLOW] = "sheaf_prefill_slow",
	[ST_SHEAF_PREFILL_OVERSIZE] = "sheaf_prefill_oversize",
	[ST_SHEAF_RETURN_FAST] = "sheaf_return_fast",
	[ST_SHEAF_RETURN_SLOW] = "sheaf_return_slow",
	[ST_FREE_REMOTE] = "free_remote",
	[ST_FREE_INVALID] = "free_invalid",
	[ST_ALLOC_FAIL] = "alloc_fail",
	[ST_SHEAF_REFILL] = "sheaf_refill",
	[ST_SHEAF_FLUSH] = "sheaf_flush",
	[ST_ALLOC_SLAB] = "alloc_slab",
	[ST_FREE_SLAB] = "free_slab",
	[ST_FLUSH_INVALID] = "flush_invalid",
	[ST_REFILL_REMOTE] = "refill_remote",
};
