/*
 * rpc.c - sheafd's request handling: parse a frame, act on the pool, pack
 * the reply (rpc_handle; server.c sends it).  No socket here: the peer is
 * plain data (struct conn_info), so any bytes can be fed in directly.
 * Every reply goes out with the request's id; a request that cannot be
 * parsed, carries unknown fields or names no known body gets
 * STATUS_BAD_REQUEST and is counted; the connection stays usable.
 * While the pool check runs (check.c), a request that changes the pool
 * gets no reply but rpc_out.later (server.c hands it in again afterwards),
 * and Check itself is answered later through rpc_check_reply.
 *
 * The handle_* functions each answer one request body into a struct reply
 * whose every allocation is in its arena (rpc_reply.h); the name
 * directory's and the shared queues' handlers are in rpc_names.c and
 * rpc_queues.c.
 */
#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "arena.h"
#include "daemon.h"
#include "log.h"
#include "rpc_reply.h"
#include "proto/sheaf.pb-c.h"
#include "shm/barn.h"
#include "shm/engine/check.h"
#include "shm/lanes.h"
#include "shm/names.h"
#include "shm/engine/grace.h"
#include "shm/queue.h"
#include "shm/owner.h"
#include "shm/engine/owner.h"
#include "shm/stats.h"
#include "shm/tune.h"
#include "shm/bounds.h"

static Sheaf__V1__Layout *layout_of(struct daemon *d, struct arena *a)
{
	Sheaf__V1__Layout *l = ARENA_NEW(a, Sheaf__V1__Layout, SHEAF__V1__LAYOUT__INIT);
	const struct shm_header *h = d->pool.hdr;

	if (l == NULL)
		return NULL;
	l->layout_version = h->version;
	l->region_size = h->region_size;
	l->map_addr = h->map_addr;
	l->nodes = h->nodes;
	l->simulated_nodes = h->simulated != 0;
	l->sheaf_count = h->sheaf_count;
	return l;
}

static Sheaf__V1__CacheInfo *cache_info(struct daemon *d, struct arena *a, uint32_t id)
{
	const struct shm_cache *sc = &d->pool.caches[id];
	Sheaf__V1__CacheInfo *ci = ARENA_NEW(a, Sheaf__V1__CacheInfo, SHEAF__V1__CACHE_INFO__INIT);

	if (ci == NULL)
		return NULL;
	ci->id = id;
	ci->name = arena_strdup(a, sc->name);
	ci->object_size = sc->obj_size;
	ci->align = sc->align;
	ci->sheaf_capacity = at_load_relaxed(&sc->sheaf_capacity);
	ci->objects_per_slab = sc->objs_per_slab;
	ci->flags = sc->flags;
	ci->min_partial = at_load_relaxed(&sc->min_partial);
	ci->barn_limit = at_load_relaxed(&sc->barn_limit);
	ci->barn_low = at_load_relaxed(&sc->barn_low);
	ci->barn_high = at_load_relaxed(&sc->barn_high);
	ci->generation = at_load_relaxed(&sc->generation);
	return ci->name != NULL ? ci : NULL;
}

void rpc_fail(struct reply *rp, Sheaf__V1__Status st, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rp->err, sizeof(rp->err), fmt, ap);
	va_end(ap);
	rp->r.status = st;
	rp->r.error = rp->err;
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY__NOT_SET;
}

Sheaf__V1__Status rpc_status(int rc)
{
	switch (rc) {
	case -EEXIST: return SHEAF__V1__STATUS__STATUS_EXISTS;
	case -ENOENT: return SHEAF__V1__STATUS__STATUS_NOT_FOUND;
	case -ENOSPC: case -EUSERS: case -ENOMEM: return SHEAF__V1__STATUS__STATUS_NO_SPACE;
	case -EBUSY: return SHEAF__V1__STATUS__STATUS_BUSY;
	case -EINVAL: return SHEAF__V1__STATUS__STATUS_BAD_REQUEST;
	default: return SHEAF__V1__STATUS__STATUS_INTERNAL;
	}
}

/* ---- handlers ----------------------------------------------------------- */

