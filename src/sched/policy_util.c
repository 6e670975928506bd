/*
 * policy_util.c - what the policies share: weights, virtual time, arrival
 * order and the fair order.  Below every policy_<name>.c (they call it) and
 * the lease code (it charges virtual time); it calls nothing of theirs.
 *
 * Virtual time (fair, and ties everywhere): a holder's tenure of t ns adds
 *   t * SCHED_WEIGHT_UNIT / weight(priority)
 * to its vtime on that device; a process that starts waiting is lifted to the
 * least vtime of the active set (lease.c), so a newcomer or a sleeper neither
 * starves the others nor is starved.  Lower vtime runs first.
 *
 * Pure functions over a view: no clock, no table, no lock.
 */
#include "sched/sched_int.h"

uint32_t sched_weight(int priority)
{
    if (priority < 0)
        priority = 0;
    if (priority > 100)
        priority = 100;
    return (uint32_t)priority + 1;
}

uint64_t sched_vtime_charge(int priority, uint64_t held_ns)
{
    uint64_t w = sched_weight(priority);
    return held_ns / w * SCHED_WEIGHT_UNIT + held_ns % w * SCHED_WEIGHT_UNIT / w;
}

uint64_t sched_holder_vtime(const sched_view_t *v)
{
    return v->holder.vtime + sched_vtime_charge(v->holder.priority, v->held_ns);
}

int sched_ticket_before(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b) < 0;      /* wrap-safe */
}

int sched_fair_before(const sched_cand_t *a, const sched_cand_t *b)
{
    if (a->vtime != b->vtime)
        return a->vtime < b->vtime;
    return sched_ticket_before(a->ticket, b->ticket);
}

/* A latency-sensitive job (a service beside training) must get the GPU
 * within its target: it goes first among the waiters, and a holder hands
 * over to it at its next boundary, whatever its quantum.  Its GPU time is
 * still charged to its virtual time; a job that asks for this and uses the
 * GPU all the time takes it from the others, which the tools show. */
int sched_latency_order(const sched_cand_t *a, const sched_cand_t *b)
{
    if (!a->latency_ms == !b->latency_ms)
        return a->latency_ms && b->latency_ms && a->ticket != b->ticket
                   ? (sched_ticket_before(a->ticket, b->ticket) ? 1 : -1) : 0;
    return a->latency_ms ? 1 : -1;
}

int sched_fair_pick(const sched_view_t *v)
{
    int best = -1;
    for (int i = 0; i < v->n; i++) {
        int o = best < 0 ? 1 : sched_latency_order(&v->waiters[i], &v->waiters[best]);
        if (o > 0 || (o == 0 && sched_fair_before(&v->waiters[i], &v->waiters[best])))
            best = i;
    }
    return best;
}

int sched_switch_paid(const sched_view_t *v)
{
    return v->held_ns >= SCHED_SWITCH_FACTOR * v->holder.switch_ns;
}

/* The holder has had its quantum (scaled by its weight) and paid for its
 * switch, and the waiter has had no more GPU time than the holder; or the
 * waiter is latency-sensitive. */
int sched_fair_yield(const sched_view_t *v, int pick)
{
    if (pick < 0 || !v->has_holder)
        return 0;
    if (v->waiters[pick].latency_ms)
        return 1;
    uint64_t quantum = v->quantum_ns / SCHED_WEIGHT_UNIT * sched_weight(v->holder.priority);
    if (v->held_ns < quantum || !sched_switch_paid(v))
        return 0;
    return v->waiters[pick].vtime <= sched_holder_vtime(v);
}

int sched_never_yield(const sched_view_t *v, int pick)
{
    (void)v;
    (void)pick;
    return 0;
}
