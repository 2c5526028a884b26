/*
 * main.c - sheafd: parse the configuration, create the pool and its engine
 * (one worker per NUMA node), serve the control socket with libevent until
 * SIGTERM/SIGINT; SIGHUP re-reads the configuration file.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "daemon.h"
#include "log.h"

static void on_stop(evutil_socket_t sig, short what, void *arg)
{
	struct daemon *d = arg;

	(void)what;
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
	if (config_reload(&d->cfg, err, sizeof(err)) != 0) {
		log_err("reload: %s (keeping the old settings)", err);
		return;
	}
	log_threshold = (enum log_level)d->cfg.log_level;
	log_info("configuration reloaded: log level %s, %u uids, %u gids allowed",
		 log_level_name(log_threshold), d->cfg.n_uid, d->cfg.n_gid);
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

int main(int argc, char **argv)
{
	static struct daemon d;
	struct pool_params pp = { 0 };
	char err[256];
	int rc, sigs[3] = { SIGTERM, SIGINT, SIGHUP };

	rc = config_from_args(&d.cfg, argc, argv, err, sizeof(err));
	if (rc != 0) {
		if (rc < 0)
			fprintf(stderr, "sheafd: %s\n", err);
		return rc < 0 ? 2 : 0;
	}
	log_threshold = (enum log_level)d.cfg.log_level;
	signal(SIGPIPE, SIG_IGN);
	d.listen_fd = d.lock_fd = -1;
	d.started = time(NULL);
	d.base = event_base_new();
	if (d.base == NULL) {
		fprintf(stderr, "sheafd: event_base_new failed\n");
		return 1;
	}
	if (server_listen(&d, err, sizeof(err)) != 0) {
		fprintf(stderr, "sheafd: %s\n", err);
		return 1;
	}
	pp.size = d.cfg.size;
	pp.nodes = d.cfg.nodes;
	pp.sheaf_count = d.cfg.sheaves;
	pp.mem_cap = d.cfg.mem_cap;
	rc = pool_create(&d.pool, &pp, err, sizeof(err));
	if (rc == 0)
		rc = engine_init(&d.engine, &d.pool, err, sizeof(err));
	/* Detach before any thread starts: fork keeps only the caller. */
	if (rc == 0 && !d.cfg.foreground && detach() != 0) {
		snprintf(err, sizeof(err), "cannot detach: %s", strerror(errno));
		rc = -1;
	}
	if (rc == 0)
		rc = engine_start(&d.engine, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "sheafd: %s\n", err);
		server_close_all(&d);
		return 1;
	}
	for (int i = 0; i < 3; i++) {
		d.ev_signal[i] = evsignal_new(d.base, sigs[i], sigs[i] == SIGHUP ? on_hup : on_stop, &d);
		event_add(d.ev_signal[i], NULL);
	}
	log_info("serving %s: pool %llu MiB (%u %s node%s, %u sheaves), pid %d",
		 d.cfg.socket, (unsigned long long)(d.pool.data_len >> 20), d.pool.nodes,
		 d.pool.hdr->simulated ? "simulated" : "NUMA", d.pool.nodes == 1 ? "" : "s",
		 d.pool.sheaf_count, (int)getpid());
	event_base_dispatch(d.base);

	server_close_all(&d);
	while (d.watches != NULL) {
		struct watch *w = d.watches;
		d.watches = w->next;
		event_free(w->ev);
		close(w->pidfd);
		free(w);
	}
	for (int i = 0; i < 3; i++)
		event_free(d.ev_signal[i]);
	engine_fini(&d.engine);
	pool_unmap(&d.pool);
	event_base_free(d.base);
	log_info("stopped");
	return 0;
}
