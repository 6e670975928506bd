/*
 * test_sched_lease.c - the lease protocol between real processes, through
 * the sched API (no interception, no simulated GPU): each job is a forked
 * child that calls sched_launch / sched_sync_* as the launch and sync
 * wrappers will, with a fake driver table, and "runs" each kernel by
 * spinning on the clock for its duration right after the gate let it pass.
 * Every kernel is logged (job, start, end) in a shared array; the tests read
 * the schedule from the log:
 *   fair alternation in runs of whole iterations, and shares; three jobs;
 *   priority preemption at the holder's boundary; fifo; pack; the exit
 *   handover; SIGKILL of the holder mid-iteration; an idle holder; a program
 *   that never syncs (kernel-sequence boundaries) and one without any period
 *   (max slice); the explicit hint; fork; corrupted and foreign tables; the
 *   report's fields; a 3.5 s stall inside the table's lock, after which the
 *   jobs are scheduled again; a waiter whose own slot is spoiled goes on.
 *
 * Bounds are behavioural with wide margins (a loaded 2-core machine): no
 * overlap under a gated policy, run lengths, orders, shares within 40-60%,
 * a dead holder replaced within 100 ms.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sched/sched_int.h"
#include "lib/testutil.h"
#include "test_sched_lib.h"

#define MAX_EV   8192
#define MAX_JOBS 4
#define MS       1000000ull

typedef struct ev {
    int job, iter, kernel, pad;
    uint64_t start, end;
} ev_t;

typedef struct shared {
    uint32_t n;
    uint64_t first_ns[MAX_JOBS];     /* a job's first launch attempt */
    uint32_t ran[MAX_JOBS];          /* a job's first kernel has run */
    uint64_t exit_ns[MAX_JOBS];
    ev_t ev[MAX_EV];
} shared_t;

static shared_t *sh;
static char tname[64];

typedef struct job {
    int id;
    const char *policy;
    int priority;            /* 0: default */
    int quantum_ms;          /* 0: default */
    int max_slice_ms;        /* 0: default */
    long declared;           /* SALUS_ITERATIONS */
    int iterations, kernels, kernel_us;
    int sync;                /* 0 none, 1 every iteration, 2 salus_iteration_end */
    int distinct;            /* every launch a new kernel handle (no period) */
    int after;               /* start once job after-1 ran a kernel (0: at once) */
    int start_ms;            /* then this delay */
    int pause_at, pause_ms;  /* an idle phase before iteration pause_at */
    int fork_at;             /* fork a child that makes no CUDA call */
    int host_us;             /* host time (a sleep) after each iteration's sync */
    int fill_us;             /* SALUS_FILL_US; 0: off (these jobs spin their kernels
                                on the CPU, and a loaded machine's delays after a sync
                                would look like a host phase) */
    const char *report;      /* file for sched_report_fields */
    const char *table;       /* SALUS_TABLE, default tname */
} job_t;

static CUresult CUDAAPI fake_ctx_device(CUdevice *device)
{
    *device = 0;
    return CUDA_SUCCESS;
}

static CUresult CUDAAPI fake_ctx_synchronize(void)
{
    return CUDA_SUCCESS;
}

static const drv_t fake_driver = { .ctx_get_device = fake_ctx_device,
                                   .ctx_synchronize = fake_ctx_synchronize };

/* The job's one thread, as intercept's block would keep it: the scheduler's
 * part, and the launches the fold reports at each sync. */
static sched_thread_t job_thread = { .gate = &sched_gate_unreg };
static sched_token_t job_folded, job_counted;

static sched_token_t job_fold(void)
{
    sched_token_t t = { job_counted.launches - job_folded.launches,
                        job_thread.hash - job_folded.hash };
    job_folded.launches = job_counted.launches;
    job_folded.hash = job_thread.hash;
    return t;
}

static void spin_until(uint64_t t)
{
    while (tu_now_ns() < t)
        ;
}

static void setenv_int(const char *name, long v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%ld", v);
    setenv(name, buf, 1);
}

static void job_env(const job_t *j)
{
    setenv("SALUS_TABLE", j->table ? j->table : tname, 1);
    if (j->policy)
        setenv("SALUS_POLICY", j->policy, 1);
    if (j->priority)
        setenv_int("SALUS_PRIORITY", j->priority);
    if (j->quantum_ms)
        setenv_int("SALUS_QUANTUM_MS", j->quantum_ms);
    if (j->max_slice_ms)
        setenv_int("SALUS_MAX_SLICE_MS", j->max_slice_ms);
    if (j->declared)
        setenv_int("SALUS_ITERATIONS", j->declared);
    setenv_int("SALUS_FILL_US", j->fill_us);
}

