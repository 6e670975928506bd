/*
 * test_memory_preempt.c - priority preemption on a full device with paging
 * (SALUS_SWAP=on), over simgpu with libsalus preloaded into pageclient:
 *
 *   - a low-priority job holds 48 MiB of a 64 MiB device and runs; a
 *     high-priority job that needs 48 MiB arrives.  Its allocation waits for
 *     memory (SALUS_MEM_WAIT_MS=0: without paging it would be refused at
 *     once), queued for the GPU meanwhile, so that the low job yields at a
 *     boundary and, waiting at the gate, is paged out for it.  Both finish,
 *     nothing fails, and every byte of both jobs' memory is intact;
 *   - the same, at half the sizes, with both jobs' memory from
 *     cuMemAllocAsync (the default pool's stream-ordered allocations, which
 *     paging serves too; without it the high job is refused);
 *   - the same with the low job's paging off: its memory cannot move, so
 *     the high job, which took the GPU with a first kernel and then waits
 *     for memory, gives the GPU back and leaves the queue (held, the GPU would stall the low job, which
 *     frees the memory only by running to its end, until the high job's
 *     SALUS_MEM_WAIT_MS refused it); both finish;
 *   - the same with the high job's SALUS_MEM_WAIT_MS at 200 ms: it would fit
 *     alone, so it waits while the low job can still end, and is not
 *     refused;
 *   - under pack, which gates nothing (no job waits at a gate to be paged),
 *     two jobs of 48 MiB on the 64 MiB device each fill half their memory,
 *     then both allocate the rest at once: each waits for the other.  The
 *     one that arrived last pages itself out, the first gets its memory
 *     and runs to its end, the last comes back in and finishes; neither is
 *     refused (SALUS_MEM_WAIT_MS of 1 s would refuse one without it), every
 *     byte survives, and the report counts the last one's page-out; the
 *     same with stream-ordered allocations (cuMemAllocAsync);
 *   - the same, with the last job SIGKILLed while it is paged out and waits
 *     to come back: the first finishes, and a fresh job then gets 56 MiB of
 *     the 64 MiB device at once (SALUS_MEM_WAIT_MS=0): nothing of the killed
 *     job stays counted, on the device or in the table;
 *   - a holder SIGSTOPped while a job paged out waits behind it, with room
 *     on the device for that job's memory: the paged-out job pages in and
 *     runs to its end while the holder is stopped (before, it waited for
 *     the whole stop), and the holder, continued, runs on;
 *   - two jobs of 48 MiB taking turns under fair, paging each other out,
 *     and the holder SIGSTOPped: the waiter's memory could come back only
 *     once the stopped one paged out, which only it can do; the waiter says
 *     so once instead of waiting without a word (or, stopped mid page-in
 *     with room left, runs), and after SIGCONT both finish, every byte
 *     intact.
 *
 * Every job allocates in 6 or 7 blocks of 8 MiB (PAGECLIENT_BLOCK_MIB), big
 * allocations all (2 MiB and more): the calls and the decisions of the
 * gigabyte sizes these tests had, for megabytes of copies.  make test-soak
 * (SALUS_TEST_SOAK=1) runs them at 64 times the sizes: 3 GiB jobs of 512 MiB
 * blocks on a 4 GiB device, gigabytes copied and paged.
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
#include <unistd.h>

#include "lib/testutil.h"

/* A job's deadline: seconds at make test's sizes, minutes at the soak's. */
#define CHILD_MS (tu_soak() ? 240000 : 30000)

static char state_name[64], table_name[64];

/* Sizes in MiB at make test's scale; test-soak's are 64 times these. */
#define DEV_MIB    64               /* the device */
#define JOB_MIB    48               /* a job: fits alone, not two */
#define FRESH_MIB  56               /* most of the device, after a kill */
#define BLOCK_MIB  8                /* pageclient's blocks */
#define HEADROOM_MIB 4

static unsigned mib(unsigned n)
{
    return n * (tu_soak() ? 64u : 1u);
}

/* pageclient's environment at the scale of the run. */
static void env_sizes(tu_env_t *env, unsigned dev_mib)
{
    tu_env_set(env, "SIMGPU_MEMORY", "%uM", mib(dev_mib));
    tu_env_set(env, "PAGECLIENT_BLOCK_MIB", "%u", mib(BLOCK_MIB));
    /* The default headroom of the gigabyte devices (256 MiB, its floor),
     * scaled like them: 4 MiB at make test's sizes. */
    tu_env_set(env, "SALUS_MEM_HEADROOM", "%uM", mib(HEADROOM_MIB));
}

