/*
 * ipcclient.c - CUDA IPC between processes, for test_memory_ipc: over
 * simgpu, with libsalus preloaded (or not), paging on (or off).  The
 * processes meet in a directory: the producer writes its handles to
 * <dir>/handles, and waits for files the test makes (<dir>/write2,
 * <dir>/stop) with a deadline of its own.
 *
 *   ipcclient produce <dir> <kernels.cubin> <MiB> <kernel_us>
 *       allocates X (768 MiB) and S (256 KiB), fills both with pattern 1,
 *       exports both (cuIpcGetMemHandle), allocates <MiB> of other memory
 *       in 512 MiB blocks with pattern 7, says "exported", runs iterations
 *       (two salus_spin kernels and a stream synchronize) until <dir>/stop,
 *       then checks X and S hold pattern 3 (the consumer's last write) and
 *       the other memory pattern 7, frees everything:
 *       "done <CUresult> bad <regions whose bytes are not as expected>".
 *   ipcclient consume <dir>
 *       opens both handles, checks pattern 1, writes pattern 2: "opened";
 *       once <dir>/write2 exists writes pattern 3 and reads it back:
 *       "wrote <CUresult>"; closes both: "closed <CUresult>".
 *   ipcclient lend <dir>
 *       allocates and exports X with pattern 1: "exported"; once <dir>/free
 *       exists frees X: "freed <CUresult>"; exits once <dir>/stop exists.
 *   ipcclient keep <dir>
 *       opens X's handle, checks pattern 1, writes pattern 2: "opened";
 *       once <dir>/close exists (its exporter has freed X) checks that X
 *       still holds pattern 2, closes it: "closed <CUresult> bad <n>".
 *   ipcclient fuzz <dir>
 *       opens and closes X's handle, then each of 64 handles with one byte
 *       changed and 8 of random bytes, which must all be refused:
 *       "fuzz <CUresult of the valid open> refused <n> of 72".
 *   ipcclient dead <dir>
 *       opens X's handle, whose exporter has ended: "refused <CUresult>".
 *   ipcclient lendmany <dir> <n> <nofile>
 *       with its open-file limit at <nofile>, allocates and exports <n>
 *       allocations of 64 KiB (allocation i filled with pattern 10 + i):
 *       "exported <n>"; exits once <dir>/stop exists.
 *   ipcclient takemany <dir> <n>
 *       opens each of the <n> handles in turn and checks its pattern:
 *       "opened <succeeded> refused <failed> rc <the first failure's
 *       CUresult> bad <n>"; once <dir>/stop exists closes every one opened:
 *       "closed <CUresult>".
 *   ipcclient plain
 *       cuIpcGetMemHandle on a cuMemAlloc_v2 allocation and on a mapping of
 *       the program's own VMM handle: "plain <CUresult> <CUresult>".
 *
 * Exits 0 when every step did what it says, 1 otherwise, 2 on bad usage.
 */
#include <cuda.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define MiB      (1ull << 20)
#define X_BYTES  (768 * MiB)       /* larger than a block: paged first if it could be */
#define S_BYTES  (256u << 10)
#define BLOCK    (512 * MiB)
#define BUF      (64 * MiB)
#define WAIT_S   200
#define TRY(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) return r_; } while (0)

static uint64_t *buf;
static const char *dir;

static uint64_t pat(uint64_t off, unsigned seed)
{
    return ((off >> 3) + seed) * 0x9e3779b97f4a7c15ull | seed;
}

static CUresult fill(CUdeviceptr p, uint64_t bytes, unsigned seed)
{
    for (uint64_t off = 0; off < bytes; off += BUF) {
        uint64_t n = bytes - off < BUF ? bytes - off : BUF;
        for (uint64_t i = 0; i < n / 8; i++)
            buf[i] = pat(off + i * 8, seed);
        TRY(cuMemcpyHtoD(p + off, buf, n));
    }
    return CUDA_SUCCESS;
}

/* *bad += 1 when [p, p + bytes) does not hold pattern seed. */
static CUresult check(CUdeviceptr p, uint64_t bytes, unsigned seed, int *bad)
{
    for (uint64_t off = 0; off < bytes; off += BUF) {
        uint64_t n = bytes - off < BUF ? bytes - off : BUF;
        TRY(cuMemcpyDtoH(buf, p + off, n));
        for (uint64_t i = 0; i < n / 8; i++)
            if (buf[i] != pat(off + i * 8, seed)) {
                ++*bad;
                return CUDA_SUCCESS;
            }
    }
    return CUDA_SUCCESS;
}

