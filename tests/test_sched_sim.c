/*
 * test_sched_sim.c - time slicing end to end: salus-train jobs (and a small
 * forking client) over simgpu with libsalus preloaded, judged from simgpu's
 * kernel trace (SIMGPU_TRACE), the jobs' result lines and SALUS_REPORT:
 *   - the detector counts exactly the iterations of every sync style
 *     (item, stream, ctx, event, logging syncs, gradient accumulation);
 *   - fair: two identical jobs alternate in runs of whole iterations, with
 *     far fewer switches than kernels, each 40-60% of the GPU while both run
 *     (also with a logging sync and with accumulation);
 *   - priority: a high job arriving later finishes within 25% of its time
 *     alone, and the low one resumes after;
 *   - srtf orders three jobs by remaining time; pack interleaves them; fifo
 *     runs them one after another;
 *   - SIGKILL of the holder mid-iteration: the peer goes on within 100 ms;
 *   - SIGSTOP of the holder: the peer runs (within 1 s), salus-top shows the
 *     holder stopped, the stop is not counted as its GPU time, and after
 *     SIGCONT it runs again; SIGSTOP of a waiter: the holder is not frozen
 *     by a lease handed to it, and the waiter runs after SIGCONT;
 *   - a table of another version, and one that is not a table, are refused
 *     and the job runs; a forked child without CUDA calls never registers;
 *     salus_iteration_end is callable from Python's ctypes.
 * Each test has its own simulated GPU and table.  Bounds are behavioural,
 * with margins for a loaded 2-core machine.
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

#include "ipc/ipc.h"
#include "sched/sched.h"
#include "lib/testutil.h"
#include "test_sched_lib.h"

#define MS 1000000ull
#define CHILD_MS 60000

static char state_name[64], table_name[64], trace[600], report[600];

static int have(const char *rel)
{
    char path[512];
    return access(tu_build_path(rel, path, sizeof path), R_OK) == 0;
}

static int setup(void **state)
{
    (void)state;
    if (!have("sim/libcuda.so.1") || !have("bin/salus-train") || !have("libsalus.so") ||
        !have("workloads/kernels.cubin"))
        return 0;                           /* each test skips */
    tu_unique_name("ssim", state_name, sizeof state_name);
    tu_unique_name("stab", table_name, sizeof table_name);
    snprintf(trace, sizeof trace, "%s/trace-%s.json", tu_tmpdir(), state_name + 1);
    snprintf(report, sizeof report, "%s/report-%s.json", tu_tmpdir(), state_name + 1);
    unlink(trace);
    unlink(report);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char own[80];
    shm_unlink(state_name);
    shm_unlink_table(table_name);          /* and the GPU claims naming it */
    snprintf(own, sizeof own, "%s-own", state_name);
    shm_unlink(own);
    snprintf(own, sizeof own, "%s-own", table_name);
    shm_unlink_table(own);
    return 0;
}

static void need_simgpu(void)
{
    if (!have("sim/libcuda.so.1") || !have("bin/salus-train") || !have("libsalus.so") ||
        !have("workloads/kernels.cubin"))
        skip();
}

/* ---- jobs ------------------------------------------------------------------------ */

typedef struct job {
    tu_proc_t p;
    char *out, *err;
} job_t;

/* salus-train with "opt value" pairs given as one string; env vars as
 * "NAME=value" strings (NULL-terminated); on the test's GPU and table, or
 * (other) on a GPU and table of its own, untraced. */
