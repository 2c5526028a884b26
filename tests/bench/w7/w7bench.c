/*
 * w7bench - W7 of BENCHMARKS.md (issue 10): zero-copy messages between two
 * processes, pinned to two CPUs.  One run, one contender, one figure:
 *   --peer sheaf   the producer allocates a message from a sheaf cache,
 *                  writes it whole, enqueues it on a shared queue; the
 *                  consumer dequeues it, reads it whole, frees it (both
 *                  processes connect to sheafd on their own: --socket)
 *   --peer socket  the Unix-socket copy baseline: the producer writes the
 *                  message whole into a buffer and write()s it to a
 *                  SOCK_STREAM socketpair; the consumer read()s it whole
 *                  and reads it
 *   --mode tput    million messages per second (consumer's clock)
 *   --mode pingpong  round trips (message there, message back), p50 and
 *                  p99 in microseconds
 * Output: one JSON line.  tests/bench/w7.sh runs the rounds and the table.
 * Usage: w7bench --peer sheaf|socket --mode tput|pingpong [--size B]
 *        [--count N] [--socket PATH] [--cpus A,B]
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "client/sheaf.h"

static const char *peer = "sheaf", *mode = "tput", *sock;
static size_t size = 64;
static uint64_t count = 2000000;
static int cpu_a = 0, cpu_b = 1;

struct shared {
	_Atomic int ready;
	_Atomic int go;
	double seconds;
	double p50_us, p99_us;       /* pingpong round trips (producer's clock) */
	uint64_t sink;
};
static struct shared *sh;

static void die(const char *m)
{
	fprintf(stderr, "w7bench: %s (%s)\n", m, strerror(errno));
	exit(1);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	sched_setaffinity(0, sizeof(s), &s);
}

static void start_line(void)
{
	atomic_fetch_add(&sh->ready, 1);
	while (atomic_load(&sh->ready) < 2)
		;
}

static void write_whole(unsigned char *p, uint64_t i)
{
	memset(p, (int)(i & 0xff), size);
}

