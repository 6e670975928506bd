/*
 * test_tools.c - salus-top and salus end to end, over simgpu with salus-train
 * jobs that have libsalus preloaded: the live view in a real terminal
 * (tmux), the JSON and Prometheus snapshots, a policy change reaching the
 * running jobs, `salus run`'s environment, `salus reset` with and without
 * live processes, no table at all, bad arguments and help of every command.
 * The pages and packages are test_tools_docs's.
 *
 * Divided into: helpers (running the tools, jobs, the table); the live
 * view; snapshots; policy; run; reset; arguments and help.
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
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tools/top.h"
#include "lib/testutil.h"
#include "test_tools_json.h"
#include "test_tools_lib.h"

/* ---- the live view ------------------------------------------------------------ */

static void test_top_in_terminal(void **state)
{
    (void)state;
    tt_need_build();
    tt_tmux_t tm;
    tt_tmux_need(&tm, "salus-tt");
    tt_job_t j;
    tt_job_start(&j, "tmuxjob", "30");
    tt_job_wait_running(&j);
    tt_top_start(&tm, "0.3", "120", "40");
    const char *const header[] = { "salus-top", "GPU 0", "policy fair", "quantum 100 ms",
                                   "lease", "PID", "USER", "NAME", "PRIO", "STATE",
                                   "MEM/LIMIT", "ITERS", "ITER ms", "GPU%", "WAIT%",
                                   "SWITCHES", "tmuxjob", "running", NULL };
    char *screen = tt_screen_with(&tm, header);
    tt_assert_shows(screen, header);
    char pid[16];
    snprintf(pid, sizeof pid, "%d", (int)j.p.pid);
    assert_non_null(strstr(screen, pid));
    free(screen);

    /* h shows the help, any key goes back */
    tt_tmux(&tm, NULL, "send-keys", "-t", "top", "h", NULL);
    const char *const help[] = { "press any key", "quit", "k is kill", NULL };
    screen = tt_screen_with(&tm, help);
    tt_assert_shows(screen, help);
    assert_null(strstr(screen, "also j"));           /* no vi key for down beside k = kill */
    free(screen);
    tt_tmux(&tm, NULL, "send-keys", "-t", "top", "x", NULL);

    /* a narrow terminal keeps the row */
    tt_tmux(&tm, NULL, "resize-window", "-t", "top", "-x", "40", "-y", "20", NULL);
    const char *const narrow[] = { "tmuxjob", "GPU%", NULL };
    screen = tt_screen_with(&tm, narrow);
    tt_assert_shows(screen, narrow);
    assert_null(strstr(screen, "SWITCHES"));
    free(screen);

    /* the job exits: salus-top says so and goes on */
    tt_job_stop(&j);
    const char *const gone[] = { "exited", NULL };
    screen = tt_screen_with(&tm, gone);
    tt_assert_shows(screen, gone);
    free(screen);

    /* q quits */
    tt_tmux(&tm, NULL, "send-keys", "-t", "top", "q", NULL);
    int quit = tu_await(tt_top_gone, &tm, 5000);
    tt_tmux(&tm, NULL, "kill-server", NULL);
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
    static const char *const dfields[] = { "index", "mem_capacity_bytes", "mem_used_bytes", "policy",
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
        "wait_share", "switches", "swapped_out_bytes", "pinned_bytes", NULL };
    static const tj_type_t ptypes[] = { TJ_NUM, TJ_STR, TJ_STR, TJ_NUM, TJ_STR, TJ_NUM,
        TJ_NUM, TJ_NUM, TJ_NUM, TJ_NUM, TJ_NUM, TJ_NUM, TJ_NUM, TJ_NUM };
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
    tt_need_build();
    tt_job_t j;
    tt_job_start(&j, "jsonjob", "30");
    tt_job_wait_running(&j);

    tt_out_t o = TT_TOOL("bin/salus-top", "--once", "--json", "-d", "0.3", "-t", tt_table);
    assert_int_equal(o.rc, 0);
    check_json_snapshot(o.out, j.p.pid, "jsonjob");
    tt_out_free(&o);
    o = TT_TOOL("bin/salus", "status", "--json", "-t", tt_table);       /* the same, through salus */
    assert_int_equal(o.rc, 0);
    check_json_snapshot(o.out, j.p.pid, "jsonjob");
    tt_out_free(&o);

    o = TT_TOOL("bin/salus", "status", "-t", tt_table);
    assert_int_equal(o.rc, 0);
    assert_true(tt_contains(o.out, "jsonjob") && tt_contains(o.out, "GPU 0") &&
                tt_contains(o.out, "GPU%"));
    tt_out_free(&o);

    o = TT_TOOL("bin/salus-top", "--prometheus", "-t", tt_table);
    assert_int_equal(o.rc, 0);
    char want[256], who[128];
    snprintf(want, sizeof want, "salus_process_iterations_total{table=\"%s\",table_device=\"0\","
             "gpu=\"0\",UUID=\"GPU-", tt_table);
    snprintf(who, sizeof who, ",pid=\"%d\",name=\"jsonjob\"", (int)j.p.pid);
    if (!tt_contains(o.out, want) || !tt_contains(o.out, who) ||
        !tt_contains(o.out, "# TYPE salus_process_gpu_share gauge"))
        fail_msg("Prometheus output lacks %s...%s:\n%s", want, who, o.out);
    tt_out_free(&o);
    tt_job_stop(&j);
}

