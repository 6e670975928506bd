/*
 * test_sched.c - the scheduler's pure parts and its decisions, in one process
 * with a fake clock:
 *   - the boundary detector on the sync patterns of training loops (item-like
 *     sync, context sync, event sync, two syncs per iteration, gradient
 *     accumulation, phase changes) and on kernel sequences without syncs;
 *   - each policy's choice on hand-built views;
 *   - whole schedules simulated over a real table (lease.c's transitions and
 *     the policies together), with slots held by idle child processes and
 *     time advanced by the test: fair, weighted fair, priority, srtf, fifo,
 *     pack, a dead holder, repair of a corrupted device;
 *   - SALUS_* parsing and its messages; the latency histogram.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "sched/sched_int.h"
#include "lib/testutil.h"

/* ---- detector ---------------------------------------------------------------- */

/* A token of `n` launches of the given kernels, cycling through them. */
static sched_token_t tok(int n, const uint64_t *kernels, int nk)
{
    sched_token_t t = { 0, 0 };
    for (int i = 0; i < n; i++) {
        t.launches++;
        t.hash += sched_mix(kernels[i % nk]);
    }
    return t;
}

/* Feed `reps` repetitions of a period; return the boundary flags of the last
 * `check` repetitions in out[] (period * check entries). */
static void feed(sched_detect_t *d, const sched_token_t *period, int p, int reps,
                 int check, int *out)
{
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < p; i++) {
            int b = sched_detect_feed(d, period[i]);
            if (r >= reps - check)
                out[(r - (reps - check)) * p + i] = b;
        }
}

static const uint64_t K_SPIN = 0x7f0000001000, K_FILL = 0x7f0000002000,
                      K_AXPY = 0x7f0000003000, K_COPY = 0x7f0000004000,
                      K_EVAL = 0x7f0000005000;

/* salus-train --sync item: K spins, a fill, then a 4-byte DtoH copy.  Each
 * sync ends an iteration; one token repeats (period 1). */
static void test_detect_item_sync(void **state)
{
    (void)state;
    uint64_t k[] = { K_SPIN, K_SPIN, K_FILL };
    sched_token_t period[] = { tok(24, k, 3) };
    sched_detect_t d;
    sched_detect_init(&d, SCHED_DET_AUTO);
    int b[10];
    feed(&d, period, 1, 30, 10, b);
    for (int i = 0; i < 10; i++)
        assert_int_equal(b[i], 1);
    assert_int_equal(d.iterations, 30);
    assert_int_equal(d.period, 1);
}

/* --sync ctx and --sync event: the same shape through other calls (the
 * detector sees tokens only); a leading warm-up sync (uploading weights).
 * While it learns (no period seen twice yet) no sync is a boundary. */
static void test_detect_ctx_and_event_sync(void **state)
{
    (void)state;
    uint64_t k[] = { K_SPIN, K_AXPY };
    sched_token_t warm = tok(3, (uint64_t[]){ K_COPY }, 1);
    sched_token_t period[] = { tok(40, k, 2) };
    for (int mode = 0; mode < 2; mode++) {
        sched_detect_t d;
        sched_detect_init(&d, SCHED_DET_AUTO);
        assert_int_equal(sched_detect_feed(&d, warm), 0);   /* learning */
        int b[20];
        feed(&d, period, 1, 20, 20, b);
        assert_int_equal(b[0], 0);                          /* one A: not yet a loop */
        for (int i = 1; i < 20; i++)
            assert_int_equal(b[i], 1);
        assert_int_equal(d.iterations, 21);                 /* counted once found */
    }
}

/* --syncs-per-iter 1: a logging .item() in the middle of each iteration.
 * Period 2; only the sync that ends the larger segment is a boundary. */
static void test_detect_two_syncs_per_iteration(void **state)
{
    (void)state;
    uint64_t k[] = { K_SPIN };
    sched_token_t period[] = { tok(10, k, 1), tok(30, k, 1) };
    sched_detect_t d;
    sched_detect_init(&d, SCHED_DET_AUTO);
    int b[2 * 20];
    feed(&d, period, 2, 40, 20, b);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(b[2 * i], 0);       /* the logging sync */
        assert_int_equal(b[2 * i + 1], 1);   /* the iteration's end */
    }
    assert_int_equal(d.period, 2);
    assert_int_equal(d.iterations, 40);      /* corrected at the first lock */
}

/* --accum 4: four micro-batches, each ending with an item-like sync, then an
 * optimizer step (one axpy) and the iteration-end sync.  Period 5; the
 * boundary is the optimizer step's sync (the rarest token), although the
 * micro-batch tokens have more launches. */
static void test_detect_gradient_accumulation(void **state)
{
    (void)state;
    uint64_t k[] = { K_SPIN, K_FILL };
    sched_token_t micro = tok(16, k, 2), step = tok(1, (uint64_t[]){ K_AXPY }, 1);
    sched_token_t period[] = { micro, micro, micro, micro, step };
    sched_detect_t d;
    sched_detect_init(&d, SCHED_DET_AUTO);
    assert_int_equal(sched_detect_feed(&d, (sched_token_t){ 0, 0 }), 0);  /* set-up sync */
    int b[5 * 10];
    feed(&d, period, 5, 30, 10, b);
    assert_int_equal(sched_detect_feed(&d, (sched_token_t){ 0, 0 }), 0);  /* final drain */
    for (int r = 0; r < 10; r++)
        for (int i = 0; i < 5; i++)
            assert_int_equal(b[5 * r + i], i == 4);
    assert_int_equal(d.period, 5);
    assert_int_equal(d.iterations, 30);
}

/* Training (two syncs per iteration), an evaluation phase (a different
 * single sync), training again: the period is dropped and found again, with
 * the same phase. */
