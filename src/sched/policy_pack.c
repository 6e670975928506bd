/*
 * policy_pack.c - pack: no lease, every job runs at once.
 *
 * Launches are not gated, so nobody waits and nobody is picked; the jobs
 * share the GPU as they would without Salus (memory is still admitted).
 */
#include "sched/sched_int.h"

static int pack_pick(const sched_view_t *v)
{
    (void)v;
    return -1;
}

const sched_policy_ops_t sched_policy_pack = {
    .flags = 0,
    .pick = pack_pick,
    .yield = sched_never_yield,
};
