/*
 * test_ipc_lock.c - the table's lock (src/ipc/lock.c): every value a stray
 * write can leave in its word is either waited for (a live holder's) or
 * taken over and repaired, never trusted and never fatal; it excludes
 * threads of several processes; a holder that dies is replaced, also when
 * its guest id has passed to a live process; guest ids are given back.
 *
 * Every test uses its own table name; children are forked and waited for
 * with a deadline.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "ipc/shm_layout.h"
#include "lib/testutil.h"

static char name[64];

static int setup(void **state)
{
    (void)state;
    tu_unique_name("salus-lock", name, sizeof name);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    shm_unlink(name);
    return 0;
}

static shm_table_t *open_named(void)
{
    shm_open_opts_t o = { .name = name, .create = 1 };
    shm_table_t *t = NULL;
    if (shm_open_table(&o, &t) != 0)
        return NULL;
    return t;
}

static int repairs;
static void count_repair(shm_table_t *t, void *ctx)
{
    (void)t; (void)ctx;
    repairs++;
}

static int wait_child(pid_t pid)
{
    tu_proc_t p = { .pid = pid };
    return tu_wait(&p, 30000);
}

/* ---- every value of the word -------------------------------------------- */

/* Lock over a word someone wrote: taken at once and repaired (the word names
 * no live process), then left free. */
static void lock_over(shm_table_t *t, uint32_t value)
{
    __atomic_store_n(&t->map->hdr.lock, value, __ATOMIC_RELEASE);
    int before = repairs;
    assert_int_equal(shm_lock(t), 0);
    assert_int_equal(repairs, before + 1);
    shm_unlock(t);
    assert_int_equal(__atomic_load_n(&t->map->hdr.lock, __ATOMIC_ACQUIRE), 0);
}

static void test_every_stray_word_is_repaired(void **state)
{
    (void)state;
    shm_table_t *t = open_named();
    assert_non_null(t);
    shm_set_hooks(t, SHM_AREA_SCHED, NULL, count_repair, NULL);
    int self = shm_self(t);
    assert_true(self >= 0);
    uint32_t mine = ((t->map->slots[self].id.gen & SHM_LOCK_GEN_MASK) << SHM_LOCK_GEN_SHIFT) |
                    (uint32_t)(self + 1);
    uint32_t gens[] = { 0, 1, 2, 0x1234, SHM_LOCK_GEN_MASK };
    int tried = 0;
    /* Every id byte, with a few generations, with and without the waiters
     * bit: invalid ids, slots and guests nobody holds. */
    for (uint32_t id = 0; id <= 0xff; id++)
        for (size_t g = 0; g < sizeof gens / sizeof *gens; g++)
            for (uint32_t w = 0; w < 2; w++) {
                uint32_t v = (gens[g] << SHM_LOCK_GEN_SHIFT) | id | (w ? SHM_LOCK_WAITERS : 0);
                if (v == 0 || (v & ~SHM_LOCK_WAITERS) == mine)
                    continue;                  /* free; or ours, which is waited for */
                lock_over(t, v);
                tried++;
            }
    srandom(10);
    for (int i = 0; i < 2000; i++) {
        uint32_t v = (uint32_t)random() ^ ((uint32_t)random() << 16);
        if (v == 0 || (v & ~SHM_LOCK_WAITERS) == mine)
            continue;
        lock_over(t, v);
        tried++;
    }
    assert_true(tried > 4000);
    shm_close_table(t);
}

/* In a child: claim a slot, take the lock; tell the parent the word. */
static int lock_and_tell_word(void *arg)
{
    (void)arg;
    shm_table_t *c = open_named();
    if (!c || shm_self(c) < 0 || shm_lock(c) != 0)
        _exit(30);
    return (int)(__atomic_load_n(&c->map->hdr.lock, __ATOMIC_ACQUIRE) & ~SHM_LOCK_WAITERS);
}

/* A word naming a live holder is waited for; the same word once that holder
 * is dead is taken over. */
static void test_live_holder_is_trusted(void **state)
{
    (void)state;
    shm_table_t *t = open_named();
    assert_non_null(t);
    shm_set_hooks(t, SHM_AREA_SCHED, NULL, count_repair, NULL);
    int word;
    pid_t pid = tu_fork_teller(lock_and_tell_word, NULL, &word);
    assert_true(pid > 0);
    assert_int_equal(shm_lock(t), -ETIMEDOUT);          /* waited, bounded */
    kill(pid, SIGKILL);
    wait_child(pid);
    /* The word the dead holder left, with waiters: repaired at once. */
    repairs = 0;
    assert_int_equal(__atomic_load_n(&t->map->hdr.lock, __ATOMIC_ACQUIRE) & ~SHM_LOCK_WAITERS,
                     (uint32_t)word);
    uint64_t t0 = tu_now_ns();
    assert_int_equal(shm_lock(t), 0);
    assert_true(tu_now_ns() - t0 < 1000ull * 1000 * 1000);
    assert_int_equal(repairs, 1);
    shm_unlock(t);
    shm_close_table(t);
}