static void test_detect_phase_change(void **state)
{
    (void)state;
    uint64_t k[] = { K_SPIN }, e[] = { K_EVAL };
    sched_token_t train[] = { tok(8, k, 1), tok(20, k, 1) }, eval[] = { tok(12, e, 1) };
    sched_detect_t d;
    sched_detect_init(&d, SCHED_DET_AUTO);
    int b[40];
    feed(&d, train, 2, 10, 1, b);
    assert_int_equal(d.period, 2);
    feed(&d, eval, 1, 6, 6, b);
    assert_int_equal(b[0], 0);               /* the period broke: learning */
    for (int i = 1; i < 6; i++)
        assert_int_equal(b[i], 1);           /* then each eval sync ends a step */
    feed(&d, train, 2, 10, 5, b);
    assert_int_equal(d.period, 2);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(b[2 * i], 0);
        assert_int_equal(b[2 * i + 1], 1);
    }
}

/* Syncs without any period (data-dependent work): learning for
 * SCHED_DET_LEARN syncs, then every sync is a boundary, all counted. */
static void test_detect_no_period(void **state)
{
    (void)state;
    uint64_t k[] = { K_SPIN };
    sched_detect_t d;
    sched_detect_init(&d, SCHED_DET_AUTO);
    int boundaries = 0;
    for (int i = 0; i < 100; i++) {
        int b = sched_detect_feed(&d, tok(5 + (i * 7919) % 23 + i, k, 1));
        if (i < SCHED_DET_LEARN - 1)
            assert_int_equal(b, 0);
        else
            assert_int_equal(b, 1);
        boundaries += b;
    }
    assert_int_equal(d.period, 0);
    assert_int_equal(d.iterations, 100);
    assert_int_equal(boundaries, 100 - (SCHED_DET_LEARN - 1));
}

static void test_detect_modes(void **state)
{
    (void)state;
    uint64_t k[] = { K_SPIN };
    sched_token_t period[] = { tok(10, k, 1), tok(30, k, 1) };
    sched_detect_t d;
    int b[8];
    sched_detect_init(&d, SCHED_DET_EVERY);          /* SALUS_ITER_SYNC=every */
    feed(&d, period, 2, 4, 4, b);
    for (int i = 0; i < 8; i++)
        assert_int_equal(b[i], 1);
    assert_int_equal(d.iterations, 8);

    sched_detect_init(&d, SCHED_DET_AUTO);           /* salus_iteration_end() */
    sched_detect_hint(&d);
    feed(&d, period, 2, 4, 4, b);
    for (int i = 0; i < 8; i++)
        assert_int_equal(b[i], 0);
    sched_detect_hint(&d);
    assert_int_equal(d.iterations, 2);
}

/* No syncs at all (salus-train --sync none): the kernel sequence's period,
 * and handovers at one consistent kernel of it. */
static void test_detect_kernel_sequence(void **state)
{
    (void)state;
    static sched_kseq_t k;
    sched_kseq_reset(&k);
    uint64_t iter[12];
    iter[0] = K_FILL;
    for (int i = 1; i < 11; i++)
        iter[i] = K_SPIN;
    iter[11] = K_AXPY;
    for (int i = 0; i < 5; i++)                      /* warm-up */
        sched_kseq_push(&k, K_COPY);
    assert_int_equal(sched_kseq_find(&k), 1);        /* period 1 so far... */
    int anchors = 0, first = -1;
    for (int r = 0; r < 6; r++)
        for (int i = 0; i < 12; i++) {
            sched_kseq_push(&k, iter[i]);            /* ...broken here */
            if (r >= 2 && sched_kseq_find(&k) && sched_kseq_at_anchor(&k)) {
                anchors++;
                if (first < 0)
                    first = i;
                assert_int_equal(i, first);          /* same phase every time */
            }
        }
    assert_int_equal(k.period, 12);
    assert_int_equal(anchors, 4);
    assert_true(iter[first] == K_FILL || iter[first] == K_AXPY);   /* a rare kernel */

    sched_kseq_reset(&k);                            /* no period at all */
    for (uint64_t i = 0; i < 100; i++)
        sched_kseq_push(&k, 0x1000 + i);
    assert_int_equal(sched_kseq_find(&k), 0);
    assert_int_equal(sched_kseq_at_anchor(&k), 0);
}

/* ---- policies on hand-built views --------------------------------------------- */

static sched_view_t view;

static void view_init(int holder_prio, uint64_t holder_vtime, uint64_t held_ms)
{
    memset(&view, 0, sizeof view);
    view.now = 1000000000ull;
    view.quantum_ns = 100 * 1000000ull;
    view.has_holder = 1;
    view.holder = (sched_cand_t){ .slot = 0, .priority = holder_prio, .vtime = holder_vtime,
                                  .remaining_ns = SCHED_REMAINING_UNKNOWN };
    view.held_ns = held_ms * 1000000ull;
}

static void view_add(int slot, int prio, uint32_t ticket, uint64_t vtime)
{
    view.waiters[view.n++] = (sched_cand_t){ .slot = slot, .priority = prio, .ticket = ticket,
                                             .vtime = vtime,
                                             .remaining_ns = SCHED_REMAINING_UNKNOWN };
}

/* The one list reaches every table: names (the scheduler's and SALUS_POLICY's
 * choices, in one order), help, and ops with both functions. */
static void test_policy_list(void **state)
{
    (void)state;
    for (int i = 0; i < SCHED_POLICY_COUNT; i++) {
        assert_non_null(sched_policy_names[i]);
        assert_non_null(util_policy_names[i]);
        assert_string_equal(sched_policy_names[i], util_policy_names[i]);
        assert_true(sched_policy_help[i] && sched_policy_help[i][0]);
        const sched_policy_ops_t *ops = sched_policy_ops((unsigned)i);
        assert_true(ops->pick && ops->yield);
    }
    assert_null(sched_policy_names[SCHED_POLICY_COUNT]);
    assert_null(util_policy_names[SCHED_POLICY_COUNT]);
    assert_string_equal(sched_policy_names[SCHED_POLICY_FAIR], "fair");
    assert_ptr_equal(sched_policy_ops(SCHED_POLICY_FAIR), &sched_policy_fair);
    assert_ptr_equal(sched_policy_ops(SCHED_POLICY_PACK), &sched_policy_pack);
}

