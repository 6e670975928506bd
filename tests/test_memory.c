/*
 * test_memory.c - memory admission within one process, driven through the
 * module's interface with a fake driver: every allocation path against
 * SALUS_MEM_LIMIT (a VMM handle against the same limit as cuMemAlloc), the
 * driver's failures, unknown and reused pointers, pitched allocations at
 * their true size, the process's own view (cuMemGetInfo, cuDeviceTotalMem),
 * the environment's rejections, fork, failing open, the report and monitors.
 *
 * The module starts once per process, so each test runs in a forked child
 * with its own table; a child reports a failed check through its exit
 * status (CHECK), and the parent asserts it is 0.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/testutil.h"
#include "memory/mem_layout.h"
#include "test_memory_lib.h"

static void in_child(int (*fn)(void *), void *arg)
{
    pid_t pid = fk_fork(fn, arg);
    assert_true(pid > 0);
    assert_int_equal(fk_wait(pid, 30000), 0);
}

/* The calling process's accounting on table device 0. */
static fk_acct_t self_acct(shm_table_t *t)
{
    fk_acct_t a;
    fk_acct(t, shm_self_peek(t), 0, &a);
    return a;
}

/* ---- every path against the limit --------------------------------------- */

/* The module started on this test's table with a 64 MiB limit and no
 * headroom: the whole device is budget. */
static shm_table_t *start_64m(void)
{
    fk_reset();
    setenv("SALUS_MEM_LIMIT", "64M", 1);
    setenv("SALUS_MEM_HEADROOM", "0", 1);
    shm_table_t *t = fk_start(fk_table);
    CHECK(t);
    return t;
}

