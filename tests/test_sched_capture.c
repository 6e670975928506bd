/*
 * test_sched_capture.c - stream capture is never broken by Salus: a process
 * (tests/clients/capclient, as torch.cuda.graph does: global mode, a side
 * stream) captures a graph of 50 launches while a peer (salus-train) waits
 * for the GPU, under fair with SALUS_QUANTUM_MS=1 and SALUS_MAX_SLICE_MS=5,
 * over simgpu, whose context synchronize invalidates a global capture as the
 * driver's does.  The peer runs first; the capturing process's first launch
 * waits for it, takes the GPU at its boundary, and the capture begins at
 * once, so that the peer, which still has iterations to run, waits and looks
 * at the holder (probing it) while the capture goes on, long past the max
 * slice.  The capture ends successfully (libsalus neither gated the recorded
 * launches nor synchronized the context to hand the GPU over: the handoff
 * waited for the capture's end), the graph launches, both processes finish,
 * and in the trace no kernel of the peer runs among the graph's: they ran
 * inside one tenure of the holder.  And with SALUS_SWAP=on, a chunk the
 * allocator keeps is not let go (unmapped) during a capture.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "lib/testutil.h"
#include "test_sched_lib.h"

#define CHILD_MS 60000
#define LAUNCHES 50
#define PEER_ITERS "300"      /* 1.2 s of GPU work: it outlasts the capturing process */

static char state_name[64], table_name[64], trace[600], report[600];

static int have(const char *rel)
{
    char path[512];
    return access(tu_build_path(rel, path, sizeof path), R_OK) == 0;
}