static void test_policy_fifo_and_pack(void **state)
{
    (void)state;
    view_init(50, 0, 100000);
    view_add(3, 90, 7, 0);
    view_add(4, 10, 5, 999);
    const sched_policy_ops_t *fifo = sched_policy_ops(SCHED_POLICY_FIFO);
    assert_int_equal(fifo->pick(&view), 1);          /* first come */
    assert_int_equal(fifo->yield(&view, 1), 0);      /* never shares */
    assert_false(fifo->flags & SCHED_POL_SHARES);
    const sched_policy_ops_t *pack = sched_policy_ops(SCHED_POLICY_PACK);
    assert_false(pack->flags & SCHED_POL_GATED);
    assert_int_equal(pack->pick(&view), -1);
    assert_ptr_equal(sched_policy_ops(77), sched_policy_ops(SCHED_POLICY_FAIR));
}

static void test_policy_fair(void **state)
{
    (void)state;
    const sched_policy_ops_t *fair = sched_policy_ops(SCHED_POLICY_FAIR);
    view_init(50, 1000, 50);                         /* inside its quantum */
    view_add(1, 50, 2, 900);
    view_add(2, 50, 1, 500);
    assert_int_equal(fair->pick(&view), 1);          /* least vtime */
    assert_int_equal(fair->yield(&view, 1), 0);
    view.held_ns = 100 * 1000000ull;                 /* quantum used */
    assert_int_equal(fair->yield(&view, 1), 1);
    view.waiters[1].vtime = 900;                     /* tie: first ticket */
    assert_int_equal(fair->pick(&view), 1);

    /* A waiter that had more GPU time than the holder's total waits. */
    view_init(50, 0, 150);
    view_add(1, 50, 1, 400 * 1000000ull);
    assert_int_equal(fair->yield(&view, 0), 0);
    view.held_ns = 400 * 1000000ull;
    assert_int_equal(fair->yield(&view, 0), 1);

    /* Weights: priority 100 doubles the quantum (101/51) and slows vtime. */
    view_init(100, 0, 150);
    view_add(1, 50, 1, 0);
    assert_int_equal(fair->yield(&view, 0), 0);
    view.held_ns = 199 * 1000000ull;
    assert_int_equal(fair->yield(&view, 0), 1);
    assert_true(sched_vtime_charge(100, 101000) == 51000);
    assert_true(sched_vtime_charge(50, 1000) == 1000);
    assert_true(sched_vtime_charge(0, 1000) == 51000);
}

static void test_policy_priority(void **state)
{
    (void)state;
    const sched_policy_ops_t *prio = sched_policy_ops(SCHED_POLICY_PRIORITY);
    view_init(20, 0, 1);                             /* low holder, 1 ms in */
    view_add(1, 10, 1, 0);
    view_add(2, 80, 2, 10);
    view_add(3, 80, 3, 5);
    assert_int_equal(prio->pick(&view), 2);          /* highest, then fair */
    assert_int_equal(prio->yield(&view, 2), 1);      /* preempts: no quantum */
    view_init(80, 0, 10000);                         /* high holder */
    view_add(1, 20, 1, 0);
    assert_int_equal(prio->yield(&view, 0), 0);      /* never to a lower one */
    view_init(50, 100, 50);                          /* equals share fairly */
    view_add(1, 50, 1, 0);
    assert_int_equal(prio->yield(&view, 0), 0);
    view.held_ns = 100 * 1000000ull;
    assert_int_equal(prio->yield(&view, 0), 1);
}

static void test_policy_srtf(void **state)
{
    (void)state;
    const sched_policy_ops_t *srtf = sched_policy_ops(SCHED_POLICY_SRTF);
    view_init(50, 0, 1);
    view.holder.declared = 1;
    view.holder.measured = 1;
    view.holder.remaining_ns = 5000;
    view_add(1, 50, 1, 0);                           /* unknown length */
    view_add(2, 50, 2, 0);
    view.waiters[1].declared = 1;
    view.waiters[1].measured = 1;
    view.waiters[1].remaining_ns = 9000;
    assert_int_equal(srtf->pick(&view), 1);          /* known before unknown */
    assert_int_equal(srtf->yield(&view, 1), 0);      /* holder is shorter */
    view.waiters[1].remaining_ns = 1000;
    assert_int_equal(srtf->yield(&view, 1), 1);      /* shorter preempts */
    view_add(3, 50, 3, 0);                           /* declared, not measured */
    view.waiters[2].declared = 1;
    assert_int_equal(srtf->pick(&view), 2);          /* measured first */
    assert_int_equal(srtf->yield(&view, 2), 1);
}

/* ---- schedules over a table, with a fake clock --------------------------------- */

static char tname[64];
static shm_table_t *T;
static uint64_t fake_now;
static pid_t dummies[8];
static int ndummies;

static uint64_t fake_clock(void)
{
    return fake_now;
}

static int claim_slot(void *arg)
{
    (void)arg;
    shm_open_opts_t o = { .name = tname, .create = 1 };
    shm_table_t *t;
    return shm_open_table(&o, &t) == 0 ? shm_self(t) : -1;
}

/* A child that claims a slot and sleeps: the slot's process is alive. */
static int dummy_slot(void)
{
    int slot = -1;
    pid_t pid = tu_fork_teller(claim_slot, NULL, &slot);
    assert_true(pid > 0);
    assert_true(slot >= 0);
    dummies[ndummies++] = pid;
    return slot;
}

