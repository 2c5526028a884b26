/*
 * test_readonly.c - the kernel keeps a client of another uid from writing
 * the engine-owned part of the region (META, [0, off_rw): docs/design.md,
 * "Who may write what").  sheafd runs as root; the client process drops to
 * nobody/nogroup BEFORE it connects, so it holds only what Attach gave it
 * (the META memfd as an O_RDONLY descriptor of a mode 0400 inode, and the
 * SHARED memfd).
 *
 *   hostile_client   the client tries every way to write META: mprotect of
 *                    the mapping to PROT_WRITE, mmap PROT_WRITE MAP_SHARED
 *                    of the descriptor (and mmap read-only then mprotect),
 *                    write/pwrite/ftruncate/fallocate on it, F_SETFL to
 *                    O_RDWR, reopening /proc/self/fd/N O_RDWR or O_WRONLY,
 *                    fchmod, F_ADD_SEALS (on SHARED too: a seal there would
 *                    stop a restarted sheafd adopting the pool), MADV_REMOVE,
 *                    /proc/self/mem, process_vm_writev, and sheafd's own
 *                    /proc/PID/fd, /proc/PID/map_files and /proc/PID/mem;
 *                    each must fail.  A MAP_PRIVATE writable mapping is
 *                    allowed but private: the pool does not change.  Then
 *                    the same client allocates and frees as usual and the
 *                    pool check passes; afterwards a root client finds the
 *                    header (magic, version, mem_cap) unchanged.
 *   old_client       an Attach of protocol version 1 (one read-write
 *                    memfd) is refused with a clear error.
 *
 * Needs root (to run the client as another uid): without it the test fails
 * as skipped unless SHEAF_TEST_SKIP_OK=1 (CI runs as root).
 * Each test is its own TCase: CK_RUN_CASE=<name> runs one.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include "client/internal.h"
#include "client/sheaf.h"
#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_proc.h"
#include "tests/helpers/util_rpc.h"

#define NOBODY 65534u      /* nobody / nogroup */

/* What the hostile client needs of the test: sheafd's socket and pid. */
struct hostile_arg {
	const char *sock;
	pid_t sheafd;
};

static int blocked;        /* attempts refused, for the summary */

/* One attempt that must fail: @call returns < 0 (map_rc: MAP_FAILED). */
#define MUST_FAIL(call, what)                                                \
	do {                                                                 \
		long r_;                                                     \
		int e_;                                                      \
		errno = 0;                                                   \
		r_ = (long)(call);                                           \
		e_ = errno;                                                  \
		REQUIRE(r_ < 0, "%s succeeded (%ld): META is writable", (what), r_); \
		printf("    %-46s refused: %s\n", (what), strerror(e_));      \
		blocked++;                                                   \
	} while (0)

/* An mmap's result as MUST_FAIL takes it (unmapped again if it worked). */
static long map_rc(void *at, size_t len)
{
	if (at == MAP_FAILED)
		return -1;
	munmap(at, len);
	return 0;
}

/* Become nobody/nogroup with no supplementary groups, for good, and
 * dumpable again (changing uid cleared it): /proc/self is then our own, as
 * for any process started as nobody, so what refuses the reopens below is
 * META's inode, not /proc's ownership of a non-dumpable process. */
static void drop_to_nobody(void)
{
	REQUIRE(setgroups(0, NULL) == 0, "setgroups: %s", strerror(errno));
	REQUIRE(setresgid(NOBODY, NOBODY, NOBODY) == 0, "setresgid: %s", strerror(errno));
	REQUIRE(setresuid(NOBODY, NOBODY, NOBODY) == 0, "setresuid: %s", strerror(errno));
	REQUIRE(geteuid() == NOBODY && getegid() == NOBODY, "still uid %u", geteuid());
	REQUIRE(prctl(PR_SET_DUMPABLE, 1) == 0, "PR_SET_DUMPABLE: %s", strerror(errno));
}

