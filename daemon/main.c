/*
 * main.c - sheafd: parse the configuration, create (or adopt) the pool and
 * its engine (one worker per NUMA node), serve the control socket with
 * libevent until SIGTERM/SIGINT; SIGHUP re-reads the configuration file.
 *
 * Under systemd (notify.h): the listening socket may come from socket
 * activation; the pool's two memfds are handed to the fd store (FDSTORE=1,
 * FDNAME=pool-meta and FDNAME=pool-shared) and, when a restarted sheafd
 * finds both among its passed descriptors, it adopts that pool
 * (engine_adopt) instead of creating one, so attached clients keep their
 * objects; a stored pool of another layout version is dropped from the
 * store and a new one made.  READY/STATUS/RELOADING/STOPPING
 * and WATCHDOG (at half of WATCHDOG_USEC) are sent as the protocol asks.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "daemon.h"
#include "log.h"
#include "notify.h"
#include "numa_log.h"
#include "refusal_log.h"

static void on_stop(evutil_socket_t sig, short what, void *arg)
{
	struct daemon *d = arg;

	(void)what;
	notify_send("STOPPING=1", -1);
	log_info("signal %d: stopping (%u clients attached)", (int)sig,
		 daemon_live_clients(d));
	event_base_loopexit(d->base, NULL);
}

static void on_hup(evutil_socket_t sig, short what, void *arg)
{
	struct daemon *d = arg;
	char err[256];

	(void)sig;
	(void)what;
	notify_send("RELOADING=1", -1);
	if (config_reload(&d->cfg, err, sizeof(err)) != 0) {
		log_err("reload: %s (keeping the old settings)", err);
	} else {
		log_threshold = (enum log_level)d->cfg.log_level;
		log_info("configuration reloaded: log level %s, %u uids, %u gids allowed",
			 log_level_name(log_threshold), d->cfg.n_uid, d->cfg.n_gid);
	}
	notify_send("READY=1", -1);
	daemon_status(d);
}

/* Slab memory moves without any event: refresh STATUS= now and then. */
#define STATUS_REFRESH_S 5

static void on_status(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	daemon_status(arg);
}

static void on_watchdog(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	notify_send("WATCHDOG=1", -1);
}

static int detach(void)
{
	pid_t pid = fork();
	int fd;

	if (pid < 0)
		return -1;
	if (pid > 0)
		_exit(0);
	if (setsid() < 0)
		return -1;
	fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	return 0;
}

/* Close a stored descriptor that cannot be adopted, and have systemd drop
 * it (and any other of its name) from the fd store. */
static void store_drop(int fd, const char *name, const char *why)
{
	char msg[96];

	log_warn("fd store: dropping descriptor %d (FDNAME=%s): %s", fd,
		 name[0] ? name : "(none)", why);
	if (name[0] != '\0') {
		snprintf(msg, sizeof(msg), "FDSTOREREMOVE=1\nFDNAME=%s", name);
		notify_send(msg, -1);
	}
	close(fd);
}

/* An unnamed stored memfd is META when it starts with a pool header. */
static int starts_with_magic(int fd)
{
	uint64_t magic = 0;

	return pread(fd, &magic, sizeof(magic), 0) == (ssize_t)sizeof(magic) &&
	       magic == SHEAF_MAGIC;
}

/*
 * Sort the descriptors systemd passed: a listening socket, and the pool's
 * META and SHARED memfds kept in the fd store (named "pool-meta" and
 * "pool-shared"; unnamed ones told apart by META's header).  Any other
 * memfd (such as "pool": a whole region stored by a sheafd of layout 2),
 * or one of the pair without the other, cannot be adopted and is dropped.
 */
static void passed_fds(int *listen_fd, int *meta_fd, int *shared_fd)
{
	int n = activation_fds();
	char name[64], meta_name[64] = "", shared_name[64] = "";

	*listen_fd = *meta_fd = *shared_fd = -1;
	for (int i = 0; i < n; i++) {
		int fd = ACTIVATION_FD_START + i, acc = 0, *slot;
		socklen_t len = sizeof(acc);

		activation_fd_name(i, name, sizeof(name));
		if (strncmp(name, "pool", 4) != 0 &&
		    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &len) == 0) {
			if (acc && *listen_fd < 0)
				*listen_fd = fd;
			continue;
		}
		if (fcntl(fd, F_GET_SEALS) < 0)
			continue;
		if (strcmp(name, "pool-meta") == 0 || (name[0] == '\0' && starts_with_magic(fd)))
			slot = meta_fd;
		else if (strcmp(name, "pool-shared") == 0 || name[0] == '\0')
			slot = shared_fd;
		else {
			store_drop(fd, name, "not a pool memfd of this sheafd's layout");
			continue;
		}
		if (*slot >= 0) {
			store_drop(fd, name, "a second memfd of the same part");
			continue;
		}
		*slot = fd;
		snprintf(slot == meta_fd ? meta_name : shared_name, sizeof(name), "%s", name);
	}
	if ((*meta_fd < 0) != (*shared_fd < 0)) {
		if (*meta_fd >= 0)
			store_drop(*meta_fd, meta_name, "the pool's SHARED memfd is missing");
		else
			store_drop(*shared_fd, shared_name, "the pool's META memfd is missing");
		*meta_fd = *shared_fd = -1;
	}
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
}

