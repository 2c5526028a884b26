/*
 * grace_bell.h - the doorbell of the engine's grace-period thread (struct
 * shm_rcu, layout.h: bell and sleeping): a client rings it when it hands
 * over deferred sheaves or asks for a grace period; the engine rings it to
 * stop the thread.  A Dekker pair with the thread's sleeping flag, as the
 * node doorbell (barn.h).
 *
 * Who may call: any process of the pool.  No locks.
 */
#ifndef SHEAF_SHM_GRACE_BELL_H
#define SHEAF_SHM_GRACE_BELL_H

#include "pool.h"

/* Bump the bell (seq_cst); wake the thread when it sleeps. */
void grace_bell_ring(struct shm_pool *p);

#endif
