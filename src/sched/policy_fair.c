/*
 * policy_fair.c - fair: equal GPU time, weighted by priority.
 *
 * The waiter with the least virtual time goes next (ties: first come).  The
 * holder keeps the GPU for at least its quantum, SALUS_QUANTUM_MS scaled by
 * weight(priority) / weight(50), and then yields at its next boundary to a
 * waiter that has had no more (weighted) GPU time than itself.  With equal
 * weights two jobs alternate a quantum each, switching only at iteration
 * boundaries; with weights w1, w2 their shares tend to w1 : w2.
 */
#include "sched/sched_int.h"

const sched_policy_ops_t sched_policy_fair = {
    .flags = SCHED_POL_GATED | SCHED_POL_SHARES,
    .pick = sched_fair_pick,
    .yield = sched_fair_yield,
};
