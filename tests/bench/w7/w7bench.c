/*
 * w7bench - W7 of docs/benchmarks.md: zero-copy messages between two
 * processes pinned to two CPUs; the driver of every W7 contender and the
 * home of two of them.  One invocation = one contender, all its figures
 * (w7.h: throughput at 64 B and 1 KiB, ping-pong p50/p99 at both sizes),
 * one JSON line.  tests/bench/run.sh alternates the contenders run by run.
 *   --peer sheaf       the producer allocates from a sheaf cache (one per
 *                      size), writes the message whole, sheaf_enqueue()s it
 *                      on a shared queue (1024 slots); the consumer
 *                      sheaf_dequeue()s, reads it whole, sheaf_free()s it.
 *                      Each process connects to sheafd on its own (--socket).
 *                      The caches' sheaves hold W7_CAPACITY (256) objects
 *                      at both sizes, the depth of the DPDK peer's
 *                      per-lcore cache (sheaf's default for 1 KiB is 28).
 *                      The queues are SHEAF_QUEUE_SP | SHEAF_QUEUE_SC (one
 *                      producer, one consumer: the fastest correct mode, as
 *                      DPDK's rings here are RING_F_SP_ENQ | RING_F_SC_DEQ);
 *                      --mpmc makes them MPMC (flags 0) instead.
 *   --peer sheaf_b32   the same with sheaf_alloc_bulk / sheaf_enqueue_burst /
 *                      sheaf_dequeue_burst / sheaf_free_bulk, 32 at a time
 *   --peer socket      the copy baseline: the producer writes the message
 *                      whole into its buffer and write()s it to a
 *                      SOCK_STREAM socketpair; the consumer read()s it whole
 *                      into its buffer and reads it (non-blocking calls and
 *                      w7.h's waiting, like every other contender)
 *   --peer dpdk | dpdk_b32   w7dpdk (--exec PATH): rte_mempool + rte_ring
 *                      between a primary (producer) and a secondary
 *                      (consumer) process; one at a time or bulk 32
 *   --peer iceoryx     w7iox (--exec PATH): publisher and subscriber
 *                      processes through a running iox-roudi
 *   --peer slots | slots_b32   a reference, not a contender: the
 *                      hand-off with nothing but the messages.  A ring of
 *                      W7_SLOTS message slots per direction in memory
 *                      both processes map; the producer writes each
 *                      message in the next slot and publishes how many it
 *                      wrote, the consumer reads it there and publishes
 *                      how many it released (single producer, single
 *                      consumer, each side caching the other's count):
 *                      no allocator, no pointer queue, no check.  Its
 *                      slots are reused in ring order (an allocator's
 *                      last-in first-out reuse can keep lines closer).
 * The driver maps the shared block (a memfd; exec'd children get it as
 * --w7-fd), pins the producer to the first CPU of --cpus and the consumer
 * to the second (sched_setaffinity, inherited through exec), and prints the
 * figures.  A child dying makes the other stop (the failed flag, and
 * PR_SET_PDEATHSIG for the driver's own death).
 * --nice N sets the children's nice value (run.sh: -20 as root), so that on
 * a loaded machine the scheduler gives the two pinned processes most of
 * their CPUs without starving anyone (not SCHED_FIFO: a real-time spinner
 * waiting on something of normal priority stalls the machine).
 * --large runs w7.h's large run instead (64 KiB, 1 MiB, 4 MiB messages,
 * "whole" and "pages", first-line ping-pong; one at a time, no _b32); its
 * JSON gives ktput_<form>_<bytes> (thousand messages/s), gbps_<form>_<bytes>
 * (the same as GB/s of messages) and p50_<bytes> / p99_<bytes> (us).
 * Usage: w7bench --peer P [--count N] [--pp N] [--socket PATH]
 *        [--cpus A,B] [--exec PATH] [--nice N] [--mpmc] [--large] [--quick]
 *        [--json]
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <dirent.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "client/sheaf.h"
#include "tests/bench/w7/w7.h"

static const char *peer = "sheaf", *sock, *exec_path;
static int cpu[2] = { 0, 1 };
static struct w7_shared *sh;
static int shm_fd = -1;
static char qname[2][48];
static unsigned qflags = SHEAF_QUEUE_SP | SHEAF_QUEUE_SC;  /* --mpmc: 0 */

static void die(const char *m)
{
	fprintf(stderr, "w7bench: %s (%s)\n", m, strerror(errno));
	exit(1);
}

