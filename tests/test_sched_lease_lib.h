/*
 * test_sched_lease_lib.h - the harness of the lease tests (test_sched_lease.c,
 * test_sched_faults.c): jobs as forked children driving the sched API with a
 * fake driver, each kernel "run" by spinning and logged in a shared array,
 * and the readers of that log.  test_sched_lease_lib.c.
 */
#ifndef TEST_SCHED_LEASE_LIB_H
#define TEST_SCHED_LEASE_LIB_H

#include <stdint.h>
#include <sys/types.h>

#define MAX_EV   8192
#define MAX_JOBS 4
#define MS       1000000ull

typedef struct ev {
    int job, iter, kernel, pad;
    uint64_t start, end;
} ev_t;

typedef struct shared {
    uint32_t n;
    uint64_t first_ns[MAX_JOBS];     /* a job's first launch attempt */
    uint32_t ran[MAX_JOBS];          /* a job's first kernel has run */
    uint64_t exit_ns[MAX_JOBS];
    ev_t ev[MAX_EV];
} shared_t;


typedef struct job {
    int id;
    const char *policy;
    int priority;            /* 0: default */
    int quantum_ms;          /* 0: default */
    int max_slice_ms;        /* 0: default */
    long declared;           /* SALUS_ITERATIONS */
    int iterations, kernels, kernel_us;
    int sync;                /* 0 none, 1 every iteration, 2 salus_iteration_end */
    int distinct;            /* every launch a new kernel handle (no period) */
    int after;               /* start once job after-1 ran a kernel (0: at once) */
    int start_ms;            /* then this delay */
    int pause_at, pause_ms;  /* an idle phase before iteration pause_at */
    int fork_at;             /* fork a child that makes no CUDA call */
    int host_us;             /* host time (a sleep) after each iteration's sync */
    int fill_us;             /* SALUS_FILL_US; 0: off (these jobs spin their kernels
                                on the CPU, and a loaded machine's delays after a sync
                                would look like a host phase) */
    const char *report;      /* file for sched_report_fields */
    const char *table;       /* SALUS_TABLE, default tname */
    const char *err;         /* its stderr goes to this file (NULL: the test's) */
} job_t;

/* The log, shared with the jobs (mapped by main), and the test's table. */
extern shared_t *sh;
extern char tname[64];

pid_t spawn(const job_t *j);
int wait_job(pid_t pid);
int setup(void **state);
int teardown(void **state);
int sorted_log(ev_t **out);
int run_jobs(const job_t *jobs, int n, ev_t **e);
void assert_no_overlap(const ev_t *e, int n);
int count_switches(const ev_t *e, int n);
void assert_whole_iterations(const ev_t *e, int n, int job, int kernels);
uint64_t busy(const ev_t *e, int n, int job, uint64_t from, uint64_t to);
uint64_t first_start(const ev_t *e, int n, int job);
uint64_t last_end(const ev_t *e, int n, int job);
void shares_while_all(const ev_t *e, int n, int njobs, double *share);
/* Job a, and b as job 1 started once a ran, run to their ends, never both
 * on the GPU at once (checked); the events in *e, their count returned. */
int run_pair(job_t a, job_t b, ev_t **e);
/* Job 0's share of the GPU while both of a pair ran. */
double pair_share(const ev_t *e, int n);
void assert_taken_in_pause(const ev_t *e, int n, int pause_at, uint64_t bound, const char *what);
/* The test's table, opened read-write (fails the test if it cannot). */
struct shm_table *open_table(void);

#endif /* TEST_SCHED_LEASE_LIB_H */