static void spawn_swap(tu_proc_t *p, int priority, const char *iters, int async,
                       const char *swap, const char *wait_ms)
{
    char client[512], cubin[512], size[16];
    snprintf(size, sizeof size, "%u", mib(async > 0 ? JOB_MIB / 2 : JOB_MIB));
    char *argv[] = { (char *)tu_build_path("tests/clients/pageclient", client, sizeof client),
                     (char *)tu_build_path("workloads/kernels.cubin", cubin, sizeof cubin),
                     size, (char *)iters, "2000",
                     async > 0 ? "async" : async < 0 ? "warm" : NULL, NULL };
    tu_env_t env;
    tu_env_init(&env);
    tu_env_salus(&env, state_name, table_name);
    env_sizes(&env, async > 0 ? DEV_MIB / 2 : DEV_MIB);
    tu_env_set(&env, "SIMGPU_CTX_MEMORY", "0");
    tu_env_set(&env, "SALUS_SWAP", swap);
    tu_env_set(&env, "SALUS_MEM_WAIT_MS", wait_ms);
    tu_env_set(&env, "SALUS_POLICY", "priority");
    tu_env_set(&env, "SALUS_PRIORITY", "%d", priority);
    tu_env_unset(&env, "SALUS_MEM_LIMIT");
    tu_env_unset(&env, "SALUS_REPORT");
    assert_int_equal(tu_spawn(p, argv, &env), 0);
    tu_env_free(&env);
}

static void spawn(tu_proc_t *p, int priority, const char *iters, int async)
{
    spawn_swap(p, priority, iters, async, "on", "0");
}

/* The child printed `word`, or exited (a wait for it then ends at once;
 * the caller tells which). */
static int printed_or_exited(tu_proc_t *p, const char *word)
{
    char *out = tu_read_file(p->out_path, NULL);
    int yes = out && strstr(out, word) != NULL;
    free(out);
    return yes || tu_exited(p);
}

static int printed_ready(void *arg)
{
    return printed_or_exited(arg, "ready");
}

/* Wait for the child to print `word` (printed_ready, printed_half); fail,
 * with what it said, when it exited or the deadline passed first. */
static void await_said(tu_proc_t *p, int (*pred)(void *), const char *word, const char *what)
{
    if (tu_await(pred, p, CHILD_MS) && !p->exited)
        return;
    char *out = tu_read_file(p->out_path, NULL), *err = tu_read_file(p->err_path, NULL);
    int said = out && strstr(out, word);
    if (!said)
        fail_msg("%s (%s): %s / %s", what, p->exited ? "it exited" : "deadline passed",
                 out ? out : "", err ? err : "");
    free(out);
    free(err);
}

static void finish(tu_proc_t *p, const char *who)
{
    int rc = tu_wait(p, CHILD_MS);
    char *out = tu_read_file(p->out_path, NULL), *err = tu_read_file(p->err_path, NULL);
    if (rc != 0 || !out || !strstr(out, "done 0 bad 0"))
        fail_msg("the %s job exited %d: %s / %s", who, rc, out ? out : "", err ? err : "");
    free(out);
    free(err);
}

static void preempt(int async)
{
    if (!tu_built("sim/libcuda.so.1") || !tu_built("libsalus.so") ||
        !tu_built("workloads/kernels.cubin") || !tu_built("tests/clients/pageclient"))
        skip();
    tu_unique_name("smp", state_name, sizeof state_name);
    tu_unique_name("stmp", table_name, sizeof table_name);
    tu_proc_t low, high;
    spawn(&low, 10, "1000", async);       /* longer than the high job's 50 */
    await_said(&low, printed_ready, "ready", "the low job never filled its memory");
    spawn(&high, 90, "50", async);
    finish(&high, "high-priority");
    finish(&low, "low-priority");
    shm_unlink(state_name);
    shm_unlink(table_name);
}

static void test_priority_preempts_full_device(void **state)
{
    (void)state;
    preempt(0);
}

static void test_priority_preempts_async_memory(void **state)
{
    (void)state;
    preempt(1);
}

/* The high job (paging on, SALUS_MEM_WAIT_MS=wait_ms) takes the GPU with a
 * first kernel, then waits for memory the low job (paging off) holds. */
