/*
 * test_memory_admit.c - with paging on (SALUS_SWAP=on), a job's context is
 * admitted before it is made, in the policy's order, over simgpu with
 * libsalus preloaded into admitclient (contexts of 512 MiB on a 4 GiB
 * device, whose budget is 3.75 GiB):
 *
 *   - a job without paging holds 2.5 GiB and its context (3 GiB), another
 *     holds a context: no room is left for a third.  Three jobs with
 *     paging on arrive and wait for the room of a context (which cannot be
 *     paged), without failing in the driver.  The blocker is killed: room
 *     for one context at a time.  Each admitted job is killed once it has
 *     its context, so that the next is admitted: the three get their
 *     contexts in the policy's order, not their arrival's: srtf the fewest
 *     declared iterations first, or the shortest declared length where
 *     lengths are declared in time, priority the highest first.
 *   - once a job of 2.5 GiB has been on the device, a third context is
 *     held while two beside 2.5 GiB would leave no room for one as large;
 *   - at the deadline (SALUS_MEM_WAIT_MS, nothing to page) the waiter is
 *     let through, says why, and the driver answers: out of memory when
 *     256 MiB are left on the device;
 *   - an allocation the driver refuses although the table has room (memory
 *     outside the table: a process without libsalus that allocated after
 *     the job measured the device, as a process that has just ended holds
 *     its memory until it is torn down) is tried again until the holder is
 *     gone, instead of failing.
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
#include <fcntl.h>

#include "lib/testutil.h"

#define CHILD_MS 60000

/* SALUS_LOG of the jobs spawned next; NULL: the default (warn). */
static const char *log_level;

static char state_name[64], table_name[64];

typedef struct job {
    const char *policy;
    int swap, priority;
    const char *iterations, *mib, *wait_ms;
    const char *length_ms;            /* SALUS_LENGTH_MS, NULL: none */
} job_t;

static void spawn_args(tu_proc_t *p, const job_t *j, const char *arg)
{
    char client[512];
    char *argv[] = { (char *)tu_build_path("tests/clients/admitclient", client, sizeof client),
                     (char *)j->mib, (char *)arg, NULL };
    tu_env_t env;
    tu_env_init(&env);
    tu_env_salus(&env, state_name, table_name);
    tu_env_set(&env, "SIMGPU_MEMORY", "4G");
    tu_env_set(&env, "SIMGPU_CTX_MEMORY", "512M");
    tu_env_set(&env, "SALUS_SWAP", j->swap ? "on" : "off");
    tu_env_set(&env, "SALUS_MEM_WAIT_MS", "%s", j->wait_ms ? j->wait_ms : "120000");
    tu_env_set(&env, "SALUS_POLICY", "%s", j->policy);
    tu_env_set(&env, "SALUS_PRIORITY", "%d", j->priority);
    /* The default log level unless a test asks for more: a job waiting for
     * admission says so at it, with the command that shows who holds the
     * memory (the tests look for it). */
    if (log_level)
        tu_env_set(&env, "SALUS_LOG", "%s", log_level);
    else
        tu_env_unset(&env, "SALUS_LOG");
    if (j->iterations)
        tu_env_set(&env, "SALUS_ITERATIONS", "%s", j->iterations);
    else
        tu_env_unset(&env, "SALUS_ITERATIONS");
    if (j->length_ms)
        tu_env_set(&env, "SALUS_LENGTH_MS", "%s", j->length_ms);
    else
        tu_env_unset(&env, "SALUS_LENGTH_MS");
    tu_env_unset(&env, "SALUS_MEM_LIMIT");
    tu_env_unset(&env, "SALUS_MEM_RESERVE");
    tu_env_unset(&env, "SALUS_REPORT");
    assert_int_equal(tu_spawn(p, argv, &env), 0);
    tu_env_free(&env);
}

static void spawn(tu_proc_t *p, const job_t *j)
{
    spawn_args(p, j, NULL);
}

/* The same client on simgpu without libsalus: memory outside the table. */
static void spawn_plain(tu_proc_t *p, const char *mib)
{
    char client[512];
    char *argv[] = { (char *)tu_build_path("tests/clients/admitclient", client, sizeof client),
                     (char *)mib, NULL };
    tu_env_t env;
    tu_env_init(&env);
    tu_env_simgpu(&env, state_name);
    tu_env_set(&env, "SIMGPU_MEMORY", "4G");
    tu_env_set(&env, "SIMGPU_CTX_MEMORY", "512M");
    tu_env_unset(&env, "LD_PRELOAD");
    assert_int_equal(tu_spawn(p, argv, &env), 0);
    tu_env_free(&env);
}

typedef struct look {
    const tu_proc_t *p;
    const char *text;
    int err;              /* 1: its stderr, 0: its stdout */
} look_t;

