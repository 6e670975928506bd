/*
 * control.c - live changes to one running process, made by a monitor (salus
 * renice, salus-top's keys): its priority, and that it is being ended (a
 * kill from the tools: it goes first for the GPU, to exit).
 *
 * Divided into: the priority, and ending.
 *
 * The change is a store into the process's slot under the table's lock,
 * where every policy decision reads it (lease.c reads the holder's and the
 * waiters' priorities when it picks): it takes effect at the process's next
 * boundary, or the holder's, whichever decides first.  The slot is named by
 * (slot, generation), so that a process that exited meanwhile, and the one
 * that took its slot, are never changed by mistake.
 */
#include "sched/sched_int.h"

#include <errno.h>

#include "util/util.h"

/* ---- the priority, and ending ------------------------------------------------ */

/* Lock t and find (slot, gen)'s scheduler slot: 0 and *out with the lock
 * held, or -errno with it released (-ESRCH: gone, or not scheduled yet). */
static int lock_slot(shm_table_t *t, int slot, uint32_t gen, sched_slot_t **out)
{
    int rc = shm_lock(t);
    if (rc != 0)
        return rc;
    sched_slot_t *s = sched_slot(t, slot);
    if (!s || shm_slot_gen(t, slot) != gen || !shm_slot_alive(t, slot) ||
        util_load_acquire(&s->magic) != SCHED_SLOT_MAGIC) {
        shm_unlock(t);
        return -ESRCH;
    }
    *out = s;
    return 0;
}

int sched_set_priority_table(shm_table_t *t, int slot, uint32_t gen, int priority)
{
    sched_slot_t *s;
    if (!t || slot < 0 || slot >= SHM_MAX_SLOTS || priority < 0 || priority > 100)
        return -EINVAL;
    int rc = lock_slot(t, slot, gen, &s);
    if (rc != 0)
        return rc;
    util_store_relaxed(&s->priority, priority);
    shm_unlock(t);
    util_info("slot %d: priority set to %d", slot, priority);
    return 0;
}

int sched_set_ending_table(shm_table_t *t, int slot, uint32_t gen)
{
    sched_slot_t *s;
    if (!t || slot < 0 || slot >= SHM_MAX_SLOTS)
        return -EINVAL;
    int rc = lock_slot(t, slot, gen, &s);
    if (rc != 0)
        return rc;
    util_store_relaxed(&s->ending, 1);
    shm_unlock(t);
    util_info("slot %d: ending (the tools sent it SIGTERM): it goes first", slot);
    return 0;
}
