/*
 * test_memory_share.c - memory admission between processes, driven through
 * the module's interface with a fake driver: one device budget shared by
 * all, spare reclaimed from peers, SALUS_MEM_WAIT_MS waiting then succeeding
 * or failing, a killed process's memory back within 100 ms, the admission
 * queue in arrival order, reservations guaranteed and refused when they can
 * never fit, a reclaimer killed half-way through, and a 3 s stall inside
 * the table's lock, counted alone and charged after.
 *
 * Each process is an actor: a forked child that the test drives through a
 * command pipe and that answers on a reply pipe (a byte, or a number).
 * Times are CLOCK_MONOTONIC, which all processes share.
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

#include "lib/actor.h"
#include "lib/testutil.h"
#include "memory/mem_layout.h"
#include "test_memory_lib.h"

#define MS_NS 1000000ull

/* ---- actors: tests/lib/actor.h -------------------------------------------- */

/* In the actor: the next command is c (else it exits, said). */
static void act_wait(actor_t *a, char c) { CHECK(act_next(a) == c); }

/* A process's slot, found by pid, and its state (a monitor's reading). */
static int slot_of(shm_table_t *t, pid_t pid, shm_state_t *state)
{
    shm_ident_t id;
    for (int i = 0; i < SHM_MAX_SLOTS; i++)
        if (shm_slot_ident(t, i, &id) == 0 && id.pid == pid) {
            if (state)
                *state = id.state;
            return i;
        }
    return -1;
}

typedef struct waiting_goal {
    shm_table_t *t;
    pid_t pid;
    int slot;          /* out: where it waits */
} waiting_goal_t;

static int shows_waiting(void *arg)
{
    waiting_goal_t *g = arg;
    shm_state_t st = SHM_FREE;
    g->slot = slot_of(g->t, g->pid, &st);
    return st == SHM_WAIT_MEM;
}

/* Wait until pid's slot shows waiting-mem (up to 5 s); its slot. */
static int await_waiting(shm_table_t *t, pid_t pid)
{
    waiting_goal_t g = { t, pid, -1 };
    if (!tu_await(shows_waiting, &g, 5000))
        fail_msg("process %d never showed waiting-mem", (int)pid);
    return g.slot;
}

static shm_table_t *monitor(void)
{
    shm_open_opts_t o = { .name = fk_table, .create = 1 };
    shm_table_t *t = NULL;
    assert_int_equal(shm_open_table(&o, &t), 0);
    return t;
}

/* The common set-up of an actor: a 100M device, no headroom. */
static shm_table_t *start_100m(void)
{
    fk_reset();
    fk.capacity = 100 * MB;
    setenv("SALUS_MEM_HEADROOM", "0", 1);
    return NULL;
}

static shm_table_t *go(void)
{
    shm_table_t *t = fk_start(fk_table);
    CHECK(t);
    return t;
}

/* ---- one budget, spare reclaimed ----------------------------------------- */

static int holder_small(actor_t *a)
{
    start_100m();
    shm_table_t *t = go();
    uint64_t h;
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 1 * MB, &h), CUDA_SUCCESS);
    fk_free(MEM_KIND_DEVICE, h);                  /* keeps a spare grant */
    fk_acct_t ac;
    fk_acct(t, shm_self_peek(t), 0, &ac);
    CHECK(ac.granted > 0 && ac.used == 0);
    act_tell(a, 'r');
    act_wait(a, 'g');
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 1 * MB, &h), CUDA_SUCCESS);   /* 99 + 1 */
    CHECK_EQ(fk_alloc(MEM_KIND_VMM, 1, &h), CUDA_ERROR_OUT_OF_MEMORY);
    fk_check_invariants(t);
    act_tell(a, 'd');
    act_wait(a, 'x');
    return 0;
}

static int taker_big(actor_t *a)
{
    start_100m();
    shm_table_t *t = go();
    uint64_t h;
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 99 * MB, &h), CUDA_SUCCESS);  /* needs the spare */
    fk_acct_t ac;
    fk_acct(t, (int)a->arg, 0, &ac);
    CHECK_EQ(ac.granted, 0);                      /* reclaimed, exactly */
    CHECK_EQ(fk_alloc(MEM_KIND_ARRAY, 2 * MB, &h), CUDA_ERROR_OUT_OF_MEMORY);
    fk_check_invariants(t);
    act_tell(a, 'b');
    act_wait(a, 'x');
    return 0;
}