static void start_on(job_t *j, const char *args, const char *const *vars, int other)
{
    char prog[512], buf[1024], state[80], table[80];
    static char *argv[64];
    tu_env_t env;
    tu_env_init(&env);
    snprintf(state, sizeof state, "%s%s", state_name, other ? "-own" : "");
    snprintf(table, sizeof table, "%s%s", table_name, other ? "-own" : "");
    tu_env_salus(&env, state, table);
    if (!other)
        tu_env_set(&env, "SIMGPU_TRACE", "%s", trace);
    tu_env_set(&env, "SALUS_REPORT", "%s", report);
    tu_env_unset(&env, "SALUS_LOG");
    for (int i = 0; vars && vars[i]; i++) {
        char name[64];
        const char *eq = strchr(vars[i], '=');
        snprintf(name, sizeof name, "%.*s", (int)(eq - vars[i]), vars[i]);
        tu_env_set(&env, name, "%s", eq + 1);
    }
    snprintf(buf, sizeof buf, "%s", args);
    int n = 0;
    argv[n++] = (char *)tu_build_path("bin/salus-train", prog, sizeof prog);
    for (char *tok = strtok(buf, " "); tok && n < 62; tok = strtok(NULL, " "))
        argv[n++] = tok;
    argv[n] = NULL;
    memset(j, 0, sizeof *j);
    assert_int_equal(tu_spawn(&j->p, argv, &env), 0);
    tu_env_free(&env);
}

static void start(job_t *j, const char *args, const char *const *vars)
{
    start_on(j, args, vars, 0);
}

static int finish(job_t *j)
{
    int rc = tu_wait(&j->p, CHILD_MS);
    j->out = tu_read_file(j->p.out_path, NULL);
    j->err = tu_read_file(j->p.err_path, NULL);
    return rc;
}

static void job_free(job_t *j)
{
    free(j->out);
    free(j->err);
}

/* The job's result line (its last line of JSON): a number. */
static double result(const job_t *j, const char *key)
{
    double v = -1;
    const char *last = j->out ? strrchr(j->out, '{') : NULL;
    if (!last || tu_json_num(last, key, &v) != 0)
        fail_msg("no \"%s\" in the result of pid %d: %s / %s", key, (int)j->p.pid,
                 j->out ? j->out : "", j->err ? j->err : "");
    return v;
}

static void expect_ok(job_t *j)
{
    int rc = finish(j);
    if (rc != 0)
        fail_msg("pid %d exited %d: %s", (int)j->p.pid, rc, j->err ? j->err : "");
}

/* The report line of pid: a number. */
static double reported(int pid, const char *key)
{
    char *text = tu_read_file(report, NULL), line[4096], needle[32];
    double v = -1;
    snprintf(needle, sizeof needle, "\"pid\":%d,", pid);
    if (!text || tu_find_line(text, needle, 0, line, sizeof line) != 0 ||
        tu_json_num(line, key, &v) != 0)
        fail_msg("no \"%s\" for pid %d in the report", key, pid);
    free(text);
    return v;
}

/* ---- the trace ------------------------------------------------------------------- */

static long load(tu_kernel_t **k)
{
    long n = tu_trace_load(trace, k);
    assert_true(n > 0);
    return n;
}

/* Every run of consecutive kernels of `pid` is a whole number of iterations. */
static void assert_whole_iterations(const tu_kernel_t *k, long n, int pid, int per_iter)
{
    long len = 0;
    for (long i = 0; i < n; i++) {
        if (k[i].pid != pid)
            continue;
        len++;
        if (i == n - 1 || k[i + 1].pid != pid) {
            if (len % per_iter != 0)
                fail_msg("a run of %ld kernels of pid %d: not whole iterations of %d",
                         len, pid, per_iter);
            len = 0;
        }
    }
}

static uint64_t first_start(const tu_kernel_t *k, long n, int pid)
{
    for (long i = 0; i < n; i++)
        if (k[i].pid == pid)
            return k[i].start_ns;
    return 0;
}

static uint64_t last_end(const tu_kernel_t *k, long n, int pid)
{
    uint64_t t = 0;
    for (long i = 0; i < n; i++)
        if (k[i].pid == pid && k[i].end_ns > t)
            t = k[i].end_ns;
    return t;
}

