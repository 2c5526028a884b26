/*
 * main.c - sheafctl, the operator CLI of sheafd: global options, the
 * subcommand table and its --help texts, option parsing shared by every
 * subcommand, and small parsers.  The subcommands live in the other files
 * of client/sheafctl/; the manual is docs/sheafctl.1.
 *
 * Exit status: 0 success, 1 the daemon refused the request (its error text
 * is printed) or could not be reached, 2 bad usage.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "client/sheafctl/sheafctl.h"
#include "proto/paths.h"
#include "proto/version.h"

#define COMMON_OPTS \
"  -s, --socket PATH    sheafd's control socket\n" \
"  -o, --output FORMAT  table (default) or json\n" \
"  -h, --help           this help\n"

static const struct cmd cmds[] = {
	{ "info", cmd_info,
	  "Usage: sheafctl info [-o json]\n"
	  "Show the daemon: version, protocol version, pool size, memory cap, NUMA\n"
	  "nodes (real or simulated), uptime, attached clients and limits; and the\n"
	  "deferred frees (sheaf_free_deferred): grace_periods (started, completed),\n"
	  "rcu_waiting (objects waiting for their grace period) and, for each reader\n"
	  "lane holding the current grace period back, a line\n"
	  "  gp_blocked_by  lane L client C pid P for N ms\n"
	  "(a reader stopped or descheduled inside a read section).\n\n"
	  COMMON_OPTS },
	{ "caches", cmd_caches,
	  "Usage: sheafctl caches [-o json]\n"
	  "List the caches with their geometry and tunables.\n\n"
	  COMMON_OPTS },
	{ "stats", cmd_stats,
	  "Usage: sheafctl stats [CACHE] [INTERVAL [COUNT]] [-n] [-o json]\n"
	  "Show every counter (the kernel's SLUB names) and the slab figures of\n"
	  "CACHE, or of every cache.  With INTERVAL (seconds), report every\n"
	  "INTERVAL seconds, COUNT times (default: until interrupted), like\n"
	  "vmstat: the first report counts since the cache was created, the\n"
	  "next ones count what happened during the interval.  A first operand\n"
	  "that is a number is an INTERVAL (every cache).\n\n"
	  "  -n, --per-node       one column per NUMA node (JSON: a \"nodes\" array),\n"
	  "                       and where each node's pages are: resident pages by\n"
	  "                       kernel node (JSON: \"pages_by_kernel_node\")\n"
	  COMMON_OPTS },
	{ "top", cmd_top,
	  "Usage: sheafctl top [-d SECONDS] [-s KEY] [-o] [-n COUNT] [--output json]\n"
	  "A refreshing slabtop-like view of every cache.  Keys while running (on a\n"
	  "terminal): q quits, space refreshes, a sort letter (see -s) re-sorts.\n\n"
	  "  -d, --delay SECONDS  refresh interval (default 3)\n"
	  "  -s, --sort KEY       objs (o, default), active (a), inuse (i), use (u),\n"
	  "                       size (s), slabs (l), per_slab (b), cache (c),\n"
	  "                       capacity (p), rate (r) or name (n)\n"
	  "  -o, --once           print one report and exit\n"
	  "  -n, --iterations N   exit after N reports\n"
	  "      --socket PATH    sheafd's control socket\n"
	  "      --output FORMAT  table (default) or json (one object per line)\n"
	  "  -h, --help           this help\n" },
	{ "tune", cmd_tune,
	  "Usage: sheafctl tune CACHE KEY=VALUE...\n"
	  "       sheafctl tune --pool mem_cap=BYTES|large_retain=BYTES|node_cap=K:BYTES...\n"
	  "Change tunables at run time; the request is applied whole or not at\n"
	  "all.  Cache keys: sheaf_capacity (0..256), barn_limit, barn_low,\n"
	  "barn_high, min_partial, barn_keep (full sheaves a barn keeps while\n"
	  "the pool is far from its memory cap; 0: barn_limit always),\n"
	  "stash_sheaves (0..64: full and empty sheaves a thread keeps beyond\n"
	  "its two), stash_bytes (bytes of objects in its stashed full sheaves).\n"
	  "Pool keys (with --pool): mem_cap, in bytes; large_retain, the bytes of\n"
	  "empty slabs of large objects (over 64 KiB) the pool keeps for reuse,\n"
	  "beyond which they go back to the kernel at once (default: a quarter\n"
	  "of the data); node_cap=K:BYTES, kernel\n"
	  "node K's cap under numa_policy=bind (at most its region; see info)\n"
	  "(K, M, G, T suffixes).  An out-of-range value is refused (exit 1) with\n"
	  "the valid range.\n\n"
	  "  -p, --pool           tune the pool instead of a cache\n"
	  COMMON_OPTS },
	{ "shrink", cmd_shrink,
	  "Usage: sheafctl shrink [CACHE] [-o json]\n"
	  "Flush the barns of CACHE (or of every cache) back to slabs and give\n"
	  "empty slabs beyond min_partial back to the kernel.\n\n"
	  COMMON_OPTS },
	{ "clients", cmd_clients,
	  "Usage: sheafctl clients [-o json]\n"
	  "List the attached processes: id, pid, name, uid, attach time, sheaves\n"
	  "held, objects in use and, per owned cache (create --owned), the objects\n"
	  "it holds; then the objects kept of dead clients (create --keep).\n\n"
	  COMMON_OPTS },
	{ "names", cmd_names,
	  "Usage: sheafctl names [-o json]\n"
	  "List the pool's named objects (sheaf_name_set): name, offset, cache,\n"
	  "object size, creation time.\n\n"
	  COMMON_OPTS },
	{ "create", cmd_create,
	  "Usage: sheafctl create NAME SIZE [--align N] [--capacity N] [--debug]\n"
	  "       [--owned | --keep]\n"
	  "Create a cache of SIZE-byte objects (K suffix allowed).\n\n"
	  "      --align N        alignment, a power of two 8..4096 (default 8)\n"
	  "      --capacity N     objects per sheaf, 0..256 (0 disables sheaves;\n"
	  "                       default: by object size)\n"
	  "      --debug          track every object (catch double frees at once)\n"
	  "      --owned          record each object's holder: sheafd frees what a\n"
	  "                       dead client held\n"
	  "      --keep           as --owned, but a dead client's objects are kept\n"
	  "                       and reported (sheafctl clients, stats owner_kept)\n"
	  COMMON_OPTS },
	{ "destroy", cmd_destroy,
	  "Usage: sheafctl destroy NAME\n"
	  "Destroy a cache (refused while objects are in use).\n\n"
	  COMMON_OPTS },
	{ "metrics", cmd_metrics,
	  "Usage: sheafctl metrics\n"
	  "Print every figure in the Prometheus text exposition format 0.0.4\n"
	  "(names prefixed sheaf_, counters ending in _total, labels cache and\n"
	  "node on per cache-node figures, none on pool-wide ones), e.g. for\n"
	  "node_exporter's textfile collector.\n\n"
	  "  -s, --socket PATH    sheafd's control socket\n"
	  "  -o, --output FORMAT  table only (json is refused: one format)\n"
	  "  -h, --help           this help\n" },
	{ "queues", cmd_queues,
	  "Usage: sheafctl queues [-o json]\n"
	  "List the shared queues: capacity, depth (objects in the queue now),\n"
	  "enqueues and dequeues since creation, times a consumer slept on an\n"
	  "empty queue (DEQ_WAITS) or a producer on a full one (ENQ_WAITS), and\n"
	  "spoiled slots a dequeue skipped (DROPPED).\n\n"
	  "      --json           same as -o json (an alias)\n"
	  COMMON_OPTS },
	{ "topics", cmd_topics,
	  "Usage: sheafctl topics [list | show NAME | destroy NAME |\n"
	  "       create NAME [--capacity N] [--history K] [--policy block|drop]]\n"
	  "List the topics (publish/subscribe): capacity, history, full policy,\n"
	  "subscribers, messages published and freed unread, times a publisher\n"
	  "slept on a full log; show one with each subscriber's delivered,\n"
	  "released, dropped, depth (published to it, not taken), held (taken,\n"
	  "not released) and lag; create or destroy one.\n\n"
	  "      --capacity N     create: messages in the log (a power of two;\n"
	  "                       default 1024)\n"
	  "      --history K      create: the last K kept for a new subscriber\n"
	  "      --policy P       create: block (the publisher waits) or drop (a\n"
	  "                       full subscriber loses its oldest)\n"
	  COMMON_OPTS },
	{ "check", cmd_check,
	  "Usage: sheafctl check [-o json]\n"
	  "Debug: the daemon pauses its workers and runs the pool checker; exit 1\n"
	  "when a rule is broken.  Meaningful on a quiet pool only (no client\n"
	  "allocating or freeing).\n\n"
	  COMMON_OPTS },
};

#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

static void usage_main(FILE *f)
{
	char def[108];

	sheaf_default_socket(def, sizeof(def), 0);
	fprintf(f,
		"Usage: sheafctl [-s PATH] [-o table|json] COMMAND [ARG]...\n"
		"Operate sheafd, the sheaf shared-memory allocator daemon.\n\n"
		"Commands (each also takes -s, -o and -h, below; top uses -s and -o\n"
		"itself and takes --socket and --output):\n"
		"  info                         the daemon: version, pool, NUMA nodes, uptime, limits,\n"
		"                               grace periods and the readers holding one back\n"
		"  caches                       caches and their settings\n"
		"  stats [CACHE] [INTERVAL [COUNT]] [-n|--per-node]\n"
		"                               counters and slab figures\n"
		"  top [-d|--delay SECS] [-s|--sort KEY] [-o|--once] [-n|--iterations N]\n"
		"                               refreshing slabtop-like view\n"
		"  tune CACHE KEY=VALUE...      change a cache's tunables\n"
		"  tune -p|--pool mem_cap=BYTES change the pool's memory cap (or node_cap=K:BYTES)\n"
		"  shrink [CACHE]               give empty slabs back to the kernel\n"
		"  clients                      attached processes\n"
		"  names                        named objects\n"
		"  create NAME SIZE [--align N] [--capacity N] [--debug] [--owned | --keep]\n"
		"                               create a cache\n"
		"  destroy NAME                 destroy a cache\n"
		"  metrics                      Prometheus text format (table only)\n"
		"  queues [--json]              shared queues: depth, counters (--json:\n"
		"                               same as -o json)\n"
		"  topics [list|show NAME|destroy NAME|create NAME [--capacity N] [--history K]\n"
		"         [--policy P]]         topics: subscribers, counters\n"
		"  check                        run the pool checker (debug)\n\n"
		"Options (all but -V also after COMMAND):\n"
		"  -s, --socket PATH    control socket (default: $SHEAF_SOCKET, else\n"
		"                       %s)\n"
		"  -o, --output FORMAT  table (default) or json\n"
		"  -h, --help           this help; `sheafctl COMMAND --help` for a command\n"
		"  -V, --version        version\n\n"
		"Exit status: 0 success, 1 refused by sheafd (or sheafd unreachable),\n"
		"2 bad usage.  See sheafctl(1).\n", def);
}

const struct cmd *ctl_find_cmd(const char *name)
{
	for (size_t i = 0; i < NCMDS; i++)
		if (strcmp(cmds[i].name, name) == 0)
			return &cmds[i];
	return NULL;
}

int ctl_err(int code, const char *fmt, ...)
{
	char msg[1024], shown[TEXT_ESCAPED_MAX(1024)];
	va_list ap;

	fflush(stdout);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* The message may quote a name (or the daemon's text quoting one):
	 * escaped, one line whatever its bytes. */
	fprintf(stderr, "sheafctl: %s\n", text_escape(shown, sizeof(shown), msg));
	return code;
}

