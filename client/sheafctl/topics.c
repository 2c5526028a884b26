/*
 * topics.c - `sheafctl topics` (list, show, create, destroy; TopicList,
 * TopicCreate, TopicDestroy requests), and the topics' part of
 * `stats -o json` and `metrics` (from the Stats reply, which carries every
 * topic when no cache is named).
 */
#include <getopt.h>
#include <stddef.h>
#include <string.h>
#include "client/sheafctl/sheafctl.h"

static const char *policy_name(uint32_t p)
{
	return p == 0 ? "block" : p == 1 ? "drop" : "?";
}

static void jw_topic_sub(struct jw *w, const Sheaf__V1__TopicSubscriber *s)
{
	jw_obj(w, NULL);
	jw_u64(w, "slot", s->slot);
	jw_i64(w, "client", s->client);
	jw_i64(w, "pid", s->pid);
	jw_u64(w, "generation", s->generation);
	jw_u64(w, "delivered", s->delivered);
	jw_u64(w, "released", s->released);
	jw_u64(w, "dropped", s->dropped);
	jw_u64(w, "held", s->held);
	jw_u64(w, "depth", s->depth);
	jw_u64(w, "lag", s->lag);
	jw_u64(w, "waits", s->waits);
	jw_u64(w, "joined_at", s->joined_at);
	jw_end(w, '}');
}

void jw_topic_info(struct jw *w, const char *key, const Sheaf__V1__TopicInfo *ti)
{
	jw_obj(w, key);
	jw_u64(w, "id", ti->id);
	jw_str(w, "name", ti->name);
	jw_u64(w, "capacity", ti->capacity);
	jw_u64(w, "history", ti->history);
	jw_str(w, "policy", policy_name(ti->policy));
	jw_u64(w, "published", ti->published);
	jw_u64(w, "unread", ti->unread);
	jw_u64(w, "publish_waits", ti->publish_waits);
	jw_u64(w, "bad", ti->bad);
	jw_u64(w, "generation", ti->generation);
	jw_u64(w, "created_at", ti->created_at);
	jw_arr(w, "subscribers");
	for (size_t i = 0; i < ti->n_subscribers; i++)
		jw_topic_sub(w, ti->subscribers[i]);
	jw_end(w, ']');
	jw_end(w, '}');
}

void stats_json_topics(struct jw *w, const struct stats_set *s)
{
	jw_arr(w, "topics");
	for (size_t r = 0; r < s->n_resp; r++)
		for (size_t i = 0; i < s->resp[r]->stats->n_topics; i++)
			jw_topic_info(w, NULL, s->resp[r]->stats->topics[i]);
	jw_end(w, ']');
}

static void label(const char *name)
{
	for (const char *p = name; *p != '\0'; p++) {
		if (*p == '\\' || *p == '"')
			putchar('\\');
		if (*p == '\n')
			fputs("\\n", stdout);
		else
			putchar(*p);
	}
}

/* One family over every topic (@sub: over every subscriber, @field an
 * offset in Sheaf__V1__TopicSubscriber, else in Sheaf__V1__TopicInfo). */
static void topic_family(const struct stats_set *s, const char *name, const char *type,
			 const char *help, int sub, size_t field)
{
	int header = 0;

	for (size_t r = 0; r < s->n_resp; r++) {
		for (size_t i = 0; i < s->resp[r]->stats->n_topics; i++) {
			const Sheaf__V1__TopicInfo *ti = s->resp[r]->stats->topics[i];

			for (size_t k = 0; k < (sub ? ti->n_subscribers : 1); k++) {
				const char *base = sub ? (const char *)ti->subscribers[k]
						       : (const char *)ti;

				if (!header) {
					printf("# HELP sheaf_topic_%s %s\n# TYPE sheaf_topic_%s %s\n",
					       name, help, name, type);
					header = 1;
				}
				printf("sheaf_topic_%s{topic=\"", name);
				label(ti->name);
				if (sub)
					printf("\",slot=\"%u", ti->subscribers[k]->slot);
				printf("\"} %llu\n",
				       (unsigned long long)*(const uint64_t *)(base + field));
			}
		}
	}
}