static void write_report(const char *path)
{
    char buf[1024];
    int n = sched_report_fields(buf, sizeof buf);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "{%.*s}\n", n, buf);
        fclose(f);
    }
}

static void fork_idle_child(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        struct timespec ts = { 0, 300 * 1000 * 1000 };
        nanosleep(&ts, NULL);
        _exit(0);
    }
}

static void __attribute__((noreturn)) job_main(const job_t *j)
{
    uint64_t deadline = tu_now_ns() + 10000 * MS;
    while (j->after && !__atomic_load_n(&sh->ran[j->after - 1], __ATOMIC_ACQUIRE) &&
           tu_now_ns() < deadline)
        tu_sleep_ms(1);
    if (j->start_ms)
        tu_sleep_ms(j->start_ms);
    job_env(j);
    sched_init(&fake_driver);
    sh->first_ns[j->id] = tu_now_ns();
    for (int it = 0; it < j->iterations; it++) {
        if (j->pause_ms && it == j->pause_at)
            tu_sleep_ms(j->pause_ms);
        if (j->fork_at && it == j->fork_at)
            fork_idle_child();
        for (int k = 0; k < j->kernels; k++) {
            uint64_t h = j->distinct ? 0x100000 + (uint64_t)(it * j->kernels + k)
                                     : 0x1000 + (uint64_t)k * 0x40;
            job_counted.launches++;
            sched_launch(&job_thread, (const void *)(uintptr_t)h);
            uint64_t t0 = tu_now_ns();
            spin_until(t0 + (uint64_t)j->kernel_us * 1000);
            uint32_t i = __atomic_fetch_add(&sh->n, 1, __ATOMIC_RELAXED);
            if (i < MAX_EV)
                sh->ev[i] = (ev_t){ j->id, it, k, 0, t0, tu_now_ns() };
            __atomic_store_n(&sh->ran[j->id], 1, __ATOMIC_RELEASE);
        }
        if (j->sync == 1) {
            sched_sync_begin(&job_thread);
            sched_sync_end(&job_thread, SCHED_SYNC_STREAM, 1, job_fold);
            if (j->host_us) {
                struct timespec ts = { 0, (long)j->host_us * 1000 };
                nanosleep(&ts, NULL);
            }
        } else if (j->sync == 2) {
            salus_iteration_end();
        }
    }
    if (j->report)
        write_report(j->report);
    sh->exit_ns[j->id] = tu_now_ns();
    exit(0);
}

static pid_t spawn(const job_t *j)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        job_main(j);
    return pid;
}

static int wait_job(pid_t pid)
{
    tu_proc_t p = { .pid = pid };
    return tu_wait(&p, 30000);
}

static int setup(void **state)
{
    (void)state;
    tu_unique_name("salus-lease", tname, sizeof tname);
    shm_unlink(tname);
    memset(sh, 0, sizeof *sh);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    shm_unlink(tname);
    return 0;
}

/* ---- reading the log ---------------------------------------------------------- */

