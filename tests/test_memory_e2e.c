/*
 * test_memory_e2e.c - memory admission end to end: salus-train over simgpu
 * (16 GiB) with libsalus preloaded.  Every --alloc path against
 * SALUS_MEM_LIMIT; the process's own view (cuMemGetInfo through --verbose);
 * a job that waits (SALUS_MEM_WAIT_MS) for a peer to finish, or to be
 * killed; the admission of reserving jobs (SALUS_MEM_RESERVE) and a
 * reservation too large for the device; the report's counters; a normal
 * exit that gives its slot back, and a killed job that monitors stop
 * counting at once; a process with contexts on four GPUs enrolled on the
 * one it works on, and per-device limits.
 *
 * Each run has its own simgpu state and table.  The test watches the table
 * read-only, through memory.h and ipc.h, as salus-top does.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "lib/salusrun.h"
#include "lib/testutil.h"
#include "memory/memory.h"

#define MB (1ull << 20)
#define GB (1ull << 30)

static sr_names_t names;          /* this test's state, table and report */

static int setup(void **state)
{
    (void)state;
    sr_names(&names, "salus-mem-e2e");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sr_unlink(&names);
    return 0;
}

/* A run of salus-train: its environment (with extra NAME=value pairs, NULL
 * ended) and its arguments after the program (NULL ended). */
typedef struct run {
    tu_proc_t p;
    int rc;
    char json[2048];
} run_t;

static void start(run_t *r, const char *const *vars, const char *const *args)
{
    tu_env_t env;
    char prog[512];
    char *argv[40];
    int n = 0;
    sr_env(&env, &names);
    tu_env_unset(&env, "SALUS_MEM_WAIT_MS");
    sr_env_vars(&env, vars);
    argv[n++] = (char *)tu_build_path("bin/salus-train", prog, sizeof prog);
    const char *common[] = { "--kernels", "2", "--kernel-us", "100", NULL };
    for (int i = 0; common[i]; i++)
        argv[n++] = (char *)common[i];
    for (int i = 0; args[i] && n < 39; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    assert_int_equal(tu_spawn(&r->p, argv, &env), 0);
    tu_env_free(&env);
}

static void finish(run_t *r)
{
    r->rc = tu_wait(&r->p, 60000);
    char *out = tu_read_file(r->p.out_path, NULL);
    r->json[0] = '\0';
    if (out)
        tu_find_line(out, "\"program\"", 0, r->json, sizeof r->json);
    free(out);
}

static void run(run_t *r, const char *const *vars, const char *const *args)
{
    start(r, vars, args);
    finish(r);
}

/* A number from pid's report line. */
static double report_num(pid_t pid, const char *key)
{
    return sr_report_num(&names, pid, key);
}

static int table_opened(void *arg)
{
    shm_open_opts_t o = { .name = names.table, .read_only = 1 };
    return shm_open_table(&o, (shm_table_t **)arg) == 0;
}

/* The table, once a job has made it (up to 5 s). */
static shm_table_t *watch(void)
{
    shm_table_t *t = NULL;
    assert_true(tu_await(table_opened, &t, 5000));
    return t;
}

typedef struct slot_goal {
    shm_table_t *t;
    pid_t pid;
    uint64_t used;     /* 0: waiting-mem */
    int slot;          /* out: where it was seen */
} slot_goal_t;

static int slot_reached(void *arg)
{
    slot_goal_t *g = arg;
    for (int s = 0; s < SHM_MAX_SLOTS; s++) {
        shm_ident_t id;
        mem_slot_view_t v;
        if (shm_slot_ident(g->t, s, &id) != 0 || id.pid != g->pid)
            continue;
        if (g->used ? mem_view_slot(g->t, s, &v) == 0 && v.used >= g->used
                    : id.state == SHM_WAIT_MEM) {
            g->slot = s;
            return 1;
        }
    }
    return 0;
}

/* Wait (up to 10 s) until pid's slot holds at least `used` bytes, or shows
 * waiting-mem when used is 0; its slot. */
static int await_slot(shm_table_t *t, pid_t pid, uint64_t used)
{
    slot_goal_t g = { t, pid, used, -1 };
    if (!tu_await(slot_reached, &g, 10000))
        fail_msg("process %d never reached %s", (int)pid, used ? "its memory" : "waiting-mem");
    return g.slot;
}

/* ---- every path against the limit ---------------------------------------- */

static void test_every_path_over_simgpu(void **state)
{
    (void)state;
    const char *paths[] = { "alloc", "pitch", "managed", "async", "vmm", "array" };
    /* The limit for the allocation paths alone (a context counts against it
     * too: test_context_memory). */
    const char *const limit[] = { "SALUS_MEM_LIMIT=1G", "SIMGPU_CTX_MEMORY=0", NULL };
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        run_t over, fits, iter_over;
        const char *a1[] = { "--alloc", paths[i], "--iterations", "2", "--mem", "1100M", NULL };
        run(&over, limit, a1);
        assert_int_not_equal(over.rc, 0);
        assert_non_null(strstr(over.json, "CUDA_ERROR_OUT_OF_MEMORY"));
        assert_true(report_num(over.p.pid, "oom_refusals") >= 1);
        assert_int_equal(report_num(over.p.pid, "mem_limit_bytes"), 1 * GB);

        const char *a2[] = { "--alloc", paths[i], "--iterations", "3", "--mem", "900M",
                             "--iter-mem", "100M", NULL };
        run(&fits, limit, a2);
        assert_int_equal(fits.rc, 0);
        double peak = report_num(fits.p.pid, "mem_peak_bytes");
        assert_true(peak >= 1000.0 * MB && peak <= 1.0 * GB);
        assert_int_equal(report_num(fits.p.pid, "mem_used_bytes"), 0);
        assert_int_equal(report_num(fits.p.pid, "oom_refusals"), 0);

        /* The per-iteration buffer does not fit beside --mem: refused. */
        const char *a3[] = { "--alloc", paths[i], "--iterations", "3", "--mem", "900M",
                             "--iter-mem", "200M", NULL };
        run(&iter_over, limit, a3);
        assert_int_not_equal(iter_over.rc, 0);
        assert_non_null(strstr(iter_over.json, "--iter-mem"));
    }
}

