/*
 * vet.h - a client's check of the full sheaves it takes from a barn, and
 * their order (client/vet.c).  Who may call: the object path's slow
 * paths: exchange.c and free.c (vet_full), alloc.c (vet_top, vet_rising).
 */
#ifndef SHEAF_CLIENT_VET_H
#define SHEAF_CLIENT_VET_H

#include <stdint.h>

struct tcache;
struct shm_sheaf;

/*
 * @s, a full sheaf just taken from a barn of @t's cache, made safe to pop:
 * offsets that are not objects of the cache are dropped (counted:
 * UT_OBJECT, shm/bounds.h), the size is clamped to objs[], and the header
 * fields the fast paths trust are set again.  Returns @s.
 */
struct shm_sheaf *vet_full(struct tcache *t, struct shm_sheaf *s);

/*
 * @off, the entry on top of a sheaf @t holds, about to be popped: 1 when it
 * is an object of the cache (vet_full's test once more: the pool's other
 * clients can write a sheaf after its vet), else 0 (counted: UT_OBJECT).
 * The slow path's check (alloc.c, take); the inline pops test the home
 * node's bounds only (sheaf.h, SHEAF__POP_OK).
 */
int vet_top(struct tcache *t, uint64_t off);

/*
 * @s, a sheaf vet_full passed, to be handed out in rising addresses: when
 * its lowest object is not on top, its objects are copied reversed into
 * @e (the thread's empty main sheaf, same cache and node, room for them),
 * @s is left empty, and @e is returned; otherwise (or when @e cannot take
 * them, or @s's size, read again, no longer fits objs[]) @s.  Both
 * sheaves are the caller's, outside the lane's published main (between
 * tcache_fold and tcache_publish).
 */
struct shm_sheaf *vet_rising(struct shm_sheaf *e, struct shm_sheaf *s);

#ifdef SHEAF_TEST_HOOKS
typedef struct sheaf_cache sheaf_cache_t;
/* Tests only (libsheaf-test.a): the four-at-a-time test and the scalar one
 * over objs[0, @n) for @c's parameters (the calling thread's): 1 when they
 * agree, 0 when not, -1 when the CPU has no AVX2 (or no tcache). */
int vet_test_compare(sheaf_cache_t *c, const uint64_t *objs, uint32_t n);
/* Called by vet_rising while both sheaves hold the objects (a test's
 * death point). */
extern void (*vet_rising_hook)(void);
#endif

#endif
