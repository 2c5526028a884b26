/*
 * topic.c - libsheaf's topics (sheaf.h, "topics"): the handles,
 * create/open/destroy and subscribe/unsubscribe at the seam of pool_ops.h
 * (pool_local.c calls the engine, pool_sheafd.c sends the Topic* requests
 * to sheafd), and publish / take / release over shm/topic.c's log, with
 * futex waits.  docs/design.md, "Topics".
 *
 * A handle keeps a private copy of the descriptor's trusted values and its
 * generation; a subscription its slot, the slot's generation and its
 * cursor.  Every call first checks that the descriptor (and the slot) is
 * still the one it was made for, else -ESTALE.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "client/internal.h"
#include "client/pool_ops.h"
#include "client/owner_handoff.h"
#include "shm/futex.h"
#include "shm/queue.h"
#include "shm/topic.h"

_Static_assert(SHEAF_TOPIC_BLOCK == TOPIC_POLICY_BLOCK && SHEAF_TOPIC_DROP == TOPIC_POLICY_DROP,
	       "topic policies: sheaf.h and shm/topic.h agree");

struct sheaf_topic {
	struct topic_ref ref;
	sheaf_pool_t *pool;
	struct shm_topic *td;
	uint32_t id;
	uint32_t gen;
	char name[SHEAF_NAME_MAX];
};

struct sheaf_sub {
	sheaf_topic_t *t;
	struct shm_topic_sub *b;     /* its counters (shared) */
	uint64_t cursor;             /* next position to look at */
	uint32_t slot;
	uint32_t gen;                /* the slot's generation */
	uint64_t delivered, released; /* this handle's counts (stored to b) */
};

/* A sleeper wakes at least this often to look again (a waker killed
 * between its change and its wake costs one slice at most). */
#define TOPIC_SLICE_NS (100ll * 1000 * 1000)

static inline int topic_ok(const sheaf_topic_t *t)
{
	return at_load_acquire(&t->td->state) == TOPIC_LIVE &&
	       at_load_relaxed(&t->td->generation) == t->gen;
}

static inline int sub_ok(const sheaf_sub_t *s)
{
	return topic_ok(s->t) && (topic_live(&s->t->ref) & (1u << s->slot)) != 0 &&
	       s->t->td->subs[s->slot].generation == s->gen;
}

