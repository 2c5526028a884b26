/*
 * kmalloc.c - objects of any size from a pool: size classes over
 * ordinary caches named "kmalloc-<size>", as the kernel's kmalloc.  Public
 * calls sheaf_malloc, sheaf_calloc, sheaf_realloc, sheaf_free_any,
 * sheaf_free_sized, sheaf_obj_size, sheaf_obj_cache (client/sheaf.h);
 * sheaf_malloc and the two frees are inline there, over the pool's struct
 * sheaf__pool_head, and this file holds their slow paths, which fill that
 * head:
 *   - data, data_len: the pool's data (set once per pool, same values from
 *     every thread: no lock);
 *   - by_frame[]: per slab frame, the handle of the cache a free last found
 *     owning it (a guess the inline free checks as sheaf_free checks any
 *     object; a wrong one only sends the free here);
 *   - small[], large[]: the class handle by size (per class, on its first
 *     use: sheaf_cache_create_or_open, of racing callers in any process one
 *     creates and the rest open the same cache, and cache.c's handle_of
 *     gives one handle per cache and generation, so racing stores store
 *     the same pointer);
 * A handle there may go stale (its cache destroyed, sheafctl destroy): the
 * inline call's sheaf_alloc or sheaf_free then fails with ESTALE and the
 * slow path resolves the cache again.  Never called by other files of
 * libsheaf.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "shm/slab_geom.h"
#include "client/internal.h"

_Static_assert(SHEAF_KMALLOC_MAX == SHEAF_MAX_OBJ_SIZE &&
	       SHEAF_KMALLOC_MAX == 1u << SHEAF_KMALLOC_LOG_MAX &&
	       SHEAF_KMALLOC_CLASSES == 31 + SHEAF_KMALLOC_LOG_MAX - SHEAF__KM_LOG_MAX,
	       "largest class");
/* The inline sheaf_malloc's table (head.large[]) ends at 64 KiB: the large
 * classes above are this file's (pool->km_large[]), a call away. */
#define KM_INLINE_MAX (1u << SHEAF__KM_LOG_MAX)
_Static_assert(offsetof(struct sheaf_pool, head) == 0, "the head starts the pool");

/* The head's fields are plain (sheaf.h's inline paths read them with
 * __atomic builtins, as a C++ or gnu89 caller may include it): here
 * through atomics.h's at_plain_* helpers, with the same orders. */

/* The classes, ascending; each a multiple of 8 (the small table's step).
 * Finer than the kernel's up to 1 KiB (steps of 16 to 128, of a quarter of
 * the power of two to 512, of 64 to 1 KiB): with the powers of two alone,
 * mixed sizes 8..1024 put half their objects in kmalloc-1024, 1 KiB
 * apart, whose first lines share 1/16 of the L1 and L2 sets, and round
 * the average object up by a third; W8 B=4096: 3.8 ns/op with these
 * classes, 5.7 with powers of two alone (docs/design.md, "Classes are
 * caches"). */
static const uint32_t km_size[SHEAF_KMALLOC_CLASSES] = {
	8, 16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256,
	320, 384, 448, 512, 576, 640, 704, 768, 832, 896, 960, 1024,
	2048, 4096, 8192, 16384, 32768, 65536,
	/* large: multi-frame slabs above 256 KiB (slab_geom.h) */
	1u << 17, 1u << 18, 1u << 19, 1u << 20, 1u << 21, 1u << 22, 1u << 23,
	1u << 24, 1u << 25, 1u << 26, 1u << 27, 1u << 28, 1u << 29, 1u << 30,
};

/* The class of @size (<= SHEAF_KMALLOC_MAX): the smallest that holds it. */
static uint32_t km_class_of(size_t size)
{
	uint32_t k = 0;

	if (size > KM_INLINE_MAX)           /* powers of two: by log2 */
		return 31 + (uint32_t)(64 - __builtin_clzll((unsigned long long)size - 1)) -
		       (SHEAF__KM_LOG_MAX + 1);
	while (km_size[k] < size)
		k++;
	return k;
}

