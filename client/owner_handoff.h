/*
 * owner_handoff.h - libsheaf's hooks for modules that move objects between
 * processes without a free and an alloc (the shared queues): they keep the
 * owner tags of SHEAF_CACHE_OWNED caches true (shm/owner.h,
 * docs/design.md "Object ownership").  Internal to libsheaf (never
 * installed).
 *
 * Who may call: the queue module, for each object it hands over; any
 * thread of a process attached to @pool.  Both are no-ops for an object of
 * a cache that is not owned, and for a pointer that is no object of
 * @pool (the queue validates its own input; these never fail).
 */
#ifndef SHEAF_CLIENT_OWNER_HANDOFF_H
#define SHEAF_CLIENT_OWNER_HANDOFF_H

struct sheaf_pool;

/*
 * Before @obj becomes visible in a queue (before the enqueue's publishing
 * step): it is held by no process while queued (OWNER_TAG_QUEUED), so the
 * producer's death leaves it where it is.  The caller's queue record
 * names @obj before this (shm/queue.h): a producer killed after this and
 * before its enqueue completes leaves an object tagged QUEUED that the
 * dead-client repair finds in the record, and frees unless a slot or
 * another thread's record holds it.
 */
void owner_on_enqueue(struct sheaf_pool *pool, void *obj);

/*
 * After a dequeue took @obj (the caller now holds it), or when an enqueue
 * did not put it in (its QUEUED tag taken back): it becomes the calling
 * process's, so its death frees it (or keeps it) like one it allocated.
 * The caller's queue record names @obj meanwhile (shm/queue.h): a tag the
 * engine's repair holds (REPAIR) is waited for, since that repair, seeing
 * the record, gives it back QUEUED.
 */
void owner_on_dequeue(struct sheaf_pool *pool, void *obj);

/*
 * Topics (client/topic.c).  After a publish made @obj visible: its tag goes
 * from this process's to QUEUED (a CAS: a subscriber that freed it first
 * wins), so the publisher's death leaves it (sheafd retags one whose
 * publisher died before this).  Around a release that may clear the last
 * reference: @take 1 makes it this process's (a death before the free
 * then frees it) and returns 1, or returns 0 without a change while
 * another client's id is there (that client is between its own take and
 * CAS: the caller looks at the word again); @take 2 takes it from
 * another client too (one that held it too long: dead, or hostile);
 * @take 0 gives it back to QUEUED (a CAS from ours).  A tag that says
 * REPAIR, KEPT or 0 is never taken (1: the caller goes on without it).
 */
void owner_on_topic_publish(struct sheaf_pool *pool, void *obj);
int owner_on_topic_last(struct sheaf_pool *pool, void *obj, int take);

#endif