void metrics_topics(const struct stats_set *s)
{
	topic_family(s, "published_total", "counter", "Messages published since creation.", 0,
		     offsetof(Sheaf__V1__TopicInfo, published));
	topic_family(s, "unread_total", "counter", "Messages freed at publish: no reader.", 0,
		     offsetof(Sheaf__V1__TopicInfo, unread));
	topic_family(s, "publish_waits_total", "counter",
		     "Times a publisher slept on a full log.", 0,
		     offsetof(Sheaf__V1__TopicInfo, publish_waits));
	topic_family(s, "delivered_total", "counter", "Messages a subscriber took.", 1,
		     offsetof(Sheaf__V1__TopicSubscriber, delivered));
	topic_family(s, "dropped_total", "counter",
		     "A subscriber's messages a publisher dropped.", 1,
		     offsetof(Sheaf__V1__TopicSubscriber, dropped));
	topic_family(s, "held", "gauge", "Messages a subscriber took and holds.", 1,
		     offsetof(Sheaf__V1__TopicSubscriber, held));
	topic_family(s, "depth", "gauge", "Messages published to a subscriber, not taken.", 1,
		     offsetof(Sheaf__V1__TopicSubscriber, depth));
	topic_family(s, "lag", "gauge", "The topic's tail minus a subscriber's cursor.", 1,
		     offsetof(Sheaf__V1__TopicSubscriber, lag));
}

enum { OPT_TCAP = 0x200, OPT_THIST, OPT_TPOLICY };

struct topics_args {
	struct ctl *c;
	Sheaf__V1__TopicCreateRequest *cr;
	int create_opts;
};

static int topics_opt(void *arg, int opt, const char *val)
{
	struct topics_args *a = arg;
	uint64_t v;

	switch (opt) {
	case OPT_TCAP:
		if (ctl_parse_u64(val, 1, &v) != 0 || v > UINT32_MAX)
			return ctl_usage(a->c, "bad capacity '%s'", val);
		a->cr->capacity = (uint32_t)v;
		break;
	case OPT_THIST:
		if (ctl_parse_u64(val, 0, &v) != 0 || v > UINT32_MAX)
			return ctl_usage(a->c, "bad history '%s'", val);
		a->cr->history = (uint32_t)v;
		break;
	case OPT_TPOLICY:
		if (strcmp(val, "block") == 0)
			a->cr->policy = 0;
		else if (strcmp(val, "drop") == 0)
			a->cr->policy = 1;
		else
			return ctl_usage(a->c, "policy is block or drop, not '%s'", val);
		break;
	default:
		return ctl_usage(a->c, "unexpected option");
	}
	a->create_opts = 1;
	return CTL_OK;
}

static void print_table(const Sheaf__V1__TopicInfo *const *ts, size_t n)
{
	printf("%-24s %9s %7s %6s %5s %14s %10s %10s\n", "TOPIC", "CAPACITY", "HISTORY",
	       "POLICY", "SUBS", "PUBLISHED", "UNREAD", "PUB_WAITS");
	for (size_t i = 0; i < n; i++) {
		char nb[CTL_ESC_MAX];

		printf("%-24s %9u %7u %6s %5zu %14llu %10llu %10llu\n", ctl_esc(nb, ts[i]->name),
		       ts[i]->capacity, ts[i]->history, policy_name(ts[i]->policy),
		       ts[i]->n_subscribers, (unsigned long long)ts[i]->published,
		       (unsigned long long)ts[i]->unread,
		       (unsigned long long)ts[i]->publish_waits);
	}
}

static void print_subs(const Sheaf__V1__TopicInfo *ti)
{
	printf("\n%4s %7s %8s %14s %14s %10s %8s %8s %8s\n", "SLOT", "CLIENT", "PID", "DELIVERED",
	       "RELEASED", "DROPPED", "DEPTH", "HELD", "LAG");
	for (size_t k = 0; k < ti->n_subscribers; k++) {
		const Sheaf__V1__TopicSubscriber *s = ti->subscribers[k];

		printf("%4u %7d %8d %14llu %14llu %10llu %8llu %8llu %8llu\n", s->slot, s->client,
		       s->pid, (unsigned long long)s->delivered, (unsigned long long)s->released,
		       (unsigned long long)s->dropped, (unsigned long long)s->depth,
		       (unsigned long long)s->held, (unsigned long long)s->lag);
	}
}

