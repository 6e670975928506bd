/*
 * test_memory_vmm.c - virtualized allocations and paging (src/memory's
 * vmm_alloc.c, vmm_page.c, jem.c) over simgpu, driven through memory.h in
 * forked children, each with a simgpu state and a table of its own:
 *
 *   - six big allocations (8 MiB each; 512 MiB, 3 GiB in all, under
 *     make test-soak) paged out and in (three times; ten under test-soak or
 *     SALUS_TEST_PAGING_ROUNDS=10), every byte intact, the device's memory
 *     and the process's accounting released while out;
 *   - 10,000 small (sub-allocated) allocations the same way (three rounds;
 *     ten under test-soak), with half of them freed and new ones made while
 *     paged out;
 *   - a big allocation freed while out drops its copy, one made while out
 *     is resident;
 *   - jemalloc never writes to a device address: every byte of the small
 *     region's backed granules is zero or what the program wrote there;
 *   - the driver's queries on a sub-allocated pointer answer the
 *     allocation's own base and size;
 *   - a page-in the device has no room for is refused at once, and comes
 *     in once there is room;
 *   - a page-out the host staging bound (SALUS_SWAP_LIMIT) cannot hold
 *     whole is refused: all the memory stays on the device;
 *   - paging's copies take simgpu's PCIe time (SIMGPU_PCIE_GBPS) each way;
 *   - a big allocation no work has reached since it was made is paged out
 *     and in without a copy; one written is copied;
 *   - a process SIGKILLed while paged out leaves nothing on the device nor
 *     in the table;
 *   - a freed big allocation's chunk is kept for the next of its size (the
 *     same address, no new chunk), let go at an allocation of another
 *     size, by a page-out without a copy and by the drain thread's look
 *     once past its time;
 *   - a preloaded libsalus leaves the program's malloc as it was;
 *   - a driver that refuses chunks with POSIX fd handles gets chunks
 *     without (asked once), and cuIpcGetMemHandle of paged memory answers
 *     CUDA_ERROR_NOT_SUPPORTED instead of a handle.
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
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/testutil.h"
#include "test_memory_vmm_lib.h"

/* The child's simgpu state and table, named by the parent before the fork
 * (the child is SIGKILLed once it has told its result, so only the parent
 * lives to remove them, at its exit). */
static char child_state[96], child_table[96];

static int setup(const char *mem)
{
    return setup_named(mem, child_state, child_table);
}

/* Out, checked released; in, checked back. */
static int round_trip(uint64_t expect_out)
{
    uint64_t freed = 0, restored = 0, before = dev_free(), used = table_used();
    CK(vmem_page_out(0, 0, &freed));
    TRUE(freed > 0 && vmem_resident_bytes(0) == 0);
    TRUE(freed == expect_out && vmem_paged_out_bytes(0) == freed);
    TRUE(dev_free() == before + freed);
    TRUE(table_used() == used - freed);
    CK(vmem_page_in(0, &restored));
    TRUE(restored == freed && vmem_paged_out_bytes(0) == 0);
    TRUE(dev_free() == before && table_used() == used);
    return 0;
}

static void run_child(int (*fn)(void *), void *arg)
{
    assert_int_equal(run_teller("vmm", child_state, child_table, sizeof child_state, fn, arg), 0);
}

/* ---- big allocations: six on a 4 GiB device ------------------------------------
 * Six allocations of 8 MiB are as big (a reservation and chunks each) as
 * six of 512 MiB, for 48 MiB to copy each way instead of 3 GiB; make
 * test-soak (SALUS_TEST_SOAK=1) runs the 3 GiB, whose round trips take
 * several seconds each on a loaded 2-core machine and half its free host
 * memory.  make test runs three rounds; test-soak, or
 * SALUS_TEST_PAGING_ROUNDS=10, the ten of the issue. */

static int paging_rounds(void)
{
    const char *e = getenv("SALUS_TEST_PAGING_ROUNDS");
    int def = tu_soak() ? 10 : 3;
    int n = e ? atoi(e) : def;
    return n > 0 && n <= 100 ? n : def;
}

static uint64_t big_block(void)
{
    return tu_soak() ? 512 * MiB : 8 * MiB;
}

