/*
 * queues.c - `sheafctl queues` (the shared queues: capacity, depth,
 * enqueue/dequeue/wait counters; a QueueList request), and the queues'
 * part of `stats -o json` and `metrics` (from the Stats reply, which
 * carries every queue when no cache is named).
 */
#include <getopt.h>
#include <string.h>
#include <stddef.h>
#include "client/sheafctl/sheafctl.h"

void jw_queue_info(struct jw *w, const char *key, const Sheaf__V1__QueueInfo *qi)
{
	jw_obj(w, key);
	jw_u64(w, "id", qi->id);
	jw_str(w, "name", qi->name);
	jw_u64(w, "capacity", qi->capacity);
	jw_u64(w, "depth", qi->depth);
	jw_u64(w, "enqueued", qi->enqueued);
	jw_u64(w, "dequeued", qi->dequeued);
	jw_u64(w, "dequeue_waits", qi->dequeue_waits);
	jw_u64(w, "enqueue_waits", qi->enqueue_waits);
	jw_u64(w, "dropped", qi->dropped);
	jw_u64(w, "generation", qi->generation);
	jw_u64(w, "created_at", qi->created_at);
	jw_end(w, '}');
}

void stats_json_queues(struct jw *w, const struct stats_set *s)
{
	jw_arr(w, "queues");
	for (size_t r = 0; r < s->n_resp; r++)
		for (size_t i = 0; i < s->resp[r]->stats->n_queues; i++)
			jw_queue_info(w, NULL, s->resp[r]->stats->queues[i]);
	jw_end(w, ']');
}

/* One gauge or counter family over every queue of @s. */
static void queue_family(const struct stats_set *s, const char *name, const char *type,
			 const char *help, size_t field)
{
	int header = 0;

	for (size_t r = 0; r < s->n_resp; r++) {
		for (size_t i = 0; i < s->resp[r]->stats->n_queues; i++) {
			const Sheaf__V1__QueueInfo *qi = s->resp[r]->stats->queues[i];

			if (!header) {
				printf("# HELP sheaf_queue_%s %s\n# TYPE sheaf_queue_%s %s\n",
				       name, help, name, type);
				header = 1;
			}
			printf("sheaf_queue_%s{queue=\"", name);
			for (const char *p = qi->name; *p != '\0'; p++) {
				if (*p == '\\' || *p == '"')
					putchar('\\');
				if (*p == '\n')
					fputs("\\n", stdout);
				else
					putchar(*p);
			}
			printf("\"} %llu\n",
			       (unsigned long long)*(const uint64_t *)((const char *)qi + field));
		}
	}
}

void metrics_queues(const struct stats_set *s)
{
	queue_family(s, "depth", "gauge", "Objects in the shared queue now.",
		     offsetof(Sheaf__V1__QueueInfo, depth));
	queue_family(s, "enqueued_total", "counter", "Objects enqueued since creation.",
		     offsetof(Sheaf__V1__QueueInfo, enqueued));
	queue_family(s, "dequeued_total", "counter", "Objects dequeued since creation.",
		     offsetof(Sheaf__V1__QueueInfo, dequeued));
	queue_family(s, "dequeue_waits_total", "counter",
		     "Times a consumer slept on the empty queue.",
		     offsetof(Sheaf__V1__QueueInfo, dequeue_waits));
	queue_family(s, "enqueue_waits_total", "counter",
		     "Times a producer slept on the full queue.",
		     offsetof(Sheaf__V1__QueueInfo, enqueue_waits));
	queue_family(s, "dropped_total", "counter",
		     "Spoiled slots a dequeue skipped.",
		     offsetof(Sheaf__V1__QueueInfo, dropped));
}

static int queues_opt(void *arg, int opt, const char *val)
{
	(void)val;
	if (opt == 'j')
		((struct ctl *)arg)->json = 1;
	return CTL_OK;
}

int cmd_queues(struct ctl *c, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	Sheaf__V1__QueueListRequest body = SHEAF__V1__QUEUE_LIST_REQUEST__INIT;
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__Response *r;
	const Sheaf__V1__QueueListResponse *l;
	int first, rc = ctl_getopt(c, argc, argv, "", lo, 0, queues_opt, c, &first);

	if (rc != CTL_OK)
		return rc;
	if (first < argc)
		return ctl_usage(c, "unexpected argument '%s'", argv[first]);
	rq.body_case = SHEAF__V1__REQUEST__BODY_QUEUE_LIST;
	rq.queue_list = &body;
	if ((rc = ctl_call_or_say(c, &rq, &r)) != CTL_OK)
		return rc;
	l = r->queue_list;
	if (c->json) {
		struct jw w;

		jw_init(&w, stdout, 1);
		jw_obj(&w, NULL);
		jw_arr(&w, "queues");
		for (size_t i = 0; i < l->n_queues; i++)
			jw_queue_info(&w, NULL, l->queues[i]);
		jw_end(&w, ']');
		jw_end(&w, '}');
		jw_done(&w);
	} else {
		printf("%-24s %9s %9s %14s %14s %10s %10s %8s\n", "QUEUE", "CAPACITY", "DEPTH",
		       "ENQUEUED", "DEQUEUED", "DEQ_WAITS", "ENQ_WAITS", "DROPPED");
		for (size_t i = 0; i < l->n_queues; i++) {
			const Sheaf__V1__QueueInfo *q = l->queues[i];
			char nb[CTL_ESC_MAX];

			printf("%-24s %9u %9llu %14llu %14llu %10llu %10llu %8llu\n",
			       ctl_esc(nb, q->name),
			       q->capacity, (unsigned long long)q->depth,
			       (unsigned long long)q->enqueued, (unsigned long long)q->dequeued,
			       (unsigned long long)q->dequeue_waits,
			       (unsigned long long)q->enqueue_waits,
			       (unsigned long long)q->dropped);
		}
	}
	ctl_free(r);
	return CTL_OK;
}
