/* peer.c - whether a control socket's server may be trusted (peer.h). */
#include <errno.h>
#include <libgen.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "proto/peer.h"

/* $SHEAF_SERVER_UID as a uid: 0 with *@uid, -1 when unset or unknown. */
static int env_server_uid(uid_t *uid)
{
	const char *s = getenv("SHEAF_SERVER_UID");
	char buf[1024];
	struct passwd pw, *res = NULL;
	unsigned long v;
	char *end;

	if (s == NULL || *s == '\0')
		return -1;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno == 0 && *end == '\0' && v < (unsigned long)(uid_t)-1) {
		*uid = (uid_t)v;
		return 0;
	}
	if (getpwnam_r(s, &pw, buf, sizeof(buf), &res) != 0 || res == NULL)
		return -1;
	*uid = pw.pw_uid;
	return 0;
}

/* The owner of @path's directory when root gave it: its parent is root's
 * and writable by root only, and the directory by its owner only. */
static int root_given_dir_owner(const char *path, uid_t *uid)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)], parent[sizeof(dir)];
	char tmp[sizeof(dir)];
	struct stat d, p;

	/* dirname() writes into its argument: copy first, each time. */
	snprintf(tmp, sizeof(tmp), "%s", path);
	snprintf(dir, sizeof(dir), "%s", dirname(tmp));
	snprintf(tmp, sizeof(tmp), "%s", dir);
	snprintf(parent, sizeof(parent), "%s", dirname(tmp));
	if (lstat(dir, &d) != 0 || stat(parent, &p) != 0 || !S_ISDIR(d.st_mode))
		return -1;
	if (p.st_uid != 0 || (p.st_mode & (S_IWGRP | S_IWOTH)) ||
	    (d.st_mode & (S_IWGRP | S_IWOTH)))
		return -1;
	*uid = d.st_uid;
	return 0;
}

int peer_check_server(int fd, const char *path, char *err, size_t errlen)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	uid_t ok;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) {
		int e = errno;
		snprintf(err, errlen, "cannot learn who serves %s: %s", path, strerror(e));
		return -e;
	}
	if (cr.uid == 0 || cr.uid == getuid() || cr.uid == geteuid())
		return 0;
	if (env_server_uid(&ok) == 0 && cr.uid == ok)
		return 0;
	if (root_given_dir_owner(path, &ok) == 0 && cr.uid == ok)
		return 0;
	snprintf(err, errlen, "%s is served by uid %u (pid %d), which is not trusted: not "
		 "this user, not root, not $SHEAF_SERVER_UID, not the owner of a directory "
		 "root made for it (refusing to talk to it)", path, (unsigned)cr.uid,
		 (int)cr.pid);
	return -EPERM;
}
