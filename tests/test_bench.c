/*
 * test_bench.c - a smoke test of make bench-quick's pieces: bench/run.py runs
 * every experiment (training trace under each policy, hyper-parameter
 * tuning, inference, a service beside training, two jobs with host phases),
 * gathers the microbenchmarks and writes the report, at
 * the tiny scale (a few jobs, a fraction of a second each), into a
 * directory of its own.  Asserted: every step succeeds, every result file
 * exists, summary.json parses and has every key (bench/run.py check, which
 * also refuses a summary that lacks one), and the plots exist when
 * matplotlib is installed.  A test, not a timing: no figure is judged.
 * The verdict on the paging rows run after run (bench/run.py judge) is
 * tested on a training.json written here: its medians, ranges and goals,
 * and a failed job in any run failing it.
 *
 * Divided into: helpers (python, paths, running run.py); the tests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/testutil.h"

#define RUN_TIMEOUT_MS 100000

static char python[256];
static char runpy[512];
static char outdir[512];
static char builddir[512];

/* ---- helpers ---------------------------------------------------------------- */

/* BENCH_PYTHON as make bench has it (Debian's, with matplotlib), else any
 * python3 on PATH; "" when there is none. */
static const char *find_python(void)
{
    const char *env = getenv("BENCH_PYTHON");
    if (env && *env && access(env, X_OK) == 0)
        snprintf(python, sizeof python, "%s", env);
    else if (access("/usr/bin/python3", X_OK) == 0)
        snprintf(python, sizeof python, "/usr/bin/python3");
    else if (system("command -v python3 >/dev/null 2>&1") == 0)
        snprintf(python, sizeof python, "python3");
    else
        python[0] = '\0';
    return python;
}

static int built(void)
{
    static const char *const need[] = { "bin/salus-train", "bin/salus-infer", "libsalus.so",
                                        "sim/libcuda.so.1", NULL };
    char p[512];
    for (int i = 0; need[i]; i++)
        if (access(tu_build_path(need[i], p, sizeof p), F_OK) != 0) {
            fprintf(stderr, "%s is not built\n", p);
            return 0;
        }
    return 1;
}

/* python run.py <args...> with the build tree of this test; exit code. */
static int run_py(tu_proc_t *p, const char *a1, const char *a2, const char *a3, const char *a4,
                  const char *a5, const char *a6, const char *a7)
{
    char *argv[] = { python, runpy, (char *)a1, (char *)a2, (char *)a3, (char *)a4,
                     (char *)a5, (char *)a6, (char *)a7, NULL };
    tu_env_t env;
    tu_env_init(&env);
    tu_env_set(&env, "SALUS_BENCH_BUILD", "%s", builddir);
    tu_env_unset(&env, "LD_PRELOAD");
    int rc = tu_run(argv, &env, RUN_TIMEOUT_MS, p);
    tu_env_free(&env);
    return rc;
}

static void show(const tu_proc_t *p)
{
    char *out = tu_read_file(p->out_path, NULL), *err = tu_read_file(p->err_path, NULL);
    fprintf(stderr, "--- stdout\n%s\n--- stderr\n%s\n", out ? out : "", err ? err : "");
    free(out);
    free(err);
}

static int exists(const char *dir, const char *name)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (access(p, F_OK) == 0)
        return 1;
    fprintf(stderr, "missing: %s\n", p);
    return 0;
}

static int setup(void **state)
{
    (void)state;
    char p[512];
    tu_source_path("bench/run.py", runpy, sizeof runpy);
    tu_build_path("libsalus.so", p, sizeof p);
    snprintf(builddir, sizeof builddir, "%s", dirname(p));
    snprintf(outdir, sizeof outdir, "%s/results", tu_tmpdir());
    find_python();
    return 0;
}

/* ---- tests ------------------------------------------------------------------- */

static void test_tiny_run(void **state)
{
    (void)state;
    if (!python[0] || !built())
        skip();
    tu_proc_t p;
    int rc = run_py(&p, "all", "--scale", "tiny", "--out", outdir, NULL, NULL);
    if (rc != 0)
        show(&p);
    assert_int_equal(rc, 0);

    static const char *const files[] = { "training.json", "hyperparam.json", "inference.json",
                                         "mixed.json", "slicing.json", "pytorch.json", "micro.json", "timing.json", "report.md",
                                         "summary.json", NULL };
    for (int i = 0; files[i]; i++)
        assert_true(exists(outdir, files[i]));

    char summary[1024];
    snprintf(summary, sizeof summary, "%s/summary.json", outdir);
    rc = run_py(&p, "check", summary, NULL, NULL, NULL, NULL, NULL);
    if (rc != 0)
        show(&p);
    assert_int_equal(rc, 0);

    /* Every experiment has its section in the report. */
    char path[1024];
    snprintf(path, sizeof path, "%s/report.md", outdir);
    char *md = tu_read_file(path, NULL);
    assert_non_null(md);
    assert_non_null(strstr(md, "## 1. Training"));
    assert_non_null(strstr(md, "## 2. Hyper-parameter tuning"));
    assert_non_null(strstr(md, "## 3. Inference"));
    assert_non_null(strstr(md, "## A latency-sensitive service beside training"));
    assert_non_null(strstr(md, "## GPU time that time slicing wastes"));
    /* The tiny scale runs no framework, and the report says so. */
    assert_non_null(strstr(md, "## PyTorch jobs sharing one GPU"));
    assert_non_null(strstr(md, "**Skipped**: the tiny scale runs no framework"));
    assert_non_null(strstr(md, "## 4. Microbenchmarks"));
    free(md);

    /* The plots, where matplotlib is there to draw them. */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s -c 'import matplotlib' >/dev/null 2>&1", python);
    if (system(cmd) == 0) {
        static const char *const pngs[] = { "training_jct_cdf.png", "training_timeline.png",
                                            "training_utilization.png",
                                            "hyperparam_utilization.png", "inference_p99.png",
                                            NULL };
        for (int i = 0; pngs[i]; i++)
            assert_true(exists(outdir, pngs[i]));
    } else {
        fprintf(stderr, "matplotlib is not installed: plots not checked\n");
    }
}

