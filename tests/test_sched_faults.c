/*
 * test_sched_faults.c - the lease between processes when the table goes
 * wrong (test_sched_lease_lib.h's jobs): a stall inside the table's lock,
 * with jobs that sync and jobs that never do, after which they are
 * scheduled again; a waiter whose own slot is spoiled goes on; a holder
 * stopped under fifo (SIGSTOP) leaves the GPU to its waiter, and continued
 * waits its turn; a job that found the table full joins the lease once a
 * slot comes free; a lease word written outside a grant goes back to the
 * holder it was granted to.
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ipc/shm_layout.h"
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

/* ---- a corrupted holder's slot -----------------------------------------------------
 * A stray write spoils the slot of the job that holds the GPU while another
 * waits: its state word (ipc's: the slot reads free) or its gate word
 * (sched's: it reads open, so that the holder's launches never look again;
 * a job that never syncs then kept the GPU for its whole max slice).  The
 * holder must give the lease up at once and say so once; its peer goes on
 * well within the max slice (4 s here; 2 s is the test's bound). */

typedef struct peer_goal {
    int peer;              /* the job that waited */
    uint64_t from;         /* the slot was spoiled */
    const char *err;       /* the spoiled job's stderr */
    int ran, said;         /* out */
} peer_goal_t;

static int peer_ran_and_said(void *arg)
{
    peer_goal_t *g = arg;
    uint32_t n = __atomic_load_n(&sh->n, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < n && i < MAX_EV && !g->ran; i++)
        if (sh->ev[i].job == g->peer && sh->ev[i].start > g->from)
            g->ran = 1;
    char *text = tu_read_file(g->err, NULL);
    g->said = text ? tu_count_lines(text, "slot in the table was overwritten") : 0;
    free(text);
    return g->ran && g->said;
}

static int slot_of(shm_table_t *t, pid_t pid)
{
    shm_ident_t id;
    for (int s = 0; s < SHM_MAX_SLOTS; s++)
        if (shm_slot_ident(t, s, &id) == 0 && id.pid == pid)
            return s;
    return -1;
}

static void corrupted_holder(int gate_word)
{
    char err[2][512];
    for (int i = 0; i < 2; i++)
        snprintf(err[i], sizeof err[i], "%s/faults-holder-%d-%d.err", tu_tmpdir(), gate_word, i);
    int sync = gate_word ? 0 : 1;
    job_t a = { .id = 0, .iterations = 1000000, .kernels = 2, .kernel_us = 1000, .sync = sync,
                .quantum_ms = 20, .max_slice_ms = 4000, .err = err[0] };
    job_t b = { .id = 1, .iterations = 1000000, .kernels = 2, .kernel_us = 1000, .sync = sync,
                .quantum_ms = 20, .max_slice_ms = 4000, .after = 1, .err = err[1] };
    pid_t pid[2] = { spawn(&a), spawn(&b) };
    shm_table_t *t = open_table();
    pid_t h = ts_await_holder(t, 1, 10000);                  /* one holds, one waits */
    assert_true(h == pid[0] || h == pid[1]);
    int holder = h == pid[1], slot = slot_of(t, h);
    assert_true(slot >= 0);
    shm_open_opts_t o = { .name = tname };
    shm_table_t *w;
    assert_int_equal(shm_open_table(&o, &w), 0);
    uint32_t *word = gate_word ? &sched_slot(w, slot)->gate : &w->map->slots[slot].id.state;
    peer_goal_t g = { .peer = !holder, .from = tu_now_ns(), .err = err[holder] };
    __atomic_store_n(word, 0u, __ATOMIC_RELAXED);
    int ok = tu_await(peer_ran_and_said, &g, 2000);
    uint64_t took = tu_now_ns() - g.from;
    kill(pid[0], SIGKILL);
    kill(pid[1], SIGKILL);
    wait_job(pid[0]);
    wait_job(pid[1]);
    shm_close_table(w);
    shm_close_table(t);
    if (!ok)
        fail_msg("%.0f ms after the holder's %s word was spoiled: the peer %s, and the holder "
                 "said so %d times", (double)took / 1e6, gate_word ? "gate" : "state",
                 g.ran ? "ran" : "launched nothing", g.said);
    print_message("      the peer ran, and the holder said why, %.1f ms after its slot was "
                  "spoiled\n", (double)took / 1e6);
    assert_int_equal(g.said, 1);                             /* once */
}

