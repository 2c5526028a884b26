/*
 * free.c - the slow path of sheaf_free (sheaf__free_slow, called by the
 * inline sheaf_free of sheaf.h when its push misses): an owned cache's
 * out-of-line push first (owned_fast.c), else every check of the object
 * (free_check), then room for it: the main sheaf, the spare, the stash, an
 * empty sheaf of the barn (exchange.c), a sheaf grown in place, or, for an
 * object of another node, the thread's sheaf for that node; with sheaves
 * disabled a barn's sheaf borrowed for one object.  Also the external
 * definition of sheaf_free.
 *
 * Who may call: sheaf.h's inline sheaf_free (sheaf__free_slow is part of
 * the library's ABI); nothing else of libsheaf calls into this file.
 */
#include <errno.h>
#include "shm/barn.h"
#include "shm/owner.h"
#include "shm/slab_geom.h"
#include "client/internal.h"
#include "client/vet.h"

/* @off is the object on top of @s: an immediate double free. */
static int on_top(struct shm_sheaf *s, uint64_t off)
{
	uint32_t n = s != NULL ? sheaf_size(s) : 0;

	return n > 0 && s->objs[sheaf_slot(n - 1)] == off;
}

/*
 * Every test before a sheaf is touched; 0 or -EFAULT / -EINVAL / -EALREADY
 * (the object on top of the sheaf it would go to; a debug cache's object
 * whose bit is clear).  *@node: the object's node.
 */
static int free_check(struct tcache *t, void *obj, uint64_t off, uint32_t *node)
{
	struct shm_sheaf *to;
	int rc = 0;

	/* Mostly a free whose main sheaf was full: the fast path's test
	 * passed already; slab_validate names what is wrong. */
	if (is_debug(t) || !SHEAF__FAST_VALID(t->f, obj))
		rc = slab_validate(tshm(t), t->f->cache_id, off);
	if (rc != 0)
		return rc;
	if (is_debug(t) && !debug_track_allocated(t, off))
		return -EALREADY;
	*node = pool_node_of_frame(tshm(t), pool_frame_of(tshm(t), off));
	to = *node == t->node ? tmain(t) : t->remote[*node];
	return on_top(to, off) ? -EALREADY : 0;
}

/*
 * Room without an empty sheaf: every sheaf holds SHEAF_CAP_MAX offsets
 * whatever its capacity (a policy), so a full sheaf the thread holds with
 * a smaller capacity grows to that.  Returns @s, or NULL when it cannot grow.
 * Its size is client-writable: one not below SHEAF_CAP_MAX (a scribble)
 * has no room even grown, and the caller's push at objs[size] would land
 * past the sheaf's end, in the next sheaf, maybe another cache's
 * (test_untrusted, grow_bounded_by_size).
 */
static struct shm_sheaf *grow(struct shm_sheaf *s)
{
	if (s == NULL || s == &sheaf_dummy || s->capacity >= SHEAF_CAP_MAX ||
	    sheaf_size(s) >= SHEAF_CAP_MAX)
		return NULL;
	s->capacity = SHEAF_CAP_MAX;
	return s;
}

/* Room on the main sheaf, which is full: the spare if empty, else an empty
 * sheaf (stash, barn, depot), else main grown, else wait for the engine. */
static struct shm_sheaf *main_room(struct tcache *t, uint32_t cap)
{
	struct shm_sheaf *m = tmain(t), *e;

	if (t->spare != NULL && sheaf_size(t->spare) == 0) {
		tmain_set(t, t->spare);
		t->spare = m;
		tmain(t)->capacity = cap;        /* pick up a tuned capacity */
		return tmain(t);
	}
	if (t->nempty > 0) {
		e = t->stash_empty[--t->nempty];
		e->capacity = cap;
	} else {
		e = exchange_empty_now(t, t->node, cap);
	}
	if (e == NULL && grow(m) != NULL)
		return m;
	if (e == NULL) {
		exchange_give_back_full(t);
		e = exchange_get_empty(t, t->node, cap);
		if (e == NULL)
			return NULL;
	}
	exchange_retire_main(t, m, t->stash_full, &t->nfull);
	tmain_set(t, e);
	return e;
}

/* A sheaf with room for an object of another node; a full one goes to that
 * node's barn whole (unless no empty sheaf is to be had at once: it grows). */
static struct shm_sheaf *remote_room(struct tcache *t, uint32_t node)
{
	struct shm_sheaf *r = t->remote[node], *e;