static void test_one_budget_and_reclaim(void **state)
{
    (void)state;
    actor_t small, big;
    actor_start(&small, holder_small, 0);
    actor_expect(&small, 'r');
    shm_table_t *m = monitor();
    int slot = slot_of(m, small.pid, NULL);
    assert_true(slot >= 0);
    actor_start(&big, taker_big, (uint64_t)slot);
    actor_expect(&big, 'b');
    actor_say(&small, 'g');
    actor_expect(&small, 'd');
    fk_devsum_t s;
    fk_devsum(m, 0, &s);
    assert_int_equal(s.used, 100 * MB);
    assert_true(s.committed <= s.budget);
    actor_say(&small, 'x');
    actor_say(&big, 'x');
    actor_finish(&small);
    actor_finish(&big);
    shm_close_table(m);
}

/* ---- SALUS_MEM_WAIT_MS ------------------------------------------------------- */

static int holder_90(actor_t *a)
{
    start_100m();
    go();
    uint64_t h;
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 90 * MB, &h), CUDA_SUCCESS);
    act_tell(a, 'a');
    if (a->arg == 1) {                            /* to be killed */
        for (;;)
            pause();
    }
    act_wait(a, 'f');
    fk_free(MEM_KIND_DEVICE, h);
    act_wait(a, 'x');
    return 0;
}

/* Asks 20M (arg: SALUS_MEM_WAIT_MS), reports the result, when, and how long
 * the report says it waited. */
static int waiter_20(actor_t *a)
{
    start_100m();
    char ms[32];
    snprintf(ms, sizeof ms, "%llu", (unsigned long long)a->arg);
    setenv("SALUS_MEM_WAIT_MS", ms, 1);
    go();
    act_tell(a, 's');
    uint64_t h, t0 = tu_now_ns();
    CUresult rc = fk_alloc(MEM_KIND_DEVICE, 20 * MB, &h);
    uint64_t t1 = tu_now_ns();
    char buf[512], obj[600];
    mem_report_fields(buf, sizeof buf);
    snprintf(obj, sizeof obj, "{%s}", buf);
    double waited = -1;
    CHECK(tu_json_num(obj, "mem_waited_ms", &waited) == 0);
    act_tell_u64(a, (uint64_t)rc);
    act_tell_u64(a, t0);
    act_tell_u64(a, t1);
    act_tell_u64(a, (uint64_t)waited);
    act_wait(a, 'x');
    return 0;
}

static void test_wait_then_succeed(void **state)
{
    (void)state;
    shm_table_t *m = monitor();
    actor_t holder, waiter;
    actor_start(&holder, holder_90, 0);
    actor_expect(&holder, 'a');
    actor_start(&waiter, waiter_20, 10000);
    actor_expect(&waiter, 's');
    int slot = await_waiting(m, waiter.pid);
    mem_slot_view_t v;
    assert_int_equal(mem_view_slot(m, slot, &v), 0);
    assert_int_equal(v.waiting_device, 0);
    assert_int_equal(v.waiting_admission, 0);
    tu_sleep_ms(200);
    assert_false(actor_has_said(&waiter, 0));           /* still waiting */
    uint64_t freed = tu_now_ns();
    actor_say(&holder, 'f');
    assert_int_equal(actor_expect_u64(&waiter), CUDA_SUCCESS);
    uint64_t t0 = actor_expect_u64(&waiter), t1 = actor_expect_u64(&waiter), waited = actor_expect_u64(&waiter);
    assert_true(t1 >= freed);                     /* not before the memory was freed */
    assert_true(t1 - freed < 100ull * 1000 * 1000);
    assert_true(waited >= 200 && waited <= (t1 - t0) / 1000000 + 1);
    shm_state_t st;
    slot_of(m, waiter.pid, &st);
    assert_int_not_equal(st, SHM_WAIT_MEM);
    actor_say(&holder, 'x');
    actor_say(&waiter, 'x');
    actor_finish(&holder);
    actor_finish(&waiter);
    shm_close_table(m);
}