static void test_corrupted_holder_state(void **state)
{
    (void)state;
    corrupted_holder(0);
}

static void test_corrupted_holder_gate(void **state)
{
    (void)state;
    corrupted_holder(1);
}

/* ---- a stopped holder under fifo ----------------------------------------------------
 * fifo never shares, but a stopped process is idle whatever the policy: a
 * waiter behind a holder stopped by SIGSTOP gets the GPU while it is
 * stopped (before, it waited for the whole stop).  Continued, the holder
 * waits its turn like any waiter: under fifo, until the job that got the
 * GPU has ended; then it runs on. */

typedef struct stop_goal {
    int job;               /* whose kernels count */
    uint64_t from;         /* those starting after this */
    int want;              /* this many */
    uint64_t first;        /* out: the first one's start */
} stop_goal_t;

static int kernels_since(void *arg)
{
    stop_goal_t *g = arg;
    uint32_t n = __atomic_load_n(&sh->n, __ATOMIC_ACQUIRE);
    int seen = 0;
    g->first = 0;
    for (uint32_t i = 0; i < n && i < MAX_EV; i++)
        if (sh->ev[i].job == g->job && sh->ev[i].start > g->from) {
            seen++;
            if (!g->first || sh->ev[i].start < g->first)
                g->first = sh->ev[i].start;
        }
    return seen >= g->want;
}

static void test_stopped_holder_fifo(void **state)
{
    (void)state;
    job_t a = { .id = 0, .policy = "fifo", .iterations = 1000000, .kernels = 2,
                .kernel_us = 2000, .sync = 1 };
    job_t b = { .id = 1, .policy = "fifo", .iterations = 100, .kernels = 2, .kernel_us = 2000,
                .sync = 1, .after = 1 };
    pid_t pa = spawn(&a), pb = spawn(&b);
    shm_table_t *t = open_table();
    assert_int_equal(ts_await_holder(t, 1, 10000), pa);     /* a holds, b waits */
    kill(pa, SIGSTOP);
    stop_goal_t gb = { .job = 1, .from = tu_now_ns(), .want = 5 };
    int ran = tu_await(kernels_since, &gb, 20000);
    uint64_t stopped = gb.from;
    kill(pa, SIGCONT);
    if (!ran) {
        kill(pa, SIGKILL);
        kill(pb, SIGKILL);
        wait_job(pa);
        wait_job(pb);
        shm_close_table(t);
        fail_msg("under fifo, the waiter ran no kernel in the 20 s after the holder was "
                 "stopped");
    }
    print_message("      the waiter ran %.1f ms after the holder was stopped\n",
                  (double)(gb.first - stopped) / 1e6);
    assert_int_equal(wait_job(pb), 0);
    uint64_t b_end = sh->exit_ns[1];
    stop_goal_t ga = { .job = 0, .from = b_end, .want = 5 };   /* a goes on after b */
    int again = tu_await(kernels_since, &ga, 20000);
    kill(pa, SIGKILL);
    wait_job(pa);
    shm_close_table(t);
    if (!again)
        fail_msg("the continued holder ran no kernel in the 20 s after its peer ended");
    /* Its turn came after b's end: none of a's kernels that started after
     * the stop ran beside b's, but the one its stop may have caught between
     * its launch's gate and the kernel (launched while it held). */
    ev_t *e;
    int n = sorted_log(&e), exempt = 1;
    uint64_t b_last = last_end(e, n, 1);
    for (int i = 0; i < n; i++) {
        if (e[i].job != 0 || e[i].start <= stopped)
            continue;
        if (e[i].start < b_last && !exempt--)
            fail_msg("the continued holder ran at %.1f ms, before its peer's end at %.1f ms",
                     (double)(e[i].start - stopped) / 1e6, (double)(b_last - stopped) / 1e6);
    }
    free(e);
}

