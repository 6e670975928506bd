/*
 * test_memory_preempt.c - priority preemption on a full device with paging
 * (SALUS_SWAP=on), over simgpu with libsalus preloaded into pageclient:
 *
 *   - a low-priority job holds 3 GiB of a 4 GiB device and runs; a
 *     high-priority job that needs 3 GiB arrives.  Its allocation waits for
 *     memory (SALUS_MEM_WAIT_MS=0: without paging it would be refused at
 *     once), queued for the GPU meanwhile, so that the low job yields at a
 *     boundary and, waiting at the gate, is paged out for it.  Both finish,
 *     nothing fails, and every byte of both jobs' memory is intact;
 *   - the same, at half the sizes, with both jobs' memory from
 *     cuMemAllocAsync (the default pool's stream-ordered allocations, which
 *     paging serves too; without it the high job is refused);
 *   - the same with the low job's paging off: its memory cannot move, so
 *     the high job, which took the GPU with a first kernel and then waits
 *     for memory, gives the GPU back and leaves the queue (held, the GPU would stall the low job, which
 *     frees the memory only by running to its end, until the high job's
 *     SALUS_MEM_WAIT_MS refused it); both finish;
 *   - the same with the high job's SALUS_MEM_WAIT_MS at 200 ms: it would fit
 *     alone, so it waits while the low job can still end, and is not
 *     refused.
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
#include <fcntl.h>

#include "lib/testutil.h"

#define CHILD_MS 240000

static char state_name[64], table_name[64];

static void spawn_swap(tu_proc_t *p, int priority, const char *iters, int async,
                       const char *swap, const char *wait_ms)
{
    char client[512], cubin[512];
    char *argv[] = { (char *)tu_build_path("tests/clients/pageclient", client, sizeof client),
                     (char *)tu_build_path("workloads/kernels.cubin", cubin, sizeof cubin),
                     async > 0 ? "1536" : "3072", (char *)iters, "2000",
                     async > 0 ? "async" : async < 0 ? "warm" : NULL, NULL };
    tu_env_t env;
    tu_env_init(&env);
    tu_env_salus(&env, state_name, table_name);
    tu_env_set(&env, "SIMGPU_MEMORY", async > 0 ? "2G" : "4G");
    tu_env_set(&env, "SIMGPU_CTX_MEMORY", "0");
    tu_env_set(&env, "SALUS_SWAP", swap);
    tu_env_set(&env, "SALUS_MEM_WAIT_MS", wait_ms);
    tu_env_set(&env, "SALUS_POLICY", "priority");
    tu_env_set(&env, "SALUS_PRIORITY", "%d", priority);
    tu_env_unset(&env, "SALUS_MEM_LIMIT");
    tu_env_unset(&env, "SALUS_REPORT");
    assert_int_equal(tu_spawn(p, argv, &env), 0);
    tu_env_free(&env);
}

static void spawn(tu_proc_t *p, int priority, const char *iters, int async)
{
    spawn_swap(p, priority, iters, async, "on", "0");
}

static int printed_ready(void *arg)
{
    char *out = tu_read_file(((tu_proc_t *)arg)->out_path, NULL);
    int yes = out && strstr(out, "ready") != NULL;
    free(out);
    return yes;
}

static void finish(tu_proc_t *p, const char *who)
{
    int rc = tu_wait(p, CHILD_MS);
    char *out = tu_read_file(p->out_path, NULL), *err = tu_read_file(p->err_path, NULL);
    if (rc != 0 || !out || !strstr(out, "done 0 bad 0"))
        fail_msg("the %s job exited %d: %s / %s", who, rc, out ? out : "", err ? err : "");
    free(out);
    free(err);
}

static void preempt(int async)
{
    if (!tu_built("sim/libcuda.so.1") || !tu_built("libsalus.so") ||
        !tu_built("workloads/kernels.cubin") || !tu_built("tests/clients/pageclient"))
        skip();
    tu_unique_name("smp", state_name, sizeof state_name);
    tu_unique_name("stmp", table_name, sizeof table_name);
    tu_proc_t low, high;
    spawn(&low, 10, "1000", async);       /* longer than the high job's 50 */
    if (!tu_await(printed_ready, &low, CHILD_MS))
        fail_msg("the low job never filled its memory");
    spawn(&high, 90, "50", async);
    finish(&high, "high-priority");
    finish(&low, "low-priority");
    shm_unlink(state_name);
    shm_unlink(table_name);
}

static void test_priority_preempts_full_device(void **state)
{
    (void)state;
    preempt(0);
}

static void test_priority_preempts_async_memory(void **state)
{
    (void)state;
    preempt(1);
}

/* The high job (paging on, SALUS_MEM_WAIT_MS=wait_ms) takes the GPU with a
 * first kernel, then waits for memory the low job (paging off) holds. */
static void give_up(const char *wait_ms)
{
    if (!tu_built("sim/libcuda.so.1") || !tu_built("libsalus.so") ||
        !tu_built("workloads/kernels.cubin") || !tu_built("tests/clients/pageclient"))
        skip();
    tu_unique_name("smg", state_name, sizeof state_name);
    tu_unique_name("stmg", table_name, sizeof table_name);
    tu_proc_t low, high;
    spawn_swap(&low, 10, "300", 0, "off", "0");      /* its memory cannot move */
    if (!tu_await(printed_ready, &low, CHILD_MS))
        fail_msg("the low job never filled its memory");
    spawn_swap(&high, 90, "20", -1, "on", wait_ms);      /* holds the GPU first */
    finish(&high, "high-priority");
    finish(&low, "low-priority");
    shm_unlink(state_name);
    shm_unlink(table_name);
}

static void test_gives_up_gpu_paging_cannot_help(void **state)
{
    (void)state;
    /* Longer than the low job's run: the high job gets its memory when the
     * low job ends, if the low job can run meanwhile. */
    give_up("120000");
}

/* With paging on, a job that would fit alone waits past its
 * SALUS_MEM_WAIT_MS while a peer can still end and give the memory back:
 * 200 ms is far shorter than the low job's run, and the high job is not
 * refused. */
static void test_fits_alone_outwaits_the_deadline(void **state)
{
    (void)state;
    give_up("200");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_priority_preempts_full_device),
        cmocka_unit_test(test_priority_preempts_async_memory),
        cmocka_unit_test(test_gives_up_gpu_paging_cannot_help),
        cmocka_unit_test(test_fits_alone_outwaits_the_deadline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
