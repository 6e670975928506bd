/*
 * policy.c - the table of policies and what they share: weights, virtual
 * time, the fair order; and the two policies that need no file of their own
 * (fifo, pack).
 *
 * A policy is a small table of functions over a view of one device (the
 * holder and the valid waiters, built under the table's lock by lease.c),
 * as Redis's dictType is for dictionaries: pick() names the waiter to grant
 * next, yield() says whether the holder hands over at this boundary.  They
 * read no clock and no table, so tests drive them with any clock.
 *
 * Virtual time (fair, and ties everywhere): a holder's tenure of t ns adds
 *   t * SCHED_WEIGHT_UNIT / weight(priority)
 * to its vtime on that device; a process that starts waiting is lifted to the
 * least vtime of the active set (lease.c), so a newcomer or a sleeper neither
 * starves the others nor is starved.  Lower vtime runs first.
 */
#include "sched/sched_int.h"

#include <stddef.h>

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

/* Wrap-safe ticket order. */
static int ticket_before(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b) < 0;
}

int sched_fair_before(const sched_cand_t *a, const sched_cand_t *b)
{
    if (a->vtime != b->vtime)
        return a->vtime < b->vtime;
    return ticket_before(a->ticket, b->ticket);
}

int sched_fair_pick(const sched_view_t *v)
{
    int best = -1;
    for (int i = 0; i < v->n; i++)
        if (best < 0 || sched_fair_before(&v->waiters[i], &v->waiters[best]))
            best = i;
    return best;
}

/* The holder has had its quantum (scaled by its weight) and the waiter has
 * had no more GPU time than the holder. */
int sched_fair_yield(const sched_view_t *v, int pick)
{
    if (pick < 0 || !v->has_holder)
        return 0;
    uint64_t quantum = v->quantum_ns / SCHED_WEIGHT_UNIT * sched_weight(v->holder.priority);
    if (v->held_ns < quantum)
        return 0;
    return v->waiters[pick].vtime <= sched_holder_vtime(v);
}

/* ---- fifo: no sharing ----------------------------------------------------- */

static int fifo_pick(const sched_view_t *v)
{
    int best = -1;
    for (int i = 0; i < v->n; i++)
        if (best < 0 || ticket_before(v->waiters[i].ticket, v->waiters[best].ticket))
            best = i;
    return best;
}

static int never_yield(const sched_view_t *v, int pick)
{
    (void)v;
    (void)pick;
    return 0;
}

const sched_policy_ops_t sched_policy_fifo = {
    .name = "fifo", .flags = SCHED_POL_GATED, .pick = fifo_pick, .yield = never_yield,
};

/* ---- pack: everybody runs ------------------------------------------------- */

static int pack_pick(const sched_view_t *v)
{
    (void)v;
    return -1;
}

const sched_policy_ops_t sched_policy_pack = {
    .name = "pack", .flags = 0, .pick = pack_pick, .yield = never_yield,
};

/* ---- the table ------------------------------------------------------------ */

static const sched_policy_ops_t *const table[SCHED_POLICY_COUNT] = {
    [SCHED_POLICY_FIFO] = &sched_policy_fifo,
    [SCHED_POLICY_FAIR] = &sched_policy_fair,
    [SCHED_POLICY_PRIORITY] = &sched_policy_priority,
    [SCHED_POLICY_SRTF] = &sched_policy_srtf,
    [SCHED_POLICY_PACK] = &sched_policy_pack,
};

const sched_policy_ops_t *sched_policy_ops(unsigned policy)
{
    return policy < SCHED_POLICY_COUNT ? table[policy] : &sched_policy_fair;
}