/* ---- exclusion ---------------------------------------------------------- */

enum { PROCS = 4, THREADS = 2, ROUNDS = 400 };

/* A plain counter in the table, read and written in two steps under the
 * lock with a yield between: a second holder would lose increments. */
static void *bump(void *arg)
{
    shm_table_t *c = arg;
    volatile uint64_t *counter = shm_global_area(c, SHM_AREA_SCHED);
    for (int r = 0; r < ROUNDS; r++) {
        if (shm_lock(c) != 0)
            return (void *)1;
        uint64_t v = *counter;
        if (r % 8 == 0)
            sched_yield();
        *counter = v + 1;
        shm_unlock(c);
    }
    return NULL;
}

static void test_lock_excludes_threads_and_processes(void **state)
{
    (void)state;
    shm_table_t *t = open_named();
    assert_non_null(t);
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        pids[p] = fork();
        if (pids[p] == 0) {
            shm_table_t *c = open_named();
            if (!c)
                _exit(40);
            if (p % 2)                       /* half of them lock as guests */
                shm_self(c);
            pthread_t th[THREADS];
            void *res;
            int bad = 0;
            for (int i = 0; i < THREADS; i++)
                pthread_create(&th[i], NULL, bump, c);
            for (int i = 0; i < THREADS; i++) {
                pthread_join(th[i], &res);
                bad |= res != NULL;
            }
            _exit(bad ? 41 : 0);
        }
    }
    for (int p = 0; p < PROCS; p++)
        assert_int_equal(wait_child(pids[p]), 0);
    uint64_t *counter = shm_global_area(t, SHM_AREA_SCHED);
    assert_int_equal(*counter, (uint64_t)PROCS * THREADS * ROUNDS);
    assert_int_equal(__atomic_load_n(&t->map->hdr.lock, __ATOMIC_ACQUIRE), 0);
    shm_close_table(t);
}

/* ---- guests ------------------------------------------------------------- */

/* In a child without a slot: take the lock (as a guest); tell the guest. */
static int lock_as_guest(void *arg)
{
    (void)arg;
    shm_table_t *c = open_named();
    if (!c || shm_lock(c) != 0)
        _exit(50);
    return c->guest;
}

/* In a child: lock, unlock, tell the ms that took (a guest of its own). */
static int lock_timed(void *arg)
{
    (void)arg;
    shm_table_t *c = open_named();
    if (!c)
        _exit(51);
    uint64_t t0 = tu_now_ns();
    if (shm_lock(c) != 0)
        _exit(52);
    shm_unlock(c);
    return (int)((tu_now_ns() - t0) / 1000000);
}

/* A guest dies holding the lock; the next slotless process borrows the same
 * guest id (its byte is free): the dead holder's word must not look alive. */
static void test_dead_guest_id_reused(void **state)
{
    (void)state;
    int guest, ms;
    pid_t dead = tu_fork_teller(lock_as_guest, NULL, &guest);
    assert_true(dead > 0);
    assert_int_equal(guest, 0);
    kill(dead, SIGKILL);
    wait_child(dead);
    pid_t next = tu_fork_teller(lock_timed, NULL, &ms);
    assert_true(next > 0);
    assert_true(ms < 1000);                  /* not the 3 s deadline */
    kill(next, SIGKILL);
    wait_child(next);
}

/* A process that registers gives its guest id back: 100 processes
 * registering one after the other, each staying, use no more than one. */
static void test_guest_given_back(void **state)
{
    (void)state;
    shm_table_t *t = open_named();
    assert_non_null(t);
    assert_true(shm_self(t) >= 0);
    assert_int_equal(t->guest, -1);
    pid_t pids[100];
    for (int i = 0; i < 100; i++) {
        int slot;
        pids[i] = tu_fork_teller((int (*)(void *))shm_self, t, &slot);
        assert_true(pids[i] > 0);
        assert_true(slot >= 0);
    }
    for (int g = 0; g < SHM_GUESTS; g++) {
        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
                            .l_start = SHM_LIVE_BASE + SHM_MAX_SLOTS + g, .l_len = 1 };
        assert_int_equal(fcntl(t->fd, F_GETLK, &fl), 0);
        assert_int_equal(fl.l_type, F_UNLCK);
    }
    for (int i = 0; i < 100; i++) {
        kill(pids[i], SIGKILL);
        wait_child(pids[i]);
    }
    shm_close_table(t);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_every_stray_word_is_repaired),
        T(test_live_holder_is_trusted),
        T(test_lock_excludes_threads_and_processes),
        T(test_dead_guest_id_reused),
        T(test_guest_given_back),
    };
    return cmocka_run_group_tests_name("ipc_lock", tests, NULL, NULL);
}