/* Share of a's GPU time over a and b while both run. */
static double share_while_both(const tu_kernel_t *k, long n, int a, int b)
{
    uint64_t from = first_start(k, n, a) > first_start(k, n, b) ? first_start(k, n, a)
                                                                : first_start(k, n, b);
    uint64_t to = last_end(k, n, a) < last_end(k, n, b) ? last_end(k, n, a) : last_end(k, n, b);
    assert_true(to > from);
    double ta = (double)tu_trace_busy(k, n, a, from, to);
    double tb = (double)tu_trace_busy(k, n, b, from, to);
    return ta / (ta + tb);
}

/* ---- the table ------------------------------------------------------------------------ */

static shm_table_t *open_table(void)
{
    shm_table_t *t = ts_open_table(table_name, 20000);
    assert_non_null(t);
    return t;
}

/* How far a job has come, as the table shows it: start order is not
 * arrival order on a loaded machine. */
enum {
    REGISTERED,         /* in the table at all (at cuInit) */
    QUEUED,             /* waiting for the GPU or holding it: its place in
                         * the arrival order is taken */
    HOLDS,              /* holds device 0's lease */
};

static int reached(shm_table_t *t, pid_t pid, int what)
{
    int state = ts_state(t, pid);
    if (what == HOLDS)
        return ts_holder(t, 0) == pid;
    if (what == QUEUED)
        return state == SHM_WAIT_GPU || state == SHM_RUNNING;
    return state >= 0;
}

typedef struct goal {
    shm_table_t *t;
    pid_t pid;
    int what;
} goal_t;

static int goal_reached(void *arg)
{
    const goal_t *g = arg;
    return reached(g->t, g->pid, g->what);
}

static void wait_for(pid_t pid, int what)
{
    static const char *const never[] = { "registered", "queued for the GPU", "held the GPU" };
    goal_t g = { open_table(), pid, what };
    int ok = tu_await(goal_reached, &g, 20000);
    shm_close_table(g.t);
    if (!ok)
        fail_msg("pid %d never %s", (int)pid, never[what]);
}

/* ---- the detector on the workloads' sync patterns ---------------------------------- */

static void test_detector_counts_iterations(void **state)
{
    (void)state;
    need_simgpu();
    const char *styles[] = {
        "--sync item", "--sync stream", "--sync ctx", "--sync event",
        "--sync item --syncs-per-iter 1", "--sync stream --accum 3",
    };
    for (size_t s = 0; s < sizeof styles / sizeof *styles; s++) {
        char args[256];
        snprintf(args, sizeof args, "--iterations 30 --kernels 8 --kernel-us 200 %s", styles[s]);
        job_t j;
        start(&j, args, NULL);
        expect_ok(&j);
        if (reported(j.p.pid, "iterations") != 30)
            fail_msg("%s: %g iterations counted, 30 run", styles[s],
                     reported(j.p.pid, "iterations"));
        assert_true(reported(j.p.pid, "iter_ms") > 0);
        assert_true(reported(j.p.pid, "gpu_held_ms") > 0);
        job_free(&j);
    }
}

/* ---- fair ---------------------------------------------------------------------------- */

static void fair_pair(const char *extra, int per_iter)
{
    char args[256];
    snprintf(args, sizeof args, "--iterations 60 --kernels 8 --kernel-us 1000 %s", extra);
    const char *vars[] = { "SALUS_QUANTUM_MS=50", NULL };   /* ~16 tenures to average */
    job_t a, b;
    start(&a, args, vars);
    tu_sleep_ms(30);
    start(&b, args, vars);
    expect_ok(&a);
    expect_ok(&b);
    tu_kernel_t *k;
    long n = load(&k);
    assert_int_equal(n, 2 * 60 * per_iter);
    assert_whole_iterations(k, n, a.p.pid, per_iter);
    assert_whole_iterations(k, n, b.p.pid, per_iter);
    long sw = tu_trace_switches(k, n);
    assert_true(sw >= 2);
    assert_true(sw <= n / (2 * per_iter));           /* far fewer than kernels */
    double share = share_while_both(k, n, a.p.pid, b.p.pid);
    if (share < 0.40 || share > 0.60)
        fail_msg("a had %.0f%% of the GPU while both ran", share * 100);
    assert_true(reported(b.p.pid, "switches") >= 1);
    assert_true(reported(b.p.pid, "handoff_us_p50") > 0);
    free(k);
    job_free(&a);
    job_free(&b);
}

