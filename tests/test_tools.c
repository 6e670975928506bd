/*
 * test_tools.c - salus-top and salus end to end, over simgpu with salus-train
 * jobs that have libsalus preloaded: the live view in a real terminal
 * (tmux), the JSON and Prometheus snapshots, a policy change reaching the
 * running jobs, `salus run`'s environment, `salus reset` with and without
 * live processes, no table at all, bad arguments and help of every command,
 * the man pages, and make install.
 *
 * Divided into: helpers (running the tools, jobs, the table); the live
 * view; snapshots; policy; run; reset; arguments and help; pages and
 * install.
 *
 * Every test has its own simgpu state and table (tu_unique_name), names its
 * table with -t, and stops its jobs; each child has a deadline.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tools/top.h"
#include "lib/testutil.h"
#include "test_tools_json.h"

/* ---- helpers ------------------------------------------------------------------ */

static char table[64], gpu[64];

static int setup(void **state)
{
    (void)state;
    tu_unique_name("salus-tt", table, sizeof table);
    tu_unique_name("simgpu-tt", gpu, sizeof gpu);
    shm_unlink_table(table);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    shm_unlink_table(table);
    shm_unlink_table(gpu);
    return 0;
}

static int have(const char *rel)
{
    char path[512];
    return access(tu_build_path(rel, path, sizeof path), X_OK) == 0 ||
           access(path, R_OK) == 0;
}

static void need_build(void)
{
    if (!have("bin/salus") || !have("bin/salus-top") || !have("bin/salus-train") ||
        !have("libsalus.so") || !have("sim/libcuda.so.1")) {
        print_message("the tools, salus-train, libsalus or simgpu are not built\n");
        skip();
    }
}

/* A program's path from PATH, or NULL. */
static const char *which(const char *prog, char *buf, size_t len)
{
    const char *path = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s", path ? path : "/usr/bin:/bin");
    char *save = NULL;
    for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(buf, len, "%s/%s", d, prog);
        if (access(buf, X_OK) == 0)
            return buf;
    }
    return NULL;
}

typedef struct out {
    int rc;
    char *out, *err;
} out_t;

static void out_free(out_t *o)
{
    free(o->out);
    free(o->err);
}

/* Run build/bin/<tool> with args (NULL-terminated) in env; 20 s at most. */
static out_t tool_env(const tu_env_t *env, const char *tool, ...)
{
    char path[512];
    char *argv[40];
    int n = 0;
    argv[n++] = (char *)tu_build_path(tool, path, sizeof path);
    va_list ap;
    va_start(ap, tool);
    for (char *a; n < 39 && (a = va_arg(ap, char *)) != NULL;)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    tu_proc_t p;
    out_t o;
    o.rc = tu_run(argv, env, 20000, &p);
    o.out = tu_read_file(p.out_path, NULL);
    o.err = tu_read_file(p.err_path, NULL);
    assert_non_null(o.out);
    assert_non_null(o.err);
    return o;
}
#define TOOL(tool, ...) tool_env(NULL, tool, __VA_ARGS__, (char *)NULL)

/* A training job over simgpu with libsalus: 5 ms iterations for `seconds`. */
typedef struct job {
    tu_proc_t p;
    char report[512];
} job_t;

static void job_start(job_t *j, const char *name, const char *seconds)
{
    tu_env_t env;
    char prog[512];
    tu_env_init(&env);
    tu_env_salus(&env, gpu, table);
    tu_env_set(&env, "SALUS_NAME", "%s", name);
    snprintf(j->report, sizeof j->report, "%s/%s-%d.report", tu_tmpdir(), name, (int)getpid());
    unlink(j->report);
    tu_env_set(&env, "SALUS_REPORT", "%s", j->report);
    char *argv[] = { (char *)tu_build_path("bin/salus-train", prog, sizeof prog),
                     "--seconds", (char *)seconds, "--kernels", "5",
                     "--aux-kernels", "0", "--kernel-us", "1000", "--name", (char *)name,
                     NULL };
    assert_int_equal(tu_spawn(&j->p, argv, &env), 0);
    tu_env_free(&env);
}

