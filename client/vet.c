/*
 * vet.c - a client's check of the full sheaves it takes from a barn
 * (docs/design.md, "What a client checks"): a full sheaf was filled by
 * whoever put it there, the engine or a peer process, which may be broken
 * or hostile.  Before any of its objects is returned, each offset must lie
 * in a frame this cache owns (the frame owner map: engine-owned, read-only
 * here) on an object boundary (the free fast path's exact division test,
 * struct sheaf__fast), and the size must fit objs[].  Once per exchange,
 * never per alloc.  Who may call: exchange.c and free.c (vet_full), alloc.c
 * (vet_top, vet_rising).
 *
 * Cost.  In a one-way flow between processes (W3 cross-process) every
 * exchange vets 256 offsets that another CPU wrote.  The test runs four
 * offsets at a time with AVX2 where the CPU has it (14 instructions for
 * four offsets in the frame of the four before), the frame owner and the
 * data's bounds looked up only when the frame changes, with no branch per
 * offset; a sheaf that fails is then compacted by the scalar test, which
 * decides.  Measured on W3 cross-process against no check
 * (docs/design.md, "What a client checks"): a scalar test with a branch per
 * offset cost 15-25%, this one about 1%.  Prefetching the offsets' lines
 * made it worse (about 7%, both at the start of the test and one exchange
 * ahead, by a peek at the barn's next sheaf): the loads in order, with the
 * hardware's own prefetch, do better.
 *
 * Order (vet_rising).  A checked sheaf is handed out in rising addresses:
 * pops take objs[] from the top, so when objs[0] is below the top entry its
 * objects are copied, reversed, into the thread's empty main sheaf (four
 * entries at a time with AVX2), which becomes the full one, and the barn's
 * sheaf goes back empty.  Not in place: a swap holds one object in a
 * register only, and a thread killed there loses it
 * (deploy/test_example_rcu_table under TSan: 4 objects, one block of four).
 * The copy is written where the empty sheaf's size hides it, then both
 * sizes change, the full one's last: a death in between leaves the objects
 * in two sheaves of the dead client, and the repair's flush takes the
 * second copy of each back as already free (flush_invalid), never loses
 * one.  A sheaf that sat in a barn has no hot top to keep (the reason for
 * LIFO within a thread's own sheaves), and a batch freed in the order it
 * was allocated otherwise comes back in 16 KiB runs of falling addresses
 * that step upwards, which the hardware's prefetchers follow badly
 * (docs/design.md, "Slow paths").
 */
#include "shm/bounds.h"
#include "client/internal.h"
#include "client/vet.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

struct vet {
	const _Atomic uint16_t *owner;
	uint64_t len, base;
	uint32_t inv, sh, per;       /* the free fast path's division test */
	uint16_t id;
};

/* 1 when offset @off is an object of the cache, without branches: an
 * offset out of the data reads frame 0's owner, then is refused anyway. */
static inline uint32_t vet_one(const struct vet *v, uint64_t off)
{
	uint64_t rel = off - v->base;
	uint32_t q = ((uint32_t)rel & (SLAB_SIZE - 1)) * v->inv;
	uint32_t in = rel < v->len;

	q = (q >> v->sh) | (q << ((0u - v->sh) & 31));
	return in & (q < v->per) &
	       (at_load_relaxed(&v->owner[in ? rel >> SLAB_SHIFT : 0]) == v->id);
}

/* Whether all @n offsets pass (the scalar test). */
static uint32_t scan_scalar(const struct vet *v, const uint64_t *objs, uint32_t n)
{
	uint32_t all = 1;

	for (uint32_t i = 0; i < n; i++)
		all &= vet_one(v, ut_load64(&objs[i]));
	return all;
}

/* dst[i] = src[n - 1 - i] for i in [from, n). */
static void copy_reversed_scalar(uint64_t *dst, const uint64_t *src, uint32_t from, uint32_t n)
{
	for (uint32_t i = from; i < n; i++)
		dst[i] = ut_load64(&src[n - 1 - i]);
}