/* Ways through the descriptor itself. */
static void attack_fd(int mfd, uint64_t len, uint64_t cap_off)
{
	uint64_t evil = 1;
	char path[64];
	void *at;

	MUST_FAIL(pwrite(mfd, &evil, sizeof(evil), (off_t)cap_off), "pwrite(META fd, mem_cap)");
	MUST_FAIL(write(mfd, &evil, sizeof(evil)), "write(META fd)");
	MUST_FAIL(ftruncate(mfd, 0), "ftruncate(META fd, 0)");
	MUST_FAIL(ftruncate(mfd, (off_t)len * 2), "ftruncate(META fd, grow)");
	MUST_FAIL(fallocate(mfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)len),
		  "fallocate(META fd, PUNCH_HOLE)");
	MUST_FAIL(fallocate(mfd, 0, 0, (off_t)len * 2), "fallocate(META fd, grow)");
	/* F_SETFL cannot change the access mode: still read-only after it. */
	fcntl(mfd, F_SETFL, O_RDWR);
	MUST_FAIL(pwrite(mfd, &evil, sizeof(evil), (off_t)cap_off), "pwrite after F_SETFL O_RDWR");
	MUST_FAIL(fchmod(mfd, 0666), "fchmod(META fd, 0666)");
	MUST_FAIL(fcntl(mfd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE), "F_ADD_SEALS on META");
	snprintf(path, sizeof(path), "/proc/self/fd/%d", mfd);
	MUST_FAIL(open(path, O_RDWR), "open(/proc/self/fd/N, O_RDWR)");
	MUST_FAIL(open(path, O_WRONLY), "open(/proc/self/fd/N, O_WRONLY)");
	MUST_FAIL(map_rc(mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0), len),
		  "mmap(META fd, PROT_WRITE, MAP_SHARED)");
	at = mmap(NULL, len, PROT_READ, MAP_SHARED, mfd, 0);
	REQUIRE(at != MAP_FAILED, "mmap(META fd, PROT_READ): %s", strerror(errno));
	MUST_FAIL(mprotect(at, len, PROT_READ | PROT_WRITE), "mprotect(new META map, PROT_WRITE)");
	munmap(at, len);
}

/* Ways through the client's own mapping of META. */
static void attack_map(char *base, uint64_t len, uint64_t cap_off)
{
	uint64_t evil = 1;
	struct iovec local = { &evil, sizeof(evil) };
	struct iovec remote = { base + cap_off, sizeof(evil) };
	int fd = open("/proc/self/mem", O_RDWR);

	MUST_FAIL(mprotect(base, len, PROT_READ | PROT_WRITE), "mprotect(META map, PROT_WRITE)");
	MUST_FAIL(mprotect(base, 4096, PROT_READ | PROT_WRITE), "mprotect(header page, PROT_WRITE)");
	MUST_FAIL(madvise(base, len, MADV_REMOVE), "madvise(META map, MADV_REMOVE)");
	MUST_FAIL(process_vm_writev(getpid(), &local, 1, &remote, 1, 0),
		  "process_vm_writev(self, mem_cap)");
	REQUIRE(fd >= 0, "open(/proc/self/mem): %s", strerror(errno));
	MUST_FAIL(pwrite(fd, &evil, sizeof(evil), (off_t)(uintptr_t)(base + cap_off)),
		  "pwrite(/proc/self/mem, mem_cap)");
	close(fd);
}

/* Ways through sheafd's process: another uid may not look inside it. */
static void attack_daemon(pid_t pid)
{
	char dir[64], path[320];
	struct dirent *e;
	DIR *dp;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	MUST_FAIL(open(path, O_RDWR), "open(/proc/SHEAFD/mem, O_RDWR)");
	for (int k = 0; k < 2; k++) {
		snprintf(dir, sizeof(dir), "/proc/%d/%s", (int)pid, k ? "map_files" : "fd");
		dp = opendir(dir);
		if (dp == NULL) {
			printf("    %-46s refused: %s\n", dir, strerror(errno));
			blocked++;
			continue;
		}
		while ((e = readdir(dp)) != NULL) {
			int fd;

			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			fd = open(path, O_RDWR);
			REQUIRE(fd < 0, "open(%s, O_RDWR) succeeded", path);
			n++;
		}
		closedir(dp);
	}
	printf("    sheafd's /proc entries: %d descriptors and maps, none opened\n", n);
}

