/*
 * test_memory_async.c - stream-ordered allocations with paging on
 * (src/memory/vmm_async.c) over simgpu: in forked children driven through
 * memory.h, each with a simgpu state and a table of its own, and through
 * libsalus preloaded into tests/clients/asyncclient:
 *
 *   - cuMemAllocAsync's memory is virtualized: the driver's queries answer
 *     the allocation's own base and size, its bytes survive a page-out and
 *     page-in, cuMemFreeAsync and cuMemFree_v2 both free it;
 *   - a block freed with cuMemFreeAsync behind a kernel still running on
 *     its stream is not handed out again (to another stream) before that
 *     kernel ends, and is released once the stream has passed the free,
 *     or before a context may go;
 *   - accounting is exact after thousands of stream-ordered allocations and
 *     frees on two streams: the table's figure is what is mapped, and
 *     nothing is left once everything is freed and paged out;
 *   - through libsalus: cuMemAllocAsync and cuMemAllocFromPoolAsync from
 *     the default pool are virtualized; a pool the program made, the
 *     default pool once another is current or shared with other devices,
 *     and allocations made during a stream capture stay the driver's; a
 *     free of virtualized memory captured into a graph leaves it allocated;
 *     the per-thread exports are served as the legacy ones.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/testutil.h"
#include "test_memory_vmm_lib.h"

/* The child's simgpu state and table, named by the parent (which removes
 * them at its exit). */
static char state_name[96], table_name[96];

/* In the child: simgpu of `mem` bytes, a context, this test's table, paging
 * on (test_memory_vmm_lib.h). */
static int setup(const char *mem)
{
    return setup_named(mem, state_name, table_name);
}

/* The pattern over [p, p + n), written and checked through one buffer. */
static uint64_t iobuf[1 << 17];
#define FILL(p, n, seed)  fill((p), (n), (seed), iobuf, sizeof iobuf)
#define CHECK(p, n, seed) check((p), (n), (seed), iobuf, sizeof iobuf)

static void run_child(int (*fn)(void *), void *arg)
{
    assert_int_equal(run_teller("async", state_name, table_name, sizeof state_name, fn, arg), 0);
}

/* ---- virtualized, queried, paged ------------------------------------------------ */

static int virtualized_child(void *arg)
{
    (void)arg;
    CUdeviceptr small, big, base = 0;
    CUstream s;
    size_t size = 0;
    CUresult rc;
    uint64_t freed = 0, restored = 0;
    if (setup("1G"))
        return 1;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    uint64_t used0 = 0;              /* the device is not yet in the slot */
    CK(vmem_alloc_async(&small, 5000, NULL, MEM_DEV_CURRENT));
    CK(vmem_alloc_async(&big, 6 * MiB, NULL, 0));
    TRUE(vmem_resident_bytes(0) == 8 * MiB);          /* a granule and the big chunk */
    TRUE(table_used() == used0 + 8 * MiB);
    CK(cuMemGetAddressRange_v2(&base, &size, small + 100));   /* the driver: a granule */
    TRUE(vmem_range(small + 100, &base, &size) == 0 && base == small && size == 5000);
    TRUE(vmem_range(big + 3 * MiB, &base, &size) == 0 && base == big && size == 6 * MiB);
    TRUE(vmem_attr(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, big + 1) == 1 &&
         size == 6 * MiB);
    if (FILL(small, 5000 / 8 * 8, 1) || FILL(big, 6 * MiB, 2))
        return 1;
    CK(vmem_page_out(0, 0, &freed));
    TRUE(freed == 8 * MiB && vmem_resident_bytes(0) == 0 && table_used() == used0);
    CK(vmem_page_in(0, &restored));
    TRUE(restored == 8 * MiB && table_used() == used0 + 8 * MiB);
    if (CHECK(small, 5000 / 8 * 8, 1) || CHECK(big, 6 * MiB, 2))
        return 1;
    /* Freed in stream order, and by cuMemFree_v2. */
    TRUE(vmem_free_async(big, s, 0, &rc) == 1 && rc == CUDA_SUCCESS);
    CK(cuStreamSynchronize(s));
    vmem_async_settle();
    TRUE(vmem_async_pending() == 0 && vmem_resident_bytes(0) == 2 * MiB);
    TRUE(vmem_range(big, &base, &size) != 0);
    TRUE(vmem_free(small, &rc) == 1 && rc == CUDA_SUCCESS);
    TRUE(vmem_free_async(small, s, 0, &rc) == 0);   /* gone: the driver's to refuse */
    TRUE(table_used() == used0 + 2 * MiB);           /* the granule stays backed */
    return 0;
}

