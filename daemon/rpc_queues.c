/*
 * rpc_queues.c - sheafd's handlers for the shared queues (shm/queue.h,
 * shm/engine/queue.c): QueueCreate, QueueDestroy, QueueList, and the
 * queues' numbers that Stats reports.  Called through rpc.c's table of
 * request kinds only.
 */
#include <errno.h>
#include "log.h"
#include "rpc_handlers.h"
#include "shm/queue.h"

/* Queue @id's descriptor and numbers (its shared words read as untrusted,
 * queue_read_stats). */
static Sheaf__V1__QueueInfo *queue_info(struct daemon *d, struct arena *a, uint32_t id)
{
	const struct shm_queue *qd = &d->pool.queues[id];
	Sheaf__V1__QueueInfo *qi = ARENA_NEW(a, Sheaf__V1__QueueInfo, SHEAF__V1__QUEUE_INFO__INIT);
	struct queue_ref q;
	struct queue_stats st;

	if (qi == NULL)
		return NULL;
	q = queue_ref_of(&d->pool, qd);
	queue_read_stats(&q, &st);
	qi->id = id;
	qi->name = arena_strdup(a, qd->name);
	qi->capacity = qd->capacity;
	qi->generation = at_load_relaxed(&qd->generation);
	qi->depth = st.depth;
	qi->enqueued = st.enqueued;
	qi->dequeued = st.dequeued;
	qi->dequeue_waits = st.deq_waits;
	qi->enqueue_waits = st.enq_waits;
	qi->dropped = st.dropped;
	qi->created_at = qd->created_at;
	return qi->name != NULL ? qi : NULL;
}

/* Every LIVE queue into *@out (arena array), their count in *@n: 0 or -1. */
int rpc_queue_infos(struct daemon *d, struct arena *a, Sheaf__V1__QueueInfo ***out, size_t *n)
{
	*n = 0;
	if ((*out = arena_alloc(a, SHEAF_MAX_QUEUES * sizeof(void *))) == NULL)
		return -1;
	for (uint32_t i = 0; i < SHEAF_MAX_QUEUES; i++) {
		if (at_load_acquire(&d->pool.queues[i].state) != QUEUE_LIVE)
			continue;
		if (((*out)[(*n)++] = queue_info(d, a, i)) == NULL)
			return -1;
	}
	return 0;
}

void rpc_queue_create(struct daemon *d, const struct rpc_call *call, struct reply *rp)
{
	const Sheaf__V1__QueueCreateRequest *rq = RPC_BODY(call, Sheaf__V1__QueueCreateRequest);
	Sheaf__V1__QueueCreateResponse *cr;
	char err[160];
	int id = engine_queue_create(&d->engine, rq->name, rq->capacity, rq->flags, err,
				     sizeof(err));

	if (id < 0) {
		rpc_fail(rp, rpc_status(id), "%s", err);
		return;
	}
	log_info("queue '%s' created: id %d, capacity %u", rq->name, id,
		 d->pool.queues[id].capacity);
	cr = ARENA_NEW(&rp->a, Sheaf__V1__QueueCreateResponse, SHEAF__V1__QUEUE_CREATE_RESPONSE__INIT);
	if (cr == NULL || (cr->queue = queue_info(d, &rp->a, (uint32_t)id)) == NULL) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_QUEUE_CREATE;
	rp->r.queue_create = cr;
}

void rpc_queue_destroy(struct daemon *d, const struct rpc_call *call, struct reply *rp)
{
	const Sheaf__V1__QueueDestroyRequest *rq = RPC_BODY(call, Sheaf__V1__QueueDestroyRequest);
	char err[160];
	int id = pool_queue_find(&d->pool, rq->name), rc;

	if (id < 0) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_NOT_FOUND, "no queue named '%s'", rq->name);
		return;
	}
	rc = engine_queue_destroy(&d->engine, (uint32_t)id, err, sizeof(err));
	if (rc != 0) {
		rpc_fail(rp, rpc_status(rc), "%s", err);
		return;
	}
	log_info("queue '%s' destroyed", rq->name);
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_QUEUE_DESTROY;
	rp->r.queue_destroy = ARENA_NEW(&rp->a, Sheaf__V1__QueueDestroyResponse,
					SHEAF__V1__QUEUE_DESTROY_RESPONSE__INIT);
	if (rp->r.queue_destroy == NULL)
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
}

void rpc_queue_list(struct daemon *d, const struct rpc_call *call, struct reply *rp)
{
	Sheaf__V1__QueueListResponse *lr = ARENA_NEW(&rp->a, Sheaf__V1__QueueListResponse,
						     SHEAF__V1__QUEUE_LIST_RESPONSE__INIT);

	(void)call;
	if (lr == NULL || rpc_queue_infos(d, &rp->a, &lr->queues, &lr->n_queues) != 0) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_QUEUE_LIST;
	rp->r.queue_list = lr;
}
