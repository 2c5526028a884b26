/*
 * thread.c - per-thread state of libsheaf: the process's slots of pools
 * and of cache handles (slots_*: a pool's slot leads each thread to its
 * lane state in that pool, a handle's slot to its tcache and fast path),
 * each thread's tcaches, lanes and fast paths (with sheaf__tls_bias, which
 * leads sheaf.h's inline paths from a handle to them), and thread exit and
 * fork.
 *
 * Who may call: any file of client/ (internal.h, thread.c's block); the
 * pools are put in and taken out of their slots by pool_local.c,
 * pool_sheafd.c and pool.c, handles by cache.c.  slots_lock is taken
 * after a pool's lock (internal.h, "Lock order").
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include "shm/barn.h"
#include "shm/lanes.h"
#include "client/pool_ops.h"
#include "shm/debug.h"
#include "shm/numa.h"
#include "shm/queue.h"
#include "client/internal.h"

struct shm_sheaf sheaf_dummy;    /* size 0, capacity 0: both fast paths miss */

/* An unused fast path: an empty main sheaf, and no frame passes its test. */
#define FAST_UNUSED { .main = (struct sheaf__sheaf *)(void *)&sheaf_dummy }
/* An unused hint, as a fast path: f an unused fast path, obj NULL. */
#define HINT_UNUSED { .main = (struct sheaf__sheaf *)(void *)&slots.unused[0] }

/*
 * The cache handles, and the fast paths of a thread without a tstate:
 * sheaf.h finds a thread's entry at the handle's address plus
 * sheaf__tls_bias, here offsetof(struct slots, unused) (those entries
 * are never written: both inline paths miss on them).
 */
static struct slots {
	struct sheaf_cache handles[SHEAF_HANDLES_MAX + SHEAF_POOLS_MAX];
	struct sheaf__fast unused[SHEAF_HANDLES_MAX + SHEAF_POOLS_MAX];
} slots = { .unused = { [0 ... SHEAF_HANDLES_MAX - 1] = FAST_UNUSED,
		      /* KM_HINT_SLOT + pool slot, read by sheaf.h as a struct
		       * sheaf__km_hint: f an unused fast path, obj NULL */
		      [KM_HINT_SLOT ... KM_HINT_SLOT + SHEAF_POOLS_MAX - 1] = HINT_UNUSED } };
_Static_assert(sizeof(struct sheaf__km_hint) == sizeof(struct sheaf__fast) &&
	       offsetof(struct sheaf__km_hint, f) == offsetof(struct sheaf__fast, main),
	       "the hint fills a fast-path slot; its f where main is");

const void *slots_km_hint(uint32_t pool_slot)
{
	return &slots.handles[KM_HINT_SLOT + pool_slot];
}

/* sheaf__pool_head.released until the pool's own count is known */
static const uint64_t released_none;

#define BIAS_UNUSED offsetof(struct slots, unused)

__thread uintptr_t sheaf__tls_bias __attribute__((tls_model("initial-exec"))) = BIAS_UNUSED;
__thread struct tstate *tls_state __attribute__((tls_model("initial-exec")));

pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t numa_lock = PTHREAD_MUTEX_INITIALIZER;   /* current_node */
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;
static sheaf_pool_t *pools[SHEAF_POOLS_MAX];
uint32_t slots_live_gen[SHEAF_POOLS_MAX];
static uint32_t pool_gen;
static void thread_destructor(void *arg);

/*
 * fork(): the child has a copy of the forking thread's TLS, which points at
 * the parent's lanes and sheaves.  Drop it without returning anything (the
 * sheaves are the parent's) and mark every pool as inherited: the child's
 * calls fail with ECHILD until it connects on its own.
 */
static void fast_reset(uint32_t slot)
{
	tls_state->fast[slot] = (struct sheaf__fast)FAST_UNUSED;
}

/* The calling thread's hint in pool slot @pool_slot: none (a pool made
 * in that slot again must not find the last one's object there). */
