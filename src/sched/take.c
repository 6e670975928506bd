/*
 * take.c - what a waiter takes from a holder that is not running: one
 * stopped (a signal, a debugger), one idle, one at rest in a host phase.
 * Each ends the holder's tenure where its GPU work ended, so that what
 * followed is neither charged nor counted as held, and grants by policy.
 *
 * Locking: every function runs under shm_lock (lease.c's rules).
 */
#include "sched/sched_int.h"

/* The current tenure of d ends at `from` (<= now), not now: what follows
 * is no GPU time of the holder's (a stop, an idle spell) and is neither
 * charged to its virtual time nor counted as held. */
static void tenure_ends_at_locked(sched_dev_t *dev, uint64_t from, uint64_t now)
{
    if (from > dev->since_ns)
        dev->since_ns += now - from;
    else
        dev->since_ns = now;
}

int sched_take_from_stopped_locked(shm_table_t *t, int d, uint64_t stopped_ns, uint64_t now)
{
    sched_dev_t *dev = sched_dev(t, d);
    int h = sched_lease_holder(t, dev->lease);
    if (h < 0 || stopped_ns > now)
        return SCHED_NO_SLOT;
    __atomic_store_n(&sched_slot(t, h)->stopped_ns, stopped_ns ? stopped_ns : 1,
                     __ATOMIC_RELAXED);
    tenure_ends_at_locked(dev, stopped_ns, now);
    return sched_grant_pick_locked(t, d, now, 0);
}

/* An idle holder (no GPU work since idle_ns: a waiter's look, or its last
 * boundary when at rest) loses d to the policy's pick, charged up to
 * idle_ns only.  Charged to now, a job that held the GPU idle (a Python
 * process waiting for its input, a barrier) until a waiter took it came
 * back with seconds of virtual time over its peer: fair then ran the peer
 * alone to the end, however long, as if that idle time had been its
 * share.  Returns the grantee. */
int sched_take_from_idle_locked(shm_table_t *t, int d, uint64_t idle_ns, uint64_t now)
{
    sched_dev_t *dev = sched_dev(t, d);
    if (sched_lease_holder(t, dev->lease) >= 0 && idle_ns && idle_ns <= now)
        tenure_ends_at_locked(dev, idle_ns, now);
    return sched_grant_pick_locked(t, d, now, 0);
}

void sched_unmark_stopped_locked(shm_table_t *t, int slot)
{
    sched_slot_t *s = sched_slot(t, slot);
    if (s)
        util_store_relaxed(&s->stopped_ns, 0);
}

/* A waiter found the holder of d at rest in a host phase worth filling
 * (wait.c, poll_rest): it may take d only as the holder's own boundary
 * would hand it over, by the policy's rule on the view of now.  Without
 * that rule a waiter that has had more GPU time took every host phase of a
 * holder whose phase was measured long, while its own, measured short, was
 * never taken: one job ran its quanta whole and the other an iteration a
 * turn.  A gang member's handover is its gang's, at its gang's boundary. */
int sched_rest_yield_locked(shm_table_t *t, int d, uint64_t now)
{
    static sched_view_t v;       /* under the table lock */
    sched_dev_t *dev = sched_dev(t, d);
    int h = dev ? sched_lease_holder(t, util_load_relaxed(&dev->lease)) : -1;
    if (h < 0 || util_load_relaxed(&sched_slot(t, h)->gang))
        return 0;
    const sched_policy_ops_t *ops = sched_policy_ops(sched_dev_policy(dev));
    sched_view_build_locked(t, d, now, &v);
    int pick = ops->pick(&v);
    return pick >= 0 && ops->yield(&v, pick) && !sched_hook_keep_locked(t, d, v.waiters[pick].slot);
}
