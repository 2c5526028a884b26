/*
 * top.c - `sheafctl top`: a refreshing slabtop-like view of every cache
 * (objects, active, in use, use %, object size, slabs, objects per
 * slab, cache size, sheaf capacity, barn sheaves, allocation rate), sorted
 * by a key; on a terminal, q quits and sort letters re-sort.  With -o one
 * report; with --output json one JSON object per refresh, one per line.
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include "client/sheafctl/sheafctl.h"

struct top_row {
	const char *name;
	uint64_t objs, active, inuse, obj_size, slabs, partial, per_slab, cache_size;
	uint64_t capacity, barn_full, barn_empty;
	double use;                  /* inuse / objs, percent */
	double rate;                 /* allocations per second; NAN: unknown */
};

struct top_opts {
	double delay;
	char key;                    /* sort letter */
	int once;
	uint64_t iterations;         /* 0: until quit */
};

static const struct { const char *word; char letter; } sort_keys[] = {
	{ "objs", 'o' }, { "active", 'a' }, { "inuse", 'i' }, { "use", 'u' },
	{ "size", 's' }, { "slabs", 'l' }, { "per_slab", 'b' }, { "cache", 'c' },
	{ "capacity", 'p' }, { "rate", 'r' }, { "name", 'n' },
};

#define NKEYS (sizeof(sort_keys) / sizeof(sort_keys[0]))

static char sort_letter(const char *s)
{
	for (size_t i = 0; i < NKEYS; i++)
		if (strcmp(s, sort_keys[i].word) == 0 ||
		    (s[0] == sort_keys[i].letter && s[1] == '\0'))
			return sort_keys[i].letter;
	return 0;
}

static volatile sig_atomic_t top_stop;
static char top_key;                 /* qsort has no context argument */

static void on_signal(int sig)
{
	(void)sig;
	top_stop = 1;
}

/* ---- rows ------------------------------------------------------------------ */

static double row_value(const struct top_row *r, char key)
{
	switch (key) {
	case 'a': return (double)r->active;
	case 'i': return (double)r->inuse;
	case 'u': return r->use;
	case 's': return (double)r->obj_size;
	case 'l': return (double)r->slabs;
	case 'b': return (double)r->per_slab;
	case 'c': return (double)r->cache_size;
	case 'p': return (double)r->capacity;
	case 'r': return isnan(r->rate) ? -1 : r->rate;
	default: return (double)r->objs;
	}
}

static int row_cmp(const void *a, const void *b)
{
	const struct top_row *x = a, *y = b;
	double vx, vy;

	if (top_key != 'n') {
		vx = row_value(x, top_key);
		vy = row_value(y, top_key);
		if (vx != vy)
			return vx > vy ? -1 : 1;
	}
	return strcmp(x->name, y->name);
}

static void make_row(struct top_row *r, const Sheaf__V1__CacheStats *cs,
		     const Sheaf__V1__CacheStats *prev, double dt)
{
	const Sheaf__V1__CacheInfo *ci = cs->cache;

	memset(r, 0, sizeof(*r));
	r->name = ci->name;
	for (size_t n = 0; n < cs->n_nodes; n++) {
		r->objs += cs->nodes[n]->objects;
		r->active += cs->nodes[n]->active_objects;
		r->slabs += cs->nodes[n]->slabs;
		r->partial += cs->nodes[n]->partial_slabs;
		r->barn_full += cs->nodes[n]->barn_full;
		r->barn_empty += cs->nodes[n]->barn_empty;
	}
	r->inuse = cs->in_use;
	r->use = r->objs ? 100.0 * (double)r->inuse / (double)r->objs : 0;
	r->obj_size = ci->object_size;
	r->per_slab = ci->objects_per_slab;
	r->cache_size = cs->bytes_mapped;
	r->capacity = ci->sheaf_capacity;
	r->rate = NAN;
	if (prev != NULL && prev->cache->id == ci->id && dt > 0) {
		uint64_t now = stats_counter_sum(cs, "alloc_fastpath") +
			       stats_counter_sum(cs, "alloc_slowpath");
		uint64_t then = stats_counter_sum(prev, "alloc_fastpath") +
				stats_counter_sum(prev, "alloc_slowpath");
		r->rate = now >= then ? (double)(now - then) / dt : 0;
	}
}

