/*
 * test_sched_lease_lib.c - the lease tests' harness (test_sched_lease_lib.h):
 * the fake driver, the jobs (forked children that launch, spin and sync
 * through the sched API), running them, and reading their log.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sched/sched_int.h"
#include "lib/testutil.h"
#include "test_sched_lib.h"

#include "test_sched_lease_lib.h"

shared_t *sh;
char tname[64];

static CUresult CUDAAPI fake_ctx_device(CUdevice *device)
{
    *device = 0;
    return CUDA_SUCCESS;
}

static CUresult CUDAAPI fake_ctx_synchronize(void)
{
    return CUDA_SUCCESS;
}

static const drv_t fake_driver = { .ctx_get_device = fake_ctx_device,
                                   .ctx_synchronize = fake_ctx_synchronize };

/* The job's one thread, as intercept's block would keep it: the scheduler's
 * part, and the launches the fold reports at each sync. */
static sched_thread_t job_thread = { .gate = &sched_gate_unreg };
static sched_token_t job_folded, job_counted;

static sched_token_t job_fold(void)
{
    sched_token_t t = { job_counted.launches - job_folded.launches,
                        job_thread.hash - job_folded.hash };
    job_folded.launches = job_counted.launches;
    job_folded.hash = job_thread.hash;
    return t;
}

static void spin_until(uint64_t t)
{
    while (tu_now_ns() < t)
        ;
}

static void setenv_int(const char *name, long v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%ld", v);
    setenv(name, buf, 1);
}

static void job_env(const job_t *j)
{
    setenv("SALUS_TABLE", j->table ? j->table : tname, 1);
    if (j->policy)
        setenv("SALUS_POLICY", j->policy, 1);
    if (j->priority)
        setenv_int("SALUS_PRIORITY", j->priority);
    if (j->quantum_ms)
        setenv_int("SALUS_QUANTUM_MS", j->quantum_ms);
    if (j->max_slice_ms)
        setenv_int("SALUS_MAX_SLICE_MS", j->max_slice_ms);
    if (j->declared)
        setenv_int("SALUS_ITERATIONS", j->declared);
    setenv_int("SALUS_FILL_US", j->fill_us);
}

static void write_report(const char *path)
{
    char buf[1024];
    int n = sched_report_fields(buf, sizeof buf);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "{%.*s}\n", n, buf);
        fclose(f);
    }
}

static void fork_idle_child(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        struct timespec ts = { 0, 300 * 1000 * 1000 };
        nanosleep(&ts, NULL);
        _exit(0);
    }
}

static void __attribute__((noreturn)) job_main(const job_t *j)
{
    uint64_t deadline = tu_now_ns() + 10000 * MS;
    while (j->after && !__atomic_load_n(&sh->ran[j->after - 1], __ATOMIC_ACQUIRE) &&
           tu_now_ns() < deadline)
        tu_sleep_ms(1);
    if (j->start_ms)
        tu_sleep_ms(j->start_ms);
    if (j->err) {
        int fd = open(j->err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd >= 0) {
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
    }
    job_env(j);
    sched_init(&fake_driver);
    sh->first_ns[j->id] = tu_now_ns();
    for (int it = 0; it < j->iterations; it++) {
        if (j->pause_ms && it == j->pause_at)
            tu_sleep_ms(j->pause_ms);
        if (j->fork_at && it == j->fork_at)
            fork_idle_child();
        for (int k = 0; k < j->kernels; k++) {
            uint64_t h = j->distinct ? 0x100000 + (uint64_t)(it * j->kernels + k)
                                     : 0x1000 + (uint64_t)k * 0x40;
            job_counted.launches++;
            sched_launch(&job_thread, (const void *)(uintptr_t)h);
            uint64_t t0 = tu_now_ns();
            spin_until(t0 + (uint64_t)j->kernel_us * 1000);
            uint32_t i = __atomic_fetch_add(&sh->n, 1, __ATOMIC_RELAXED);
            if (i < MAX_EV)
                sh->ev[i] = (ev_t){ j->id, it, k, 0, t0, tu_now_ns() };
            __atomic_store_n(&sh->ran[j->id], 1, __ATOMIC_RELEASE);
        }
        if (j->sync == 1) {
            sched_sync_begin(&job_thread, SCHED_SYNC_CTX, NULL);
            sched_sync_end(&job_thread, SCHED_SYNC_STREAM, 1, job_fold);
            if (j->host_us) {
                struct timespec ts = { 0, (long)j->host_us * 1000 };
                nanosleep(&ts, NULL);
            }
        } else if (j->sync == 2) {
            salus_iteration_end();
        }
    }
    if (j->report)
        write_report(j->report);
    sh->exit_ns[j->id] = tu_now_ns();
    exit(0);
}

pid_t spawn(const job_t *j)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        job_main(j);
    return pid;
}

int wait_job(pid_t pid)
{
    tu_proc_t p = { .pid = pid };
    return tu_wait(&p, 30000);
}

int setup(void **state)
{
    (void)state;
    tu_unique_name("salus-lease", tname, sizeof tname);
    shm_unlink(tname);
    memset(sh, 0, sizeof *sh);
    return 0;
}

int teardown(void **state)
{
    (void)state;
    shm_unlink(tname);
    return 0;
}

/* ---- reading the log ---------------------------------------------------------- */

