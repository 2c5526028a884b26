/*
 * test_topic.c - topics (client/sheaf.h, "topics"), the functional side:
 * the calls and their errors on a local pool (fan-out, history, both full
 * policies, objects freed exactly at the last release, unsubscribe
 * releasing what was queued and held); fan-out across processes of a real
 * sheafd with several publishers and subscribers (every message to every
 * subscriber exactly once, in each publisher's order, exact counts);
 * subscribers joining and leaving at random times under load (each gets a
 * gap-free run of what was published while it was joined, and every
 * object is freed); waits; sheafctl topics.  The kill tests are
 * test_topic_crash.c's.
 *
 * Each test is its own TCase: CK_RUN_CASE=<name> runs one.
 */
#include <check.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "client/sheaf.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_pool.h"
#include "tests/helpers/util_proc.h"

static void start_sheafd(struct dmn *d)
{
	const char *argv[] = { sheafd_bin(), "--foreground", "--socket", d->sock,
			       "--nodes", "1", "--size", "64M", NULL };

	dmn_init_at(d, "/tmp/sheaf-topic-XXXXXX", "log");
	dmn_start_argv(d, (char *const *)argv);
}

static uint64_t in_use(sheaf_cache_t *c)
{
	return cache_stats_of(c, -1).in_use;
}

/* ---- the calls on a local pool ------------------------------------------- */

