/*
 * test_numa.c - sheaf on real NUMA topologies: each test boots a QEMU guest
 * (TCG, no KVM needed) of one topology with Debian's cloud kernel and an
 * initramfs holding this build's sheafd, sheafctl and the in-guest Check
 * program numa_guest (tests/numa/numa_guest.c, its main, and the suites
 * and helpers of tests/numa/guest_*.c; tests/numa/guest.sh builds both into
 * BUILD/numa/; `make test-numa` runs it first).  The guest's /init
 * (tests/numa/init) runs numa_guest in the test's mode and prints its
 * output between SHEAF-NUMA-BEGIN and SHEAF-NUMA-END status=N on the
 * serial console; this program passes those lines through (Check's summary
 * lines among them) and requires status 0, the guest's Check summary, and
 * no OOM kill anywhere on the console (the kernel's own lines, and the
 * guest's dmesg lines that /init prints as SHEAF-NUMA-OOM:).
 *
 * Topologies (QEMU's -numa; `-m` is the backends' sum):
 *   sym2            2 nodes of 512 MiB, a CPU each                   sym
 *   sym4            4 nodes of 256 MiB, a CPU each                   sym
 *   memoryless      node 0 768 MiB + CPU 0, node 1 CPU 1 only        memoryless
 *   memoryless3     0: 512 MiB + CPU, 1: CPU only, 2: 512 MiB + CPU,
 *                   node 2 nearest to node 1 (distances 1-2 15,
 *                   0-1 25, 0-2 20): the pool's kernel ids are sparse memoryless
 *   cpuless         node 0 512 MiB + CPUs 0-1, node 1 256 MiB, no CPU cpuless
 *   asym_preferred  node 0 768 MiB, node 1 192 MiB                   asym-preferred
 *   asym_bind       the same                                         asym-bind
 *   remote, shrink, restart   2 nodes of 512 MiB                     (their modes)
 *   restart3        memoryless3's shape: the adopted pool keeps its
 *                   sparse kernel nodes (0 and 2)                    restart
 *
 * The console of each boot is kept in BUILD/numa/console-TOPOLOGY.log.
 * Without qemu-system-x86_64 a test fails unless SHEAF_TEST_SKIP_OK=1;
 * without the guest files (BUILD/numa/vmlinuz, initrd.gz) it fails.
 * SHEAF_NUMA_QEMU=PATH: that QEMU instead of qemu-system-x86_64 from $PATH.
 * SHEAF_NUMA_TIMEOUT=S: the limit of one boot (default 180 s).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/helpers/util_deploy.h"
#include "tests/helpers/util_proc.h"

struct topo {
	const char *name;
	const char *mode;            /* numa_guest's suite */
	int near;                    /* sheaf.near= (memoryless), -1: none */
	const char *mem;             /* -m */
	const char *smp;
	const char *numa[24];        /* -object/-numa arguments, NULL-ended */
};

#define MB(id, size) "-object", "memory-backend-ram,id=" id ",size=" size
#define TWO_512                                                                     \
	{ MB("m0", "512M"), MB("m1", "512M"),                                       \
	  "-numa", "node,nodeid=0,cpus=0,memdev=m0", "-numa", "node,nodeid=1,cpus=1,memdev=m1", \
	  NULL }
#define ASYM                                                                        \
	{ MB("m0", "768M"), MB("m1", "192M"),                                       \
	  "-numa", "node,nodeid=0,cpus=0,memdev=m0", "-numa", "node,nodeid=1,cpus=1,memdev=m1", \
	  NULL }

/* Memory nodes 0 and 2 around memoryless node 1, node 2 nearest to it. */
#define ML3                                                                         \
	{ MB("m0", "512M"), MB("m2", "512M"), "-numa", "node,nodeid=0,cpus=0,memdev=m0", \
	  "-numa", "node,nodeid=1,cpus=1", "-numa", "node,nodeid=2,cpus=2,memdev=m2",   \
	  "-numa", "dist,src=0,dst=1,val=25", "-numa", "dist,src=0,dst=2,val=20",       \
	  "-numa", "dist,src=1,dst=2,val=15", NULL }