/* The check refuses a summary that lacks a key, or is not JSON. */
static void test_check_refuses(void **state)
{
    (void)state;
    if (!python[0])
        skip();
    char path[1024];
    snprintf(path, sizeof path, "%s/bad-summary.json", tu_tmpdir());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"training\": {\"fifo\": {\"avg_jct_s\": 1}}, \"hyperparam\": {}}\n", f);
    fclose(f);
    tu_proc_t p;
    assert_int_not_equal(run_py(&p, "check", path, NULL, NULL, NULL, NULL, NULL), 0);
    char *err = tu_read_file(p.err_path, NULL);
    assert_non_null(err);
    assert_non_null(strstr(err, "missing key inference"));
    assert_non_null(strstr(err, "training.srtf missing"));
    assert_non_null(strstr(err, "missing key slicing"));
    assert_non_null(strstr(err, "slicing is not a non-empty list"));
    free(err);

    f = fopen(path, "w");
    assert_non_null(f);
    fputs("{not json\n", f);
    fclose(f);
    assert_int_not_equal(run_py(&p, "check", path, NULL, NULL, NULL, NULL, NULL), 0);
}

/* Three arrival orders of fifo, srtf and fair, with and without paging;
 * fair's second run with paging failed `failed` jobs (killed). */
static void write_runs(const char *path, int failed)
{
    static const char *const runs[3][3][2] = {          /* [run][policy][paging, plain] */
        { { "14.0", "13.0" }, { "9.0", "13.0" }, { "12.0", "11.0" } },
        { { "15.0", "14.0" }, { "9.5", "13.5" }, { "20.0", "11.5" } },
        { { "13.0", "12.0" }, { "8.0", "12.0" }, { "11.0", "11.2" } },
    };
    static const char *const pol[3] = { "fifo", "srtf", "fair" };
    static const char *const ideal[3] = { "8.0", "8.5", "7.5" };
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"policies\": {\"fifo\": {\"failed_jobs\": 0}, \"none\": {\"failed_jobs\": 43}},"
          " \"swap_runs\": [", f);
    for (int r = 0; r < 3; r++) {
        fprintf(f, "%s{\"arrival_seed\": %d, \"ideal_srtf_jct_s\": %s, \"policies\": {",
                r ? ", " : "", 2 + 100 * r, ideal[r]);
        for (int k = 0; k < 3; k++) {
            int n = r == 1 && k == 2 ? failed : 0;
            fprintf(f, "%s\"%s\": {\"paging\": {\"avg_jct_s\": %s, \"failed_jobs\": %d, "
                    "\"failures\": {%s}}, \"plain\": {\"avg_jct_s\": %s, \"failed_jobs\": 0}}",
                    k ? ", " : "", pol[k], runs[r][k][0], n, n ? "\"killed\": 2" : "",
                    runs[r][k][1]);
        }
        fputs("}}", f);
    }
    fputs("]}\n", f);
    fclose(f);
}

/* judge: each row's median and range, the goals judged run by run, the
 * runs that disagree beyond what the arrival order explains; and a job
 * failed in any run (not under `none`, which fails by design) exits 1
 * and is named. */
static void test_judge(void **state)
{
    (void)state;
    if (!python[0])
        skip();
    char path[1024];
    snprintf(path, sizeof path, "%s/training-runs.json", tu_tmpdir());
    tu_proc_t p;
    write_runs(path, 0);
    int rc = run_py(&p, "judge", path, NULL, NULL, NULL, NULL, NULL);
    if (rc != 0)
        show(&p);
    assert_int_equal(rc, 0);
    char *out = tu_read_file(p.out_path, NULL);
    assert_non_null(out);
    assert_non_null(strstr(out, "| fair | 3 | 12.00 (11.00-20.00) | 11.20 (11.00-11.50) | "
                                "1.09 (1.74) | 0 | 0 |"));
    assert_non_null(strstr(out, "median 1.12x, worst 1.12x (arrival seed 2), met in every run"));
    assert_non_null(strstr(out, "median 1.58x, worst 1.56x (arrival seed 2), met in every run"));
    assert_non_null(strstr(out, "not met by `fifo`, `fair`"));
    assert_non_null(strstr(out, "`fair` with paging spreads 75% of its median against 4%"));
    assert_null(strstr(out, "`srtf` with paging spreads"));
    free(out);

    write_runs(path, 2);
    assert_int_equal(run_py(&p, "judge", path, NULL, NULL, NULL, NULL, NULL), 1);
    char *err = tu_read_file(p.err_path, NULL);
    assert_non_null(err);
    assert_non_null(strstr(err, "training fair with paging, arrival seed 102: 2 failed "
                                "(killed 2)"));
    assert_null(strstr(err, "none"));
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_run),
        cmocka_unit_test(test_check_refuses),
        cmocka_unit_test(test_judge),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
