/*
 * test_fork.c - a pool inherited through fork() (client/sheaf.h, "fork()"):
 * in the child every call on the parent's pool and its caches fails with
 * ECHILD (the child must not talk over the parent's connection to sheafd,
 * nor change a local pool's shared descriptors), the child may release the
 * pool, and the parent's pool is unchanged afterwards.
 *
 * Two tests: a pool of a real sheafd (the build's, util_daemon.h, socket
 * in a temporary directory) and a local pool (sheaf_pool_create).
 *
 * Each test is its own TCase: CK_RUN_CASE=<name> runs one.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "client/sheaf.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_pool.h"
#include "tests/helpers/util_proc.h"

/* The cache's sheaf capacity, or ~0u when sheaf_cache_get_capacity fails. */
static unsigned capacity_of(const sheaf_cache_t *c)
{
	unsigned cap;

	return sheaf_cache_get_capacity(c, &cap) == 0 ? cap : ~0u;
}

#define CAPACITY 32u                 /* the cache's sheaf capacity */

/* ---- a sheafd of the test's own ------------------------------------------- */

/* Start sheafd (2 simulated nodes, 64 MiB; output to DIR/log) in a fresh
 * directory and wait until its socket accepts (util_daemon.h). */
static void start_sheafd(struct dmn *d)
{
	const char *argv[] = { sheafd_bin(), "--foreground", "--socket", d->sock,
			       "--nodes", "2", "--size", "64M", NULL };

	dmn_init_at(d, "/tmp/sheaf-fork-XXXXXX", "log");
	dmn_start_argv(d, (char *const *)argv);
}

/* ---- the child ---------------------------------------------------------------- */

/* In the child (Check is the parent's): say what failed, exit 1. */
#define CHILD_REQ(cond, what)                                                   \
	do {                                                                    \
		if (!(cond)) {                                                  \
			fprintf(stderr, "[fork child] %s: %s (errno %s)\n", what, \
				#cond, strerror(errno));                        \
			_exit(1);                                               \
		}                                                               \
	} while (0)

/* A call that returns NULL with errno. */
#define CHILD_NULL_ECHILD(call)                                                 \
	do {                                                                    \
		errno = 0;                                                      \
		void *r_ = (void *)(call);                                      \
		CHILD_REQ(r_ == NULL && errno == ECHILD, #call);                \
	} while (0)

/* A call that returns 0 or -errno. */
#define CHILD_ECHILD(call) CHILD_REQ((call) == -ECHILD, #call)

/* Every call on the inherited pool @p and its cache @c fails with ECHILD;
 * then the child releases the pool.  @obj: an object the parent holds. */
static int child_calls(sheaf_pool_t *p, sheaf_cache_t *c, void *obj)
{
	struct sheaf_stats st;
	void *objs[4];
	char err[256];

	CHILD_NULL_ECHILD(sheaf_cache_create(p, "child", 64, NULL));
	CHILD_NULL_ECHILD(sheaf_cache_open(p, "fork"));
	CHILD_ECHILD(sheaf_cache_set_capacity(c, 4));
	CHILD_ECHILD(sheaf_cache_shrink(c));
	CHILD_ECHILD(sheaf_cache_stats(c, -1, &st));
	CHILD_ECHILD(sheaf_cache_stats(c, 0, &st));
	CHILD_ECHILD(sheaf_pool_check(p, err, sizeof(err)));
	CHILD_NULL_ECHILD(sheaf_alloc(c));
	CHILD_ECHILD(sheaf_free(c, obj));
	CHILD_ECHILD(sheaf_alloc_bulk(c, objs, 4));
	CHILD_NULL_ECHILD(sheaf_prefill(c, 4));
	/* The descriptors are still readable, and nothing changed them. */
	CHILD_REQ(capacity_of(c) == CAPACITY, "capacity after set_capacity");
	sheaf_pool_destroy(p);
	return 0;
}

/*
 * Fork with @p connected (or created) and one object of cache "fork"
 * allocated; run child_calls in the child; then the parent's pool must work
 * as before: same capacity, the object freed, the pool checks clean.
 */
static void fork_and_check(sheaf_pool_t *p)
{
	struct sheaf_cache_config cfg = { .capacity = (int)CAPACITY };
	char err[256] = "";
	sheaf_cache_t *c;
	void *obj;
	pid_t pid;
	int st = 0;

	c = sheaf_cache_create(p, "fork", 64, &cfg);
	ck_assert_msg(c != NULL, "cache create: %s", strerror(errno));
	obj = sheaf_alloc(c);
	ck_assert_ptr_nonnull(obj);
	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(child_calls(p, c, obj));
	if (wait_pid(pid, 60000, &st) != 1) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		ck_abort_msg("the fork child hung (releasing the inherited pool?)");
	}
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "fork child: a call on the inherited pool did not fail with ECHILD "
		      "(see its message above; status 0x%x)", st);
	ck_assert_uint_eq(capacity_of(c), CAPACITY);
	ck_assert_int_eq(sheaf_free(c, obj), 0);
	ck_assert_int_ge(sheaf_cache_shrink(c), 0);
	ck_assert_msg(sheaf_pool_check(p, err, sizeof(err)) == 0, "check: %s", err);
}

START_TEST(fork_remote)
{
	char err[256] = "";
	sheaf_pool_t *p;
	struct dmn d;

	start_sheafd(&d);
	p = sheaf_connect(d.sock, "fork", 0, err, sizeof(err));
	ck_assert_msg(p != NULL, "connect: %s", err);
	fork_and_check(p);
	sheaf_disconnect(p);
	dmn_stop(&d, 30000);
	dmn_cleanup(&d);
}
END_TEST

START_TEST(fork_local)
{
	struct sheaf_pool_config cfg = { .size = 64u << 20, .nodes = 2 };
	sheaf_pool_t *p = pool_new(&cfg);

	fork_and_check(p);
	sheaf_pool_destroy(p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fork");

	require_binaries("test_fork");
	setvbuf(stdout, NULL, _IOLBF, 0);
	ADD_ALONE(s, fork_remote, 120);
	ADD_ALONE(s, fork_local, 120);
	return run_suite(s);
}
