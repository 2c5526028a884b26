/*
 * pool.c - the public calls on a pool of either kind (sheaf_pool_destroy,
 * sheaf_pool_nodes, sheaf_pool_set_timeout, sheaf_pool_check): one side of
 * the seam of pool_ops.h.  Each refuses a pool inherited through fork()
 * before calling pool->ops.  The pools are made by pool_local.c
 * (sheaf_pool_create) and pool_sheafd.c (sheaf_connect).
 */
#include <errno.h>
#include <stdlib.h>
#include "client/internal.h"
#include "client/pool_ops.h"

/*
 * Both kinds: fence the trimmer off (trim.c), give back the calling
 * thread's sheaves (not in a fork() child: they are the parent's),
 * release the engine or the connection
 * (ops->close), then the handles, the mapping and the pool itself.
 */
void sheaf_pool_destroy(sheaf_pool_t *pool)
{
	if (pool == NULL)
		return;
	slots_close_pool(pool);           /* the trimmer keeps off */
	if (!pool->forked)
		thread_flush_pool(pool);
	pool->ops->close(pool);
	slots_remove_pool(pool);          /* and its handles */
	pool_unmap(&pool->shm);
	kmalloc_pool_fini(pool);
	lanes_fini(pool);
	pthread_mutex_destroy(&pool->lock);
	free(pool);
}

unsigned sheaf_pool_nodes(const sheaf_pool_t *pool)
{
	return pool->shm.nodes;
}

/* A local pool has no connection: its struct rpc_conn is never opened, and
 * the value set is simply not used. */
int sheaf_pool_set_timeout(sheaf_pool_t *pool, unsigned ms)
{
	if (pool->forked)
		return -ECHILD;
	if (ms == 0 || ms > RPC_TIMEOUT_MAX_MS)
		return -EINVAL;
	rpc_set_timeout(&pool->conn, ms);
	return 0;
}

int sheaf_pool_check(sheaf_pool_t *pool, char *err, size_t errlen)
{
	if (pool->forked)
		return -ECHILD;
	return pool->ops->check(pool, err, errlen);
}
