/*
 * test_topic_crash.c - topics under SIGKILL: publisher and subscriber
 * processes of a real sheafd are killed at random points of their loops
 * (>= 1000 kills; SHEAF_TOPIC_KILLS=N for more: `make test-topic-long`)
 * and replaced.  Two topics of one owned cache (SHEAF_CACHE_OWNED), one
 * blocking with a history, one dropping; subscribers hold a few messages
 * and some leave and join again.  Afterwards: no subscriber ever saw a
 * torn or foreign message, nor one twice, nor out of order; sheafd is
 * alive; no subscriber is left joined; both topics still work through
 * their whole capacity (not wedged); and once they are destroyed the
 * cache's objects in use are back to the baseline, 0: every object a dead
 * publisher or subscriber had in flight, queued or held was freed, and
 * none twice (the pool checker agrees).
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "client/internal.h"
#include "client/sheaf.h"
#include "shm/owner.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_pool.h"
#include "tests/helpers/util_proc.h"

#define CAPACITY  32u
#define NPUB      2
#define NSUB      4             /* even: topic "kb", odd: "kd" */
#define NPROC     (NPUB + NSUB)
#define HOLD_MAX  4u

struct msg {
	uint64_t id;
	uint64_t check;              /* ~id: a torn or foreign message shows */
	char fill[48];
};

struct shared {
	_Atomic uint64_t next_id;
	_Atomic uint64_t bad, dups, taken, published;
	_Atomic uint32_t ready[NPROC];
	char sock[128];
};

static struct shared *sh;
static sheaf_pool_t *parent_pool;

static const char *const topics[2] = { "kb", "kd" };

static sheaf_pool_t *own_connect(const char *name)
{
	if (parent_pool != NULL)
		sheaf_disconnect(parent_pool);
	parent_pool = NULL;
	return child_connect(sh->sock, name);
}

static int publisher(void *arg)
{
	int slot = (int)(uintptr_t)arg;
	sheaf_pool_t *p = own_connect("publisher");
	sheaf_cache_t *c = sheaf_cache_open(p, "msg");
	sheaf_topic_t *t[2] = { sheaf_topic_open(p, topics[0]), sheaf_topic_open(p, topics[1]) };
	uint64_t rnd = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull | 1;

	REQUIRE(c != NULL && t[0] != NULL && t[1] != NULL, "open: %s", strerror(errno));
	sh->ready[slot] = 1;
	for (;;) {
		struct msg *m = sheaf_alloc(c);
		uint64_t id = atomic_fetch_add(&sh->next_id, 1);
		int rc;

		REQUIRE(m != NULL, "alloc: %s", strerror(errno));
		m->id = id;
		m->check = ~id;
		memset(m->fill, (int)id, sizeof(m->fill));
		rc = sheaf_topic_publish(t[xorshift(&rnd) % 2], m, 5);
		if (rc == 0)
			sh->published++;
		else
			sheaf_free(c, m);    /* full for 5 ms: another try */
	}
	return 0;
}

static int subscriber(void *arg)
{
	int slot = (int)(uintptr_t)arg;
	sheaf_pool_t *p = own_connect("subscriber");
	sheaf_topic_t *t = sheaf_topic_open(p, topics[slot % 2]);
	uint64_t rnd = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull | 1;

	REQUIRE(t != NULL, "open: %s", strerror(errno));
	for (;;) {
		sheaf_sub_t *s = sheaf_topic_subscribe(t);
		struct sheaf_msg held[HOLD_MAX];
		uint64_t lastseq = UINT64_MAX, lastid = UINT64_MAX;
		unsigned nheld = 0, n = 1 + (unsigned)(xorshift(&rnd) % 2000);

		REQUIRE(s != NULL, "subscribe: %s", strerror(errno));
		sh->ready[slot] = 1;
		for (unsigned i = 0; i < n; i++) {
			struct sheaf_msg m;
			const struct msg *x;

			if (sheaf_topic_take(s, &m, 5) != 0)
				continue;
			x = m.obj;
			if (x->check != ~x->id || (char)x->fill[47] != (char)x->id)
				sh->bad++;
			if (lastseq != UINT64_MAX && (m.seq <= lastseq || x->id == lastid))
				sh->dups++;
			lastseq = m.seq;
			lastid = x->id;
			sh->taken++;
			/* Hold a few, release in another order. */
			if (nheld == HOLD_MAX) {
				unsigned k = (unsigned)(xorshift(&rnd) % HOLD_MAX);

				REQUIRE(sheaf_topic_release(s, &held[k]) == 0, "release");
				held[k] = m;
			} else {
				held[nheld++] = m;
			}
		}
		/* Some leave with what they hold (the leave releases it). */
		if (xorshift(&rnd) % 2)
			for (unsigned k = 0; k < nheld; k++)
				REQUIRE(sheaf_topic_release(s, &held[k]) == 0, "release");
		REQUIRE(sheaf_topic_unsubscribe(s) == 0, "unsubscribe");
	}
	return 0;
}

