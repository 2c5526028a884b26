/*
 * sheafctl.h - sheafctl's internal interface, shared by the files of
 * client/sheafctl/ (the operator CLI; never part of libsheaf: it is built on
 * proto/ and libsheaf's public API only).
 *
 * Conventions: a subcommand returns its exit status (CTL_OK, CTL_REFUSED,
 * CTL_USAGE) and has printed its one-line error ("sheafctl: ...") to stderr
 * before returning a non-zero status.
 */
#ifndef SHEAF_CLIENT_SHEAFCTL_SHEAFCTL_H
#define SHEAF_CLIENT_SHEAFCTL_SHEAFCTL_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "proto/sheaf.pb-c.h"
#include "proto/text.h"

enum {
	CTL_OK = 0,          /* success */
	CTL_REFUSED = 1,     /* the daemon refused, or could not be reached */
	CTL_USAGE = 2,       /* bad command line */
	CTL_STOP = -1,       /* internal: --help shown, exit 0 */
};

/* Long-only option codes shared by every subcommand. */
enum { OPT_OUTPUT = 0x100, OPT_SOCKET };

struct ctl {
	const char *cmd;         /* subcommand name, for messages */
	char socket[108];        /* control socket path */
	int json;                /* -o json */
	int fd;                  /* connection to sheafd, -1 until connected */
	uint64_t next_id;
	char err[512];           /* the last refusal's text */
	Sheaf__V1__Status status; /* the last refusal's status */
};

struct cmd {
	const char *name;
	int (*run)(struct ctl *c, int argc, char **argv);
	const char *usage;       /* full --help text */
};

/* ---- main.c: options and messages --------------------------------------- */

/*
 * Names are data: every name a table or a message shows (cache, queue,
 * object, client) is written in proto/text.h's escaped form, into a
 * caller's buffer of CTL_ESC_MAX bytes (longer names, which sheafd never
 * sends, are cut at an escape).  JSON output keeps the exact bytes (out.c).
 */
#define CTL_ESC_MAX TEXT_ESCAPED_MAX(256)
#define ctl_esc(buf, s) text_escape((buf), CTL_ESC_MAX, (s))

