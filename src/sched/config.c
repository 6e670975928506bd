/*
 * config.c - the scheduler's SALUS_* variables (SALUS_POLICY, _QUANTUM_MS,
 * _MAX_SLICE_MS, _PRIORITY, _LATENCY_MS, _ITERATIONS, _LENGTH_MS, _END_TIME,
 * _ITER_SYNC, _GANG, with the launchers' variables that name a gang),
 * read once per process when it registers, never on the launch path.  Their
 * ranges, defaults and help are the one list of variables (util/vars.h); a bad
 * value is rejected there with a message naming the variable and the forms it
 * accepts, and the default is kept.  No lock: the caller holds the process's scheduler lock.
 */
#include "sched/sched_int.h"

#include <string.h>
#include <time.h>

/* The environment as gangs read it: SALUS_GANG through the list's check
 * (a bad value is said once and ignored), the launchers' variables as set. */
static const char *gang_env(const char *name)
{
    return strcmp(name, "SALUS_GANG") ? util_env_str(name) : util_var_text(UTIL_VAR_GANG);
}

void sched_config_read(sched_config_t *out)
{
    sched_config_t c = {
        .policy = SCHED_POLICY_FAIR,
        .quantum_ms = SCHED_QUANTUM_MS_DEFAULT,
        .max_slice_ms = SCHED_MAX_SLICE_MS_DEFAULT,
        .fill_us = SCHED_FILL_US_DEFAULT,
        .priority = SCHED_PRIORITY_DEFAULT,
    };
    int choice;
    long v;

    if (util_var_choice(UTIL_VAR_POLICY, &choice) == 0) {
        c.policy = (sched_policy_t)choice;
        c.policy_given = 1;
    }
    if (util_var_long(UTIL_VAR_QUANTUM_MS, &v) == 0)
        c.quantum_ms = (uint32_t)v;
    if (util_var_long(UTIL_VAR_MAX_SLICE_MS, &v) == 0)
        c.max_slice_ms = (uint32_t)v;
    if (util_var_long(UTIL_VAR_FILL_US, &v) == 0)
        c.fill_us = (uint32_t)v;
    if (util_var_long(UTIL_VAR_PRIORITY, &v) == 0)
        c.priority = (int)v;
    if (util_var_long(UTIL_VAR_LATENCY_MS, &v) == 0)
        c.latency_ms = (uint32_t)v;
    if (util_var_long(UTIL_VAR_ITERATIONS, &v) == 0)
        c.iterations = (uint64_t)v;
    if (util_var_long(UTIL_VAR_LENGTH_MS, &v) == 0)
        c.length_ms = (uint32_t)v;
    if (util_var_long(UTIL_VAR_END_TIME, &v) == 0)
        c.end_time_s = v;
    if (util_var_choice(UTIL_VAR_ITER_SYNC, &choice) == 0)
        c.iter_sync_every = choice == 1;
    if (sched_gang_name(gang_env, c.gang, sizeof c.gang) != 0)
        c.gang[0] = '\0';
    if (c.max_slice_ms < c.quantum_ms)
        c.max_slice_ms = c.quantum_ms;
    *out = c;
}

/* SALUS_END_TIME is wall time (what a batch system knows); the lease works on
 * the monotonic sched clock: the time left now, added to `now`.  0 when no
 * end time is set; an end already past is `now` (nothing left). */
uint64_t sched_config_deadline(const sched_config_t *c, uint64_t now)
{
    if (c->end_time_s <= 0)
        return 0;
    time_t wall = time(NULL);
    uint64_t left = c->end_time_s > wall ? (uint64_t)(c->end_time_s - wall) : 0;
    return now + left * 1000000000ull;
}