static void test_no_table(void **state)
{
    (void)state;
    tt_need_build();
    tt_out_t o = TT_TOOL("bin/salus-top", "--once", "-t", tt_table);
    assert_int_equal(o.rc, 0);
    assert_true(tt_contains(o.out, tt_table) && tt_contains(o.out, "does not exist"));
    tt_out_free(&o);
    o = TT_TOOL("bin/salus-top", "--once", "--json", "-t", tt_table);
    assert_int_equal(o.rc, 0);
    char err[128];
    tj_t *root = tj_parse(o.out, err, sizeof err);
    assert_non_null(root);
    assert_int_equal(tj_get(root, "devices")->n, 0);
    assert_true(tt_contains(tj_get(root, "note")->str, "does not exist"));
    tj_free(root);
    tt_out_free(&o);
}

/* ---- policy ----------------------------------------------------------------------- */

static void test_policy_reaches_jobs(void **state)
{
    (void)state;
    tt_need_build();
    tt_job_t a, b;
    tt_job_start(&a, "polA", "30");
    tt_job_start(&b, "polB", "30");
    tt_job_wait_running(&a);
    tt_job_wait_running(&b);

    tt_out_t o = TT_TOOL("bin/salus", "policy", "-t", tt_table);
    assert_int_equal(o.rc, 0);
    assert_true(tt_contains(o.out, "GPU 0") && tt_contains(o.out, "policy fair"));
    tt_out_free(&o);

    o = TT_TOOL("bin/salus", "policy", "pack", "-t", tt_table);
    if (o.rc != 0 || !tt_contains(o.out, "policy pack (was fair)"))
        fail_msg("salus policy pack: rc %d: %s%s", o.rc, o.out, o.err);
    tt_out_free(&o);

    shm_table_t *t;
    sched_device_info_t di;
    assert_int_equal(top_open_table(tt_table, "", 0, &t), 0);
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

    o = TT_TOOL("bin/salus", "policy", "fair", "--quantum", "20", "-t", tt_table);
    assert_int_equal(o.rc, 0);
    assert_true(tt_contains(o.out, "policy fair (was pack), quantum 20 ms"));
    tt_out_free(&o);
    /* srtf with no length to rank by is fair, and says so, in the reply and
     * beside the policy in salus-top; a job that declares one ends that. */
    static const char no_lengths[] = "no job there declares its length";
    o = TT_TOOL("bin/salus", "policy", "srtf", "-t", tt_table);
    if (o.rc != 0 || !tt_contains(o.out, no_lengths))
        fail_msg("salus policy srtf without lengths: rc %d: %s%s", o.rc, o.out, o.err);
    tt_out_free(&o);
    o = TT_TOOL("bin/salus-top", "--once", "-d", "0", "-t", tt_table);
    if (o.rc != 0 || !tt_contains(o.out, "(no job declares a length: as fair)"))
        fail_msg("salus-top under srtf without lengths: rc %d: %s%s", o.rc, o.out, o.err);
    tt_out_free(&o);
    tt_job_t c;
    static const char *const declares[] = { "SALUS_ITERATIONS=100000", NULL };
    tt_job_start_env(&c, "polC", "30", "0", declares);
    tt_job_wait_running(&c);
    o = TT_TOOL("bin/salus", "policy", "srtf", "-t", tt_table);
    if (o.rc != 0 || tt_contains(o.out, no_lengths))
        fail_msg("salus policy srtf with a declared length: rc %d: %s%s", o.rc, o.out, o.err);
    tt_out_free(&o);
    o = TT_TOOL("bin/salus-top", "--once", "-d", "0", "-t", tt_table);
    if (o.rc != 0 || tt_contains(o.out, "(no job declares a length"))
        fail_msg("salus-top under srtf with a declared length: %s", o.out);
    tt_out_free(&o);
    tt_job_stop(&c);

    o = TT_TOOL("bin/salus", "policy", "priority", "-t", tt_table);
    assert_int_equal(o.rc, 0);
    tt_out_free(&o);

    /* the jobs' own reports say which policy they ended under */
    tt_job_stop(&a);
    tt_job_stop(&b);
    char *rep = tu_read_file(a.report, NULL);
    if (!tt_contains(rep, "\"policy\":\"priority\""))
        fail_msg("job A's report: %s", rep ? rep : "(none)");
    free(rep);
}