static int sim_setup(void **state)
{
    (void)state;
    tu_unique_name("salus-sched", tname, sizeof tname);
    shm_unlink(tname);
    shm_open_opts_t o = { .name = tname, .create = 1 };
    assert_int_equal(shm_open_table(&o, &T), 0);
    fake_now = 1000;
    sched_set_clock(fake_clock);
    ndummies = 0;
    return 0;
}

static int sim_teardown(void **state)
{
    (void)state;
    for (int i = 0; i < ndummies; i++) {
        kill(dummies[i], SIGKILL);
        tu_proc_t p = { .pid = dummies[i] };
        tu_wait(&p, 5000);
    }
    sched_set_clock(NULL);
    shm_close_table(T);
    shm_unlink(tname);
    return 0;
}

typedef struct job {
    uint64_t arrive_ns, iter_ns, iterations;   /* iterations 0: forever */
    uint64_t deadline_ns;                      /* SALUS_END_TIME on the clock, 0: none */
    int priority, declare;
    int slot, arrived, finished;
    uint64_t done, gpu_ns, finished_ns, first_run_ns;
} job_t;

static sched_dev_t *dev0(void)
{
    return sched_dev(T, 0);
}

static void sim_device(sched_policy_t policy, uint32_t quantum_ms)
{
    sched_config_t cfg = { .policy = policy, .quantum_ms = quantum_ms,
                           .max_slice_ms = 60000, .priority = 50 };
    uint8_t uuid[16] = "ordinal:0";
    assert_int_equal(shm_lock(T), 0);
    assert_int_equal(shm_device_index_locked(T, uuid), 0);
    sched_dev_setup_locked(T, 0, &cfg);
    shm_unlock(T);
}

/* The invariants of sched_int.h (gates, leases, waiters), as a debug build
 * checks them at every unlock. */
static void check_table(void)
{
    assert_int_equal(shm_lock(T), 0);
    const char *bad = sched_check_locked(T);
    shm_unlock(T);
    if (bad)
        fail_msg("%s", bad);
}

/* As wait.c does when a launch finds no lease: enqueue, and take a free one. */
static void sim_want(job_t *j)
{
    assert_int_equal(shm_lock(T), 0);
    sched_enqueue_locked(T, 0, j->slot, fake_now);
    if (sched_lease_holder(T, dev0()->lease) < 0)
        sched_grant_pick_locked(T, 0, fake_now, 0);
    sched_gate_update_locked(T, j->slot);
    shm_unlock(T);
}

static void sim_arrive(job_t *j)
{
    sched_slot_t *s = sched_slot(T, j->slot);
    assert_int_equal(shm_lock(T), 0);
    s->priority = j->priority;
    s->declared = j->declare ? j->iterations : 0;
    s->deadline_ns = j->deadline_ns;
    s->iterations = 0;
    s->iter_ns = 0;
    s->devset = 1;
    s->magic = SCHED_SLOT_MAGIC;
    sched_vtime_lift_locked(T, 0, j->slot, fake_now);
    shm_unlock(T);
    j->arrived = 1;
    sim_want(j);
}

static void sim_leave(job_t *j)
{
    assert_int_equal(shm_lock(T), 0);
    sched_dequeue_locked(T, 0, j->slot);
    if (sched_lease_holder(T, dev0()->lease) == j->slot)
        sched_grant_pick_locked(T, 0, fake_now, 0);
    sched_slot(T, j->slot)->devset = 0;
    sched_gate_update_locked(T, j->slot);
    shm_unlock(T);
    j->finished = 1;
    j->finished_ns = fake_now;
}

static job_t *job_of(job_t *jobs, int n, int slot)
{
    for (int i = 0; i < n; i++)
        if (jobs[i].slot == slot && jobs[i].arrived && !jobs[i].finished)
            return &jobs[i];
    return NULL;
}

/* Run GPU-bound jobs until `end_ns`: the holder runs one iteration, then its
 * boundary asks the policy; a job that loses the GPU wants it back at once.
 * runs[] gets the job index of each iteration, in order; returns their count. */
static int sim_run(job_t *jobs, int n, uint64_t end_ns, int *runs, int max_runs)
{
    int nruns = 0;
    for (int i = 0; i < n; i++)
        jobs[i].slot = dummy_slot();
    while (fake_now < end_ns) {
        uint64_t next_arrival = UINT64_MAX;
        for (int i = 0; i < n; i++) {
            if (!jobs[i].arrived && jobs[i].arrive_ns <= fake_now)
                sim_arrive(&jobs[i]);
            else if (!jobs[i].arrived && jobs[i].arrive_ns < next_arrival)
                next_arrival = jobs[i].arrive_ns;
        }
        check_table();
        job_t *j = job_of(jobs, n, sched_lease_holder(T, dev0()->lease));
        if (!j) {
            if (next_arrival == UINT64_MAX)
                break;
            fake_now = next_arrival;
            continue;
        }
        if (!j->first_run_ns)
            j->first_run_ns = fake_now;
        fake_now += j->iter_ns;
        j->done++;
        j->gpu_ns += j->iter_ns;
        if (nruns < max_runs)
            runs[nruns++] = (int)(j - jobs);
        sched_slot_t *s = sched_slot(T, j->slot);
        s->iterations = j->done;
        s->iter_ns = j->iter_ns;
        if (j->iterations && j->done == j->iterations) {
            sim_leave(j);
            continue;
        }
        for (int i = 0; i < n; i++)
            if (!jobs[i].arrived && jobs[i].arrive_ns <= fake_now)
                sim_arrive(&jobs[i]);
        assert_int_equal(shm_lock(T), 0);
        int to = sched_decide_locked(T, 0, j->slot, 1, fake_now);
        if (to >= 0) {
            sched_grant_locked(T, 0, to, fake_now, 0);
            sched_enqueue_locked(T, 0, j->slot, fake_now);
        }
        shm_unlock(T);
    }
    return nruns;
}