/* The largest size @pool serves: its largest class that fits a node's
 * data (a power of two of frames), at most SHEAF_KMALLOC_MAX. */
static size_t km_max(const sheaf_pool_t *pool)
{
	uint64_t node = (uint64_t)pool->shm.frames_per_node << SLAB_SHIFT;

	return node < SHEAF_KMALLOC_MAX ? (size_t)node : SHEAF_KMALLOC_MAX;
}

/*
 * The inline free's view of the pool, set once (racing threads: one
 * by_frame array wins, the others free theirs).  Without memory for
 * by_frame, data_len stays 0 and every sheaf_free_any takes the slow path.
 */
static void km_head_init(sheaf_pool_t *pool)
{
	struct sheaf__pool_head *h = &pool->head;
	sheaf_cache_t **mine, **none = NULL;

	if (at_plain_load_acquire(&h->data_len) != 0)
		return;
	/* Before any class is published (sheaf_malloc's hint reads it) */
	at_plain_store_relaxed(&h->released,
			       (const uint64_t *)&pool->shm.hdr->frames_released);
	if (at_plain_load_acquire(&h->by_frame) == NULL) {
		mine = calloc(pool->shm.frames_total, sizeof(*mine));
		if (mine == NULL)
			return;
		if (!at_plain_cas_acqrel(&h->by_frame, &none, mine))
			free(mine);
	}
	at_plain_store_relaxed(&h->data, pool->shm.data);
	/* Release: a thread that reads data_len sees data and by_frame. */
	at_plain_store_release(&h->data_len, pool->shm.data_len);
}

void kmalloc_pool_fini(sheaf_pool_t *pool)
{
	free(pool->head.by_frame);
	pool->head.by_frame = NULL;
}

/* Make every size that maps to class @k use handle @c. */
static void km_publish(sheaf_pool_t *pool, uint32_t k, sheaf_cache_t *c)
{
	struct sheaf__pool_head *h = &pool->head;

	if (km_size[k] <= SHEAF__KM_SMALL_MAX) {
		/* (size + 7) >> 3 == i for sizes 8i-7..8i (i 0: size 0), all
		 * in one class as every class is a multiple of 8 */
		for (uint32_t i = 0; i <= SHEAF__KM_SMALL_MAX / 8; i++)
			if (km_class_of((size_t)i * 8) == k)
				at_plain_store_release(&h->small[i], c);
	} else if (km_size[k] <= KM_INLINE_MAX) {
		at_plain_store_release(&h->large[__builtin_ctz(km_size[k])], c);
	} else {
		at_plain_store_release(&pool->km_large[__builtin_ctz(km_size[k])], c);
	}
}

/*
 * The sheaf capacity a class is made with: the objects of
 * SHEAF_KMALLOC_SHEAF_BYTES, at most SHEAF_CAP_MAX, never fewer than the
 * default rule gives (which bounds a sheaf at 16 KiB: 28 objects of 1 KiB).
 * Mixed sizes spread a thread's frees over several classes, and a batch of
 * them moves many sheaves through the barn at the default capacities (W8,
 * docs/design.md, "Classes are caches"); the cost is memory a thread keeps
 * cached, at most this many bytes per sheaf.  A class made beforehand keeps
 * its capacity; sheafctl capacity (sheaf_cache_set_capacity) tunes it
 * later.
 */
static uint32_t kmalloc_capacity(uint32_t size)
{
	uint32_t cap = SHEAF_KMALLOC_SHEAF_BYTES / size;
	uint32_t dflt = cache_default_capacity(size);

	if (slab_is_large(size))            /* 1..4: cache_desc.h */
		return dflt;
	if (cap > SHEAF_CAP_MAX)
		cap = SHEAF_CAP_MAX;
	return cap > dflt ? cap : dflt;
}

