/*
 * hostile_client.c - the hostile client of test_hostile
 * (tests/trust/test_hostile.c, whose head comment says what a round does
 * and what the hostile client must not write): its scribblers (random
 * bytes, rings and the depot, owner entries, sheaves, lanes, barns and
 * doorbells), the helpers that find and hold its own sheaves and keep its
 * writes off the good cache, its legitimate use of its caches, and
 * hostile_main.  Linked into test_hostile only (Makefile, HOSTILE_OBJ).
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "client/internal.h"
#include "client/sheaf.h"
#include "shm/engine/engine.h"
#include "shm/pool.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_proc.h"
#include "tests/trust/hostile_client.h"

#define BURST_MIN    150u          /* scribbles per round: 150..405 */

static uint64_t rnd(struct hostile *x)
{
	return xorshift(&x->rng);
}

/* A value a hostile client would try: a boundary, a small number, junk. */
static uint64_t nasty(struct hostile *x)
{
	static const uint64_t v[] = { 0, 1, 2, 3, 0x7f, 0xff, 0xffff, 0x10000, 0x7fffffff,
				      0x80000000, 0xfffffffe, 0xffffffff, 0x100000000ull,
				      0xffffffffffffffffull, 0x8000000000000000ull };
	uint64_t r = rnd(x);

	switch (r & 3) {
	case 0: return v[(r >> 8) % (sizeof(v) / sizeof(v[0]))];
	case 1: return (r >> 8) & 0x3ff;
	default: return rnd(x);
	}
}

/* One of the hostile client's caches (0 or 1): its ring (full or empty) on
 * a random node. */
static uint32_t own_ring(struct hostile *x)
{
	uint64_t r = rnd(x);
	uint32_t c = x->h[r & 1]->id, n = (uint32_t)(r >> 1) % x->sp->nodes;

	return r & 4 ? ring_full_id(c, n, x->sp->nodes) : ring_empty_id(c, n, x->sp->nodes);
}

static int is_own_ring(struct hostile *x, uint32_t rid)
{
	uint32_t nodes = x->sp->nodes;

	if (rid < RING_FIRST_BARN || rid >= pool_ring_total(x->sp))
		return 0;
	rid = ring_cache_of(rid, nodes);
	return rid == x->h[0]->id || rid == x->h[1]->id;
}

/*
 * Whether sheaf @s is the hostile client's to spoil: held by it or in one
 * of its rings, and naming one of its caches.  *@o: the owner entry this
 * was decided on, read once: a write to the entry must be a CAS from that
 * very value.  Read again later, it may name a good sheaf by then (a
 * preempted hostile client: the engine took the sheaf from its ring,
 * flushed it, refilled it for the good cache and put it into the good
 * barn meanwhile), and a CAS from the new value took the good client's
 * full sheaf out of every place the walk counts (test_hostile under load:
 * "the good cache has 170 objects in use by the walk").
 */
static int own_sheaf(struct hostile *x, uint32_t s, uint32_t *o)
{
	uint16_t c;

	*o = at_load_acquire(&x->sp->owners[s]);
	if (*o != x->me && !(OWNER_IS_RING(*o) && is_own_ring(x, OWNER_RING_ID(*o))))
		return 0;
	/* Acquire above: the field as of that owner (or later). */
	c = at_load_relaxed((_Atomic uint16_t *)&pool_sheaf(x->sp, s)->cache);
	return c == x->h[0]->id || c == x->h[1]->id;
}

/* A sheaf of its own (random search), or SHEAF_ID_NONE; *@o as own_sheaf. */
static uint32_t find_own_sheaf(struct hostile *x, uint32_t *o)
{
	uint32_t n = x->sp->sheaf_count, s = (uint32_t)rnd(x) & (n - 1);

	for (uint32_t k = 0; k < 2048; k++, s = (s + 1) & (n - 1))
		if (own_sheaf(x, s, o))
			return s;
	return SHEAF_ID_NONE;
}