static pid_t spawn(int slot)
{
	sh->ready[slot] = 0;
	return fork_child(slot < NPUB ? publisher : subscriber, (void *)(uintptr_t)slot);
}

static void kill_reap(pid_t pid)
{
	int st;

	kill(pid, SIGKILL);
	REQUIRE(waitpid(pid, &st, 0) == pid, "waitpid");
	REQUIRE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
		"a client ended on its own (status 0x%x): see its message above", st);
}

/* The topic works through its whole capacity, twice. */
static void not_wedged(sheaf_cache_t *c, sheaf_topic_t *t, unsigned policy)
{
	sheaf_sub_t *s = sheaf_topic_subscribe(t);
	struct sheaf_msg m;

	REQUIRE(s != NULL, "subscribe after the kills: %s", strerror(errno));
	/* Whatever the history holds first. */
	while (sheaf_topic_take(s, &m, 0) == 0)
		REQUIRE(sheaf_topic_release(s, &m) == 0, "release history");
	for (int round = 0; round < 2; round++) {
		void *objs[CAPACITY];

		for (unsigned i = 0; i < CAPACITY; i++) {
			objs[i] = xalloc(c);
			REQUIRE(sheaf_topic_publish(t, objs[i], 1000) == 0,
				"publish %u after the kills", i);
		}
		if (policy == SHEAF_TOPIC_BLOCK) {
			void *o = xalloc(c);

			REQUIRE(sheaf_topic_publish(t, o, 0) == -EAGAIN, "full at the capacity");
			sheaf_free(c, o);
		}
		for (unsigned i = 0; i < CAPACITY; i++) {
			REQUIRE(sheaf_topic_take(s, &m, 1000) == 0 && m.obj == objs[i],
				"in order at %u", i);
			REQUIRE(sheaf_topic_release(s, &m) == 0, "release");
		}
		REQUIRE(sheaf_topic_take(s, &m, 0) == -EAGAIN, "empty");
	}
	REQUIRE(sheaf_topic_unsubscribe(s) == 0, "unsubscribe");
}

/* What the objects left in use say (their tags), for a failure's report. */
static void dump_in_use(sheaf_pool_t *pool, sheaf_cache_t *c)
{
	struct shm_pool *p = &pool->shm;
	uint32_t id = c->id;
	const struct shm_cache *sc = &p->caches[id];

	for (uint32_t f = 0; f < p->frames_total; f++) {
		const uint64_t *bm = pool_bitmap(p, f);

		if (at_load_relaxed(&p->frame_owner[f]) != id)
			continue;
		for (uint32_t i = 0; i < sc->objs_per_slab; i++)
			if (!(bm[i / 64] & (1ull << (i % 64))) &&
			    at_load_relaxed(owner_tag(p, sc, pool_frame_off(p, f) +
						      (uint64_t)i * sc->obj_size)) != 0) {
				uint64_t off = pool_frame_off(p, f) + (uint64_t)i * sc->obj_size;
				const struct msg *m = (const void *)(p->base + off);

				printf("  in use: frame %u obj %u tag 0x%x id %llu check %d\n", f, i,
				       at_load_relaxed(owner_tag(p, sc, off)),
				       (unsigned long long)m->id, m->check == ~m->id);
			}
	}
	fflush(stdout);         /* the failing REQUIRE ends the process next */
}