static void test_virtualized(void **state)
{
    (void)state;
    run_child(virtualized_child, NULL);
}

/* ---- a block freed behind a running kernel is not reused ----------------------------
 * Stream s1 runs a salus_spin of `ns`, then an event of the test's, then the
 * free of block A.  An allocation of A's size on stream s2 made while that
 * event has not completed (asked after the allocation) must lie apart from
 * A.  A round where the kernel ended first proves nothing: the next runs a
 * kernel twice as long. */

typedef struct spin { CUfunction fn; CUstream s1, s2; } spin_t;

static int spin_setup(spin_t *k)
{
    char cubin[512];
    CUmodule m;
    CK(cuModuleLoad(&m, tu_build_path("workloads/kernels.cubin", cubin, sizeof cubin)));
    CK(cuModuleGetFunction(&k->fn, m, "salus_spin"));
    CK(cuStreamCreate(&k->s1, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&k->s2, CU_STREAM_NON_BLOCKING));
    return 0;
}

static int overlaps(CUdeviceptr a, uint64_t na, CUdeviceptr b, uint64_t nb)
{
    return a < b + nb && b < a + na;
}

/* One round for a block of n bytes: 1 proved, 0 inconclusive (the kernel
 * ended too soon), -1 failed. */
static int reuse_round(spin_t *k, uint64_t n, unsigned long long ns)
{
    CUdeviceptr a, b;
    CUevent e;
    CUresult rc;
    void *args[] = { &ns };
    uint64_t resident;
    if (vmem_alloc_async(&a, n, NULL, MEM_DEV_CURRENT) != CUDA_SUCCESS ||
        cuEventCreate(&e, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS ||
        cuLaunchKernel(k->fn, 1, 1, 1, 1, 1, 1, 0, k->s1, args, NULL) != CUDA_SUCCESS ||
        cuMemsetD8Async(a, 0x5a, n, k->s1) != CUDA_SUCCESS ||
        cuEventRecord(e, k->s1) != CUDA_SUCCESS ||
        vmem_free_async(a, k->s1, 0, &rc) != 1)
        return -1;
    if (vmem_alloc_async(&b, n, NULL, MEM_DEV_CURRENT) != CUDA_SUCCESS)
        return -1;
    int running = cuEventQuery(e) == CUDA_ERROR_NOT_READY;
    if (running && (overlaps(a, n, b, n) || vmem_async_pending() != 1)) {
        fprintf(stderr, "block %#llx of %llu bytes reused as %#llx while its stream ran\n",
                (unsigned long long)a, (unsigned long long)n, (unsigned long long)b);
        return -1;
    }
    /* Once the stream has passed the free, the memory goes back. */
    resident = vmem_resident_bytes(0);
    if (cuStreamSynchronize(k->s1) != CUDA_SUCCESS)
        return -1;
    vmem_async_settle();
    if (vmem_async_pending() != 0 || vmem_free(b, &rc) != 1 || cuEventDestroy(e) != CUDA_SUCCESS)
        return -1;
    if (n >= 2 * MiB && vmem_resident_bytes(0) != resident - 2 * n) {
        fprintf(stderr, "resident %llu, was %llu with two blocks of %llu\n",
                (unsigned long long)vmem_resident_bytes(0), (unsigned long long)resident,
                (unsigned long long)n);
        return -1;
    }
    return running;
}

static int no_reuse_child(void *arg)
{
    (void)arg;
    spin_t k;
    static const uint64_t sizes[] = { 256, 64 << 10, 4 * MiB };
    if (setup("1G") || spin_setup(&k))
        return 1;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        int r = 0;
        for (unsigned long long ns = 50000000ull; r == 0 && ns <= 3200000000ull; ns *= 2)
            r = reuse_round(&k, sizes[i], ns);
        if (r != 1) {
            fprintf(stderr, "size %llu: %s\n", (unsigned long long)sizes[i],
                    r < 0 ? "failed" : "every kernel ended before the allocation");
            return 1;
        }
    }
    /* Before a context goes, a deferred free is waited for and released. */
    CUdeviceptr a;
    CUresult rc;
    unsigned long long ns = 20000000ull;
    void *args[] = { &ns };
    uint64_t resident = vmem_resident_bytes(0);
    CK(vmem_alloc_async(&a, 4 * MiB, NULL, MEM_DEV_CURRENT));
    CK(cuLaunchKernel(k.fn, 1, 1, 1, 1, 1, 1, 0, k.s1, args, NULL));
    TRUE(vmem_free_async(a, k.s1, 0, &rc) == 1 && vmem_async_pending() == 1);
    vmem_async_context_ending();
    TRUE(vmem_async_pending() == 0 && vmem_resident_bytes(0) == resident);
    return 0;
}

