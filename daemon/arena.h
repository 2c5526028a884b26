/*
 * arena.h - an allocation arena: every block of one reply (protobuf-c
 * messages, their arrays and strings) is taken here and freed together once
 * the reply is packed.  Blocks are zeroed.  Who may call: daemon/rpc*.c.
 */
#ifndef SHEAF_DAEMON_ARENA_H
#define SHEAF_DAEMON_ARENA_H

#include <stddef.h>

struct arena {
	void **p;                /* the blocks */
	int n, cap;
};

/* A zeroed block of @size bytes, or NULL (out of memory). */
void *arena_alloc(struct arena *a, size_t size);

/* A copy of @s, or NULL. */
char *arena_strdup(struct arena *a, const char *s);

/* Free every block; @a is empty and reusable afterwards. */
void arena_free(struct arena *a);

/* A new @type set to @init (a protobuf-c *__INIT), or NULL. */
#define ARENA_NEW(a, type, init)                                    \
	({ type *x_ = arena_alloc((a), sizeof(type));               \
	   if (x_ != NULL) { type t_ = init; *x_ = t_; } x_; })

#endif