/* ---- run ------------------------------------------------------------------------------ */

static void test_run_sets_environment(void **state)
{
    (void)state;
    tt_need_build();
    char envbin[512], lib[512], real[4096];
    if (!tt_which("env", envbin, sizeof envbin))
        skip();
    tu_env_t env;
    tu_env_init(&env);
    tu_env_set(&env, "LD_PRELOAD", "/nonexistent/other.so");
    tu_env_set(&env, "SALUS_LOG", "error");
    tu_env_set(&env, "SALUS_POLCY", "srtf");               /* misspelled: said, kept */
    tt_out_t o = tt_tool_env(&env, "bin/salus", "run", "--priority", "7", "--mem", "1G",
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
        if (!tt_contains(o.out, want[i]))
            fail_msg("salus run did not set %s in:\n%s", want[i], o.out);
    if (!tt_contains(o.err, "SALUS_POLCY is not a variable of Salus and is ignored: did you mean "
                         "SALUS_POLICY?"))
        fail_msg("salus run did not name the misspelled variable:\n%s", o.err);
    assert_non_null(realpath(tu_build_path("libsalus.so", lib, sizeof lib), real));
    char preload[4200];
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s:/nonexistent/other.so\n", real);
    if (!tt_contains(o.out, preload))
        fail_msg("LD_PRELOAD is not \"%s\" in:\n%s", preload, o.out);
    tt_out_free(&o);
}

static void test_run_preloads(void **state)
{
    (void)state;
    tt_need_build();
    char report[512], prog[512];
    snprintf(report, sizeof report, "%s/run-%d.report", tu_tmpdir(), (int)getpid());
    unlink(report);
    tu_env_t env;
    tu_env_init(&env);
    tu_env_simgpu(&env, tt_gpu);
    tu_env_set(&env, "SALUS_TABLE", "%s", tt_table);
    tt_out_t o = tt_tool_env(&env, "bin/salus", "run", "--report", report, "--priority", "80",
                       tu_build_path("bin/salus-train", prog, sizeof prog), "--preset", "tiny",
                       (char *)NULL);
    tu_env_free(&env);
    if (o.rc != 0)
        fail_msg("salus run salus-train: rc %d: %s", o.rc, o.err);
    char *rep = tu_read_file(report, NULL);
    if (!tt_contains(rep, "\"launches\":200") || !tt_contains(rep, "\"iterations\":20"))
        fail_msg("the job ran without libsalus? report: %s", rep ? rep : "(none)");
    free(rep);
    tt_out_free(&o);
}

/* ---- reset ------------------------------------------------------------------------------ */

static int table_exists(void)
{
    char path[128];
    snprintf(path, sizeof path, "/dev/shm%s", tt_table);
    return access(path, F_OK) == 0;
}

static void test_reset(void **state)
{
    (void)state;
    tt_need_build();
    tt_job_t j;
    tt_job_start(&j, "resetjob", "30");
    tt_job_wait_running(&j);

    tt_out_t o = TT_TOOL("bin/salus", "reset", "-t", tt_table);
    char pid[32];
    snprintf(pid, sizeof pid, "%d (resetjob)", (int)j.p.pid);
    if (o.rc != 1 || !tt_contains(o.err, pid) || !tt_contains(o.err, "--force"))
        fail_msg("salus reset with a live job: rc %d: %s", o.rc, o.err);
    assert_true(table_exists());
    tt_out_free(&o);

    kill(j.p.pid, SIGKILL);             /* it dies: the table is stale */
    tu_wait(&j.p, 10000);
    char claim[512];                    /* the job's GPU claim, nobody's now */
    assert_int_equal(tu_claim_of(tt_table, claim, sizeof claim), 0);
    o = TT_TOOL("bin/salus", "reset", "-t", tt_table);
    if (o.rc != 0 || !tt_contains(o.out, "removed table"))
        fail_msg("salus reset of a stale table: rc %d: %s%s", o.rc, o.out, o.err);
    assert_false(table_exists());
    assert_int_equal(tu_claim_of(tt_table, claim, sizeof claim), -1);  /* gone with it */
    tt_out_free(&o);
    o = TT_TOOL("bin/salus", "reset", "-t", tt_table);
    assert_int_equal(o.rc, 0);
    assert_true(tt_contains(o.out, "nothing to remove"));
    tt_out_free(&o);
}

static void test_reset_force(void **state)
{
    (void)state;
    tt_need_build();
    tt_job_t j;
    tt_job_start(&j, "forcejob", "30");
    tt_job_wait_running(&j);
    tt_out_t o = TT_TOOL("bin/salus", "reset", "--force", "-t", tt_table);
    if (o.rc != 0 || !tt_contains(o.out, "removed table") || !tt_contains(o.out, "1 process"))
        fail_msg("salus reset --force: rc %d: %s%s", o.rc, o.out, o.err);
    assert_false(table_exists());
    char claim[512];                        /* the live job's claim stays */
    assert_int_equal(tu_claim_of(tt_table, claim, sizeof claim), 0);
    tt_out_free(&o);
    tu_sleep_ms(100);
    tt_job_stop(&j);                        /* the job went on with the old table */
    o = TT_TOOL("bin/salus", "reset", "-t", tt_table);
    assert_int_equal(o.rc, 0);
    assert_true(tt_contains(o.out, "nothing to remove"));
    assert_int_equal(tu_claim_of(tt_table, claim, sizeof claim), -1);  /* its job ended */
    tt_out_free(&o);
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
    if (rc != 2 || !tt_contains(err, mention))
        fail_msg("%s %s ...: rc %d (want 2), stderr lacks \"%s\": %s", tool, args[0], rc,
                 mention, err ? err : "");
    free(err);
}
#define BAD(tool, mention, ...) bad(tool, mention, (char *[]){ __VA_ARGS__, NULL })

static void test_bad_arguments(void **state)
{
    (void)state;
    tt_need_build();
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
    /* a near miss is named with what it most likely means, a far one alone */
    BAD("bin/salus", "--priorty is not an option of salus run: did you mean --priority?", "run",
        "--priorty", "5", "true");
    BAD("bin/salus", "did you mean --policy pack?", "run", "--policy", "pakc", "true");
    BAD("bin/salus", "pakc is not a policy: it takes fifo fair priority srtf pack; did you "
        "mean pack?", "policy", "pakc");
    BAD("bin/salus", "did you mean status?", "stauts");
    tt_out_t o = TT_TOOL("bin/salus", "run", "--frob", "true");
    assert_int_equal(o.rc, 2);
    assert_false(tt_contains(o.err, "did you mean"));
    tt_out_free(&o);
}

static void test_help(void **state)
{
    (void)state;
    tt_need_build();
    static const char *const cmds[][3] = {
        { "bin/salus", "--help", NULL }, { "bin/salus", "run", "--help" },
        { "bin/salus", "status", "--help" }, { "bin/salus", "policy", "--help" },
        { "bin/salus", "reset", "--help" }, { "bin/salus-top", "--help", NULL },
        { "bin/salus", "help", "run" },
    };
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        tt_out_t o = TT_TOOL(cmds[i][0], cmds[i][1], cmds[i][2]);
        if (o.rc != 0 || !tt_contains(o.out, "usage:") || !tt_contains(o.out, "example") ||
            !tt_contains(o.out, "environment") || !tt_contains(o.out, "exit status"))
            fail_msg("%s %s %s: rc %d, incomplete help:\n%s", cmds[i][0], cmds[i][1],
                     cmds[i][2] ? cmds[i][2] : "", o.rc, o.out);
        tt_out_free(&o);
    }
    tt_out_t o = TT_TOOL("bin/salus", "run", "--help");
    static const char *const vars[] = { "SALUS_PRIORITY", "SALUS_MEM_LIMIT",
        "SALUS_MEM_RESERVE", "SALUS_POLICY", "SALUS_ITERATIONS", "SALUS_QUANTUM_MS",
        "SALUS_NAME", "LD_PRELOAD", NULL };
    for (int i = 0; vars[i]; i++)
        assert_true(tt_contains(o.out, vars[i]));
    tt_out_free(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_top_in_terminal, tt_setup, tt_teardown),
        cmocka_unit_test_setup_teardown(test_once_json, tt_setup, tt_teardown),
        cmocka_unit_test_setup_teardown(test_no_table, tt_setup, tt_teardown),
        cmocka_unit_test_setup_teardown(test_policy_reaches_jobs, tt_setup, tt_teardown),
        cmocka_unit_test_setup_teardown(test_run_sets_environment, tt_setup, tt_teardown),
        cmocka_unit_test_setup_teardown(test_run_preloads, tt_setup, tt_teardown),
        cmocka_unit_test_setup_teardown(test_reset, tt_setup, tt_teardown),
        cmocka_unit_test_setup_teardown(test_reset_force, tt_setup, tt_teardown),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_help),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
