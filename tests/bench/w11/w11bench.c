/*
 * w11bench - W11 of docs/benchmarks.md: one publisher process, N
 * subscriber processes, every message to every subscriber.  One
 * invocation = one contender at one N and one message size, one JSON line:
 *   --peer topic    sheaf topic (capacity 256, block policy, no history):
 *                   the publisher sheaf_alloc()s the message, writes it
 *                   whole, sheaf_topic_publish()es it; each subscriber
 *                   sheaf_topic_take()s it, reads it whole, releases it
 *                   (the last release frees it)
 *   --peer queues   sheaf shared queues with N copies: one SP/SC queue of
 *                   256 slots per subscriber; the publisher allocates N
 *                   messages, writes each whole and enqueues one on each
 *                   queue; a subscriber dequeues, reads, frees
 *   --peer socket   Unix-socket broadcast: one SOCK_STREAM socketpair per
 *                   subscriber, the publisher write()s the message N times
 *   --peer iceoryx  iceoryx (C binding, a running iox-roudi): one
 *                   publisher, N subscribers (queue 256, block producer,
 *                   publisher waits for the consumer, no history), chunks
 *                   loaned, written whole, published
 * Figures: rate (million messages per second delivered to the slowest
 * subscriber: count / (its last take - the first publish)), pub_ns (the
 * publisher's time per message, its waits for a full queue left out; for
 * iceoryx they are inside its publish call and count), p50/p99 (us, from
 * the publish to each subscriber's take, a message at a time: the next is
 * published once every subscriber took the last).  Every wait is W7's:
 * spin 128 times with pause, then sched_yield() on each further miss.
 * Nothing is pinned.
 * Usage: w11bench --peer P --subs N --size BYTES [--count N] [--lat N]
 *        [--socket PATH] [--json]
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
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "client/sheaf.h"
#ifdef W11_IOX
#include <iceoryx_binding_c/enums.h>
#include <iceoryx_binding_c/publisher.h>
#include <iceoryx_binding_c/runtime.h>
#include <iceoryx_binding_c/subscriber.h>
#include <iceoryx_binding_c/types.h>
#endif

#define SUBS_MAX  8
#define DEPTH     256
#define LAT_MAX   20000
#define SPINS     128

struct shared {
	_Atomic uint32_t arrived, failed, ready;
	_Atomic uint64_t acked;              /* latency phase: takes of the current message */
	_Atomic uint64_t t_start;
	uint64_t t_done[SUBS_MAX];
	uint64_t pub_ns_total, count, lat;
	uint64_t sink;
	uint32_t lat_ns[SUBS_MAX][LAT_MAX];
	char err[256];
};

struct hdr {
	uint64_t seq;
	uint64_t t_ns;
};

static const char *peer = "topic", *sock;
static unsigned nsubs = 1, size = 64;
static struct shared *sh;
static int fds[SUBS_MAX][2];

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void fail(const char *m)
{
	snprintf(sh->err, sizeof(sh->err), "%s (%s)", m, strerror(errno));
	atomic_store(&sh->failed, 1);
	fprintf(stderr, "w11bench: %s\n", sh->err);
	exit(1);
}

/* W7's wait: spin, then yield; @spins counts this wait's misses. */
static void wait_once(unsigned *spins)
{
	if (atomic_load_explicit(&sh->failed, memory_order_relaxed))
		exit(1);
	if (++*spins < SPINS)
		__builtin_ia32_pause();
	else
		sched_yield();
}

static void barrier(uint32_t parties)
{
	unsigned spins = 0;

	atomic_fetch_add(&sh->arrived, 1);
	while (atomic_load(&sh->arrived) % parties != 0)
		wait_once(&spins);
}

static void fill(void *m, uint64_t seq)
{
	struct hdr *h = m;

	memset((char *)m + sizeof(*h), (int)seq, size - sizeof(*h));
	h->seq = seq;
	h->t_ns = now_ns();
}

static uint64_t read_whole(const void *m)
{
	const uint64_t *w = m;
	uint64_t s = 0;

	for (unsigned i = 0; i < size / 8; i++)
		s += w[i];
	return s;
}

/* ---- contenders --------------------------------------------------------- */

struct ctx {
	sheaf_pool_t *pool;
	sheaf_cache_t *c;
	sheaf_topic_t *t;
	sheaf_sub_t *s;
	sheaf_queue_t *q[SUBS_MAX];
	char buf[1024];
#ifdef W11_IOX
	iox_pub_storage_t ps;
	iox_sub_storage_t ss;
	iox_pub_t pub;
	iox_sub_t sub;
#endif
};

static void qname(char *b, size_t n, unsigned i)
{
	snprintf(b, n, "w11.q%u", i);
}

