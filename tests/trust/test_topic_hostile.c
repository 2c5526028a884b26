/*
 * test_topic_hostile.c - a hostile scribbler on a topic's shared memory
 * (docs/design.md, "Topics": untrusted), against a real sheafd.  Topic
 * "bad" (cache "cbad") belongs to hostile processes that write random and
 * targeted values into its records, values, tail hint and subscriber
 * blocks (among them the values of messages another topic's subscriber
 * holds right now, with reference bits set, and claims), subscribe and
 * leave at random (taking and publishing nothing: those would free the
 * values it planted in its own process, as any client can free any
 * object), and are killed and replaced again and again, so that sheafd
 * sweeps and repairs the spoiled log each time.  Beside it, topic "good"
 * (cache "cgood") carries a checked stream from one publisher to one
 * subscriber, which holds each message a while and checks it again before
 * releasing it.
 *
 * Passes when sheafd never dies and still answers, the good subscriber
 * got every message exactly once, in order, never changed under it (no
 * object of "good" freed and reused while held), and once "good" is
 * destroyed its cache's objects in use are back to 0.
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
#include "shm/topic.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_pool.h"
#include "tests/helpers/util_proc.h"

#define GOOD_MSGS 30000u

struct msg {
	uint64_t id, check;
	char fill[48];
};

struct shared {
	_Atomic uint32_t good_ready, good_done, hostile_ready;
	_Atomic uint64_t got, bad, rounds;
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

static int good_publisher(void *arg)
{
	sheaf_pool_t *p = own_connect("good-pub");
	sheaf_cache_t *c = sheaf_cache_open(p, "cgood");
	sheaf_topic_t *t = sheaf_topic_open(p, "good");

	(void)arg;
	REQUIRE(c != NULL && t != NULL, "open");
	for (uint64_t i = 0; i < GOOD_MSGS; i++) {
		struct msg *m = sheaf_alloc(c);

		REQUIRE(m != NULL, "alloc");
		m->id = i;
		m->check = ~i;
		memset(m->fill, (int)i, sizeof(m->fill));
		REQUIRE(sheaf_topic_publish(t, m, 30000) == 0, "publish %llu",
			(unsigned long long)i);
		if (i % 4 == 0)
			sleep_us(100);          /* paced: the scribblers get rounds */
	}
	sheaf_disconnect(p);
	return 0;
}

static int msg_ok(const struct msg *m, uint64_t id)
{
	return m->id == id && m->check == ~id && m->fill[0] == (char)id && m->fill[47] == (char)id;
}

#define HOLD 32u

/* Holds the last HOLD messages, checking every one held at each take (an
 * object freed under it goes back to the slabs and out again to the
 * publisher, which rewrites it). */
static int good_subscriber(void *arg)
{
	sheaf_pool_t *p = own_connect("good-sub");
	sheaf_topic_t *t = sheaf_topic_open(p, "good");
	sheaf_sub_t *s = t != NULL ? sheaf_topic_subscribe(t) : NULL;
	struct sheaf_msg held[HOLD];
	uint64_t ids[HOLD];

	(void)arg;
	REQUIRE(s != NULL, "subscribe: %s", strerror(errno));
	sh->good_ready = 1;
	for (uint64_t i = 0; i < GOOD_MSGS + HOLD; i++) {
		struct sheaf_msg m;
		int rc;

		if (i >= HOLD) {
			REQUIRE(sheaf_topic_release(s, &held[i % HOLD]) == 0, "release %llu",
				(unsigned long long)i - HOLD);
			sh->got++;
		}
		if (i >= GOOD_MSGS)
			continue;
		rc = sheaf_topic_take(s, &m, 30000);
		REQUIRE(rc == 0, "take %llu: %d", (unsigned long long)i, rc);
		held[i % HOLD] = m;
		ids[i % HOLD] = i;
		for (uint64_t k = i >= HOLD ? i - HOLD + 1 : 0; k <= i; k++)
			if (!msg_ok(held[k % HOLD].obj, ids[k % HOLD]))
				sh->bad++;
	}
	REQUIRE(sheaf_topic_unsubscribe(s) == 0, "unsubscribe");
	sh->good_done = 1;
	sheaf_disconnect(p);
	return 0;
}

