/*
 * startup.c - what libsalus adds to a fresh process's start: loading the
 * library, its constructor, loading the driver behind it, registering, and
 * the first launch.
 *
 *   startup --nulldrv DIR --libsalus PATH --out FILE.json
 *           [--runs N] [--rounds K]
 *
 * A child of this program makes the device's primary context current on
 * the null driver (every export returns at once), launches one kernel,
 * synchronizes once and exits; it prints the microseconds from just before
 * its cuInit to the first launch's return (first_call_us: the driver load
 * and the lease, in process).  The parent times each child from fork to
 * reap (process_us: exec, the dynamic loader's work on libsalus, its
 * constructor and exit handlers included), N children in turn without and
 * with libsalus preloaded (paired: plain, preloaded, plain, ...), and takes
 * the median of each; K rounds of that, and the medians of the rounds'
 * figures.  Preloaded children join one table, created before the first
 * counted run, as a process joins a machine where others already run; no
 * SALUS_REPORT (its write is an exit cost of its own, opt-in).
 *
 * Figures: overhead_us_process (the whole process) and
 * overhead_us_first_call (cuInit to the first launch), each with the plain
 * figure beside it: the floor.
 */
#include <cuda.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "micro.h"

/* ---- the child ------------------------------------------------------------ */

static int child(void)
{
    unsigned long long t0 = micro_now_ns();
    if (micro_context() != 0 ||
        cuLaunchKernel((CUfunction)(uintptr_t)0x5a15, 1, 1, 1, 32, 1, 1, 0, NULL, NULL,
                       NULL) != CUDA_SUCCESS) {
        fprintf(stderr, "startup: no context or launch on the null driver\n");
        return 1;
    }
    unsigned long long t1 = micro_now_ns();
    if (cuCtxSynchronize() != CUDA_SUCCESS)
        return 1;
    printf("%.3f\n", (double)(t1 - t0) / 1e3);
    return 0;
}

/* ---- the parent ----------------------------------------------------------- */

typedef struct cfg {
    micro_t m;
    char table[64];
} cfg_t;

/* One child: its process time from fork to reap and its own first-call
 * time, in us; 0, or -1. */
static int run_child(cfg_t *c, int preload, double *process_us, double *first_us)
{
    char buf[64];
    char *argv[] = { c->m.self, "--child", NULL };
    micro_env_t env = { c->m.nulldrv, preload ? c->m.libsalus : NULL, c->table, NULL };
    unsigned long long t0 = micro_now_ns();
    if (micro_run(argv, &env, buf, sizeof buf) != 0)
        return -1;
    *process_us = (double)(micro_now_ns() - t0) / 1e3;
    *first_us = atof(buf);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--child") == 0)
        return child();

    cfg_t c = { 0 };
    int runs = 21, rounds = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--runs") == 0) runs = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--rounds") == 0) rounds = atoi(argv[i + 1]);
        else micro_option(&c.m, argv[i], argv[i + 1]);
    }
    if (!micro_options_given(&c.m) || runs < 1 || runs > 256 || rounds < 1 || rounds > 64) {
        fprintf(stderr, "usage: startup --nulldrv DIR --libsalus PATH --out FILE "
                        "[--runs N<=256] [--rounds K<=64]\n");
        return 2;
    }
    if (micro_setup(&c.m) != 0)
        return 1;
    snprintf(c.table, sizeof c.table, "salus-bench-startup-%d", (int)getpid());

    double proc[2][64], first[2][64], pv[2][256], fv[2][256];
    for (int k = 0; k < 2; k++)         /* warm-up: page cache, the table made */
        if (run_child(&c, k, &pv[k][0], &fv[k][0]) != 0)
            goto failed;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < runs; i++)
            for (int k = 0; k < 2; k++)
                if (run_child(&c, k, &pv[k][i], &fv[k][i]) != 0)
                    goto failed;
        for (int k = 0; k < 2; k++) {
            proc[k][r] = micro_median(pv[k], runs);
            first[k][r] = micro_median(fv[k], runs);
        }
    }
    micro_unlink_table(c.table);
    double p[2], q[2];
    for (int k = 0; k < 2; k++) {
        p[k] = micro_median(proc[k], rounds);
        q[k] = micro_median(first[k], rounds);
    }
    FILE *f = fopen(c.m.out, "w");
    if (!f)
        return 1;
    fprintf(f, "{\"runs\":%d,\"rounds\":%d,"
               "\"plain_us_process\":%.1f,\"salus_us_process\":%.1f,"
               "\"overhead_us_process\":%.1f,"
               "\"plain_us_first_call\":%.1f,\"salus_us_first_call\":%.1f,"
               "\"overhead_us_first_call\":%.1f}\n",
            runs, rounds, p[0], p[1], p[1] - p[0], q[0], q[1], q[1] - q[0]);
    fclose(f);
    printf("startup: a process %.0f us plain, %.0f us with libsalus: +%.0f us; "
           "cuInit to the first launch %.0f us plain, %.0f us: +%.0f us\n",
           p[0], p[1], p[1] - p[0], q[0], q[1], q[1] - q[0]);
    return 0;
failed:
    micro_unlink_table(c.table);
    fprintf(stderr, "startup: a child failed\n");
    return 1;
}
