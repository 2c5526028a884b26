/*
 * clients.h - client slots: one per attached process (struct shm_client,
 * engine-owned part of the region), claimed at attach and freed once the
 * process's sheaves and lanes were reclaimed.
 *
 * Who may call: the engine's hosting process only (sheafd's registry, or a
 * local pool's process for its one client); clients only read the slots.
 * No locks: a slot is claimed by CAS on its state, published by the
 * release store of clients_hwm; callable with any lock held.
 */
#ifndef SHEAF_SHM_ENGINE_CLIENTS_H
#define SHEAF_SHM_ENGINE_CLIENTS_H

#include <stdint.h>
#include "shm/pool.h"

/* Take a free client slot for process @pid; its id, or -EUSERS if none. */
int client_attach(struct shm_pool *p, uint32_t pid, uint32_t uid, const char *name);

/* Mark a client slot free again (after its sheaves were reclaimed). */
void client_detach(struct shm_pool *p, uint32_t client);

#endif