/*
 * A sheaf of its own to write (find_own_sheaf), held for the write: one in
 * its rings is first taken by CAS of its owner entry (ring -> itself), as a
 * consumer would, so that the engine cannot pass it on (flush it to the
 * depot, refill it for the good cache) between the choice and the write: a
 * write that landed on a sheaf the good client had just been given (its
 * capacity, which the inline free path trusts) made that client push past
 * the sheaf's end, into the next sheaf's header.  With @ring_only, only a
 * sheaf of its rings: not one its own libsheaf is using, which would push
 * past a scribbled capacity into the next sheaf (maybe the good client's,
 * whose capacity that overwrote: the good client then pushed past its own
 * sheaf's end; 'sheaf 361: size 25088 > capacity 955014528' were two good
 * object offsets).  *@was: the owner entry to put back (release_sheaf)
 * once written.  SHEAF_ID_NONE if none.
 */
static uint32_t hold_own_sheaf(struct hostile *x, uint32_t *was, int ring_only)
{
	uint32_t s = find_own_sheaf(x, was), o;

	if (s == SHEAF_ID_NONE)
		return s;
	if (ring_only && *was == x->me)
		return SHEAF_ID_NONE;
	/* From the value own_sheaf decided on (see there). */
	o = *was;
	if (*was != x->me && !at_cas_relaxed(&x->sp->owners[s], &o, x->me))
		return SHEAF_ID_NONE;          /* taken meanwhile: not its own now */
	/* Its cache field, which only it may change while it holds it. */
	if (!own_sheaf(x, s, &o)) {
		o = x->me;
		at_cas_relaxed(&x->sp->owners[s], &o, *was);
		return SHEAF_ID_NONE;
	}
	return s;
}

/* Put back the owner entry hold_own_sheaf changed (the sheaf may now be
 * marked as in a ring without a slot: a spoil of its own ring). */
static void release_sheaf(struct hostile *x, uint32_t s, uint32_t was)
{
	uint32_t me = x->me;

	if (was != x->me)
		at_cas_relaxed(&x->sp->owners[s], &me, was);
}

/* One of its lanes (client == its id), or NULL. */
static struct shm_lane *own_lane(struct hostile *x)
{
	uint32_t n = pool_lanes_used(x->sp), l = n ? (uint32_t)rnd(x) % n : 0;

	for (uint32_t k = 0; k < n; k++, l = (l + 1) % n)
		if (at_load_relaxed(&x->sp->lanes[l].client) == x->me)
			return &x->sp->lanes[l];
	return NULL;
}

static void write_bytes(struct hostile *x, void *base, size_t len)
{
	size_t off = rnd(x) % len, n = 1 + rnd(x) % 64;
	uint64_t v = nasty(x);

	if (n > len - off)
		n = len - off;
	for (size_t i = 0; i < n; i++) {
		if ((i & 7) == 0)
			v = rnd(x) & 1 ? nasty(x) : v;
		__atomic_store_n((uint8_t *)base + off + i, (uint8_t)(v >> (8 * (i & 7))),
				 __ATOMIC_RELAXED);
	}
}

/* A value that would name the good cache in a sheaf's cache field, or the
 * good client in a lane's client field, is out of this test's scope (see
 * test_hostile.c's head): changed before it is written.  Never written and
 * undone after: a kill between the two left a sheaf of its own naming the
 * good cache, which a repair then put into the rcu ring as a deferred
 * sheaf of the good cache (test_hostile: "the good cache fails the
 * checker: sheaf 2802: size 35840 > capacity 0"). */
static void fix_sheaf(struct hostile *x, void *copy)
{
	struct shm_sheaf *sh = copy;

	if (sh->cache == x->good)
		sh->cache = (uint16_t)x->h[0]->id;
}

static void fix_lane(struct hostile *x, void *copy)
{
	struct shm_lane *l = copy;

	if (at_load_relaxed(&l->client) == x->good_client)
		at_store_relaxed(&l->client, x->me);
}

static uint32_t lane_client_value(struct hostile *x, uint32_t v)
{
	return v == x->good_client ? x->me : v;
}

/* write_bytes over @len bytes at @base (a sheaf header or a lane, at most
 * HEADER_COPY_MAX bytes), built in a copy that @fix then corrects; only
 * the bytes that changed in the copy are stored. */
