/*
 * test_memory_ctx.c - memory nobody allocated, end to end over simgpu with
 * libsalus preloaded: contexts take SIMGPU_CTX_MEMORY (512 MiB by default)
 * on an 8 GiB device.  Six processes that each allocate what their view
 * says is free (less 64 MiB) get no CUDA_ERROR_OUT_OF_MEMORY from the
 * driver; a grant the driver could not give is refused by Salus; two
 * JAX-like processes that preallocate 75% of the total they are told both
 * start and run; a context counts against SALUS_MEM_LIMIT (and in the
 * report's used, as the limit counts it); a reservation
 * stays the job's when the budget shrinks after its admission.
 *
 * Children are this binary again (`--child <role> <dir>`), spawned with
 * deadlines; each reports "key value" lines on stdout and its counters in
 * the run's SALUS_REPORT.  A child waits for files the parent creates in
 * its directory ("go", "stop"), never for time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cuda.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/testutil.h"

#define MB (1ull << 20)
#define GB (1ull << 30)
#define MS 1000000ull
#define NSHARE 6

/* ---- children ------------------------------------------------------------ */

static void say(const char *key, long long v)
{
    printf("%s %lld\n", key, v);
    fflush(stdout);
}

static int file_exists(void *path)
{
    return access(path, F_OK) == 0;
}

/* Wait for the parent's file `name` in dir (up to 60 s: the parent judges). */
static void wait_for(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    tu_await(file_exists, path, 60000);
}

static int setup_ctx(void)
{
    CUcontext c;
    CUresult rc = cuInit(0);
    if (!rc)
        rc = cuDevicePrimaryCtxRetain(&c, 0);
    if (!rc)
        rc = cuCtxSetCurrent(c);
    say("setup", rc);
    return rc ? 1 : 0;
}

/* share: a context, then at "go" what the view says is free less 64 MiB,
 * held until "stop". */
static int child_share(const char *dir)
{
    size_t free_b = 0, total = 0;
    CUdeviceptr p = 0;
    if (setup_ctx())
        return 1;
    wait_for(dir, "go");
    CUresult rc = cuMemGetInfo(&free_b, &total);
    uint64_t want = free_b > 64 * MB ? free_b - 64 * MB : 0;
    if (!rc && want)
        rc = cuMemAlloc(&p, want);
    say("asked", (long long)want);
    say("alloc", rc);
    wait_for(dir, "stop");
    if (p)
        cuMemFree(p);
    return 0;
}

/* greedy <MiB>: a context, then one allocation of that size at once. */
static int child_greedy(const char *dir, const char *mib)
{
    CUdeviceptr p = 0;
    (void)dir;
    if (setup_ctx())
        return 1;
    CUresult rc = cuMemAlloc(&p, strtoull(mib, NULL, 10) * MB);
    say("alloc", rc);
    if (p)
        cuMemFree(p);
    return 0;
}

/* jax: preallocate 75% of the total the view reports, work in it (a memset
 * of its first MiB, which simgpu backs with host pages, and a synchronize),
 * hold it until "stop". */
static int child_jax(const char *dir)
{
    size_t free_b = 0, total = 0;
    CUdeviceptr p = 0;
    if (setup_ctx())
        return 1;
    CUresult rc = cuMemGetInfo(&free_b, &total);
    say("total", (long long)total);
    say("free", (long long)free_b);
    uint64_t want = total / 4 * 3;
    if (!rc)
        rc = cuMemAlloc(&p, want);
    say("prealloc", rc);
    if (!rc)
        rc = cuMemsetD8(p, 0x5a, MB);
    if (!rc)
        rc = cuCtxSynchronize();
    say("ran", rc);
    wait_for(dir, "stop");
    if (p)
        cuMemFree(p);
    return 0;
}

/* limit: the view under SALUS_MEM_LIMIT, then 600 MiB and 400 MiB. */
static int child_limit(const char *dir)
{
    size_t free_b = 0, total = 0;
    CUdeviceptr p = 0, q = 0;
    (void)dir;
    if (setup_ctx())
        return 1;
    cuMemGetInfo(&free_b, &total);
    say("total", (long long)total);
    say("free", (long long)free_b);
    say("big", cuMemAlloc(&p, 600 * MB));
    say("small", cuMemAlloc(&q, 400 * MB));
    return 0;
}

