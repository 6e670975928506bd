/*
 * test_gpucheck_judge.c - bench/gpu/check.sh's judgements: of the GPU's own
 * output (%globaltimer stamps, which simgpu cannot write, written here; a
 * trace cut by a kill; the cuGetProcAddress answers), and of its PyTorch
 * steps refusing what they must (CHECK_FAKE_BAD makes the test double
 * misbehave); and the scripts as the GPU machine will run them (bash -n,
 * shellcheck, py_compile).  A binary of its own (test_gpucheck.c says why);
 * the helpers are test_gpucheck_lib.c's.
 *
 * Divided into: helpers (running judge.py, writing stamps); the tests.
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

/* ---- helpers ---------------------------------------------------------------- */

/* python3 judge.py ARGS: its first line of stdout in line. */
static void run_judge(char *const args[], char *line, size_t len)
{
    char judge[512];
    tu_source_path("bench/gpu/judge.py", judge, sizeof judge);
    char *argv[8] = { python_path, judge };
    for (int i = 0; args[i] && i < 5; i++)
        argv[2 + i] = args[i];
    tu_proc_t p;
    assert_int_equal(tu_run(argv, NULL, 30000, &p), 0);
    char *text = tu_read_file(p.out_path, NULL);
    assert_non_null(text);
    char *nl = strchr(text, '\n');
    if (nl)
        *nl = '\0';
    snprintf(line, len, "%s", text);
    free(text);
}

/* Write one overlap.c process's files: its first JSON line and its stamps,
 * launches x 2 blocks, each launch's blocks at [s, e] and [s + 1, e - 1]
 * (e = 0: started, cut short). */
static void write_process(const char *dir, const char *name, int pid, int n,
                          const uint64_t (*iv)[2])
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s.json", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "{\"pid\":%d,\"pattern\":\"plain\",\"launches\":%d,\"blocks\":2,\"iters\":1,"
               "\"stamps\":\"host\"}\n", pid, n);
    fclose(f);
    snprintf(path, sizeof path, "%s/%s.stamps", dir, name);
    f = fopen(path, "wb");
    assert_non_null(f);
    for (int i = 0; i < n; i++) {
        uint64_t s = iv[i][0], e = iv[i][1];
        uint64_t row[4] = { s, e, s + 1, e ? e - 1 : 0 };
        assert_int_equal(fwrite(row, sizeof row, 1, f), 1);
    }
    fclose(f);
}
/* ---- the tests ------------------------------------------------------------------ */

/* Each PyTorch judgement fails on what it must refuse: a graph whose
 * replays differ from eager, freed memory a pool keeps that Salus does not
 * count, an out-of-memory that Salus did not refuse (the driver's), a
 * compiled function with no launches, a shared tensor whose producer does
 * not see its consumer's values.  The exit code says so. */
static void test_torch_judgements_fail(void **state)
{
    (void)state;
    if (!all_built())
        skip();
    char out[600];
    int rc = run_check("bad", "torch-graph,torch-retain,torch-six,torch-compile,torch-ipc",
                       "graph,retain,six,compile,ipc", out, sizeof out);
    assert_int_equal(rc, 1);
    expect_step(out, "torch-graph", "FAIL");
    expect_step(out, "torch-retain", "FAIL");
    expect_step(out, "torch-six", "FAIL");
    expect_step(out, "torch-compile", "FAIL");
    expect_step(out, "torch-ipc", "FAIL");
    char status[8], fig[2048];
    step_line(out, "torch-six", status, fig, sizeof fig);
    assert_non_null(strstr(fig, "driver OOM: [5]"));
    step_line(out, "torch-retain", status, fig, sizeof fig);
    assert_non_null(strstr(fig, "memory_reserved 1024 MiB, Salus counts 0 MiB"));
}
/* The GPU's output, which simgpu cannot make: per-block %globaltimer
 * stamps.  A: launches at [1, 3] and [5, 7] ms; B: [2, 4] ms; 1 ms of 5
 * overlapped.  Then B moved to [3, 5] ms and a third launch of A cut short
 * by a kill: no overlap, one launch cut short. */