static int limit_paths(void *arg)
{
    (void)arg;
    shm_table_t *t = start_64m();
    uint64_t a, b, c, refusals = 0;
    for (int k = 0; k < MEM_KINDS; k++) {
        CHECK_EQ(fk_alloc(k, 40 * MB, &a), CUDA_SUCCESS);
        CHECK_EQ(fk_alloc(k, 30 * MB, &b), CUDA_ERROR_OUT_OF_MEMORY);
        CHECK_EQ(fk_alloc(k, 24 * MB, &b), CUDA_SUCCESS);          /* to the byte */
        CHECK_EQ(fk_alloc(k, 1, &c), CUDA_ERROR_OUT_OF_MEMORY);
        refusals += 2;
        CHECK_EQ(self_acct(t).used, 64 * MB);
        CHECK(self_acct(t).granted <= 64 * MB);
        fk_free(k, a);
        fk_free(k, b);
        CHECK_EQ(self_acct(t).used, 0);
    }
    /* One limit for every path: a VMM handle counts as cuMemAlloc does. */
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 40 * MB, &a), CUDA_SUCCESS);
    CHECK_EQ(fk_alloc(MEM_KIND_VMM, 30 * MB, &b), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(fk_alloc(MEM_KIND_VMM, 20 * MB, &b), CUDA_SUCCESS);
    CHECK_EQ(fk_alloc(MEM_KIND_ARRAY, 4 * MB + 1, &c), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(fk_alloc(MEM_KIND_MANAGED, 4 * MB, &c), CUDA_SUCCESS);
    refusals += 2;
    fk_free(MEM_KIND_DEVICE, a);
    CHECK_EQ(fk_alloc(MEM_KIND_VMM, 40 * MB, &a), CUDA_SUCCESS);
    CHECK_EQ(self_acct(t).used, 64 * MB);
    mem_slot_view_t v;
    CHECK(mem_view_slot(t, shm_self_peek(t), &v) == 0);
    CHECK_EQ(v.oom_refusals, refusals);
    CHECK_EQ(v.limit, 64 * MB);
    CHECK_EQ(v.peak, 64 * MB);
    fk_check_invariants(t);
    return 0;
}

static void test_every_path_respects_the_limit(void **state)
{
    (void)state;
    in_child(limit_paths, NULL);
}

/* ---- the driver's failures, unknown and reused pointers ------------------ */

static int driver_cases(void *arg)
{
    (void)arg;
    fk_reset();
    setenv("SALUS_MEM_LIMIT", "64M", 1);
    shm_table_t *t = fk_start(fk_table);
    CHECK(t);
    uint64_t a, b;
    /* A refusal by the driver gives the reservation back. */
    fk.fail_allocs = 1;
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 60 * MB, &a), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(self_acct(t).used, 0);
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 60 * MB, &a), CUDA_SUCCESS);
    /* Unknown pointers, other namespaces and double frees pass untouched. */
    fk_free(MEM_KIND_DEVICE, 0xdead000);
    fk_free(MEM_KIND_VMM, a);                 /* same number, a VMM handle */
    fk_free(MEM_KIND_ARRAY, a);
    CHECK_EQ(self_acct(t).used, 60 * MB);
    fk_free(MEM_KIND_DEVICE, a);
    fk_free(MEM_KIND_DEVICE, a);
    CHECK_EQ(self_acct(t).used, 0);
    /* Async memory may be freed by cuMemFree and the reverse. */
    CHECK_EQ(fk_alloc(MEM_KIND_ASYNC, 8 * MB, &a), CUDA_SUCCESS);
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 8 * MB, &b), CUDA_SUCCESS);
    fk_free(MEM_KIND_DEVICE, a);
    fk_free(MEM_KIND_ASYNC, b);
    CHECK_EQ(self_acct(t).used, 0);
    /* A driver free that fails keeps the allocation counted. */
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 8 * MB, &a), CUDA_SUCCESS);
    mem_op_t op;
    mem_free_begin(MEM_KIND_DEVICE, a, &op);
    mem_free_end(&op, CUDA_ERROR_INVALID_VALUE);
    CHECK_EQ(self_acct(t).used, 8 * MB);
    fk_free(MEM_KIND_DEVICE, a);
    CHECK_EQ(self_acct(t).used, 0);
    /* The driver hands out an address we still hold: that allocation went
     * away unseen (its context was destroyed); its bytes come back. */
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 8 * MB, &a), CUDA_SUCCESS);
    fk.force_addr = a;
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 2 * MB, &b), CUDA_SUCCESS);
    CHECK_EQ(b, a);
    CHECK_EQ(self_acct(t).used, 2 * MB);
    fk_free(MEM_KIND_DEVICE, b);
    CHECK_EQ(self_acct(t).used, 0);
    /* A context went away with its allocations: those the driver no longer
     * knows come back; VMM handles outlive contexts. */
    uint64_t p1, p2, arr, vmm, later;
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 3 * MB, &p1), CUDA_SUCCESS);
    CHECK_EQ(fk_alloc(MEM_KIND_MANAGED, 4 * MB, &p2), CUDA_SUCCESS);
    CHECK_EQ(fk_alloc(MEM_KIND_ARRAY, 5 * MB, &arr), CUDA_SUCCESS);
    CHECK_EQ(fk_alloc(MEM_KIND_VMM, 6 * MB, &vmm), CUDA_SUCCESS);
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 7 * MB, &later), CUDA_SUCCESS);
    mem_context_gone(0);                          /* the driver knows them all */
    CHECK_EQ(self_acct(t).used, 25 * MB);
    fk.gone_below = later;
    mem_context_gone(3);                          /* a device never used: nothing */
    CHECK_EQ(self_acct(t).used, 25 * MB);
    mem_context_gone(-1);
    CHECK_EQ(self_acct(t).used, 13 * MB);
    fk_free(MEM_KIND_DEVICE, p1);                 /* gone already: unknown now */
    CHECK_EQ(self_acct(t).used, 13 * MB);
    fk_free(MEM_KIND_VMM, vmm);
    fk_free(MEM_KIND_DEVICE, later);
    CHECK_EQ(self_acct(t).used, 0);
    fk.gone_below = 0;
    /* Zero bytes and no context: the driver answers, nothing is counted. */
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 0, &a), CUDA_SUCCESS);
    fk.device = -1;
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 100 * MB, &a), CUDA_SUCCESS);
    fk.device = 0;
    CHECK_EQ(self_acct(t).used, 0);
    return 0;
}