static void pin(int c)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(c, &s);
	if (sched_setaffinity(0, sizeof(s), &s) != 0)
		die("sched_setaffinity");
}

/* ---- sheaf -------------------------------------------------------------- */

struct sheaf_ctx {
	sheaf_pool_t *pool;
	sheaf_cache_t *c[W7_SIZES];   /* one per size of the run */
	sheaf_queue_t *q[2];
};

static void cache_name(char *buf, size_t len, int s)
{
	snprintf(buf, len, "w7.%u", sh->size[s]);
}

static unsigned sheaf_get(void *ctx, int s, void **m, unsigned n)
{
	struct sheaf_ctx *x = ctx;

	if (n == 1) {
		m[0] = sheaf_alloc(x->c[s]);
		return m[0] != NULL;
	}
	return sheaf_alloc_bulk(x->c[s], m, n) == 0 ? n : 0;
}

static unsigned sheaf_send(void *ctx, int s, int dir, void **m, unsigned n)
{
	struct sheaf_ctx *x = ctx;
	int rc = n == 1 ? sheaf_enqueue(x->q[dir], m[0]) : sheaf_enqueue_burst(x->q[dir], m, n);

	(void)s;
	if (rc == -EAGAIN)
		return 0;
	if (rc < 0) {
		errno = -rc;
		w7_fail(sh, "sheaf_enqueue");
	}
	return n == 1 ? 1 : (unsigned)rc;
}

static unsigned sheaf_recv(void *ctx, int s, int dir, void **m, unsigned n)
{
	struct sheaf_ctx *x = ctx;
	int rc;

	(void)s;
	if (n == 1) {
		rc = sheaf_dequeue(x->q[dir], m);
		if (rc == 0)
			return 1;
		if (rc == -EAGAIN)
			return 0;
	} else if ((rc = sheaf_dequeue_burst(x->q[dir], m, n)) >= 0) {
		return (unsigned)rc;
	}
	errno = -rc;
	w7_fail(sh, "sheaf_dequeue");
	return 0;
}

static void sheaf_put(void *ctx, int s, void **m, unsigned n)
{
	struct sheaf_ctx *x = ctx;
	int rc = n == 1 ? sheaf_free(x->c[s], m[0]) : sheaf_free_bulk(x->c[s], m, n);

	if (rc != 0) {
		errno = -rc;
		w7_fail(sh, "sheaf_free");
	}
}

static int sheaf_side(int producer)
{
	struct sheaf_ctx x;
	struct w7_ops o = { sheaf_get, sheaf_send, sheaf_recv, sheaf_put, &x };
	char err[256], name[48];

	x.pool = sheaf_connect(sock, producer ? "w7-producer" : "w7-consumer", 0, err, sizeof(err));
	if (x.pool == NULL) {
		fprintf(stderr, "w7bench: %s\n", err);
		w7_fail(sh, "connect");
	}
	for (int s = 0; s < (int)sh->nsizes; s++) {
		cache_name(name, sizeof(name), s);
		if ((x.c[s] = sheaf_cache_open(x.pool, name)) == NULL)
			w7_fail(sh, "sheaf_cache_open");
	}
	for (int d = 0; d < 2; d++)
		if ((x.q[d] = sheaf_queue_open(x.pool, qname[d])) == NULL)
			w7_fail(sh, "sheaf_queue_open");
	if (producer)
		w7_producer(&o, sh);
	else
		w7_consumer(&o, sh);
	for (int d = 0; d < 2; d++)
		sheaf_queue_close(x.q[d]);
	sheaf_disconnect(x.pool);
	return 0;
}

/* Caches (kept: named by size, reused by later runs; capacity
 * W7_CAPACITY, set again on one an earlier run made, up to 1 KiB; the
 * large run's caches of 64 KiB and more keep sheaf's own capacity for
 * their size, a few objects a sheaf) and this run's two queues (destroyed
 * at the end). */
