/*
 * queue.h - shared queues of pool objects: a bounded lock-free MPMC ring of
 * object references in client-writable memory (struct shm_queue_ctl, its
 * slots after it), with futex waits for an empty or a full queue.  The
 * descriptor (name, capacity, where the ring lives) is engine-owned
 * (struct shm_queue, META); the engine creates and destroys them
 * (engine/queue.c).
 *
 * Who may call: any process of the pool holding a struct queue_ref
 * (clients: client/queue.c; sheafd reads the counters through
 * queue_read_stats, which treats every word as untrusted);
 * queue_params_check and pool_queue_find any process.  No locks.  Every
 * loop is bounded (queue_steps_max), whatever the shared words hold.
 *
 * The algorithm is the barn ring's slot-first one (docs/design.md, "Shared
 * queues"): the slot CAS is the only step that matters, tail and head are
 * hints anyone advances, so a process killed at any instruction never
 * wedges the queue and an object is taken from a slot at most once.
 */
#ifndef SHEAF_SHM_QUEUE_H
#define SHEAF_SHM_QUEUE_H

#include <stdint.h>
#include "pool.h"

#define QUEUE_CAP_MIN   2u
#define QUEUE_CAP_MAX   (1u << 20)

/* Creation flags (struct shm_queue.flags; sheaf.h SHEAF_QUEUE_SP/SC).
 * SP: one producer at a time, whose slot and tail writes are plain
 * stores; SC: the same for the consumer, its slot and head (design.md,
 * "Shared queues": single producer or consumer). */
#define QUEUE_F_SP      0x1u
#define QUEUE_F_SC      0x2u
#define QUEUE_F_ALL     (QUEUE_F_SP | QUEUE_F_SC)

/* One process's view of one queue, from the descriptor (trusted values). */
struct queue_ref {
	struct shm_queue_ctl *ctl;
	_Atomic uint64_t *slots;
	uint64_t mask;               /* capacity - 1 */
	uint32_t size;               /* capacity */
	uint32_t flags;              /* QUEUE_F_* */
	const struct shm_pool *p;
};

/* Bytes of storage (control block and slots) of a queue of @capacity. */
static inline uint64_t queue_bytes(uint32_t capacity)
{
	return QUEUE_SLOTS_OFF + (uint64_t)capacity * 8u;
}

static inline struct queue_ref queue_ref_of(const struct shm_pool *p,
					    const struct shm_queue *qd)
{
	struct queue_ref q;

	q.ctl = (struct shm_queue_ctl *)(p->base + qd->off);
	q.slots = (_Atomic uint64_t *)(p->base + qd->off + QUEUE_SLOTS_OFF);
	q.size = qd->capacity;
	q.mask = qd->capacity - 1u;
	q.flags = qd->flags & QUEUE_F_ALL;
	q.p = p;
	return q;
}

/*
 * The checks of an object named in a queue: in a frame a LIVE cache owns,
 * on an object boundary.  Inline, on every enqueue and dequeue: one load of
 * the frame owner map and one line of the cache's (read-shared, META), and
 * a mask for a power-of-two object size (else a 32-bit remainder).  The
 * bulk calls (client/queue.c) check the frame once for a run of objects in
 * it (queue_frame_cache), and every object's boundary (queue_on_object).
 */

/* The LIVE cache that owns the frame of data offset @rel (< data_len),
 * or NULL. */
static inline const struct shm_cache *queue_frame_cache(const struct shm_pool *p,
							uint64_t rel)
{
	const struct shm_cache *c;
	uint32_t owner = at_load_acquire(&p->frame_owner[rel >> SLAB_SHIFT]);

	if (unlikely(owner >= p->max_caches))
		return NULL;
	c = &p->caches[owner];
	if (unlikely(at_load_acquire((_Atomic uint32_t *)&c->state) != CACHE_LIVE))
		return NULL;
	return c;
}

