/*
 * test_sheafctl_load.c - sheafctl acting on a pool under load (harness:
 * util_sheafctl.h): shrink after a burst of 10^6 objects (the memfd's
 * blocks and sheafd's RssShmem fall), and tune of sheaf_capacity under a
 * running workload (the barn exchanges per allocation follow, and the pool
 * check passes after).
 *
 * Each test is its own TCase: CK_RUN_CASE=<name> runs one.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/internal.h"
#include "client/sheaf.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_json.h"
#include "tests/helpers/util_proc.h"
#include "tests/helpers/util_sheafctl.h"

/* Totals of a cache from `stats CACHE -o json`. */
struct snap {
	uint64_t allocs, barn_get, capacity;
};

static struct snap snap_of(const char *cache)
{
	struct jv *v = CTLJ("stats", (char *)cache);
	struct jv *cs = jnamed(jarr(v, "caches"), cache), *k = jreq(cs, "counters", J_OBJ);
	struct snap s = {
		.allocs = ju64(k, "alloc_fastpath") + ju64(k, "alloc_slowpath"),
		.barn_get = ju64(k, "barn_get"),
		.capacity = ju64(cs, "sheaf_capacity"),
	};
	jv_free(v);
	return s;
}

/* RssShmem of @pid (kB): its resident pages of shared memory (the region). */
static long rss_shmem(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	ck_assert(f != NULL);
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "RssShmem: %ld kB", &kb) == 1)
			break;
	fclose(f);
	ck_assert_int_ge(kb, 0);
	return kb;
}

static long blocks_of(int fd)
{
	struct stat st;
	ck_assert(fstat(fd, &st) == 0);
	return (long)st.st_blocks;
}

/*
 * 10^6 objects of 64 B allocated (and written), then freed, by a client
 * that stays attached: shrink must give back at least 80% of the blocks
 * the burst added to the memfd.  (The burst also touches metadata that
 * stays: slab bitmaps, and the sheaves the depot hands out round-robin,
 * 2112 B each; the daemon runs with 2048 sheaves to bound them.)  Resident memory: the client that touched
 * the objects loses those pages (its RssShmem falls by 80% of the burst);
 * sheafd never touches object memory (only metadata: bitmaps, sheaves), so
 * its RssShmem never comes near the burst; what it touched (the sheaves it
 * filled and flushed) a pool-wide shrink gives back: its RssShmem falls.
 */