static int switches(const int *runs, int n)
{
    int s = 0;
    for (int i = 1; i < n; i++)
        s += runs[i] != runs[i - 1];
    return s;
}

#define MS 1000000ull
static int runs[4096];

static void test_sim_fair_equal(void **state)
{
    (void)state;
    sim_device(SCHED_POLICY_FAIR, 100);
    job_t jobs[2] = { { .iter_ns = 10 * MS, .priority = 50 },
                      { .arrive_ns = 5 * MS, .iter_ns = 10 * MS, .priority = 50 } };
    int n = sim_run(jobs, 2, 2000 * MS, runs, 4096);
    double share = (double)jobs[0].gpu_ns / (double)(jobs[0].gpu_ns + jobs[1].gpu_ns);
    assert_true(share > 0.45 && share < 0.55);
    int sw = switches(runs, n);
    assert_true(sw >= 15 && sw <= 22);               /* a quantum (10 iterations) each */
    for (int i = 1, len = 1; i < n; i++, len++)       /* no run shorter than a quantum */
        if (runs[i] != runs[i - 1]) {
            assert_true(len >= 10);
            len = 0;
        }
}

/* Iterations of 5 ms against 40 ms: whole iterations only, and virtual time
 * evens out the GPU time. */
static void test_sim_fair_uneven_iterations(void **state)
{
    (void)state;
    sim_device(SCHED_POLICY_FAIR, 100);
    job_t jobs[2] = { { .iter_ns = 5 * MS, .priority = 50 },
                      { .iter_ns = 40 * MS, .priority = 50 } };
    sim_run(jobs, 2, 4000 * MS, runs, 4096);
    double share = (double)jobs[0].gpu_ns / (double)(jobs[0].gpu_ns + jobs[1].gpu_ns);
    assert_true(share > 0.45 && share < 0.55);
}

static void test_sim_fair_weighted(void **state)
{
    (void)state;
    sim_device(SCHED_POLICY_FAIR, 100);
    job_t jobs[2] = { { .iter_ns = 10 * MS, .priority = 100 },
                      { .iter_ns = 10 * MS, .priority = 50 } };
    sim_run(jobs, 2, 6000 * MS, runs, 4096);
    double share = (double)jobs[0].gpu_ns / (double)(jobs[0].gpu_ns + jobs[1].gpu_ns);
    assert_true(share > 0.62 && share < 0.71);       /* 101 : 51 */
}

static void test_sim_priority(void **state)
{
    (void)state;
    sim_device(SCHED_POLICY_PRIORITY, 100);
    job_t jobs[2] = { { .iter_ns = 20 * MS, .priority = 10 },
                      { .arrive_ns = 505 * MS, .iter_ns = 10 * MS, .iterations = 30,
                        .priority = 90 } };
    int n = sim_run(jobs, 2, 2000 * MS, runs, 4096);
    /* The high job starts at the low one's next boundary and runs alone. */
    assert_true(jobs[1].first_run_ns <= 505 * MS + 20 * MS);
    assert_true(jobs[1].finished_ns - jobs[1].arrive_ns <= 300 * MS + 20 * MS);
    int i = 0;
    while (runs[i] != 1)
        i++;
    for (int k = 0; k < 30; k++)
        assert_int_equal(runs[i + k], 1);
    assert_int_equal(runs[i + 30], 0);               /* then the low one resumes */
    assert_true(n > i + 40);
}

static void test_sim_srtf(void **state)
{
    (void)state;
    sim_device(SCHED_POLICY_SRTF, 100);
    job_t jobs[4] = {
        { .iter_ns = 10 * MS, .iterations = 30, .declare = 1, .priority = 50 },
        { .arrive_ns = 1 * MS, .iter_ns = 10 * MS, .iterations = 10, .declare = 1 },
        { .arrive_ns = 2 * MS, .iter_ns = 10 * MS, .iterations = 20, .declare = 1 },
        { .arrive_ns = 3 * MS, .iter_ns = 10 * MS, .iterations = 5, .declare = 0 },
    };
    sim_run(jobs, 4, 10000 * MS, runs, 4096);
    for (int i = 0; i < 4; i++)
        assert_true(jobs[i].finished);
    /* 10 before 20 before 30; unknown length last although shortest. */
    assert_true(jobs[1].finished_ns < jobs[2].finished_ns);
    assert_true(jobs[2].finished_ns < jobs[0].finished_ns);
    assert_true(jobs[0].finished_ns < jobs[3].finished_ns);
}

/* A job that declares no length but an end (a batch system's time limit)
 * ranks by the time left to it, at once: before jobs of unknown length, and
 * against declared ones by remaining time. */
static void test_sim_srtf_end_time(void **state)
{
    (void)state;
    sim_device(SCHED_POLICY_SRTF, 100);
    job_t jobs[4] = {
        { .iter_ns = 10 * MS, .iterations = 30, .deadline_ns = 10000 * MS },
        { .arrive_ns = 1 * MS, .iter_ns = 10 * MS, .iterations = 10, .deadline_ns = 2000 * MS },
        { .arrive_ns = 2 * MS, .iter_ns = 10 * MS, .iterations = 20, .declare = 1 },
        { .arrive_ns = 3 * MS, .iter_ns = 10 * MS, .iterations = 5 },
    };
    sim_run(jobs, 4, 10000 * MS, runs, 4096);
    for (int i = 0; i < 4; i++)
        assert_true(jobs[i].finished);
    /* 200 ms declared, then ends 2 s and 10 s away; unknown last. */
    assert_true(jobs[2].finished_ns < jobs[1].finished_ns);
    assert_true(jobs[1].finished_ns < jobs[0].finished_ns);
    assert_true(jobs[0].finished_ns < jobs[3].finished_ns);
    /* Whole runs: the far end yields at its first boundary, the declared job
     * is measured and, shorter, keeps the GPU; the near end runs before the
     * far one resumes. */
    assert_int_equal(runs[0], 0);
    for (int k = 1; k <= 20; k++)
        assert_int_equal(runs[k], 2);
    for (int k = 21; k <= 30; k++)
        assert_int_equal(runs[k], 1);
    assert_int_equal(runs[31], 0);
}

