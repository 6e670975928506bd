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
 *
 * With --waiters W1,W2,... the preloaded child also runs under priority at
 * SALUS_PRIORITY=90 with W processes of priority 10 waiting for its GPU
 * (each made its context and is blocked in its first launch): every
 * boundary then asks the policy, which keeps the GPU with the holder.
 * What a boundary costs must not grow with the waiters:
 * overhead_ns_per_sync_waiters, by W (0 included, under priority alone).
 * The waiters come once the holder has the GPU, and the timing starts
 * 200 ms after the last said it was about to launch (a waiter blocked in
 * its launch cannot say so).
 */
#include <cuda.h>

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
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

/* A waiter: its context, a word to the parent, then a launch that waits
 * for the holder's GPU (it exits once it gets it: the holder has ended). */
static int waiter(int ready_fd)
{
    if (micro_context() != 0)
        return 1;
    if (write(ready_fd, "w", 1) != 1)
        return 1;
    cuLaunchKernel((CUfunction)(uintptr_t)0x77, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
    return 0;
}

static int child(int threads, long syncs, int repeats, int ready_fd, int go_fd)
{
    CUfunction f = (CUfunction)(uintptr_t)0x5a15;
    if (micro_context() != 0) {
        fprintf(stderr, "sync_overhead: no context on the null driver\n");
        return 1;
    }
    cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);   /* registration */
    cuCtxSynchronize();
    char c;
    if (ready_fd >= 0 && (write(ready_fd, "r", 1) != 1 || read(go_fd, &c, 1) != 1))
        return 1;                       /* the lease is ours; the waiters came */
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
    char *argv[] = { c->m.self, "--child", t, n, r, "-1", "-1", NULL };
    micro_env_t env = { c->m.nulldrv, preload ? c->m.libsalus : NULL, c->table, c->m.report };
    return micro_run(argv, &env, buf, sizeof buf) == 0 ? atof(buf) : -1;
}

#define WAITERS_MAX 64

static int read_n(int fd, int n)
{
    char b[WAITERS_MAX + 1];
    for (int got = 0; got < n;) {
        ssize_t k = read(fd, b, (size_t)(n - got) < sizeof b ? (size_t)(n - got) : sizeof b);
        if (k <= 0)
            return -1;
        got += (int)k;
    }
    return 0;
}

