/*
 * w7.h - what every W7 contender shares (docs/benchmarks.md, W7): the
 * run's shared block, the waiting rule, the message work and the phase
 * loops.  Included by w7bench.c (the driver, sheaf and the socket
 * baseline), w7dpdk.c (DPDK primary/secondary) and w7iox.c (iceoryx); a
 * contender supplies four operations (struct w7_ops) and calls
 * w7_producer() or w7_consumer(), so every contender runs the same loops.
 *
 * One invocation of a contender runs, in one producer and one consumer
 * process pinned to two CPUs, these phases (each after a two-party
 * barrier): a warm-up and a timed throughput run at 64 B, the same at
 * 1 KiB, then ping-pong at 64 B and at 1 KiB (ping-pong only for B = 1).
 *
 * Throughput: a fixed message count; the clock runs from the producer's
 * first allocation to the consumer's last free (CLOCK_MONOTONIC, which is
 * the same clock in both processes): tput_wall.  The figure reported
 * (tput) is the median of the rates of the run's consecutive chunks of
 * W7_CHUNK messages (the consumer notes the time after each chunk):
 * on a shared 2-CPU machine whose other load takes our CPUs away now and
 * then (and nice cannot help across cgroups), a chunk during which one
 * side was descheduled is slow and lands in the upper half, so the median
 * is the rate while both sides run, and stays put from run to run, while
 * tput_wall follows the machine's load.  Ping-pong: the producer's round trip
 * (alloc, write, send; the consumer takes it, reads, frees, allocates,
 * writes and sends a reply; the producer takes, reads and frees it), after
 * W7_PP_WARM untimed trips; p50 and p99.
 *
 * Waiting (every shared-memory contender alike, and the socket baseline
 * through non-blocking calls): spin W7_SPINS times with the pause
 * instruction, then sched_yield() on each further miss.  Not a futex or
 * blocking wait, because that would measure the kernel's wake-up (several
 * microseconds) instead of the hand-off, and not a pure spin, because on a
 * loaded 2-CPU machine a spinner whose partner was descheduled would burn
 * its whole time slice: the yield gives the CPU to whoever is runnable.
 * iceoryx's publisher waits inside publish (WAIT_FOR_CONSUMER), which is
 * its own spin-and-yield.
 */
#ifndef SHEAF_W7_H
#define SHEAF_W7_H

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define W7_SIZES     2
#define W7_CAPACITY  256     /* sheaf caches: as the DPDK peer's POOL_CACHE */
#define W7_BATCH_MAX 32
#define W7_SPINS     128
#define W7_PP_WARM   1000
#define W7_CHUNK     1024    /* messages per rate sample */
static const unsigned w7_size[W7_SIZES] = { 64, 1024 };

/* The run's shared block: a memfd the driver maps and its exec'd children
 * map through --w7-fd (fork children inherit the mapping). */
struct w7_shared {
	_Atomic uint32_t arrived;    /* barrier: arrivals so far */
	_Atomic uint32_t primary_up; /* DPDK: the primary's objects exist */
	_Atomic int failed;          /* a side gave up: the other stops */
	_Atomic double t_start;      /* producer's first allocation */
	uint64_t count, pp_count;
	unsigned batch;
	double tput[W7_SIZES];       /* million messages per second: median
				      * of the chunks' rates */
	double tput_wall[W7_SIZES];  /* count / (last free - first alloc) */
	double p50[W7_SIZES], p99[W7_SIZES];  /* round trip, us */
	uint64_t sink;
	char err[256];
};

/* What a contender supplies.  @s: the size index; @dir 0: producer to
 * consumer, 1: the reply.  get: allocate up to @n messages (0 when none
 * now); send (a message of size index @s): hand over up to @n, the number taken (0 when full now);
 * recv: take up to @n (0 when empty now); put: free @n. */
struct w7_ops {
	unsigned (*get)(void *ctx, int s, void **m, unsigned n);
	unsigned (*send)(void *ctx, int s, int dir, void **m, unsigned n);
	unsigned (*recv)(void *ctx, int s, int dir, void **m, unsigned n);
	void (*put)(void *ctx, int s, void **m, unsigned n);
	void *ctx;
};

