/*
 * test_names.c - the name directory and offsets (client/sheaf.h, "names and
 * offsets"; shm/names.h), against real sheafd processes:
 *   names_basic      set/get/del, every refusal (EEXIST, ENOENT, EINVAL,
 *                    EFAULT, ENAMETOOLONG, ENOSPC at 1024 names), and
 *                    `sheafctl names` (table and JSON);
 *   names_race       rounds of sheaf_name_get_or_create by 8 processes at
 *                    once: exactly one creator per name, every process the
 *                    same object, the losers' objects freed;
 *   names_restart    sheafd killed (SIGKILL) and started again with the fd
 *                    store's memfds: names read while no daemon runs, kept
 *                    by the adoption, set again afterwards, seen by a new
 *                    process;
 *   names_destroy    a destroyed cache's names are dropped and never come
 *                    back with a cache made in the same slot;
 *   names_bad_adopt  adoption (names_adopt) over entries scribbled every
 *                    way: bad ones dropped, good ones kept, no crash;
 *   names_local      the same calls on a local pool;
 *   offsets          sheaf_pool_base, sheaf_ptr_to_off, sheaf_off_to_ptr;
 *   two_pools        one process attached to two sheafd daemons without
 *                    SHEAF_CONNECT_RELOCATE, allocating from both, and
 *                    offsets passed to another process that reads them.
 *
 * Each test is its own TCase: CK_RUN_CASE=<name> runs one.
 */
#include <check.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "client/sheaf.h"
#include "client/internal.h"
#include "shm/names.h"
#include "shm/engine/names.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_deploy.h"
#include "tests/helpers/util_notify.h"
#include "tests/helpers/util_proc.h"

#define NPROC   8
#define ROUNDS  (test_san() ? 10 : 40)

static void start(struct dmn *d, const char *tmpl)
{
	const char *argv[] = { sheafd_bin(), "--foreground", "--socket", d->sock,
			       "--nodes", "2", "--size", "64M", NULL };

	dmn_init_at(d, tmpl, "log");
	dmn_start_argv(d, (char *const *)argv);
}

static sheaf_cache_t *cache(sheaf_pool_t *p, const char *name, size_t size)
{
	sheaf_cache_t *c = sheaf_cache_create_or_open(p, name, size, NULL, NULL);

	REQUIRE(c != NULL, "cache %s: %s", name, strerror(errno));
	return c;
}

/* `sheafctl -s SOCK names [-o json]`'s output (exit 0 required). */
static char *ctl_names(const char *sock, int json)
{
	char cmd[512];
	char *out;
	int st;

	fmt(cmd, sizeof(cmd), "'%s' -s '%s' names%s", sheafctl_bin(), sock,
	    json ? " -o json" : "");
	out = capture(cmd, NULL, &st);
	REQUIRE(exited_ok(st), "%s failed:\n%s", cmd, out);
	return out;
}

