/*
 * queue.c - libsheaf's shared queues (sheaf.h, "shared queues"): the
 * handles, create/open/destroy at the seam of pool_ops.h (pool_local.c
 * calls the engine, pool_sheafd.c sends QueueCreate/QueueDestroy to
 * sheafd), and enqueue / dequeue over shm/queue.c's ring, with futex
 * waits.
 *
 * A handle keeps a private copy of what it needs from the descriptor
 * (engine-owned, trusted) and the descriptor's generation: every operation
 * first checks that the descriptor is still LIVE with that generation
 * (one load each of a read-shared META line), else -ESTALE.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "client/internal.h"
#include "client/pool_ops.h"
#include "client/owner_handoff.h"
#include "shm/futex.h"
#include "shm/queue.h"

_Static_assert(SHEAF_QUEUE_SP == QUEUE_F_SP && SHEAF_QUEUE_SC == QUEUE_F_SC,
	       "queue flags: sheaf.h and shm/queue.h agree");
_Static_assert(SHEAF_CACHE_NAME_MAX == SHEAF_NAME_MAX - 1,
	       "name length: sheaf.h and shm/layout.h agree");

struct sheaf_queue {
	struct queue_ref ref;
	sheaf_pool_t *pool;
	struct shm_queue *qd;
	uint32_t id;
	uint32_t gen;
	char name[SHEAF_NAME_MAX];
};

/* A sleeping waiter wakes at least this often to look again (a waker
 * killed between its operation and its wake costs one slice at most). */
#define QUEUE_SLICE_NS (100ll * 1000 * 1000)

static inline int queue_live(const sheaf_queue_t *q)
{
	return at_load_acquire(&q->qd->state) == QUEUE_LIVE &&
	       at_load_relaxed(&q->qd->generation) == q->gen;
}