/* Wait until the job's process has a slot with at least one iteration. */
static void job_wait_running(const job_t *j)
{
    uint64_t deadline = tu_now_ns() + 15ull * 1000000000;
    while (tu_now_ns() < deadline) {
        shm_table_t *t;
        if (top_open_table(table, "", 0, &t) == 0) {
            for (int s = 0; s < SHM_MAX_SLOTS; s++) {
                shm_ident_t id;
                sched_slot_info_t si;
                if (shm_slot_ident(t, s, &id) == 0 && id.pid == j->p.pid &&
                    sched_read_slot(t, s, &si) == 0 && si.iterations > 0) {
                    shm_close_table(t);
                    return;
                }
            }
            shm_close_table(t);
        }
        tu_sleep_ms(20);
    }
    char *err = tu_read_file(j->p.err_path, NULL);
    fail_msg("job %d did not start running in its table: %s", (int)j->p.pid, err ? err : "");
}

static void job_stop(job_t *j)
{
    if (j->p.exited)
        return;
    kill(j->p.pid, SIGTERM);
    int rc = tu_wait(&j->p, 15000);
    assert_int_equal(rc, 0);      /* SIGTERM ends the run cleanly */
}

static int contains(const char *text, const char *needle)
{
    return text && strstr(text, needle) != NULL;
}

/* ---- the live view ------------------------------------------------------------ */

typedef struct tmux {
    char bin[512], sock[64];
} tmux_t;

static int tmux(const tmux_t *tm, char **out, ...)
{
    char *argv[32];
    int n = 0;
    argv[n++] = (char *)tm->bin;
    argv[n++] = "-L";
    argv[n++] = (char *)tm->sock;
    va_list ap;
    va_start(ap, out);
    for (char *a; n < 31 && (a = va_arg(ap, char *)) != NULL;)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    tu_proc_t p;
    tu_env_t env;
    tu_env_init(&env);
    tu_env_set(&env, "TERM", "xterm-256color");
    int rc = tu_run(argv, &env, 10000, &p);
    tu_env_free(&env);
    if (out)
        *out = tu_read_file(p.out_path, NULL);
    return rc;
}

/* Capture the pane until it shows every needle (5 s at most). */
static char *screen_with(const tmux_t *tm, const char *const *needles)
{
    uint64_t deadline = tu_now_ns() + 8ull * 1000000000;
    char *screen = NULL;
    for (;;) {
        free(screen);
        screen = NULL;
        tmux(tm, &screen, "capture-pane", "-p", "-t", "top", NULL);
        int all = screen != NULL;
        for (int i = 0; all && needles[i]; i++)
            all = strstr(screen, needles[i]) != NULL;
        if (all || tu_now_ns() > deadline)
            return screen;
        tu_sleep_ms(100);
    }
}

static void assert_shows(const char *screen, const char *const *needles)
{
    for (int i = 0; needles[i]; i++)
        if (!contains(screen, needles[i]))
            fail_msg("the screen lacks \"%s\":\n%s", needles[i], screen ? screen : "(none)");
}

static int top_gone(void *tm)
{
    return tmux(tm, NULL, "has-session", "-t", "top", NULL) != 0;
}