static void connect_pool(struct ctx *x, const char *who)
{
	char err[256], cn[32];

	x->pool = sheaf_connect(sock, who, 0, err, sizeof(err));
	if (x->pool == NULL)
		fail(err);
	snprintf(cn, sizeof(cn), "w11.%u", size);
	x->c = sheaf_cache_open(x->pool, cn);
	if (x->c == NULL)
		fail("cache open");
}

static void pub_setup(struct ctx *x)
{
	if (strcmp(peer, "topic") == 0) {
		connect_pool(x, "w11-pub");
		if ((x->t = sheaf_topic_open(x->pool, "w11")) == NULL)
			fail("topic open");
	} else if (strcmp(peer, "queues") == 0) {
		char n[48];

		connect_pool(x, "w11-pub");
		for (unsigned i = 0; i < nsubs; i++) {
			qname(n, sizeof(n), i);
			if ((x->q[i] = sheaf_queue_open(x->pool, n)) == NULL)
				fail("queue open");
		}
#ifdef W11_IOX
	} else if (strcmp(peer, "iceoryx") == 0) {
		iox_pub_options_t po;

		char name[64];

		snprintf(name, sizeof(name), "w11_publisher_%d", (int)getpid());
		iox_runtime_init(name);
		iox_pub_options_init(&po);
		po.historyCapacity = 0;
		po.subscriberTooSlowPolicy = ConsumerTooSlowPolicy_WAIT_FOR_CONSUMER;
		x->pub = iox_pub_init(&x->ps, "w11", "bench", "ticks", &po);
#endif
	}
}

static void sub_setup(struct ctx *x, unsigned i)
{
	if (strcmp(peer, "topic") == 0) {
		connect_pool(x, "w11-sub");
		if ((x->t = sheaf_topic_open(x->pool, "w11")) == NULL ||
		    (x->s = sheaf_topic_subscribe(x->t)) == NULL)
			fail("subscribe");
	} else if (strcmp(peer, "queues") == 0) {
		char n[48];

		connect_pool(x, "w11-sub");
		qname(n, sizeof(n), i);
		if ((x->q[i] = sheaf_queue_open(x->pool, n)) == NULL)
			fail("queue open");
#ifdef W11_IOX
	} else if (strcmp(peer, "iceoryx") == 0) {
		iox_sub_options_t so;
		char name[64];
		unsigned spins = 0;

		snprintf(name, sizeof(name), "w11_subscriber_%u_%d", i, (int)getpid());
		iox_runtime_init(name);
		iox_sub_options_init(&so);
		so.queueCapacity = DEPTH;
		so.queueFullPolicy = QueueFullPolicy_BLOCK_PRODUCER;
		so.historyRequest = 0;
		x->sub = iox_sub_init(&x->ss, "w11", "bench", "ticks", &so);
		while (iox_sub_get_subscription_state(x->sub) != SubscribeState_SUBSCRIBED) {
			if (++spins > 30000)
				fail("iceoryx: not subscribed in 30 s");
			usleep(1000);
		}
#endif
	}
}

/* Publish message @seq to every subscriber; the publisher's own time,
 * waits for a full queue left out, added to *@busy. */
static void publish(struct ctx *x, uint64_t seq, uint64_t *busy)
{
	uint64_t t0 = now_ns();
	unsigned spins = 0;

	if (strcmp(peer, "topic") == 0) {
		void *m = sheaf_alloc(x->c);
		int rc;

		if (m == NULL)
			fail("alloc");
		fill(m, seq);
		while ((rc = sheaf_topic_publish(x->t, m, 0)) == -EAGAIN) {
			uint64_t w = now_ns();

			wait_once(&spins);
			t0 += now_ns() - w;
		}
		if (rc != 0) {
			errno = -rc;
			fail("publish");
		}
	} else if (strcmp(peer, "queues") == 0) {
		for (unsigned i = 0; i < nsubs; i++) {
			void *m = sheaf_alloc(x->c);

			if (m == NULL)
				fail("alloc");
			fill(m, seq);
			while (sheaf_enqueue(x->q[i], m) == -EAGAIN) {
				uint64_t w = now_ns();

				wait_once(&spins);
				t0 += now_ns() - w;
			}
		}
	} else if (strcmp(peer, "socket") == 0) {
		fill(x->buf, seq);
		for (unsigned i = 0; i < nsubs; i++) {
			size_t off = 0;

			while (off < size) {
				ssize_t k = write(fds[i][0], x->buf + off, size - off);

				if (k > 0) {
					off += (size_t)k;
				} else if (errno == EAGAIN) {
					uint64_t w = now_ns();

					wait_once(&spins);
					t0 += now_ns() - w;
				} else {
					fail("write");
				}
			}
		}
#ifdef W11_IOX
	} else {
		void *m;

		while (iox_pub_loan_chunk(x->pub, &m, size) != AllocationResult_SUCCESS) {
			uint64_t w = now_ns();

			wait_once(&spins);
			t0 += now_ns() - w;
		}
		fill(m, seq);
		iox_pub_publish_chunk(x->pub, m);   /* waits while a queue is full */
#endif
	}
	*busy += now_ns() - t0;
}

