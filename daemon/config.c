/*
 * config.c - sheafd configuration (config.h): defaults, the table of
 * settings (keys[]) that the file and the flags both go through.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "config.h"
#include "log.h"
#include "proto/frame.h"
#include "proto/paths.h"
#include "proto/version.h"
#include "shm/huge.h"
#include "shm/numa.h"
#include "shm/pool.h"

void config_defaults(struct config *c)
{
	memset(c, 0, sizeof(*c));
	sheaf_default_socket(c->socket, sizeof(c->socket), 0);
	c->size = POOL_DEFAULT_SIZE;
	c->sheaves = POOL_DEFAULT_SHEAVES;
	c->max_frame = FRAME_DEFAULT_CAP;
	c->idle_timeout_ms = CONFIG_IDLE_TIMEOUT_MS;
	c->max_clients = SHEAF_DEFAULT_CLIENTS;
	c->max_threads = SHEAF_DEFAULT_LANES;
	c->max_caches = SHEAF_DEFAULT_CACHES;
	c->revoke_ban_s = CONFIG_REVOKE_BAN_S;
	c->log_level = LOG_INFO;
	c->huge_pages = HUGE_TRY;       /* used when the kernel allows (shm/huge.h) */
	c->allow_uid[0] = (uint32_t)getuid();
	c->n_uid = 1;
}

void config_usage(FILE *out)
{
	fprintf(out,
"Usage: sheafd [OPTION]...\n"
"Serve a pool of shared-memory object caches to local processes.\n"
"\n"
"  -s, --socket PATH      control socket (default: $XDG_RUNTIME_DIR/sheaf/sheafd.sock,\n"
"                         /run/sheafd/sheafd.sock for root, else /tmp/sheafd-UID/sheafd.sock)\n"
"  -c, --config FILE      key=value file: socket, size, mem_cap, nodes, sheaves,\n"
"                         huge_pages, numa_policy,\n"
"                         log_level, allow_uid, allow_gid, max_frame,\n"
"                         max_connections, idle_timeout, max_clients_per_uid,\n"
"                         max_threads_per_client, max_threads_per_uid,\n"
"                         revoke_ban, max_clients, max_threads, max_caches\n"
"                         (flags win)\n"
"      --size BYTES       pool data size, K/M/G suffixes (default 1G; sparse)\n"
"      --mem-cap BYTES    most bytes of slabs (default: size)\n"
"      --nodes N          simulate N NUMA nodes (%u..%u; default: the machine's)\n"
"      --sheaves N        sheaves in the pool (default %u)\n"
"      --numa-policy POLICY  where each NUMA node's pages come from (real\n"
"                         nodes; not with --nodes): preferred (default: the\n"
"                         node, then the nearest others when it is short),\n"
"                         bind (that node only, up to a cap per node: its\n"
"                         free memory at start less a reserve; then ENOMEM),\n"
"                         interleave (over every memory node)\n"
"      --huge-pages MODE  back the object data with 2 MiB pages (shmem\n"
"                         transparent huge pages, madvise): off, try\n"
"                         (default: logged and off when the kernel refuses), on\n"
"                         (refuse to start without them); the kernel must\n"
"                         allow them: /sys/kernel/mm/transparent_hugepage/\n"
"                         shmem_enabled 'advise' or above\n"
"      --max-frame BYTES  largest control frame accepted (default 1M)\n"
"      --max-connections N  most open control connections (default: the\n"
"                         descriptor limit less %u); over it, the oldest\n"
"                         connection silent for 0.5 s makes room, else the\n"
"                         new one is closed at once\n"
"      --idle-timeout MS  close a connection that sends no complete first\n"
"                         request, or stalls inside a frame, this long\n"
"                         (default %u; 0: never)\n"
"      --max-clients-per-uid N  client slots one uid may hold (%u..%u,\n"
"                         default half of max-clients); Attach beyond fails\n"
"                         with NO_SPACE\n"
"      --max-threads-per-client N  lanes (threads using the pool at once)\n"
"                         one client may hold (default an eighth of the\n"
"                         pool's max-threads, at least 4); a thread beyond\n"
"                         gets EMFILE, and a client asking for more once\n"
"                         told it is at its most is revoked\n"
"      --max-threads-per-uid N  lanes the clients of one uid may hold in\n"
"                         all (default half of the pool's max-threads)\n"
"      --revoke-ban S     seconds a revoked client's uid may not attach\n"
"                         again (default %u; 0: none)\n"
"      --max-clients N    attached processes the pool holds (%u..%u, default %u)\n"
"      --max-threads N    threads using the pool at once, all processes\n"
"                         (%u..%u, default %u)\n"
"      --max-caches N     caches in the pool (%u..%u, default %u)\n"
"                         (the three are fixed when the pool is created;\n"
"                         unused slots cost no memory)\n"
"  -f, --foreground       stay in the foreground (default: detach)\n"
"      --log-level LEVEL  error, warn, info (default) or debug\n"
"      --allow-uid USER   allow this uid or user name to attach (repeatable;\n"
"                         default: sheafd's own uid)\n"
"      --allow-gid GROUP  allow this gid or group name, primary or\n"
"                         supplementary, to attach (repeatable)\n"
"  -h, --help             this help\n"
"  -V, --version          version\n"
"\n"
"Signals: SIGTERM stops cleanly, SIGHUP re-reads log_level and allow lists.\n",
		POOL_NODES_MIN, POOL_NODES_MAX, POOL_DEFAULT_SHEAVES,
		CONFIG_FD_RESERVE(SHEAF_DEFAULT_CLIENTS), CONFIG_IDLE_TIMEOUT_MS,
		POOL_CLIENTS_MIN, POOL_CLIENTS_MAX, CONFIG_REVOKE_BAN_S,
		POOL_CLIENTS_MIN, POOL_CLIENTS_MAX, SHEAF_DEFAULT_CLIENTS,
		POOL_LANES_MIN, POOL_LANES_MAX, SHEAF_DEFAULT_LANES,
		POOL_CACHES_MIN, POOL_CACHES_MAX, SHEAF_DEFAULT_CACHES);
}

