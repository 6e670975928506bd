/*
 * test_sched_table.c - whole schedules simulated over a real table (lease.c's
 * transitions and the policies together), in one process with a fake clock:
 * slots held by idle child processes and time advanced by the test: fair,
 * weighted fair, priority, srtf (declared lengths and end times), fifo,
 * pack, a dead holder, the bounds of a new holder's wait for a drain,
 * repair of a corrupted device, probes of the gate,
 * and the invariant checker finding each invariant broken by hand.
 * The pure parts (detector, policies on hand-built views, SALUS_* parsing)
 * are test_sched.c.
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
    uint64_t setup_ns;                         /* its first iteration's length, 0: iter_ns */
    uint64_t deadline_ns;                      /* SALUS_END_TIME on the clock, 0: none */
    uint32_t length_ms;                        /* SALUS_LENGTH_MS, 0: none */
    uint32_t switch_us;                        /* what each tenure's start costs it */
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
    s->length_ms = j->length_ms;
    s->switch_us = j->switch_us;
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
        uint64_t took = j->done == 0 && j->setup_ns ? j->setup_ns : j->iter_ns;
        fake_now += took;
        j->done++;
        j->gpu_ns += took;
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

/* A job whose tenures start with 50 ms of paging keeps the GPU 8 times that
 * (400 ms) each turn, beyond its 100 ms quantum, so that switches stay at
 * most a ninth of the time; its peer, whose switches cost nothing, then
 * runs until it has had as much (fair shares), not a quantum each. */
static void test_sim_fair_switch_cost(void **state)
{
    (void)state;
    sim_device(SCHED_POLICY_FAIR, 100);
    job_t jobs[2] = { { .iter_ns = 10 * MS, .priority = 50, .switch_us = 50000 },
                      { .arrive_ns = 5 * MS, .iter_ns = 10 * MS, .priority = 50 } };
    int n = sim_run(jobs, 2, 3000 * MS, runs, 4096);
    int turns[2] = { 0, 0 };
    for (int i = 1, len = 1; i <= n; i++, len++)
        if (i == n || runs[i] != runs[i - 1]) {
            int j = runs[i - 1];
            if (i < n && turns[j] + turns[!j] > 0)   /* whole turns, after the first */
                assert_true(j == 0 ? len >= 40 && len <= 41 : len >= 39 && len <= 41);
            turns[j]++;
            len = 0;
        }
    assert_true(turns[0] >= 3 && turns[1] >= 3);     /* both go on taking turns */
    double share = (double)jobs[0].gpu_ns / (double)(jobs[0].gpu_ns + jobs[1].gpu_ns);
    assert_true(share > 0.45 && share < 0.6);
}

/* A job whose set-up holds the GPU 2 s without a boundary while its peer
 * waits is charged for it: the peer then runs until it has had as much
 * (about 200 iterations of 10 ms), and from then on they take turns of a
 * quantum.  (What fair owes a waiter is kept whole; the framework
 * scenarios start their jobs' set-ups one after the other for this.) */