static void test_top_in_terminal(void **state)
{
    (void)state;
    need_build();
    tmux_t tm;
    if (!which("tmux", tm.bin, sizeof tm.bin)) {
        print_message("tmux is not installed (mk/deps.sh test installs it)\n");
        skip();
    }
    snprintf(tm.sock, sizeof tm.sock, "salus-tt-%d", (int)getpid());
    job_t j;
    job_start(&j, "tmuxjob", "30");
    job_wait_running(&j);

    char top[512], cmd[1200];
    snprintf(cmd, sizeof cmd, "env SALUS_TABLE=%s %s -d 0.3 -t %s", table,
             tu_build_path("bin/salus-top", top, sizeof top), table);
    assert_int_equal(tmux(&tm, NULL, "new-session", "-d", "-x", "120", "-y", "40", "-s", "top",
                          cmd, NULL), 0);
    const char *const header[] = { "salus-top", "GPU 0", "policy fair", "quantum 100 ms",
                                   "lease", "PID", "USER", "NAME", "PRIO", "STATE",
                                   "MEM/LIMIT", "ITERS", "ITER ms", "GPU%", "WAIT%",
                                   "SWITCHES", "tmuxjob", "running", NULL };
    char *screen = screen_with(&tm, header);
    assert_shows(screen, header);
    char pid[16];
    snprintf(pid, sizeof pid, "%d", (int)j.p.pid);
    assert_non_null(strstr(screen, pid));
    free(screen);

    /* h shows the help, any key goes back */
    tmux(&tm, NULL, "send-keys", "-t", "top", "h", NULL);
    const char *const help[] = { "press any key", "quit", NULL };
    screen = screen_with(&tm, help);
    assert_shows(screen, help);
    free(screen);
    tmux(&tm, NULL, "send-keys", "-t", "top", "x", NULL);

    /* a narrow terminal keeps the row */
    tmux(&tm, NULL, "resize-window", "-t", "top", "-x", "40", "-y", "20", NULL);
    const char *const narrow[] = { "tmuxjob", "GPU%", NULL };
    screen = screen_with(&tm, narrow);
    assert_shows(screen, narrow);
    assert_null(strstr(screen, "SWITCHES"));
    free(screen);

    /* the job exits: salus-top says so and goes on */
    job_stop(&j);
    const char *const gone[] = { "exited", NULL };
    screen = screen_with(&tm, gone);
    assert_shows(screen, gone);
    free(screen);

    /* q quits */
    tmux(&tm, NULL, "send-keys", "-t", "top", "q", NULL);
    int quit = tu_await(top_gone, &tm, 5000);
    tmux(&tm, NULL, "kill-server", NULL);
    assert_true(quit);
}

/* ---- snapshots ---------------------------------------------------------------- */

static void check_json_snapshot(const char *text, pid_t pid, const char *name)
{
    char err[128];
    tj_t *root = tj_parse(text, err, sizeof err);
    if (!root)
        fail_msg("not valid JSON (%s): %s", err, text);
    const tj_t *devs = tj_get(root, "devices");
    assert_non_null(devs);
    assert_int_equal(devs->type, TJ_ARR);
    assert_int_equal(devs->n, 1);
    const tj_t *d = tj_at(devs, 0);
    static const char *const dfields[] = { "index", "capacity_bytes", "used_bytes", "policy",
                                           "quantum_ms", "processes", NULL };
    static const tj_type_t dtypes[] = { TJ_NUM, TJ_NUM, TJ_NUM, TJ_STR, TJ_NUM, TJ_ARR };
    for (int i = 0; dfields[i]; i++) {
        const tj_t *f = tj_get(d, dfields[i]);
        if (!f || f->type != dtypes[i])
            fail_msg("device field \"%s\" missing or of the wrong type: %s", dfields[i], text);
    }
    assert_string_equal(tj_get(d, "policy")->str, "fair");
    assert_int_equal(tj_get(d, "quantum_ms")->num, 100);
    const tj_t *procs = tj_get(d, "processes");
    assert_int_equal(procs->n, 1);
    const tj_t *p = tj_at(procs, 0);
    static const char *const pfields[] = { "pid", "name", "user", "priority", "state",
        "mem_used_bytes", "mem_limit_bytes", "iterations", "iter_ms", "gpu_share",
        "wait_share", "switches", NULL };
    static const tj_type_t ptypes[] = { TJ_NUM, TJ_STR, TJ_STR, TJ_NUM, TJ_STR, TJ_NUM,
        TJ_NUM, TJ_NUM, TJ_NUM, TJ_NUM, TJ_NUM, TJ_NUM };
    for (int i = 0; pfields[i]; i++) {
        const tj_t *f = tj_get(p, pfields[i]);
        if (!f || f->type != ptypes[i])
            fail_msg("process field \"%s\" missing or of the wrong type: %s", pfields[i], text);
    }
    assert_int_equal((pid_t)tj_get(p, "pid")->num, pid);
    assert_string_equal(tj_get(p, "name")->str, name);
    assert_int_equal(tj_get(p, "priority")->num, 50);
    const char *st = tj_get(p, "state")->str;
    assert_true(strcmp(st, "running") == 0 || strcmp(st, "idle") == 0 ||
                strcmp(st, "waiting-gpu") == 0 || strcmp(st, "waiting-mem") == 0);
    assert_true(tj_get(p, "iterations")->num > 0);
    double share = tj_get(p, "gpu_share")->num;
    assert_true(share >= 0 && share <= 1);
    tj_free(root);
}

