/*
 * registry.c - sheafd's attached clients: who may attach (SO_PEERCRED
 * against the allow lists), attaching (a client slot in the region, at
 * most max_clients_per_uid per uid, and a pidfd on the process), and the
 * repair when the process is gone (held back while a pool check runs:
 * daemon_after_check).
 *
 * Death detection: the control connection's EOF alone is not proof (the
 * process may have leaked the socket to a child, or closed it and lived
 * on); the pidfd taken at attach is.  When it turns readable the process
 * has exited, so no thread of it can touch the region any more: then
 * engine_reclaim_client repairs its ring operations and takes its sheaves
 * back.  Objects it allocated and did not free stay allocated (another
 * process may hold them); the counters of its lanes keep them counted.
 *
 * Revocation (daemon_revoke): a client caught at what libsheaf never does,
 * on its own connection (the one thing sheafd can pin on a client with
 * certainty), is repaired at once as if dead, its slot kept CLIENT_REVOKED
 * (META: it survives a restart), every later request of its connections
 * refused, and its uid's attaches refused for revoke_ban seconds.  The slot
 * is freed once its process is gone and the ban is over.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "daemon.h"
#include "log.h"
#include "shm/lanes.h"
#include "shm/engine/clients.h"

/* A peer is allowed when its uid is listed, or its primary group or one
 * of its supplementary groups is. */
int peer_allowed(const struct daemon *d, const struct conn_info *peer)
{
	for (uint32_t i = 0; i < d->cfg.n_uid; i++)
		if (d->cfg.allow_uid[i] == peer->uid)
			return 1;
	for (uint32_t i = 0; i < d->cfg.n_gid; i++) {
		if (d->cfg.allow_gid[i] == peer->gid)
			return 1;
		for (int k = 0; k < peer->ngroups; k++)
			if (d->cfg.allow_gid[i] == peer->groups[k])
				return 1;
	}
	return 0;
}

uint32_t daemon_live_clients(const struct daemon *d)
{
	uint32_t n = 0;

	for (uint32_t c = 0, used = pool_clients_used(&d->pool); c < used; c++)
		n += at_load_acquire(&d->pool.clients[c].state) == CLIENT_LIVE;
	return n;
}

static void watch_free(struct watch *w)
{
	struct daemon *d = w->d;
	struct watch **pp;

	for (pp = &d->watches; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	}
	event_free(w->ev);
	close(w->pidfd);
	free(w);
}

uint32_t daemon_lanes_per_client(const struct daemon *d)
{
	uint32_t v = d->cfg.max_threads_per_client;

	return v != 0 ? v : CONFIG_LANES_PER_CLIENT(d->pool.max_lanes);
}

uint32_t daemon_lanes_per_uid(const struct daemon *d)
{
	uint32_t v = d->cfg.max_threads_per_uid;

	return v != 0 ? v : CONFIG_LANES_PER_UID(d->pool.max_lanes);
}

/* Whether revoked slot @sc still bans its uid at @now. */
static int ban_holds(const struct daemon *d, const struct shm_client *sc, uint64_t now)
{
	return now < sc->revoked_at + d->cfg.revoke_ban_s;
}

static struct watch *watch_find(struct daemon *d, int client);

/* Free the revoked slots whose process is gone (no watch) and whose ban
 * is over. */
static void revoked_sweep(struct daemon *d)
{
	uint64_t now = (uint64_t)time(NULL);

	for (uint32_t c = 0, used = pool_clients_used(&d->pool); c < used; c++) {
		const struct shm_client *sc = &d->pool.clients[c];

		if (at_load_acquire((_Atomic uint32_t *)&sc->state) == CLIENT_REVOKED &&
		    !ban_holds(d, sc, now) && watch_find(d, (int)c) == NULL)
			client_release_revoked(&d->pool, c);
	}
}

static void on_process_exit(evutil_socket_t fd, short what, void *arg)
{
	struct watch *w = arg;
	struct daemon *d = w->d;
	int n;

	(void)fd;
	(void)what;
	if (check_running(d)) {
		w->exited = 1;       /* the repair writes rings the checker walks */
		return;
	}
	/* The connection, if still open (a leaked socket), is done too. */
	for (struct conn *c = d->conns; c != NULL; c = c->next) {
		if (c->peer.client == w->client) {
			c->peer.client = -1;
			c->closing = 1;
			shutdown(c->fd, SHUT_RDWR);
		}
	}
	n = engine_reclaim_client(&d->engine, (uint32_t)w->client);
	d->n.reclaimed++;
	log_info("client %d gone: repaired, %d sheaves returned", w->client, n);
	watch_free(w);
	revoked_sweep(d);
	daemon_status(d);
}