static void test_sim_fifo(void **state)
{
    (void)state;
    sim_device(SCHED_POLICY_FIFO, 100);
    job_t jobs[3] = {
        { .iter_ns = 10 * MS, .iterations = 50 },
        { .arrive_ns = 15 * MS, .iter_ns = 10 * MS, .iterations = 10 },
        { .arrive_ns = 5 * MS, .iter_ns = 10 * MS, .iterations = 10 },
    };
    int n = sim_run(jobs, 3, 10000 * MS, runs, 4096);
    assert_int_equal(n, 70);
    assert_int_equal(switches(runs, n), 2);          /* one after another */
    assert_int_equal(runs[0], 0);
    assert_int_equal(runs[50], 2);                   /* arrival order */
    assert_int_equal(runs[60], 1);
}

/* A device under `policy` and two jobs of 10 ms iterations on it, arrived
 * in order (the first holds the lease unless the policy gates nothing). */
static void sim_two_jobs(sched_policy_t policy, job_t jobs[2])
{
    sim_device(policy, 100);
    for (int i = 0; i < 2; i++) {
        jobs[i] = (job_t){ .iter_ns = 10 * MS, .slot = dummy_slot() };
        sim_arrive(&jobs[i]);
    }
}

static void test_sim_pack(void **state)
{
    (void)state;
    job_t jobs[2];
    sim_two_jobs(SCHED_POLICY_PACK, jobs);
    check_table();
    assert_int_equal(dev0()->lease, 0);
    assert_int_equal(dev0()->waiters[0] | dev0()->waiters[1], 0);

    /* Switching a running table to fair closes their gates; back to pack
     * opens them and wakes every waiter. */
    assert_int_equal(sched_set_policy_table(T, 0, SCHED_POLICY_FAIR, 50), 0);
    assert_int_equal(dev0()->quantum_ms, 50);
    sim_want(&jobs[0]);
    sim_want(&jobs[1]);
    check_table();
    assert_int_equal(sched_lease_holder(T, dev0()->lease), jobs[0].slot);
    uint32_t grant = sched_slot(T, jobs[1].slot)->grant;
    assert_int_equal(sched_set_policy_table(T, 0, SCHED_POLICY_PACK, -1), 0);
    check_table();
    assert_int_equal(sched_slot(T, jobs[1].slot)->grant, grant + 1);
    assert_int_equal(sched_set_policy_table(T, 0, SCHED_POLICY_COUNT, -1), -EINVAL);
}

/* The holder dies: the reaper hands its lease to the waiter. */
static void test_sim_dead_holder(void **state)
{
    (void)state;
    job_t jobs[2];
    sim_two_jobs(SCHED_POLICY_FAIR, jobs);
    assert_int_equal(sched_lease_holder(T, dev0()->lease), jobs[0].slot);
    kill(dummies[0], SIGKILL);
    tu_proc_t p = { .pid = dummies[0] };
    tu_wait(&p, 5000);
    shm_set_hooks(T, SHM_AREA_SCHED, sched_reap_hook, sched_repair_hook, NULL);
    assert_int_equal(shm_reap_dead(T, 0), 1);
    assert_int_equal(sched_lease_holder(T, dev0()->lease), jobs[1].slot);
    assert_int_equal(sched_slot(T, jobs[1].slot)->gate, SCHED_GATE_OPEN);
}

/* sched_check_locked's verdict with the table locked; NULL when it holds. */
static const char *checked(void)
{
    assert_int_equal(shm_lock(T), 0);
    const char *bad = sched_check_locked(T);
    shm_unlock(T);
    return bad;
}

static void assert_violation(const char *needle)
{
    const char *bad = checked();
    if (!bad || !strstr(bad, needle))
        fail_msg("expected a violation with \"%s\", got %s", needle, bad ? bad : "none");
}

/* Each invariant of sched_int.h, broken by hand, is found and named; put
 * back, the table checks clean again. */
static void test_check_finds_violations(void **state)
{
    (void)state;
    job_t jobs[2];
    sim_two_jobs(SCHED_POLICY_FAIR, jobs);
    sched_dev_t *dev = dev0();
    sched_slot_t *holder = sched_slot(T, jobs[0].slot), *waiter = sched_slot(T, jobs[1].slot);
    assert_int_equal(sched_lease_holder(T, dev->lease), jobs[0].slot);
    assert_null(checked());

    waiter->gate = SCHED_GATE_OPEN;                  /* runs without the lease */
    assert_violation("is held by");
    waiter->gate = 7;
    assert_violation("is not a gate");
    waiter->gate = SCHED_GATE_CLOSED;
    holder->gate = SCHED_GATE_OPEN;                  /* ignores its waiter */
    assert_violation("others wait");
    holder->gate = SCHED_GATE_CLOSED;                /* waits for what it holds */
    assert_violation("gate closed");
    holder->gate = SCHED_GATE_CONTENDED;
    assert_null(checked());

    dev->policy = 99;
    assert_violation("none of the");
    dev->policy = SCHED_POLICY_PACK;                 /* gates nothing, lease kept */
    assert_violation("gates nothing");
    dev->policy = SCHED_POLICY_FAIR;
    dev->waiters[jobs[0].slot >> 6] |= 1ull << (jobs[0].slot & 63);
    dev->wait[jobs[0].slot].gen = shm_slot_gen(T, jobs[0].slot);
    assert_violation("both holds");
    sched_dequeue_locked(T, 0, jobs[0].slot);
    assert_null(checked());
}

