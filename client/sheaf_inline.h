/*
 * sheaf_inline.h - the inline fast paths of libsheaf and the private ABI
 * they need.  Installed beside sheaf.h and included by it, at its end;
 * never include it directly.
 *
 * sheaf_alloc, sheaf_free, sheaf_malloc, sheaf_free_any, sheaf_read_lock
 * and sheaf_read_unlock are defined here as inline functions, so that a
 * caller's compiler puts the fast path (a pop or a push on the thread's
 * main sheaf, and the checks of a free) in the caller, as DPDK's
 * rte_mempool_get does; libsheaf also exports them as ordinary functions,
 * which a compiler without C99 inline semantics (gnu89) calls.
 *
 * Everything named sheaf__* or SHEAF__* is the library's private ABI, not
 * API: callers must not use it.  The layouts and the exported sheaf__*
 * functions change only with the soname's major version, or, when a
 * minor release adds to them, a binary built against the newer header
 * refuses to load with an older libsheaf (it needs a symbol the older
 * one lacks).  The contract of every function is in sheaf.h.
 */
#ifndef SHEAF__INSIDE_SHEAF_H
#error "sheaf_inline.h is part of sheaf.h: #include <sheaf.h> instead"
#endif
#ifndef SHEAF_INLINE_H
#define SHEAF_INLINE_H

struct sheaf__sheaf {           /* head of a sheaf in the pool */
	uint64_t word;          /* bits 0-15: objects held, objs[0..size);
				   16-63: fast-path operations, counted */
	uint32_t capacity;
	uint32_t reserved_[13];
	uint64_t objs[];        /* object offsets from the region start */
};

struct sheaf__fast {            /* a thread's fast path for one cache */
	struct sheaf__sheaf *main;
	char *base;             /* region start */
	char *node_data;        /* data of the thread's home node */
	uint64_t node_len;      /* its bytes */
	const uint16_t *owner;  /* cache id owning each frame of that node */
	uint32_t div_inv;       /* a frame offset is an object's iff */
	uint8_t div_shift;      /*   rotr32(off * div_inv, div_shift) */
	uint8_t reserved_;      /*   < per_slab (exact division test) */
	uint16_t cache_id;
	uint32_t per_slab;
	uint32_t reserved2_;
	void *reserved3_;       /* always NULL */
};                              /* 64 bytes, as a cache handle */

#define SHEAF__HANDLES      1024
#define SHEAF__FRAME_SHIFT  18  /* slab frames of 256 KiB */
#define SHEAF__WORD_SIZE    0xffffu
#define SHEAF__CAP_MAX      256u    /* objs[] slots of every sheaf: a pop
				   takes the slow path for a size a peer
				   scribbled past it, a push indexes objs[]
				   modulo it whatever the capacity says */
#define SHEAF__WORD_OP      0x10000u   /* one operation in sheaf__sheaf.word */

/*
 * How the inline paths find the thread's fast path of a cache: a handle
 * points into libsheaf's own array of handles, 64 bytes apart, and each
 * thread's fast paths lie 64 bytes apart in the same order, so the entry is
 * the handle's address plus a per-thread constant, sheaf__tls_bias, which
 * the library sets (an addition, with one thread-local load).  The inline
 * paths use no exported data object: an executable may get its own copy of
 * one (a copy relocation) that the library never sees.  sheaf__tls_bias is
 * 8 bytes of initial-exec TLS, which dlopen() can place.  Until the
 * thread's first slow path it leads to unused fast paths (an empty main
 * sheaf and node_len 0: both paths miss).
 */
SHEAF_API extern __thread uintptr_t sheaf__tls_bias
	__attribute__((tls_model("initial-exec")));
#define SHEAF__FAST(cache)                                                     \
	((struct sheaf__fast *)((uintptr_t)(const void *)(cache) + sheaf__tls_bias))
SHEAF_API void *sheaf__alloc_slow(sheaf_cache_t *cache);
SHEAF_API int sheaf__free_slow(sheaf_cache_t *cache, void *obj);

/*
 * A popped entry @p is in the home node's data.  A sheaf the thread holds
 * stays writable by the pool's other clients after its vet; one that
 * scribbles an entry must not make a pop hand out a pointer outside the
 * pool's data (into this process's own memory): the slow path drops such
 * an entry (alloc.c, take).
 */
#define SHEAF__POP_OK(f, p) ((uint64_t)((char *)(p) - (f)->node_data) < (f)->node_len)