static void give_up(const char *wait_ms)
{
    if (!tu_built("sim/libcuda.so.1") || !tu_built("libsalus.so") ||
        !tu_built("workloads/kernels.cubin") || !tu_built("tests/clients/pageclient"))
        skip();
    tu_unique_name("smg", state_name, sizeof state_name);
    tu_unique_name("stmg", table_name, sizeof table_name);
    tu_proc_t low, high;
    spawn_swap(&low, 10, "300", 0, "off", "0");      /* its memory cannot move */
    await_said(&low, printed_ready, "ready", "the low job never filled its memory");
    spawn_swap(&high, 90, "20", -1, "on", wait_ms);      /* holds the GPU first */
    finish(&high, "high-priority");
    finish(&low, "low-priority");
    shm_unlink(state_name);
    shm_unlink(table_name);
}

static void test_gives_up_gpu_paging_cannot_help(void **state)
{
    (void)state;
    /* Longer than the low job's run: the high job gets its memory when the
     * low job ends, if the low job can run meanwhile. */
    give_up("120000");
}

/* With paging on, a job that would fit alone waits past its
 * SALUS_MEM_WAIT_MS while a peer can still end and give the memory back:
 * 200 ms is far shorter than the low job's run, and the high job is not
 * refused. */
static void test_fits_alone_outwaits_the_deadline(void **state)
{
    (void)state;
    give_up("200");
}

/* A number in pid's line of the report at `path`; -1 when absent. */
static double report_num(const char *path, pid_t pid, const char *key)
{
    char *text = tu_read_file(path, NULL), needle[32], line[4096];
    double v = -1;
    snprintf(needle, sizeof needle, "\"pid\":%d,", (int)pid);
    if (!text || tu_find_line(text, needle, 0, line, sizeof line) != 0 ||
        tu_json_num(line, key, &v) != 0)
        v = -1;
    free(text);
    return v;
}

/* A pack job of `mib` (growing at `go`, or all at once when NULL) with
 * paging on, SALUS_MEM_WAIT_MS of wait_ms. */
static int pack_async;                 /* the growing jobs use cuMemAllocAsync */

static void spawn_pack(tu_proc_t *p, unsigned job_mib, const char *go, const char *wait_ms,
                       const char *report)
{
    char client[512], cubin[512], mode[600], size[16];
    snprintf(mode, sizeof mode, "%s=%s", pack_async ? "grow-async" : "grow", go ? go : "");
    snprintf(size, sizeof size, "%u", mib(job_mib));
    char *argv[] = { (char *)tu_build_path("tests/clients/pageclient", client, sizeof client),
                     (char *)tu_build_path("workloads/kernels.cubin", cubin, sizeof cubin),
                     size, "100", "2000", go ? mode : NULL, NULL };
    tu_env_t env;
    tu_env_init(&env);
    tu_env_salus(&env, state_name, table_name);
    env_sizes(&env, DEV_MIB);
    tu_env_set(&env, "SIMGPU_CTX_MEMORY", "0");
    tu_env_set(&env, "SALUS_SWAP", "on");
    tu_env_set(&env, "SALUS_MEM_WAIT_MS", "%s", wait_ms);
    tu_env_set(&env, "SALUS_POLICY", "pack");
    tu_env_set(&env, "SALUS_LOG", "info");
    tu_env_set(&env, "SALUS_REPORT", "%s", report);
    tu_env_unset(&env, "SALUS_MEM_LIMIT");
    assert_int_equal(tu_spawn(p, argv, &env), 0);
    tu_env_free(&env);
}

static int printed_half(void *arg)
{
    return printed_or_exited(arg, "half");
}

static int said_paged_out(void *arg)
{
    char *err = tu_read_file(((tu_proc_t *)arg)->err_path, NULL);
    int yes = err && strstr(err, "paged out") != NULL;
    free(err);
    return yes || tu_exited(arg);
}

/* Two growing pack jobs, both past their first half, told to grow. */
static void pack_pair(tu_proc_t *first, tu_proc_t *last, const char *go, const char *report)
{
    if (!tu_built("sim/libcuda.so.1") || !tu_built("libsalus.so") ||
        !tu_built("workloads/kernels.cubin") || !tu_built("tests/clients/pageclient"))
        skip();
    tu_unique_name("smk", state_name, sizeof state_name);
    tu_unique_name("stmk", table_name, sizeof table_name);
    unlink(go);
    unlink(report);
    spawn_pack(first, JOB_MIB, go, "1000", report);
    await_said(first, printed_half, "half", "the first job never filled half its memory");
    spawn_pack(last, JOB_MIB, go, "1000", report);
    await_said(last, printed_half, "half", "the last job never filled half its memory");
    int fd = open(go, O_WRONLY | O_CREAT, 0644);     /* both grow at once */
    assert_true(fd >= 0);
    close(fd);
}