static void sheaf_setup(void)
{
	const struct sheaf_cache_config cfg = { .capacity = W7_CAPACITY };

	char err[256], name[48];
	sheaf_pool_t *p = sheaf_connect(sock, "w7", 0, err, sizeof(err));

	if (p == NULL) {
		fprintf(stderr, "w7bench: %s\n", err);
		exit(1);
	}
	for (int s = 0; s < (int)sh->nsizes; s++) {
		int small = sh->size[s] <= 1024;
		sheaf_cache_t *k;

		cache_name(name, sizeof(name), s);
		k = sheaf_cache_create_or_open(p, name, sh->size[s], small ? &cfg : NULL, NULL);
		if (k == NULL)
			die("sheaf_cache_create_or_open");
		if (small && sheaf_cache_set_capacity(k, W7_CAPACITY) != 0)
			die("sheaf_cache_set_capacity");
	}
	for (int d = 0; d < 2; d++) {
		sheaf_queue_t *q;

		snprintf(qname[d], sizeof(qname[d]), "w7.%d.%s", (int)getpid(), d ? "back" : "to");
		if ((q = sheaf_queue_create(p, qname[d], 1024, qflags)) == NULL)
			die("sheaf_queue_create");
		sheaf_queue_close(q);
	}
	sheaf_disconnect(p);
}

static void sheaf_teardown(void)
{
	char err[256];
	sheaf_pool_t *p = sheaf_connect(sock, "w7", 0, err, sizeof(err));

	if (p == NULL)
		return;
	for (int d = 0; d < 2; d++) {
		sheaf_queue_t *q = sheaf_queue_open(p, qname[d]);

		if (q != NULL && sheaf_queue_destroy(q) != 0)
			sheaf_queue_close(q);
	}
	sheaf_disconnect(p);
}

/* ---- slots: the reference -------------------------------------------------- */

/* A ring per direction: its two counters, then (at SLOT_DATA) depth[s]
 * slots of size[s] bytes, packed (the small run: 1024 slots, the queues'
 * depth; 512 and 2048 differ little). */
#define SLOT_DATA 4096

struct slot_ring {
	_Alignas(64) _Atomic uint64_t written;   /* by the writer */
	_Alignas(64) _Atomic uint64_t released;  /* by the reader */
};

/* One side's view: it writes ring @out and reads ring @in (the producer
 * writes ring 0, the consumer ring 1: the replies). */
struct slot_ctx {
	struct slot_ring *out, *in;
	uint64_t next, written, released_seen;   /* on @out */
	uint64_t read, written_seen, released;   /* on @in */
};

static unsigned char *slot_map;    /* the two rings, MAP_SHARED before the fork */
static size_t slot_ring_bytes;     /* each */

static struct slot_ring *slot_ring_at(int r)
{
	return (struct slot_ring *)(void *)(slot_map + (size_t)r * slot_ring_bytes);
}

/* Slot @i of @r for messages of size index @s (packed: @i * size). */
static void *slot_at(struct slot_ring *r, int s, uint64_t i)
{
	return (unsigned char *)r + SLOT_DATA + (i % sh->depth[s]) * sh->size[s];
}

static unsigned slot_get(void *ctx, int s, void **m, unsigned n)
{
	struct slot_ctx *x = ctx;
	uint64_t room = sh->depth[s] - (x->next - x->released_seen);

	if (room < n) {
		x->released_seen = atomic_load_explicit(&x->out->released, memory_order_acquire);
		room = sh->depth[s] - (x->next - x->released_seen);
	}
	if (n > room)
		n = (unsigned)room;
	for (unsigned k = 0; k < n; k++)
		m[k] = slot_at(x->out, s, x->next + k);
	x->next += n;
	return n;
}

/* The messages of get, in order: publish them. */
static unsigned slot_send(void *ctx, int s, int dir, void **m, unsigned n)
{
	struct slot_ctx *x = ctx;

	(void)s;
	(void)dir;
	(void)m;
	x->written += n;
	atomic_store_explicit(&x->out->written, x->written, memory_order_release);
	return n;
}

static unsigned slot_recv(void *ctx, int s, int dir, void **m, unsigned n)
{
	struct slot_ctx *x = ctx;
	uint64_t have = x->written_seen - x->read;

	(void)dir;
	if (have < n) {
		x->written_seen = atomic_load_explicit(&x->in->written, memory_order_acquire);
		have = x->written_seen - x->read;
	}
	if (n > have)
		n = (unsigned)have;
	for (unsigned k = 0; k < n; k++)
		m[k] = slot_at(x->in, s, x->read + k);
	x->read += n;
	return n;
}

/* The messages of recv, in order, read: their slots may be written again. */
static void slot_put(void *ctx, int s, void **m, unsigned n)
{
	struct slot_ctx *x = ctx;

	(void)s;
	(void)m;
	x->released += n;
	atomic_store_explicit(&x->in->released, x->released, memory_order_release);
}

