/*
 * test_simgpu_mp_lib.h - what the simgpu tests that start processes share
 * (test_simgpu_mp.c, test_simgpu_state.c): children that are the test binary
 * again (`<binary> --child <role> ...`), started with a deadline, each
 * reporting on stdout one "key value" a line, and the parent's reader of
 * those lines.  test_simgpu_mp_lib.c; the declarations of test_simgpu_util.c
 * that these binaries use are here too.
 */
#ifndef TEST_SIMGPU_MP_LIB_H
#define TEST_SIMGPU_MP_LIB_H

#include <cuda.h>
#include <stdint.h>

#include "lib/testutil.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define MS  1000000ull

/* test_simgpu_util.c */
extern char simt_state[], simt_trace[];
extern CUfunction simt_spin;
int simt_init(const char *tag);
uint64_t simt_free(void);

/* This binary's path, for its children (set by mp_init). */
extern char mp_self[512];

/* simt_init(tag) for the binary built as tests/<binary>; 0 or -1. */
int mp_init(const char *binary, const char *tag);

/* A child's report: the line "key v" on its stdout. */
void mp_say(const char *key, long long v);

/* The environment of a simgpu process of state (the caller frees it). */
void mp_env(tu_env_t *env, const char *state);

/* Start `<self> --child role a1 a2 a3` (NULLs end the list); asserts. */
void mp_spawn(tu_proc_t *p, const tu_env_t *env, const char *role, const char *a1,
              const char *a2, const char *a3);

/* Run `<self> --child role` to its end (up to 10 s); asserts it ran. */
void mp_run(const tu_env_t *env, const char *role, tu_proc_t *p);

/* The value a child reported for key, waiting up to timeout_ms for it; fails
 * the test if it never comes. */
long long mp_reported(tu_proc_t *p, const char *key, int timeout_ms);

#endif
