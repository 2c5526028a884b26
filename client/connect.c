/*
 * connect.c - attaching to sheafd: connect to its socket, Attach (version,
 * pid, name), receive the pool's memfd, map it at the daemon's address
 * (engine-owned pages read-only), and detach.  Also fork(): a child cannot
 * use its parent's pools (their sheaves and lanes are the parent's); its
 * calls fail with ECHILD until it connects on its own.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "client/internal.h"
#include "proto/frame.h"
#include "proto/paths.h"
#include "proto/sheaf.pb-c.h"

int pool_connect_socket(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot reach sheafd at %s: %s", path, strerror(e));
		if (fd >= 0)
			close(fd);
		return -e;
	}
	return fd;
}

sheaf_pool_t *sheaf_connect(const char *path, const char *name, unsigned flags,
			    char *err, size_t errlen)
{
	char def[108], msg[256] = "";
	Sheaf__V1__Request rq = SHEAF__V1__REQUEST__INIT;
	Sheaf__V1__AttachRequest ar = SHEAF__V1__ATTACH_REQUEST__INIT;
	Sheaf__V1__Response *r = NULL;
	sheaf_pool_t *pool;
	int fd = -1, rc;

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
	pthread_mutex_init(&pool->lock, NULL);
	pthread_mutex_init(&pool->rpc_lock, NULL);
	pool->remote = 1;
	pool->shm.fd = -1;
	pool->wait_ns = 5000000000ll;
	snprintf(pool->path, sizeof(pool->path), "%s", path);
	pool->sock = pool_connect_socket(path, msg, sizeof(msg));
	if (pool->sock < 0) {
		rc = pool->sock;
		goto err_free;
	}
	ar.protocol_version = SHEAF__V1__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT;
	ar.pid = (uint32_t)getpid();
	ar.name = (char *)(name ? name : "");
	rq.body_case = SHEAF__V1__REQUEST__BODY_ATTACH;
	rq.attach = &ar;
	rc = rpc_call(pool, &rq, &r, &fd, msg, sizeof(msg));
	if (rc != 0)
		goto err_sock;
	if (r->body_case != SHEAF__V1__RESPONSE__BODY_ATTACH || fd < 0) {
		snprintf(msg, sizeof(msg), "sheafd's attach reply carried no pool");
		rc = -EPROTO;
		goto err_sock;
	}
	pool->client = r->attach->client_id;
	pool->client_attached = 1;
	rc = registry_add_pool(pool);
	if (rc != 0) {
		snprintf(msg, sizeof(msg), "too many pools in this process (max %u)",
			 SHEAF_POOLS_MAX);
		goto err_sock;
	}
	rc = pool_map_fd(&pool->shm, fd, 1, (flags & SHEAF_CONNECT_RELOCATE) != 0,
			 msg, sizeof(msg));
	if (rc != 0) {
		registry_remove_pool(pool);
		goto err_sock;
	}
	sheaf__v1__response__free_unpacked(r, NULL);
	return pool;

err_sock:
	if (fd >= 0)
		close(fd);
	if (r != NULL)
		sheaf__v1__response__free_unpacked(r, NULL);
	close(pool->sock);
err_free:
	pthread_mutex_destroy(&pool->lock);
	pthread_mutex_destroy(&pool->rpc_lock);
	free(pool);
out_msg:
	if (err != NULL && errlen > 0)
		snprintf(err, errlen, "%s", msg);
	errno = -rc;
	return NULL;
}

void pool_disconnect(sheaf_pool_t *pool)
{
	if (!pool->forked)
		thread_flush_pool(pool);
	registry_remove_pool(pool);          /* and its handles */
	pool_unmap(&pool->shm);
	if (pool->sock >= 0)
		close(pool->sock);
	pthread_mutex_destroy(&pool->lock);
	pthread_mutex_destroy(&pool->rpc_lock);
	free(pool);
}

void sheaf_disconnect(sheaf_pool_t *pool)
{
	if (pool != NULL)
		sheaf_pool_destroy(pool);
}
