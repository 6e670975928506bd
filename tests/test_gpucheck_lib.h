/*
 * test_gpucheck_lib.h - what the tests of bench/gpu/check.sh share
 * (test_gpucheck: its overlap and cuGetProcAddress steps;
 * test_gpucheck_torch: its PyTorch steps around the test double;
 * test_gpucheck_judge: its judgements and lint):
 * bash and python3 found on PATH, whether what check.sh runs is built,
 * check.sh --simgpu with some of its steps, and its summary's lines.
 */
#ifndef SALUS_TEST_GPUCHECK_LIB_H
#define SALUS_TEST_GPUCHECK_LIB_H

#include <stddef.h>

#define CHECK_TIMEOUT_MS 240000

/* bash and python3, found on PATH by setup_programs (cmocka's group
 * set-up: -1, said, when either is missing). */
extern char bash_path[512], python_path[512];
int setup_programs(void **state);
/* The path of program name on PATH in buf; NULL if not found. */
const char *on_path(const char *name, char *buf, size_t len);
/* 1 when everything check.sh --simgpu runs is built; else 0, said. */
int all_built(void);
/* check.sh --simgpu OUT with CHECK_STEPS=steps (and CHECK_FAKE_BAD=bad when
 * not NULL); its exit code; OUT (tu_tmpdir()/check-<tag>) in out. */
int run_check(const char *tag, const char *steps, const char *bad, char *out, size_t len);
/* The figures of STEP's line in OUT/summary.txt and its status (PASS, FAIL
 * or SKIP); the test fails when there is none. */
void step_line(const char *out, const char *step, char *status, char *fig, size_t len);
/* STEP's status is want (asserted, the line said when not). */
void expect_step(const char *out, const char *step, const char *want);
/* OUT/summary.md says it ran on simgpu and has rows rows starting with
 * row_prefix; OUT/summary.json counts steps results, says simgpu, and its
 * failures agree with check.sh's exit code rc. */
void expect_summary(const char *out, int rc, const char *row_prefix, int rows, int steps);

#endif
