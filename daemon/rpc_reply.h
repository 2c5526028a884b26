/*
 * rpc_reply.h - the reply a request handler fills (daemon/rpc*.c only):
 * rpc.c parses and dispatches, and the handlers of one subject each live
 * in a file of their own (rpc_names.c, rpc_queues.c); all write into a
 * struct reply whose every allocation is in its arena (arena.h).
 */
#ifndef SHEAF_DAEMON_RPC_REPLY_H
#define SHEAF_DAEMON_RPC_REPLY_H

#include "arena.h"
#include "daemon.h"
#include "proto/sheaf.pb-c.h"

struct reply {
	Sheaf__V1__Response r;
	struct arena a;
	char err[256];
	int pass_fds[FRAME_MAX_FDS];
	unsigned npass;
	int close_after;
	int later;                   /* rpc_out.later */
	int deferred;                /* rpc_out.deferred */
};

/* The reply becomes an error: status @st, message from @fmt. */
void rpc_fail(struct reply *rp, Sheaf__V1__Status st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The status of an engine call's negative errno @rc. */
Sheaf__V1__Status rpc_status(int rc);

/* rpc_names.c: NameSet, NameDel, NameList. */
void rpc_name_set(struct daemon *d, const Sheaf__V1__NameSetRequest *rq, struct reply *rp);
void rpc_name_del(struct daemon *d, const Sheaf__V1__NameDelRequest *rq, struct reply *rp);
void rpc_name_list(struct daemon *d, struct reply *rp);

/* rpc_queues.c: QueueCreate, QueueDestroy, QueueList, and every live
 * queue's numbers for Stats (into *@out, an arena array; 0 or -1). */
void rpc_queue_create(struct daemon *d, const Sheaf__V1__QueueCreateRequest *rq,
		      struct reply *rp);
void rpc_queue_destroy(struct daemon *d, const Sheaf__V1__QueueDestroyRequest *rq,
		       struct reply *rp);
void rpc_queue_list(struct daemon *d, struct reply *rp);
int rpc_queue_infos(struct daemon *d, struct arena *a, Sheaf__V1__QueueInfo ***out, size_t *n);

#endif
