/*
 * util_slab.h - what the slab tests (test_slab, test_slab_refuse,
 * test_slab_stress) share: a pool made with pool_create and an engine
 * initialised on it but never started (no worker threads), caches made
 * with engine_cache_create, and helpers that call slab_alloc_objs /
 * slab_free_objs on region offsets and check the result.  Every test runs
 * between slab_setup and slab_teardown (a checked fixture); failures go
 * through REQUIRE and ck_assert.
 */
#ifndef SHEAF_TESTS_UTIL_SLAB_H
#define SHEAF_TESTS_UTIL_SLAB_H

#include <stdint.h>

#include "shm/engine/engine.h"
#include "shm/pool.h"
#include "shm/engine/slab.h"

#define MIB (1024ull * 1024ull)

extern struct shm_pool P;               /* the pool under test */
extern struct engine E;                 /* its engine */
extern char ERR[512];                   /* the last error message */

/* Fixture: an empty P, the PRNG reset; the pool and engine ended. */
void slab_setup(void);
void slab_teardown(void);

double now_s(void);                     /* CLOCK_MONOTONIC in seconds */
/* Deterministic PRNG (xorshift64*), reset by slab_setup. */
uint64_t rnd(void);
uint32_t rnd_below(uint32_t n);
void shuffle(uint64_t *a, uint32_t n);

/* Create P (@nodes simulated nodes, @size bytes) and initialise E on it. */
void pool_up(uint32_t nodes, uint64_t size);
void pool_down(void);
/* A cache of E (required to succeed): its id. */
uint32_t cache_new(const char *name, uint32_t size, uint32_t align, uint32_t min_partial);

/* pool_check must pass with @in_use objects allocated. */
#define CHECK_POOL(in_use) check_pool_at((in_use), __LINE__)
void check_pool_at(int64_t in_use, int line);

int64_t fd_blocks(void);                /* the memfd's allocated blocks */
uint64_t frames_used(void);
uint64_t stat_sum(uint32_t c, enum sheaf_stat st);   /* over the nodes */
/* Allocate @n objects in batches of varying size; returns the number got
 * (stops at the first short batch). */
uint32_t alloc_n(uint32_t c, uint32_t node, uint64_t *out, uint32_t n);
/* Free @n objects in batches; returns the number refused. */
uint32_t free_n(uint32_t c, const uint64_t *objs, uint32_t n);
/* Every object of @objs: in the data range of @node, in a slab frame of
 * cache @c on @node, inside [frame, frame + slab_bytes), on an object
 * boundary, aligned to the cache's align (offset and address). */
void verify_placement(uint32_t c, uint32_t node, const uint64_t *objs, uint32_t n);
/* All distinct and non-overlapping (objects of @size bytes). */
void verify_distinct(const uint64_t *objs, uint32_t n, uint32_t size);
/* Write every byte of every object: memset, then a per-object pattern of
 * @seed; verify_objs checks the pattern. */
void fill_objs(const uint64_t *objs, uint32_t n, uint32_t size, uint64_t seed);
void verify_objs(const uint64_t *objs, uint32_t n, uint32_t size, uint64_t seed);
uint32_t list_count(uint32_t c, uint32_t node, enum slab_list l);

#endif
