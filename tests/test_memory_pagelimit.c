/*
 * test_memory_pagelimit.c - a memory limit that keeps a paging job's own
 * memory out hangs nobody (issue 32, item 1), over simgpu with libsalus
 * preloaded into pageclient.
 *
 * Two pageclient jobs of 40 MiB with paging on (SALUS_SWAP=on) share a
 * 64 MiB device (4 MiB of headroom, no context memory) under fair: only
 * one fits at a time, so they page each other out at each handoff.  Once
 * both hold their memory, `salus limit` puts one of them at 1K, far below
 * the 40 MiB it has, resident or paged out:
 *
 *   - the limited job is the second, which holds the GPU resident at that
 *     moment: it runs on until it yields and is paged out for its peer; its
 *     next page-in can never fit its limit.  Before the fix it held the GPU
 *     in that page-in for good, asking its peer to page out again and
 *     again: both jobs hung, without a word (the reproducer);
 *   - the limited job is the first, paged out and waiting for the GPU at
 *     that moment: it must not be granted the GPU while its limit keeps
 *     its memory out.
 *
 * In both: `salus limit` says what the limit does to a paging job (its
 * paged-out memory comes back only within the limit); the other job runs
 * to its end with every byte intact; the limited job stays alive, says on
 * stderr once why it waits (its limit, and what to raise it to); raised
 * again (`salus limit ... 100%`), it pages in and ends with every byte
 * intact.
 *
 * And a host staging bound (SALUS_SWAP_LIMIT=16M) below what a job holds
 * (40 MiB in 8 MiB blocks), a higher-priority peer of 40 MiB arriving in
 * 8 MiB allocations: before the fix the job paged out the 16 MiB its bound
 * held, the peer took that room and waited for more, which the job (full)
 * could not give; the job, granted the GPU, held it waiting for room to
 * page back in that only the waiting peer could give: both hung until
 * killed.  Now a page-out the bound cannot hold whole is refused: the job
 * says once why (naming SALUS_SWAP_LIMIT), keeps its memory on the GPU and
 * ends; the peer waits for it, then ends.  Both end with every byte intact.
 *
 * Every child has a deadline.
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

#define CHILD_MS   30000               /* a job alone runs about 2 s */
#define TOOL_MS    10000
#define JOB_MIB    "40"                /* one fits the 60 MiB budget, not two */
#define ITERS      "200"               /* of two 5 ms kernels: 2 s of GPU */
#define KERNEL_US  "5000"
/* What the limited job says on stderr (src/page), and salus limit's reply
 * for a paging job (tools/control.c). */
#define SAID_LIMIT "keeps its paged-out memory off the device"
#define SAID_TOOL  "comes back in only within the limit"
/* What a job says once when its host bound cannot hold all it could be
 * asked to page out (src/vmem). */
#define SAID_BOUND "cannot hold all of this job's memory"
#define BOUND_MS   20000               /* the partial page-out's jobs: ~1 s each */

static char state_name[64], table_name[64];
static tu_proc_t job[2];                /* killed by the teardown if still running */

static void spawn_as(tu_proc_t *p, const char *swap_limit, int priority, const char *wait_ms)
{
    char client[512], cubin[512];
    char *argv[] = { (char *)tu_build_path("tests/clients/pageclient", client, sizeof client),
                     (char *)tu_build_path("workloads/kernels.cubin", cubin, sizeof cubin),
                     JOB_MIB, ITERS, KERNEL_US, NULL };
    tu_env_t env;
    tu_env_init(&env);
    tu_env_salus(&env, state_name, table_name);
    tu_env_set(&env, "SIMGPU_MEMORY", "64M");
    tu_env_set(&env, "SIMGPU_CTX_MEMORY", "0");
    tu_env_set(&env, "PAGECLIENT_BLOCK_MIB", "8");
    tu_env_set(&env, "SALUS_MEM_HEADROOM", "4M");
    tu_env_set(&env, "SALUS_SWAP", "on");
    if (priority) {
        tu_env_set(&env, "SALUS_POLICY", "priority");
        tu_env_set(&env, "SALUS_PRIORITY", "%d", priority);
    } else {
        tu_env_set(&env, "SALUS_POLICY", "fair");
        tu_env_set(&env, "SALUS_QUANTUM_MS", "50");
    }
    tu_env_set(&env, "SALUS_MEM_WAIT_MS", "%s", wait_ms);
    if (swap_limit)
        tu_env_set(&env, "SALUS_SWAP_LIMIT", "%s", swap_limit);
    else
        tu_env_unset(&env, "SALUS_SWAP_LIMIT");
    tu_env_unset(&env, "SALUS_MEM_LIMIT");
    tu_env_unset(&env, "SALUS_REPORT");
    tu_env_unset(&env, "SALUS_LOG");
    assert_int_equal(tu_spawn(p, argv, &env), 0);
    tu_env_free(&env);
}

static void spawn(tu_proc_t *p)
{
    spawn_as(p, NULL, 0, "0");
}

static int file_has(const char *path, const char *word)
{
    char *text = tu_read_file(path, NULL);
    int yes = text && strstr(text, word) != NULL;
    free(text);
    return yes;
}

static int ready_or_exited(void *arg)
{
    tu_proc_t *p = arg;
    return file_has(p->out_path, "ready") || tu_exited(p);
}

static int said_limit_or_exited(void *arg)
{
    tu_proc_t *p = arg;
    return file_has(p->err_path, SAID_LIMIT) || tu_exited(p);
}

static void fail_with(tu_proc_t *p, const char *what)
{
    char *out = tu_read_file(p->out_path, NULL), *err = tu_read_file(p->err_path, NULL);
    fail_msg("%s: %s / %s", what, out ? out : "", err ? err : "");
}