/* The checks both kinds of pool pass. */
static void basic_calls(sheaf_pool_t *p)
{
	sheaf_cache_t *c = cache(p, "basic", 128);
	char longname[SHEAF_NAME_LEN_MAX + 2], name[32];
	char *a = sheaf_alloc(c), *b = sheaf_alloc(c);
	int x;

	REQUIRE(a != NULL && b != NULL, "alloc: %s", strerror(errno));
	REQUIRE(sheaf_name_set(p, "a", a) == 0, "set a");
	REQUIRE(sheaf_name_set(p, "a", b) == -EEXIST, "set a twice");
	REQUIRE(sheaf_name_get(p, "a") == a, "get a");
	REQUIRE(sheaf_name_set(p, "b", b) == 0 && sheaf_name_get(p, "b") == b, "b");
	REQUIRE(sheaf_name_set(p, "also-a", a) == 0, "a second name of a");
	errno = 0;
	REQUIRE(sheaf_name_get(p, "zz") == NULL && errno == ENOENT, "get zz");
	REQUIRE(sheaf_name_del(p, "a") == 0, "del a");
	REQUIRE(sheaf_name_del(p, "a") == -ENOENT, "del a twice");
	errno = 0;
	REQUIRE(sheaf_name_get(p, "a") == NULL && errno == ENOENT, "a deleted");
	REQUIRE(sheaf_name_get(p, "also-a") == a, "the other name stays");
	/* Bad names and objects. */
	memset(longname, 'n', sizeof(longname));
	longname[SHEAF_NAME_LEN_MAX + 1] = '\0';
	REQUIRE(sheaf_name_set(p, longname, a) == -ENAMETOOLONG, "96 bytes");
	errno = 0;
	REQUIRE(sheaf_name_get(p, longname) == NULL && errno == ENAMETOOLONG, "get 96");
	REQUIRE(sheaf_name_del(p, longname) == -ENAMETOOLONG, "del 96");
	longname[SHEAF_NAME_LEN_MAX] = '\0';
	REQUIRE(sheaf_name_set(p, longname, a) == 0 && sheaf_name_get(p, longname) == a, "95");
	REQUIRE(sheaf_name_set(p, "", a) == -EINVAL && sheaf_name_set(p, NULL, a) == -EINVAL,
		"empty name");
	errno = 0;
	REQUIRE(sheaf_name_get(p, "") == NULL && errno == EINVAL, "get empty");
	REQUIRE(sheaf_name_set(p, "x", &x) == -EFAULT, "a stack pointer");
	REQUIRE(sheaf_name_set(p, "x", NULL) == -EFAULT, "NULL");
	REQUIRE(sheaf_name_set(p, "x", a + 1) == -EINVAL, "off an object boundary");
	REQUIRE(sheaf_name_set(p, "x", sheaf_pool_base(p)) == -EFAULT, "the header");
	/* The directory's size: SHEAF_NAMES_MAX names, then ENOSPC. */
	REQUIRE(sheaf_name_del(p, "b") == 0 && sheaf_name_del(p, "also-a") == 0 &&
		sheaf_name_del(p, longname) == 0, "del all");
	for (int i = 0; i < SHEAF_NAMES_MAX; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		REQUIRE(sheaf_name_set(p, name, i % 2 ? a : b) == 0, "set %s", name);
	}
	REQUIRE(sheaf_name_set(p, "one-more", a) == -ENOSPC, "1025th name");
	for (int i = 0; i < SHEAF_NAMES_MAX; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		REQUIRE(sheaf_name_get(p, name) == (i % 2 ? a : b), "get %s", name);
	}
	for (int i = 0; i < SHEAF_NAMES_MAX; i += 2) {
		snprintf(name, sizeof(name), "n%d", i);
		REQUIRE(sheaf_name_del(p, name) == 0, "del %s", name);
	}
	for (int i = 1; i < SHEAF_NAMES_MAX; i += 2) {
		snprintf(name, sizeof(name), "n%d", i);
		REQUIRE(sheaf_name_get(p, name) == a, "get %s after half were deleted", name);
		REQUIRE(sheaf_name_del(p, name) == 0, "del %s", name);
	}
	REQUIRE(sheaf_name_set(p, "one-more", a) == 0, "room again");
	REQUIRE(sheaf_name_del(p, "one-more") == 0, "del one-more");
	REQUIRE(sheaf_free(c, a) == 0 && sheaf_free(c, b) == 0, "free");
}