START_TEST(test_shrink_burst)
{
	const size_t burst = 1000000;
	const long burst_kb = (long)(burst * 64 / 1024);
	char err[256] = "";
	sheaf_pool_t *p;
	struct wl w;
	struct jv *v;
	long b0, b1, b2, c1, c2, d0, d1, d2;
	int fd;

	create_cache("burst", "64");
	/* The region's SHARED memfd (the slab frames): libsheaf maps it; keep a
	 * descriptor and let go. */
	p = sheaf_connect(D.sock, "memfd-probe", 0, err, sizeof(err));
	ck_assert_msg(p != NULL, "connect: %s", err);
	fd = dup(p->shm.shared_fd);
	ck_assert_int_ge(fd, 0);
	sheaf_disconnect(p);

	b0 = blocks_of(fd);
	d0 = rss_shmem(D.pid);
	wl_start(&w, "burst", WL_BURST, burst);
	wl_wait(&w, 0);
	b1 = blocks_of(fd);
	c1 = rss_shmem(w.pid);
	d1 = rss_shmem(D.pid);
	ck_assert_msg((b1 - b0) / 2 >= burst_kb, "burst added only %ld blocks", b1 - b0);
	ck_assert_msg(c1 >= burst_kb, "client RssShmem %ld kB after the burst", c1);

	v = CTLJ("shrink", "burst");
	ck_assert_uint_ge(ju64(v, "slabs_released"), (uint64_t)(burst * 64 * 8 / 10) >> 18);
	jv_free(v);
	b2 = blocks_of(fd);
	c2 = rss_shmem(w.pid);
	d2 = rss_shmem(D.pid);
	ck_assert_msg(b1 - b2 >= (b1 - b0) * 8 / 10,
		      "memfd blocks %ld -> %ld -> %ld: shrink gave back less than 80%% of the burst",
		      b0, b1, b2);
	ck_assert_msg(c1 - c2 >= burst_kb * 8 / 10, "client RssShmem %ld kB -> %ld kB", c1, c2);
	ck_assert_msg(d1 - d0 < burst_kb / 2 && d2 - d0 < burst_kb / 2,
		      "sheafd RssShmem %ld -> %ld -> %ld kB: it holds object pages", d0, d1, d2);
	/* What sheafd itself touched for the burst is the sheaves it filled
	 * and flushed: a pool-wide shrink gives their pages back, so its
	 * resident memory falls too. */
	ck_assert_msg(d1 - d0 >= 256, "sheafd touched only %ld kB of sheaves", d1 - d0);
	v = CTLJ("shrink");
	jv_free(v);
	{
		long d3 = rss_shmem(D.pid), b3 = blocks_of(fd);
		ck_assert_msg(d2 - d3 >= 128,
			      "sheafd RssShmem %ld -> %ld -> %ld -> %ld kB: the pool-wide shrink "
			      "did not make it fall", d0, d1, d2, d3);
		ck_assert_msg(b3 < b2, "memfd blocks %ld -> %ld after the pool-wide shrink", b2, b3);
		printf("shrink: memfd %ld -> %ld -> %ld -> %ld blocks, sheafd RssShmem %ld -> %ld -> "
		       "%ld -> %ld kB\n", b0, b1, b2, b3, d0, d1, d2, d3);
	}
	wl_stop(&w);
	close(fd);
	pool_check_ok();
}
END_TEST

START_TEST(test_tune_workload)
{
	struct wl w;
	struct jv *v;
	struct snap s0, s1, s2, s3;
	double before, after;
	struct run r;

	create_cache("tw", "64");
	wl_start(&w, "tw", WL_LOOP, 2048);
	wl_wait(&w, 20);
	s0 = snap_of("tw");
	sleep_ms(300);
	s1 = snap_of("tw");
	ck_assert_uint_eq(s1.capacity, 256);

	v = CTLJ("tune", "tw", "sheaf_capacity=8");
	ck_assert_uint_eq(ju64(jreq(v, "cache", J_OBJ), "sheaf_capacity"), 8);
	(void)ju64(v, "mem_cap");
	jv_free(v);
	sleep_ms(300);                                   /* old sheaves cycle out */
	s2 = snap_of("tw");
	sleep_ms(300);
	s3 = snap_of("tw");
	ck_assert_uint_eq(s3.capacity, 8);

	REQUIRE(s1.allocs > s0.allocs && s3.allocs > s2.allocs, "the workload stalled");
	before = (double)(s1.barn_get - s0.barn_get) / (double)(s1.allocs - s0.allocs);
	after = (double)(s3.barn_get - s2.barn_get) / (double)(s3.allocs - s2.allocs);
	ck_assert_msg(after > 3 * before && after > 1.0 / 16,
		      "barn_get per alloc %.4f at capacity 256, %.4f at 8", before, after);

	CTL(&r, "tune", "tw", "barn_low=2", "barn_high=8", "min_partial=3", "barn_limit=64");
	expect(&r, 0, "tune several");
	ck_assert_str_eq(r.out, "cache 'tw': sheaf_capacity=8 barn_limit=64 barn_low=2 "
			 "barn_high=8 min_partial=3\n");
	run_free(&r);
	wl_stop(&w);
	CTL(&r, "check");
	expect(&r, 0, "check after the workload");
	run_free(&r);
	pool_check_ok();
}
END_TEST

/* ======================================================================= */

int main(void)
{
	Suite *s = suite_create("sheafctl-load");

	require_binaries("test_sheafctl_load");
	ctl_add(s, "shrink_burst", test_shrink_burst, 600);
	ctl_add(s, "tune_workload", test_tune_workload, 240);
	return run_suite(s);
}
