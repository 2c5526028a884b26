/*
 * rpc_clients.c - sheafd's handlers for client processes: Attach (which
 * binds the connection's peer to a client slot and passes the pool's
 * descriptors), LaneGrant (more lanes for its threads, within its caps)
 * and Clients (every attached or revoked client with what it holds).
 * Called through rpc.c's table of request kinds only.
 */
#include <string.h>
#include "log.h"
#include "rpc_handlers.h"
#include "shm/lanes.h"
#include "shm/owner.h"
#include "shm/engine/clients.h"
#include "shm/engine/owner.h"
#include "shm/bounds.h"

void rpc_attach(struct daemon *d, const struct rpc_call *call, struct reply *rp)
{
	const Sheaf__V1__AttachRequest *rq = RPC_BODY(call, Sheaf__V1__AttachRequest);
	struct conn_info *peer = call->peer;
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
	if (ar == NULL || (ar->layout = rpc_layout(d, &rp->a)) == NULL) {
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

/*
 * More lanes for the asking client: as many again as it holds (at least
 * LANE_GRANT_BLOCK), within its cap and its uid's.  libsheaf asks only
 * when every lane granted to it is in use, and never again once a reply
 * said held >= cap; a request of the same client that comes after such a
 * reply, with the same count it was told, is none of libsheaf's: the
 * client is revoked.  A count that differs (a reply lost to a restart, a
 * lane taken back) is only answered.
 */
void rpc_lane_grant(struct daemon *d, const struct rpc_call *call, struct reply *rp)
{
	const Sheaf__V1__LaneGrantRequest *rq = RPC_BODY(call, Sheaf__V1__LaneGrantRequest);
	struct conn_info *peer = call->peer;
	struct shm_pool *p = &d->pool;
	Sheaf__V1__LaneGrantResponse *lr;
	uint32_t held, cap = daemon_lanes_per_client(d), room, uid_used, uid_cap, n = 0;
	char why[128];

	if (peer->client < 0) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_NOT_ATTACHED, "LaneGrant needs Attach first");
		return;
	}
	held = client_lanes_held(p, (uint32_t)peer->client);
	if (held >= cap && peer->lanes_at_cap && rq->have == held) {
		snprintf(why, sizeof(why), "asked for lanes again at its cap (%u of "
			 "max_threads_per_client %u)", held, cap);
		daemon_revoke(d, peer->client, why);
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_REVOKED, "revoked: %s", why);
		return;
	}
	uid_used = client_lanes_held_uid(p, (uint32_t)peer->uid);
	uid_cap = daemon_lanes_per_uid(d);
	if (rq->have == held && held < cap) {
		room = cap - held;
		if (uid_used >= uid_cap)
			room = 0;
		else if (room > uid_cap - uid_used)
			room = uid_cap - uid_used;
		n = client_lanes_want(held);
		n = client_lanes_grant(p, (uint32_t)peer->client, n < room ? n : room);
		held += n;
	}
	peer->lanes_at_cap = held >= cap;
	if (n == 0 && held < cap)
		log_debug("client %d: no lane to grant (uid %u holds %u of %u; pool %u of %u)",
			  peer->client, (unsigned)peer->uid, uid_used, uid_cap,
			  pool_lanes_used(p), p->max_lanes);
	lr = ARENA_NEW(&rp->a, Sheaf__V1__LaneGrantResponse, SHEAF__V1__LANE_GRANT_RESPONSE__INIT);
	if (lr == NULL) {
		rpc_fail(rp, SHEAF__V1__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	lr->granted = n;
	lr->held = held;
	lr->cap = cap;
	rp->r.body_case = SHEAF__V1__RESPONSE__BODY_LANE_GRANT;
	rp->r.lane_grant = lr;
}

/*
 * Sheaves held and objects in use of every client slot below the mark, in
 * one walk of the owner table and one of the lanes (not one per client):
 * the cost follows the sheaves, the lanes used and the caches used.
 */
static void client_tallies(const struct shm_pool *p, uint32_t used, uint64_t *held,
			   int64_t *in_use, uint32_t *lanes)
{
	uint32_t caches = pool_caches_used(p);

	for (uint32_t s = 0; s < p->sheaf_count; s++) {
		uint32_t o = at_load_relaxed(&p->owners[s]);
		if (o < used)
			held[o]++;
	}
	for (uint32_t l = 0, nl = pool_lanes_used(p); l < nl; l++) {
		const struct shm_lane *ln = &p->lanes[l];
		uint32_t c = pool_lane_holder(p, ln);

		if (c >= used)
			continue;
		lanes[c]++;
		if (!pool_lane_ready(ln))
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

void rpc_clients(struct daemon *d, const struct rpc_call *call, struct reply *rp)
{
	struct shm_pool *p = &d->pool;
	Sheaf__V1__ClientsResponse *cr = ARENA_NEW(&rp->a, Sheaf__V1__ClientsResponse,
					     SHEAF__V1__CLIENTS_RESPONSE__INIT);
	uint32_t used = pool_clients_used(p), caches = pool_caches_used(p);
	uint64_t *held = arena_alloc(&rp->a, (used + 1) * sizeof(*held));
	int64_t *in_use = arena_alloc(&rp->a, (used + 1) * sizeof(*in_use));
	uint32_t *lanes = arena_alloc(&rp->a, (used + 1) * sizeof(*lanes));
	/* Owned caches' objects by owner tag (shm/owner.h): a snapshot,
	 * [client * caches + cache], then kept[cache]. */
	size_t nown = ((size_t)used + 1) * caches + 1;
	uint64_t *owned = arena_alloc(&rp->a, nown * sizeof(*owned)), *kept;

	(void)call;
	if (cr == NULL || held == NULL || in_use == NULL || lanes == NULL || owned == NULL ||
	    (cr->clients = arena_alloc(&rp->a, (used + 1) * sizeof(void *))) == NULL)
		goto oom;
	kept = owned + (size_t)used * caches;
	memset(owned, 0, nown * sizeof(*owned));
	owner_count(p, owned, kept, used, caches);
	if (owned_list(d, rp, kept, &cr->kept, &cr->n_kept) != 0)
		goto oom;
	memset(held, 0, (used + 1) * sizeof(*held));
	memset(in_use, 0, (used + 1) * sizeof(*in_use));
	memset(lanes, 0, (used + 1) * sizeof(*lanes));
	client_tallies(p, used, held, in_use, lanes);
	for (uint32_t c = 0; c < used; c++) {
		const struct shm_client *sc = &p->clients[c];
		Sheaf__V1__ClientInfo *ci;

		uint32_t st = at_load_acquire((_Atomic uint32_t *)&sc->state);

		if (st != CLIENT_LIVE && st != CLIENT_REVOKED)
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
		ci->lanes = lanes[c];
		ci->revoked = st == CLIENT_REVOKED;
		ci->revoked_at = st == CLIENT_REVOKED ? sc->revoked_at : 0;
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