	stat_inc(t, ST_FREE_REMOTE);
	if (r != NULL && sheaf_size(r) < r->capacity)
		return r;
	e = exchange_empty_now(t, node, barn_capacity(t));
	if (e == NULL && grow(r) != NULL)
		return r;
	if (r != NULL)
		exchange_put(t, r);
	t->remote[node] = NULL;
	if (e == NULL)
		e = exchange_get_empty(t, node, barn_capacity(t));
	t->remote[node] = e;
	return e;
}

/* Sheaves disabled: a barn sheaf with room, or a fresh one (grown when none
 * is to be had at once).  The caller pushes and puts it back. */
static struct shm_sheaf *nosheaf_room(struct tcache *t)
{
	struct shm_pool *p = tshm(t);
	uint32_t id = barn_get_full(p, t->f->cache_id, t->node, me_of(t), intent_of(t));
	struct shm_sheaf *s = id == SHEAF_ID_NONE ? NULL : vet_full(t, pool_sheaf(p, id)), *e;

	if (s != NULL && sheaf_size(s) < s->capacity)
		return s;
	e = exchange_empty_now(t, t->node, barn_capacity(t));
	if (e == NULL && grow(s) != NULL)
		return s;
	if (s != NULL)
		exchange_put(t, s);
	return e != NULL ? e : exchange_get_empty(t, t->node, barn_capacity(t));
}

static int free_slow(struct tcache *t, void *obj)
{
	uint64_t off = (uint64_t)((char *)obj - t->f->base);
	uint32_t node, cap;
	struct shm_sheaf *s;
	int rc, fast = 0, nosheaf = 0;

	rc = free_check(t, obj, off, &node);
	if (rc != 0) {
		stat_inc(t, ST_FREE_INVALID);
		return rc;
	}
	/* Owned: ours before the push; the engine's repair may have freed
	 * it for a dead holder already (shm/owner.h). */
	if (is_owned(t)) {
		rc = owner_free_begin(owned_tag_of(t, off), me_of(t));
		if (rc == 1)
			return 0;   /* the repair frees it, and counts it */
		if (rc != 0) {      /* -EALREADY: nobody held it */
			stat_inc(t, ST_FREE_INVALID);
			return rc;
		}
		OWNED_STOP(OS_FREE_CLAIMED);
	}
	cap = cache_capacity(t);
	if (node != t->node) {
		s = remote_room(t, node);
	} else if (cap == 0) {
		tcache_flush(t);
		s = nosheaf_room(t);
		nosheaf = 1;
	} else if (sheaf_size(tmain(t)) < tmain(t)->capacity) {
		s = tmain(t);           /* debug caches come here */
		fast = 1;
	} else {
		fast = t->spare != NULL && sheaf_size(t->spare) == 0;
		s = main_room(t, cap);
	}
	/* Only a timeout waiting for the engine leaves no sheaf. */
	if (s == NULL)
		return -EAGAIN;
	/* Counted with the push, exactly if the thread dies between the
	 * two; a push taken back (a debug cache's double free) counts
	 * nothing. */
	count_stage(t, s, sheaf_size(s) + 1, fast ? ST_FREE_FASTPATH : ST_FREE_SLOWPATH);
	sheaf_push(s, off);
	rc = debug_track_commit_free(t, s, off);
	if (rc == 0)
		count_commit(t);
	else
		lane_count_drop(t->tp->lane);
	if (is_owned(t)) {
		OWNED_STOP(OS_FREE_PUSHED);
		owner_free_end(owned_tag_of(t, off));
		OWNED_STOP(OS_FREE_DONE);
	}
	if (nosheaf)
		exchange_put(t, s);
	if (rc != 0) {
		stat_inc(t, ST_FREE_INVALID);
		return rc;
	}
	return 0;
}

int sheaf__free_slow(sheaf_cache_t *c, void *obj)
{
	struct tcache *t;
	int rc, saved = errno;  /* int functions leave errno alone */

	if (obj == NULL)                /* as free(NULL) */
		return 0;
	if (c->pool == NULL)            /* its pool was destroyed or disconnected */
		return -EINVAL;
	if (owned_free_fast(c, obj, &rc)) {
		errno = saved;
		return rc;
	}
	t = tcache_get(c);
	if (t == NULL) {
		rc = -errno;
	} else if ((rc = tcache_enter(t)) == 0) {   /* no destroy decides meanwhile */
		tcache_fold(t);
		rc = free_slow(t, obj);
		tcache_publish(t);
		tcache_leave(t);
	}
	errno = saved;
	return rc;
}

/* The external definition of sheaf.h's inline sheaf_free. */
extern inline int sheaf_free(sheaf_cache_t *cache, void *obj);