int ctl_usage(const struct ctl *c, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "sheafctl%s%s: ", c->cmd ? " " : "", c->cmd ? c->cmd : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see sheafctl%s%s --help)\n", c->cmd ? " " : "", c->cmd ? c->cmd : "");
	return CTL_USAGE;
}

static int set_socket(struct ctl *c, const char *path)
{
	if (path[0] == '\0' || strlen(path) >= sizeof(c->socket))
		return ctl_usage(c, "bad socket path '%s' (1..%zu bytes)", path,
				 sizeof(c->socket) - 1);
	snprintf(c->socket, sizeof(c->socket), "%s", path);
	return CTL_OK;
}

static int set_output(struct ctl *c, const char *fmt)
{
	if (strcmp(fmt, "json") == 0)
		c->json = 1;
	else if (strcmp(fmt, "table") == 0)
		c->json = 0;
	else
		return ctl_usage(c, "unknown output format '%s' (table or json)", fmt);
	return CTL_OK;
}

/* getopt's complaint about argv[optind - 1], in our words. */
static int bad_option(const struct ctl *c, int opt, char **argv)
{
	const char *arg = argv[optind - 1];

	if (opt == ':')
		return ctl_usage(c, "option '%s' needs a value", arg);
	if (optopt != 0 && strncmp(arg, "--", 2) != 0)
		return ctl_usage(c, "unknown option '-%c'", optopt);
	return ctl_usage(c, "unknown option '%s'", arg);
}