/* C99 inline definitions (libsheaf provides the external ones); a gnu89
 * compiler, whose inline rules differ, calls the library's. */
#if defined(__GNUC_STDC_INLINE__) || defined(__cplusplus)
inline void *sheaf_alloc(sheaf_cache_t *cache)
{
	struct sheaf__fast *f = SHEAF__FAST(cache);
	struct sheaf__sheaf *m = f->main;
	uint64_t w = __atomic_load_n(&m->word, __ATOMIC_RELAXED);
	uint64_t n = w & SHEAF__WORD_SIZE;

	/* 1..SHEAF__CAP_MAX: a size a peer scribbled past objs[] takes the
	 * slow path, as an empty sheaf does (one compare for both) */
	if (__builtin_expect(n - 1 < SHEAF__CAP_MAX, 1)) {
		/* read once: the test and the pointer see the same entry */
		char *p = f->base + __atomic_load_n(&m->objs[n - 1], __ATOMIC_RELAXED);

		/* in the home node's data (SHEAF__POP_OK) */
		if (__builtin_expect(SHEAF__POP_OK(f, p), 1)) {
			/* size - 1, one more operation (the alloc_fastpath
			 * count; other threads and processes read the word) */
			__atomic_store_n(&m->word, w + (SHEAF__WORD_OP - 1), __ATOMIC_RELAXED);
			return p;
		}
	}
	return sheaf__alloc_slow(cache);
}

/*
 * @obj is an object of the cache in the thread's home node: in that node's
 * data, on an object boundary of a slab frame the cache owns (no pointer is
 * taken on trust: a stale one may name a frame the cache gave back).
 */
#define SHEAF__FAST_VALID(f, obj) __extension__ ({                             \
	uint64_t rel_ = (uint64_t)((char *)(obj) - (f)->node_data);            \
	uint32_t q_ = ((uint32_t)rel_ & ((1u << SHEAF__FRAME_SHIFT) - 1)) *    \
		      (f)->div_inv;                                            \
	q_ = (q_ >> (f)->div_shift) | (q_ << ((0u - (f)->div_shift) & 31));    \
	rel_ < (f)->node_len &&                                                \
		__atomic_load_n(&(f)->owner[rel_ >> SHEAF__FRAME_SHIFT],       \
				__ATOMIC_RELAXED) == (f)->cache_id &&          \
		q_ < (f)->per_slab; })

/*
 * The push needs room in the main sheaf and refuses the object already on
 * its top (the immediate double free, as glibc's fasttop test): the slow
 * path then returns -EALREADY.
 */
/* Push @obj (checked by SHEAF__FAST_VALID) on @f's main sheaf: 1, or 0
 * when it is full or @obj is on its top (sheaf_free, sheaf_free_any).  A
 * macro: an extern inline function may not call a static one. */
#define SHEAF__PUSH(f, obj) __extension__ ({                                 \
	struct sheaf__sheaf *m_ = (f)->main;                                \
	uint64_t w_ = __atomic_load_n(&m_->word, __ATOMIC_RELAXED);         \
	uint64_t n_ = w_ & SHEAF__WORD_SIZE;                                \
	uint64_t o_ = (uint64_t)((char *)(obj) - (f)->base);                \
	int ok_ = __builtin_expect(n_ < m_->capacity, 1) &&                 \
		  __builtin_expect(n_ == 0 ||                               \
				   m_->objs[(n_ - 1) & (SHEAF__CAP_MAX - 1)] != o_, 1); \
	if (ok_) {                                                          \
		m_->objs[n_ & (SHEAF__CAP_MAX - 1)] = o_;                   \
		__atomic_store_n(&m_->word, w_ + (SHEAF__WORD_OP + 1),      \
				 __ATOMIC_RELAXED);                         \
	}                                                                   \
	ok_; })

inline int sheaf_free(sheaf_cache_t *cache, void *obj)
{
	struct sheaf__fast *f = SHEAF__FAST(cache);

	if (__builtin_expect(SHEAF__FAST_VALID(f, obj) && SHEAF__PUSH(f, obj), 1))
		return 0;
	return sheaf__free_slow(cache, obj);
}
#endif

/*
 * The size-class fast paths (sheaf_malloc, sheaf_free_any).  A pool's first
 * bytes are a struct sheaf__pool_head, in libsheaf's memory like the
 * handles: the class handles by size, and a guess of the handle of each
 * slab frame's cache (filled by the slow paths, client/kmalloc.c: a NULL
 * entry or data_len 0 sends a call there).  The guess is only a guess: the
 * free fast path checks the object against the guessed cache exactly as
 * sheaf_free does (the frame owner map, the object boundary) and leaves
 * anything else to the slow path, which asks the frame owner map.
 */
