/*
 * test_sched_latency.c - SALUS_LATENCY_MS in the policies, over views built
 * by hand (pure logic, no table, no clock): a latency-sensitive waiter goes
 * first under fair and priority and is handed the GPU at the holder's next
 * boundary, whatever the holder's quantum or priority; without it, nothing
 * changes; pack and fifo ignore it.
 *
 * Divided into: views; the tests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "sched/sched_int.h"

/* ---- views --------------------------------------------------------------------- */

static sched_view_t view;       /* large: not on the stack */

/* A holder of priority 50 that has held the GPU for held_ms of a 100 ms
 * quantum, its virtual time 1000 ms. */
static void view_init(uint64_t held_ms)
{
    memset(&view, 0, sizeof view);
    view.now = 10ull * 1000000000;
    view.quantum_ns = 100ull * 1000000;
    view.has_holder = 1;
    view.holder = (sched_cand_t){ .slot = 0, .priority = 50, .vtime = 1000ull * 1000000 };
    view.held_ns = held_ms * 1000000;
}

static int add(int slot, int prio, uint32_t ticket, uint64_t vtime_ms, uint32_t latency_ms)
{
    view.waiters[view.n] = (sched_cand_t){ .slot = slot, .priority = prio, .ticket = ticket,
                                           .vtime = vtime_ms * 1000000,
                                           .latency_ms = latency_ms };
    return view.n++;
}

static int picked_slot(const sched_policy_ops_t *ops)
{
    int i = ops->pick(&view);
    return i < 0 ? -1 : view.waiters[i].slot;
}

/* ---- the tests -------------------------------------------------------------------- */

static void test_fair_serves_latency_first(void **state)
{
    (void)state;
    const sched_policy_ops_t *fair = sched_policy_ops(SCHED_POLICY_FAIR);
    view_init(5);                                   /* 5 ms into a 100 ms quantum */
    add(1, 50, 1, 10, 0);                           /* much less GPU time, earlier */
    int svc = add(2, 50, 2, 5000, 50);              /* the service: more GPU time */
    assert_int_equal(picked_slot(fair), 2);
    assert_true(fair->yield(&view, svc));           /* at this boundary, quantum or not */
    /* without the variable, fair is as before: the least GPU time, after the quantum */
    view.waiters[svc].latency_ms = 0;
    assert_int_equal(picked_slot(fair), 1);
    assert_false(fair->yield(&view, fair->pick(&view)));
    view.held_ns = 200ull * 1000000;
    assert_true(fair->yield(&view, fair->pick(&view)));
}

static void test_priority_serves_latency_first(void **state)
{
    (void)state;
    const sched_policy_ops_t *prio = sched_policy_ops(SCHED_POLICY_PRIORITY);
    view_init(1);
    view.holder.priority = 90;                      /* a high-priority training job */
    add(1, 80, 1, 0, 0);
    int svc = add(2, 10, 2, 0, 50);                 /* a low-priority service */
    assert_int_equal(picked_slot(prio), 2);
    assert_true(prio->yield(&view, svc));
    view.waiters[svc].latency_ms = 0;               /* without: priority order */
    assert_int_equal(picked_slot(prio), 1);
    assert_false(prio->yield(&view, prio->pick(&view)));
}

static void test_latency_waiters_in_arrival_order(void **state)
{
    (void)state;
    const sched_policy_ops_t *fair = sched_policy_ops(SCHED_POLICY_FAIR);
    view_init(0);
    add(1, 50, 7, 0, 50);
    add(2, 50, 5, 900, 20);                         /* arrived first */
    add(3, 50, 1, 0, 0);
    assert_int_equal(picked_slot(fair), 2);
    view.waiters[1].ticket = 9;
    assert_int_equal(picked_slot(fair), 1);
    sched_cand_t a = { .latency_ms = 5, .ticket = 3 }, b = { .ticket = 1 };
    assert_int_equal(sched_latency_order(&a, &b), 1);
    assert_int_equal(sched_latency_order(&b, &a), -1);
    assert_int_equal(sched_latency_order(&b, &b), 0);
}

static void test_fifo_pack_ignore_it(void **state)
{
    (void)state;
    const sched_policy_ops_t *fifo = sched_policy_ops(SCHED_POLICY_FIFO);
    view_init(500);
    int svc = add(2, 50, 2, 0, 50);
    assert_false(fifo->yield(&view, svc));          /* fifo: one job owns the GPU */
    assert_false(sched_policy_ops(SCHED_POLICY_PACK)->flags & SCHED_POL_GATED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fair_serves_latency_first),
        cmocka_unit_test(test_priority_serves_latency_first),
        cmocka_unit_test(test_latency_waiters_in_arrival_order),
        cmocka_unit_test(test_fifo_pack_ignore_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