static void handle_attach(struct daemon *d, struct conn_info *peer,
			  const Sheaf__V1__AttachRequest *rq, struct reply *rp)
{
	Sheaf__V1__AttachResponse *ar;
	char err[160];
	int id;

	if (rq->protocol_version != SHEAF__V1__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT) {
		d->n.bad_frames++;
		log_warn("pid %d: attach with protocol version %u refused (this daemon "
			 "speaks %u): closing", (int)peer->pid, rq->protocol_version,
			 SHEAF__V1__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT);
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_UNSUPPORTED,
		     "protocol version %u not supported (this daemon speaks %u)",
		     rq->protocol_version,
		     SHEAF__V1__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT);
		rp->close_after = 1;
		return;
	}
	if (peer->client >= 0) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_BAD_REQUEST, "already attached as client %d",
		     peer->client);
		return;
	}
	id = rq->resume ? daemon_resume(d, peer, rq->client_id, err, sizeof(err))
			: daemon_attach(d, peer, rq->name, err, sizeof(err));
	if (id < 0) {
		rpc_fail(rp, rpc_status(id), "%s", err);
		return;
	}
	ar = ARENA_NEW(&rp->a, Sheaf__V1__AttachResponse, SHEAF__V1__ATTACH_RESPONSE__INIT);
	if (ar == NULL || (ar->layout = layout_of(d, &rp->a)) == NULL) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	ar->client_id = (uint32_t)id;
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_ATTACH;
	rp->r.attach = ar;
	/* META only as the descriptor that cannot write it (main.c made it
	 * before serving), then SHARED: the order the protocol gives. */
	rp->pass_fds[0] = d->pool.meta_ro_fd;
	rp->pass_fds[1] = d->pool.shared_fd;
	rp->npass = 2;
}

static void handle_cache_create(struct daemon *d, const Sheaf__V1__CacheCreateRequest *rq,
			    struct reply *rp)
{
	struct cache_params cp = {
		.size = rq->size, .align = rq->align, .capacity = rq->capacity,
		.flags = rq->flags,
	};
	Sheaf__V1__CacheCreateResponse *cr;
	char err[160];
	int id = engine_cache_create(&d->engine, rq->name, &cp, err, sizeof(err));

	if (id < 0) {
		rpc_fail(rp, rpc_status(id), "%s", err);
		return;
	}
	log_info("cache '%s' created: id %d, object size %u", rq->name, id,
		 d->pool.caches[id].obj_size);
	daemon_status(d);
	cr = ARENA_NEW(&rp->a, Sheaf__V1__CacheCreateResponse, SHEAF__V1__CACHE_CREATE_RESPONSE__INIT);
	if (cr == NULL || (cr->cache = cache_info(d, &rp->a, (uint32_t)id)) == NULL) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_CACHE_CREATE;
	rp->r.cache_create = cr;
}

static void handle_cache_open(struct daemon *d, const Sheaf__V1__CacheOpenRequest *rq,
			  struct reply *rp)
{
	Sheaf__V1__CacheOpenResponse *cr;
	int id = pool_cache_find(&d->pool, rq->name);

	if (id < 0) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_NOT_FOUND, "no cache named '%s'", rq->name);
		return;
	}
	cr = ARENA_NEW(&rp->a, Sheaf__V1__CacheOpenResponse, SHEAF__V1__CACHE_OPEN_RESPONSE__INIT);
	if (cr == NULL || (cr->cache = cache_info(d, &rp->a, (uint32_t)id)) == NULL) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_CACHE_OPEN;
	rp->r.cache_open = cr;
}

static void handle_cache_list(struct daemon *d, struct reply *rp)
{
	Sheaf__V1__CacheListResponse *lr = ARENA_NEW(&rp->a, Sheaf__V1__CacheListResponse,
					       SHEAF__V1__CACHE_LIST_RESPONSE__INIT);

	uint32_t used = pool_caches_used(&d->pool);

	if (lr == NULL || (lr->caches = arena_alloc(&rp->a, (used + 1) * sizeof(void *))) == NULL)
		goto oom;
	for (uint32_t c = 0; c < used; c++) {
		if (at_load_acquire(&d->pool.caches[c].state) != CACHE_LIVE)
			continue;
		if ((lr->caches[lr->n_caches++] = cache_info(d, &rp->a, c)) == NULL)
			goto oom;
	}
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_CACHE_LIST;
	rp->r.cache_list = lr;
	return;
oom:
	rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
}

static void handle_cache_destroy(struct daemon *d, const Sheaf__V1__CacheDestroyRequest *rq,
			     struct reply *rp)
{
	char err[160];
	int id = pool_cache_find(&d->pool, rq->name), rc;

