/*
 * topic.h - topics: one pool object published to every subscriber,
 * zero-copy (docs/design.md, "Topics").  The descriptor (struct shm_topic:
 * name, capacity, history, policy, subscriber slots, the live mask) is
 * engine-owned (META; engine/topic.c creates, destroys, joins, leaves and
 * repairs); the log of message records, the tail hint, the wait words and
 * the per-subscriber counters are client-writable (struct shm_topic_ctl,
 * its struct shm_topic_sub blocks and struct shm_topic_rec records).
 *
 * A record's word (every change a CAS of the whole word):
 *   bits 0-15   REF(i): subscriber slot i references the message
 *   bit 16      HIST: the history references it
 *   bits 17-32  PEND(i): slot i has not taken it yet
 *   bit 33      CLAIMED: a publish is in flight; bits 0-12 hold the
 *               publisher's client id + 1, bits 13-32 the low 20 bits of
 *               the value it publishes (a dead publisher's repair tells
 *               its value from the last lap's)
 *   bits 34-63  the lap tag: (position >> log2(capacity)) + 1, mod 2^30
 * Whoever clears the last of REF|HIST frees the object (exactly once).
 *
 * Who may call: any process of the pool holding a struct topic_ref
 * (clients: client/topic.c; the engine: engine/topic.c, which treats every
 * shared word as untrusted).  No locks.  Every loop is bounded.
 */
#ifndef SHEAF_SHM_TOPIC_H
#define SHEAF_SHM_TOPIC_H

#include <stdint.h>
#include "pool.h"

#define TOPIC_CAP_MIN       2u
#define TOPIC_CAP_MAX       (1u << 20)
#define TOPIC_CAP_DEFAULT   1024u

/* struct shm_topic.policy (sheaf.h SHEAF_TOPIC_BLOCK, SHEAF_TOPIC_DROP). */
#define TOPIC_POLICY_BLOCK  0u
#define TOPIC_POLICY_DROP   1u

#define TW_REF_MASK         0xffffull
#define TW_HIST             (1ull << 16)
#define TW_PEND_SHIFT       17
#define TW_PEND_MASK        (0xffffull << TW_PEND_SHIFT)
#define TW_CLAIMED          (1ull << 33)
#define TW_TAG_SHIFT        34
#define TW_TAG_MASK         0x3fffffffu
#define TW_REFS             (TW_REF_MASK | TW_HIST)
#define TW_CLAIM_ID         0x1fffull
#define TW_CLAIM_V_SHIFT    13
#define TW_CLAIM_V_MASK     0xfffffu

/* The low bits of a CLAIMED word: client id + 1 and the value's low bits. */
static inline uint64_t tw_claim(uint32_t client, uint32_t v)
{
	return ((uint64_t)(client + 1u) & TW_CLAIM_ID) |
	       (uint64_t)(v & TW_CLAIM_V_MASK) << TW_CLAIM_V_SHIFT;
}

_Static_assert(TOPIC_SUBS_MAX == 16, "the word has 16 subscriber bits");

/* One process's view of one topic, from the descriptor (trusted values). */
struct topic_ref {
	struct shm_topic_ctl *ctl;
	struct shm_topic_sub *subs;
	struct shm_topic_rec *recs;
	struct shm_topic *td;
	uint64_t mask;               /* capacity - 1 */
	uint32_t size;               /* capacity */
	uint32_t shift;              /* log2(capacity) */
	uint32_t history;
	uint32_t policy;
	const struct shm_pool *p;
};

static inline uint64_t topic_bytes(uint32_t capacity)
{
	return TOPIC_RECS_OFF + (uint64_t)capacity * sizeof(struct shm_topic_rec);
}

static inline struct topic_ref topic_ref_of(const struct shm_pool *p, struct shm_topic *td)
{
	struct topic_ref t;

	t.ctl = (struct shm_topic_ctl *)(p->base + td->off);
	t.subs = (struct shm_topic_sub *)(p->base + td->off + TOPIC_SUBS_OFF);
	t.recs = (struct shm_topic_rec *)(p->base + td->off + TOPIC_RECS_OFF);
	t.td = td;
	t.size = td->capacity;
	t.mask = td->capacity - 1u;
	t.shift = (uint32_t)__builtin_ctz(td->capacity);
	t.history = td->history;
	t.policy = td->policy;
	t.p = p;
	return t;
}

static inline uint32_t tw_tag(uint64_t w)
{
	return (uint32_t)(w >> TW_TAG_SHIFT);
}

static inline uint32_t topic_tag_of(const struct topic_ref *t, uint64_t pos)
{
	return (uint32_t)((pos >> t->shift) + 1u) & TW_TAG_MASK;
}

static inline uint64_t tw_make(uint32_t tag, uint64_t bits)
{
	return (uint64_t)(tag & TW_TAG_MASK) << TW_TAG_SHIFT | bits;
}

/* Tag @a minus tag @b, as a signed lap count (30-bit wrap). */
static inline int32_t tw_tag_diff(uint32_t a, uint32_t b)
{
	uint32_t d = (a - b) & TW_TAG_MASK;

	return (d & (1u << 29)) ? (int32_t)(d | ~TW_TAG_MASK) : (int32_t)d;
}

