/*
 * test_memory_drv.c - the driver's other ways of holding device memory,
 * end to end: tests/clients/memclient over simgpu with libsalus preloaded.
 * A cuMemCreate is charged to the device its properties name (device 1 with
 * device 0 current, or with no context at all), and not at all when it is
 * host memory; a VMM handle is charged until it is both released and
 * unmapped; a pool's reserved memory is charged while the pool keeps it, so
 * that a peer that needs it is refused by Salus, not by the driver, and
 * given back when the pool releases it at a synchronize; a graph's
 * allocation node is charged as the device's graph memory, until trimmed.
 *
 * Each test has its own simgpu state and table.  A refusal by Salus is told
 * from the driver's by the report's oom_refusals.
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
#include "lib/salusrun.h"
#include "lib/testutil.h"
#include "memory/memory.h"

#define MB (1ull << 20)
#define GB (1ull << 30)
#define OOM CUDA_ERROR_OUT_OF_MEMORY

static sr_names_t names;          /* this test's state, table and report */

static int setup(void **state)
{
    (void)state;
    sr_names(&names, "salus-mdrv");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sr_unlink(&names);
    return 0;
}

/* A run of memclient. */
typedef struct run {
    tu_proc_t p;
    int rc;
    char json[1024];
} run_t;

/* memclient <mode> [arg [arg2]] under libsalus, with extra NAME=value pairs. */
static void start2(run_t *r, const char *const *vars, const char *mode, const char *arg,
                   const char *arg2)
{
    tu_env_t env;
    char prog[512];
    sr_env(&env, &names);
    tu_env_set(&env, "SIMGPU_CTX_MEMORY", "0");   /* contexts' memory is not the subject */
    tu_env_set(&env, "SALUS_MEM_WAIT_MS", "0");    /* a full device refuses at once */
    sr_env_vars(&env, vars);
    char *argv[] = { (char *)tu_build_path("tests/clients/memclient", prog, sizeof prog),
                     (char *)mode, (char *)arg, (char *)arg2, NULL };
    assert_int_equal(tu_spawn(&r->p, argv, &env), 0);
    tu_env_free(&env);
}

static void start(run_t *r, const char *const *vars, const char *mode, const char *arg)
{
    start2(r, vars, mode, arg, NULL);
}

static int said_line(void *arg)
{
    run_t *r = arg;
    char *out = tu_read_file(r->p.out_path, NULL);
    int found = out && tu_find_line(out, "\"program\":\"memclient\"", 0, r->json,
                                    sizeof r->json) == 0;
    free(out);
    return found;
}

static void finish(run_t *r)
{
    r->rc = tu_wait(&r->p, 60000);
    r->json[0] = '\0';
    said_line(r);
    if (r->rc != 0 || !r->json[0]) {
        char *err = tu_read_file(r->p.err_path, NULL);
        fail_msg("memclient exited %d, said '%s'; stderr:\n%s", r->rc, r->json,
                 err ? err : "");
    }
}

static void run(run_t *r, const char *const *vars, const char *mode, const char *arg)
{
    start(r, vars, mode, arg);
    finish(r);
}

static int step(const run_t *r, int i)
{
    char key[8];
    snprintf(key, sizeof key, "r%d", i);
    return (int)tu_json_need(r->json, key);
}

/* A number from pid's report line. */
static double report_num(pid_t pid, const char *key)
{
    return sr_report_num(&names, pid, key);
}

static int have_client(void)
{
    return tu_built("tests/clients/memclient") && tu_built("libsalus.so") &&
           tu_built("sim/libcuda.so.1");
}

/* ---- the right device ------------------------------------------------------ */

static void test_create_charges_its_location(void **state)
{
    (void)state;
    if (!have_client())
        skip();
    run_t r;
    const char *const two[] = { "SIMGPU_DEVICES=2", "SALUS_MEM_LIMIT=100M", NULL };
    run(&r, two, "vmm-device", NULL);
    assert_int_equal(step(&r, 0), CUDA_SUCCESS);   /* 64 MiB on device 1 */
    assert_int_equal(step(&r, 1), OOM);            /* device 1 is at 64 of 100 */
    assert_int_equal(step(&r, 2), CUDA_SUCCESS);   /* device 0 was never charged */
    assert_int_equal(step(&r, 3), OOM);            /* no context: charged all the same */
    assert_int_equal(step(&r, 4), CUDA_SUCCESS);
    assert_int_equal(step(&r, 5), CUDA_SUCCESS);   /* room again after the release */
    assert_int_equal(report_num(r.p.pid, "oom_refusals"), 2);

    /* A refusal names the CUDA ordinal and the uuid, not a table index. */
    char *err = tu_read_file(r.p.err_path, NULL);
    assert_non_null(err);
    char line[512];
    assert_int_equal(tu_find_line(err, "refused", 0, line, sizeof line), 0);
    assert_non_null(strstr(line, "CUDA device 1 (GPU-"));
    free(err);
}

