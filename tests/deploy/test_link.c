/*
 * test_link.c - programs built against the INSTALLED libsheaf, the way a
 * user builds them, run against a real sheafd: the inline fast paths and
 * the ways a program can be linked.
 *
 * main() runs `make install DESTDIR=TMP/dest PREFIX=/usr` once (SAN= as this
 * build: under a sanitizer the installed library is instrumented); each test
 * then compiles one program with nothing but pkg-config's flags
 * (PKG_CONFIG_PATH + PKG_CONFIG_SYSROOT_DIR into the tree; under SAN= the
 * sanitizer's own flag is added, the executable must carry its runtime),
 * starts the installed sheafd on a socket of its own and runs the program
 * (LD_LIBRARY_PATH into the tree, GLIBC_TUNABLES unset), which must exit 0.
 *
 *   example_*   the EXAMPLES program of the installed libsheaf(3) page,
 *               taken from the page itself;
 *   threads_*   four threads allocate batches of objects of one cache, fill
 *               them, check every byte and free them (inline fast paths and
 *               slow paths), then the fast-path counters, in_use 0 and the
 *               pool checker;
 *   for each of: pie     cc -O2 -fPIE -pie
 *                nopie   cc -O2 -no-pie
 *                cxx     c++ -O2 (the program compiled as C++)
 *                static  cc -O2 -static, `pkg-config --libs --static`
 *                        (under SAN=, which cannot link -static: libsheaf.a
 *                        by name, -l:libsheaf.a, the rest shared);
 *   dlopen_lib     a program not linked with libsheaf dlopen()s
 *                  libsheaf.so.1, finds sheaf_connect etc. with dlsym and
 *                  allocates and frees from two threads;
 *   dlopen_plugin  the same program dlopen()s a shared object built -O2
 *                  against sheaf.h (as a language extension module is),
 *                  whose inline fast paths reach libsheaf's thread-local
 *                  state from a library loaded after start-up.
 *   exported_data  libsheaf.so exports no data object, only a little TLS
 *                  (the rule the inline paths rely on), and its TLS fits
 *                  what glibc keeps for dlopen().
 * The inline paths must really be in the -O2 programs: each dynamic one
 * must reference the slow paths they call (sheaf__alloc_slow,
 * sheaf__free_slow), which no other code of the program calls.
 *
 * A test whose tool is missing (cc, c++, pkg-config) fails with SKIP
 * (SHEAF_TEST_SKIP_OK=1 lets it pass).
 * Each test is its own TCase: CK_RUN_CASE=<name> runs one.  The programs
 * are C (and C++) source below, written to files; they never call Check.
 */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_deploy.h"
#include "tests/helpers/util_proc.h"

static char top_dir[PATH_MAX];           /* TMP: the install and each test's directory */
static char dest[PATH_MAX];              /* TMP/dest, PREFIX /usr */
static int san;                          /* SHEAF_SAN set: scale down */

/* ---- failure handling ------------------------------------------------------ */

static char fail_log[PATH_MAX];          /* printed when a test fails */

static void on_failure(const char *file, int line, const char *cond)
{
	fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, cond);
	kill_tracked();
	if (fail_log[0] != '\0')
		dump_file(NULL, fail_log, 200);
	fprintf(stderr, "(test directory kept: %s)\n", top_dir);
	fflush(stderr);
}

/* ---- running things -------------------------------------------------------- */

/*
 * Run `/bin/sh -c @cmd` in @dir with @env changes (see struct spawn_opts)
 * and the pkg-config variables pointing into the installed tree; stdout and
 * stderr to @log.  Returns the wait status.
 */
static int sh_in(const char *dir, const char *cmd, const char *const *env, const char *log)
{
	char full[4 * PATH_MAX], pcpath[PATH_MAX + 32], sysroot[PATH_MAX + 32], err[512];
	const char *e[16] = { pcpath, sysroot, "-PKG_CONFIG_LIBDIR", "-GLIBC_TUNABLES",
			      "-MAKEFLAGS", "-MAKELEVEL", "-MFLAGS" };
	const char *argv[] = { "/bin/sh", "-c", full, NULL };
	struct spawn_opts o = { .out = log, .err = log, .append = 1, .stdin_null = 1, .env = e };
	const char *msg;
	int n = 7, st;

	fmt(full, sizeof(full), "cd '%s' && %s", dir, cmd);
	fmt(pcpath, sizeof(pcpath), "PKG_CONFIG_PATH=%s/usr/lib/pkgconfig", dest);
	fmt(sysroot, sizeof(sysroot), "PKG_CONFIG_SYSROOT_DIR=%s", dest);
	for (int i = 0; env != NULL && env[i] != NULL; i++) {
		REQUIRE(n < 15, "too many environment changes");
		e[n++] = env[i];
	}
	fmt(fail_log, sizeof(fail_log), "%s", log);
	msg = run_proc(argv, &o, 300000, &st, err, sizeof(err));
	REQUIRE(msg == NULL, "%s", msg);
	return st;
}

