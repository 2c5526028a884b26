/*
 * rpc_names.c - sheafd's handlers for the name directory (shm/names.h):
 * NameSet, NameDel, NameList.  Called through rpc.c's table of
 * request kinds only.
 */
#include <errno.h>
#include "rpc_handlers.h"
#include "shm/names.h"
#include "shm/engine/names.h"

static Sheaf__V1__NameInfo *name_info(struct daemon *d, struct arena *a,
				      const struct name_rec *r)
{
	Sheaf__V1__NameInfo *ni = ARENA_NEW(a, Sheaf__V1__NameInfo, SHEAF__V1__NAME_INFO__INIT);

	if (ni == NULL || (ni->name = arena_strdup(a, r->name)) == NULL ||
	    (ni->cache = arena_strdup(a, d->pool.caches[r->cache].name)) == NULL)
		return NULL;
	ni->offset = r->off;
	ni->cache_id = r->cache;
	ni->cache_generation = r->cache_gen;
	ni->object_size = d->pool.caches[r->cache].obj_size;
	ni->created_at = r->created_at;
	return ni;
}

static Sheaf__V1__Status name_status(int rc)
{
	return rc == -ENAMETOOLONG ? SHEAF__V1__STATUS__STATUS_BAD_REQUEST : rpc_status(rc);
}

void rpc_name_set(struct daemon *d, const struct rpc_call *call, struct reply *rp)
{
	const Sheaf__V1__NameSetRequest *rq = RPC_BODY(call, Sheaf__V1__NameSetRequest);
	Sheaf__V1__NameSetResponse *nr;
	struct name_rec r;
	char err[160];
	int rc = engine_name_set(&d->engine, rq->name, rq->offset, err, sizeof(err));

	if (rc != 0) {
		rpc_fail(rp, name_status(rc), "%s", err);
		return;
	}
	nr = ARENA_NEW(&rp->a, Sheaf__V1__NameSetResponse, SHEAF__V1__NAME_SET_RESPONSE__INIT);
	if (nr == NULL || names_lookup(&d->pool, rq->name, &r) != 0 ||
	    (nr->name = name_info(d, &rp->a, &r)) == NULL) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_NAME_SET;
	rp->r.name_set = nr;
}

void rpc_name_del(struct daemon *d, const struct rpc_call *call, struct reply *rp)
{
	const Sheaf__V1__NameDelRequest *rq = RPC_BODY(call, Sheaf__V1__NameDelRequest);
	char err[160];
	int rc = engine_name_del(&d->engine, rq->name, err, sizeof(err));

	if (rc != 0) {
		rpc_fail(rp, name_status(rc), "%s", err);
		return;
	}
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_NAME_DEL;
	rp->r.name_del = ARENA_NEW(&rp->a, Sheaf__V1__NameDelResponse,
				   SHEAF__V1__NAME_DEL_RESPONSE__INIT);
	if (rp->r.name_del == NULL)
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
}

void rpc_name_list(struct daemon *d, const struct rpc_call *call, struct reply *rp)
{
	Sheaf__V1__NameListResponse *lr = ARENA_NEW(&rp->a, Sheaf__V1__NameListResponse,
						    SHEAF__V1__NAME_LIST_RESPONSE__INIT);
	struct name_rec r;

	(void)call;
	if (lr == NULL ||
	    (lr->names = arena_alloc(&rp->a, SHEAF_DIR_ENTRIES * sizeof(void *))) == NULL)
		goto oom;
	for (uint32_t i = 0; i < SHEAF_DIR_ENTRIES; i++)
		if (names_read(&d->pool, i, &r) &&
		    (lr->names[lr->n_names++] = name_info(d, &rp->a, &r)) == NULL)
			goto oom;
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_NAME_LIST;
	rp->r.name_list = lr;
	return;
oom:
	rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
}