static const struct topo topos[] = {
	{ "sym2", "sym", -1, "1024M", "2", TWO_512 },
	{ "sym4", "sym", -1, "1024M", "4",
	  { MB("m0", "256M"), MB("m1", "256M"), MB("m2", "256M"), MB("m3", "256M"),
	    "-numa", "node,nodeid=0,cpus=0,memdev=m0", "-numa", "node,nodeid=1,cpus=1,memdev=m1",
	    "-numa", "node,nodeid=2,cpus=2,memdev=m2", "-numa", "node,nodeid=3,cpus=3,memdev=m3",
	    NULL } },
	{ "memoryless", "memoryless", 0, "768M", "2",
	  { MB("m0", "768M"), "-numa", "node,nodeid=0,cpus=0,memdev=m0",
	    "-numa", "node,nodeid=1,cpus=1", NULL } },
	{ "memoryless3", "memoryless", 2, "1024M", "3", ML3 },
	{ "cpuless", "cpuless", -1, "768M", "2",
	  { MB("m0", "512M"), MB("m1", "256M"), "-numa", "node,nodeid=0,cpus=0-1,memdev=m0",
	    "-numa", "node,nodeid=1,memdev=m1", NULL } },
	{ "asym_preferred", "asym-preferred", -1, "960M", "2", ASYM },
	{ "asym_bind", "asym-bind", -1, "960M", "2", ASYM },
	{ "remote", "remote", -1, "1024M", "2", TWO_512 },
	{ "shrink", "shrink", -1, "1024M", "2", TWO_512 },
	{ "restart", "restart", -1, "1024M", "2", TWO_512 },
	{ "restart3", "restart", -1, "1024M", "3", ML3 },
};
#define NTOPO (sizeof(topos) / sizeof(topos[0]))

static int boot_timeout_s(void)
{
	const char *e = getenv("SHEAF_NUMA_TIMEOUT");
	int s = e != NULL ? atoi(e) : 0;

	return s > 0 ? s : 180;
}

/*
 * Print the guest's lines (from SHEAF-NUMA-BEGIN to SHEAF-NUMA-END) of
 * console @text, each prefixed with [@name], and take their verdict: the
 * end marker's status (-1: no end marker), whether Check's summary line
 * came, and the OOM lines.
 */
static int pass_through(const char *name, char *text, int *summary, int *ooms)
{
	char *line, *save = NULL;
	int in = 0, status = -1;

	*summary = *ooms = 0;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		size_t len = strlen(line);
		char *end;

		/* The serial line ends in CR LF; the firmware's last line
		 * (escape codes, CRs) runs into the guest's first. */
		while (len > 0 && line[len - 1] == '\r')
			line[--len] = '\0';
		if (strstr(line, "oom-kill") || strstr(line, "Killed process") ||
		    strstr(line, "SHEAF-NUMA-OOM:") != NULL) {
			(*ooms)++;
			printf("[%s] OOM: %s\n", name, line);
			continue;
		}
		if (strstr(line, "SHEAF-NUMA-BEGIN") != NULL) {
			line = strstr(line, "SHEAF-NUMA-BEGIN");
			in = 1;
		}
		if (!in)
			continue;
		printf("[%s] %s\n", name, line);
		if (strstr(line, "%: Checks: ") != NULL)
			(*summary)++;
		if ((end = strstr(line, "SHEAF-NUMA-END ")) != NULL) {
			const char *st = strstr(end, "status=");
			status = st != NULL ? atoi(st + 7) : -1;
			in = 0;
		}
	}
	return status;
}

/* The console log as a string, its NUL bytes (the firmware writes some)
 * made blanks. */