/* While a peer waits the holder's gate is CONTENDED, which launches pass on
 * the fast path; a waiter's probe makes it PROBE (slow once), which a gate
 * update keeps while the holder holds its leases, and only the holder's
 * launch settles; a waiter's probe of a gate that is not CONTENDED does
 * nothing, a boundary's probes an OPEN one too. */
static void test_sim_probe(void **state)
{
    (void)state;
    sim_device(SCHED_POLICY_FAIR, 100);
    job_t jobs[2] = { { .iter_ns = 10 * MS }, { .iter_ns = 10 * MS } };
    jobs[0].slot = dummy_slot();
    sim_arrive(&jobs[0]);
    sched_slot_t *h = sched_slot(T, jobs[0].slot);
    assert_int_equal(h->gate, SCHED_GATE_OPEN);
    sched_probe(h);                                   /* nobody waits: nothing to look at */
    assert_int_equal(h->gate, SCHED_GATE_OPEN);
    jobs[1].slot = dummy_slot();
    sim_arrive(&jobs[1]);
    assert_int_equal(h->gate, SCHED_GATE_CONTENDED);
    assert_true(SCHED_GATE_FAST(h->gate));
    assert_false(SCHED_GATE_FAST(sched_slot(T, jobs[1].slot)->gate));   /* CLOSED */
    sched_probe(h);
    assert_int_equal(h->gate, SCHED_GATE_PROBE);
    assert_false(SCHED_GATE_FAST(h->gate));
    assert_int_equal(shm_lock(T), 0);
    assert_null(sched_check_locked(T));               /* PROBE is a contended holder's */
    sched_gate_update_locked(T, jobs[0].slot);        /* still contended: the probe stands */
    assert_int_equal(h->gate, SCHED_GATE_PROBE);
    sched_dequeue_locked(T, 0, jobs[1].slot);         /* the waiter leaves */
    sched_gate_update_locked(T, jobs[0].slot);
    assert_int_equal(h->gate, SCHED_GATE_PROBE);      /* only the holder clears it */
    sched_gate_settle_locked(T, jobs[0].slot);
    shm_unlock(T);
    assert_int_equal(h->gate, SCHED_GATE_OPEN);
    sched_probe_boundary(h);                          /* a boundary probes an open gate too */
    assert_int_equal(h->gate, SCHED_GATE_PROBE);
    assert_false(SCHED_GATE_FAST(SCHED_GATE_UNREG));
}

/* Garbage in the device: stale lease, bad policy, stale waiter bits. */
static void test_sim_repair(void **state)
{
    (void)state;
    sim_device(SCHED_POLICY_FAIR, 100);
    job_t j = { .iter_ns = 10 * MS };
    j.slot = dummy_slot();
    sim_arrive(&j);
    sched_dev_t *dev = dev0();
    dev->lease = sched_lease_of(77, 12345);
    dev->policy = 99;
    dev->waiters[0] = dev->waiters[1] = ~0ull;
    assert_int_equal(sched_dev_policy(dev), SCHED_POLICY_FAIR);
    assert_int_equal(sched_lease_holder(T, dev->lease), SCHED_NO_SLOT);
    assert_int_equal(shm_lock(T), 0);
    sched_repair_hook(T, NULL);
    shm_unlock(T);
    assert_int_equal(dev->policy, SCHED_POLICY_FAIR);
    assert_int_equal(sched_lease_holder(T, dev->lease), j.slot);   /* the valid waiter */
    assert_int_equal(dev->waiters[0] | dev->waiters[1], 0);
    assert_int_equal(sched_slot(T, j.slot)->gate, SCHED_GATE_OPEN);

    dev->magic = 0xdeadbeef;                          /* unrecognizable: set up afresh */
    sim_device(SCHED_POLICY_SRTF, 10);
    assert_int_equal(dev->policy, SCHED_POLICY_SRTF);
    assert_int_equal(dev->lease, 0);
}

/* ---- configuration -------------------------------------------------------------- */

static const char *const sched_vars[] = {
    "SALUS_POLICY", "SALUS_QUANTUM_MS", "SALUS_MAX_SLICE_MS", "SALUS_PRIORITY",
    "SALUS_ITERATIONS", "SALUS_END_TIME", "SALUS_ITER_SYNC", NULL,
};

/* Read the config with stderr captured into buf. */
static void read_config(sched_config_t *c, char *buf, size_t len)
{
    char path[600];
    snprintf(path, sizeof path, "%s/stderr", tu_tmpdir());
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    int saved = dup(2);
    dup2(fd, 2);
    sched_config_read(c);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, buf, len - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    close(fd);
}

