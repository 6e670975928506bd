/*
 * micro.h - what the micro-benchmarks over the null driver share (micro.c):
 * the clock and medians, the options every one takes (--nulldrv, --libsalus,
 * --out), running a child of themselves with the null driver as libcuda
 * (plain or with libsalus preloaded), the child's context, and reading the
 * SALUS_REPORT that a preloaded child writes.
 */
#ifndef BENCH_MICRO_H
#define BENCH_MICRO_H

#include <stddef.h>
#include <sys/types.h>

/* CLOCK_MONOTONIC in ns. */
unsigned long long micro_now_ns(void);
/* The median of v[0..n-1] (sorted in place). */
double micro_median(double *v, int n);

/* The options every micro-benchmark takes, and what follows from them. */
typedef struct micro {
    const char *nulldrv;                /* --nulldrv DIR: the null libcuda.so.1 */
    const char *libsalus;               /* --libsalus PATH */
    const char *out;                    /* --out FILE.json */
    char self[4096];                    /* this program, for its children */
    char report[4200];                  /* FILE.json.report: SALUS_REPORT */
} micro_t;

/* Take key (and its value) when it is one of the common options: 1, else 0. */
int micro_option(micro_t *m, const char *key, const char *value);
/* 1 when every common option was given. */
int micro_options_given(const micro_t *m);
/* Fill in self and report: 0, or -1. */
int micro_setup(micro_t *m);

/* The environment of a child: the null driver as libcuda, and libsalus
 * preloaded (with its table, and its report unless report is NULL) unless
 * libsalus is NULL. */
typedef struct micro_env {
    const char *nulldrv, *libsalus, *table, *report;
} micro_env_t;

/* Fork and exec argv (argv[0]: the program) in env, its stdout on out_fd
 * when out_fd >= 0.  The child's pid, or -1. */
pid_t micro_spawn(char *const argv[], const micro_env_t *env, int out_fd);
/* micro_spawn, wait, and its output in buf (NUL-terminated): 0 when it
 * exited 0 having written something, else -1. */
int micro_run(char *const argv[], const micro_env_t *env, char *buf, size_t size);
/* Remove a child's SALUS_TABLE (a name in /dev/shm). */
void micro_unlink_table(const char *table);

/* In a child: the device's primary context made current; 0, or -1. */
int micro_context(void);

/* The last line of a file (a report: one JSON line per process): 0, or -1. */
int micro_last_line(const char *path, char *line, size_t size);
/* The number after "key": in a JSON line, or -1 when it is not there. */
double micro_field(const char *line, const char *key);

#endif /* BENCH_MICRO_H */
