/*
 * grace_bell.c - the grace-period thread's doorbell (grace_bell.h).
 */
#include "futex.h"
#include "grace_bell.h"

void grace_bell_ring(struct shm_pool *p)
{
	/* Dekker pair with grace_main's sleeping store and bell load, as
	 * the node doorbell (barn.h). */
	at_fetch_add_seqcst(&p->rcu->bell, 1);
	if (at_load_seqcst(&p->rcu->sleeping))
		futex_wake(&p->rcu->bell, 1);
}