static void test_config(void **state)
{
    (void)state;
    char err[4096];
    sched_config_t c;
    for (int i = 0; sched_vars[i]; i++)
        unsetenv(sched_vars[i]);
    read_config(&c, err, sizeof err);
    assert_int_equal(c.policy, SCHED_POLICY_FAIR);
    assert_int_equal(c.policy_given, 0);
    assert_int_equal(c.quantum_ms, 100);
    assert_int_equal(c.priority, 50);
    assert_int_equal(c.iterations, 0);
    assert_int_equal(c.end_time_s, 0);
    assert_int_equal(sched_config_deadline(&c, 5000), 0);
    assert_int_equal(c.iter_sync_every, 0);
    assert_string_equal(err, "");

    setenv("SALUS_POLICY", "SRTF", 1);
    setenv("SALUS_QUANTUM_MS", "250", 1);
    setenv("SALUS_MAX_SLICE_MS", "100", 1);          /* below the quantum: raised */
    setenv("SALUS_PRIORITY", "90", 1);
    setenv("SALUS_ITERATIONS", "1000", 1);
    setenv("SALUS_ITER_SYNC", "every", 1);
    char end[32];
    snprintf(end, sizeof end, "%lld", (long long)time(NULL) + 3600);
    setenv("SALUS_END_TIME", end, 1);
    read_config(&c, err, sizeof err);
    assert_int_equal(c.end_time_s, atoll(end));
    uint64_t left = sched_config_deadline(&c, 5000) - 5000;     /* an hour, give or take */
    assert_true(left > 3590ull * 1000000000ull && left <= 3600ull * 1000000000ull);
    c.end_time_s = 1000;                                      /* long past: nothing left */
    assert_int_equal(sched_config_deadline(&c, 5000), 5000);
    assert_int_equal(c.policy, SCHED_POLICY_SRTF);
    assert_int_equal(c.policy_given, 1);
    assert_int_equal(c.quantum_ms, 250);
    assert_int_equal(c.max_slice_ms, 250);
    assert_int_equal(c.priority, 90);
    assert_int_equal(c.iterations, 1000);
    assert_int_equal(c.iter_sync_every, 1);

    setenv("SALUS_POLICY", "round-robin", 1);
    setenv("SALUS_QUANTUM_MS", "-5", 1);
    setenv("SALUS_PRIORITY", "101", 1);
    setenv("SALUS_ITERATIONS", "lots", 1);
    setenv("SALUS_END_TIME", "tomorrow", 1);
    setenv("SALUS_ITER_SYNC", "sometimes", 1);
    read_config(&c, err, sizeof err);
    assert_int_equal(c.policy, SCHED_POLICY_FAIR);
    assert_int_equal(c.quantum_ms, 100);
    assert_int_equal(c.priority, 50);
    assert_int_equal(c.iterations, 0);
    assert_int_equal(c.end_time_s, 0);
    assert_int_equal(c.iter_sync_every, 0);
    assert_non_null(strstr(err, "SALUS_POLICY=\"round-robin\""));
    assert_non_null(strstr(err, "fifo, fair, priority, srtf, pack"));
    assert_non_null(strstr(err, "SALUS_QUANTUM_MS=\"-5\""));
    assert_non_null(strstr(err, "SALUS_PRIORITY=\"101\""));
    assert_non_null(strstr(err, "from 0 to 100"));
    assert_non_null(strstr(err, "SALUS_ITERATIONS=\"lots\""));
    assert_non_null(strstr(err, "SALUS_END_TIME=\"tomorrow\""));
    assert_non_null(strstr(err, "auto, every"));
    for (int i = 0; sched_vars[i]; i++)
        unsetenv(sched_vars[i]);
}

/* ---- histograms ------------------------------------------------------------------- */

static void test_histogram(void **state)
{
    (void)state;
    int prev = -1;
    for (uint64_t v = 1; v < (1ull << 31); v = v * 5 / 4 + 1) {
        int b = sched_hist_bucket(v);
        assert_true(b >= prev && b < SCHED_HIST_BUCKETS);
        prev = b;
        if (v >= 16 && b < SCHED_HIST_BUCKETS - 1) {
            double rep = (double)sched_hist_value(b);
            assert_true(rep > (double)v * 0.85 && rep < (double)v * 1.15);
        }
    }
    assert_int_equal(sched_hist_bucket(UINT64_MAX), SCHED_HIST_BUCKETS - 1);
    static sched_slot_t s;
    memset(&s, 0, sizeof s);
    assert_int_equal(sched_hist_quantile(s.hist, 0.5), 0);
    for (int i = 1; i <= 100; i++)
        sched_hist_add(&s, (uint64_t)i * 1000);      /* 1..100 us */
    double p50 = (double)sched_hist_quantile(s.hist, 0.5);
    double p99 = (double)sched_hist_quantile(s.hist, 0.99);
    assert_true(p50 > 44000 && p50 < 57000);
    assert_true(p99 > 87000 && p99 < 114000);
    assert_int_equal(s.handoffs, 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_detect_item_sync),
        cmocka_unit_test(test_detect_ctx_and_event_sync),
        cmocka_unit_test(test_detect_two_syncs_per_iteration),
        cmocka_unit_test(test_detect_gradient_accumulation),
        cmocka_unit_test(test_detect_phase_change),
        cmocka_unit_test(test_detect_no_period),
        cmocka_unit_test(test_detect_modes),
        cmocka_unit_test(test_detect_kernel_sequence),
        cmocka_unit_test(test_policy_list),
        cmocka_unit_test(test_policy_fifo_and_pack),
        cmocka_unit_test(test_policy_fair),
        cmocka_unit_test(test_policy_priority),
        cmocka_unit_test(test_policy_srtf),
        cmocka_unit_test_setup_teardown(test_sim_fair_equal, sim_setup, sim_teardown),
        cmocka_unit_test_setup_teardown(test_sim_fair_uneven_iterations, sim_setup, sim_teardown),
        cmocka_unit_test_setup_teardown(test_sim_fair_weighted, sim_setup, sim_teardown),
        cmocka_unit_test_setup_teardown(test_sim_priority, sim_setup, sim_teardown),
        cmocka_unit_test_setup_teardown(test_sim_srtf, sim_setup, sim_teardown),
        cmocka_unit_test_setup_teardown(test_sim_srtf_end_time, sim_setup, sim_teardown),
        cmocka_unit_test_setup_teardown(test_sim_fifo, sim_setup, sim_teardown),
        cmocka_unit_test_setup_teardown(test_sim_pack, sim_setup, sim_teardown),
        cmocka_unit_test_setup_teardown(test_sim_dead_holder, sim_setup, sim_teardown),
        cmocka_unit_test_setup_teardown(test_sim_repair, sim_setup, sim_teardown),
        cmocka_unit_test_setup_teardown(test_sim_probe, sim_setup, sim_teardown),
        cmocka_unit_test_setup_teardown(test_check_finds_violations, sim_setup, sim_teardown),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_histogram),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
