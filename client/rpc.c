/*
 * rpc.c - libsheaf's side of the control protocol: one request and its
 * response over the connection to sheafd (proto/call.h's round trip, with a
 * reconnect when sheafd restarted), and the calls built on it (cache
 * create, stats, shrink, check, tune).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "client/internal.h"
#include "proto/call.h"
#include "proto/frame.h"
#include "proto/sheaf.pb-c.h"
#include "shm/stats.h"

/* The largest reply frame libsheaf accepts. */
#define RPC_REPLY_CAP (FRAME_DEFAULT_CAP * 16)

/* One request and its response (proto/call.h); the caller holds rpc_lock. */
static int roundtrip(sheaf_pool_t *pool, Sheaf__V1__Request *rq, Sheaf__V1__Response **out,
		     int *recv_fd, char *err, size_t errlen)
{
	struct proto_call call = {
		.sock = pool->sock, .next_id = &pool->next_id, .cap = RPC_REPLY_CAP,
		.recv_fd = recv_fd, .err = err, .errlen = errlen,
	};
	int rc = proto_call(&call, rq, out);

	/* libsheaf's calls report any malformed reply as EPROTO. */
	return rc == -EBADMSG ? -EPROTO : rc;
}

/*
 * The daemon went away (restart): connect again and resume our client id.
 * The pool stays mapped; the memfd the reply carries is the same pool.
 */
static int reconnect_locked(sheaf_pool_t *pool)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__AttachRequest ar = SHEAF__V1__ATTACH_REQUEST__INIT;
	Sheaf__V1__Response *r;
	char msg[160];
	int fd = -1, rc;

	if (pool->sock >= 0)
		close(pool->sock);
	pool->sock = pool_connect_socket(pool->path, msg, sizeof(msg));
	if (pool->sock < 0)
		return pool->sock;
	ar.protocol_version = SHEAF__V1__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT;
	ar.pid = (uint32_t)getpid();
	ar.resume = 1;
	ar.client_id = pool->client;
	rq.body_case = SHEAF__V1__REQUEST__BODY_ATTACH;
	rq.attach = &ar;
	rc = roundtrip(pool, &rq, &r, &fd, NULL, 0);
	if (fd >= 0)
		close(fd);
	if (rc == 0) {
		pool->reconnects++;
		sheaf__v1__response__free_unpacked(r, NULL);
	} else if (rc == -EINVAL) {
		/* The daemon does not know us: it runs a different pool (it
		 * started afresh instead of adopting ours). */
		pool->stale = 1;
		rc = -ESTALE;
	}
	return rc;
}

int rpc_call(sheaf_pool_t *pool, Sheaf__V1__Request *rq, Sheaf__V1__Response **out,
	     int *recv_fd, char *err, size_t errlen)
{
	int rc;

	pthread_mutex_lock(&pool->rpc_lock);
	if (pool->stale) {
		rc = -ESTALE;
	} else {
		rc = roundtrip(pool, rq, out, recv_fd, err, errlen);
		if (rc == -EPIPE && pool->client_attached) {
			int rr = reconnect_locked(pool);
			rc = rr == 0 ? roundtrip(pool, rq, out, recv_fd, err, errlen)
				     : rr == -ESTALE ? rr : rc;
		}
	}
	if (rc == -ESTALE && err != NULL)
		snprintf(err, errlen, "sheafd restarted with another pool: this one is stale "
			 "(disconnect and connect again)");
	pthread_mutex_unlock(&pool->rpc_lock);
	return rc;
}

int rpc_cache_create(sheaf_pool_t *pool, const char *name, uint32_t size,
		     uint32_t align, int capacity, uint32_t flags)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__CacheCreateRequest cc = SHEAF__V1__CACHE_CREATE_REQUEST__INIT;
	Sheaf__V1__Response *r;
	int rc, id;

	cc.name = (char *)name;
	cc.size = size;
	cc.align = align;
	cc.capacity = capacity;
	cc.flags = flags;
	rq.body_case = SHEAF__V1__REQUEST__BODY_CACHE_CREATE;
	rq.cache_create = &cc;
	rc = rpc_call(pool, &rq, &r, NULL, NULL, 0);
	if (rc != 0)
		return rc;
	id = r->body_case == SHEAF__V1__RESPONSE__BODY_CACHE_CREATE && r->cache_create->cache
		? (int)r->cache_create->cache->id : -EPROTO;
	sheaf__v1__response__free_unpacked(r, NULL);
	return id;
}