#define HEADER_COPY_MAX 256
static void write_bytes_fixed(struct hostile *x, void *base, size_t len,
			      void (*fix)(struct hostile *, void *))
{
	_Alignas(64) unsigned char was[HEADER_COPY_MAX], now[HEADER_COPY_MAX];

	REQUIRE(len <= HEADER_COPY_MAX, "write_bytes_fixed: %zu bytes", len);
	for (size_t i = 0; i < len; i++)
		was[i] = now[i] = __atomic_load_n((uint8_t *)base + i, __ATOMIC_RELAXED);
	write_bytes(x, now, len);
	fix(x, now);
	for (size_t i = 0; i < len; i++)
		if (now[i] != was[i])
			__atomic_store_n((uint8_t *)base + i, now[i], __ATOMIC_RELAXED);
}

/* Random bytes over a random range of what it may spoil. */
static void scribble_random(struct hostile *x)
{
	struct shm_pool *p = x->sp;
	uint32_t s;
	struct shm_lane *l;

	switch (rnd(x) % 5) {
	case 0:
		write_bytes(x, pool_ring(p, own_ring(x)), ring_bytes(p->sheaf_count));
		break;
	case 1: {
		uint32_t c = x->h[rnd(x) & 1]->id;

		write_bytes(x, pool_barn(p, c, (uint32_t)rnd(x) % p->nodes), sizeof(struct shm_barn));
		break;
	}
	case 2:
		if ((l = own_lane(x)) != NULL)
			write_bytes_fixed(x, l, sizeof(*l), fix_lane);
		break;
	case 3: {
		uint32_t was;

		if ((s = hold_own_sheaf(x, &was, 1)) != SHEAF_ID_NONE) {
			/* The header (the cache field's line), or objs[]. */
			if (rnd(x) & 1)
				write_bytes_fixed(x, pool_sheaf(p, s), offsetof(struct shm_sheaf, objs),
						  fix_sheaf);
			else
				write_bytes(x, pool_sheaf(p, s)->objs, sizeof(pool_sheaf(p, s)->objs));
			release_sheaf(x, s, was);
		}
		break;
	}
	default:
		write_bytes(x, &p->node[rnd(x) % p->nodes], sizeof(struct shm_node));
		break;
	}
}

/* A ring header field, position or slot word of one of its rings or of
 * the depot (shared by every cache: spoiling it may starve the good cache,
 * lose empty sheaves, never hand out a sheaf twice: the owner table
 * decides, by CAS). */
static void scribble_ring(struct hostile *x)
{
	struct shm_pool *p = x->sp;
	uint64_t r = rnd(x);
	struct shm_ring *ring = pool_ring(p, (r & 0xf) == 0 ? RING_DEPOT : own_ring(x));
	uint32_t v = (uint32_t)nasty(x);

	switch ((r >> 4) % 8) {
	case 0: ring->size = v; break;
	case 1: ring->mask = v; break;
	case 2: ring->id = v; break;
	case 3: ring->nsheaves = v; break;
	case 4: at_store_relaxed(&ring->tail, rnd(x) & 1 ? v : at_load_relaxed(&ring->tail) + (v & 7)); break;
	case 5: at_store_relaxed(&ring->head, rnd(x) & 1 ? v : at_load_relaxed(&ring->head) + (v & 7)); break;
	default: {
		/* A slot word: junk, or one that looks full for this lap and
		 * names any sheaf (the owner table decides, not the slot). */
		uint32_t i = (uint32_t)rnd(x) & (p->sheaf_count - 1);
		uint32_t t = at_load_relaxed(&ring->tail);
		uint64_t seq = rnd(x) & 1 ? (uint64_t)((t & ~(p->sheaf_count - 1)) + 1) : rnd(x) >> 32;
		uint32_t id = rnd(x) & 1 ? (uint32_t)rnd(x) & (p->sheaf_count - 1) : v;

		at_store_relaxed(&ring->slots[i], seq << 32 | id);
		break;
	}
	}
}

