/*
 * huge.h - backing a pool's object data with 2 MiB pages (shmem transparent
 * huge pages, asked for with madvise(MADV_HUGEPAGE) on the data range).
 *
 * Who may call: any process of the pool: pool.c (create, map), sheafd's
 * config (daemon/config.c) and libsheaf's local pools
 * (client/pool_local.c).
 *
 * The data segment starts on a 2 MiB boundary both in the region and in the
 * SHARED memfd (layout_compute), so that a huge page of the memfd can be
 * mapped whole at the same address in every process.  The kernel gives a
 * shmem mapping huge pages on request only when
 * /sys/kernel/mm/transparent_hugepage/shmem_enabled is "advise", "always",
 * "within_size" or "force" (root sets it; "never" and "deny" refuse).  Each
 * process that touches the data must ask for its own mapping: the engine at
 * creation, a client at attach (the header's huge_pages says the pool was
 * made with them).
 */
#ifndef SHEAF_SHM_HUGE_H
#define SHEAF_SHM_HUGE_H

#include <stddef.h>
#include <stdint.h>

#define HUGE_PAGE_SIZE (2u << 20)

enum huge_mode { HUGE_OFF = 0, HUGE_TRY = 1, HUGE_ON = 2 };

/* "off", "try" or "on" into *@mode: 0, or -1 for anything else. */
int huge_mode_parse(const char *s, enum huge_mode *mode);
const char *huge_mode_name(enum huge_mode mode);

/*
 * Whether the kernel gives shmem mappings huge pages on madvise: 1 yes, 0
 * no, with the reason (and how to change it) in @why.
 */
int huge_shmem_available(char *why, size_t whylen);

/*
 * Ask for huge pages on [@addr, @addr + @len) (2 MiB aligned).  0, or
 * -errno with the reason in @why.
 */
int huge_advise(void *addr, uint64_t len, char *why, size_t whylen);

#endif