/* ---- the process's own view ------------------------------------------------ */

static void free_mem_line(run_t *r, uint64_t *start, uint64_t *iter, uint64_t *total)
{
    char *err = tu_read_file(r->p.err_path, NULL), line[512];
    assert_non_null(err);
    assert_int_equal(tu_find_line(err, "free_mem", 0, line, sizeof line), 0);
    unsigned long long s, i, e, t;
    assert_int_equal(sscanf(strstr(line, "free_mem"), "free_mem start=%llu iter=%llu end=%llu "
                            "total=%llu", &s, &i, &e, &t), 4);
    *start = s;
    *iter = i;
    *total = t;
    free(err);
}

static void test_memgetinfo_view(void **state)
{
    (void)state;
    uint64_t s, i, t;
    run_t r;
    const char *args[] = { "--iterations", "2", "--mem", "500M", "--iter-mem", "100M",
                           "--verbose", NULL };
    const char *const limit[] = { "SALUS_MEM_LIMIT=2G", NULL };
    run(&r, limit, args);
    assert_int_equal(r.rc, 0);
    free_mem_line(&r, &s, &i, &t);
    assert_int_equal(t, 2 * GB);                  /* total: the limit */
    assert_true(s <= t);
    assert_int_equal(s - i, 600 * MB);            /* free: what is left of it */

    const char *const none[] = { "SALUS_MEM_HEADROOM=5%", NULL };
    run(&r, none, args);
    assert_int_equal(r.rc, 0);
    free_mem_line(&r, &s, &i, &t);
    /* What it could allocate: the budget (capacity - headroom) less what
     * its context and module take (simgpu's 512 MiB and the cubin), which
     * its limit bounds too. */
    double ctx = report_num(r.p.pid, "mem_context_bytes");
    assert_true(ctx >= 512.0 * MB && ctx < 513.0 * MB);
    assert_int_equal(t, 16 * GB - 16 * GB / 20 - (uint64_t)ctx);
    assert_int_equal(s - i, 600 * MB);
}

