/*
 * test_memory_stage.c - paging's pinned staging kept from one page-out to
 * the next (src/vmem/stage.c), over simgpu, driven through vmem.h in
 * forked children, each with a simgpu state and a table of its own, the
 * driver's cuMemHostAlloc and cuMemFreeHost counted:
 *
 *   - a page-in gives its staging to the pool, and the next page-out of the
 *     same allocations takes it again: no new pinned memory, and every
 *     byte comes back;
 *   - a page-out that finds no kept buffer of its size, where kept staging
 *     and its own would pass SALUS_SWAP_LIMIT, lets the kept buffers go
 *     first and is served (kept staging never refuses a page-out);
 *   - kept staging goes back to the driver at the drain thread's look once
 *     its time is past (vmem_stage_keep_ns), and not before;
 *   - before the drain thread's first look nothing is kept (nobody would
 *     let it go);
 *   - SALUS_SWAP_LIMIT bounds the table's processes together: a page-out
 *     is refused whole while a peer of the table holds a reservation the
 *     two would pass, and served once the peer is all back in (its
 *     reservation gone) or once it is dead; a reservation for memory that
 *     went out and came back without staging (never written) goes too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/testutil.h"
#include "test_memory_vmm_lib.h"

static char child_state[96], child_table[96];

static void run_child(int (*fn)(void *), void *arg)
{
    assert_int_equal(run_teller("stage", child_state, child_table, sizeof child_state, fn, arg),
                     0);
}

/* ---- the driver's pinned memory, counted --------------------------------------------- */

static CUresult (*real_host_alloc)(void **p, size_t bytes, unsigned int flags);
static CUresult (*real_free_host)(void *p);
static int host_allocs, host_frees;

static CUresult counted_host_alloc(void **p, size_t bytes, unsigned int flags)
{
    host_allocs++;
    return real_host_alloc(p, bytes, flags);
}

static CUresult counted_free_host(void *p)
{
    host_frees++;
    return real_free_host(p);
}

static void count_pinned(drv_t *d)
{
    real_host_alloc = d->mem_host_alloc;
    real_free_host = d->mem_free_host;
    d->mem_host_alloc = counted_host_alloc;
    d->mem_free_host = counted_free_host;
}

/* simgpu of 1 GiB with paging on, pinned memory counted, the drain thread's
 * first look taken when `ticking`. */
static int setup(int ticking)
{
    patch_drv = count_pinned;
    if (setup_named("1G", child_state, child_table))
        return 1;
    if (ticking)
        vmem_keep_tick();
    return 0;
}

static int out_and_in(uint64_t expect)
{
    uint64_t freed = 0, restored = 0;
    CK(vmem_page_out(0, 0, &freed));
    TRUE(freed == expect);
    CK(vmem_page_in(0, &restored));
    TRUE(restored == expect);
    return 0;
}

/* ---- the next page-out takes it again ------------------------------------------------ */

static int reused_child(void *arg)
{
    (void)arg;
    CUdeviceptr a, b, s;
    uint64_t buf[4096];
    if (setup(1))
        return 1;
    CK(vmem_alloc(MEM_KIND_DEVICE, &a, NULL, 8 * MiB, 1, 0));
    CK(vmem_alloc(MEM_KIND_DEVICE, &b, NULL, 6 * MiB, 1, 0));
    CK(vmem_alloc(MEM_KIND_DEVICE, &s, NULL, 100000, 1, 0));   /* the small region */
    if (fill(a, 8 * MiB, 1, buf, sizeof buf) || fill(b, 6 * MiB, 2, buf, sizeof buf) ||
        fill(s, 100000, 3, buf, sizeof buf))
        return 1;
    uint64_t all = vmem_resident_bytes(0);
    if (out_and_in(all))
        return 1;
    TRUE(host_allocs == 3 && host_frees == 0);   /* a, b and the small region: kept */
    TRUE(vmem_stage_kept() == 8 * MiB + 6 * MiB + VMEM_STAGE_ROUND);
    for (int round = 0; round < 3; round++) {
        if (out_and_in(all))
            return 1;
        TRUE(host_allocs == 3 && host_frees == 0);   /* taken again, given again */
        if (check(a, 8 * MiB, 1, buf, sizeof buf) || check(b, 6 * MiB, 2, buf, sizeof buf) ||
            check(s, 100000, 3, buf, sizeof buf))
            return 1;
    }
    return 0;
}