static struct watch *watch_find(struct daemon *d, int client)
{
	for (struct watch *w = d->watches; w != NULL; w = w->next)
		if (w->client == client)
			return w;
	return NULL;
}

/* Watch client @id's process @pid; -ESRCH when it is already gone. */
static int watch_add(struct daemon *d, int id, pid_t pid)
{
	struct watch *w;
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (pidfd < 0)
		return -errno;
	w = calloc(1, sizeof(*w));
	if (w == NULL) {
		close(pidfd);
		return -ENOMEM;
	}
	w->d = d;
	w->client = id;
	w->pidfd = pidfd;
	w->ev = event_new(d->base, pidfd, EV_READ, on_process_exit, w);
	w->next = d->watches;
	d->watches = w;
	event_add(w->ev, NULL);
	return 0;
}

int daemon_attach(struct daemon *d, struct conn_info *peer, const char *name,
		  char *err, size_t errlen)
{
	uint32_t held = 0, cap = d->cfg.max_clients_per_uid, lanes;
	uint64_t now = (uint64_t)time(NULL);
	int id, rc;

	revoked_sweep(d);
	/* One uid may not take every slot from the others (its revoked
	 * slots count: they are not reused while its processes live); a
	 * uid with a client revoked less than revoke_ban ago may not attach. */
	for (uint32_t c = 0, used = pool_clients_used(&d->pool); c < used; c++) {
		const struct shm_client *sc = &d->pool.clients[c];
		uint32_t st = at_load_acquire((_Atomic uint32_t *)&sc->state);

		if (sc->uid != (uint32_t)peer->uid)
			continue;
		held += st == CLIENT_LIVE || st == CLIENT_REVOKED;
		if (st == CLIENT_REVOKED && ban_holds(d, sc, now)) {
			snprintf(err, errlen, "uid %u is banned for %llu s more (client %u "
				 "revoked; revoke_ban)", (unsigned)peer->uid,
				 (unsigned long long)(sc->revoked_at + d->cfg.revoke_ban_s - now), c);
			return -EKEYREVOKED;
		}
	}
	if (cap > 0 && held >= cap) {
		snprintf(err, errlen, "uid %u already holds %u client slots, its most "
			 "(max_clients_per_uid)", (unsigned)peer->uid, held);
		log_warn("pid %d uid %u: attach refused, uid at max_clients_per_uid (%u)",
			 (int)peer->pid, (unsigned)peer->uid, cap);
		return -ENOSPC;
	}
	id = client_attach(&d->pool, (uint32_t)peer->pid, (uint32_t)peer->uid, name);
	if (id < 0) {
		snprintf(err, errlen, "all %u client slots are in use (max_clients)",
			 d->pool.max_clients);
		return id;
	}
	rc = watch_add(d, id, peer->pid);
	if (rc != 0) {
		client_detach(&d->pool, (uint32_t)id);
		snprintf(err, errlen, "pidfd_open(%d): %s", (int)peer->pid, strerror(-rc));
		return rc;
	}
	peer->client = id;
	d->n.attached++;
	/* A first lane: its first thread starts without a request. */
	lanes = LANE_GRANT_FIRST;
	if (client_lanes_held_uid(&d->pool, (uint32_t)peer->uid) + lanes <= daemon_lanes_per_uid(d))
		client_lanes_grant(&d->pool, (uint32_t)id, lanes);
	log_info("client %d attached: pid %d uid %u name '%s'", id, (int)peer->pid,
		 (unsigned)peer->uid, name ? name : "");
	daemon_status(d);
	return id;
}

int daemon_resume(struct daemon *d, struct conn_info *peer, uint32_t id,
		  char *err, size_t errlen)
{
	const struct shm_client *sc;

	if (id >= pool_clients_used(&d->pool)) {
		snprintf(err, errlen, "no client %u", id);
		return -EINVAL;
	}
	sc = &d->pool.clients[id];
	if (at_load_acquire((_Atomic uint32_t *)&sc->state) == CLIENT_REVOKED &&
	    sc->pid == (uint32_t)peer->pid) {
		snprintf(err, errlen, "client %u was revoked", id);
		return -EKEYREVOKED;
	}
	if (at_load_acquire((_Atomic uint32_t *)&sc->state) != CLIENT_LIVE ||
	    sc->pid != (uint32_t)peer->pid || sc->uid != (uint32_t)peer->uid) {
		snprintf(err, errlen, "client %u is not pid %d's to resume", id, (int)peer->pid);
		return -EINVAL;
	}
	if (watch_find(d, (int)id) == NULL && watch_add(d, (int)id, peer->pid) != 0) {
		snprintf(err, errlen, "pidfd_open(%d): %s", (int)peer->pid, strerror(errno));
		return -ESRCH;
	}
	peer->client = (int)id;
	log_info("client %u resumed: pid %d", id, (int)peer->pid);
	return (int)id;
}