START_TEST(names_basic)
{
	struct dmn d;
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	char *out, *obj;

	start(&d, "/tmp/sheaf-names-XXXXXX");
	p = child_connect(d.sock, "names");
	basic_calls(p);
	c = cache(p, "listed", 256);
	obj = sheaf_alloc(c);
	REQUIRE(obj != NULL && sheaf_name_set(p, "the-table", obj) == 0, "set the-table");
	out = ctl_names(d.sock, 0);
	REQUIRE(strstr(out, "the-table") && strstr(out, "listed") && strstr(out, "NAME"),
		"sheafctl names:\n%s", out);
	free(out);
	out = ctl_names(d.sock, 1);
	REQUIRE(strstr(out, "\"name\": \"the-table\"") || strstr(out, "\"name\":\"the-table\""),
		"sheafctl names -o json:\n%s", out);
	{
		char want[64];

		snprintf(want, sizeof(want), "%llu",
			 (unsigned long long)sheaf_ptr_to_off(p, obj));
		REQUIRE(strstr(out, want) != NULL, "no offset %s in:\n%s", want, out);
	}
	free(out);
	sheaf_disconnect(p);
	dmn_stop(&d, 5000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- get_or_create by NPROC processes --------------------------------------------- */

struct race {
	const char *sock;
	int rounds;
	_Atomic int arrived;
	int created[64][NPROC];
	uint64_t off[64][NPROC];
	char pad[64];
};

static struct race *R;
/* The test process's pool: a forked child releases it first (sheaf.h on
 * fork()), then connects on its own. */
static sheaf_pool_t *inherited;

static int race_child(void *arg)
{
	int me = (int)(intptr_t)arg;
	sheaf_pool_t *p;

	sheaf_disconnect(inherited);
	p = child_connect(R->sock, "racer");
	sheaf_cache_t *c;
	char name[32];

	c = sheaf_cache_open(p, "race");
	REQUIRE(c != NULL, "open race: %s", strerror(errno));
	for (int r = 0; r < R->rounds; r++) {
		void *obj;

		/* Everyone at the start line of round r, then go. */
		at_fetch_add_seqcst(&R->arrived, 1);
		while (atomic_load(&R->arrived) < (r + 1) * NPROC)
			sched_yield();
		snprintf(name, sizeof(name), "race-%d", r);
		obj = sheaf_name_get_or_create(p, name, c, &R->created[r][me]);
		REQUIRE(obj != NULL, "get_or_create %s: %s", name, strerror(errno));
		R->off[r][me] = sheaf_ptr_to_off(p, obj);
		/* Everyone sees the creator's zeroes, then counts itself in. */
		at_fetch_add_seqcst((_Atomic uint32_t *)obj, 1);
	}
	sheaf_disconnect(p);
	return 0;
}

START_TEST(names_race)
{
	struct dmn d;
	struct sheaf_stats st;
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	pid_t pids[NPROC];

	start(&d, "/tmp/sheaf-names-XXXXXX");
	R = mmap(NULL, sizeof(*R), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	REQUIRE(R != MAP_FAILED, "mmap");
	R->sock = d.sock;
	R->rounds = ROUNDS;
	p = child_connect(d.sock, "judge");
	c = cache(p, "race", 64);
	inherited = p;
	for (int i = 0; i < NPROC; i++)
		pids[i] = fork_child(race_child, (void *)(intptr_t)i);
	for (int i = 0; i < NPROC; i++)
		reap_ok(pids[i], 60000, "a racer");
	for (int r = 0; r < R->rounds; r++) {
		int creators = 0;
		char name[32];
		uint32_t *obj;

		for (int i = 0; i < NPROC; i++) {
			creators += R->created[r][i];
			REQUIRE(R->off[r][i] == R->off[r][0], "round %d: process %d got another "
				"object", r, i);
		}
		REQUIRE(creators == 1, "round %d: %d creators", r, creators);
		snprintf(name, sizeof(name), "race-%d", r);
		obj = sheaf_name_get(p, name);
		REQUIRE(obj != NULL && sheaf_ptr_to_off(p, obj) == R->off[r][0], "%s", name);
		REQUIRE(*obj == NPROC, "round %d: %u processes counted in", r, *obj);
	}
	/* One object per name is in use: the losers' went back. */
	REQUIRE(sheaf_cache_stats(c, -1, &st) == 0, "stats");
	REQUIRE(st.in_use == (uint64_t)R->rounds, "in use %llu, %d names",
		(unsigned long long)st.in_use, R->rounds);
	printf("race: %d rounds of %d processes, one creator each, %llu objects in use\n",
	       R->rounds, NPROC, (unsigned long long)st.in_use);
	sheaf_disconnect(p);
	munmap(R, sizeof(*R));
	dmn_stop(&d, 5000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- adoption ---------------------------------------------------------------------- */

static const char *adopt_sock;

static int adopt_reader(void *arg)
{
	sheaf_pool_t *p;
	char *a, *b;

	(void)arg;
	sheaf_disconnect(inherited);
	p = child_connect(adopt_sock, "reader");
	a = sheaf_name_get(p, "kept");
	b = sheaf_name_get(p, "after");
	REQUIRE(a != NULL && strcmp(a, "before the restart") == 0, "kept: %s",
		a ? a : strerror(errno));
	REQUIRE(b != NULL && strcmp(b, "after the restart") == 0, "after: %s",
		b ? b : strerror(errno));
	sheaf_disconnect(p);
	return 0;
}

START_TEST(names_restart)
{
	struct notify n;
	struct svc d = { 0 };
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	char *a, *b, *out, err[256] = "";

	make_test_dir();
	notify_open(&n);
	fmt(d.sock, sizeof(d.sock), "%s/s.sock", test_dir);
	svc_start(&d, &n, -1, 0, 0);
	p = sheaf_connect(d.sock, "adopter", 0, err, sizeof(err));
	REQUIRE(p != NULL, "connect: %s", err);
	c = cache(p, "kept", 64);
	a = sheaf_alloc(c);
	b = sheaf_alloc(c);
	REQUIRE(a != NULL && b != NULL, "alloc");
	strcpy(a, "before the restart");
	REQUIRE(sheaf_name_set(p, "kept", a) == 0, "set kept");
	svc_stop(&d, &n, SIGKILL);
	/* No daemon: reading needs none. */
	REQUIRE(sheaf_name_get(p, "kept") == a, "get with no daemon");
	svc_start(&d, &n, -1, 1, 0);
	REQUIRE(file_contains(d.log, "adopted the pool from the fd store"), "no adoption");
	REQUIRE(sheaf_name_get(p, "kept") == a, "get after the adoption");
	strcpy(b, "after the restart");
	REQUIRE(sheaf_name_set(p, "after", b) == 0, "set after the adoption");
	REQUIRE(sheaf_name_set(p, "kept", b) == -EEXIST, "kept is still taken");
	adopt_sock = d.sock;
	inherited = p;
	reap_ok(fork_child(adopt_reader, NULL), 30000, "the reader");
	out = ctl_names(d.sock, 0);
	REQUIRE(strstr(out, "kept") && strstr(out, "after"), "sheafctl names:\n%s", out);
	free(out);
	sheaf_disconnect(p);
	svc_stop(&d, &n, SIGTERM);
	notify_close(&n);
	test_passed();
}
END_TEST

/* ---- destroy --------------------------------------------------------------------- */

START_TEST(names_destroy)
{
	struct dmn d;
	sheaf_pool_t *p;
	sheaf_cache_t *c, *keep;
	char cmd[512], *out, *x, *k;
	int st;

	start(&d, "/tmp/sheaf-names-XXXXXX");
	p = child_connect(d.sock, "names");
	keep = cache(p, "keep", 64);
	k = sheaf_alloc(keep);
	REQUIRE(k != NULL && sheaf_name_set(p, "keeps", k) == 0, "keeps");
	c = cache(p, "doomed", 64);
	x = sheaf_alloc(c);
	REQUIRE(x != NULL && sheaf_name_set(p, "dangling", x) == 0, "set dangling");
	/* The rule's one case: the object freed with its name left. */
	REQUIRE(sheaf_free(c, x) == 0, "free");
	sheaf_thread_exit();                  /* our sheaves back: destroy may go */
	fmt(cmd, sizeof(cmd), "'%s' -s '%s' destroy doomed", sheafctl_bin(), d.sock);
	out = capture(cmd, NULL, &st);
	REQUIRE(exited_ok(st), "destroy:\n%s", out);
	free(out);
	errno = 0;
	REQUIRE(sheaf_name_get(p, "dangling") == NULL && errno == ENOENT, "dangling stays");
	REQUIRE(sheaf_name_set(p, "dangling", x) == -EINVAL, "an object of a destroyed cache");
	c = cache(p, "doomed", 64);           /* the same slot, a new generation */
	errno = 0;
	REQUIRE(sheaf_name_get(p, "dangling") == NULL && errno == ENOENT, "back with the slot");
	out = ctl_names(d.sock, 0);
	REQUIRE(strstr(out, "dangling") == NULL && strstr(out, "keeps"), "names:\n%s", out);
	free(out);
	REQUIRE(sheaf_name_get(p, "keeps") == k, "another cache's name stays");
	sheaf_disconnect(p);
	dmn_stop(&d, 5000);
	dmn_cleanup(&d);
}
END_TEST

/* ---- adoption over scribbled entries --------------------------------------------- */

START_TEST(names_bad_adopt)
{
	struct sheaf_pool_config cfg = { .size = 64u << 20, .nodes = 2 };
	sheaf_pool_t *p = sheaf_pool_create(&cfg, NULL, 0);
	struct shm_pool *s;
	sheaf_cache_t *c;
	char name[32], *objs[16];
	struct name_rec r;
	uint64_t seed = 12345;

	REQUIRE(p != NULL, "pool");
	s = &p->shm;
	c = cache(p, "scribbled", 64);
	for (int i = 0; i < 16; i++) {
		objs[i] = sheaf_alloc(c);
		snprintf(name, sizeof(name), "obj%d", i);
		REQUIRE(objs[i] != NULL && sheaf_name_set(p, name, objs[i]) == 0, "%s", name);
	}
	/* Break entries of names obj0..obj7 each its own way (the engine's
	 * META is writable in a local pool); obj8..obj15 stay good. */
	for (uint32_t i = 0; i < SHEAF_DIR_ENTRIES; i++) {
		struct shm_name *e = &s->names[i];
		int k;

		if (!names_read(s, i, &r) || sscanf(r.name, "obj%d", &k) != 1 || k >= 8)
			continue;
		switch (k) {
		case 0: atomic_store(&e->seq, 7); break;                 /* write died */
		case 1: atomic_store(&e->cache, 999); break;
		case 2: atomic_store(&e->cache_gen, r.cache_gen + 1); break;
		case 3: atomic_store(&e->off, r.off + 1); break;
		case 4: atomic_store(&e->off, ~0ull); break;
		case 5: atomic_store(&e->state, 77); break;
		case 6: for (int w = 0; w < 12; w++)                     /* no NUL */
				atomic_store(&e->name[w], 0x4141414141414141ull);
			break;
		case 7: atomic_store(&e->off, 4096); break;              /* META */
		}
	}
	/* And random words over FREE entries (states, names, offsets). */
	for (uint32_t i = 0; i < SHEAF_DIR_ENTRIES; i++)
		if (atomic_load(&s->names[i].state) == NAME_FREE && xorshift(&seed) % 8 == 0)
			atomic_store(&s->names[i].state, (uint32_t)xorshift(&seed) % 4);
	REQUIRE(names_adopt(s) >= 8, "fewer than 8 entries dropped");
	for (int i = 0; i < 16; i++) {
		snprintf(name, sizeof(name), "obj%d", i);
		if (i < 8)
			continue;
		REQUIRE(sheaf_name_get(p, name) == objs[i], "good %s lost", name);
	}
	for (uint32_t i = 0; i < SHEAF_DIR_ENTRIES; i++) {
		uint32_t st = atomic_load(&s->names[i].state);

		REQUIRE(st <= NAME_TOMB && (atomic_load(&s->names[i].seq) & 1) == 0,
			"entry %u: state %u after adoption", i, st);
		if (st == NAME_USED)
			REQUIRE(names_read(s, i, &r), "entry %u kept but not valid", i);
	}
	/* The directory still works. */
	REQUIRE(sheaf_name_set(p, "obj1", objs[1]) == 0 && sheaf_name_get(p, "obj1") == objs[1],
		"set again");
	sheaf_pool_destroy(p);
}
END_TEST

START_TEST(names_local)
{
	struct sheaf_pool_config cfg = { .size = 64u << 20, .nodes = 2 };
	sheaf_pool_t *p = sheaf_pool_create(&cfg, NULL, 0);
	sheaf_cache_t *c, *other;
	int created = -1;
	void *t, *u;

	REQUIRE(p != NULL, "pool");
	basic_calls(p);
	c = cache(p, "tables", 512);
	other = cache(p, "other", 512);
	t = sheaf_name_get_or_create(p, "table", c, &created);
	REQUIRE(t != NULL && created == 1, "create");
	for (int i = 0; i < 512; i++)
		REQUIRE(((char *)t)[i] == 0, "not zeroed");
	u = sheaf_name_get_or_create(p, "table", c, &created);
	REQUIRE(u == t && created == 0, "get");
	errno = 0;
	REQUIRE(sheaf_name_get_or_create(p, "table", other, &created) == NULL &&
		errno == EINVAL, "another cache's name");
	errno = 0;
	REQUIRE(sheaf_name_get_or_create(p, "table", NULL, NULL) == NULL && errno == EINVAL,
		"NULL cache");
	errno = 0;
	REQUIRE(sheaf_name_get_or_create(p, "", c, NULL) == NULL && errno == EINVAL, "no name");
	sheaf_pool_destroy(p);
}
END_TEST

/* ---- offsets --------------------------------------------------------------------- */

START_TEST(offsets)
{
	struct sheaf_pool_config cfg = { .size = 64u << 20, .nodes = 2 };
	sheaf_pool_t *p = sheaf_pool_create(&cfg, NULL, 0);
	sheaf_cache_t *c;
	char *obj, *base;
	uint64_t off;
	int x;

	REQUIRE(p != NULL, "pool");
	c = cache(p, "off", 100);
	obj = sheaf_alloc(c);
	base = sheaf_pool_base(p);
	REQUIRE(obj != NULL && base != NULL && obj > base, "base %p, object %p", base, obj);
	off = sheaf_ptr_to_off(p, obj);
	REQUIRE(off == (uint64_t)(obj - base), "offset %llu", (unsigned long long)off);
	REQUIRE(sheaf_off_to_ptr(p, off) == obj, "back");
	REQUIRE(sheaf_ptr_to_off(p, obj + 7) == off + 7, "inside an object");
	errno = 0;
	REQUIRE(sheaf_ptr_to_off(p, NULL) == SHEAF_OFF_INVALID && errno == EFAULT, "NULL");
	errno = 0;
	REQUIRE(sheaf_ptr_to_off(p, &x) == SHEAF_OFF_INVALID && errno == EFAULT, "stack");
	errno = 0;
	REQUIRE(sheaf_ptr_to_off(p, base) == SHEAF_OFF_INVALID && errno == EFAULT, "header");
	errno = 0;
	REQUIRE(sheaf_off_to_ptr(p, SHEAF_OFF_INVALID) == NULL && errno == EFAULT, "invalid");
	errno = 0;
	REQUIRE(sheaf_off_to_ptr(p, 0) == NULL && errno == EFAULT, "offset 0");
	REQUIRE(sheaf_free(c, obj) == 0, "free");
	sheaf_pool_destroy(p);
}
END_TEST

/* ---- two pools in one process ----------------------------------------------------- */

struct two {
	sheaf_pool_t *inherited[2];
	const char *sock[2];
	uint64_t off[2];
};

/* Another process: attached to both pools, it reads what the offsets name. */
static int two_reader(void *arg)
{
	struct two *t = arg;

	sheaf_disconnect(t->inherited[0]);
	sheaf_disconnect(t->inherited[1]);
	for (int i = 0; i < 2; i++) {
		sheaf_pool_t *p = child_connect(t->sock[i], "reader");
		const char *s = sheaf_off_to_ptr(p, t->off[i]);
		char want[32];

		snprintf(want, sizeof(want), "pool %d", i);
		REQUIRE(s != NULL && strcmp(s, want) == 0, "pool %d: %s", i, s ? s : "NULL");
	}
	return 0;
}

START_TEST(two_pools)
{
	struct dmn d[2];
	sheaf_pool_t *p[2];
	sheaf_cache_t *c[2];
	struct two t;
	char *obj[2];

	start(&d[0], "/tmp/sheaf-names-a-XXXXXX");
	start(&d[1], "/tmp/sheaf-names-b-XXXXXX");
	for (int i = 0; i < 2; i++) {
		char err[256] = "";

		p[i] = sheaf_connect(d[i].sock, "both", 0, err, sizeof(err));
		REQUIRE(p[i] != NULL, "connect to daemon %d without relocation: %s", i, err);
		c[i] = cache(p[i], "two", 64);
		obj[i] = sheaf_alloc(c[i]);
		REQUIRE(obj[i] != NULL, "alloc %d", i);
		snprintf(obj[i], 64, "pool %d", i);
		t.sock[i] = d[i].sock;
		t.inherited[i] = p[i];
		t.off[i] = sheaf_ptr_to_off(p[i], obj[i]);
		REQUIRE(t.off[i] != SHEAF_OFF_INVALID, "offset %d", i);
	}
	REQUIRE(sheaf_pool_base(p[0]) != sheaf_pool_base(p[1]), "one base for two pools");
	REQUIRE(sheaf_ptr_to_off(p[0], obj[1]) == SHEAF_OFF_INVALID, "pool 1's object in 0");
	printf("two pools: bases %p and %p\n", sheaf_pool_base(p[0]), sheaf_pool_base(p[1]));
	reap_ok(fork_child(two_reader, &t), 30000, "the reader");
	for (int i = 0; i < 2; i++) {
		REQUIRE(sheaf_free(c[i], obj[i]) == 0, "free %d", i);
		sheaf_disconnect(p[i]);
		dmn_stop(&d[i], 5000);
		dmn_cleanup(&d[i]);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("names");

	require_binaries("test_names");
	deploy_init("test_names");
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	ADD_ALONE(s, names_basic, 120);
	ADD_ALONE(s, names_race, 300);
	ADD_ALONE(s, names_restart, 120);
	ADD_ALONE(s, names_destroy, 120);
	ADD_ALONE(s, names_bad_adopt, 60);
	ADD_ALONE(s, names_local, 60);
	ADD_ALONE(s, offsets, 60);
	ADD_ALONE(s, two_pools, 120);
	return run_suite(s);
}