static void test_next_page_out_reuses(void **state)
{
    (void)state;
    run_child(reused_child, NULL);
}

/* ---- kept staging never refuses a page-out ---------------------------------------------- */

static int bound_child(void *arg)
{
    (void)arg;
    CUdeviceptr a, b;
    uint64_t buf[4096];
    setenv("SALUS_SWAP_LIMIT", "24M", 1);
    if (setup(1))
        return 1;
    CK(vmem_alloc(MEM_KIND_DEVICE, &a, NULL, 16 * MiB, 1, 0));
    if (fill(a, 16 * MiB, 1, buf, sizeof buf) || out_and_in(16 * MiB))
        return 1;
    TRUE(vmem_stage_kept() == 16 * MiB && host_frees == 0);
    CUresult rc;
    TRUE(vmem_free(a, &rc) == 1 && rc == CUDA_SUCCESS);
    /* 20 MiB: no kept buffer of its size, and 16 kept + 20 pass 24 MiB. */
    CK(vmem_alloc(MEM_KIND_DEVICE, &b, NULL, 20 * MiB, 1, 0));
    if (fill(b, 20 * MiB, 2, buf, sizeof buf))
        return 1;
    uint64_t freed = 0;
    CK(vmem_page_out(0, 0, &freed));
    TRUE(freed == 20 * MiB && vmem_resident_bytes(0) == 0);
    TRUE(host_frees == 1 && vmem_stage_kept() == 0);   /* the kept one went first */
    uint64_t restored = 0;
    CK(vmem_page_in(0, &restored));
    TRUE(restored == 20 * MiB);
    return check(b, 20 * MiB, 2, buf, sizeof buf);
}

static void test_kept_never_refuses(void **state)
{
    (void)state;
    run_child(bound_child, NULL);
}

/* ---- let go once its time is past ---------------------------------------------------- */

static int trim_child(void *arg)
{
    (void)arg;
    CUdeviceptr a;
    uint64_t buf[4096];
    if (setup(1))
        return 1;
    CK(vmem_alloc(MEM_KIND_DEVICE, &a, NULL, 4 * MiB, 1, 0));
    if (fill(a, 4 * MiB, 1, buf, sizeof buf) || out_and_in(4 * MiB))
        return 1;
    vmem_keep_tick();                 /* well within its time: kept */
    TRUE(vmem_stage_kept() == 4 * MiB && host_frees == 0);
    vmem_stage_keep_ns = 0;           /* its time is past */
    vmem_keep_tick();
    TRUE(vmem_stage_kept() == 0 && host_frees == 1);
    return check(a, 4 * MiB, 1, buf, sizeof buf);
}

static void test_let_go_past_its_time(void **state)
{
    (void)state;
    run_child(trim_child, NULL);
}

/* ---- nothing kept before the drain thread looks ---------------------------------------- */

static int unticked_child(void *arg)
{
    (void)arg;
    CUdeviceptr a;
    uint64_t buf[4096];
    if (setup(0))
        return 1;
    CK(vmem_alloc(MEM_KIND_DEVICE, &a, NULL, 4 * MiB, 1, 0));
    if (fill(a, 4 * MiB, 1, buf, sizeof buf) || out_and_in(4 * MiB) || out_and_in(4 * MiB))
        return 1;
    TRUE(vmem_stage_kept() == 0 && host_allocs == 2 && host_frees == 2);
    return check(a, 4 * MiB, 1, buf, sizeof buf);
}

static void test_nothing_kept_unticked(void **state)
{
    (void)state;
    run_child(unticked_child, NULL);
}

/* ---- the table's processes together ----------------------------------------------- */

/* One byte over fd within 20 s: it, or 0. */
static char hear(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };
    char c = 0;
    if (poll(&p, 1, 20000) != 1 || read(fd, &c, 1) != 1)
        return 0;
    return c;
}