static CUresult context(void)
{
    CUcontext ctx;
    TRY(cuInit(0));
    TRY(cuDevicePrimaryCtxRetain(&ctx, 0));
    return cuCtxSetCurrent(ctx);
}

static int exists(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

/* Wait for <dir>/<name>, WAIT_S at most: 0 or -1. */
static int await_file(const char *name)
{
    struct timespec ts = { 0, 5 * 1000 * 1000 };
    for (long i = 0; i < WAIT_S * 200L; i++) {
        if (exists(name))
            return 0;
        nanosleep(&ts, NULL);
    }
    return -1;
}

static void say(const char *fmt, long a, long b)
{
    printf(fmt, a, b);
    fflush(stdout);
}

/* ---- the producer ------------------------------------------------------------- */

static int write_handles(const CUipcMemHandle *h, int n)
{
    char tmp[512], path[512];
    snprintf(tmp, sizeof tmp, "%s/handles.tmp", dir);
    snprintf(path, sizeof path, "%s/handles", dir);
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(h, sizeof *h, (size_t)n, f) != (size_t)n || fclose(f) != 0)
        return -1;
    return rename(tmp, path);
}

static CUresult produce(const char *cubin, int blocks, unsigned long long ns, int *bad)
{
    CUmodule m;
    CUfunction spin;
    CUdeviceptr x, s, y[16];
    CUipcMemHandle h[2];
    TRY(context());
    TRY(cuModuleLoad(&m, cubin));
    TRY(cuModuleGetFunction(&spin, m, "salus_spin"));
    TRY(cuMemAlloc_v2(&x, X_BYTES));
    TRY(cuMemAlloc_v2(&s, S_BYTES));
    TRY(fill(x, X_BYTES, 1));
    TRY(fill(s, S_BYTES, 1));
    TRY(cuIpcGetMemHandle(&h[0], x));
    TRY(cuIpcGetMemHandle(&h[1], s));
    for (int b = 0; b < blocks; b++) {
        TRY(cuMemAlloc_v2(&y[b], BLOCK));
        TRY(fill(y[b], BLOCK, 7));
    }
    if (write_handles(h, 2) != 0)
        return CUDA_ERROR_OPERATING_SYSTEM;
    say("exported\n", 0, 0);
    void *args[] = { &ns };
    for (long i = 0; !exists("stop"); i++) {
        if (i > WAIT_S * 1000000000ll / (long long)(2 * ns + 1))
            return CUDA_ERROR_TIMEOUT;
        TRY(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
        TRY(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
        TRY(cuStreamSynchronize(NULL));
    }
    TRY(check(x, X_BYTES, 3, bad));
    TRY(check(s, S_BYTES, 3, bad));
    for (int b = 0; b < blocks; b++)
        TRY(check(y[b], BLOCK, 7, bad));
    TRY(cuMemFree_v2(x));
    TRY(cuMemFree_v2(s));
    for (int b = 0; b < blocks; b++)
        TRY(cuMemFree_v2(y[b]));
    return CUDA_SUCCESS;
}

/* The exporter frees an allocation that an importer maps. */
static CUresult lend(void)
{
    CUdeviceptr x;
    CUipcMemHandle h[2];
    TRY(context());
    TRY(cuMemAlloc_v2(&x, X_BYTES));
    TRY(fill(x, X_BYTES, 1));
    TRY(cuIpcGetMemHandle(&h[0], x));
    h[1] = h[0];
    if (write_handles(h, 2) != 0)
        return CUDA_ERROR_OPERATING_SYSTEM;
    say("exported\n", 0, 0);
    if (await_file("free") != 0)
        return CUDA_ERROR_TIMEOUT;
    CUresult rc = cuMemFree_v2(x);
    say("freed %ld\n", rc, 0);
    TRY(rc);
    return await_file("stop") == 0 ? CUDA_SUCCESS : CUDA_ERROR_TIMEOUT;
}

/* ---- the consumers ------------------------------------------------------------ */

static int read_handles(CUipcMemHandle h[2])
{
    char path[512];
    snprintf(path, sizeof path, "%s/handles", dir);
    FILE *f = fopen(path, "rb");
    int ok = f && fread(h, sizeof *h, 2, f) == 2;
    if (f)
        fclose(f);
    return ok ? 0 : -1;
}

static CUresult consume(int *bad)
{
    CUipcMemHandle h[2];
    CUdeviceptr x, s;
    if (read_handles(h) != 0)
        return CUDA_ERROR_FILE_NOT_FOUND;
    TRY(context());
    TRY(cuIpcOpenMemHandle(&x, h[0], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    TRY(cuIpcOpenMemHandle(&s, h[1], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    TRY(check(x, X_BYTES, 1, bad));
    TRY(check(s, S_BYTES, 1, bad));
    TRY(fill(x, X_BYTES, 2));
    TRY(fill(s, S_BYTES, 2));
    say("opened bad %ld\n", *bad, 0);
    if (await_file("write2") != 0)
        return CUDA_ERROR_TIMEOUT;
    CUresult rc = fill(x, X_BYTES, 3);
    if (rc == CUDA_SUCCESS)
        rc = fill(s, S_BYTES, 3);
    if (rc == CUDA_SUCCESS)
        rc = check(x, X_BYTES, 3, bad);
    say("wrote %ld\n", rc, 0);
    TRY(rc);
    TRY(cuIpcCloseMemHandle(x));
    TRY(cuIpcCloseMemHandle(s));
    say("closed %ld\n", 0, 0);
    return CUDA_SUCCESS;
}

static CUresult keep(int *bad)
{
    CUipcMemHandle h[2];
    CUdeviceptr x;
    if (read_handles(h) != 0)
        return CUDA_ERROR_FILE_NOT_FOUND;
    TRY(context());
    TRY(cuIpcOpenMemHandle(&x, h[0], 0));
    TRY(check(x, X_BYTES, 1, bad));
    TRY(fill(x, X_BYTES, 2));
    say("opened bad %ld\n", *bad, 0);
    if (await_file("close") != 0)
        return CUDA_ERROR_TIMEOUT;
    TRY(check(x, X_BYTES, 2, bad));
    CUresult rc = cuIpcCloseMemHandle(x);
    say("closed %ld bad %ld\n", rc, *bad);
    return rc;
}

static CUresult fuzz(int *bad)
{
    CUipcMemHandle h[2], g;
    CUdeviceptr x;
    int refused = 0;
    if (read_handles(h) != 0)
        return CUDA_ERROR_FILE_NOT_FOUND;
    TRY(context());
    CUresult valid = cuIpcOpenMemHandle(&x, h[0], 0);
    if (valid == CUDA_SUCCESS)
        TRY(cuIpcCloseMemHandle(x));
    srand(42);
    for (int i = 0; i < 72; i++) {
        g = h[0];
        if (i < 64) {
            g.reserved[i] ^= (char)(1 + rand() % 255);
        } else {
            for (size_t k = 0; k < sizeof g.reserved; k++)
                g.reserved[k] = (char)rand();
        }
        CUresult rc = cuIpcOpenMemHandle(&x, g, 0);
        if (rc != CUDA_SUCCESS)
            refused++;
        else
            cuIpcCloseMemHandle(x);
    }
    *bad = valid != CUDA_SUCCESS || refused != 72;
    say("fuzz %ld refused %ld of 72\n", valid, refused);
    return CUDA_SUCCESS;
}

static CUresult dead(int *bad)
{
    CUipcMemHandle h[2];
    CUdeviceptr x;
    if (read_handles(h) != 0)
        return CUDA_ERROR_FILE_NOT_FOUND;
    TRY(context());
    CUresult rc = cuIpcOpenMemHandle(&x, h[0], 0);
    *bad = rc == CUDA_SUCCESS;
    say("refused %ld\n", rc, 0);
    return CUDA_SUCCESS;
}

static CUresult plain(int *bad)
{
    CUdeviceptr a, v;
    CUipcMemHandle h;
    CUmemGenericAllocationHandle mh;
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
    CUmemAccessDesc acc = { .location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    TRY(context());
    TRY(cuMemAlloc_v2(&a, 4 * MiB));
    TRY(cuMemCreate(&mh, 2 * MiB, &prop, 0));
    TRY(cuMemAddressReserve(&v, 2 * MiB, 0, 0, 0));
    TRY(cuMemMap(v, 2 * MiB, 0, mh, 0));
    TRY(cuMemSetAccess(v, 2 * MiB, &acc, 1));
    CUresult r1 = cuIpcGetMemHandle(&h, a), r2 = cuIpcGetMemHandle(&h, v);
    say("plain %ld %ld\n", r1, r2);
    *bad = 0;
    return CUDA_SUCCESS;
}

/* ---- many imports -------------------------------------------------------------- */

#define MANY_BYTES (64u << 10)
#define MANY_MAX   1024

static int many_file(const char *mode, FILE **f)
{
    char path[512];
    snprintf(path, sizeof path, "%s/many", dir);
    *f = fopen(path, mode);
    return *f ? 0 : -1;
}

static CUresult lend_many(int n, unsigned long nofile)
{
    static CUipcMemHandle h[MANY_MAX];
    struct rlimit rl;
    FILE *f;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || (rl.rlim_cur = nofile, 0) ||
        setrlimit(RLIMIT_NOFILE, &rl) != 0)
        return CUDA_ERROR_OPERATING_SYSTEM;
    TRY(context());
    for (int i = 0; i < n; i++) {
        CUdeviceptr p;
        TRY(cuMemAlloc_v2(&p, MANY_BYTES));
        TRY(fill(p, MANY_BYTES, 10 + (unsigned)i));
        TRY(cuIpcGetMemHandle(&h[i], p));
    }
    if (many_file("wb", &f) != 0 || fwrite(h, sizeof h[0], (size_t)n, f) != (size_t)n ||
        fclose(f) != 0)
        return CUDA_ERROR_FILE_NOT_FOUND;
    say("exported %ld\n", n, 0);
    return await_file("stop") == 0 ? CUDA_SUCCESS : CUDA_ERROR_TIMEOUT;
}

static CUresult take_many(int n, int *bad)
{
    static CUipcMemHandle h[MANY_MAX];
    static CUdeviceptr x[MANY_MAX];
    int opened = 0, refused = 0;
    CUresult first = CUDA_SUCCESS;
    FILE *f;
    if (many_file("rb", &f) != 0)
        return CUDA_ERROR_FILE_NOT_FOUND;
    int got = (int)fread(h, sizeof h[0], (size_t)n, f);
    fclose(f);
    if (got != n)
        return CUDA_ERROR_FILE_NOT_FOUND;
    TRY(context());
    for (int i = 0; i < n; i++) {
        CUresult rc = cuIpcOpenMemHandle(&x[opened], h[i], 0);
        if (rc != CUDA_SUCCESS) {
            first = refused++ ? first : rc;
            continue;
        }
        TRY(check(x[opened++], MANY_BYTES, 10 + (unsigned)i, bad));
    }
    printf("opened %d refused %d rc %d bad %d\n", opened, refused, (int)first, *bad);
    fflush(stdout);
    if (await_file("stop") != 0)
        return CUDA_ERROR_TIMEOUT;
    CUresult rc = CUDA_SUCCESS;
    for (int i = 0; i < opened && rc == CUDA_SUCCESS; i++)
        rc = cuIpcCloseMemHandle(x[i]);
    say("closed %ld\n", rc, 0);
    return rc;
}

int main(int argc, char **argv)
{
    int bad = 0;
    CUresult rc;
    buf = malloc(BUF);
    if (!buf || argc < 2)
        goto usage;
    dir = argc > 2 ? argv[2] : ".";
    if (!strcmp(argv[1], "produce") && argc == 6) {
        int blocks = (int)(strtoull(argv[4], NULL, 10) * MiB / BLOCK);
        if (blocks < 0 || blocks > 16)
            goto usage;
        rc = produce(argv[3], blocks, strtoull(argv[5], NULL, 10) * 1000ull, &bad);
        printf("done %d bad %d\n", (int)rc, bad);
    } else if (!strcmp(argv[1], "consume") && argc == 3) {
        rc = consume(&bad);
    } else if (!strcmp(argv[1], "lend") && argc == 3) {
        rc = lend();
    } else if (!strcmp(argv[1], "keep") && argc == 3) {
        rc = keep(&bad);
    } else if (!strcmp(argv[1], "fuzz") && argc == 3) {
        rc = fuzz(&bad);
    } else if (!strcmp(argv[1], "dead") && argc == 3) {
        rc = dead(&bad);
    } else if (!strcmp(argv[1], "lendmany") && argc == 5 && atoi(argv[3]) > 0 &&
               atoi(argv[3]) <= MANY_MAX) {
        rc = lend_many(atoi(argv[3]), strtoul(argv[4], NULL, 10));
    } else if (!strcmp(argv[1], "takemany") && argc == 4 && atoi(argv[3]) > 0 &&
               atoi(argv[3]) <= MANY_MAX) {
        rc = take_many(atoi(argv[3]), &bad);
    } else if (!strcmp(argv[1], "plain") && argc == 2) {
        rc = plain(&bad);
    } else {
        goto usage;
    }
    if (rc != CUDA_SUCCESS)
        printf("error %d\n", (int)rc);
    return rc == CUDA_SUCCESS && bad == 0 ? 0 : 1;
usage:
    fprintf(stderr, "usage: ipcclient produce <dir> <kernels.cubin> <MiB> <kernel_us> | "
                    "consume <dir> | lend <dir> | keep <dir> | fuzz <dir> | dead <dir> | "
                    "lendmany <dir> <n> <nofile> | takemany <dir> <n> | plain\n");
    return 2;
}