/* ---- a full table ------------------------------------------------------------------
 * Every slot is taken (a helper holds the liveness lock of each free one, as
 * 127 live processes would) when a second job starts: it runs unscheduled,
 * beside the holder, and says so once.  When the helper dies its slots are
 * reaped at the job's next try, and the job joins the lease at a sync: its
 * kernels stop overlapping the holder's.  Before, it ran unscheduled for
 * good. */

static int fill_free_slots(int out)
{
    shm_open_opts_t o = { .name = tname };
    shm_table_t *t;
    int n = 0;
    alarm(60);                        /* never outlives the test */
    if (shm_open_table(&o, &t) != 0)
        _exit(70);
    for (int i = 0; i < SHM_MAX_SLOTS; i++) {
        shm_slot_t *sl = &t->map->slots[i];
        if (__atomic_load_n(&sl->id.state, __ATOMIC_ACQUIRE) != SHM_FREE)
            continue;
        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
                            .l_start = SHM_LIVE_BASE + i, .l_len = 1 };
        if (fcntl(t->fd, F_SETLK, &fl) != 0)
            continue;
        sl->id.pid = getpid();
        sl->id.gen = sl->id.gen + 1 ? sl->id.gen + 1 : 1;
        __atomic_store_n(&sl->id.state, SHM_IDLE, __ATOMIC_RELEASE);
        n++;
    }
    if (write(out, &n, sizeof n) != (ssize_t)sizeof n)
        _exit(71);
    for (;;)
        pause();
}

static int overlapped(void *arg)
{
    (void)arg;
    ev_t *e;
    int n = sorted_log(&e), seen = 0;
    uint64_t end0 = 0;
    for (int i = 0; i < n && !seen; i++) {
        if (e[i].job == 0)
            end0 = e[i].end > end0 ? e[i].end : end0;
        else if (e[i].start < end0)
            seen = 1;
    }
    free(e);
    return seen;
}

static void test_full_table_joins_later(void **state)
{
    (void)state;
    char err[256];
    snprintf(err, sizeof err, "%s/full-table.err", tu_tmpdir());
    job_t a = { .id = 0, .iterations = 100000, .kernels = 2, .kernel_us = 2000, .sync = 1,
                .quantum_ms = 20 };
    job_t b = { .id = 1, .iterations = 100000, .kernels = 2, .kernel_us = 2000, .sync = 1,
                .quantum_ms = 20, .after = 1, .err = err };
    pid_t pa = spawn(&a);
    shm_table_t *t = open_table();
    assert_true(ts_await_holder(t, 0, 10000) == pa);
    int fds[2], filled = 0;
    assert_int_equal(pipe(fds), 0);
    pid_t filler = fork();
    assert_true(filler >= 0);
    if (filler == 0)
        _exit(fill_free_slots(fds[1]));
    close(fds[1]);
    assert_int_equal(read(fds[0], &filled, sizeof filled), (ssize_t)sizeof filled);
    close(fds[0]);
    assert_int_equal(filled, SHM_MAX_SLOTS - 1);
    pid_t pb = spawn(&b);
    int open_ran = tu_await(overlapped, NULL, 15000);
    kill(filler, SIGKILL);
    waitpid(filler, NULL, 0);
    overlap_goal_t g = { .freed = tu_now_ns() };
    int joined = open_ran && tu_await(scheduled_again, &g, 20000);
    kill(pa, SIGKILL);
    kill(pb, SIGKILL);
    wait_job(pa);
    wait_job(pb);
    shm_close_table(t);
    char *text = tu_read_file(err, NULL);
    int full = text ? tu_count_lines(text, "is full") : 0;
    int starts = text ? tu_count_lines(text, "GPU time slicing starts") : 0;
    if (!open_ran)
        fail_msg("the job that found the table full never ran beside the holder: %s",
                 text ? text : "");
    if (!joined)
        fail_msg("the job still runs unscheduled %.0f ms after slots came free: %s",
                 (double)(tu_now_ns() - g.freed) / 1e6, text ? text : "");
    if (full != 1 || starts != 1)
        fail_msg("the job said %d times that the table is full and %d times that time "
                 "slicing starts (once each): %s", full, starts, text ? text : "");
    print_message("      joined the lease %.1f ms after slots came free\n",
                  g.last > g.freed ? (double)(g.last - g.freed) / 1e6 : 0.0);
    free(text);
}