static int ev_cmp(const void *a, const void *b)
{
    const ev_t *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static int sorted_log(ev_t **out)
{
    int n = (int)(sh->n < MAX_EV ? sh->n : MAX_EV);
    ev_t *e = malloc(sizeof *e * (size_t)(n ? n : 1));
    memcpy(e, sh->ev, sizeof *e * (size_t)n);
    qsort(e, (size_t)n, sizeof *e, ev_cmp);
    *out = e;
    return n;
}

/* Run n jobs at once, each to a clean exit; the log, sorted (e: NULL, none). */
static int run_jobs(const job_t *jobs, int n, ev_t **e)
{
    pid_t pid[MAX_JOBS];
    for (int i = 0; i < n; i++)
        pid[i] = spawn(&jobs[i]);
    for (int i = 0; i < n; i++)
        assert_int_equal(wait_job(pid[i]), 0);
    return e ? sorted_log(e) : 0;
}

/* Kernels of different jobs never overlap in time. */
static void assert_no_overlap(const ev_t *e, int n)
{
    uint64_t end = 0;
    int job = -1;
    for (int i = 0; i < n; i++) {
        if (e[i].job != job && e[i].start < end)
            fail_msg("job %d ran at %.3f ms, inside job %d's kernel (until %.3f ms)", e[i].job,
                     (double)(e[i].start - e[0].start) / 1e6, job,
                     (double)(end - e[0].start) / 1e6);
        if (e[i].end > end || e[i].job != job)
            end = e[i].end;
        job = e[i].job;
    }
}

static int count_switches(const ev_t *e, int n)
{
    int s = 0;
    for (int i = 1; i < n; i++)
        s += e[i].job != e[i - 1].job;
    return s;
}

/* Every run of one job starts at the first kernel of an iteration and ends
 * at the last (whole iterations). */
static void assert_whole_iterations(const ev_t *e, int n, int job, int kernels)
{
    for (int i = 0; i < n; i++) {
        if (e[i].job != job)
            continue;
        if (i == 0 || e[i - 1].job != job)
            assert_int_equal(e[i].kernel, 0);
        if (i == n - 1 || e[i + 1].job != job)
            assert_int_equal(e[i].kernel, kernels - 1);
    }
}

/* GPU time of `job` within [from, to). */
static uint64_t busy(const ev_t *e, int n, int job, uint64_t from, uint64_t to)
{
    uint64_t sum = 0;
    for (int i = 0; i < n; i++) {
        if (e[i].job != job)
            continue;
        uint64_t a = e[i].start > from ? e[i].start : from;
        uint64_t b = e[i].end < to ? e[i].end : to;
        sum += b > a ? b - a : 0;
    }
    return sum;
}

static uint64_t first_start(const ev_t *e, int n, int job)
{
    for (int i = 0; i < n; i++)
        if (e[i].job == job)
            return e[i].start;
    return 0;
}

static uint64_t last_end(const ev_t *e, int n, int job)
{
    uint64_t t = 0;
    for (int i = 0; i < n; i++)
        if (e[i].job == job && e[i].end > t)
            t = e[i].end;
    return t;
}

/* Each of jobs 0..njobs-1's share of the GPU time while all of them ran. */
static void shares_while_all(const ev_t *e, int n, int njobs, double *share)
{
    uint64_t from = 0, to = UINT64_MAX, total = 0, b[MAX_JOBS];
    for (int i = 0; i < njobs; i++) {
        from = first_start(e, n, i) > from ? first_start(e, n, i) : from;
        to = last_end(e, n, i) < to ? last_end(e, n, i) : to;
    }
    for (int i = 0; i < njobs; i++)
        total += b[i] = busy(e, n, i, from, to);
    for (int i = 0; i < njobs; i++)
        share[i] = (double)b[i] / (double)total;
}

/* Job 1 runs in job 0's pause: a kernel of it starts after job 0's last
 * kernel before the pause (at iteration pause_at), within `bound`; `what`
 * job 0 did, for the message.  Job 1 may have run before the pause too: on
 * a loaded machine a holder left unscheduled at a boundary for the rest
 * time is at rest, by design, and gives way there. */
static void assert_taken_in_pause(const ev_t *e, int n, int pause_at, uint64_t bound,
                                  const char *what)
{
    uint64_t a_pause = 0, b_in = 0;
    for (int i = 0; i < n; i++)
        if (e[i].job == 0 && e[i].iter == pause_at - 1)
            a_pause = e[i].end;
    assert_true(a_pause > 0);
    for (int i = 0; i < n; i++)
        if (e[i].job == 1 && e[i].start > a_pause && (!b_in || e[i].start < b_in))
            b_in = e[i].start;
    if (!(b_in && b_in < a_pause + bound))
        fail_msg("a %s at %.1f ms, b's first kernel after that at %.1f ms (b first ran at "
                 "%.1f ms)", what, (double)(a_pause - e[0].start) / 1e6,
                 b_in ? (double)(b_in - e[0].start) / 1e6 : -1.0,
                 (double)(first_start(e, n, 1) - e[0].start) / 1e6);
}

/* ---- tests ------------------------------------------------------------------------- */

static void test_fair_alternates_whole_iterations(void **state)
{
    (void)state;
    job_t a = { .id = 0, .iterations = 60, .kernels = 4, .kernel_us = 1000, .sync = 1,
                .quantum_ms = 20 };
    job_t b = a;
    b.id = 1;
    b.after = 1;
    ev_t *e;
    int n = run_jobs((job_t[]){ a, b }, 2, &e);
    assert_int_equal(n, 480);
    assert_no_overlap(e, n);
    assert_whole_iterations(e, n, 0, 4);
    assert_whole_iterations(e, n, 1, 4);
    int sw = count_switches(e, n);
    if (sw < 4 || sw > n / 4)                        /* switches only between iterations */
        fail_msg("%d switches for %d kernels", sw, n);
    double share[2];
    shares_while_all(e, n, 2, share);
    if (share[0] < 0.30 || share[0] > 0.70)          /* spun kernels: CPU noise; 40-60% */
        fail_msg("a had %.0f%% of the time while both ran", share[0] * 100);   /* in _sim */
    free(e);
}

/* Under fair, jobs whose host phase after each boundary (2 ms) is worth
 * filling (SALUS_FILL_US) hand the GPU over at every boundary, long before
 * their quantum: each one's GPU work overlaps the other's host time, still
 * never both on the GPU at once, whole iterations each. */
static void test_fair_fills_host_phases(void **state)
{
    (void)state;
    job_t a = { .id = 0, .iterations = 40, .kernels = 2, .kernel_us = 2000, .sync = 1,
                .quantum_ms = 60000, .host_us = 2000, .fill_us = 250 };
    job_t b = a;
    b.id = 1;
    b.after = 1;
    ev_t *e;
    int n = run_jobs((job_t[]){ a, b }, 2, &e);
    assert_int_equal(n, 160);
    assert_no_overlap(e, n);
    assert_whole_iterations(e, n, 0, 2);
    assert_whole_iterations(e, n, 1, 2);
    int sw = count_switches(e, n);
    if (sw < 20)                       /* a 60 s quantum alone would switch about once */
        fail_msg("%d switches for %d kernels: the host phases were not filled", sw, n);
    free(e);
}

static void test_fair_three_jobs(void **state)
{
    (void)state;
    job_t j[3];
    for (int i = 0; i < 3; i++)
        j[i] = (job_t){ .id = i, .iterations = 40, .kernels = 3, .kernel_us = 1000,
                        .sync = 1, .quantum_ms = 15, .after = i };
    ev_t *e;
    int n = run_jobs(j, 3, &e);
    assert_int_equal(n, 360);
    assert_no_overlap(e, n);
    double share[3];
    shares_while_all(e, n, 3, share);
    for (int i = 0; i < 3; i++) {                    /* a third each, give or take */
        assert_whole_iterations(e, n, i, 3);
        if (share[i] < 0.15 || share[i] > 0.55)
            fail_msg("job %d had %.0f%% of the time while all three ran", i, share[i] * 100);
    }
    free(e);
}

static void test_priority_preempts(void **state)
{
    (void)state;
    job_t high = { .id = 1, .policy = "priority", .priority = 90, .iterations = 40,
                   .kernels = 4, .kernel_us = 2000, .sync = 1 };
    run_jobs(&high, 1, NULL);                        /* alone first: its own time */
    uint64_t alone = sh->exit_ns[1] - sh->first_ns[1];
    shm_unlink(tname);
    memset(sh, 0, sizeof *sh);

    job_t low = { .id = 0, .policy = "priority", .priority = 10, .iterations = 80,
                  .kernels = 4, .kernel_us = 2000, .sync = 1 };
    high.after = 1;                                  /* low (id 0) runs first */
    high.start_ms = 100;
    ev_t *e;
    int n = run_jobs((job_t[]){ low, high }, 2, &e);
    (void)alone;                 /* CPU-spun kernels: the JCT bound is test_sched_sim's */
    /* It waits at most about one low iteration (8 ms of kernels), then runs. */
    uint64_t waited = first_start(e, n, 1) - sh->first_ns[1];
    if (waited > 150 * MS)
        fail_msg("the high job waited %.1f ms for the GPU", (double)waited / 1e6);
    assert_no_overlap(e, n);
    /* Once the high job runs, the low one gets the GPU back only when the
     * high one rests between its iterations (the at-rest rule: on a loaded
     * machine a process can be off the CPU for 5 ms after a sync), and then
     * for at most one of its iterations: it hands back at its boundary.
     * Events are in order of their start. */
    uint64_t h0 = first_start(e, n, 1), h1 = last_end(e, n, 1);
    int run = 0;
    for (int i = 0; i < n; i++) {
        if (e[i].start < h0 || e[i].end > h1)
            continue;
        run = e[i].job == 0 ? run + 1 : 0;
        if (run > low.kernels)
            fail_msg("the low job ran %d kernels in a row while the high job had work", run);
    }
    assert_true(last_end(e, n, 0) > last_end(e, n, 1));
    assert_true(first_start(e, n, 0) < first_start(e, n, 1));
    free(e);
}

static void test_fifo_one_after_another(void **state)
{
    (void)state;
    job_t j[3];
    for (int i = 0; i < 3; i++)
        j[i] = (job_t){ .id = i, .policy = "fifo", .iterations = 10, .kernels = 3,
                        .kernel_us = 2000, .sync = 1, .after = i, .start_ms = 20 * (i > 0) };
    ev_t *e;
    int n = run_jobs(j, 3, &e);
    assert_int_equal(n, 90);
    assert_int_equal(count_switches(e, n), 2);
    assert_int_equal(e[0].job, 0);
    assert_int_equal(e[30].job, 1);
    assert_int_equal(e[60].job, 2);
    /* The exit handler hands over at once: no 100 ms waits in between. */
    assert_true(e[30].start - e[29].end < 100 * MS);
    assert_true(e[60].start - e[59].end < 100 * MS);
    free(e);
}

static void test_pack_interleaves(void **state)
{
    (void)state;
    job_t a = { .id = 0, .policy = "pack", .iterations = 20, .kernels = 5, .kernel_us = 1000,
                .sync = 1 };
    job_t b = a;
    b.id = 1;
    ev_t *e;
    int n = run_jobs((job_t[]){ a, b }, 2, &e);
    assert_int_equal(n, 200);
    assert_true(count_switches(e, n) >= 2);          /* they run at once */
    assert_true(first_start(e, n, 1) < last_end(e, n, 0));
    assert_true(first_start(e, n, 0) < last_end(e, n, 1));
    free(e);
}

static shm_table_t *open_table(void)
{
    shm_table_t *t = ts_open_table(tname, 10000);
    assert_non_null(t);
    return t;
}

static void test_sigkill_holder(void **state)
{
    (void)state;
    job_t a = { .id = 0, .iterations = 1000, .kernels = 10, .kernel_us = 5000, .sync = 1,
                .quantum_ms = 60000 };
    job_t b = { .id = 1, .iterations = 5, .kernels = 2, .kernel_us = 1000, .sync = 1,
                .after = 1 };
    pid_t pa = spawn(&a), pb = spawn(&b);
    shm_table_t *t = open_table();
    assert_int_equal(ts_await_holder(t, 1, 10000), pa);
    tu_sleep_ms(27);                                 /* mid-iteration */
    kill(pa, SIGKILL);
    uint64_t killed = tu_now_ns();
    assert_int_equal(wait_job(pa), 128 + SIGKILL);
    assert_int_equal(wait_job(pb), 0);
    ev_t *e;
    int n = sorted_log(&e);
    uint64_t resumed = first_start(e, n, 1);
    assert_true(resumed > killed);
    assert_true(resumed - killed < 100 * MS);
    free(e);
    shm_close_table(t);
}

/* A holder that stops using the GPU (evaluation on the CPU) is relieved. */
static void test_idle_holder_released(void **state)
{
    (void)state;
    job_t a = { .id = 0, .iterations = 40, .kernels = 2, .kernel_us = 1000, .sync = 1,
                .pause_at = 20, .pause_ms = 1500, .quantum_ms = 60000 };
    /* enough work that b, even if it got the GPU early, still wants it then */
    job_t b = { .id = 1, .iterations = 400, .kernels = 2, .kernel_us = 1000, .sync = 1,
                .after = 1, .start_ms = 10, .quantum_ms = 60000 };
    ev_t *e;
    int n = run_jobs((job_t[]){ a, b }, 2, &e);
    assert_no_overlap(e, n);
    /* b ran while a was paused, well before a came back */
    assert_taken_in_pause(e, n, a.pause_at, 1000 * MS, "paused");
    free(e);
}

/* A holder at rest between iterations (host time, an inference service
 * between requests) gives way within a few polls, long before its quantum
 * ends, and gets the GPU back at the other's boundary. */
static void test_rest_between_iterations(void **state)
{
    (void)state;
    job_t a = { .id = 0, .iterations = 30, .kernels = 2, .kernel_us = 1000, .sync = 1,
                .pause_at = 15, .pause_ms = 150, .quantum_ms = 60000 };
    job_t b = { .id = 1, .iterations = 400, .kernels = 2, .kernel_us = 1000, .sync = 1,
                .after = 1, .start_ms = 10, .quantum_ms = 60000 };
    ev_t *e;
    int n = run_jobs((job_t[]){ a, b }, 2, &e);
    assert_no_overlap(e, n);
    /* The pause is shorter than the threshold for a quiet holder inside an
     * iteration (200 ms): only the at-rest rule hands the GPU over in it. */
    assert_taken_in_pause(e, n, a.pause_at, 100 * MS, "rested");
    free(e);
}

/* No syncs at all: handovers at one phase of the kernel sequence. */
static void test_kernel_sequence_boundaries(void **state)
{
    (void)state;
    /* a is found to be a no-sync program after 1 s alone on the GPU; fair
     * then lets b catch up that second before they alternate, so b runs
     * 1.5 s of work: half a second of alternation. */
    job_t a = { .id = 0, .iterations = 500, .kernels = 5, .kernel_us = 1000, .sync = 0,
                .quantum_ms = 20 };
    job_t b = { .id = 1, .iterations = 300, .kernels = 5, .kernel_us = 1000, .sync = 1,
                .quantum_ms = 20, .after = 1 };
    ev_t *e;
    int n = run_jobs((job_t[]){ a, b }, 2, &e);
    assert_no_overlap(e, n);
    int phase = -1, a_runs = 0;
    for (int i = 1; i < n; i++) {
        if (e[i].job != 0 || e[i - 1].job == 0)
            continue;
        a_runs++;                                    /* a run of a starts here */
        if (phase < 0)
            phase = e[i].kernel;
        assert_int_equal(e[i].kernel, phase);
    }
    if (a_runs < 2) {                                /* it did yield, at one phase */
        for (int i = 0, run = 0; i < n; i++)
            if (i == 0 || e[i].job != e[i - 1].job) {
                if (run++ < 12)
                    fprintf(stderr, "run: job %d from %.1f ms, iter %d kernel %d\n", e[i].job,
                            (double)(e[i].start - e[0].start) / 1e6, e[i].iter, e[i].kernel);
            }
        fail_msg("job a ran in %d runs after b's; expected at least 2", a_runs);
    }
    free(e);
}

/* ---- a stall inside the table's lock -------------------------------------------
 * The test holds the table's lock for 3.5 s while two jobs share the GPU.
 * Past the 3 s deadline they run unscheduled (overlapping); once the lock
 * is free they come back to the lease at their syncs: after the last
 * overlap, a second passes with both running and none. */

typedef struct overlap_goal {
    uint64_t freed;        /* the lock was given back */
    uint64_t last;         /* out: the end of the last overlap seen */
} overlap_goal_t;

static int scheduled_again(void *arg)
{
    overlap_goal_t *g = arg;
    ev_t *e;
    int n = sorted_log(&e), after[2] = { 0, 0 };
    uint64_t end = 0, last = 0;
    for (int i = 0; i < n; i++) {
        if (i > 0 && e[i].job != e[i - 1].job && e[i].start < end)
            last = end > last ? end : last;
        end = e[i].end > end ? e[i].end : end;
    }
    for (int i = 0; i < n; i++)
        if (e[i].start > last && e[i].job < 2)
            after[e[i].job]++;
    free(e);
    g->last = last;
    uint64_t from = last > g->freed ? last : g->freed;
    return n < MAX_EV && tu_now_ns() > from + 1000 * MS && after[0] >= 5 && after[1] >= 5;
}

static void lock_stall_recovers(int sync, int stall_ms)
{
    job_t a = { .id = 0, .iterations = 100000, .kernels = 2, .kernel_us = 2000, .sync = sync,
                .quantum_ms = 20 };
    job_t b = { .id = 1, .iterations = 100000, .kernels = 2, .kernel_us = 2000, .sync = sync,
                .quantum_ms = 20, .after = 1 };
    pid_t pa = spawn(&a), pb = spawn(&b);
    shm_table_t *t = open_table();
    assert_true(ts_await_holder(t, 1, 10000) > 0);           /* sharing */
    shm_open_opts_t o = { .name = tname };
    shm_table_t *locker;
    assert_int_equal(shm_open_table(&o, &locker), 0);
    assert_int_equal(shm_lock(locker), 0);
    tu_sleep_ms(stall_ms);                                    /* the stall's length */
    shm_unlock(locker);
    overlap_goal_t g = { .freed = tu_now_ns() };
    int ok = tu_await(scheduled_again, &g, 15000);
    kill(pa, SIGKILL);
    kill(pb, SIGKILL);
    wait_job(pa);
    wait_job(pb);
    if (!ok)
        fail_msg("the jobs still run unscheduled %.0f ms after the lock was freed",
                 (double)(tu_now_ns() - g.freed) / 1e6);
    assert_true(g.last > g.freed - (uint64_t)stall_ms * MS);  /* they did run open */
    print_message("      scheduled again %.1f ms after the lock was freed\n",
                  g.last > g.freed ? (double)(g.last - g.freed) / 1e6 : 0.0);
    shm_close_table(locker);
    shm_close_table(t);
}

static void test_lock_stall_recovers(void **state)
{
    (void)state;
    lock_stall_recovers(1, 3500);
}

/* The same with jobs that never sync: they come back at a launch (a
 * suspended process's launches take the slow path, which retries the lock
 * once per backoff), and are then handed over at their kernel sequences'
 * boundaries. */
static void test_lock_stall_recovers_without_syncs(void **state)
{
    (void)state;
    lock_stall_recovers(0, 5000);   /* a waiter may first reach for the lock late */
}

/* ---- a corrupted own slot ----------------------------------------------------------
 * A stray write spoils a waiting job's scheduler area (its magic word): no
 * holder can hand it the GPU any more.  The waiter finds out at its next
 * re-examination (every second), says so and runs unscheduled: it finishes
 * instead of waiting forever. */
static void test_corrupted_own_slot(void **state)
{
    (void)state;
    job_t a = { .id = 0, .iterations = 100, .kernels = 2, .kernel_us = 2000, .sync = 1,
                .quantum_ms = 60000 };
    job_t b = { .id = 1, .iterations = 20, .kernels = 2, .kernel_us = 1000, .sync = 1,
                .after = 1 };
    pid_t pa = spawn(&a), pb = spawn(&b);
    shm_table_t *t = open_table();
    assert_int_equal(ts_await_holder(t, 1, 10000), pa);     /* a holds, b waits */
    shm_open_opts_t o = { .name = tname };
    shm_table_t *w;
    assert_int_equal(shm_open_table(&o, &w), 0);
    shm_ident_t id;
    int slot = -1;
    for (int s = 0; s < SHM_MAX_SLOTS && slot < 0; s++)
        if (shm_slot_ident(w, s, &id) == 0 && id.pid == pb)
            slot = s;
    assert_true(slot >= 0);
    __atomic_store_n(&sched_slot(w, slot)->magic, 0x0badf00du, __ATOMIC_RELAXED);
    uint64_t spoiled = tu_now_ns();
    assert_int_equal(wait_job(pa), 0);
    assert_int_equal(wait_job(pb), 0);                        /* not a wait forever */
    print_message("      the waiter went on %.1f ms after its slot was spoiled\n",
                  (double)(sh->exit_ns[1] - spoiled) / 1e6);
    shm_close_table(w);
    shm_close_table(t);
}

/* No syncs and no period: yields after the max slice, at a launch. */
static void test_max_slice(void **state)
{
    (void)state;
    job_t a = { .id = 0, .iterations = 400, .kernels = 1, .kernel_us = 1000, .sync = 0,
                .distinct = 1, .quantum_ms = 10, .max_slice_ms = 40 };
    job_t b = { .id = 1, .iterations = 150, .kernels = 1, .kernel_us = 1000, .sync = 1,
                .quantum_ms = 10, .max_slice_ms = 40, .after = 1 };
    ev_t *e;
    int n = run_jobs((job_t[]){ a, b }, 2, &e);
    assert_no_overlap(e, n);
    uint64_t b_end = last_end(e, n, 1);
    assert_true(b_end < last_end(e, n, 0));          /* b did not wait for a's end */
    int runs = 0;
    for (int i = 0, len = 0; i < n; i++) {           /* a's runs while b waits: a slice */
        len = i > 0 && e[i - 1].job == e[i].job ? len + 1 : 1;
        if (e[i].job == 0 && e[i].end < b_end && (i == n - 1 || e[i + 1].job != 0)) {
            runs++;
            assert_true(len <= 100);
        }
    }
    assert_true(runs >= 2);
    free(e);
}

/* salus_iteration_end(): switches only there (no syncs). */
static void test_iteration_hint(void **state)
{
    (void)state;
    job_t a = { .id = 0, .iterations = 40, .kernels = 3, .kernel_us = 1000, .sync = 2,
                .quantum_ms = 10, .distinct = 1 };
    job_t b = a;
    b.id = 1;
    b.start_ms = 5;
    ev_t *e;
    int n = run_jobs((job_t[]){ a, b }, 2, &e);
    assert_no_overlap(e, n);
    assert_whole_iterations(e, n, 0, 3);
    assert_whole_iterations(e, n, 1, 3);
    assert_true(count_switches(e, n) >= 4);
    free(e);
}

/* A DataLoader-like child forked after CUDA is in use never registers. */
static void test_fork_child_not_in_table(void **state)
{
    (void)state;
    job_t a = { .id = 0, .iterations = 30, .kernels = 2, .kernel_us = 5000, .sync = 1,
                .fork_at = 2 };
    pid_t pa = spawn(&a);
    shm_table_t *t = open_table();
    int seen_parent;
    assert_int_equal(ts_others(t, pa, 250, &seen_parent), 0);   /* nobody else, ever */
    assert_true(seen_parent);
    assert_int_equal(wait_job(pa), 0);
    shm_close_table(t);
}

/* A table of another version, or not a table at all: the job runs, ungated. */
static void test_foreign_tables_fail_open(void **state)
{
    (void)state;
    for (int kind = 0; kind < 2; kind++) {
        ts_make_foreign(tname, kind);                /* another ABI version; garbage */
        memset(sh, 0, sizeof *sh);
        job_t a = { .id = 0, .iterations = 5, .kernels = 2, .kernel_us = 100, .sync = 1 };
        job_t b = a;
        b.id = 1;
        run_jobs((job_t[]){ a, b }, 2, NULL);
        assert_int_equal(sh->n, 20);
    }
}

/* Garbage in the scheduler's areas of a valid table: every word is checked. */
static void test_corrupted_areas(void **state)
{
    (void)state;
    shm_open_opts_t o = { .name = tname, .create = 1 };
    shm_table_t *t;
    assert_int_equal(shm_open_table(&o, &t), 0);
    srand(7);
    for (int d = 0; d < SHM_MAX_DEVICES; d++) {
        uint8_t *a = shm_device_area(t, d, SHM_AREA_SCHED);
        for (int i = 0; i < SHM_DEVICE_AREA_BYTES; i++)
            a[i] = (uint8_t)rand();
    }
    sched_dev_t *dev = sched_dev(t, 0);              /* and a plausible-looking one */
    dev->magic = SCHED_DEV_MAGIC;
    dev->policy = 1234;
    dev->lease = sched_lease_of(5, 77);
    job_t a = { .id = 0, .iterations = 20, .kernels = 2, .kernel_us = 1000, .sync = 1,
                .quantum_ms = 5 };
    job_t b = a;
    b.id = 1;
    ev_t *e;
    int n = run_jobs((job_t[]){ a, b }, 2, &e);
    assert_int_equal(n, 80);
    assert_no_overlap(e, n);
    free(e);
    shm_close_table(t);
}

static void test_report_fields(void **state)
{
    (void)state;
    char ra[600], rb[600];
    snprintf(ra, sizeof ra, "%s/report-a", tu_tmpdir());
    snprintf(rb, sizeof rb, "%s/report-b", tu_tmpdir());
    job_t a = { .id = 0, .iterations = 40, .kernels = 2, .kernel_us = 1000, .sync = 1,
                .quantum_ms = 10, .report = ra };
    job_t b = a;
    b.id = 1;
    b.start_ms = 5;
    b.report = rb;
    run_jobs((job_t[]){ a, b }, 2, NULL);
    for (int i = 0; i < 2; i++) {
        char *text = tu_read_file(i ? rb : ra, NULL);
        assert_non_null(text);
        double v;
        char policy[32];
        assert_int_equal(tu_json_num(text, "iterations", &v), 0);
        assert_true(v == 40);
        assert_int_equal(tu_json_num(text, "iter_ms", &v), 0);
        assert_true(v >= 1.5);                       /* 2 ms of kernels, waits excluded */
        assert_int_equal(tu_json_num(text, "gpu_held_ms", &v), 0);
        assert_true(v >= 70);
        assert_int_equal(tu_json_num(text, "waited_ms", &v), 0);
        assert_true(v > 0);
        assert_int_equal(tu_json_num(text, "switches", &v), 0);
        assert_true(v >= 1);
        assert_int_equal(tu_json_num(text, "handoff_us_p50", &v), 0);
        assert_true(v > 0);
        assert_int_equal(tu_json_num(text, "handoff_us_p99", &v), 0);
        assert_int_equal(tu_json_str(text, "policy", policy, sizeof policy), 0);
        assert_string_equal(policy, "fair");
        free(text);
    }
}

int main(void)
{
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fair_alternates_whole_iterations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fair_fills_host_phases, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fair_three_jobs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_priority_preempts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fifo_one_after_another, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pack_interleaves, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigkill_holder, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_holder_released, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rest_between_iterations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kernel_sequence_boundaries, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_slice, setup, teardown),
        cmocka_unit_test_setup_teardown(test_iteration_hint, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fork_child_not_in_table, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_tables_fail_open, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupted_areas, setup, teardown),
        cmocka_unit_test_setup_teardown(test_report_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lock_stall_recovers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lock_stall_recovers_without_syncs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupted_own_slot, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
