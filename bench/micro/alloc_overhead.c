/*
 * alloc_overhead.c - nanoseconds libsalus adds to a cuMemAlloc_v2 +
 * cuMemFree_v2 pair of 4 KiB, 1 MiB and 64 MiB (with paging on: a block
 * kept in front of its jemalloc, and a chunk of its own, kept), with 1
 * MiB also beside 1,000 live allocations (the frees are
 * matched by address in a per-process map: the figure must not grow with
 * it), and to a stream-ordered pair (cuMemAllocAsync + cuMemFreeAsync on the
 * legacy stream, from the device's pool, which keeps what is freed into
 * it; with SALUS_SWAP=on, served by paging's allocator, which releases
 * each free once an event recorded on the stream has completed), over a
 * null driver whose calls return at once.
 *
 *   alloc_overhead --nulldrv DIR --libsalus PATH --out FILE.json
 *                  [--pairs N] [--repeats R] [--rounds K]
 *
 * The parent runs itself as a child K times in each configuration,
 * alternating (plain, preloaded, plain, ...), so that both see the same
 * machine load.  A child makes a context, warms up (with libsalus: the slot,
 * the device's registration, the first grant), then for each row (a size
 * and a number of live allocations L) keeps L-1 allocations of 1 MiB and
 * times R loops of N pairs (allocate, free), printing the median ns per
 * pair.  Figures: the
 * median over the children of each configuration and their difference.  The
 * preloaded children write a SALUS_REPORT, read back to check that memory
 * accounting was on (mem_peak covers the live allocations).
 *
 * Divided into: the child; running children; the parent.  What the
 * micro-benchmarks share (clock, medians, options, spawning) is micro.c.
 */
#include <cuda.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "micro.h"

#define MIB (1ull << 20)
#define MAX_LIVE 1000

/* The rows a child times, in this order (the live allocations only grow). */
typedef struct row {
    unsigned long long bytes;
    int live;
    int async;
} row_t;

static const row_t rows[] = {
    { 4096, 1, 0 }, { MIB, 1, 0 }, { 64 * MIB, 1, 0 }, { MIB, MAX_LIVE, 0 }, { MIB, MAX_LIVE, 1 },
};
#define NROWS (int)(sizeof rows / sizeof *rows)

/* ---- the child ------------------------------------------------------------ */

static double time_pairs(long pairs, int repeats, unsigned long long bytes, int async)
{
    double ns[64];
    CUdeviceptr p;
    for (int r = 0; r < repeats; r++) {
        unsigned long long t0 = micro_now_ns();
        for (long i = 0; i < pairs && !async; i++) {
            if (cuMemAlloc(&p, bytes) != CUDA_SUCCESS || cuMemFree(p) != CUDA_SUCCESS)
                return -1;
        }
        for (long i = 0; i < pairs && async; i++) {
            if (cuMemAllocAsync(&p, bytes, NULL) != CUDA_SUCCESS ||
                cuMemFreeAsync(p, NULL) != CUDA_SUCCESS)
                return -1;
        }
        ns[r] = (double)(micro_now_ns() - t0) / (double)pairs;
    }
    return micro_median(ns, repeats);
}

static int child(long pairs, int repeats)
{
    static CUdeviceptr live[MAX_LIVE];
    if (micro_context() != 0) {
        fprintf(stderr, "alloc_overhead: no context on the null driver\n");
        return 1;
    }
    /* As a program: a launch registers it with the scheduler, whose drain
     * thread lets paging keep freed chunks for the next of their size. */
    if (cuLaunchKernel((CUfunction)(uintptr_t)0x5a17, 1, 1, 1, 32, 1, 1, 0, NULL, NULL,
                       NULL) != CUDA_SUCCESS || cuCtxSynchronize() != CUDA_SUCCESS)
        return 1;
    for (int k = 0; k < NROWS; k++)           /* slot, registration, grant, caches, */
        if (time_pairs(10000, 1, rows[k].bytes, rows[k].async) < 0)   /* the pool's record */
            return 1;
    int held = 0;
    for (int k = 0; k < NROWS; k++) {
        for (; held < rows[k].live - 1; held++)
            if (cuMemAlloc(&live[held], MIB) != CUDA_SUCCESS)
                return 1;
        double ns = time_pairs(pairs, repeats, rows[k].bytes, rows[k].async);
        if (ns < 0)
            return 1;
        printf("%.4f\n", ns);
    }
    while (held > 0)
        cuMemFree(live[--held]);
    return 0;
}

/* ---- running children ----------------------------------------------------- */

typedef struct cfg {
    micro_t m;
    char table[64];                     /* the preloaded children's */
    long pairs;
    int repeats;
} cfg_t;

/* One child: its median ns per pair for each row. */
static int run_child(cfg_t *c, int preload, double out[NROWS])
{
    char n[32], r[32], buf[256];
    snprintf(n, sizeof n, "%ld", c->pairs);
    snprintf(r, sizeof r, "%d", c->repeats);
    char *argv[] = { c->m.self, "--child", n, r, NULL };
    micro_env_t env = { c->m.nulldrv, preload ? c->m.libsalus : NULL, c->table, c->m.report };
    if (micro_run(argv, &env, buf, sizeof buf) != 0)
        return -1;
    char *p = buf;
    for (int k = 0; k < NROWS; k++) {
        char *end;
        out[k] = strtod(p, &end);
        if (end == p)
            return -1;
        p = end;
    }
    return 0;
}