static sheaf_queue_t *handle_of(sheaf_pool_t *pool, uint32_t id, uint32_t gen)
{
	struct shm_queue *qd = &pool->shm.queues[id];
	sheaf_queue_t *q = calloc(1, sizeof(*q));

	if (q == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	q->pool = pool;
	q->qd = qd;
	q->id = id;
	q->gen = gen;
	q->ref = queue_ref_of(&pool->shm, qd);
	/* A plain-store side (SP/SC) wakes without a fence when this process
	 * is registered for membarrier (shm/queue.c, the sleep handshake). */
	if (q->ref.flags != 0)
		(void)queue_mb_registered();
	memcpy(q->name, qd->name, sizeof(q->name));
	q->name[SHEAF_NAME_MAX - 1] = '\0';
	if (!queue_live(q)) {        /* destroyed (and maybe reused) meanwhile */
		free(q);
		errno = ESTALE;
		return NULL;
	}
	return q;
}

sheaf_queue_t *sheaf_queue_create(sheaf_pool_t *pool, const char *name,
				  unsigned capacity, unsigned flags)
{
	char msg[160];
	uint32_t gen = 0;
	int id;

	if (pool == NULL) {
		errno = EINVAL;
		return NULL;
	}
	if (pool->forked) {
		errno = ECHILD;
		return NULL;
	}
	if (queue_params_check(name, capacity, flags, msg, sizeof(msg)) != 0) {
		errno = EINVAL;
		return NULL;
	}
	id = pool->ops->queue_create(pool, name, capacity, flags, &gen);
	if (id < 0) {
		errno = -id;
		return NULL;
	}
	return handle_of(pool, (uint32_t)id, gen);
}

sheaf_queue_t *sheaf_queue_open(sheaf_pool_t *pool, const char *name)
{
	int id;

	if (pool == NULL || name == NULL) {
		errno = EINVAL;
		return NULL;
	}
	if (pool->forked) {
		errno = ECHILD;
		return NULL;
	}
	id = pool_queue_find(&pool->shm, name);
	if (id < 0) {
		errno = ENOENT;
		return NULL;
	}
	return handle_of(pool, (uint32_t)id,
			 at_load_relaxed(&pool->shm.queues[id].generation));
}

void sheaf_queue_close(sheaf_queue_t *q)
{
	free(q);
}

int sheaf_queue_destroy(sheaf_queue_t *q)
{
	int rc;

	if (q->pool->forked)
		return -ECHILD;
	if (!queue_live(q)) {
		free(q);
		return -ESTALE;
	}
	rc = q->pool->ops->queue_destroy(q->pool, q->id, q->name);
	if (rc == 0 || rc == -ENOENT) {
		free(q);
		return rc == 0 ? 0 : -ESTALE;
	}
	return rc;
}

/*
 * The checks of a bulk call, one run of objects at a time: a frame's owner
 * is looked up once for the objects in it one after another (a batch from
 * one sheaf mostly lies in one or two frames), every object's range and
 * boundary each time (shm/queue.h).
 */
struct frame_memo {
	uint64_t frame;              /* UINT64_MAX: none yet */
	struct queue_geom g;
};

/* @rel (checked by queue_rel_ok) is an object: its frame's cache is LIVE
 * (looked up again when the frame differs from the last one) and @rel is on
 * an object boundary of it.  1, or 0. */
static inline int memo_object(const struct shm_pool *p, struct frame_memo *m, uint64_t rel)
{
	if (unlikely(rel >> SLAB_SHIFT != m->frame)) {
		const struct shm_cache *c = queue_frame_cache(p, rel);

		if (c == NULL) {
			m->frame = UINT64_MAX;
			return 0;
		}
		m->g = queue_geom_of(c);
		m->frame = rel >> SLAB_SHIFT;
	}
	return queue_on_object(&m->g, rel);
}

/* The slot values of @objs[0..n) into @v: 0, or -EINVAL (one is no
 * object of this pool).  *@cflags: the OR of their caches' flags. */
static int values_of(const sheaf_queue_t *q, void *const *objs, uint32_t *v, unsigned n,
		     uint32_t *cflags)
{
	const struct shm_pool *p = q->ref.p;
	const char *data = p->base + p->data_off;
	const uint64_t len = p->data_len;
	struct frame_memo m = { .frame = UINT64_MAX };
	uint32_t all = 0;

	for (unsigned i = 0; i < n; i++) {
		uint64_t rel = (uint64_t)((const char *)objs[i] - data);

		if (unlikely(!queue_rel_ok(len, rel) || !memo_object(p, &m, rel)))
			return -EINVAL;
		v[i] = queue_value_at(rel);
		all |= m.g.flags;
	}
	*cflags = all;
	return 0;
}

/* Dequeued values to pointers: a value that names no object (a spoiled
 * slot) is dropped and counted.  Returns the objects kept. */
static unsigned objs_of(const sheaf_queue_t *q, const uint32_t *v, void **objs, unsigned n)
{
	const struct shm_pool *p = q->ref.p;
	char *data = p->base + p->data_off;
	const uint64_t len = p->data_len;
	struct frame_memo m = { .frame = UINT64_MAX };
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++) {
		uint64_t rel = queue_rel_at(v[i]);

		if (unlikely(v[i] == 0 || !queue_rel_ok(len, rel) || !memo_object(p, &m, rel))) {
			at_fetch_add_relaxed(&q->ref.ctl->dropped, 1);
			continue;
		}
		objs[k] = data + rel;
		/* An owned cache's object becomes this process's
		 * (owner_handoff.h). */
		if (unlikely(m.g.flags & SHEAF_CACHE_F_OWNED))
			owner_on_dequeue(q->pool, objs[k]);
		k++;
	}
	return k;
}

/*
 * The calling thread's queue record in @pool (shm/queue.h, "queue
 * records"): its lane's, the lane taken on first use.  NULL when it has
 * none (no lane left, a fork() child): its operations then go without a
 * record, as before records existed (docs/design.md, 13.5).
 */
static inline struct shm_qrec *qrec_of(sheaf_pool_t *pool)
{
	struct tstate *ts = tls_state;
	struct tpool *tp;

	if (likely(ts != NULL)) {
		tp = &ts->tp[pool->slot];
		if (likely(tp->lane != NULL && tp->gen == pool->gen && !pool->forked))
			return tp->qrec;
	}
	tp = thread_tpool(pool);
	return tp != NULL ? tp->qrec : NULL;
}

/* An operation's record closes: after its tags (release: the repair
 * that reads QREC_NONE sees them). */
static inline void qrec_close(struct shm_qrec *rec)
{
	if (rec != NULL)
		at_store_release(&rec->op, QREC_NONE);
}

/* A dequeue's record opens: nothing taken yet. */
static inline struct shm_qrec *deq_open(sheaf_queue_t *q)
{
	struct shm_qrec *rec = qrec_of(q->pool);

	if (rec != NULL) {
		at_store_relaxed(&rec->n, 0);
		at_store_relaxed(&rec->vals[0], 0);     /* no value being taken */
		at_store_release(&rec->op, QREC_DEQ);
		QUEUE_STOP(QS_DEQ_RECORD);
	}
	return rec;
}