static void test_driver_failures_and_unknown_pointers(void **state)
{
    (void)state;
    in_child(driver_cases, NULL);
}

static int pitch_cases(void *arg)
{
    (void)arg;
    fk_reset();
    setenv("SALUS_MEM_LIMIT", "64M", 1);
    shm_table_t *t = fk_start(fk_table);
    CHECK(t);
    uint64_t a, b, c;
    fk.pitch_size = 12 * MB;                      /* more than width x height */
    CHECK_EQ(fk_alloc(MEM_KIND_PITCH, 10 * MB, &a), CUDA_SUCCESS);
    CHECK_EQ(self_acct(t).used, 12 * MB);
    fk.pitch_size = 8 * MB;                       /* less */
    CHECK_EQ(fk_alloc(MEM_KIND_PITCH, 10 * MB, &b), CUDA_SUCCESS);
    CHECK_EQ(self_acct(t).used, 20 * MB);
    fk.pitch_size = 0;                            /* unknown: as asked */
    CHECK_EQ(fk_alloc(MEM_KIND_PITCH, 10 * MB, &c), CUDA_SUCCESS);
    CHECK_EQ(self_acct(t).used, 30 * MB);
    /* The true size does not fit: undone, refused, nothing kept. */
    fk.pitch_size = 40 * MB;
    int undone = fk_undone();
    uint64_t d;
    CHECK_EQ(fk_alloc(MEM_KIND_PITCH, 30 * MB, &d), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(fk_undone(), undone + 1);
    CHECK_EQ(self_acct(t).used, 30 * MB);
    fk_free(MEM_KIND_PITCH, a);
    fk_free(MEM_KIND_DEVICE, b);
    fk_free(MEM_KIND_DEVICE, c);
    CHECK_EQ(self_acct(t).used, 0);
    return 0;
}

/* A pitched allocation that grew past what was charged, with the table's
 * lock unusable by then (its object shrunk under the mapping: ipc's guard
 * reads the table as zeros and shm_lock refuses it): the growth passes
 * uncounted, as every call does from then on, and the allocation stands
 * (fail open), never freed and refused. */
static int pitch_lock_unusable_cases(void *arg)
{
    (void)arg;
    char path[512];
    fk_reset();
    setenv("SALUS_MEM_LIMIT", "64M", 1);
    setenv("SALUS_MEM_HEADROOM", "0", 1);
    fk_capture_stderr(path, sizeof path);
    shm_table_t *t = fk_start(fk_table);
    CHECK(t);
    uint64_t a;
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 1 * MB, &a), CUDA_SUCCESS);   /* registered */
    mem_op_t op;
    CHECK_EQ(mem_alloc_begin(MEM_KIND_PITCH, MEM_DEV_CURRENT, 10 * MB, &op), CUDA_SUCCESS);
    int fd = shm_open(fk_table, O_RDWR, 0);
    CHECK(fd >= 0);
    CHECK(ftruncate(fd, 0) == 0);
    close(fd);
    fk.pitch_size = 40 * MB;                      /* beyond any spare: the lock is asked */
    int undone = fk_undone();
    CHECK_EQ(mem_alloc_end(&op, CUDA_SUCCESS, 0x7000000), CUDA_SUCCESS);
    CHECK_EQ(fk_undone(), undone);                /* kept, not freed */
    CHECK_EQ(fk_alloc(MEM_KIND_PITCH, 10 * MB, &a), CUDA_SUCCESS);   /* uncounted */
    CHECK_EQ(fk_undone(), undone);
    fk_free(MEM_KIND_PITCH, 0x7000000);
    fk_free(MEM_KIND_PITCH, a);
    char *err = tu_read_file(path, NULL);
    CHECK(err && tu_count_lines(err, "pass through without limits") == 1);
    free(err);
    return 0;
}

static void test_pitch_true_size(void **state)
{
    (void)state;
    in_child(pitch_cases, NULL);
    shm_unlink(fk_table);
    in_child(pitch_lock_unusable_cases, NULL);
}

/* ---- the process's own view --------------------------------------------- */

