/*
 * test_pool_abi.c - struct sheaf_pool_config's ABI rule (sheaf.h): a
 * program built against a sheaf.h before numa_policy calls the
 * sheaf_pool_create symbol with the shorter struct, which must read only
 * the fields it had (here the struct ends on an unmapped page, so a read
 * past it faults); the header's name calls sheaf_pool_create_v2, which
 * checks numa_policy.
 */
#include <check.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "client/sheaf.h"
#include "tests/helpers/util_check.h"

struct old_config {              /* sheaf.h 1.0-1.2 */
	size_t size;
	unsigned nodes;
	unsigned sheaf_count;
	size_t mem_cap;
	unsigned wait_ms;
	unsigned max_clients;
	unsigned max_threads;
	unsigned max_caches;
};

sheaf_pool_t *old_pool_create(const struct old_config *cfg, char *err, size_t errlen)
	__asm__("sheaf_pool_create");

START_TEST(test_old_symbol)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, 2 * (size_t)pg, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct old_config *cfg;
	char err[256] = "";
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	void *o;

	ck_assert(m != MAP_FAILED);
	ck_assert_int_eq(mprotect(m + pg, (size_t)pg, PROT_NONE), 0);
	cfg = (struct old_config *)(m + pg - sizeof(*cfg));
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = 64u << 20;
	cfg->nodes = 2;
	cfg->sheaf_count = 256;
	p = old_pool_create(cfg, err, sizeof(err));
	ck_assert_msg(p != NULL, "%s", err);
	ck_assert_uint_eq(sheaf_pool_nodes(p), 2);
	c = sheaf_cache_create(p, "abi", 64, NULL);
	ck_assert(c != NULL);
	o = sheaf_alloc(c);
	ck_assert(o != NULL);
	sheaf_free(c, o);
	sheaf_pool_destroy(p);
	munmap(m, 2 * (size_t)pg);
}
END_TEST

START_TEST(test_v2_checks_policy)
{
	struct sheaf_pool_config cfg = { .size = 64u << 20, .sheaf_count = 256,
					 .numa_policy = 3 };
	char err[256] = "";
	sheaf_pool_t *p;

	errno = 0;
	ck_assert(sheaf_pool_create(&cfg, err, sizeof(err)) == NULL);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_msg(strstr(err, "numa_policy") != NULL, "%s", err);
	/* Simulated nodes have no placement: the field is not read. */
	cfg.nodes = 2;
	p = sheaf_pool_create(&cfg, err, sizeof(err));
	ck_assert_msg(p != NULL, "%s", err);
	sheaf_pool_destroy(p);
	cfg.nodes = 0;
	cfg.numa_policy = SHEAF_NUMA_INTERLEAVE;
	p = sheaf_pool_create(&cfg, err, sizeof(err));
	ck_assert_msg(p != NULL, "%s", err);
	sheaf_pool_destroy(p);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("pool_abi");
	TCase *tc = tcase_create("abi");

	tcase_add_test(tc, test_old_symbol);
	tcase_add_test(tc, test_v2_checks_policy);
	suite_add_tcase(su, tc);
	return run_suite(su);
}