/* A cache's geometry, as the boundary test wants it (from META, trusted). */
struct queue_geom {
	uint32_t size;               /* obj_size; 0: the cache is refused */
	uint32_t mask;               /* size - 1 for a power of two, else 0 */
	uint32_t bytes;              /* slab_bytes */
	uint32_t flags;              /* the cache's flags */
};

static inline struct queue_geom queue_geom_of(const struct shm_cache *c)
{
	struct queue_geom g;

	g.size = c->obj_size;
	g.mask = g.size != 0 && (g.size & (g.size - 1u)) == 0 ? g.size - 1u : 0;
	g.bytes = g.size != 0 ? c->slab_bytes : 0;      /* size 0: nothing passes */
	g.flags = c->flags;
	return g;
}

/* Data offset @rel, in a frame of the cache of @g, is on an object of it. */
static inline int queue_on_object(const struct queue_geom *g, uint64_t rel)
{
	uint32_t in = (uint32_t)(rel & (SLAB_SIZE - 1u));

	if (unlikely(in >= g->bytes))
		return 0;
	return g->mask != 0 || g->size == 1 ? (in & g->mask) == 0 : in % g->size == 0;
}

/* Data offset @rel is inside the data (@data_len bytes, the pool's), and
 * its slot value fits 32 bits. */
static inline int queue_rel_ok(uint64_t data_len, uint64_t rel)
{
	return rel < data_len && (rel >> 3) < UINT32_MAX - 1u;
}

/* The slot value of data offset @rel. */
static inline uint32_t queue_value_at(uint64_t rel)
{
	return (uint32_t)(rel >> 3) + 1u;
}

/* The data offset of slot value @v (not 0). */
static inline uint64_t queue_rel_at(uint32_t v)
{
	return (uint64_t)(v - 1u) << 3;
}

/*
 * An object's slot value ((off - off_data) / 8 + 1), after checking that
 * @off is an object of a live cache of the pool; *@cflags gets that
 * cache's flags (the caller skips the owner hooks of plain caches).  0
 * when it is not (the caller refuses it).
 */
static inline uint32_t queue_value_flags(const struct shm_pool *p, uint64_t off,
					 uint32_t *cflags)
{
	uint64_t rel = off - p->data_off;
	const struct shm_cache *c;
	struct queue_geom g;

	if (unlikely(!queue_rel_ok(p->data_len, rel)) || (c = queue_frame_cache(p, rel)) == NULL)
		return 0;
	g = queue_geom_of(c);
	if (unlikely(!queue_on_object(&g, rel)))
		return 0;
	*cflags = g.flags;
	return queue_value_at(rel);
}

/* Enqueue slot values @v[0..n): the number enqueued (fewer when the queue
 * fills). */
uint32_t queue_put(const struct queue_ref *q, const uint32_t *v, uint32_t n);
/* Dequeue up to @n values into @v: the number taken (0: empty).  With a
 * queue record @rec (the calling thread's lane's, its op QREC_DEQ and its
 * n where this call's values start: @n <= QREC_MAX - rec->n), each value
 * is staged in @rec before its slot's CAS and counted after it (see
 * "queue records" below); NULL: none. */
uint32_t queue_get(const struct queue_ref *q, uint32_t *v, uint32_t n, struct shm_qrec *rec);

/*
 * Queue records (layout.h, struct shm_qrec; one per lane).  An operation
 * on objects of an owned cache changes two things, the slot and the
 * object's owner tag (shm/owner.h), and a death between them would leave
 * an object tagged QUEUED that no slot holds.  So the thread first writes
 * its lane's record, and the dead-client repair (engine/owner.c,
 * owner_queue_reclaim) completes or undoes the operation from the record,
 * the slots and the tags:
 *   enqueue   vals[0, n) = the objects, n, then op = QREC_ENQ (release;
 *             before their QUEUED tags); the puts; each object not put
 *             tagged back; op = QREC_NONE.
 *   dequeue   op = QREC_DEQ with n = 0; for each slot: vals[n] = its value
 *             (before the slot CAS: the CAS's release publishes it), then
 *             n + 1 once the CAS took it; vals[n] = 0 when the call stops;
 *             the objects tagged the dequeuer's (owner_on_dequeue); then
 *             op = QREC_NONE.
 * Plain caches' enqueues write no record; dequeues do (a slot's object is
 * known only once loaded): two stores to the thread's own line per
 * object, five per call.
 */

