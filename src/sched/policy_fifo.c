/*
 * policy_fifo.c - fifo: no sharing, the baseline.
 *
 * The waiter that came first goes next, and a holder never yields: the first
 * job keeps the GPU until it exits (or its lease goes stale).
 */
#include "sched/sched_int.h"

static int fifo_pick(const sched_view_t *v)
{
    int best = -1;
    for (int i = 0; i < v->n; i++)
        if (best < 0 || sched_ticket_before(v->waiters[i].ticket, v->waiters[best].ticket))
            best = i;
    return best;
}

const sched_policy_ops_t sched_policy_fifo = {
    .flags = SCHED_POL_GATED,
    .pick = fifo_pick,
    .yield = sched_never_yield,
};
