/*
 * rpc_pool.c - sheafd's handlers for the pool as a whole: DaemonInfo,
 * Stats, Check, Shrink, Tune, and the pool's layout that Attach reports
 * too (rpc_handlers.h).  Called through rpc.c's table of request kinds
 * only.
 */
#include <errno.h>
#include <sys/stat.h>
#include <time.h>
#include "log.h"
#include "rpc_handlers.h"
#include "shm/barn.h"
#include "shm/engine/check.h"
#include "shm/engine/grace.h"
#include "shm/stats.h"
#include "shm/tune.h"
#include "shm/bounds.h"
#include "shm/slab_geom.h"

Sheaf__V1__Layout *rpc_layout(struct daemon *d, struct arena *a)
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

/* DaemonInfo's grace-period fields (shm/engine/grace.h): counters from the
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

/* The large-object figures of DaemonInfo: budget, retained, the bytes of
 * large caches' slabs, and what SHARED's memfd holds in memory. */
static void daemon_info_large(struct daemon *d, Sheaf__V1__DaemonInfoResponse *di)
{
	struct shm_pool *p = &d->pool;
	struct stat st;

	di->large_retain = at_load_relaxed(&p->hdr->large_retain);
	di->large_retained = at_load_relaxed(&p->hdr->large_retained);
	for (uint32_t c = 0, used = pool_caches_used(p); c < used; c++) {
		struct stats_sum sum = { 0 };

		if (at_load_acquire(&p->caches[c].state) != CACHE_LIVE ||
		    !slab_is_large(p->caches[c].obj_size))
			continue;
		for (uint32_t n = 0; n < p->nodes; n++)
			stats_cache_node(p, c, n, &sum);
		di->large_bytes += sum.slabs * slab_frames_of(p->caches[c].slab_bytes) * SLAB_SIZE;
	}
	if (fstat(p->shared_fd, &st) == 0)
		di->shared_allocated = (uint64_t)st.st_blocks * 512;
}

void rpc_daemon_info(struct daemon *d, const struct rpc_call *call, struct reply *rp)
{
	Sheaf__V1__DaemonInfoResponse *di = ARENA_NEW(&rp->a, Sheaf__V1__DaemonInfoResponse,
						SHEAF__V1__DAEMON_INFO_RESPONSE__INIT);

	(void)call;
	if (di == NULL || (di->layout = rpc_layout(d, &rp->a)) == NULL) {
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
	daemon_info_large(d, di);
	if (daemon_info_grace(d, &rp->a, di) != 0 ||
	    rpc_numa_nodes(d, &rp->a, &di->numa_policy, &di->numa_nodes, &di->n_numa_nodes) != 0) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_DAEMON_INFO;
	rp->r.daemon_info = di;
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
	ns->slab_bytes = sum.slabs * slab_frames_of(d->pool.caches[c].slab_bytes) * SLAB_SIZE;
	ns->barn_full = sum.barn_full;
	ns->barn_empty = sum.barn_empty;
	return ns;
}

void rpc_stats(struct daemon *d, const struct rpc_call *call, struct reply *rp)
{
	const Sheaf__V1__StatsRequest *rq = RPC_BODY(call, Sheaf__V1__StatsRequest);
	struct shm_pool *p = &d->pool;
	Sheaf__V1__StatsResponse *sr = ARENA_NEW(&rp->a, Sheaf__V1__StatsResponse,
					   SHEAF__V1__STATS_RESPONSE__INIT);
	int only = -1;
	uint32_t used = pool_caches_used(p);

	if (rpc_cache_scope(d, rq->cache, &only, rp) != 0)
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
		if (cs == NULL || (cs->cache = rpc_cache_info(d, &rp->a, c)) == NULL ||
		    (cs->nodes = arena_alloc(&rp->a, p->nodes * sizeof(void *))) == NULL)
			goto oom;
		for (uint32_t n = 0; n < p->nodes; n++) {
			if ((cs->nodes[n] = node_stats(d, &rp->a, c, n)) == NULL ||
			    (rq->placement && rpc_numa_pages(d, &rp->a, c, n, cs->nodes[n]) != 0))
				goto oom;
			cs->bytes_mapped += cs->nodes[n]->slab_bytes;
		}
		cs->n_nodes = p->nodes;
		cs->owner_freed = at_load_relaxed(&p->caches[c].owner_freed);
		cs->owner_kept = at_load_relaxed(&p->caches[c].owner_kept);
		in_use = engine_counted_in_use(p, c);
		cs->in_use = in_use > 0 ? (uint64_t)in_use : 0;
		cs->bytes_in_use = cs->in_use * p->caches[c].obj_size;
		sr->caches[sr->n_caches++] = cs;
	}
	if (only < 0 && rpc_topic_infos(d, &rp->a, &sr->topics, &sr->n_topics) != 0)
		goto oom;
	if (only < 0 && rpc_queue_infos(d, &rp->a, &sr->queues, &sr->n_queues) != 0)
		goto oom;
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_STATS;
	rp->r.stats = sr;
	return;
oom:
	rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
}

void rpc_check_fill(struct daemon *d, int cache, int rc, const struct check_report *rep,
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
 * (check.c) when there is one; its reply then comes through the
 * completion the server registered there (rp->deferred). */
void rpc_check(struct daemon *d, const struct rpc_call *call, struct reply *rp)
{
	const Sheaf__V1__CheckRequest *rq = RPC_BODY(call, Sheaf__V1__CheckRequest);
	struct check_report rep;
	char err[256] = "", msg[128];
	int rc, cache = -1;

	if (rpc_cache_scope(d, rq->cache, &cache, rp) != 0)
		return;
	if (d->base != NULL && check_start(d, call->id, cache) == 0) {
		rp->deferred = 1;
		return;
	}
	engine_stop(&d->engine);           /* the checker needs a quiet engine */
	rc = cache < 0 ? pool_check(&d->pool, -1, -1, &rep, err, sizeof(err))
		       : pool_check_cache(&d->pool, (uint32_t)cache, &rep, err, sizeof(err));
	if (engine_start(&d->engine, msg, sizeof(msg)) != 0)
		log_err("restarting workers after check: %s", msg);
	rpc_check_fill(d, cache, rc, &rep, err, rp);
}

void rpc_shrink(struct daemon *d, const struct rpc_call *call, struct reply *rp)
{
	const Sheaf__V1__ShrinkRequest *rq = RPC_BODY(call, Sheaf__V1__ShrinkRequest);
	Sheaf__V1__ShrinkResponse *sr;
	int cache = -1, n;

	if (rpc_cache_scope(d, rq->cache, &cache, rp) != 0)
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
void rpc_tune(struct daemon *d, const struct rpc_call *call, struct reply *rp)
{
	const Sheaf__V1__TuneRequest *rq = RPC_BODY(call, Sheaf__V1__TuneRequest);
	struct shm_pool *p = &d->pool;
	Sheaf__V1__TuneResponse *tr;
	struct tune_setting *set;
	char err[256];
	int cache = -1, rc;

	if (rpc_cache_scope(d, rq->cache, &cache, rp) != 0)
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
	if (tr == NULL || (cache >= 0 && (tr->cache = rpc_cache_info(d, &rp->a, (uint32_t)cache)) == NULL)) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	tr->mem_cap = at_load_relaxed(&p->hdr->mem_cap);
	if (cache < 0 && rpc_numa_nodes(d, &rp->a, &(char *){ NULL }, &tr->numa_nodes,
					&tr->n_numa_nodes) != 0) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_TUNE;
	rp->r.tune = tr;
}