static int ev_cmp(const void *a, const void *b)
{
    const ev_t *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

int sorted_log(ev_t **out)
{
    int n = (int)(sh->n < MAX_EV ? sh->n : MAX_EV);
    ev_t *e = malloc(sizeof *e * (size_t)(n ? n : 1));
    memcpy(e, sh->ev, sizeof *e * (size_t)n);
    qsort(e, (size_t)n, sizeof *e, ev_cmp);
    *out = e;
    return n;
}

/* Run n jobs at once, each to a clean exit; the log, sorted (e: NULL, none). */
int run_jobs(const job_t *jobs, int n, ev_t **e)
{
    pid_t pid[MAX_JOBS];
    for (int i = 0; i < n; i++)
        pid[i] = spawn(&jobs[i]);
    for (int i = 0; i < n; i++)
        assert_int_equal(wait_job(pid[i]), 0);
    return e ? sorted_log(e) : 0;
}

/* Kernels of different jobs never overlap in time. */
void assert_no_overlap(const ev_t *e, int n)
{
    uint64_t end = 0;
    int job = -1;
    for (int i = 0; i < n; i++) {
        if (e[i].job != job && e[i].start < end)
            fail_msg("job %d ran at %.3f ms, inside job %d's kernel (until %.3f ms)", e[i].job,
                     (double)(e[i].start - e[0].start) / 1e6, job,
                     (double)(end - e[0].start) / 1e6);
        if (e[i].end > end || e[i].job != job)
            end = e[i].end;
        job = e[i].job;
    }
}

int count_switches(const ev_t *e, int n)
{
    int s = 0;
    for (int i = 1; i < n; i++)
        s += e[i].job != e[i - 1].job;
    return s;
}

/* Every run of one job starts at the first kernel of an iteration and ends
 * at the last (whole iterations). */
void assert_whole_iterations(const ev_t *e, int n, int job, int kernels)
{
    for (int i = 0; i < n; i++) {
        if (e[i].job != job)
            continue;
        if (i == 0 || e[i - 1].job != job)
            assert_int_equal(e[i].kernel, 0);
        if (i == n - 1 || e[i + 1].job != job)
            assert_int_equal(e[i].kernel, kernels - 1);
    }
}

/* GPU time of `job` within [from, to). */
uint64_t busy(const ev_t *e, int n, int job, uint64_t from, uint64_t to)
{
    uint64_t sum = 0;
    for (int i = 0; i < n; i++) {
        if (e[i].job != job)
            continue;
        uint64_t a = e[i].start > from ? e[i].start : from;
        uint64_t b = e[i].end < to ? e[i].end : to;
        sum += b > a ? b - a : 0;
    }
    return sum;
}

uint64_t first_start(const ev_t *e, int n, int job)
{
    for (int i = 0; i < n; i++)
        if (e[i].job == job)
            return e[i].start;
    return 0;
}

uint64_t last_end(const ev_t *e, int n, int job)
{
    uint64_t t = 0;
    for (int i = 0; i < n; i++)
        if (e[i].job == job && e[i].end > t)
            t = e[i].end;
    return t;
}

/* Each of jobs 0..njobs-1's share of the GPU time while all of them ran. */
void shares_while_all(const ev_t *e, int n, int njobs, double *share)
{
    uint64_t from = 0, to = UINT64_MAX, total = 0, b[MAX_JOBS];
    for (int i = 0; i < njobs; i++) {
        from = first_start(e, n, i) > from ? first_start(e, n, i) : from;
        to = last_end(e, n, i) < to ? last_end(e, n, i) : to;
    }
    for (int i = 0; i < njobs; i++)
        total += b[i] = busy(e, n, i, from, to);
    for (int i = 0; i < njobs; i++)
        share[i] = (double)b[i] / (double)total;
}

int run_pair(job_t a, job_t b, ev_t **e)
{
    b.id = 1;
    b.after = 1;
    int n = run_jobs((job_t[]){ a, b }, 2, e);
    assert_no_overlap(*e, n);
    return n;
}

double pair_share(const ev_t *e, int n)
{
    double share[2];
    shares_while_all(e, n, 2, share);
    return share[0];
}

/* Job 1 runs in job 0's pause: a kernel of it starts after job 0's last
 * kernel before the pause (at iteration pause_at), within `bound`; `what`
 * job 0 did, for the message.  Job 1 may have run before the pause too: on
 * a loaded machine a holder left unscheduled at a boundary for the rest
 * time is at rest, by design, and gives way there. */
void assert_taken_in_pause(const ev_t *e, int n, int pause_at, uint64_t bound,
                                  const char *what)
{
    uint64_t a_pause = 0, b_in = 0;
    for (int i = 0; i < n; i++)
        if (e[i].job == 0 && e[i].iter == pause_at - 1)
            a_pause = e[i].end;
    assert_true(a_pause > 0);
    for (int i = 0; i < n; i++)
        if (e[i].job == 1 && e[i].start > a_pause && (!b_in || e[i].start < b_in))
            b_in = e[i].start;
    if (!(b_in && b_in < a_pause + bound))
        fail_msg("a %s at %.1f ms, b's first kernel after that at %.1f ms (b first ran at "
                 "%.1f ms)", what, (double)(a_pause - e[0].start) / 1e6,
                 b_in ? (double)(b_in - e[0].start) / 1e6 : -1.0,
                 (double)(first_start(e, n, 1) - e[0].start) / 1e6);
}

shm_table_t *open_table(void)
{
    shm_table_t *t = ts_open_table(tname, 10000);
    assert_non_null(t);
    return t;
}