static int slots_side(int producer)
{
	struct slot_ctx x = { .out = slot_ring_at(producer ? 0 : 1),
			      .in = slot_ring_at(producer ? 1 : 0) };
	struct w7_ops o = { slot_get, slot_send, slot_recv, slot_put, &x };

	if (producer)
		w7_producer(&o, sh);
	else
		w7_consumer(&o, sh);
	return 0;
}

/* ---- socket ------------------------------------------------------------- */

struct sock_ctx {
	int fd;
	unsigned char *buf[2];  /* the message written, the message read */
};

static int fds[2];
static struct sock_ctx sx;

/* Move all @len bytes of @p (non-blocking calls, w7.h's waiting). */
static void sock_move(int fd, unsigned char *p, size_t len, int out)
{
	size_t done = 0;
	unsigned spins = 0;

	while (done < len) {
		ssize_t k = out ? send(fd, p + done, len - done, MSG_DONTWAIT | MSG_NOSIGNAL)
				: recv(fd, p + done, len - done, MSG_DONTWAIT);

		if (k > 0) {
			done += (size_t)k;
			spins = 0;
		} else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (atomic_load(&sh->failed))
				exit(1);
			w7_wait(&spins);
		} else {
			w7_fail(sh, k == 0 ? "socket closed" : "socket");
		}
	}
}

/* get: the side's own buffer; the message is the bytes, sent by copy. */
static unsigned sock_get(void *ctx, int s, void **m, unsigned n)
{
	struct sock_ctx *x = ctx;

	(void)s;
	(void)n;
	m[0] = x->buf[0];
	return 1;
}

static unsigned sock_send(void *ctx, int s, int dir, void **m, unsigned n)
{
	struct sock_ctx *x = ctx;

	(void)dir;
	(void)n;
	sock_move(x->fd, m[0], sh->size[s], 1);
	return 1;
}

/* A message is there when its first byte is: then read it whole. */
static unsigned sock_recv(void *ctx, int s, int dir, void **m, unsigned n)
{
	struct sock_ctx *x = ctx;
	ssize_t k;

	(void)dir;
	(void)n;
	k = recv(x->fd, x->buf[1], sh->size[s], MSG_DONTWAIT);
	if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	if (k <= 0)
		w7_fail(sh, k == 0 ? "socket closed" : "socket");
	sock_move(x->fd, x->buf[1] + k, sh->size[s] - (size_t)k, 0);
	m[0] = x->buf[1];
	return 1;
}

static void sock_put(void *ctx, int s, void **m, unsigned n)
{
	(void)ctx;
	(void)s;
	(void)m;
	(void)n;
}

static int socket_side(int producer)
{
	struct w7_ops o = { sock_get, sock_send, sock_recv, sock_put, &sx };

	sx.fd = fds[producer ? 0 : 1];
	sx.buf[0] = malloc(w7_max_size(sh));
	sx.buf[1] = malloc(w7_max_size(sh));
	if (sx.buf[0] == NULL || sx.buf[1] == NULL)
		die("malloc");
	if (producer)
		w7_producer(&o, sh);
	else
		w7_consumer(&o, sh);
	return 0;
}

/* ---- exec'd contenders (dpdk, iceoryx) ------------------------------------ */

static void child_setup(int producer);

static pid_t spawn_exec(int producer)
{
	char fdarg[16], cpuarg[16], prefix[64];
	const char *argv[32];
	int a = 0;
	pid_t pid;

	snprintf(fdarg, sizeof(fdarg), "%d", shm_fd);
	snprintf(cpuarg, sizeof(cpuarg), "%d", cpu[producer ? 0 : 1]);
	snprintf(prefix, sizeof(prefix), "w7_%d", (int)getpid());
	argv[a++] = exec_path;
	if (strncmp(peer, "dpdk", 4) == 0) {
		argv[a++] = "-l";
		argv[a++] = cpuarg;
		argv[a++] = producer ? "--proc-type=primary" : "--proc-type=secondary";
		argv[a++] = "--file-prefix";
		argv[a++] = prefix;
		argv[a++] = "--no-pci";
		argv[a++] = "--no-telemetry";
		argv[a++] = "--log-level=error";
		argv[a++] = "--";
	}
	argv[a++] = "--role";
	argv[a++] = producer ? "producer" : "consumer";
	argv[a++] = "--w7-fd";
	argv[a++] = fdarg;
	argv[a++] = "--tag";
	argv[a++] = prefix;
	argv[a] = NULL;
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		child_setup(producer);
		dup2(2, 1);     /* the libraries' chatter: stdout is our JSON */
		execv(exec_path, (char *const *)argv);
		fprintf(stderr, "w7bench: exec %s: %s\n", exec_path, strerror(errno));
		atomic_store(&sh->failed, 1);
		_exit(127);
	}
	return pid;
}