static inline double w7_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void w7_wait(unsigned *spins)
{
	if (++*spins < W7_SPINS)
		__builtin_ia32_pause();
	else
		sched_yield();
}

static inline void w7_fail(struct w7_shared *sh, const char *what)
{
	snprintf(sh->err, sizeof(sh->err), "%s (%s)", what, strerror(errno));
	atomic_store(&sh->failed, 1);
	fprintf(stderr, "w7: %s\n", sh->err);
	exit(1);
}

/* Both sides arrive at barrier @k (1, 2, ...). */
static inline void w7_barrier(struct w7_shared *sh, uint32_t k)
{
	unsigned spins = 0;

	atomic_fetch_add(&sh->arrived, 1);
	while (atomic_load(&sh->arrived) < 2 * k) {
		if (atomic_load(&sh->failed))
			exit(1);
		w7_wait(&spins);
	}
}

static inline void w7_write_whole(unsigned char *p, unsigned size, uint64_t i)
{
	memset(p, (int)(i & 0xff), size);
}

static inline uint64_t w7_read_whole(const unsigned char *p, unsigned size)
{
	uint64_t s = 0;

	for (unsigned k = 0; k < size; k += 8)
		s += *(const uint64_t *)(const void *)(p + k);
	return s;
}

/* Loops until all @n of @m are sent. */
static inline void w7_send_all(const struct w7_ops *o, struct w7_shared *sh, int s, int dir,
			       void **m, unsigned n)
{
	unsigned done = 0, spins = 0;

	while (done < n) {
		unsigned k = o->send(o->ctx, s, dir, m + done, n - done);

		if (k == 0) {
			if (atomic_load(&sh->failed))
				exit(1);
			w7_wait(&spins);
			continue;
		}
		done += k;
		spins = 0;
	}
}

static inline void w7_get_all(const struct w7_ops *o, struct w7_shared *sh, int s,
			      void **m, unsigned n)
{
	unsigned done = 0, spins = 0;

	while (done < n) {
		unsigned k = o->get(o->ctx, s, m + done, n - done);

		if (k == 0) {
			if (atomic_load(&sh->failed))
				exit(1);
			w7_wait(&spins);
			continue;
		}
		done += k;
	}
}

static inline unsigned w7_recv_some(const struct w7_ops *o, struct w7_shared *sh, int s,
				    int dir, void **m, unsigned n)
{
	unsigned spins = 0, k;

	while ((k = o->recv(o->ctx, s, dir, m, n)) == 0) {
		if (atomic_load(&sh->failed))
			exit(1);
		w7_wait(&spins);
	}
	return k;
}

static inline int w7_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static inline void w7_produce(const struct w7_ops *o, struct w7_shared *sh, int s,
			      uint64_t count, int timed)
{
	void *m[W7_BATCH_MAX];
	unsigned b = sh->batch;

	if (timed)
		atomic_store(&sh->t_start, w7_now());
	for (uint64_t i = 0; i < count;) {
		unsigned n = count - i < b ? (unsigned)(count - i) : b;

		w7_get_all(o, sh, s, m, n);
		for (unsigned k = 0; k < n; k++)
			w7_write_whole(m[k], w7_size[s], i + k);
		w7_send_all(o, sh, s, 0, m, n);
		i += n;
	}
}

