/*
 * registry.c - sheafd's attached clients: who may attach (SO_PEERCRED
 * against the allow lists), attaching (a client slot in the region and a
 * pidfd on the process), and the repair when the process is gone.
 *
 * Death detection: the control connection's EOF alone is not proof (the
 * process may have leaked the socket to a child, or closed it and lived
 * on); the pidfd taken at attach is.  When it turns readable the process
 * has exited, so no thread of it can touch the region any more: then
 * engine_reclaim_client repairs its ring operations and takes its sheaves
 * back.  Objects it allocated and did not free stay allocated (another
 * process may hold them); the counters of its lanes keep them counted.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "daemon.h"
#include "log.h"
#include "shm/clients.h"

int peer_allowed(const struct daemon *d, uid_t uid, gid_t gid)
{
	for (uint32_t i = 0; i < d->cfg.n_uid; i++)
		if (d->cfg.allow_uid[i] == uid)
			return 1;
	for (uint32_t i = 0; i < d->cfg.n_gid; i++)
		if (d->cfg.allow_gid[i] == gid)
			return 1;
	return 0;
}

uint32_t daemon_live_clients(const struct daemon *d)
{
	uint32_t n = 0;

	for (uint32_t c = 0; c < SHEAF_MAX_CLIENTS; c++)
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

static void on_process_exit(evutil_socket_t fd, short what, void *arg)
{
	struct watch *w = arg;
	struct daemon *d = w->d;
	int n;

	(void)fd;
	(void)what;
	/* The connection, if still open (a leaked socket), is done too. */
	for (struct conn *c = d->conns; c != NULL; c = c->next) {
		if (c->client == w->client) {
			c->client = -1;
			c->closing = 1;
			shutdown(c->fd, SHUT_RDWR);
		}
	}
	n = engine_reclaim_client(&d->engine, (uint32_t)w->client);
	d->n.reclaimed++;
	log_info("client %d gone: repaired, %d sheaves returned", w->client, n);
	watch_free(w);
}

int daemon_attach(struct daemon *d, struct conn *c, const char *name,
		  char *err, size_t errlen)
{
	struct watch *w;
	int id, pidfd;

	pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0);
	if (pidfd < 0) {
		snprintf(err, errlen, "pidfd_open(%d): %s", (int)c->pid, strerror(errno));
		return -ESRCH;
	}
	w = calloc(1, sizeof(*w));
	if (w == NULL) {
		close(pidfd);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	id = client_attach(&d->pool, (uint32_t)c->pid, (uint32_t)c->uid, name);
	if (id < 0) {
		close(pidfd);
		free(w);
		snprintf(err, errlen, "all %u client slots are in use", SHEAF_MAX_CLIENTS);
		return id;
	}
	w->d = d;
	w->client = id;
	w->pidfd = pidfd;
	w->ev = event_new(d->base, pidfd, EV_READ, on_process_exit, w);
	w->next = d->watches;
	d->watches = w;
	event_add(w->ev, NULL);
	c->client = id;
	d->n.attached++;
	log_info("client %d attached: pid %d uid %u name '%s'", id, (int)c->pid,
		 (unsigned)c->uid, name ? name : "");
	return id;
}

void daemon_client_gone(struct daemon *d, struct conn *c)
{
	(void)d;
	/* The repair waits for the process to end (on_process_exit). */
	log_debug("client %d closed its connection", c->client);
	c->client = -1;
}