static int hostile(void *arg)
{
	uint64_t rng = 0x2545f4914f6cdd1dull ^ (uint64_t)getpid() ^ (uintptr_t)arg;
	sheaf_pool_t *p = own_connect("hostile");
	sheaf_cache_t *c = sheaf_cache_open(p, "cbad");
	sheaf_topic_t *t = sheaf_topic_open(p, "bad");
	struct shm_pool *sp = &p->shm;
	int gi = pool_topic_find(sp, "good"), bi = pool_topic_find(sp, "bad");
	struct topic_ref good, bad;
	sheaf_sub_t *s = NULL;

	REQUIRE(c != NULL && t != NULL && gi >= 0 && bi >= 0, "open");
	good = topic_ref_of(sp, &sp->topics[gi]);
	bad = topic_ref_of(sp, &sp->topics[bi]);
	sh->hostile_ready = 1;
	for (;;) {
		uint32_t r = (uint32_t)(xorshift(&rng) % bad.size);

		switch (xorshift(&rng) % 10) {
		case 0:                         /* a random word */
			at_store_relaxed(&bad.recs[r].word, xorshift(&rng));
			break;
		case 1:                         /* a random value */
			at_store_relaxed(&bad.recs[r].value, (uint32_t)xorshift(&rng));
			break;
		case 2:
		case 3: {                       /* another topic's held message */
			uint32_t g = (uint32_t)(xorshift(&rng) % good.size);
			uint64_t w = at_load_relaxed(&bad.recs[r].word);

			/* One the good subscriber holds now. */
			for (uint32_t k = 0; k < good.size; k++, g = (g + 1) % good.size)
				if ((at_load_relaxed(&good.recs[g].word) & TW_REF_MASK) != 0)
					break;

			at_store_relaxed(&bad.recs[r].value, at_load_relaxed(&good.recs[g].value));
			at_store_relaxed(&bad.recs[r].word,
					 (w & ~(uint64_t)((1ull << TW_TAG_SHIFT) - 1)) |
					 (xorshift(&rng) & (TW_REFS | TW_PEND_MASK)));
			break;
		}
		case 4:                         /* the tail hint, the counters */
			at_store_relaxed(&bad.ctl->tail, xorshift(&rng) % 4 ? at_load_relaxed(
						 &bad.ctl->tail) + (xorshift(&rng) % 64) : xorshift(&rng));
			at_store_relaxed(&bad.subs[r % TOPIC_SUBS_MAX].cursor, xorshift(&rng));
			at_store_relaxed(&bad.subs[r % TOPIC_SUBS_MAX].delivered, xorshift(&rng));
			break;
		case 5:                         /* claims in other clients' names */
			at_store_relaxed(&bad.recs[r].word,
					 tw_make(tw_tag(at_load_relaxed(&bad.recs[r].word)),
						 TW_CLAIMED | (xorshift(&rng) % 8)));
			break;
		case 6:
			/* Joined, so that sheafd's leave sweeps its slot.  It
			 * takes nothing: its own release of a value it planted
			 * would free that object in this process, as any
			 * client can free any object (sheaf_free_any); what is
			 * tested is what sheafd does. */
			if (s == NULL)
				s = sheaf_topic_subscribe(t);
			break;
		case 7:
			if (s != NULL) {
				(void)sheaf_topic_unsubscribe(s);
				s = NULL;
			}
			break;
		default:
			/* No publish either: a publish that makes room frees
			 * what it drops, planted values included, in this
			 * process.  Claims in its own name, undone by sheafd
			 * at its death. */
			at_store_relaxed(&bad.recs[r].word,
					 tw_make(tw_tag(at_load_relaxed(&bad.recs[r].word)),
						 TW_CLAIMED | tw_claim(p->client,
							(uint32_t)xorshift(&rng))));
			break;
		}
		sh->rounds++;
	}
	return 0;
}

