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
 * Contended (a third configuration): the preloaded child holds the GPU
 * while a peer waits for it.  It runs under `priority` at 90 and forks a
 * peer at 10, which launches once and waits (the policy never hands the GPU
 * down, and the max slice is an hour), then times its launches as above,
 * with a context synchronize between loops as a program's iterations have
 * (a holder that never syncs is watched launch by launch).  The peer tells
 * the holder through a pipe that it is about to launch; its enqueue takes
 * microseconds, and the holder gives it 100 ms.  overhead_ns_per_launch_
 * contended is the holder's figure less the plain one.
 *
 * Two devices (a fourth): the preloaded child also retains device 1's
 * primary context, as a JAX process holds one on every GPU, and launches on
 * device 0 only: overhead_ns_per_launch_two_devices.
 *
 * Divided into: the child; running children; the parent.  What the
 * micro-benchmarks share (clock, medians, options, spawning) is micro.c.
 */
#include <cuda.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "micro.h"

/* ---- the child ------------------------------------------------------------ */

/* The waiting peer of a contended run: launch (and wait for the GPU, which
 * never comes) until the holder kills it. */
static void __attribute__((noreturn)) peer(int tell)
{
    setenv("SALUS_PRIORITY", "10", 1);
    if (micro_context() != 0)
        _exit(1);
    char c = 1;
    if (write(tell, &c, 1) != 1)
        _exit(1);
    for (;;)
        cuLaunchKernel((CUfunction)(uintptr_t)0x5a16, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
}

/* Fork the peer and wait until it is about to launch: its pid, or -1. */
static pid_t start_peer(void)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        peer(fds[1]);
    }
    close(fds[1]);
    char c;
    ssize_t n = pid > 0 ? read(fds[0], &c, 1) : -1;
    close(fds[0]);
    if (n != 1)
        return -1;
    struct timespec ts = { 0, 100 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    return pid;
}

enum { PLAIN = 0, CONTENDED = 1, TWO_DEVICES = 2 };

static int child(long launches, int repeats, int mode)
{
    CUfunction f = (CUfunction)(uintptr_t)0x5a15;
    int contended = mode == CONTENDED;
    if (micro_context() != 0) {
        fprintf(stderr, "launch_overhead: no context on the null driver\n");
        return 1;
    }
    CUdevice other;
    CUcontext ctx1;
    if (mode == TWO_DEVICES && (cuDeviceGet(&other, 1) != CUDA_SUCCESS ||
                                cuDevicePrimaryCtxRetain(&ctx1, other) != CUDA_SUCCESS)) {
        fprintf(stderr, "launch_overhead: no second device on the null driver\n");
        return 1;
    }
    for (int i = 0; i < 1000; i++)           /* registration, lease, warm caches */
        cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
    pid_t waiter = contended ? start_peer() : 0;
    if (waiter < 0) {
        fprintf(stderr, "launch_overhead: cannot start the waiting peer\n");
        return 1;
    }
    double ns[64];
    for (int r = 0; r < repeats; r++) {
        if (contended)
            cuCtxSynchronize();
        unsigned long long t0 = micro_now_ns();
        for (long i = 0; i < launches; i++)
            cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
        ns[r] = (double)(micro_now_ns() - t0) / (double)launches;
    }
    if (waiter > 0) {
        kill(waiter, SIGKILL);
        waitpid(waiter, NULL, 0);
    }
    printf("%.4f\n", micro_median(ns, repeats));
    return 0;
}

/* ---- running children ----------------------------------------------------- */

typedef struct cfg {
    micro_t m;
    char table[64];                     /* the preloaded children's */
    char table_contended[64];           /* the contended ones' (priority) */
    long launches;
    int repeats;
} cfg_t;

/* One child; its median ns per launch, or -1.  CONTENDED: preloaded, under
 * priority, beside a waiting peer; TWO_DEVICES: with a second context. */
