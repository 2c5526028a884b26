/*
 * mpool.c - the mutex pool (see mpool.h): header, index stack and objects in
 * one anonymous MAP_SHARED mapping.  A holder that dies with the lock leaves
 * it EOWNERDEAD: the next locker marks it consistent and goes on (the stack
 * may have lost the dead holder's half-done operation; a benchmark accepts
 * that, a real pool would have to repair it).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>

#include "tests/bench/mpool.h"

struct mpool {
	pthread_mutex_t lock;   /* PTHREAD_PROCESS_SHARED | PTHREAD_MUTEX_ROBUST */
	uint32_t nobj;
	uint32_t top;           /* free indices in stack[0..top) */
	size_t obj_size;
	size_t map_len;
	uint32_t *stack;        /* in the mapping */
	unsigned char *data;    /* in the mapping */
};

static size_t align_up(size_t x, size_t a)
{
	return (x + a - 1) & ~(a - 1);
}

static int mpool_lock_init(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;
	int rc;

	rc = pthread_mutexattr_init(&a);
	if (!rc)
		rc = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	if (!rc)
		rc = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	if (!rc)
		rc = pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
	return rc;
}

struct mpool *mpool_create(size_t obj_size, uint32_t nobj)
{
	size_t osz = align_up(obj_size ? obj_size : 1, 8);
	size_t stack_off = align_up(sizeof(struct mpool), 64);
	size_t data_off = align_up(stack_off + (size_t)nobj * sizeof(uint32_t),
				   4096);
	size_t len = data_off + (size_t)nobj * osz;
	struct mpool *mp;
	int rc;

	mp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		  -1, 0);
	if (mp == MAP_FAILED)
		return NULL;
	rc = mpool_lock_init(&mp->lock);
	if (rc) {
		munmap(mp, len);
		errno = rc;
		return NULL;
	}
	mp->nobj = nobj;
	mp->obj_size = osz;
	mp->map_len = len;
	mp->stack = (uint32_t *)((char *)mp + stack_off);
	mp->data = (unsigned char *)mp + data_off;
	/* Lowest index on top: the first allocations walk the region upwards. */
	for (uint32_t i = 0; i < nobj; i++)
		mp->stack[i] = nobj - 1 - i;
	mp->top = nobj;
	return mp;
}

void mpool_destroy(struct mpool *mp)
{
	if (mp) {
		pthread_mutex_destroy(&mp->lock);
		munmap(mp, mp->map_len);
	}
}

static void mpool_lock(struct mpool *mp)
{
	if (pthread_mutex_lock(&mp->lock) == EOWNERDEAD)
		pthread_mutex_consistent(&mp->lock);
}

void *mpool_alloc(struct mpool *mp)
{
	void *p = NULL;

	mpool_lock(mp);
	if (mp->top > 0)
		p = mp->data + (size_t)mp->stack[--mp->top] * mp->obj_size;
	pthread_mutex_unlock(&mp->lock);
	if (!p)
		errno = ENOMEM;
	return p;
}

int mpool_free(struct mpool *mp, void *p)
{
	uintptr_t off = (uintptr_t)p - (uintptr_t)mp->data;
	int rc = 0;

	if ((uintptr_t)p < (uintptr_t)mp->data ||
	    off >= (uintptr_t)mp->nobj * mp->obj_size || off % mp->obj_size)
		return -EINVAL;
	mpool_lock(mp);
	if (mp->top < mp->nobj)       /* else a double free: keep the stack sane */
		mp->stack[mp->top++] = (uint32_t)(off / mp->obj_size);
	else
		rc = -EALREADY;
	pthread_mutex_unlock(&mp->lock);
	return rc;
}

uint32_t mpool_free_count(struct mpool *mp)
{
	uint32_t n;

	mpool_lock(mp);
	n = mp->top;
	pthread_mutex_unlock(&mp->lock);
	return n;
}

uint32_t mpool_objects(const struct mpool *mp)
{
	return mp->nobj;
}