/* Take the next message: its header copied to *@h, the message read
 * whole and let go.  Waits (W7's wait) until there is one. */
static void take(struct ctx *x, unsigned i, struct hdr *h)
{
	unsigned spins = 0;

	if (strcmp(peer, "topic") == 0) {
		struct sheaf_msg m;

		while (sheaf_topic_take(x->s, &m, 0) != 0)
			wait_once(&spins);
		*h = *(struct hdr *)m.obj;
		sh->sink += read_whole(m.obj);
		sheaf_topic_release(x->s, &m);
	} else if (strcmp(peer, "queues") == 0) {
		void *m;

		while (sheaf_dequeue(x->q[i], &m) != 0)
			wait_once(&spins);
		*h = *(struct hdr *)m;
		sh->sink += read_whole(m);
		sheaf_free(x->c, m);
	} else if (strcmp(peer, "socket") == 0) {
		size_t off = 0;

		while (off < size) {
			ssize_t k = read(fds[i][1], x->buf + off, size - off);

			if (k > 0)
				off += (size_t)k;
			else if (k < 0 && errno == EAGAIN)
				wait_once(&spins);
			else
				fail("read");
		}
		*h = *(struct hdr *)x->buf;
		sh->sink += read_whole(x->buf);
#ifdef W11_IOX
	} else {
		const void *m;

		while (iox_sub_take_chunk(x->sub, &m) != ChunkReceiveResult_SUCCESS)
			wait_once(&spins);
		*h = *(const struct hdr *)m;
		sh->sink += read_whole(m);
		iox_sub_release_chunk(x->sub, m);
#endif
	}
}

static int publisher(void)
{
	struct ctx x;
	uint64_t busy = 0, spins;

	memset(&x, 0, sizeof(x));
	pub_setup(&x);
	spins = 0;
	while (atomic_load(&sh->ready) < nsubs) {
		unsigned s = 0;

		wait_once(&s);
		if (++spins > 30000000ull)
			fail("subscribers not ready");
	}
#ifdef W11_IOX
	if (strcmp(peer, "iceoryx") == 0)
		usleep(100000);   /* RouDi connects every subscriber to the publisher */
#endif
	barrier(nsubs + 1);
	atomic_store(&sh->t_start, now_ns());
	for (uint64_t i = 0; i < sh->count; i++)
		publish(&x, i, &busy);
	sh->pub_ns_total = busy;
	barrier(nsubs + 1);
	/* Latency: one message at a time. */
	for (uint64_t i = 0; i < sh->lat; i++) {
		unsigned s = 0;

		publish(&x, sh->count + i, &busy);
		while (atomic_load(&sh->acked) < (i + 1) * nsubs)
			wait_once(&s);
	}
	barrier(nsubs + 1);
#ifdef W11_IOX
	if (x.pub != NULL) {        /* RouDi runs without monitoring: say goodbye */
		iox_pub_deinit(x.pub);
		iox_runtime_shutdown();
	}
#endif
	return 0;
}

static int subscriber(unsigned i)
{
	struct ctx x;
	struct hdr h;

	memset(&x, 0, sizeof(x));
	sub_setup(&x, i);
	atomic_fetch_add(&sh->ready, 1);
	barrier(nsubs + 1);
	for (uint64_t k = 0; k < sh->count; k++) {
		take(&x, i, &h);
		if (h.seq != k) {
			errno = EPROTO;
			fail("a message out of order or lost");
		}
	}
	sh->t_done[i] = now_ns();
	barrier(nsubs + 1);
	for (uint64_t k = 0; k < sh->lat; k++) {
		take(&x, i, &h);
		sh->lat_ns[i][k] = (uint32_t)(now_ns() - h.t_ns);
		atomic_fetch_add(&sh->acked, 1);
	}
	barrier(nsubs + 1);
	if (x.s != NULL)
		sheaf_topic_unsubscribe(x.s);
#ifdef W11_IOX
	if (x.sub != NULL) {        /* its chunks back to RouDi */
		iox_sub_deinit(x.sub);
		iox_runtime_shutdown();
	}
#endif
	return 0;
}

