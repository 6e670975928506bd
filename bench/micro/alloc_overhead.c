/*
 * alloc_overhead.c - nanoseconds libsalus adds to a cuMemAlloc_v2 +
 * cuMemFree_v2 pair, with 1 and with 1,000 live allocations (the frees are
 * matched by address in a per-process map: the figure must not grow with
 * it), over a null driver whose calls return at once.
 *
 *   alloc_overhead --nulldrv DIR --libsalus PATH --out FILE.json
 *                  [--pairs N] [--repeats R] [--rounds K]
 *
 * The parent runs itself as a child K times in each configuration,
 * alternating (plain, preloaded, plain, ...), so that both see the same
 * machine load.  A child makes a context, warms up (with libsalus: the slot,
 * the device's registration, the first grant), then for each number of live
 * allocations L keeps L-1 allocations of 1 MiB and times R loops of N pairs
 * (allocate 1 MiB, free it), printing the median ns per pair.  Figures: the
 * median over the children of each configuration and their difference.  The
 * preloaded children write a SALUS_REPORT, read back to check that memory
 * accounting was on (mem_peak covers the live allocations).
 *
 * Divided into: the child; running children; the parent.
 */
#include <cuda.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB (1ull << 20)
#define MAX_LIVE 1000

static const int lives[] = { 1, MAX_LIVE };
#define NLIVES (int)(sizeof lives / sizeof *lives)

static unsigned long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- the child ------------------------------------------------------------ */

static double time_pairs(long pairs, int repeats)
{
    double ns[64];
    CUdeviceptr p;
    for (int r = 0; r < repeats; r++) {
        unsigned long long t0 = now_ns();
        for (long i = 0; i < pairs; i++) {
            if (cuMemAlloc(&p, MIB) != CUDA_SUCCESS || cuMemFree(p) != CUDA_SUCCESS)
                return -1;
        }
        ns[r] = (double)(now_ns() - t0) / (double)pairs;
    }
    return median(ns, repeats);
}

static int child(long pairs, int repeats)
{
    CUdevice dev;
    CUcontext ctx = NULL;
    static CUdeviceptr live[MAX_LIVE];
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
        fprintf(stderr, "alloc_overhead: no context on the null driver\n");
        return 1;
    }
    if (time_pairs(10000, 1) < 0)            /* slot, registration, grant, caches */
        return 1;
    int held = 0;
    for (int k = 0; k < NLIVES; k++) {
        for (; held < lives[k] - 1; held++)
            if (cuMemAlloc(&live[held], MIB) != CUDA_SUCCESS)
                return 1;
        double ns = time_pairs(pairs, repeats);
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
    const char *self, *nulldrv, *libsalus;
    long pairs;
    int repeats;
} cfg_t;

/* One child: its median ns per pair for each number of live allocations. */
static int run_child(const cfg_t *c, int preload, const char *report, double out[NLIVES])
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        char n[32], r[32], table[64];
        snprintf(n, sizeof n, "%ld", c->pairs);
        snprintf(r, sizeof r, "%d", c->repeats);
        snprintf(table, sizeof table, "salus-bench-alloc-%d", (int)getppid());
        dup2(fds[1], 1);
        close(fds[0]);
        setenv("LD_LIBRARY_PATH", c->nulldrv, 1);
        unsetenv("LD_PRELOAD");
        unsetenv("SALUS_MEM_LIMIT");
        unsetenv("SALUS_MEM_RESERVE");
        if (preload) {
            setenv("LD_PRELOAD", c->libsalus, 1);
            setenv("SALUS_TABLE", table, 1);
            setenv("SALUS_REPORT", report, 1);
        }
        execl(c->self, c->self, "--child", n, r, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char buf[256] = "";
    size_t got = 0;
    ssize_t m;
    while (got < sizeof buf - 1 && (m = read(fds[0], buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)m;
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return -1;
    buf[got] = '\0';
    char *p = buf;
    for (int k = 0; k < NLIVES; k++) {
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
    char line[8192] = "";
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        ;
    fclose(f);
    const char *peak = strstr(line, "\"mem_peak\":");
    return peak && atof(peak + 11) >= (double)(MAX_LIVE - 1) * MIB ? 0 : -1;
}

/* ---- the parent ----------------------------------------------------------- */

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--child") == 0)
        return child(atol(argv[2]), atoi(argv[3]));

    cfg_t c = { .pairs = 200000, .repeats = 9 };
    const char *out = NULL;
    int rounds = 7;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--nulldrv") == 0) c.nulldrv = argv[i + 1];
        else if (strcmp(argv[i], "--libsalus") == 0) c.libsalus = argv[i + 1];
        else if (strcmp(argv[i], "--out") == 0) out = argv[i + 1];
        else if (strcmp(argv[i], "--pairs") == 0) c.pairs = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--repeats") == 0) c.repeats = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--rounds") == 0) rounds = atoi(argv[i + 1]);
    }
    if (!c.nulldrv || !c.libsalus || !out || rounds < 1 || rounds > 64 || c.repeats < 1 ||
        c.repeats > 64 || c.pairs < 1) {
        fprintf(stderr, "usage: alloc_overhead --nulldrv DIR --libsalus PATH --out FILE "
                        "[--pairs N] [--repeats R<=64] [--rounds K<=64]\n");
        return 2;
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 1;
    self[n] = '\0';
    c.self = self;
    char report[4200];
    snprintf(report, sizeof report, "%s.report", out);
    unlink(report);

    double plain[NLIVES][64], salus[NLIVES][64], one[NLIVES];
    char table[64];
    snprintf(table, sizeof table, "/salus-bench-alloc-%d", (int)getpid());
    for (int r = 0; r < rounds; r++) {
        if (run_child(&c, 0, NULL, one) != 0)
            goto out_failed;
        for (int k = 0; k < NLIVES; k++)
            plain[k][r] = one[k];
        if (run_child(&c, 1, report, one) != 0)
            goto out_failed;
        for (int k = 0; k < NLIVES; k++)
            salus[k][r] = one[k];
    }
    shm_unlink(table);                        /* the children's table */
    if (check_report(report) != 0) {
        fprintf(stderr, "alloc_overhead: the preloaded child did not account its memory "
                        "(see %s)\n", report);
        return 1;
    }
    double p[NLIVES], s[NLIVES], worst = 0;
    for (int k = 0; k < NLIVES; k++) {
        p[k] = median(plain[k], rounds);
        s[k] = median(salus[k], rounds);
        worst = s[k] - p[k] > worst ? s[k] - p[k] : worst;
    }
    FILE *f = fopen(out, "w");
    if (!f)
        return 1;
    fprintf(f, "{\"pairs_per_run\":%ld,\"repeats\":%d,\"rounds\":%d,\"bytes\":%llu,"
               "\"alloc_ns_per_pair\":%.3f", c.pairs, c.repeats, rounds, MIB, worst);
    for (int k = 0; k < NLIVES; k++)
        fprintf(f, ",\"live_%d\":{\"plain_ns_per_pair\":%.3f,\"salus_ns_per_pair\":%.3f,"
                   "\"overhead_ns_per_pair\":%.3f}", lives[k], p[k], s[k], s[k] - p[k]);
    fprintf(f, "}\n");
    fclose(f);
    for (int k = 0; k < NLIVES; k++)
        printf("alloc/free, %d live: %.2f ns plain, %.2f ns with libsalus: +%.2f ns per pair\n",
               lives[k], p[k], s[k], s[k] - p[k]);
    unlink(report);
    return 0;

out_failed:
    shm_unlink(table);
    fprintf(stderr, "alloc_overhead: a child failed\n");
    return 1;
}
