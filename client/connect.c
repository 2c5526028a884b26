/*
 * connect.c - a pool of sheafd: sheaf_connect connects to its socket and
 * attaches (rpc.c), maps the pool's two memfds at the daemon's address
 * (META, the engine-owned pages, read-only: its descriptor cannot write) and
 * gives the pool remote.c's operations;
 * sheaf_disconnect is sheaf_pool_destroy (pool.c).  fork(): a child cannot
 * use its parent's pools (their sheaves and lanes are the parent's); its
 * calls fail with ECHILD (pool.c, cache.c, stats.c) until it connects on
 * its own.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "client/internal.h"
#include "client/pool_ops.h"
#include "client/rpc.h"
#include "proto/paths.h"

sheaf_pool_t *sheaf_connect(const char *path, const char *name, unsigned flags,
			    char *err, size_t errlen)
{
	char def[108], msg[256] = "";
	sheaf_pool_t *pool;
	int fds[2] = { -1, -1 }, rc;

	if (flags & ~SHEAF_CONNECT_RELOCATE) {
		snprintf(msg, sizeof(msg), "unknown flags 0x%x", flags);
		rc = -EINVAL;
		goto out_msg;
	}
	if (path == NULL || path[0] == '\0') {
		sheaf_default_socket(def, sizeof(def), 1);
		path = def;
	}
	pool = calloc(1, sizeof(*pool));
	if (pool == NULL) {
		rc = -ENOMEM;
		snprintf(msg, sizeof(msg), "out of memory");
		goto out_msg;
	}
	pool->ops = &remote_pool_ops;
	pthread_mutex_init(&pool->lock, NULL);
	pool->shm.meta_fd = pool->shm.shared_fd = pool->shm.meta_ro_fd = -1;
	pool->wait_ns = 5000000000ll;
	rc = rpc_open(&pool->conn, path, msg, sizeof(msg));
	if (rc != 0)
		goto err_free;
	rc = rpc_attach(&pool->conn, name, fds, msg, sizeof(msg));
	if (rc != 0)
		goto err_conn;
	pool->client = pool->conn.client;
	rc = registry_add_pool(pool);
	if (rc != 0) {
		snprintf(msg, sizeof(msg), "too many pools in this process (max %u)",
			 SHEAF_POOLS_MAX);
		goto err_conn;
	}
	rc = pool_map_fds(&pool->shm, fds[0], fds[1], 1,
			  (flags & SHEAF_CONNECT_RELOCATE) != 0, msg, sizeof(msg));
	if (rc != 0) {
		registry_remove_pool(pool);
		goto err_conn;
	}
	return pool;

err_conn:
	for (int i = 0; i < 2; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
	}
	rpc_close(&pool->conn);
err_free:
	pthread_mutex_destroy(&pool->lock);
	free(pool);
out_msg:
	if (err != NULL && errlen > 0)
		snprintf(err, errlen, "%s", msg);
	errno = -rc;
	return NULL;
}

void sheaf_disconnect(sheaf_pool_t *pool)
{
	sheaf_pool_destroy(pool);
}