typedef struct view_arg {
    int to_peer[2], to_viewer[2];
} view_arg_t;

static int view_peer(void *arg)
{
    view_arg_t *p = arg;
    fk_reset();
    setenv("SALUS_MEM_HEADROOM", "0", 1);
    CHECK(fk_recv(p->to_peer[0]) == 'g');
    shm_table_t *t = fk_start(fk_table);
    CHECK(t);
    uint64_t a;
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 900 * MB, &a), CUDA_SUCCESS);
    fk_send(p->to_viewer[1], 'a');
    CHECK(fk_recv(p->to_peer[0]) == 'f');
    fk_free(MEM_KIND_DEVICE, a);
    fk_send(p->to_viewer[1], 'b');
    fk_recv(p->to_peer[0]);
    return 0;
}

static int view_cases(void *arg)
{
    view_arg_t *p = arg;
    fk_reset();
    setenv("SALUS_MEM_LIMIT", "25%", 1);           /* of the budget */
    setenv("SALUS_MEM_HEADROOM", "0", 1);
    shm_table_t *t = fk_start(fk_table);
    CHECK(t);
    size_t free_b = 1024 * MB, total = 1024 * MB, one = 1024 * MB;
    mem_view_total(&one, 0);
    CHECK_EQ(one, 256 * MB);
    mem_view_info(&free_b, &total);
    CHECK_EQ(total, 256 * MB);
    CHECK_EQ(free_b, 256 * MB);
    uint64_t a;
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 100 * MB, &a), CUDA_SUCCESS);
    free_b = total = 1024 * MB;
    mem_view_info(&free_b, &total);
    CHECK_EQ(free_b, 156 * MB);
    free_b = 50 * MB;                             /* the driver knows less is free */
    total = 1024 * MB;
    mem_view_info(&free_b, &total);
    CHECK_EQ(free_b, 50 * MB);
    free_b = total = 100 * MB;                    /* never above the device */
    mem_view_info(&free_b, &total);
    CHECK_EQ(total, 100 * MB);
    CHECK(free_b <= total);
    /* A peer takes 900M of 1024M: we could get 24M more, not 156M. */
    fk_send(p->to_peer[1], 'g');
    CHECK(fk_recv(p->to_viewer[0]) == 'a');
    free_b = total = 1024 * MB;
    mem_view_info(&free_b, &total);
    CHECK_EQ(total, 256 * MB);
    CHECK_EQ(free_b, 24 * MB);
    uint64_t b;
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 24 * MB, &b), CUDA_SUCCESS);
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 1, &b), CUDA_ERROR_OUT_OF_MEMORY);
    free_b = total = 1024 * MB;
    mem_view_info(&free_b, &total);
    CHECK_EQ(free_b, 0);                          /* never negative */
    fk_send(p->to_peer[1], 'f');
    CHECK(fk_recv(p->to_viewer[0]) == 'b');
    free_b = total = 1024 * MB;
    mem_view_info(&free_b, &total);
    CHECK_EQ(free_b, 256 * MB - 124 * MB);
    fk_send(p->to_peer[1], 'x');
    return 0;
}

static int default_budget_view(void *arg)
{
    (void)arg;
    fk_reset();
    fk.capacity = 16384 * MB;
    shm_table_t *t = fk_start(fk_table);
    CHECK(t);
    size_t free_b = 16384 * MB, total = 16384 * MB, one = 16384 * MB;
    mem_view_info(&free_b, &total);
    CHECK_EQ(total, 16384 * MB - 16384 * MB / 20);   /* the default headroom: 5% */
    CHECK_EQ(free_b, total);
    mem_view_total(&one, 0);
    CHECK_EQ(one, total);
    return 0;
}

static void test_views(void **state)
{
    (void)state;
    view_arg_t p;
    assert_int_equal(pipe(p.to_peer), 0);
    assert_int_equal(pipe(p.to_viewer), 0);
    pid_t viewer = fk_fork(view_cases, &p);
    pid_t peer = fk_fork(view_peer, &p);
    assert_int_equal(fk_wait(viewer, 30000), 0);
    assert_int_equal(fk_wait(peer, 30000), 0);
    shm_unlink(fk_table);
    in_child(default_budget_view, NULL);
}

