/*
 * test_memory_hammer.c - many threads in several processes allocate and
 * free at random on every path, 100,000 operations in all, through the
 * module with a fake driver that checks, inside each "driver call", that no
 * process ever holds more than its limit; every process checks the table's
 * invariants (mem_layout.h) under the lock as it goes.  At the end the
 * table's accounting equals, for every process, the sum of its live
 * allocations.  The second run stops and continues some processes (SIGSTOP,
 * SIGCONT) and kills the others at random (SIGKILL, some of them holding the
 * table's lock, waiting, or reclaiming), and the accounting then returns to
 * exactly what the survivors hold.
 *
 * Shared between the processes (an anonymous shared mapping made before the
 * fork): what the fake driver holds for each process, and a count of
 * violations.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/testutil.h"
#include "memory/mem_layout.h"
#include "test_memory_lib.h"

#define PROCS      6
#define THREADS    4
#define CELLS      192
#define TOTAL_OPS  100000
#define CAPACITY   (256 * MB)
#define LIMIT      (96 * MB)

typedef struct shared {
    uint64_t live[PROCS];       /* bytes the fake driver holds for each process */
    uint64_t done_ops[PROCS];
    uint32_t violations;
    uint64_t refusals;
} shared_t;

typedef struct cell {
    int lock;
    int kind;
    uint64_t handle, bytes;
} cell_t;

static shared_t *sh;
static int me;                   /* process index */
static cell_t cells[CELLS];
static shm_table_t *tab;