static void hint_reset(uint32_t pool_slot)
{
	tls_state->fast[KM_HINT_SLOT + pool_slot] = (struct sheaf__fast)HINT_UNUSED;
}

static void atfork_child(void)
{
	for (uint32_t i = 0; i < SHEAF_POOLS_MAX; i++)
		if (pools[i] != NULL)
			pools[i]->forked = 1;
	if (tls_state != NULL) {
		for (uint32_t i = 0; i < SHEAF_HANDLES_MAX; i++) {
			free(tls_state->tc[i]);
			tls_state->tc[i] = NULL;
			fast_reset(i);
		}
		for (uint32_t i = 0; i < SHEAF_POOLS_MAX; i++)
			hint_reset(i);
		memset(tls_state->tp, 0, sizeof(tls_state->tp));
	}
	rcu_tls_forget();
	pthread_mutex_init(&slots_lock, NULL);
	trim_forget_fork();
	if (tls_state != NULL)
		trim_link(tls_state);
	queue_mb_forget();       /* membarrier registration is per process */
}

static void make_key(void)
{
	pthread_key_create(&exit_key, thread_destructor);
	pthread_atfork(NULL, NULL, atfork_child);
}

int slots_add_pool(sheaf_pool_t *pool)
{
	int rc = -EMFILE;

	pthread_once(&key_once, make_key);
	lock_acquire(&slots_lock, LOCK_RANK_REGISTRY);
	for (uint32_t i = 0; i < SHEAF_POOLS_MAX; i++) {
		if (pools[i] == NULL) {
			pools[i] = pool;
			pool->slot = i;
			/* before the pool is given out: sheaf.h's inline
			 * sheaf_malloc and sheaf_free_any go through it */
			pool->head.hint = slots_km_hint(i);
			pool->head.released = &released_none;
			pool->gen = ++pool_gen;
			at_store_relaxed(&slots_live_gen[i], pool->gen);
			rc = 0;
			break;
		}
	}
	lock_release(&slots_lock);
	return rc;
}

void slots_close_pool(sheaf_pool_t *pool)
{
	lock_acquire(&slots_lock, LOCK_RANK_REGISTRY);
	pool->closing = 1;
	lock_release(&slots_lock);
}

void slots_remove_pool(sheaf_pool_t *pool)
{
	lock_acquire(&slots_lock, LOCK_RANK_REGISTRY);
	pools[pool->slot] = NULL;
	at_store_relaxed(&slots_live_gen[pool->slot], 0u);
	for (uint32_t i = 0; i < SHEAF_HANDLES_MAX; i++)
		if (slots.handles[i].pool == pool)
			memset(&slots.handles[i], 0, sizeof(slots.handles[i]));
	lock_release(&slots_lock);
}

/*
 * A free handle slot, searched from the one after the last taken: a handle
 * of a destroyed or disconnected pool (pool NULL: sheaf_alloc and
 * sheaf_free refuse it with EINVAL) stays so for as long as possible before
 * its slot serves a new handle.
 */
sheaf_cache_t *slots_new_handle(sheaf_pool_t *pool, uint32_t id)
{
	static uint32_t next;       /* under slots_lock */
	sheaf_cache_t *c = NULL;

	lock_acquire(&slots_lock, LOCK_RANK_REGISTRY);
	for (uint32_t k = 0; k < SHEAF_HANDLES_MAX; k++) {
		uint32_t i = (next + k) % SHEAF_HANDLES_MAX;
		if (slots.handles[i].pool == NULL) {
			next = i + 1;
			c = &slots.handles[i];
			c->slot = i;
			c->id = id;
			c->pool = pool;
			c->sc = &pool->shm.caches[id];
			break;
		}
	}
	lock_release(&slots_lock);
	if (c == NULL)
		errno = EMFILE;
	return c;
}

/* The calling thread's tstate, made on first use (its fast paths all
 * unused); NULL when out of memory. */
static struct tstate *tstate_get(void)
{
	struct tstate *ts = tls_state;