/* ---- waiting for a peer ------------------------------------------------------ */

static void test_wait_for_peer(void **state)
{
    (void)state;
    shm_table_t *t;
    run_t holder, waiter;
    const char *ha[] = { "--seconds", "1", "--mem", "12G", NULL };
    start(&holder, NULL, ha);
    t = watch();
    await_slot(t, holder.p.pid, 12 * GB);
    const char *const wait[] = { "SALUS_MEM_WAIT_MS=20000", NULL };
    const char *wa[] = { "--iterations", "2", "--mem", "8G", NULL };
    start(&waiter, wait, wa);
    await_slot(t, waiter.p.pid, 0);               /* seen waiting */
    finish(&holder);
    finish(&waiter);
    assert_int_equal(holder.rc, 0);
    assert_int_equal(waiter.rc, 0);
    assert_true(report_num(waiter.p.pid, "mem_waited_ms") >= 100);
    assert_int_equal(report_num(waiter.p.pid, "oom_refusals"), 0);

    /* A holder killed: the waiter proceeds. */
    const char *ka[] = { "--seconds", "30", "--mem", "12G", NULL };
    start(&holder, NULL, ka);
    await_slot(t, holder.p.pid, 12 * GB);
    start(&waiter, wait, wa);
    await_slot(t, waiter.p.pid, 0);
    kill(holder.p.pid, SIGKILL);
    finish(&waiter);
    assert_int_equal(waiter.rc, 0);
    assert_int_equal(tu_wait(&holder.p, 5000), 128 + SIGKILL);
    shm_close_table(t);
}

/* ---- admission ------------------------------------------------------------- */

static void test_admission_over_simgpu(void **state)
{
    (void)state;
    shm_table_t *t;
    run_t first, second, huge;
    const char *const reserve[] = { "SALUS_MEM_RESERVE=10G", NULL };
    const char *fa[] = { "--seconds", "1", "--mem", "1G", NULL };
    start(&first, reserve, fa);
    t = watch();
    await_slot(t, first.p.pid, 1 * GB);
    const char *sa[] = { "--iterations", "2", "--mem", "9G", NULL };
    start(&second, reserve, sa);
    int slot = await_slot(t, second.p.pid, 0);
    mem_slot_view_t v;
    assert_int_equal(mem_view_slot(t, slot, &v), 0);
    assert_int_equal(v.waiting_admission, 1);
    finish(&first);
    finish(&second);
    assert_int_equal(first.rc, 0);
    assert_int_equal(second.rc, 0);
    double end1, end2;
    assert_int_equal(tu_json_num(first.json, "end_ns", &end1), 0);
    assert_int_equal(tu_json_num(second.json, "end_ns", &end2), 0);
    assert_true(end2 > end1);
    assert_true(report_num(second.p.pid, "mem_waited_ms") >= 100);
    assert_int_equal(report_num(second.p.pid, "mem_reserved_bytes"), 10 * GB);

    const char *const too_big[] = { "SALUS_MEM_RESERVE=20G", NULL };
    const char *ba[] = { "--iterations", "1", NULL };
    run(&huge, too_big, ba);
    assert_int_not_equal(huge.rc, 0);
    char *err = tu_read_file(huge.p.err_path, NULL);
    assert_non_null(err);
    assert_non_null(strstr(err, "SALUS_MEM_RESERVE=20G"));
    assert_non_null(strstr(err, "16 GiB"));
    free(err);
    shm_close_table(t);
}

