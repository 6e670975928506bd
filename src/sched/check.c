/*
 * check.c - the scheduler's invariants over a table, as written above
 * sched_slot_t and sched_dev_t (sched_int.h): for the tests, and in a debug
 * build (make DEBUG=1) at every lock and unlock of the table, through ipc's
 * check hook.  A release build calls only the check of one slot's gate,
 * for a process's look at its own slot (drain.c).
 *
 * Divided into: devices; gates; the entry points.  Called with the table
 * locked.  They only read: no repair, no abort, no log; the first violation
 * is described in util_describe's per-thread buffer for the caller to
 * print.  What is checked is what the code keeps true at every unlock;
 * "vclock never decreases" needs a history and is left to the tests of the
 * lease.
 */
#include "sched/sched_int.h"

#include "util/util.h"

static int dev_ready(const sched_dev_t *dev)
{
    return dev && util_load_relaxed(&dev->magic) == SCHED_DEV_MAGIC;
}

static int has_waiters(const sched_dev_t *dev)
{
    return (dev->waiters[0] | dev->waiters[1]) != 0;
}

/* ---- devices -------------------------------------------------------------- */

static const char *check_dev(shm_table_t *t, int d, const sched_dev_t *dev)
{
    uint32_t policy = util_load_relaxed(&dev->policy);
    if (policy >= SCHED_POLICY_COUNT)
        return util_describe("device %d: policy %u is none of the %d policies", d,
                             (unsigned)policy, SCHED_POLICY_COUNT);
    uint64_t lease = util_load_relaxed(&dev->lease);
    if (!(sched_policy_ops(policy)->flags & SCHED_POL_GATED) && (lease != 0 || has_waiters(dev)))
        return util_describe("device %d: policy %s gates nothing, yet its lease is %#llx and "
                             "waiters %#llx %#llx", d, sched_policy_names[policy],
                             (unsigned long long)lease, (unsigned long long)dev->waiters[0],
                             (unsigned long long)dev->waiters[1]);
    if (lease != dev->granted)
        return util_describe("device %d: lease %#llx, but the last grant wrote %#llx (written "
                             "outside a grant)", d, (unsigned long long)lease,
                             (unsigned long long)dev->granted);
    int holder = sched_lease_holder(t, lease);
    for (int s = 0; s < SHM_MAX_SLOTS; s++) {
        if (!((dev->waiters[s >> 6] >> (s & 63)) & 1))
            continue;
        uint32_t gen = dev->wait[s].gen;
        if (s == holder && gen != 0 && gen == shm_slot_gen(t, s))
            return util_describe("device %d: slot %d both holds the lease and waits for it", d, s);
    }
    return NULL;
}

/* ---- gates ------------------------------------------------------------------ */

static const char *const gate_names[] = {
    [SCHED_GATE_OPEN] = "open", [SCHED_GATE_CONTENDED] = "contended",
    [SCHED_GATE_CLOSED] = "closed", [SCHED_GATE_UNREG] = "unregistered",
    [SCHED_GATE_PROBE] = "probe",
};

static const char *check_gate(shm_table_t *t, int slot, const sched_slot_t *s)
{
    uint32_t gate = util_load_relaxed(&s->gate);
    if (gate > SCHED_GATE_PROBE || gate == SCHED_GATE_UNREG)  /* UNREG is process-local */
        return util_describe("slot %d: gate %u is not a gate", slot, (unsigned)gate);
    uint32_t devset = util_load_relaxed(&s->devset);
    if (util_load_relaxed(&s->hold))
        return gate == SCHED_GATE_CLOSED ? NULL :
               util_describe("slot %d: gate %s, but memory holds its launches (it pages "
                             "itself out)", slot, gate_names[gate]);
    int lacks = 0;                    /* some gated device it uses is held by another */
    for (int d = 0; d < SHM_MAX_DEVICES; d++) {
        sched_dev_t *dev = sched_dev(t, d);
        if (!(devset & (1u << d)) || !dev_ready(dev))
            continue;
        unsigned flags = sched_policy_ops(sched_dev_policy(dev))->flags;
        if (!(flags & SCHED_POL_GATED))
            continue;
        int holder = sched_lease_holder(t, util_load_relaxed(&dev->lease));
        lacks |= holder != slot;
        if (holder != slot && gate != SCHED_GATE_CLOSED)
            return util_describe("slot %d: gate %s, but device %d, which it uses, is held by "
                                 "slot %d", slot, gate_names[gate], d, holder);
        if (holder == slot && gate == SCHED_GATE_OPEN && (flags & SCHED_POL_SHARES) &&
            has_waiters(dev))
            return util_describe("slot %d: gate open, but others wait for device %d, which it "
                                 "holds", slot, d);
    }
    if (gate == SCHED_GATE_CLOSED && !lacks)
        return util_describe("slot %d: gate closed, yet it holds every gated device it uses "
                             "(devset %#x)", slot, (unsigned)devset);
    return NULL;
}

/* ---- the entry points ------------------------------------------------------- */

const char *sched_check_locked(shm_table_t *t)
{
    const char *bad;
    for (int d = 0; d < SHM_MAX_DEVICES; d++) {
        sched_dev_t *dev = sched_dev(t, d);
        if (dev_ready(dev) && (bad = check_dev(t, d, dev)) != NULL)
            return bad;
    }
    for (int s = 0; s < SHM_MAX_SLOTS; s++) {
        sched_slot_t *slot = sched_slot(t, s);
        if (!slot || shm_slot_gen(t, s) == 0 ||
            util_load_relaxed(&slot->magic) != SCHED_SLOT_MAGIC)
            continue;
        if ((bad = check_gate(t, s, slot)) != NULL)
            return bad;
    }
    return NULL;
}

const char *sched_check_slot_locked(shm_table_t *t, int slot)
{
    sched_slot_t *s = sched_slot(t, slot);
    return s ? check_gate(t, slot, s) : NULL;
}

const char *sched_check_hook(shm_table_t *t, void *ctx)
{
    (void)ctx;
    return sched_check_locked(t);
}
