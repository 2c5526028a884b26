/*
 * paths.h - the default control socket path, shared by sheafd, libsheaf
 * and sheafctl: $SHEAF_SOCKET when set (clients only), else
 * $XDG_RUNTIME_DIR/sheaf/sheafd.sock, else /run/sheafd/sheafd.sock for root,
 * else /tmp/sheafd-<uid>/sheafd.sock.
 */
#ifndef SHEAF_PROTO_PATHS_H
#define SHEAF_PROTO_PATHS_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void sheaf_default_socket(char *buf, size_t len, int use_env)
{
	const char *env = use_env ? getenv("SHEAF_SOCKET") : NULL;
	const char *xdg = getenv("XDG_RUNTIME_DIR");

	if (env != NULL && env[0] != '\0')
		snprintf(buf, len, "%s", env);
	else if (xdg != NULL && xdg[0] != '\0')
		snprintf(buf, len, "%s/sheaf/sheafd.sock", xdg);
	else if (getuid() == 0)
		snprintf(buf, len, "/run/sheafd/sheafd.sock");
	else
		snprintf(buf, len, "/tmp/sheafd-%u/sheafd.sock", (unsigned)getuid());
}

#endif