static void test_once_json(void **state)
{
    (void)state;
    need_build();
    job_t j;
    job_start(&j, "jsonjob", "30");
    job_wait_running(&j);

    out_t o = TOOL("bin/salus-top", "--once", "--json", "-d", "0.3", "-t", table);
    assert_int_equal(o.rc, 0);
    check_json_snapshot(o.out, j.p.pid, "jsonjob");
    out_free(&o);
    o = TOOL("bin/salus", "status", "--json", "-t", table);       /* the same, through salus */
    assert_int_equal(o.rc, 0);
    check_json_snapshot(o.out, j.p.pid, "jsonjob");
    out_free(&o);

    o = TOOL("bin/salus", "status", "-t", table);
    assert_int_equal(o.rc, 0);
    assert_true(contains(o.out, "jsonjob") && contains(o.out, "GPU 0") &&
                contains(o.out, "GPU%"));
    out_free(&o);

    o = TOOL("bin/salus-top", "--prometheus", "-t", table);
    assert_int_equal(o.rc, 0);
    char want[256];
    snprintf(want, sizeof want, "salus_process_iterations_total{table=\"%s\",device=\"0\","
             "pid=\"%d\",name=\"jsonjob\"", table, (int)j.p.pid);
    if (!contains(o.out, want) || !contains(o.out, "# TYPE salus_process_gpu_share gauge"))
        fail_msg("Prometheus output lacks %s:\n%s", want, o.out);
    out_free(&o);
    job_stop(&j);
}

static void test_no_table(void **state)
{
    (void)state;
    need_build();
    out_t o = TOOL("bin/salus-top", "--once", "-t", table);
    assert_int_equal(o.rc, 0);
    assert_true(contains(o.out, table) && contains(o.out, "does not exist"));
    out_free(&o);
    o = TOOL("bin/salus-top", "--once", "--json", "-t", table);
    assert_int_equal(o.rc, 0);
    char err[128];
    tj_t *root = tj_parse(o.out, err, sizeof err);
    assert_non_null(root);
    assert_int_equal(tj_get(root, "devices")->n, 0);
    assert_true(contains(tj_get(root, "note")->str, "does not exist"));
    tj_free(root);
    out_free(&o);
}

/* ---- policy ----------------------------------------------------------------------- */

static void test_policy_reaches_jobs(void **state)
{
    (void)state;
    need_build();
    job_t a, b;
    job_start(&a, "polA", "30");
    job_start(&b, "polB", "30");
    job_wait_running(&a);
    job_wait_running(&b);

    out_t o = TOOL("bin/salus", "policy", "-t", table);
    assert_int_equal(o.rc, 0);
    assert_true(contains(o.out, "GPU 0") && contains(o.out, "policy fair"));
    out_free(&o);

    o = TOOL("bin/salus", "policy", "pack", "-t", table);
    if (o.rc != 0 || !contains(o.out, "policy pack (was fair)"))
        fail_msg("salus policy pack: rc %d: %s%s", o.rc, o.out, o.err);
    out_free(&o);

    shm_table_t *t;
    sched_device_info_t di;
    assert_int_equal(top_open_table(table, "", 0, &t), 0);
    assert_int_equal(sched_read_device(t, 0, &di), 0);
    assert_int_equal(di.policy, SCHED_POLICY_PACK);
    assert_int_equal(di.holder, -1);
    /* both run at once: neither waits for a lease any more */
    uint64_t deadline = tu_now_ns() + 5ull * 1000000000;
    int waiting;
    do {
        waiting = 0;
        for (int s = 0; s < SHM_MAX_SLOTS; s++) {
            shm_ident_t id;
            if (shm_slot_ident(t, s, &id) == 0 && id.state == SHM_WAIT_GPU)
                waiting++;
        }
        if (waiting)
            tu_sleep_ms(20);
    } while (waiting && tu_now_ns() < deadline);
    assert_int_equal(waiting, 0);
    shm_close_table(t);

    o = TOOL("bin/salus", "policy", "fair", "--quantum", "20", "-t", table);
    assert_int_equal(o.rc, 0);
    assert_true(contains(o.out, "policy fair (was pack), quantum 20 ms"));
    out_free(&o);
    o = TOOL("bin/salus", "policy", "priority", "-t", table);
    assert_int_equal(o.rc, 0);
    out_free(&o);

    /* the jobs' own reports say which policy they ended under */
    job_stop(&a);
    job_stop(&b);
    char *rep = tu_read_file(a.report, NULL);
    if (!contains(rep, "\"policy\":\"priority\""))
        fail_msg("job A's report: %s", rep ? rep : "(none)");
    free(rep);
}