int ctl_getopt(struct ctl *c, int argc, char **argv, const char *shortopts,
	       const struct option *own, int own_o, ctl_optfn fn, void *arg, int *first)
{
	static const struct option common[] = {
		{ "socket", required_argument, NULL, OPT_SOCKET },
		{ "output", required_argument, NULL, OPT_OUTPUT },
		{ "help", no_argument, NULL, 'h' },
	};
	int own_s = strchr(shortopts, 's') != NULL;
	struct option lo[24];
	char so[64];
	size_t n = 0;
	int opt, rc;

	for (; own != NULL && own[n].name != NULL && n < 16; n++)
		lo[n] = own[n];
	memcpy(&lo[n], common, sizeof(common));
	n += sizeof(common) / sizeof(common[0]);
	memset(&lo[n], 0, sizeof(lo[n]));
	snprintf(so, sizeof(so), ":%s%sh%s", shortopts, own_o ? "" : "o:", own_s ? "" : "s:");
	optind = 0;                  /* glibc: start over, argv[0] is the command */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, so, lo, NULL)) != -1) {
		switch (opt) {
		case 's':
			rc = own_s ? fn(arg, opt, optarg) : set_socket(c, optarg);
			break;
		case OPT_SOCKET:
			rc = set_socket(c, optarg);
			break;
		case OPT_OUTPUT:
			rc = set_output(c, optarg);
			break;
		case 'o':
			rc = own_o ? fn(arg, opt, optarg) : set_output(c, optarg);
			break;
		case 'h':
			fputs(ctl_find_cmd(c->cmd)->usage, stdout);
			return CTL_STOP;
		case '?':
		case ':':
			return bad_option(c, opt, argv);
		default:
			rc = fn != NULL ? fn(arg, opt, optarg) : bad_option(c, '?', argv);
			break;
		}
		if (rc != CTL_OK)
			return rc;
	}
	*first = optind;
	return CTL_OK;
}

