/*
 * config.c - the scheduler's SALUS_* variables, read once per process when
 * it registers (never on the launch path).
 *
 *   SALUS_POLICY        fifo | fair | priority | srtf | pack      (fair)
 *   SALUS_QUANTUM_MS    0..3600000: least time a holder keeps the GPU before
 *                       yielding at a boundary to an equal waiter  (100)
 *   SALUS_MAX_SLICE_MS  1..3600000: a holder that reaches no boundary yields
 *                       at a sync (or a launch) after this long    (2000)
 *   SALUS_PRIORITY      0..100, higher is more important            (50)
 *   SALUS_ITERATIONS    1..10^12: the job's length, for srtf        (unknown)
 *   SALUS_ITER_SYNC     every | auto: every host sync ends an iteration, or
 *                       the detector finds which do                (auto)
 *
 * A bad value is rejected by the util_env_* readers with a message naming the
 * variable and the forms it accepts; the default is kept.  No lock: the
 * caller holds the process's scheduler lock.
 */
#include "sched/sched_int.h"

const char *const sched_policy_names[SCHED_POLICY_COUNT + 1] = {
    "fifo", "fair", "priority", "srtf", "pack", NULL,
};

static const char *const iter_sync_names[] = { "auto", "every", NULL };

void sched_config_read(sched_config_t *out)
{
    sched_config_t c = {
        .policy = SCHED_POLICY_FAIR,
        .quantum_ms = SCHED_QUANTUM_MS_DEFAULT,
        .max_slice_ms = SCHED_MAX_SLICE_MS_DEFAULT,
        .priority = SCHED_PRIORITY_DEFAULT,
    };
    int choice;
    long v;

    if (util_env_choice("SALUS_POLICY", sched_policy_names, &choice) == 0) {
        c.policy = (sched_policy_t)choice;
        c.policy_given = 1;
    }
    if (util_env_long("SALUS_QUANTUM_MS", 0, 3600000, &v) == 0)
        c.quantum_ms = (uint32_t)v;
    if (util_env_long("SALUS_MAX_SLICE_MS", 1, 3600000, &v) == 0)
        c.max_slice_ms = (uint32_t)v;
    if (util_env_long("SALUS_PRIORITY", 0, 100, &v) == 0)
        c.priority = (int)v;
    if (util_env_long("SALUS_ITERATIONS", 1, 1000000000000L, &v) == 0)
        c.iterations = (uint64_t)v;
    if (util_env_choice("SALUS_ITER_SYNC", iter_sync_names, &choice) == 0)
        c.iter_sync_every = choice == 1;
    if (c.max_slice_ms < c.quantum_ms)
        c.max_slice_ms = c.quantum_ms;
    *out = c;
}