static int big_child(void *arg)
{
    (void)arg;
    enum { N = 6 };
    CUdeviceptr p[N];
    size_t cap = 8 * MiB;
    uint64_t *buf = malloc(cap), block = big_block();
    if (setup("4G") || !buf)
        return 1;
    for (int i = 0; i < N; i++) {
        CK(vmem_alloc(MEM_KIND_DEVICE, &p[i], NULL, block, 1, 0));
        if (fill(p[i], block, 7, buf, cap))
            return 1;
    }
    TRUE(vmem_resident_bytes(0) == N * block);
    for (int r = 0, n = paging_rounds(); r < n; r++)
        if (round_trip(N * block))
            return 1;
    for (int i = 0; i < N; i++)
        if (check(p[i], block, 7, buf, cap))
            return 1;
    return 0;
}

static void test_big_round_trips(void **state)
{
    (void)state;
    run_child(big_child, NULL);
}

/* ---- small allocations: 10,000, freed and made while out ------------------------ */

typedef struct small { CUdeviceptr p; uint64_t n, seed; } small_t;

static uint64_t small_size(int i)
{
    return 8 * (1 + (uint64_t)(i * 2654435761u) % 4096);   /* 8 B .. 32 KiB */
}

static int small_child(void *arg)
{
    (void)arg;
    enum { N = 10000 };
    small_t *a = calloc(N + N / 2, sizeof *a);
    uint64_t buf[4096];
    if (setup("4G") || !a)
        return 1;
    for (int i = 0; i < N; i++) {
        a[i].n = small_size(i);
        a[i].seed = (uint64_t)i;
        CK(vmem_alloc(MEM_KIND_DEVICE, &a[i].p, NULL, a[i].n, 1, 0));
        if (fill(a[i].p, a[i].n, a[i].seed, buf, sizeof buf))
            return 1;
    }
    uint64_t live = 0;
    for (int i = 0; i < N; i++)
        live += a[i].n;
    /* Only live bytes are staged (no free space, no whole granules); what
     * is out is the granules to map again. */
    for (int r = 0, rounds = paging_rounds(); r < rounds; r++) {
        uint64_t freed = 0, restored = 0;
        CK(vmem_page_out(0, 0, &freed));
        TRUE(vmem_resident_bytes(0) == 0 && freed > 0);
        TRUE(vmem_paged_out_bytes(0) == freed);
        TRUE(vmem_p.dev[0].stage_bytes >= live && vmem_p.dev[0].stage_bytes < live + live / 2);
        if (r == rounds - 1) {        /* while out: free half, make more */
            CUresult frc;
            for (int i = 0; i < N; i += 2) {
                TRUE(vmem_free(a[i].p, &frc) == 1 && frc == CUDA_SUCCESS);
                a[i].n = 0;
            }
            TRUE(vmem_paged_out_bytes(0) > 0);
            for (int i = N; i < N + N / 2; i++) {
                a[i].n = small_size(i);
                a[i].seed = (uint64_t)i;
                CK(vmem_alloc(MEM_KIND_DEVICE, &a[i].p, NULL, a[i].n, 1, 0));
                TRUE(vmem_paged_out_bytes(0) == 0);   /* the region came back first */
                if (fill(a[i].p, a[i].n, a[i].seed, buf, sizeof buf))
                    return 1;
            }
        }
        CK(vmem_page_in(0, &restored));
        TRUE(vmem_paged_out_bytes(0) == 0);
    }
    for (int i = 0; i < N + N / 2; i++)
        if (a[i].n && check(a[i].p, a[i].n, a[i].seed, buf, sizeof buf))
            return 1;
    return 0;
}

static void test_small_round_trips(void **state)
{
    (void)state;
    run_child(small_child, NULL);
}

/* ---- big allocations freed and made while out -------------------------------------- */

