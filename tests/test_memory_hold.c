/*
 * test_memory_hold.c - memory held past the call that allocated it, within
 * one process, driven through the module's interface with a fake driver:
 * VMM handles released while mapped keep their charge until their last
 * mapping goes, whatever order the calls come in, and a handle value the
 * driver gives again is a new allocation; a pool is charged what it
 * reserves (as the driver says, read when it grows, is trimmed, or may have
 * released memory at a synchronize), an allocation only what its pool must
 * grow by, and a refused or failed one leaves everything as it was.
 *
 * As in test_memory.c, each test runs in a forked child with its own table
 * and reports a failed check through its exit status.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "lib/testutil.h"
#include "memory/mem_layout.h"
#include "test_memory_lib.h"

static void in_child(int (*fn)(void *), void *arg)
{
    pid_t pid = fk_fork(fn, arg);
    assert_true(pid > 0);
    assert_int_equal(fk_wait(pid, 30000), 0);
}

static uint64_t used(shm_table_t *t)
{
    fk_acct_t a;
    fk_acct(t, shm_self_peek(t), 0, &a);
    return a.used;
}

/* The module on this test's table with a limit of `limit` and no headroom. */
static shm_table_t *start(const char *limit)
{
    fk_reset();
    setenv("SALUS_MEM_LIMIT", limit, 1);
    setenv("SALUS_MEM_HEADROOM", "0", 1);
    shm_table_t *t = fk_start(fk_table);
    CHECK(t);
    return t;
}

/* ---- VMM mappings ----------------------------------------------------------- */

#define VA(n) (0x7f0000000000ull + (uint64_t)(n) * 2 * MB)

static int vmm_lifetimes(void *arg)
{
    (void)arg;
    shm_table_t *t = start("8M");
    uint64_t h, g, x;
    /* Mapped twice, released: charged until the second unmap. */
    CHECK_EQ(fk_alloc(MEM_KIND_VMM, 4 * MB, &h), CUDA_SUCCESS);
    mem_vmm_mapped(VA(0), h);
    mem_vmm_mapped(VA(2), h);
    fk_free(MEM_KIND_VMM, h);
    CHECK_EQ(used(t), 4 * MB);
    CHECK_EQ(mem_vmm_kept(-1, NULL), 4 * MB);
    CHECK_EQ(fk_alloc(MEM_KIND_VMM, 6 * MB, &x), CUDA_ERROR_OUT_OF_MEMORY);
    mem_vmm_unmapped(VA(0), 2 * MB);
    CHECK_EQ(used(t), 4 * MB);
    mem_vmm_unmapped(VA(2), 2 * MB);
    CHECK_EQ(used(t), 0);
    CHECK_EQ(mem_vmm_kept(-1, NULL), 0);

    /* Unmapped before its release: given back at the release. */
    CHECK_EQ(fk_alloc(MEM_KIND_VMM, 6 * MB, &h), CUDA_SUCCESS);
    mem_vmm_mapped(VA(0), h);
    mem_vmm_unmapped(VA(0), 2 * MB);
    CHECK_EQ(used(t), 6 * MB);
    fk_free(MEM_KIND_VMM, h);
    CHECK_EQ(used(t), 0);

    /* One unmap over several mappings gives back each handle once. */
    CHECK_EQ(fk_alloc(MEM_KIND_VMM, 2 * MB, &h), CUDA_SUCCESS);
    CHECK_EQ(fk_alloc(MEM_KIND_VMM, 2 * MB, &g), CUDA_SUCCESS);
    mem_vmm_mapped(VA(0), h);
    mem_vmm_mapped(VA(1), g);
    fk_free(MEM_KIND_VMM, h);
    fk_free(MEM_KIND_VMM, g);
    CHECK_EQ(used(t), 4 * MB);
    mem_vmm_unmapped(VA(0), 4 * MB);
    CHECK_EQ(used(t), 0);

    /* The driver gives a released (still mapped) handle's value again: the
     * new handle is its own allocation, the old one's charge stays with
     * its mapping. */
    CHECK_EQ(fk_alloc(MEM_KIND_VMM, 2 * MB, &h), CUDA_SUCCESS);
    mem_vmm_mapped(VA(0), h);
    fk_free(MEM_KIND_VMM, h);
    fk.force_addr = h;
    CHECK_EQ(fk_alloc(MEM_KIND_VMM, 4 * MB, &g), CUDA_SUCCESS);
    CHECK_EQ(g, h);
    mem_vmm_mapped(VA(4), g);
    CHECK_EQ(used(t), 6 * MB);
    mem_vmm_unmapped(VA(0), 2 * MB);
    CHECK_EQ(used(t), 4 * MB);
    fk_free(MEM_KIND_VMM, g);
    CHECK_EQ(used(t), 4 * MB);
    mem_vmm_unmapped(VA(4), 2 * MB);
    CHECK_EQ(used(t), 0);

    /* A handle this process did not create (imported) is followed, and
     * charged nothing. */
    mem_vmm_mapped(VA(0), 0xabc000);
    mem_vmm_unmapped(VA(0), 2 * MB);
    fk_free(MEM_KIND_VMM, 0xabc000);
    CHECK_EQ(used(t), 0);
    fk_check_invariants(t);
    return 0;
}

