/*
 * prefill.c - prefilled sheaves (the kernel's kmem_cache_prefill_sheaf):
 * reserve N objects so that a later critical section cannot fail to
 * allocate, and give back what it did not use.
 *
 * A reservation is process-private: the objects it holds count as allocated
 * (in use) until taken and freed or returned.  Counters: prefill_fast when
 * the thread's own sheaves held the N objects, prefill_slow when the barn
 * was needed, prefill_oversize when N exceeds the sheaf capacity;
 * return_fast / return_slow likewise for the objects given back.
 */
#include <errno.h>
#include <stdlib.h>
#include "client/internal.h"

#define PREFILL_MAX 65536u

struct sheaf_prefill {
	sheaf_cache_t *cache;
	unsigned count;
	unsigned size;
	void *objs[];
};

/* Objects in the thread's sheaves (main, spare, stash). */
static unsigned held_objects(const struct tcache *t)
{
	unsigned n = sheaf_size(tmain(t)) + (t->spare != NULL ? sheaf_size(t->spare) : 0);

	for (uint32_t i = 0; i < t->nfull; i++)
		n += sheaf_size(t->stash_full[i]);
	return n;
}

/* Room for frees in the thread's sheaves (main, spare, stash). */
static unsigned room(const struct tcache *t)
{
	unsigned r = tmain(t)->capacity - sheaf_size(tmain(t));

	if (t->spare != NULL)
		r += t->spare->capacity - sheaf_size(t->spare);
	for (uint32_t i = 0; i < t->nempty; i++)
		r += t->stash_empty[i]->capacity;
	return r;
}

sheaf_prefill_t *sheaf_prefill(sheaf_cache_t *c, unsigned n)
{
	struct tcache *t;
	sheaf_prefill_t *pf;
	int rc;

	/* pool NULL: a handle of a destroyed or disconnected pool */
	if (n == 0 || n > PREFILL_MAX || c->pool == NULL) {
		errno = EINVAL;
		return NULL;
	}
	t = tcache_get(c);
	if (t == NULL)
		return NULL;
	pf = malloc(sizeof(*pf) + n * sizeof(void *));
	if (pf == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	tpool_hold(t->tp);              /* the stash and counters: the trimmer's too */
	if (n > at_load_relaxed(&c->sc->sheaf_capacity))
		at_counter_add(&tstat(t)[ST_SHEAF_PREFILL_OVERSIZE], 1);
	at_counter_add(&tstat(t)[held_objects(t) >= n ? ST_SHEAF_PREFILL_FAST
				: ST_SHEAF_PREFILL_SLOW], 1);
	tpool_unhold(t->tp);
	rc = sheaf_alloc_bulk(c, pf->objs, n);
	if (rc != 0) {
		free(pf);
		errno = -rc;
		return NULL;
	}
	pf->cache = c;
	pf->count = n;
	pf->size = n;
	return pf;
}

void *sheaf_prefill_alloc(sheaf_prefill_t *pf)
{
	if (pf->count == 0) {
		errno = ENOSPC;
		return NULL;
	}
	return pf->objs[--pf->count];
}

unsigned sheaf_prefill_remaining(const sheaf_prefill_t *pf)
{
	return pf->count;
}

void sheaf_prefill_return(sheaf_prefill_t *pf)
{
	struct tcache *t;

	if (pf == NULL)
		return;
	t = tcache_get(pf->cache);
	if (t != NULL && pf->count > 0) {
		tpool_hold(t->tp);
		at_counter_add(&tstat(t)[room(t) >= pf->count ? ST_SHEAF_RETURN_FAST
					: ST_SHEAF_RETURN_SLOW], 1);
		tpool_unhold(t->tp);
	}
	sheaf_free_bulk(pf->cache, pf->objs, pf->count);
	free(pf);
}