/* ---- run ------------------------------------------------------------------------------ */

static void test_run_sets_environment(void **state)
{
    (void)state;
    need_build();
    char envbin[512], lib[512], real[4096];
    if (!which("env", envbin, sizeof envbin))
        skip();
    tu_env_t env;
    tu_env_init(&env);
    tu_env_set(&env, "LD_PRELOAD", "/nonexistent/other.so");
    tu_env_set(&env, "SALUS_LOG", "error");
    tu_env_set(&env, "SALUS_POLCY", "srtf");               /* misspelled: said, kept */
    out_t o = tool_env(&env, "bin/salus", "run", "--priority", "7", "--mem", "1G",
                       "--reserve", "25%", "--policy", "SRTF", "--iterations", "50",
                       "--quantum", "20", "--name", "envjob", "--table", "salus-tt-x",
                       "--", envbin, (char *)NULL);
    tu_env_free(&env);
    assert_int_equal(o.rc, 0);
    static const char *const want[] = { "SALUS_PRIORITY=7\n", "SALUS_MEM_LIMIT=1G\n",
        "SALUS_MEM_RESERVE=25%\n", "SALUS_POLICY=SRTF\n", "SALUS_ITERATIONS=50\n",
        "SALUS_QUANTUM_MS=20\n", "SALUS_NAME=envjob\n", "SALUS_TABLE=salus-tt-x\n",
        "SALUS_LOG=error\n", "SALUS_POLCY=srtf\n", NULL };
    for (int i = 0; want[i]; i++)
        if (!contains(o.out, want[i]))
            fail_msg("salus run did not set %s in:\n%s", want[i], o.out);
    if (!contains(o.err, "SALUS_POLCY is not a variable of Salus and is ignored: did you mean "
                         "SALUS_POLICY?"))
        fail_msg("salus run did not name the misspelled variable:\n%s", o.err);
    assert_non_null(realpath(tu_build_path("libsalus.so", lib, sizeof lib), real));
    char preload[4200];
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s:/nonexistent/other.so\n", real);
    if (!contains(o.out, preload))
        fail_msg("LD_PRELOAD is not \"%s\" in:\n%s", preload, o.out);
    out_free(&o);
}

static void test_run_preloads(void **state)
{
    (void)state;
    need_build();
    char report[512], prog[512];
    snprintf(report, sizeof report, "%s/run-%d.report", tu_tmpdir(), (int)getpid());
    unlink(report);
    tu_env_t env;
    tu_env_init(&env);
    tu_env_simgpu(&env, gpu);
    tu_env_set(&env, "SALUS_TABLE", "%s", table);
    out_t o = tool_env(&env, "bin/salus", "run", "--report", report, "--priority", "80",
                       tu_build_path("bin/salus-train", prog, sizeof prog), "--preset", "tiny",
                       (char *)NULL);
    tu_env_free(&env);
    if (o.rc != 0)
        fail_msg("salus run salus-train: rc %d: %s", o.rc, o.err);
    char *rep = tu_read_file(report, NULL);
    if (!contains(rep, "\"launches\":200") || !contains(rep, "\"iterations\":20"))
        fail_msg("the job ran without libsalus? report: %s", rep ? rep : "(none)");
    free(rep);
    out_free(&o);
}

