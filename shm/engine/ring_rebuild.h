/*
 * ring_rebuild.h - finding a spoiled ring (one whose client-writable words
 * no longer let it work) and rebuilding it from the owner table: the
 * engine's node workers vet the rings they stock; a ring found spoiled is
 * reset and its sheaves claimed and put back.
 *
 * Who may call: the engine only: ring_rebuild_init/fini from engine_init
 * and engine_fini, ring_rebuild_glance and ring_rebuild_suspect from the
 * node workers (engine/worker.c) with no lock held, ring_rebuild_reset
 * from the fuzzer (tests/fuzz/fuzz_shm.c) between inputs.  Vets and
 * rebuilds of all workers are serialised by a private mutex (try-lock: a
 * worker never waits for another's rebuild).
 */
#ifndef SHEAF_SHM_ENGINE_RING_REBUILD_H
#define SHEAF_SHM_ENGINE_RING_REBUILD_H

#include <stdint.h>
#include "shm/ring.h"

struct engine;

/*
 * A worker glances at a ring's positions each pass (O(1)) and suspects a
 * ring on a symptom (no empty sheaf found, a put or get that failed,
 * clients waiting); a ring found spoiled is rebuilt from the owner table
 * (its sheaves claimed and put back, and for the depot the orphaned
 * sheaves too).  Call with no lock held.  ring_rebuild_init: 0 or -1 (no
 * memory).
 */
int ring_rebuild_init(struct engine *e);
void ring_rebuild_fini(struct engine *e);
/* ring_rebuild_glance: 1 when ring @id's positions are impossible and it
 * was not rebuilt now (rate limit, another worker's rebuild): stock nothing
 * through it this pass (a put into it "succeeds" while its count stays 0,
 * and a worker refilled it pass after pass, draining the depot into it). */
int ring_rebuild_glance(struct engine *e, uint32_t id, struct ring_intent *in);
void ring_rebuild_suspect(struct engine *e, uint32_t id, struct ring_intent *in);

/* Forget the spoiled-ring vets' state (rate limits and suspicions): for the fuzzer, which starts each input from one snapshot. */
void ring_rebuild_reset(struct engine *e);

#endif