static int make_pool(struct daemon *d, int meta_fd, int shared_fd, char *err, size_t errlen)
{
	struct pool_params pp = { 0 };
	int rc;

	if (meta_fd >= 0) {
		rc = pool_map_fds(&d->pool, meta_fd, shared_fd, 0, 0, err, errlen);
		if (rc == -EPROTO) {
			/* A pool of another layout (a sheafd of another version
			 * stored it): it cannot be adopted, now or at the next
			 * restart.  Dropped from the store, and a new pool made,
			 * rather than a restart loop on the same descriptors. */
			char why[320];

			snprintf(why, sizeof(why), "a pool of another layout (%s)", err);
			store_drop(meta_fd, "pool-meta", why);
			store_drop(shared_fd, "pool-shared", why);
			log_warn("the stored pool cannot be adopted: a new pool is made; "
				 "its clients must attach again");
			meta_fd = -1;
		} else if (rc != 0) {
			return rc;
		}
	}
	if (meta_fd >= 0) {
		rc = engine_adopt(&d->pool);
		if (rc < 0) {
			snprintf(err, errlen, "adopting the pool: %s", strerror(-rc));
			pool_unmap(&d->pool);
			return rc;
		}
		d->adopted = 1;
		log_info("adopted the pool from the fd store: %d sheaves of the previous "
			 "engine recovered", rc);
		if (d->pool.max_clients != d->cfg.max_clients ||
		    d->pool.max_lanes != d->cfg.max_threads ||
		    d->pool.max_caches != d->cfg.max_caches)
			log_info("the adopted pool keeps its limits (%u clients, %u threads, "
				 "%u caches); the configured ones apply to a new pool",
				 d->pool.max_clients, d->pool.max_lanes, d->pool.max_caches);
		return 0;
	}
	pp.max_clients = d->cfg.max_clients;
	pp.max_lanes = d->cfg.max_threads;
	pp.max_caches = d->cfg.max_caches;
	pp.size = d->cfg.size;
	pp.nodes = d->cfg.nodes;
	pp.sheaf_count = d->cfg.sheaves;
	pp.mem_cap = d->cfg.mem_cap;
	/* Each daemon's pool at an address of its own (a hash of its socket
	 * path picks the slot), so that one process can attach to the pools
	 * of several daemons; an adopted pool keeps the address its header
	 * records.  FNV-1a. */
	pp.addr_seed = 0xcbf29ce484222325ull;
	for (const char *c = d->cfg.socket; c != NULL && *c; c++)
		pp.addr_seed = (pp.addr_seed ^ (unsigned char)*c) * 0x100000001b3ull;
	pp.huge = d->cfg.huge_pages;
	pp.numa_policy = d->cfg.numa_policy;
	rc = pool_create(&d->pool, &pp, err, errlen);
	/* try (the default) without them: the usual case, not a warning. */
	if (rc == 0 && d->pool.huge_note[0] != '\0')
		log_info("%s", d->pool.huge_note);
	else if (rc == 0 && d->pool.hdr->huge_pages)
		log_info("object data asks for 2 MiB pages (shmem THP)");
	return rc;
}

/* Signals and the watchdog timer: the last things set up before serving. */
static void add_events(struct daemon *d)
{
	static const int sigs[3] = { SIGTERM, SIGINT, SIGHUP };
	uint64_t wd = notify_watchdog_usec();

	for (int i = 0; i < 3; i++) {
		d->ev_signal[i] = evsignal_new(d->base, sigs[i],
					       sigs[i] == SIGHUP ? on_hup : on_stop, d);
		event_add(d->ev_signal[i], NULL);
	}
	if (wd > 0) {
		struct timeval tv = { (time_t)(wd / 2 / 1000000), (suseconds_t)(wd / 2 % 1000000) };
		d->ev_watchdog = event_new(d->base, -1, EV_PERSIST, on_watchdog, d);
		event_add(d->ev_watchdog, &tv);
	}
	if (getenv("NOTIFY_SOCKET") != NULL) {
		struct timeval tv = { STATUS_REFRESH_S, 0 };
		d->ev_status = event_new(d->base, -1, EV_PERSIST, on_status, d);
		event_add(d->ev_status, &tv);
	}
}

