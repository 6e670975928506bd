/*
 * salusrun.c - children under libsalus over simgpu: names, environments,
 * reports (see salusrun.h).
 *
 * Divided into: names; environments; reports.  Single-threaded.
 */
#include "salusrun.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>   /* after setjmp.h, stdarg.h and stddef.h */

/* ---- names ------------------------------------------------------------------ */

void sr_names(sr_names_t *n, const char *prefix)
{
    char sim[48];
    snprintf(sim, sizeof sim, "%s-sim", prefix);
    tu_unique_name(sim, n->state, sizeof n->state);
    tu_unique_name(prefix, n->table, sizeof n->table);
    snprintf(n->report, sizeof n->report, "%s/report-%s.json", tu_tmpdir(), n->table + 1);
    unlink(n->report);
}

void sr_unlink(const sr_names_t *n)
{
    shm_unlink(n->state);
    shm_unlink(n->table);
}

/* ---- environments --------------------------------------------------------------- */

void sr_env(tu_env_t *env, const sr_names_t *n)
{
    tu_env_init(env);
    tu_env_salus(env, n->state, n->table);
    tu_env_set(env, "SALUS_REPORT", "%s", n->report);
    tu_env_set(env, "SALUS_MEM_HEADROOM", "0");
    tu_env_unset(env, "SALUS_MEM_LIMIT");
    tu_env_unset(env, "SALUS_MEM_RESERVE");
}

void sr_env_vars(tu_env_t *env, const char *const *vars)
{
    for (int i = 0; vars && vars[i]; i++) {
        char name[64];
        const char *eq = strchr(vars[i], '=');
        assert_non_null(eq);
        snprintf(name, sizeof name, "%.*s", (int)(eq - vars[i]), vars[i]);
        tu_env_set(env, name, "%s", eq + 1);
    }
}

/* ---- reports ------------------------------------------------------------------- */

double sr_report_num(const sr_names_t *n, pid_t pid, const char *key)
{
    char *text = tu_read_file(n->report, NULL), needle[32], line[4096];
    assert_non_null(text);
    snprintf(needle, sizeof needle, "\"pid\":%d,", (int)pid);
    if (tu_find_line(text, needle, 0, line, sizeof line) != 0) {
        free(text);
        fail_msg("no line of pid %d in the report %s", (int)pid, n->report);
    }
    double v = tu_json_need(line, key);
    free(text);
    return v;
}