static int u32cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "peer", required_argument, NULL, 'p' }, { "subs", required_argument, NULL, 'n' },
		{ "size", required_argument, NULL, 'z' }, { "count", required_argument, NULL, 'c' },
		{ "lat", required_argument, NULL, 'l' }, { "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' }, { NULL, 0, NULL, 0 },
	};
	uint64_t count = 200000, lat = 2000, slow = 0;
	pid_t pid[SUBS_MAX + 1];
	int c, ok = 1;
	uint32_t *all;
	double rate;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'p': peer = optarg; break;
		case 'n': nsubs = (unsigned)atoi(optarg); break;
		case 'z': size = (unsigned)atoi(optarg); break;
		case 'c': count = strtoull(optarg, NULL, 0); break;
		case 'l': lat = strtoull(optarg, NULL, 0); break;
		case 's': sock = optarg; break;
		case 'j': break;
		default: return 2;
		}
	}
	if (nsubs < 1 || nsubs > SUBS_MAX || (size != 64 && size != 1024) || lat > LAT_MAX ||
	    (strcmp(peer, "topic") && strcmp(peer, "queues") && strcmp(peer, "socket")
#ifdef W11_IOX
	     && strcmp(peer, "iceoryx")
#endif
	     )) {
		fprintf(stderr, "w11bench: bad arguments (peer, 1..%d subs, size 64 or 1024)\n",
			SUBS_MAX);
		return 2;
	}
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	memset(sh, 0, sizeof(*sh));
	sh->count = count;
	sh->lat = lat;
	if (strcmp(peer, "topic") == 0 || strcmp(peer, "queues") == 0) {
		char err[256], n[48];
		struct sheaf_cache_config cfg = { .capacity = 256 };
		sheaf_pool_t *p = sheaf_connect(sock, "w11", 0, err, sizeof(err));

		if (p == NULL)
			fail(err);
		snprintf(n, sizeof(n), "w11.%u", size);
		if (sheaf_cache_create_or_open(p, n, size, &cfg, NULL) == NULL)
			fail("cache");
		if (strcmp(peer, "topic") == 0) {
			sheaf_topic_t *t = sheaf_topic_open(p, "w11");

			if (t != NULL)
				sheaf_topic_destroy(t);
			if ((t = sheaf_topic_create(p, "w11", DEPTH, 0, SHEAF_TOPIC_BLOCK)) == NULL)
				fail("topic create");
			sheaf_topic_close(t);
		} else {
			for (unsigned i = 0; i < nsubs; i++) {
				sheaf_queue_t *q;

				qname(n, sizeof(n), i);
				if ((q = sheaf_queue_open(p, n)) != NULL)
					sheaf_queue_destroy(q);
				if ((q = sheaf_queue_create(p, n, DEPTH,
							    SHEAF_QUEUE_SP | SHEAF_QUEUE_SC)) == NULL)
					fail("queue create");
				sheaf_queue_close(q);
			}
		}
		sheaf_disconnect(p);
	} else if (strcmp(peer, "socket") == 0) {
		for (unsigned i = 0; i < nsubs; i++) {
			if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds[i]) != 0)
				fail("socketpair");
			fcntl(fds[i][0], F_SETFL, O_NONBLOCK);
			fcntl(fds[i][1], F_SETFL, O_NONBLOCK);
		}
	}
	for (unsigned i = 0; i <= nsubs; i++) {
		pid[i] = fork();
		if (pid[i] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			_exit(i < nsubs ? subscriber(i) : publisher());
		}
	}
	for (unsigned i = 0; i <= nsubs; i++) {
		int st;

		if (waitpid(pid[i], &st, 0) != pid[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			ok = 0;
			atomic_store(&sh->failed, 1);
		}
	}
	if (!ok) {
		fprintf(stderr, "w11bench: %s: failed: %s\n", peer, sh->err);
		return 1;
	}
	for (unsigned i = 0; i < nsubs; i++)
		if (sh->t_done[i] - sh->t_start > slow)
			slow = sh->t_done[i] - sh->t_start;
	rate = (double)count / ((double)slow / 1e3);      /* million per second */
	all = malloc(sizeof(uint32_t) * nsubs * lat);
	for (unsigned i = 0; i < nsubs; i++)
		memcpy(all + i * lat, sh->lat_ns[i], sizeof(uint32_t) * lat);
	qsort(all, (size_t)nsubs * lat, sizeof(uint32_t), u32cmp);
	printf("{\"peer\": \"%s\", \"subs\": %u, \"size\": %u, \"count\": %llu, "
	       "\"rate\": %.3f, \"pub_ns\": %.1f, \"p50\": %.2f, \"p99\": %.2f}\n",
	       peer, nsubs, size, (unsigned long long)count, rate,
	       (double)sh->pub_ns_total / (double)count, all[(size_t)nsubs * lat / 2] / 1e3,
	       all[(size_t)nsubs * lat * 99 / 100] / 1e3);
	free(all);
	return 0;
}
