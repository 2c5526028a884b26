/*
 * rcu_table.h - the hash table of rcu_table.c (tests/examples), shared with
 * the W9 benchmark's in-process DPDK peer (tests/bench/w9/w9dpdk.c) so that
 * every contender walks the same entries the same way: the entry layout,
 * its fill and check, and the lookup's chain walk.  No sheaf calls here.
 */
#ifndef RCU_TABLE_H
#define RCU_TABLE_H
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define NB       1024u               /* buckets */
#define NKEYS    4096u
#define POISON   0xdeadbeefdeadbeefull

struct entry {
	uint64_t key;
	uint64_t version;
	uint64_t check;              /* mix(key, version) */
	struct entry *next;          /* atomic: the writer's release store */
	uint64_t payload[4];         /* each key ^ version */
};

static inline uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static inline uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static inline double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline void fill(struct entry *e, uint64_t key, uint64_t version)
{
	e->key = key;
	e->version = version;
	e->check = mix(key ^ (version << 20));
	for (int i = 0; i < 4; i++)
		e->payload[i] = key ^ version;
}

/* What a reader checks of an entry it reached: intact and in its bucket. */
static inline int intact(const struct entry *e, uint32_t bucket)
{
	uint64_t k = __atomic_load_n(&e->key, __ATOMIC_RELAXED);
	uint64_t v = __atomic_load_n(&e->version, __ATOMIC_RELAXED);

	if (k == POISON || k % NB != bucket ||
	    __atomic_load_n(&e->check, __ATOMIC_RELAXED) != mix(k ^ (v << 20)))
		return 0;
	for (int i = 0; i < 4; i++)
		if (__atomic_load_n(&e->payload[i], __ATOMIC_RELAXED) != (k ^ v))
			return 0;
	return 1;
}

/* The bench's lookup: walks @key's chain from @head (acquire loads of the
 * links, paired with the writer's release store); 1 when found. */
static inline int rt_find(struct entry *head, uint64_t key)
{
	int found = 0;

	for (struct entry *e = head; e != NULL; e = __atomic_load_n(&e->next, __ATOMIC_ACQUIRE))
		found |= __atomic_load_n(&e->key, __ATOMIC_RELAXED) == key;
	return found;
}
#endif
