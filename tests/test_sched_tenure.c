/*
 * test_sched_tenure.c - what a tenure's start costs, as fair's pay-back
 * rule reads it (a holder keeps the GPU SCHED_SWITCH_FACTOR times that
 * cost): only a page-in counts.  In forked children, each over a simgpu
 * state and a table of its own, the scheduler given a clock that the
 * tenure hook moves 60 ms on, as a preempted thread on a busy host sees
 * it:
 *   nothing paged out  the start costs nothing (before the fix, the 60 ms
 *                      counted: a holder kept the GPU 480 ms, and two
 *                      torch jobs under fair alternated once, not at each
 *                      quantum, with one CPU-bound process beside them);
 *   paged out          the 60 ms of its page-in count.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "lib/testutil.h"
#include "sched/sched_int.h"

#define MS 1000000ull

static uint64_t skew;                 /* what the tenure hook added to the clock */
static int out;                       /* what paged_out answers */

static uint64_t clock_ns(void)
{
    return util_now_ns() + skew;
}

static void slow_tenure(int device)
{
    (void)device;
    skew += 60 * MS;
}

static int paged_out(void)
{
    return out;
}

static void *driver_sym(const char *name)
{
    return dlsym(RTLD_DEFAULT, name);
}

/* The child: its first launch takes the GPU (one tenure's start); it tells
 * what that start cost, in ms. */
static int tenure_child(void *arg)
{
    static const sched_hooks_t hooks = { .tenure = slow_tenure, .paged_out = paged_out };
    static drv_t drv;
    char sim[64], table[64];
    CUcontext ctx;
    CUdevice dev;
    out = *(int *)arg;
    setenv("SIMGPU_STATE", tu_unique_name("sten", sim, sizeof sim), 1);
    setenv("SALUS_TABLE", tu_unique_name("stten", table, sizeof table), 1);
    setenv("SALUS_POLICY", "fair", 1);
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx) || drv_resolve(driver_sym, &drv) != 0)
        return -1;
    sched_set_clock(clock_ns);
    sched_init(&drv);
    sched_set_hooks(&hooks);
    sched_thread_t th = { .gate = &sched_gate_unreg };
    sched_launch(&th, NULL);          /* registers, takes device 0: a tenure begins */
    int cost = sched_p.me ? (int)(util_load_relaxed(&sched_p.me->switch_us) / 1000) : -1;
    shm_unlink(sim);
    shm_unlink(table);
    return skew == 60 * MS ? cost : -2;   /* -2: no tenure began */
}

static int tenure_cost(int paged)
{
    int told = -3;
    pid_t pid = tu_fork_teller(tenure_child, &paged, &told);
    assert_true(pid > 0);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return told;
}

static void test_nothing_out_costs_nothing(void **state)
{
    (void)state;
    assert_int_equal(tenure_cost(0), 0);
}

static void test_page_in_is_the_cost(void **state)
{
    (void)state;
    int ms = tenure_cost(1);
    assert_true(ms >= 60 && ms < 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nothing_out_costs_nothing),
        cmocka_unit_test(test_page_in_is_the_cost),
    };
    return cmocka_run_group_tests_name("sched tenure", tests, NULL, NULL);
}