#define SHEAF__KM_SMALL_MAX  1024u          /* classes by (size + 7) >> 3 */
#define SHEAF__KM_LOG_MAX    16             /* classes by log2 above 1024 */

struct sheaf__pool_head {
	uint64_t data_len;      /* bytes of data; 0 until the first slow path */
	char *data;             /* the pool's data (slab frame 0) */
	sheaf_cache_t **by_frame; /* per frame: the handle last seen there */
	const void *hint;       /* leads, as a handle, to the thread's hint
				   in this pool (set before the pool is
				   given out) */
	const uint64_t *released; /* the engine's count of slab frames
				   given back (read-only to clients) */
	uintptr_t reserved_[3];
	sheaf_cache_t *small[SHEAF__KM_SMALL_MAX / 8 + 1]; /* by (size + 7) >> 3 */
	sheaf_cache_t *large[SHEAF__KM_LOG_MAX + 1];       /* by ceil(log2(size)) */
};

/*
 * Per thread and pool (in the fast-path slot of a handle that libsheaf
 * never gives out, one per pool: head.hint + sheaf__tls_bias): the fast
 * path and the object of the last sheaf_malloc in that pool, and the
 * pool's count of released frames then.  sheaf_free_any pushes @obj on
 * that fast path's main sheaf without a frame lookup (a malloc and its
 * free) when @obj is that object and no frame went back since: the object
 * came from that sheaf (so it is on an object boundary of the cache, in
 * the thread's home node: a sheaf taken from a barn is vetted, a free is
 * checked, a cache's geometry never changes; an entry a peer wrote there
 * since, inside the home node's data, goes back as it came), and its
 * frame is still the cache's (it may have been freed another way since,
 * and its slab given back: the count then moved).  An object of another
 * pool never matches.
 * Until the thread's first malloc in the pool, and after anything that
 * changes its fast paths there (sheaf_thread_exit, sheaf_thread_set_node,
 * disconnect), @f is an unused fast path (the push misses) and @obj NULL.
 */
struct sheaf__km_hint {
	struct sheaf__fast *f;
	const void *obj;
	uint64_t released;
	uintptr_t reserved_[5];
};

SHEAF_API void *sheaf__malloc_slow(sheaf_pool_t *pool, size_t size,
				   sheaf_cache_t *failed);
/* The slow path of sheaf_free_any.  sheaf__free_any_slow is the same
 * without the hint's frame count, for binaries built against libsheaf
 * 1.0's header; a binary of this header needs libsheaf 1.1 or later
 * (sheaf__free_any_slow2, and pools that hold the count). */
SHEAF_API int sheaf__free_any_slow(sheaf_pool_t *pool, void *obj, sheaf_cache_t *owner);
SHEAF_API int sheaf__free_any_slow2(sheaf_pool_t *pool, void *obj, sheaf_cache_t *owner);

/* Larger than sheaf_alloc and sheaf_free (they inline them), so that a
 * compiler at -O2 would call them: inlined always, as those are. */
#define SHEAF__ALWAYS __attribute__((always_inline))

/* The handle of @size's class in the pool of head @h (NULL: none yet,
 * or @size above the inline tables). */
#define SHEAF__KM_CLASS(h, size) __extension__ ({                            \
	sheaf_cache_t *k_ = (sheaf_cache_t *)0;                              \
	if (__builtin_expect((size) <= SHEAF__KM_SMALL_MAX, 1))              \
		k_ = __atomic_load_n(&(h)->small[((size) + 7) >> 3],         \
				     __ATOMIC_ACQUIRE);                      \
	else if ((size) <= (1ul << SHEAF__KM_LOG_MAX))                       \
		k_ = __atomic_load_n(&(h)->large[64 - __builtin_clzll(       \
				(unsigned long long)(size) - 1)], __ATOMIC_ACQUIRE); \
	k_; })