static void env_for(tu_env_t *env)
{
    tu_env_init(env);
    tu_env_salus(env, state_name, table_name);
    tu_env_set(env, "SIMGPU_TRACE", "%s", trace);
    tu_env_set(env, "SALUS_REPORT", "%s", report);
    tu_env_set(env, "SALUS_POLICY", "fair");
    tu_env_set(env, "SALUS_QUANTUM_MS", "1");
    tu_env_set(env, "SALUS_MAX_SLICE_MS", "5");
    tu_env_unset(env, "SALUS_LOG");
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

/* The capturing process's output once it exited 0 (else the test fails
 * with its output and errors). */
static char *capture_output(tu_proc_t *cap)
{
    int rc = tu_wait(cap, CHILD_MS);
    char *out = tu_read_file(cap->out_path, NULL);
    if (rc != 0) {
        char *err = tu_read_file(cap->err_path, NULL);
        fail_msg("the capturing process exited %d: %s / %s", rc, out ? out : "",
                 err ? err : "");
    }
    return out;
}

/* The last JSON line of the capturing process: a number. */
static double step(const char *out, const char *key)
{
    double v = -1;
    const char *last = out ? strrchr(out, '{') : NULL;
    if (!last || tu_json_num(last, key, &v) != 0)
        fail_msg("no \"%s\" in the capturing process's result: %s", key, out ? out : "");
    return v;
}

static void test_capture_while_peer_waits(void **state)
{
    (void)state;
    if (!have("sim/libcuda.so.1") || !have("bin/salus-train") || !have("libsalus.so") ||
        !have("workloads/kernels.cubin") || !have("tests/clients/capclient"))
        skip();   /* built by make test; a partial build lacks them */
    tu_unique_name("scap", state_name, sizeof state_name);
    tu_unique_name("stcap", table_name, sizeof table_name);
    snprintf(trace, sizeof trace, "%s/trace-%s.json", tu_tmpdir(), state_name + 1);
    snprintf(report, sizeof report, "%s/report-%s.json", tu_tmpdir(), state_name + 1);
    unlink(trace);
    unlink(report);

    char client[512], cubin[512], train[512], launches[16];
    snprintf(launches, sizeof launches, "%d", LAUNCHES);
    char *cap_argv[] = { (char *)tu_build_path("tests/clients/capclient", client, sizeof client),
                         (char *)tu_build_path("workloads/kernels.cubin", cubin, sizeof cubin),
                         launches, NULL };
    char *peer_argv[] = { (char *)tu_build_path("bin/salus-train", train, sizeof train),
                          "--iterations", PEER_ITERS, "--kernels", "4", "--kernel-us", "1000",
                          NULL };
    tu_env_t env;
    env_for(&env);
    tu_proc_t cap, peer;
    assert_int_equal(tu_spawn(&peer, peer_argv, &env), 0);
    shm_table_t *t = ts_open_table(table_name, CHILD_MS);
    assert_non_null(t);
    ts_watch_t w = { t, peer.pid, TS_REGISTERED };
    if (!tu_await(ts_in_state, &w, CHILD_MS))
        fail_msg("the peer never registered");
    shm_close_table(t);
    assert_int_equal(tu_spawn(&cap, cap_argv, &env), 0);
    tu_env_free(&env);

    char *out = capture_output(&cap);
    assert_int_equal(step(out, "recorded"), LAUNCHES);
    assert_int_equal(step(out, "end"), 0);          /* CUDA_SUCCESS: not invalidated */
    assert_int_equal(step(out, "launch"), 0);
    assert_int_equal(step(out, "sync"), 0);
    free(out);
    ts_finish(&peer, "peer", CHILD_MS);
    assert_true(reported(peer.pid, "waited_ms") > 0);

    /* The graph's kernels (the capturing process's only salus_fill) ran
     * with none of the peer's among them. */
    tu_kernel_t *k;
    long n = tu_trace_load(trace, &k), first = -1, last = -1, fills = 0, peers = 0, after = 0;
    assert_true(n > 0);
    for (long i = 0; i < n; i++) {
        if (k[i].pid == cap.pid && !strcmp(k[i].name, "salus_fill")) {
            fills++;
            last = i;
            if (first < 0)
                first = i;
        }
        peers += k[i].pid == peer.pid;
    }
    assert_int_equal(fills, LAUNCHES);
    assert_int_equal(peers, atoi(PEER_ITERS) * 4);
    for (long i = last + 1; i < n; i++)
        after += k[i].pid == peer.pid;
    if (after == 0)
        fail_msg("the peer had finished before the graph ran: it never waited for it");
    for (long i = first; i <= last; i++)
        if (k[i].pid != cap.pid)
            fail_msg("a kernel of pid %d ran among the graph's", k[i].pid);
    for (long i = 0; i < n; i++)
        if (k[i].pid == peer.pid && k[i].start_ns < k[last].end_ns &&
            k[i].end_ns > k[first].start_ns)
            fail_msg("a kernel of the peer overlaps the graph's");
    free(k);
    unlink(report);
    unlink(trace);
    shm_unlink(state_name);
    shm_unlink(table_name);
}

/* Paging's allocator keeps a freed chunk for reuse and lets it go past its
 * time on the drain thread, by unmapping it, which a global capture
 * forbids (simgpu's cuMemUnmap refuses and invalidates, as cuMemFree
 * does).  A chunk freed just before a capture of 400 launches (about
 * 400 ms, past the keep's 250) must outlive the capture: the capture
 * ends with its graph (it was invalidated at about its 70th launch). */
static void test_keep_tick_during_capture(void **state)
{
    (void)state;
    if (!have("sim/libcuda.so.1") || !have("libsalus.so") ||
        !have("workloads/kernels.cubin") || !have("tests/clients/capclient"))
        skip();
    tu_unique_name("skeep", state_name, sizeof state_name);
    tu_unique_name("stkeep", table_name, sizeof table_name);
    char client[512], cubin[512];
    char *argv[] = { (char *)tu_build_path("tests/clients/capclient", client, sizeof client),
                     (char *)tu_build_path("workloads/kernels.cubin", cubin, sizeof cubin),
                     "400", NULL };
    tu_env_t env;
    tu_env_init(&env);
    tu_env_salus(&env, state_name, table_name);
    tu_env_set(&env, "SALUS_SWAP", "on");
    tu_env_set(&env, "CAP_FREED", "%llu", 64ull << 20);
    tu_env_unset(&env, "SALUS_LOG");
    tu_proc_t cap;
    assert_int_equal(tu_spawn(&cap, argv, &env), 0);
    tu_env_free(&env);
    char *out = capture_output(&cap);
    assert_int_equal(step(out, "recorded"), 400);
    assert_int_equal(step(out, "end"), 0);
    assert_int_equal(step(out, "sync"), 0);
    free(out);
    shm_unlink(state_name);
    shm_unlink(table_name);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capture_while_peer_waits),
        cmocka_unit_test(test_keep_tick_during_capture),
    };
    return cmocka_run_group_tests_name("stream capture under the scheduler", tests, NULL, NULL);
}