static inline void w7_consume(const struct w7_ops *o, struct w7_shared *sh, int s,
			      uint64_t count, int timed)
{
	void *m[W7_BATCH_MAX];
	uint64_t sink = 0, next = W7_CHUNK, last_got = 0, cap = count / W7_CHUNK + 2, nr = 0;
	double *rate = timed ? malloc(cap * sizeof(double)) : NULL, last_t = 0;

	if (timed && rate == NULL)
		w7_fail(sh, "malloc");
	for (uint64_t got = 0; got < count;) {
		unsigned want = count - got < sh->batch ? (unsigned)(count - got) : sh->batch;
		unsigned k = w7_recv_some(o, sh, s, 0, m, want);

		for (unsigned j = 0; j < k; j++)
			sink += w7_read_whole(m[j], w7_size[s]);
		o->put(o->ctx, s, m, k);
		got += k;
		if (timed && got >= next && nr < cap) {
			double t = w7_now();

			if (nr == 0)     /* the producer's clock started it */
				last_t = atomic_load(&sh->t_start);
			rate[nr++] = (double)(got - last_got) / (t - last_t) / 1e6;
			last_t = t;
			last_got = got;
			next += W7_CHUNK;
		}
	}
	if (timed) {
		sh->tput_wall[s] = (double)count / (w7_now() - atomic_load(&sh->t_start)) / 1e6;
		qsort(rate, nr, sizeof(double), w7_cmp_double);
		sh->tput[s] = nr > 0 ? rate[nr / 2] : sh->tput_wall[s];
		free(rate);
	}
	sh->sink += sink;
}

static inline void w7_ping(const struct w7_ops *o, struct w7_shared *sh, int s)
{
	uint64_t n = sh->pp_count + W7_PP_WARM;
	double *lat = malloc(sh->pp_count * sizeof(double));

	if (lat == NULL)
		w7_fail(sh, "malloc");
	for (uint64_t i = 0; i < n; i++) {
		double t0 = w7_now();
		void *m;

		w7_get_all(o, sh, s, &m, 1);
		w7_write_whole(m, w7_size[s], i);
		w7_send_all(o, sh, s, 0, &m, 1);
		w7_recv_some(o, sh, s, 1, &m, 1);
		sh->sink += w7_read_whole(m, w7_size[s]);
		o->put(o->ctx, s, &m, 1);
		if (i >= W7_PP_WARM)
			lat[i - W7_PP_WARM] = (w7_now() - t0) * 1e6;
	}
	qsort(lat, sh->pp_count, sizeof(double), w7_cmp_double);
	sh->p50[s] = lat[sh->pp_count / 2];
	sh->p99[s] = lat[sh->pp_count * 99 / 100];
	free(lat);
}

static inline void w7_pong(const struct w7_ops *o, struct w7_shared *sh, int s)
{
	uint64_t n = sh->pp_count + W7_PP_WARM;

	for (uint64_t i = 0; i < n; i++) {
		void *m;

		w7_recv_some(o, sh, s, 0, &m, 1);
		sh->sink += w7_read_whole(m, w7_size[s]);
		o->put(o->ctx, s, &m, 1);
		w7_get_all(o, sh, s, &m, 1);
		w7_write_whole(m, w7_size[s], i);
		w7_send_all(o, sh, s, 1, &m, 1);
	}
}

/* The phases (see the top); both sides call their half after setting up. */
static inline void w7_producer(const struct w7_ops *o, struct w7_shared *sh)
{
	uint32_t k = 1;

	w7_barrier(sh, k++);
	for (int s = 0; s < W7_SIZES; s++) {
		w7_produce(o, sh, s, sh->count / 10 + 1, 0);
		w7_barrier(sh, k++);
		w7_produce(o, sh, s, sh->count, 1);
		w7_barrier(sh, k++);
	}
	for (int s = 0; s < W7_SIZES && sh->batch == 1 && sh->pp_count > 0; s++) {
		w7_ping(o, sh, s);
		w7_barrier(sh, k++);
	}
}

static inline void w7_consumer(const struct w7_ops *o, struct w7_shared *sh)
{
	uint32_t k = 1;

	w7_barrier(sh, k++);
	for (int s = 0; s < W7_SIZES; s++) {
		w7_consume(o, sh, s, sh->count / 10 + 1, 0);
		w7_barrier(sh, k++);
		w7_consume(o, sh, s, sh->count, 1);
		w7_barrier(sh, k++);
	}
	for (int s = 0; s < W7_SIZES && sh->batch == 1 && sh->pp_count > 0; s++) {
		w7_pong(o, sh, s);
		w7_barrier(sh, k++);
	}
}

/* A child's view of the shared block: --w7-fd N. */
static inline struct w7_shared *w7_map_fd(int fd)
{
	void *p = mmap(NULL, sizeof(struct w7_shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	return p == MAP_FAILED ? NULL : p;
}

#endif