void daemon_watch_existing(struct daemon *d)
{
	for (uint32_t id = 0, used = pool_clients_used(&d->pool); id < used; id++) {
		const struct shm_client *sc = &d->pool.clients[id];
		uint32_t st = at_load_acquire((_Atomic uint32_t *)&sc->state);
		int n;

		if (st == CLIENT_REVOKED) {
			/* Its ban is in its slot; watch it so that what it
			 * grabbed since is taken back when it ends. */
			if (watch_add(d, (int)id, (pid_t)sc->pid) != 0)
				engine_reclaim_client(&d->engine, id);
			continue;
		}
		if (st != CLIENT_LIVE)
			continue;
		if (watch_add(d, (int)id, (pid_t)sc->pid) == 0) {
			log_info("client %u (pid %u) carried over from the previous daemon",
				 id, sc->pid);
			continue;
		}
		n = engine_reclaim_client(&d->engine, id);
		d->n.reclaimed++;
		log_info("client %u (pid %u) died while no daemon ran: repaired, %d sheaves "
			 "returned", id, sc->pid, n);
	}
}

void daemon_unwatch_all(struct daemon *d)
{
	while (d->watches != NULL)
		watch_free(d->watches);
}

/* Whether client @id holds any sheaf, or a lane a thread still uses. */
static int client_holds_anything(const struct daemon *d, uint32_t id)
{
	const struct shm_pool *p = &d->pool;

	for (uint32_t s = 0; s < p->sheaf_count; s++)
		if (at_load_relaxed(&p->owners[s]) == id)
			return 1;
	/* Idle lanes (their thread returned everything) do not count. */
	for (uint32_t l = 0, used = pool_lanes_used(p); l < used; l++)
		if (pool_lane_holder(p, &p->lanes[l]) == id &&
		    at_load_acquire(&p->lanes[l].busy))
			return 1;
	return 0;
}

void daemon_client_gone(struct daemon *d, struct conn *c)
{
	struct watch *w = watch_find(d, c->peer.client);

	/*
	 * sheaf_disconnect returns the caller's sheaves and lane, unmaps the
	 * pool, then closes: a client that holds nothing when its connection
	 * ends is done with the pool, and its slot is free at once.  One that
	 * still holds sheaves (other threads, or a crash) is repaired when
	 * its process ends (on_process_exit).
	 */
	if (w != NULL && check_running(d)) {
		w->detach_pending = 1;   /* decided when the check is over */
	} else if (w != NULL && !client_holds_anything(d, (uint32_t)c->peer.client)) {
		engine_reclaim_client(&d->engine, (uint32_t)c->peer.client);
		log_info("client %d detached", c->peer.client);
		watch_free(w);
		daemon_status(d);
	} else {
		log_debug("client %d closed its connection; repair when pid %d ends",
			  c->peer.client, (int)c->peer.pid);
	}
	c->peer.client = -1;
}

/* Whether a connection speaks for client @id (it resumed meanwhile). */
static int client_connected(const struct daemon *d, int id)
{
	for (const struct conn *c = d->conns; c != NULL; c = c->next)
		if (c->peer.client == id)
			return 1;
	return 0;
}

void daemon_after_check(struct daemon *d)
{
	struct watch *w, *next;

	for (w = d->watches; w != NULL; w = next) {
		next = w->next;
		if (w->exited) {
			on_process_exit(w->pidfd, EV_READ, w);      /* frees w */
		} else if (w->detach_pending) {
			w->detach_pending = 0;
			if (!client_connected(d, w->client) &&
			    !client_holds_anything(d, (uint32_t)w->client)) {
				engine_reclaim_client(&d->engine, (uint32_t)w->client);
				log_info("client %d detached", w->client);
				watch_free(w);
				daemon_status(d);
			}
		}
	}
}

void daemon_revoke(struct daemon *d, int id, const char *why)
{
	const struct shm_client *sc = &d->pool.clients[id];
	int n;

	/* Its connections: every later request refused (rpc.c). */
	for (struct conn *c = d->conns; c != NULL; c = c->next) {
		if (c->peer.client == id) {
			c->peer.revoked = 1;
			c->peer.client = -1;
		}
	}
	n = engine_revoke_client(&d->engine, (uint32_t)id, (uint64_t)time(NULL));
	d->n.revoked++;
	log_warn("client %d (pid %u uid %u) revoked: %s; %d sheaves and its lanes taken back, "
		 "attach refused for uid %u for %u s", id, sc->pid, sc->uid, why, n, sc->uid,
		 d->cfg.revoke_ban_s);
	daemon_status(d);
}