static void pack_clean(const char *go, const char *report)
{
    unlink(go);
    unlink(report);
    shm_unlink(state_name);
    shm_unlink(table_name);
}

static void pack_paths(char *go, char *report, size_t len)
{
    snprintf(go, len, "%s/pack-go", tu_tmpdir());
    snprintf(report, len, "%s/pack-report.jsonl", tu_tmpdir());
}

static void pack_waiting_for_each_other(int async)
{
    char go[600], report[600];
    pack_async = async;
    pack_paths(go, report, sizeof go);
    tu_proc_t first, last;
    pack_pair(&first, &last, go, report);
    finish(&first, "first");
    finish(&last, "last");
    assert_true(report_num(report, last.pid, "swap_outs") >= 1);
    assert_true(report_num(report, last.pid, "swap_ins") >= 1);
    assert_int_equal((int)report_num(report, first.pid, "swap_outs"), 0);
    pack_clean(go, report);
}

static void test_pack_jobs_waiting_for_each_other(void **state)
{
    (void)state;
    pack_waiting_for_each_other(0);
}

static void test_pack_async_jobs_waiting_for_each_other(void **state)
{
    (void)state;
    pack_waiting_for_each_other(1);
}

static void test_pack_killed_while_paged_out(void **state)
{
    (void)state;
    pack_async = 0;
    char go[600], report[600];
    pack_paths(go, report, sizeof go);
    tu_proc_t first, last, fresh;
    pack_pair(&first, &last, go, report);
    if (!tu_await(said_paged_out, &last, CHILD_MS) || last.exited)
        fail_msg("the last job never paged itself out (%s)",
                 last.exited ? "it exited" : "deadline passed");
    kill(last.pid, SIGKILL);
    tu_wait(&last, CHILD_MS);
    finish(&first, "first");
    spawn_pack(&fresh, FRESH_MIB, NULL, "0", report);
    finish(&fresh, "fresh");
    pack_clean(go, report);
}

/* ---- a stopped holder, a paged-out waiter ---------------------------------------
 * Under priority: a mid job of 8 MiB holds the GPU; a low job of 48 MiB
 * waits behind it; a high job of 48 MiB comes and goes, and the low job is
 * paged out for it.  The mid job holds again, the low one waits paged out
 * with room for its memory on the device.  The mid job is stopped: the low
 * one pages in and runs to its end while the mid one is stopped. */

/* salus-top's JSON object for pid (malloc'd), NULL when absent. */
static char *top_obj(pid_t pid)
{
    char top[512], pidkey[32];
    char *argv[] = { (char *)tu_build_path("bin/salus-top", top, sizeof top), "--once",
                     "--json", "-d", "0", "-t", table_name, NULL };
    tu_proc_t p;
    if (tu_run(argv, NULL, 20000, &p) != 0)
        return NULL;
    char *out = tu_read_file(p.out_path, NULL);
    snprintf(pidkey, sizeof pidkey, "\"pid\":%d,", (int)pid);
    char *at = out ? strstr(out, pidkey) : NULL, *end = at ? strchr(at, '}') : NULL;
    char *obj = end ? strndup(at, (size_t)(end - at)) : NULL;
    free(out);
    return obj;
}

/* Its number `key`; -1 when absent. */
static double top_num(pid_t pid, const char *key)
{
    char *obj = top_obj(pid);
    double v = -1;
    if (!obj || tu_json_num(obj, key, &v) != 0)
        v = -1;
    free(obj);
    return v;
}

/* Whether it holds the GPU. */
static int top_holds(pid_t pid)
{
    char *obj = top_obj(pid);
    int yes = obj && strstr(obj, "\"holds_lease\":true") != NULL;
    free(obj);
    return yes;
}

typedef struct paged_goal {
    pid_t low, mid;
} paged_goal_t;

/* The low job waits with memory paged out, the mid job holds. */
static int low_paged_mid_holds(void *arg)
{
    paged_goal_t *g = arg;
    return top_num(g->low, "swapped_out_bytes") > 0 && top_holds(g->mid);
}