/* Fill the caller's @err (truncated to @errlen, as snprintf does). */
static void __attribute__((format(printf, 3, 4)))
set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || end == s)
		return -1;
	switch (toupper((unsigned char)*end)) {
	case 'K': v <<= 10; end++; break;
	case 'M': v <<= 20; end++; break;
	case 'G': v <<= 30; end++; break;
	default: break;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end != '\0')
		return -1;
	*out = v;
	return 0;
}

static int parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
	uint64_t v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

/* A comma list of numeric ids or user (@group 0) / group (@group 1) names. */
static int add_ids(uint32_t *ids, uint32_t *n, const char *list, int reset, int group)
{
	char buf[256], *save = NULL, *tok;

	if (reset)
		*n = 0;
	snprintf(buf, sizeof(buf), "%s", list);
	for (tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
		uint32_t v;
		if (*n >= CONFIG_MAX_IDS)
			return -1;
		if (parse_u32(tok, 0, UINT32_MAX - 1, &v) != 0) {
			struct passwd *pw = group ? NULL : getpwnam(tok);
			struct group *gr = group ? getgrnam(tok) : NULL;
			if (pw == NULL && gr == NULL)
				return -1;
			v = pw != NULL ? (uint32_t)pw->pw_uid : (uint32_t)gr->gr_gid;
		}
		ids[(*n)++] = v;
	}
	return 0;
}

/*
 * The settings, one row each: the file's key, the alias the file also
 * takes and the flag's name (--ALIAS, or --NAME without one), how the value
 * is parsed, the range accepted, and the field of struct config it sets.
 * The pool's ranges are shm/pool.h's, the ones pool_create checks again.
 */