/* The handle of class @k, its cache made or opened; NULL with errno. */
static sheaf_cache_t *km_class_handle(sheaf_pool_t *pool, uint32_t k)
{
	/* No flags: a large class is checked as a small one (the immediate
	 * double free; every one when made beforehand with
	 * SHEAF_CACHE_DEBUG).  Made a debug cache, its frees would leave the
	 * inline path: W10 at 128 KiB, 1000 ns per object against 400. */
	struct sheaf_cache_config cfg = { .capacity = (int)kmalloc_capacity(km_size[k]) };
	char name[SHEAF_NAME_MAX];
	sheaf_cache_t *c;

	km_head_init(pool);
	snprintf(name, sizeof(name), "kmalloc-%u", km_size[k]);
	c = sheaf_cache_create_or_open(pool, name, km_size[k], &cfg, NULL);
	if (c != NULL)
		km_publish(pool, k, c);
	return c;
}

/* The handle of class @k from the table when it is live, else made. */
static sheaf_cache_t *km_handle(sheaf_pool_t *pool, uint32_t k)
{
	const struct sheaf__pool_head *h = &pool->head;
	sheaf_cache_t *c = km_size[k] <= SHEAF__KM_SMALL_MAX ?
		at_plain_load_acquire(&h->small[km_size[k] / 8]) :
		km_size[k] <= KM_INLINE_MAX ?
		at_plain_load_acquire(&h->large[__builtin_ctz(km_size[k])]) :
		at_plain_load_acquire(&pool->km_large[__builtin_ctz(km_size[k])]);

	return c != NULL && cache_handle_live(c) ? c : km_class_handle(pool, k);
}

void *sheaf__malloc_slow(sheaf_pool_t *pool, size_t size, sheaf_cache_t *failed)
{
	sheaf_cache_t *c;

	/* sheaf_alloc's error stands, unless the handle went stale */
	if (failed != NULL && errno != ESTALE)
		return NULL;
	if (size > km_max(pool)) {
		errno = EFBIG;
		return NULL;
	}
	if (pool->forked) {
		errno = ECHILD;
		return NULL;
	}
	if (size > KM_INLINE_MAX) {         /* a large class: not inline */
		void *p;

		c = km_handle(pool, km_class_of(size));
		p = c != NULL ? sheaf_alloc(c) : NULL;
		if (p != NULL || errno != ESTALE)
			return p;
	}
	c = km_class_handle(pool, km_class_of(size));
	return c != NULL ? sheaf_alloc(c) : NULL;
}

/*
 * The handle of the cache the frame owner map (engine-owned: read-only to
 * clients) names for @obj's frame: NULL with errno EFAULT (not in the
 * pool's data), EINVAL (a frame no cache owns), ECHILD or EMFILE.  Whether
 * @obj is an object of it is for the caller to check (sheaf_free does, and
 * counts a refusal in the cache's free_invalid, as for any free).
 */
static sheaf_cache_t *km_owner_of(sheaf_pool_t *pool, const void *obj)
{
	const struct shm_pool *p = &pool->shm;
	uint64_t o = (uint64_t)((const char *)obj - p->base);
	sheaf_cache_t *c, *guess, **by_frame;
	uint32_t id, f;

	if (pool->forked) {
		errno = ECHILD;
		return NULL;
	}
	km_head_init(pool);
	by_frame = at_plain_load_acquire(&pool->head.by_frame);
	if (o - p->data_off >= p->data_len) {
		errno = EFAULT;
		return NULL;
	}
	f = pool_frame_of(p, o);
	id = at_load_acquire(&p->frame_owner[f]);
	if (id >= p->max_caches) {          /* FRAME_FREE, FRAME_QUEUE */
		errno = EINVAL;
		return NULL;
	}
	/* The inline free's guess, when right (mostly: its main sheaf was
	 * full), saves handle_of's lock */
	guess = by_frame != NULL ? at_plain_load_acquire(&by_frame[f]) : NULL;
	if (guess != NULL && guess->id == id && cache_handle_live(guess))
		return guess;
	c = cache_handle_by_id(pool, id);
	if (c != NULL && by_frame != NULL)
		at_plain_store_release(&by_frame[f], c);
	return c;
}