/* REF(i) | PEND(i) of every slot in @slots (a 16-bit mask). */
static inline uint64_t tw_slot_bits(uint32_t slots)
{
	return (uint64_t)(slots & 0xffffu) | (uint64_t)(slots & 0xffffu) << TW_PEND_SHIFT;
}

/* The slots among @pend whose PEND bit is set in @w. */
static inline uint32_t tw_pend_slots(uint64_t w)
{
	return (uint32_t)((w & TW_PEND_MASK) >> TW_PEND_SHIFT);
}

/* The joined slots (the engine's release store; acquire pairs). */
static inline uint32_t topic_live(const struct topic_ref *t)
{
	return at_load_acquire(&t->td->live) & 0xffffu;
}

/*
 * Claim the record of the next position for a publish of value @v by
 * client id @client: 0 with *@pos (the record is CLAIMED by us), or
 * -EAGAIN: the record of *@pos still holds an older message (its word in
 * *@w): full.
 */
int topic_claim(const struct topic_ref *t, uint32_t client, uint32_t v, uint64_t *pos,
		uint64_t *w);

/* Publish the claimed record of @pos with object value @v to the slots
 * joined now (live, loaded after the claim) and the history; @hook (may
 * be NULL) runs after the value's store and before the publishing one
 * when someone will read the message (an owned object's tag goes QUEUED
 * there).  Returns the word stored
 * (REF|HIST 0: nobody reads it, the caller frees the object). */
uint64_t topic_publish_at(const struct topic_ref *t, uint64_t pos, uint32_t v,
			  void (*hook)(void *), void *arg);

/*
 * Clear @bits of the word of message @pos (only while the record holds
 * that message, published), retrying while it changes; with
 * TOPIC_CLEAR_STALE also the bits of slots not joined (live loaded after
 * each load of the word: a joined slot's bits are never taken for stale),
 * with TOPIC_CLEAR_DROP also REF|PEND of every slot still pending in the
 * word as loaded (a message taken meanwhile is held: not dropped).
 * Returns 0: nothing cleared (or no such message); 1: cleared, references
 * remain; 2: cleared the last reference: *@v is the object's value, the
 * caller frees it.  *@cleared gets the bits cleared.  @hook (may be NULL)
 * is called with (value, 1) before a CAS that would clear the last
 * reference, and with (value, 0) when such a CAS then failed and the next
 * try would not: the owned caches' tag hand-over (client/topic.c).  A
 * hook that returns 0 to (value, 1) (another process is between its own
 * take and CAS) makes the CAS wait: the word is read again after a
 * yield, and after TOPIC_TAKE_WAIT_NS the hook is called with (value, 2),
 * which takes the tag whoever has it.
 */
#define TOPIC_CLEAR_STALE   0x1u
#define TOPIC_CLEAR_DROP    0x2u
#define TOPIC_TAKE_WAIT_NS  (100ll * 1000 * 1000)
typedef int (*topic_last_hook)(void *arg, uint32_t v, int take);
int topic_clear(const struct topic_ref *t, uint64_t pos, uint64_t bits, unsigned flags,
		uint32_t *v, uint64_t *cleared, topic_last_hook hook, void *arg);

/*
 * Take the next message for slot @s from *@cursor: 1 with its value in
 * *@v and position in *@pos (the message is held: REF(s) set, PEND(s)
 * clear), or 0 (nothing yet).  *@cursor moves past what it skipped.
 */
int topic_take(const struct topic_ref *t, uint32_t s, uint64_t *cursor, uint32_t *v,
	       uint64_t *pos);

/* A new subscriber's history: REF|PEND of slot @s set on every message of
 * [@from, @to) the history still holds.  Returns how many. */
uint32_t topic_adopt_history(const struct topic_ref *t, uint32_t s, uint64_t from, uint64_t to);

/* Wake sleeping subscribers (after a publish) or publishers (after a
 * release freed a record). */
void topic_wake_subs(const struct topic_ref *t);
void topic_wake_pubs(const struct topic_ref *t);
/* Sleep (at most @slice_ns) as a subscriber (@sub) or a publisher, unless
 * @retry, called after announcing the sleep, returns non-zero. */
typedef int (*topic_retry_fn)(void *arg);
int topic_sleep(const struct topic_ref *t, int sub, int64_t slice_ns, topic_retry_fn retry,
		void *arg);

/* The numbers of one subscriber slot, read once each (untrusted). */
struct topic_sub_stats {
	uint64_t delivered, released, dropped, waits, held, depth, lag;
};
void topic_read_sub(const struct topic_ref *t, uint32_t s, struct topic_sub_stats *st);

/* Check a create request alone (pure): 0 or -EINVAL with @err. */
int topic_params_check(const char *name, uint32_t capacity, uint32_t history,
		       uint32_t policy, char *err, size_t errlen);

/* Capacity @cap rounded up to a power of two (0: TOPIC_CAP_DEFAULT). */
uint32_t topic_capacity(uint32_t cap);

/* Descriptor of live topic @name, or -ENOENT.  Safe from any process. */
int pool_topic_find(const struct shm_pool *p, const char *name);

#endif
