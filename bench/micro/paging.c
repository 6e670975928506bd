/*
 * paging.c - paging's throughput over simgpu: how fast src/vmem moves a
 * process's memory to pinned host staging and back (vmem_page_out,
 * vmem_page_in, the primitives the scheduler calls), against the two
 * floors it cannot pass: the PCIe bandwidth simgpu models
 * (SIMGPU_PCIE_GBPS, 25 GB/s) and a warm memcpy on this host (simgpu's
 * device memory is host memory, so every copy is at most a memcpy).
 *
 * Divided into: options and the clock; the floor; the memory paged; the
 * rounds; the report.
 *
 * One process, linked with libsalus's modules as the tests are (it calls
 * vmem.h itself), over a simgpu state and a table of its own.  It allocates
 * --mib MiB in --chunk-mib chunks (paging's big allocations) and 64 small
 * allocations of 256 KiB (its small region), writes every byte, then pages
 * everything out and in --rounds times, checking a sample of every
 * allocation after each round.  The first round is reported apart: it is
 * the one that finds no staging yet.  Writes one JSON object:
 *   {"out_gibps": ..., "in_gibps": ..., "first_out_gibps": ...,
 *    "first_in_gibps": ..., "memcpy_gibps": ..., "pcie_gibps": ...,
 *    "floor_gibps": ..., "out_share": ..., "in_share": ..., "gib": ...}
 * (the steady rounds' medians; a share is GiB/s over the floor).
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "drv/drv.h"
#include "micro.h"
#include "memory/memory.h"
#include "vmem/vmem.h"

#define MiB (1ull << 20)
#define SMALL_N 64
#define SMALL_BYTES (256u << 10)
#define MAX_ROUNDS 64

/* ---- options and the clock ------------------------------------------------------- */

typedef struct opts {
    const char *out;
    unsigned mib, chunk_mib, rounds;
} opts_t;

static double now_s(void)
{
    return (double)micro_now_ns() * 1e-9;
}

static int parse(int argc, char **argv, opts_t *o)
{
    *o = (opts_t){ NULL, 1024, 64, 7 };
    for (int i = 1; i + 1 < argc; i += 2) {
        unsigned long v = strtoul(argv[i + 1], NULL, 10);
        if (!strcmp(argv[i], "--out"))
            o->out = argv[i + 1];
        else if (!strcmp(argv[i], "--mib") && v >= 64 && v <= 16384)
            o->mib = (unsigned)v;
        else if (!strcmp(argv[i], "--chunk-mib") && v >= 2 && v <= 4096)
            o->chunk_mib = (unsigned)v;
        else if (!strcmp(argv[i], "--rounds") && v >= 2 && v <= MAX_ROUNDS)
            o->rounds = (unsigned)v;
        else {
            fprintf(stderr, "paging: bad option %s %s (accepted: --out FILE, --mib 64-16384, "
                    "--chunk-mib 2-4096, --rounds 2-%d)\n", argv[i], argv[i + 1], MAX_ROUNDS);
            return -1;
        }
    }
    if (!o->out || o->chunk_mib > o->mib) {
        fprintf(stderr, "usage: paging --out FILE.json [--mib N] [--chunk-mib N] "
                "[--rounds N] (chunks no larger than the whole)\n");
        return -1;
    }
    return 0;
}

/* ---- the floor --------------------------------------------------------------------------
 * A warm memcpy of chunk-sized buffers, both touched first: the median of
 * 9, in GiB/s. */
static double memcpy_gibps(size_t bytes)
{
    char *a = malloc(bytes), *b = malloc(bytes);
    double t[9];
    if (!a || !b) {
        free(a);
        free(b);
        return 0;
    }
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    for (int i = 0; i < 9; i++) {
        double t0 = now_s();
        memcpy(i % 2 ? a : b, i % 2 ? b : a, bytes);
        t[i] = (double)bytes / (1u << 30) / (now_s() - t0);
    }
    free(a);
    free(b);
    return micro_median(t, 9);
}

/* ---- the memory paged ------------------------------------------------------------------ */

static void *sym(const char *name)
{
    return dlsym(RTLD_DEFAULT, name);
}

static int setup(unsigned mib)
{
    char name[64], mem[32];
    drv_t d;
    CUcontext ctx;
    snprintf(name, sizeof name, "/salus-bench-paging-sim-%d", (int)getpid());
    setenv("SIMGPU_STATE", name, 1);
    snprintf(name, sizeof name, "/salus-bench-paging-tab-%d", (int)getpid());
    setenv("SALUS_TABLE", name, 1);
    snprintf(mem, sizeof mem, "%uM", mib + 1024);
    setenv("SIMGPU_MEMORY", mem, 1);
    setenv("SALUS_SWAP", "on", 1);
    unsetenv("SALUS_MEM_LIMIT");
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx) ||
        drv_resolve(sym, &d) || mem_init(&d, NULL) || !vmem_on()) {
        fprintf(stderr, "paging: simgpu with paging on did not start\n");
        return -1;
    }
    vmem_keep_tick();                 /* the scheduler's drain thread's first look */
    return 0;
}

static void cleanup(void)
{
    char name[64];
    snprintf(name, sizeof name, "/salus-bench-paging-sim-%d", (int)getpid());
    shm_unlink(name);
    snprintf(name, sizeof name, "/salus-bench-paging-tab-%d", (int)getpid());
    shm_unlink(name);
}