static int has(const tu_proc_t *p, const char *text, int err)
{
    char *s = tu_read_file(err ? p->err_path : p->out_path, NULL);
    int yes = s && strstr(s, text) != NULL;
    free(s);
    return yes;
}

static int shows(void *arg)
{
    const look_t *l = arg;
    return has(l->p, l->text, l->err);
}

static void await_text(const tu_proc_t *p, const char *text, int err, const char *who)
{
    look_t l = { p, text, err };
    if (!tu_await(shows, &l, CHILD_MS)) {
        char *out = tu_read_file(p->out_path, NULL), *e = tu_read_file(p->err_path, NULL);
        fail_msg("%s never showed \"%s\": %s / %s", who, text, out ? out : "", e ? e : "");
    }
}

static void kill_job(tu_proc_t *p)
{
    kill(p->pid, SIGKILL);
    tu_wait(p, CHILD_MS);
}

typedef struct any_ctx {
    tu_proc_t *w;
    int n, found;
} any_ctx_t;

static int one_has_ctx(void *arg)
{
    any_ctx_t *a = arg;
    for (int i = 0; i < a->n; i++)
        if (has(&a->w[i], "ctx ", 0) || has(&a->w[i], "failed", 0)) {
            a->found = i;
            return 1;
        }
    return 0;
}

static int prepared(void)
{
    if (!tu_built("sim/libcuda.so.1") || !tu_built("libsalus.so") ||
        !tu_built("tests/clients/admitclient"))
        return 0;
    tu_unique_name("sma", state_name, sizeof state_name);
    tu_unique_name("stma", table_name, sizeof table_name);
    return 1;
}

/* The device full but for less than a context: a job without paging with
 * `mib`, and a blocker with its context alone. */
static void fill_device(tu_proc_t *holder, tu_proc_t *blocker, const char *policy,
                        const char *mib)
{
    job_t h = { policy, 0, 0, NULL, mib, NULL, NULL }, b = { policy, 0, 0, NULL, "0", NULL, NULL };
    spawn(holder, &h);
    await_text(holder, "ready", 0, "the holder");
    spawn(blocker, &b);
    await_text(blocker, "ready", 0, "the blocker");
}

/* Three jobs queued for their contexts, admitted in the order `expect`
 * (indexes into jobs). */
static void admitted_in_order(const char *policy, const job_t jobs[3], const int expect[3])
{
    static const char *const names[] = { "the first to arrive", "the second", "the third" };
    tu_proc_t holder, blocker, w[3];
    fill_device(&holder, &blocker, policy, "2560");
    for (int i = 0; i < 3; i++) {
        spawn(&w[i], &jobs[i]);
        await_text(&w[i], "waits for room on the device (paging on: contexts cannot be "
                   "paged; 'salus status' shows who holds the memory)", 1, names[i]);
    }
    for (int i = 0; i < 3; i++)
        assert_false(has(&w[i], "ctx ", 0));
    kill_job(&blocker);                  /* room for one context at a time */
    for (int k = 0; k < 3; k++) {
        any_ctx_t a = { w, 3, -1 };
        if (!tu_await(one_has_ctx, &a, CHILD_MS))
            fail_msg("no queued job got its context after the blocker went (%s)", policy);
        char *out = tu_read_file(w[a.found].out_path, NULL);
        if (a.found != expect[k] || !strstr(out, "ctx "))
            fail_msg("%s: admitted %d-th: %s (%s), expected %s", policy, k + 1,
                     names[a.found], out ? out : "", names[expect[k]]);
        free(out);
        kill_job(&w[a.found]);           /* its context goes: the next is admitted */
        w[a.found].out_path[0] = 0;      /* done: read as empty */
    }
    kill_job(&holder);
    shm_unlink(state_name);
    shm_unlink(table_name);
}

static void test_admitted_in_srtf_order(void **state)
{
    (void)state;
    if (!prepared())
        skip();
    static const job_t jobs[3] = {
        { "srtf", 1, 50, "3000", "0", NULL, NULL },
        { "srtf", 1, 50, "1000", "0", NULL, NULL },
        { "srtf", 1, 50, "2000", "0", NULL, NULL },
    };
    static const int expect[3] = { 1, 2, 0 };
    admitted_in_order("srtf", jobs, expect);
}

/* Lengths declared in time rank before any iteration is measured: the job
 * of most iterations but the shortest declared length first (by iterations
 * alone the order would be arrival's). */
static void test_admitted_in_declared_length_order(void **state)
{
    (void)state;
    if (!prepared())
        skip();
    static const job_t jobs[3] = {
        { "srtf", 1, 50, "1000", "0", NULL, "3000" },
        { "srtf", 1, 50, "2000", "0", NULL, "1000" },
        { "srtf", 1, 50, "3000", "0", NULL, "2000" },
    };
    static const int expect[3] = { 1, 2, 0 };
    admitted_in_order("srtf", jobs, expect);
}