/*
 * Objects of owned caches (client/owner_handoff.h) are tagged QUEUED
 * before they go in (a producer that dies after the enqueue must not have
 * them freed under their consumer), and given back to this process when
 * they did not go in (@from on).  Before the tags, the thread's queue
 * record names them (enq_open), so that the repair of a producer killed
 * in between finds them.  Only when one of them is of an owned cache
 * (@cflags: values_of's): plain caches pay nothing.
 */
static struct shm_qrec *enq_open(sheaf_queue_t *q, void *const *objs, const uint32_t *v,
				 unsigned n, uint32_t cflags)
{
	struct shm_qrec *rec;

	if (likely(!(cflags & SHEAF_CACHE_F_OWNED)))
		return NULL;
	rec = qrec_of(q->pool);
	if (rec != NULL) {
		for (unsigned i = 0; i < n; i++)
			at_store_relaxed(&rec->vals[i], v[i]);
		at_store_relaxed(&rec->n, n);
		/* Release: the record before the QUEUED tags (the repair's
		 * claim of a tag reads it with acquire). */
		at_store_release(&rec->op, QREC_ENQ);
	}
	QUEUE_STOP(QS_ENQ_RECORD);
	for (unsigned i = 0; i < n; i++)
		owner_on_enqueue(q->pool, objs[i]);
	QUEUE_STOP(QS_ENQ_TAGGED);
	return rec;
}

/* The puts are done: objects @from on did not go in and are this
 * process's again; the record closes. */
static void enq_close(sheaf_queue_t *q, void *const *objs, unsigned from, unsigned n,
		      uint32_t cflags, struct shm_qrec *rec)
{
	if (likely(!(cflags & SHEAF_CACHE_F_OWNED)))
		return;
	QUEUE_STOP(QS_ENQ_PUT);
	for (unsigned i = from; i < n; i++)
		owner_on_dequeue(q->pool, objs[i]);
	QUEUE_STOP(QS_ENQ_UNTAGGED);
	qrec_close(rec);
	QUEUE_STOP(QS_ENQ_DONE);
}

int sheaf_enqueue(sheaf_queue_t *q, void *obj)
{
	struct shm_qrec *rec;
	uint32_t v, cflags = 0, put;

	if (unlikely(!queue_live(q)))
		return -ESTALE;
	if (unlikely(values_of(q, &obj, &v, 1, &cflags) != 0))
		return -EINVAL;
	rec = enq_open(q, &obj, &v, 1, cflags);
	put = queue_put(&q->ref, &v, 1);
	enq_close(q, &obj, put, 1, cflags, rec);
	if (put == 0)
		return -EAGAIN;
	queue_wake_consumers(&q->ref);
	return 0;
}

#define BULK_CHUNK QREC_MAX

int sheaf_enqueue_burst(sheaf_queue_t *q, void *const *objs, unsigned n)
{
	uint32_t v[BULK_CHUNK], cflags;
	unsigned done = 0;

	if (unlikely(!queue_live(q)))
		return -ESTALE;
	while (done < n) {
		unsigned k = n - done < BULK_CHUNK ? n - done : BULK_CHUNK, put;
		struct shm_qrec *rec;

		if (values_of(q, objs + done, v, k, &cflags) != 0)
			return done > 0 ? (int)done : -EINVAL;
		rec = enq_open(q, objs + done, v, k, cflags);
		put = queue_put(&q->ref, v, k);
		enq_close(q, objs + done, put, k, cflags, rec);
		done += put;
		if (put < k)
			break;
	}
	if (done > 0)
		queue_wake_consumers(&q->ref);
	return (int)done;
}

/* One dequeue of up to @n (<= BULK_CHUNK) objects into @objs, under a
 * record: the values taken, their tags, the record closed.  *@got: the
 * slots taken (spoiled values included); returns the objects kept. */
static unsigned deq_some(sheaf_queue_t *q, void **objs, unsigned n, uint32_t *got)
{
	struct shm_qrec *rec = deq_open(q);
	uint32_t v[BULK_CHUNK];
	unsigned k;

	*got = queue_get(&q->ref, v, n, rec);
	QUEUE_STOP(QS_DEQ_GOT);
	k = objs_of(q, v, objs, *got);
	QUEUE_STOP(QS_DEQ_TAGGED);
	qrec_close(rec);
	QUEUE_STOP(QS_DEQ_DONE);
	return k;
}

int sheaf_dequeue(sheaf_queue_t *q, void **obj)
{
	uint32_t got;

	if (unlikely(!queue_live(q)))
		return -ESTALE;
	/* Spoiled slots are dropped: look again (bounded by the queue). */
	for (uint32_t i = 0; i <= q->ref.size; i++) {
		if (likely(deq_some(q, obj, 1, &got) == 1)) {
			queue_wake_producers(&q->ref);
			return 0;
		}
		if (got == 0)
			return -EAGAIN;
	}
	return -EAGAIN;
}