/* km_owner_of, and @obj on an object boundary of that cache (no more:
 * whether it is allocated is not known here). */
static sheaf_cache_t *km_object_of(sheaf_pool_t *pool, const void *obj)
{
	sheaf_cache_t *c = km_owner_of(pool, obj);
	int rc;

	if (c == NULL)
		return NULL;
	rc = slab_validate(&pool->shm, c->id, (uint64_t)((const char *)obj - pool->shm.base));
	if (rc != 0) {
		errno = -rc;
		return NULL;
	}
	return c;
}

/*
 * @owner: the guessed handle, when the inline path found @obj to be an
 * object of its cache (its main sheaf was full, or @obj on its top): that
 * free's slow path at once.  Else, or when the handle has gone stale, the
 * frame owner map names the cache.
 */
int sheaf__free_any_slow(sheaf_pool_t *pool, void *obj, sheaf_cache_t *owner)
{
	int saved = errno, rc = -ESTALE;   /* int functions leave errno alone */
	sheaf_cache_t *c;

	if (obj == NULL)                    /* as free(NULL) */
		return 0;
	if (owner != NULL)
		rc = sheaf__free_slow(owner, obj);
	if (rc == -ESTALE) {
		c = km_owner_of(pool, obj);
		rc = c != NULL ? sheaf_free(c, obj) : -errno;
	}
	errno = saved;
	return rc;
}

/* The same, under the name this sheaf.h's inline sheaf_free_any calls
 * (sheaf.h: a binary built against it needs this libsheaf). */
int sheaf__free_any_slow2(sheaf_pool_t *pool, void *obj, sheaf_cache_t *owner)
{
	return sheaf__free_any_slow(pool, obj, owner);
}

/* The external definitions of sheaf.h's inline sheaf_malloc and
 * sheaf_free_any. */
extern inline void *sheaf_malloc(sheaf_pool_t *pool, size_t size);
extern inline int sheaf_free_any(sheaf_pool_t *pool, void *obj);
extern inline int sheaf_free_sized(sheaf_pool_t *pool, void *obj, size_t size);

void *sheaf_calloc(sheaf_pool_t *pool, size_t n, size_t size)
{
	size_t bytes;
	void *p;

	if (__builtin_mul_overflow(n, size, &bytes)) {
		errno = EOVERFLOW;
		return NULL;
	}
	p = sheaf_malloc(pool, bytes);
	if (p != NULL)
		memset(p, 0, bytes);
	return p;
}

void *sheaf_realloc(sheaf_pool_t *pool, void *obj, size_t size)
{
	sheaf_cache_t *c, *to;
	size_t keep;
	void *n;
	int rc;

	if (obj == NULL)
		return sheaf_malloc(pool, size);
	if (size > km_max(pool)) {
		errno = EFBIG;
		return NULL;
	}
	if (size == 0)
		size = 1;
	c = km_object_of(pool, obj);
	if (c == NULL)
		return NULL;
	to = km_handle(pool, km_class_of(size));
	if (to == c)
		return obj;
	n = to != NULL ? sheaf_alloc(to) : NULL;
	if (n == NULL)
		return NULL;
	keep = c->sc->obj_size < size ? c->sc->obj_size : size;
	memcpy(n, obj, keep);
	rc = sheaf_free(c, obj);
	if (rc != 0) {
		/* @obj was not a live object after all (a double free
		 * sheaf_free caught): leave it, give the new one back */
		(void)sheaf_free(to, n);
		errno = -rc;
		return NULL;
	}
	return n;
}

sheaf_cache_t *sheaf_obj_cache(sheaf_pool_t *pool, const void *obj)
{
	return km_object_of(pool, obj);
}

size_t sheaf_obj_size(sheaf_pool_t *pool, const void *obj)
{
	const sheaf_cache_t *c = km_object_of(pool, obj);

	return c != NULL ? c->sc->obj_size : 0;
}