static int own_limit_waiter(actor_t *a)
{
    start_100m();
    setenv("SALUS_MEM_WAIT_MS", "5000", 1);
    setenv("SALUS_MEM_LIMIT", "10M", 1);
    go();
    uint64_t h, t0 = tu_now_ns();
    /* Over its own limit no peer can help: refused at once. */
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 20 * MB, &h), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(tu_now_ns() - t0 < 2000ull * 1000 * 1000);
    act_tell(a, 'o');
    return 0;
}

static void test_wait_then_fail(void **state)
{
    (void)state;
    actor_t holder, waiter, own;
    actor_start(&holder, holder_90, 0);
    actor_expect(&holder, 'a');
    actor_start(&waiter, waiter_20, 300);
    actor_expect(&waiter, 's');
    assert_int_equal(actor_expect_u64(&waiter), CUDA_ERROR_OUT_OF_MEMORY);
    uint64_t t0 = actor_expect_u64(&waiter), t1 = actor_expect_u64(&waiter), waited = actor_expect_u64(&waiter);
    assert_true(t1 - t0 >= 300ull * 1000 * 1000);
    assert_true(waited >= 300);
    actor_start(&own, own_limit_waiter, 0);
    actor_expect(&own, 'o');
    actor_finish(&own);
    actor_say(&holder, 'f');
    actor_say(&holder, 'x');
    actor_say(&waiter, 'x');
    actor_finish(&holder);
    actor_finish(&waiter);
}

/* ---- death ------------------------------------------------------------------- */

static int plain_50(actor_t *a)
{
    start_100m();
    shm_table_t *t = go();
    uint64_t h;
    /* The holder was killed and nobody reaped it: the refusal path does. */
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 50 * MB, &h), CUDA_SUCCESS);
    fk_check_invariants(t);
    act_tell(a, 'p');
    act_wait(a, 'x');
    return 0;
}

static void test_killed_memory_returns(void **state)
{
    (void)state;
    shm_table_t *m = monitor();
    actor_t holder, waiter;
    actor_start(&holder, holder_90, 1);
    actor_expect(&holder, 'a');
    actor_start(&waiter, waiter_20, 10000);
    actor_expect(&waiter, 's');
    await_waiting(m, waiter.pid);
    uint64_t killed = tu_now_ns();
    kill(holder.pid, SIGKILL);
    assert_int_equal(actor_expect_u64(&waiter), CUDA_SUCCESS);
    actor_expect_u64(&waiter);
    uint64_t t1 = actor_expect_u64(&waiter);
    actor_expect_u64(&waiter);
    assert_true(t1 - killed < 100ull * 1000 * 1000);   /* within 100 ms */
    assert_int_equal(fk_wait(holder.pid, 5000), 128 + SIGKILL);
    fk_devsum_t s;
    fk_devsum(m, 0, &s);
    assert_int_equal(s.used, 20 * MB);                  /* exactly the survivor's */

    /* Killed with nobody waiting: the next refusal reaps it. */
    actor_say(&waiter, 'x');
    actor_finish(&waiter);                    /* exits without a word: its slot is dead */
    actor_t h2, p;
    actor_start(&h2, holder_90, 1);     /* reaps the waiter to fit */
    actor_expect(&h2, 'a');
    kill(h2.pid, SIGKILL);
    assert_int_equal(fk_wait(h2.pid, 5000), 128 + SIGKILL);
    actor_start(&p, plain_50, 0);
    actor_expect(&p, 'p');
    fk_devsum(m, 0, &s);
    assert_int_equal(s.used, 50 * MB);
    actor_say(&p, 'x');
    actor_finish(&p);
    /* A reaper without the memory module (a monitor) frees the slots: the
     * accounting follows, since sums are taken over live slots. */
    shm_reap_dead(m, 0);
    fk_devsum(m, 0, &s);
    assert_int_equal(s.used, 0);
    assert_int_equal(s.committed, 0);
    shm_close_table(m);
}

/* ---- admission ------------------------------------------------------------ */

/* Reserves arg MB; tells 's' before asking, then the time it was admitted;
 * allocates its reservation; exits on 'x' without a word to the table. */