static void test_fair_alternates(void **state)
{
    (void)state;
    need_simgpu();
    fair_pair("--sync item", 8);
}

static void test_fair_logging_sync(void **state)
{
    (void)state;
    need_simgpu();
    fair_pair("--sync ctx --syncs-per-iter 1", 8);
}

static void test_fair_accumulation(void **state)
{
    (void)state;
    need_simgpu();
    fair_pair("--sync item --accum 2", 17);          /* 2 x 8 kernels + the optimizer step */
}

/* ---- priority, srtf, pack, fifo -------------------------------------------------------- */

static void test_priority(void **state)
{
    (void)state;
    need_simgpu();
    const char *high_env[] = { "SALUS_POLICY=priority", "SALUS_PRIORITY=90", NULL };
    const char *low_env[] = { "SALUS_POLICY=priority", "SALUS_PRIORITY=10", NULL };
    const char *high_args = "--iterations 40 --kernels 8 --kernel-us 1000 --name high";
    job_t h, l, ref;
    start(&l, "--iterations 150 --kernels 8 --kernel-us 1000 --name low", low_env);
    wait_for(l.p.pid, HOLDS);
    tu_sleep_ms(100);
    start(&h, high_args, high_env);
    start_on(&ref, high_args, high_env, 1);          /* alone, on a GPU of its own, */
    expect_ok(&h);                                   /* at the same time: same load */
    expect_ok(&ref);
    expect_ok(&l);
    double shared = result(&h, "jct_s"), alone = result(&ref, "jct_s");
    if (shared > alone * 1.25)
        fail_msg("the high job took %.3f s with the low one, %.3f s alone", shared, alone);
    tu_kernel_t *k;
    long n = load(&k);
    uint64_t h0 = first_start(k, n, h.p.pid), h1 = last_end(k, n, h.p.pid);
    for (long i = 0; i < n; i++)                     /* one run: nothing of low inside */
        if (k[i].pid == l.p.pid)
            assert_true(k[i].end_ns <= h0 || k[i].start_ns >= h1);
    assert_true(first_start(k, n, l.p.pid) < h0);
    assert_true(last_end(k, n, l.p.pid) > h1);       /* the low one resumes after */
    free(k);
    job_free(&h);
    job_free(&l);
    job_free(&ref);
}

static void test_srtf(void **state)
{
    (void)state;
    need_simgpu();
    const int iters[3] = { 72, 8, 24 };              /* 3x apart: measurement noise */
    job_t j[3];
    for (int i = 0; i < 3; i++) {
        char args[128], var[64];
        snprintf(args, sizeof args, "--iterations %d --kernels 4 --kernel-us 1000", iters[i]);
        snprintf(var, sizeof var, "SALUS_ITERATIONS=%d", iters[i]);
        const char *vars[] = { "SALUS_POLICY=srtf", var, NULL };
        start(&j[i], args, vars);
        wait_for(j[i].p.pid, i == 0 ? HOLDS : REGISTERED);
    }
    for (int i = 0; i < 3; i++)
        expect_ok(&j[i]);
    double end[3];
    for (int i = 0; i < 3; i++)
        end[i] = result(&j[i], "end_ns");
    if (!(end[1] < end[2] && end[2] < end[0]))
        fail_msg("jobs of 72, 8, 24 iterations ended at %.0f, %.0f, %.0f ms", end[0] / 1e6,
                 end[1] / 1e6, end[2] / 1e6);
    for (int i = 0; i < 3; i++)
        job_free(&j[i]);
}

