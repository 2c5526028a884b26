/* snap.c - a region snapshot restored before each fuzz input (snap.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "snap.h"

static void die(const char *what, const char *err)
{
	fprintf(stderr, "fuzz snapshot: %s: %s\n", what, err);
	abort();
}

/* Map the snapshot over the range again: every page is dropped. */
static void remap(struct snap *s)
{
	void *at = mmap(s->base, s->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, s->fd, 0);

	if (at != s->base)
		die("mapping the snapshot", strerror(errno));
}

void snap_take(struct snap *s, void *base, size_t len)
{
	memset(s, 0, sizeof(*s));
	s->base = base;
	s->len = len;
	s->page_size = (size_t)sysconf(_SC_PAGESIZE);
	if ((uintptr_t)base % s->page_size != 0 || len % s->page_size != 0)
		die("snapshot range", "not page-aligned");
	s->pages = len / s->page_size;
	s->fd = memfd_create("fuzz-snapshot", MFD_CLOEXEC);
	if (s->fd < 0 || ftruncate(s->fd, (off_t)len) != 0)
		die("snapshot memfd", strerror(errno));
	for (size_t off = 0; off < len;) {
		ssize_t k = pwrite(s->fd, s->base + off, len - off, (off_t)off);

		if (k <= 0)
			die("writing the snapshot", strerror(errno));
		off += (size_t)k;
	}
	s->copy = malloc(len);
	s->pagemap = malloc(s->pages * sizeof(*s->pagemap));
	s->idle = calloc(s->pages, 1);
	if (s->copy == NULL || s->pagemap == NULL || s->idle == NULL)
		die("snapshot buffers", strerror(errno));
	memcpy(s->copy, s->base, len);
	remap(s);
	s->pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	s->verify = getenv("FUZZ_SNAP_VERIFY") != NULL;
}

static void drop(struct snap *s, size_t first, size_t n)
{
	if (n && madvise(s->base + first * s->page_size, n * s->page_size, MADV_DONTNEED) != 0)
		die("madvise", strerror(errno));
}

/* Not traced (its loop looks at every page's entry, every input). */
__attribute__((no_sanitize("coverage")))
void snap_restore(struct snap *s)
{
	off_t at = (off_t)((uintptr_t)s->base / s->page_size * sizeof(uint64_t));
	size_t want = s->pages * sizeof(uint64_t), run = 0, ps = s->page_size;

	if (s->pagemap_fd < 0 || pread(s->pagemap_fd, s->pagemap, want, at) != (ssize_t)want) {
		remap(s);
		return;
	}
	for (size_t i = 0; i < s->pages; i++) {
		uint64_t e = s->pagemap[i];
		int priv = (e >> 63 & 1) && !(e >> 61 & 1);

		if (priv && memcmp(s->base + i * ps, s->copy + i * ps, ps) != 0) {
			drop(s, i - run, run);
			run = 0;
			memcpy(s->base + i * ps, s->copy + i * ps, ps);
			s->idle[i] = 0;
		} else if (priv && s->idle[i] < SNAP_KEEP) {
			drop(s, i - run, run);
			run = 0;
			s->idle[i]++;
		} else if (priv || (e >> 62 & 1)) {
			run++;
		} else {
			drop(s, i - run, run);
			run = 0;
		}
	}
	drop(s, s->pages - run, run);
	if (s->verify && memcmp(s->base, s->copy, s->len) != 0)
		die("restore", "the range differs from the snapshot");
}