	if (id < 0) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_NOT_FOUND, "no cache named '%s'", rq->name);
		return;
	}
	rc = engine_cache_destroy(&d->engine, (uint32_t)id, err, sizeof(err));
	if (rc != 0) {
		rpc_fail(rp, rpc_status(rc), "%s", err);
		return;
	}
	log_info("cache '%s' destroyed", rq->name);
	daemon_status(d);
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_CACHE_DESTROY;
	rp->r.cache_destroy = ARENA_NEW(&rp->a, Sheaf__V1__CacheDestroyResponse,
				  SHEAF__V1__CACHE_DESTROY_RESPONSE__INIT);
	if (rp->r.cache_destroy == NULL)
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
}

/* Cache @c's numbers on node @n (stats_cache_node), as a NodeStats. */
static Sheaf__V1__NodeStats *node_stats(struct daemon *d, struct arena *a, uint32_t c,
					uint32_t n)
{
	struct stats_sum sum = { 0 };
	Sheaf__V1__NodeStats *ns = ARENA_NEW(a, Sheaf__V1__NodeStats, SHEAF__V1__NODE_STATS__INIT);

	if (ns == NULL || (ns->counters = arena_alloc(a, SHEAF_STAT_NR * sizeof(void *))) == NULL)
		return NULL;
	stats_cache_node(&d->pool, c, n, &sum);
	for (int i = 0; i < SHEAF_STAT_NR; i++) {
		Sheaf__V1__Counter *k = ARENA_NEW(a, Sheaf__V1__Counter, SHEAF__V1__COUNTER__INIT);
		if (k == NULL)
			return NULL;
		k->name = (char *)sheaf_stat_names[i];
		k->value = sum.stat[i];
		ns->counters[ns->n_counters++] = k;
	}
	ns->node = n;
	ns->objects = sum.objects;
	ns->active_objects = sum.active_objects;
	ns->slabs = sum.slabs;
	ns->partial_slabs = sum.partial_slabs;
	ns->slab_bytes = sum.slabs * SLAB_SIZE;
	ns->barn_full = sum.barn_full;
	ns->barn_empty = sum.barn_empty;
	return ns;
}

/* The scope a request names in @name: every cache (*@cache -1) when it is
 * NULL or "", else that cache's id; -1 after failing @rp with NOT_FOUND
 * when no cache has that name. */
static int cache_scope(struct daemon *d, const char *name, int *cache, struct reply *rp)
{
	*cache = -1;
	if (name == NULL || name[0] == '\0')
		return 0;
	*cache = pool_cache_find(&d->pool, name);
	if (*cache >= 0)
		return 0;
	rpc_fail(rp, SHEAF__V1__STATUS__STATUS_NOT_FOUND, "no cache named '%s'", name);
	return -1;
}

static void handle_stats(struct daemon *d, const Sheaf__V1__StatsRequest *rq, struct reply *rp)
{
	struct shm_pool *p = &d->pool;
	Sheaf__V1__StatsResponse *sr = ARENA_NEW(&rp->a, Sheaf__V1__StatsResponse,
					   SHEAF__V1__STATS_RESPONSE__INIT);
	int only = -1;
	uint32_t used = pool_caches_used(p);

	if (cache_scope(d, rq->cache, &only, rp) != 0)
		return;
	if (sr == NULL || (sr->caches = arena_alloc(&rp->a, (used + 1) * sizeof(void *))) == NULL)
		goto oom;
	for (uint32_t c = 0; c < used; c++) {
		Sheaf__V1__CacheStats *cs;
		int64_t in_use;

		if ((only >= 0 && (uint32_t)only != c) ||
		    at_load_acquire(&p->caches[c].state) != CACHE_LIVE)
			continue;
		cs = ARENA_NEW(&rp->a, Sheaf__V1__CacheStats, SHEAF__V1__CACHE_STATS__INIT);
		if (cs == NULL || (cs->cache = cache_info(d, &rp->a, c)) == NULL ||
		    (cs->nodes = arena_alloc(&rp->a, p->nodes * sizeof(void *))) == NULL)
			goto oom;
		for (uint32_t n = 0; n < p->nodes; n++) {
			if ((cs->nodes[n] = node_stats(d, &rp->a, c, n)) == NULL)
				goto oom;
			cs->bytes_mapped += cs->nodes[n]->slabs * SLAB_SIZE;
		}
		cs->n_nodes = p->nodes;
		cs->owner_freed = at_load_relaxed(&p->caches[c].owner_freed);
		cs->owner_kept = at_load_relaxed(&p->caches[c].owner_kept);
		in_use = engine_counted_in_use(p, c);
		cs->in_use = in_use > 0 ? (uint64_t)in_use : 0;
		cs->bytes_in_use = cs->in_use * p->caches[c].obj_size;
		sr->caches[sr->n_caches++] = cs;
	}
	if (only < 0 && rpc_queue_infos(d, &rp->a, &sr->queues, &sr->n_queues) != 0)
		goto oom;
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_STATS;
	rp->r.stats = sr;
	return;
oom:
	rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
}

