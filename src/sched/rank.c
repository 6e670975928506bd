/*
 * rank.c - the policy's order of one device's processes, for paging and
 * memory: paging's choice of whom to page out (the jobs the policy would
 * run last go first: src/page calls sched_rank_locked), and memory's order
 * of admission (jobs that have not run yet, by what they declared: page
 * hands sched_admit_order_locked on to memory's admission, mem_set_paging).
 *
 * The order is the policy's own: its pick, asked again with each pick
 * taken out, as the releaser would grant them one after another if nothing
 * changed.  Under the table lock (the view is a static buffer, as
 * lease.c's); costs a view and up to n picks, for the n waiters.
 */
#include "sched/sched_int.h"

int sched_rank_locked(shm_table_t *t, int d, int slot)
{
    static sched_view_t v;       /* under the table lock; too big for a stack */
    if (!t || d < 0 || d >= SHM_MAX_DEVICES || slot < 0 || slot >= SHM_MAX_SLOTS)
        return -1;
    sched_dev_t *dev = sched_dev_ready(t, d);
    if (!dev)
        return -1;
    if (sched_lease_holder(t, dev->lease) == slot)
        return 0;
    sched_view_build_locked(t, d, sched_now(), &v);
    const sched_policy_ops_t *ops = sched_policy_ops(sched_dev_policy(dev));
    for (int r = 1; v.n > 0; r++) {
        int pick = ops->pick(&v);
        if (pick < 0 || pick >= v.n)
            return -1;
        if (v.waiters[pick].slot == slot)
            return r;
        v.waiters[pick] = v.waiters[--v.n];
    }
    return -1;
}

/* Admission: the policy's own comparison of two slots that registered with
 * the scheduler (their declared iterations, priority, latency target and
 * end were written under the lock at registration), over the device's
 * policy; 0 for a slot not registered or a policy without one. */
int sched_admit_order_locked(shm_table_t *t, int d, int a, int b)
{
    sched_cand_t ca, cb;
    if (!t || d < 0 || d >= SHM_MAX_DEVICES || a < 0 || a >= SHM_MAX_SLOTS || b < 0 ||
        b >= SHM_MAX_SLOTS)
        return 0;
    sched_dev_t *dev = sched_dev_ready(t, d);
    sched_slot_t *sa = sched_slot(t, a), *sb = sched_slot(t, b);
    if (!dev || !sa || !sb || util_load_acquire(&sa->magic) != SCHED_SLOT_MAGIC ||
        util_load_acquire(&sb->magic) != SCHED_SLOT_MAGIC)
        return 0;
    const sched_policy_ops_t *ops = sched_policy_ops(sched_dev_policy(dev));
    if (!ops->admit)
        return 0;
    uint64_t now = sched_now();
    sched_cand_fill_locked(t, a, d, now, &ca);
    sched_cand_fill_locked(t, b, d, now, &cb);
    return ops->admit(&ca, &cb);
}