static void test_pack(void **state)
{
    (void)state;
    need_simgpu();
    const char *vars[] = { "SALUS_POLICY=pack", NULL };
    job_t a, b;
    start(&a, "--iterations 30 --kernels 8 --kernel-us 500", vars);
    start(&b, "--iterations 30 --kernels 8 --kernel-us 500", vars);
    expect_ok(&a);
    expect_ok(&b);
    tu_kernel_t *k;
    long n = load(&k);
    assert_true(tu_trace_switches(k, n) >= 20);      /* interleaved freely */
    assert_true(reported(a.p.pid, "waited_ms") == 0);
    free(k);
    job_free(&a);
    job_free(&b);
}

static void test_fifo(void **state)
{
    (void)state;
    need_simgpu();
    const char *vars[] = { "SALUS_POLICY=fifo", NULL };
    job_t j[3];
    for (int i = 0; i < 3; i++) {
        start(&j[i], "--iterations 15 --kernels 8 --kernel-us 1000", vars);
        wait_for(j[i].p.pid, QUEUED);                /* arrival order is launch order */
    }
    for (int i = 0; i < 3; i++)
        expect_ok(&j[i]);
    tu_kernel_t *k;
    long n = load(&k);
    assert_int_equal(tu_trace_switches(k, n), 2);    /* one after another */
    assert_true(last_end(k, n, j[0].p.pid) <= first_start(k, n, j[1].p.pid));
    assert_true(last_end(k, n, j[1].p.pid) <= first_start(k, n, j[2].p.pid));
    free(k);
    for (int i = 0; i < 3; i++)
        job_free(&j[i]);
}

/* ---- robustness --------------------------------------------------------------------------- */

static void test_sigkill_holder(void **state)
{
    (void)state;
    need_simgpu();
    job_t a, b;
    start(&a, "--iterations 100000 --kernels 4 --kernel-us 5000", NULL);
    wait_for(a.p.pid, HOLDS);
    shm_table_t *t = open_table();
    start(&b, "--iterations 5 --kernels 2 --kernel-us 1000", NULL);
    assert_int_equal(ts_await_holder(t, 1, 20000), a.p.pid);   /* a holds, b waits */
    tu_sleep_ms(7);                                   /* mid-iteration */
    kill(a.p.pid, SIGKILL);
    uint64_t killed = tu_now_ns();
    assert_int_equal(finish(&a), 128 + SIGKILL);
    expect_ok(&b);
    tu_kernel_t *k;
    long n = load(&k);
    uint64_t resumed = first_start(k, n, b.p.pid);
    if (resumed > killed + 100 * MS)
        fail_msg("the peer went on %.1f ms after the holder was killed",
                 (double)(resumed - killed) / 1e6);
    free(k);
    job_free(&a);
    job_free(&b);
    shm_close_table(t);
}

/* pid's scheduler counters, as a monitor reads them; 0, or -1 when absent. */
static int slot_info(shm_table_t *t, pid_t pid, sched_slot_info_t *si)
{
    shm_ident_t id;
    for (int s = 0; s < SHM_MAX_SLOTS; s++)
        if (shm_slot_ident(t, s, &id) == 0 && id.pid == pid)
            return sched_read_slot(t, s, si);
    return -1;
}

typedef struct progress_goal {
    shm_table_t *t;
    pid_t pid;
    uint64_t iterations;        /* at least this many */
} progress_goal_t;

static int progressed(void *arg)
{
    progress_goal_t *g = arg;
    sched_slot_info_t si;
    return slot_info(g->t, g->pid, &si) == 0 && si.iterations >= g->iterations;
}

/* Wait until pid has done `more` iterations beyond those it has now. */
static void await_progress(shm_table_t *t, pid_t pid, uint64_t more, int ms, const char *what)
{
    sched_slot_info_t si;
    assert_int_equal(slot_info(t, pid, &si), 0);
    progress_goal_t g = { t, pid, si.iterations + more };
    if (!tu_await(progressed, &g, ms))
        fail_msg("%s: pid %d did not do %llu more iterations in %d ms", what, (int)pid,
                 (unsigned long long)more, ms);
}

