/*
 * test_memory_pagehang.c - a page-out never hangs on work that does not
 * end, nor holds up the allocator while it waits (src/vmem/quiesce.c),
 * over simgpu with paging on:
 *
 *   - with a cuStreamWaitValue32 that nobody writes queued, a page-out
 *     asked returns CUDA_ERROR_NOT_READY within its bound (shortened here
 *     to 1 s), with all the memory still in and intact; before, it
 *     waited in the context synchronize for good, holding the allocator's
 *     lock;
 *   - while it waits, an allocation of the same process is made at once;
 *   - a second page-out, asked while the first's synchronize still waits,
 *     is refused at once, without a second wait;
 *   - once the word is written, a page-out moves everything out and back
 *     in, the contents intact.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>

#include "lib/testutil.h"
#include "test_memory_vmm_lib.h"

#define MS 1000000ull

static char child_state[96], child_table[96];

typedef struct out_call {
    CUresult rc;
    uint64_t freed, ns;
    int done;
} out_call_t;

static void *page_out_thread(void *arg)
{
    out_call_t *c = arg;
    uint64_t t0 = tu_now_ns();
    c->rc = vmem_page_out(0, 0, &c->freed);
    c->ns = tu_now_ns() - t0;
    __atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* A page-out refused as not ready, on its own thread; an allocation made
 * while it waits. */
static int refused_while_waiting(uint64_t block)
{
    out_call_t c = { 0 };
    pthread_t t;
    TRUE(pthread_create(&t, NULL, page_out_thread, &c) == 0);
    for (uint64_t until = tu_now_ns() + 5000 * MS; !vmem_quiesce_waiting();)
        if (tu_now_ns() >= until || __atomic_load_n(&c.done, __ATOMIC_ACQUIRE)) {
            fprintf(stderr, "the page-out never waited for the program's work\n");
            return 1;
        }
    CUdeviceptr q = 0;
    uint64_t t0 = tu_now_ns();
    CUresult arc = vmem_alloc(MEM_KIND_DEVICE, &q, NULL, 1 * MiB, 1, 0);
    uint64_t alloc_ns = tu_now_ns() - t0;
    int alloc_first = !__atomic_load_n(&c.done, __ATOMIC_ACQUIRE);
    pthread_join(t, NULL);
    CK(arc);
    if (c.rc != CUDA_ERROR_NOT_READY || c.ns > 5000 * MS) {
        fprintf(stderr, "page-out: %d after %llu ms (want %d within the bound)\n", (int)c.rc,
                (unsigned long long)(c.ns / MS), (int)CUDA_ERROR_NOT_READY);
        return 1;
    }
    if (!alloc_first) {
        fprintf(stderr, "the allocation took %llu ms: it waited for the page-out\n",
                (unsigned long long)(alloc_ns / MS));
        return 1;
    }
    TRUE(vmem_resident_bytes(0) >= block && vmem_paged_out_bytes(0) == 0);
    return 0;
}

static int wait_child(void *arg)
{
    (void)arg;
    size_t cap = 8 * MiB;
    uint64_t *buf = malloc(cap), block = 8 * MiB, freed = 0, restored = 0;
    CUdeviceptr p, word;
    CUstream s, w;
    if (setup_named("1G", child_state, child_table) || !buf)
        return 1;
    vmem_quiesce_ns = 1000 * MS;
    CK(vmem_alloc(MEM_KIND_DEVICE, &p, NULL, block, 1, 0));
    if (fill(p, block, 11, buf, cap))
        return 1;
    CK(cuMemAlloc(&word, 4));
    CK(cuMemsetD32(word, 0, 1));
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&w, CU_STREAM_NON_BLOCKING));
    CK(cuStreamWaitValue32(s, word, 1, CU_STREAM_WAIT_VALUE_EQ));
    if (refused_while_waiting(block))
        return 1;
    uint64_t t0 = tu_now_ns();
    CUresult again = vmem_page_out(0, 0, &freed);
    TRUE(again == CUDA_ERROR_NOT_READY && tu_now_ns() - t0 < vmem_quiesce_ns / 2);
    if (check(p, block, 11, buf, cap))
        return 1;
    CK(cuStreamWriteValue32(w, word, 1, 0));
    CK(cuStreamSynchronize(w));
    /* The waiter's synchronize returns once the wait is met: page-outs are
     * refused until it has. */
    CUresult rc = CUDA_ERROR_NOT_READY;
    for (uint64_t until = tu_now_ns() + 10000 * MS;
         rc == CUDA_ERROR_NOT_READY && tu_now_ns() < until;)
        rc = vmem_page_out(0, 0, &freed);
    CK(rc);
    TRUE(freed >= block && vmem_resident_bytes(0) == 0);
    CK(vmem_page_in(0, &restored));
    TRUE(restored == freed);
    if (check(p, block, 11, buf, cap))
        return 1;
    free(buf);
    return 0;
}

static void test_page_out_bounded(void **state)
{
    (void)state;
    assert_int_equal(run_teller("hang", child_state, child_table, sizeof child_state,
                                wait_child, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_page_out_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