/* The last preloaded child's report must show accounting on: its peak
 * covers the 999 allocations it kept. */
static int check_report(const char *path)
{
    char line[8192];
    if (micro_last_line(path, line, sizeof line) != 0)
        return -1;
    return micro_field(line, "mem_peak_bytes") >= (double)(MAX_LIVE - 1) * MIB ? 0 : -1;
}

/* The rows by the names the report reads: live_1 and live_1000 (1 MiB),
 * async, and each size at 1 live under "sizes"; alloc_ns_per_pair is the
 * larger of the two 1 MiB rows, alloc_ns_per_pair_any_size the largest of
 * the synchronous rows. */
static void json_row(FILE *f, const char *name, const double *p, const double *s, int k)
{
    fprintf(f, "\"%s\":{\"bytes\":%llu,\"live\":%d,\"plain_ns_per_pair\":%.3f,"
               "\"salus_ns_per_pair\":%.3f,\"overhead_ns_per_pair\":%.3f}",
            name, rows[k].bytes, rows[k].live, p[k], s[k], s[k] - p[k]);
}

static int write_json(const char *out, const cfg_t *c, int rounds, const double *p,
                      const double *s, const double *d)
{
    double mib = 0, any = 0;
    int first = 1;
    FILE *f = fopen(out, "w");
    if (!f)
        return -1;
    for (int k = 0; k < NROWS; k++) {
        if (rows[k].async)
            continue;
        any = d[k] > any ? d[k] : any;
        if (rows[k].bytes == MIB)
            mib = d[k] > mib ? d[k] : mib;
    }
    fprintf(f, "{\"pairs_per_run\":%ld,\"repeats\":%d,\"rounds\":%d,\"bytes\":%llu,"
               "\"alloc_ns_per_pair\":%.3f,\"alloc_ns_per_pair_any_size\":%.3f,\"sizes\":{",
            c->pairs, c->repeats, rounds, MIB, mib, any);
    for (int k = 0; k < NROWS; k++) {
        char name[32];
        if (rows[k].async || rows[k].live != 1)
            continue;
        snprintf(name, sizeof name, "%llu", rows[k].bytes);
        fputs(first ? "" : ",", f);
        json_row(f, name, p, s, k);
        first = 0;
    }
    fputs("}", f);
    for (int k = 0; k < NROWS; k++) {
        char name[32];
        if (rows[k].bytes != MIB)
            continue;
        snprintf(name, sizeof name, rows[k].async ? "async" : "live_%d", rows[k].live);
        fputs(",", f);
        json_row(f, name, p, s, k);
        if (rows[k].async)
            fprintf(f, ",\"async_ns_per_pair\":%.3f", d[k]);
    }
    fputs("}\n", f);
    return fclose(f) == 0 ? 0 : -1;
}

/* ---- the parent ----------------------------------------------------------- */

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--child") == 0)
        return child(atol(argv[2]), atoi(argv[3]));

    cfg_t c = { .pairs = 200000, .repeats = 9 };
    int rounds = 7;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--pairs") == 0) c.pairs = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--repeats") == 0) c.repeats = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--rounds") == 0) rounds = atoi(argv[i + 1]);
        else micro_option(&c.m, argv[i], argv[i + 1]);
    }
    if (!micro_options_given(&c.m) || rounds < 1 || rounds > 64 || c.repeats < 1 ||
        c.repeats > 64 || c.pairs < 1) {
        fprintf(stderr, "usage: alloc_overhead --nulldrv DIR --libsalus PATH --out FILE "
                        "[--pairs N] [--repeats R<=64] [--rounds K<=64]\n");
        return 2;
    }
    if (micro_setup(&c.m) != 0)
        return 1;
    const char *report = c.m.report, *out = c.m.out;
    unlink(report);
    snprintf(c.table, sizeof c.table, "salus-bench-alloc-%d", (int)getpid());
    unsetenv("SALUS_MEM_LIMIT");              /* the children's: no limit, no reserve */
    unsetenv("SALUS_MEM_RESERVE");

    double plain[NROWS][64], salus[NROWS][64], one[NROWS];
    for (int r = 0; r < rounds; r++) {
        if (run_child(&c, 0, one) != 0)
            goto out_failed;
        for (int k = 0; k < NROWS; k++)
            plain[k][r] = one[k];
        if (run_child(&c, 1, one) != 0)
            goto out_failed;
        for (int k = 0; k < NROWS; k++)
            salus[k][r] = one[k];
    }
    micro_unlink_table(c.table);
    if (check_report(report) != 0) {
        fprintf(stderr, "alloc_overhead: the preloaded child did not account its memory "
                        "(see %s)\n", report);
        return 1;
    }
    double p[NROWS], s[NROWS], d[NROWS];
    for (int k = 0; k < NROWS; k++) {
        p[k] = micro_median(plain[k], rounds);
        s[k] = micro_median(salus[k], rounds);
        d[k] = s[k] - p[k];
    }
    if (write_json(out, &c, rounds, p, s, d) != 0)
        return 1;
    for (int k = 0; k < NROWS; k++)
        printf("%s %llu KiB, %d live: %.2f ns plain, %.2f ns with libsalus: +%.2f ns per "
               "pair\n", rows[k].async ? "async alloc/free from a pool," : "alloc/free,",
               rows[k].bytes >> 10, rows[k].live, p[k], s[k], d[k]);
    unlink(report);
    return 0;

out_failed:
    micro_unlink_table(c.table);
    fprintf(stderr, "alloc_overhead: a child failed\n");
    return 1;
}