static int reserver(actor_t *a)
{
    start_100m();
    char r[32];
    snprintf(r, sizeof r, "%lluM", (unsigned long long)a->arg);
    setenv("SALUS_MEM_RESERVE", r, 1);
    shm_table_t *t = go();
    act_tell(a, 's');
    CHECK_EQ(mem_admit(0), CUDA_SUCCESS);
    uint64_t admitted = tu_now_ns();
    CHECK_EQ(mem_admit(0), CUDA_SUCCESS);          /* never waits on itself */
    CHECK(tu_now_ns() - admitted < 1000ull * 1000 * 1000);
    mem_device_view_t dv;
    CHECK(mem_view_device(t, 0, &dv) == 0);
    act_tell_u64(a, admitted);
    act_tell_u64(a, dv.reserved);                  /* those admitted before, and us */
    uint64_t h;
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, a->arg * MB, &h), CUDA_SUCCESS);
    fk_check_invariants(t);
    act_wait(a, 'x');
    return 0;
}

static void test_admission_in_arrival_order(void **state)
{
    (void)state;
    shm_table_t *m = monitor();
    actor_t first, second, third;
    actor_start(&first, reserver, 60);
    actor_expect(&first, 's');
    actor_expect_u64(&first);                            /* admitted at once */
    assert_int_equal(actor_expect_u64(&first), 60 * MB);
    actor_start(&second, reserver, 60);
    actor_expect(&second, 's');
    int s2 = await_waiting(m, second.pid);
    actor_start(&third, reserver, 30);             /* would fit, but comes later */
    actor_expect(&third, 's');
    int s3 = await_waiting(m, third.pid);
    mem_slot_view_t v;
    assert_int_equal(mem_view_slot(m, s2, &v), 0);
    assert_int_equal(v.waiting_admission, 1);
    assert_int_equal(mem_view_slot(m, s3, &v), 0);
    assert_int_equal(v.waiting_admission, 1);
    mem_device_view_t dv;
    assert_int_equal(mem_view_device(m, 0, &dv), 0);
    assert_int_equal(dv.queued, 2);
    tu_sleep_ms(300);
    assert_false(actor_has_said(&second, 0));
    assert_false(actor_has_said(&third, 0));
    uint64_t exited = tu_now_ns();
    actor_say(&first, 'x');                              /* the first job ends */
    uint64_t t2 = actor_expect_u64(&second), r2 = actor_expect_u64(&second);
    uint64_t t3 = actor_expect_u64(&third), r3 = actor_expect_u64(&third);
    assert_true(t2 >= exited && t3 >= exited);
    assert_true(t2 - exited < 100ull * 1000 * 1000);   /* as soon as memory frees */
    assert_true(t3 - exited < 100ull * 1000 * 1000);
    assert_true(r2 >= 60 * MB);
    assert_int_equal(r3, 90 * MB);                     /* the second came first */
    actor_finish(&first);
    assert_int_equal(mem_view_device(m, 0, &dv), 0);
    assert_int_equal(dv.queued, 0);
    assert_int_equal(dv.reserved, 90 * MB);
    actor_say(&second, 'x');
    actor_say(&third, 'x');
    actor_finish(&second);
    actor_finish(&third);
    shm_close_table(m);
}

static int too_large(actor_t *a)
{
    char path[512];
    fk_reset();
    setenv("SALUS_MEM_RESERVE", "2G", 1);
    fk_capture_stderr(path, sizeof path);
    go();
    uint64_t t0 = tu_now_ns();
    CHECK_EQ(mem_admit(0), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(tu_now_ns() - t0 < 1000ull * 1000 * 1000);
    char *err = tu_read_file(path, NULL);
    CHECK(err && strstr(err, "SALUS_MEM_RESERVE=2G") && strstr(err, "asks 2.0 GiB") &&
          strstr(err, "its 1.0 GiB") && !strstr(err, "2147483648"));
    free(err);
    act_tell(a, 'e');
    return 0;
}

/* Reserves 60M; allocates it when told, while a peer holds 40M. */
static int reserved_job(actor_t *a)
{
    start_100m();
    setenv("SALUS_MEM_RESERVE", "60M", 1);
    go();
    CHECK_EQ(mem_admit(0), CUDA_SUCCESS);
    act_tell(a, 'A');
    act_wait(a, 'g');
    uint64_t h;
    CHECK_EQ(fk_alloc(MEM_KIND_VMM, 60 * MB, &h), CUDA_SUCCESS);
    act_tell(a, 'a');
    act_wait(a, 'x');
    return 0;
}

static int unreserved_job(actor_t *a)
{
    start_100m();
    go();
    uint64_t h;
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 50 * MB, &h), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 40 * MB, &h), CUDA_SUCCESS);
    act_tell(a, 'b');
    act_wait(a, 'x');
    return 0;
}

