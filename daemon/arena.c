/* arena.c - the reply allocation arena (arena.h): a growing array of blocks. */
#include <stdlib.h>
#include <string.h>
#include "arena.h"

void *arena_alloc(struct arena *a, size_t size)
{
	void *p;

	if (a->n == a->cap) {
		int ncap = a->cap ? a->cap * 2 : 256;
		void **np = realloc(a->p, (size_t)ncap * sizeof(*np));
		if (np == NULL)
			return NULL;
		a->p = np;
		a->cap = ncap;
	}
	p = calloc(1, size);
	if (p != NULL)
		a->p[a->n++] = p;
	return p;
}

char *arena_strdup(struct arena *a, const char *s)
{
	char *d = arena_alloc(a, strlen(s) + 1);
	if (d != NULL)
		strcpy(d, s);
	return d;
}

void arena_free(struct arena *a)
{
	for (int i = 0; i < a->n; i++)
		free(a->p[i]);
	free(a->p);
	a->p = NULL;
	a->n = a->cap = 0;
}
