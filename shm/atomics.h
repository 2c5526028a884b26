/*
 * atomics.h - named-order atomic helpers for shared-memory code.
 *
 * Who may call: any module of sheaf (shm/, client/, daemon/); the public
 * client/sheaf.h keeps its own __atomic builtins (it is included by C++
 * and gnu89 callers).
 *
 * Every atomic access of shm/ and daemon/ goes through one of these, so the
 * memory order is part of the name and a reader can pair each release with
 * its acquire (see docs/design.md, "Memory orders of the ring").  The at_*
 * helpers take an _Atomic object; the at_plain_* ones a plain one (the
 * sheaf header's fields and the like, which the layout shares with
 * client/sheaf.h and so cannot declare _Atomic).
 */
#ifndef SHEAF_SHM_ATOMICS_H
#define SHEAF_SHM_ATOMICS_H

#include <stdatomic.h>
#include <stdint.h>

#define at_load_relaxed(p)      atomic_load_explicit((p), memory_order_relaxed)
#define at_load_acquire(p)      atomic_load_explicit((p), memory_order_acquire)
#define at_store_relaxed(p, v)  atomic_store_explicit((p), (v), memory_order_relaxed)
#define at_store_release(p, v)  atomic_store_explicit((p), (v), memory_order_release)
#define at_fetch_add_relaxed(p, v) atomic_fetch_add_explicit((p), (v), memory_order_relaxed)
#define at_fetch_sub_relaxed(p, v) atomic_fetch_sub_explicit((p), (v), memory_order_relaxed)
#define at_fetch_add_seqcst(p, v)  atomic_fetch_add_explicit((p), (v), memory_order_seq_cst)
#define at_fetch_or_acqrel(p, v)   atomic_fetch_or_explicit((p), (v), memory_order_acq_rel)
#define at_fetch_and_acqrel(p, v)  atomic_fetch_and_explicit((p), (v), memory_order_acq_rel)
#define at_exchange_acqrel(p, v)   atomic_exchange_explicit((p), (v), memory_order_acq_rel)

/* Strong CAS; on failure *expected is updated with the current value. */
#define at_cas_acqrel(p, expected, desired)                                  \
	atomic_compare_exchange_strong_explicit((p), (expected), (desired),  \
		memory_order_acq_rel, memory_order_acquire)
#define at_cas_release(p, expected, desired)                                 \
	atomic_compare_exchange_strong_explicit((p), (expected), (desired),  \
		memory_order_release, memory_order_relaxed)
#define at_cas_relaxed(p, expected, desired)                                 \
	atomic_compare_exchange_strong_explicit((p), (expected), (desired),  \
		memory_order_relaxed, memory_order_relaxed)
/* Seq_cst on success and failure (what atomic_compare_exchange_strong
 * does): a release and an acquire, and the store half of a Dekker-style
 * handshake (the shared queue's slot CAS and queue_sleep). */
#define at_cas_seqcst(p, expected, desired)                                  \
	atomic_compare_exchange_strong_explicit((p), (expected), (desired),  \
		memory_order_seq_cst, memory_order_seq_cst)

/* Fences between relaxed accesses: a release fence orders every access
 * before it before the stores after it; an acquire fence orders the loads
 * before it before every access after it. */
#define at_fence_acquire()      atomic_thread_fence(memory_order_acquire)
#define at_fence_release()      atomic_thread_fence(memory_order_release)

/* Plain (not _Atomic) objects, accessed atomically. */
#define at_plain_load_relaxed(p)      __atomic_load_n((p), __ATOMIC_RELAXED)
#define at_plain_load_acquire(p)      __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define at_plain_store_relaxed(p, v)  __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define at_plain_store_release(p, v)  __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define at_plain_cas_acqrel(p, expected, desired)                            \
	__atomic_compare_exchange_n((p), (expected), (desired), 0,           \
		__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)

#if defined(__SANITIZE_THREAD__)
/* GCC's TSan refuses fences (-Wtsan): a seq_cst read-modify-write is a
 * full barrier on the hardware (TSan sees it as one on that word only). */
static _Atomic unsigned at_fence_word_ __attribute__((unused));
#define at_fence_seqcst()                                                    \
	((void)atomic_fetch_add_explicit(&at_fence_word_, 0u, memory_order_seq_cst))
#else
#define at_fence_seqcst()       atomic_thread_fence(memory_order_seq_cst)
#endif

/* Sequentially consistent load and store: only for Dekker-style handshakes
 * (store one flag, load the other, each side), where acquire/release do not
 * suffice: the node doorbell and its worker's sleeping flag, a barn's supply
 * and waiters, the engine's stop flag. */
#define at_load_seqcst(p)       atomic_load_explicit((p), memory_order_seq_cst)
#define at_store_seqcst(p, v)   atomic_store_explicit((p), (v), memory_order_seq_cst)

/* A compiler-only barrier (no instruction): orders this thread's accesses
 * against a signal handler, or against a peer's membarrier() (which makes
 * it a full fence on every running thread). */
#define at_signal_fence_seqcst() atomic_signal_fence(memory_order_seq_cst)

/*
 * The same orders on a plain (not _Atomic) object: the fields of
 * client/sheaf.h's private ABI, which that header reads and writes with
 * the __atomic builtins (a C++ or gnu89 caller may include it), so that
 * libsheaf's side of each access names its order as the inline side does.
 */
#define at_plain_load_relaxed(p)      __atomic_load_n((p), __ATOMIC_RELAXED)
#define at_plain_load_acquire(p)      __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define at_plain_store_relaxed(p, v)  __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define at_plain_store_release(p, v)  __atomic_store_n((p), (v), __ATOMIC_RELEASE)
/* Strong CAS, as at_cas_acqrel. */
#define at_plain_cas_acqrel(p, expected, desired)                            \
	__atomic_compare_exchange_n((p), (expected), (desired), 0,           \
		__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)

/*
 * Single-writer counters: only the owning thread writes, readers sum with a
 * relaxed load.  A relaxed load plus store compiles to a plain increment (no
 * locked instruction) yet is race-free for readers under C11 and TSan.
 */
static inline void at_counter_add(_Atomic uint64_t *c, uint64_t v)
{
	at_store_relaxed(c, at_load_relaxed(c) + v);
}

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#endif
