/*
 * test_refusals_said.c - errors that say what happened, at the edges a
 * caller cannot see past: sheaf_name_set refuses an object that is free
 * (in its slab, or, where the cache records it, in a sheaf: a debug
 * cache's in-use bit, an owned cache's owner tag) and never an allocated
 * one; a control request while no sheafd runs fails with the documented
 * -ECONNREFUSED (the socket left by a killed daemon, or none at all), not
 * with the broken connection's EPIPE.  sheaf.h states both rules.
 *
 * Each test is its own TCase: CK_RUN_CASE=<name> runs one.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_pool.h"

/* A free object of @c: allocated, then freed (it sits in this thread's
 * main sheaf). */
static void *freed_object(sheaf_cache_t *c)
{
	void *o = xalloc(c);

	ck_assert_int_eq(sheaf_free(c, o), 0);
	return o;
}

static void free_in_sheaf_refused(unsigned flags)
{
	sheaf_pool_t *p = pool_new(NULL);
	sheaf_cache_t *c = mkcache(p, "named", 64, SHEAF_CAPACITY_DEFAULT, flags);
	void *held = xalloc(c), *o = freed_object(c);

	ck_assert_int_eq(sheaf_name_set(p, "free", o), -EINVAL);
	ck_assert_ptr_null(sheaf_name_get(p, "free"));
	/* Allocated objects are named, the free one's slot again once allocated. */
	ck_assert_int_eq(sheaf_name_set(p, "held", held), 0);
	ck_assert_ptr_eq(sheaf_name_get(p, "held"), held);
	ck_assert_ptr_eq(xalloc(c), o);              /* the top of the sheaf */
	ck_assert_int_eq(sheaf_name_set(p, "free", o), 0);
	ck_assert_ptr_eq(sheaf_name_get(p, "free"), o);
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}

START_TEST(name_set_free_in_sheaf_debug)
{
	free_in_sheaf_refused(SHEAF_CACHE_DEBUG);
}
END_TEST

START_TEST(name_set_free_in_sheaf_owned)
{
	free_in_sheaf_refused(SHEAF_CACHE_OWNED);
}
END_TEST

/* Any cache: an object free in its slab is refused (a plain cache records
 * no more: sheaf.h's rule). */
START_TEST(name_set_free_in_slab)
{
	sheaf_pool_t *p = pool_new(NULL);
	sheaf_cache_t *c = mkcache(p, "plain", 64, SHEAF_CAPACITY_DEFAULT, 0);
	void *held = xalloc(c), *o = freed_object(c);

	ck_assert_int_ge(sheaf_cache_shrink(c), 0);  /* the thread's sheaves to the slabs */
	ck_assert_int_eq(sheaf_name_set(p, "free", o), -EINVAL);
	ck_assert_int_eq(sheaf_name_set(p, "held", held), 0);
	ck_assert_int_eq(sheaf_name_set(p, "off", (char *)held + 8), -EINVAL);
	sheaf_pool_destroy(p);
}
END_TEST

/* Control requests of @p with no sheafd behind them: -ECONNREFUSED. */
static void require_outage(sheaf_pool_t *p, sheaf_cache_t *c, void *o, const char *what)
{
	struct sheaf_stats st;

	errno = 0;
	ck_assert_ptr_null(sheaf_cache_create(p, "after", 64, NULL));
	REQUIRE(errno == ECONNREFUSED, "%s: cache create: %s", what, strerror(errno));
	REQUIRE(sheaf_name_set(p, "x", o) == -ECONNREFUSED, "%s: name_set", what);
	REQUIRE(sheaf_cache_set_capacity(c, 8) == -ECONNREFUSED, "%s: set_capacity", what);
	REQUIRE(sheaf_cache_stats(c, -1, &st) == -ECONNREFUSED, "%s: stats", what);
	/* What needs no request goes on. */
	ck_assert_ptr_eq(sheaf_off_to_ptr(p, sheaf_ptr_to_off(p, o)), o);
}

START_TEST(outage_errno_socket_left)
{
	struct dmn d;
	char err[256];
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	void *o;

	dmn_init(&d);
	dmn_start(&d, NULL);
	p = sheaf_connect(d.sock, "outage", 0, err, sizeof(err));
	REQUIRE(p != NULL, "connect: %s", err);
	ck_assert_int_eq(sheaf_pool_set_timeout(p, 1000), 0);
	c = sheaf_cache_create(p, "c", 64, NULL);
	REQUIRE(c != NULL, "create: %s", strerror(errno));
	o = xalloc(c);                       /* before: allocation needs the engine */
	kill(d.pid, SIGKILL);                /* its socket file stays */
	waitpid(d.pid, NULL, 0);
	d.pid = 0;
	REQUIRE(access(d.sock, F_OK) == 0, "the socket should be left");
	require_outage(p, c, o, "socket left");
	unlink(d.sock);                      /* and then none at all */
	require_outage(p, c, o, "no socket");
	sheaf_disconnect(p);
	dmn_cleanup(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("refusals_said");

	require_binaries("test_refusals_said");
	signal(SIGPIPE, SIG_IGN);
	ADD_ALONE(s, name_set_free_in_sheaf_debug, 30);
	ADD_ALONE(s, name_set_free_in_sheaf_owned, 30);
	ADD_ALONE(s, name_set_free_in_slab, 30);
	ADD_ALONE(s, outage_errno_socket_left, 60);
	return run_suite(s);
}