static void kills_run(unsigned kills_want)
{
	const char *argv[] = { NULL, "--foreground", "--socket", NULL, "--nodes", "1",
			       "--size", "256M", NULL };
	struct sheaf_cache_config cfg = { .capacity = -1, .flags = SHEAF_CACHE_OWNED };
	unsigned kills = 0;
	uint64_t rnd = 0x7654321;
	struct sheaf_topic_stats ts;
	struct dmn d;
	sheaf_cache_t *c;
	sheaf_topic_t *t[2];
	pid_t pid[NPROC];
	char err[256];
	int64_t t0 = now_ms();

	dmn_init_at(&d, "/tmp/sheaf-tcrash-XXXXXX", "log");
	argv[0] = sheafd_bin();
	argv[3] = d.sock;
	dmn_start_argv(&d, (char *const *)argv);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	REQUIRE(sh != MAP_FAILED, "mmap");
	memset(sh, 0, sizeof(*sh));
	snprintf(sh->sock, sizeof(sh->sock), "%s", d.sock);
	parent_pool = child_connect(d.sock, "test");
	c = sheaf_cache_create(parent_pool, "msg", sizeof(struct msg), &cfg);
	t[0] = sheaf_topic_create(parent_pool, topics[0], CAPACITY, 4, SHEAF_TOPIC_BLOCK);
	t[1] = sheaf_topic_create(parent_pool, topics[1], CAPACITY, 0, SHEAF_TOPIC_DROP);
	REQUIRE(c != NULL && t[0] != NULL && t[1] != NULL, "create: %s", strerror(errno));
	sheaf_topic_close(t[0]);
	sheaf_topic_close(t[1]);
	sheaf_disconnect(parent_pool);
	parent_pool = NULL;

	for (int i = 0; i < NPROC; i++)
		pid[i] = spawn(i);
	while (kills < kills_want) {
		int v = (int)(xorshift(&rnd) % NPROC);
		int64_t until = now_ms() + 5000;

		while (!sh->ready[v]) {     /* connected: now in its loop */
			REQUIRE(now_ms() < until, "child %d never got ready", v);
			sleep_us(100);
		}
		sleep_us((unsigned)(xorshift(&rnd) % 3000));
		kill_reap(pid[v]);
		kills++;
		pid[v] = spawn(v);
	}
	for (int i = 0; i < NPROC; i++) {
		kill_reap(pid[i]);
		kills++;
	}
	wait_no_clients(&d, 20000);
	printf("  %u kills in %lld ms: %llu published, %llu taken\n", kills,
	       (long long)(now_ms() - t0), (unsigned long long)sh->published,
	       (unsigned long long)sh->taken);
	REQUIRE(dmn_alive(&d), "sheafd died");
	REQUIRE(sh->bad == 0, "%llu torn or foreign messages", (unsigned long long)sh->bad);
	REQUIRE(sh->dups == 0, "%llu messages twice or out of order", (unsigned long long)sh->dups);
	REQUIRE(sh->published > 5000 && sh->taken > 5000, "too little traffic");

	parent_pool = child_connect(d.sock, "test");
	c = sheaf_cache_open(parent_pool, "msg");
	for (int i = 0; i < 2; i++) {
		t[i] = sheaf_topic_open(parent_pool, topics[i]);
		REQUIRE(t[i] != NULL, "open");
		REQUIRE(sheaf_topic_stats(t[i], &ts) == 0 && ts.subscribers == 0,
			"%u subscribers left joined", ts.subscribers);
		not_wedged(c, t[i], i ? SHEAF_TOPIC_DROP : SHEAF_TOPIC_BLOCK);
		REQUIRE(sheaf_topic_destroy(t[i]) == 0, "destroy");
	}
	if (cache_stats_of(c, -1).in_use != 0)
		dump_in_use(parent_pool, c);
	REQUIRE(cache_stats_of(c, -1).in_use == 0, "%llu objects left in use",
		(unsigned long long)cache_stats_of(c, -1).in_use);
	REQUIRE(sheaf_pool_check(parent_pool, err, sizeof(err)) == 0, "check: %s", err);
	sheaf_disconnect(parent_pool);
	parent_pool = NULL;
	munmap(sh, sizeof(*sh));
	dmn_end(&d);
}

/* SHEAF_TOPIC_KILLS=N: the run's kills (default 1000). */
START_TEST(test_kills)
{
	const char *env = getenv("SHEAF_TOPIC_KILLS");

	kills_run(env != NULL && atoi(env) > 0 ? (unsigned)atoi(env) : 1000u);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("topic_crash");

	require_binaries("test_topic_crash");
	ADD_ALONE(s, test_kills, 600);
	return run_suite(s);
}
