/*
 * pubsub.c - a market-data style feed: one feed process publishes ticks on
 * a sheaf topic and three strategy processes each see every tick,
 * zero-copy: the feed allocates each tick from a sheaf cache, writes it
 * and publishes it; every strategy takes it, reads it and releases it,
 * and the last release frees it.  Built against the installed libsheaf
 * with plain `cc -O2 pubsub.c -lsheaf` (tests/deploy/test_example_pubsub.c
 * does that and runs it in `make test`).
 *
 * Usage: pubsub [SOCKET [TICKS]]   (SOCKET: sheafd's; default: its own)
 * Exit status 0 when every strategy got every tick intact, in order.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sheaf.h>

#define STRATEGIES 3
#define STOP       UINT64_MAX

struct tick {
	uint64_t seq;                /* STOP: the feed is done */
	double bid, ask;
	uint64_t check;              /* seq ^ the bits of bid */
	char symbol[32];
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

static uint64_t check_of(const struct tick *t)
{
	uint64_t b;

	memcpy(&b, &t->bid, sizeof(b));
	return t->seq ^ b;
}

static int feed(uint64_t n)
{
	sheaf_pool_t *pool = connect_or_die("feed");
	sheaf_cache_t *c = sheaf_cache_open(pool, "pubsub.tick");
	sheaf_topic_t *t = sheaf_topic_open(pool, "ticks");

	if (c == NULL || t == NULL)
		return 1;
	for (uint64_t i = 0; i <= n; i++) {
		struct tick *k = sheaf_alloc(c);

		if (k == NULL)
			return 1;
		k->seq = i < n ? i : STOP;
		k->bid = 100.0 + (double)(i % 1000) / 100.0;
		k->ask = k->bid + 0.01;
		k->check = check_of(k);
		snprintf(k->symbol, sizeof(k->symbol), "SHEAF");
		/* Every strategy gets it; blocks while one lags by the
		 * topic's capacity. */
		if (sheaf_topic_publish(t, k, -1) != 0)
			return 1;
	}
	sheaf_topic_close(t);
	sheaf_disconnect(pool);
	return 0;
}

static int strategy(int id, int ready, int out)
{
	char name[32];
	sheaf_pool_t *pool;
	sheaf_topic_t *t;
	sheaf_sub_t *s;
	uint64_t got = 0, next = 0, bad = 0;

	snprintf(name, sizeof(name), "strategy-%d", id);
	pool = connect_or_die(name);
	t = sheaf_topic_open(pool, "ticks");
	if (t == NULL || (s = sheaf_topic_subscribe(t)) == NULL)
		return 1;
	if (write(ready, "", 1) != 1)         /* joined: ticks from now on */
		return 1;
	for (;;) {
		struct sheaf_msg m;
		const struct tick *k;

		if (sheaf_topic_take(s, &m, -1) != 0)     /* sleeps while none */
			return 1;
		k = m.obj;
		if (k->seq == STOP) {
			sheaf_topic_release(s, &m);
			break;
		}
		bad += k->seq != next++ || k->check != check_of(k) || strcmp(k->symbol, "SHEAF");
		got++;
		sheaf_topic_release(s, &m);      /* the last one frees the tick */
	}
	printf("%s: %llu ticks\n", name, (unsigned long long)got);
	fflush(stdout);
	if (write(out, &got, sizeof(got)) != sizeof(got))
		return 1;
	sheaf_topic_unsubscribe(s);
	sheaf_topic_close(t);
	sheaf_disconnect(pool);
	return bad == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 0) : 100000, k, each[STRATEGIES];
	sheaf_pool_t *pool;
	sheaf_topic_t *t;
	pid_t pid[STRATEGIES + 1];
	int res[2], ready[2], status, ok = 1, nres = 0;
	char c;

	sock = argc > 1 ? argv[1] : NULL;
	pool = connect_or_die("pubsub");
	if (sheaf_cache_create(pool, "pubsub.tick", sizeof(struct tick), NULL) == NULL ||
	    (t = sheaf_topic_create(pool, "ticks", 256, 0, SHEAF_TOPIC_BLOCK)) == NULL) {
		fprintf(stderr, "pubsub: create: %s\n", strerror(errno));
		return 1;
	}
	sheaf_topic_close(t);
	sheaf_disconnect(pool);
	if (pipe(res) != 0 || pipe(ready) != 0)
		return 1;
	for (int i = 0; i < STRATEGIES; i++) {
		pid[i] = fork();
		if (pid[i] == 0)
			_exit(strategy(i + 1, ready[1], res[1]));
	}
	for (int i = 0; i < STRATEGIES; i++)      /* all joined before the first tick */
		if (read(ready[0], &c, 1) != 1)
			return 1;
	pid[STRATEGIES] = fork();
	if (pid[STRATEGIES] == 0)
		_exit(feed(n));
	close(res[1]);
	for (int i = 0; i <= STRATEGIES; i++)
		ok &= waitpid(pid[i], &status, 0) == pid[i] && WIFEXITED(status) &&
		      WEXITSTATUS(status) == 0;
	while (nres < STRATEGIES && read(res[0], &k, sizeof(k)) == sizeof(k))
		each[nres++] = k;
	for (int i = 0; i < nres; i++)
		ok &= each[i] == n;
	pool = connect_or_die("pubsub");
	t = sheaf_topic_open(pool, "ticks");
	if (t == NULL || sheaf_topic_destroy(t) != 0)
		ok = 0;
	sheaf_disconnect(pool);
	printf("pubsub: %d strategies got %llu ticks each%s\n", nres, (unsigned long long)n,
	       ok && nres == STRATEGIES ? "" : " -- FAILED");
	return ok && nres == STRATEGIES ? 0 : 1;
}