static void test_judge_stamps(void **state)
{
    (void)state;
    const char *dir = tu_tmpdir();
    const uint64_t ms = 1000000, base = 1700000000000000000ull;
    const uint64_t a[2][2] = { { base + 1 * ms, base + 3 * ms }, { base + 5 * ms, base + 7 * ms } };
    const uint64_t b[1][2] = { { base + 2 * ms, base + 4 * ms } };
    write_process(dir, "overlap-fair-x-a", 101, 2, a);
    write_process(dir, "overlap-fair-x-b", 102, 1, b);
    char line[1024];
    char *args[] = { "overlap", (char *)dir, "overlap-fair-x", NULL };
    run_judge(args, line, sizeof line);
    assert_non_null(strstr(line, "FAIL 20.00% of 5.0 ms overlapped (2 and 1 kernels, running"));

    const uint64_t a2[3][2] = { { base + 1 * ms, base + 3 * ms }, { base + 5 * ms, base + 7 * ms },
                                { base + 7 * ms, 0 } };
    const uint64_t b2[1][2] = { { base + 3 * ms, base + 5 * ms } };
    write_process(dir, "overlap-fair-y-a", 103, 3, a2);
    write_process(dir, "overlap-fair-y-b", 104, 1, b2);
    char *args2[] = { "overlap", (char *)dir, "overlap-fair-y", NULL };
    run_judge(args2, line, sizeof line);
    assert_non_null(strstr(line, "PASS 0.00% of 6.0 ms overlapped (3 and 1 kernels"));
    assert_non_null(strstr(line, "1 cut short by the kill"));
    /* The same under pack: overlap allowed. */
    write_process(dir, "overlap-pack-x-a", 105, 2, a);
    write_process(dir, "overlap-pack-x-b", 106, 1, b);
    char *args3[] = { "overlap", (char *)dir, "overlap-pack-x", NULL };
    run_judge(args3, line, sizeof line);
    assert_non_null(strstr(line, "PASS 20.00%"));
}

/* Over simgpu the judgement reads the trace: a kernel is in flight from its
 * submission to its end, and a cut line (a dead process's queued work gone
 * with its context) ends the work it cuts there, or drops it if it had not
 * started.  A: kernels submitted at 0 ms, running [1, 2] and [2, 3] ms, its
 * queue cut at 1.5 ms; B: submitted at 2 ms, running [2, 4] ms.  Without the
 * cut A is in flight until 3 ms and overlaps B for 1 ms of 4; with it, A
 * ends at 1.5 ms: no overlap. */
static void test_judge_trace_cut(void **state)
{
    (void)state;
    const char *dir = tu_tmpdir();
    const unsigned long long ms = 1000000;
    char path[600], trace[600];
    snprintf(trace, sizeof trace, "%s/overlap-fair-z.trace", dir);
    for (int side = 0; side < 2; side++) {
        snprintf(path, sizeof path, "%s/overlap-fair-z-%c.json", dir, side ? 'b' : 'a');
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fprintf(f, "{\"pid\":%d,\"pattern\":\"plain\",\"launches\":1,\"blocks\":1}\n",
                201 + side);
        fclose(f);
    }
    static const char *const line =
        "{\"pid\":%d,\"device\":0,\"context\":%d,\"stream\":0,\"kind\":\"kernel\","
        "\"name\":\"salus_stamp\",\"submit_ns\":%llu,\"start_ns\":%llu,\"end_ns\":%llu}\n";
    for (int cut = 0; cut < 2; cut++) {
        FILE *f = fopen(trace, "w");
        assert_non_null(f);
        fprintf(f, line, 201, 1, 0ull, 1 * ms, 2 * ms);
        fprintf(f, line, 201, 1, 0ull, 2 * ms, 3 * ms);
        fprintf(f, line, 202, 2, 2 * ms, 2 * ms, 4 * ms);
        if (cut)
            fprintf(f, "{\"pid\":201,\"device\":0,\"context\":0,\"kind\":\"cut\","
                       "\"submit_ns\":%llu,\"start_ns\":%llu,\"end_ns\":%llu}\n",
                    ms * 3 / 2, ms * 3 / 2, ms * 3 / 2);
        fclose(f);
        char out[1024];
        char *args[] = { "overlap", (char *)dir, "overlap-fair-z", "--trace", trace, NULL };
        run_judge(args, out, sizeof out);
        assert_non_null(strstr(out, cut ? "PASS 0.00% of 3.5 ms overlapped (1 and 1 kernels"
                                        : "FAIL 25.00% of 4.0 ms overlapped (2 and 1 kernels"));
    }
}