static void test_host_create_not_charged(void **state)
{
    (void)state;
    if (!have_client())
        skip();
    run_t r;
    const char *const small[] = { "SALUS_MEM_LIMIT=4M", NULL };
    run(&r, small, "vmm-host", NULL);
    assert_int_equal(step(&r, 0), CUDA_SUCCESS);   /* 8 MiB of host memory */
    assert_int_equal(step(&r, 1), OOM);            /* 8 MiB of device memory */
    assert_int_equal(step(&r, 2), CUDA_SUCCESS);
    assert_int_equal(report_num(r.p.pid, "oom_refusals"), 1);
}

/* ---- VMM memory lives until its last mapping goes ---------------------------- */

static void test_mapped_handle_stays_charged(void **state)
{
    (void)state;
    if (!have_client())
        skip();
    run_t r;
    const char *const small[] = { "SALUS_MEM_LIMIT=4M", NULL };
    run(&r, small, "vmm-map", NULL);
    assert_int_equal(step(&r, 0), CUDA_SUCCESS);   /* create, map, release 2 MiB */
    assert_int_equal(step(&r, 1), CUDA_SUCCESS);   /* 4 MiB mapped */
    assert_int_equal(step(&r, 2), OOM);            /* released, yet still mapped */
    assert_int_equal(step(&r, 3), OOM);
    assert_int_equal(step(&r, 4), CUDA_SUCCESS);   /* unmapped: given back */
    assert_int_equal(step(&r, 5), CUDA_SUCCESS);
    assert_int_equal(report_num(r.p.pid, "oom_refusals"), 2);
    assert_int_equal(report_num(r.p.pid, "mem_used_bytes"), 0);
}

/* ---- pools keep memory --------------------------------------------------------- */

/* A pool with an infinite release threshold keeps the 1 GiB freed into it:
 * Salus charges it to its owner, and refuses a peer that needs it (counted
 * in the peer's oom_refusals: not the driver's refusal).  The same pool
 * with the default threshold gives it back at its synchronize, and the
 * peer fits. */
static void pool_peer(const char *threshold, CUresult want)
{
    run_t holder, peer;
    const char *const two_g[] = { "SIMGPU_MEMORY=2G", NULL };
    start2(&holder, two_g, "pool-hold", "1024", threshold);
    if (!tu_await(said_line, &holder, 20000))
        fail_msg("the pool's holder never said it holds its pool");
    for (int i = 0; i < 7; i++)
        assert_int_equal(step(&holder, i), CUDA_SUCCESS);
    run(&peer, two_g, "alloc", "1536");
    kill(holder.p.pid, SIGKILL);
    tu_wait(&holder.p, 10000);
    assert_int_equal(step(&peer, 0), want);
    assert_int_equal(report_num(peer.p.pid, "oom_refusals"), want == OOM ? 1 : 0);
}

static void test_pool_keeps_memory(void **state)
{
    (void)state;
    if (!have_client())
        skip();
    pool_peer("max", OOM);
    pool_peer("0", CUDA_SUCCESS);
}

/* ---- graph memory ---------------------------------------------------------------- */

/* The same checks whichever call added the allocation nodes. */
static void graph_memory_charged(const char *mode)
{
    if (!have_client())
        skip();
    run_t r;
    const char *const small[] = { "SALUS_MEM_LIMIT=100M", NULL };
    run(&r, small, mode, NULL);
    assert_int_equal(step(&r, 0), CUDA_SUCCESS);   /* a 64 MiB allocation node */
    assert_int_equal(step(&r, 1), OOM);            /* a second: admission refuses it */
    assert_int_equal(step(&r, 2), CUDA_SUCCESS);   /* the graph launches */
    assert_int_equal(step(&r, 3), OOM);            /* its memory is charged */
    assert_int_equal(step(&r, 4), OOM);            /* destroyed, still reserved */
    assert_int_equal(step(&r, 5), CUDA_SUCCESS);
    assert_int_equal(step(&r, 6), CUDA_SUCCESS);   /* trimmed: given back */
    assert_int_equal(report_num(r.p.pid, "oom_refusals"), 3);
    assert_int_equal(report_num(r.p.pid, "mem_used_bytes"), 0);
}

static void test_graph_memory_charged(void **state)
{
    (void)state;
    graph_memory_charged("graph-mem");
}

/* cuGraphAddNode's allocation nodes (XLA's way) are charged as well. */
static void test_graph_memory_charged_generic(void **state)
{
    (void)state;
    graph_memory_charged("graph-mem-generic");
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_create_charges_its_location),
        T(test_host_create_not_charged),
        T(test_mapped_handle_stays_charged),
        T(test_pool_keeps_memory),
        T(test_graph_memory_charged),
        T(test_graph_memory_charged_generic),
    };
    return cmocka_run_group_tests_name("memory-drv", tests, NULL, NULL);
}