static int big_while_out_child(void *arg)
{
    (void)arg;
    CUdeviceptr a, b, c;
    uint64_t buf[8192], freed, restored;
    CUresult rc;
    if (setup("4G"))
        return 1;
    uint64_t empty = dev_free();
    CK(vmem_alloc(MEM_KIND_DEVICE, &a, NULL, 64 * MiB, 1, 0));
    CK(vmem_alloc(MEM_KIND_DEVICE, &b, NULL, 3 * MiB, 1, 0));   /* rounded to 4 MiB */
    if (fill(a, 64 * MiB, 1, buf, sizeof buf) || fill(b, 3 * MiB, 2, buf, sizeof buf))
        return 1;
    TRUE(dev_free() == empty - 68 * MiB);
    CK(vmem_page_out(0, 0, &freed));
    TRUE(freed == 68 * MiB && dev_free() == empty);
    TRUE(vmem_paged_out_bytes(0) == 68 * MiB);
    TRUE(vmem_free(a, &rc) == 1 && rc == CUDA_SUCCESS);
    TRUE(vmem_paged_out_bytes(0) == 4 * MiB);
    CK(vmem_alloc(MEM_KIND_DEVICE, &c, NULL, 8 * MiB, 1, 0));
    TRUE(vmem_resident_bytes(0) == 8 * MiB && dev_free() == empty - 8 * MiB);
    if (fill(c, 8 * MiB, 3, buf, sizeof buf))
        return 1;
    CK(vmem_page_in(0, &restored));
    TRUE(restored == 4 * MiB && dev_free() == empty - 12 * MiB);
    if (check(b, 3 * MiB, 2, buf, sizeof buf) || check(c, 8 * MiB, 3, buf, sizeof buf))
        return 1;
    TRUE(vmem_free(b, &rc) == 1 && vmem_free(c, &rc) == 1);
    TRUE(dev_free() == empty && table_used() == 0);
    return 0;
}

static void test_big_while_out(void **state)
{
    (void)state;
    run_child(big_while_out_child, NULL);
}

/* ---- jemalloc never writes to the device ------------------------------------------
 * Every byte of every backed granule of the small region is 0 (fresh
 * physical memory) or the pattern the program wrote at that address: no
 * metadata, no junk, after many allocations and frees of many sizes. */

static int granules_clean(uint64_t seed)
{
    static uint64_t buf[(2 * MiB) / 8];
    vmem_dev_t *v = &vmem_p.dev[0];
    int backed = 0;
    for (size_t g = 0; g < v->size / v->gran; g++) {
        if (!v->g[g].h)
            continue;
        CUdeviceptr at = v->base + g * v->gran;
        CK(cuMemcpyDtoH(buf, at, v->gran));
        for (size_t i = 0; i < v->gran / 8; i++)
            if (buf[i] != 0 && buf[i] != pat(at + i * 8, seed)) {
                fprintf(stderr, "granule %zu word %zu: %#llx\n", g, i,
                        (unsigned long long)buf[i]);
                return 1;
            }
        backed++;
    }
    TRUE(backed > 0);
    return 0;
}

static int jem_clean_child(void *arg)
{
    (void)arg;
    enum { N = 4000 };
    CUdeviceptr *p = calloc(N, sizeof *p);
    uint64_t buf[4096];
    CUresult rc;
    if (setup("4G") || !p)
        return 1;
    TRUE(vmem_jem_available());
    for (int i = 0; i < N; i++)
        CK(vmem_alloc(MEM_KIND_DEVICE, &p[i], NULL, small_size(i), 1, 0));
    if (granules_clean(5))            /* nothing written yet: all zero */
        return 1;
    for (int round = 0; round < 4; round++) {
        for (int i = round % 2; i < N; i += 2) {
            TRUE(vmem_free(p[i], &rc) == 1);
            CK(vmem_alloc(MEM_KIND_DEVICE, &p[i], NULL, small_size(i * 7 + round), 1, 0));
        }
        for (int i = 0; i < N; i += 3)
            if (fill(p[i], small_size(i * 7 + round), 5, buf, sizeof buf))
                return 1;
    }
    return granules_clean(5);
}

static void test_jemalloc_never_writes_device(void **state)
{
    (void)state;
    run_child(jem_clean_child, NULL);
}

/* ---- queries on a sub-allocated pointer ------------------------------------------- */

/* Big allocations made and freed in any order: each interior pointer finds
 * its own, past its size (its chunk's tail) and in a freed one none. */
static int big_queries(void)
{
    enum { N = 9 };
    CUdeviceptr p[N], base = 0;
    size_t size = 0;
    CUresult rc = CUDA_ERROR_UNKNOWN;
    for (int i = 0; i < N; i++)
        CK(vmem_alloc(MEM_KIND_DEVICE, &p[i], NULL, (size_t)(i + 1) * 3 * MiB, 1, 0));
    for (int i = 0; i < N; i += 3)
        TRUE(vmem_free(p[i], &rc) == 1 && rc == CUDA_SUCCESS);
    for (int i = 0; i < N; i++) {
        size_t n = (size_t)(i + 1) * 3 * MiB;
        int live = i % 3 != 0;
        TRUE(vmem_range(p[i] + n - 1, &base, &size) == (live ? 0 : -1));
        if (live)
            TRUE(base == p[i] && size == n);
        if (live && n % (2 * MiB))                         /* the chunk's tail */
            TRUE(vmem_range(p[i] + n, &base, &size) == -1);
    }
    for (int i = 0; i < N; i++)
        if (i % 3 != 0)
            TRUE(vmem_free(p[i], &rc) == 1 && rc == CUDA_SUCCESS);
    TRUE(vmem_range(p[1], &base, &size) == -1);
    return 0;
}

