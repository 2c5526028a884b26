/*
 * pipeline.c - a producer process and two consumer processes passing
 * messages through a named sheaf queue, zero-copy: the producer allocates
 * each message from a sheaf cache, writes it and enqueues it; a consumer
 * dequeues it, reads it and frees it.  Built against the installed
 * libsheaf with plain `cc -O2 pipeline.c -lsheaf`
 * (tests/deploy/test_example_pipeline.c does that and runs it in `make
 * test`).
 *
 * Usage: pipeline [SOCKET [MESSAGES]]   (SOCKET: sheafd's; default: its own)
 * Exit status 0 when every message arrived intact exactly once.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sheaf.h>

#define STOP UINT64_MAX

struct msg {
	uint64_t seq;                /* STOP: no more messages */
	uint64_t sum;                /* of payload[] */
	uint8_t payload[240];
};

static const char *sock;

static sheaf_pool_t *connect_or_die(const char *who)
{
	char err[256];
	sheaf_pool_t *p = sheaf_connect(sock, who, 0, err, sizeof(err));

	if (p == NULL) {
		fprintf(stderr, "%s: sheaf_connect: %s\n", who, err);
		exit(1);
	}
	return p;
}

static int producer(uint64_t n)
{
	sheaf_pool_t *pool = connect_or_die("producer");
	sheaf_cache_t *c = sheaf_cache_open(pool, "pipeline.msg");
	sheaf_queue_t *q = sheaf_queue_open(pool, "pipeline");

	if (c == NULL || q == NULL)
		return 1;
	for (uint64_t i = 0; i <= n + 1; i++) {
		struct msg *m = sheaf_alloc(c);

		if (m == NULL)
			return 1;
		m->seq = i < n ? i : STOP;           /* two STOPs: one per consumer */
		m->sum = 0;
		for (size_t k = 0; k < sizeof(m->payload); k++) {
			m->payload[k] = (uint8_t)(i * 31 + k);
			m->sum += m->payload[k];
		}
		if (sheaf_enqueue_wait(q, m, -1) != 0)    /* blocks while full */
			return 1;
	}
	sheaf_queue_close(q);
	sheaf_disconnect(pool);
	return 0;
}

/* Counts what it received on @out (a pipe). */
static int consumer(const char *name, int out)
{
	sheaf_pool_t *pool = connect_or_die(name);
	sheaf_cache_t *c = sheaf_cache_open(pool, "pipeline.msg");
	sheaf_queue_t *q = sheaf_queue_open(pool, "pipeline");
	uint64_t got = 0, bad = 0;

	if (c == NULL || q == NULL)
		return 1;
	for (;;) {
		struct msg *m;
		uint64_t sum = 0;

		if (sheaf_dequeue_wait(q, (void **)&m, -1) != 0)   /* sleeps while empty */
			return 1;
		if (m->seq == STOP) {
			sheaf_free(c, m);
			break;
		}
		for (size_t k = 0; k < sizeof(m->payload); k++)
			sum += m->payload[k];
		bad += sum != m->sum;
		got++;
		sheaf_free(c, m);
	}
	printf("%s: %llu messages\n", name, (unsigned long long)got);
	fflush(stdout);
	if (write(out, &got, sizeof(got)) != sizeof(got))
		return 1;
	sheaf_queue_close(q);
	sheaf_disconnect(pool);
	return bad == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 0) : 200000, total = 0, k;
	sheaf_pool_t *pool;
	sheaf_queue_t *q;
	pid_t pid[3];
	int fds[2], status, ok = 1;

	sock = argc > 1 ? argv[1] : NULL;
	/* Set up the cache and the queue, then let go of the pool: each
	 * process connects on its own (a fork() child cannot use its
	 * parent's pool). */
	pool = connect_or_die("pipeline");
	if (sheaf_cache_create(pool, "pipeline.msg", sizeof(struct msg), NULL) == NULL ||
	    (q = sheaf_queue_create(pool, "pipeline", 1024, 0)) == NULL) {
		fprintf(stderr, "pipeline: create: %s\n", strerror(errno));
		return 1;
	}
	sheaf_queue_close(q);
	sheaf_disconnect(pool);
	if (pipe(fds) != 0)
		return 1;
	for (int i = 0; i < 3; i++) {
		pid[i] = fork();
		if (pid[i] == 0)
			_exit(i == 0 ? producer(n) : consumer(i == 1 ? "consumer-1" : "consumer-2", fds[1]));
	}
	close(fds[1]);
	for (int i = 0; i < 3; i++)
		ok &= waitpid(pid[i], &status, 0) == pid[i] && WIFEXITED(status) &&
		      WEXITSTATUS(status) == 0;
	while (read(fds[0], &k, sizeof(k)) == sizeof(k))
		total += k;
	pool = connect_or_die("pipeline");
	q = sheaf_queue_open(pool, "pipeline");
	if (q == NULL || sheaf_queue_destroy(q) != 0)
		ok = 0;
	sheaf_disconnect(pool);
	printf("pipeline: %llu of %llu messages arrived%s\n", (unsigned long long)total,
	       (unsigned long long)n, ok && total == n ? "" : " -- FAILED");
	return ok && total == n ? 0 : 1;
}