/* DaemonInfo's grace-period fields (shm/grace.h): counters from the
 * header, waiting objects summed over caches, the lanes holding the grace
 * period in progress back.  0 or -ENOMEM. */
static int daemon_info_grace(struct daemon *d, struct arena *a,
			     Sheaf__V1__DaemonInfoResponse *di)
{
	struct shm_pool *p = &d->pool;
	struct grace_blocker b[16];
	uint32_t n = grace_report(&d->engine, b, 16);

	di->gp_started = at_load_relaxed(&p->hdr->gp_seq);
	di->gp_completed = at_load_relaxed(&p->hdr->gp_done);
	for (uint32_t c = 0; c < pool_caches_used(p); c++)
		for (uint32_t nd = 0; nd < p->nodes; nd++)
			di->rcu_waiting += at_load_relaxed(&pool_cnode(p, c, nd)->stat[ST_RCU_WAITING]);
	if (n == 0)
		return 0;
	di->gp_blockers = arena_alloc(a, n * sizeof(void *));
	if (di->gp_blockers == NULL)
		return -ENOMEM;
	for (uint32_t k = 0; k < n; k++) {
		Sheaf__V1__GraceBlocker *gb = ARENA_NEW(a, Sheaf__V1__GraceBlocker,
							SHEAF__V1__GRACE_BLOCKER__INIT);
		if (gb == NULL)
			return -ENOMEM;
		gb->lane = b[k].lane;
		gb->client_id = b[k].client;
		gb->pid = b[k].pid;
		gb->blocked_ms = b[k].blocked_ms;
		di->gp_blockers[di->n_gp_blockers++] = gb;
	}
	return 0;
}

static void handle_daemon_info(struct daemon *d, struct reply *rp)
{
	Sheaf__V1__DaemonInfoResponse *di = ARENA_NEW(&rp->a, Sheaf__V1__DaemonInfoResponse,
						SHEAF__V1__DAEMON_INFO_RESPONSE__INIT);

	if (di == NULL || (di->layout = layout_of(d, &rp->a)) == NULL) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	di->version = (char *)SHEAF_VERSION;
	di->protocol_version = SHEAF__V1__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT;
	di->pool_size = d->pool.data_len;
	di->mem_cap = at_load_relaxed(&d->pool.hdr->mem_cap);
	di->uptime_seconds = (uint64_t)(time(NULL) - d->started);
	di->max_caches = d->pool.max_caches;
	di->max_clients = d->pool.max_clients;
	di->clients = daemon_live_clients(d);
	di->max_frame = d->cfg.max_frame;
	if (daemon_info_grace(d, &rp->a, di) != 0) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_DAEMON_INFO;
	rp->r.daemon_info = di;
}

/* The Check reply from pool_check's result (inline, or from check.c). */
static void fill_check(struct daemon *d, int cache, int rc, const struct check_report *rep,
		       const char *err, struct reply *rp)
{
	Sheaf__V1__CheckResponse *cr = ARENA_NEW(&rp->a, Sheaf__V1__CheckResponse,
					   SHEAF__V1__CHECK_RESPONSE__INIT);
	int64_t counted = 0;

	if (cr == NULL || (cr->problem = arena_strdup(&rp->a, err)) == NULL) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	for (uint32_t c = 0, used = pool_caches_used(&d->pool); c < used; c++)
		if ((cache < 0 || (uint32_t)cache == c) &&
		    at_load_acquire(&d->pool.caches[c].state) == CACHE_LIVE)
			counted = ut_add64(counted, engine_counted_in_use(&d->pool, c));
	cr->ok = rc == 0;
	cr->objects = rep->objects;
	cr->free_in_slabs = rep->free_in_slabs;
	cr->in_sheaves = rep->in_sheaves;
	cr->in_use = rep->in_use;
	cr->counted_in_use = counted > 0 ? (uint64_t)counted : 0;
	if (rc != 0)
		log_warn("pool check: %s", err);
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_CHECK;
	rp->r.check = cr;
}