enum key_kind {
	KEY_PATH,                    /* the socket's path: at most the field's size - 1 */
	KEY_BYTES,                   /* parse_size, within [min, max] */
	KEY_U32,                     /* a decimal uint32_t within [min, max] */
	KEY_HUGE,                    /* huge_mode_parse */
	KEY_NUMA,                    /* numa_policy_parse (shm/numa.h) */
	KEY_LEVEL,                   /* log_level_parse (an int field) */
	KEY_USERS,                   /* add_ids, user names; off_n: the count */
	KEY_GROUPS,                  /* add_ids, group names; off_n: the count */
};

struct key {
	const char *name;
	const char *alias;           /* NULL: none */
	enum key_kind kind;
	uint64_t min, max;
	size_t off, width;           /* the field: offset, size */
	size_t off_n;                /* KEY_USERS, KEY_GROUPS: the count's offset */
};

#define FIELD(f) offsetof(struct config, f), sizeof(((struct config *)0)->f)
#define ANY 0, UINT64_MAX

static const struct key keys[] = {
	{ "socket", NULL, KEY_PATH, ANY, FIELD(socket), 0 },
	{ "size", NULL, KEY_BYTES, ANY, FIELD(size), 0 },
	{ "mem_cap", "mem-cap", KEY_BYTES, ANY, FIELD(mem_cap), 0 },
	{ "nodes", NULL, KEY_U32, POOL_NODES_MIN, POOL_NODES_MAX, FIELD(nodes), 0 },
	{ "sheaves", NULL, KEY_U32, POOL_SHEAVES_MIN, POOL_SHEAVES_MAX, FIELD(sheaves), 0 },
	{ "huge_pages", "huge-pages", KEY_HUGE, ANY, FIELD(huge_pages), 0 },
	{ "numa_policy", "numa-policy", KEY_NUMA, ANY, FIELD(numa_policy), 0 },
	{ "max_frame", "max-frame", KEY_BYTES, 64, 64u << 20, FIELD(max_frame), 0 },
	{ "max_connections", "max-connections", KEY_U32, 1, 1u << 24,
	  FIELD(max_connections), 0 },
	{ "idle_timeout", "idle-timeout", KEY_U32, 0, 3600u * 1000u, FIELD(idle_timeout_ms), 0 },
	{ "max_clients_per_uid", "max-clients-per-uid", KEY_U32, POOL_CLIENTS_MIN,
	  POOL_CLIENTS_MAX, FIELD(max_clients_per_uid), 0 },
	{ "max_threads_per_client", "max-threads-per-client", KEY_U32, 1, POOL_LANES_MAX,
	  FIELD(max_threads_per_client), 0 },
	{ "max_threads_per_uid", "max-threads-per-uid", KEY_U32, 1, POOL_LANES_MAX,
	  FIELD(max_threads_per_uid), 0 },
	{ "revoke_ban", "revoke-ban", KEY_U32, 0, 86400u * 365u, FIELD(revoke_ban_s), 0 },
	{ "max_clients", "max-clients", KEY_U32, POOL_CLIENTS_MIN, POOL_CLIENTS_MAX,
	  FIELD(max_clients), 0 },
	{ "max_threads", "max-threads", KEY_U32, POOL_LANES_MIN, POOL_LANES_MAX,
	  FIELD(max_threads), 0 },
	{ "max_caches", "max-caches", KEY_U32, POOL_CACHES_MIN, POOL_CACHES_MAX,
	  FIELD(max_caches), 0 },
	{ "log_level", "log-level", KEY_LEVEL, ANY, FIELD(log_level), 0 },
	{ "allow_uid", "allow-uid", KEY_USERS, ANY, FIELD(allow_uid),
	  offsetof(struct config, n_uid) },
	{ "allow_gid", "allow-gid", KEY_GROUPS, ANY, FIELD(allow_gid),
	  offsetof(struct config, n_gid) },
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

static const struct key *key_find(const char *name)
{
	for (size_t i = 0; i < NKEYS; i++)
		if (strcmp(name, keys[i].name) == 0 ||
		    (keys[i].alias != NULL && strcmp(name, keys[i].alias) == 0))
			return &keys[i];
	return NULL;
}

_Static_assert(sizeof(int) == sizeof(uint32_t), "log_level is stored as 4 bytes");

/* Store @v in @k's field of @c (4 or 8 bytes wide). */
static void key_store(struct config *c, const struct key *k, uint64_t v)
{
	char *f = (char *)c + k->off;

	if (k->width == sizeof(uint64_t)) {
		memcpy(f, &v, sizeof(v));
	} else {
		uint32_t v32 = (uint32_t)v;

		memcpy(f, &v32, sizeof(v32));
	}
}

/* Set @k from @val (named @key as given: the file's spelling, or the
 * row's name for a flag): 0, or -1 with @err. */
static int key_apply(struct config *c, const struct key *k, const char *key,
		     const char *val, int from_file, char *err, size_t errlen)
{
	uint64_t v = 0;
	uint32_t v32;
	enum huge_mode m;
	int rc = 0;

	switch (k->kind) {
	case KEY_PATH:
		if (strlen(val) >= k->width) {
			set_err(err, errlen, "socket path too long (max %zu bytes)", k->width - 1);
			return -1;
		}
		snprintf((char *)c + k->off, k->width, "%s", val);
		return 0;
	case KEY_BYTES:
		rc = parse_size(val, &v);
		if (rc == 0 && (v < k->min || v > k->max))
			rc = -1;
		break;
	case KEY_U32:
		rc = parse_u32(val, (uint32_t)k->min, (uint32_t)k->max, &v32);
		if (rc == 0)
			v = v32;
		break;
	case KEY_HUGE:
		rc = huge_mode_parse(val, &m);
		if (rc == 0)
			v = (uint64_t)m;
		break;
	case KEY_NUMA:
		rc = numa_policy_parse(val);
		if (rc >= 0) {
			v = (uint64_t)rc;
			rc = 0;
		}
		break;
	case KEY_LEVEL:
		rc = log_level_parse(val);
		if (rc >= 0) {
			v = (uint64_t)rc;
			rc = 0;
		}
		break;
	case KEY_USERS:
	case KEY_GROUPS:
		rc = add_ids((uint32_t *)((char *)c + k->off), (uint32_t *)((char *)c + k->off_n),
			     val, from_file, k->kind == KEY_GROUPS);
		if (rc == 0)
			return 0;
		break;
	}
	if (rc != 0) {
		set_err(err, errlen, "bad value '%s' for %s", val, key);
		return -1;
	}
	key_store(c, k, v);
	return 0;
}

/* Apply one setting (from the file or a flag). */
static int apply(struct config *c, const char *key, const char *val, int from_file,
		 char *err, size_t errlen)
{
	const struct key *k = key_find(key);

	if (k == NULL) {
		set_err(err, errlen, "unknown setting '%s'", key);
		return -1;
	}
	return key_apply(c, k, key, val, from_file, err, errlen);
}

static int load_file(struct config *c, const char *path, char *err, size_t errlen)
{
	char line[512];
	int lineno = 0;
	FILE *f = fopen(path, "r");

	if (f == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		char *k = line, *eq, *v, *end;
		char msg[256];

		lineno++;
		while (isspace((unsigned char)*k))
			k++;
		if (*k == '#' || *k == '\0')
			continue;
		eq = strchr(k, '=');
		if (eq == NULL) {
			snprintf(err, errlen, "%s:%d: expected key=value", path, lineno);
			fclose(f);
			return -1;
		}
		*eq = '\0';
		v = eq + 1;
		for (end = eq; end > k && isspace((unsigned char)end[-1]); end--)
			end[-1] = '\0';
		while (isspace((unsigned char)*v))
			v++;
		for (end = v + strlen(v); end > v && isspace((unsigned char)end[-1]); end--)
			end[-1] = '\0';
		if (apply(c, k, v, 1, msg, sizeof(msg)) != 0) {
			snprintf(err, errlen, "%s:%d: %s", path, lineno, msg);
			fclose(f);
			return -1;
		}
	}
	fclose(f);
	return 0;
}

/* getopt_long's values: a row of keys[] is OPT_KEY + its index. */
enum { OPT_KEY = 256 };

/* The long options: one per row of keys[], then --config, --foreground,
 * --help, --version. */
static void long_options(struct option *o)
{
	static const struct option rest[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};

	for (size_t i = 0; i < NKEYS; i++)
		o[i] = (struct option){ keys[i].alias != NULL ? keys[i].alias : keys[i].name,
					required_argument, NULL, OPT_KEY + (int)i };
	memcpy(o + NKEYS, rest, sizeof(rest));
}

int config_from_args(struct config *c, int argc, char **argv, char *err, size_t errlen)
{
	struct option longopts[NKEYS + 5];
	unsigned char listed[NKEYS] = { 0 };
	int opt, pass;

	config_defaults(c);
	long_options(longopts);
	/* Pass 0 finds --config and --help; pass 1 applies the flags over
	 * what the file set. */
	for (pass = 0; pass < 2; pass++) {
		optind = 1;
		opterr = 0;
		while ((opt = getopt_long(argc, argv, "s:c:fhV", longopts, NULL)) != -1) {
			const struct key *k;

			if (opt == '?' || opt == ':') {
				snprintf(err, errlen, "unknown or incomplete option '%s' (see --help)",
					 argv[optind - 1]);
				return -1;
			}
			if (pass == 0) {
				if (opt == 'h') {
					config_usage(stdout);
					return 1;
				}
				if (opt == 'V') {
					printf("sheafd %s\n", SHEAF_VERSION);
					return 1;
				}
				if (opt == 'c')
					snprintf(c->config_path, sizeof(c->config_path), "%s", optarg);
				continue;
			}
			if (opt == 'f') {
				c->foreground = 1;
				continue;
			}
			if (opt == 's')
				k = key_find("socket");
			else if (opt >= OPT_KEY && opt < OPT_KEY + (int)NKEYS)
				k = &keys[opt - OPT_KEY];
			else
				continue;
			/* A flag's id list replaces the file's. */
			if ((k->kind == KEY_USERS || k->kind == KEY_GROUPS) && !listed[k - keys]++)
				*(uint32_t *)((char *)c + k->off_n) = 0;
			if (key_apply(c, k, k->name, optarg, 0, err, errlen) != 0)
				return -1;
		}
		if (pass == 0 && optind < argc) {
			snprintf(err, errlen, "unexpected argument '%s' (see --help)", argv[optind]);
			return -1;
		}
		if (pass == 0 && c->config_path[0] != '\0' &&
		    load_file(c, c->config_path, err, errlen) != 0)
			return -1;
	}
	if (c->max_clients_per_uid == 0)
		c->max_clients_per_uid = CONFIG_CLIENTS_PER_UID(c->max_clients);
	return 0;
}

int config_reload(struct config *c, char *err, size_t errlen)
{
	struct config fresh;

	if (c->config_path[0] == '\0')
		return 0;
	config_defaults(&fresh);
	if (load_file(&fresh, c->config_path, err, errlen) != 0)
		return -1;
	c->log_level = fresh.log_level;
	memcpy(c->allow_uid, fresh.allow_uid, sizeof(c->allow_uid));
	c->n_uid = fresh.n_uid;
	memcpy(c->allow_gid, fresh.allow_gid, sizeof(c->allow_gid));
	c->n_gid = fresh.n_gid;
	return 0;
}
