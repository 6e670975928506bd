/*
 * policy.c - the table of policies: number -> ops, names and help, all
 * expanded from the one list (policies.h).  Above every policy_<name>.c: it
 * refers to their ops, and none of them calls anything here.
 *
 * A policy is a small table of functions over a view of one device (the
 * holder and the valid waiters, built under the table's lock by lease.c),
 * as Redis's dictType is for dictionaries: pick() names the waiter to grant
 * next, yield() says whether the holder hands over at this boundary.  They
 * read no clock and no table, so tests drive them with any clock.  What
 * they share (weights, virtual time, the fair order) is policy_util.c.
 */
#include "sched/sched_int.h"

#define POLICY_NAME(id, name, ops, help) [SCHED_POLICY_##id] = name,
const char *const sched_policy_names[SCHED_POLICY_COUNT + 1] = {
    SCHED_POLICIES(POLICY_NAME)
};
#undef POLICY_NAME

#define POLICY_HELP(id, name, ops, help) [SCHED_POLICY_##id] = help,
const char *const sched_policy_help[SCHED_POLICY_COUNT + 1] = {
    SCHED_POLICIES(POLICY_HELP)
};
#undef POLICY_HELP

#define POLICY_OPS(id, name, ops, help) [SCHED_POLICY_##id] = &ops,
static const sched_policy_ops_t *const table[SCHED_POLICY_COUNT] = {
    SCHED_POLICIES(POLICY_OPS)
};
#undef POLICY_OPS

const sched_policy_ops_t *sched_policy_ops(unsigned policy)
{
    return policy < SCHED_POLICY_COUNT ? table[policy] : &sched_policy_fair;
}