	if (ts != NULL)
		return ts;
	pthread_once(&key_once, make_key);
	ts = aligned_alloc(_Alignof(struct tstate), sizeof(*ts));
	if (ts == NULL)
		return NULL;
	memset(ts, 0, sizeof(*ts));
	memcpy(ts->fast, slots.unused, sizeof(ts->fast));
	lock_acquire(&slots_lock, LOCK_RANK_REGISTRY);
	trim_link(ts);
	lock_release(&slots_lock);
	tls_state = ts;
	sheaf__tls_bias = (uintptr_t)ts->fast - (uintptr_t)slots.handles;
	pthread_setspecific(exit_key, ts);
	return ts;
}

/*
 * The pool index of the memory node nearest to CPU @cpu's kernel node
 * (shm/numa.h): the machine's topology is read from sysfs once per process,
 * under numa_lock (only when a thread first uses a pool), and never
 * printed about.  A pool made before kernel ids were recorded has pool
 * index = kernel id.
 */
static uint32_t numa_home(const sheaf_pool_t *pool, unsigned cpu)
{
	static struct ntopo *topo;
	static int topo_read;
	const struct shm_header *h = pool->shm.hdr;
	uint8_t ids[SHEAF_MAX_NODES];
	uint32_t n = pool->shm.nodes, home;

	if (n <= 1)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		ids[i] = h->numa_flags & SHEAF_NUMA_F_IDS ? h->kernel_node[i] : (uint8_t)i;
	lock_acquire(&numa_lock, LOCK_RANK_NUMA);
	if (!topo_read) {
		topo_read = 1;
		topo = malloc(sizeof(*topo));
		if (topo != NULL && ntopo_read(topo, NULL, NULL, 0) != 0) {
			free(topo);
			topo = NULL;
		}
	}
	home = topo != NULL ? ntopo_home_of_cpu(topo, cpu, ids, n) : 0;
	lock_release(&numa_lock);
	return home < n ? home : 0;
}

static uint32_t current_node(const sheaf_pool_t *pool)
{
	int cpu = sched_getcpu();

	if (cpu < 0)
		return 0;
	if (pool->shm.hdr->simulated)
		return (uint32_t)cpu % pool->shm.nodes;
	return numa_home(pool, (unsigned)cpu);
}

/*
 * The free fast path's test that @off (bytes into a slab frame) is an object
 * boundary of a cache of @size-byte objects, @per_slab to a frame: with
 * size = d * 2^k (d odd) and inv = d^-1 mod 2^32, rotr32(off * inv, k) is
 * off / size when size divides off, and above (2^32 - 1) / size >= per_slab
 * when it does not (Granlund and Montgomery's exact division test), so one
 * compare checks both the boundary and the slab's end.
 */
static void div_test_init(struct sheaf__fast *f, uint32_t size, uint32_t per_slab)
{
	uint32_t k = (uint32_t)__builtin_ctz(size), d = size >> k, inv = d;

	for (int i = 0; i < 5; i++)         /* Newton: 3, 6, 12, 24, 48 bits */
		inv *= 2u - d * inv;
	f->div_inv = inv;
	f->div_shift = (uint8_t)k;
	f->per_slab = per_slab;
}

static void tcache_fast_init(struct tcache *t, const sheaf_cache_t *c, uint32_t node)
{
	const struct shm_pool *p = &c->pool->shm;
	uint32_t first = node << p->node_frame_shift;

	tmain_set(t, &sheaf_dummy);
	t->f->base = p->base;
	t->f->node_data = p->base + pool_frame_off(p, first);
	t->f->node_len = (uint64_t)p->frames_per_node << SLAB_SHIFT;
	t->f->owner = (const uint16_t *)(const void *)&p->frame_owner[first];
	t->stat = lane_stat(p, t->tp->lane, c->id);
	t->f->cache_id = (uint16_t)c->id;
	div_test_init(t->f, c->sc->obj_size, c->sc->slab_bytes / c->sc->obj_size);
}

/* ---- the lanes granted to this process (internal.h, struct lane_set) ---- */

