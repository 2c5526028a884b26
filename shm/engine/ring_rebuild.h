/*
 * ring_rebuild.h - finding a spoiled ring (one whose client-writable words
 * no longer let it work) and rebuilding it from the owner table: the
 * engine's node workers verify the depot, the rcu ring and every live barn
 * ring in full on a rotation and on symptoms; a ring found spoiled is reset
 * and its sheaves claimed and put back (the rcu ring's held for a grace
 * period past the claim, grace.h); orphaned sheaves go back to the depot.
 *
 * Who may call: the engine only: ring_rebuild_init/fini from engine_init
 * and engine_fini, ring_rebuild_glance, ring_rebuild_verify and
 * ring_rebuild_symptom from the node workers (engine/worker.c) with no
 * lock held, ring_rebuild_reset from the fuzzer (tests/fuzz/fuzz_shm.c)
 * between inputs.  Looks and rebuilds of all workers are serialised by a
 * private mutex (try-lock: a worker never waits for another's rebuild).
 */
#ifndef SHEAF_SHM_ENGINE_RING_REBUILD_H
#define SHEAF_SHM_ENGINE_RING_REBUILD_H

#include <stdint.h>
#include "shm/ring.h"

struct engine;

/*
 * A worker glances at a ring's positions each pass (O(1)) and verifies
 * every ring in full when a look is due (ring_rebuild.c); a ring found
 * spoiled is rebuilt from the owner table (its sheaves claimed and put
 * back, and for the depot the orphaned sheaves too).  Call with no lock
 * held.  ring_rebuild_init: 0 or -1 (no memory).
 */
int ring_rebuild_init(struct engine *e);
void ring_rebuild_fini(struct engine *e);
/* ring_rebuild_glance: 1 when ring @id's positions are impossible and it
 * was not rebuilt now (rate limit, another worker's rebuild): stock nothing
 * through it this pass (a put into it "succeeds" while its count stays 0,
 * and a worker refilled it pass after pass, draining the depot into it). */
int ring_rebuild_glance(struct engine *e, uint32_t id, struct ring_intent *in);
/* ring_rebuild_verify: a look at every ring when one is due (every 250 ms;
 * 50 ms after the last on a symptom or a suspicion), rebuilding what two
 * looks found spoiled.  Returns the ns until the next look is due (for the
 * worker's sleep), or -1 when there is no rebuild state. */
int64_t ring_rebuild_verify(struct engine *e, struct ring_intent *in);
/* ring_rebuild_symptom: a worker saw what a spoiled ring causes (no empty
 * sheaf for a refill, a refill's put refused):
 * the next look comes sooner. */
void ring_rebuild_symptom(struct engine *e);

/* Forget the spoiled-ring vets' state (rate limits and suspicions): for the fuzzer, which starts each input from one snapshot. */
void ring_rebuild_reset(struct engine *e);

#endif