/* ---- the environment ---------------------------------------------------- */

typedef struct env_case {
    const char *name, *value, *expect;
} env_case_t;

static int env_rejected(void *arg)
{
    const env_case_t *c = arg;
    char path[512];
    fk_reset();
    setenv("SALUS_MEM_HEADROOM", "0", 1);
    setenv(c->name, c->value, 1);
    fk_capture_stderr(path, sizeof path);
    shm_table_t *t = fk_start(fk_table);
    CHECK(t);                                     /* a bad value is not fatal */
    char *err = tu_read_file(path, NULL);
    CHECK(err);
    char want[160];
    snprintf(want, sizeof want, "%s=\"%s\"", c->name, c->value);
    if (!strstr(err, want) || !strstr(err, c->expect)) {
        fprintf(stdout, "stderr was: %s\n", err);
        CHECK(!"message names the variable, its value and what is accepted");
    }
    /* ... and the default is used: no limit, no reservation, no wait. */
    uint64_t a;
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 500 * MB, &a), CUDA_SUCCESS);
    CHECK_EQ(mem_admit(0), CUDA_SUCCESS);
    free(err);
    return 0;
}

static int env_accepted(void *arg)
{
    (void)arg;
    fk_reset();
    setenv("SALUS_MEM_HEADROOM", "24M", 1);       /* budget 1000M */
    setenv("SALUS_MEM_LIMIT", "1.5GiB", 1);       /* more than the budget: the budget */
    shm_table_t *t = fk_start(fk_table);
    CHECK(t);
    size_t one = 1024 * MB;
    mem_view_total(&one, 0);
    CHECK_EQ(one, 1000 * MB);
    return 0;
}

static int env_percent(void *arg)
{
    (void)arg;
    fk_reset();
    setenv("SALUS_MEM_HEADROOM", "50%", 1);       /* of the capacity: budget 512M */
    setenv("SALUS_MEM_LIMIT", "12.5%", 1);        /* of the budget: 64M */
    shm_table_t *t = fk_start(fk_table);
    CHECK(t);
    size_t one = 1024 * MB;
    mem_view_total(&one, 0);
    CHECK_EQ(one, 64 * MB);
    return 0;
}

static void test_environment(void **state)
{
    (void)state;
    static const env_case_t bad[] = {
        { "SALUS_MEM_LIMIT", "12Q", "powers of 1024" },
        { "SALUS_MEM_LIMIT", "150%", "percentage in (0, 100]" },
        { "SALUS_MEM_LIMIT", "0%", "percentage" },
        { "SALUS_MEM_LIMIT", "-1G", "takes a size" },
        { "SALUS_MEM_LIMIT", "0", "so is 0, which would refuse every allocation" },
        { "SALUS_MEM_LIMIT", "0G", "so is 0, which would refuse every allocation" },
        { "SALUS_MEM_LIMIT", "1.5", "takes a size" },
        { "SALUS_MEM_LIMIT", "20", "a number without a unit is refused" },
        { "SALUS_MEM_LIMIT", "nanG", "20G, 512M" },
        { "SALUS_MEM_RESERVE", "nan%", "percentage in (0, 100]" },
        { "SALUS_MEM_RESERVE", "0x10M", "takes a size" },
        { "SALUS_MEM_RESERVE", "lots", "takes a size" },
        { "SALUS_MEM_HEADROOM", "101%", "percentage" },
        { "SALUS_MEM_WAIT_MS", "-5", "whole number from 0" },
        { "SALUS_MEM_WAIT_MS", "1s", "whole number from 0" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        shm_unlink(fk_table);
        in_child(env_rejected, (void *)&bad[i]);
    }
    shm_unlink(fk_table);
    in_child(env_accepted, NULL);
    shm_unlink(fk_table);
    in_child(env_percent, NULL);
}

/* ---- fork --------------------------------------------------------------- */

static int fork_parent_side(void *arg)
{
    (void)arg;
    fk_reset();
    shm_table_t *t = fk_start(fk_table);
    CHECK(t);
    uint64_t h, mine;
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 10 * MB, &h), CUDA_SUCCESS);
    int self = shm_self_peek(t);
    pid_t pid = fork();
    if (pid == 0) {
        /* The child inherits no accounting: freeing the parent's pointer is
         * the driver's business; its own allocations are its own. */
        CHECK(shm_self_peek(t) == -1);
        CHECK_EQ(fk_free(MEM_KIND_DEVICE, h), CUDA_SUCCESS);
        fk_acct_t pa;
        fk_acct(t, self, 0, &pa);
        CHECK_EQ(pa.used, 10 * MB);
        CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 5 * MB, &mine), CUDA_SUCCESS);
        int child_slot = shm_self_peek(t);
        CHECK(child_slot >= 0 && child_slot != self);
        fk_acct(t, child_slot, 0, &pa);
        CHECK_EQ(pa.used, 5 * MB);
        fk_acct(t, self, 0, &pa);
        CHECK_EQ(pa.used, 10 * MB);
        _exit(0);
    }
    CHECK_EQ(fk_wait(pid, 10000), 0);
    CHECK_EQ(self_acct(t).used, 10 * MB);
    shm_reap_dead(t, 0);                          /* the child exited: reaped */
    fk_devsum_t s;
    fk_devsum(t, 0, &s);
    CHECK_EQ(s.used, 10 * MB);
    fk_free(MEM_KIND_DEVICE, h);
    CHECK_EQ(self_acct(t).used, 0);
    return 0;
}