typedef struct iters_goal {
    pid_t pid;
    double want;
    tu_proc_t *p;        /* or it exited (NULL: not asked) */
} iters_goal_t;

static int iterated(void *arg)
{
    iters_goal_t *g = arg;
    return top_num(g->pid, "iterations") >= g->want || (g->p && tu_exited(g->p));
}

static int exited(void *arg)
{
    return tu_exited(arg);
}

/* A pageclient job of job_mib (scaled) and iters iterations of 2 ms
 * kernels, paging on, under policy (with SALUS_PRIORITY when priority > 0). */
static void spawn_job(tu_proc_t *p, const char *policy, int priority, unsigned job_mib,
                      const char *iters)
{
    char client[512], cubin[512], size[16];
    snprintf(size, sizeof size, "%u", mib(job_mib));
    char *argv[] = { (char *)tu_build_path("tests/clients/pageclient", client, sizeof client),
                     (char *)tu_build_path("workloads/kernels.cubin", cubin, sizeof cubin),
                     size, (char *)iters, "2000", NULL };
    tu_env_t env;
    tu_env_init(&env);
    tu_env_salus(&env, state_name, table_name);
    env_sizes(&env, DEV_MIB);
    tu_env_set(&env, "SIMGPU_CTX_MEMORY", "0");
    tu_env_set(&env, "SALUS_SWAP", "on");
    tu_env_set(&env, "SALUS_MEM_WAIT_MS", "0");
    tu_env_set(&env, "SALUS_POLICY", "%s", policy);
    if (priority > 0)
        tu_env_set(&env, "SALUS_PRIORITY", "%d", priority);
    else
        tu_env_unset(&env, "SALUS_PRIORITY");
    tu_env_unset(&env, "SALUS_MEM_LIMIT");
    tu_env_unset(&env, "SALUS_REPORT");
    assert_int_equal(tu_spawn(p, argv, &env), 0);
    tu_env_free(&env);
}

static void spawn_prio(tu_proc_t *p, int priority, unsigned job_mib, const char *iters)
{
    spawn_job(p, "priority", priority, job_mib, iters);
}

static void test_stopped_holder_paged_waiter(void **state)
{
    (void)state;
    if (!tu_built("sim/libcuda.so.1") || !tu_built("libsalus.so") ||
        !tu_built("workloads/kernels.cubin") || !tu_built("tests/clients/pageclient") ||
        !tu_built("bin/salus-top"))
        skip();
    tu_unique_name("sms", state_name, sizeof state_name);
    tu_unique_name("stms", table_name, sizeof table_name);
    tu_proc_t mid, low, high;
    spawn_prio(&mid, 50, BLOCK_MIB, "1000000");          /* holds the GPU throughout */
    await_said(&mid, printed_ready, "ready", "the mid job never filled its memory");
    spawn_prio(&low, 10, JOB_MIB, "20");
    spawn_prio(&high, 90, JOB_MIB, "20");                /* the low job pages out for it */
    finish(&high, "high-priority");
    paged_goal_t g = { low.pid, mid.pid };
    if (!tu_await(low_paged_mid_holds, &g, CHILD_MS))
        fail_msg("the low job is not paged out behind the mid job (paged out %.0f, the mid "
                 "job holds %d)", top_num(low.pid, "swapped_out_bytes"), top_holds(mid.pid));
    kill(mid.pid, SIGSTOP);
    uint64_t stopped = tu_now_ns();
    iters_goal_t gl = { low.pid, 1, &low };
    int ran = tu_await(iterated, &gl, 20000);          /* its first iteration */
    uint64_t first = tu_now_ns() - stopped;
    ran = ran && tu_await(exited, &low, 20000);        /* its 20 */
    uint64_t took = tu_now_ns() - stopped;
    kill(mid.pid, SIGCONT);
    if (!ran) {
        kill(mid.pid, SIGKILL);
        kill(low.pid, SIGKILL);
        tu_wait(&mid, CHILD_MS);
        tu_wait(&low, CHILD_MS);
        fail_msg("the paged-out job did not run to its end in the 20 s the holder was "
                 "stopped");
    }
    print_message("      the paged-out job's first iteration seen %.1f ms, its end %.1f ms after "
                  "the holder was stopped\n", (double)first / 1e6, (double)took / 1e6);
    finish(&low, "low-priority");
    /* Continued, the mid job runs on: its iterations grow. */
    iters_goal_t gi = { mid.pid, top_num(mid.pid, "iterations") + 5, NULL };
    double it0 = gi.want - 5;
    tu_await(iterated, &gi, 20000);
    double it1 = top_num(mid.pid, "iterations");
    kill(mid.pid, SIGKILL);
    tu_wait(&mid, CHILD_MS);
    shm_unlink(state_name);
    shm_unlink(table_name);
    if (!(it1 >= it0 + 5))
        fail_msg("the continued holder did not run on (%.0f iterations, then %.0f)", it0, it1);
}