/* salus-top --once --json over the test's table: the line of pid shows state. */
static void assert_top_state(pid_t pid, const char *state)
{
    char top[512], want[64], pidkey[32];
    char *argv[] = { (char *)tu_build_path("bin/salus-top", top, sizeof top), "--once",
                     "--json", "-d", "0", "-t", table_name, NULL };
    tu_proc_t p;
    assert_int_equal(tu_run(argv, NULL, 20000, &p), 0);
    char *out = tu_read_file(p.out_path, NULL);
    assert_non_null(out);
    snprintf(pidkey, sizeof pidkey, "\"pid\":%d,", (int)pid);
    snprintf(want, sizeof want, "\"state\":\"%s\"", state);
    const char *at = strstr(out, pidkey);
    const char *end = at ? strchr(at, '}') : NULL;
    const char *st = at ? strstr(at, want) : NULL;
    if (!st || st > end)
        fail_msg("salus-top does not show pid %d %s: %s", (int)pid, state, out);
    free(out);
}

/* Ctrl-Z of the holder: the peer gets the GPU, the stop is not GPU time. */
static void test_stopped_holder(void **state)
{
    (void)state;
    need_simgpu();
    job_t a, b;
    start(&a, "--iterations 100000 --kernels 4 --kernel-us 5000", NULL);
    wait_for(a.p.pid, HOLDS);
    shm_table_t *t = open_table();
    start(&b, "--iterations 40 --kernels 2 --kernel-us 5000", NULL);
    assert_int_equal(ts_await_holder(t, 1, 20000), a.p.pid);   /* a holds, b waits */
    kill(a.p.pid, SIGSTOP);
    uint64_t stopped = tu_now_ns();
    expect_ok(&b);                                    /* 400 ms of GPU while a is stopped */
    assert_top_state(a.p.pid, "stopped");
    sched_slot_info_t si;
    assert_int_equal(slot_info(t, a.p.pid, &si), 0);
    tu_kernel_t *k;
    long n = load(&k);
    uint64_t a_first = first_start(k, n, a.p.pid), resumed = 0;
    for (long i = 0; i < n && !resumed; i++)
        if (k[i].pid == b.p.pid && k[i].start_ns > stopped)
            resumed = k[i].start_ns;
    assert_true(resumed > 0);
    print_message("      the peer ran %.1f ms after the holder was stopped\n",
                  (double)(resumed - stopped) / 1e6);
    if (resumed > stopped + 1000 * MS)
        fail_msg("the peer ran %.1f ms after the holder was stopped",
                 (double)(resumed - stopped) / 1e6);
    /* What a held: its run before the stop, and at most a poll of the stop. */
    double ran_ms = (double)(stopped - a_first) / 1e6;
    if (si.gpu_held_ms > ran_ms + 100)
        fail_msg("the stop counts as GPU time: held %.1f ms, ran %.1f ms before the stop",
                 si.gpu_held_ms, ran_ms);
    kill(a.p.pid, SIGCONT);
    await_progress(t, a.p.pid, 5, 10000, "after SIGCONT");
    kill(a.p.pid, SIGKILL);
    finish(&a);
    free(k);
    job_free(&a);
    job_free(&b);
    shm_close_table(t);
}

/* A waiter stopped while it waits: when the lease is handed to it, the
 * holder takes it back instead of waiting for the stop to end. */