/* DPDK leaves its hugepage files (they hold the pages) and runtime folder
 * behind: remove this run's (--file-prefix w7_<pid>). */
static void dpdk_cleanup(void)
{
	char prefix[64], path[512], dir[256], type[64];
	FILE *m = fopen("/proc/mounts", "r");
	struct dirent *e;
	DIR *d;

	snprintf(prefix, sizeof(prefix), "w7_%d", (int)getpid());
	while (m != NULL && fscanf(m, "%*s %255s %63s %*[^\n]", dir, type) == 2) {
		if (strcmp(type, "hugetlbfs") != 0 || (d = opendir(dir)) == NULL)
			continue;
		while ((e = readdir(d)) != NULL) {
			if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 &&
			    strncmp(e->d_name + strlen(prefix), "map_", 4) == 0) {
				snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
				unlink(path);
			}
		}
		closedir(d);
	}
	if (m != NULL)
		fclose(m);
	snprintf(dir, sizeof(dir), "/var/run/dpdk/%s", prefix);
	if ((d = opendir(dir)) != NULL) {
		while ((e = readdir(d)) != NULL) {
			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			unlink(path);
		}
		closedir(d);
		rmdir(dir);
	}
}

static int nice_to;     /* --nice N: the children's nice value (0: as is) */

static void child_setup(int producer)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	pin(cpu[producer ? 0 : 1]);
	if (nice_to != 0 && setpriority(PRIO_PROCESS, 0, nice_to) != 0)
		fprintf(stderr, "w7bench: setpriority %d: %s (running as is)\n", nice_to,
			strerror(errno));
}

static pid_t spawn_fork(int producer, int (*side)(int))
{
	pid_t pid = fork();

	if (pid < 0)
		die("fork");
	if (pid == 0) {
		child_setup(producer);
		_exit(side(producer));
	}
	return pid;
}

/* Wait for both; the first failure makes the other stop. */
static int reap(pid_t a, pid_t b)
{
	int left = 2, ok = 1, st;

	while (left > 0) {
		pid_t p = waitpid(-1, &st, 0);

		if (p < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p != a && p != b)
			continue;
		left--;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			ok = 0;
			atomic_store(&sh->failed, 1);
			fprintf(stderr, "w7bench: the %s exited badly (status 0x%x)\n",
				p == a ? "producer" : "consumer", st);
		}
	}
	return ok && !atomic_load(&sh->failed);
}