/* ---- a running job keeps its iteration's memory ------------------------------
 * A priority-80 job frees its 8 GiB of per-iteration memory at each
 * iteration's end; a job reserving 8 GiB arrives meanwhile.  The running
 * job's last iteration peaked at 10 GiB, so the reservation does not fit
 * beside it: the newcomer waits for admission until the running job is
 * done, instead of being admitted between two iterations and leaving the
 * running job without its next iteration's memory.  The running job does
 * not wait for memory at all (SALUS_MEM_WAIT_MS=0 would make any shortage
 * fatal to it), and nothing fails. */

typedef struct peak_goal {
    shm_table_t *t;
    pid_t pid;
    uint64_t run_peak;
} peak_goal_t;

static int run_peak_seen(void *arg)
{
    peak_goal_t *g = arg;
    for (int s = 0; s < SHM_MAX_SLOTS; s++) {
        shm_ident_t id;
        mem_slot_view_t v;
        if (shm_slot_ident(g->t, s, &id) == 0 && id.pid == g->pid &&
            mem_view_slot(g->t, s, &v) == 0 && v.run_peak >= g->run_peak)
            return 1;
    }
    return 0;
}

static void test_running_job_keeps_iteration_memory(void **state)
{
    (void)state;
    run_t running, late;
    const char *const hi[] = { "SALUS_PRIORITY=80", "SALUS_POLICY=priority",
                               "SALUS_ITER_SYNC=every", "SALUS_MEM_WAIT_MS=0", NULL };
    const char *ra[] = { "--seconds", "3", "--mem", "2G", "--iter-mem", "8G", "--host-ms", "2",
                         NULL };
    start(&running, hi, ra);
    shm_table_t *t = watch();
    peak_goal_t g = { t, 0, 10 * GB };
    g.pid = running.p.pid;
    assert_true(tu_await(run_peak_seen, &g, 10000));   /* an iteration has peaked */
    const char *const reserve[] = { "SALUS_MEM_RESERVE=8G", NULL };
    const char *la[] = { "--iterations", "3", "--mem", "7G", NULL };
    start(&late, reserve, la);
    int slot = await_slot(t, late.p.pid, 0);
    mem_slot_view_t v;
    assert_int_equal(mem_view_slot(t, slot, &v), 0);
    assert_int_equal(v.waiting_admission, 1);
    finish(&running);
    finish(&late);
    assert_int_equal(running.rc, 0);
    assert_int_equal(late.rc, 0);
    assert_int_equal(report_num(running.p.pid, "oom_refusals"), 0);
    assert_int_equal(report_num(running.p.pid, "mem_waited_ms"), 0);
    assert_int_equal(report_num(late.p.pid, "oom_refusals"), 0);
    double end1, end2;                               /* admitted once the first was done */
    assert_int_equal(tu_json_num(running.json, "end_ns", &end1), 0);
    assert_int_equal(tu_json_num(late.json, "end_ns", &end2), 0);
    assert_true(end2 > end1);
    assert_true(report_num(late.p.pid, "mem_waited_ms") >= 100);
    shm_close_table(t);
}

/* ---- exit and death --------------------------------------------------------- */

/* A job that exits normally frees its slot itself (no peer is left to reap
 * it); a job killed with no peer left keeps its slot until someone reaps
 * it, but a monitor's device totals stop counting it the moment it dies. */
static void test_exit_and_death_seen_at_once(void **state)
{
    (void)state;
    run_t done, killed;
    mem_device_view_t dv;
    const char *da[] = { "--seconds", "1", "--mem", "3G", NULL };
    const char *const info[] = { "SALUS_LOG=info", NULL };
    start(&done, info, da);
    shm_table_t *t = watch();
    int slot = await_slot(t, done.p.pid, 3 * GB);
    finish(&done);
    assert_int_equal(done.rc, 0);
    assert_int_equal(shm_slot_gen(t, slot), 0);               /* given back at exit */
    char *err = tu_read_file(done.p.err_path, NULL);          /* said as an exit, not a death */
    assert_non_null(err);
    assert_non_null(strstr(err, "this process exited and gave its slot"));
    assert_null(strstr(err, "has ended"));
    free(err);
    assert_int_equal(mem_view_device(t, 0, &dv), 0);
    assert_int_equal(dv.used, 0);

    const char *ka[] = { "--seconds", "60", "--mem", "5G", NULL };
    start(&killed, NULL, ka);
    slot = await_slot(t, killed.p.pid, 5 * GB);
    assert_int_equal(mem_view_device(t, 0, &dv), 0);
    assert_true(dv.used >= 5 * GB);
    kill(killed.p.pid, SIGKILL);
    finish(&killed);
    assert_int_not_equal(shm_slot_gen(t, slot), 0);           /* nobody reaped it */
    assert_int_equal(mem_view_device(t, 0, &dv), 0);
    assert_int_equal(dv.used, 0);
    assert_int_equal(dv.granted, 0);
    shm_close_table(t);
}