static void test_vmm_lives_until_unmapped(void **state)
{
    (void)state;
    in_child(vmm_lifetimes, NULL);
}

/* ---- pools ---------------------------------------------------------------------- */

/* What the process holds on device 0, and what its pool keeps unused. */
#define POOL_IS(t, used_, slack_)                                                \
    do {                                                                         \
        CHECK_EQ(used(t), (used_));                                              \
        CHECK_EQ(mem_p.pools[1].slack, (slack_));                                \
    } while (0)

static int pool_charges(void *arg)
{
    (void)arg;
    shm_table_t *t = start("64M");
    uint64_t a, b, c, x;
    /* The pool grows by 40 MiB: charged, and read once. */
    fk.pool_reserved = 40 * MB;
    CHECK_EQ(fk_alloc_async(NULL, 40 * MB, &a), CUDA_SUCCESS);
    CHECK_EQ(fk.pool_reads, 1);
    POOL_IS(t, 40 * MB, 0);
    /* Freed into the pool: still charged, no driver call. */
    fk_free(MEM_KIND_ASYNC, a);
    POOL_IS(t, 40 * MB, 40 * MB);
    CHECK_EQ(fk.pool_reads, 1);
    /* Served from what the pool keeps: nothing more is charged. */
    CHECK_EQ(fk_alloc_async(NULL, 30 * MB, &a), CUDA_SUCCESS);
    POOL_IS(t, 40 * MB, 10 * MB);
    CHECK_EQ(fk.pool_reads, 1);
    /* Admission counts what the pool must grow by: 30 more of 64 refused,
     * and the accounting is as before. */
    CHECK_EQ(fk_alloc_async(NULL, 40 * MB, &x), CUDA_ERROR_OUT_OF_MEMORY);
    POOL_IS(t, 40 * MB, 10 * MB);
    /* A failure in the driver leaves it as before too. */
    fk.fail_allocs = 1;
    CHECK_EQ(fk_alloc_async(NULL, 20 * MB, &x), CUDA_ERROR_OUT_OF_MEMORY);
    POOL_IS(t, 40 * MB, 10 * MB);
    /* Growth by 10: the driver says the pool reserves 52 (its granules):
     * charged 52. */
    fk.pool_reserved = 52 * MB;
    CHECK_EQ(fk_alloc_async(NULL, 20 * MB, &b), CUDA_SUCCESS);
    POOL_IS(t, 52 * MB, 2 * MB);
    /* A synchronize: a pool with slack above its threshold (0) is read;
     * the driver released down to what is in use. */
    fk_free(MEM_KIND_ASYNC, a);
    fk.pool_reserved = 20 * MB;
    int reads = fk.pool_reads;
    mem_pools_sync();
    CHECK_EQ(fk.pool_reads, reads + 1);
    POOL_IS(t, 20 * MB, 0);
    /* Nothing to release, nothing allocated from the slack: not read. */
    mem_pools_sync();
    CHECK_EQ(fk.pool_reads, reads + 1);
    /* An infinite threshold keeps everything: a synchronize does not read
     * it, the memory stays charged, a peer would be refused. */
    cuuint64_t keep = UINT64_MAX;
    mem_pool_set_attribute(FK_POOL, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
    fk.pool_reserved = 60 * MB;
    CHECK_EQ(fk_alloc_async(NULL, 40 * MB, &c), CUDA_SUCCESS);
    fk_free(MEM_KIND_ASYNC, c);
    reads = fk.pool_reads;
    mem_pools_sync();
    CHECK_EQ(fk.pool_reads, reads);
    POOL_IS(t, 60 * MB, 40 * MB);
    /* A trim is read at once. */
    fk.pool_reserved = 20 * MB;
    mem_pool_trimmed(FK_POOL);
    POOL_IS(t, 20 * MB, 0);
    /* Destroyed: what it kept goes back; its live allocation when freed. */
    CHECK_EQ(fk_alloc_async(NULL, 8 * MB, &c), CUDA_SUCCESS);   /* reads 20: no growth seen */
    fk_free(MEM_KIND_ASYNC, c);
    POOL_IS(t, 28 * MB, 8 * MB);
    mem_pool_destroyed(FK_POOL);
    CHECK_EQ(used(t), 20 * MB);
    fk_free(MEM_KIND_ASYNC, b);
    CHECK_EQ(used(t), 0);
    fk_check_invariants(t);
    return 0;
}

static void test_pool_charged_as_it_holds(void **state)
{
    (void)state;
    in_child(pool_charges, NULL);
}

/* A pool in host memory is not charged; one the process never saw is
 * charged allocation by allocation. */
static int pool_kinds(void *arg)
{
    (void)arg;
    shm_table_t *t = start("16M");
    uint64_t a;
    CUmemoryPool host = (CUmemoryPool)(uintptr_t)0x4000, unknown = (CUmemoryPool)(uintptr_t)0x5000;
    mem_pool_learn(host, 0, 1);
    CHECK_EQ(fk_alloc_async(host, 32 * MB, &a), CUDA_SUCCESS);
    CHECK_EQ(used(t), 0);
    CHECK_EQ(fk_alloc_async(unknown, 32 * MB, &a), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK_EQ(fk_alloc_async(unknown, 8 * MB, &a), CUDA_SUCCESS);
    CHECK_EQ(used(t), 8 * MB);
    fk_free(MEM_KIND_POOL, a);
    CHECK_EQ(used(t), 0);
    /* The current pool grew unseen past the limit (read at a synchronize):
     * the memory is the driver's already: no refusal is counted, and it is
     * read again at the next synchronize, charged once it fits. */
    mem_slot_view_t v0, v1;
    CHECK(mem_view_slot(t, shm_self_peek(t), &v0) == 0);
    fk.pool_reserved = 8 * MB;
    CHECK_EQ(fk_alloc_async(NULL, 8 * MB, &a), CUDA_SUCCESS);
    fk_free(MEM_KIND_ASYNC, a);
    CHECK_EQ(fk_alloc_async(NULL, 8 * MB, &a), CUDA_SUCCESS);   /* from its slack */
    fk.pool_reserved = 40 * MB;
    mem_pools_sync();
    CHECK_EQ(used(t), 8 * MB);
    CHECK(mem_view_slot(t, shm_self_peek(t), &v1) == 0);
    CHECK_EQ(v1.oom_refusals, v0.oom_refusals);
    fk.pool_reserved = 12 * MB;
    mem_pools_sync();                     /* read again, and charged */
    CHECK_EQ(used(t), 12 * MB);
    fk_check_invariants(t);
    return 0;
}

static void test_pool_kinds(void **state)
{
    (void)state;
    in_child(pool_kinds, NULL);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, fk_setup, fk_teardown)
    const struct CMUnitTest tests[] = {
        T(test_vmm_lives_until_unmapped),
        T(test_pool_charged_as_it_holds),
        T(test_pool_kinds),
    };
    return cmocka_run_group_tests_name("memory-hold", tests, NULL, NULL);
}
