/*
 * test_gpucheck_lib.c - what the tests of bench/gpu/check.sh share (see
 * test_gpucheck_lib.h): the programs they run, check.sh --simgpu with the
 * steps asked for, and the lines of its summary.txt.
 *
 * Divided into: programs; running check.sh; reading its summary.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/testutil.h"
#include "test_gpucheck_lib.h"

/* ---- programs ---------------------------------------------------------------- */

/* The path of program name on PATH (tu_spawn does not search it), in buf;
 * NULL if not found. */
const char *on_path(const char *name, char *buf, size_t len)
{
    const char *path = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s", path ? path : "/usr/bin:/bin");
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(buf, len, "%s/%s", *d ? d : ".", name);
        if (access(buf, X_OK) == 0)
            return buf;
    }
    return NULL;
}

char bash_path[512], python_path[512];

int setup_programs(void **state)
{
    (void)state;
    if (!on_path("bash", bash_path, sizeof bash_path) ||
        !on_path("python3", python_path, sizeof python_path)) {
        fprintf(stderr, "bash and python3 are needed on PATH\n");
        return -1;
    }
    return 0;
}

static const char *const built_needs[] = {
    "libsalus.so", "sim/libcuda.so.1", "gpucheck/overlap", "gpucheck/stamp.cubin",
    "tests/clients/cudart_probe", "workloads/kernels.cubin", "bin/salus",
    "tests/clients/nvmlclient", "sim/libnvidia-ml.so.1", NULL
};

int all_built(void)
{
    for (int i = 0; built_needs[i]; i++)
        if (!tu_built(built_needs[i]))
            return 0;
    return 1;
}

/* ---- running check.sh -------------------------------------------------------- */

/* check.sh --simgpu OUT with CHECK_STEPS=steps (and CHECK_FAKE_BAD=bad when
 * not NULL); its exit code; OUT in out. */
int run_check(const char *tag, const char *steps, const char *bad, char *out, size_t len)
{
    char script[512], build[512], fake[512], cubin[512];
    tu_source_path("bench/gpu/check.sh", script, sizeof script);
    tu_build_path("", build, sizeof build);
    tu_source_path("tests/clients/fake_torch_sharing.py", fake, sizeof fake);
    tu_build_path("workloads/kernels.cubin", cubin, sizeof cubin);
    snprintf(out, len, "%s/check-%s", tu_tmpdir(), tag);
    tu_env_t env;
    tu_env_init(&env);
    tu_env_unset(&env, "LD_PRELOAD");
    tu_env_set(&env, "CHECK_BUILD", "%s", build);
    tu_env_set(&env, "CHECK_STEPS", "%s", steps);
    tu_env_set(&env, "CHECK_TORCH_SHARING", "%s", fake);
    tu_env_set(&env, "CHECK_FAKE_CUBIN", "%s", cubin);
    tu_env_set(&env, "CHECK_OVERLAP_LAUNCHES", "16");
    if (bad)
        tu_env_set(&env, "CHECK_FAKE_BAD", "%s", bad);
    char *argv[] = { bash_path, script, "--simgpu", out, NULL };
    tu_proc_t p;
    int rc = tu_run(argv, &env, CHECK_TIMEOUT_MS, &p);
    tu_env_free(&env);
    if (rc != 0 && rc != 1) {
        char *err = tu_read_file(p.err_path, NULL), *so = tu_read_file(p.out_path, NULL);
        fprintf(stderr, "check.sh exited %d\n%s\n%s\n", rc, so ? so : "", err ? err : "");
        free(err);
        free(so);
    }
    return rc;
}

/* ---- reading its summary ------------------------------------------------------ */

/* The figures of STEP's line in OUT/summary.txt, after "PASS "/"FAIL "; the
 * status in status (PASS, FAIL or SKIP).  The test fails when there is none. */
void step_line(const char *out, const char *step, char *status, char *fig, size_t len)
{
    char path[600], needle[128], line[2048];
    snprintf(path, sizeof path, "%s/summary.txt", out);
    char *text = tu_read_file(path, NULL);
    assert_non_null(text);
    snprintf(needle, sizeof needle, " %s ", step);
    int found = tu_find_line(text, needle, 0, line, sizeof line);
    if (found != 0)
        fprintf(stderr, "no line for %s in:\n%s\n", step, text);
    free(text);
    assert_int_equal(found, 0);
    assert_int_equal(sscanf(line, "%4s", status), 1);
    const char *f = line + strlen(status);
    while (*f == ' ')
        f++;
    f += strlen(step);
    while (*f == ' ')
        f++;
    snprintf(fig, len, "%s", f);
}

void expect_step(const char *out, const char *step, const char *want)
{
    char status[8], fig[2048];
    step_line(out, step, status, fig, sizeof fig);
    if (strcmp(status, want) != 0)
        fprintf(stderr, "%s: %s %s (wanted %s)\n", step, status, fig, want);
    assert_string_equal(status, want);
}

void expect_summary(const char *out, int rc, const char *row_prefix, int rows, int steps)
{
    char path[700];
    snprintf(path, sizeof path, "%s/summary.md", out);
    char *md = tu_read_file(path, NULL);
    assert_non_null(md);
    assert_int_equal(tu_count_lines(md, row_prefix), rows);
    assert_int_equal(tu_count_lines(md, "bench/gpu/check.sh on simgpu"), 1);
    free(md);
    snprintf(path, sizeof path, "%s/summary.json", out);
    char *js = tu_read_file(path, NULL);
    assert_non_null(js);
    assert_int_equal(tu_json_need(js, "pass") + tu_json_need(js, "fail") +
                     tu_json_need(js, "skip"), steps);
    assert_int_equal(tu_json_need(js, "simgpu"), 1);
    assert_int_equal(rc, tu_json_need(js, "fail") > 0 ? 1 : 0);
    free(js);
}