static void await_ready(tu_proc_t *p, const char *who)
{
    if (!tu_await(ready_or_exited, p, CHILD_MS) || p->exited)
        fail_with(p, who);
}

/* It ended within its deadline, every call a success and every byte intact. */
static void finish_within(tu_proc_t *p, const char *who, int ms)
{
    int rc = tu_wait(p, ms);
    if (rc != 0 || !file_has(p->out_path, "done 0 bad 0")) {
        char what[128];
        snprintf(what, sizeof what, "the %s job %s (rc %d)", who,
                 p->timed_out ? "hung: killed at its deadline" : "failed", rc);
        fail_with(p, what);
    }
}

static void finish(tu_proc_t *p, const char *who)
{
    finish_within(p, who, CHILD_MS);
}

/* salus limit <pid> <size> -t <table> --force (1K is below its contexts on
 * purpose: a limit that keeps it paged out until raised); its reply in
 * *reply (malloc'd). */
static int salus_limit(pid_t pid, const char *size, char **reply)
{
    char salus[512], pidtext[16];
    snprintf(pidtext, sizeof pidtext, "%d", (int)pid);
    char *argv[] = { (char *)tu_build_path("bin/salus", salus, sizeof salus), "limit", pidtext,
                     (char *)size, "-t", table_name, "--force", NULL };
    tu_proc_t p;
    int rc = tu_run(argv, NULL, TOOL_MS, &p);
    char *out = tu_read_file(p.out_path, NULL), *err = tu_read_file(p.err_path, NULL);
    size_t n = (out ? strlen(out) : 0) + (err ? strlen(err) : 0) + 1;
    *reply = calloc(1, n);
    assert_non_null(*reply);
    snprintf(*reply, n, "%s%s", out ? out : "", err ? err : "");
    free(out);
    free(err);
    return rc;
}

/* Both jobs hold their memory; limit the first (0) or the second (1). */
static void limit_one(int which)
{
    if (!tu_built("sim/libcuda.so.1") || !tu_built("libsalus.so") ||
        !tu_built("workloads/kernels.cubin") || !tu_built("tests/clients/pageclient") ||
        !tu_built("bin/salus"))
        skip();
    tu_unique_name("spl", state_name, sizeof state_name);
    tu_unique_name("stpl", table_name, sizeof table_name);
    spawn(&job[0]);
    await_ready(&job[0], "the first job never filled its memory");
    spawn(&job[1]);
    await_ready(&job[1], "the second job never filled its memory");
    tu_proc_t *lim = &job[which], *other = &job[!which];
    char *reply;
    int rc = salus_limit(lim->pid, "1K", &reply);
    finish(other, "unlimited");
    if (rc != 0 || !strstr(reply, SAID_TOOL))
        fail_msg("salus limit 1K: rc %d, and it does not say what the limit does to a paging "
                 "job: %s", rc, reply);
    free(reply);
    if (!tu_await(said_limit_or_exited, lim, CHILD_MS) || lim->exited)
        fail_with(lim, "the limited job never said why it waits, or it exited");
    char *err = tu_read_file(lim->err_path, NULL);
    int said = err ? tu_count_lines(err, SAID_LIMIT) : 0;
    free(err);
    if (said != 1)
        fail_with(lim, "the limited job said why it waits more than once");

    rc = salus_limit(lim->pid, "100%", &reply);
    if (rc != 0)
        fail_msg("salus limit 100%%: rc %d: %s", rc, reply);
    free(reply);
    finish(lim, "limited, then raised,");
}

static int teardown(void **state)
{
    (void)state;
    for (int j = 0; j < 2; j++)
        if (job[j].pid > 0 && !tu_exited(&job[j])) {
            kill(job[j].pid, SIGKILL);
            tu_wait(&job[j], CHILD_MS);
        }
    memset(job, 0, sizeof job);
    shm_unlink(state_name);
    shm_unlink(table_name);
    return 0;
}

static void test_limit_on_holder_hangs_nobody(void **state)
{
    (void)state;
    limit_one(1);
}

static void test_limit_on_paged_out_waiter_hangs_nobody(void **state)
{
    (void)state;
    limit_one(0);
}

/* The job (low priority, its bound 16M) holds 40 MiB; the peer (high
 * priority, waiting for memory as long as need be) asks for 40 MiB in
 * 8 MiB pieces on a device that holds 60 MiB.  Both must end, intact. */
static void test_partial_page_out_hangs_nobody(void **state)
{
    (void)state;
    if (!tu_built("sim/libcuda.so.1") || !tu_built("libsalus.so") ||
        !tu_built("workloads/kernels.cubin") || !tu_built("tests/clients/pageclient"))
        skip();
    tu_unique_name("sppo", state_name, sizeof state_name);
    tu_unique_name("stppo", table_name, sizeof table_name);
    spawn_as(&job[0], "16M", 10, "0");
    await_ready(&job[0], "the job never filled its memory");
    spawn_as(&job[1], "16M", 90, "120000");
    finish_within(&job[0], "bounded", BOUND_MS);
    finish_within(&job[1], "high-priority", BOUND_MS);
    char *err = tu_read_file(job[0].err_path, NULL);
    int said = err ? tu_count_lines(err, SAID_BOUND) : 0;
    free(err);
    if (said != 1)
        fail_with(&job[0], said ? "the job said more than once why it does not page out"
                                : "the job never said its SALUS_SWAP_LIMIT refused the page-out");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_limit_on_holder_hangs_nobody, teardown),
        cmocka_unit_test_teardown(test_limit_on_paged_out_waiter_hangs_nobody, teardown),
        cmocka_unit_test_teardown(test_partial_page_out_hangs_nobody, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