static int do_list(struct ctl *c, const char *show)
{
	Sheaf__V1__TopicListRequest body = SHEAF__V1__TOPIC_LIST_REQUEST__INIT;
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	const Sheaf__V1__TopicListResponse *l;
	const Sheaf__V1__TopicInfo *one = NULL;
	Sheaf__V1__Response *r;
	int rc;

	rq.body_case = SHEAF__V1__REQUEST__BODY_TOPIC_LIST;
	rq.topic_list = &body;
	if ((rc = ctl_call_or_say(c, &rq, &r)) != CTL_OK)
		return rc;
	l = r->topic_list;
	if (show != NULL) {
		for (size_t i = 0; i < l->n_topics; i++)
			if (strcmp(l->topics[i]->name, show) == 0)
				one = l->topics[i];
		if (one == NULL) {
			ctl_free(r);
			return ctl_err(CTL_REFUSED, "no topic named '%s'", show);
		}
	}
	if (c->json) {
		struct jw w;

		jw_init(&w, stdout, 1);
		if (one != NULL) {
			jw_topic_info(&w, NULL, one);
		} else {
			jw_obj(&w, NULL);
			jw_arr(&w, "topics");
			for (size_t i = 0; i < l->n_topics; i++)
				jw_topic_info(&w, NULL, l->topics[i]);
			jw_end(&w, ']');
			jw_end(&w, '}');
		}
		jw_done(&w);
	} else if (one != NULL) {
		print_table(&one, 1);
		print_subs(one);
	} else {
		print_table((const Sheaf__V1__TopicInfo *const *)l->topics, l->n_topics);
	}
	ctl_free(r);
	return CTL_OK;
}

int cmd_topics(struct ctl *c, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "capacity", required_argument, NULL, OPT_TCAP },
		{ "history", required_argument, NULL, OPT_THIST },
		{ "policy", required_argument, NULL, OPT_TPOLICY },
		{ NULL, 0, NULL, 0 },
	};
	Sheaf__V1__TopicCreateRequest cr = SHEAF__V1__TOPIC_CREATE_REQUEST__INIT;
	struct topics_args a = { c, &cr, 0 };
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__Response *r;
	const char *verb;
	int first, rc = ctl_getopt(c, argc, argv, "", lo, 0, topics_opt, &a, &first);

	if (rc != CTL_OK)
		return rc;
	verb = first < argc ? argv[first] : "list";
	if (strcmp(verb, "create") != 0 && a.create_opts)
		return ctl_usage(c, "--capacity, --history and --policy are create's");
	if (strcmp(verb, "list") == 0) {
		if (first + 1 < argc)
			return ctl_usage(c, "unexpected argument '%s'", argv[first + 1]);
		return do_list(c, NULL);
	}
	if (strcmp(verb, "show") != 0 && strcmp(verb, "create") != 0 &&
	    strcmp(verb, "destroy") != 0)
		return ctl_usage(c, "unknown topics command '%s' (list, show, create, destroy)",
				 verb);
	if (argc - first != 2)
		return argc - first < 2 ? ctl_usage(c, "expected %s NAME", verb)
					: ctl_usage(c, "unexpected argument '%s'", argv[first + 2]);
	if (strcmp(verb, "show") == 0)
		return do_list(c, argv[first + 1]);
	if (strcmp(verb, "create") == 0) {
		cr.name = argv[first + 1];
		rq.body_case = SHEAF__V1__REQUEST__BODY_TOPIC_CREATE;
		rq.topic_create = &cr;
		if ((rc = ctl_call_or_say(c, &rq, &r)) != CTL_OK)
			return rc;
		if (c->json) {
			struct jw w;

			jw_init(&w, stdout, 1);
			jw_obj(&w, NULL);
			jw_topic_info(&w, "topic", r->topic_create->topic);
			jw_end(&w, '}');
			jw_done(&w);
		} else {
			char nb[CTL_ESC_MAX];
			const Sheaf__V1__TopicInfo *ti = r->topic_create->topic;

			printf("created topic %s: capacity %u, history %u, policy %s\n",
			       ctl_esc(nb, ti->name), ti->capacity, ti->history,
			       policy_name(ti->policy));
		}
		ctl_free(r);
		return CTL_OK;
	} else {
		Sheaf__V1__TopicDestroyRequest dr = SHEAF__V1__TOPIC_DESTROY_REQUEST__INIT;

		dr.name = argv[first + 1];
		rq.body_case = SHEAF__V1__REQUEST__BODY_TOPIC_DESTROY;
		rq.topic_destroy = &dr;
		if ((rc = ctl_call_or_say(c, &rq, &r)) != CTL_OK)
			return rc;
		if (c->json) {
			struct jw w;

			jw_init(&w, stdout, 1);
			jw_obj(&w, NULL);
			jw_str(&w, "destroyed", dr.name);
			jw_end(&w, '}');
			jw_done(&w);
		} else {
			char nb[CTL_ESC_MAX];

			printf("destroyed topic %s\n", ctl_esc(nb, dr.name));
		}
		ctl_free(r);
		return CTL_OK;
	}
}