/* Private copies are allowed: writing one changes nothing shared. */
static void private_copy(int mfd, uint64_t len, uint64_t cap_off, _Atomic uint64_t *cap)
{
	uint64_t before = atomic_load(cap);
	char *at = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, mfd, 0);

	REQUIRE(at != MAP_FAILED, "mmap(META fd, MAP_PRIVATE): %s", strerror(errno));
	memset(at + cap_off, 0x5a, sizeof(uint64_t));
	REQUIRE(atomic_load(cap) == before, "a private copy's write reached the pool");
	munmap(at, len);
	printf("    %-46s allowed, private: the pool is unchanged\n",
	       "mmap(META fd, PROT_WRITE, MAP_PRIVATE)");
}

static int hostile_main(void *arg)
{
	const struct hostile_arg *a = arg;
	struct sheaf_cache_config cc = { .capacity = 32 };
	struct shm_header snap;
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	struct stat st;
	char err[256] = "";
	void *objs[1000];
	uint64_t len, cap_off = offsetof(struct shm_header, mem_cap);
	int mfd, sfd;

	drop_to_nobody();
	p = child_connect(a->sock, "hostile");
	mfd = p->shm.meta_fd;
	sfd = p->shm.shared_fd;
	len = p->shm.hdr->off_rw;
	memcpy(&snap, p->shm.hdr, sizeof(snap));
	/* What Attach handed over. */
	REQUIRE((fcntl(mfd, F_GETFL) & O_ACCMODE) == O_RDONLY, "the META descriptor is writable");
	REQUIRE(fstat(mfd, &st) == 0 && (st.st_mode & 07777) == 0400 && st.st_uid == 0,
		"META inode: mode %o uid %u (want 0400, sheafd's uid 0)",
		(unsigned)(st.st_mode & 07777), (unsigned)st.st_uid);
	REQUIRE((fcntl(sfd, F_GETFL) & O_ACCMODE) == O_RDWR, "the SHARED descriptor is not O_RDWR");
	printf("  client uid %u: META fd read-only (inode 0400, uid 0), SHARED fd read-write\n",
	       geteuid());

	/* The reopen path works for this process: SHARED reopens writable
	 * (its holder may write it anyway); META must not, below. */
	{
		char path[64];
		int fd;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", sfd);
		fd = open(path, O_RDWR);
		REQUIRE(fd >= 0, "control: reopening SHARED through %s: %s", path, strerror(errno));
		close(fd);
	}
	attack_fd(mfd, len, cap_off);
	attack_map(p->shm.base, len, cap_off);
	attack_daemon(a->sheafd);
	private_copy(mfd, len, cap_off, &p->shm.hdr->mem_cap);
	MUST_FAIL(fcntl(sfd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE), "F_ADD_SEALS on SHARED");
	MUST_FAIL(ftruncate(sfd, 0), "ftruncate(SHARED fd, 0)");
	REQUIRE(memcmp(&snap, p->shm.hdr, sizeof(snap)) == 0, "the header changed");
	printf("  %d attempts refused; the header is unchanged\n", blocked);

	/* The same client still works as usual. */
	c = sheaf_cache_create(p, "ro", 64, &cc);
	REQUIRE(c != NULL, "cache_create: %s", strerror(errno));
	for (int round = 0; round < 20; round++) {
		for (int i = 0; i < 1000; i++) {
			objs[i] = sheaf_alloc(c);
			REQUIRE(objs[i] != NULL, "sheaf_alloc: %s", strerror(errno));
			memset(objs[i], i & 0xff, 64);
		}
		for (int i = 0; i < 1000; i++)
			REQUIRE(sheaf_free(c, objs[i]) == 0, "sheaf_free");
	}
	REQUIRE(sheaf_pool_check(p, err, sizeof(err)) == 0, "pool check: %s", err);
	printf("  the same client: 20000 allocations and frees, pool check passes\n");
	sheaf_disconnect(p);
	return 0;
}

