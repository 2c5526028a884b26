/*
 * spsc.h - the single-producer single-consumer ring that hands objects from
 * producer to consumer in W3, the same for every contender: sheafbench's w3
 * (threads) and w3p (processes, the ring in a MAP_SHARED mapping), and
 * dpdkbench's --handoff spsc.  Header-only (static inline), no dependencies.
 */
#ifndef SHEAF_BENCH_SPSC_H
#define SHEAF_BENCH_SPSC_H

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#define RING_SLOTS         1024          /* power of two */
#define SPINS_BEFORE_YIELD 4096
#define CACHELINE          64

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#else
	__asm__ volatile("" : : : "memory");
#endif
}

/* Spin-wait step: pause, and yield now and then (one CPU, or oversubscribed). */
static inline void spin_wait(unsigned *spins)
{
	if (++*spins % SPINS_BEFORE_YIELD == 0)
		sched_yield();
	else
		cpu_relax();
}

/*
 * The ring: each side keeps its own index and a cached copy of the other
 * side's, so it touches the other side's cache line only when the cached
 * copy says the ring is full (producer) or empty (consumer).  A zero-filled
 * ring is empty.
 */
struct spsc_ring {
	_Alignas(CACHELINE) _Atomic uint64_t head;  /* written by the producer */
	_Alignas(CACHELINE) _Atomic uint64_t tail;  /* written by the consumer */
	_Alignas(CACHELINE) void *slot[RING_SLOTS];
};

static inline void ring_push(struct spsc_ring *ring, uint64_t *head,
			     uint64_t *tail_seen, void *p)
{
	unsigned spins = 0;

	while (*head - *tail_seen == RING_SLOTS) {
		*tail_seen = atomic_load_explicit(&ring->tail,
						  memory_order_acquire);
		if (*head - *tail_seen == RING_SLOTS)
			spin_wait(&spins);
	}
	ring->slot[*head % RING_SLOTS] = p;
	(*head)++;
	atomic_store_explicit(&ring->head, *head, memory_order_release);
}

static inline void *ring_pop(struct spsc_ring *ring, uint64_t *tail,
			     uint64_t *head_seen)
{
	unsigned spins = 0;
	void *p;

	while (*tail == *head_seen) {
		*head_seen = atomic_load_explicit(&ring->head,
						  memory_order_acquire);
		if (*tail == *head_seen)
			spin_wait(&spins);
	}
	p = ring->slot[*tail % RING_SLOTS];
	(*tail)++;
	atomic_store_explicit(&ring->tail, *tail, memory_order_release);
	return p;
}

#endif