static int query_child(void *arg)
{
    (void)arg;
    CUdeviceptr a, b, big, base = 0;
    size_t size = 0, pitch = 0;
    CUresult rc = CUDA_ERROR_UNKNOWN;
    if (setup("4G"))
        return 1;
    CK(vmem_alloc(MEM_KIND_DEVICE, &a, NULL, 1000, 1, 0));
    CK(vmem_alloc(MEM_KIND_DEVICE, &b, NULL, 1000, 1, 0));
    CK(vmem_alloc(MEM_KIND_PITCH, &big, &pitch, 3000, 1024, 4));
    TRUE(pitch == 3072);
    TRUE(vmem_range(a + 999, &base, &size) == 0 && base == a && size == 1000);
    TRUE(vmem_range(b, &base, &size) == 0 && base == b && size == 1000);
    TRUE(vmem_range(big + 3072 * 1000, &base, &size) == 0 && base == big &&
         size == 3072 * 1024);
    CUdeviceptr start = 0;
    TRUE(vmem_attr(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, a + 10) == 1);
    TRUE(start == a);
    TRUE(vmem_attr(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, big + 5) == 1 &&
         size == 3072 * 1024);
    int ipc = 0;                      /* libsalus's own handles (vmm_ipc.c) */
    TRUE(vmem_attr(&ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, a) == 1 &&
         ipc == 1);
    /* The driver sees the chunk under them; memory answers the allocation. */
    CK(cuMemGetAddressRange_v2(&base, &size, a + 10));
    TRUE(size >= 2 * MiB);
    /* Not ours: the driver answers. */
    CUdeviceptr plain;
    CK(cuMemAlloc_v2(&plain, 4096));
    TRUE(vmem_range(plain, &base, &size) == -1);
    TRUE(vmem_attr(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, plain) == 0);
    TRUE(vmem_free(plain, &rc) == 0);
    return big_queries();
}

static void test_queries(void **state)
{
    (void)state;
    run_child(query_child, NULL);
}

/* ---- a page-in the device has no room for ----------------------------------------
 * It answers CUDA_ERROR_OUT_OF_MEMORY at once, though an allocation would
 * wait SALUS_MEM_WAIT_MS (here ten minutes: a wait would outlast the
 * test's deadline), leaves the memory out, and succeeds once there is room.
 * Half the device goes out, then five eighths come in: a 64 MiB device
 * with a headroom of 4 MiB and contexts of 8 MiB (4 GiB and the defaults,
 * 256 MiB and 512 MiB, under make test-soak). */

static int no_room_child(void *arg)
{
    (void)arg;
    CUdeviceptr a, c;
    uint64_t freed = 0, restored = 0, buf[8192];
    uint64_t dev = tu_soak() ? 4 * GiB : 64 * MiB, half = dev / 2, more = dev / 2 + dev / 8;
    CUresult rc;
    setenv("SALUS_MEM_WAIT_MS", "600000", 1);
    setenv("SALUS_MEM_HEADROOM", tu_soak() ? "256M" : "4M", 1);
    setenv("SIMGPU_CTX_MEMORY", tu_soak() ? "512M" : "8M", 1);
    if (setup(tu_soak() ? "4G" : "64M"))
        return 1;
    CK(vmem_alloc(MEM_KIND_DEVICE, &a, NULL, half, 1, 0));
    if (fill(a, half, 9, buf, sizeof buf))
        return 1;
    CK(vmem_page_out(0, 0, &freed));
    TRUE(freed == half);
    CK(vmem_alloc(MEM_KIND_DEVICE, &c, NULL, more, 1, 0));
    TRUE(vmem_page_in(0, &restored) == CUDA_ERROR_OUT_OF_MEMORY);
    TRUE(vmem_paged_out_bytes(0) == half && vmem_resident_bytes(0) == more);
    TRUE(vmem_free(c, &rc) == 1 && rc == CUDA_SUCCESS);
    CK(vmem_page_in(0, &restored));
    TRUE(restored == half);
    return check(a, half, 9, buf, sizeof buf);
}

