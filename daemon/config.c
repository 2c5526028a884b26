/* config.c - sheafd configuration (config.h). */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "config.h"
#include "log.h"
#include "proto/frame.h"
#include "proto/paths.h"

#include "proto/version.h"
#include "shm/huge.h"

void config_defaults(struct config *c)
{
	memset(c, 0, sizeof(*c));
	sheaf_default_socket(c->socket, sizeof(c->socket), 0);
	c->size = 1ull << 30;
	c->sheaves = 32768;
	c->max_frame = FRAME_DEFAULT_CAP;
	c->idle_timeout_ms = CONFIG_IDLE_TIMEOUT_MS;
	c->max_clients = SHEAF_DEFAULT_CLIENTS;
	c->max_threads = SHEAF_DEFAULT_LANES;
	c->max_caches = SHEAF_DEFAULT_CACHES;
	c->log_level = LOG_INFO;
	c->huge_pages = HUGE_TRY;       /* used when the kernel allows (design 5b) */
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
"                         huge_pages,\n"
"                         log_level, allow_uid, allow_gid, max_frame,\n"
"                         max_connections, idle_timeout, max_clients_per_uid,\n"
"                         max_clients, max_threads, max_caches\n"
"                         (flags win)\n"
"      --size BYTES       pool data size, K/M/G suffixes (default 1G; sparse)\n"
"      --mem-cap BYTES    most bytes of slabs (default: size)\n"
"      --nodes N          simulate N NUMA nodes (1..8; default: the machine's)\n"
"      --sheaves N        sheaves in the pool (default 32768)\n"
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
"      --max-clients-per-uid N  client slots one uid may hold (1..%u,\n"
"                         default half of max-clients); Attach beyond fails\n"
"                         with NO_SPACE\n"
"      --max-clients N    attached processes the pool holds (1..%u, default %u)\n"
"      --max-threads N    threads using the pool at once, all processes\n"
"                         (%u..%u, default %u)\n"
"      --max-caches N     caches in the pool (1..%u, default %u)\n"
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
		CONFIG_FD_RESERVE(SHEAF_DEFAULT_CLIENTS), CONFIG_IDLE_TIMEOUT_MS,
		SHEAF_MAX_CLIENTS, SHEAF_MAX_CLIENTS, SHEAF_DEFAULT_CLIENTS,
		2 + SHEAF_MAX_NODES, SHEAF_MAX_LANES, SHEAF_DEFAULT_LANES,
		SHEAF_MAX_CACHES, SHEAF_DEFAULT_CACHES);
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