static void test_fork(void **state)
{
    (void)state;
    in_child(fork_parent_side, NULL);
}

/* ---- failing open ------------------------------------------------------- */

static int open_no_driver(void *arg)
{
    (void)arg;
    char path[512];
    fk_reset();
    fk_capture_stderr(path, sizeof path);
    drv_t d = fk_driver();
    d.ctx_get_device = NULL;
    shm_open_opts_t o = { .name = fk_table, .create = 1 };
    shm_table_t *t;
    CHECK(shm_open_table(&o, &t) == 0);
    CHECK(mem_init(&d, t) == -1);
    CHECK(mem_init(&d, t) == -1);                 /* once */
    mem_op_t op;
    CHECK_EQ(mem_alloc_begin(MEM_KIND_DEVICE, -1, 1ull << 40, &op), CUDA_SUCCESS);
    CHECK_EQ(mem_alloc_end(&op, CUDA_SUCCESS, 0x1000), CUDA_SUCCESS);
    mem_free_begin(MEM_KIND_DEVICE, 0x1000, &op);
    mem_free_end(&op, CUDA_SUCCESS);
    CHECK_EQ(mem_admit(0), CUDA_SUCCESS);
    size_t f = 7, tot = 9;
    mem_view_info(&f, &tot);
    CHECK(f == 7 && tot == 9);
    char buf[256];
    CHECK_EQ(mem_report_fields(buf, sizeof buf), 0);
    char *err = tu_read_file(path, NULL);
    CHECK(err && tu_count_lines(err, "pass through") == 1);
    free(err);
    return 0;
}

static int open_bad_device(void *arg)
{
    (void)arg;
    char path[512];
    fk_reset();
    fk.capacity = 0;                              /* a driver answer we cannot use */
    fk_capture_stderr(path, sizeof path);
    shm_table_t *t = fk_start(fk_table);
    CHECK(t);
    uint64_t a;
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 1ull << 40, &a), CUDA_SUCCESS);
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 1ull << 40, &a), CUDA_SUCCESS);
    char *err = tu_read_file(path, NULL);
    CHECK(err && tu_count_lines(err, "without limits") == 1);
    free(err);
    return 0;
}

/* A peer holds the table's lock and hangs: one wait of a few seconds, then
 * the process counts alone, within its own limit (the budget, 768M), never
 * hung again: later tries of the lock are short. */