static int setup(void **state)
{
    fk_setup(state);
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    munmap(sh, sizeof *sh);
    return fk_teardown(state);
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A size: mostly small, sometimes large (exact grants, shrinking). */
static uint64_t pick_size(uint64_t *s)
{
    uint64_t r = rnd(s);
    if (r % 16 == 0)
        return 4 * MB + rnd(s) % (28 * MB);
    return 1 + rnd(s) % (1 * MB);
}

static void violation(const char *what, uint64_t v)
{
    __atomic_add_fetch(&sh->violations, 1, __ATOMIC_RELAXED);
    fprintf(stderr, "process %d: %s (%llu)\n", me, what, (unsigned long long)v);
}

/* ---- the fake driver with its checks ------------------------------------- */

static uint64_t next_handle;

static CUresult h_alloc(int kind, uint64_t bytes, uint64_t *s, uint64_t *handle)
{
    mem_op_t op;
    CUresult rc = mem_alloc_begin(kind, -1, bytes, &op);
    if (rc != CUDA_SUCCESS)
        return rc;
    /* The driver: refuses now and then; otherwise holds the bytes. */
    if (rnd(s) % 32 == 0)
        return mem_alloc_end(&op, CUDA_ERROR_OUT_OF_MEMORY, 0);
    uint64_t mine = __atomic_add_fetch(&sh->live[me], bytes, __ATOMIC_SEQ_CST);
    if (mine > LIMIT)
        violation("the driver holds more than the limit", mine);
    uint64_t h = (1ull << 36) + __atomic_add_fetch(&next_handle, 4096, __ATOMIC_RELAXED);
    rc = mem_alloc_end(&op, CUDA_SUCCESS, h);
    if (rc != CUDA_SUCCESS) {
        __atomic_sub_fetch(&sh->live[me], bytes, __ATOMIC_SEQ_CST);   /* undone */
        return rc;
    }
    *handle = h;
    return CUDA_SUCCESS;
}

static void h_free(int kind, uint64_t handle, uint64_t bytes)
{
    mem_op_t op;
    /* Async and device pointers are freed by either call. */
    int how = kind == MEM_KIND_ASYNC || kind == MEM_KIND_POOL ? MEM_KIND_DEVICE
            : kind == MEM_KIND_DEVICE ? MEM_KIND_ASYNC : kind;
    mem_free_begin(how, handle, &op);
    __atomic_sub_fetch(&sh->live[me], bytes, __ATOMIC_SEQ_CST);
    mem_free_end(&op, CUDA_SUCCESS);
}

/* ---- the processes ------------------------------------------------------- */

typedef struct worker {
    int index;
    int ops;
} worker_t;

static void *work(void *arg)
{
    worker_t *w = arg;
    uint64_t s = 0x9e3779b97f4a7c15ull ^ ((uint64_t)getpid() << 16) ^ (uint64_t)w->index;
    int refused = 0;
    for (int done = 0; done < w->ops;) {
        cell_t *c = &cells[rnd(&s) % CELLS];
        if (__atomic_exchange_n(&c->lock, 1, __ATOMIC_ACQUIRE))
            continue;
        /* Refused: free something before asking again, as a framework
         * empties its cache (else a process of a full device only waits). */
        if (refused && !c->handle && --refused > 0) {
            __atomic_store_n(&c->lock, 0, __ATOMIC_RELEASE);
            continue;
        }
        refused = 0;
        if (c->handle) {
            h_free(c->kind, c->handle, c->bytes);
            c->handle = 0;
        } else {
            int kind = (int)(rnd(&s) % MEM_KINDS);
            uint64_t bytes = pick_size(&s), h = 0;
            if (h_alloc(kind, bytes, &s, &h) == CUDA_SUCCESS) {
                c->kind = kind;
                c->handle = h;
                c->bytes = bytes;
            } else {
                __atomic_add_fetch(&sh->refusals, 1, __ATOMIC_RELAXED);
                refused = CELLS;
            }
        }
        __atomic_store_n(&c->lock, 0, __ATOMIC_RELEASE);
        __atomic_add_fetch(&sh->done_ops[me], 1, __ATOMIC_RELAXED);
        if (++done % 2000 == 0 && w->index == 0)
            fk_check_invariants(tab);
    }
    return NULL;
}

/* One process: its threads hammer, then it checks its own accounting and
 * waits (pipe) for the test to check the table, then exits. */
static int process(int index, int ops, int cmd)
{
    me = index;
    fk_reset();
    fk.capacity = CAPACITY;
    setenv("SALUS_MEM_HEADROOM", "0", 1);
    setenv("SALUS_MEM_LIMIT", "96M", 1);
    setenv("SALUS_MEM_WAIT_MS", index % 2 ? "3" : "0", 1);   /* half wait, half do not */
    if (index == 1)
        setenv("SALUS_MEM_RESERVE", "32M", 1);
    tab = fk_start(fk_table);
    CHECK(tab);
    CHECK_EQ(mem_admit(0), CUDA_SUCCESS);
    fk_send(cmd, 'a');
    pthread_t th[THREADS];
    worker_t w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i].index = i;
        w[i].ops = (ops + THREADS - 1) / THREADS;
        CHECK(pthread_create(&th[i], NULL, work, &w[i]) == 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    /* Quiet now: the table, the map and the driver agree to the byte. */
    fk_acct_t a;
    fk_acct(tab, shm_self_peek(tab), 0, &a);
    uint64_t held = 0;
    for (int i = 0; i < CELLS; i++)
        held += cells[i].handle ? cells[i].bytes : 0;
    CHECK_EQ(a.used, held);
    CHECK_EQ(mem_map_sum(0, NULL), held);
    CHECK_EQ(__atomic_load_n(&sh->live[me], __ATOMIC_SEQ_CST), held);
    CHECK(a.granted <= LIMIT);
    fk_check_invariants(tab);
    fk_send(cmd, 'd');
    pause();
    return 0;
}

typedef struct proc {
    pid_t pid;
    int rep[2];
    int killed;
} proc_t;

static void spawn_all(proc_t *ps)
{
    for (int i = 0; i < PROCS; i++) {
        assert_int_equal(pipe(ps[i].rep), 0);
        ps[i].killed = 0;
        fflush(NULL);
        ps[i].pid = fork();
        if (ps[i].pid == 0) {
            close(ps[i].rep[0]);
            _exit(process(i, (TOTAL_OPS + PROCS - 1) / PROCS, ps[i].rep[1]));
        }
        close(ps[i].rep[1]);
        assert_int_equal(fk_recv(ps[i].rep[0]), 'a');   /* admitted: the reserver first */
    }
}

/* The survivors hold, each, what its driver holds; the table says so. */
static void check_end(proc_t *ps)
{
    shm_open_opts_t o = { .name = fk_table, .create = 1 };
    shm_table_t *t;
    assert_int_equal(shm_open_table(&o, &t), 0);
    uint64_t survivors = 0;
    for (int i = 0; i < PROCS; i++) {
        if (ps[i].killed)
            continue;
        assert_int_equal(fk_recv(ps[i].rep[0]), 'd');   /* checked itself */
        survivors += sh->live[i];
    }
    shm_reap_dead(t, 0);                 /* a reaper without the memory module */
    fk_devsum_t s;
    fk_devsum(t, 0, &s);
    assert_int_equal(s.used, survivors);
    assert_true(s.committed <= s.budget);
    assert_int_equal(s.budget, CAPACITY);
    for (int i = 0; i < PROCS; i++) {
        if (!ps[i].killed) {
            kill(ps[i].pid, SIGTERM);
            assert_int_equal(fk_wait(ps[i].pid, 10000), 128 + SIGTERM);
        }
        close(ps[i].rep[0]);
    }
    assert_int_equal(sh->violations, 0);
    shm_close_table(t);
}

static void test_hammer(void **state)
{
    (void)state;
    proc_t ps[PROCS];
    spawn_all(ps);
    check_end(ps);
    uint64_t ops = 0;
    for (int i = 0; i < PROCS; i++)
        ops += sh->done_ops[i];
    assert_true(ops >= TOTAL_OPS);
    assert_true(sh->refusals > 0);       /* the limits were reached */
    fprintf(stderr, "hammer: %llu operations, %llu refused\n", (unsigned long long)ops,
            (unsigned long long)sh->refusals);
}

typedef struct progress {
    int proc;
    uint64_t ops;      /* done when the process has done this many */
} progress_t;

static int has_progressed(void *arg)
{
    const progress_t *p = arg;
    return __atomic_load_n(&sh->done_ops[p->proc], __ATOMIC_RELAXED) >= p->ops;
}

static void test_hammer_with_kills(void **state)
{
    (void)state;
    proc_t ps[PROCS];
    spawn_all(ps);
    /* Kill half of them at random moments of their run. */
    uint64_t s = (uint64_t)tu_now_ns() | 1;
    int victims[PROCS / 2], n = 0;
    while (n < PROCS / 2) {
        int v = (int)(rnd(&s) % PROCS), dup = 0;
        for (int k = 0; k < n; k++)
            dup |= victims[k] == v;
        if (!dup)
            victims[n++] = v;
    }
    /* Stop and continue the others at random moments of their run: a stop
     * inside the table's lock only delays their peers (well under the
     * lock's deadline), and changes nothing of the accounting. */
    for (int i = 0; i < PROCS; i++) {
        int victim = 0;
        for (int k = 0; k < n; k++)
            victim |= victims[k] == i;
        if (victim)
            continue;
        progress_t p = { i, (uint64_t)(TOTAL_OPS / PROCS) * (5 + rnd(&s) % 60) / 100 };
        tu_await(has_progressed, &p, 1000);     /* or stopped at the deadline */
        kill(ps[i].pid, SIGSTOP);
        tu_sleep_ms(20 + (int)(rnd(&s) % 180));  /* the stop's length, not a wait */
        kill(ps[i].pid, SIGCONT);
    }
    for (int k = 0; k < n; k++) {
        progress_t p = { victims[k],
                         (uint64_t)(TOTAL_OPS / PROCS) * (10 + rnd(&s) % 70) / 100 };
        tu_await(has_progressed, &p, 1000);     /* or killed at the deadline */
        kill(ps[victims[k]].pid, SIGKILL);
        ps[victims[k]].killed = 1;
    }
    for (int k = 0; k < n; k++)
        assert_int_equal(fk_wait(ps[victims[k]].pid, 10000), 128 + SIGKILL);
    check_end(ps);
    fprintf(stderr, "hammer with kills: %llu refused\n", (unsigned long long)sh->refusals);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_hammer),
        T(test_hammer_with_kills),
    };
    return cmocka_run_group_tests_name("memory-hammer", tests, NULL, NULL);
}