#ifdef SHEAF_TEST_HOOKS
/*
 * Test-only stop points, compiled only with -DSHEAF_TEST_HOOKS (the copies
 * of shm/queue.o and client/queue.o in libsheaf-test.a; release builds
 * have none): when non-NULL, called at each step of an enqueue and a
 * dequeue (enum queue_step), so a crash test can stop a process there as
 * if it died.
 */
extern void (*queue_stop_hook)(int step);
#define QUEUE_STOP(step)                                           \
	do {                                                       \
		if (unlikely(queue_stop_hook != NULL))             \
			queue_stop_hook(step);                     \
	} while (0)
#else
#define QUEUE_STOP(step) do { } while (0)
#endif
enum queue_step {
	QS_ENQ_RECORD = 1,  /* enqueue: record written, tags not yet QUEUED */
	QS_ENQ_TAGGED,      /* tags QUEUED, no slot CAS yet */
	QS_ENQ_SLOT,        /* after one slot CAS (each object) */
	QS_ENQ_PUT,         /* the puts done, failed ones not yet tagged back */
	QS_ENQ_UNTAGGED,    /* tagged back, record not yet cleared */
	QS_ENQ_DONE,        /* record cleared */
	QS_DEQ_RECORD,      /* dequeue: record opened */
	QS_DEQ_STAGED,      /* a value staged, its slot CAS not done */
	QS_DEQ_SLOT,        /* after a slot CAS that took it, not yet counted */
	QS_DEQ_COUNTED,     /* counted in the record */
	QS_DEQ_GOT,         /* the gets done, tags not yet the dequeuer's */
	QS_DEQ_TAGGED,      /* tagged, record not yet cleared */
	QS_DEQ_DONE,        /* record cleared */
	QS_NR
};

/* Wake sleepers after a put (consumers) or a get (producers). */
void queue_wake_consumers(const struct queue_ref *q);
void queue_wake_producers(const struct queue_ref *q);
/* Sleep (at most @slice_ns) until a put (@consumer) or a get may have
 * changed the queue, unless @retry, called after announcing the sleep,
 * finds work; returns what @retry returned, or 0 after the sleep. */
typedef uint32_t (*queue_retry_fn)(const struct queue_ref *q, void *arg);
uint32_t queue_sleep(const struct queue_ref *q, int consumer, int64_t slice_ns,
		     queue_retry_fn retry, void *arg);
/* A waker of an SP (producer side) or SC (consumer side) queue stored its
 * slot with a plain store; before it loads the sleep flag, either a full
 * fence or (this process registered for membarrier GLOBAL_EXPEDITED, which
 * every sleeper of such a queue issues) nothing.  Per process:
 * queue_mb_registered() registers once (1: registered); a fork() child
 * decides anew (queue_mb_forget from the atfork handler). */
int queue_mb_registered(void);
void queue_mb_forget(void);
static inline int queue_side_plain(const struct queue_ref *q, int consumer)
{
	return (q->flags & (consumer ? QUEUE_F_SC : QUEUE_F_SP)) != 0;
}

/* The numbers of a queue, every word read once and bounded (untrusted). */
struct queue_stats {
	uint64_t enqueued, dequeued; /* tail, head (positions: counts) */
	uint64_t depth;              /* tail - head, clamped to [0, capacity] */
	uint64_t deq_waits, enq_waits, dropped;
};
void queue_read_stats(const struct queue_ref *q, struct queue_stats *st);

/* Check a create request alone (pure: libsheaf checks before it asks,
 * engine_queue_create again): 0 or -EINVAL with @err. */
int queue_params_check(const char *name, uint32_t capacity, uint32_t flags,
		       char *err, size_t errlen);

/* Descriptor of live queue @name, or -ENOENT.  Safe from any process. */
int pool_queue_find(const struct shm_pool *p, const char *name);

#endif
