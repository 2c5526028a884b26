/*
 * prefork_server.c - a pre-fork server on sheaf: the parent connects to
 * sheafd, finds (or creates) a shared table by name, forks N workers and
 * waits for them; each worker drops the pool it inherited (a fork() child
 * may not use its parent's pool: sheaf.h on fork), connects on its own,
 * finds the same table by name and counts its requests in it; the parent
 * then checks the table.  Only the public API (sheaf.h) is used; it is
 * built against the installed library with a plain
 *
 *   cc -O2 -o prefork_server prefork_server.c $(pkg-config --cflags --libs sheaf)
 *
 * and run by `make test` (tests/deploy/test_example_prefork.c).  Usage:
 *   prefork_server [WORKERS [REQUESTS]]   (sheafd at $SHEAF_SOCKET)
 * Exit status 0 when the table adds up, 1 otherwise.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sheaf.h>

#define MAX_WORKERS 64

/* The shared table: one object of the "prefork" cache, named
 * "prefork.table"; sheaf_name_get_or_create zero-fills it. */
struct table {
	_Atomic unsigned long requests;          /* by every worker */
	_Atomic unsigned workers_seen;
	_Atomic unsigned long per_worker[MAX_WORKERS];
};

static struct table *find_table(sheaf_pool_t *pool, int *created)
{
	sheaf_cache_t *cache = sheaf_cache_create_or_open(pool, "prefork", sizeof(struct table),
							  NULL, NULL);

	if (cache == NULL) {
		perror("prefork: cache");
		return NULL;
	}
	return sheaf_name_get_or_create(pool, "prefork.table", cache, created);
}

/* One worker: its own connection, the table by name, @requests requests. */
static int worker(sheaf_pool_t *inherited, int id, long requests)
{
	char err[256] = "", name[32];
	struct table *t;
	sheaf_pool_t *pool;

	sheaf_disconnect(inherited);             /* the fork rule */
	snprintf(name, sizeof(name), "worker-%d", id);
	pool = sheaf_connect(NULL, name, 0, err, sizeof(err));
	if (pool == NULL) {
		fprintf(stderr, "worker %d: connect: %s\n", id, err);
		return 1;
	}
	t = find_table(pool, NULL);
	if (t == NULL) {
		fprintf(stderr, "worker %d: no table: %s\n", id, strerror(errno));
		return 1;
	}
	atomic_fetch_add(&t->workers_seen, 1);
	for (long i = 0; i < requests; i++) {
		atomic_fetch_add(&t->requests, 1);   /* "serve" one request */
		atomic_fetch_add(&t->per_worker[id], 1);
	}
	sheaf_disconnect(pool);
	return 0;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4, created = 0, failed = 0;
	long requests = argc > 2 ? atol(argv[2]) : 10000;
	unsigned long before;
	char err[256] = "";
	sheaf_pool_t *pool;
	struct table *t;

	if (n < 1 || n > MAX_WORKERS || requests < 0) {
		fprintf(stderr, "usage: prefork_server [WORKERS 1..%d [REQUESTS]]\n", MAX_WORKERS);
		return 2;
	}
	pool = sheaf_connect(NULL, "prefork-parent", 0, err, sizeof(err));
	if (pool == NULL) {
		fprintf(stderr, "prefork: connect: %s\n", err);
		return 1;
	}
	t = find_table(pool, &created);
	if (t == NULL) {
		fprintf(stderr, "prefork: no table: %s\n", strerror(errno));
		return 1;
	}
	before = atomic_load(&t->requests);      /* an earlier run's, if any */
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();

		if (pid == 0)
			_exit(worker(pool, i, requests));
		if (pid < 0) {
			perror("prefork: fork");
			return 1;
		}
	}
	for (int i = 0; i < n; i++) {
		int st;

		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			failed++;
	}
	printf("prefork: table %s at offset %llu; %d workers, %lu requests counted\n",
	       created ? "created" : "found", (unsigned long long)sheaf_ptr_to_off(pool, t), n,
	       atomic_load(&t->requests) - before);
	if (failed || atomic_load(&t->requests) - before != (unsigned long)n * requests) {
		fprintf(stderr, "prefork: %d workers failed; %lu requests, want %lu\n", failed,
			atomic_load(&t->requests) - before, (unsigned long)n * requests);
		return 1;
	}
	sheaf_disconnect(pool);
	printf("prefork: ok\n");
	return 0;
}
