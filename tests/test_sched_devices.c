/*
 * test_sched_devices.c - which device a process is scheduled on, over
 * simgpu with libsalus preloaded (the client tests/clients/devclient):
 *   stream   CUDA 13: a CUkernel launched on a stream of device 1 while
 *            device 0's context is current runs on device 1, and is gated,
 *            charged and drained there: beside a peer on device 1 no work
 *            crosses (tu_trace_cross_submits), and device 0 is never
 *            scheduled (the table sets up no device for it);
 *   enroll   JAX's start: a job reserving memory (SALUS_MEM_RESERVE) with
 *            contexts on 4 devices that launches and allocates on device 0
 *            only is scheduled and listed (salus-top --json) on device 0
 *            only, and a peer reserving memory on device 2, which the two
 *            reservations would overfill, is admitted at once, not when the
 *            job ends.
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
#include "sched/sched.h"
#include "test_sched_lib.h"

#define CHILD_MS 60000

static char state_name[64], table_name[64], trace[600];

static void names(const char *tag)
{
    tu_unique_name(tag, state_name, sizeof state_name);
    tu_unique_name("stdv", table_name, sizeof table_name);
    snprintf(trace, sizeof trace, "%s/trace-%s.json", tu_tmpdir(), state_name + 1);
    unlink(trace);
}

static void cleanup(void)
{
    unlink(trace);
    shm_unlink(state_name);
    shm_unlink(table_name);
}

static void env_for(tu_env_t *env, int devices)
{
    tu_env_init(env);
    tu_env_salus(env, state_name, table_name);
    tu_env_set(env, "SIMGPU_DEVICES", "%d", devices);
    tu_env_set(env, "SIMGPU_TRACE", "%s", trace);
    tu_env_set(env, "SALUS_POLICY", "fair");
    tu_env_set(env, "SALUS_QUANTUM_MS", "2");
    tu_env_unset(env, "SALUS_LOG");
    tu_env_unset(env, "SALUS_REPORT");
}

static void spawn_client(tu_proc_t *p, int devices, char *const *args)
{
    char client[512], cubin[512];
    char *argv[12] = { (char *)tu_build_path("tests/clients/devclient", client, sizeof client),
                       (char *)tu_build_path("workloads/kernels.cubin", cubin, sizeof cubin) };
    for (int i = 0; args[i] && i < 9; i++)
        argv[2 + i] = args[i];
    tu_env_t env;
    env_for(&env, devices);
    assert_int_equal(tu_spawn(p, argv, &env), 0);
    tu_env_free(&env);
}

static void spawn_train(tu_proc_t *p, int devices, int device, const char *iters,
                        const char *extra_name, const char *extra_value)
{
    char train[512], dev[16];
    snprintf(dev, sizeof dev, "%d", device);
    char *argv[] = { (char *)tu_build_path("bin/salus-train", train, sizeof train),
                     "--device", dev, "--iterations", (char *)iters, "--kernels", "2",
                     "--kernel-us", "500", "--sync", "stream", NULL };
    tu_env_t env;
    env_for(&env, devices);
    if (extra_name)
        tu_env_set(&env, extra_name, "%s", extra_value);
    assert_int_equal(tu_spawn(p, argv, &env), 0);
    tu_env_free(&env);
}

/* The uuid the client printed for `ordinal` ("uuid <n> <hex>"): 0, or -1. */
static int client_uuid(const tu_proc_t *p, int ordinal, unsigned char uuid[16])
{
    char *out = tu_read_file(p->out_path, NULL), line[128], want[16];
    snprintf(want, sizeof want, "uuid %d ", ordinal);
    int rc = out && tu_find_line(out, want, 0, line, sizeof line) == 0 ? 0 : -1;
    for (int i = 0; rc == 0 && i < 16; i++) {
        unsigned b;
        if (sscanf(line + strlen(want) + 2 * i, "%2x", &b) != 1)
            rc = -1;
        uuid[i] = (unsigned char)b;
    }
    free(out);
    return rc;
}

static int printed_ready(void *arg)
{
    tu_proc_t *p = arg;
    char *out = tu_read_file(p->out_path, NULL);
    int yes = out && strstr(out, "ready\n") != NULL;
    free(out);
    return yes || tu_exited(p);
}

/* ---- the stream's device (CUDA 13) ----------------------------------------- */