static int open_hung_lock(void *arg)
{
    int *up = arg;
    char path[512];
    fk_reset();
    fk_capture_stderr(path, sizeof path);
    shm_table_t *t = fk_start(fk_table);
    CHECK(t);
    uint64_t a;
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 1 * MB, &a), CUDA_SUCCESS);   /* registered */
    fk_send(up[1], 'r');
    CHECK(fk_recv(up[0]) == 'h');                 /* the peer holds the lock */
    uint64_t t0 = fk_now_ms();
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 512 * MB, &a), CUDA_SUCCESS);  /* slow path */
    CHECK(fk_now_ms() - t0 < 10000);
    t0 = fk_now_ms();
    for (int i = 0; i < 10; i++)
        CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 16 * MB, &a), CUDA_SUCCESS);
    CHECK(fk_now_ms() - t0 < 1000);               /* no more waits */
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 512 * MB, &a), CUDA_ERROR_OUT_OF_MEMORY);
    char *err = tu_read_file(path, NULL);
    CHECK(err && tu_count_lines(err, "counts its allocations alone") == 1);
    free(err);
    return 0;
}

static void test_fails_open(void **state)
{
    (void)state;
    in_child(open_no_driver, NULL);
    shm_unlink(fk_table);
    in_child(open_bad_device, NULL);
    shm_unlink(fk_table);

    int to_child[2], from_child[2];
    assert_int_equal(pipe(to_child), 0);
    assert_int_equal(pipe(from_child), 0);
    int ends[2] = { to_child[0], from_child[1] };
    pid_t user = fk_fork(open_hung_lock, ends);
    assert_int_equal(fk_recv(from_child[0]), 'r');
    pid_t holder = fork();
    if (holder == 0) {
        shm_open_opts_t o = { .name = fk_table, .create = 1 };
        shm_table_t *t;
        if (shm_open_table(&o, &t) != 0 || shm_lock(t) != 0)
            _exit(1);
        fk_send(to_child[1], 'h');
        for (;;)
            pause();
    }
    int rc = fk_wait(user, 30000);
    kill(holder, SIGKILL);              /* first: a failure must not leave it behind */
    fk_wait(holder, 5000);
    assert_int_equal(rc, 0);
}

/* ---- report and monitors ------------------------------------------------- */

static int report_cases(void *arg)
{
    (void)arg;
    fk_reset();
    setenv("SALUS_MEM_LIMIT", "512M", 1);
    setenv("SALUS_MEM_RESERVE", "128M", 1);
    setenv("SALUS_MEM_HEADROOM", "0", 1);
    shm_table_t *t = fk_start(fk_table);
    CHECK(t);
    CHECK_EQ(mem_admit(0), CUDA_SUCCESS);
    uint64_t a, b;
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 300 * MB, &a), CUDA_SUCCESS);
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 300 * MB, &b), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(fk_alloc(MEM_KIND_VMM, 100 * MB, &b), CUDA_SUCCESS);
    fk_free(MEM_KIND_DEVICE, a);
    char buf[512];
    int n = mem_report_fields(buf, sizeof buf);
    CHECK(n > 0 && (size_t)n < sizeof buf);
    char obj[600];
    snprintf(obj, sizeof obj, "{%s}", buf);
    double v;
    CHECK(tu_json_num(obj, "mem_used_bytes", &v) == 0 && v == 100.0 * MB);
    CHECK(tu_json_num(obj, "mem_peak_bytes", &v) == 0 && v == 400.0 * MB);
    CHECK(tu_json_num(obj, "mem_limit_bytes", &v) == 0 && v == 512.0 * MB);
    CHECK(tu_json_num(obj, "mem_reserved_bytes", &v) == 0 && v == 128.0 * MB);
    CHECK(tu_json_num(obj, "oom_refusals", &v) == 0 && v == 1);
    CHECK(tu_json_num(obj, "mem_waited_ms", &v) == 0 && v == 0);

    /* A monitor, read-only, sees the same. */
    shm_open_opts_t ro = { .name = fk_table, .read_only = 1 };
    shm_table_t *m;
    CHECK(shm_open_table(&ro, &m) == 0);
    mem_slot_view_t sv;
    CHECK(mem_view_slot(m, shm_self_peek(t), &sv) == 0);
    CHECK_EQ(sv.used, 100 * MB);
    CHECK_EQ(sv.reserved, 128 * MB);
    CHECK_EQ(sv.devices, 1);
    CHECK_EQ(sv.waiting_device, -1);
    mem_device_view_t dv;
    CHECK(mem_view_device(m, 0, &dv) == 0);
    CHECK_EQ(dv.capacity, 1024 * MB);
    CHECK_EQ(dv.budget, 1024 * MB);
    CHECK_EQ(dv.used, 100 * MB);
    CHECK_EQ(dv.reserved, 128 * MB);
    CHECK(dv.committed >= 128 * MB && dv.committed <= 512 * MB);
    CHECK(memcmp(dv.uuid, "fakegpu", 7) == 0);
    CHECK(mem_view_device(m, 1, &dv) == -1);      /* never used */
    CHECK(mem_view_slot(m, (shm_self_peek(t) + 1) % SHM_MAX_SLOTS, &sv) == -1);
    CHECK(mem_view_slot(m, -1, &sv) == -1 && mem_view_device(m, 99, &dv) == -1);
    /* Scribbled values are refused or clamped, never believed. */
    return 0;
}

