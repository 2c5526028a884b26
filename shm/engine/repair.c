/*
 * repair.c - putting things back after a death (engine.h):
 * engine_reclaim_client after a client process died, engine_adopt after
 * the previous engine (sheafd) died and a new one maps its region.
 *
 * Both do the same core (take_back_sheaves, client_lanes_revoke): roll back the
 * dead owner's ring operations, collect every sheaf it still owned, return
 * their objects to the slabs (each validated, since the dead owner wrote
 * them) and the sheaves to the depot, and take back its lane grants.  They differ in
 * the dead owner (a client id / OWNER_ENGINE), the owner id the repair acts
 * as (OWNER_ENGINE / OWNER_NONE, no engine existing yet), its intent record
 * and id buffer, and whether the flushes are counted.
 *
 * Adoption validates the region first (bounds.h): a corrupt cache is
 * quarantined, never served; the rest is bounded where it is read.
 *
 * Who may call: the hosting process, only once the dead owner's process is
 * gone.  engine_reclaim_client takes e->ctl_lock (and, when the last client
 * is gone, reconciles the counters: engine_reconcile_counts); engine_adopt
 * runs before engine_init, with no engine thread at all.
 */
#include <errno.h>
#include <stdlib.h>
#include "shm/barn.h"
#include "shm/lanes.h"
#include "shm/names.h"
#include "shm/engine/adopt_vet.h"
#include "shm/engine/clients.h"
#include "shm/engine/grace.h"
#include "shm/engine/internal.h"
#include "shm/engine/names.h"
#include "shm/engine/owner.h"
#include "shm/engine/slab.h"

/* A sheaf the repair empties: its cache (read once) and id. */
struct flush_ref {
	uint32_t cache;
	uint32_t id;
};

