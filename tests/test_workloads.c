/*
 * test_workloads.c - salus-train and salus-infer over simgpu: they do what
 * their options say, as the driver (simgpu's trace and memory accounting)
 * sees it, and report it in their JSON line.
 *
 * Divided into: helpers (run a program, read its JSON and the trace);
 * arguments; training (sync styles, launch forms, streams, timing, accum and
 * logging syncs, presets, --seconds, SIGTERM); memory (every --alloc path
 * frees what it takes, --oom fail, --oom retry); inference (latency grows
 * with load, SLO, determinism).
 *
 * Time is asserted as behaviour: lower bounds from the GPU time simgpu
 * charges exactly, upper bounds loose enough for a loaded 2-core machine.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/testutil.h"

#define TIMEOUT_MS 30000

/* ---- helpers ------------------------------------------------------------ */

typedef struct wl_run {
    tu_proc_t proc;
    int rc;
    char json[4096];      /* the result line ("" if none) */
    char *out, *err;      /* whole stdout and stderr */
    char trace[512];      /* SIMGPU_TRACE file, when asked for */
    char state[64];       /* SIMGPU_STATE name */
    tu_env_t env;
} wl_run_t;

static int have_simgpu(void)
{
    char path[512];
    return access(tu_build_path("sim/libcuda.so.1", path, sizeof path), R_OK) == 0;
}

#define NEED_SIMGPU()                                                          \
    do {                                                                       \
        if (!have_simgpu()) {                                                  \
            fprintf(stderr, "simgpu (build/sim/libcuda.so.1) is not built\n"); \
            skip();                                                            \
        }                                                                      \
    } while (0)

/* A fresh simgpu state (and a trace file if trace) for one or more runs. */
static void env_setup(wl_run_t *r, int trace)
{
    memset(r, 0, sizeof *r);
    tu_env_init(&r->env);
    tu_unique_name("wltest", r->state, sizeof r->state);
    tu_env_simgpu(&r->env, r->state);
    if (trace) {
        snprintf(r->trace, sizeof r->trace, "%s/trace%s.jsonl", tu_tmpdir(), r->state + 1);
        unlink(r->trace);
        tu_env_set(&r->env, "SIMGPU_TRACE", "%s", r->trace);
    }
}

static void env_done(wl_run_t *r)
{
    free(r->out);
    free(r->err);
    shm_unlink(r->state);
    tu_env_free(&r->env);
}

/* "salus-train --a b ..." split at spaces into argv, program path resolved. */
static int split_args(const char *cmd, char *buf, size_t len, char **argv, int max)
{
    snprintf(buf, len, "%s", cmd);
    int n = 0;
    for (char *t = strtok(buf, " "); t && n < max - 1; t = strtok(NULL, " "))
        argv[n++] = t;
    argv[n] = NULL;
    static char prog[512];
    char rel[128];
    snprintf(rel, sizeof rel, "bin/%s", argv[0]);
    argv[0] = (char *)tu_build_path(rel, prog, sizeof prog);
    return n;
}

static void collect(wl_run_t *r)
{
    free(r->out);
    free(r->err);
    r->out = tu_read_file(r->proc.out_path, NULL);
    r->err = tu_read_file(r->proc.err_path, NULL);
    r->json[0] = '\0';
    if (r->out)
        tu_find_line(r->out, "\"program\"", 0, r->json, sizeof r->json);
}

static void spawn_fmt(wl_run_t *r, const char *fmt, va_list ap)
{
    char cmd[1024], buf[1024], *argv[64];
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    split_args(cmd, buf, sizeof buf, argv, 64);
    assert_int_equal(tu_spawn(&r->proc, argv, &r->env), 0);
}