/* Check (of the pool, or of the cache it names): off the event loop
 * (check.c) when there is one; its reply then comes through
 * server_check_done. */
static void handle_check(struct daemon *d, const Sheaf__V1__CheckRequest *rq, uint64_t id,
			 struct reply *rp)
{
	struct check_report rep;
	char err[256] = "", msg[128];
	int rc, cache = -1;

	if (cache_scope(d, rq->cache, &cache, rp) != 0)
		return;
	if (d->base != NULL && check_start(d, id, cache) == 0) {
		rp->deferred = 1;
		return;
	}
	engine_stop(&d->engine);           /* the checker needs a quiet engine */
	rc = cache < 0 ? pool_check(&d->pool, -1, -1, &rep, err, sizeof(err))
		       : pool_check_cache(&d->pool, (uint32_t)cache, &rep, err, sizeof(err));
	if (engine_start(&d->engine, msg, sizeof(msg)) != 0)
		log_err("restarting workers after check: %s", msg);
	fill_check(d, cache, rc, &rep, err, rp);
}

static void handle_shrink(struct daemon *d, const Sheaf__V1__ShrinkRequest *rq, struct reply *rp)
{
	Sheaf__V1__ShrinkResponse *sr;
	int cache = -1, n;

	if (cache_scope(d, rq->cache, &cache, rp) != 0)
		return;
	n = engine_shrink(&d->engine, cache, 1);
	sr = ARENA_NEW(&rp->a, Sheaf__V1__ShrinkResponse, SHEAF__V1__SHRINK_RESPONSE__INIT);
	if (sr == NULL) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	sr->slabs_released = (uint32_t)n;
	sr->bytes_released = (uint64_t)sr->slabs_released * SLAB_SIZE;
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_SHRINK;
	rp->r.shrink = sr;
}

/* Tune: checked whole against shm/tune.c's table, then applied. */
static void handle_tune(struct daemon *d, const Sheaf__V1__TuneRequest *rq, struct reply *rp)
{
	struct shm_pool *p = &d->pool;
	Sheaf__V1__TuneResponse *tr;
	struct tune_setting *set;
	char err[256];
	int cache = -1, rc;

	if (cache_scope(d, rq->cache, &cache, rp) != 0)
		return;
	set = arena_alloc(&rp->a, (rq->n_settings + 1) * sizeof(*set));
	if (set == NULL) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	for (size_t i = 0; i < rq->n_settings; i++) {
		set[i].key = rq->settings[i]->key;
		set[i].value = rq->settings[i]->value;
	}
	rc = tune_check(p, cache, set, rq->n_settings, err, sizeof(err));
	if (rc != 0) {
		rpc_fail(rp, rpc_status(rc), "%s", err);
		return;
	}
	for (size_t i = 0; i < rq->n_settings; i++) {
		tune_apply(p, cache, &set[i]);
		log_info("tune %s%s%s=%llu", cache >= 0 ? p->caches[cache].name : "",
			 cache >= 0 ? " " : "", set[i].key, (unsigned long long)set[i].value);
	}
	/* Let the workers act on new watermarks at once. */
	for (uint32_t n = 0; n < p->nodes; n++)
		node_ring_doorbell(p, n);
	tr = ARENA_NEW(&rp->a, Sheaf__V1__TuneResponse, SHEAF__V1__TUNE_RESPONSE__INIT);
	if (tr == NULL || (cache >= 0 && (tr->cache = cache_info(d, &rp->a, (uint32_t)cache)) == NULL)) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	tr->mem_cap = at_load_relaxed(&p->hdr->mem_cap);
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_TUNE;
	rp->r.tune = tr;
}

/*
 * Sheaves held and objects in use of every client slot below the mark, in
 * one walk of the owner table and one of the lanes (not one per client):
 * the cost follows the sheaves, the lanes used and the caches used.
 */