START_TEST(hostile_client)
{
	const char *extra[] = { "--allow-uid", "0", "--allow-uid", "65534", NULL };
	struct hostile_arg a;
	struct dmn d;
	char err[256] = "";
	sheaf_pool_t *p;
	sheaf_cache_t *c;
	void *o;
	pid_t pid;

	if (geteuid() != 0)
		SKIP("needs root to run a client as another uid");
	dmn_init(&d);
	dmn_start(&d, extra);
	/* Let nobody reach the socket: the directory (0700 from mkdtemp) and
	 * the socket (0660 root:root; connect needs write permission). */
	ck_assert_int_eq(chmod(d.dir, 0711), 0);
	ck_assert_int_eq(chown(d.sock, 0, NOBODY), 0);
	a.sock = d.sock;
	a.sheafd = d.pid;
	/* Forked before this process maps anything of the pool. */
	pid = fork_child(hostile_main, &a);
	reap_ok(pid, 60000, "the hostile client");
	ck_assert(dmn_alive(&d));

	/* A root client afterwards: the header is what sheafd made. */
	p = sheaf_connect(d.sock, "after", 0, err, sizeof(err));
	ck_assert_msg(p != NULL, "connect: %s", err);
	ck_assert_uint_eq(p->shm.hdr->magic, SHEAF_MAGIC);
	ck_assert_uint_eq(p->shm.hdr->version, SHEAF_LAYOUT_VERSION);
	ck_assert_uint_eq(atomic_load(&p->shm.hdr->mem_cap), p->shm.data_len);
	c = sheaf_cache_open(p, "ro");
	ck_assert_msg(c != NULL, "cache_open: %s", strerror(errno));
	o = sheaf_alloc(c);
	ck_assert_ptr_nonnull(o);
	ck_assert_int_eq(sheaf_free(c, o), 0);
	ck_assert_msg(sheaf_pool_check(p, err, sizeof(err)) == 0, "check: %s", err);
	sheaf_disconnect(p);
	dmn_stop(&d, 5000);
	dmn_cleanup(&d);
}
END_TEST

START_TEST(old_client)
{
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__AttachRequest ar = SHEAF__V1__ATTACH_REQUEST__INIT;
	Sheaf__V1__Response *r;
	struct dmn d;
	int fd, rc;

	dmn_init(&d);
	dmn_start(&d, NULL);
	fd = unix_connect(d.sock);
	ck_assert_int_ge(fd, 0);
	ar.protocol_version = SHEAF__V1__PROTOCOL_VERSION__PROTOCOL_VERSION_ONE_MEMFD;
	ar.pid = (uint32_t)getpid();
	ar.name = (char *)"old";
	rq.id = 1;
	rq.body_case = SHEAF__V1__REQUEST__BODY_ATTACH;
	rq.attach = &ar;
	r = raw_rpc(fd, &rq, 5000, &rc);
	ck_assert_msg(r != NULL, "no reply: %s", strerror(-rc));
	ck_assert_int_eq(r->status, SHEAF__V1__STATUS__STATUS_UNSUPPORTED);
	ck_assert_msg(r->error != NULL && strstr(r->error, "protocol version 1 not supported"),
		      "error: %s", r->error ? r->error : "(none)");
	printf("  an Attach of protocol version 1: %s\n", r->error);
	sheaf__v1__response__free_unpacked(r, NULL);
	close(fd);
	dmn_stop(&d, 5000);
	dmn_cleanup(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("readonly");

	require_binaries("test_readonly");
	setvbuf(stdout, NULL, _IOLBF, 0);
	ADD_ALONE(s, hostile_client, 120);
	ADD_ALONE(s, old_client, 60);
	return run_suite(s);
}
