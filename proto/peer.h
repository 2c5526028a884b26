/*
 * peer.h - a client's check of who serves a control socket, shared by
 * libsheaf (client/rpc.c) and sheafctl (client/sheafctl/conn.c): before
 * trusting anything sheafd sends (above all the pool's memfd), the server's
 * uid (SO_PEERCRED) must be one the user trusts:
 *   - the user's own uid (real or effective), or root;
 *   - $SHEAF_SERVER_UID (a uid or user name), when set;
 *   - the owner of the socket's directory, when only root could have given
 *     it that directory: its parent is root's and writable by nobody else,
 *     and the directory itself is writable by its owner only (so
 *     /run/sheafd of the systemd units, user sheafd, is trusted; a
 *     directory another user made under /tmp is not).
 * Under socket activation the server's credentials are systemd's (root).
 *
 * Part of libsheaf (hidden); never prints.
 */
#ifndef SHEAF_PROTO_PEER_H
#define SHEAF_PROTO_PEER_H

#include <stddef.h>

/* Whether the server on connected socket @fd (reached through @path) is
 * trusted: 0, or -EPERM (or another -errno) with the cause in @err. */
int peer_check_server(int fd, const char *path, char *err, size_t errlen);

#endif