static void test_page_in_without_room(void **state)
{
    (void)state;
    run_child(no_room_child, NULL);
}

/* ---- the host staging bound --------------------------------------------------------
 * Under SALUS_SWAP_LIMIT=100M, a page-out is refused whole while the bound
 * cannot hold everything the process has (64 MiB and 256 MiB: a request
 * for 64 MiB, which alone would fit, included: a job left partly out hangs
 * beside the peer that took its room, test_memory_pagelimit); with the
 * 256 MiB freed, all of it goes out, and comes back intact. */

static int limit_child(void *arg)
{
    (void)arg;
    CUdeviceptr a, b;
    CUresult rc;
    uint64_t freed = 1, restored = 0, buf[8192];
    setenv("SALUS_SWAP_LIMIT", "100M", 1);
    if (setup("4G"))
        return 1;
    CK(vmem_alloc(MEM_KIND_DEVICE, &a, NULL, 64 * MiB, 1, 0));
    CK(vmem_alloc(MEM_KIND_DEVICE, &b, NULL, 256 * MiB, 1, 0));
    if (fill(a, 64 * MiB, 11, buf, sizeof buf) || fill(b, 256 * MiB, 12, buf, sizeof buf))
        return 1;
    CK(vmem_page_out(0, 64 * MiB, &freed));
    TRUE(freed == 0 && vmem_paged_out_bytes(0) == 0 && vmem_p.staged == 0);
    CK(vmem_page_out(0, 0, &freed));
    TRUE(freed == 0 && vmem_resident_bytes(0) == 320 * MiB && vmem_p.staged == 0);
    if (check(b, 256 * MiB, 12, buf, sizeof buf))
        return 1;
    TRUE(vmem_free(b, &rc) == 1 && rc == CUDA_SUCCESS);
    CK(vmem_page_out(0, 0, &freed));
    TRUE(freed == 64 * MiB && vmem_paged_out_bytes(0) == 64 * MiB && vmem_p.staged == 64 * MiB);
    CK(vmem_page_in(0, &restored));
    TRUE(restored == 64 * MiB && vmem_p.staged == 0);
    return check(a, 64 * MiB, 11, buf, sizeof buf);
}

static void test_staging_bound(void **state)
{
    (void)state;
    run_child(limit_child, NULL);
}

/* ---- paging's copies cost PCIe time -----------------------------------------------
 * Over SIMGPU_PCIE_GBPS=10, the page-out's and page-in's copies of a 64 MiB
 * allocation each occupy libsalus's stream for 64 MiB / 10 GB/s in simgpu's
 * trace: paging is not free. */

static char pcie_trace[512];

static int copy_ns(const char *text, const char *dir, double *ns)
{
    char line[512];
    double start, end, n = 0;
    for (int i = 0; tu_find_line(text, dir, i, line, sizeof line) == 0; i++) {
        if (tu_json_num(line, "start_ns", &start) || tu_json_num(line, "end_ns", &end))
            return -1;
        n += end - start;
    }
    *ns = n;
    return 0;
}

static int pcie_child(void *arg)
{
    (void)arg;
    CUdeviceptr p;
    uint64_t freed, restored;
    double out_ns = 0, in_ns = 0;
    setenv("SIMGPU_PCIE_GBPS", "10", 1);
    setenv("SIMGPU_TRACE", pcie_trace, 1);
    if (setup("4G"))
        return 1;
    CK(vmem_alloc(MEM_KIND_DEVICE, &p, NULL, 64 * MiB, 1, 0));
    CK(vmem_page_out(0, 0, &freed));
    CK(vmem_page_in(0, &restored));
    char *text = tu_read_file(pcie_trace, NULL);
    TRUE(text != NULL);
    TRUE(copy_ns(text, "\"DtoH\"", &out_ns) == 0 && copy_ns(text, "\"HtoD\"", &in_ns) == 0);
    free(text);
    double want = (double)((64 * MiB + 9) / 10);
    if (out_ns != want || in_ns != want) {
        fprintf(stderr, "copies took %.0f and %.0f ns, not %.0f\n", out_ns, in_ns, want);
        return 1;
    }
    return 0;
}

static void test_paging_at_pcie_bandwidth(void **state)
{
    (void)state;
    snprintf(pcie_trace, sizeof pcie_trace, "%s/pcie-trace.jsonl", tu_tmpdir());
    unlink(pcie_trace);
    run_child(pcie_child, NULL);
}