enum { LS_NEW = 0, LS_IDLE, LS_BUSY };

void lanes_init(sheaf_pool_t *pool)
{
	memset(&pool->lanes, 0, sizeof(pool->lanes));
	pthread_mutex_init(&pool->lanes.mu, NULL);
}

void lanes_fini(sheaf_pool_t *pool)
{
	free(pool->lanes.idx);
	free(pool->lanes.st);
	free(pool->lanes.known);
	pthread_mutex_destroy(&pool->lanes.mu);
}

/* Add the lanes META grants us that @ls does not know yet.  0 or -ENOMEM. */
static int lanes_rescan(sheaf_pool_t *pool, struct lane_set *ls)
{
	const struct shm_pool *p = &pool->shm;
	lane_grant_t mine = pool->client + 1;

	if (ls->known == NULL &&
	    (ls->known = calloc(p->max_lanes / 64 + 1, sizeof(*ls->known))) == NULL)
		return -ENOMEM;
	for (uint32_t l = 0, used = pool_lanes_used(p); l < used; l++) {
		if (at_load_acquire(&p->lane_grant[l]) != mine ||
		    (ls->known[l / 64] >> (l % 64) & 1))
			continue;
		if (ls->n == ls->room) {
			uint32_t room = ls->room ? 2 * ls->room : 16;
			uint32_t *idx = realloc(ls->idx, room * sizeof(*idx));
			uint8_t *st;

			if (idx == NULL)
				return -ENOMEM;
			ls->idx = idx;
			if ((st = realloc(ls->st, room)) == NULL)
				return -ENOMEM;
			ls->st = st;
			ls->room = room;
		}
		ls->known[l / 64] |= 1ull << (l % 64);
		ls->idx[ls->n] = l;
		ls->st[ls->n++] = LS_NEW;
	}
	return 0;
}

/* Which of @ls's lanes a thread on @node takes: an idle one bound to
 * @node, else a never-taken one, else any idle one; -1 when all are busy. */
static int32_t lanes_pick(const struct shm_pool *p, const struct lane_set *ls, uint32_t node)
{
	int32_t fresh = -1, other = -1;

	for (uint32_t i = 0; i < ls->n; i++) {
		if (ls->st[i] == LS_IDLE) {
			/* @bound is SHARED: a hint for the choice only. */
			if (at_load_relaxed(&p->lanes[ls->idx[i]].bound) == node + 1)
				return (int32_t)i;
			if (other < 0)
				other = (int32_t)i;
		} else if (ls->st[i] == LS_NEW && fresh < 0) {
			fresh = (int32_t)i;
		}
	}
	return fresh >= 0 ? fresh : other;
}

/*
 * A lane for a thread of ours on @node: one the engine granted us and no
 * thread of ours uses; when there is none, one request for more (the
 * engine grants by blocks) unless it said we hold our most.  NULL with
 * errno EMFILE (none for us), EKEYREVOKED, ENOMEM or the request's.
 */
static struct shm_lane *lanes_take(sheaf_pool_t *pool, uint32_t node, uint32_t *slot)
{
	struct lane_set *ls = &pool->lanes;
	struct shm_pool *p = &pool->shm;
	struct shm_lane *l;
	int32_t i;
	int first, rc = 0;

	pthread_mutex_lock(&ls->mu);
	if (ls->known == NULL)
		rc = lanes_rescan(pool, ls);
	i = rc == 0 ? lanes_pick(p, ls, node) : -1;
	if (rc == 0 && i < 0 && !ls->at_cap) {
		uint32_t held = 0, cap = 0;

		rc = pool->ops->lanes_grant(pool, ls->n, &held, &cap);
		if (rc >= 0) {
			ls->at_cap = held >= cap;
			rc = lanes_rescan(pool, ls);
			i = rc == 0 ? lanes_pick(p, ls, node) : -1;
		}
	}
	if (i < 0) {
		pthread_mutex_unlock(&ls->mu);
		errno = rc < 0 ? -rc : EMFILE;
		return NULL;
	}
	first = ls->st[i] == LS_NEW;
	ls->st[i] = LS_BUSY;
	*slot = (uint32_t)i;
	l = &p->lanes[ls->idx[i]];
	pthread_mutex_unlock(&ls->mu);
	lane_take(p, l, pool->client, node, first);
	return l;
}

