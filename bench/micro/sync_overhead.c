/*
 * sync_overhead.c - nanoseconds libsalus adds to a host sync, and whether
 * that grows with the threads a process has.
 *
 *   sync_overhead --nulldrv DIR --libsalus PATH --out FILE.json
 *                 [--threads N] [--syncs S] [--repeats R] [--rounds K]
 *
 * A child makes a context on the null driver, starts N threads that each
 * launch a kernel once and then wait (alive, idle, as a framework's worker
 * threads do), then times R loops of S rounds of (one launch, one
 * cuCtxSynchronize) on its main thread and prints the median ns per round.
 * The parent runs it K times in each of four configurations, alternating:
 * plain and preloaded, with no idle thread and with N.  A sync's cost must
 * not grow with threads that launched long ago: the figure is
 * overhead_ns_per_sync (no idle thread) beside
 * overhead_ns_per_sync_idle_threads (N of them).
 */
#include <cuda.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "micro.h"

/* ---- the child ------------------------------------------------------------ */

static pthread_barrier_t started;
static pthread_mutex_t hold = PTHREAD_MUTEX_INITIALIZER;

static void *idle_thread(void *arg)
{
    (void)arg;
    cuLaunchKernel((CUfunction)(uintptr_t)0x77, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
    pthread_barrier_wait(&started);
    pthread_mutex_lock(&hold);          /* idle until the child exits */
    pthread_mutex_unlock(&hold);
    return NULL;
}

static int child(int threads, long syncs, int repeats)
{
    CUfunction f = (CUfunction)(uintptr_t)0x5a15;
    if (micro_context() != 0) {
        fprintf(stderr, "sync_overhead: no context on the null driver\n");
        return 1;
    }
    cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);   /* registration */
    pthread_mutex_lock(&hold);
    pthread_barrier_init(&started, NULL, (unsigned)threads + 1);
    for (int i = 0; i < threads; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, idle_thread, NULL) != 0)
            return 1;
        pthread_detach(t);
    }
    pthread_barrier_wait(&started);
    for (int i = 0; i < 100; i++) {      /* the first syncs fold the threads' launches */
        cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
        cuCtxSynchronize();
    }
    double ns[64];
    for (int r = 0; r < repeats; r++) {
        unsigned long long t0 = micro_now_ns();
        for (long i = 0; i < syncs; i++) {
            cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
            cuCtxSynchronize();
        }
        ns[r] = (double)(micro_now_ns() - t0) / (double)syncs;
    }
    printf("%.4f\n", micro_median(ns, repeats));
    fflush(stdout);
    _exit(0);                           /* the idle threads need not be joined */
}

/* ---- the parent ----------------------------------------------------------- */

typedef struct cfg {
    micro_t m;
    char table[64];
    long syncs;
    int repeats;
} cfg_t;

static double run_child(cfg_t *c, int preload, int threads)
{
    char t[32], n[32], r[32], buf[64];
    snprintf(t, sizeof t, "%d", threads);
    snprintf(n, sizeof n, "%ld", c->syncs);
    snprintf(r, sizeof r, "%d", c->repeats);
    char *argv[] = { c->m.self, "--child", t, n, r, NULL };
    micro_env_t env = { c->m.nulldrv, preload ? c->m.libsalus : NULL, c->table, c->m.report };
    return micro_run(argv, &env, buf, sizeof buf) == 0 ? atof(buf) : -1;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--child") == 0)
        return child(atoi(argv[2]), atol(argv[3]), atoi(argv[4]));

    cfg_t c = { .syncs = 20000, .repeats = 7 };
    int rounds = 5, threads = 256;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--syncs") == 0) c.syncs = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--repeats") == 0) c.repeats = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--rounds") == 0) rounds = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--threads") == 0) threads = atoi(argv[i + 1]);
        else micro_option(&c.m, argv[i], argv[i + 1]);
    }
    if (!micro_options_given(&c.m) || rounds < 1 || rounds > 64 || c.repeats < 1 ||
        c.repeats > 64 || c.syncs < 1 || threads < 1 || threads > 4096) {
        fprintf(stderr, "usage: sync_overhead --nulldrv DIR --libsalus PATH --out FILE "
                        "[--threads N<=4096] [--syncs S] [--repeats R<=64] [--rounds K<=64]\n");
        return 2;
    }
    if (micro_setup(&c.m) != 0)
        return 1;
    snprintf(c.table, sizeof c.table, "salus-bench-sync-%d", (int)getpid());

    double v[4][64];                    /* plain, salus; x no thread, N threads */
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < 4; k++)
            if ((v[k][r] = run_child(&c, k & 1, k & 2 ? threads : 0)) < 0) {
                fprintf(stderr, "sync_overhead: a child failed\n");
                return 1;
            }
    micro_unlink_table(c.table);
    unlink(c.m.report);
    double m[4];
    for (int k = 0; k < 4; k++)
        m[k] = micro_median(v[k], rounds);
    FILE *f = fopen(c.m.out, "w");
    if (!f)
        return 1;
    fprintf(f, "{\"syncs_per_run\":%ld,\"repeats\":%d,\"rounds\":%d,\"idle_threads\":%d,"
               "\"plain_ns_per_sync\":%.3f,\"salus_ns_per_sync\":%.3f,"
               "\"overhead_ns_per_sync\":%.3f,\"plain_ns_per_sync_idle_threads\":%.3f,"
               "\"salus_ns_per_sync_idle_threads\":%.3f,"
               "\"overhead_ns_per_sync_idle_threads\":%.3f}\n",
            c.syncs, c.repeats, rounds, threads, m[0], m[1], m[1] - m[0], m[2], m[3],
            m[3] - m[2]);
    fclose(f);
    printf("sync: +%.1f ns per launch-and-sync with libsalus, +%.1f ns with %d idle threads\n",
           m[1] - m[0], m[3] - m[2], threads);
    return 0;
}