typedef struct block {
    CUdeviceptr p;
    size_t n;
} block_t;

static uint64_t word(CUdeviceptr p, size_t off)
{
    return (p + off) * 0x9e3779b97f4a7c15ull;
}

/* Every byte of b written, in chunk-sized host buffers. */
static int fill(const block_t *b, uint64_t *buf, size_t cap)
{
    for (size_t off = 0; off < b->n; off += cap) {
        size_t len = b->n - off < cap ? b->n - off : cap;
        for (size_t i = 0; i < len / 8; i++)
            buf[i] = word(b->p, off + i * 8);
        if (cuMemcpyHtoD(b->p + off, buf, len))
            return -1;
    }
    return 0;
}

/* The first and last 4 KiB of b as written. */
static int sample(const block_t *b)
{
    uint64_t w[512];
    size_t offs[2] = { 0, b->n - sizeof w };
    for (int k = 0; k < 2; k++) {
        if (cuMemcpyDtoH(w, b->p + offs[k], sizeof w))
            return -1;
        for (size_t i = 0; i < 512; i++)
            if (w[i] != word(b->p, offs[k] + i * 8))
                return -1;
    }
    return 0;
}

/* ---- the rounds -------------------------------------------------------------------------- */

typedef struct figures {
    double out[MAX_ROUNDS], in[MAX_ROUNDS];
    uint64_t bytes;
} figures_t;

static int rounds(const opts_t *o, const block_t *b, size_t nb, figures_t *f)
{
    for (unsigned r = 0; r < o->rounds; r++) {
        uint64_t freed = 0, restored = 0;
        double t0 = now_s();
        if (vmem_page_out(0, 0, &freed) != CUDA_SUCCESS || !freed)
            return fprintf(stderr, "paging: round %u: page-out failed\n", r), -1;
        double t1 = now_s();
        if (vmem_page_in(0, &restored) != CUDA_SUCCESS || restored != freed)
            return fprintf(stderr, "paging: round %u: page-in failed\n", r), -1;
        double t2 = now_s();
        f->bytes = freed;
        f->out[r] = (double)freed / (1u << 30) / (t1 - t0);
        f->in[r] = (double)restored / (1u << 30) / (t2 - t1);
        for (size_t i = 0; i < nb; i++)
            if (sample(&b[i]))
                return fprintf(stderr, "paging: round %u: bytes changed\n", r), -1;
    }
    return 0;
}

/* ---- the report ------------------------------------------------------------------------ */

static int report(const opts_t *o, figures_t *f, double mc)
{
    double pcie = (double)(getenv("SIMGPU_PCIE_GBPS") ? strtoul(getenv("SIMGPU_PCIE_GBPS"),
                                                                 NULL, 10) : 25);
    pcie = pcie * 1e9 / (1u << 30);
    double floor = mc < pcie ? mc : pcie;
    double first_out = f->out[0], first_in = f->in[0];
    double out = micro_median(f->out + 1, (int)o->rounds - 1),
           in = micro_median(f->in + 1, (int)o->rounds - 1);
    FILE *j = fopen(o->out, "w");
    if (!j)
        return perror(o->out), -1;
    fprintf(j, "{\"out_gibps\": %.3f, \"in_gibps\": %.3f, \"first_out_gibps\": %.3f, "
            "\"first_in_gibps\": %.3f, \"memcpy_gibps\": %.3f, \"pcie_gibps\": %.3f, "
            "\"floor_gibps\": %.3f, \"out_share\": %.3f, \"in_share\": %.3f, \"gib\": %.3f, "
            "\"chunk_mib\": %u, \"rounds\": %u}\n", out, in, first_out, first_in, mc, pcie,
            floor, out / floor, in / floor, (double)f->bytes / (1u << 30), o->chunk_mib,
            o->rounds);
    fclose(j);
    printf("paging %.2f GiB: out %.2f GiB/s, in %.2f (first round %.2f, %.2f); floor %.2f "
           "(memcpy %.2f, PCIe model %.2f): out %.0f%%, in %.0f%%\n",
           (double)f->bytes / (1u << 30), out, in, first_out, first_in, floor, mc, pcie,
           100 * out / floor, 100 * in / floor);
    return 0;
}

int main(int argc, char **argv)
{
    opts_t o;
    static figures_t f;
    if (parse(argc, argv, &o))
        return 2;
    size_t chunk = (size_t)o.chunk_mib * MiB, nbig = o.mib / o.chunk_mib;
    size_t nb = nbig + SMALL_N;
    block_t *b = calloc(nb, sizeof *b);
    uint64_t *buf = malloc(chunk);
    int rc = 1;
    if (!b || !buf || setup(o.mib))
        goto out_free;
    double mc = memcpy_gibps(chunk);
    for (size_t i = 0; i < nb; i++) {
        b[i].n = i < nbig ? chunk : SMALL_BYTES;
        if (vmem_alloc(MEM_KIND_DEVICE, &b[i].p, NULL, b[i].n, 1, 0) != CUDA_SUCCESS ||
            fill(&b[i], buf, chunk)) {
            fprintf(stderr, "paging: allocation %zu of %zu bytes failed\n", i, b[i].n);
            goto out_clean;
        }
    }
    if (rounds(&o, b, nb, &f) == 0 && report(&o, &f, mc) == 0)
        rc = 0;
out_clean:
    cleanup();
out_free:
    free(buf);
    free(b);
    return rc;
}