/* Two fair jobs of 48 MiB take turns, paging each other out; the holder is
 * stopped: the waiter says why it waits (or runs, when the stop caught the
 * holder early in its page-in, with room left), and both finish after the
 * stop. */
typedef struct said_goal {
    tu_proc_t *waiter;
    double iters;          /* its iterations at the stop */
    int said;              /* out: its lines saying why */
} said_goal_t;

static int said_or_ran(void *arg)
{
    said_goal_t *g = arg;
    char *err = tu_read_file(g->waiter->err_path, NULL);
    g->said = err ? tu_count_lines(err, "is stopped (SIGSTOP") : 0;
    free(err);
    return g->said > 0 || top_num(g->waiter->pid, "iterations") > g->iters;
}

static void spawn_fair(tu_proc_t *p)
{
    spawn_job(p, "fair", 0, JOB_MIB, "300");
}

static void test_stopped_holder_no_room(void **state)
{
    (void)state;
    if (!tu_built("sim/libcuda.so.1") || !tu_built("libsalus.so") ||
        !tu_built("workloads/kernels.cubin") || !tu_built("tests/clients/pageclient") ||
        !tu_built("bin/salus-top"))
        skip();
    tu_unique_name("smn", state_name, sizeof state_name);
    tu_unique_name("stmn", table_name, sizeof table_name);
    tu_proc_t j[2];
    spawn_fair(&j[0]);
    await_said(&j[0], printed_ready, "ready", "the first job never filled its memory");
    spawn_fair(&j[1]);
    int h = -1;
    for (int round = 0; round < 50 && h < 0; round++) {    /* catch a holder stopped */
        paged_goal_t g = { j[1 - round % 2].pid, j[round % 2].pid };
        if (!tu_await(low_paged_mid_holds, &g, 2000))
            continue;
        int cand = round % 2;
        kill(j[cand].pid, SIGSTOP);
        if (top_holds(j[cand].pid) && top_num(j[!cand].pid, "swapped_out_bytes") > 0)
            h = cand;
        else
            kill(j[cand].pid, SIGCONT);
    }
    if (h < 0) {
        kill(j[0].pid, SIGKILL);
        kill(j[1].pid, SIGKILL);
        tu_wait(&j[0], CHILD_MS);
        tu_wait(&j[1], CHILD_MS);
        fail_msg("no holder was caught holding with its peer paged out");
    }
    said_goal_t sg = { &j[!h], top_num(j[!h].pid, "iterations"), 0 };
    int ok = tu_await(said_or_ran, &sg, 20000);
    kill(j[h].pid, SIGCONT);
    if (!ok) {
        kill(j[0].pid, SIGKILL);
        kill(j[1].pid, SIGKILL);
        tu_wait(&j[0], CHILD_MS);
        tu_wait(&j[1], CHILD_MS);
        fail_msg("the paged-out waiter neither ran nor said why in the 20 s the holder was "
                 "stopped");
    }
    print_message("      the waiter %s\n", sg.said ? "said why it waits" : "ran");
    assert_true(sg.said <= 1);                               /* once */
    finish(&j[0], "first");
    finish(&j[1], "second");
    shm_unlink(state_name);
    shm_unlink(table_name);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_priority_preempts_full_device),
        cmocka_unit_test(test_priority_preempts_async_memory),
        cmocka_unit_test(test_gives_up_gpu_paging_cannot_help),
        cmocka_unit_test(test_fits_alone_outwaits_the_deadline),
        cmocka_unit_test(test_pack_jobs_waiting_for_each_other),
        cmocka_unit_test(test_pack_async_jobs_waiting_for_each_other),
        cmocka_unit_test(test_pack_killed_while_paged_out),
        cmocka_unit_test(test_stopped_holder_paged_waiter),
        cmocka_unit_test(test_stopped_holder_no_room),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