static void test_sim_fair_setup_repaid(void **state)
{
    (void)state;
    sim_device(SCHED_POLICY_FAIR, 100);
    job_t jobs[2] = { { .iter_ns = 10 * MS, .setup_ns = 2000 * MS, .priority = 50 },
                      { .iter_ns = 10 * MS, .priority = 50 } };   /* both waiting at 0 */
    int n = sim_run(jobs, 2, 5000 * MS, runs, 4096);
    assert_int_equal(runs[0], 0);
    int turns = 0;
    for (int i = 1, len = 1; i < n; i++, len++)
        if (runs[i] != runs[i - 1]) {
            if (turns == 1)                          /* the peer's first: the set-up repaid */
                assert_true(len >= 199 && len <= 201);
            else if (turns > 1)                      /* then a quantum each */
                assert_true(len >= 10 && len <= 11);
            turns++;
            len = 0;
        }
    assert_true(turns >= 10);
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

/* The policy's order, as memory asks it to choose whom to page out: the
 * holder 0, the waiters 1, 2, ... in the order the policy would grant
 * them (priority: highest first), -1 for a slot in neither. */
static void test_rank_is_the_policy_order(void **state)
{
    (void)state;
    sim_device(SCHED_POLICY_PRIORITY, 100);
    job_t jobs[4] = { { .priority = 50 }, { .priority = 10 }, { .priority = 90 },
                      { .priority = 30 } };
    for (int i = 0; i < 4; i++) {
        jobs[i].slot = dummy_slot();
        sim_arrive(&jobs[i]);                 /* the first holds; the rest wait */
    }
    int idle = dummy_slot();
    assert_int_equal(shm_lock(T), 0);
    int r0 = sched_rank_locked(T, 0, jobs[0].slot), r1 = sched_rank_locked(T, 0, jobs[1].slot);
    int r2 = sched_rank_locked(T, 0, jobs[2].slot), r3 = sched_rank_locked(T, 0, jobs[3].slot);
    int ri = sched_rank_locked(T, 0, idle), rbad = sched_rank_locked(T, 5, jobs[1].slot);
    shm_unlock(T);
    assert_int_equal(r0, 0);                  /* the holder */
    assert_int_equal(r2, 1);                  /* priority 90, 30, 10 */
    assert_int_equal(r3, 2);
    assert_int_equal(r1, 3);
    assert_int_equal(ri, -1);
    assert_int_equal(rbad, -1);               /* a device nobody uses */
    check_table();
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

/* Lengths declared in time (SALUS_LENGTH_MS) rank at once, before any
 * iteration is measured, and are taken at their word once one is: a job of
 * many short iterations goes before one of fewer long ones (declared
 * iterations would rank them the other way round), a newcomer declared
 * longer gets no measuring iteration, a job with a length and no
 * iterations counts down the GPU time it has held, and a job whose
 * measured iterations are slower than it declared keeps its declared
 * rank. */
static void test_sim_srtf_length(void **state)
{
    (void)state;
    sim_device(SCHED_POLICY_SRTF, 100);
    job_t jobs[5] = {
        { .iter_ns = 20 * MS, .iterations = 10, .declare = 1, .length_ms = 100 },
        { .arrive_ns = 1 * MS, .iter_ns = 10 * MS, .iterations = 100, .declare = 1,
          .length_ms = 1000 },
        { .arrive_ns = 2 * MS, .iter_ns = 10 * MS, .iterations = 5, .length_ms = 50 },
        { .arrive_ns = 3 * MS, .iter_ns = 1 * MS, .iterations = 400, .declare = 1,
          .length_ms = 400 },
        { .arrive_ns = 4 * MS, .iter_ns = 10 * MS, .iterations = 15, .declare = 1,
          .length_ms = 150 },
    };
    int n = sim_run(jobs, 5, 10000 * MS, runs, 4096);
    static const struct { int job, count; } expect[] = {
        { 0, 1 },      /* alone; then 90 ms left of its declared 100 (measured: 180) */
        { 2, 5 },      /* 50 ms, counting down its GPU time: never preempted */
        { 0, 9 },      /* 90 before 150 (measured, 180 would go after) */
        { 4, 15 }, { 3, 400 }, { 1, 100 },
    };
    int k = 0;
    for (size_t e = 0; e < sizeof expect / sizeof expect[0]; e++)
        for (int i = 0; i < expect[e].count; i++, k++)
            if (k >= n || runs[k] != expect[e].job)
                fail_msg("iteration %d ran job %d, expected job %d", k, k < n ? runs[k] : -1,
                         expect[e].job);
    assert_int_equal(n, k);
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

/* The new holder's wait for a drain (drain.c), on a clock that moves 50 ms
 * at each look: as long as the old holder's begun drain takes, up to 10 s;
 * 1 s where the drain had not begun, or the old holder is in a gang (its
 * work may wait for a peer rank that waits for this lease); no wait once
 * answered.  Returns the clock's ms spent, after checking the mark is gone. */
static uint64_t stepping_clock(void)
{
    return fake_now += 50 * MS;
}

static uint64_t drain_wait_ms(int from, int to, uint32_t busy, uint64_t gang, uint32_t done)
{
    sched_slot_t *f = sched_slot(T, from);
    sched_dev_t *dev = dev0();
    f->drain_req = 5;
    f->drain_done = done;
    f->drain_busy = busy;
    f->gang = gang;
    dev->drain_gen = shm_slot_gen(T, from);
    dev->drain_seq = 5;
    dev->drain_from = (uint32_t)from + 1;
    sched_proc_t p = { .t = T, .slot = to, .gen = shm_slot_gen(T, to), .me = sched_slot(T, to) };
    sched_set_clock(stepping_clock);
    uint64_t t0 = fake_now;
    sched_drain_await(&p, 0);
    uint64_t ms = (fake_now - t0) / MS;
    sched_set_clock(fake_clock);
    assert_int_equal(dev->drain_from, 0);
    return ms;
}

static void test_drain_bounds(void **state)
{
    (void)state;
    sim_device(SCHED_POLICY_FAIR, 100);
    int from = dummy_slot(), to = dummy_slot();
    uint64_t begun = drain_wait_ms(from, to, 5, 0, 4);
    uint64_t before = drain_wait_ms(from, to, 4, 0, 4);
    uint64_t ganged = drain_wait_ms(from, to, 5, 77, 4);
    uint64_t answered = drain_wait_ms(from, to, 5, 0, 5);
    print_message("drain waits: begun %llu ms, not begun %llu, a gang's %llu, answered %llu\n",
                  (unsigned long long)begun, (unsigned long long)before,
                  (unsigned long long)ganged, (unsigned long long)answered);
    assert_true(begun >= 10000 && begun <= 10200);
    assert_true(before >= 1000 && before <= 1200);
    assert_true(ganged >= 1000 && ganged <= 1200);
    assert_true(answered <= 100);
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

    /* The waiter's slot written into the lease word outside a grant: found,
     * and the holder's decision (under the lock) puts the grant back. */
    uint64_t granted = dev->lease;
    dev->lease = sched_lease_of(jobs[1].slot, shm_slot_gen(T, jobs[1].slot));
    assert_violation("outside a grant");
    assert_int_equal(shm_lock(T), 0);
    assert_int_equal(sched_decide_locked(T, 0, jobs[0].slot, 0, fake_now), SCHED_NO_SLOT);
    assert_int_equal(sched_lease_own_check_locked(T, 0), 0);     /* nothing left to mend */
    shm_unlock(T);
    assert_int_equal(dev->lease, granted);
    assert_int_equal(waiter->gate, SCHED_GATE_CLOSED);
    assert_null(checked());
    dev->lease = sched_lease_of(77, 12345);          /* naming nobody, record intact */
    assert_int_equal(shm_lock(T), 0);
    assert_int_equal(sched_lease_own_check_locked(T, 0), 1);
    shm_unlock(T);
    assert_int_equal(dev->lease, granted);
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

int main(void)
{
#define S(f) cmocka_unit_test_setup_teardown(f, sim_setup, sim_teardown)
    const struct CMUnitTest tests[] = {
        S(test_sim_fair_equal),
        S(test_sim_fair_uneven_iterations),
        S(test_sim_fair_weighted),
        S(test_sim_priority),
        S(test_rank_is_the_policy_order),
        S(test_sim_srtf),
        S(test_sim_srtf_end_time),
        S(test_sim_srtf_length),
        S(test_sim_fair_switch_cost),
        S(test_sim_fair_setup_repaid),
        S(test_sim_fifo),
        S(test_sim_pack),
        S(test_sim_dead_holder),
        S(test_drain_bounds),
        S(test_sim_repair),
        S(test_sim_probe),
        S(test_check_finds_violations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
