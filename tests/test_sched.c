/*
 * test_sched.c - the scheduler's pure parts and its decisions, in one process
 * with a fake clock:
 *   - the boundary detector on the sync patterns of training loops (item-like
 *     sync, context sync, event sync, two syncs per iteration, gradient
 *     accumulation, phase changes) and on kernel sequences without syncs;
 *   - each policy's choice on hand-built views;
 *   - SALUS_* parsing and its messages; the latency histogram.
 * Whole schedules over a real table are test_sched_table.c.
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

/* A transformer's iteration, with no sync: the embedding, `layers` layers
 * of `per` kernels forward, the head and the loss, the same layers'
 * backward kernels, the embedding's gradient, the optimizer.  Kernel
 * handles 0x100.. are the forward layer's, 0x200.. the backward's. */
static int transformer_iteration(uint64_t *out, int layers, int per)
{
    int n = 0;
    out[n++] = 0x10;                                  /* embedding */
    for (int l = 0; l < layers; l++)
        for (int j = 0; j < per; j++)
            out[n++] = 0x100 + (uint64_t)j;
    out[n++] = 0x20;                                  /* head */
    out[n++] = 0x30;                                  /* loss */
    for (int l = 0; l < layers; l++)
        for (int j = 0; j < per; j++)
            out[n++] = 0x200 + (uint64_t)j;
    out[n++] = 0x40;                                  /* embedding's gradient */
    out[n++] = 0x50;                                  /* optimizer */
    return n;
}

/* Boundaries at one kernel per iteration, the same each time, from the
 * third iteration on, and never among a layer's kernels (the last launches
 * repeat with a layer's period all through each pass): small and long
 * loops, the longest past the 512 launches a suffix search could see. */
static void kseq_transformer(int layers, int per, int iterations)
{
    static sched_kseq_t k;
    static uint64_t it[8192];
    int p = transformer_iteration(it, layers, per);
    sched_kseq_reset(&k);
    int boundaries = 0, phase = -1;
    for (int r = 0; r < iterations; r++)
        for (int i = 0; i < p; i++) {
            sched_kseq_push(&k, it[i]);
            if (!sched_kseq_at_anchor(&k))
                continue;
            if (it[i] >= 0x100)
                fail_msg("iteration %d: a boundary at kernel %d, inside a layer", r, i);
            if (r < 2)
                fail_msg("a boundary in iteration %d, before the loop showed twice", r);
            if (phase < 0)
                phase = i;
            if (i != phase)
                fail_msg("iteration %d: a boundary at kernel %d, not %d", r, i, phase);
            boundaries++;
        }
    assert_int_equal(boundaries, iterations - 2);
    assert_int_equal(sched_kseq_find(&k), 1);
    assert_int_equal(k.period, (uint64_t)p);
}

static void test_detect_transformer_without_syncs(void **state)
{
    (void)state;
    kseq_transformer(8, 3, 12);                       /* 53 kernels an iteration */
    kseq_transformer(24, 12, 6);                      /* 581 */
    kseq_transformer(160, 20, 5);                     /* 6,405 */
}

/* A phase change: evaluation's kernels drop the training loop's anchor,
 * which comes back once training resumes and its loop showed twice. */
static void test_detect_kernel_phase_change(void **state)
{
    (void)state;
    static sched_kseq_t k;
    static uint64_t it[256];
    int p = transformer_iteration(it, 4, 3);
    sched_kseq_reset(&k);
    for (int r = 0; r < 4; r++)
        for (int i = 0; i < p; i++)
            sched_kseq_push(&k, it[i]);
    assert_int_equal(sched_kseq_find(&k), 1);
    int during = 0;
    for (int i = 0; i < 3 * p; i++) {                 /* evaluation: other kernels */
        sched_kseq_push(&k, 0x900 + (uint64_t)(i % 7));
        during += sched_kseq_at_anchor(&k) && k.period == (uint64_t)p;
    }
    assert_int_equal(during, 0);
    int after = 0;
    for (int r = 0; r < 5; r++)
        for (int i = 0; i < p; i++) {
            sched_kseq_push(&k, it[i]);
            after += sched_kseq_at_anchor(&k);
        }
    assert_true(after >= 2 && after <= 3);
    assert_int_equal(k.period, (uint64_t)p);
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

/* ---- configuration -------------------------------------------------------------- */

static const char *const sched_vars[] = {
    "SALUS_POLICY", "SALUS_QUANTUM_MS", "SALUS_MAX_SLICE_MS", "SALUS_PRIORITY",
    "SALUS_ITERATIONS", "SALUS_LENGTH_MS", "SALUS_END_TIME", "SALUS_ITER_SYNC", NULL,
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
    assert_int_equal(c.length_ms, 0);
    assert_int_equal(c.end_time_s, 0);
    assert_int_equal(sched_config_deadline(&c, 5000), 0);
    assert_int_equal(c.iter_sync_every, 0);
    assert_string_equal(err, "");

    setenv("SALUS_POLICY", "SRTF", 1);
    setenv("SALUS_QUANTUM_MS", "250", 1);
    setenv("SALUS_MAX_SLICE_MS", "100", 1);          /* below the quantum: raised */
    setenv("SALUS_PRIORITY", "90", 1);
    setenv("SALUS_ITERATIONS", "1000", 1);
    setenv("SALUS_LENGTH_MS", "4294967295", 1);                /* 49 days, the most */
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
    assert_int_equal(c.length_ms, 4294967295u);
    assert_int_equal(c.iter_sync_every, 1);

    setenv("SALUS_POLICY", "round-robin", 1);
    setenv("SALUS_QUANTUM_MS", "-5", 1);
    setenv("SALUS_PRIORITY", "101", 1);
    setenv("SALUS_ITERATIONS", "lots", 1);
    setenv("SALUS_LENGTH_MS", "4294967296", 1);
    setenv("SALUS_END_TIME", "tomorrow", 1);
    setenv("SALUS_ITER_SYNC", "sometimes", 1);
    read_config(&c, err, sizeof err);
    assert_int_equal(c.policy, SCHED_POLICY_FAIR);
    assert_int_equal(c.quantum_ms, 100);
    assert_int_equal(c.priority, 50);
    assert_int_equal(c.iterations, 0);
    assert_int_equal(c.length_ms, 0);
    assert_int_equal(c.end_time_s, 0);
    assert_int_equal(c.iter_sync_every, 0);
    assert_non_null(strstr(err, "SALUS_POLICY=\"round-robin\""));
    assert_non_null(strstr(err, "fifo, fair, priority, srtf, pack"));
    assert_non_null(strstr(err, "SALUS_QUANTUM_MS=\"-5\""));
    assert_non_null(strstr(err, "SALUS_PRIORITY=\"101\""));
    assert_non_null(strstr(err, "from 0 to 100"));
    assert_non_null(strstr(err, "SALUS_ITERATIONS=\"lots\""));
    assert_non_null(strstr(err, "SALUS_LENGTH_MS=\"4294967296\""));
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
        cmocka_unit_test(test_detect_transformer_without_syncs),
        cmocka_unit_test(test_detect_kernel_phase_change),
        cmocka_unit_test(test_policy_list),
        cmocka_unit_test(test_policy_fifo_and_pack),
        cmocka_unit_test(test_policy_fair),
        cmocka_unit_test(test_policy_priority),
        cmocka_unit_test(test_policy_srtf),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_histogram),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