/* ---- reset ------------------------------------------------------------------------------ */

static int table_exists(void)
{
    char path[128];
    snprintf(path, sizeof path, "/dev/shm%s", table);
    return access(path, F_OK) == 0;
}

static void test_reset(void **state)
{
    (void)state;
    need_build();
    job_t j;
    job_start(&j, "resetjob", "30");
    job_wait_running(&j);

    out_t o = TOOL("bin/salus", "reset", "-t", table);
    char pid[32];
    snprintf(pid, sizeof pid, "%d (resetjob)", (int)j.p.pid);
    if (o.rc != 1 || !contains(o.err, pid) || !contains(o.err, "--force"))
        fail_msg("salus reset with a live job: rc %d: %s", o.rc, o.err);
    assert_true(table_exists());
    out_free(&o);

    kill(j.p.pid, SIGKILL);             /* it dies: the table is stale */
    tu_wait(&j.p, 10000);
    o = TOOL("bin/salus", "reset", "-t", table);
    if (o.rc != 0 || !contains(o.out, "removed table"))
        fail_msg("salus reset of a stale table: rc %d: %s%s", o.rc, o.out, o.err);
    assert_false(table_exists());
    out_free(&o);
    o = TOOL("bin/salus", "reset", "-t", table);
    assert_int_equal(o.rc, 0);
    assert_true(contains(o.out, "nothing to remove"));
    out_free(&o);
}

static void test_reset_force(void **state)
{
    (void)state;
    need_build();
    job_t j;
    job_start(&j, "forcejob", "30");
    job_wait_running(&j);
    out_t o = TOOL("bin/salus", "reset", "--force", "-t", table);
    if (o.rc != 0 || !contains(o.out, "removed table") || !contains(o.out, "1 process"))
        fail_msg("salus reset --force: rc %d: %s%s", o.rc, o.out, o.err);
    assert_false(table_exists());
    out_free(&o);
    tu_sleep_ms(100);
    job_stop(&j);                        /* the job went on with the old table */
}

/* ---- arguments and help ------------------------------------------------------------- */