/* Apply one setting (from the file or a flag). */
static int apply(struct config *c, const char *key, const char *val, int from_file,
		 char *err, size_t errlen)
{
	int rc = 0;

	if (strcmp(key, "socket") == 0) {
		if (strlen(val) >= sizeof(c->socket)) {
			snprintf(err, errlen, "socket path too long (max %zu bytes)",
				 sizeof(c->socket) - 1);
			return -1;
		}
		snprintf(c->socket, sizeof(c->socket), "%s", val);
	} else if (strcmp(key, "size") == 0) {
		rc = parse_size(val, &c->size);
	} else if (strcmp(key, "mem_cap") == 0 || strcmp(key, "mem-cap") == 0) {
		rc = parse_size(val, &c->mem_cap);
	} else if (strcmp(key, "nodes") == 0) {
		rc = parse_u32(val, 1, 8, &c->nodes);
	} else if (strcmp(key, "sheaves") == 0) {
		rc = parse_u32(val, 64, 1u << 20, &c->sheaves);
	} else if (strcmp(key, "huge_pages") == 0 || strcmp(key, "huge-pages") == 0) {
		enum huge_mode m;

		rc = huge_mode_parse(val, &m);
		c->huge_pages = (uint32_t)m;
	} else if (strcmp(key, "max_frame") == 0 || strcmp(key, "max-frame") == 0) {
		uint64_t v;
		rc = parse_size(val, &v);
		if (rc == 0 && (v < 64 || v > (64u << 20)))
			rc = -1;
		c->max_frame = (uint32_t)v;
	} else if (strcmp(key, "max_connections") == 0 ||
		   strcmp(key, "max-connections") == 0) {
		rc = parse_u32(val, 1, 1u << 24, &c->max_connections);
	} else if (strcmp(key, "idle_timeout") == 0 || strcmp(key, "idle-timeout") == 0) {
		rc = parse_u32(val, 0, 3600u * 1000u, &c->idle_timeout_ms);
	} else if (strcmp(key, "max_clients_per_uid") == 0 ||
		   strcmp(key, "max-clients-per-uid") == 0) {
		rc = parse_u32(val, 1, SHEAF_MAX_CLIENTS, &c->max_clients_per_uid);
	} else if (strcmp(key, "max_clients") == 0 || strcmp(key, "max-clients") == 0) {
		rc = parse_u32(val, 1, SHEAF_MAX_CLIENTS, &c->max_clients);
	} else if (strcmp(key, "max_threads") == 0 || strcmp(key, "max-threads") == 0) {
		rc = parse_u32(val, 2 + SHEAF_MAX_NODES, SHEAF_MAX_LANES, &c->max_threads);
	} else if (strcmp(key, "max_caches") == 0 || strcmp(key, "max-caches") == 0) {
		rc = parse_u32(val, 1, SHEAF_MAX_CACHES, &c->max_caches);
	} else if (strcmp(key, "log_level") == 0 || strcmp(key, "log-level") == 0) {
		rc = log_level_parse(val);
		if (rc >= 0) {
			c->log_level = rc;
			rc = 0;
		}
	} else if (strcmp(key, "allow_uid") == 0 || strcmp(key, "allow-uid") == 0) {
		rc = add_ids(c->allow_uid, &c->n_uid, val, from_file, 0);
	} else if (strcmp(key, "allow_gid") == 0 || strcmp(key, "allow-gid") == 0) {
		rc = add_ids(c->allow_gid, &c->n_gid, val, from_file, 1);
	} else {
		snprintf(err, errlen, "unknown setting '%s'", key);
		return -1;
	}
	if (rc != 0)
		snprintf(err, errlen, "bad value '%s' for %s", val, key);
	return rc;
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

static const struct option longopts[] = {
	{ "socket", required_argument, NULL, 's' },
	{ "config", required_argument, NULL, 'c' },
	{ "size", required_argument, NULL, 1 },
	{ "mem-cap", required_argument, NULL, 2 },
	{ "nodes", required_argument, NULL, 3 },
	{ "sheaves", required_argument, NULL, 4 },
	{ "max-frame", required_argument, NULL, 5 },
	{ "foreground", no_argument, NULL, 'f' },
	{ "log-level", required_argument, NULL, 6 },
	{ "allow-uid", required_argument, NULL, 7 },
	{ "allow-gid", required_argument, NULL, 8 },
	{ "max-connections", required_argument, NULL, 9 },
	{ "idle-timeout", required_argument, NULL, 10 },
	{ "max-clients-per-uid", required_argument, NULL, 11 },
	{ "max-clients", required_argument, NULL, 12 },
	{ "max-threads", required_argument, NULL, 13 },
	{ "max-caches", required_argument, NULL, 14 },
	{ "huge-pages", required_argument, NULL, 15 },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

static const char *const keys[] = {
	[1] = "size", [2] = "mem_cap", [3] = "nodes", [4] = "sheaves",
	[5] = "max_frame", [6] = "log_level", [7] = "allow_uid", [8] = "allow_gid",
	[9] = "max_connections", [10] = "idle_timeout", [11] = "max_clients_per_uid",
	[12] = "max_clients", [13] = "max_threads", [14] = "max_caches",
	[15] = "huge_pages",
};

int config_from_args(struct config *c, int argc, char **argv, char *err, size_t errlen)
{
	int opt, pass, uid_flag = 0, gid_flag = 0;

	config_defaults(c);
	/* Pass 0 finds --config and --help; pass 1 applies the flags over
	 * what the file set. */
	for (pass = 0; pass < 2; pass++) {
		optind = 1;
		opterr = 0;
		while ((opt = getopt_long(argc, argv, "s:c:fhV", longopts, NULL)) != -1) {
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
			} else if (opt == 's') {
				if (apply(c, "socket", optarg, 0, err, errlen) != 0)
					return -1;
			} else if (opt >= 1 && opt <= 15) {
				/* A flag's id list replaces the file's. */
				if (opt == 7 && !uid_flag++)
					c->n_uid = 0;
				if (opt == 8 && !gid_flag++)
					c->n_gid = 0;
				if (apply(c, keys[opt], optarg, 0, err, errlen) != 0)
					return -1;
			}
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