/* ---- memory never written is not copied ------------------------------------------------
 * With the interception layer's count of work let through (a fake here:
 * vmem_set_work_count's seam), a big allocation made since the last work is
 * paged out and in without a copy; once work has gone through since, it is
 * copied both ways like any other, and what was written survives. */

static uint64_t fake_work;

static uint64_t fake_work_count(void)
{
    return fake_work;
}

static int unwritten_child(void *arg)
{
    (void)arg;
    CUdeviceptr a, b;
    uint64_t freed, restored;
    double out_ns = 0, in_ns = 0;
    size_t cap = 16 * MiB;
    uint64_t *buf = malloc(cap);
    setenv("SIMGPU_PCIE_GBPS", "10", 1);
    setenv("SIMGPU_TRACE", pcie_trace, 1);
    if (setup("4G") || !buf)
        return 1;
    vmem_set_work_count(fake_work_count);
    fake_work = 5;
    CK(vmem_alloc(MEM_KIND_DEVICE, &a, NULL, 64 * MiB, 1, 0));
    if (fill(a, 64 * MiB, 3, buf, cap))
        return 1;
    fake_work++;                       /* the program's work on a went through */
    CK(vmem_alloc(MEM_KIND_DEVICE, &b, NULL, 128 * MiB, 1, 0));
    TRUE(truncate(pcie_trace, 0) == 0);  /* fill's copies left out (O_APPEND: no hole) */
    CK(vmem_page_out(0, 0, &freed));
    TRUE(freed == 192 * MiB && vmem_paged_out_bytes(0) == 192 * MiB);
    CK(vmem_page_in(0, &restored));
    TRUE(restored == 192 * MiB && vmem_resident_bytes(0) == 192 * MiB);
    char *text = tu_read_file(pcie_trace, NULL);
    TRUE(text != NULL);
    TRUE(copy_ns(text, "\"DtoH\"", &out_ns) == 0 && copy_ns(text, "\"HtoD\"", &in_ns) == 0);
    free(text);
    double one = (double)((64 * MiB + 9) / 10);          /* a's copy alone, each way */
    if (out_ns != one || in_ns != one) {
        fprintf(stderr, "copies took %.0f and %.0f ns, a's alone %.0f\n", out_ns, in_ns, one);
        return 1;
    }
    if (check(a, 64 * MiB, 3, buf, cap))
        return 1;
    fake_work++;                       /* now b may have been written: copied from here */
    if (fill(b, 128 * MiB, 4, buf, cap))
        return 1;
    CK(vmem_page_out(0, 0, &freed));
    CK(vmem_page_in(0, &restored));
    return check(a, 64 * MiB, 3, buf, cap) || check(b, 128 * MiB, 4, buf, cap);
}

static void test_unwritten_not_copied(void **state)
{
    (void)state;
    snprintf(pcie_trace, sizeof pcie_trace, "%s/unwritten-trace.jsonl", tu_tmpdir());
    unlink(pcie_trace);
    run_child(unwritten_child, NULL);
}

/* ---- SIGKILL while paged out --------------------------------------------------------- */

static char kill_state[96], kill_table[96];

static int killed_child(void *arg)
{
    (void)arg;
    CUdeviceptr p, q;
    uint64_t freed;
    if (setup_named("4G", kill_state, kill_table))
        return 1;
    uint64_t empty = dev_free();      /* the device less this process's context */
    CK(vmem_alloc(MEM_KIND_DEVICE, &p, NULL, 256 * MiB, 1, 0));
    CK(vmem_alloc(MEM_KIND_DEVICE, &q, NULL, 4096, 1, 0));
    CK(vmem_page_out(0, 0, &freed));
    TRUE(vmem_paged_out_bytes(0) == 256 * MiB + 2 * MiB);
    CK(vmem_alloc(MEM_KIND_DEVICE, &p, NULL, 64 * MiB, 1, 0));   /* resident too */
    TRUE(dev_free() == empty - 64 * MiB);
    return 0;
}

/* A peer of the killed process: the device and the table hold nothing. */
static int after_kill_child(void *arg)
{
    (void)arg;
    CUcontext ctx;
    mem_device_view_t dv;
    setenv("SIMGPU_STATE", kill_state, 1);
    setenv("SALUS_TABLE", kill_table, 1);
    setenv("SIMGPU_CTX_MEMORY", "0", 1);   /* this peer's context takes nothing */
    CK(cuInit(0));
    CK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CK(cuCtxSetCurrent(ctx));
    TRUE(dev_free() == 4 * GiB);
    shm_table_t *t = shm_process_table();
    TRUE(t && mem_view_device(t, 0, &dv) == 0);
    TRUE(dv.used == 0 && dv.granted == 0);
    return 0;
}