static void kill_reap(pid_t pid)
{
	int st;

	kill(pid, SIGKILL);
	REQUIRE(waitpid(pid, &st, 0) == pid, "waitpid");
	REQUIRE(WIFSIGNALED(st), "a hostile client ended on its own (status 0x%x)", st);
}

START_TEST(test_scribbler)
{
	const char *argv[] = { NULL, "--foreground", "--socket", NULL, "--nodes", "1",
			       "--size", "128M", NULL };
	struct dmn d;
	sheaf_cache_t *cg;
	sheaf_topic_t *tg, *tb;
	pid_t pub, sub, h;
	uint64_t rnd = 99;
	unsigned kills = 0;
	int64_t until;
	struct sheaf_topic_stats ts;
	struct sheaf_cache_config owned = { .capacity = -1, .flags = SHEAF_CACHE_OWNED };

	dmn_init_at(&d, "/tmp/sheaf-thostile-XXXXXX", "log");
	argv[0] = sheafd_bin();
	argv[3] = d.sock;
	dmn_start_argv(&d, (char *const *)argv);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	REQUIRE(sh != MAP_FAILED, "mmap");
	memset(sh, 0, sizeof(*sh));
	snprintf(sh->sock, sizeof(sh->sock), "%s", d.sock);
	parent_pool = child_connect(d.sock, "test");
	cg = sheaf_cache_create(parent_pool, "cgood", sizeof(struct msg), &owned);
	REQUIRE(sheaf_cache_create(parent_pool, "cbad", sizeof(struct msg), NULL) != NULL, "cbad");
	tg = sheaf_topic_create(parent_pool, "good", 64, 0, SHEAF_TOPIC_BLOCK);
	tb = sheaf_topic_create(parent_pool, "bad", 64, 4, SHEAF_TOPIC_DROP);
	REQUIRE(cg != NULL && tg != NULL && tb != NULL, "create: %s", strerror(errno));

	sub = fork_child(good_subscriber, NULL);
	until = now_ms() + 10000;
	while (!sh->good_ready)
		REQUIRE(now_ms() < until, "good subscriber not ready");
	pub = fork_child(good_publisher, NULL);
	while (!sh->good_done) {
		sh->hostile_ready = 0;
		h = fork_child(hostile, (void *)(uintptr_t)kills);
		until = now_ms() + 10000;
		while (!sh->hostile_ready && !sh->good_done) {
			REQUIRE(now_ms() < until, "hostile client not ready");
			sleep_us(100);
		}
		sleep_us(1000 + (unsigned)(xorshift(&rnd) % 20000));
		kill_reap(h);
		kills++;
		REQUIRE(dmn_alive(&d), "sheafd died");
	}
	reap_ok(pub, 60000, "good publisher");
	reap_ok(sub, 60000, "good subscriber");
	printf("  %u hostile clients killed, %llu scribbles; good: %llu messages, %llu bad\n",
	       kills, (unsigned long long)sh->rounds, (unsigned long long)sh->got,
	       (unsigned long long)sh->bad);
	REQUIRE(dmn_alive(&d), "sheafd died");
	REQUIRE(sh->got == GOOD_MSGS && sh->bad == 0, "the good topic was spoiled: %llu of %u, "
		"%llu changed under the subscriber", (unsigned long long)sh->got, GOOD_MSGS,
		(unsigned long long)sh->bad);
	REQUIRE(kills >= 20, "too few hostile rounds: %u", kills);
	REQUIRE(sheaf_topic_stats(tg, &ts) == 0 && ts.bad == 0,
		"%llu of the good topic's frees refused: objects freed under it",
		(unsigned long long)ts.bad);
	REQUIRE(sheaf_topic_destroy(tg) == 0, "destroy good");
	REQUIRE(cache_stats_of(cg, -1).in_use == 0, "%llu good objects left in use",
		(unsigned long long)cache_stats_of(cg, -1).in_use);
	sheaf_topic_close(tb);
	sheaf_disconnect(parent_pool);
	parent_pool = NULL;
	munmap(sh, sizeof(*sh));
	dmn_end(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("topic_hostile");

	require_binaries("test_topic_hostile");
	ADD_ALONE(s, test_scribbler, 300);
	return run_suite(s);
}