static sheaf_topic_t *handle_of(sheaf_pool_t *pool, uint32_t id, uint32_t gen)
{
	struct shm_topic *td = &pool->shm.topics[id];
	sheaf_topic_t *t = calloc(1, sizeof(*t));

	if (t == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	t->pool = pool;
	t->td = td;
	t->id = id;
	t->gen = gen;
	t->ref = topic_ref_of(&pool->shm, td);
	memcpy(t->name, td->name, sizeof(t->name));
	t->name[SHEAF_NAME_MAX - 1] = '\0';
	if (!topic_ok(t)) {
		free(t);
		errno = ESTALE;
		return NULL;
	}
	return t;
}

sheaf_topic_t *sheaf_topic_create(sheaf_pool_t *pool, const char *name, unsigned capacity,
				  unsigned history, unsigned policy)
{
	char msg[160];
	uint32_t gen = 0;
	int id;

	if (pool == NULL) {
		errno = EINVAL;
		return NULL;
	}
	if (pool->forked) {
		errno = ECHILD;
		return NULL;
	}
	if (topic_params_check(name, capacity, history, policy, msg, sizeof(msg)) != 0) {
		errno = EINVAL;
		return NULL;
	}
	id = pool->ops->topic_create(pool, name, capacity, history, policy, &gen);
	if (id < 0) {
		errno = -id;
		return NULL;
	}
	return handle_of(pool, (uint32_t)id, gen);
}

sheaf_topic_t *sheaf_topic_open(sheaf_pool_t *pool, const char *name)
{
	int id;

	if (pool == NULL || name == NULL) {
		errno = EINVAL;
		return NULL;
	}
	if (pool->forked) {
		errno = ECHILD;
		return NULL;
	}
	id = pool_topic_find(&pool->shm, name);
	if (id < 0) {
		errno = ENOENT;
		return NULL;
	}
	return handle_of(pool, (uint32_t)id, at_load_relaxed(&pool->shm.topics[id].generation));
}

void sheaf_topic_close(sheaf_topic_t *t)
{
	free(t);
}

int sheaf_topic_destroy(sheaf_topic_t *t)
{
	int rc;

	if (t->pool->forked)
		return -ECHILD;
	if (!topic_ok(t)) {
		free(t);
		return -ESTALE;
	}
	rc = t->pool->ops->topic_destroy(t->pool, t->id, t->name);
	if (rc == 0 || rc == -ENOENT) {
		free(t);
		return rc == 0 ? 0 : -ESTALE;
	}
	return rc;
}

/* The object of value @v, or NULL (a spoiled value: counted). */
static void *obj_of(const sheaf_topic_t *t, uint32_t v)
{
	const struct shm_pool *p = t->ref.p;
	uint64_t rel = queue_rel_at(v);
	const struct shm_cache *c;
	struct queue_geom g;

	if (v == 0 || !queue_rel_ok(p->data_len, rel) || (c = queue_frame_cache(p, rel)) == NULL)
		goto bad;
	g = queue_geom_of(c);
	if (!queue_on_object(&g, rel))
		goto bad;
	return p->base + p->data_off + rel;
bad:
	at_fetch_add_relaxed(&t->ref.ctl->bad, 1);
	return NULL;
}

/* Free the object of a message whose last reference we cleared. */
static void free_value(sheaf_topic_t *t, uint32_t v)
{
	void *obj = obj_of(t, v);

	/* A free refused (freed already: a spoiled log) is counted. */
	if (obj != NULL && sheaf_free_any(t->pool, obj) != 0)
		at_fetch_add_relaxed(&t->ref.ctl->bad, 1);
	topic_wake_pubs(&t->ref);
}

/* topic_clear's hook: the owned caches' tag around a last release. */
static int last_hook(void *arg, uint32_t v, int take)
{
	sheaf_topic_t *t = arg;
	const struct shm_pool *p = t->ref.p;
	uint64_t rel = queue_rel_at(v);

	if (v != 0 && queue_rel_ok(p->data_len, rel))
		return owner_on_topic_last(t->pool, p->base + p->data_off + rel, take);
	return 1;
}

/*
 * The record of @pos holds an older message (word @w): clear what the
 * publisher may (HIST, stale slots' bits, and under DROP every pending
 * subscriber's), counting each drop.  1 when that freed the record.
 */
static int make_room(sheaf_topic_t *t, uint64_t pos, uint64_t w)
{
	struct topic_ref *r = &t->ref;
	int32_t d = tw_tag_diff(tw_tag(w), topic_tag_of(r, pos));
	int64_t lap = (int64_t)(pos >> r->shift) + d;
	uint64_t old, cleared;
	uint32_t v, dropped;
	int rc;

	if ((w & TW_CLAIMED) != 0 || lap < 0)
		return 0;                     /* a publish in flight there */
	old = ((uint64_t)lap << r->shift) | (pos & r->mask);
	rc = topic_clear(r, old, TW_HIST, TOPIC_CLEAR_STALE |
			 (r->policy == TOPIC_POLICY_DROP ? TOPIC_CLEAR_DROP : 0), &v, &cleared,
			 last_hook, t);
	dropped = r->policy == TOPIC_POLICY_DROP ? tw_pend_slots(cleared) & topic_live(r) : 0;
	while (dropped != 0) {
		uint32_t s = (uint32_t)__builtin_ctz(dropped);

		at_fetch_add_relaxed(&r->subs[s].dropped, 1);
		dropped &= dropped - 1;
	}
	if (rc == 2) {
		free_value(t, v);
		return 1;
	}
	return 0;
}

struct pub_wait {
	sheaf_topic_t *t;
	uint64_t pos;
};

/* topic_sleep's second look for a publisher: is the record free now? */
static int retry_room(void *arg)
{
	struct pub_wait *pw = arg;
	struct topic_ref *r = &pw->t->ref;
	uint64_t w = at_load_acquire(&r->recs[pw->pos & r->mask].word);

	return tw_tag_diff(tw_tag(w), topic_tag_of(r, pw->pos)) != -1 ||
	       (w & (TW_CLAIMED | TW_REFS)) == 0 || make_room(pw->t, pw->pos, w);
}

struct queued_arg {
	sheaf_pool_t *pool;
	void *obj;
};

static void queued_hook(void *arg)
{
	struct queued_arg *q = arg;

	owner_on_topic_publish(q->pool, q->obj);
}

int sheaf_topic_publish(sheaf_topic_t *t, void *obj, int timeout_ms)
{
	struct topic_ref *r = &t->ref;
	const struct shm_pool *p = r->p;
	int64_t deadline = 0;
	uint32_t v, cflags = 0, hv;
	uint64_t pos, w, cleared;
	struct queued_arg pw_obj;

	if (unlikely(!topic_ok(t)))
		return -ESTALE;
	v = queue_value_flags(p, (uint64_t)((char *)obj - p->base), &cflags);
	if (unlikely(v == 0))
		return -EINVAL;
	for (;;) {
		struct pub_wait pw;
		int64_t left;

		if (likely(topic_claim(r, t->pool->client, v, &pos, &w) == 0))
			break;
		if (make_room(t, pos, w))
			continue;
		if (timeout_ms == 0)
			return -EAGAIN;
		if (deadline == 0)
			deadline = timeout_ms < 0 ? INT64_MAX
				   : clock_ns() + (int64_t)timeout_ms * 1000000;
		left = deadline - clock_ns();
		if (left <= 0)
			return -ETIMEDOUT;
		if (!topic_ok(t))
			return -ESTALE;
		pw.t = t;
		pw.pos = pos;
		(void)topic_sleep(r, 0, left < TOPIC_SLICE_NS ? left : TOPIC_SLICE_NS, retry_room,
				  &pw);
	}
	/* An owned object is QUEUED before it is visible: a subscriber's
	 * death never finds it tagged as a live publisher's (sheafd would
	 * not free it); a death of ours before the publishing store leaves
	 * the claim, which sheafd undoes, giving the object back to us. */
	pw_obj.pool = t->pool;
	pw_obj.obj = obj;
	w = topic_publish_at(r, pos, v, unlikely(cflags & SHEAF_CACHE_F_OWNED) ? queued_hook : NULL,
			     &pw_obj);
	if (unlikely((w & TW_REFS) == 0)) {
		/* Nobody to read it (no subscriber, no history). */
		at_fetch_add_relaxed(&r->ctl->unread, 1);
		(void)sheaf_free_any(t->pool, obj);
		return 0;
	}
	if (r->history != 0 && pos >= r->history &&
	    topic_clear(r, pos - r->history, TW_HIST, 0, &hv, &cleared, last_hook, t) == 2)
		free_value(t, hv);
	topic_wake_subs(r);
	return 0;
}

sheaf_sub_t *sheaf_topic_subscribe(sheaf_topic_t *t)
{
	sheaf_sub_t *s;
	uint32_t slot, gen;
	uint64_t tail;
	int rc;

	if (t->pool->forked) {
		errno = ECHILD;
		return NULL;
	}
	if (!topic_ok(t)) {
		errno = ESTALE;
		return NULL;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	rc = t->pool->ops->topic_join(t->pool, t->id, t->name, &slot, &gen);
	if (rc != 0) {
		free(s);
		errno = -rc;
		return NULL;
	}
	s->t = t;
	s->slot = slot;
	s->gen = gen;
	s->b = &t->ref.subs[slot];
	/* A publish that saw this slot live may lag the tail hint: start a
	 * log behind it (records not for this slot are stepped over). */
	tail = at_load_relaxed(&t->ref.ctl->tail);
	s->cursor = tail > t->ref.size ? tail - t->ref.size : 0;
	if (t->ref.history != 0)
		(void)topic_adopt_history(&t->ref, slot, s->cursor, tail);
	return s;
}

int sheaf_topic_unsubscribe(sheaf_sub_t *s)
{
	sheaf_topic_t *t = s->t;
	int rc = 0;

	if (t->pool->forked)
		rc = -ECHILD;
	else if (sub_ok(s))
		rc = t->pool->ops->topic_leave(t->pool, t->id, t->name, s->slot);
	free(s);
	return rc;
}

/* One look: 1 with *@m filled (held), 0 nothing. */
static int take_once(sheaf_sub_t *s, struct sheaf_msg *m)
{
	struct topic_ref *r = &s->t->ref;

	for (uint32_t i = 0; i <= r->size; i++) {
		uint32_t v;
		uint64_t pos, cleared;
		void *obj;
		int got = topic_take(r, s->slot, &s->cursor, &v, &pos);

		at_store_relaxed(&s->b->cursor, s->cursor);
		if (!got)
			return 0;
		if (likely((obj = obj_of(s->t, v)) != NULL)) {
			m->obj = obj;
			m->seq = pos;
			at_store_relaxed(&s->b->delivered, ++s->delivered);
			return 1;
		}
		/* A spoiled value: not ours to use; let go of it. */
		if (topic_clear(r, pos, 1ull << s->slot, 0, &v, &cleared, NULL, NULL) == 2)
			topic_wake_pubs(r);
	}
	return 0;
}

static int retry_take(void *arg)
{
	void **a = arg;

	return take_once(a[0], a[1]);
}

int sheaf_topic_take(sheaf_sub_t *s, struct sheaf_msg *m, int timeout_ms)
{
	int64_t deadline;

	if (unlikely(!sub_ok(s)))
		return -ESTALE;
	if (take_once(s, m))
		return 0;
	if (timeout_ms == 0)
		return -EAGAIN;
	deadline = timeout_ms < 0 ? INT64_MAX : clock_ns() + (int64_t)timeout_ms * 1000000;
	for (;;) {
		void *a[2] = { s, m };
		int64_t left = deadline - clock_ns();

		if (!sub_ok(s))
			return -ESTALE;
		if (left <= 0)
			return -ETIMEDOUT;
		at_store_relaxed(&s->b->waits, at_load_relaxed(&s->b->waits) + 1);
		if (topic_sleep(&s->t->ref, 1, left < TOPIC_SLICE_NS ? left : TOPIC_SLICE_NS,
				retry_take, a) != 0)
			return 0;
		if (take_once(s, m))
			return 0;
	}
}

int sheaf_topic_release(sheaf_sub_t *s, const struct sheaf_msg *m)
{
	uint32_t v;
	uint64_t cleared;
	int rc = topic_clear(&s->t->ref, m->seq, 1ull << s->slot, 0, &v, &cleared, last_hook,
			     s->t);

	if (rc == 0)
		return -EALREADY;
	at_store_relaxed(&s->b->released, ++s->released);
	if (rc == 2)
		free_value(s->t, v);
	return 0;
}

int sheaf_topic_stats(sheaf_topic_t *t, struct sheaf_topic_stats *out)
{
	if (!topic_ok(t))
		return -ESTALE;
	memset(out, 0, sizeof(*out));
	out->capacity = t->ref.size;
	out->history = t->ref.history;
	out->policy = t->ref.policy;
	out->subscribers = (uint32_t)__builtin_popcount(topic_live(&t->ref));
	out->published = at_load_relaxed(&t->ref.ctl->published);
	out->unread = at_load_relaxed(&t->ref.ctl->unread);
	out->publish_waits = at_load_relaxed(&t->ref.ctl->pub_waits);
	out->bad = at_load_relaxed(&t->ref.ctl->bad);
	return 0;
}

int sheaf_sub_stats(sheaf_sub_t *s, struct sheaf_sub_stats *out)
{
	struct topic_sub_stats st;

	if (!sub_ok(s))
		return -ESTALE;
	topic_read_sub(&s->t->ref, s->slot, &st);
	memset(out, 0, sizeof(*out));
	out->delivered = st.delivered;
	out->released = st.released;
	out->dropped = st.dropped;
	out->held = st.held;
	out->depth = st.depth;
	out->lag = st.lag;
	return 0;
}