static void test_reservations(void **state)
{
    (void)state;
    actor_t big, res, other;
    actor_start(&big, too_large, 0);
    actor_expect(&big, 'e');
    actor_finish(&big);
    shm_unlink(fk_table);
    actor_start(&res, reserved_job, 0);
    actor_expect(&res, 'A');
    actor_start(&other, unreserved_job, 0);        /* others cannot take it */
    actor_expect(&other, 'b');
    actor_say(&res, 'g');
    actor_expect(&res, 'a');                             /* guaranteed */
    actor_say(&res, 'x');
    actor_say(&other, 'x');
    actor_finish(&res);
    actor_finish(&other);
}

/* ---- a stall inside the table's lock ------------------------------------------
 * The test holds the table's lock past the 3 s deadline.  The actor's
 * allocation that needs it goes on, counted by the actor alone within its
 * limit (64M): 40M more pass, 30M beyond the limit are refused, a free pays
 * back.  Once the lock is free, the actor's next allocations find it again
 * and charge what it took meanwhile: the table is exact. */

static int staller(actor_t *a)
{
    start_100m();
    setenv("SALUS_MEM_LIMIT", "64M", 1);
    go();
    uint64_t first, big, over, one;
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 8 * MB, &first), CUDA_SUCCESS);
    act_tell(a, 'a');
    act_wait(a, 'b');                              /* the lock is held now */
    act_tell_u64(a, fk_alloc(MEM_KIND_DEVICE, 40 * MB, &big));
    CHECK(__atomic_load_n(&mem_p.suspended, __ATOMIC_ACQUIRE));
    CHECK_EQ(fk_free(MEM_KIND_DEVICE, first), CUDA_SUCCESS);
    act_tell_u64(a, fk_alloc(MEM_KIND_DEVICE, 30 * MB, &over));
    act_wait(a, 'c');                              /* the lock is free again */
    uint64_t deadline = tu_now_ns() + 10000 * MS_NS;
    while (__atomic_load_n(&mem_p.suspended, __ATOMIC_ACQUIRE) && tu_now_ns() < deadline) {
        CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 1 * MB, &one), CUDA_SUCCESS);
        CHECK_EQ(fk_free(MEM_KIND_DEVICE, one), CUDA_SUCCESS);
        tu_sleep_ms(5);
    }
    act_tell_u64(a, tu_now_ns());
    act_wait(a, 'x');
    return 0;
}

static void test_lock_stall_recovers(void **state)
{
    (void)state;
    shm_table_t *m = monitor();
    actor_t a;
    actor_start(&a, staller, 0);
    actor_expect(&a, 'a');
    assert_int_equal(shm_lock(m), 0);              /* a stall: past the 3 s deadline */
    actor_say(&a, 'b');
    assert_int_equal(actor_expect_u64(&a), CUDA_SUCCESS);            /* counted alone */
    assert_int_equal(actor_expect_u64(&a), CUDA_ERROR_OUT_OF_MEMORY); /* over its own limit */
    shm_unlock(m);
    uint64_t freed = tu_now_ns();
    actor_say(&a, 'c');
    uint64_t back = actor_expect_u64(&a);
    print_message("      accounted again %.1f ms after the lock was freed\n",
                  (double)(back - freed) / 1e6);
    int slot = slot_of(m, a.pid, NULL);
    mem_slot_view_t v;
    assert_int_equal(mem_view_slot(m, slot, &v), 0);
    assert_int_equal(v.used, 40 * MB);             /* 8M + 40M - 8M freed meanwhile */
    fk_devsum_t s;
    fk_devsum(m, 0, &s);
    assert_int_equal(s.used, 40 * MB);
    fk_acct_t acct;
    fk_acct(m, slot, 0, &acct);
    assert_true(acct.granted <= acct.limit);
    actor_say(&a, 'x');
    actor_finish(&a);
    shm_close_table(m);
}