/* The preloaded child under priority 90 beside w waiters of priority 10. */
static double run_with_waiters(cfg_t *c, int w)
{
    int ready[2], go[2], out[2];
    if (pipe(ready) != 0 || pipe(go) != 0 || pipe(out) != 0)
        return -1;
    char n[32], r[32], rfd[16], gfd[16], buf[64];
    snprintf(n, sizeof n, "%ld", c->syncs);
    snprintf(r, sizeof r, "%d", c->repeats);
    snprintf(rfd, sizeof rfd, "%d", ready[1]);
    snprintf(gfd, sizeof gfd, "%d", go[0]);
    micro_env_t env = { c->m.nulldrv, c->m.libsalus, c->table, NULL };
    micro_unlink_table(c->table);            /* the first process fixes the policy */
    setenv("SALUS_POLICY", "priority", 1);
    setenv("SALUS_PRIORITY", "90", 1);
    char *argv[] = { c->m.self, "--child", "0", n, r, rfd, gfd, NULL };
    pid_t holder = micro_spawn(argv, &env, out[1]);
    close(out[1]);
    pid_t pid[WAITERS_MAX];
    int k = 0, ok = holder > 0 && read_n(ready[0], 1) == 0;
    setenv("SALUS_PRIORITY", "10", 1);
    char *wargv[] = { c->m.self, "--waiter", rfd, NULL };
    for (; ok && k < w; k++)
        ok = (pid[k] = micro_spawn(wargv, &env, -1)) > 0;
    ok = ok && read_n(ready[0], k) == 0;
    struct timespec settle = { 0, 200 * 1000000L };
    nanosleep(&settle, NULL);
    ok = write(go[1], "g", 1) == 1 && ok;
    size_t got = 0;
    ssize_t m;
    while (got < sizeof buf - 1 && (m = read(out[0], buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)m;
    buf[got] = 0;
    int status = 0;
    if (holder > 0)
        waitpid(holder, &status, 0);
    for (int i = 0; i < k; i++) {            /* granted once the holder ended, or killed */
        kill(pid[i], SIGKILL);
        waitpid(pid[i], NULL, 0);
    }
    close(ready[0]); close(ready[1]); close(go[0]); close(go[1]); close(out[0]);
    unsetenv("SALUS_POLICY");
    unsetenv("SALUS_PRIORITY");
    micro_unlink_table(c->table);
    return ok && got && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? atof(buf) : -1;
}

int main(int argc, char **argv)
{
    if (argc == 7 && strcmp(argv[1], "--child") == 0)
        return child(atoi(argv[2]), atol(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]));
    if (argc == 3 && strcmp(argv[1], "--waiter") == 0)
        return waiter(atoi(argv[2]));

    cfg_t c = { .syncs = 20000, .repeats = 7 };
    int rounds = 5, threads = 256, nw = 0, waiters[8];
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--waiters") == 0) {
            char *e = argv[i + 1];
            while (nw < 8 && *e) {
                waiters[nw] = (int)strtol(e, &e, 10);
                if (waiters[nw] < 0 || waiters[nw] > WAITERS_MAX || (*e && *e++ != ','))
                    nw = 99;
                else
                    nw++;
            }
        } else if (strcmp(argv[i], "--syncs") == 0) c.syncs = atol(argv[i + 1]);
        else if (strcmp(argv[i], "--repeats") == 0) c.repeats = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--rounds") == 0) rounds = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--threads") == 0) threads = atoi(argv[i + 1]);
        else micro_option(&c.m, argv[i], argv[i + 1]);
    }
    if (!micro_options_given(&c.m) || rounds < 1 || rounds > 64 || c.repeats < 1 ||
        c.repeats > 64 || c.syncs < 1 || threads < 1 || threads > 4096 || nw > 8) {
        fprintf(stderr, "usage: sync_overhead --nulldrv DIR --libsalus PATH --out FILE "
                        "[--threads N<=4096] [--syncs S] [--repeats R<=64] [--rounds K<=64] "
                        "[--waiters W,W,... (up to 8 counts, each <= %d)]\n", WAITERS_MAX);
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
    double wv[8][64];                   /* under priority, by waiters */
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < nw; k++)
            if ((wv[k][r] = run_with_waiters(&c, waiters[k])) < 0) {
                fprintf(stderr, "sync_overhead: the run beside %d waiters failed\n", waiters[k]);
                return 1;
            }
    micro_unlink_table(c.table);
    unlink(c.m.report);
    double m[4];
    for (int k = 0; k < 4; k++)
        m[k] = micro_median(v[k], rounds);
    char wj[512] = "";
    size_t at = 0;
    for (int k = 0; k < nw; k++) {
        double o = micro_median(wv[k], rounds) - m[0];
        at += (size_t)snprintf(wj + at, sizeof wj - at, "%s\"%d\":%.3f", k ? "," : "",
                               waiters[k], o);
        printf("sync: +%.1f ns per launch-and-sync under priority beside %d waiters\n", o,
               waiters[k]);
    }
    FILE *f = fopen(c.m.out, "w");
    if (!f)
        return 1;
    fprintf(f, "{\"syncs_per_run\":%ld,\"repeats\":%d,\"rounds\":%d,\"idle_threads\":%d,"
               "\"plain_ns_per_sync\":%.3f,\"salus_ns_per_sync\":%.3f,"
               "\"overhead_ns_per_sync\":%.3f,\"plain_ns_per_sync_idle_threads\":%.3f,"
               "\"salus_ns_per_sync_idle_threads\":%.3f,"
               "\"overhead_ns_per_sync_idle_threads\":%.3f,"
               "\"overhead_ns_per_sync_waiters\":{%s}}\n",
            c.syncs, c.repeats, rounds, threads, m[0], m[1], m[1] - m[0], m[2], m[3],
            m[3] - m[2], wj);
    fclose(f);
    printf("sync: +%.1f ns per launch-and-sync with libsalus, +%.1f ns with %d idle threads\n",
           m[1] - m[0], m[3] - m[2], threads);
    return 0;
}