/* An owner entry of one of its sheaves: by CAS from what it read. */
static void scribble_owner(struct hostile *x)
{
	struct shm_pool *p = x->sp;
	uint32_t o, v, s = find_own_sheaf(x, &o);

	/*
	 * Not one its libsheaf holds (its main, spare or stash): moved away
	 * from it (to its ring, the depot, nobody), the engine may pass it on
	 * (a spoiled ring's rebuild claims what the ring owns, the depot's
	 * what nobody owns) to the good cache while its libsheaf still pops,
	 * pushes and at last puts it (ring_put's owner store), into its own
	 * barn: a good full sheaf in a ring of h0, out of the good walk.
	 * That is a hostile client writing a good sheaf, which this test
	 * leaves out (test_hostile.c's head).
	 */
	if (s == SHEAF_ID_NONE || o == x->me)
		return;
	switch (rnd(x) % 8) {
	case 0: v = OWNER_RING(own_ring(x)); break;
	case 1: v = OWNER_RING(RING_DEPOT); break;
	case 2: v = x->me; break;
	case 3: v = OWNER_ENGINE; break;
	case 4: v = OWNER_NONE; break;
	case 5: v = OWNER_RING(0x7ffffff0u + (uint32_t)(rnd(x) & 15)); break;
	default: v = (uint32_t)nasty(x); break;
	}
	/* Another client or another cache's ring: not its to name. */
	if ((!OWNER_IS_RING(v) && v < p->max_clients && v != x->me) ||
	    (OWNER_IS_RING(v) && OWNER_RING_ID(v) != RING_DEPOT &&
	     OWNER_RING_ID(v) < pool_ring_total(p) && !is_own_ring(x, OWNER_RING_ID(v))))
		v = OWNER_NONE;
	at_cas_relaxed(&p->owners[s], &o, v);
}

/* A sheaf's word, capacity, cache, node, or objs[] entries. */
static void scribble_sheaf(struct hostile *x)
{
	struct shm_pool *p = x->sp;
	uint32_t was, s = hold_own_sheaf(x, &was, 0);
	struct shm_sheaf *sh;
	uint64_t r = rnd(x);

	if (s == SHEAF_ID_NONE)
		return;
	if (r % 6 == 1 && was == x->me)
		return;         /* its capacity: not of a sheaf its libsheaf uses (above) */
	sh = pool_sheaf(p, s);
	switch (r % 6) {
	case 0: at_store_relaxed(&sh->word, rnd(x) & 1 ? nasty(x) :
				 (at_load_relaxed(&sh->word) & ~SHEAF_WORD_SIZE) | (nasty(x) & 0x1ff));
		break;
	case 1: sh->capacity = (uint32_t)nasty(x); break;
	case 2: {
		uint16_t v = (uint16_t)(rnd(x) & 1 ? x->h[rnd(x) & 1]->id : 64 + (nasty(x) & 0xff));

		sh->cache = v == x->good ? (uint16_t)x->h[0]->id : v;
		break;
	}
	case 3: sh->node = (uint8_t)nasty(x); break;
	default: {
		/* Object offsets: junk, into the data region anywhere (any
		 * cache's frames, off boundary), or its other cache's. */
		uint32_t k = (uint32_t)(r >> 8) % SHEAF_CAP_MAX;
		uint64_t v;

		switch ((r >> 20) % 4) {
		case 0: v = nasty(x); break;
		case 1: v = p->data_off + rnd(x) % p->data_len; break;
		case 2: v = p->data_off + (rnd(x) % p->data_len & ~63ull); break;
		default: {
			unsigned c = (unsigned)(rnd(x) & 1);
			v = x->nheld[c] ? (uint64_t)((char *)x->held[c][rnd(x) % x->nheld[c]] -
						     p->base) : nasty(x);
			break;
		}
		}
		sh->objs[k] = v;
		break;
	}
	}
	release_sheaf(x, s, was);
}

/* A field of one of its lanes: header, intent, fold, in_cache, a live
 * record (its seq left odd), base or stat counters. */