static void client_tallies(const struct shm_pool *p, uint32_t used, uint64_t *held,
			   int64_t *in_use)
{
	uint32_t caches = pool_caches_used(p);

	for (uint32_t s = 0; s < p->sheaf_count; s++) {
		uint32_t o = at_load_relaxed(&p->owners[s]);
		if (o < used)
			held[o]++;
	}
	for (uint32_t l = 0, lanes = pool_lanes_used(p); l < lanes; l++) {
		const struct shm_lane *ln = &p->lanes[l];
		uint32_t c = at_load_relaxed(&ln->client);

		if (c >= used || !pool_lane_ready(ln))
			continue;
		for (uint32_t k = 0; k < caches; k++)
			in_use[c] = ut_add64(in_use[c], lane_in_use(p, ln, k));
	}
}

/* @counts[c] of every owned cache c with some, as OwnedObjects in *@out
 * (*@n of them).  0, or -ENOMEM. */
static int owned_list(struct daemon *d, struct reply *rp, const uint64_t *counts,
		      Sheaf__V1__OwnedObjects ***out, size_t *n)
{
	uint32_t caches = pool_caches_used(&d->pool);

	*n = 0;
	*out = arena_alloc(&rp->a, (caches + 1) * sizeof(void *));
	if (*out == NULL)
		return -ENOMEM;
	for (uint32_t c = 0; c < caches; c++) {
		Sheaf__V1__OwnedObjects *o;

		if (counts[c] == 0)
			continue;
		o = ARENA_NEW(&rp->a, Sheaf__V1__OwnedObjects, SHEAF__V1__OWNED_OBJECTS__INIT);
		if (o == NULL || (o->cache = arena_strdup(&rp->a, d->pool.caches[c].name)) == NULL)
			return -ENOMEM;
		o->objects = counts[c];
		(*out)[(*n)++] = o;
	}
	return 0;
}

static void handle_clients(struct daemon *d, struct reply *rp)
{
	struct shm_pool *p = &d->pool;
	Sheaf__V1__ClientsResponse *cr = ARENA_NEW(&rp->a, Sheaf__V1__ClientsResponse,
					     SHEAF__V1__CLIENTS_RESPONSE__INIT);
	uint32_t used = pool_clients_used(p), caches = pool_caches_used(p);
	uint64_t *held = arena_alloc(&rp->a, (used + 1) * sizeof(*held));
	int64_t *in_use = arena_alloc(&rp->a, (used + 1) * sizeof(*in_use));
	/* Owned caches' objects by owner tag (shm/owner.h): a snapshot,
	 * [client * caches + cache], then kept[cache]. */
	size_t nown = ((size_t)used + 1) * caches + 1;
	uint64_t *owned = arena_alloc(&rp->a, nown * sizeof(*owned)), *kept;

	if (cr == NULL || held == NULL || in_use == NULL || owned == NULL ||
	    (cr->clients = arena_alloc(&rp->a, (used + 1) * sizeof(void *))) == NULL)
		goto oom;
	kept = owned + (size_t)used * caches;
	memset(owned, 0, nown * sizeof(*owned));
	owner_count(p, owned, kept, used, caches);
	if (owned_list(d, rp, kept, &cr->kept, &cr->n_kept) != 0)
		goto oom;
	memset(held, 0, (used + 1) * sizeof(*held));
	memset(in_use, 0, (used + 1) * sizeof(*in_use));
	client_tallies(p, used, held, in_use);
	for (uint32_t c = 0; c < used; c++) {
		const struct shm_client *sc = &p->clients[c];
		Sheaf__V1__ClientInfo *ci;

		if (at_load_acquire((_Atomic uint32_t *)&sc->state) != CLIENT_LIVE)
			continue;
		ci = ARENA_NEW(&rp->a, Sheaf__V1__ClientInfo, SHEAF__V1__CLIENT_INFO__INIT);
		if (ci == NULL || (ci->name = arena_strdup(&rp->a, sc->name)) == NULL)
			goto oom;
		ci->id = c;
		ci->pid = sc->pid;
		ci->uid = sc->uid;
		ci->attached_since = sc->attached_at;
		ci->sheaves_held = held[c];
		ci->objects_in_use = in_use[c];
		if (owned_list(d, rp, &owned[(size_t)c * caches], &ci->owned, &ci->n_owned) != 0)
			goto oom;
		cr->clients[cr->n_clients++] = ci;
	}
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_CLIENTS;
	rp->r.clients = cr;
	return;
oom:
	rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
}

/* ---- dispatch ------------------------------------------------------------ */

/* Unknown fields anywhere we look are refused: they mean a peer speaking
 * something this daemon does not understand. */
static int unknown_fields(const ProtobufCMessage *m)
{
	return m != NULL && m->n_unknown_fields > 0 ? (int)m->unknown_fields[0].tag : 0;
}