int ctl_parse_u64(const char *s, int suffix, uint64_t *out)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	if (s[0] < '0' || s[0] > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0)
		return -1;
	if (suffix && *end != '\0') {
		const char *units = "KMGT", *u = strchr(units, toupper((unsigned char)end[0]));
		if (u == NULL)
			return -1;
		shift = 10u * (unsigned)(u - units + 1);
		end++;
		if (*end == 'i' && end[1] == 'B')   /* KiB, MiB ... */
			end += 2;
	}
	if (*end != '\0' || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

int ctl_parse_seconds(const char *s, double *out)
{
	char *end;
	double v;

	if ((s[0] < '0' || s[0] > '9') && s[0] != '.')
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || *end != '\0' || !isfinite(v) || v <= 0 || v > 1e6)
		return -1;
	*out = v;
	return 0;
}

int ctl_sleep(double secs)
{
	struct timespec ts = { .tv_sec = (time_t)secs };

	ts.tv_nsec = (long)((secs - (double)ts.tv_sec) * 1e9);
	return nanosleep(&ts, NULL) == 0 ? 0 : -1;
}

/* Global options: before the command. */
static int main_opts(struct ctl *c, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int opt, rc = CTL_OK;

	opterr = 0;
	while (rc == CTL_OK && (opt = getopt_long(argc, argv, "+:s:o:hV", lo, NULL)) != -1) {
		switch (opt) {
		case 's': rc = set_socket(c, optarg); break;
		case 'o': rc = set_output(c, optarg); break;
		case 'h': usage_main(stdout); return CTL_STOP;
		case 'V': printf("sheafctl %s\n", SHEAF_VERSION); return CTL_STOP;
		default: return bad_option(c, opt, argv);
		}
	}
	return rc;
}

int main(int argc, char **argv)
{
	struct ctl c = { .fd = -1 };
	const struct cmd *cmd;
	int rc;

	signal(SIGPIPE, SIG_IGN);
	sheaf_default_socket(c.socket, sizeof(c.socket), 1);
	rc = main_opts(&c, argc, argv);
	if (rc != CTL_OK)
		return rc == CTL_STOP ? 0 : rc;
	if (optind == argc)
		return ctl_usage(&c, "no command given");
	if (strcmp(argv[optind], "help") == 0) {
		cmd = optind + 1 < argc ? ctl_find_cmd(argv[optind + 1]) : NULL;
		if (optind + 1 < argc && cmd == NULL)
			return ctl_usage(&c, "unknown command '%s'", argv[optind + 1]);
		if (cmd != NULL)
			fputs(cmd->usage, stdout);
		else
			usage_main(stdout);
		return 0;
	}
	cmd = ctl_find_cmd(argv[optind]);
	if (cmd == NULL)
		return ctl_usage(&c, "unknown command '%s'", argv[optind]);
	c.cmd = cmd->name;
	rc = cmd->run(&c, argc - optind, argv + optind);
	ctl_close(&c);
	if (fflush(stdout) != 0 && rc == CTL_OK)
		rc = ctl_err(CTL_REFUSED, "writing output: %s", strerror(errno));
	return rc == CTL_STOP ? 0 : rc;
}