static void test_report_and_monitors(void **state)
{
    (void)state;
    in_child(report_cases, NULL);
}

/* ---- the invariant checker ----------------------------------------------- */

/* mem_check_locked names a violation containing `needle`. */
static int violates(shm_table_t *t, const char *needle)
{
    const char *bad = mem_check_locked(t);
    if (!bad || !strstr(bad, needle)) {
        fprintf(stderr, "expected a violation with \"%s\", got %s\n", needle,
                bad ? bad : "none");
        return 0;
    }
    return 1;
}

/* Each invariant of mem_layout.h, broken by hand under the lock, is found
 * and named; put back before the unlock (which a debug build checks). */
static int check_cases(void *arg)
{
    (void)arg;
    shm_table_t *t = start_64m();
    uint64_t a;
    CHECK_EQ(fk_alloc(MEM_KIND_DEVICE, 8 * MB, &a), CUDA_SUCCESS);
    fk_check_invariants(t);
    mem_sdev_t *sd = &((mem_slot_t *)shm_slot_area(t, shm_self_peek(t), SHM_AREA_MEM))->dev[0];
    mem_dev_t *dev = shm_device_area(t, 0, SHM_AREA_MEM);
    CHECK(shm_lock(t) == 0);
    CHECK(mem_check_locked(t) == NULL);
    mem_sdev_t keep = *sd;
    mem_dev_t kept = *dev;
    sd->granted = sd->limit + 1;
    CHECK(violates(t, "more than its limit"));
    sd->granted = keep.granted;
    sd->avail = (keep.avail & ~MEM_SPARE_MASK) | (keep.granted + 1);
    CHECK(violates(t, "used < 0"));
    sd->avail = keep.avail;
    sd->reserved = 1;
    CHECK(violates(t, "not admitted"));
    sd->flags |= MEM_SDEV_ADMITTED;
    sd->reserved = dev->budget + 1;
    CHECK(violates(t, "more than the budget"));
    *sd = keep;
    dev->budget = dev->capacity + 1;
    CHECK(violates(t, "budget <= capacity"));
    dev->budget = kept.budget;
    dev->log.valid = 1;
    CHECK(violates(t, "reclaim log"));
    dev->log.valid = 0;
    CHECK(mem_check_locked(t) == NULL);
    shm_unlock(t);
    fk_free(MEM_KIND_DEVICE, a);
    fk_check_invariants(t);
    return 0;
}

static void test_check_finds_violations(void **state)
{
    (void)state;
    in_child(check_cases, NULL);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, fk_setup, fk_teardown)
    const struct CMUnitTest tests[] = {
        T(test_every_path_respects_the_limit),
        T(test_driver_failures_and_unknown_pointers),
        T(test_pitch_true_size),
        T(test_views),
        T(test_environment),
        T(test_fork),
        T(test_fails_open),
        T(test_report_and_monitors),
        T(test_check_finds_violations),
    };
    return cmocka_run_group_tests_name("memory", tests, NULL, NULL);
}
