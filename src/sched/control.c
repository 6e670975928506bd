/*
 * control.c - live changes made by a monitor: to one running process (salus
 * renice, salus-top's keys: its priority, and that it is being ended, a
 * kill from the tools: it goes first for the GPU, to exit), and to a
 * running table's policy (salus policy).
 *
 * Divided into: the priority, and ending; a running table's policy.
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
#include <string.h>

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

/* ---- a running table's policy ---------------------------------------------------
 * Set under the lock; a policy that gates nothing frees the lease and wakes
 * every waiter (all run), and every user's gate is recomputed. */

static int woken_bit(const uint64_t *set, int s)
{
    return (int)((set[s >> 6] >> (s & 63)) & 1);
}

int sched_set_policy_table(shm_table_t *t, int device, sched_policy_t policy, int quantum_ms)
{
    if (!t || !sched_dev(t, device) || (unsigned)policy >= SCHED_POLICY_COUNT ||
        quantum_ms > 3600000)
        return -EINVAL;
    int rc = shm_lock(t);
    if (rc != 0)
        return rc;
    sched_dev_t *dev = sched_dev_ready(t, device);
    if (!dev) {
        shm_unlock(t);
        return -ENODEV;
    }
    uint64_t woken[SCHED_WAIT_WORDS];
    memcpy(woken, dev->waiters, sizeof woken);
    util_store_relaxed(&dev->policy, (uint32_t)policy);
    if (quantum_ms >= 0)
        dev->quantum_ms = (uint32_t)quantum_ms;
    if (!(sched_policy_ops(policy)->flags & SCHED_POL_GATED)) {
        sched_grant_locked(t, device, SCHED_NO_SLOT, sched_now(), 0);
        memset(dev->waiters, 0, sizeof dev->waiters);   /* all run: wake them all */
    } else {
        memset(woken, 0, sizeof woken);
    }
    sched_gate_update_users_locked(t, device);
    for (int s = 0; s < SHM_MAX_SLOTS; s++)
        if (woken_bit(woken, s) && sched_slot(t, s) &&
            util_load_relaxed(&sched_slot(t, s)->magic) == SCHED_SLOT_MAGIC)
            util_add_release(&sched_slot(t, s)->grant, 1);
    shm_unlock(t);
    for (int s = 0; s < SHM_MAX_SLOTS; s++)
        if (woken_bit(woken, s))
            sched_wake(t, s);
    util_info("device %d: policy set to %s", device, sched_policy_names[policy]);
    return 0;
}

int sched_set_policy(int device, sched_policy_t policy, int quantum_ms)
{
    shm_table_t *t = shm_process_table();
    return t ? sched_set_policy_table(t, device, policy, quantum_ms) : -ENOENT;
}
