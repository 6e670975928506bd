/*
 * test_sched_gang.c - distributed jobs under the scheduler: gangs, blocked
 * holders, a gang member's death.
 *
 * Two 2-GPU jobs (tests/clients/rankclient: one rank per GPU, each waiting
 * every iteration, on its stream, for a value its peer rank writes after its
 * kernel - simgpu's cross-process wait - then synchronizing) share a
 * 2-device simgpu under libsalus.  With gangs (SALUS_GANG=<job>), under fair
 * and under priority, both jobs finish, three runs in a row, and no holder
 * is ever found blocked (a deadlock would be: each job holding one GPU, its
 * rank blocked on the rank that waits for the other GPU); the max slice is
 * long, so that no deadlock is broken by it inside the deadline.  Without
 * gangs (SALUS_GANG=off) the same set-up is found blocked within a short
 * max slice, and the message names SALUS_GANG.  A gang member killed while
 * its gang holds both GPUs releases its peer's GPU: the other job finishes
 * while the dead rank's peer stays blocked.  (The gang's name from each
 * launcher's variables: test_sched_gangname.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/testutil.h"
#include "sched/sched_int.h"

#define CHILD_MS   30000
#define ITERS      "100"
#define KERNEL_NS  "2000000"

/* ---- two 2-GPU jobs ----------------------------------------------------------------- */

typedef struct run {
    char state[64], table[64], shm[2][64];
    const char *trace;                  /* SIMGPU_TRACE of the ranks, NULL: none */
    const char *log;                    /* SALUS_LOG of the ranks, NULL: the default */
    tu_proc_t rank[2][2];               /* [job][rank] */
} run_t;

static int have(const char *rel)
{
    char path[512];
    return access(tu_build_path(rel, path, sizeof path), R_OK) == 0;
}

static void need_built(void)
{
    if (!have("sim/libcuda.so.1") || !have("libsalus.so") || !have("workloads/kernels.cubin") ||
        !have("tests/clients/rankclient"))
        skip();   /* built by make test; a partial build lacks them */
}

/* A shared page per job (rankclient's words), zeroed and mapped here. */
static uint32_t *make_page(const char *name)
{
    int fd = shm_open(name, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 4096), 0);
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    assert_true(p != MAP_FAILED);
    return p;
}

/* Both ranks of every job are set up (rankclient's word 2). */
static int all_ready(void *arg)
{
    uint32_t **pages = arg;
    return __atomic_load_n(&pages[0][2], __ATOMIC_ACQUIRE) == 2 &&
           __atomic_load_n(&pages[1][2], __ATOMIC_ACQUIRE) == 2;
}

/* Start both jobs: gang names (NULL: SALUS_GANG=off), policy, max slice,
 * priorities, iterations of each job. */
static void start(run_t *r, const char *const gang[2], const char *policy, const char *slice,
                  const int prio[2], const char *iters[2])
{
    tu_unique_name("sgang", r->state, sizeof r->state);
    tu_unique_name("stgang", r->table, sizeof r->table);
    char client[512], cubin[512];
    tu_build_path("tests/clients/rankclient", client, sizeof client);
    tu_build_path("workloads/kernels.cubin", cubin, sizeof cubin);
    uint32_t *pages[2];
    for (int j = 0; j < 2; j++) {
        tu_unique_name("sgpage", r->shm[j], sizeof r->shm[j]);
        pages[j] = make_page(r->shm[j]);
    }
    for (int j = 0; j < 2; j++)
        for (int k = 0; k < 2; k++) {
            tu_env_t env;
            tu_env_init(&env);
            tu_env_salus(&env, r->state, r->table);
            tu_env_set(&env, "SIMGPU_DEVICES", "2");
            if (r->trace)
                tu_env_set(&env, "SIMGPU_TRACE", "%s", r->trace);
            tu_env_set(&env, "SALUS_POLICY", "%s", policy);
            tu_env_set(&env, "SALUS_QUANTUM_MS", "20");
            tu_env_set(&env, "SALUS_MAX_SLICE_MS", "%s", slice);
            tu_env_set(&env, "SALUS_ITER_SYNC", "every");
            tu_env_set(&env, "SALUS_PRIORITY", "%d", prio[j]);
            tu_env_set(&env, "SALUS_GANG", "%s", gang[j] ? gang[j] : "off");
            const char *launchers[] = { "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT",
                                        "JAX_COORDINATOR_ADDRESS", "SLURM_JOB_ID",
                                        "SLURM_STEP_ID", "SALUS_LOG" };
            for (size_t v = 0; v < sizeof launchers / sizeof launchers[0]; v++)
                tu_env_unset(&env, launchers[v]);
            if (r->log)
                tu_env_set(&env, "SALUS_LOG", "%s", r->log);
            char rank[4];
            snprintf(rank, sizeof rank, "%d", k);
            char *argv[] = { client, cubin, r->shm[j], rank, (char *)iters[j], KERNEL_NS, NULL };
            assert_int_equal(tu_spawn(&r->rank[j][k], argv, &env), 0);
            tu_env_free(&env);
        }
    if (!tu_await(all_ready, pages, CHILD_MS))
        fail_msg("the ranks did not all set up within %d ms", CHILD_MS);
    for (int j = 0; j < 2; j++) {
        __atomic_store_n(&pages[j][3], 1, __ATOMIC_RELEASE);     /* go */
        munmap(pages[j], 4096);
    }
}

/* The run in progress: a failed assertion leaves it to the teardown. */
static run_t the_run;
static int run_live;

static run_t *new_run(void)
{
    memset(&the_run, 0, sizeof the_run);
    run_live = 1;
    return &the_run;
}