/* ---- a reclaimer killed half-way ---------------------------------------------
 * A holds 5M live and spare beside it.  R takes the table's lock and starts
 * a reclaim of A's spare by hand, as account.c does, stopping after step
 * arg (1: log written; 2: spare taken; 3: grant lowered), then dies holding
 * the lock.  Whoever locks next (a process without the memory module first,
 * for step 2) must leave A with granted - spare == 5M exactly. */

static int spare_holder(actor_t *a)
{
    start_100m();
    shm_table_t *t = go();
    uint64_t h, live;
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 1 * MB, &h), CUDA_SUCCESS);
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 5 * MB, &live), CUDA_SUCCESS);
    fk_free(MEM_KIND_DEVICE, h);
    act_tell(a, 'r');
    for (;;) {
        char c = act_next(a);
        if (c != 'c')
            break;
        size_t f = 0, tot = 0;
        mem_view_info(&f, &tot);                  /* takes the lock */
        fk_acct_t ac;
        fk_acct(t, shm_self_peek(t), 0, &ac);
        CHECK_EQ(ac.used, 5 * MB);
        CHECK_EQ(mem_map_sum(0, NULL), 5 * MB);
        fk_check_invariants(t);
        CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 95 * MB, &h), CUDA_SUCCESS);   /* all of it */
        fk_free(MEM_KIND_DEVICE, h);
        act_tell(a, 'k');
    }
    return 0;
}

static int dying_reclaimer(actor_t *a)
{
    int victim = (int)(a->arg >> 8), step = (int)(a->arg & 0xff);
    shm_open_opts_t o = { .name = fk_table, .create = 1 };
    shm_table_t *t;
    CHECK(shm_open_table(&o, &t) == 0);
    CHECK(shm_lock(t) == 0);
    mem_dev_t *dev = shm_device_area(t, 0, SHM_AREA_MEM);
    mem_sdev_t *sd = &((mem_slot_t *)shm_slot_area(t, victim, SHM_AREA_MEM))->dev[0];
    uint64_t w = sd->avail, take = MEM_SPARE(w);
    uint32_t tag = (MEM_TAG(w) + 1) & 0xffff;
    CHECK(take > 0);
    dev->log.slot = victim;
    dev->log.slot_gen = shm_slot_gen(t, victim);
    dev->log.tag = tag;
    dev->log.take = take;
    dev->log.valid = 1;
    if (step >= 2)
        sd->avail = (uint64_t)tag << MEM_SPARE_BITS;
    if (step >= 3) {
        sd->granted -= take;
        sd->granted_tag = tag;
    }
    act_tell(a, 'd');
    raise(SIGKILL);
    return 1;
}

static void test_reclaimer_killed_halfway(void **state)
{
    (void)state;
    shm_table_t *m = monitor();
    actor_t holder;
    actor_start(&holder, spare_holder, 0);
    actor_expect(&holder, 'r');
    int victim = slot_of(m, holder.pid, NULL);
    for (int step = 1; step <= 3; step++) {
        actor_t r;
        actor_start(&r, dying_reclaimer, ((uint64_t)victim << 8) | (uint64_t)step);
        actor_expect(&r, 'd');
        assert_int_equal(fk_wait(r.pid, 5000), 128 + SIGKILL);
        close(r.cmd[1]);
        close(r.rep[0]);
        if (step == 2) {                          /* first locker knows nothing of memory */
            assert_int_equal(shm_lock(m), 0);
            shm_unlock(m);
        }
        actor_say(&holder, 'c');
        actor_expect(&holder, 'k');
    }
    actor_say(&holder, 'x');
    actor_finish(&holder);
    shm_close_table(m);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, fk_setup, fk_teardown)
    const struct CMUnitTest tests[] = {
        T(test_one_budget_and_reclaim),
        T(test_wait_then_succeed),
        T(test_wait_then_fail),
        T(test_killed_memory_returns),
        T(test_admission_in_arrival_order),
        T(test_reservations),
        T(test_reclaimer_killed_halfway),
        T(test_lock_stall_recovers),
    };
    return cmocka_run_group_tests_name("memory-share", tests, NULL, NULL);
}