static void bad(const char *tool, const char *mention, char *const args[])
{
    char path[512];
    char *argv[16];
    int n = 0;
    argv[n++] = (char *)tu_build_path(tool, path, sizeof path);
    for (int i = 0; args[i] && n < 15; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    tu_proc_t p;
    int rc = tu_run(argv, NULL, 10000, &p);
    char *err = tu_read_file(p.err_path, NULL);
    if (rc != 2 || !contains(err, mention))
        fail_msg("%s %s ...: rc %d (want 2), stderr lacks \"%s\": %s", tool, args[0], rc,
                 mention, err ? err : "");
    free(err);
}
#define BAD(tool, mention, ...) bad(tool, mention, (char *[]){ __VA_ARGS__, NULL })

static void test_bad_arguments(void **state)
{
    (void)state;
    need_build();
    BAD("bin/salus-top", "\"abc\"", "-d", "abc");
    BAD("bin/salus-top", "0.1", "-d", "0");
    BAD("bin/salus-top", "-d", "-d", "99999");
    BAD("bin/salus-top", "\"bogus\"", "--sort", "bogus");
    BAD("bin/salus-top", "--bogus", "--bogus");
    BAD("bin/salus-top", "needs a value", "-t");
    BAD("bin/salus-top", "extra", "extra");
    BAD("bin/salus-top", "--prometheus", "--json", "--prometheus");
    BAD("bin/salus", "run, status", "bogus");
    BAD("bin/salus", "run, status", "--bogus");
    BAD("bin/salus", "--priority \"101\"", "run", "--priority", "101", "--", "true");
    BAD("bin/salus", "--priority \"x\"", "run", "--priority", "x", "true");
    BAD("bin/salus", "--mem \"0\"", "run", "--mem", "0", "true");
    BAD("bin/salus", "--mem \"5X\"", "run", "--mem", "5X", "true");
    BAD("bin/salus", "without a unit is refused", "run", "--mem", "20", "true");
    BAD("bin/salus", "20G, 512M", "run", "--reserve", "nan%", "true");
    BAD("bin/salus", "--mem \"150%\"", "run", "--mem", "150%", "true");
    BAD("bin/salus", "--reserve \"-1G\"", "run", "--reserve", "-1G", "true");
    BAD("bin/salus", "fifo, fair, priority, srtf, pack", "run", "--policy", "lifo", "true");
    BAD("bin/salus", "--iterations \"0\"", "run", "--iterations", "0", "true");
    BAD("bin/salus", "--quantum \"-5\"", "run", "--quantum", "-5", "true");
    BAD("bin/salus", "--name \"\"", "run", "--name", "", "true");
    BAD("bin/salus", "--table \"a b\"", "run", "--table", "a b", "true");
    BAD("bin/salus", "error, warn, info, debug", "run", "--log", "loud", "true");
    BAD("bin/salus", "COMMAND is missing", "run", "--priority", "5");
    BAD("bin/salus", "needs a value", "run", "--mem");
    BAD("bin/salus", "--frob", "run", "--frob", "true");
    BAD("bin/salus", "lifo is not a policy", "policy", "lifo");
    BAD("bin/salus", "--quantum \"soon\"", "policy", "fair", "--quantum", "soon");
    BAD("bin/salus", "--device \"99\"", "policy", "--device", "99");
    BAD("bin/salus", "too many", "policy", "fair", "pack");
    BAD("bin/salus", "--bogus", "policy", "--bogus");
    BAD("bin/salus", "extra", "reset", "extra");
    BAD("bin/salus", "needs a value", "reset", "-t");
    BAD("bin/salus", "exclude", "reset", "--all", "-t", "x");
    BAD("bin/salus", "--bogus", "status", "--bogus");
    BAD("bin/salus", "is not a command", "help", "bogus");
}

static void test_help(void **state)
{
    (void)state;
    need_build();
    static const char *const cmds[][3] = {
        { "bin/salus", "--help", NULL }, { "bin/salus", "run", "--help" },
        { "bin/salus", "status", "--help" }, { "bin/salus", "policy", "--help" },
        { "bin/salus", "reset", "--help" }, { "bin/salus-top", "--help", NULL },
        { "bin/salus", "help", "run" },
    };
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        out_t o = TOOL(cmds[i][0], cmds[i][1], cmds[i][2]);
        if (o.rc != 0 || !contains(o.out, "usage:") || !contains(o.out, "example") ||
            !contains(o.out, "environment") || !contains(o.out, "exit status"))
            fail_msg("%s %s %s: rc %d, incomplete help:\n%s", cmds[i][0], cmds[i][1],
                     cmds[i][2] ? cmds[i][2] : "", o.rc, o.out);
        out_free(&o);
    }
    out_t o = TOOL("bin/salus", "run", "--help");
    static const char *const vars[] = { "SALUS_PRIORITY", "SALUS_MEM_LIMIT",
        "SALUS_MEM_RESERVE", "SALUS_POLICY", "SALUS_ITERATIONS", "SALUS_QUANTUM_MS",
        "SALUS_NAME", "LD_PRELOAD", NULL };
    for (int i = 0; vars[i]; i++)
        assert_true(contains(o.out, vars[i]));
    out_free(&o);
}

/* ---- pages and install ----------------------------------------------------------------- */

