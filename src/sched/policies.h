/*
 * policies.h - the one list of scheduling policies.
 *
 *   X(ID, "name", ops, "one-line help")
 *
 * ID names SCHED_POLICY_<ID>; ops is the policy's sched_policy_ops_t,
 * defined in its own file (policy_<name>.c).  The list expands into the enum
 * and the names and help (sched.h), the table of ops and their declarations
 * (policy.c, sched_int.h), SALUS_POLICY's choices and help (util/vars.h),
 * `salus policy`'s help and errors and salus-top's policy prompt and help
 * (tools).  A new policy is one row here and its own file, nothing else.
 * The numbers are stored in tables: a new row goes at the end.
 *
 * It includes nothing and declares nothing, so that util/vars.h, below the
 * scheduler, can read the names without depending on it.
 */
#ifndef SALUS_SCHED_POLICIES_H
#define SALUS_SCHED_POLICIES_H

#define SCHED_POLICIES(X)                                                            \
    X(FIFO, "fifo", sched_policy_fifo, "one job owns the GPU until it exits")       \
    X(FAIR, "fair", sched_policy_fair, "equal GPU time, weighted by priority")      \
    X(PRIORITY, "priority", sched_policy_priority,                                   \
      "the highest priority runs, preempting at a boundary")                        \
    X(SRTF, "srtf", sched_policy_srtf,                                               \
      "shortest remaining time first (SALUS_ITERATIONS)")                            \
    X(PACK, "pack", sched_policy_pack, "no lease: every job runs at once")

/* " fifo fair priority srtf pack" (each name after a space): a string
 * literal, for help written at compile time. */
#define SCHED_POLICY_WORD_(id, name, ops, help) " " name
#define SCHED_POLICY_WORDS SCHED_POLICIES(SCHED_POLICY_WORD_)

#endif /* SALUS_SCHED_POLICIES_H */
