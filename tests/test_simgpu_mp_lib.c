/*
 * test_simgpu_mp_lib.c - the children and reports of the simgpu tests that
 * start processes (test_simgpu_mp_lib.h): the child's side (mp_say), then the
 * parent's (starting children, reading what they said).  Single-threaded,
 * like the tests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_simgpu_mp_lib.h"

char mp_self[512];

int mp_init(const char *binary, const char *tag)
{
    char rel[256];
    snprintf(rel, sizeof rel, "tests/%s", binary);
    tu_build_path(rel, mp_self, sizeof mp_self);
    return simt_init(tag);
}

/* ---- the child's side ----------------------------------------------------------------------- */

void mp_say(const char *key, long long v)
{
    printf("%s %lld\n", key, v);
    fflush(stdout);                     /* the parent reads it while we run */
}

/* ---- the parent's side ---------------------------------------------------------------------- */

void mp_env(tu_env_t *env, const char *state)
{
    tu_env_init(env);
    tu_env_simgpu(env, state);
}

void mp_spawn(tu_proc_t *p, const tu_env_t *env, const char *role, const char *a1,
              const char *a2, const char *a3)
{
    char *argv[] = { mp_self, "--child", (char *)role, (char *)a1, (char *)a2, (char *)a3,
                     NULL };
    assert_int_equal(tu_spawn(p, argv, env), 0);
}

void mp_run(const tu_env_t *env, const char *role, tu_proc_t *p)
{
    char *argv[] = { mp_self, "--child", (char *)role, NULL };
    assert_int_equal(tu_run(argv, env, 10000, p), 0);
}

long long mp_reported(tu_proc_t *p, const char *key, int timeout_ms)
{
    char needle[64], line[256];
    snprintf(needle, sizeof needle, "%s ", key);
    uint64_t deadline = tu_now_ns() + (uint64_t)timeout_ms * MS;
    do {
        char *out = tu_read_file(p->out_path, NULL);
        int found = out && tu_find_line(out, needle, 0, line, sizeof line) == 0;
        free(out);
        if (found)
            return strtoll(line + strlen(needle), NULL, 10);
        tu_sleep_ms(2);
    } while (tu_now_ns() < deadline);
    fail_msg("child %d never reported %s", (int)p->pid, key);
    return -1;
}
