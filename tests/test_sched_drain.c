/*
 * test_sched_drain.c - a handoff is exclusive: under fifo, fair, priority
 * and srtf, no process submits work to the device while another process's
 * work there is unfinished (tu_trace_cross_submits over simgpu's trace, its
 * submit_ns beside start_ns/end_ns).  A job (tests/clients/drainclient)
 * whose work is still queued or running when it reaches what looks like a
 * boundary shares the GPU with a plain peer:
 *   side     its last kernel of each iteration on a non-blocking side stream,
 *            which its sync of the legacy stream does not wait for;
 *   poll     it polls cuEventQuery / cuStreamQuery and never blocks;
 *   queue    32 iterations queued ahead (JAX's dispatch);
 *   threads  two threads launching on two streams;
 *   hold     SIGKILLed with work queued (simgpu cuts a dead process's work,
 *            as the driver tears its contexts down);
 *   hostfn   it learns of each step's end from a host callback, never
 *            syncing in the driver (JAX); its iterations are found there.
 * A peer whose iterations begin with a memset and a copy (gated as launches
 * are) against the queued job, under fair and fifo; and a job with 1.6 s
 * of work queued ahead, longer than any fixed bound on the wait.
 * Under pack, overlap is allowed: a job's submissions cross a queued peer's.
 * The job starts first and takes the GPU; the peer joins once the job is
 * registered, so that the GPU changes hands while the job has work left.
 * Short kernels and a 2 ms quantum keep each run near a second.
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
#include "lib/testutil.h"
#include "test_sched_lib.h"

#define CHILD_MS 60000

static char state_name[64], table_name[64], trace[600];

static void env_for(tu_env_t *env, const char *policy, int priority)
{
    tu_env_init(env);
    tu_env_salus(env, state_name, table_name);
    tu_env_set(env, "SIMGPU_TRACE", "%s", trace);
    tu_env_set(env, "SALUS_POLICY", "%s", policy);
    tu_env_set(env, "SALUS_QUANTUM_MS", "2");
    tu_env_set(env, "SALUS_MAX_SLICE_MS", "20");
    tu_env_set(env, "SALUS_PRIORITY", "%d", priority);
    tu_env_unset(env, "SALUS_LOG");
    tu_env_unset(env, "SALUS_REPORT");
}

static void spawn_client(tu_proc_t *p, const char *policy, int priority, const char *pattern,
                         const char *iters, const char *kernel_us)
{
    char client[512], cubin[512];
    char *argv[] = { (char *)tu_build_path("tests/clients/drainclient", client, sizeof client),
                     (char *)tu_build_path("workloads/kernels.cubin", cubin, sizeof cubin),
                     (char *)pattern, (char *)iters, (char *)kernel_us, NULL };
    tu_env_t env;
    env_for(&env, policy, priority);
    assert_int_equal(tu_spawn(p, argv, &env), 0);
    tu_env_free(&env);
}

static int printed_queued(void *arg)
{
    char *out = tu_read_file(((tu_proc_t *)arg)->out_path, NULL);
    int yes = out && strstr(out, "queued") != NULL;
    free(out);
    return yes;
}

/* The job (pattern) against a plain peer under policy; returns the count of
 * cross submissions in the trace, after checking that both ran.  The peer
 * has the higher priority (priority preempts at the job's boundaries). */
static long run_pair_with(const char *policy, const char *pattern, const char *iters,
                          const char *peer_pattern, const char *job_us)
{
    tu_unique_name("sdr", state_name, sizeof state_name);
    tu_unique_name("stdr", table_name, sizeof table_name);
    snprintf(trace, sizeof trace, "%s/trace-%s.json", tu_tmpdir(), state_name + 1);
    unlink(trace);
    tu_proc_t job, peer;
    int hold = !strcmp(pattern, "hold");
    spawn_client(&job, policy, 50, pattern, iters, job_us);
    shm_table_t *t = ts_open_table(table_name, CHILD_MS);
    assert_non_null(t);
    ts_watch_t w = { t, job.pid, TS_REGISTERED };
    if (!tu_await(ts_in_state, &w, CHILD_MS))
        fail_msg("the job never registered");
    if (hold && !tu_await(printed_queued, &job, CHILD_MS))
        fail_msg("the job never queued its work");
    spawn_client(&peer, policy, 80, peer_pattern, "40", "500");
    if (hold && !strcmp(policy, "pack")) {      /* nothing waits: killed after */
        ts_finish(&peer, "peer", CHILD_MS);
        kill(job.pid, SIGKILL);
        tu_wait(&job, CHILD_MS);
    } else if (hold) {                          /* killed while the peer waits */
        ts_watch_t pw = { t, peer.pid, SHM_WAIT_GPU };
        if (!tu_await(ts_in_state, &pw, CHILD_MS))
            fail_msg("the peer never waited for the held GPU");
        kill(job.pid, SIGKILL);
        tu_wait(&job, CHILD_MS);
        ts_finish(&peer, "peer", CHILD_MS);
    } else {
        ts_finish(&job, "job", CHILD_MS);
        ts_finish(&peer, "peer", CHILD_MS);
    }
    shm_close_table(t);
    tu_kernel_t *k;
    long n = tu_trace_load_all(trace, &k), first = -1, mine = 0, theirs = 0;
    assert_true(n > 0);
    for (long i = 0; i < n; i++) {
        mine += k[i].pid == job.pid;
        theirs += k[i].pid == peer.pid;
    }
    assert_true(mine > 0 && theirs > 0);
    long cross = tu_trace_cross_submits(k, n, &first);
    assert_true(cross >= 0);
    if (cross > 0)
        print_message("%s/%s: %ld cross submissions, the first by pid %d at %llu "
                      "(job %d, peer %d)\n", policy, pattern, cross, k[first].pid,
                      (unsigned long long)k[first].submit_ns, (int)job.pid, (int)peer.pid);
    free(k);
    unlink(trace);
    shm_unlink(state_name);
    shm_unlink(table_name);
    return cross;
}