static void test_not_reused_before_stream(void **state)
{
    (void)state;
    if (!tu_built("workloads/kernels.cubin"))
        skip();
    run_child(no_reuse_child, NULL);
}

/* ---- accounting after many cycles ------------------------------------------------
 * 4,000 allocations of 8 B .. 6 MiB on two streams, each freed on one of
 * them (some by cuMemFree_v2), with synchronizations now and then; at every
 * step the table's figure is the mapped memory, and at the end, everything
 * freed and paged out, nothing is left charged. */

static int cycles_child(void *arg)
{
    (void)arg;
    enum { N = 4000, LIVE = 64 };
    CUstream s[2];
    CUdeviceptr live[LIVE] = { 0 };
    CUresult rc;
    uint64_t rnd = 88172645463325252ull, freed = 0;
    if (setup("2G"))
        return 1;
    CK(cuStreamCreate(&s[0], CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&s[1], CU_STREAM_NON_BLOCKING));
    uint64_t used0 = 0, free0 = dev_free();
    for (int i = 0; i < N; i++) {
        rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17;
        int slot = (int)(rnd % LIVE);
        CUstream st = s[(rnd >> 8) & 1];
        if (live[slot]) {
            if ((rnd >> 9) % 8 == 0)
                TRUE(vmem_free(live[slot], &rc) == 1);
            else
                TRUE(vmem_free_async(live[slot], st, 0, &rc) == 1);
            live[slot] = 0;
        }
        uint64_t n = (rnd >> 12) % 4 == 0 ? (rnd >> 16) % (6 * MiB) + 1 : (rnd >> 16) % 32768 + 8;
        CK(vmem_alloc_async(&live[slot], n, NULL, MEM_DEV_CURRENT));
        CK(cuMemsetD8Async(live[slot], (unsigned char)i, n < 4096 ? n : 4096, st));
        if (i % 97 == 0)
            CK(cuStreamSynchronize(st));
        if (i % 97 == 0)
            vmem_async_settle();
        TRUE(table_used() == used0 + vmem_resident_bytes(0));
        TRUE(dev_free() == free0 - vmem_resident_bytes(0));
    }
    for (int i = 0; i < LIVE; i++)
        if (live[i])
            TRUE(vmem_free_async(live[i], s[i & 1], 0, &rc) == 1);
    CK(vmem_page_out(0, 0, &freed));   /* waits for the streams: every free settles */
    TRUE(vmem_async_pending() == 0 && vmem_resident_bytes(0) == 0);
    TRUE(vmem_paged_out_bytes(0) == 0);
    TRUE(table_used() == used0 && dev_free() == free0);
    return 0;
}

static void test_accounting_after_cycles(void **state)
{
    (void)state;
    run_child(cycles_child, NULL);
}

/* ---- through libsalus ------------------------------------------------------------- */

static void client(int preload, char *out, size_t len)
{
    char prog[512], state[96], table[96];
    tu_env_t env;
    tu_proc_t p;
    tu_env_init(&env);
    tu_unique_name("async-cli", state, sizeof state);
    if (preload)
        tu_env_salus(&env, state, tu_unique_name("async-clt", table, sizeof table));
    else
        tu_env_simgpu(&env, state);
    tu_env_set(&env, "SALUS_SWAP", "on");
    tu_env_set(&env, "SIMGPU_DEVICES", "2");
    char *argv[] = { (char *)tu_build_path("tests/clients/asyncclient", prog, sizeof prog),
                     NULL };
    int rc = tu_run(argv, &env, 60000, &p);
    char *text = tu_read_file(p.out_path, NULL);
    assert_non_null(text);
    if (tu_find_line(text, "async", 0, out, len) != 0)
        snprintf(out, len, "(no line) exit %d: %s", rc, text);
    free(text);
    tu_env_free(&env);
}

static void test_client(void **state)
{
    (void)state;
    char line[512];
    client(0, line, sizeof line);                /* the driver's own pools throughout */
    assert_string_equal(line, "async ok default=0 frompool=0 created=0 current=0 "
                              "captured=0 restored=0 shared=0 ptsz=0");
    client(1, line, sizeof line);
    assert_string_equal(line, "async ok default=1 frompool=1 created=0 current=0 "
                              "captured=0 restored=1 shared=0 ptsz=1");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_virtualized),
        cmocka_unit_test(test_not_reused_before_stream),
        cmocka_unit_test(test_accounting_after_cycles),
        cmocka_unit_test(test_client),
    };
    return cmocka_run_group_tests_name("memory_async", tests, NULL, NULL);
}