#if defined(__GNUC_STDC_INLINE__) || defined(__cplusplus)
SHEAF__ALWAYS inline void *sheaf_malloc(sheaf_pool_t *pool, size_t size)
{
	const struct sheaf__pool_head *h = (const struct sheaf__pool_head *)(void *)pool;
	sheaf_cache_t *c = SHEAF__KM_CLASS(h, size);
	void *p;

	if (__builtin_expect(c != NULL, 1)) {
		/* sheaf_alloc's pop (inline here: no test of its result) */
		struct sheaf__fast *f = SHEAF__FAST(c);
		struct sheaf__sheaf *m = f->main;
		uint64_t w = __atomic_load_n(&m->word, __ATOMIC_RELAXED);
		uint64_t n = w & SHEAF__WORD_SIZE;

		if (__builtin_expect(n - 1 < SHEAF__CAP_MAX, 1)) {   /* as sheaf_alloc */
			p = f->base + __atomic_load_n(&m->objs[n - 1], __ATOMIC_RELAXED);
			if (__builtin_expect(SHEAF__POP_OK(f, p), 1)) {
				struct sheaf__km_hint *t = (struct sheaf__km_hint *)
					((uintptr_t)h->hint + sheaf__tls_bias);

				__atomic_store_n(&m->word, w + (SHEAF__WORD_OP - 1),
						 __ATOMIC_RELAXED);
				t->f = f;
				t->obj = p;
				return p;
			}
		}
		p = sheaf__alloc_slow(c);
		if (__builtin_expect(p != NULL, 1))
			return p;
	}
	return sheaf__malloc_slow(pool, size, c);   /* none yet, or destroyed */
}

/* The hint's push (struct sheaf__km_hint) of @obj, the thread's last
 * sheaf_malloc in the pool of head @h: 1 when pushed.  NULL: no hint (a
 * cleared hint keeps its fast path), and a thread without fast paths
 * reads a shared one, never written. */
#define SHEAF__HINT_PUSH(h, obj) __extension__ ({                            \
	struct sheaf__km_hint *t_ = (struct sheaf__km_hint *)                \
		((uintptr_t)(h)->hint + sheaf__tls_bias);                    \
	int done_ = 0;                                                       \
	if (__builtin_expect((obj) == t_->obj, 0) && (obj) != NULL) {        \
		/* the pointer too: racing first slow paths store it again */ \
		uint64_t rel_ = __atomic_load_n(                             \
			__atomic_load_n(&(h)->released, __ATOMIC_RELAXED),   \
			__ATOMIC_RELAXED);                                   \
		if (__builtin_expect(rel_ == t_->released, 1)) {             \
			done_ = SHEAF__PUSH(t_->f, obj);                     \
		} else {   /* a frame went back: no hint until the next malloc */ \
			t_->obj = NULL;                                      \
			t_->released = rel_;                                 \
		}                                                            \
	}                                                                    \
	done_; })

/*
 * First the object of the thread's last sheaf_malloc in @pool, when no
 * frame went back since (struct sheaf__km_hint); then the push of
 * sheaf_free on the guessed cache's fast path.  Every miss (no guess, a
 * wrong one, a full main sheaf, the immediate double free, a debug cache)
 * goes to the slow path, which frees through the right handle.
 */
SHEAF__ALWAYS inline int sheaf_free_any(sheaf_pool_t *pool, void *obj)
{
	const struct sheaf__pool_head *h = (const struct sheaf__pool_head *)(void *)pool;
	struct sheaf__fast *f;
	uint64_t len, rel;

	if (SHEAF__HINT_PUSH(h, obj))
		return 0;
	/* data and by_frame: atomic loads, as racing first slow paths store
	 * them (the same values) again after data_len went up */
	len = __atomic_load_n(&h->data_len, __ATOMIC_ACQUIRE);
	rel = (uint64_t)((char *)obj - __atomic_load_n(&h->data, __ATOMIC_RELAXED));
	if (__builtin_expect(rel < len, 1)) {
		sheaf_cache_t *const *by = __atomic_load_n(&h->by_frame, __ATOMIC_RELAXED);
		sheaf_cache_t *c = __atomic_load_n(&by[rel >> SHEAF__FRAME_SHIFT], __ATOMIC_RELAXED);

		f = SHEAF__FAST(c);
		if (__builtin_expect(c != NULL && SHEAF__FAST_VALID(f, obj), 1)) {
			/* the next malloc of the class pops @obj, and its
			 * caller writes it (docs/design.md 11.2) */
			__builtin_prefetch(obj, 1);
			if (__builtin_expect(SHEAF__PUSH(f, obj), 1))
				return 0;
			/* the guess was right: sheaf_free's slow path */
			return sheaf__free_any_slow2(pool, obj, c);
		}
	}
	return sheaf__free_any_slow2(pool, obj, (sheaf_cache_t *)0);
}

