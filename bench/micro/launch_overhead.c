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
 * Divided into: the child; running children; the parent.  What the
 * micro-benchmarks share (clock, medians, options, spawning) is micro.c.
 */
#include <cuda.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "micro.h"

/* ---- the child ------------------------------------------------------------ */

static int child(long launches, int repeats)
{
    CUfunction f = (CUfunction)(uintptr_t)0x5a15;
    if (micro_context() != 0) {
        fprintf(stderr, "launch_overhead: no context on the null driver\n");
        return 1;
    }
    for (int i = 0; i < 1000; i++)           /* registration, lease, warm caches */
        cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
    double ns[64];
    for (int r = 0; r < repeats; r++) {
        unsigned long long t0 = micro_now_ns();
        for (long i = 0; i < launches; i++)
            cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
        ns[r] = (double)(micro_now_ns() - t0) / (double)launches;
    }
    printf("%.4f\n", micro_median(ns, repeats));
    return 0;
}

/* ---- running children ----------------------------------------------------- */

typedef struct cfg {
    micro_t m;
    char table[64];                     /* the preloaded children's */
    long launches;
    int repeats;
} cfg_t;

/* One child; its median ns per launch, or -1. */
static double run_child(cfg_t *c, int preload)
{
    char n[32], r[32], buf[64];
    snprintf(n, sizeof n, "%ld", c->launches);
    snprintf(r, sizeof r, "%d", c->repeats);
    char *argv[] = { c->m.self, "--child", n, r, NULL };
    micro_env_t env = { c->m.nulldrv, preload ? c->m.libsalus : NULL, c->table, c->m.report };
    return micro_run(argv, &env, buf, sizeof buf) == 0 ? atof(buf) : -1;
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
    if (argc == 4 && strcmp(argv[1], "--child") == 0)
        return child(atol(argv[2]), atoi(argv[3]));

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

    double plain[64], salus[64];
    for (int r = 0; r < rounds; r++) {
        plain[r] = run_child(&c, 0);
        salus[r] = run_child(&c, 1);
        if (plain[r] < 0 || salus[r] < 0) {
            fprintf(stderr, "launch_overhead: a child failed\n");
            return 1;
        }
    }
    micro_unlink_table(c.table);
    if (check_report(report) != 0) {
        fprintf(stderr, "launch_overhead: the preloaded child did not run scheduled "
                        "(see %s)\n", report);
        return 1;
    }
    double p = micro_median(plain, rounds), s = micro_median(salus, rounds);
    FILE *f = fopen(c.m.out, "w");
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