static void cleanup(run_t *r)
{
    run_live = 0;
    for (int j = 0; j < 2; j++) {
        for (int k = 0; k < 2; k++)
            if (r->rank[j][k].pid > 0 && !r->rank[j][k].exited)
                tu_wait(&r->rank[j][k], 0);          /* kills it */
        shm_unlink(r->shm[j]);
    }
    shm_unlink(r->state);
    shm_unlink(r->table);
}

/* The file's text contains needle. */
static int file_has(const char *path, const char *needle)
{
    char *text = tu_read_file(path, NULL);
    int yes = text && strstr(text, needle);
    free(text);
    return yes;
}

/* Every rank's log, on the test's output (a failure says what happened). */
static void print_logs(run_t *r)
{
    for (int j = 0; j < 2; j++)
        for (int k = 0; k < 2; k++) {
            char *err = tu_read_file(r->rank[j][k].err_path, NULL);
            printf("---- job %d rank %d (pid %d):\n%s", j, k, (int)r->rank[j][k].pid,
                   err ? err : "");
            free(err);
        }
}

/* A rank finished every iteration: exit 0 and its JSON says so. */
static void expect_done(run_t *r, tu_proc_t *p, const char *iters)
{
    int rc = tu_wait(p, CHILD_MS);
    char *out = tu_read_file(p->out_path, NULL), *err = tu_read_file(p->err_path, NULL);
    double n = -1;
    const char *last = out ? strrchr(out, '{') : NULL;
    if (rc != 0 || !last || tu_json_num(last, "iterations", &n) != 0 || n != atof(iters)) {
        print_logs(r);
        fail_msg("a rank (pid %d) exited %d: %s", (int)p->pid, rc, out ? out : "");
    }
    if (err && strstr(err, " blocked in"))
        fail_msg("a holder was found blocked: %s", err);
    free(out);
    free(err);
}

/* Three runs in a row, the jobs started together (rankclient's go). */
static void gangs_finish(const char *policy, const int prio[2])
{
    const char *gangs[2] = { "job-a", "job-b" }, *iters[2] = { ITERS, ITERS };
    for (int round = 0; round < 3; round++) {
        run_t *r = new_run();
        start(r, gangs, policy, "20000", prio, iters);
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 2; k++)
                expect_done(r, &r->rank[j][k], ITERS);
        cleanup(r);
    }
}

static void test_gangs_finish_fair(void **state)
{
    (void)state;
    need_built();
    const int prio[2] = { 50, 50 };
    gangs_finish("fair", prio);
}

static void test_gangs_finish_priority(void **state)
{
    (void)state;
    need_built();
    const int prio[2] = { 80, 20 };
    gangs_finish("priority", prio);
}

/* Some rank's log names a blocked holder and SALUS_GANG. */
static int said_blocked(void *arg)
{
    run_t *r = arg;
    for (int j = 0; j < 2; j++)
        for (int k = 0; k < 2; k++)
            if (file_has(r->rank[j][k].err_path, "blocked in cuStreamSynchronize") &&
                file_has(r->rank[j][k].err_path, "SALUS_GANG"))
                return 1;
    return 0;
}

static void test_without_gangs_blocked_is_said(void **state)
{
    (void)state;
    need_built();
    const char *gangs[2] = { NULL, NULL }, *iters[2] = { "100000", "100000" };
    const int prio[2] = { 50, 50 };
    run_t *r = new_run();
    start(r, gangs, "fair", "300", prio, iters);
    int said = tu_await(said_blocked, r, CHILD_MS);
    cleanup(r);
    if (!said)
        fail_msg("no rank said that a holder was blocked, naming SALUS_GANG, in %d ms",
                 CHILD_MS);
}

/* The kernels of pid in the trace so far. */
typedef struct kernels_of {
    const char *trace;
    int pid, want;
} kernels_of_t;

static int ran_kernels(void *arg)
{
    kernels_of_t *w = arg;
    tu_kernel_t *k;
    long n = tu_trace_load(w->trace, &k), mine = 0;
    for (long i = 0; i < n; i++)
        mine += k[i].pid == w->pid;
    if (n >= 0)
        free(k);
    return mine >= w->want;
}

static void test_dead_member_releases(void **state)
{
    (void)state;
    need_built();
    char trace[600];
    snprintf(trace, sizeof trace, "%s/gang-dead-trace.json", tu_tmpdir());
    unlink(trace);
    const char *gangs[2] = { "job-a", "job-b" }, *iters[2] = { "100000", ITERS };
    const int prio[2] = { 80, 20 };         /* job a first: it holds both GPUs */
    run_t *r = new_run();
    r->trace = trace;
    r->log = "info";                              /* what happened, if it fails */
    start(r, gangs, "priority", "20000", prio, iters);
    kernels_of_t w = { trace, r->rank[0][0].pid, 5 };
    if (!tu_await(ran_kernels, &w, CHILD_MS))
        fail_msg("job a's rank 0 never ran");
    kill(r->rank[0][0].pid, SIGKILL);
    tu_wait(&r->rank[0][0], CHILD_MS);
    for (int k = 0; k < 2; k++)                    /* job b gets both GPUs and finishes */
        expect_done(r, &r->rank[1][k], ITERS);
    assert_false(r->rank[0][1].exited);            /* its peer waits for it, forever */
    cleanup(r);
    unlink(trace);
}

static int teardown(void **state)
{
    (void)state;
    if (run_live)
        cleanup(&the_run);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_gangs_finish_fair, teardown),
        cmocka_unit_test_teardown(test_gangs_finish_priority, teardown),
        cmocka_unit_test_teardown(test_without_gangs_blocked_is_said, teardown),
        cmocka_unit_test_teardown(test_dead_member_releases, teardown),
    };
    return cmocka_run_group_tests_name("gangs and blocked holders", tests, NULL, NULL);
}
