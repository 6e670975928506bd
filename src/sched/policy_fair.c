/*
 * policy_fair.c - fair: equal GPU time, weighted by priority.
 *
 * The waiter with the least virtual time goes next (ties: first come).  The
 * holder keeps the GPU for at least its quantum, SALUS_QUANTUM_MS scaled by
 * weight(priority) / weight(50), and then yields at its next boundary to a
 * waiter that has had no more (weighted) GPU time than itself.  With equal
 * weights two jobs alternate a quantum each, switching only at iteration
 * boundaries; with weights w1, w2 their shares tend to w1 : w2.
 *
 * A holder that spends host time after its boundaries (data loading, a
 * Python step) leaves the GPU idle for it: when that host phase is worth
 * filling (SALUS_FILL_US, fixed per device with its quantum; well above a
 * handoff's cost), it yields at every boundary, quantum or not,
 * to a waiter with no more GPU time, whose work then overlaps the holder's
 * host phase.  GPU time is charged as before, so shares do not change; the
 * GPU idles less (the hardware's own time slicing overlaps them too).
 *
 * A switch that costs more than a handoff (the new holder's memory paged
 * back in, peers paged out for it) is paid back: a holder keeps the GPU,
 * quantum or host phase, until it has held it SCHED_SWITCH_FACTOR times
 * what the start of its tenure cost (sched_fair_yield).
 */
#include "sched/sched_int.h"

static int fair_yield(const sched_view_t *v, int pick)
{
    if (pick >= 0 && v->has_holder && v->fill_ns && v->holder.host_gap_ns >= v->fill_ns &&
        sched_switch_paid(v))
        return v->waiters[pick].vtime <= sched_holder_vtime(v);
    return sched_fair_yield(v, pick);
}

const sched_policy_ops_t sched_policy_fair = {
    .flags = SCHED_POL_GATED | SCHED_POL_SHARES,
    .pick = sched_fair_pick,
    .yield = fair_yield,
};
