/*
 * test_memory_hold.c - memory held past the call that allocated it, within
 * one process, driven through the module's interface with a fake driver:
 * VMM handles released while mapped keep their charge until their last
 * mapping goes, whatever order the calls come in, and a handle value the
 * driver gives again is a new allocation.
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

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, fk_setup, fk_teardown)
    const struct CMUnitTest tests[] = {
        T(test_vmm_lives_until_unmapped),
    };
    return cmocka_run_group_tests_name("memory-hold", tests, NULL, NULL);
}