static void spawn(wl_run_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void spawn(wl_run_t *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    spawn_fmt(r, fmt, ap);
    va_end(ap);
}

static int finish(wl_run_t *r)
{
    r->rc = tu_wait(&r->proc, TIMEOUT_MS);
    collect(r);
    return r->rc;
}

/* Run to completion; returns the exit code. */
static int run(wl_run_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int run(wl_run_t *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    spawn_fmt(r, fmt, ap);
    va_end(ap);
    return finish(r);
}

static double num(const wl_run_t *r, const char *key)
{
    double v;
    if (tu_json_num(r->json, key, &v) != 0)
        fail_msg("no \"%s\" in result line '%s' (stderr: %s)", key, r->json, r->err ? r->err : "");
    return v;
}

/* The run ended with exit 0 and "ok":true. */
static void assert_ok(const wl_run_t *r)
{
    if (r->rc != 0 || !strstr(r->json, "\"ok\":true"))
        fail_msg("exit %d, result '%s', stderr: %s", r->rc, r->json, r->err ? r->err : "");
    assert_int_equal(tu_count_lines(r->out, "{"), 1);   /* exactly one JSON line */
}

/* Kernels of pid in the trace: count, salus_spin count, distinct names. */
typedef struct trace_sum {
    long kernels, spins, fills, axpys;
    uint64_t stream;      /* simgpu's id of the stream of the first kernel: 0 legacy */
    uint64_t spin_min_ns, spin_max_ns, first_ns, last_ns, busy_ns;
} trace_sum_t;

static trace_sum_t trace_of(const wl_run_t *r, int pid)
{
    trace_sum_t s;
    memset(&s, 0, sizeof s);
    s.spin_min_ns = UINT64_MAX;
    tu_kernel_t *k = NULL;
    long n = tu_trace_load(r->trace, &k);
    if (n < 0)
        fail_msg("cannot read trace %s", r->trace);
    for (long i = 0; i < n; i++) {
        if (k[i].pid != pid)
            continue;
        uint64_t d = k[i].end_ns - k[i].start_ns;
        if (!s.kernels || k[i].start_ns < s.first_ns) {
            s.first_ns = k[i].start_ns;
            s.stream = k[i].stream;
        }
        if (k[i].end_ns > s.last_ns)
            s.last_ns = k[i].end_ns;
        s.kernels++;
        s.busy_ns += d;
        if (strcmp(k[i].name, "salus_spin") == 0) {
            s.spins++;
            if (d < s.spin_min_ns) s.spin_min_ns = d;
            if (d > s.spin_max_ns) s.spin_max_ns = d;
        }
        s.fills += strcmp(k[i].name, "salus_fill") == 0;
        s.axpys += strcmp(k[i].name, "salus_axpy") == 0;
    }
    free(k);
    return s;
}

typedef struct text_goal {
    const char *path, *needle;
} text_goal_t;

static int has_text(void *arg)
{
    const text_goal_t *g = arg;
    char *t = tu_read_file(g->path, NULL);
    int hit = t && strstr(t, g->needle);
    free(t);
    return hit;
}

/* Poll a file until it contains needle (or ms pass). */
static int wait_for_text(const char *path, const char *needle, int ms)
{
    text_goal_t g = { path, needle };
    return tu_await(has_text, &g, ms);
}

/* ---- arguments ---------------------------------------------------------- */

static void expect_usage_error(const char *cmd, const char *needle)
{
    wl_run_t r;
    env_setup(&r, 0);
    int rc = run(&r, "%s", cmd);
    if (rc != 2 || !r.err || !strstr(r.err, needle))
        fail_msg("'%s': exit %d, stderr '%s' (expected exit 2 naming '%s')", cmd, rc,
                 r.err ? r.err : "", needle);
    env_done(&r);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    NEED_SIMGPU();
    expect_usage_error("salus-train --sync sometimes", "--sync");
    expect_usage_error("salus-train --sync sometimes", "item|stream|ctx|event|none");
    expect_usage_error("salus-train --iterations 0", "--iterations");
    expect_usage_error("salus-train --iterations ten", "--iterations");
    expect_usage_error("salus-train --mem 12X", "--mem");
    expect_usage_error("salus-train --iter-mem -5M", "--iter-mem");
    expect_usage_error("salus-train --kernels", "--kernels");
    expect_usage_error("salus-train --alloc malloc", "alloc|pitch|managed|async|vmm|array");
    expect_usage_error("salus-train --launch fast", "kernel|ex|cooperative|graph");
    expect_usage_error("salus-train --stream two", "legacy|created|per-thread");
    expect_usage_error("salus-train --oom maybe", "fail|retry");
    expect_usage_error("salus-train --no-such-option", "--no-such-option");
    expect_usage_error("salus-train stray", "stray");
    expect_usage_error("salus-train --kernels 4 --syncs-per-iter 4", "--syncs-per-iter");
    expect_usage_error("salus-train --kernels 4 --aux-kernels 5", "--aux-kernels");
    expect_usage_error("salus-train --preset nosuchmodel", "--preset");
    expect_usage_error("salus-train --verbose=yes", "--verbose");
    expect_usage_error("salus-train --device 7", "--device 7");   /* simgpu has 1 */
    expect_usage_error("salus-infer --rate -3", "--rate");
    expect_usage_error("salus-infer --requests 1.5", "--requests");
    expect_usage_error("salus-infer --slo-ms soon", "--slo-ms");

    wl_run_t r;
    env_setup(&r, 0);
    assert_int_equal(run(&r, "salus-train --help"), 0);
    for (const char *o = "--iterations\0--seconds\0--kernels\0--kernel-us\0--host-ms\0"
                         "--iter-mem\0--mem\0--sync\0--syncs-per-iter\0--accum\0--alloc\0"
                         "--oom\0--stream\0--launch\0--device\0--name\0--module\0--seed\0"
                         "--preset\0--verbose\0";
         *o; o += strlen(o) + 1)
        if (!strstr(r.out, o))
            fail_msg("salus-train --help does not mention %s", o);
    assert_int_equal(run(&r, "salus-infer --help"), 0);
    assert_non_null(strstr(r.out, "--rate"));
    assert_non_null(strstr(r.out, "--slo-ms"));
    env_done(&r);
}

/* ---- training ----------------------------------------------------------- */

/* iterations x kernels spin-only kernels of pid, each kernel_us long, all
 * between the run's start_ns and end_ns. */
static void check_kernels(const wl_run_t *r, long expect, double kernel_us)
{
    trace_sum_t t = trace_of(r, (int)num(r, "pid"));
    if (t.kernels != expect)
        fail_msg("%ld kernels in the trace, expected %ld (%s)", t.kernels, expect, r->json);
    assert_int_equal((long)num(r, "launches"), expect);
    if (t.spins) {
        uint64_t want = (uint64_t)(kernel_us * 1000);
        assert_in_range(t.spin_min_ns, want - 1000, want + 1000);
        assert_in_range(t.spin_max_ns, want - 1000, want + 1000);
    }
    assert_true(t.first_ns >= (uint64_t)num(r, "start_ns"));
    assert_true(t.last_ns <= (uint64_t)num(r, "end_ns"));
}

static void test_sync_styles(void **state)
{
    (void)state;
    NEED_SIMGPU();
    static const char *const styles[] = { "item", "stream", "ctx", "event", "none" };
    for (int i = 0; i < 5; i++) {
        wl_run_t r;
        env_setup(&r, 1);
        run(&r, "salus-train --iterations 6 --kernels 4 --aux-kernels 0 --kernel-us 2000 "
                "--sync %s", styles[i]);
        assert_ok(&r);
        assert_int_equal((long)num(&r, "iterations"), 6);
        assert_int_equal((long)num(&r, "syncs"), i == 4 ? 0 : 6);
        check_kernels(&r, 24, 2000);
        /* A host sync waits for the iteration's GPU time (8 ms). */
        if (i != 4)
            assert_true(num(&r, "iter_ms_p50") >= 7.9);
        assert_true(num(&r, "jct_s") >= 0.048);
        env_done(&r);
    }
}

static void test_launch_forms(void **state)
{
    (void)state;
    NEED_SIMGPU();
    static const char *const forms[] = { "kernel", "ex", "cooperative", "graph" };
    for (int i = 0; i < 4; i++) {
        wl_run_t r;
        env_setup(&r, 1);
        run(&r, "salus-train --iterations 5 --kernels 8 --aux-kernels 2 --kernel-us 1000 "
                "--launch %s", forms[i]);
        assert_ok(&r);
        assert_int_equal((long)num(&r, "iterations"), 5);
        check_kernels(&r, 40, 1000);
        trace_sum_t t = trace_of(&r, (int)num(&r, "pid"));
        assert_int_equal(t.spins, 30);   /* the plan: 6 spins, a fill, an axpy */
        assert_int_equal(t.fills, 5);
        assert_int_equal(t.axpys, 5);
        assert_true(num(&r, "iter_ms_p50") >= 5.9);
        env_done(&r);
    }
}

static void test_streams(void **state)
{
    (void)state;
    NEED_SIMGPU();
    static const char *const streams[] = { "legacy", "created", "per-thread" };
    for (int i = 0; i < 3; i++) {
        for (int graph = 0; graph < 2; graph++) {
            wl_run_t r;
            env_setup(&r, 1);
            run(&r, "salus-train --iterations 4 --kernels 3 --aux-kernels 1 --kernel-us 3000 "
                    "--stream %s --sync item --alloc async --iter-mem 1M%s", streams[i],
                graph ? " --launch graph" : "");
            assert_ok(&r);
            check_kernels(&r, 12, 3000);
            /* per-thread: NULL given to the _ptsz entry points is the
             * thread's own stream, not the legacy one (simgpu's id 0). */
            trace_sum_t t = trace_of(&r, (int)num(&r, "pid"));
            if ((t.stream == 0) != (i == 0))
                fail_msg("--stream %s ran on simgpu stream %llu", streams[i],
                         (unsigned long long)t.stream);
            /* The item sync waits for the stream's work, whichever stream. */
            assert_true(num(&r, "iter_ms_p50") >= 5.9);
            env_done(&r);
        }
    }
}

/* Iteration time = GPU time + host time, within margins. */
static void test_iteration_time(void **state)
{
    (void)state;
    NEED_SIMGPU();
    wl_run_t r;
    env_setup(&r, 1);
    run(&r, "salus-train --iterations 10 --kernels 5 --aux-kernels 0 --kernel-us 4000 "
            "--host-ms 5");
    assert_ok(&r);
    double p50 = num(&r, "iter_ms_p50"), mean = num(&r, "iter_ms_mean");
    assert_true(num(&r, "gpu_ms_per_iter") == 20.0);
    if (p50 < 24.9 || mean > 2 * 25 + 30)
        fail_msg("iteration p50 %.3f ms / mean %.3f ms, expected about 25 ms", p50, mean);
    assert_true(num(&r, "iter_ms_p99") >= p50);
    assert_true(num(&r, "throughput_it_s") <= 1000.0 / 24.9);
    trace_sum_t t = trace_of(&r, (int)num(&r, "pid"));
    assert_int_equal(t.busy_ns, 50ull * 4000 * 1000);
    env_done(&r);
}

/* --accum 3 --syncs-per-iter 2: per iteration 3 x 6 kernels + the optimizer
 * step, 3 x (2 logging + 1 micro-batch) syncs + the iteration-end one. */
static void test_accum_and_logging_syncs(void **state)
{
    (void)state;
    NEED_SIMGPU();
    wl_run_t r;
    env_setup(&r, 1);
    run(&r, "salus-train --iterations 3 --kernels 6 --aux-kernels 0 --kernel-us 500 "
            "--accum 3 --syncs-per-iter 2 --sync stream");
    assert_ok(&r);
    assert_int_equal((long)num(&r, "syncs"), 3 * (3 * 3 + 1));
    check_kernels(&r, 3 * (3 * 6 + 1), 500);
    trace_sum_t t = trace_of(&r, (int)num(&r, "pid"));
    assert_int_equal(t.axpys, 3);
    assert_true(num(&r, "gpu_ms_per_iter") == 9.0);
    env_done(&r);
}

static void test_presets(void **state)
{
    (void)state;
    NEED_SIMGPU();
    wl_run_t r;
    env_setup(&r, 1);
    run(&r, "salus-train --preset tiny");
    assert_ok(&r);
    char name[64];
    assert_int_equal(tu_json_str(r.json, "name", name, sizeof name), 0);
    assert_string_equal(name, "tiny");
    assert_int_equal((long)num(&r, "iterations"), 20);
    assert_true(num(&r, "gpu_ms_per_iter") > 4.99 && num(&r, "gpu_ms_per_iter") < 5.01);
    /* Options given explicitly win over the preset. */
    run(&r, "salus-train --preset tiny --iterations 3 --kernels 4 --name mine");
    assert_ok(&r);
    assert_int_equal((long)num(&r, "iterations"), 3);
    assert_int_equal((long)num(&r, "launches"), 12);
    assert_int_equal(tu_json_str(r.json, "name", name, sizeof name), 0);
    assert_string_equal(name, "mine");
    assert_int_equal(run(&r, "salus-train --preset list"), 0);
    assert_non_null(strstr(r.out, "tiny"));
    env_done(&r);
}

static void test_seconds(void **state)
{
    (void)state;
    NEED_SIMGPU();
    wl_run_t r;
    env_setup(&r, 0);
    run(&r, "salus-train --seconds 0.5 --kernels 2 --kernel-us 5000");
    assert_ok(&r);
    double iters = num(&r, "iterations"), jct = num(&r, "jct_s");
    assert_true(iters >= 1 && iters <= 50);   /* 10 ms each: at most 50 fit */
    assert_true(jct >= 0.5 && jct < 5);
    env_done(&r);
}

/* SIGTERM: the run ends at the next iteration, with its result line. */
static void test_sigterm(void **state)
{
    (void)state;
    NEED_SIMGPU();
    wl_run_t r;
    env_setup(&r, 0);
    spawn(&r, "salus-train --iterations 100000 --kernels 2 --kernel-us 5000 --verbose");
    assert_true(wait_for_text(r.proc.err_path, "iteration 1/", 10000));
    uint64_t t0 = tu_now_ns();
    kill(r.proc.pid, SIGTERM);
    assert_int_equal(finish(&r), 0);
    assert_true(tu_now_ns() - t0 < 5000000000ull);
    assert_ok(&r);
    assert_non_null(strstr(r.json, "\"interrupted\":true"));
    assert_true(num(&r, "iterations") >= 1);
    env_done(&r);
}

/* ---- memory ------------------------------------------------------------- */

/* "free_mem start=N iter=N end=N total=N" from --verbose. */
static void free_mem(const wl_run_t *r, double *start, double *iter, double *end)
{
    char line[512];
    if (!r->err || tu_find_line(r->err, "free_mem", 0, line, sizeof line) != 0)
        fail_msg("no free_mem line in stderr: %s", r->err ? r->err : "");
    unsigned long long s, i, e, t;
    assert_int_equal(sscanf(strstr(line, "start="), "start=%llu iter=%llu end=%llu total=%llu",
                            &s, &i, &e, &t), 4);
    *start = (double)s;
    *iter = (double)i;
    *end = (double)e;
}

static void test_alloc_paths(void **state)
{
    (void)state;
    NEED_SIMGPU();
    static const char *const paths[] = { "alloc", "pitch", "managed", "async", "vmm", "array" };
    for (int i = 0; i < 6; i++) {
        wl_run_t r;
        env_setup(&r, 0);
        run(&r, "salus-train --iterations 3 --kernels 2 --kernel-us 200 --mem 64M "
                "--iter-mem 16M --alloc %s --verbose", paths[i]);
        if (r.rc != 0)
            fail_msg("--alloc %s: exit %d: %s", paths[i], r.rc, r.json);
        assert_ok(&r);
        double start, iter, end;
        free_mem(&r, &start, &iter, &end);
        if (start != end)
            fail_msg("--alloc %s: free memory %.0f at start, %.0f at end", paths[i], start, end);
        /* During an iteration, both buffers are charged. */
        if (start - iter < 80.0 * 1024 * 1024)
            fail_msg("--alloc %s: only %.0f bytes in use during an iteration", paths[i],
                     start - iter);
        env_done(&r);
    }
}

static void test_oom_fail(void **state)
{
    (void)state;
    NEED_SIMGPU();
    wl_run_t r;
    env_setup(&r, 0);
    /* 1 GiB once its context (512 MiB) is made. */
    tu_env_set(&r.env, "SIMGPU_MEMORY", "1536M");
    assert_int_equal(run(&r, "salus-train --iterations 2 --mem 2G"), 2);
    assert_non_null(strstr(r.json, "\"ok\":false"));
    assert_non_null(strstr(r.json, "CUDA_ERROR_OUT_OF_MEMORY"));
    assert_non_null(strstr(r.json, "--mem"));
    assert_non_null(strstr(r.err, "CUDA_ERROR_OUT_OF_MEMORY"));
    /* Per-iteration memory too, after the persistent memory fits. */
    assert_int_equal(run(&r, "salus-train --iterations 2 --mem 512M --iter-mem 768M"), 2);
    assert_non_null(strstr(r.json, "--iter-mem"));
    assert_int_equal((long)num(&r, "iterations"), 0);
    env_done(&r);
}

/* A job that does not fit waits under --oom retry until a peer frees. */
static void test_oom_retry(void **state)
{
    (void)state;
    NEED_SIMGPU();
    wl_run_t hog, late;
    env_setup(&hog, 0);
    /* 1 GiB once both contexts (512 MiB each) are made. */
    tu_env_set(&hog.env, "SIMGPU_MEMORY", "2G");
    env_setup(&late, 0);
    tu_env_free(&late.env);
    tu_env_init(&late.env);
    tu_env_simgpu(&late.env, hog.state);
    tu_env_set(&late.env, "SIMGPU_MEMORY", "2G");
    spawn(&hog, "salus-train --iterations 100 --kernels 1 --kernel-us 10000 --mem 768M --verbose");
    assert_true(wait_for_text(hog.proc.err_path, "iteration 1/", 10000));
    run(&late, "salus-train --iterations 2 --kernels 1 --kernel-us 1000 --mem 512M --oom retry");
    finish(&hog);
    assert_ok(&hog);
    assert_ok(&late);
    assert_true(num(&late, "oom_retries") >= 1);
    assert_true(num(&late, "end_ns") > num(&hog, "end_ns"));
    env_done(&hog);
    late.state[0] = '\0';
    env_done(&late);
}

/* ---- inference ---------------------------------------------------------- */

/* Service time 5 ms (200 requests/s): at 10% load a request waits for
 * almost nothing; at 90% its latency is several service times. */
static void test_infer_latency_grows_with_load(void **state)
{
    (void)state;
    NEED_SIMGPU();
    wl_run_t lo, hi;
    env_setup(&lo, 1);
    run(&lo, "salus-infer --requests 30 --rate 20 --kernels 2 --aux-kernels 0 --kernel-us 2500");
    assert_ok(&lo);
    assert_int_equal((long)num(&lo, "requests"), 30);
    check_kernels(&lo, 60, 2500);
    double lo_p50 = num(&lo, "latency_ms_p50"), lo_mean = num(&lo, "latency_ms_mean");
    assert_true(lo_p50 >= 4.99);
    assert_true(num(&lo, "latency_ms_p95") >= lo_p50);
    assert_true(num(&lo, "latency_ms_p99") >= num(&lo, "latency_ms_p95"));
    assert_true(num(&lo, "latency_ms_max") >= num(&lo, "latency_ms_p99"));

    env_setup(&hi, 0);
    run(&hi, "salus-infer --requests 200 --rate 180 --kernels 2 --aux-kernels 0 --kernel-us 2500");
    assert_ok(&hi);
    double hi_mean = num(&hi, "latency_ms_mean");
    if (hi_mean < 1.5 * lo_mean || hi_mean < 8)
        fail_msg("mean latency %.3f ms at 90%% load, %.3f ms at 10%%", hi_mean, lo_mean);
    assert_true(num(&hi, "throughput_rps") <= 201);
    env_done(&lo);
    env_done(&hi);
}

static void test_infer_slo_and_closed_loop(void **state)
{
    (void)state;
    NEED_SIMGPU();
    wl_run_t r;
    env_setup(&r, 0);
    /* Every request takes at least 2 ms: all over a 1 ms bound. */
    run(&r, "salus-infer --requests 10 --rate 0 --kernels 1 --aux-kernels 0 --kernel-us 2000 "
            "--slo-ms 1");
    assert_ok(&r);
    assert_int_equal((long)num(&r, "slo_violations"), 10);
    assert_true(num(&r, "slo_violation_frac") == 1.0);
    assert_true(num(&r, "throughput_rps") <= 501);
    /* A loose bound: none over it. */
    run(&r, "salus-infer --requests 10 --rate 0 --kernels 1 --kernel-us 2000 --slo-ms 10000");
    assert_ok(&r);
    assert_int_equal((long)num(&r, "slo_violations"), 0);
    env_done(&r);
}

/* --seconds bounds arrivals; the seed fixes them. */
static void test_infer_seconds(void **state)
{
    (void)state;
    NEED_SIMGPU();
    wl_run_t r;
    env_setup(&r, 0);
    run(&r, "salus-infer --seconds 0.5 --rate 40 --kernels 1 --kernel-us 1000 --seed 7");
    assert_ok(&r);
    double n = num(&r, "requests");
    assert_true(n >= 5 && n <= 60);   /* Poisson, mean 20 */
    run(&r, "salus-infer --seconds 0.5 --rate 40 --kernels 1 --kernel-us 1000 --seed 7");
    assert_ok(&r);
    assert_true(num(&r, "requests") == n);
    env_done(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_sync_styles),
        cmocka_unit_test(test_launch_forms),
        cmocka_unit_test(test_streams),
        cmocka_unit_test(test_iteration_time),
        cmocka_unit_test(test_accum_and_logging_syncs),
        cmocka_unit_test(test_presets),
        cmocka_unit_test(test_seconds),
        cmocka_unit_test(test_sigterm),
        cmocka_unit_test(test_alloc_paths),
        cmocka_unit_test(test_oom_fail),
        cmocka_unit_test(test_oom_retry),
        cmocka_unit_test(test_infer_latency_grows_with_load),
        cmocka_unit_test(test_infer_slo_and_closed_loop),
        cmocka_unit_test(test_infer_seconds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
