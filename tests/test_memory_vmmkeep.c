/*
 * test_memory_vmmkeep.c - the small allocations of paging (src/vmem's
 * jem.c) kept for the next of their size, over simgpu, driven through
 * vmem.h in forked children, each with a simgpu state and a table of its
 * own:
 *
 *   - a freed block comes back at the next allocation of its size, at the
 *     same address, and never at one of another size;
 *   - at most VMEM_JEM_KEEP blocks are kept, the newest: each of them comes
 *     back for its size;
 *   - blocks kept in granules already backed go back to jemalloc when an
 *     allocation finds the device short, and the allocation succeeds in
 *     them instead of failing;
 *   - a free of an interior pointer of a small allocation, or a second
 *     free, is answered CUDA_ERROR_INVALID_VALUE and changes nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "lib/testutil.h"
#include "test_memory_vmm_lib.h"

static char child_state[96], child_table[96];

static void run_child(int (*fn)(void *), void *arg)
{
    assert_int_equal(run_teller("keep", child_state, child_table, sizeof child_state, fn, arg),
                     0);
}

/* ---- the same size comes back ----------------------------------------------------- */

static int same_size_child(void *arg)
{
    (void)arg;
    CUdeviceptr p, q, r, s;
    CUresult rc;
    if (setup_named("1G", child_state, child_table))
        return 1;
    CK(vmem_alloc(MEM_KIND_DEVICE, &p, NULL, MiB, 1, 0));
    TRUE(vmem_free(p, &rc) == 1 && rc == CUDA_SUCCESS);
    CK(vmem_alloc(MEM_KIND_DEVICE, &s, NULL, MiB / 2, 1, 0));
    TRUE(s != p);                     /* another size: not the kept block */
    CK(vmem_alloc(MEM_KIND_DEVICE, &q, NULL, MiB - 100, 1, 0));
    TRUE(q == p);                     /* the same size once rounded */
    CK(vmem_alloc(MEM_KIND_DEVICE, &r, NULL, MiB, 1, 0));
    TRUE(r != p && r != s);
    uint64_t buf[4096];
    if (fill(q, MiB - 100, 3, buf, sizeof buf) || fill(r, MiB, 4, buf, sizeof buf) ||
        check(q, MiB - 100, 3, buf, sizeof buf) || check(r, MiB, 4, buf, sizeof buf))
        return 1;
    return 0;
}

static void test_same_size_comes_back(void **state)
{
    (void)state;
    run_child(same_size_child, NULL);
}

/* ---- the newest VMEM_JEM_KEEP are kept ---------------------------------------------- */

static int bounded_child(void *arg)
{
    (void)arg;
    enum { N = VMEM_JEM_KEEP + 3 };
    CUdeviceptr p[N], q;
    CUresult rc;
    if (setup_named("1G", child_state, child_table))
        return 1;
    for (int i = 0; i < N; i++)
        CK(vmem_alloc(MEM_KIND_DEVICE, &p[i], NULL, 4096 * (uint64_t)(i + 1), 1, 0));
    for (int i = 0; i < N; i++)
        TRUE(vmem_free(p[i], &rc) == 1 && rc == CUDA_SUCCESS);
    TRUE(vmem_p.dev[0].jem.kept == VMEM_JEM_KEEP);
    for (int i = N - VMEM_JEM_KEEP; i < N; i++) {
        CK(vmem_alloc(MEM_KIND_DEVICE, &q, NULL, 4096 * (uint64_t)(i + 1), 1, 0));
        TRUE(q == p[i]);
    }
    TRUE(vmem_p.dev[0].jem.kept == 0);
    return 0;
}

static void test_newest_kept(void **state)
{
    (void)state;
    run_child(bounded_child, NULL);
}

/* ---- short of memory, the kept blocks go back ---------------------------------------
 * One granule of the small region is backed, holding a kept block; the
 * rest of the process's budget is taken by chunks of a granule each.  An
 * allocation of a size a little under the kept block's (another size for
 * the keep, the same for jemalloc) finds no room in the backed granule
 * while the block is kept, and the device has none for another: the kept
 * block goes back, and the allocation lands in the backed granule. */
#define SMALLER (MiB - 4096)

static int short_child(void *arg)
{
    (void)arg;
    CUdeviceptr a, big, b;
    CUresult rc;
    setenv("SIMGPU_CTX_MEMORY", "0", 1);
    setenv("SALUS_MEM_WAIT_MS", "0", 1);
    if (setup_named("64M", child_state, child_table))
        return 1;
    vmem_dev_t *v;
    CK(vmem_alloc(MEM_KIND_DEVICE, &a, NULL, MiB, 1, 0));
    v = &vmem_p.dev[0];
    int n = 0;                        /* chunks of a granule until the budget is spent */
    while (n < 64 && vmem_alloc(MEM_KIND_DEVICE, &big, NULL, v->gran, 1, 0) == CUDA_SUCCESS)
        n++;
    TRUE(n > 0 && n < 64);
    TRUE(vmem_free(a, &rc) == 1 && rc == CUDA_SUCCESS);
    TRUE(v->jem.kept == 1);
    uint64_t resident = v->resident;
    CK(vmem_alloc(MEM_KIND_DEVICE, &b, NULL, SMALLER, 1, 0));
    TRUE(v->jem.kept == 0 && v->resident == resident);   /* no granule more */
    uint64_t buf[4096];
    return fill(b, SMALLER, 6, buf, sizeof buf) || check(b, SMALLER, 6, buf, sizeof buf);
}

static void test_short_flushes_kept(void **state)
{
    (void)state;
    run_child(short_child, NULL);
}

/* ---- frees the driver would refuse ------------------------------------------------ */

static int bad_free_child(void *arg)
{
    (void)arg;
    CUdeviceptr p;
    CUresult rc = CUDA_SUCCESS;
    uint64_t buf[4096];
    if (setup_named("1G", child_state, child_table))
        return 1;
    CK(vmem_alloc(MEM_KIND_DEVICE, &p, NULL, 64 * 1024, 1, 0));
    if (fill(p, 64 * 1024, 8, buf, sizeof buf))
        return 1;
    TRUE(vmem_free(p + 512, &rc) == 1 && rc == CUDA_ERROR_INVALID_VALUE);
    if (check(p, 64 * 1024, 8, buf, sizeof buf))     /* still live, still its bytes */
        return 1;
    TRUE(vmem_free(p, &rc) == 1 && rc == CUDA_SUCCESS);
    rc = CUDA_SUCCESS;
    TRUE(vmem_free(p, &rc) == 1 && rc == CUDA_ERROR_INVALID_VALUE);
    TRUE(vmem_p.dev[0].jem.kept == 1);                 /* kept once, not twice */
    return 0;
}

static void test_bad_frees_refused(void **state)
{
    (void)state;
    run_child(bad_free_child, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_size_comes_back),
        cmocka_unit_test(test_newest_kept),
        cmocka_unit_test(test_short_flushes_kept),
        cmocka_unit_test(test_bad_frees_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