/*
 * sheaf_free_any with the size the object was asked for: the hint first
 * (the thread's last malloc), then @size names the class (sheaf_malloc's
 * lookup), so the frame table is not read; the check and the push are
 * sheaf_free's on that class.  An object the check refuses for that class
 * (another class's, another node's, not an object) goes to sheaf_free_any,
 * which frees or refuses it on what the frame owner map says.
 */
SHEAF__ALWAYS inline int sheaf_free_sized(sheaf_pool_t *pool, void *obj, size_t size)
{
	const struct sheaf__pool_head *h = (const struct sheaf__pool_head *)(void *)pool;
	sheaf_cache_t *c;

	if (SHEAF__HINT_PUSH(h, obj))
		return 0;
	c = SHEAF__KM_CLASS(h, size);
	if (__builtin_expect(c != (sheaf_cache_t *)0, 1)) {
		struct sheaf__fast *f = SHEAF__FAST(c);

		if (__builtin_expect(SHEAF__FAST_VALID(f, obj), 1)) {
			__builtin_prefetch(obj, 1);     /* as sheaf_free_any's */
			if (__builtin_expect(SHEAF__PUSH(f, obj), 1))
				return 0;
			return sheaf__free_any_slow2(pool, obj, c);
		}
	}
	return sheaf_free_any(pool, obj);
}
#endif

/*
 * The inline read sections: the thread's reader state of the pool it last
 * entered a section of, set by the library's slow path (client/deferred.c)
 * and cleared whenever the thread's lane in that pool changes.  @genp
 * points into the library's own registry (static memory, never freed):
 * *genp == gen while the pool is connected, so a pool disconnected and
 * another one connected at the same address both miss.  Initial-exec TLS,
 * as sheaf__tls_bias (no exported data object).
 */
struct sheaf__rcu {
	const void *pool;            /* NULL: none */
	const uint32_t *genp;
	uint32_t gen;
	uint32_t fence;              /* a full fence after the store */
	uint32_t *nest;              /* the thread's section depth in @pool */
	uint64_t *ctr;               /* its lane's reader word */
	const uint64_t *gp_seq;      /* the pool's grace periods started */
};
SHEAF_API extern __thread struct sheaf__rcu sheaf__rcu_tls
	__attribute__((tls_model("initial-exec")));
SHEAF_API int sheaf__read_lock_slow(sheaf_pool_t *pool);
SHEAF_API int sheaf__read_unlock_slow(sheaf_pool_t *pool);

#if defined(__GNUC_STDC_INLINE__) || defined(__cplusplus)
/* The outermost lock: the epoch, then one store; then a full fence only
 * where the engine cannot issue membarrier (docs/design.md).  The TLS
 * record is named, never reached through a pointer (GCC's -fsanitize=null
 * check of a TLS address is unreliable). */
#define SHEAF__RCU sheaf__rcu_tls
inline int sheaf_read_lock(sheaf_pool_t *pool)
{
	if (__builtin_expect(SHEAF__RCU.pool == (const void *)pool &&
			     __atomic_load_n(SHEAF__RCU.genp, __ATOMIC_RELAXED) == SHEAF__RCU.gen, 1)) {
		if ((*SHEAF__RCU.nest)++ == 0) {
			uint64_t g = __atomic_load_n(SHEAF__RCU.gp_seq, __ATOMIC_ACQUIRE);

			__atomic_store_n(SHEAF__RCU.ctr, g << 1 | 1, __ATOMIC_RELAXED);
			if (SHEAF__RCU.fence)
#if defined(__SANITIZE_THREAD__)   /* GCC's TSan has no fences */
				__atomic_fetch_add(SHEAF__RCU.ctr, 0, __ATOMIC_SEQ_CST);
#else
				__atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
			else
				__atomic_signal_fence(__ATOMIC_SEQ_CST);
		}
		return 0;
	}
	return sheaf__read_lock_slow(pool);
}

/* Release: the section's loads come before the engine sees it end. */
inline int sheaf_read_unlock(sheaf_pool_t *pool)
{
	if (__builtin_expect(SHEAF__RCU.pool == (const void *)pool &&
			     __atomic_load_n(SHEAF__RCU.genp, __ATOMIC_RELAXED) == SHEAF__RCU.gen &&
			     *SHEAF__RCU.nest != 0, 1)) {
		if (--*SHEAF__RCU.nest == 0)
			__atomic_store_n(SHEAF__RCU.ctr, 0, __ATOMIC_RELEASE);
		return 0;
	}
	return sheaf__read_unlock_slow(pool);
}
#endif

#endif /* SHEAF_INLINE_H */
