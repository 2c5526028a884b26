/*
 * snap.h - a region snapshot for the libFuzzer targets over shared memory
 * (fuzz_shm.c, fuzz_engine.c): each input starts from the same bytes.
 *
 * snap_take copies [base, base + len) (page-aligned) to a memfd, the
 * snapshot, and maps it over the range privately (MAP_PRIVATE|MAP_FIXED,
 * same address).  snap_restore, before each input, puts back the pages
 * the last one changed: /proc/self/pagemap names the pages that became
 * private copies (bit 63 present, bit 61 clear: an anonymous page, written
 * since), and only those are compared with the snapshot and copied back
 * where they differ; they stay private and writable (the engine writes the
 * same few pages every input: no fault when written again).  A private
 * page that has held the snapshot's bytes at SNAP_KEEP restores in a row,
 * and a swapped one (bit 62), is dropped (MADV_DONTNEED: the next access
 * faults the snapshot's page in), so that the private set, which each
 * restore compares, holds the pages of the last few inputs, not every page
 * an input ever touched.  Pages only read stay mapped.  Without /proc the whole range is mapped again.  With
 * FUZZ_SNAP_VERIFY set in the environment, each restore is compared with
 * the snapshot in full.
 *
 * What the range's own memfd (the pool's) then holds is not read by this
 * process any more: a pool_punch of it changes nothing the targets see.
 * Single-threaded: no other thread may touch the range during a restore.
 */
#ifndef SHEAF_TESTS_FUZZ_SNAP_H
#define SHEAF_TESTS_FUZZ_SNAP_H

#include <stddef.h>
#include <stdint.h>

#define SNAP_KEEP 8

struct snap {
	uint8_t *base;
	size_t len;
	int fd;                      /* the snapshot memfd */
	uint8_t *copy;               /* its bytes, in this process */
	int pagemap_fd;              /* -1: no pagemap, remap each time */
	uint64_t *pagemap;
	uint8_t *idle;               /* per page: restores it held the snapshot's bytes */
	size_t page_size, pages;
	int verify;
};

/* Aborts with a message on failure (a fuzz target cannot go on). */
void snap_take(struct snap *s, void *base, size_t len);
void snap_restore(struct snap *s);

#endif