/* Requests that change what the pool checker walks (caches, slabs, the
 * engine's state) wait while a check runs; the others are served. */
static int changes_pool(Sheaf__V1__Request__BodyCase body)
{
	switch (body) {
	case SHEAF__V1__REQUEST__BODY_CACHE_CREATE:
	case SHEAF__V1__REQUEST__BODY_CACHE_DESTROY:
	case SHEAF__V1__REQUEST__BODY_SHRINK:
	case SHEAF__V1__REQUEST__BODY_TUNE:
	case SHEAF__V1__REQUEST__BODY_CHECK:
	case SHEAF__V1__REQUEST__BODY_NAME_SET:   /* reads slab bitmaps */
	case SHEAF__V1__REQUEST__BODY_NAME_DEL:
	case SHEAF__V1__REQUEST__BODY_QUEUE_CREATE:
	case SHEAF__V1__REQUEST__BODY_QUEUE_DESTROY:
		return 1;
	default:
		return 0;
	}
}

static void dispatch(struct daemon *d, struct conn_info *peer, const Sheaf__V1__Request *rq,
		     struct reply *rp)
{
	const ProtobufCMessage *body = NULL;
	int tag;

	switch (rq->body_case) {
	case SHEAF__V1__REQUEST__BODY_ATTACH: body = &rq->attach->base; break;
	case SHEAF__V1__REQUEST__BODY_CACHE_CREATE: body = &rq->cache_create->base; break;
	case SHEAF__V1__REQUEST__BODY_CACHE_OPEN: body = &rq->cache_open->base; break;
	case SHEAF__V1__REQUEST__BODY_CACHE_LIST: body = &rq->cache_list->base; break;
	case SHEAF__V1__REQUEST__BODY_CACHE_DESTROY: body = &rq->cache_destroy->base; break;
	case SHEAF__V1__REQUEST__BODY_STATS: body = &rq->stats->base; break;
	case SHEAF__V1__REQUEST__BODY_DAEMON_INFO: body = &rq->daemon_info->base; break;
	case SHEAF__V1__REQUEST__BODY_CHECK: body = &rq->check->base; break;
	case SHEAF__V1__REQUEST__BODY_SHRINK: body = &rq->shrink->base; break;
	case SHEAF__V1__REQUEST__BODY_TUNE: body = &rq->tune->base; break;
	case SHEAF__V1__REQUEST__BODY_CLIENTS: body = &rq->clients->base; break;
	case SHEAF__V1__REQUEST__BODY_NAME_SET: body = &rq->name_set->base; break;
	case SHEAF__V1__REQUEST__BODY_NAME_DEL: body = &rq->name_del->base; break;
	case SHEAF__V1__REQUEST__BODY_NAME_LIST: body = &rq->name_list->base; break;
	case SHEAF__V1__REQUEST__BODY_QUEUE_CREATE: body = &rq->queue_create->base; break;
	case SHEAF__V1__REQUEST__BODY_QUEUE_DESTROY: body = &rq->queue_destroy->base; break;
	case SHEAF__V1__REQUEST__BODY_QUEUE_LIST: body = &rq->queue_list->base; break;
	default: break;
	}
	if ((tag = unknown_fields(&rq->base)) != 0 || (tag = unknown_fields(body)) != 0) {
		d->n.bad_frames++;
		log_warn("client pid %d: request %llu has unknown field %d", (int)peer->pid,
			 (unsigned long long)rq->id, tag);
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_BAD_REQUEST,
		     "unknown field %d (newer client?)", tag);
		return;
	}
	if (check_running(d) && changes_pool(rq->body_case)) {
		rp->later = 1;           /* the checker walks the pool: wait for it */
		return;
	}
	switch (rq->body_case) {
	case SHEAF__V1__REQUEST__BODY_ATTACH: handle_attach(d, peer, rq->attach, rp); break;
	case SHEAF__V1__REQUEST__BODY_CACHE_CREATE: handle_cache_create(d, rq->cache_create, rp); break;
	case SHEAF__V1__REQUEST__BODY_CACHE_OPEN: handle_cache_open(d, rq->cache_open, rp); break;
	case SHEAF__V1__REQUEST__BODY_CACHE_LIST: handle_cache_list(d, rp); break;
	case SHEAF__V1__REQUEST__BODY_CACHE_DESTROY: handle_cache_destroy(d, rq->cache_destroy, rp); break;
	case SHEAF__V1__REQUEST__BODY_STATS: handle_stats(d, rq->stats, rp); break;
	case SHEAF__V1__REQUEST__BODY_DAEMON_INFO: handle_daemon_info(d, rp); break;
	case SHEAF__V1__REQUEST__BODY_CHECK: handle_check(d, rq->check, rq->id, rp); break;
	case SHEAF__V1__REQUEST__BODY_SHRINK: handle_shrink(d, rq->shrink, rp); break;
	case SHEAF__V1__REQUEST__BODY_TUNE: handle_tune(d, rq->tune, rp); break;
	case SHEAF__V1__REQUEST__BODY_CLIENTS: handle_clients(d, rp); break;
	case SHEAF__V1__REQUEST__BODY_NAME_SET: rpc_name_set(d, rq->name_set, rp); break;
	case SHEAF__V1__REQUEST__BODY_NAME_DEL: rpc_name_del(d, rq->name_del, rp); break;
	case SHEAF__V1__REQUEST__BODY_NAME_LIST: rpc_name_list(d, rp); break;
	case SHEAF__V1__REQUEST__BODY_QUEUE_CREATE: rpc_queue_create(d, rq->queue_create, rp); break;
	case SHEAF__V1__REQUEST__BODY_QUEUE_DESTROY: rpc_queue_destroy(d, rq->queue_destroy, rp); break;
	case SHEAF__V1__REQUEST__BODY_QUEUE_LIST: rpc_queue_list(d, rp); break;
	default:
		d->n.bad_frames++;
		log_warn("client pid %d: request %llu has no known body", (int)peer->pid,
			 (unsigned long long)rq->id);
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_BAD_REQUEST, "request has no known body");
		break;
	}
}