static int retried_or_failed(void *arg)
{
    const tu_proc_t *p = arg;
    return has(p, "calling it again", 1) || has(p, "failed", 0);
}

/* 4 GiB: the job's context (0.5) and a holder without libsalus with its
 * context and 2.5 GiB leave 0.5 GiB; the table, which measured the device
 * before the holder came, has room for the job's 2 GiB.  With paging on,
 * the chunk under a virtualized allocation is what the driver refuses. */
static void driver_refusal_retried(int swap)
{
    if (!prepared())
        skip();
    tu_proc_t job, holder;
    job_t j = { "fifo", swap, 50, NULL, "2048", NULL, NULL };
    log_level = "info";                  /* "calling it again" is said at info */
    spawn_args(&job, &j, "wait");
    log_level = NULL;
    await_text(&job, "ctx ", 0, "the job");
    spawn_plain(&holder, "2560");
    await_text(&holder, "ready", 0, "the holder");
    kill(job.pid, SIGUSR1);
    if (!tu_await(retried_or_failed, &job, CHILD_MS))
        fail_msg("the job neither failed nor retried its allocation");
    if (has(&job, "failed", 0))
        fail_msg("the job's allocation failed on the driver's refusal, not retried");
    kill_job(&holder);
    await_text(&job, "ready", 0, "the job, once the holder is gone");
    kill_job(&job);
    shm_unlink(state_name);
    shm_unlink(table_name);
}

static void test_driver_refusal_retried(void **state)
{
    (void)state;
    driver_refusal_retried(0);
}

static void test_driver_refusal_retried_paging(void **state)
{
    (void)state;
    driver_refusal_retried(1);
}

static void test_admitted_in_priority_order(void **state)
{
    (void)state;
    if (!prepared())
        skip();
    static const job_t jobs[3] = {
        { "priority", 1, 20, "1000", "0", NULL, NULL },
        { "priority", 1, 80, "1000", "0", NULL, NULL },
        { "priority", 1, 50, "1000", "0", NULL, NULL },
    };
    static const int expect[3] = { 1, 2, 0 };
    admitted_in_order("priority", jobs, expect);
}

/* A job of 2.5 GiB has come and gone: contexts are admitted while they
 * leave room for one as large (3.75 GiB budget: two of 512 MiB beside
 * 2.5 GiB, not three), since a newcomer's own peak is not known yet and
 * paging cannot move contexts; the third is admitted once one goes. */
static void test_room_for_the_largest_seen(void **state)
{
    (void)state;
    if (!prepared())
        skip();
    tu_proc_t big, w[3];
    job_t b = { "fair", 1, 50, NULL, "2560", NULL, NULL }, j = { "fair", 1, 50, NULL, "0", NULL, NULL };
    spawn(&big, &b);
    await_text(&big, "ready", 0, "the large job");
    kill_job(&big);
    spawn(&w[0], &j);
    await_text(&w[0], "ctx ", 0, "the first small job");
    spawn(&w[1], &j);
    await_text(&w[1], "ctx ", 0, "the second small job");
    spawn(&w[2], &j);
    await_text(&w[2], "waits for room", 1, "the third small job");
    assert_false(has(&w[2], "ctx ", 0));
    kill_job(&w[0]);
    await_text(&w[2], "ctx ", 0, "the third small job, once the first went");
    kill_job(&w[1]);
    kill_job(&w[2]);
    shm_unlink(state_name);
    shm_unlink(table_name);
}

/* Nothing to page and the deadline passed: the driver is called and says. */
static void test_deadline_lets_the_driver_answer(void **state)
{
    (void)state;
    if (!prepared())
        skip();
    tu_proc_t holder, blocker, w;
    fill_device(&holder, &blocker, "fair", "2816");   /* 256 MiB left on the device */
    job_t j = { "fair", 1, 50, "1000", "0", "200", NULL };
    spawn(&w, &j);
    int rc = tu_wait(&w, CHILD_MS);
    char *out = tu_read_file(w.out_path, NULL), *err = tu_read_file(w.err_path, NULL);
    if (rc != 1 || !out || !strstr(out, "failed 2") || !err ||
        !strstr(err, "the driver answers whether it fits"))
        fail_msg("exit %d: %s / %s", rc, out ? out : "", err ? err : "");
    free(out);
    free(err);
    kill_job(&blocker);
    kill_job(&holder);
    shm_unlink(state_name);
    shm_unlink(table_name);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_admitted_in_srtf_order),
        cmocka_unit_test(test_admitted_in_declared_length_order),
        cmocka_unit_test(test_driver_refusal_retried),
        cmocka_unit_test(test_driver_refusal_retried_paging),
        cmocka_unit_test(test_admitted_in_priority_order),
        cmocka_unit_test(test_room_for_the_largest_seen),
        cmocka_unit_test(test_deadline_lets_the_driver_answer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