static int flush_ref_cmp(const void *a, const void *b)
{
	const struct flush_ref *x = a, *y = b;

	if (x->cache != y->cache)
		return x->cache < y->cache ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

#ifdef SHEAF_TEST_HOOKS
void (*repair_flushed_hook)(struct shm_pool *p, uint32_t cache);
#endif

/* After objects of @cache went back to the slabs: where a worker's refill
 * may take them (test_vet runs one there). */
static void repair_flushed(struct shm_pool *p, uint32_t cache)
{
#ifdef SHEAF_TEST_HOOKS
	if (repair_flushed_hook != NULL)
		repair_flushed_hook(p, cache);
#else
	(void)p;
	(void)cache;
#endif
}

/*
 * The objects of the @n sheaves @r (owned by the repair now) go back to
 * the slabs of their cache if it is still live, one batch per cache
 * (slab_free_objs_once: each object once, each validated; a copy in two
 * of the dead owner's sheaves, or one already back, is refused and
 * counted in flush_invalid, never freed twice).  Without memory for a
 * batch, sheaf by sheaf: a copy in two sheaves is then refused only if no
 * refill took the first between the two.  @count: count each flush in
 * sheaf_flush of the sheaf's node.  Sorts @r.
 */
static void sheaves_to_slabs(struct shm_pool *p, struct flush_ref *r, uint32_t n, int count)
{
	if (n == 0)
		return;
	qsort(r, n, sizeof(*r), flush_ref_cmp);
	for (uint32_t i = 0, j; i < n; i = j) {
		uint32_t c = r[i].cache, m = 0, bad;
		uint64_t *objs;

		for (j = i; j < n && r[j].cache == c; j++)
			;
		/* Acquire: pairs with the release stores of the state in
		 * do_cache_install and engine_cache_destroy (engine/cache.c);
		 * a quarantined cache (CACHE_BROKEN) is not LIVE: its
		 * objects stay. */
		if (c >= p->max_caches || at_load_acquire(&p->caches[c].state) != CACHE_LIVE)
			continue;
		objs = malloc((size_t)(j - i) * SHEAF_CAP_MAX * sizeof(*objs));
		for (uint32_t k = i; k < j; k++) {
			const struct shm_sheaf *sh = pool_sheaf(p, r[k].id);
			uint32_t got;

			if (objs != NULL) {
				got = ut_sheaf_objs(sh, objs + m);
				m += got;
			} else {
				got = ut_sheaf_size(sh);
				if (got) {
					engine_sheaf_to_slabs(p, c, sh);
					repair_flushed(p, c);
				}
			}
			if (got && count)
				engine_stat_add(p, c, ut_sheaf_node(p, sh), ST_SHEAF_FLUSH, 1);
		}
		if (objs == NULL)
			continue;
		bad = slab_free_objs_once(p, c, objs, m);
		if (bad)
			untrusted_note(UT_OBJECT, bad);
		free(objs);
		repair_flushed(p, c);
	}
}

/*
 * Deferred-free counts of dead client @dead (client/deferred.c, handover):
 * complete each of its lanes' armed counts (absolute values: doing it
 * twice is doing it once).  The stages stay armed until rcu_counts_clear,
 * so that take_back_sheaves sees which sheaf each one covered.
 */
static void rcu_counts_complete(struct shm_pool *p, uint32_t dead)
{
	uint32_t caches = pool_caches_used(p);

	for (uint32_t l = 0, used = pool_lanes_used(p); l < used; l++) {
		struct shm_lane *ln = &p->lanes[l];
		uint32_t c;

		if (pool_lane_holder(p, ln) != dead || !pool_lane_ready(ln))
			continue;
		c = at_load_acquire(&ln->rcu_fold_cache);
		if (c != 0 && c <= caches)
			at_store_relaxed(&lane_stat(p, ln, c - 1)[ST_FREE_RCU_SHEAF],
					 at_load_relaxed(&ln->rcu_fold_val));
	}
}

/* Whether an armed count of a lane of @dead covers sheaf @s. */
static int rcu_count_covers(const struct shm_pool *p, uint32_t dead, uint32_t s)
{
	for (uint32_t l = 0, used = pool_lanes_used(p); l < used; l++) {
		struct shm_lane *ln = &p->lanes[l];

		if (pool_lane_holder(p, ln) == dead && pool_lane_ready(ln) &&
		    at_load_acquire(&ln->rcu_fold_cache) != 0 &&
		    at_load_relaxed(&ln->rcu_fold_sheaf) == s)
			return 1;
	}
	return 0;
}

static void rcu_counts_clear(struct shm_pool *p, uint32_t dead)
{
	for (uint32_t l = 0, used = pool_lanes_used(p); l < used; l++)
		if (pool_lane_holder(p, &p->lanes[l]) == dead && pool_lane_ready(&p->lanes[l]))
			at_store_release(&p->lanes[l].rcu_fold_cache, 0);
}

/*
 * Roll back the ring operations of dead owner @dead (the intents of its
 * lanes), collect every sheaf it still owns into @ids (room for every sheaf
 * of the pool) and return each to the pool as @me, with intent @in: its
 * objects to the slabs (sheaves_to_slabs, counted when @count), the sheaf to
 * the depot; a deferred sheaf back to the rcu ring, its objects counted in
 * free_rcu_sheaf on lane @book unless an armed count of the dead thread
 * covers them (@book NULL: the engine's own sheaves, counted already).
 * Returns the number of sheaves returned.
 */
static uint32_t take_back_sheaves(struct shm_pool *p, uint32_t dead, uint32_t me,
				  struct ring_intent *in, uint32_t *ids, int count,
				  struct shm_lane *book)
{
	struct flush_ref *flush;
	uint32_t n, nflush = 0;

	for (uint32_t l = 0, used = pool_lanes_used(p); l < used; l++) {
		struct shm_lane *ln = &p->lanes[l];
		if (pool_lane_holder(p, ln) == dead && pool_lane_ready(ln))
			ring_reclaim(pool_ref_of, p, p->owners, p->sheaf_count,
				     &ln->intent, 1, dead, me, ids, 0);
	}
	n = ring_reclaim(pool_ref_of, p, p->owners, p->sheaf_count, NULL, 0,
			 dead, me, ids, p->sheaf_count);
	flush = malloc((size_t)n * sizeof(*flush));
	for (uint32_t k = 0; k < n; k++) {
		if (dead < p->max_clients)   /* a client's: its tags first (owner.h) */
			owner_sheaf_untag(p, pool_sheaf(p, ids[k]), dead);
		/* Deferred frees never reach the slabs before their grace
		 * period: back to the rcu ring, stamped now (grace.h). */
		struct shm_sheaf *sh = pool_sheaf(p, ids[k]);
		uint32_t size = ut_sheaf_size(sh), c = ut_sheaf_cache(p, sh);

		if (grace_requeue(p, ids[k], me, in)) {
			if (book != NULL && c < p->max_caches && !rcu_count_covers(p, dead, ids[k]))
				at_counter_add(&lane_stat(p, book, c)[ST_FREE_RCU_SHEAF], size);
			continue;
		}
		if (flush != NULL) {
			flush[nflush].cache = c;
			flush[nflush++].id = ids[k];
			continue;
		}
		sheaves_to_slabs(p, &(struct flush_ref){ c, ids[k] }, 1, count);
		depot_put(p, ids[k], me, in);
	}
	/* All objects at once, then the sheaves: a sheaf in the depot can be
	 * refilled before the next one's objects are back. */
	sheaves_to_slabs(p, flush, nflush, count);
	for (uint32_t k = 0; k < nflush; k++)
		depot_put(p, flush[k].id, me, in);
	free(flush);
	return n;
}

/*
 * The objects of owned caches that dead @client still held (owner.h), once
 * its sheaves are back: freed, booked as slow-path frees on the control
 * lane so that the cache's counted objects in use fall with them, or kept;
 * both counted in the cache's owner_freed / owner_kept.  Caller holds
 * ctl_lock, and the client's slot is not free yet (its id is not reused
 * meanwhile).
 */
static void reclaim_owned(struct engine *e, uint32_t client)
{
	struct shm_pool *p = e->pool;
	uint64_t freed[SHEAF_MAX_CACHES], kept[SHEAF_MAX_CACHES];

	if (owner_reclaim(p, client, freed, kept) != 0)
		e->owner_enomem++;
	for (uint32_t c = 0, used = pool_caches_used(p); c < used; c++) {
		if (freed[c]) {
			at_counter_add(&lane_stat(p, e->ctl_lane, c)[ST_FREE_SLOWPATH], freed[c]);
			at_counter_add(&p->caches[c].owner_freed, freed[c]);
		}
		if (kept[c])
			at_counter_add(&p->caches[c].owner_kept, kept[c]);
		e->owner_freed += freed[c];
		e->owner_kept += kept[c];
	}
}

/* engine_reclaim_client, and (@revoke) engine_revoke_client. */
static int reclaim(struct engine *e, uint32_t client, int revoke, uint64_t now)
{
	struct shm_pool *p = e->pool;
	uint32_t n;

	lock_acquire(&e->ctl_lock, LOCK_RANK_ENGINE_CTL);
	/* Count what its threads did on their main sheaves before those go. */
	for (uint32_t l = 0, used = pool_lanes_used(p); l < used; l++)
		if (pool_lane_holder(p, &p->lanes[l]) == client && pool_lane_ready(&p->lanes[l]))
			lane_live_repair(p, &p->lanes[l]);
	rcu_counts_complete(p, client);
	n = take_back_sheaves(p, client, OWNER_ENGINE, &e->ctl_lane->intent, e->ids, 1,
			      e->ctl_lane);
	rcu_counts_clear(p, client);
	engine_topics_reclaim(e, client);    /* before: it retags what it keeps */
	/* Its half-done queue operations first: what they leave the dead
	 * client's is freed or kept with the rest. */
	(void)owner_queue_reclaim(p, client);
	reclaim_owned(e, client);
	/* The grants go with the lanes' state: a thread of a revoked
	 * client still running has nothing the engine counts by it. */
	client_lanes_revoke(p, client);
	if (revoke)
		client_revoke(p, client, now);
	else
		client_detach(p, client);
	lock_release(&e->ctl_lock);
	/* Nobody left to be half-way through a count: the walk is the truth. */
	if (!client_any(p))
		engine_reconcile_counts(e);
	return (int)n;
}

int engine_reclaim_client(struct engine *e, uint32_t client)
{
	return reclaim(e, client, 0, 0);
}

int engine_revoke_client(struct engine *e, uint32_t client, uint64_t now)
{
	return reclaim(e, client, 1, now);
}

int engine_adopt(struct shm_pool *p)
{
	const uint32_t me = OWNER_NONE;          /* the recovery's owner id */
	struct ring_intent in = { 0 };
	uint32_t *ids = calloc(p->sheaf_count, sizeof(uint32_t));
	uint32_t n;

	if (ids == NULL)
		return -ENOMEM;
	engine_caches_revive(p);         /* before the rebuild skips them */
	/* Validate before serving (bounds.h): bad cache descriptors are
	 * quarantined before slab_rebuild walks them (an obj_size of 0 would
	 * divide by zero, a huge objs_per_slab loop for ever), and owner
	 * entries or lanes that name nobody are taken back. */
	adopt_vet_quarantine(p);
	slab_rebuild(p);
	names_adopt(p);                  /* after the bitmaps are trusted */
	engine_queues_adopt(p);
	engine_topics_adopt(p);
	adopt_vet_shared(p, OWNER_ENGINE);
	owner_adopt(p);                  /* claims of a repair that died with it */
	/* The sheaves the dead engine was filling or flushing; their flushes
	 * are not counted (the counters are as slab_rebuild left them). */
	n = take_back_sheaves(p, OWNER_ENGINE, me, &in, ids, 0, NULL);
	client_lanes_revoke(p, OWNER_ENGINE);
	/* A grant whose client slot is free (a reclaim that died with its
	 * engine between the two): taken back. */
	client_lanes_sweep(p);
	free(ids);
	return (int)n;
}