static void test_stream_device(void **state)
{
    (void)state;
    names("sdvs");
    tu_proc_t peer, client;
    spawn_train(&peer, 2, 1, "400", NULL, NULL);
    shm_table_t *t = ts_open_table(table_name, CHILD_MS);
    assert_non_null(t);
    ts_watch_t w = { t, peer.pid, TS_REGISTERED };
    if (!tu_await(ts_in_state, &w, CHILD_MS))
        fail_msg("the peer never registered");
    char *args[] = { "stream", "60", "500", NULL };
    spawn_client(&client, 2, args);
    ts_finish(&client, "client", CHILD_MS);
    ts_finish(&peer, "peer", CHILD_MS);

    unsigned char gpu1[16];
    assert_int_equal(client_uuid(&client, 1, gpu1), 0);
    int devices = 0;
    for (int d = 0; d < SHM_MAX_DEVICES; d++) {
        sched_device_info_t info;
        if (sched_read_device(t, d, &info) != 0)
            continue;
        devices++;
        if (memcmp(info.uuid, gpu1, 16) != 0)
            fail_msg("table device %d is not GPU 1: the client's launches on its device-1 "
                     "stream were scheduled on the current context's device", d);
    }
    assert_int_equal(devices, 1);

    tu_kernel_t *k;
    long n = tu_trace_load_all(trace, &k);
    assert_true(n > 0);
    long mine = 0, theirs = 0, first = -1;
    for (long i = 0; i < n; i++) {
        if (k[i].pid == client.pid) {
            assert_int_equal(k[i].device, 1);   /* simgpu ran it in the stream's context */
            mine++;
        }
        theirs += k[i].pid == peer.pid;
    }
    assert_int_equal(mine, 120);
    assert_true(theirs > 0);
    long cross = tu_trace_cross_submits(k, n, &first);
    if (cross != 0)
        fail_msg("%ld submissions crossed another process's unfinished work on device 1, "
                 "the first by pid %d (client %d, peer %d)", cross, first >= 0 ? k[first].pid : 0,
                 (int)client.pid, (int)peer.pid);
    free(k);
    shm_close_table(t);
    cleanup();
}

/* ---- enrollment at first use ---------------------------------------------------- */

/* The rows salus-top --once --json shows for pid: -1 when it cannot run. */
static int top_rows(pid_t pid)
{
    char top[512];
    char *argv[] = { (char *)tu_build_path("bin/salus-top", top, sizeof top), "--once",
                     "--json", "-d", "0", "-t", table_name, NULL };
    tu_env_t env;
    tu_env_init(&env);
    tu_proc_t p;
    int rc = tu_run(argv, &env, 20000, &p);
    tu_env_free(&env);
    char *out = rc == 0 ? tu_read_file(p.out_path, NULL) : NULL;
    if (!out)
        return -1;
    char needle[32];
    int n = 0;
    snprintf(needle, sizeof needle, "\"pid\":%d,", (int)pid);
    for (const char *at = out; (at = strstr(at, needle)) != NULL; at += strlen(needle))
        n++;
    free(out);
    return n;
}

static void test_enroll_at_first_use(void **state)
{
    (void)state;
    names("sdve");
    tu_proc_t job, peer;
    char *args[] = { "enroll", "4", "100000", "500", "67108864", NULL };
    char client[512], cubin[512];
    char *argv[] = { (char *)tu_build_path("tests/clients/devclient", client, sizeof client),
                     (char *)tu_build_path("workloads/kernels.cubin", cubin, sizeof cubin),
                     args[0], args[1], args[2], args[3], args[4], NULL };
    tu_env_t env;
    env_for(&env, 4);
    tu_env_set(&env, "SALUS_MEM_RESERVE", "10G");      /* of SIMGPU_MEMORY=16G a device */
    assert_int_equal(tu_spawn(&job, argv, &env), 0);
    tu_env_free(&env);
    if (!tu_await(printed_ready, &job, CHILD_MS) || tu_exited(&job))
        fail_msg("the job never got ready");
    shm_table_t *t = ts_open_table(table_name, CHILD_MS);
    assert_non_null(t);

    spawn_train(&peer, 4, 2, "20", "SALUS_MEM_RESERVE", "8G");
    uint64_t t0 = tu_now_ns();
    int rc = tu_wait(&peer, 15000);                     /* the job runs about 100 s */
    double took_ms = (double)(tu_now_ns() - t0) / 1e6;
    int rows = top_rows(job.pid);
    sched_slot_info_t si;
    int slot = -1;
    for (int s = 0; s < SHM_MAX_SLOTS && slot < 0; s++) {
        shm_ident_t id;
        if (shm_slot_ident(t, s, &id) == 0 && id.pid == job.pid)
            slot = s;
    }
    int have_si = slot >= 0 && sched_read_slot(t, slot, &si) == 0;
    kill(job.pid, SIGKILL);
    tu_wait(&job, CHILD_MS);
    if (rc != 0)
        fail_msg("the peer reserving 8G on device 2 %s after %.0f ms: the job's reservation "
                 "held device 2, where it never launched nor allocated",
                 rc < 0 ? "was still waiting" : "failed", took_ms);
    print_message("      the peer ran its 20 iterations in %.0f ms beside the job\n", took_ms);
    assert_true(have_si);
    if (__builtin_popcount(si.devices) != 1)
        fail_msg("the job is scheduled on devices %#x, though it launched on one", si.devices);
    if (rows != 1)
        fail_msg("salus-top lists the job %d times, though it uses one device", rows);
    shm_close_table(t);
    cleanup();
}

int main(void)
{
    if (!tu_built("tests/clients/devclient") || !tu_built("bin/salus-train") ||
        !tu_built("bin/salus-top"))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_device),
        cmocka_unit_test(test_enroll_at_first_use),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