static char *read_console(const char *path)
{
	FILE *f = fopen(path, "rb");
	size_t n = 0, cap = 1 << 16, k;
	char *buf = malloc(cap);

	REQUIRE(f != NULL && buf != NULL, "no console log %s: %s", path, strerror(errno));
	while ((k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
		n += k;
		if (cap - n - 1 == 0) {
			buf = realloc(buf, cap *= 2);
			REQUIRE(buf != NULL, "realloc");
		}
	}
	fclose(f);
	for (size_t i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	buf[n] = '\0';
	return buf;
}

static void boot(const struct topo *t)
{
	char qemu[PATH_MAX], kernel[PATH_MAX], initrd[PATH_MAX], console[PATH_MAX], append[256];
	char err[512];
	const char *argv[64];
	struct spawn_opts o = { .stdin_null = 1 };
	const char *msg;
	int n = 0, st = 0, status, summary, ooms;
	int64_t t0;
	char *text;
	const char *given = getenv("SHEAF_NUMA_QEMU");

	if (given != NULL && *given != '\0') {
		if (access(given, X_OK) != 0)
			SKIP("%s: SHEAF_NUMA_QEMU=%s: no such program", t->name, given);
		fmt(qemu, sizeof(qemu), "%s", given);
	} else if (!find_tool("qemu-system-x86_64", qemu, sizeof(qemu))) {
		SKIP("%s: no qemu-system-x86_64 (apt-get install qemu-system-x86)", t->name);
	}
	fmt(kernel, sizeof(kernel), "%s/numa/vmlinuz", build_dir());
	fmt(initrd, sizeof(initrd), "%s/numa/initrd.gz", build_dir());
	fmt(console, sizeof(console), "%s/numa/console-%s.log", build_dir(), t->name);
	REQUIRE(access(kernel, R_OK) == 0 && access(initrd, R_OK) == 0,
		"no guest (%s, %s): build it with make test-numa (tests/numa/guest.sh)", kernel,
		initrd);
	fmt(append, sizeof(append), "console=ttyS0 quiet panic=-1 mitigations=off sheaf.mode=%s",
	    t->mode);
	if (t->near >= 0)
		fmt(append + strlen(append), sizeof(append) - strlen(append), " sheaf.near=%d",
		    t->near);
	argv[n++] = qemu;
	argv[n++] = "-nographic";
	argv[n++] = "-no-reboot";
	argv[n++] = "-m";
	argv[n++] = t->mem;
	argv[n++] = "-smp";
	argv[n++] = t->smp;
	for (int i = 0; t->numa[i] != NULL; i++)
		argv[n++] = t->numa[i];
	argv[n++] = "-kernel";
	argv[n++] = kernel;
	argv[n++] = "-initrd";
	argv[n++] = initrd;
	argv[n++] = "-append";
	argv[n++] = append;
	argv[n] = NULL;
	o.out = o.err = console;
	t0 = now_ms();
	msg = run_proc(argv, &o, boot_timeout_s() * 1000, &st, err, sizeof(err));
	text = read_console(console);
	status = pass_through(t->name, text, &summary, &ooms);
	free(text);
	printf("[%s] booted %s in %.1f s; console in %s\n", t->name, t->mode,
	       (double)(now_ms() - t0) / 1000.0, console);
	if (msg != NULL)
		dump_file(console, console, 40);
	REQUIRE(msg == NULL, "qemu (%s): %s", t->name, msg);
	REQUIRE(ooms == 0, "%s: the guest's kernel OOM-killed a process (%d lines)", t->name,
		ooms);
	if (status < 0)
		dump_file(console, console, 40);
	REQUIRE(status >= 0, "%s: no SHEAF-NUMA-END on the console: the guest did not finish",
		t->name);
	REQUIRE(summary >= 1, "%s: no Check summary from the guest", t->name);
	REQUIRE(status == 0, "%s: the guest's tests failed (status %d)", t->name, status);
	REQUIRE(exited_ok(st), "%s: qemu ended with status %d", t->name, st);
}

START_TEST(topology)
{
	boot(&topos[_i]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("numa");

	setvbuf(stdout, NULL, _IOLBF, 0);
	require_binaries("test_numa");
	/* One test case per topology, named after it (CK_RUN_CASE=sym2). */
	for (size_t i = 0; i < NTOPO; i++) {
		TCase *tc = tcase_create(topos[i].name);

		tcase_set_timeout(tc, boot_timeout_s() + 60);
		tcase_add_loop_test(tc, topology, (int)i, (int)i + 1);
		suite_add_tcase(s, tc);
	}
	return run_suite(s);
}
