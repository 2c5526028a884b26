/*
 * clients.h - client slots and lane grants.
 *
 * Client slots: one per attached process (struct shm_client, META),
 * claimed at attach and freed once the process's sheaves and lanes were
 * reclaimed; a revoked one (CLIENT_REVOKED) is kept until its process is
 * gone and its ban is over.
 *
 * Lane grants: the table in META (layout.h, lane_grant_t) that says which
 * lanes each client's threads, or the engine's, may use.  The engine
 * grants lanes in blocks (client_lanes_grant: at attach, and when the
 * client asks for more), at most a cap per client and per uid, and takes
 * them back with the client (client_lanes_revoke); nothing a client writes
 * moves a grant, so a client cannot take another's lanes, and every count
 * the engine keeps by client (repair, grace periods, destroy's wait,
 * sheafctl clients) follows the grant, not the lane's SHARED fields.
 *
 * Who may call: the engine's hosting process only (sheafd's registry, or a
 * local pool's process for its one client); clients only read the slots
 * and the grants.  No locks: a slot is claimed by CAS on its state, a
 * grant by CAS on its entry; published by release stores of the marks;
 * callable with any lock held.
 */
#ifndef SHEAF_SHM_ENGINE_CLIENTS_H
#define SHEAF_SHM_ENGINE_CLIENTS_H

#include <stdint.h>
#include "shm/pool.h"

/* Take a free client slot for process @pid; its id, or -EUSERS if none.
 * Wakes the engine's threads, which nap while no client is attached
 * (client_any). */
int client_attach(struct shm_pool *p, uint32_t pid, uint32_t uid, const char *name);

/* Whether any client slot is taken (live, dead or revoked): with none, no
 * one is served, so the engine's threads nap (IDLE_ALONE_NS) instead of
 * beating. */
int client_any(const struct shm_pool *p);

/* Longest nap of an engine thread while no client is attached: bounds a
 * new client's wait when a stray writer (a detached process that kept the
 * mapping) undoes client_attach's wake-up. */
#define IDLE_ALONE_NS 1000000000L

/* Mark a client slot free again (after its sheaves were reclaimed); a
 * revoked slot stays revoked (client_release_revoked frees it). */
void client_detach(struct shm_pool *p, uint32_t client);

/* Mark live client @client revoked at @now (seconds): its slot is not
 * reused until client_release_revoked. */
void client_revoke(struct shm_pool *p, uint32_t client, uint64_t now);

/* Free revoked slot @client (its process is gone, its ban over). */
void client_release_revoked(struct shm_pool *p, uint32_t client);

/* Lanes granted to @owner (a client id or OWNER_ENGINE). */
uint32_t client_lanes_held(const struct shm_pool *p, uint32_t owner);

/* Lanes granted to the live or revoked clients of uid @uid. */
uint32_t client_lanes_held_uid(const struct shm_pool *p, uint32_t uid);

/*
 * Grant up to @want more lanes to @owner: lanes no one holds, the lowest
 * first (never-used ones past lanes_hwm last).  Returns how many it
 * granted (0 when the pool has none left).  The caller applies the caps.
 */
uint32_t client_lanes_grant(struct shm_pool *p, uint32_t owner, uint32_t want);

/* Lanes granted at attach: one (most clients run one thread in the pool;
 * a pool of many single-threaded clients keeps its lanes).  Then, on
 * request, as many again as the client holds, at least LANE_GRANT_BLOCK
 * (few requests for a process of many threads, at most twice the lanes
 * it uses). */
#define LANE_GRANT_FIRST 1u
#define LANE_GRANT_BLOCK 4u
static inline uint32_t client_lanes_want(uint32_t held)
{
	return held > LANE_GRANT_BLOCK ? held : LANE_GRANT_BLOCK;
}

/* Take back every lane granted to @owner (after its repair: the lanes'
 * counters stay, lane_free). */
void client_lanes_revoke(struct shm_pool *p, uint32_t owner);

/* Grants that name no client slot in use (an adopted pool's, whose client
 * was repaired while the grant was being taken back): taken back. */
uint32_t client_lanes_sweep(struct shm_pool *p);

/* One lane granted to @owner and taken by the calling thread on @node, or
 * NULL when none is left: the engine's own threads (OWNER_ENGINE), and
 * tests that act as a client; client_lane_free takes it back. */
struct shm_lane *client_lane_acquire(struct shm_pool *p, uint32_t owner, uint32_t node);
void client_lane_free(struct shm_pool *p, struct shm_lane *l);

#endif
