/*
 * numa_guest.c - the NUMA tests that run inside a QEMU guest of a given
 * topology (tests/numa/test_numa boots it; tests/numa/init runs this
 * program as `numa_guest MODE`): this main runs MODE's suite.  The guest's
 * kernel has real nodes, so placement is the kernel's word: move_pages(2)
 * gives each page's node, /sys/devices/system/node/ each node's memory and
 * CPUs.  Every test runs a real sheafd (started from /sheaf/build, as
 * util_daemon.h finds it) and requires that its stderr holds nothing from
 * libnuma ("mbind:", "libnuma:") and that the kernel killed nobody for
 * memory.  The helpers they share are declared in guest_util.h.
 *
 * Modes, one suite each, in the file that says what it tests (the
 * topology the host boots for it in brackets):
 *   sym              guest_sym.c         [2 or 4 nodes, memory and a CPU each]
 *   memoryless       guest_memoryless.c  [a node with CPUs and no memory]
 *   cpuless          guest_cpuless.c     [a node with memory and no CPU]
 *   asym-preferred,  guest_asym.c        [node 1 much smaller than node 0]
 *   asym-bind
 *   remote           guest_remote.c      [2 nodes]
 *   shrink           guest_shrink.c      [2 nodes]
 *   restart          guest_restart.c     [2 nodes; 3, one memoryless]
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "tests/helpers/util_check.h"
#include "tests/helpers/util_daemon.h"
#include "tests/numa/guest_util.h"

/* Each test takes seconds; a hung one is reported well before the host's
 * limit on the whole boot (tests/numa/test_numa.c, 180 s). */
#define GUEST_TIMEOUT 60

static const struct {
	const char *mode;
	void (*add)(Suite *s, int timeout);
} modes[] = {
	{ "sym", add_sym },
	{ "memoryless", add_memoryless },
	{ "cpuless", add_cpuless },
	{ "asym-preferred", add_asym_preferred },
	{ "asym-bind", add_asym_bind },
	{ "remote", add_remote },
	{ "shrink", add_shrink },
	{ "restart", add_restart },
};

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	Suite *s = suite_create(mode);

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	require_binaries("numa_guest");
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		if (strcmp(mode, modes[i].mode) == 0) {
			modes[i].add(s, GUEST_TIMEOUT);
			return run_suite(s);
		}
	}
	fprintf(stderr, "numa_guest: unknown mode '%s' (sym, memoryless, cpuless, "
		"asym-preferred, asym-bind, remote, shrink, restart)\n", mode);
	return 2;
}