#if defined(__x86_64__)
/*
 * The same test, four offsets at a time.  The offsets are loaded once each
 * (a vector load; a value checked is the value a later scalar pass or pop
 * reads only if no peer writes meanwhile, as for the scalar test).  The
 * frame owners: a sheaf's objects mostly come from one slab after another,
 * so four offsets in the frame of the group before need no lookup and no
 * bounds test (that frame passed, so they lie in the data); others are
 * tested and looked up one by one.  The division test stays in the 64-bit
 * lanes (one 32x32 multiply a lane, the low half kept), which saves the
 * two lane-crossing shuffles to 32-bit lanes: 2% of W2 at B=65536 and
 * 2^20.  No gather: with the mitigation of gather data sampling (2023), a
 * gather costs more than four loads.  Signed compares serve: the data's
 * length is below 2^62.  (Not built no_sanitize("thread"): without TSan's
 * instrumentation deploy/test_example_rcu_table loses objects under
 * SAN=thread; TSan instruments it like the rest.)
 */
__attribute__((target("avx2")))
static uint32_t scan_avx2(const struct vet *v, const uint64_t *objs, uint32_t n)
{
	const __m256i base = _mm256_set1_epi64x((long long)v->base);
	const __m256i len = _mm256_set1_epi64x((long long)v->len);
	const __m256i zero = _mm256_setzero_si256();
	const __m256i fmask = _mm256_set1_epi64x(SLAB_SIZE - 1);
	const __m256i low32 = _mm256_set1_epi64x(0xffffffffll);
	const __m256i inv = _mm256_set1_epi64x((long long)v->inv);
	const __m128i shr = _mm_cvtsi32_si128((int)v->sh);
	const __m128i shl = _mm_cvtsi32_si128((int)((0u - v->sh) & 31));
	const __m256i per = _mm256_set1_epi64x((long long)v->per);
	__m256i acc = _mm256_set1_epi64x(-1);
	__m256i frame = _mm256_set1_epi64x(-1);   /* no frame passed yet */
	uint32_t i = 0, own = 1;

	for (; i + 4 <= n; i += 4) {
		__m256i off = _mm256_loadu_si256((const __m256i *)(const void *)&objs[i]);
		__m256i rel = _mm256_sub_epi64(off, base);
		__m256i idx = _mm256_srli_epi64(rel, SLAB_SHIFT);
		__m256i q;

		if (unlikely(_mm256_movemask_epi8(_mm256_cmpeq_epi64(idx, frame)) != -1)) {
			/* Another frame: each lane's range and owner (out of
			 * the data: refused by @in, frame 0's read).  A lane
			 * in the frame that passed last is in the data. */
			__m256i in = _mm256_andnot_si256(_mm256_cmpgt_epi64(zero, rel),
							 _mm256_cmpgt_epi64(len, rel));
			uint64_t f[4];

			acc = _mm256_and_si256(acc, in);
			_mm256_storeu_si256((__m256i *)(void *)f, _mm256_and_si256(idx, in));
			for (int k = 0; k < 4; k++)
				own &= at_load_relaxed(&v->owner[f[k]]) == v->id;
			frame = _mm256_set1_epi64x((long long)f[3]);
		}
		/* The exact division test in 64-bit lanes: the low 32 bits
		 * of (offset in frame) * inv, rotated right by sh, < per. */
		q = _mm256_and_si256(_mm256_mul_epu32(_mm256_and_si256(rel, fmask), inv), low32);
		q = _mm256_or_si256(_mm256_srl_epi64(q, shr),
				    _mm256_and_si256(_mm256_sll_epi64(q, shl), low32));
		acc = _mm256_and_si256(acc, _mm256_cmpgt_epi64(per, q));
	}
	return (_mm256_movemask_epi8(acc) == -1) & own & scan_scalar(v, objs + i, n - i);
}

/* 1 when the CPU runs AVX2 (asked once; every thread finds the same). */
static int have_avx2(void)
{
	static _Atomic int avx2 = -1;
	int a = at_load_relaxed(&avx2);

	if (unlikely(a < 0)) {
		__builtin_cpu_init();    /* also before libgcc's constructor */
		a = __builtin_cpu_supports("avx2") ? 1 : 0;
		at_store_relaxed(&avx2, a);
	}
	return a;
}

static uint32_t scan(const struct vet *v, const uint64_t *objs, uint32_t n)
{
	return have_avx2() ? scan_avx2(v, objs, n) : scan_scalar(v, objs, n);
}

/* The same, four at a time. */
__attribute__((target("avx2")))
static void copy_reversed_avx2(uint64_t *dst, const uint64_t *src, uint32_t n)
{
	uint32_t i = 0;

	for (; i + 4 <= n; i += 4) {
		__m256i v = _mm256_loadu_si256((const __m256i *)(const void *)&src[n - 4 - i]);

		_mm256_storeu_si256((__m256i *)(void *)&dst[i], _mm256_permute4x64_epi64(v, 0x1b));
	}
	copy_reversed_scalar(dst, src, i, n);
}

