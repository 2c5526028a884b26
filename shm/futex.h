/*
 * futex.h - shared (not FUTEX_PRIVATE_FLAG) futex wait/wake on 32-bit words
 * in the pool region, so that waiters and wakers may be different processes.
 *
 * Who may call: any process of the pool.
 */
#ifndef SHEAF_SHM_FUTEX_H
#define SHEAF_SHM_FUTEX_H

#include <errno.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Sleep while *word == @expected, at most @timeout_ns (<0: no limit).
 * Returns 0 when woken (or the value differed), -ETIMEDOUT, or -EINTR. */
static inline int futex_wait(_Atomic uint32_t *word, uint32_t expected,
			     int64_t timeout_ns)
{
	struct timespec ts, *tp = NULL;

	if (timeout_ns >= 0) {
		ts.tv_sec = timeout_ns / 1000000000;
		ts.tv_nsec = timeout_ns % 1000000000;
		tp = &ts;
	}
	if (syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, expected, tp, NULL, 0) < 0) {
		if (errno == EAGAIN)
			return 0;
		return -errno;
	}
	return 0;
}

static inline void futex_wake(_Atomic uint32_t *word, int n)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, n, NULL, NULL, 0);
}

static inline int64_t clock_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* One step of a bounded spin-wait (the waits before a futex sleep). */
static inline void spin_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

#endif
