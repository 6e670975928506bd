/*
 * pageclient.c - a training job whose memory a peer may page out: it
 * allocates <MiB> with cuMemAlloc_v2 (in blocks of 512 MiB, or of
 * PAGECLIENT_BLOCK_MIB when set; one block of <MiB> when that is less, and
 * <MiB> a whole number of blocks), writes a pattern
 * of each byte's address through the driver, says "ready", runs
 * <iterations> of two salus_spin kernels of <kernel_us> and a stream
 * synchronize (an iteration boundary), then reads every byte back.  For
 * test_memory_preempt, over simgpu with libsalus preloaded (SALUS_SWAP=on).
 *
 *   pageclient <kernels.cubin> <MiB> <iterations> <kernel_us> [async]
 *
 * With "async" the blocks are allocated with cuMemAllocAsync on the legacy
 * stream (the device's default pool: paged as well) and freed with
 * cuMemFreeAsync at the end.  With "grow=<file>" it fills half its blocks,
 * says "half", and allocates the rest once <file> exists (the test's go:
 * every job then holds memory and waits for more at once); "grow-async=<file>"
 * the same with cuMemAllocAsync.
 *
 * Prints "ready" once its memory holds the pattern, then
 * "done <CUresult> bad <blocks whose bytes changed>"; exits 0 only when
 * every call succeeded and every byte is intact.
 */
#include <cuda.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB   (1ull << 20)
#define BUF_MAX (64 * MiB)
#define TRY(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) return r_; } while (0)

static uint64_t *buf;
static uint64_t block_bytes, buf_bytes;     /* a block, the copy buffer */

static uint64_t pat(uint64_t addr)
{
    return (addr >> 3) * 0x9e3779b97f4a7c15ull | 1;
}

static CUresult fill(CUdeviceptr p)
{
    for (uint64_t off = 0; off < block_bytes; off += buf_bytes) {
        for (uint64_t i = 0; i < buf_bytes / 8; i++)
            buf[i] = pat(p + off + i * 8);
        TRY(cuMemcpyHtoD(p + off, buf, buf_bytes));
    }
    return CUDA_SUCCESS;
}

static CUresult check(CUdeviceptr p, int *bad)
{
    for (uint64_t off = 0; off < block_bytes; off += buf_bytes) {
        TRY(cuMemcpyDtoH(buf, p + off, buf_bytes));
        for (uint64_t i = 0; i < buf_bytes / 8; i++)
            if (buf[i] != pat(p + off + i * 8)) {
                ++*bad;
                return CUDA_SUCCESS;
            }
    }
    return CUDA_SUCCESS;
}

/* The test's go for a growing job: <file> exists (polled, two minutes at
 * most: the test's own deadline is the longer). */
static int await_go(const char *file)
{
    for (int i = 0; i < 12000; i++) {
        if (access(file, F_OK) == 0)
            return 0;
        usleep(10000);
    }
    return -1;
}

static CUresult run(const char *cubin, int blocks, int iters, unsigned long long ns, int async,
                    int warm, const char *grow, int *bad)
{
    CUcontext ctx;
    CUmodule m;
    CUfunction spin;
    CUdeviceptr p[64];
    TRY(cuInit(0));
    TRY(cuDevicePrimaryCtxRetain(&ctx, 0));
    TRY(cuCtxSetCurrent(ctx));
    TRY(cuModuleLoad(&m, cubin));
    TRY(cuModuleGetFunction(&spin, m, "salus_spin"));
    void *args[] = { &ns };
    if (warm) {                           /* holds the GPU before it allocates */
        TRY(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
        TRY(cuStreamSynchronize(NULL));
    }
    for (int b = 0; b < blocks; b++) {
        if (grow && b == blocks / 2) {
            printf("half\n");
            fflush(stdout);
            if (await_go(grow) != 0)
                return CUDA_ERROR_NOT_READY;
        }
        TRY(async ? cuMemAllocAsync(&p[b], block_bytes, NULL)
                  : cuMemAlloc_v2(&p[b], block_bytes));
        TRY(fill(p[b]));
    }
    printf("ready\n");
    fflush(stdout);
    for (int i = 0; i < iters; i++) {
        TRY(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
        TRY(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
        TRY(cuStreamSynchronize(NULL));
    }
    for (int b = 0; b < blocks; b++)
        TRY(check(p[b], bad));
    for (int b = 0; b < blocks; b++)        /* as a program gives its memory back */
        TRY(async ? cuMemFreeAsync(p[b], NULL) : cuMemFree_v2(p[b]));
    return async ? cuStreamSynchronize(NULL) : CUDA_SUCCESS;
}

int main(int argc, char **argv)
{
    int async = argc == 6 && (strcmp(argv[5], "async") == 0 ||
                              strncmp(argv[5], "grow-async=", 11) == 0);
    int warm = argc == 6 && strcmp(argv[5], "warm") == 0;
    const char *grow = argc != 6 ? NULL : strncmp(argv[5], "grow=", 5) == 0 ? argv[5] + 5 :
                       strncmp(argv[5], "grow-async=", 11) == 0 ? argv[5] + 11 : NULL;
    if (argc != 5 && !async && !warm && !grow) {
        fprintf(stderr, "usage: pageclient <kernels.cubin> <MiB> <iterations> <kernel_us> "
                        "[async|warm|grow=<file>|grow-async=<file>]\n");
        return 2;
    }
    uint64_t total = strtoull(argv[2], NULL, 10) * MiB;
    /* The tests' small devices keep the blocks' count with smaller blocks:
     * the same calls, megabytes instead of gigabytes to copy. */
    const char *bm = getenv("PAGECLIENT_BLOCK_MIB");
    uint64_t block_max = bm && *bm ? strtoull(bm, NULL, 10) * MiB : 512 * MiB;
    if (!block_max) {
        fprintf(stderr, "pageclient: PAGECLIENT_BLOCK_MIB=%s is not a number of MiB above 0\n", bm);
        return 2;
    }
    block_bytes = total < block_max ? total : block_max;
    buf_bytes = block_bytes < BUF_MAX ? block_bytes : BUF_MAX;
    int blocks = block_bytes && block_bytes % buf_bytes == 0 && total % block_bytes == 0
                 ? (int)(total / block_bytes) : 0, bad = 0;
    if (blocks < 1 || blocks > 64) {
        fprintf(stderr, "pageclient: %s MiB is not 1 to 64 whole blocks of %llu MiB\n", argv[2],
                (unsigned long long)(block_bytes / MiB));
        return 2;
    }
    buf = malloc(buf_bytes);
    if (!buf)
        return 2;
    CUresult rc = run(argv[1], blocks, atoi(argv[3]), strtoull(argv[4], NULL, 10) * 1000ull,
                      async, warm, grow, &bad);
    printf("done %d bad %d\n", (int)rc, bad);
    return rc == CUDA_SUCCESS && bad == 0 ? 0 : 1;
}