/* ---- many devices ------------------------------------------------------------ */

/* How many devices the table knows (an index is never given back). */
static int table_devices(void)
{
    shm_open_opts_t o = { .name = names.table, .read_only = 1 };
    shm_table_t *t = NULL;
    assert_int_equal(shm_open_table(&o, &t), 0);
    int n = 0;
    uint8_t uuid[16];
    while (n < SHM_MAX_DEVICES && shm_device_uuid(t, n, uuid) == 0)
        n++;
    shm_close_table(t);
    return n;
}

/* A process that retains a context on each of 4 GPUs (as JAX does) and
 * works on device 2 is gated there only; the table learns the four
 * devices, where its contexts take memory (and its reservation is admitted
 * before each context).  Limits are per device in MPS's form: device 2's
 * refuses what device 1's allows, and the own view's total is device 2's
 * limit. */
static void test_enrolled_where_it_works(void **state)
{
    (void)state;
    run_t r;
    const char *const four[] = { "SIMGPU_DEVICES=4", "SALUS_MEM_RESERVE=1G", NULL };
    const char *on2[] = { "--retain-all", "--device", "2", "--iterations", "3", "--mem", "256M",
                          NULL };
    run(&r, four, on2);
    assert_int_equal(r.rc, 0);
    assert_int_equal(table_devices(), 4);
    assert_int_equal(report_num(r.p.pid, "launches"), 3 * 2);

    uint64_t s, i, t;
    const char *const limits[] = { "SIMGPU_DEVICES=4", "SALUS_MEM_LIMIT=1=4G,2=512M",
                                   "SIMGPU_CTX_MEMORY=0", NULL };
    const char *big2[] = { "--retain-all", "--device", "2", "--iterations", "1", "--mem", "1G",
                           NULL };
    run(&r, limits, big2);
    assert_int_equal(r.rc, 2);                               /* out of memory: its limit */
    const char *big1[] = { "--retain-all", "--device", "1", "--iterations", "1", "--mem", "1G",
                           "--verbose", NULL };
    run(&r, limits, big1);
    assert_int_equal(r.rc, 0);
    free_mem_line(&r, &s, &i, &t);
    assert_int_equal(t, 4 * GB);
    const char *view2[] = { "--retain-all", "--device", "2", "--iterations", "1", "--mem", "64M",
                            "--verbose", NULL };
    run(&r, limits, view2);
    assert_int_equal(r.rc, 0);
    free_mem_line(&r, &s, &i, &t);
    assert_int_equal(t, 512 * MB);
    const char *on0[] = { "--retain-all", "--device", "0", "--iterations", "1", "--mem", "2G",
                          NULL };
    run(&r, limits, on0);                                    /* not named: no limit */
    assert_int_equal(r.rc, 0);
    assert_int_equal(table_devices(), 4);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_every_path_over_simgpu),
        T(test_exit_and_death_seen_at_once),
        T(test_memgetinfo_view),
        T(test_wait_for_peer),
        T(test_admission_over_simgpu),
        T(test_running_job_keeps_iteration_memory),
        T(test_enrolled_where_it_works),
    };
    return cmocka_run_group_tests_name("memory-e2e", tests, NULL, NULL);
}
