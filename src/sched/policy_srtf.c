/*
 * policy_srtf.c - shortest remaining time first.
 *
 * remaining = (SALUS_ITERATIONS - iterations done) x mean running time of an
 * iteration (lease waits excluded); until that is measured, what the job
 * declared in time: its expected length alone (SALUS_LENGTH_MS), or the time
 * left until its end (SALUS_END_TIME, a batch system's time limit), known at
 * once (lease.c fills them).  Ranks, first to last:
 *   class 0  declared iterations only, none measured yet: it runs first, for
 *            one iteration, which measures it (a job's remaining time cannot
 *            be compared before that, and a short job must not wait behind a
 *            long one for want of a measurement);
 *   class 1  remaining time known (measured, or declared in time): by it;
 *   class 2  unknown length: last, in fair order among themselves.
 * Within a class (and for equal remaining times) the fair order breaks ties.
 * A holder yields at its next boundary (no quantum) to a waiter of strictly
 * better rank, by the fair rule to an equal one.
 */
#include "sched/sched_int.h"

static int srtf_class(const sched_cand_t *c)
{
    if (!c->declared)
        return 2;
    return c->measured ? 1 : 0;
}

/* -1: a ranks before b, 1: after, 0: equal rank. */
static int srtf_cmp(const sched_cand_t *a, const sched_cand_t *b)
{
    int ca = srtf_class(a), cb = srtf_class(b);
    if (ca != cb)
        return ca < cb ? -1 : 1;
    if (ca == 1 && a->remaining_ns != b->remaining_ns)
        return a->remaining_ns < b->remaining_ns ? -1 : 1;
    return 0;
}

static int srtf_pick(const sched_view_t *v)
{
    int best = -1;
    for (int i = 0; i < v->n; i++) {
        if (best < 0) {
            best = i;
            continue;
        }
        int c = srtf_cmp(&v->waiters[i], &v->waiters[best]);
        if (c < 0 || (c == 0 && sched_fair_before(&v->waiters[i], &v->waiters[best])))
            best = i;
    }
    return best;
}

/* Admission, before either has run: by class, then the remaining time
 * where both are known (declared in time: SALUS_LENGTH_MS, SALUS_END_TIME),
 * else the declared iterations left (no iteration is measured yet): a poor
 * proxy where models differ, as a job of many short iterations waits
 * behind one of few long ones. */
static int srtf_admit(const sched_cand_t *a, const sched_cand_t *b)
{
    int c = srtf_cmp(a, b);
    if (c != 0 || srtf_class(a) != 0 || a->left == b->left)
        return c;
    return a->left < b->left ? -1 : 1;
}

static int srtf_yield(const sched_view_t *v, int pick)
{
    if (pick < 0 || !v->has_holder)
        return 0;
    int c = srtf_cmp(&v->waiters[pick], &v->holder);
    if (c != 0)
        return c < 0;
    return sched_fair_yield(v, pick);
}

const sched_policy_ops_t sched_policy_srtf = {
    .flags = SCHED_POL_GATED | SCHED_POL_SHARES,
    .pick = srtf_pick,
    .yield = srtf_yield,
    .admit = srtf_admit,
};