/* The peer: 16 MiB, paged out ('o') and in ('i') when told, each answered
 * with the same letter (or 'x' on failure); killed by the test. */
static void peer(int cmd, int ans)
{
    CUdeviceptr a;
    uint64_t buf[4096], n = 0;
    char c;
    if (setup(1) || vmem_alloc(MEM_KIND_DEVICE, &a, NULL, 16 * MiB, 1, 0) != CUDA_SUCCESS ||
        fill(a, 16 * MiB, 4, buf, sizeof buf))
        _exit(1);
    while ((c = hear(cmd)) != 0) {
        CUresult rc = c == 'o' ? vmem_page_out(0, 0, &n) : vmem_page_in(0, &n);
        char r = rc == CUDA_SUCCESS && n == 16 * MiB ? c : 'x';
        if (write(ans, &r, 1) != 1)
            _exit(1);
    }
    _exit(0);
}

static int ask_peer(int cmd, int ans, char c)
{
    return write(cmd, &c, 1) == 1 && hear(ans) == c ? 0 : -1;
}

static int table_child(void *arg)
{
    (void)arg;
    int cmd[2], ans[2];
    CUdeviceptr b;
    uint64_t buf[4096], freed = 0, restored = 0;
    setenv("SALUS_SWAP_LIMIT", "24M", 1);     /* each 16 MiB fits alone, not beside */
    setenv("SIMGPU_CTX_MEMORY", "0", 1);      /* two contexts in 1 GiB */
    TRUE(pipe(cmd) == 0 && pipe(ans) == 0);
    pid_t pid = fork();
    if (pid == 0)
        peer(cmd[0], ans[1]);
    TRUE(pid > 0);
    /* Memory never written goes out and comes back without staging: its
     * reservation goes all the same, or the peer's page-out is refused. */
    CUdeviceptr clean;
    CUresult rc;
    TRUE(setup(1) == 0 &&
         vmem_alloc(MEM_KIND_DEVICE, &clean, NULL, 16 * MiB, 1, 0) == CUDA_SUCCESS &&
         vmem_page_out(0, 0, &freed) == CUDA_SUCCESS && freed == 16 * MiB &&
         vmem_page_in(0, &restored) == CUDA_SUCCESS && vmem_free(clean, &rc) == 1);
    int ok = ask_peer(cmd[1], ans[0], 'o') == 0 &&
             vmem_alloc(MEM_KIND_DEVICE, &b, NULL, 16 * MiB, 1, 0) == CUDA_SUCCESS &&
             fill(b, 16 * MiB, 5, buf, sizeof buf) == 0 &&
             vmem_page_out(0, 0, &freed) == CUDA_SUCCESS && freed == 0;   /* refused whole */
    ok = ok && ask_peer(cmd[1], ans[0], 'i') == 0 &&                     /* back in: */
         vmem_page_out(0, 0, &freed) == CUDA_SUCCESS && freed == 16 * MiB &&
         vmem_page_in(0, &restored) == CUDA_SUCCESS && restored == 16 * MiB;
    ok = ok && ask_peer(cmd[1], ans[0], 'o') == 0 &&
         vmem_page_out(0, 0, &freed) == CUDA_SUCCESS && freed == 0;       /* out again */
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    ok = ok && vmem_page_out(0, 0, &freed) == CUDA_SUCCESS && freed == 16 * MiB &&
         vmem_page_in(0, &restored) == CUDA_SUCCESS && restored == 16 * MiB;   /* dead */
    TRUE(ok);
    return check(b, 16 * MiB, 5, buf, sizeof buf);
}

static void test_table_bounds_peers(void **state)
{
    (void)state;
    run_child(table_child, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_next_page_out_reuses),
        cmocka_unit_test(test_kept_never_refuses),
        cmocka_unit_test(test_let_go_past_its_time),
        cmocka_unit_test(test_nothing_kept_unticked),
        cmocka_unit_test(test_table_bounds_peers),
    };
    return cmocka_run_group_tests_name("memory stage", tests, NULL, NULL);
}