/* hold <MiB>: a context and one allocation of that size, held until "stop". */
static int child_hold(const char *dir, const char *mib)
{
    CUdeviceptr p = 0;
    if (setup_ctx())
        return 1;
    say("alloc", cuMemAlloc(&p, strtoull(mib, NULL, 10) * MB));
    wait_for(dir, "stop");
    if (p)
        cuMemFree(p);
    return 0;
}

/* reserved <MiB>: a context (admitted under SALUS_MEM_RESERVE first), then
 * at "go" one allocation of that size, held until "stop". */
static int child_reserved(const char *dir, const char *mib)
{
    CUdeviceptr p = 0;
    if (setup_ctx())
        return 1;
    wait_for(dir, "go");
    say("alloc", cuMemAlloc(&p, strtoull(mib, NULL, 10) * MB));
    wait_for(dir, "stop");
    if (p)
        cuMemFree(p);
    return 0;
}

/* hold-at <MiB> <go>: a context, then at the parent's file <go> one
 * allocation of that size, held until "stop". */
static int child_hold_at(const char *dir, const char *mib, const char *go)
{
    CUdeviceptr p = 0;
    if (setup_ctx())
        return 1;
    wait_for(dir, go);
    say("alloc", cuMemAlloc(&p, strtoull(mib, NULL, 10) * MB));
    wait_for(dir, "stop");
    if (p)
        cuMemFree(p);
    return 0;
}

static int child_main(int argc, char **argv)
{
    if (argc < 2)
        return 100;
    if (!strcmp(argv[0], "hold-at") && argc >= 4) return child_hold_at(argv[1], argv[2], argv[3]);
    if (!strcmp(argv[0], "share")) return child_share(argv[1]);
    if (!strcmp(argv[0], "greedy") && argc >= 3) return child_greedy(argv[1], argv[2]);
    if (!strcmp(argv[0], "jax")) return child_jax(argv[1]);
    if (!strcmp(argv[0], "limit")) return child_limit(argv[1]);
    if (!strcmp(argv[0], "hold") && argc >= 3) return child_hold(argv[1], argv[2]);
    if (!strcmp(argv[0], "reserved") && argc >= 3) return child_reserved(argv[1], argv[2]);
    return 100;
}

/* ---- the parent ------------------------------------------------------------ */

static char self_path[512];

typedef struct run {
    char state[64], table[64], dir[512], report[600];
} run_t;

static void run_start(run_t *r, const char *tag)
{
    tu_unique_name("salus-ctx-sim", r->state, sizeof r->state);
    tu_unique_name("salus-ctx-t", r->table, sizeof r->table);
    snprintf(r->dir, sizeof r->dir, "%s/%s", tu_tmpdir(), tag);
    snprintf(r->report, sizeof r->report, "%s/report.json", r->dir);
    mkdir(r->dir, 0755);
    static const char *const left[] = { "go", "stop", "report.json" };
    for (int i = 0; i < 3; i++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", r->dir, left[i]);
        unlink(path);
    }
}

static void unlink_claims(const char *table)
{
    char claim[512];
    while (tu_claim_of(table, claim, sizeof claim) == 0)
        assert_int_equal(unlink(claim), 0);
}

static void run_end(run_t *r)
{
    shm_unlink(r->state);
    shm_unlink(r->table);
    unlink_claims(r->table);
}

static void touch(const run_t *r, const char *name)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", r->dir, name);
    close(open(path, O_CREAT | O_WRONLY, 0644));
}

/* A child under libsalus on the run's 8 GiB simgpu; vars: NAME=value, NULL
 * ended. */
static void spawn2(tu_proc_t *p, const run_t *r, const char *const *vars, const char *role,
                   const char *arg, const char *arg2)
{
    tu_env_t env;
    tu_env_init(&env);
    tu_env_salus(&env, r->state, r->table);
    tu_env_set(&env, "SIMGPU_MEMORY", "8G");
    tu_env_unset(&env, "SIMGPU_CTX_MEMORY");
    tu_env_set(&env, "SALUS_REPORT", "%s", r->report);
    tu_env_unset(&env, "SALUS_MEM_LIMIT");
    tu_env_unset(&env, "SALUS_MEM_RESERVE");
    tu_env_set(&env, "SALUS_MEM_WAIT_MS", "0");  /* a refusal at once, no wait */
    tu_env_unset(&env, "SALUS_MEM_HEADROOM");
    for (int i = 0; vars && vars[i]; i++) {
        char name[64];
        const char *eq = strchr(vars[i], '=');
        snprintf(name, sizeof name, "%.*s", (int)(eq - vars[i]), vars[i]);
        tu_env_set(&env, name, "%s", eq + 1);
    }
    char *argv[] = { self_path, "--child", (char *)role, (char *)r->dir, (char *)arg,
                     (char *)arg2, NULL };
    assert_int_equal(tu_spawn(p, argv, &env), 0);
    tu_env_free(&env);
}