int rpc_cache_stats(sheaf_cache_t *c, int node, struct sheaf_stats *out)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__StatsRequest sr = SHEAF__V1__STATS_REQUEST__INIT;
	Sheaf__V1__Response *r;
	int rc;

	sr.cache = c->sc->name;
	rq.body_case = SHEAF__V1__REQUEST__BODY_STATS;
	rq.stats = &sr;
	rc = rpc_call(c->pool, &rq, &r, NULL, NULL, 0);
	if (rc != 0)
		return rc;
	memset(out, 0, sizeof(*out));
	out->nstat = SHEAF_STAT_NR;
	rc = -EPROTO;
	if (r->body_case == SHEAF__V1__RESPONSE__BODY_STATS && r->stats->n_caches == 1) {
		Sheaf__V1__CacheStats *cs = r->stats->caches[0];
		for (size_t n = 0; n < cs->n_nodes; n++) {
			Sheaf__V1__NodeStats *ns = cs->nodes[n];
			if (node >= 0 && ns->node != (uint32_t)node)
				continue;
			for (size_t k = 0; k < ns->n_counters; k++) {
				int i = sheaf_stat_index(ns->counters[k]->name);
				if (i >= 0)
					out->stat[i] += ns->counters[k]->value;
			}
			out->objects += ns->objects;
			out->active_objects += ns->active_objects;
			out->slabs += ns->slabs;
			out->partial_slabs += ns->partial_slabs;
			out->barn_full += ns->barn_full;
			out->barn_empty += ns->barn_empty;
		}
		int64_t in_use = (int64_t)(out->stat[ST_ALLOC_FASTPATH] + out->stat[ST_ALLOC_SLOWPATH]) -
				 (int64_t)(out->stat[ST_FREE_FASTPATH] + out->stat[ST_FREE_SLOWPATH]);
		out->in_use = node < 0 ? cs->in_use : (in_use > 0 ? (uint64_t)in_use : 0);
		out->bytes_in_use = out->in_use * c->sc->obj_size;
		out->bytes_mapped = out->slabs * SLAB_SIZE;
		out->sheaf_capacity = cs->cache ? cs->cache->sheaf_capacity : 0;
		out->min_partial = cs->cache ? cs->cache->min_partial : 0;
		rc = 0;
	}
	sheaf__v1__response__free_unpacked(r, NULL);
	return rc;
}

int rpc_shrink(sheaf_pool_t *pool, const char *cache)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__ShrinkRequest sr = SHEAF__V1__SHRINK_REQUEST__INIT;
	Sheaf__V1__Response *r;
	int rc;

	sr.cache = (char *)(cache ? cache : "");
	rq.body_case = SHEAF__V1__REQUEST__BODY_SHRINK;
	rq.shrink = &sr;
	rc = rpc_call(pool, &rq, &r, NULL, NULL, 0);
	if (rc != 0)
		return rc;
	rc = r->body_case == SHEAF__V1__RESPONSE__BODY_SHRINK ? (int)r->shrink->slabs_released
							       : -EPROTO;
	sheaf__v1__response__free_unpacked(r, NULL);
	return rc;
}

int rpc_check(sheaf_pool_t *pool, char *err, size_t errlen)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__CheckRequest cr = SHEAF__V1__CHECK_REQUEST__INIT;
	Sheaf__V1__Response *r;
	int rc;

	rq.body_case = SHEAF__V1__REQUEST__BODY_CHECK;
	rq.check = &cr;
	rc = rpc_call(pool, &rq, &r, NULL, err, errlen);
	if (rc != 0)
		return rc;
	rc = -EPROTO;
	if (r->body_case == SHEAF__V1__RESPONSE__BODY_CHECK) {
		Sheaf__V1__CheckResponse *c = r->check;
		if (!c->ok) {
			if (err != NULL)
				snprintf(err, errlen, "%s", c->problem);
			rc = -EUCLEAN;
		} else if (c->in_use != c->counted_in_use) {
			if (err != NULL)
				snprintf(err, errlen, "in use %llu by the walk, %llu by the counters",
					 (unsigned long long)c->in_use,
					 (unsigned long long)c->counted_in_use);
			rc = -EUCLEAN;
		} else {
			rc = 0;
		}
	}
	sheaf__v1__response__free_unpacked(r, NULL);
	return rc;
}

int rpc_tune(sheaf_pool_t *pool, const char *cache, const char *key, uint64_t value)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__TuneRequest tr = SHEAF__V1__TUNE_REQUEST__INIT;
	Sheaf__V1__Setting st = SHEAF__V1__SETTING__INIT, *sp = &st;
	Sheaf__V1__Response *r;
	int rc;

	st.key = (char *)key;
	st.value = value;
	tr.cache = (char *)cache;
	tr.n_settings = 1;
	tr.settings = &sp;
	rq.body_case = SHEAF__V1__REQUEST__BODY_TUNE;
	rq.tune = &tr;
	rc = rpc_call(pool, &rq, &r, NULL, NULL, 0);
	if (rc == 0)
		sheaf__v1__response__free_unpacked(r, NULL);
	return rc;
}
