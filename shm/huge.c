/*
 * huge.c - 2 MiB pages for a pool's object data (huge.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include "huge.h"

#define THP_SHMEM "/sys/kernel/mm/transparent_hugepage/shmem_enabled"

int huge_mode_parse(const char *s, enum huge_mode *mode)
{
	if (strcmp(s, "off") == 0)
		*mode = HUGE_OFF;
	else if (strcmp(s, "try") == 0)
		*mode = HUGE_TRY;
	else if (strcmp(s, "on") == 0)
		*mode = HUGE_ON;
	else
		return -1;
	return 0;
}

const char *huge_mode_name(enum huge_mode mode)
{
	return mode == HUGE_ON ? "on" : mode == HUGE_TRY ? "try" : "off";
}

int huge_shmem_available(char *why, size_t whylen)
{
	char line[256] = "", *sel, *end;
	FILE *f = fopen(THP_SHMEM, "re");

	if (f == NULL) {
		snprintf(why, whylen, "%s: %s (a kernel without shmem transparent "
			 "huge pages)", THP_SHMEM, strerror(errno));
		return 0;
	}
	if (fgets(line, sizeof(line), f) == NULL)
		line[0] = '\0';
	fclose(f);
	/* The setting in force is the bracketed word. */
	sel = strchr(line, '[');
	end = sel != NULL ? strchr(sel, ']') : NULL;
	if (sel == NULL || end == NULL) {
		snprintf(why, whylen, "%s: unreadable setting", THP_SHMEM);
		return 0;
	}
	*end = '\0';
	sel++;
	if (strcmp(sel, "never") == 0 || strcmp(sel, "deny") == 0) {
		snprintf(why, whylen, "%s is '%s': as root, `echo advise > %s` "
			 "allows them", THP_SHMEM, sel, THP_SHMEM);
		return 0;
	}
	return 1;
}

int huge_advise(void *addr, uint64_t len, char *why, size_t whylen)
{
	if (madvise(addr, len, MADV_HUGEPAGE) < 0) {
		int e = errno;

		snprintf(why, whylen, "madvise(MADV_HUGEPAGE) on the pool's data: %s",
			 strerror(e));
		return -e;
	}
	return 0;
}