static void test_sigkill_while_out(void **state)
{
    (void)state;
    tu_unique_name("vmm-ksim", kill_state, sizeof kill_state);
    tu_unique_name("vmm-ktab", kill_table, sizeof kill_table);
    run_child(killed_child, NULL);
    run_child(after_kill_child, NULL);
}

/* ---- through libsalus: the program's malloc, and its allocations ------------------ */

/* Run vmmclient <mode>, with libsalus preloaded over simgpu or plainly; its
 * line that starts with `mode`; and libsalus's report's count of the
 * allocations paging served in *paged when not NULL (-1: no report). */
static void client(const char *mode, int preload, char *out, size_t len, long *paged)
{
    char prog[512], state[96], table[96], report[320];
    tu_env_t env;
    tu_proc_t p;
    tu_env_init(&env);
    tu_unique_name("vmm-cli", state, sizeof state);
    if (preload)
        tu_env_salus(&env, state, tu_unique_name("vmm-clt", table, sizeof table));
    else
        tu_env_simgpu(&env, state);
    tu_env_set(&env, "SALUS_SWAP", "on");
    snprintf(report, sizeof report, "%s/report-%s-%d.json", tu_tmpdir(), mode, preload);
    tu_env_set(&env, "SALUS_REPORT", "%s", report);
    char *argv[] = { (char *)tu_build_path("tests/clients/vmmclient", prog, sizeof prog),
                     (char *)mode, NULL };
    int rc = tu_run(argv, &env, 60000, &p);
    char *text = tu_read_file(p.out_path, NULL);
    assert_non_null(text);
    if (tu_find_line(text, mode, 0, out, len) != 0)
        snprintf(out, len, "(no line) exit %d: %s", rc, text);
    free(text);
    if (paged) {
        char *rep = tu_read_file(report, NULL);
        double v = -1;
        *paged = rep && tu_json_num(rep, "paged_allocs", &v) == 0 ? (long)v : -1;
        free(rep);
    }
    tu_env_free(&env);
}

/* ---- the chunk cache ---------------------------------------------------------------
 * A freed big allocation is kept, mapped and charged, for the next of its
 * size (once the drain thread's look, called here by hand, has run): the
 * program no longer sees it, the next allocation of that size gets the same
 * address and no new chunk, one of another size a chunk of its own and
 * lets every kept chunk go; a page-out lets kept chunks go without a copy; the look lets them go once
 * past their time, and the device and the table are back to empty. */

static int kept_expired(void *arg)
{
    (void)arg;
    vmem_keep_tick();
    return table_used() == 0;
}

static int keep_child(void *arg)
{
    (void)arg;
    CUdeviceptr a, b, c;
    CUresult rc;
    uint64_t freed = 0;
    if (setup("1G"))
        return 1;
    uint64_t empty = dev_free();
    vmem_keep_tick();                                 /* the drain thread has looked */
    CK(vmem_alloc(MEM_KIND_DEVICE, &a, NULL, 8 * MiB, 1, 0));
    TRUE(vmem_free(a, &rc) == 1 && rc == CUDA_SUCCESS);
    TRUE(table_used() == 8 * MiB && dev_free() == empty - 8 * MiB);
    TRUE(vmem_range(a, NULL, NULL) != 0);           /* freed, for the program */
    CK(vmem_alloc(MEM_KIND_DEVICE, &b, NULL, 8 * MiB, 1, 0));
    TRUE(b == a && table_used() == 8 * MiB && dev_free() == empty - 8 * MiB);
    CK(vmem_alloc(MEM_KIND_DEVICE, &c, NULL, 4 * MiB, 1, 0));
    TRUE(table_used() == 12 * MiB && dev_free() == empty - 12 * MiB);
    TRUE(vmem_free(b, &rc) == 1 && vmem_free(c, &rc) == 1);
    TRUE(table_used() == 12 * MiB);                 /* both kept */
    CK(vmem_alloc(MEM_KIND_DEVICE, &c, NULL, 6 * MiB, 1, 0));
    TRUE(table_used() == 6 * MiB && dev_free() == empty - 6 * MiB);   /* a miss: both go */
    TRUE(vmem_free(c, &rc) == 1 && table_used() == 6 * MiB);
    CK(vmem_page_out(0, 0, &freed));
    TRUE(freed == 6 * MiB && vmem_paged_out_bytes(0) == 0);
    TRUE(table_used() == 0 && dev_free() == empty && vmem_resident_bytes(0) == 0);
    CK(vmem_alloc(MEM_KIND_DEVICE, &a, NULL, 8 * MiB, 1, 0));
    TRUE(vmem_free(a, &rc) == 1 && table_used() == 8 * MiB);
    TRUE(tu_await(kept_expired, NULL, 10000));
    TRUE(dev_free() == empty && vmem_resident_bytes(0) == 0);
    return 0;
}