static double run_child(cfg_t *c, int preload, int mode)
{
    char n[32], r[32], k[8], buf[64];
    int contended = mode == CONTENDED;
    snprintf(n, sizeof n, "%ld", c->launches);
    snprintf(r, sizeof r, "%d", c->repeats);
    snprintf(k, sizeof k, "%d", mode);
    char *argv[] = { c->m.self, "--child", n, r, k, NULL };
    micro_env_t env = { c->m.nulldrv, preload ? c->m.libsalus : NULL,
                        contended ? c->table_contended : c->table, c->m.report };
    if (contended) {
        setenv("SALUS_POLICY", "priority", 1);
        setenv("SALUS_PRIORITY", "90", 1);
        setenv("SALUS_MAX_SLICE_MS", "3600000", 1);
    }
    double v = micro_run(argv, &env, buf, sizeof buf) == 0 ? atof(buf) : -1;
    unsetenv("SALUS_POLICY");
    unsetenv("SALUS_PRIORITY");
    unsetenv("SALUS_MAX_SLICE_MS");
    return v;
}

/* The report's "policy" and "waited_ms" of the last preloaded child. */
static int check_report(const char *path)
{
    char line[8192];
    if (micro_last_line(path, line, sizeof line) != 0)
        return -1;
    if (!strstr(line, "\"policy\":\"fair\"") || micro_field(line, "waited_ms") != 0.0)
        return -1;
    return 0;
}

/* ---- the parent ----------------------------------------------------------- */

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--child") == 0)
        return child(atol(argv[2]), atoi(argv[3]), atoi(argv[4]));

    cfg_t c = { .launches = 2000000, .repeats = 9 };
    int rounds = 7;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--launches") == 0) c.launches = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--repeats") == 0) c.repeats = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--rounds") == 0) rounds = atoi(argv[i + 1]);
        else micro_option(&c.m, argv[i], argv[i + 1]);
    }
    if (!micro_options_given(&c.m) || rounds < 1 || rounds > 64 || c.repeats < 1 ||
        c.repeats > 64 || c.launches < 1) {
        fprintf(stderr, "usage: launch_overhead --nulldrv DIR --libsalus PATH --out FILE "
                        "[--launches N] [--repeats R<=64] [--rounds K<=64]\n");
        return 2;
    }
    if (micro_setup(&c.m) != 0)
        return 1;
    const char *report = c.m.report;
    unlink(report);
    snprintf(c.table, sizeof c.table, "salus-bench-%d", (int)getpid());
    snprintf(c.table_contended, sizeof c.table_contended, "salus-bench-c-%d", (int)getpid());

    double plain[64], salus[64], cont[64], two[64];
    for (int r = 0; r < rounds; r++) {
        plain[r] = run_child(&c, 0, PLAIN);
        salus[r] = run_child(&c, 1, PLAIN);
        if (plain[r] < 0 || salus[r] < 0) {
            fprintf(stderr, "launch_overhead: a child failed\n");
            return 1;
        }
        if (check_report(report) != 0) {
            fprintf(stderr, "launch_overhead: the preloaded child did not run scheduled "
                            "(see %s)\n", report);
            return 1;
        }
        if ((cont[r] = run_child(&c, 1, CONTENDED)) < 0 ||
            (two[r] = run_child(&c, 1, TWO_DEVICES)) < 0) {
            fprintf(stderr, "launch_overhead: the contended or two-device child failed\n");
            return 1;
        }
    }
    micro_unlink_table(c.table);
    micro_unlink_table(c.table_contended);
    double p = micro_median(plain, rounds), s = micro_median(salus, rounds);
    double k = micro_median(cont, rounds), w = micro_median(two, rounds);
    FILE *f = fopen(c.m.out, "w");
    if (!f)
        return 1;
    fprintf(f, "{\"launches_per_run\":%ld,\"repeats\":%d,\"rounds\":%d,"
               "\"plain_ns_per_launch\":%.3f,\"salus_ns_per_launch\":%.3f,"
               "\"overhead_ns_per_launch\":%.3f,\"ratio\":%.3f,"
               "\"salus_contended_ns_per_launch\":%.3f,"
               "\"overhead_ns_per_launch_contended\":%.3f,"
               "\"salus_two_devices_ns_per_launch\":%.3f,"
               "\"overhead_ns_per_launch_two_devices\":%.3f}\n",
            c.launches, c.repeats, rounds, p, s, s - p, p > 0 ? s / p : 0.0, k, k - p, w, w - p);
    fclose(f);
    printf("launch: %.2f ns plain, %.2f ns with libsalus: +%.2f ns per launch (x%.2f); "
           "+%.2f ns while a peer waits; +%.2f ns with a context on a second device\n",
           p, s, s - p, p > 0 ? s / p : 0.0, k - p, w - p);
    unlink(report);
    return 0;
}