static long run_pair(const char *policy, const char *pattern, const char *iters)
{
    return run_pair_with(policy, pattern, iters, "plain", "1000");
}

static int built(void)
{
    return tu_built("sim/libcuda.so.1") && tu_built("libsalus.so") &&
           tu_built("workloads/kernels.cubin") && tu_built("tests/clients/drainclient");
}

#define POLICIES(X) X(fifo) X(fair) X(priority) X(srtf)
#define PATTERNS(X, pol) \
    X(pol, side, "30") X(pol, poll, "30") X(pol, queue, "60") X(pol, threads, "30") \
    X(pol, hold, "300") X(pol, hostfn, "30")

#define TEST_FN(pol, pat, iters)                                        \
    static void test_##pol##_##pat(void **state)                        \
    {                                                                   \
        (void)state;                                                    \
        if (!built())                                                   \
            skip();                                                     \
        assert_int_equal(run_pair(#pol, #pat, iters), 0);               \
    }
#define TEST_FNS(pol) PATTERNS(TEST_FN, pol)
POLICIES(TEST_FNS)

/* A waiter's copies and memsets wait as its launches do: a peer that
 * begins each iteration with them, against a job with 32 iterations queued. */
static void test_fair_copies(void **state)
{
    (void)state;
    if (!built())
        skip();
    assert_int_equal(run_pair_with("fair", "queue", "60", "copies", "1000"), 0);
}

static void test_fifo_copies(void **state)
{
    (void)state;
    if (!built())
        skip();
    assert_int_equal(run_pair_with("fifo", "queue", "60", "copies", "1000"), 0);
}

/* More queued than any fixed bound: 32 iterations of two 25 ms kernels,
 * 1.6 s of work ahead at each of the job's boundaries (JAX's dispatch of a
 * long step).  The new holder waits for all of it (charged to the job)
 * rather than going on beside it after a second. */
static void test_fair_deep_queue(void **state)
{
    (void)state;
    if (!built())
        skip();
    assert_int_equal(run_pair_with("fair", "queue", "40", "plain", "25000"), 0);
}

/* A program that learns of its steps' ends from host callbacks (JAX's
 * PJRT) never syncs in the driver: its iterations are found at the
 * callbacks it enqueues, one per step (the report's count: 40 steps, the
 * period learned within the first few). */
static void test_hostfn_iterations(void **state)
{
    (void)state;
    if (!built())
        skip();
    tu_unique_name("sdr", state_name, sizeof state_name);
    tu_unique_name("stdr", table_name, sizeof table_name);
    char report[600], client[512], cubin[512];
    snprintf(report, sizeof report, "%s/report-%s.json", tu_tmpdir(), state_name + 1);
    unlink(report);
    char *argv[] = { (char *)tu_build_path("tests/clients/drainclient", client, sizeof client),
                     (char *)tu_build_path("workloads/kernels.cubin", cubin, sizeof cubin),
                     "hostfn", "40", "200", NULL };
    tu_env_t env;
    env_for(&env, "fair", 50);
    tu_env_set(&env, "SALUS_REPORT", "%s", report);
    tu_proc_t job;
    assert_int_equal(tu_spawn(&job, argv, &env), 0);
    tu_env_free(&env);
    ts_finish(&job, "job", CHILD_MS);
    char *text = tu_read_file(report, NULL);
    assert_non_null(text);
    double its = tu_json_need(text, "iterations"), syncs = tu_json_need(text, "syncs");
    free(text);
    print_message("hostfn: %.0f iterations found for 40 steps, %.0f syncs\n", its, syncs);
    assert_true(its >= 36 && its <= 41);
    assert_true(syncs <= 1);                         /* the final context synchronize */
    unlink(report);
    shm_unlink(state_name);
    shm_unlink(table_name);
}

/* Under pack nothing is gated: the peer submits into the held job's queue. */
static void test_pack_overlaps(void **state)
{
    (void)state;
    if (!built())
        skip();
    assert_true(run_pair("pack", "hold", "300") > 0);
}

#define TEST_ROW(pol, pat, iters) cmocka_unit_test(test_##pol##_##pat),
#define TEST_ROWS(pol) PATTERNS(TEST_ROW, pol)

int main(void)
{
    const struct CMUnitTest tests[] = {
        POLICIES(TEST_ROWS)
        cmocka_unit_test(test_fair_copies),
        cmocka_unit_test(test_fifo_copies),
        cmocka_unit_test(test_fair_deep_queue),
        cmocka_unit_test(test_hostfn_iterations),
        cmocka_unit_test(test_pack_overlaps),
    };
    return cmocka_run_group_tests_name("exclusive handoffs", tests, NULL, NULL);
}