/* libsalus's debug lines as resolver.c writes them: an export the guard
 * passed through is named, and a launch among them fails the step. */
static void test_judge_procaddr(void **state)
{
    (void)state;
    char path[600];
    snprintf(path, sizeof path, "%s/procaddr.log", tu_tmpdir());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "salus[7]: debug: resolve cuMemAlloc@3020 flags=0 -> cuMemAlloc_v2 wrapped (rc 0)\n"
               "salus[7]: debug: resolve cuModuleLoad@2000 flags=0 -> cuModuleLoad passed "
               "(not wrapped) (rc 0)\n"
               "salus[7]: debug: resolve cuMemFree@3020 flags=0 -> cuMemFree_v2 passed (the "
               "driver's answer is not the export our wrapper calls) (rc 0)\n");
    fclose(f);
    char line[1024];
    char *args[] = { "procaddr", path, NULL };
    run_judge(args, line, sizeof line);
    assert_string_equal(line, "PASS 1 wrapped exports answered as exported, 1 not (passed "
                              "through): cuMemFree_v2");
    f = fopen(path, "a");
    assert_non_null(f);
    fprintf(f, "salus[7]: debug: resolve cuLaunchKernel@12000 flags=0 -> cuLaunchKernel passed "
               "(the driver's answer is not the export our wrapper calls) (rc 0)\n");
    fclose(f);
    run_judge(args, line, sizeof line);
    assert_non_null(strstr(line, "FAIL 1 wrapped exports answered as exported, 2 not"));
    assert_non_null(strstr(line, "launches not intercepted: cuLaunchKernel"));
}

/* The scripts as the GPU machine will run them: bash -n and shellcheck
 * (warnings and errors) over the shell, py_compile over the Python. */
static void test_scripts_lint(void **state)
{
    (void)state;
    char check[512], sharing[512], judge[512], fw[512], ts[512], fake[512];
    tu_source_path("bench/gpu/check.sh", check, sizeof check);
    tu_source_path("bench/gpu/sharing.sh", sharing, sizeof sharing);
    tu_source_path("bench/gpu/judge.py", judge, sizeof judge);
    tu_source_path("bench/gpu/frameworks.py", fw, sizeof fw);
    tu_source_path("bench/gpu/torch_sharing.py", ts, sizeof ts);
    tu_source_path("tests/clients/fake_torch_sharing.py", fake, sizeof fake);
    tu_proc_t p;
    char *bash_n[] = { bash_path, "-n", check, NULL };
    assert_int_equal(tu_run(bash_n, NULL, 30000, &p), 0);
    char *bash_n2[] = { bash_path, "-n", sharing, NULL };
    assert_int_equal(tu_run(bash_n2, NULL, 30000, &p), 0);
    char *pyc[] = { python_path, "-m", "py_compile", judge, fw, ts, fake, NULL };
    tu_env_t env;
    tu_env_init(&env);
    tu_env_set(&env, "PYTHONDONTWRITEBYTECODE", "1");
    tu_env_set(&env, "PYTHONPYCACHEPREFIX", "%s/pycache", tu_tmpdir());
    assert_int_equal(tu_run(pyc, &env, 60000, &p), 0);
    tu_env_free(&env);
    char shellcheck[512];
    if (!on_path("shellcheck", shellcheck, sizeof shellcheck)) {
        fprintf(stderr, "shellcheck is not installed (make deps-test installs it)\n");
        skip();
    }
    char *sc[] = { shellcheck, "-x", "-s", "bash", "-S", "warning", check, sharing, NULL };
    int rc = tu_run(sc, NULL, 60000, &p);
    if (rc != 0) {
        char *o = tu_read_file(p.out_path, NULL);
        fprintf(stderr, "%s\n", o ? o : "");
        free(o);
    }
    assert_int_equal(rc, 0);
}
int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scripts_lint),
        cmocka_unit_test(test_judge_stamps),
        cmocka_unit_test(test_judge_trace_cut),
        cmocka_unit_test(test_judge_procaddr),
        cmocka_unit_test(test_torch_judgements_fail),
    };
    return cmocka_run_group_tests_name("gpucheck_judge", tests, setup_programs, NULL);
}