static void scribble_lane(struct hostile *x)
{
	struct shm_lane *l = own_lane(x);
	uint32_t c = (uint32_t)rnd(x) % x->sp->max_caches, v = (uint32_t)nasty(x);

	if (l == NULL)
		return;
	switch (rnd(x) % 14) {
	case 0: at_store_relaxed(&l->client, rnd(x) & 1 ? LANE_FREE : lane_client_value(x, v));
		break;
	case 1: at_store_relaxed(&l->node, v); break;
	case 2: at_store_relaxed(&l->busy, v); break;
	case 3: at_store_relaxed(&l->bound, v); break;
	case 4: at_store_relaxed(&l->intent.op, rnd(x) & 1 ? (uint32_t)(rnd(x) % 3) : v); break;
	case 5: at_store_relaxed(&l->intent.ring, rnd(x) & 1 ? own_ring(x) : v); break;
	case 6: at_store_relaxed(&l->intent.sheaf, rnd(x) & 1 ? (uint32_t)rnd(x) &
				 (x->sp->sheaf_count - 1) : v); break;
	case 7: at_store_relaxed(&l->fold_cache, rnd(x) & 1 ? c + 1 : v);
		at_store_relaxed(&l->fold_alloc, nasty(x));
		at_store_relaxed(&l->fold_free, nasty(x));
		break;
	case 8: at_store_relaxed(&l->in_cache, rnd(x) & 1 ? x->h[rnd(x) & 1]->id + 1 : v); break;
	case 9: at_store_relaxed(&lane_live(x->sp, l, c)->seq, v | 1); break;    /* left odd */
	case 10: at_store_relaxed(&lane_live(x->sp, l, c)->sheaf, v);
		at_store_relaxed(&lane_live(x->sp, l, c)->word, nasty(x));
		break;
	case 11: at_store_relaxed(lane_base(x->sp, l, c), (int64_t)nasty(x)); break;
	default: at_store_relaxed(&lane_stat(x->sp, l, c)[rnd(x) % SHEAF_STAT_NR], nasty(x)); break;
	}
}

/* Its barns' counters, and the node doorbells. */
static void scribble_barn(struct hostile *x)
{
	struct shm_pool *p = x->sp;
	struct shm_barn *b = pool_barn(p, x->h[rnd(x) & 1]->id, (uint32_t)rnd(x) % p->nodes);
	struct shm_node *nd = &p->node[rnd(x) % p->nodes];
	uint32_t v = (uint32_t)nasty(x);

	switch (rnd(x) % 6) {
	case 0: at_store_relaxed(&b->waiters, v); break;
	case 1: at_store_relaxed(&b->supply, v); break;
	case 2: at_store_relaxed(&b->starved, v); break;
	case 3: at_store_relaxed(&nd->doorbell, v); break;
	case 4: at_fetch_add_relaxed(&nd->doorbell, 1); break;
	default: at_store_relaxed(&nd->sleeping, v); break;
	}
}

/* Legitimate use of its caches between scribbles (libsheaf acts on what
 * was written; the hostile client may well crash or wait here: its own
 * affair, it is killed at the end of the round anyway). */
static void hostile_use(struct hostile *x)
{
	unsigned c = (unsigned)(rnd(x) & 1);

	if (x->nheld[c] < 64 && (rnd(x) & 1)) {
		void *o = sheaf_alloc(x->h[c]);

		if (o != NULL)
			x->held[c][x->nheld[c]++] = o;
	} else if (x->nheld[c] > 0) {
		unsigned i = (unsigned)(rnd(x) % x->nheld[c]);

		(void)sheaf_free(x->h[c], x->held[c][i]);
		x->held[c][i] = x->held[c][--x->nheld[c]];
	}
}

int hostile_main(void *arg)
{
	struct hostile *x = arg;
	char one = 1;
	unsigned burst;

	x->rng = x->seed | 1;
	x->pool = child_connect(x->sock, "hostile");
	x->pool->wait_ns = 100000ll;            /* a spoiled barn: NULL at once */
	x->sp = &x->pool->shm;
	x->me = x->pool->client;
	x->good = (uint32_t)pool_cache_find(x->sp, "good");
	for (int c = 0; c < 2; c++) {
		x->h[c] = sheaf_cache_create_or_open(x->pool, c ? "h1" : "h0", c ? 256 : 64,
						     NULL, NULL);
		REQUIRE(x->h[c] != NULL, "hostile cache: %s", strerror(errno));
	}
	for (int i = 0; i < 100; i++)
		hostile_use(x);
	burst = BURST_MIN + (unsigned)(rnd(x) & 0xff);
	for (unsigned i = 0; i < burst; i++) {
		switch (rnd(x) % 8) {
		case 0: case 1: scribble_random(x); break;
		case 2: scribble_ring(x); break;
		case 3: scribble_owner(x); break;
		case 4: scribble_sheaf(x); break;
		case 5: scribble_lane(x); break;
		case 6: scribble_barn(x); break;
		default: hostile_use(x); break;
		}
		if ((i & 127) == 127)
			(void)sheaf_cache_shrink(x->h[rnd(x) & 1]);
	}
	if (write(x->done[1], &one, 1) != 1)
		return 1;
	for (;;)
		hostile_use(x);               /* until killed */
}