static void spawn(tu_proc_t *p, const run_t *r, const char *const *vars, const char *role,
                  const char *arg)
{
    spawn2(p, r, vars, role, arg, NULL);
}

/* The value reported by a child for key, waiting up to timeout_ms for it. */
static long long reported(tu_proc_t *p, const char *key, int timeout_ms)
{
    char needle[64], line[256];
    snprintf(needle, sizeof needle, "%s ", key);
    uint64_t deadline = tu_now_ns() + (uint64_t)timeout_ms * MS;
    do {
        char *out = tu_read_file(p->out_path, NULL);
        int found = out && tu_find_line(out, needle, 0, line, sizeof line) == 0;
        free(out);
        if (found)
            return strtoll(line + strlen(needle), NULL, 10);
        tu_sleep_ms(2);
    } while (tu_now_ns() < deadline);
    char *err = tu_read_file(p->err_path, NULL);
    fail_msg("child %d never reported %s; stderr: %s", (int)p->pid, key, err ? err : "");
    return -1;
}

/* A number from the report line of pid. */
static double report_num(const run_t *r, pid_t pid, const char *key)
{
    char *text = tu_read_file(r->report, NULL), needle[32], line[4096];
    double v = -1;
    assert_non_null(text);
    snprintf(needle, sizeof needle, "\"pid\":%d,", (int)pid);
    assert_int_equal(tu_find_line(text, needle, 0, line, sizeof line), 0);
    assert_int_equal(tu_json_num(line, key, &v), 0);
    free(text);
    return v;
}

/* An allocation that failed was refused by Salus (counted), never by the
 * driver. */
static void assert_not_driver_oom(const run_t *r, tu_proc_t *p, long long rc)
{
    if (rc == CUDA_SUCCESS)
        return;
    assert_int_equal(rc, CUDA_ERROR_OUT_OF_MEMORY);
    if (report_num(r, p->pid, "oom_refusals") != 1)
        fail_msg("child %d: CUDA_ERROR_OUT_OF_MEMORY from the driver, not from Salus",
                 (int)p->pid);
}

/* Six contexts (3 GiB of 8) and six allocations of the view's free less
 * 64 MiB, at once: some are refused by Salus, none fails in the driver. */
static void test_six_take_their_view(void **state)
{
    (void)state;
    run_t r;
    tu_proc_t c[NSHARE];
    long long rc[NSHARE];
    run_start(&r, "ctx-six");
    for (int i = 0; i < NSHARE; i++)
        spawn(&c[i], &r, NULL, "share", NULL);
    for (int i = 0; i < NSHARE; i++)
        assert_int_equal(reported(&c[i], "setup", 20000), CUDA_SUCCESS);
    touch(&r, "go");
    int ok = 0;
    for (int i = 0; i < NSHARE; i++) {
        rc[i] = reported(&c[i], "alloc", 30000);
        ok += rc[i] == CUDA_SUCCESS && reported(&c[i], "asked", 100) > 0;
    }
    touch(&r, "stop");
    for (int i = 0; i < NSHARE; i++)
        assert_int_equal(tu_wait(&c[i], 20000), 0);
    for (int i = 0; i < NSHARE; i++) {
        assert_not_driver_oom(&r, &c[i], rc[i]);
        /* Made at once, each context is charged to its own process. */
        assert_int_equal(report_num(&r, c[i].pid, "mem_context_bytes"), 512 * MB);
    }
    assert_true(ok >= 1);                       /* the first grant fits the driver */
    run_end(&r);
}

/* Beside five other contexts, 6 GiB of an 8 GiB device passes the table's
 * budget (7.6 GiB) but not the driver's free memory (5 GiB): Salus refuses
 * it; 4 GiB it grants. */