/* The thread that took lane @slot of @pool's set is done with it. */
static void lanes_put(sheaf_pool_t *pool, uint32_t slot)
{
	pthread_mutex_lock(&pool->lanes.mu);
	pool->lanes.st[slot] = LS_IDLE;
	pthread_mutex_unlock(&pool->lanes.mu);
}

static struct tpool *tpool_get(struct tstate *ts, sheaf_pool_t *pool)
{
	struct tpool *tp = &ts->tp[pool->slot];

	if (tp->lane != NULL && tp->gen == pool->gen)
		return tp;
	tp->node = current_node(pool);
	hint_reset(pool->slot);      /* a pool before it had this slot */
	rcu_tls_forget();
	tp->rcu_nest = 0;
	tp->lane = lanes_take(pool, tp->node, &tp->lane_slot);
	if (tp->lane == NULL)
		return NULL;
	tp->qrec = lane_qrec(&pool->shm, tp->lane);
	tp->gen = pool->gen;
	return tp;
}

/* The calling thread's lane state in @pool, made on first use (deferred.c:
 * a reader may never have allocated).  NULL with errno ENOMEM, ECHILD,
 * EMFILE. */
struct tpool *thread_tpool(sheaf_pool_t *pool)
{
	struct tstate *ts = tstate_get();

	if (ts == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	if (pool->forked) {
		errno = ECHILD;
		return NULL;
	}
	return tpool_get(ts, pool);
}

struct tcache *tcache_get_slow(sheaf_cache_t *c)
{
	struct tstate *ts = tstate_get();
	sheaf_pool_t *pool = c->pool;
	struct tcache *t;
	struct tpool *tp;