struct totals {
	uint64_t objs, active, inuse, slabs, partial, in_use_bytes, mapped, active_caches;
	double min_size, avg_size, max_size;
};

static void sum_rows(const struct top_row *rows, size_t n, const struct stats_set *s,
		     struct totals *t)
{
	double weighted = 0, plain = 0;

	memset(t, 0, sizeof(*t));
	for (size_t i = 0; i < n; i++) {
		const struct top_row *r = &rows[i];
		t->objs += r->objs;
		t->active += r->active;
		t->inuse += r->inuse;
		t->slabs += r->slabs;
		t->partial += r->partial;
		t->in_use_bytes += s->caches[i]->bytes_in_use;
		t->mapped += r->cache_size;
		t->active_caches += r->objs > 0;
		weighted += (double)r->obj_size * (double)r->objs;
		plain += (double)r->obj_size;
		if (i == 0 || (double)r->obj_size < t->min_size)
			t->min_size = (double)r->obj_size;
		if ((double)r->obj_size > t->max_size)
			t->max_size = (double)r->obj_size;
	}
	if (t->objs > 0)
		t->avg_size = weighted / (double)t->objs;
	else if (n > 0)
		t->avg_size = plain / (double)n;
}

/* ---- output ---------------------------------------------------------------- */

static double pct(uint64_t a, uint64_t b)
{
	return b ? 100.0 * (double)a / (double)b : 0;
}

static void table_header(const struct ctl *c, const Sheaf__V1__DaemonInfoResponse *di,
			 const struct totals *t, size_t ncaches)
{
	const Sheaf__V1__Layout *l = di->layout;
	char up[32], a[32], b[32];

	printf("sheafd %s at %s - up %s, %u %s node%s, %u client%s, pool %s, cap %s\n",
	       di->version, c->socket, fmt_duration(up, sizeof(up), di->uptime_seconds),
	       l ? l->nodes : 0, l && l->simulated_nodes ? "simulated" : "NUMA",
	       l && l->nodes == 1 ? "" : "s", di->clients, di->clients == 1 ? "" : "s",
	       fmt_iec(a, sizeof(a), di->pool_size), fmt_iec(b, sizeof(b), di->mem_cap));
	printf(" Active / Total Objects (%% used)    : %llu / %llu (%.1f%%)\n",
	       (unsigned long long)t->active, (unsigned long long)t->objs, pct(t->active, t->objs));
	printf(" In use / Total Objects (%% used)    : %llu / %llu (%.1f%%)\n",
	       (unsigned long long)t->inuse, (unsigned long long)t->objs, pct(t->inuse, t->objs));
	printf(" Partial / Total Slabs              : %llu / %llu\n",
	       (unsigned long long)t->partial, (unsigned long long)t->slabs);
	printf(" Active / Total Caches (%% used)     : %llu / %zu (%.1f%%)\n",
	       (unsigned long long)t->active_caches, ncaches, pct(t->active_caches, ncaches));
	printf(" In use / Total Size (%% used)       : %.2fK / %.2fK (%.1f%%)\n",
	       (double)t->in_use_bytes / 1024, (double)t->mapped / 1024,
	       pct(t->in_use_bytes, t->mapped));
	printf(" Minimum / Average / Maximum Object : %.2fK / %.2fK / %.2fK\n\n",
	       t->min_size / 1024, t->avg_size / 1024, t->max_size / 1024);
	printf("%9s %9s %9s %4s %8s %7s %8s %10s %4s %11s %9s %s\n", "OBJS", "ACTIVE", "INUSE",
	       "USE", "OBJ SIZE", "SLABS", "OBJ/SLAB", "CACHE SIZE", "CAP", "BARN F/E",
	       "ALLOC/S", "NAME");
}

static void table_row(const struct top_row *r)
{
	char fe[32], rate[32], nb[CTL_ESC_MAX];

	snprintf(fe, sizeof(fe), "%llu/%llu", (unsigned long long)r->barn_full,
		 (unsigned long long)r->barn_empty);
	if (isnan(r->rate))
		snprintf(rate, sizeof(rate), "-");
	else
		snprintf(rate, sizeof(rate), "%.0f", r->rate);
	printf("%9llu %9llu %9llu %3.0f%% %7.2fK %7llu %8llu %9lluK %4llu %11s %9s %s\n",
	       (unsigned long long)r->objs, (unsigned long long)r->active,
	       (unsigned long long)r->inuse, r->use, (double)r->obj_size / 1024,
	       (unsigned long long)r->slabs, (unsigned long long)r->per_slab,
	       (unsigned long long)(r->cache_size / 1024), (unsigned long long)r->capacity, fe,
	       rate, ctl_esc(nb, r->name));
}