/* Print "sheafctl: <msg>" to stderr; returns @code. */
int ctl_err(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A usage error of the current subcommand: message plus a pointer to
 * --help; returns CTL_USAGE. */
int ctl_usage(const struct ctl *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Parse a subcommand's options with getopt_long.  @shortopts and @own are
 * the subcommand's own (@own may be NULL); --socket (and -s unless
 * @shortopts has 's'), --output (and -o unless @own_o) and -h/--help are
 * added.  Each own option is handed to
 * @fn(arg, opt, optarg), which returns 0 or an exit status.  On return
 * *@first is the index of the first operand in @argv.
 * Returns CTL_OK, CTL_STOP (help printed) or CTL_USAGE (message printed).
 */
typedef int (*ctl_optfn)(void *arg, int opt, const char *val);
int ctl_getopt(struct ctl *c, int argc, char **argv,
	       const char *shortopts, const struct option *own, int own_o,
	       ctl_optfn fn, void *arg, int *first);

/* Unsigned integers: plain, or with a K/M/G/T (binary) suffix when
 * @suffix (sizes).  Return 0 or -1. */
int ctl_parse_u64(const char *s, int suffix, uint64_t *out);
/* Seconds as a positive decimal ("0.5", "2").  Return 0 or -1. */
int ctl_parse_seconds(const char *s, double *out);
/* Sleep @secs seconds (interrupted early by a signal: returns -1). */
int ctl_sleep(double secs);

/* ---- conn.c: talking to sheafd ------------------------------------------ */

/*
 * Send @rq (its id is set here) and receive the response, connecting first
 * when needed.  Returns CTL_OK with *@out (free with ctl_free), or
 * CTL_REFUSED with c->err and c->status set (a connection failure has
 * status STATUS_INTERNAL and an err naming the socket).  Prints nothing.
 */
int ctl_call(struct ctl *c, Sheaf__V1__Request *rq, Sheaf__V1__Response **out);
/* ctl_call, printing "sheafctl: <err>" when it fails. */
int ctl_call_or_say(struct ctl *c, Sheaf__V1__Request *rq, Sheaf__V1__Response **out);
void ctl_free(Sheaf__V1__Response *r);
void ctl_close(struct ctl *c);

/* ---- out.c: JSON and human formats -------------------------------------- */

/* A streaming JSON writer: keys are given with each value inside objects
 * and are NULL inside arrays and at the top. */
struct jw {
	FILE *f;
	int pretty;              /* indented, else one line */
	int depth;
	int first[32];           /* nothing written yet at this depth */
};

void jw_init(struct jw *w, FILE *f, int pretty);
void jw_obj(struct jw *w, const char *key);
void jw_arr(struct jw *w, const char *key);
void jw_end(struct jw *w, char close);           /* '}' or ']' */
void jw_str(struct jw *w, const char *key, const char *v);
void jw_u64(struct jw *w, const char *key, uint64_t v);
void jw_i64(struct jw *w, const char *key, int64_t v);
void jw_num(struct jw *w, const char *key, double v);
void jw_bool(struct jw *w, const char *key, int v);
void jw_done(struct jw *w);                       /* ends the document */
/* CacheInfo as an object (see sheafctl(1), JSON fields). */
void jw_cache_info(struct jw *w, const char *key, const Sheaf__V1__CacheInfo *ci);

/* "512 B", "1.5 KiB", "256.0 MiB" ... */
const char *fmt_iec(char *buf, size_t len, uint64_t bytes);
/* "3d 04:05:06" or "04:05:06" */
const char *fmt_duration(char *buf, size_t len, uint64_t secs);
/* "2024-05-01 12:00:00" in local time */
const char *fmt_time(char *buf, size_t len, uint64_t epoch);

/* ---- numa.c: NUMA placement ---------------------------------------------- */

/* `info`: the policy and one row (JSON: a "nodes" object) per pool node;
 * a simulated pool has no policy (nothing in the table; in JSON an empty
 * "numa_policy" and its @count node indices). */
void numa_info_table(const Sheaf__V1__NumaNode *const *nodes, size_t n, const char *policy);
void numa_info_json(struct jw *w, const Sheaf__V1__NumaNode *const *nodes, size_t n,
		    const char *policy, uint32_t count);
/* `stats -n`: a cache's resident pages per pool node by kernel node (a
 * row; JSON: the object "pages_by_kernel_node" of a node's entry). */
void numa_pages_table(const Sheaf__V1__CacheStats *cs);
void numa_pages_json(struct jw *w, const Sheaf__V1__NodeStats *ns);
/* `tune --pool node_cap=K:BYTES`: the setting "node_cap:K" = BYTES into
 * @st (its key in @key); CTL_OK or a usage error. */
int numa_cap_setting(struct ctl *c, const char *val, Sheaf__V1__Setting *st, char *key,
		     size_t keylen);

/* ---- queues.c: shared queues ---------------------------------------------- */

int cmd_queues(struct ctl *c, int argc, char **argv);
void jw_queue_info(struct jw *w, const char *key, const Sheaf__V1__QueueInfo *qi);
/* The "queues" array of `stats -o json`, and the queue families of
 * `metrics`, from the queues of @s's Stats replies. */
struct stats_set;
void stats_json_queues(struct jw *w, const struct stats_set *s);
void metrics_queues(const struct stats_set *s);

/* ---- topics.c: topics --------------------------------------------------- */

int cmd_topics(struct ctl *c, int argc, char **argv);
/* The "topics" array of `stats -o json`, and the topic families of
 * `metrics`, from the topics of @s's Stats replies. */
void jw_topic_info(struct jw *w, const char *key, const Sheaf__V1__TopicInfo *ti);
void stats_json_topics(struct jw *w, const struct stats_set *s);
void metrics_topics(const struct stats_set *s);

/* ---- stats.c ------------------------------------------------------------- */

/* Every cache's stats (or one cache's): one Stats request, or one per cache
 * when the daemon cannot answer for all at once. */
struct stats_set {
	Sheaf__V1__Response **resp;      /* owned */
	size_t n_resp;
	Sheaf__V1__CacheStats **caches;  /* borrowed from resp */
	size_t n;
};

/* Returns an exit status; prints the error itself. */
int stats_fetch(struct ctl *c, const char *cache, struct stats_set *out);
void stats_set_free(struct stats_set *s);
/* Counter @name of @ns, or 0. */
uint64_t stats_counter(const Sheaf__V1__NodeStats *ns, const char *name);
/* Sum of counter @name over a cache's nodes. */
uint64_t stats_counter_sum(const Sheaf__V1__CacheStats *cs, const char *name);
/* The cache named @name in @s, or NULL. */
const Sheaf__V1__CacheStats *stats_find(const struct stats_set *s, const char *name);

/* ---- subcommands --------------------------------------------------------- */

int cmd_info(struct ctl *c, int argc, char **argv);       /* cmds.c */
int cmd_caches(struct ctl *c, int argc, char **argv);
int cmd_create(struct ctl *c, int argc, char **argv);
int cmd_destroy(struct ctl *c, int argc, char **argv);
int cmd_shrink(struct ctl *c, int argc, char **argv);
int cmd_tune(struct ctl *c, int argc, char **argv);
int cmd_clients(struct ctl *c, int argc, char **argv);
int cmd_names(struct ctl *c, int argc, char **argv);
int cmd_check(struct ctl *c, int argc, char **argv);
int cmd_stats(struct ctl *c, int argc, char **argv);      /* stats.c */
int cmd_top(struct ctl *c, int argc, char **argv);        /* top.c */
int cmd_metrics(struct ctl *c, int argc, char **argv);    /* metrics.c */

/* The subcommand table (main.c), for ctl_getopt's --help. */
const struct cmd *ctl_find_cmd(const char *name);

#endif