	if (ts == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	if (pool->forked) {
		errno = ECHILD;
		return NULL;
	}
	if (!cache_handle_live(c)) {         /* its cache was destroyed */
		errno = ESTALE;
		return NULL;
	}
	t = ts->tc[c->slot];
	if (t != NULL && t->cache == c && t->gen == pool->gen)
		return t;
	if (t != NULL) {             /* a stale tcache of a destroyed pool */
		lock_acquire(&slots_lock, LOCK_RANK_REGISTRY);   /* trim.c may look */
		at_plain_store_relaxed(&ts->tc[c->slot], NULL);
		lock_release(&slots_lock);
		free(t);
		fast_reset(c->slot);
	}
	tp = tpool_get(ts, pool);
	if (tp == NULL)
		return NULL;
	t = calloc(1, sizeof(*t));
	if (t == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	t->node = tp->node;
	t->cache = c;
	t->tp = tp;
	t->stash_target = STASH_TARGET_MIN;
	/* Debug caches keep the inline paths out: every call is checked;
	 * owned caches too: every call writes the object's owner tag. */
	t->f = c->sc->flags & (SHEAF_CACHE_F_DEBUG | SHEAF_CACHE_F_OWNED) ?
	       &t->own : &ts->fast[c->slot];
	tcache_fast_init(t, c, tp->node);
	t->gen = pool->gen;
	/* Release: the trimmer (trim.c) finds it initialised. */
	at_plain_store_release(&ts->tc[c->slot], t);
	return t;
}

/* Put one sheaf the thread holds back into its node's barn. */
static void sheaf_retire(struct tcache *t, struct shm_sheaf *s)
{
	struct shm_pool *p = &t->cache->pool->shm;
	struct ring_intent *in = &t->tp->lane->intent;
	uint32_t id, node;

	if (s == NULL || s == &sheaf_dummy)
		return;
	id = sheaf_index(t, s);
	/* Read while the sheaf is this thread's: once put, another thread
	 * may take it and write its header (TSan saw barn_get_empty's store
	 * of node race a read of it after the put). */
	node = s->node;
	/* Over what the barn keeps: ask for a flush, as a free's put does
	 * (else the surplus, a large cache's memory, waits for the next
	 * doorbell). */
	if (sheaf_size(s) > 0) {
		if (barn_put_full(p, t->f->cache_id, node, id, t->cache->pool->client, in) >
		    barn_flush_limit(p, t->cache->sc, node))
			node_ring_doorbell(p, node);
	} else
		barn_put_empty(p, t->f->cache_id, node, id, t->cache->pool->client, in);
}

void tcache_flush(struct tcache *t)
{
	deferred_flush(t);
	tcache_fold(t);
	sheaf_retire(t, tmain(t));
	sheaf_retire(t, t->spare);
	while (t->nfull > 0)
		sheaf_retire(t, t->stash_full[--t->nfull]);
	while (t->nempty > 0)
		sheaf_retire(t, t->stash_empty[--t->nempty]);
	tmain_set(t, &sheaf_dummy);
	t->spare = NULL;
	for (uint32_t n = 0; n < SHEAF_MAX_NODES; n++) {
		sheaf_retire(t, t->remote[n]);
		t->remote[n] = NULL;
	}
}

int slots_pool_live(const sheaf_pool_t *pool, uint32_t gen)
{
	return pool != NULL && pools[pool->slot] == pool && pool->gen == gen;
}

/* Flush and drop every tcache of the calling thread that belongs to @pool
 * (any pool when NULL), and release the matching lanes. */
static void thread_detach(sheaf_pool_t *only)
{
	struct tstate *ts = tls_state;

	if (ts == NULL)
		return;
	lock_acquire(&slots_lock, LOCK_RANK_REGISTRY);
	for (uint32_t i = 0; i < SHEAF_HANDLES_MAX; i++) {
		struct tcache *t = ts->tc[i];
		if (t == NULL || (only != NULL && t->cache->pool != only))
			continue;
		/* A stale handle's tcache holds nothing (its cache was
		 * destroyed only once no thread held a sheaf of it). */
		if (slots_pool_live(t->cache->pool, t->gen) && tcache_enter(t) != -ESTALE) {
			tcache_flush(t);
			tcache_leave(t);
		}
		at_plain_store_relaxed(&ts->tc[i], NULL);   /* under slots_lock */
		free(t);
		fast_reset(i);
	}
	for (uint32_t i = 0; i < SHEAF_POOLS_MAX; i++) {
		struct tpool *tp = &ts->tp[i];
		if (only != NULL && i != only->slot)
			continue;
		hint_reset(i);
		if (tp->lane == NULL)
			continue;
		if (pools[i] != NULL && pools[i]->gen == tp->gen) {
			lane_release(tp->lane);    /* ends its read sections */
			lanes_put(pools[i], tp->lane_slot);
		}
		tp->lane = NULL;
		tp->rcu_nest = 0;
		rcu_tls_forget();
	}
	lock_release(&slots_lock);
}

void thread_flush_pool(sheaf_pool_t *pool)
{
	thread_detach(pool);
}

static void thread_destructor(void *arg)
{
	(void)arg;
	thread_detach(NULL);
	rcu_tls_forget();
	sheaf__tls_bias = BIAS_UNUSED;
	lock_acquire(&slots_lock, LOCK_RANK_REGISTRY);
	trim_unlink(tls_state);
	lock_release(&slots_lock);
	free(tls_state);
	tls_state = NULL;
}

void sheaf_thread_exit(void)
{
	thread_detach(NULL);
}

int sheaf_thread_set_node(sheaf_pool_t *pool, unsigned node)
{
	struct tstate *ts;
	struct tpool *tp;

	if (node >= pool->shm.nodes)
		return -EINVAL;
	thread_detach(pool);
	ts = tstate_get();
	if (ts == NULL)
		return -ENOMEM;
	tp = tpool_get(ts, pool);
	if (tp == NULL)
		return -errno;
	tp->node = node;
	at_store_relaxed(&tp->lane->node, node);
	return 0;
}