static void usage(void)
{
	fprintf(stderr, "usage: w7bench --peer sheaf|sheaf_b32|socket|dpdk|dpdk_b32|iceoryx|slots|slots_b32\n"
		"       [--count N] [--pp N] [--socket PATH] [--cpus A,B] [--exec PATH]\n"
		"       [--nice N] [--mpmc] [--large] [--quick] [--json]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "peer", required_argument, NULL, 'p' }, { "count", required_argument, NULL, 'n' },
		{ "pp", required_argument, NULL, 'P' }, { "socket", required_argument, NULL, 's' },
		{ "cpus", required_argument, NULL, 'c' }, { "exec", required_argument, NULL, 'e' },
		{ "nice", required_argument, NULL, 'N' }, { "quick", no_argument, NULL, 'q' }, { "json", no_argument, NULL, 'j' },
		{ "mpmc", no_argument, NULL, 'M' }, { "large", no_argument, NULL, 'L' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t count = 2000000, pp = 20000;
	int o, quick = 0, large = 0, is_sheaf, is_exec, is_slots, ok;
	pid_t cons, prod;

	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 'p': peer = optarg; break;
		case 'n': count = strtoull(optarg, NULL, 0); break;
		case 'P': pp = strtoull(optarg, NULL, 0); break;
		case 's': sock = optarg; break;
		case 'c':
			if (sscanf(optarg, "%d,%d", &cpu[0], &cpu[1]) != 2)
				usage();
			break;
		case 'e': exec_path = optarg; break;
		case 'N': nice_to = atoi(optarg); break;
		case 'q': quick = 1; break;
		case 'M': qflags = 0; break;
		case 'L': large = 1; break;
		case 'j': break;         /* the output is always one JSON line */
		default: usage();
		}
	}
	is_sheaf = strncmp(peer, "sheaf", 5) == 0;
	is_exec = strncmp(peer, "dpdk", 4) == 0 || strcmp(peer, "iceoryx") == 0;
	is_slots = strncmp(peer, "slots", 5) == 0;
	if (!is_sheaf && !is_exec && !is_slots && strcmp(peer, "socket") != 0)
		usage();
	if (is_exec && exec_path == NULL) {
		fprintf(stderr, "w7bench: --peer %s needs --exec PATH\n", peer);
		return 2;
	}
	if (quick) {
		count = count / 10 + 1;
		pp = pp / 10 + 1;
	}
	shm_fd = memfd_create("w7", 0);
	if (shm_fd < 0 || ftruncate(shm_fd, sizeof(*sh)) != 0 || (sh = w7_map_fd(shm_fd)) == NULL)
		die("memfd");
	sh->count = count;
	sh->pp_count = pp;
	sh->batch = strstr(peer, "_b32") != NULL ? 32 : 1;
	w7_set_sizes(sh, large);
	if (large && sh->batch != 1) {
		fprintf(stderr, "w7bench: --large runs one message at a time (no _b32)\n");
		return 2;
	}
	if (is_sheaf) {
		sheaf_setup();
	} else if (is_slots) {
		size_t most = 0;

		for (unsigned k = 0; k < sh->nsizes; k++)
			if ((size_t)sh->depth[k] * sh->size[k] > most)
				most = (size_t)sh->depth[k] * sh->size[k];
		slot_ring_bytes = (SLOT_DATA + most + 4095) & ~(size_t)4095;
		slot_map = mmap(NULL, 2 * slot_ring_bytes, PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (slot_map == MAP_FAILED)
			die("mmap");
	} else if (!is_exec && socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) {
		die("socketpair");
	}
	if (is_exec) {
		prod = spawn_exec(1);
		/* a DPDK secondary can start only once the primary is up (the
		 * driver is not measured: it sleeps) */
		while (strncmp(peer, "dpdk", 4) == 0 && !atomic_load(&sh->primary_up) &&
		       !atomic_load(&sh->failed) && kill(prod, 0) == 0)
			usleep(1000);
		cons = spawn_exec(0);
	} else {
		int (*side)(int) = is_sheaf ? sheaf_side : is_slots ? slots_side : socket_side;

		prod = spawn_fork(1, side);
		cons = spawn_fork(0, side);
	}
	ok = reap(prod, cons);
	if (is_sheaf)
		sheaf_teardown();
	if (strncmp(peer, "dpdk", 4) == 0)
		dpdk_cleanup();
	if (!ok) {
		fprintf(stderr, "w7bench: %s: a side failed%s%s\n", peer, sh->err[0] ? ": " : "", sh->err);
		return 1;
	}
	printf("{\"peer\":\"%s\",\"batch\":%u,\"count\":%llu,\"pp_count\":%llu",
	       peer, sh->batch, (unsigned long long)count, (unsigned long long)pp);
	if (!large)
		printf(",\"tput_64\":%.3f,\"tput_1024\":%.3f,\"tput_wall_64\":%.3f,"
		       "\"tput_wall_1024\":%.3f", sh->tput[W7_WHOLE][0], sh->tput[W7_WHOLE][1],
		       sh->tput_wall[W7_WHOLE][0], sh->tput_wall[W7_WHOLE][1]);
	/* the large run: thousand messages per second, and GB/s of messages */
	for (unsigned k = 1; large && k < sh->nsizes; k++)
		for (int f = 0; f < W7_FORMS; f++)
			printf(",\"ktput_%s_%u\":%.3f,\"ktput_wall_%s_%u\":%.3f,\"gbps_%s_%u\":%.3f",
			       f == W7_WHOLE ? "whole" : "pages", sh->size[k], sh->tput[f][k] * 1e3,
			       f == W7_WHOLE ? "whole" : "pages", sh->size[k],
			       sh->tput_wall[f][k] * 1e3, f == W7_WHOLE ? "whole" : "pages",
			       sh->size[k], sh->tput[f][k] * sh->size[k] / 1e3);
	for (unsigned k = 0; sh->batch == 1 && pp > 0 && k < sh->nsizes; k++)
		printf(",\"p50_%u\":%.3f,\"p99_%u\":%.3f", sh->size[k], sh->p50[k], sh->size[k],
		       sh->p99[k]);
	if (is_sheaf)
		printf(",\"queue_flags\":%u", qflags);
	printf("}\n");
	return 0;
}