static void json_frame(const Sheaf__V1__DaemonInfoResponse *di, const struct top_row *rows,
		       size_t n, const struct totals *t)
{
	struct jw w;

	jw_init(&w, stdout, 0);
	jw_obj(&w, NULL);
	jw_u64(&w, "time", (uint64_t)time(NULL));
	jw_u64(&w, "uptime_seconds", di->uptime_seconds);
	jw_u64(&w, "nodes", di->layout ? di->layout->nodes : 0);
	jw_u64(&w, "clients", di->clients);
	jw_obj(&w, "totals");
	jw_u64(&w, "caches", n);
	jw_u64(&w, "active_caches", t->active_caches);
	jw_u64(&w, "objects", t->objs);
	jw_u64(&w, "active_objects", t->active);
	jw_u64(&w, "in_use", t->inuse);
	jw_u64(&w, "slabs", t->slabs);
	jw_u64(&w, "partial_slabs", t->partial);
	jw_u64(&w, "bytes_in_use", t->in_use_bytes);
	jw_u64(&w, "bytes_mapped", t->mapped);
	jw_end(&w, '}');
	jw_arr(&w, "caches");
	for (size_t i = 0; i < n; i++) {
		const struct top_row *r = &rows[i];
		jw_obj(&w, NULL);
		jw_str(&w, "name", r->name);
		jw_u64(&w, "objects", r->objs);
		jw_u64(&w, "active_objects", r->active);
		jw_u64(&w, "in_use", r->inuse);
		jw_num(&w, "use_percent", r->use);
		jw_u64(&w, "object_size", r->obj_size);
		jw_u64(&w, "slabs", r->slabs);
		jw_u64(&w, "objects_per_slab", r->per_slab);
		jw_u64(&w, "cache_size", r->cache_size);
		jw_u64(&w, "sheaf_capacity", r->capacity);
		jw_u64(&w, "barn_full", r->barn_full);
		jw_u64(&w, "barn_empty", r->barn_empty);
		jw_num(&w, "alloc_rate", r->rate);
		jw_end(&w, '}');
	}
	jw_end(&w, ']');
	jw_end(&w, '}');
	jw_done(&w);
}

/* ---- one refresh -------------------------------------------------------------- */

struct top_state {
	struct ctl *c;
	struct top_opts *o;
	int interactive;
	struct stats_set prev;
	int have_prev;
	struct timespec prev_at;
};

static double since(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

static int fetch_info(struct ctl *c, Sheaf__V1__Response **r)
{
	Sheaf__V1__DaemonInfoRequest body = SHEAF__V1__DAEMON_INFO_REQUEST__INIT;
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;

	rq.body_case = SHEAF__V1__REQUEST__BODY_DAEMON_INFO;
	rq.daemon_info = &body;
	return ctl_call_or_say(c, &rq, r);
}

static size_t screen_rows(void)
{
	struct winsize ws;

	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 10)
		return ws.ws_row - 10u;
	return 20;
}

static void render(struct top_state *s, const Sheaf__V1__DaemonInfoResponse *di,
		   struct top_row *rows, const struct stats_set *cur)
{
	struct totals t;
	size_t shown = cur->n;

	sum_rows(rows, cur->n, cur, &t);
	top_key = s->o->key;
	qsort(rows, cur->n, sizeof(rows[0]), row_cmp);
	if (s->c->json) {
		json_frame(di, rows, cur->n, &t);
		return;
	}
	if (s->interactive) {
		fputs("\033[H\033[2J", stdout);
		if (shown > screen_rows())
			shown = screen_rows();
	}
	table_header(s->c, di, &t, cur->n);
	for (size_t i = 0; i < shown; i++)
		table_row(&rows[i]);
	if (!s->interactive && !s->o->once)
		printf("\n");
	fflush(stdout);
}

