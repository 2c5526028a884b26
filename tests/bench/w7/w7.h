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
 * The large run (--large in w7bench; sh->large): messages of 64 KiB,
 * 1 MiB and 4 MiB (W7L_SIZES), each in two throughput forms, "whole"
 * (every byte written and read, as above) and "pages" (one cache line of
 * each 4 KiB page written and read), then ping-pong at 64 B and at the
 * three sizes writing and reading the first line only (the transport's
 * own cost, whatever the size).  Its timed counts shrink with the size
 * (sh->count messages of 64 KiB, 16x fewer of 1 MiB, 64x fewer of 4 MiB),
 * its rate samples are sixteenths of a run, and the producer stays at most
 * sh->depth[s] messages (32 MiB, 8 to 512 of them) ahead of the
 * consumer's frees (sh->freed), whatever the contender's queue depth, so
 * that every contender holds the same memory in flight.
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

#define W7_SIZES     4       /* the most sizes of a run (sh->nsizes) */
#define W7_CAPACITY  256     /* sheaf caches: as the DPDK peer's POOL_CACHE */
#define W7_BATCH_MAX 32
#define W7_SPINS     128
#define W7_PP_WARM   1000
#define W7L_PP_WARM  100
#define W7_CHUNK     1024    /* messages per rate sample */
#define W7_LINE      64
#define W7_PAGE      4096
#define W7_DEPTH     1024    /* in flight at most, small messages */
#define W7L_INFLIGHT (32u << 20)  /* bytes in flight at most, large run */
/* The small run's sizes (index 0, 1); the large run's (index 0: 64 B for
 * its ping-pong, 1-3: the large messages). */
static const unsigned w7_small_size[2] = { 64, 1024 };
static const unsigned w7_large_size[4] = { 64, 64u << 10, 1u << 20, 4u << 20 };
enum { W7_WHOLE, W7_PAGES, W7_FORMS };

/* The run's shared block: a memfd the driver maps and its exec'd children
 * map through --w7-fd (fork children inherit the mapping). */
