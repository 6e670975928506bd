/*
 * test_sched_devices.c - which device a process is scheduled on, over
 * simgpu with libsalus preloaded (the client tests/clients/devclient):
 *   stream   CUDA 13: a CUkernel launched on a stream of device 1 while
 *            device 0's context is current runs on device 1, and is gated,
 *            charged and drained there: beside a peer on device 1 no work
 *            crosses (tu_trace_cross_submits), and device 0 is never
 *            scheduled (the table sets up no device for it).
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

static void finish(tu_proc_t *p, const char *who)
{
    int rc = tu_wait(p, CHILD_MS);
    if (rc != 0) {
        char *out = tu_read_file(p->out_path, NULL), *err = tu_read_file(p->err_path, NULL);
        fail_msg("the %s exited %d: %s / %s", who, rc, out ? out : "", err ? err : "");
    }
}

typedef struct watch {
    shm_table_t *t;
    pid_t pid;
} watch_t;

static int registered(void *arg)
{
    const watch_t *w = arg;
    return ts_state(w->t, w->pid) >= 0;
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

/* ---- the stream's device (CUDA 13) ----------------------------------------- */

static void test_stream_device(void **state)
{
    (void)state;
    names("sdvs");
    tu_proc_t peer, client;
    spawn_train(&peer, 2, 1, "400", NULL, NULL);
    shm_table_t *t = ts_open_table(table_name, CHILD_MS);
    assert_non_null(t);
    watch_t w = { t, peer.pid };
    if (!tu_await(registered, &w, CHILD_MS))
        fail_msg("the peer never registered");
    char *args[] = { "stream", "60", "500", NULL };
    spawn_client(&client, 2, args);
    finish(&client, "client");
    finish(&peer, "peer");

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

int main(void)
{
    if (!tu_built("tests/clients/devclient") || !tu_built("bin/salus-train"))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