static void test_freed_chunks_kept(void **state)
{
    (void)state;
    run_child(keep_child, NULL);
}

static void test_malloc_unchanged(void **state)
{
    (void)state;
    char plain[512], preloaded[512];
    client("malloc", 0, plain, sizeof plain, NULL);
    client("malloc", 1, preloaded, sizeof preloaded, NULL);
    assert_non_null(strstr(plain, "libc.so"));
    assert_string_equal(plain, preloaded);
}

static void test_client_allocations(void **state)
{
    (void)state;
    char line[512];
    long paged = 0;
    client("alloc", 0, line, sizeof line, NULL);  /* the driver's own answers */
    assert_string_equal(line, "alloc ok retain=0 types=0");
    client("alloc", 1, line, sizeof line, &paged); /* the same, virtualized */
    assert_string_equal(line, "alloc ok retain=0 types=0");
    assert_int_equal(paged, 10);                  /* every allocation was paging's */
}

/* ---- a driver without POSIX fd handles (vmm_core.c, vmm_ipc.c) ------------------- */

static CUresult (*real_create)(CUmemGenericAllocationHandle *h, size_t size,
                               const CUmemAllocationProp *prop, unsigned long long flags);
static int fd_refusals;

static CUresult create_no_fd(CUmemGenericAllocationHandle *h, size_t size,
                             const CUmemAllocationProp *prop, unsigned long long flags)
{
    if (prop && prop->requestedHandleTypes) {
        fd_refusals++;
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    return real_create(h, size, prop, flags);
}

static void refuse_fd(drv_t *d)
{
    real_create = d->mem_create;
    d->mem_create = create_no_fd;
}

static int no_fd_child(void *arg)
{
    (void)arg;
    CUdeviceptr a, b;
    CUipcMemHandle h;
    CUresult rc = CUDA_ERROR_UNKNOWN;
    int ipc = 1;
    patch_drv = refuse_fd;
    if (setup("4G"))
        return 1;
    CK(vmem_alloc(MEM_KIND_DEVICE, &a, NULL, 4 * MiB, 1, 0));
    CK(vmem_alloc(MEM_KIND_DEVICE, &b, NULL, 4 * MiB, 1, 0));
    TRUE(fd_refusals == 1);           /* asked once */
    TRUE(vmem_attr(&ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, a) == 1 &&
         ipc == 0);
    TRUE(vmem_ipc_get(&h, a, &rc) == 1 && rc == CUDA_ERROR_NOT_SUPPORTED);
    TRUE(vmem_free(a, &rc) == 1 && rc == CUDA_SUCCESS);
    TRUE(vmem_free(b, &rc) == 1 && rc == CUDA_SUCCESS);
    return 0;
}

static void test_no_fd_handles(void **state)
{
    (void)state;
    run_child(no_fd_child, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_big_round_trips),
        cmocka_unit_test(test_small_round_trips),
        cmocka_unit_test(test_big_while_out),
        cmocka_unit_test(test_jemalloc_never_writes_device),
        cmocka_unit_test(test_queries),
        cmocka_unit_test(test_page_in_without_room),
        cmocka_unit_test(test_staging_bound),
        cmocka_unit_test(test_paging_at_pcie_bandwidth),
        cmocka_unit_test(test_unwritten_not_copied),
        cmocka_unit_test(test_sigkill_while_out),
        cmocka_unit_test(test_freed_chunks_kept),
        cmocka_unit_test(test_malloc_unchanged),
        cmocka_unit_test(test_client_allocations),
        cmocka_unit_test(test_no_fd_handles),
    };
    return cmocka_run_group_tests_name("memory_vmm", tests, NULL, NULL);
}