/* A test's own directory, TMP/@name. */
static void case_dir(char *dir, size_t len, const char *name)
{
	fmt(dir, len, "%s/%s", top_dir, name);
	REQUIRE(mkdir(dir, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", dir, strerror(errno));
}

/* The installed sheafd on DIR/s.sock with the installed config. */
static pid_t sheafd_start(const char *dir, char *sock, size_t len)
{
	char exe[PATH_MAX], conf[PATH_MAX], log[PATH_MAX], err[512];
	const char *argv[] = { exe, "--foreground", "--config", conf, "--socket", sock,
			       "--size", "256M", NULL };
	struct spawn_opts o = { .out = log, .err = log, .append = 1, .stdin_null = 1 };
	const char *msg;
	pid_t pid;

	fmt(exe, sizeof(exe), "%s/usr/sbin/sheafd", dest);
	fmt(conf, sizeof(conf), "%s/etc/sheaf/sheafd.conf", dest);
	fmt(sock, len, "%s/s.sock", dir);
	fmt(log, sizeof(log), "%s/sheafd.log", dir);
	fmt(fail_log, sizeof(fail_log), "%s", log);
	msg = start_listening(argv, &o, sock, 30000, &pid, err, sizeof(err));
	REQUIRE(msg == NULL, "the installed sheafd did not start: %s", msg);
	track(pid);
	return pid;
}

static void sheafd_stop(pid_t pid)
{
	char err[512];
	const char *msg;
	int st;

	msg = signal_wait(pid, SIGTERM, 30000, &st, err, sizeof(err));
	REQUIRE(msg == NULL, "%s", msg);
	untrack(pid);
	REQUIRE(exited_ok(st), "sheafd ended with %s", status_str(st, err, sizeof(err)));
}

/* ---- the programs ---------------------------------------------------------- */

/*
 * threads.c: argv[1] rounds per thread.  Each round a thread allocates a
 * batch (1..600, varying, so that sheaves empty and fill at every point),
 * stamps each object with its thread, round and index over every byte,
 * checks them all, frees them from a rotating start, and does one
 * alloc+free pair.  C and C++.
 */
static const char threads_c[] =
"/* threads.c - test_link: four threads allocate, fill, check and free. */\n"
"#include <errno.h>\n"
"#include <pthread.h>\n"
"#include <stdint.h>\n"
"#include <stdio.h>\n"
"#include <stdlib.h>\n"
"#include <string.h>\n"
"#include <sheaf.h>\n"
"\n"
"#define THREADS 4\n"
"#define BATCH   600\n"
"#define SIZE    104\n"
"\n"
"static sheaf_cache_t *cache;\n"
"static long rounds;\n"
"\n"
"static unsigned char byte_of(uint64_t me, long r, int i, int k)\n"
"{\n"
"	return (unsigned char)(me * 97 + (uint64_t)r * 31 + (uint64_t)i * 7 + (uint64_t)k);\n"
"}\n"
"\n"
"static int check(unsigned char *o, uint64_t me, long r, int i)\n"
"{\n"
"	for (int k = 0; k < SIZE; k++)\n"
"		if (o[k] != byte_of(me, r, i, k)) {\n"
"			fprintf(stderr, \"threads: thread %d round %ld object %d byte %d: \"\n"
"				\"%#x, not %#x\\n\", (int)me, r, i, k, o[k], byte_of(me, r, i, k));\n"
"			return -1;\n"
"		}\n"
"	return 0;\n"
"}\n"
"\n"
"static void *worker(void *arg)\n"
"{\n"
"	uint64_t me = (uint64_t)(uintptr_t)arg;\n"
"	unsigned char **o = (unsigned char **)calloc(BATCH, sizeof(*o));\n"
"\n"
"	if (o == NULL)\n"
"		return arg;\n"
"	for (long r = 0; r < rounds; r++) {\n"
"		int n = 1 + (int)(((uint64_t)r * 7919 + me * 104729) % BATCH);\n"
"		int start = (int)((uint64_t)r % (uint64_t)n);\n"
"		unsigned char *x;\n"
"\n"
"		for (int i = 0; i < n; i++) {\n"
"			o[i] = (unsigned char *)sheaf_alloc(cache);\n"
"			if (o[i] == NULL) {\n"
"				fprintf(stderr, \"threads: sheaf_alloc: %s\\n\", strerror(errno));\n"
"				return arg;\n"
"			}\n"
"			for (int k = 0; k < SIZE; k++)\n"
"				o[i][k] = byte_of(me, r, i, k);\n"
"		}\n"
"		for (int i = 0; i < n; i++)\n"
"			if (check(o[i], me, r, i) != 0)\n"
"				return arg;\n"
"		for (int j = 0; j < n; j++) {\n"
"			int i = (start + j) % n;\n"
"			if (check(o[i], me, r, i) != 0 || sheaf_free(cache, o[i]) != 0) {\n"
"				fprintf(stderr, \"threads: free of object %d refused\\n\", i);\n"
"				return arg;\n"
"			}\n"
"		}\n"
"		x = (unsigned char *)sheaf_alloc(cache);\n"
"		if (x == NULL || (memset(x, 0x5a, SIZE), sheaf_free(cache, x)) != 0) {\n"
"			fprintf(stderr, \"threads: alloc+free pair failed\\n\");\n"
"			return arg;\n"
"		}\n"
"	}\n"
"	free(o);\n"
"	sheaf_thread_exit();\n"
"	return NULL;\n"
"}\n"
"\n"
"static uint64_t stat_of(const struct sheaf_stats *s, const char *name)\n"
"{\n"
"	int i = sheaf_stat_index(name);\n"
"	return i < 0 ? 0 : s->stat[i];\n"
"}\n"
"\n"
"int main(int argc, char **argv)\n"
"{\n"
"	char err[256], line[1024];\n"
"	pthread_t th[THREADS];\n"
"	struct sheaf_stats s;\n"
"	sheaf_pool_t *pool;\n"
"	FILE *maps;\n"
"	int bad = 0;\n"
"\n"
"	rounds = argc > 1 ? atol(argv[1]) : 1000;\n"
"	pool = sheaf_connect(NULL, \"threads\", 0, err, sizeof(err));\n"
"	if (pool == NULL) {\n"
"		fprintf(stderr, \"threads: sheaf_connect: %s\\n\", err);\n"
"		return 1;\n"
"	}\n"
"	cache = sheaf_cache_create(pool, \"threads\", SIZE, NULL);\n"
"	if (cache == NULL) {\n"
"		fprintf(stderr, \"threads: sheaf_cache_create: %s\\n\", strerror(errno));\n"
"		return 1;\n"
"	}\n"
"	for (uintptr_t i = 0; i < THREADS; i++)\n"
"		if (pthread_create(&th[i], NULL, worker, (void *)(i + 1)) != 0)\n"
"			return 1;\n"
"	for (int i = 0; i < THREADS; i++) {\n"
"		void *ret;\n"
"		pthread_join(th[i], &ret);\n"
"		bad |= ret != NULL;\n"
"	}\n"
"	if (bad)\n"
"		return 1;\n"
"	if (sheaf_cache_stats(cache, -1, &s) != 0) {\n"
"		fprintf(stderr, \"threads: sheaf_cache_stats failed\\n\");\n"
"		return 1;\n"
"	}\n"
"	printf(\"threads: alloc_fastpath %llu alloc_slowpath %llu free_fastpath %llu \"\n"
"	       \"free_slowpath %llu in_use %llu\\n\",\n"
"	       (unsigned long long)stat_of(&s, \"alloc_fastpath\"),\n"
"	       (unsigned long long)stat_of(&s, \"alloc_slowpath\"),\n"
"	       (unsigned long long)stat_of(&s, \"free_fastpath\"),\n"
"	       (unsigned long long)stat_of(&s, \"free_slowpath\"),\n"
"	       (unsigned long long)s.in_use);\n"
"	if (s.in_use != 0 || stat_of(&s, \"alloc_fastpath\") == 0 ||\n"
"	    stat_of(&s, \"free_fastpath\") == 0 ||\n"
"	    stat_of(&s, \"alloc_fastpath\") + stat_of(&s, \"alloc_slowpath\") !=\n"
"	    stat_of(&s, \"free_fastpath\") + stat_of(&s, \"free_slowpath\")) {\n"
"		fprintf(stderr, \"threads: the counters do not add up\\n\");\n"
"		return 1;\n"
"	}\n"
"	if (sheaf_cache_shrink(cache) < 0 || sheaf_pool_check(pool, err, sizeof(err)) != 0) {\n"
"		fprintf(stderr, \"threads: check: %s\\n\", err);\n"
"		return 1;\n"
"	}\n"
"	maps = fopen(\"/proc/self/maps\", \"r\");\n"
"	while (maps != NULL && fgets(line, sizeof(line), maps) != NULL) {\n"
"		char *p = strchr(line, '/');\n"
"		if (p != NULL && strstr(p, \"libsheaf.so\") != NULL) {\n"
"			printf(\"threads: library %s\", p);\n"
"			break;\n"
"		}\n"
"	}\n"
"	if (maps != NULL)\n"
"		fclose(maps);\n"
"	sheaf_disconnect(pool);\n"
"	printf(\"threads: ok\\n\");\n"
"	return 0;\n"
"}\n";

/*
 * plugin.c: a shared object built against sheaf.h, its inline fast paths
 * compiled in; dl.c loads it in "plugin" mode.
 */
static const char plugin_c[] =
"/* plugin.c - test_link: inline sheaf_alloc/sheaf_free in a dlopen()ed object. */\n"
"#include <stdint.h>\n"
"#include <string.h>\n"
"#include <sheaf.h>\n"
"\n"
"int plugin_run(sheaf_cache_t *c, unsigned seed, int rounds)\n"
"{\n"
"	unsigned char *o[300];\n"
"\n"
"	for (int r = 0; r < rounds; r++) {\n"
"		int n = 1 + (int)((seed + (unsigned)r * 7919u) % 300u);\n"
"		for (int i = 0; i < n; i++) {\n"
"			o[i] = (unsigned char *)sheaf_alloc(c);\n"
"			if (o[i] == NULL)\n"
"				return -1;\n"
"			memset(o[i], (int)((seed + (unsigned)i) & 0xff), 64);\n"
"		}\n"
"		for (int i = n - 1; i >= 0; i--) {\n"
"			for (int k = 0; k < 64; k++)\n"
"				if (o[i][k] != (unsigned char)(seed + (unsigned)i))\n"
"					return -2;\n"
"			if (sheaf_free(c, o[i]) != 0)\n"
"				return -3;\n"
"		}\n"
"	}\n"
"	return 0;\n"
"}\n";

/*
 * dl.c MODE ROUNDS: not linked with libsheaf.  MODE "lib": dlopen
 * libsheaf.so.1 and call its exported functions (dlsym); "plugin": dlopen
 * ./libplugin.so (which needs libsheaf.so.1) and run its plugin_run, whose
 * fast paths are inline.  Two threads and the main thread work at once;
 * the two threads end after the main thread's dlclose(), so libsheaf's
 * thread-exit hook runs then (libsheaf.so is linked -z nodelete).
 */
static const char dl_c[] =
"/* dl.c - test_link: libsheaf through dlopen(), no GLIBC_TUNABLES. */\n"
"#include <dlfcn.h>\n"
"#include <errno.h>\n"
"#include <pthread.h>\n"
"#include <stdint.h>\n"
"#include <stdio.h>\n"
"#include <stdlib.h>\n"
"#include <string.h>\n"
"#include <sheaf.h>\n"
"\n"
"static sheaf_pool_t *(*p_connect)(const char *, const char *, unsigned, char *, size_t);\n"
"static sheaf_cache_t *(*p_cache_create)(sheaf_pool_t *, const char *, size_t,\n"
"					const struct sheaf_cache_config *);\n"
"static void *(*p_alloc)(sheaf_cache_t *);\n"
"static int (*p_free)(sheaf_cache_t *, void *);\n"
"static void (*p_thread_exit)(void);\n"
"static int (*p_shrink)(sheaf_cache_t *);\n"
"static int (*p_check)(sheaf_pool_t *, char *, size_t);\n"
"static void (*p_disconnect)(sheaf_pool_t *);\n"
"static int (*p_plugin_run)(sheaf_cache_t *, unsigned, int);\n"
"static sheaf_cache_t *cache;\n"
"static int rounds;\n"
"static pthread_barrier_t done;          /* all three have done their work */\n"
"static pthread_barrier_t unloaded;      /* the threads exit after dlclose() */\n"
"\n"
"static int work_lib(unsigned seed)\n"
"{\n"
"	unsigned char *o[300];\n"
"\n"
"	for (int r = 0; r < rounds; r++) {\n"
"		int n = 1 + (int)((seed + (unsigned)r * 7919u) % 300u);\n"
"		for (int i = 0; i < n; i++) {\n"
"			o[i] = (unsigned char *)p_alloc(cache);\n"
"			if (o[i] == NULL)\n"
"				return -1;\n"
"			memset(o[i], (int)((seed + (unsigned)i) & 0xff), 64);\n"
"		}\n"
"		for (int i = 0; i < n; i++) {\n"
"			for (int k = 0; k < 64; k++)\n"
"				if (o[i][k] != (unsigned char)(seed + (unsigned)i))\n"
"					return -2;\n"
"			if (p_free(cache, o[i]) != 0)\n"
"				return -3;\n"
"		}\n"
"	}\n"
"	return 0;\n"
"}\n"
"\n"
"static int work(unsigned seed)\n"
"{\n"
"	int rc = p_plugin_run ? p_plugin_run(cache, seed, rounds) : work_lib(seed);\n"
"\n"
"	if (rc != 0)\n"
"		fprintf(stderr, \"dl: thread %u: error %d\\n\", seed, rc);\n"
"	p_thread_exit();\n"
"	return rc;\n"
"}\n"
"\n"
"static void *worker(void *arg)\n"
"{\n"
"	int rc = work((unsigned)(uintptr_t)arg);\n"
"\n"
"	pthread_barrier_wait(&done);\n"
"	pthread_barrier_wait(&unloaded);\n"
"	return rc == 0 ? NULL : arg;     /* libsheaf's thread-exit hook runs */\n"
"}\n"
"\n"
"#define LOAD(h, var, name)                                              \\\n"
"	do {                                                            \\\n"
"		*(void **)&(var) = dlsym((h), (name));                  \\\n"
"		if ((var) == NULL) {                                    \\\n"
"			fprintf(stderr, \"dl: dlsym %s: %s\\n\", (name), dlerror()); \\\n"
"			return 1;                                       \\\n"
"		}                                                       \\\n"
"	} while (0)\n"
"\n"
"int main(int argc, char **argv)\n"
"{\n"
"	int plugin = argc > 1 && strcmp(argv[1], \"plugin\") == 0;\n"
"	const char *file = plugin ? \"./libplugin.so\" : \"libsheaf.so.1\";\n"
"	char err[256];\n"
"	pthread_t th[2];\n"
"	sheaf_pool_t *pool;\n"
"	void *h, *ret;\n"
"	int bad;\n"
"\n"
"	rounds = argc > 2 ? atoi(argv[2]) : 1000;\n"
"	if (dlopen(\"libsheaf.so.1\", RTLD_NOW | RTLD_NOLOAD) != NULL) {\n"
"		fprintf(stderr, \"dl: libsheaf.so.1 was loaded at start-up\\n\");\n"
"		return 1;\n"
"	}\n"
"	h = dlopen(file, RTLD_NOW | RTLD_LOCAL);\n"
"	if (h == NULL) {\n"
"		fprintf(stderr, \"dl: dlopen %s: %s\\n\", file, dlerror());\n"
"		return 1;\n"
"	}\n"
"	LOAD(h, p_connect, \"sheaf_connect\");\n"
"	LOAD(h, p_cache_create, \"sheaf_cache_create\");\n"
"	LOAD(h, p_alloc, \"sheaf_alloc\");\n"
"	LOAD(h, p_free, \"sheaf_free\");\n"
"	LOAD(h, p_thread_exit, \"sheaf_thread_exit\");\n"
"	LOAD(h, p_shrink, \"sheaf_cache_shrink\");\n"
"	LOAD(h, p_check, \"sheaf_pool_check\");\n"
"	LOAD(h, p_disconnect, \"sheaf_disconnect\");\n"
"	if (plugin)\n"
"		LOAD(h, p_plugin_run, \"plugin_run\");\n"
"	pool = p_connect(NULL, \"dl\", 0, err, sizeof(err));\n"
"	if (pool == NULL) {\n"
"		fprintf(stderr, \"dl: sheaf_connect: %s\\n\", err);\n"
"		return 1;\n"
"	}\n"
"	cache = p_cache_create(pool, \"dl\", 64, NULL);\n"
"	if (cache == NULL) {\n"
"		fprintf(stderr, \"dl: sheaf_cache_create: %s\\n\", strerror(errno));\n"
"		return 1;\n"
"	}\n"
"	pthread_barrier_init(&done, NULL, 3);\n"
"	pthread_barrier_init(&unloaded, NULL, 3);\n"
"	for (uintptr_t i = 0; i < 2; i++)\n"
"		if (pthread_create(&th[i], NULL, worker, (void *)(i + 1)) != 0)\n"
"			return 1;\n"
"	bad = work(3) != 0;\n"
"	pthread_barrier_wait(&done);\n"
"	/* The workers are done (sheaf_thread_exit) but still alive. */\n"
"	if (!bad && (p_shrink(cache) < 0 || p_check(pool, err, sizeof(err)) != 0)) {\n"
"		fprintf(stderr, \"dl: check: %s\\n\", err);\n"
"		bad = 1;\n"
"	}\n"
"	p_disconnect(pool);\n"
"	/* libsheaf must stay mapped: the workers' exit runs its hook. */\n"
"	dlclose(h);\n"
"	pthread_barrier_wait(&unloaded);\n"
"	for (int i = 0; i < 2; i++) {\n"
"		pthread_join(th[i], &ret);\n"
"		bad |= ret != NULL;\n"
"	}\n"
"	if (bad)\n"
"		return 1;\n"
"	printf(\"dl: %s ok\\n\", file);\n"
"	return 0;\n"
"}\n";

/*
 * The EXAMPLES program of the installed libsheaf(3): the lines between .EX
 * and .EE after .SH EXAMPLES, with the page's escapes undone.
 */
static char *man_example(void)
{
	char path[PATH_MAX];
	char *page, *start, *end, *out, *o;

	fmt(path, sizeof(path), "%s/usr/share/man/man3/libsheaf.3", dest);
	page = read_file(path);
	REQUIRE(page != NULL, "make install did not install %s", path);
	start = strstr(page, "\n.SH EXAMPLE");
	REQUIRE(start != NULL, "libsheaf.3 has no EXAMPLES section");
	start = strstr(start, "\n.EX\n");
	REQUIRE(start != NULL, "libsheaf.3: no .EX in EXAMPLES");
	start += strlen("\n.EX\n");
	end = strstr(start, "\n.EE");
	REQUIRE(end != NULL, "libsheaf.3: no .EE in EXAMPLES");
	out = o = calloc(1, (size_t)(end - start) + 2);
	REQUIRE(out != NULL, "out of memory");
	for (char *p = start; p < end; p++) {
		if (*p != '\\') {
			*o++ = *p;
		} else if (p[1] == 'e') {
			*o++ = '\\';
			p++;
		} else if (p[1] == '-') {
			*o++ = '-';
			p++;
		} else if (p[1] == '&') {
			p++;
		} else if (strncmp(p, "\\(aq", 4) == 0) {
			*o++ = '\'';
			p += 3;
		} else if (strncmp(p, "\\(dq", 4) == 0) {
			*o++ = '"';
			p += 3;
		} else {
			REQUIRE(0, "libsheaf.3 EXAMPLES: escape '%.4s' unknown to test_link", p);
		}
	}
	*o++ = '\n';
	free(page);
	return out;
}

/* ---- building and running -------------------------------------------------- */

enum variant { PIE, NOPIE, CXX, STATIC };

/*
 * Compile DIR/@src into DIR/@exe as @v says, with pkg-config's flags only
 * (and the sanitizer's runtime under SAN=); @warn adds -Wall -Wextra -Werror.
 * A dynamic program must then reference each slow path in @slow (names
 * after "sheaf__", e.g. "free_slow"), proof that the compiler put those
 * inline fast paths in it.
 */
static void build(const char *dir, const char *src, const char *exe, enum variant v, int warn,
		  const char *const *slow)
{
	char cmd[2 * PATH_MAX], log[PATH_MAX], out[64];
	const char *w = warn ? "-Wall -Wextra -Werror" : "";
	const char *s = san_cflags();
	int st;

	switch (v) {
	case PIE:
		fmt(cmd, sizeof(cmd), "cc -O2 -fPIE -pie %s %s -o %s %s "
		    "$(pkg-config --cflags --libs sheaf)", w, s, exe, src);
		break;
	case NOPIE:
		fmt(cmd, sizeof(cmd), "cc -O2 -no-pie %s %s -o %s %s "
		    "$(pkg-config --cflags --libs sheaf)", w, s, exe, src);
		break;
	case CXX:
		fmt(cmd, sizeof(cmd), "c++ -O2 %s %s -o %s -x c++ %s -x none "
		    "$(pkg-config --cflags --libs sheaf)", w, s, exe, src);
		break;
	case STATIC:
		if (s[0] == '\0')
			fmt(cmd, sizeof(cmd), "cc -O2 -static %s -o %s %s "
			    "$(pkg-config --cflags --libs --static sheaf)", w, exe, src);
		else    /* the sanitizers' runtimes cannot be linked -static */
			fmt(cmd, sizeof(cmd), "cc -O2 %s %s -o %s %s $(pkg-config --cflags sheaf) "
			    "$(pkg-config --libs --static sheaf | sed 's/-lsheaf\\b/-l:libsheaf.a/')",
			    w, s, exe, src);
		break;
	}
	fmt(log, sizeof(log), "%s/build-%s.log", dir, exe);
	st = sh_in(dir, cmd, NULL, log);
	REQUIRE(exited_ok(st), "`%s` failed (%s)", cmd, status_str(st, out, sizeof(out)));
	if (v == STATIC) {        /* it must not need libsheaf.so */
		fmt(cmd, sizeof(cmd), "! readelf -d %s 2>/dev/null | grep -q 'NEEDED.*libsheaf'", exe);
		st = sh_in(dir, cmd, NULL, log);
		REQUIRE(exited_ok(st), "%s: linked with libsheaf.so", exe);
		return;
	}
	/* Under a sanitizer the compiler may keep one of the two inline
	 * functions out of line (instrumentation makes them bigger): one
	 * inlined path is proof enough there; otherwise both. */
	{
		int found = 0, want = 0;

		for (int i = 0; slow[i] != NULL; i++, want++) {
			fmt(cmd, sizeof(cmd), "nm -D %s | grep -q ' U sheaf__%s$'", exe, slow[i]);
			st = sh_in(dir, cmd, NULL, log);
			found += exited_ok(st);
			REQUIRE(san || exited_ok(st),
				"%s: no inline fast path (it does not call sheaf__%s)", exe, slow[i]);
		}
		REQUIRE(found > 0 || want == 0, "%s: no inline fast path at all", exe);
	}
}

/* Run DIR/@argv0 @args against a fresh installed sheafd: require exit 0
 * and, when @want is not NULL, that the output contains it. */
static void run_against_sheafd(const char *dir, const char *cmd, const char *want)
{
	char sock[PATH_MAX], sockenv[PATH_MAX + 16], ldpath[PATH_MAX + 32], log[PATH_MAX];
	char full[2 * PATH_MAX], out[64];
	const char *env[] = { sockenv, ldpath, NULL };
	pid_t pid = sheafd_start(dir, sock, sizeof(sock));
	char *text;
	int st;

	fmt(sockenv, sizeof(sockenv), "SHEAF_SOCKET=%s", sock);
	fmt(ldpath, sizeof(ldpath), "LD_LIBRARY_PATH=%s/usr/lib", dest);
	fmt(log, sizeof(log), "%s/run.log", dir);
	fmt(full, sizeof(full), "./%s", cmd);
	st = sh_in(dir, full, env, log);
	text = read_file(log);
	REQUIRE(text != NULL, "no output of %s", cmd);
	REQUIRE(exited_ok(st), "`%s` ended with %s", cmd, status_str(st, out, sizeof(out)));
	REQUIRE(want == NULL || strstr(text, want) != NULL, "`%s` did not print '%s'", cmd, want);
	free(text);
	sheafd_stop(pid);
}

static int tools_missing(enum variant v)
{
	char path[PATH_MAX];

	return !find_tool("pkg-config", path, sizeof(path)) || !find_tool("cc", path, sizeof(path)) ||
	       (v == CXX && !find_tool("c++", path, sizeof(path)));
}

static const char *const variant_name[] = { "pie", "nopie", "cxx", "static" };

/* The man page's example, built as @v, runs. */
static void example(enum variant v)
{
	char dir[PATH_MAX], path[PATH_MAX];
	char *src;

	fmt(path, sizeof(path), "example-%s", variant_name[v]);
	case_dir(dir, sizeof(dir), path);
	src = man_example();
	fmt(path, sizeof(path), "%s/app.c", dir);
	REQUIRE(write_text(path, src) == 0, "cannot write %s", path);
	free(src);
	/* (main() is cold: GCC inlines sheaf_free there, not sheaf_alloc) */
	build(dir, "app.c", "app", v, 0, (const char *const[]){ "free_slow", NULL });
	run_against_sheafd(dir, "app", NULL);
	printf("  libsheaf(3) EXAMPLE, %s: built and ran\n", variant_name[v]);
}

/* The 4-thread program, built as @v, runs; a dynamic one loads the
 * installed library. */
static void threads(enum variant v)
{
	char dir[PATH_MAX], path[PATH_MAX], cmd[64], want[PATH_MAX + 32];
	char *text, *counts;

	fmt(path, sizeof(path), "threads-%s", variant_name[v]);
	case_dir(dir, sizeof(dir), path);
	fmt(path, sizeof(path), "%s/threads.c", dir);
	REQUIRE(write_text(path, threads_c) == 0, "cannot write %s", path);
	build(dir, "threads.c", "threads", v, 1,
	      (const char *const[]){ "alloc_slow", "free_slow", NULL });
	fmt(cmd, sizeof(cmd), "threads %d", san ? 150 : 1500);
	run_against_sheafd(dir, cmd, "threads: ok");
	fmt(path, sizeof(path), "%s/run.log", dir);
	text = read_file(path);
	REQUIRE(text != NULL, "no %s", path);
	fmt(want, sizeof(want), "threads: library %s/usr/lib/libsheaf.so", dest);
	REQUIRE(v == STATIC || strstr(text, want) != NULL,
		"the program did not load the installed libsheaf");
	counts = strstr(text, "threads: alloc_fastpath");
	printf("  4 threads, %s: %.*s\n", variant_name[v],
	       counts != NULL ? (int)strcspn(counts + 9, "\n") : 0, counts != NULL ? counts + 9 : "");
	free(text);
}

START_TEST(example_pie)    { if (tools_missing(PIE))    SKIP("no pkg-config or cc"); example(PIE); } END_TEST
START_TEST(example_nopie)  { if (tools_missing(NOPIE))  SKIP("no pkg-config or cc"); example(NOPIE); } END_TEST
START_TEST(example_cxx)    { if (tools_missing(CXX))    SKIP("no pkg-config or c++"); example(CXX); } END_TEST
START_TEST(example_static) { if (tools_missing(STATIC)) SKIP("no pkg-config or cc"); example(STATIC); } END_TEST
START_TEST(threads_pie)    { if (tools_missing(PIE))    SKIP("no pkg-config or cc"); threads(PIE); } END_TEST
START_TEST(threads_nopie)  { if (tools_missing(NOPIE))  SKIP("no pkg-config or cc"); threads(NOPIE); } END_TEST
START_TEST(threads_cxx)    { if (tools_missing(CXX))    SKIP("no pkg-config or c++"); threads(CXX); } END_TEST
START_TEST(threads_static) { if (tools_missing(STATIC)) SKIP("no pkg-config or cc"); threads(STATIC); } END_TEST

/* dl.c in @mode ("lib" or "plugin"): no libsheaf at start-up, dlopen()
 * without GLIBC_TUNABLES. */
static void dlopen_run(const char *mode)
{
	char dir[PATH_MAX], path[PATH_MAX], cmd[2 * PATH_MAX], log[PATH_MAX], out[64];
	int st;

	fmt(path, sizeof(path), "dlopen-%s", mode);
	case_dir(dir, sizeof(dir), path);
	fmt(path, sizeof(path), "%s/dl.c", dir);
	REQUIRE(write_text(path, dl_c) == 0, "cannot write %s", path);
	fmt(log, sizeof(log), "%s/build.log", dir);
	fmt(cmd, sizeof(cmd), "cc -O2 -Wall -Wextra -Werror %s -o dl dl.c "
	    "$(pkg-config --cflags sheaf) -pthread -ldl && "
	    "! readelf -d dl | grep -q 'NEEDED.*libsheaf'", san_cflags());
	st = sh_in(dir, cmd, NULL, log);
	REQUIRE(exited_ok(st), "`%s` failed (%s)", cmd, status_str(st, out, sizeof(out)));
	if (strcmp(mode, "plugin") == 0) {
		fmt(path, sizeof(path), "%s/plugin.c", dir);
		REQUIRE(write_text(path, plugin_c) == 0, "cannot write %s", path);
		fmt(cmd, sizeof(cmd), "cc -O2 -fPIC -shared -Wall -Wextra -Werror %s "
		    "-o libplugin.so plugin.c $(pkg-config --cflags --libs sheaf) && "
		    "nm -D libplugin.so | grep -q ' U sheaf__alloc_slow'", san_cflags());
		st = sh_in(dir, cmd, NULL, log);
		REQUIRE(exited_ok(st), "`%s` failed (%s)", cmd, status_str(st, out, sizeof(out)));
	}
	fmt(cmd, sizeof(cmd), "dl %s %d", mode, san ? 300 : 3000);
	run_against_sheafd(dir, cmd, " ok");
	printf("  dlopen (%s) without GLIBC_TUNABLES: ran\n", mode);
}

START_TEST(dlopen_lib)    { if (tools_missing(PIE)) SKIP("no pkg-config or cc"); dlopen_run("lib"); } END_TEST
START_TEST(dlopen_plugin) { if (tools_missing(PIE)) SKIP("no pkg-config or cc"); dlopen_run("plugin"); } END_TEST

/*
 * The rule behind the inline paths (docs/design.md, "Inline fast paths"):
 * libsheaf.so exports no data object (an executable could take a copy of
 * it, which the library would never see) and its thread-local storage
 * stays small enough for dlopen() (glibc keeps 512 bytes of static TLS for
 * libraries loaded later).
 */
START_TEST(exported_data)
{
	char dir[PATH_MAX], cmd[2 * PATH_MAX], log[PATH_MAX], out[64];
	char *text;
	int st;

	case_dir(dir, sizeof(dir), "exported-data");
	fmt(log, sizeof(log), "%s/readelf.log", dir);
	fmt(cmd, sizeof(cmd), "readelf --dyn-syms -W '%s/usr/lib/libsheaf.so.1' | "
	    "awk '$7 != \"UND\" && ($4 == \"OBJECT\" || $4 == \"TLS\") && "
	    "$8 !~ /^__odr_asan/ { print \"symbol\", $4, $3, $8 }' && "
	    "readelf -lW '%s/usr/lib/libsheaf.so.1' | awk '$1 == \"TLS\" { print \"PT_TLS\", $6 }'",
	    dest, dest);
	st = sh_in(dir, cmd, NULL, log);
	REQUIRE(exited_ok(st), "readelf failed (%s)", status_str(st, out, sizeof(out)));
	text = read_file(log);
	REQUIRE(text != NULL, "no %s", log);
	for (char *save = NULL, *l = strtok_r(text, "\n", &save); l != NULL;
	     l = strtok_r(NULL, "\n", &save)) {
		char kind[16], name[256];
		unsigned long size;

		if (sscanf(l, "symbol %15s %lu %255s", kind, &size, name) == 3) {
			REQUIRE(strcmp(kind, "TLS") == 0,
				"libsheaf.so exports the data object %s (%lu bytes)", name, size);
			REQUIRE(size <= 64, "libsheaf.so exports %lu bytes of TLS as %s", size, name);
		} else if (sscanf(l, "PT_TLS %lx", &size) == 1) {
			REQUIRE(size <= 256, "libsheaf.so has %lu bytes of TLS: dlopen() may "
				"not find room for it", size);
			printf("  libsheaf.so: no exported data object, %lu bytes of TLS\n", size);
		} else {
			REQUIRE(0, "readelf said: %s", l);
		}
	}
	free(text);
}
END_TEST

/* ---- main ------------------------------------------------------------------- */

/* snprintf outside a test: exit rather than truncate. */
static void xfmt(char *buf, size_t len, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void xfmt(char *buf, size_t len, const char *f, ...)
{
	va_list ap;
	int n;

	va_start(ap, f);
	n = vsnprintf(buf, len, f, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= len) {
		fprintf(stderr, "test_link: '%s...' does not fit in %zu bytes\n", f, len);
		exit(1);
	}
}

/* ROOT/build[-SAN]/tests/deploy/test_link (util_daemon.h): ROOT must be the
 * source tree. */
static void require_source_tree(void)
{
	char tmp[PATH_MAX];

	xfmt(tmp, sizeof(tmp), "%s/sheaf.pc.in", root_dir());
	if (access(tmp, F_OK) != 0) {
		fprintf(stderr, "test_link: no %s: not run from the source tree?\n", tmp);
		exit(1);
	}
}

/* make -C ROOT install SAN=<ours> DESTDIR=TMP/dest PREFIX=/usr. */
static int install(void)
{
	char cmd[3 * PATH_MAX], log[PATH_MAX], err[512];
	const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	const char *env[] = { "-MAKEFLAGS", "-MAKELEVEL", "-MFLAGS", NULL };
	struct spawn_opts o = { .out = log, .err = log, .stdin_null = 1, .env = env };
	const char *msg;
	int st;

	xfmt(dest, sizeof(dest), "%s/dest", top_dir);
	xfmt(log, sizeof(log), "%s/make-install.log", top_dir);
	xfmt(cmd, sizeof(cmd),
		 "make --no-print-directory -C '%s' install SAN=%s DESTDIR='%s' PREFIX=/usr",
		 root_dir(), build_san(), dest);
	msg = run_proc(argv, &o, 600000, &st, err, sizeof(err));
	if (msg != NULL || !exited_ok(st)) {
		fprintf(stderr, "test_link: `%s` failed: %s\n", cmd,
			msg != NULL ? msg : status_str(st, err, sizeof(err)));
		dump_file(NULL, log, 50);
		return -1;
	}
	return 0;
}

int main(void)
{
	Suite *s = suite_create("link");
	int rc;

	san = test_san();
	require_set_hook(on_failure);
	require_source_tree();
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (make_temp_dir(top_dir, sizeof(top_dir), "/tmp/sheaf-link-XXXXXX") != 0) {
		fprintf(stderr, "test_link: mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	if (install() != 0)
		return 1;
	ADD_ALONE(s, exported_data, 300);
	ADD_ALONE(s, example_pie, 300);
	ADD_ALONE(s, example_nopie, 300);
	ADD_ALONE(s, example_cxx, 300);
	ADD_ALONE(s, example_static, 300);
	ADD_ALONE(s, threads_pie, 300);
	ADD_ALONE(s, threads_nopie, 300);
	ADD_ALONE(s, threads_cxx, 300);
	ADD_ALONE(s, threads_static, 300);
	ADD_ALONE(s, dlopen_lib, 300);
	ADD_ALONE(s, dlopen_plugin, 300);
	rc = run_suite(s);
	if (rc == 0)
		rm_tree(top_dir);
	else
		fprintf(stderr, "test_link: test directory kept: %s\n", top_dir);
	return rc;
}