/* ---- a forged lease word ---------------------------------------------------------
 * A process sharing the table (the test, with a slot of its own, making no
 * calls) writes the device's lease word to name itself while a holds the
 * GPU under fifo and b waits.  Before, b waited on that live "holder" for as
 * long as it lived (fifo takes the GPU from no live holder) and a's end gave
 * nothing back, since the word no longer named it: b hung.  The waiter's
 * next look must put the lease back to a (the grant's record) and one of
 * them say so once; b then runs after a, in fifo's order. */

typedef struct lease_goal {
    sched_dev_t *dev;
    uint64_t want;
} lease_goal_t;

static int lease_is(void *arg)
{
    lease_goal_t *g = arg;
    return __atomic_load_n(&g->dev->lease, __ATOMIC_ACQUIRE) == g->want;
}

static int said_in(char err[][512], int n, const char *needle)
{
    int said = 0;
    for (int i = 0; i < n; i++) {
        char *text = tu_read_file(err[i], NULL);
        said += text ? tu_count_lines(text, needle) : 0;
        free(text);
    }
    return said;
}

static void test_forged_lease(void **state)
{
    (void)state;
    char err[2][512];
    for (int i = 0; i < 2; i++)
        snprintf(err[i], sizeof err[i], "%s/faults-forged-%d.err", tu_tmpdir(), i);
    job_t a = { .id = 0, .policy = "fifo", .iterations = 300, .kernels = 2, .kernel_us = 1000,
                .sync = 1, .err = err[0] };
    job_t b = { .id = 1, .policy = "fifo", .iterations = 20, .kernels = 2, .kernel_us = 1000,
                .sync = 1, .after = 1, .err = err[1] };
    pid_t pa = spawn(&a), pb = spawn(&b);
    shm_table_t *t = open_table();
    assert_int_equal(ts_await_holder(t, 1, 10000), pa);     /* a holds, b waits */
    shm_open_opts_t o = { .name = tname };
    shm_table_t *w;
    assert_int_equal(shm_open_table(&o, &w), 0);
    int me = shm_self(w);
    assert_true(me >= 0);
    sched_dev_t *dev = sched_dev(w, 0);
    lease_goal_t g = { .dev = dev, .want = __atomic_load_n(&dev->lease, __ATOMIC_ACQUIRE) };
    assert_int_equal(sched_lease_holder(w, g.want), slot_of(w, pa));
    uint64_t forged = tu_now_ns();
    __atomic_store_n(&dev->lease, sched_lease_of(me, shm_slot_gen(w, me)), __ATOMIC_RELEASE);
    int back = tu_await(lease_is, &g, 5000);
    uint64_t took = tu_now_ns() - forged;
    int ra = wait_job(pa), rb = wait_job(pb);
    shm_close_table(w);
    shm_close_table(t);
    if (!back)
        fail_msg("the lease word still named the forger %.0f ms after it was written",
                 (double)took / 1e6);
    print_message("      the lease was back with its holder %.1f ms after the forged write\n",
                  (double)took / 1e6);
    assert_int_equal(ra, 0);
    assert_int_equal(rb, 0);                                  /* not a wait forever */
    assert_int_equal(said_in(err, 2, "no grant wrote it"), 1);
    ev_t *e;
    int n = sorted_log(&e);
    for (int i = 0; i < n; i++)                              /* fifo: b only after a */
        if (e[i].job == 1)
            assert_true(e[i].start >= sh->exit_ns[0]);
    free(e);
}

int main(void)
{
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_lock_stall_recovers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lock_stall_recovers_without_syncs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupted_own_slot, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupted_holder_state, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupted_holder_gate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stopped_holder_fifo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_table_joins_later, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forged_lease, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