static uint64_t read_whole(const unsigned char *p)
{
	uint64_t s = 0;

	for (size_t k = 0; k < size; k += 8)
		s += *(const uint64_t *)(p + k);
	return s;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void percentiles(double *lat)
{
	if (lat == NULL)
		return;
	qsort(lat, count, sizeof(double), cmp_double);
	sh->p50_us = lat[count / 2];
	sh->p99_us = lat[count * 99 / 100];
	free(lat);
}

/* ---- sheaf -------------------------------------------------------------- */

struct sheaf_side {
	sheaf_pool_t *pool;
	sheaf_cache_t *c;
	sheaf_queue_t *to, *back;
};

static void sheaf_side_open(struct sheaf_side *s, const char *name)
{
	char err[256];

	s->pool = sheaf_connect(sock, name, 0, err, sizeof(err));
	if (s->pool == NULL) {
		fprintf(stderr, "w7bench: %s\n", err);
		exit(1);
	}
	s->c = sheaf_cache_open(s->pool, "w7");
	s->to = sheaf_queue_open(s->pool, "w7.to");
	s->back = sheaf_queue_open(s->pool, "w7.back");
	if (s->c == NULL || s->to == NULL || s->back == NULL)
		die("open");
}

static void *deq_spin(sheaf_queue_t *q)
{
	void *o;

	while (sheaf_dequeue(q, &o) != 0)
		;
	return o;
}

static int sheaf_producer(void)
{
	struct sheaf_side s;

	double *lat = mode[0] == 'p' ? malloc(count * sizeof(double)) : NULL, t0 = 0;

	pin(cpu_a);
	sheaf_side_open(&s, "w7-producer");
	start_line();
	for (uint64_t i = 0; i < count; i++) {
		unsigned char *m = (lat ? t0 = now() : 0, sheaf_alloc(s.c));

		if (m == NULL)
			die("alloc");
		write_whole(m, i);
		while (sheaf_enqueue(s.to, m) != 0)
			;
		if (mode[0] == 'p') {            /* pingpong: wait for the reply */
			m = deq_spin(s.back);
			sh->sink += read_whole(m);
			sheaf_free(s.c, m);
			lat[i] = (now() - t0) * 1e6;
		}
	}
	percentiles(lat);
	sheaf_disconnect(s.pool);
	return 0;
}

static int sheaf_consumer(void)
{
	struct sheaf_side s;
	double t0;

	pin(cpu_b);
	sheaf_side_open(&s, "w7-consumer");
	start_line();
	t0 = now();
	for (uint64_t i = 0; i < count; i++) {
		unsigned char *m = deq_spin(s.to);

		sh->sink += read_whole(m);
		sheaf_free(s.c, m);
		if (mode[0] == 'p') {
			m = sheaf_alloc(s.c);
			write_whole(m, i);
			while (sheaf_enqueue(s.back, m) != 0)
				;
		}
	}
	sh->seconds = now() - t0;
	sheaf_disconnect(s.pool);
	return 0;
}

/* ---- socket ------------------------------------------------------------- */

static int fds[2];

static void xfer(int fd, unsigned char *buf, int out)
{
	size_t done = 0;

	while (done < size) {
		ssize_t n = out ? write(fd, buf + done, size - done) : read(fd, buf + done, size - done);

		if (n <= 0)
			die("socket");
		done += (size_t)n;
	}
}

static int socket_producer(void)
{
	unsigned char *buf = malloc(size), *in = malloc(size);
	double *lat = mode[0] == 'p' ? malloc(count * sizeof(double)) : NULL, t0 = 0;

	pin(cpu_a);
	start_line();
	for (uint64_t i = 0; i < count; i++) {
		if (lat)
			t0 = now();
		write_whole(buf, i);
		xfer(fds[0], buf, 1);
		if (mode[0] == 'p') {
			xfer(fds[0], in, 0);
			sh->sink += read_whole(in);
			lat[i] = (now() - t0) * 1e6;
		}
	}
	percentiles(lat);
	return 0;
}

static int socket_consumer(void)
{
	unsigned char *buf = malloc(size);
	double t0;

	pin(cpu_b);
	start_line();
	t0 = now();
	for (uint64_t i = 0; i < count; i++) {
		xfer(fds[1], buf, 0);
		sh->sink += read_whole(buf);
		if (mode[0] == 'p') {
			write_whole(buf, i);
			xfer(fds[1], buf, 1);
		}
	}
	sh->seconds = now() - t0;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "peer", required_argument, NULL, 'p' }, { "mode", required_argument, NULL, 'm' },
		{ "size", required_argument, NULL, 'z' }, { "count", required_argument, NULL, 'n' },
		{ "socket", required_argument, NULL, 's' }, { "cpus", required_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};
	int o, sheaf = 0, st, ok = 1;
	pid_t prod, cons;

	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 'p': peer = optarg; break;
		case 'm': mode = optarg; break;
		case 'z': size = strtoull(optarg, NULL, 0); break;
		case 'n': count = strtoull(optarg, NULL, 0); break;
		case 's': sock = optarg; break;
		case 'c': sscanf(optarg, "%d,%d", &cpu_a, &cpu_b); break;
		default: return 2;
		}
	}
	size = (size + 7) & ~(size_t)7;
	sheaf = strcmp(peer, "sheaf") == 0;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		die("mmap");
	if (sheaf) {
		char err[256];
		sheaf_pool_t *p = sheaf_connect(sock, "w7", 0, err, sizeof(err));
		sheaf_queue_t *q;

		if (p == NULL) {
			fprintf(stderr, "w7bench: %s\n", err);
			return 1;
		}
		sheaf_cache_create(p, "w7", size, NULL);
		if ((q = sheaf_queue_create(p, "w7.to", 1024, 0)) != NULL)
			sheaf_queue_close(q);
		if ((q = sheaf_queue_create(p, "w7.back", 1024, 0)) != NULL)
			sheaf_queue_close(q);
		sheaf_disconnect(p);
	} else if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) {
		die("socketpair");
	}
	cons = fork();
	if (cons == 0)
		_exit(sheaf ? sheaf_consumer() : socket_consumer());
	prod = fork();
	if (prod == 0)
		_exit(sheaf ? sheaf_producer() : socket_producer());
	ok &= waitpid(prod, &st, 0) == prod && WIFEXITED(st) && WEXITSTATUS(st) == 0;
	ok &= waitpid(cons, &st, 0) == cons && WIFEXITED(st) && WEXITSTATUS(st) == 0;
	if (!ok) {
		fprintf(stderr, "w7bench: a side failed\n");
		return 1;
	}
	if (mode[0] == 't')
		printf("{\"peer\":\"%s\",\"mode\":\"tput\",\"size\":%zu,\"count\":%llu,"
		       "\"mmsgs_per_s\":%.3f}\n", peer, size, (unsigned long long)count,
		       (double)count / sh->seconds / 1e6);
	else
		printf("{\"peer\":\"%s\",\"mode\":\"pingpong\",\"size\":%zu,\"count\":%llu,"
		       "\"rtt_p50_us\":%.3f,\"rtt_p99_us\":%.3f}\n", peer, size,
		       (unsigned long long)count, sh->p50_us, sh->p99_us);
	return 0;
}