static void del_events(struct daemon *d)
{
	if (d->ev_status != NULL)
		event_free(d->ev_status);
	d->ev_status = NULL;
	if (d->ev_watchdog != NULL)
		event_free(d->ev_watchdog);
	d->ev_watchdog = NULL;
	for (int i = 0; i < 3; i++) {
		if (d->ev_signal[i] != NULL)
			event_free(d->ev_signal[i]);
		d->ev_signal[i] = NULL;
	}
}

/*
 * Set up in order: configuration, event base, control socket, pool,
 * engine (started after detaching), signals and client watches; serve; and
 * tear down in the reverse order through the one exit below, which every
 * failure after the configuration jumps into at the step it reached.
 */
int main(int argc, char **argv)
{
	static struct daemon d;
	char err[256];
	int rc, ret = 1, listen_fd, meta_fd, shared_fd;

	rc = config_from_args(&d.cfg, argc, argv, err, sizeof(err));
	if (rc != 0) {
		if (rc < 0)
			fprintf(stderr, "sheafd: %s\n", err);
		return rc < 0 ? 2 : 0;
	}
	log_threshold = (enum log_level)d.cfg.log_level;
	/* A request body of the protocol without its row in rpc.c's table is
	 * a build that cannot serve it: refuse to start. */
	if (rpc_kinds_check(err, sizeof(err)) != 0)
		goto out;
	signal(SIGPIPE, SIG_IGN);
	d.listen_fd = d.lock_fd = -1;
	d.started = time(NULL);
	passed_fds(&listen_fd, &meta_fd, &shared_fd);
	d.base = event_base_new();
	if (d.base == NULL) {
		snprintf(err, sizeof(err), "event_base_new failed");
		goto out;
	}
	if (server_listen(&d, listen_fd, err, sizeof(err)) != 0)
		goto out_base;
	if (make_pool(&d, meta_fd, shared_fd, err, sizeof(err)) != 0)
		goto out_server;
	/* Clients get META only through this descriptor (rpc_clients.c,
	 * Attach). */
	if (pool_meta_readonly_fd(&d.pool, err, sizeof(err)) < 0)
		goto out_pool;
	if (engine_init(&d.engine, &d.pool, err, sizeof(err)) != 0)
		goto out_pool;
	/* Detach before any thread starts: fork keeps only the caller. */
	if (!d.cfg.foreground && detach() != 0) {
		snprintf(err, sizeof(err), "cannot detach: %s", strerror(errno));
		goto out_engine;
	}
	if (engine_start(&d.engine, err, sizeof(err)) != 0)
		goto out_engine;
	add_events(&d);
	refusal_log_start(&d);
	numa_log_start(&d);
	if (d.adopted)
		daemon_watch_existing(&d);
	if (!d.adopted) {       /* an adopted pool's memfds are in the store already */
		notify_send("FDSTORE=1\nFDNAME=pool-meta", d.pool.meta_fd);
		notify_send("FDSTORE=1\nFDNAME=pool-shared", d.pool.shared_fd);
	}
	notify_send("READY=1", -1);
	daemon_status(&d);
	log_info("serving %s: pool %llu MiB (%u %s node%s, %u sheaves)%s, pid %d",
		 d.cfg.socket, (unsigned long long)(d.pool.data_len >> 20), d.pool.nodes,
		 d.pool.hdr->simulated ? "simulated" : "NUMA", d.pool.nodes == 1 ? "" : "s",
		 d.pool.sheaf_count, d.socket_activated ? " (socket activated)" : "",
		 (int)getpid());
	event_base_dispatch(d.base);
	ret = 0;
	check_fini(&d);

	daemon_unwatch_all(&d);
	refusal_log_stop();
	numa_log_stop();
	del_events(&d);
out_engine:
	engine_fini(&d.engine);
out_pool:
	pool_unmap(&d.pool);
out_server:
	server_close_all(&d);
out_base:
	event_base_free(d.base);
out:
	/* The configuration holds nothing to free. */
	if (ret != 0)
		fprintf(stderr, "sheafd: %s\n", err);
	else
		log_info("stopped");
	return ret;
}