struct w7_shared {
	_Atomic uint32_t arrived;    /* barrier: arrivals so far */
	_Atomic uint32_t primary_up; /* DPDK: the primary's objects exist */
	_Atomic int failed;          /* a side gave up: the other stops */
	_Atomic double t_start;      /* producer's first allocation */
	_Alignas(64) _Atomic uint64_t freed;  /* large run: the consumer's frees */
	_Alignas(64) uint64_t count, pp_count;
	unsigned batch;
	int large;                   /* the large run (see the top) */
	unsigned nsizes;
	unsigned size[W7_SIZES];     /* message bytes */
	unsigned depth[W7_SIZES];    /* messages in flight at most */
	double tput[W7_FORMS][W7_SIZES];  /* million messages per second:
					   * median of the chunks' rates */
	double tput_wall[W7_FORMS][W7_SIZES];  /* count / (last free - first alloc) */
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

/* "pages": the first line of each 4 KiB page (of the first @size bytes). */
static inline void w7_write_pages(unsigned char *p, unsigned size, uint64_t i)
{
	for (unsigned k = 0; k < size; k += W7_PAGE)
		memset(p + k, (int)(i & 0xff), size - k < W7_LINE ? size - k : W7_LINE);
}

static inline uint64_t w7_read_pages(const unsigned char *p, unsigned size)
{
	uint64_t s = 0;

	for (unsigned k = 0; k < size; k += W7_PAGE)
		s += w7_read_whole(p + k, size - k < W7_LINE ? size - k : W7_LINE);
	return s;
}

static inline void w7_write(int form, unsigned char *p, unsigned size, uint64_t i)
{
	if (form == W7_PAGES)
		w7_write_pages(p, size, i);
	else
		w7_write_whole(p, size, i);
}

static inline uint64_t w7_read(int form, const unsigned char *p, unsigned size)
{
	return form == W7_PAGES ? w7_read_pages(p, size) : w7_read_whole(p, size);
}

/* The run's sizes and depths, set by the driver: the small run (64 B,
 * 1 KiB) or the large one. */
static inline void w7_set_sizes(struct w7_shared *sh, int large)
{
	sh->large = large;
	sh->nsizes = large ? 4 : 2;
	for (unsigned s = 0; s < sh->nsizes; s++) {
		sh->size[s] = large ? w7_large_size[s] : w7_small_size[s];
		sh->depth[s] = W7_DEPTH;
		if (large && sh->size[s] > W7L_INFLIGHT / W7_DEPTH) {
			unsigned d = W7L_INFLIGHT / sh->size[s];

			sh->depth[s] = d < 8 ? 8 : d;
		}
	}
}

/* The largest message of the run. */
static inline unsigned w7_max_size(const struct w7_shared *sh)
{
	return sh->size[sh->nsizes - 1];
}

/* The large run's timed count at size index @s (see the top). */
static inline uint64_t w7_count_at(const struct w7_shared *sh, int s)
{
	uint64_t n;

	if (!sh->large)
		return sh->count;
	n = sh->count * (64u << 10) / sh->size[s];
	return n < 64 ? 64 : n;
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

/* The large run: wait until @n more messages keep the producer within
 * depth[s] of the consumer's frees (sent: its messages so far in this
 * phase; the consumer's count restarts at each phase's barrier). */
static inline void w7_room(struct w7_shared *sh, int s, uint64_t sent, unsigned n)
{
	unsigned spins = 0;

	while (sent + n - atomic_load_explicit(&sh->freed, memory_order_acquire) > sh->depth[s]) {
		if (atomic_load(&sh->failed))
			exit(1);
		w7_wait(&spins);
	}
}

static inline void w7_produce(const struct w7_ops *o, struct w7_shared *sh, int s, int form,
			      uint64_t count, int timed)
{
	void *m[W7_BATCH_MAX];
	unsigned b = sh->batch;

	if (timed)
		atomic_store(&sh->t_start, w7_now());
	for (uint64_t i = 0; i < count;) {
		unsigned n = count - i < b ? (unsigned)(count - i) : b;

		if (sh->large)
			w7_room(sh, s, i, n);
		w7_get_all(o, sh, s, m, n);
		for (unsigned k = 0; k < n; k++)
			w7_write(form, m[k], sh->size[s], i + k);
		w7_send_all(o, sh, s, 0, m, n);
		i += n;
	}
}

static inline void w7_consume(const struct w7_ops *o, struct w7_shared *sh, int s, int form,
			      uint64_t count, int timed)
{
	void *m[W7_BATCH_MAX];
	uint64_t chunk = sh->large ? (count / 16 > 0 ? count / 16 : 1) : W7_CHUNK;
	uint64_t sink = 0, next = chunk, last_got = 0, cap = count / chunk + 2, nr = 0;
	double *rate = timed ? malloc(cap * sizeof(double)) : NULL, last_t = 0;

	if (timed && rate == NULL)
		w7_fail(sh, "malloc");
	for (uint64_t got = 0; got < count;) {
		unsigned want = count - got < sh->batch ? (unsigned)(count - got) : sh->batch;
		unsigned k = w7_recv_some(o, sh, s, 0, m, want);

		for (unsigned j = 0; j < k; j++)
			sink += w7_read(form, m[j], sh->size[s]);
		o->put(o->ctx, s, m, k);
		got += k;
		if (sh->large)
			atomic_store_explicit(&sh->freed, got, memory_order_release);
		if (timed && got >= next && nr < cap) {
			double t = w7_now();

			if (nr == 0)     /* the producer's clock started it */
				last_t = atomic_load(&sh->t_start);
			rate[nr++] = (double)(got - last_got) / (t - last_t) / 1e6;
			last_t = t;
			last_got = got;
			next += chunk;
		}
	}
	if (timed) {
		sh->tput_wall[form][s] = (double)count / (w7_now() - atomic_load(&sh->t_start)) / 1e6;
		qsort(rate, nr, sizeof(double), w7_cmp_double);
		sh->tput[form][s] = nr > 0 ? rate[nr / 2] : sh->tput_wall[form][s];
		free(rate);
	}
	sh->sink += sink;
}

/* Ping-pong's message work: the whole message (small run), its first line
 * (large run). */
static inline unsigned w7_pp_bytes(const struct w7_shared *sh, int s)
{
	return sh->large && sh->size[s] > W7_LINE ? W7_LINE : sh->size[s];
}

static inline void w7_ping(const struct w7_ops *o, struct w7_shared *sh, int s)
{
	uint64_t warm = sh->large ? W7L_PP_WARM : W7_PP_WARM, n = sh->pp_count + warm;
	double *lat = malloc(sh->pp_count * sizeof(double));

	if (lat == NULL)
		w7_fail(sh, "malloc");
	for (uint64_t i = 0; i < n; i++) {
		double t0 = w7_now();
		void *m;

		w7_get_all(o, sh, s, &m, 1);
		w7_write_whole(m, w7_pp_bytes(sh, s), i);
		w7_send_all(o, sh, s, 0, &m, 1);
		w7_recv_some(o, sh, s, 1, &m, 1);
		sh->sink += w7_read_whole(m, w7_pp_bytes(sh, s));
		o->put(o->ctx, s, &m, 1);
		if (i >= warm)
			lat[i - warm] = (w7_now() - t0) * 1e6;
	}
	qsort(lat, sh->pp_count, sizeof(double), w7_cmp_double);
	sh->p50[s] = lat[sh->pp_count / 2];
	sh->p99[s] = lat[sh->pp_count * 99 / 100];
	free(lat);
}

static inline void w7_pong(const struct w7_ops *o, struct w7_shared *sh, int s)
{
	uint64_t n = sh->pp_count + (sh->large ? W7L_PP_WARM : W7_PP_WARM);

	for (uint64_t i = 0; i < n; i++) {
		void *m;

		w7_recv_some(o, sh, s, 0, &m, 1);
		sh->sink += w7_read_whole(m, w7_pp_bytes(sh, s));
		o->put(o->ctx, s, &m, 1);
		w7_get_all(o, sh, s, &m, 1);
		w7_write_whole(m, w7_pp_bytes(sh, s), i);
		w7_send_all(o, sh, s, 1, &m, 1);
	}
}

/* The phases (see the top); both sides call their half after setting up.
 * The large run's throughput phases skip its size index 0 (64 B: there
 * for ping-pong); each phase ends at a barrier, after which the consumer
 * resets sh->freed for the next (the producer waits at one more). */
static inline void w7_producer(const struct w7_ops *o, struct w7_shared *sh)
{
	uint32_t k = 1;

	w7_barrier(sh, k++);
	for (int s = sh->large ? 1 : 0; s < (int)sh->nsizes; s++) {
		for (int f = 0; f < (sh->large ? W7_FORMS : 1); f++) {
			uint64_t n = w7_count_at(sh, s);

			w7_produce(o, sh, s, f, n / 10 + 1, 0);
			w7_barrier(sh, k++);
			w7_barrier(sh, k++);
			w7_produce(o, sh, s, f, n, 1);
			w7_barrier(sh, k++);
			w7_barrier(sh, k++);
		}
	}
	for (int s = 0; s < (int)sh->nsizes && sh->batch == 1 && sh->pp_count > 0; s++) {
		w7_ping(o, sh, s);
		w7_barrier(sh, k++);
	}
}

static inline void w7_consumer(const struct w7_ops *o, struct w7_shared *sh)
{
	uint32_t k = 1;

	w7_barrier(sh, k++);
	for (int s = sh->large ? 1 : 0; s < (int)sh->nsizes; s++) {
		for (int f = 0; f < (sh->large ? W7_FORMS : 1); f++) {
			uint64_t n = w7_count_at(sh, s);

			w7_consume(o, sh, s, f, n / 10 + 1, 0);
			w7_barrier(sh, k++);
			atomic_store(&sh->freed, 0);
			w7_barrier(sh, k++);
			w7_consume(o, sh, s, f, n, 1);
			w7_barrier(sh, k++);
			atomic_store(&sh->freed, 0);
			w7_barrier(sh, k++);
		}
	}
	for (int s = 0; s < (int)sh->nsizes && sh->batch == 1 && sh->pp_count > 0; s++) {
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