START_TEST(test_calls_local)
{
	sheaf_pool_t *p = pool_new(NULL);
	sheaf_cache_t *c = mkcache(p, "msg", 64, -1, 0), *c2 = mkcache(p, "big", 1024, -1, 0);
	sheaf_topic_t *t, *t2;
	sheaf_sub_t *a, *b, *subs[17];
	struct sheaf_msg m, ma[8], mb[8];
	struct sheaf_topic_stats ts;
	struct sheaf_sub_stats ss;
	char local[64];
	void *o;

	errno = 0;
	REQUIRE(sheaf_topic_create(p, "", 8, 0, 0) == NULL && errno == EINVAL, "empty name");
	REQUIRE(sheaf_topic_create(p, "t", 8, 8, 0) == NULL && errno == EINVAL, "history");
	REQUIRE(sheaf_topic_create(p, "t", 8, 0, 2) == NULL && errno == EINVAL, "policy");
	REQUIRE(sheaf_topic_create(p, "t", (1u << 20) + 1, 0, 0) == NULL && errno == EINVAL,
		"capacity");
	REQUIRE(sheaf_topic_open(p, "t") == NULL && errno == ENOENT, "open before create");
	t = sheaf_topic_create(p, "t", 6, 0, SHEAF_TOPIC_BLOCK);     /* rounded to 8 */
	REQUIRE(t != NULL, "create: %s", strerror(errno));
	REQUIRE(sheaf_topic_create(p, "t", 8, 0, 0) == NULL && errno == EEXIST, "exists");
	t2 = sheaf_topic_open(p, "t");
	REQUIRE(t2 != NULL, "open: %s", strerror(errno));
	REQUIRE(sheaf_topic_stats(t, &ts) == 0 && ts.capacity == 8 && ts.subscribers == 0,
		"stats");

	/* Nobody subscribed: the message is freed at once. */
	REQUIRE(sheaf_topic_publish(t, local, 0) == -EINVAL, "a stack pointer is refused");
	o = xalloc(c);
	REQUIRE(sheaf_topic_publish(t, (char *)o + 8, 0) == -EINVAL, "not on a boundary");
	REQUIRE(sheaf_topic_publish(t, o, 0) == 0 && in_use(c) == 0, "unread, freed");

	/* Fan-out to two, mixed caches; freed exactly at the last release. */
	a = sheaf_topic_subscribe(t);
	b = sheaf_topic_subscribe(t2);
	REQUIRE(a != NULL && b != NULL, "subscribe: %s", strerror(errno));
	REQUIRE(sheaf_topic_take(a, &m, 0) == -EAGAIN, "empty");
	REQUIRE(sheaf_topic_take(a, &m, 30) == -ETIMEDOUT, "timeout");
	for (int i = 0; i < 8; i++) {
		int *x = xalloc(i % 2 ? c : c2);

		*x = i;
		REQUIRE(sheaf_topic_publish(t, x, 0) == 0, "publish %d", i);
	}
	REQUIRE(in_use(c) == 4 && in_use(c2) == 4, "all held by the topic");
	for (int i = 0; i < 8; i++) {
		REQUIRE(sheaf_topic_take(a, &ma[i], 0) == 0 && *(int *)ma[i].obj == i, "a %d", i);
		REQUIRE(sheaf_topic_take(b, &mb[i], 0) == 0 && mb[i].obj == ma[i].obj &&
			mb[i].seq == ma[i].seq && ma[i].seq == (uint64_t)i + 1, "b %d", i);
	}
	REQUIRE(sheaf_topic_take(b, &m, 0) == -EAGAIN, "drained");
	REQUIRE(sheaf_sub_stats(a, &ss) == 0 && ss.delivered == 8 && ss.held == 8 &&
		ss.depth == 0, "sub stats");
	/* Full (BLOCK): the log is held. */
	o = xalloc(c);
	REQUIRE(sheaf_topic_publish(t, o, 0) == -EAGAIN, "full");
	REQUIRE(sheaf_topic_publish(t, o, 30) == -ETIMEDOUT, "full, timed out");
	for (int i = 0; i < 8; i++) {
		REQUIRE(sheaf_topic_release(a, &ma[i]) == 0, "release a %d", i);
		REQUIRE(in_use(c) + in_use(c2) == 9 - (uint64_t)i, "freed too early (%d)", i);
		REQUIRE(sheaf_topic_release(a, &ma[i]) == -EALREADY, "released twice");
		REQUIRE(sheaf_topic_release(b, &mb[i]) == 0, "release b %d", i);
		REQUIRE(in_use(c) + in_use(c2) == 8 - (uint64_t)i, "not freed (%d)", i);
	}
	REQUIRE(in_use(c) == 1 && in_use(c2) == 0, "freed at the last release");
	REQUIRE(sheaf_topic_publish(t, o, 0) == 0, "room again");

	/* Unsubscribe releases what was queued and held. */
	REQUIRE(sheaf_topic_take(a, &m, 0) == 0 && m.obj == o, "take");
	REQUIRE(sheaf_topic_unsubscribe(a) == 0, "unsubscribe a (held one)");
	REQUIRE(in_use(c) == 1, "b still has it queued");
	REQUIRE(sheaf_topic_unsubscribe(b) == 0, "unsubscribe b (queued one)");
	REQUIRE(in_use(c) == 0, "freed by the leave");

	/* 16 subscribers at most. */
	for (int i = 0; i < 16; i++)
		REQUIRE((subs[i] = sheaf_topic_subscribe(t)) != NULL, "subscriber %d", i);
	REQUIRE(sheaf_topic_subscribe(t) == NULL && errno == ENOSPC, "17th");
	o = xalloc(c);
	REQUIRE(sheaf_topic_publish(t, o, 0) == 0, "to 16");
	for (int i = 0; i < 16; i++) {
		REQUIRE(sheaf_topic_take(subs[i], &m, 0) == 0 && m.obj == o, "take %d", i);
		REQUIRE(sheaf_topic_release(subs[i], &m) == 0, "release %d", i);
		REQUIRE(in_use(c) == (i < 15), "freed by the 16th, not before (%d)", i);
	}
	REQUIRE(sheaf_topic_destroy(t2) == -EBUSY, "destroy with subscribers");
	for (int i = 0; i < 16; i++)
		REQUIRE(sheaf_topic_unsubscribe(subs[i]) == 0, "unsubscribe %d", i);
	REQUIRE(sheaf_topic_destroy(t2) == 0, "destroy");
	o = xalloc(c);
	REQUIRE(sheaf_topic_publish(t, o, 0) == -ESTALE, "stale handle");
	REQUIRE(sheaf_topic_subscribe(t) == NULL && errno == ESTALE, "stale subscribe");
	sheaf_free(c, o);
	sheaf_topic_close(t);
	REQUIRE(in_use(c) == 0 && in_use(c2) == 0, "nothing left");
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

START_TEST(test_history_local)
{
	sheaf_pool_t *p = pool_new(NULL);
	sheaf_cache_t *c = mkcache(p, "msg", 64, -1, 0);
	sheaf_topic_t *t = sheaf_topic_create(p, "h", 16, 3, SHEAF_TOPIC_BLOCK);
	sheaf_sub_t *a, *b;
	struct sheaf_msg m;

	REQUIRE(t != NULL, "create: %s", strerror(errno));
	for (int i = 0; i < 10; i++) {
		int *x = xalloc(c);

		*x = i;
		REQUIRE(sheaf_topic_publish(t, x, 0) == 0, "publish %d", i);
		REQUIRE(in_use(c) == (uint64_t)(i < 3 ? i + 1 : 3), "history holds %d", i);
	}
	a = sheaf_topic_subscribe(t);
	REQUIRE(a != NULL, "subscribe");
	for (int i = 7; i < 10; i++) {
		REQUIRE(sheaf_topic_take(a, &m, 0) == 0 && *(int *)m.obj == i &&
			m.seq == (uint64_t)i, "history %d", i);
		REQUIRE(sheaf_topic_release(a, &m) == 0, "release");
	}
	REQUIRE(sheaf_topic_take(a, &m, 0) == -EAGAIN, "only the history");
	REQUIRE(in_use(c) == 3, "the history still holds them");
	/* New messages push the oldest out of the history, which a holder
	 * keeps alive. */
	b = sheaf_topic_subscribe(t);
	REQUIRE(sheaf_topic_take(b, &m, 0) == 0 && *(int *)m.obj == 7, "b's history");
	for (int i = 10; i < 14; i++) {
		int *x = xalloc(c);
		struct sheaf_msg n;

		*x = i;
		REQUIRE(sheaf_topic_publish(t, x, 0) == 0, "publish %d", i);
		REQUIRE(sheaf_topic_take(a, &n, 0) == 0 && *(int *)n.obj == i, "a %d", i);
		REQUIRE(sheaf_topic_release(a, &n) == 0, "a release");
	}
	REQUIRE(in_use(c) == 7, "b holds 7, has 8, 9 (history) and 10..13 queued");
	REQUIRE(sheaf_topic_release(b, &m) == 0, "b lets 7 go");
	REQUIRE(sheaf_topic_unsubscribe(b) == 0 && sheaf_topic_unsubscribe(a) == 0, "leave");
	REQUIRE(in_use(c) == 3, "the history: 11, 12, 13");
	REQUIRE(sheaf_topic_destroy(t) == 0, "destroy");
	REQUIRE(in_use(c) == 0, "destroy freed the history");
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

START_TEST(test_drop_local)
{
	sheaf_pool_t *p = pool_new(NULL);
	sheaf_cache_t *c = mkcache(p, "msg", 64, -1, 0);
	sheaf_topic_t *t = sheaf_topic_create(p, "d", 4, 0, SHEAF_TOPIC_DROP);
	sheaf_sub_t *slow, *fast;
	struct sheaf_msg m, held;
	struct sheaf_sub_stats ss;

	REQUIRE(t != NULL, "create: %s", strerror(errno));
	slow = sheaf_topic_subscribe(t);
	fast = sheaf_topic_subscribe(t);
	REQUIRE(slow != NULL && fast != NULL, "subscribe");
	for (int i = 0; i < 10; i++) {
		int *x = xalloc(c);

		*x = i;
		REQUIRE(sheaf_topic_publish(t, x, 0) == 0, "publish %d (drops)", i);
		REQUIRE(sheaf_topic_take(fast, &m, 0) == 0 && *(int *)m.obj == i, "fast %d", i);
		REQUIRE(sheaf_topic_release(fast, &m) == 0, "fast release");
	}
	REQUIRE(sheaf_sub_stats(slow, &ss) == 0 && ss.dropped == 6, "slow dropped %llu",
		(unsigned long long)ss.dropped);
	REQUIRE(sheaf_sub_stats(fast, &ss) == 0 && ss.dropped == 0, "fast dropped none");
	REQUIRE(in_use(c) == 4, "the last 4 queued for slow");
	for (int i = 6; i < 10; i++) {
		REQUIRE(sheaf_topic_take(slow, &m, 0) == 0 && *(int *)m.obj == i &&
			m.seq == (uint64_t)i, "slow gets the newest: %d", i);
		if (i == 6)
			held = m;
		else
			REQUIRE(sheaf_topic_release(slow, &m) == 0, "release");
	}
	/* A held message is never dropped: the publisher waits for it. */
	{
		int *x = xalloc(c);

		REQUIRE(sheaf_topic_publish(t, x, 0) == -EAGAIN, "held record: full");
		REQUIRE(sheaf_topic_release(slow, &held) == 0, "let it go");
		REQUIRE(sheaf_topic_publish(t, x, 0) == 0, "room now");
	}
	REQUIRE(sheaf_topic_unsubscribe(slow) == 0 && sheaf_topic_unsubscribe(fast) == 0,
		"leave");
	REQUIRE(in_use(c) == 0, "everything freed");
	REQUIRE(sheaf_topic_destroy(t) == 0, "destroy");
	require_pool_ok(p);
	sheaf_pool_destroy(p);
}
END_TEST

/* ---- processes of a real sheafd -------------------------------------------- */

#define PUBS       3
#define SUBS       4
#define PER_PUB    20000u

struct msg {
	uint32_t pub;
	uint32_t seq;
	char fill[56];
};

struct shared {
	_Atomic uint32_t ready;      /* subscribers joined */
	_Atomic uint32_t pubs_done;
	_Atomic uint64_t received[SUBS];
	_Atomic uint64_t errors;     /* duplicates, disorder, torn */
	_Atomic uint64_t rounds;     /* join/leave rounds */
	uint32_t npubs, per_pub;
	char sock[128];
};

static struct shared *sh;
static sheaf_pool_t *parent_pool;

static sheaf_pool_t *own_connect(const char *name)
{
	if (parent_pool != NULL)
		sheaf_disconnect(parent_pool);
	parent_pool = NULL;
	return child_connect(sh->sock, name);
}

static struct shared *shared_new(const char *sock)
{
	struct shared *s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	REQUIRE(s != MAP_FAILED, "mmap");
	memset(s, 0, sizeof(*s));
	snprintf(s->sock, sizeof(s->sock), "%s", sock);
	return s;
}

static int publisher(void *arg)
{
	uint32_t me = (uint32_t)(uintptr_t)arg;
	sheaf_pool_t *p = own_connect("publisher");
	sheaf_cache_t *c = sheaf_cache_open(p, "msg");
	sheaf_topic_t *t = sheaf_topic_open(p, "fan");

	REQUIRE(c != NULL && t != NULL, "open: %s", strerror(errno));
	for (uint32_t i = 0; i < sh->per_pub; i++) {
		struct msg *m = sheaf_alloc(c);
		int rc;

		REQUIRE(m != NULL, "alloc");
		m->pub = me;
		m->seq = i;
		memset(m->fill, (int)i, sizeof(m->fill));
		rc = sheaf_topic_publish(t, m, 20000);
		REQUIRE(rc == 0, "publish %u: %d", i, rc);
	}
	atomic_fetch_add(&sh->pubs_done, 1);
	sheaf_topic_close(t);
	sheaf_disconnect(p);
	return 0;
}

static int check_msg(const struct sheaf_msg *m, uint32_t *last, uint64_t *lastseq, int exact)
{
	const struct msg *x = m->obj;

	if (x->pub >= PUBS || x->seq >= sh->per_pub)
		return 0;
	for (size_t k = 0; k < sizeof(x->fill); k++)
		if (x->fill[k] != (char)x->seq)
			return 0;
	if (*lastseq != UINT64_MAX && m->seq <= *lastseq)
		return 0;
	if (last[x->pub] != UINT32_MAX &&
	    (exact ? x->seq != last[x->pub] + 1 : x->seq <= last[x->pub]))
		return 0;
	if (exact && last[x->pub] == UINT32_MAX && x->seq != 0)
		return 0;
	last[x->pub] = x->seq;
	*lastseq = m->seq;
	return 1;
}

/* Joined before any publish: every message, in each publisher's order. */
static int fan_subscriber(void *arg)
{
	uint32_t me = (uint32_t)(uintptr_t)arg;
	sheaf_pool_t *p = own_connect("subscriber");
	sheaf_topic_t *t = sheaf_topic_open(p, "fan");
	sheaf_sub_t *s;
	uint32_t last[PUBS];
	uint64_t lastseq = UINT64_MAX, want = (uint64_t)sh->npubs * sh->per_pub, got = 0;

	REQUIRE(t != NULL, "open: %s", strerror(errno));
	s = sheaf_topic_subscribe(t);
	REQUIRE(s != NULL, "subscribe: %s", strerror(errno));
	memset(last, 0xff, sizeof(last));
	atomic_fetch_add(&sh->ready, 1);
	while (got < want) {
		struct sheaf_msg m;
		int rc = sheaf_topic_take(s, &m, 20000);

		REQUIRE(rc == 0, "take after %llu: %d", (unsigned long long)got, rc);
		if (!check_msg(&m, last, &lastseq, 1))
			atomic_fetch_add(&sh->errors, 1);
		REQUIRE(sheaf_topic_release(s, &m) == 0, "release");
		got++;
	}
	sh->received[me] = got;
	REQUIRE(sheaf_topic_unsubscribe(s) == 0, "unsubscribe");
	sheaf_topic_close(t);
	sheaf_disconnect(p);
	return 0;
}

/* Joins and leaves at random, holding a few messages when it leaves. */
static int churn_subscriber(void *arg)
{
	uint64_t rng = 0x9e3779b97f4a7c15ull * (1 + (uintptr_t)arg);
	sheaf_pool_t *p = own_connect("churn");
	sheaf_topic_t *t = sheaf_topic_open(p, "fan");

	REQUIRE(t != NULL, "open: %s", strerror(errno));
	while (atomic_load(&sh->pubs_done) < sh->npubs) {
		sheaf_sub_t *s = sheaf_topic_subscribe(t);
		uint32_t last[PUBS], n = 1 + (uint32_t)(xorshift(&rng) % 400), held = 0;
		uint64_t lastseq = UINT64_MAX;

		REQUIRE(s != NULL, "subscribe: %s", strerror(errno));
		memset(last, 0xff, sizeof(last));
		for (uint32_t i = 0; i < n; i++) {
			struct sheaf_msg m;

			if (sheaf_topic_take(s, &m, 50) != 0)
				break;
			if (!check_msg(&m, last, &lastseq, 0))
				atomic_fetch_add(&sh->errors, 1);
			/* Keep the last few held: the leave releases them. */
			if (i + 4 < n || xorshift(&rng) % 2)
				REQUIRE(sheaf_topic_release(s, &m) == 0, "release");
			else
				held++;
		}
		REQUIRE(sheaf_topic_unsubscribe(s) == 0, "unsubscribe");
		atomic_fetch_add(&sh->rounds, 1);
		(void)held;
	}
	sheaf_topic_close(t);
	sheaf_disconnect(p);
	return 0;
}

static void run_fanout(unsigned policy, int churn)
{
	struct dmn d;
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	sheaf_topic_t *t;
	struct sheaf_topic_stats ts;
	pid_t pid[PUBS + SUBS];
	uint32_t nsub = churn ? 3 : SUBS;
	char err[256];

	start_sheafd(&d);
	sh = shared_new(d.sock);
	sh->npubs = PUBS;
	sh->per_pub = churn ? PER_PUB : PER_PUB / 2;
	p = parent_pool = child_connect(d.sock, "test");
	c = sheaf_cache_create(p, "msg", sizeof(struct msg), NULL);
	REQUIRE(c != NULL, "cache");
	t = sheaf_topic_create(p, "fan", 64, churn ? 8 : 0, policy);
	REQUIRE(t != NULL, "topic: %s", strerror(errno));
	for (uint32_t i = 0; i < nsub; i++)
		pid[PUBS + i] = fork_child(churn ? churn_subscriber : fan_subscriber,
					   (void *)(uintptr_t)i);
	if (!churn)
		while (atomic_load(&sh->ready) < nsub)
			sleep_ms(1);
	for (uint32_t i = 0; i < PUBS; i++)
		pid[i] = fork_child(publisher, (void *)(uintptr_t)i);
	for (uint32_t i = 0; i < PUBS + nsub; i++)
		reap_ok(pid[i], 240000, "topic client");
	REQUIRE(sh->errors == 0, "%llu messages duplicated, out of order or torn",
		(unsigned long long)sh->errors);
	if (!churn)
		for (uint32_t i = 0; i < nsub; i++)
			REQUIRE(sh->received[i] == (uint64_t)PUBS * sh->per_pub,
				"subscriber %u got %llu", i, (unsigned long long)sh->received[i]);
	REQUIRE(sheaf_topic_stats(t, &ts) == 0 && ts.published == (uint64_t)PUBS * sh->per_pub &&
		ts.subscribers == 0, "published %llu", (unsigned long long)ts.published);
	printf("  policy %u%s: %u publishers x %u, %u subscribers, %llu rounds, %llu waits\n",
	       policy, churn ? " churn" : "", PUBS, sh->per_pub, nsub,
	       (unsigned long long)sh->rounds, (unsigned long long)ts.publish_waits);
	REQUIRE(sheaf_topic_destroy(t) == 0, "destroy");
	REQUIRE(in_use(c) == 0, "objects left in use: %llu", (unsigned long long)in_use(c));
	REQUIRE(sheaf_pool_check(p, err, sizeof(err)) == 0, "check: %s", err);
	sheaf_disconnect(p);
	parent_pool = NULL;
	munmap(sh, sizeof(*sh));
	dmn_end(&d);
}

START_TEST(test_fanout_block)
{
	run_fanout(SHEAF_TOPIC_BLOCK, 0);
}
END_TEST

START_TEST(test_churn_block)
{
	run_fanout(SHEAF_TOPIC_BLOCK, 1);
}
END_TEST

START_TEST(test_churn_drop)
{
	run_fanout(SHEAF_TOPIC_DROP, 1);
}
END_TEST

/* An idle subscriber sleeps (no CPU), and a publish wakes it. */
static int idle_subscriber(void *arg)
{
	sheaf_pool_t *p = own_connect("idle");
	sheaf_topic_t *t = sheaf_topic_open(p, "fan");
	sheaf_sub_t *s = t != NULL ? sheaf_topic_subscribe(t) : NULL;
	struct sheaf_msg m;
	struct rusage ru;
	int rc;

	(void)arg;
	REQUIRE(s != NULL, "subscribe: %s", strerror(errno));
	atomic_fetch_add(&sh->ready, 1);
	rc = sheaf_topic_take(s, &m, 10000);
	REQUIRE(rc == 0, "take: %d", rc);
	getrusage(RUSAGE_SELF, &ru);
	/* It slept about a second: well under 100 ms of CPU. */
	REQUIRE(ru.ru_utime.tv_sec == 0 && ru.ru_utime.tv_usec < 100000, "spun: %ld us",
		(long)ru.ru_utime.tv_usec);
	REQUIRE(sheaf_topic_release(s, &m) == 0, "release");
	REQUIRE(sheaf_topic_unsubscribe(s) == 0, "unsubscribe");
	sheaf_disconnect(p);
	return 0;
}

START_TEST(test_waits)
{
	struct dmn d;
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	sheaf_topic_t *t;
	pid_t pid[4];

	start_sheafd(&d);
	sh = shared_new(d.sock);
	p = parent_pool = child_connect(d.sock, "test");
	c = sheaf_cache_create(p, "msg", 64, NULL);
	t = sheaf_topic_create(p, "fan", 8, 0, SHEAF_TOPIC_BLOCK);
	REQUIRE(c != NULL && t != NULL, "create");
	for (int i = 0; i < 4; i++)
		pid[i] = fork_child(idle_subscriber, NULL);
	while (atomic_load(&sh->ready) < 4)
		sleep_ms(1);
	sleep_ms(1000);
	REQUIRE(sheaf_topic_publish(t, xalloc(c), 0) == 0, "publish");
	for (int i = 0; i < 4; i++)
		reap_ok(pid[i], 10000, "idle subscriber");
	REQUIRE(in_use(c) == 0, "freed by the last of four");
	REQUIRE(sheaf_topic_destroy(t) == 0, "destroy");
	sheaf_disconnect(p);
	parent_pool = NULL;
	munmap(sh, sizeof(*sh));
	dmn_end(&d);
}
END_TEST

/* Run sheafctl with @args against @d: its exit status, its output in @out. */
static int ctl(struct dmn *d, const char *args, char *out, size_t cap)
{
	char cmd[512];
	size_t len;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "%s --socket %s %s 2>&1", sheafctl_bin(), d->sock, args);
	f = popen(cmd, "r");
	REQUIRE(f != NULL, "popen");
	len = fread(out, 1, cap - 1, f);
	out[len] = '\0';
	return WEXITSTATUS(pclose(f));
}

START_TEST(test_sheafctl_topics)
{
	struct dmn d;
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	sheaf_topic_t *t;
	sheaf_sub_t *s;
	struct sheaf_msg m;
	char *out = calloc(1, 65536);

	start_sheafd(&d);
	REQUIRE(ctl(&d, "topics create ticks --capacity 12 --history 2 --policy drop", out,
		    65536) == 0 && strstr(out, "capacity 16, history 2, policy drop") != NULL,
		"topics create: %s", out);
	REQUIRE(ctl(&d, "topics create bad --policy maybe", out, 65536) == 2, "bad policy");
	REQUIRE(ctl(&d, "topics list --history 3", out, 65536) == 2, "create's option on list");
	p = parent_pool = child_connect(d.sock, "test");
	c = sheaf_cache_create(p, "msg", 64, NULL);
	t = sheaf_topic_open(p, "ticks");
	REQUIRE(c != NULL && t != NULL, "open");
	s = sheaf_topic_subscribe(t);
	REQUIRE(s != NULL, "subscribe");
	for (int i = 0; i < 3; i++)
		REQUIRE(sheaf_topic_publish(t, xalloc(c), 0) == 0, "publish");
	REQUIRE(sheaf_topic_take(s, &m, 0) == 0, "take");
	REQUIRE(ctl(&d, "topics show ticks -o json", out, 65536) == 0 &&
		strstr(out, "\"name\": \"ticks\"") != NULL &&
		strstr(out, "\"published\": 3") != NULL && strstr(out, "\"delivered\": 1") != NULL &&
		strstr(out, "\"held\": 1") != NULL && strstr(out, "\"depth\": 2") != NULL &&
		strstr(out, "\"policy\": \"drop\"") != NULL, "topics show -o json: %s", out);
	REQUIRE(ctl(&d, "topics show ticks", out, 65536) == 0 && strstr(out, "DELIVERED") != NULL,
		"topics show: %s", out);
	REQUIRE(ctl(&d, "topics", out, 65536) == 0 && strstr(out, "ticks") != NULL, "topics");
	REQUIRE(ctl(&d, "stats -o json", out, 65536) == 0 && strstr(out, "\"topics\"") != NULL &&
		strstr(out, "\"ticks\"") != NULL, "stats -o json has no topics: %s", out);
	REQUIRE(ctl(&d, "metrics", out, 65536) == 0 &&
		strstr(out, "sheaf_topic_depth{topic=\"ticks\",slot=\"0\"} 2") != NULL &&
		strstr(out, "sheaf_topic_published_total{topic=\"ticks\"} 3") != NULL,
		"metrics have no topic figures: %s", out);
	REQUIRE(ctl(&d, "topics destroy ticks", out, 65536) == 1, "destroy with a subscriber");
	REQUIRE(sheaf_topic_release(s, &m) == 0 && sheaf_topic_unsubscribe(s) == 0, "leave");
	REQUIRE(ctl(&d, "topics destroy ticks", out, 65536) == 0, "destroy: %s", out);
	REQUIRE(in_use(c) == 0, "destroy freed the history");
	REQUIRE(ctl(&d, "topics show ticks", out, 65536) == 1, "gone");
	free(out);
	sheaf_topic_close(t);
	sheaf_disconnect(p);
	parent_pool = NULL;
	dmn_end(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("topic");

	require_binaries("test_topic");
	ADD_ALONE(s, test_calls_local, 60);
	ADD_ALONE(s, test_history_local, 60);
	ADD_ALONE(s, test_drop_local, 60);
	ADD_ALONE(s, test_fanout_block, 300);
	ADD_ALONE(s, test_churn_block, 300);
	ADD_ALONE(s, test_churn_drop, 300);
	ADD_ALONE(s, test_waits, 60);
	ADD_ALONE(s, test_sheafctl_topics, 60);
	return run_suite(s);
}
