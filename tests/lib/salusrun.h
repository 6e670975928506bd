/*
 * salusrun.h - a test's children under libsalus over simgpu, as the
 * end-to-end memory tests start them (test_memory_e2e: salus-train;
 * test_memory_drv: memclient): one simgpu state, one table and one report
 * file per test, named fresh in the test's set-up and removed in its
 * tear-down; an environment with libsalus preloaded, the report on, no
 * headroom, no limit or reservation from the test's own environment, and
 * the test's NAME=value pairs last; a number from a child's report line.
 */
#ifndef SALUS_TEST_SALUSRUN_H
#define SALUS_TEST_SALUSRUN_H

#include <sys/types.h>

#include "testutil.h"

typedef struct sr_names {
    char state[64], table[64], report[512];
} sr_names_t;

/* Fresh names (prefix-sim, prefix), the report file's path in tu_tmpdir()
 * (removed if there); for cmocka's set-up. */
void sr_names(sr_names_t *n, const char *prefix);
/* Remove the state and the table; for cmocka's tear-down. */
void sr_unlink(const sr_names_t *n);

/* env: the test's own, with libsalus over simgpu on n's state and table,
 * SALUS_REPORT to n's report, SALUS_MEM_HEADROOM=0, and SALUS_MEM_LIMIT
 * and SALUS_MEM_RESERVE unset.  The caller adds its own defaults, then
 * sr_env_vars. */
void sr_env(tu_env_t *env, const sr_names_t *n);
/* Set each "NAME=value" of vars (NULL-ended; NULL: none) in env. */
void sr_env_vars(tu_env_t *env, const char *const *vars);

/* The number `key` in pid's line of the report: asserted that the line and
 * the key are there. */
double sr_report_num(const sr_names_t *n, pid_t pid, const char *key);

#endif /* SALUS_TEST_SALUSRUN_H */
