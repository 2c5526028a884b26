/*
 * check.c - the pool check off the event loop (daemon.h): Check stops the
 * engine (the checker needs it quiet) and walks every slab on a thread of
 * its own; an eventfd tells the event loop when it is done, which then
 * restarts the engine, lets go the repairs of clients that ended
 * (registry.c) and hands the packed reply to the completion registered
 * with check_on_done, which sends it and lets the held requests go.  This
 * file never calls into the socket layer.  One check at a time: a second
 * waits like any request that changes the pool.  Who may call: rpc_pool.c
 * (check_start), rpc.c and registry.c (check_running), server.c
 * (check_on_done), main.c (check_fini).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include "daemon.h"
#include "log.h"

struct check_job {
	struct daemon *d;
	pthread_t thr;
	int efd;                     /* the thread's "done" (eventfd) */
	struct event *ev;
	int running;
	uint64_t id;                 /* the Check request's id */
	int cache;                   /* the cache it names, -1: the pool */
	int rc;                      /* pool_check's result, read after join */
	struct check_report rep;
	char err[256];
	check_done_fn *done;         /* check_on_done's, or NULL */
};

int check_running(const struct daemon *d)
{
	return d->check != NULL && d->check->running;
}

static void *check_main(void *arg)
{
	struct check_job *j = arg;
	uint64_t one = 1;

	j->err[0] = '\0';
	j->rc = j->cache < 0 ? pool_check(&j->d->pool, -1, -1, &j->rep, j->err, sizeof(j->err))
			     : pool_check_cache(&j->d->pool, (uint32_t)j->cache, &j->rep, j->err,
						sizeof(j->err));
	while (write(j->efd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
	return NULL;
}

/* Join the thread and restart the engine. */
static void check_join(struct check_job *j)
{
	char msg[128];

	pthread_join(j->thr, NULL);
	j->running = 0;
	if (engine_start(&j->d->engine, msg, sizeof(msg)) != 0)
		log_err("restarting workers after check: %s", msg);
}

static void on_check_done(evutil_socket_t fd, short what, void *arg)
{
	struct check_job *j = arg;
	struct daemon *d = j->d;
	struct rpc_out out;
	uint64_t v;

	(void)what;
	if (read(fd, &v, sizeof(v)) < 0 || !j->running)
		return;
	check_join(j);
	if (rpc_check_reply(d, j->id, j->cache, j->rc, &j->rep, j->err, &out) != 0)
		log_err("pool check: out of memory for the reply");
	daemon_after_check(d);
	if (j->done != NULL)
		j->done(d, &out);
	rpc_out_free(&out);
}

/* The job, its eventfd and event: made at the first check, kept. */
static struct check_job *job_of(struct daemon *d)
{
	struct check_job *j = d->check;

	if (j != NULL)
		return j;
	j = calloc(1, sizeof(*j));
	if (j == NULL)
		return NULL;
	j->d = d;
	j->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (j->efd < 0) {
		free(j);
		return NULL;
	}
	j->ev = event_new(d->base, j->efd, EV_READ | EV_PERSIST, on_check_done, j);
	if (j->ev == NULL) {
		close(j->efd);
		free(j);
		return NULL;
	}
	event_add(j->ev, NULL);
	d->check = j;
	return j;
}

int check_start(struct daemon *d, uint64_t id, int cache)
{
	struct check_job *j = job_of(d);
	int rc;

	if (j == NULL)
		return -ENOMEM;
	if (j->running)
		return -EBUSY;
	engine_stop(&d->engine);
	j->id = id;
	j->cache = cache;
	j->running = 1;
	rc = engine_thread_create(&j->thr, check_main, j);
	if (rc != 0) {
		j->running = 0;
		log_warn("pool check thread: %s (checking inline)", strerror(rc));
		return -rc;          /* the caller checks inline, restarting it */
	}
	return 0;
}

void check_on_done(struct daemon *d, check_done_fn *done)
{
	if (d->check != NULL)
		d->check->done = done;
}

void check_fini(struct daemon *d)
{
	struct check_job *j = d->check;

	if (j == NULL)
		return;
	if (j->running)
		check_join(j);
	event_free(j->ev);
	close(j->efd);
	free(j);
	d->check = NULL;
}
