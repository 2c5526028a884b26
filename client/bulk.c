/*
 * bulk.c - sheaf_alloc_bulk and sheaf_free_bulk: runs of objects taken
 * from and put on the thread's main sheaf at once, through the same private
 * ABI as sheaf.h's inline paths (struct sheaf__fast), and the single calls
 * where a run stops.
 *
 * Who may call: the public API (sheaf.h); prefill.c reserves and gives back
 * through it.
 */
#include <errno.h>
#include "client/internal.h"

/*
 * The bulk calls take and put runs of objects on the thread's main sheaf
 * at once: one store of its word per run (the size and the operation count
 * move by the run's length, so the fast-path counts come out as for single
 * calls), and the slow path, through a single call, when the sheaf runs
 * empty or full.  Each object freed passes the inline path's test and may
 * not equal the object below it (the sheaf's top, as sheaf_free refuses);
 * the first that fails goes through sheaf_free alone.  A thread killed
 * part-way leaves a prefix done, as a loop of single calls would.
 */
int sheaf_alloc_bulk(sheaf_cache_t *c, void **objs, size_t n)
{
	size_t i = 0;

	while (i < n) {
		struct sheaf__fast *f = SHEAF__FAST(c);
		struct sheaf__sheaf *m = f->main;
		uint64_t w = at_plain_load_relaxed(&m->word);
		uint64_t have = w & SHEAF__WORD_SIZE, k = 0;

		/* A size over SHEAF__CAP_MAX (a peer's scribble): one at a
		 * time, as sheaf_alloc indexes objs[] (never past the sheaf). */
		if (have != 0 && have <= SHEAF__CAP_MAX) {
			uint64_t want = have < n - i ? have : n - i;

			/* the order of k sheaf_alloc calls, each entry in the
			 * home node's data (sheaf_alloc's test) */
			for (; k < want; k++) {
				char *p = f->base + at_plain_load_relaxed(&m->objs[have - 1 - k]);

				if (!SHEAF__POP_OK(f, p))
					break;
				objs[i + k] = p;
			}
		}
		if (k > 0) {
			at_plain_store_relaxed(&m->word, w - k + k * SHEAF__WORD_OP);
			i += k;
			continue;
		}
		/* empty, or its top for the slow path: one sheaf_alloc */
		if ((objs[i] = sheaf_alloc(c)) == NULL) {
			int rc = -errno;

			sheaf_free_bulk(c, objs, i);
			for (size_t j = 0; j < i; j++)
				objs[j] = NULL;
			return rc;
		}
		i++;
	}
	return 0;
}

int sheaf_free_bulk(sheaf_cache_t *c, void **objs, size_t n)
{
	size_t i = 0;
	int first = 0;

	while (i < n) {
		struct sheaf__fast *f = SHEAF__FAST(c);
		struct sheaf__sheaf *m = f->main;
		uint64_t w = at_plain_load_relaxed(&m->word);
		uint64_t size = w & SHEAF__WORD_SIZE, k = 0;
		/* size and capacity are client-writable: room only inside
		 * objs[] (a spoiled sheaf goes through sheaf_free) */
		uint64_t cap = m->capacity < SHEAF__CAP_MAX ? m->capacity : SHEAF__CAP_MAX;
		uint64_t room = size < cap ? cap - size : 0;
		uint64_t below = size > 0 ? m->objs[(size - 1) & (SHEAF__CAP_MAX - 1)] : UINT64_MAX;

		while (k < room && i + k < n) {
			void *obj = objs[i + k];
			uint64_t off = (uint64_t)((char *)obj - f->base);

			if (!SHEAF__FAST_VALID(f, obj) || off == below)
				break;
			m->objs[size + k] = off;     /* above the size: not held yet */
			below = off;
			k++;
		}
		if (k > 0) {
			at_plain_store_relaxed(&m->word, w + k + k * SHEAF__WORD_OP);
			i += k;
		}
		if (i < n && (k == 0 || k == room)) {
			/* The sheaf is full, or the run stopped at this object:
			 * alone, through sheaf_free. */
			int rc = sheaf_free(c, objs[i]);

			if (rc != 0 && first == 0)
				first = rc;
			i++;
		}
	}
	return first;
}
