/*
 * launch_overhead.c - nanoseconds libsalus adds to a kernel launch on its
 * fast path: the process holds the lease and nobody waits.
 *
 *   launch_overhead --nulldrv DIR --libsalus PATH --out FILE.json
 *                   [--launches N] [--repeats R] [--rounds K]
 *
 * The parent runs itself as a child K times in each configuration,
 * alternating (plain, preloaded, plain, ...): both see the same machine
 * load.  A child creates a context on the null driver (every export returns
 * at once), launches once (with libsalus: registration and the lease, the
 * slow path), then times R loops of N launches and prints the median ns per
 * launch.  Figures: the median over the children of each configuration, the
 * difference (overhead_ns_per_launch) and the ratio.  The preloaded children
 * write a SALUS_REPORT, read back to check that scheduling was on (policy
 * "fair", no time waited): the fast path measured is the gated one.
 *
 * Divided into: the child; running children; the parent.
 */
#include <cuda.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

static int child(long launches, int repeats)
{
    CUdevice dev;
    CUcontext ctx = NULL;
    CUfunction f = (CUfunction)(uintptr_t)0x5a15;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
        fprintf(stderr, "launch_overhead: no context on the null driver\n");
        return 1;
    }
    for (int i = 0; i < 1000; i++)           /* registration, lease, warm caches */
        cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
    double ns[64];
    for (int r = 0; r < repeats; r++) {
        unsigned long long t0 = now_ns();
        for (long i = 0; i < launches; i++)
            cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
        ns[r] = (double)(now_ns() - t0) / (double)launches;
    }
    printf("%.4f\n", median(ns, repeats));
    return 0;
}

/* ---- running children ----------------------------------------------------- */

typedef struct cfg {
    const char *self, *nulldrv, *libsalus;
    long launches;
    int repeats;
} cfg_t;

/* One child; its median ns per launch, or -1. */
static double run_child(const cfg_t *c, int preload, const char *report)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        char n[32], r[32], table[64];
        snprintf(n, sizeof n, "%ld", c->launches);
        snprintf(r, sizeof r, "%d", c->repeats);
        snprintf(table, sizeof table, "salus-bench-%d", (int)getppid());
        dup2(fds[1], 1);
        close(fds[0]);
        setenv("LD_LIBRARY_PATH", c->nulldrv, 1);
        unsetenv("LD_PRELOAD");
        if (preload) {
            setenv("LD_PRELOAD", c->libsalus, 1);
            setenv("SALUS_TABLE", table, 1);
            setenv("SALUS_REPORT", report, 1);
        }
        execl(c->self, c->self, "--child", n, r, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char buf[64] = "";
    ssize_t got = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    if (got <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return -1;
    buf[got] = '\0';
    return atof(buf);
}

/* The report's "policy" and "waited_ms" of the last preloaded child. */
static int check_report(const char *path)
{
    char line[4096] = "";
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        ;
    fclose(f);
    const char *w = strstr(line, "\"waited_ms\":");
    if (!strstr(line, "\"policy\":\"fair\"") || !w || atof(w + 12) != 0.0)
        return -1;
    return 0;
}

/* ---- the parent ----------------------------------------------------------- */

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--child") == 0)
        return child(atol(argv[2]), atoi(argv[3]));

    cfg_t c = { .self = "/proc/self/exe", .launches = 2000000, .repeats = 9 };
    const char *out = NULL;
    int rounds = 7;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--nulldrv") == 0) c.nulldrv = argv[i + 1];
        else if (strcmp(argv[i], "--libsalus") == 0) c.libsalus = argv[i + 1];
        else if (strcmp(argv[i], "--out") == 0) out = argv[i + 1];
        else if (strcmp(argv[i], "--launches") == 0) c.launches = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--repeats") == 0) c.repeats = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--rounds") == 0) rounds = atoi(argv[i + 1]);
    }
    if (!c.nulldrv || !c.libsalus || !out || rounds < 1 || rounds > 64 || c.repeats < 1 ||
        c.repeats > 64 || c.launches < 1) {
        fprintf(stderr, "usage: launch_overhead --nulldrv DIR --libsalus PATH --out FILE "
                        "[--launches N] [--repeats R<=64] [--rounds K<=64]\n");
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

    double plain[64], salus[64];
    for (int r = 0; r < rounds; r++) {
        plain[r] = run_child(&c, 0, NULL);
        salus[r] = run_child(&c, 1, report);
        if (plain[r] < 0 || salus[r] < 0) {
            fprintf(stderr, "launch_overhead: a child failed\n");
            return 1;
        }
    }
    char table[128];
    snprintf(table, sizeof table, "/dev/shm/salus-bench-%d", (int)getpid());
    unlink(table);                                /* the children's table */
    if (check_report(report) != 0) {
        fprintf(stderr, "launch_overhead: the preloaded child did not run scheduled "
                        "(see %s)\n", report);
        return 1;
    }
    double p = median(plain, rounds), s = median(salus, rounds);
    FILE *f = fopen(out, "w");
    if (!f)
        return 1;
    fprintf(f, "{\"launches_per_run\":%ld,\"repeats\":%d,\"rounds\":%d,"
               "\"plain_ns_per_launch\":%.3f,\"salus_ns_per_launch\":%.3f,"
               "\"overhead_ns_per_launch\":%.3f,\"ratio\":%.3f}\n",
            c.launches, c.repeats, rounds, p, s, s - p, p > 0 ? s / p : 0.0);
    fclose(f);
    printf("launch: %.2f ns plain, %.2f ns with libsalus: +%.2f ns per launch (x%.2f)\n",
           p, s, s - p, p > 0 ? s / p : 0.0);
    unlink(report);
    return 0;
}