static void copy_reversed(uint64_t *dst, const uint64_t *src, uint32_t n)
{
	if (have_avx2())
		copy_reversed_avx2(dst, src, n);
	else
		copy_reversed_scalar(dst, src, 0, n);
}
#define VET_HAVE_AVX2 1
#else
/* Other CPUs take the scalar test. */
static uint32_t scan(const struct vet *v, const uint64_t *objs, uint32_t n)
{
	return scan_scalar(v, objs, n);
}

static void copy_reversed(uint64_t *dst, const uint64_t *src, uint32_t n)
{
	copy_reversed_scalar(dst, src, 0, n);
}
#endif

/* The test's parameters for @t's cache. */
static struct vet vet_of(const struct tcache *t)
{
	const struct shm_pool *p = &t->cache->pool->shm;
	const struct sheaf__fast *f = t->f;

	return (struct vet){
		.owner = p->frame_owner, .len = p->data_len, .base = p->data_off,
		.inv = f->div_inv, .sh = f->div_shift, .per = f->per_slab, .id = f->cache_id,
	};
}

#ifdef SHEAF_TEST_HOOKS
int vet_test_compare(sheaf_cache_t *c, const uint64_t *objs, uint32_t n)
{
	struct tcache *t = tcache_get(c);

	if (t == NULL)
		return -1;
#ifdef VET_HAVE_AVX2
	if (have_avx2()) {
		struct vet v = vet_of(t);

		return scan_avx2(&v, objs, n) == scan_scalar(&v, objs, n);
	}
#endif
	(void)objs;
	(void)n;
	return -1;
}
#endif

int vet_top(struct tcache *t, uint64_t off)
{
	const struct vet v = vet_of(t);

	if (likely(vet_one(&v, off)))
		return 1;
	untrusted_note(UT_OBJECT, 1);
	return 0;
}

struct shm_sheaf *vet_full(struct tcache *t, struct shm_sheaf *s)
{
	const struct shm_pool *p = &t->cache->pool->shm;
	const struct sheaf__fast *f = t->f;
	const struct vet v = vet_of(t);
	uint32_t n = (uint32_t)(ut_load64(&s->word) & SHEAF_WORD_SIZE), kept = 0;

	if (n > SHEAF_CAP_MAX) {
		untrusted_note(UT_SHEAF_SIZE, 1);
		n = SHEAF_CAP_MAX;
	}
	if (likely(scan(&v, s->objs, n)))
		kept = n;
	else                                 /* keep what passes, in order */
		for (uint32_t i = 0; i < n; i++) {
			uint64_t off = ut_load64(&s->objs[i]);

			if (vet_one(&v, off))
				s->objs[kept++] = off;
		}
	if (unlikely(kept != n || (ut_load64(&s->word) & SHEAF_WORD_SIZE) != n)) {
		untrusted_note(UT_OBJECT, n - kept);
		sheaf_set_size(s, kept);
	}
	if (unlikely(s->capacity > SHEAF_CAP_MAX || s->node >= p->nodes ||
		     s->cache != f->cache_id)) {
		untrusted_note(UT_SHEAF_HDR, 1);
		s->capacity = SHEAF_CAP_MAX;
		s->node = (uint8_t)t->node;
		s->cache = f->cache_id;
	}
	return s;
}

#ifdef SHEAF_TEST_HOOKS
void (*vet_rising_hook)(void);
#endif

struct shm_sheaf *vet_rising(struct shm_sheaf *e, struct shm_sheaf *s)
{
	/* Read again (a peer may have written it since vet_full): bounded,
	 * so that the copy stays inside both objs[]. */
	uint32_t n = sheaf_size(s);

	if (n > SHEAF_CAP_MAX)
		return s;
	if (n < 2 || sheaf_size(e) != 0 || e->capacity < n || e->node != s->node ||
	    ut_load64(&s->objs[0]) >= ut_load64(&s->objs[n - 1]))
		return s;
	copy_reversed(e->objs, s->objs, n);     /* past e's size: unseen */
	sheaf_set_size(e, n);                   /* both hold them (see above) */
#ifdef SHEAF_TEST_HOOKS
	if (vet_rising_hook != NULL)
		vet_rising_hook();              /* test_vet: a death here */
#endif
	sheaf_set_size(s, 0);
	return e;
}