static void test_stopped_waiter(void **state)
{
    (void)state;
    need_simgpu();
    job_t a, b;
    const char *const quantum[] = { "SALUS_QUANTUM_MS=20", NULL };
    start(&a, "--iterations 100000 --kernels 2 --kernel-us 5000", quantum);
    wait_for(a.p.pid, HOLDS);
    shm_table_t *t = open_table();
    start(&b, "--iterations 100000 --kernels 2 --kernel-us 5000", quantum);
    wait_for(b.p.pid, QUEUED);
    await_progress(t, b.p.pid, 1, 20000, "before the stop");       /* both take turns */
    kill(b.p.pid, SIGSTOP);
    await_progress(t, a.p.pid, 50, 20000, "beside a stopped waiter");  /* 500 ms of GPU */
    assert_top_state(b.p.pid, "stopped");
    kill(b.p.pid, SIGCONT);
    await_progress(t, b.p.pid, 5, 10000, "after SIGCONT");
    kill(a.p.pid, SIGKILL);
    kill(b.p.pid, SIGKILL);
    finish(&a);
    finish(&b);
    job_free(&a);
    job_free(&b);
    shm_close_table(t);
}

static void test_foreign_tables(void **state)
{
    (void)state;
    need_simgpu();
    for (int kind = 0; kind < 2; kind++) {
        ts_make_foreign(table_name, kind);             /* a table of ABI 99; not a table */
        job_t j;
        start(&j, "--iterations 10 --kernels 4 --kernel-us 200", NULL);
        expect_ok(&j);
        assert_true(result(&j, "iterations") == 10);
        assert_non_null(strstr(j.err, kind == 0 ? "another version" : "not the"));
        assert_non_null(strstr(j.err, "time slicing is off"));
        job_free(&j);
    }
}

static void test_fork_child_never_registers(void **state)
{
    (void)state;
    need_simgpu();
    char prog[512], cubin[512];
    tu_build_path("tests/test_sched_forker", prog, sizeof prog);
    tu_build_path("workloads/kernels.cubin", cubin, sizeof cubin);
    if (access(prog, X_OK) != 0)
        skip();
    tu_env_t env;
    tu_env_init(&env);
    tu_env_salus(&env, state_name, table_name);
    char *argv[] = { prog, cubin, "600", NULL };
    tu_proc_t p;
    assert_int_equal(tu_spawn(&p, argv, &env), 0);
    shm_table_t *t = open_table();
    int seen;
    pid_t other = ts_others(t, p.pid, 500, &seen);
    if (other)
        fail_msg("pid %d registered; only the parent %d may", (int)other, (int)p.pid);
    assert_int_equal(tu_wait(&p, CHILD_MS), 0);
    char *out = tu_read_file(p.out_path, NULL);
    assert_non_null(out);
    assert_non_null(strstr(out, "worker "));
    assert_non_null(strstr(out, "ok"));
    assert_true(seen);
    free(out);
    shm_close_table(t);
    tu_env_free(&env);
}

static void test_ctypes_hint(void **state)
{
    (void)state;
    if (!have("libsalus.so") || access("/usr/bin/python3", X_OK) != 0)
        skip();
    tu_env_t env;
    tu_env_init(&env);
    char lib[512];
    tu_env_set(&env, "LD_PRELOAD", "%s", tu_build_path("libsalus.so", lib, sizeof lib));
    tu_env_set(&env, "SALUS_TABLE", "%s", table_name);
    char *argv[] = { "/usr/bin/python3", "-c",
                     "import ctypes; f = ctypes.CDLL(None).salus_iteration_end; "
                     "f.restype = None; f(); f(); print('hinted')", NULL };
    tu_proc_t p;
    assert_int_equal(tu_run(argv, &env, CHILD_MS, &p), 0);
    char *out = tu_read_file(p.out_path, NULL);
    assert_non_null(out);
    assert_non_null(strstr(out, "hinted"));
    free(out);
    tu_env_free(&env);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_detector_counts_iterations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fair_alternates, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fair_logging_sync, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fair_accumulation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_priority, setup, teardown),
        cmocka_unit_test_setup_teardown(test_srtf, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pack, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fifo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigkill_holder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stopped_holder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stopped_waiter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_tables, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fork_child_never_registers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ctypes_hint, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
