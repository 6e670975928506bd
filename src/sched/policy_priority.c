/*
 * policy_priority.c - strict priority.
 *
 * The waiter of highest SALUS_PRIORITY goes next; among equals, fair order.
 * A holder yields at its next boundary (no quantum) to a higher waiter, by
 * the fair rule to an equal one, and never to a lower one: a low job runs
 * only while no higher job wants the GPU (or while the higher one is idle,
 * which the waiters' idle check handles for every sharing policy).
 */
#include "sched/sched_int.h"

static int prio_before(const sched_cand_t *a, const sched_cand_t *b)
{
    int o = sched_latency_order(a, b);
    if (o != 0)
        return o > 0;
    if (a->priority != b->priority)
        return a->priority > b->priority;
    return sched_fair_before(a, b);
}

static int prio_pick(const sched_view_t *v)
{
    int best = -1;
    for (int i = 0; i < v->n; i++)
        if (best < 0 || prio_before(&v->waiters[i], &v->waiters[best]))
            best = i;
    return best;
}

/* Admission: latency-sensitive first, then the higher priority. */
static int prio_admit(const sched_cand_t *a, const sched_cand_t *b)
{
    int o = sched_latency_order(a, b);
    if (o != 0)
        return -o;
    return a->priority == b->priority ? 0 : a->priority > b->priority ? -1 : 1;
}

static int prio_yield(const sched_view_t *v, int pick)
{
    if (pick < 0 || !v->has_holder)
        return 0;
    if (v->waiters[pick].latency_ms)
        return 1;                       /* within its latency target: at once */
    int w = v->waiters[pick].priority, h = v->holder.priority;
    if (w != h)
        return w > h;
    return sched_fair_yield(v, pick);
}

const sched_policy_ops_t sched_policy_priority = {
    .flags = SCHED_POL_GATED | SCHED_POL_SHARES,
    .pick = prio_pick,
    .yield = prio_yield,
    .admit = prio_admit,
};