static int refresh(struct top_state *s)
{
	Sheaf__V1__Response *info;
	struct stats_set cur;
	struct top_row *rows;
	struct timespec now;
	int rc;

	if ((rc = fetch_info(s->c, &info)) != CTL_OK)
		return rc;
	if ((rc = stats_fetch(s->c, NULL, &cur)) != CTL_OK) {
		ctl_free(info);
		return rc;
	}
	clock_gettime(CLOCK_MONOTONIC, &now);
	rows = calloc(cur.n + 1, sizeof(*rows));
	if (rows == NULL) {
		rc = ctl_err(CTL_REFUSED, "out of memory");
	} else {
		for (size_t i = 0; i < cur.n; i++)
			make_row(&rows[i], cur.caches[i],
				 s->have_prev ? stats_find(&s->prev, cur.caches[i]->cache->name) : NULL,
				 s->have_prev ? since(&s->prev_at, &now) : 0);
		render(s, info->daemon_info, rows, &cur);
	}
	free(rows);
	ctl_free(info);
	stats_set_free(&s->prev);
	s->prev = cur;
	s->prev_at = now;
	s->have_prev = 1;
	return rc;
}

/* ---- waiting and keys ---------------------------------------------------------- */

static struct termios saved_tio;

static void tty_raw(void)
{
	struct termios t;

	tcgetattr(STDIN_FILENO, &saved_tio);
	t = saved_tio;
	t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	t.c_cc[VMIN] = 1;
	t.c_cc[VTIME] = 0;
	tcsetattr(STDIN_FILENO, TCSANOW, &t);
}

static void tty_restore(void)
{
	tcsetattr(STDIN_FILENO, TCSANOW, &saved_tio);
}

/* Wait @delay seconds or for a key; returns 1 to quit. */
static int wait_key(struct top_state *s)
{
	struct top_opts *o = s->o;
	struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
	char ch;

	if (!s->interactive)
		return ctl_sleep(o->delay) != 0 || top_stop;
	if (poll(&p, 1, (int)(o->delay * 1000)) <= 0)
		return top_stop;
	if (read(STDIN_FILENO, &ch, 1) != 1 || ch == 'q' || ch == 'Q')
		return 1;
	if (ch != ' ' && sort_letter((char[]){ ch, '\0' }) != 0)
		o->key = ch;
	return top_stop;
}

static int top_opt(void *arg, int opt, const char *val)
{
	struct top_state *s = arg;
	struct top_opts *o = s->o;
	struct ctl *c = s->c;

	switch (opt) {
	case 'd':
		if (ctl_parse_seconds(val, &o->delay) != 0)
			return ctl_usage(c, "bad delay '%s' (seconds, > 0)", val);
		return CTL_OK;
	case 's':
		if ((o->key = sort_letter(val)) == 0)
			return ctl_usage(c, "unknown sort key '%s' (objs, active, inuse, use, size, "
					 "slabs, per_slab, cache, capacity, rate, name)", val);
		return CTL_OK;
	case 'o':
		o->once = 1;
		return CTL_OK;
	case 'n':
		if (ctl_parse_u64(val, 0, &o->iterations) != 0 || o->iterations == 0)
			return ctl_usage(c, "bad count '%s' (a positive integer)", val);
		return CTL_OK;
	default:
		return ctl_usage(c, "unexpected option");
	}
}

int cmd_top(struct ctl *c, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "delay", required_argument, NULL, 'd' },
		{ "sort", required_argument, NULL, 's' },
		{ "once", no_argument, NULL, 'o' },
		{ "iterations", required_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	struct top_opts o = { .delay = 3, .key = 'o' };
	struct top_state s = { .c = c, .o = &o };
	struct sigaction sa = { .sa_handler = on_signal };
	int first, rc;

	rc = ctl_getopt(c, argc, argv, "d:s:on:", lo, 1, top_opt, &s, &first);
	if (rc != CTL_OK)
		return rc;
	if (first < argc)
		return ctl_usage(c, "unexpected argument '%s'", argv[first]);
	s.interactive = !o.once && !c->json && isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
	if (!o.once) {
		sigaction(SIGINT, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
	}
	if (s.interactive)
		tty_raw();
	for (uint64_t i = 0; rc == CTL_OK; i++) {
		rc = refresh(&s);
		if (rc != CTL_OK || o.once || (o.iterations && i + 1 >= o.iterations) ||
		    wait_key(&s))
			break;
	}
	if (s.interactive)
		tty_restore();
	stats_set_free(&s.prev);
	return rc;
}
