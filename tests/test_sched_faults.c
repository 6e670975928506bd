/*
 * test_sched_faults.c - the lease between processes when the table goes
 * wrong (test_sched_lease_lib.h's jobs): a stall inside the table's lock,
 * with jobs that sync and jobs that never do, after which they are
 * scheduled again; a waiter whose own slot is spoiled goes on.
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

#include "test_sched_lease_lib.h"

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
int main(void)
{
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lock_stall_recovers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lock_stall_recovers_without_syncs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupted_own_slot, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