static void test_grant_capped_by_driver(void **state)
{
    (void)state;
    run_t r;
    tu_proc_t c[NSHARE - 1], g;
    run_start(&r, "ctx-cap");
    for (int i = 0; i < NSHARE - 1; i++)
        spawn(&c[i], &r, NULL, "share", NULL);
    for (int i = 0; i < NSHARE - 1; i++)
        assert_int_equal(reported(&c[i], "setup", 20000), CUDA_SUCCESS);
    spawn(&g, &r, NULL, "greedy", "6144");
    assert_int_equal(reported(&g, "alloc", 20000), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(tu_wait(&g, 20000), 0);
    assert_int_equal(report_num(&r, g.pid, "oom_refusals"), 1);
    spawn(&g, &r, NULL, "greedy", "4096");
    assert_int_equal(reported(&g, "alloc", 20000), CUDA_SUCCESS);
    assert_int_equal(tu_wait(&g, 20000), 0);
    touch(&r, "go");
    touch(&r, "stop");
    for (int i = 0; i < NSHARE - 1; i++)
        assert_int_equal(tu_wait(&c[i], 20000), 0);
    run_end(&r);
}

/* Two JAX-like processes without a limit: the second's total is what it
 * holds and could get beside the first, so 75% of it fits, and both run. */
static void test_two_preallocating(void **state)
{
    (void)state;
    run_t r;
    tu_proc_t a, b;
    run_start(&r, "ctx-jax");
    spawn(&a, &r, NULL, "jax", NULL);
    assert_int_equal(reported(&a, "ran", 20000), CUDA_SUCCESS);
    assert_int_equal(reported(&a, "prealloc", 100), CUDA_SUCCESS);
    spawn(&b, &r, NULL, "jax", NULL);
    if (reported(&b, "prealloc", 20000) != CUDA_SUCCESS) {
        char *out = tu_read_file(b.out_path, NULL), *err = tu_read_file(b.err_path, NULL);
        fail_msg("the second could not preallocate: %s%s", out ? out : "", err ? err : "");
    }
    assert_int_equal(reported(&b, "ran", 20000), CUDA_SUCCESS);
    long long ta = reported(&a, "total", 100), tb = reported(&b, "total", 100);
    assert_true(tb < ta);                       /* its share, not the device */
    assert_true(reported(&b, "free", 100) >= tb / 4 * 3);
    touch(&r, "stop");
    assert_int_equal(tu_wait(&a, 20000), 0);
    assert_int_equal(tu_wait(&b, 20000), 0);
    run_end(&r);
}

/* Under SALUS_MEM_LIMIT=1G the context's 512 MiB count: total is the limit,
 * free what the context leaves of it; 600 MiB is refused, 400 MiB not. */
static void test_context_counts_against_limit(void **state)
{
    (void)state;
    run_t r;
    tu_proc_t p;
    const char *const vars[] = { "SALUS_MEM_LIMIT=1G", NULL };
    run_start(&r, "ctx-limit");
    spawn(&p, &r, vars, "limit", NULL);
    assert_int_equal(tu_wait(&p, 20000), 0);
    assert_int_equal(reported(&p, "total", 100), 1 * GB);
    assert_int_equal(reported(&p, "free", 100), 512 * MB);
    assert_int_equal(reported(&p, "big", 100), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(reported(&p, "small", 100), CUDA_SUCCESS);
    assert_int_equal(report_num(&r, p.pid, "oom_refusals"), 1);
    /* its report's used at exit is what the limit counted: 400 MiB and the
     * context, which is its own figure too */
    assert_int_equal(report_num(&r, p.pid, "mem_used_bytes"), 400 * MB + 512 * MB);
    assert_int_equal(report_num(&r, p.pid, "mem_context_bytes"), 512 * MB);
    run_end(&r);
}

/* A reservation is the job's whatever happens after its admission: 3 GiB
 * reserved on the 8 GiB device, then a process without Salus takes 3.8 GiB
 * (and its context), so the table's budget less what the driver shows
 * taken (2.8 GiB) no longer covers the reservation, while the driver still
 * has 3.2 GiB free: the reserved job's 3 GiB is granted, and the driver
 * gives it. */
static void test_reservation_kept_when_budget_shrinks(void **state)
{
    (void)state;
    run_t r;
    tu_proc_t res, foreign;
    const char *const reserve[] = { "SALUS_MEM_RESERVE=3G", NULL };
    const char *const bare[] = { "LD_PRELOAD=", NULL };
    run_start(&r, "ctx-reserve");
    spawn(&res, &r, reserve, "reserved", "3072");
    assert_int_equal(reported(&res, "setup", 20000), CUDA_SUCCESS);
    spawn(&foreign, &r, bare, "hold", "3891");
    assert_int_equal(reported(&foreign, "alloc", 20000), CUDA_SUCCESS);
    touch(&r, "go");
    long long rc = reported(&res, "alloc", 20000);
    touch(&r, "stop");
    assert_int_equal(tu_wait(&res, 20000), 0);
    assert_int_equal(tu_wait(&foreign, 20000), 0);
    assert_int_equal(rc, CUDA_SUCCESS);
    assert_int_equal(report_num(&r, res.pid, "oom_refusals"), 0);
    run_end(&r);
}

/* Contexts measured while memory the table does not count comes and goes
 * (here a process without Salus; a process that has just ended holds its
 * memory until it is torn down) are charged as the last one measured: on a
 * 16 GiB device the second job's context sees 4 GiB unexplained (its own
 * 512 MiB, the holder's context and 3 GiB), which it was charged up to an
 * eighth of the device (2 GiB); once the holder is gone the third sees less
 * than the foreign use read then, which made it look free. */
static void test_context_charge_bounded(void **state)
{
    (void)state;
    run_t r;
    tu_proc_t first, held, second, third;
    const char *const big[] = { "SIMGPU_MEMORY=16G", NULL };
    const char *const bare[] = { "SIMGPU_MEMORY=16G", "LD_PRELOAD=", NULL };
    run_start(&r, "ctx-bound");
    spawn(&first, &r, big, "hold", "64");
    assert_int_equal(reported(&first, "alloc", 20000), CUDA_SUCCESS);
    spawn(&held, &r, bare, "hold", "3072");
    assert_int_equal(reported(&held, "alloc", 20000), CUDA_SUCCESS);
    spawn(&second, &r, big, "hold", "64");
    assert_int_equal(reported(&second, "alloc", 20000), CUDA_SUCCESS);
    kill(held.pid, SIGKILL);
    tu_wait(&held, 20000);
    spawn(&third, &r, big, "hold", "64");
    assert_int_equal(reported(&third, "alloc", 20000), CUDA_SUCCESS);
    touch(&r, "stop");
    assert_int_equal(tu_wait(&first, 20000), 0);
    assert_int_equal(tu_wait(&second, 20000), 0);
    assert_int_equal(tu_wait(&third, 20000), 0);
    double one = report_num(&r, first.pid, "mem_context_bytes");
    double two = report_num(&r, second.pid, "mem_context_bytes");
    double three = report_num(&r, third.pid, "mem_context_bytes");
    assert_true(one >= 500 * MB && one <= 530 * MB);
    assert_true(two == one);
    assert_true(three == one);
    run_end(&r);
}

/* ---- two tables on one GPU ----------------------------------------------- */

/* A second table on the run's GPU (the same simgpu state, its own report). */
static void run_beside(run_t *b, const run_t *a, const char *tag)
{
    run_start(b, tag);
    snprintf(b->state, sizeof b->state, "%s", a->state);
}

static int said_shared(const tu_proc_t *p)
{
    char *err = tu_read_file(p->err_path, NULL);
    int said = err && strstr(err, "both hand out the memory of GPU-") != NULL;
    free(err);
    return said;
}

/* Tables A and B on one 8 GiB GPU.  B's process makes its context beside
 * A's (it reads the driver then), then A allocates 5 GiB: 3 GiB more is
 * what B's table alone would grant (its budget less the two contexts), but
 * the driver has 2 GiB.  B was told at its first look at the GPU that A
 * claims it, says so naming A's SALUS_TABLE, and reads the driver at every
 * grant: Salus refuses, the driver is never asked. */
static void test_two_tables_one_gpu(void **state)
{
    (void)state;
    run_t a, b;
    tu_proc_t pa, pb;
    run_start(&a, "tables-a");
    run_beside(&b, &a, "tables-b");
    spawn2(&pa, &a, NULL, "hold-at", "5120", "go");
    assert_int_equal(reported(&pa, "setup", 20000), CUDA_SUCCESS);
    spawn2(&pb, &b, NULL, "hold-at", "3072", "go");
    assert_int_equal(reported(&pb, "setup", 20000), CUDA_SUCCESS);
    touch(&a, "go");
    assert_int_equal(reported(&pa, "alloc", 20000), CUDA_SUCCESS);
    touch(&b, "go");
    long long rc = reported(&pb, "alloc", 20000);
    touch(&a, "stop");
    touch(&b, "stop");
    assert_int_equal(tu_wait(&pa, 20000), 0);
    assert_int_equal(tu_wait(&pb, 20000), 0);
    assert_int_equal(rc, CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(report_num(&b, pb.pid, "oom_refusals"), 1);
    assert_false(said_shared(&pa));               /* the GPU's first table */
    assert_true(said_shared(&pb));
    char *err = tu_read_file(pb.err_path, NULL), want[128];
    snprintf(want, sizeof want, "SALUS_TABLE=%s", a.table);
    assert_non_null(strstr(err, want));
    free(err);
    char claim[512];
    assert_int_equal(tu_claim_of(a.table, claim, sizeof claim), 0);
    assert_int_equal(tu_claim_of(b.table, claim, sizeof claim), -1);
    run_end(&b);
    run_end(&a);
}

/* A's claim outlives A's processes (and A's table is still there, as
 * tables stay): B, on the same GPU once none of A's processes holds the
 * claim, takes it over without a word. */
static void test_stale_claim_taken_over(void **state)
{
    (void)state;
    run_t a, b;
    tu_proc_t p;
    char claim[512];
    run_start(&a, "stale-a");
    run_beside(&b, &a, "stale-b");
    spawn(&p, &a, NULL, "greedy", "64");
    assert_int_equal(tu_wait(&p, 20000), 0);
    assert_int_equal(reported(&p, "alloc", 100), CUDA_SUCCESS);
    assert_int_equal(tu_claim_of(a.table, claim, sizeof claim), 0);
    assert_int_equal(access(claim, F_OK), 0);
    char table_path[128];
    snprintf(table_path, sizeof table_path, "/dev/shm%s", a.table);
    assert_int_equal(access(table_path, F_OK), 0);
    spawn(&p, &b, NULL, "greedy", "64");
    assert_int_equal(tu_wait(&p, 20000), 0);
    assert_int_equal(reported(&p, "alloc", 100), CUDA_SUCCESS);
    assert_false(said_shared(&p));
    assert_int_equal(tu_claim_of(a.table, claim, sizeof claim), -1);
    assert_int_equal(tu_claim_of(b.table, claim, sizeof claim), 0);
    run_end(&b);
    run_end(&a);
}

/* Two simgpu states are two GPUs: two tables, one on each, never warn, and
 * each claims its own. */
static void test_two_states_never_warn(void **state)
{
    (void)state;
    run_t a, b;
    tu_proc_t pa, pb;
    char ca[512], cb[512];
    run_start(&a, "apart-a");
    run_start(&b, "apart-b");
    spawn(&pa, &a, NULL, "greedy", "64");
    spawn(&pb, &b, NULL, "greedy", "64");
    assert_int_equal(tu_wait(&pa, 20000), 0);
    assert_int_equal(tu_wait(&pb, 20000), 0);
    assert_int_equal(reported(&pa, "alloc", 100), CUDA_SUCCESS);
    assert_int_equal(reported(&pb, "alloc", 100), CUDA_SUCCESS);
    assert_false(said_shared(&pa));
    assert_false(said_shared(&pb));
    assert_int_equal(tu_claim_of(a.table, ca, sizeof ca), 0);
    assert_int_equal(tu_claim_of(b.table, cb, sizeof cb), 0);
    assert_string_not_equal(ca, cb);
    run_end(&b);
    run_end(&a);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "--child"))
        return child_main(argc - 2, argv + 2);
    tu_build_path("tests/test_memory_ctx", self_path, sizeof self_path);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_six_take_their_view),
        cmocka_unit_test(test_grant_capped_by_driver),
        cmocka_unit_test(test_two_preallocating),
        cmocka_unit_test(test_context_counts_against_limit),
        cmocka_unit_test(test_reservation_kept_when_budget_shrinks),
        cmocka_unit_test(test_context_charge_bounded),
        cmocka_unit_test(test_two_tables_one_gpu),
        cmocka_unit_test(test_stale_claim_taken_over),
        cmocka_unit_test(test_two_states_never_warn),
    };
    return cmocka_run_group_tests_name("memory_ctx", tests, NULL, NULL);
}