static void test_man_pages(void **state)
{
    (void)state;
    char groff[512];
    if (!which("groff", groff, sizeof groff)) {
        print_message("groff is not installed\n");
        skip();
    }
    static const char *const pages[] = { "tools/man/salus.1", "tools/man/salus-top.1",
                                         "tools/man/libsalus.7", NULL };
    for (int i = 0; pages[i]; i++) {
        char path[512];
        char *argv[] = { groff, "-man", "-Tutf8", "-ww", "-z",
                         (char *)tu_source_path(pages[i], path, sizeof path), NULL };
        tu_proc_t p;
        int rc = tu_run(argv, NULL, 20000, &p);
        char *err = tu_read_file(p.err_path, NULL);
        if (rc != 0 || !err || err[0])
            fail_msg("groff warns about %s: %s", pages[i], err ? err : "");
        free(err);
    }
    /* libsalus(7) documents every variable of libsalus's one list... */
    char src[512], page[512], cmd[1400];
    char *text = tu_read_file(tu_source_path("tools/man/libsalus.7", page, sizeof page), NULL);
    assert_non_null(text);
    for (int i = 0; i < UTIL_VAR_COUNT; i++) {
        char entry[160];
        snprintf(entry, sizeof entry, ".BI %s=", util_vars[i].name);
        if (!contains(text, entry))
            fail_msg("libsalus(7) has no entry \"%s\" for %s", entry, util_vars[i].name);
    }
    /* ...and every policy of the scheduler's one list. */
    for (int i = 0; i < SCHED_POLICY_COUNT; i++) {
        char entry[160];
        snprintf(entry, sizeof entry, ".B %s\n", sched_policy_names[i]);
        if (!contains(text, entry))
            fail_msg("libsalus(7) has no entry \"%s\" for the policy", entry);
    }
    free(text);
    /* ...and no module reads a SALUS_ variable around the list. */
    tu_source_path("src", src, sizeof src);
    snprintf(cmd, sizeof cmd, "grep -rnE '(getenv|util_env_str) *\\(\"SALUS_' %s", src);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    char line[512];
    if (fgets(line, sizeof line, f))
        fail_msg("a SALUS_ variable read outside util/vars.h's list: %s", line);
    pclose(f);
}

static void test_install(void **state)
{
    (void)state;
    need_build();
    char make[512], root[512], dest[600];
    if (!which("make", make, sizeof make))
        skip();
    tu_source_path("", root, sizeof root);
    snprintf(dest, sizeof dest, "DESTDIR=%s/inst", tu_tmpdir());
    /* What the build made is installed as it is: -o keeps make from rebuilding
     * it (files may be mid-edit while the tests run in a working tree). */
    char *argv[] = { make, "--no-print-directory", "-C", root, "-o", "build/libsalus.so",
                     "-o", "build/bin/salus", "-o", "build/bin/salus-top", "tools-install",
                     dest, "PREFIX=/opt/salus", NULL };
    tu_proc_t p;
    int rc = tu_run(argv, NULL, 100000, &p);
    if (rc != 0) {
        char *err = tu_read_file(p.err_path, NULL);
        fail_msg("make tools-install: rc %d: %s", rc, err ? err : "");
    }
    static const char *const files[] = { "bin/salus", "bin/salus-top", "lib/libsalus.so",
        "share/man/man1/salus.1", "share/man/man1/salus-top.1", "share/man/man7/libsalus.7",
        NULL };
    for (int i = 0; files[i]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/inst/opt/salus/%s", tu_tmpdir(), files[i]);
        if (access(path, R_OK) != 0)
            fail_msg("make install did not put %s in place", path);
    }
    /* the installed salus preloads the installed library */
    char salus[1024], envbin[512], want[1200];
    snprintf(salus, sizeof salus, "%s/inst/opt/salus/bin/salus", tu_tmpdir());
    if (!which("env", envbin, sizeof envbin))
        return;
    char *run[] = { salus, "run", "--", envbin, NULL };
    tu_env_t env;
    tu_env_init(&env);
    tu_env_unset(&env, "LD_PRELOAD");
    rc = tu_run(run, &env, 10000, &p);
    tu_env_free(&env);
    assert_int_equal(rc, 0);
    char *out = tu_read_file(p.out_path, NULL);
    snprintf(want, sizeof want, "LD_PRELOAD=%s/inst/opt/salus/lib/libsalus.so\n", tu_tmpdir());
    if (!contains(out, want))
        fail_msg("installed salus run: want %s in %s", want, out ? out : "");
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_top_in_terminal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_once_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_table, setup, teardown),
        cmocka_unit_test_setup_teardown(test_policy_reaches_jobs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_run_sets_environment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_run_preloads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reset_force, setup, teardown),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_man_pages),
        cmocka_unit_test(test_install),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