/* Pack @rp's Response into @out: 0, or -ENOMEM (@out empty). */
static int pack_reply(struct reply *rp, struct rpc_out *out)
{
	out->len = sheaf__v1__response__get_packed_size(&rp->r);
	out->buf = malloc(out->len ? out->len : 1);
	if (out->buf == NULL) {
		out->len = 0;
		return -ENOMEM;
	}
	sheaf__v1__response__pack(&rp->r, out->buf);
	memcpy(out->pass_fds, rp->pass_fds, sizeof(out->pass_fds));
	out->npass = rp->npass;
	out->close_after = rp->close_after;
	return 0;
}

int rpc_handle(struct daemon *d, struct conn_info *peer, const uint8_t *buf,
	       size_t len, struct rpc_out *out)
{
	Sheaf__V1__Request *rq = sheaf__v1__request__unpack(NULL, len, buf);
	struct reply *rp = calloc(1, sizeof(*rp));
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (rp == NULL) {
		if (rq != NULL)
			sheaf__v1__request__free_unpacked(rq, NULL);
		return -ENOMEM;
	}
	sheaf__v1__response__init(&rp->r);
	d->n.requests++;
	if (rq == NULL) {
		d->n.bad_frames++;
		log_warn("client pid %d: unparsable request (%zu bytes)", (int)peer->pid, len);
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_BAD_REQUEST, "unparsable request");
	} else {
		rp->r.id = rq->id;
		dispatch(d, peer, rq, rp);
	}
	if (rp->later || rp->deferred) {
		/* No reply now; a held frame is handed in again (counted then). */
		out->later = rp->later;
		out->deferred = rp->deferred;
		d->n.requests -= rp->later;
	} else {
		rc = pack_reply(rp, out);
	}
	if (rq != NULL)
		sheaf__v1__request__free_unpacked(rq, NULL);
	arena_free(&rp->a);
	free(rp);
	return rc;
}

int rpc_check_reply(struct daemon *d, uint64_t id, int cache, int rc,
		    const struct check_report *rep, const char *err, struct rpc_out *out)
{
	struct reply *rp = calloc(1, sizeof(*rp));
	int ret;

	memset(out, 0, sizeof(*out));
	if (rp == NULL)
		return -ENOMEM;
	sheaf__v1__response__init(&rp->r);
	rp->npass = 0;
	rp->r.id = id;
	fill_check(d, cache, rc, rep, err, rp);
	ret = pack_reply(rp, out);
	arena_free(&rp->a);
	free(rp);
	return ret;
}

void rpc_out_free(struct rpc_out *out)
{
	free(out->buf);
	out->buf = NULL;
	out->len = 0;
}