int sheaf_dequeue_burst(sheaf_queue_t *q, void **objs, unsigned n)
{
	unsigned done = 0;

	if (unlikely(!queue_live(q)))
		return -ESTALE;
	while (done < n) {
		unsigned k = n - done < BULK_CHUNK ? n - done : BULK_CHUNK;
		uint32_t got;

		done += deq_some(q, objs + done, k, &got);
		if (got < k)
			break;
	}
	if (done > 0)
		queue_wake_producers(&q->ref);
	return (int)done;
}

/* queue_sleep's second look: one enqueue or dequeue (@rec: the
 * dequeuer's record, or NULL). */
struct retry_arg {
	uint32_t v;
	struct shm_qrec *rec;
};

static uint32_t retry_put(const struct queue_ref *r, void *arg)
{
	return queue_put(r, &((struct retry_arg *)arg)->v, 1);
}

static uint32_t retry_get(const struct queue_ref *r, void *arg)
{
	struct retry_arg *ra = arg;

	return queue_get(r, &ra->v, 1, ra->rec);
}

/* Wait (sleeping) until one retry of @ra (retry_get for a @consumer, else
 * retry_put) succeeds: 0, -ETIMEDOUT, -ESTALE. */
static int queue_wait(sheaf_queue_t *q, int consumer, int timeout_ms, struct retry_arg *ra)
{
	int64_t deadline = timeout_ms < 0 ? INT64_MAX
			   : clock_ns() + (int64_t)timeout_ms * 1000000;

	for (;;) {
		int64_t left = deadline - clock_ns();

		if (!queue_live(q))
			return -ESTALE;
		if (left <= 0)
			return -ETIMEDOUT;
		if (queue_sleep(&q->ref, consumer, left < QUEUE_SLICE_NS ? left : QUEUE_SLICE_NS,
				consumer ? retry_get : retry_put, ra) == 1)
			return 0;
		if ((consumer ? retry_get : retry_put)(&q->ref, ra) == 1)
			return 0;
	}
}

int sheaf_enqueue_wait(sheaf_queue_t *q, void *obj, int timeout_ms)
{
	struct retry_arg ra = { 0 };
	struct shm_qrec *rec;
	uint32_t cflags = 0;
	int rc = sheaf_enqueue(q, obj);

	if (rc != -EAGAIN || timeout_ms == 0)
		return rc;
	ra.v = queue_value_flags(q->ref.p, (uint64_t)((char *)obj - q->ref.p->base), &cflags);
	/* Recorded and tagged QUEUED for the whole wait (enq_open). */
	rec = enq_open(q, &obj, &ra.v, 1, cflags);
	rc = queue_wait(q, 0, timeout_ms, &ra);
	enq_close(q, &obj, rc == 0, 1, cflags, rec);
	if (rc == 0)
		queue_wake_consumers(&q->ref);
	return rc;
}

int sheaf_dequeue_wait(sheaf_queue_t *q, void **obj, int timeout_ms)
{
	struct retry_arg ra = { 0 };
	int rc;

	for (;;) {
		rc = sheaf_dequeue(q, obj);
		if (rc != -EAGAIN || timeout_ms == 0)
			return rc;
		ra.rec = deq_open(q);
		rc = queue_wait(q, 1, timeout_ms, &ra);
		if (rc != 0) {
			qrec_close(ra.rec);
			return rc;
		}
		queue_wake_producers(&q->ref);
		QUEUE_STOP(QS_DEQ_GOT);
		rc = (int)objs_of(q, &ra.v, obj, 1);
		QUEUE_STOP(QS_DEQ_TAGGED);
		qrec_close(ra.rec);
		QUEUE_STOP(QS_DEQ_DONE);
		if (rc == 1)
			return 0;
		/* a spoiled slot: dropped; wait again (timeout restarts) */
	}
}

int sheaf_queue_stats(sheaf_queue_t *q, struct sheaf_queue_stats *out)
{
	struct queue_stats st;

	if (!queue_live(q))
		return -ESTALE;
	queue_read_stats(&q->ref, &st);
	memset(out, 0, sizeof(*out));
	out->capacity = q->ref.size;
	out->depth = st.depth;
	out->enqueued = st.enqueued;
	out->dequeued = st.dequeued;
	out->dequeue_waits = st.deq_waits;
	out->enqueue_waits = st.enq_waits;
	out->dropped = st.dropped;
	return 0;
}
