/*
 * test_tools_control.c - live control of running jobs: salus renice and
 * limit (and what a limit below a job's hold does to it), who may control
 * whom, the audit line of every change, and salus-top's keys in tmux.
 *
 * Every test has its own simgpu state and table (tu_unique_name) and stops
 * its jobs; each child has a deadline.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <errno.h>

#include "test_tools_lib.h"
#include "ipc/shm_layout.h"
#include "memory/memory.h"

/* ---- live control ---------------------------------------------------------------- */

typedef struct slot_watch {
    pid_t pid;
    int priority;             /* wanted, -1: any */
    uint64_t limit;           /* wanted, 0: any */
} slot_watch_t;

/* The job's slot shows the wanted priority and limit. */
static int slot_shows(void *arg)
{
    const slot_watch_t *w = arg;
    shm_table_t *t;
    int ok = 0;
    if (top_open_table(tt_table, "", 0, &t) != 0)
        return 0;
    for (int s = 0; s < SHM_MAX_SLOTS && !ok; s++) {
        shm_ident_t id;
        sched_slot_info_t si;
        mem_slot_view_t mv;
        if (shm_slot_ident(t, s, &id) != 0 || id.pid != w->pid)
            continue;
        ok = (w->priority < 0 || (sched_read_slot(t, s, &si) == 0 &&
                                  si.priority == w->priority)) &&
             (w->limit == 0 || (mem_view_slot(t, s, &mv) == 0 && mv.limit == w->limit));
    }
    shm_close_table(t);
    return ok;
}

static void test_renice_limit_commands(void **state)
{
    (void)state;
    tt_need_build();
    tt_job_t j;
    tt_job_start_mem(&j, "ctljob", "30", "256M");
    tt_job_wait_running(&j);
    char pid[16];
    snprintf(pid, sizeof pid, "%d", (int)j.p.pid);

    tt_out_t o = TT_TOOL("bin/salus", "renice", "ctljob", "77", "-t", tt_table);
    if (o.rc != 0 || !tt_contains(o.out, "priority 50 -> 77"))
        fail_msg("salus renice: rc %d: %s%s", o.rc, o.out, o.err);
    tt_out_free(&o);
    slot_watch_t w = { j.p.pid, 77, 0 };
    assert_true(tu_await(slot_shows, &w, 5000));

    /* below its contexts (simgpu's 512M): it could never hold less, so
     * refused, the least it takes named, unless forced */
    o = TT_TOOL("bin/salus", "limit", pid, "128M", "-t", tt_table);
    if (o.rc != 1 || !tt_contains(o.err, "can never free while it runs") ||
        !tt_contains(o.err, "at least 512M, or --force"))
        fail_msg("salus limit below its contexts: rc %d: %s%s", o.rc, o.out, o.err);
    tt_out_free(&o);
    o = TT_TOOL("bin/salus", "limit", pid, "128M", "--force", "-t", tt_table);
    if (o.rc != 0 || !tt_contains(o.out, "-> 128M"))
        fail_msg("salus limit --force: rc %d: %s%s", o.rc, o.out, o.err);
    tt_out_free(&o);
    w = (slot_watch_t){ j.p.pid, -1, 128ull << 20 };
    assert_true(tu_await(slot_shows, &w, 5000));
    o = TT_TOOL("bin/salus", "renice", pid, "5", "--force", "-t", tt_table);
    if (o.rc != 2 || !tt_contains(o.err, "--force"))      /* limit's alone */
        fail_msg("salus renice --force: rc %d: %s%s", o.rc, o.out, o.err);
    tt_out_free(&o);
    /* below what it holds (256M and its context), above its context: said, and set */
    o = TT_TOOL("bin/salus", "limit", pid, "600M", "-t", tt_table);
    if (o.rc != 0 || !tt_contains(o.out, "it goes on allocating up to its last iteration's peak"))
        fail_msg("salus limit below its use: rc %d: %s%s", o.rc, o.out, o.err);
    tt_out_free(&o);
    w = (slot_watch_t){ j.p.pid, -1, 600ull << 20 };
    assert_true(tu_await(slot_shows, &w, 5000));
    o = TT_TOOL("bin/salus", "limit", pid, "1G", "-t", tt_table);      /* and raised again */
    if (o.rc != 0 || !tt_contains(o.out, "-> 1.0G") || tt_contains(o.out, "as it frees"))
        fail_msg("salus limit 1G: rc %d: %s%s", o.rc, o.out, o.err);
    tt_out_free(&o);
    w.limit = 1ull << 30;
    assert_true(tu_await(slot_shows, &w, 5000));
    /* past the GPU's budget: the limit is the budget, and the reply says why */
    o = TT_TOOL("bin/salus", "limit", pid, "64G", "-t", tt_table);
    if (o.rc != 0 || !tt_contains(o.out, "64G is more than its GPU's budget") ||
        !tt_contains(o.out, "so its limit is the whole budget"))
        fail_msg("salus limit 64G: rc %d: %s%s", o.rc, o.out, o.err);
    tt_out_free(&o);

    /* checked like every other value, and only what exists */
    static const char *const bad[][4] = { { "renice", "ctljob", "101", "101" },
        { "renice", "ctljob", "x", "\"x\"" }, { "limit", "ctljob", "20", "\"20\"" }, { "limit", "ctljob", "0", "\"0\"" },
        { "limit", "ctljob", "nan%", "\"nan%\"" }, { "limit", "ctljob", "1X", "\"1X\"" } };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        o = TT_TOOL("bin/salus", bad[i][0], bad[i][1], bad[i][2], "-t", tt_table);
        if (o.rc != 2 || !tt_contains(o.err, bad[i][3]))
            fail_msg("salus %s %s %s: rc %d: %s", bad[i][0], bad[i][1], bad[i][2], o.rc, o.err);
        tt_out_free(&o);
    }
    o = TT_TOOL("bin/salus", "renice", "nosuchjob", "5", "-t", tt_table);
    assert_int_equal(o.rc, 1);
    assert_true(tt_contains(o.err, "no process nosuchjob"));
    tt_out_free(&o);
    /* what the job's run says: it went on with its 256M under a limit it passed */
    tt_job_stop(&j);
    w = (slot_watch_t){ 0 };
}

/* ---- a live limit below what a training job holds --------------------------------- */

typedef struct live_watch {
    pid_t pid;
    long long iterations;     /* at least this many */
    uint64_t footprint;       /* granted + contexts at most this (0: any) */
    mem_slot_view_t mv;       /* what was seen last */
} live_watch_t;

static int live_shows(void *arg)
{
    live_watch_t *w = arg;
    shm_table_t *t;
    int ok = 0;
    if (top_open_table(tt_table, "", 0, &t) != 0)
        return 0;
    for (int s = 0; s < SHM_MAX_SLOTS && !ok; s++) {
        shm_ident_t id;
        sched_slot_info_t si;
        if (shm_slot_ident(t, s, &id) != 0 || id.pid != w->pid ||
            sched_read_slot(t, s, &si) != 0 || mem_view_slot(t, s, &w->mv) != 0)
            continue;
        ok = (long long)si.iterations >= w->iterations &&
             (!w->footprint || w->mv.granted + w->mv.ctx <= w->footprint);
    }
    shm_close_table(t);
    return ok;
}

static long long iterations_of(pid_t pid)
{
    live_watch_t w = { pid, 0, 0, { 0 } };
    shm_table_t *t;
    long long n = -1;
    if (top_open_table(tt_table, "", 0, &t) != 0)
        return -1;
    for (int s = 0; s < SHM_MAX_SLOTS; s++) {
        shm_ident_t id;
        sched_slot_info_t si;
        if (shm_slot_ident(t, s, &id) == 0 && id.pid == w.pid && sched_read_slot(t, s, &si) == 0)
            n = (long long)si.iterations;
    }
    shm_close_table(t);
    return n;
}

static int count_of(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; p && (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* A training job (96M held, 48M allocated and freed each iteration, a 16M
 * context) limited to 80M while it holds 160M: it keeps running, says so
 * once, and once it frees its 96M for good (--mem-seconds) its footprint
 * comes within the limit.  On a 1G simgpu the grant's chunk is small, so
 * each iteration's 48M comes back from the device, not from its spare. */
static void test_live_limit_below_hold(void **state)
{
    (void)state;
    tt_need_build();
    tt_job_t j;
    const char *const vars[] = { "SIMGPU_MEMORY=1G", "SIMGPU_CTX_MEMORY=16M", NULL };
    const char *const args[] = { "--iter-mem", "48M", "--mem-seconds", "2.5", NULL };
    tt_job_start_args(&j, "livejob", "6", "96M", vars, args);
    tt_job_wait_running(&j);
    live_watch_t w = { j.p.pid, 3, 0, { 0 } };
    assert_true(tu_await(live_shows, &w, 10000));     /* a whole iteration's peak seen */

    tt_out_t o = TT_TOOL("bin/salus", "limit", "livejob", "80M", "-t", tt_table);
    if (o.rc != 0 || !tt_contains(o.out, "-> 80M; it holds") ||
        !tt_contains(o.out, "it goes on allocating up to its last iteration's peak"))
        fail_msg("salus limit below its hold: rc %d: %s%s", o.rc, o.out, o.err);
    tt_out_free(&o);
    long long at = iterations_of(j.p.pid);
    assert_true(at > 0);
    /* its steady state goes on: iterations with their 48M each, no refusal */
    w = (live_watch_t){ j.p.pid, at + 20, 0, { 0 } };
    if (!tu_await(live_shows, &w, 10000) || w.mv.oom_refusals != 0) {
        char *err = tu_read_file(j.p.err_path, NULL);
        fail_msg("the job did not go on under the limit (%llu refusals): %s",
                 (unsigned long long)w.mv.oom_refusals, err ? err : "");
    }
    /* freed for good: what it holds converges to the limit */
    w = (live_watch_t){ j.p.pid, 0, 80ull << 20, { 0 } };
    if (!tu_await(live_shows, &w, 10000))
        fail_msg("its footprint stayed at %llu + %llu contexts, above the 80M limit",
                 (unsigned long long)w.mv.granted, (unsigned long long)w.mv.ctx);
    assert_int_equal(w.mv.oom_refusals, 0);
    assert_int_equal(tu_wait(&j.p, 15000), 0);        /* ran its 6 s to the end */
    char *err = tu_read_file(j.p.err_path, NULL);
    if (count_of(err, "it goes on allocating up to that peak") != 1 ||
        tt_contains(err, "OUT_OF_MEMORY"))
        fail_msg("the job's stderr, which says once what the limit does: %s", err ? err : "");
    free(err);
}

/* Every change through the tools leaves an audit line in the system log:
 * authpriv.notice, tag salus, who (user, uid, tool), when, and what.  The
 * test stands in for syslog at /dev/log (where glibc's syslog(3) writes),
 * so it runs only where no syslog daemon holds that socket. */
static int read_audit(int fd, char *all, size_t cap, const char *const *want)
{
    size_t at = strlen(all);
    uint64_t deadline = tu_now_ns() + 10ull * 1000000000;
    for (;;) {
        int have = 1;
        for (int i = 0; want[i] && have; i++)
            have = strstr(all, want[i]) != NULL;
        if (have)
            return 1;
        if (tu_now_ns() > deadline)
            return 0;
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        if (poll(&pf, 1, 100) == 1 && at + 1 < cap) {
            ssize_t n = recv(fd, all + at, cap - at - 2, 0);
            if (n > 0) {
                at += (size_t)n;
                all[at++] = '\n';
                all[at] = '\0';
            }
        }
    }
}

/* The socket at /dev/log, bound here to stand in for syslog; skips the test
 * where a daemon holds it or it cannot be made.  The caller unlinks it. */
static int syslog_stand_in(void)
{
    if (access("/dev/log", F_OK) == 0) {
        print_message("a syslog daemon has /dev/log: the lines go to it, unread here\n");
        skip();
    }
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_un sa = { .sun_family = AF_UNIX, .sun_path = "/dev/log" };
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        print_message("cannot stand in for syslog at /dev/log (not root?)\n");
        skip();
    }
    return fd;
}

static void test_audit_lines(void **state)
{
    (void)state;
    tt_need_build();
    tt_job_t j;
    tt_job_start(&j, "auditjob", "30");
    tt_job_wait_running(&j);
    int fd = syslog_stand_in();
    /* Nothing fatal until the socket is gone again: a /dev/log left behind
     * would swallow the machine's syslog(3) lines and skip this test. */
    int rcs = 0;
    tt_out_t o = TT_TOOL("bin/salus", "renice", "auditjob", "60", "-t", tt_table);
    rcs |= o.rc;
    tt_out_free(&o);
    o = TT_TOOL("bin/salus", "limit", "auditjob", "1G", "-t", tt_table);
    rcs |= o.rc;
    tt_out_free(&o);
    o = TT_TOOL("bin/salus", "policy", "pack", "-t", tt_table);
    rcs |= o.rc;
    tt_out_free(&o);
    char renice[160], limit[200], policy[160], who[64];
    snprintf(renice, sizeof renice, "with salus at 20");
    snprintf(limit, sizeof limit, "limit in %s: %d (auditjob): memory limit ", tt_table,
             (int)j.p.pid);
    snprintf(policy, sizeof policy, "policy: GPU 0 of %s: fair -> pack", tt_table);
    snprintf(who, sizeof who, "(uid %u)", (unsigned)getuid());
    char prio[200];
    snprintf(prio, sizeof prio, "renice in %s: %d (auditjob): priority 50 -> 60", tt_table,
             (int)j.p.pid);
    const char *const want[] = { "<85>", "salus[", "]: audit: ", who, renice, prio, limit,
                                 policy, NULL };
    static char all[16384];
    all[0] = '\0';
    int seen = read_audit(fd, all, sizeof all, want);
    close(fd);
    unlink("/dev/log");
    tt_job_stop(&j);
    assert_int_equal(rcs, 0);
    if (!seen)
        fail_msg("the audit lines lack one of what they should say; they were:\n%s", all);
}

/* SALUS_LOG_SYSLOG=on: libsalus's messages reach the system log too, tagged
 * libsalus with the job's pid at user.warning for a warning; off (the
 * default), nothing of the job's goes there. */
static void test_libsalus_syslog(void **state)
{
    (void)state;
    tt_need_build();
    int fd = syslog_stand_in();
    /* A misspelled variable: one warning at start-up, from each job. */
    static const char *const on[] = { "SALUS_LOG_SYSLOG=on", "SALUS_POLCY=fair", NULL };
    static const char *const off[] = { "SALUS_LOG_SYSLOG=off", "SALUS_POLCY=fair", NULL };
    tt_job_t a, b;
    tt_job_start_env(&a, "sysjob", "30", "0", on);
    tt_job_start_env(&b, "quietjob", "30", "0", off);
    tt_job_wait_running(&a);
    tt_job_wait_running(&b);
    char tag[64], quiet[64];
    snprintf(tag, sizeof tag, "libsalus[%d]: ", (int)a.p.pid);
    snprintf(quiet, sizeof quiet, "libsalus[%d]", (int)b.p.pid);
    const char *const want[] = { "<12>", tag, "SALUS_POLCY is not a variable of Salus", NULL };
    static char all[16384];
    all[0] = '\0';
    int seen = read_audit(fd, all, sizeof all, want);
    close(fd);
    unlink("/dev/log");
    tt_job_stop(&a);
    tt_job_stop(&b);
    if (!seen)
        fail_msg("the job's warning is not in the system log; it has:\n%s", all);
    if (strstr(all, quiet))
        fail_msg("a job with SALUS_LOG_SYSLOG=off wrote to the system log:\n%s", all);
}

static void test_control_permission(void **state)
{
    (void)state;
    /* own processes; others' only in a group table of the caller's group; root */
    assert_true(top_control_allowed(1000, 1000, 0, 0));
    assert_false(top_control_allowed(1000, 1001, 0, 0));
    assert_false(top_control_allowed(1000, 1001, 0, 1));
    assert_false(top_control_allowed(1000, 1001, 1, 0));
    assert_true(top_control_allowed(1000, 1001, 1, 1));
    assert_true(top_control_allowed(0, 1001, 0, 0));
}

/* The row named `name` in a snapshot of tt_table, as a target (and whether
 * its pid is this namespace's): 1 when found. */
typedef struct named_row {
    const char *name;
    top_target_t t;
    int pid_here;
} named_row_t;

static int row_found(void *arg)
{
    named_row_t *r = arg;
    const char *const tables[] = { tt_table, NULL };
    top_collect_opts_t o = { .tables = tables };
    top_collector_t *c;
    top_snap_t s;
    int found = 0;
    if (top_collector_new(&o, &c) != 0)
        return 0;
    top_snap_init(&s);
    if (top_collect(c, &s) == 0)
        for (int i = 0; i < s.nprocs && !found; i++)
            if (strcmp(s.procs[i].name, r->name) == 0 && s.procs[i].iterations > 0) {
                top_target_of(&s, &s.procs[i], &r->t);
                r->pid_here = s.procs[i].pid_here;
                found = 1;
            }
    top_snap_free(&s);
    top_collector_free(c);
    return found;
}

/* A job in a PID namespace of its own (a container) is listed by the pid it
 * has there, which here is another process (1 is init): kill refuses it,
 * saying why, and sends nothing; a job of this namespace is killed. */
static void test_kill_other_pid_namespace(void **state)
{
    (void)state;
    tt_need_build();
    char unshare[512], prog[512], msg[512];
    if (geteuid() != 0 || !tt_which("unshare", unshare, sizeof unshare)) {
        print_message("a PID namespace needs root and unshare(1)\n");
        skip();
    }
    tu_env_t env;
    tu_env_init(&env);
    tu_env_salus(&env, tt_gpu, tt_table);
    tu_env_set(&env, "SALUS_NAME", "nsjob");
    char *argv[] = { unshare, "--pid", "--fork", "--kill-child",
                     (char *)tu_build_path("bin/salus-train", prog, sizeof prog), "--seconds",
                     "30", "--kernels", "5", "--aux-kernels", "0", "--kernel-us", "1000",
                     "--name", "nsjob", NULL };
    tu_proc_t ns;
    assert_int_equal(tu_spawn(&ns, argv, &env), 0);
    tu_env_free(&env);
    named_row_t r = { .name = "nsjob" };
    if (!tu_await(row_found, &r, 15000))
        fail_msg("the job in its own PID namespace is not listed");
    assert_false(r.pid_here);                  /* its pid there (1) is init here */
    assert_int_equal(top_kill(&r.t, SIGTERM, msg, sizeof msg), -ESRCH);
    if (!tt_contains(msg, "another PID namespace"))
        fail_msg("the refusal does not say why: %s", msg);
    named_row_t again = { .name = "nsjob" };
    assert_true(row_found(&again));            /* nothing was sent: it runs on */
    kill(ns.pid, SIGKILL);                     /* unshare --kill-child takes the job along */
    tu_wait(&ns, 10000);

    tt_job_t j;
    tt_job_start(&j, "herejob", "30");
    tt_job_wait_running(&j);
    named_row_t h = { .name = "herejob" };
    assert_true(tu_await(row_found, &h, 15000));
    assert_true(h.pid_here);
    assert_int_equal(top_kill(&h.t, SIGTERM, msg, sizeof msg), 0);
    if (!tt_contains(msg, "sent SIGTERM"))
        fail_msg("kill of a job of this namespace: %s", msg);
    assert_int_equal(tu_wait(&j.p, 15000), 0);   /* SIGTERM ends salus-train cleanly */
    j.p.exited = 1;
}

/* Kill means kill: under priority a low job waits for the GPU while a high
 * one holds it; SIGTERM from the tools puts it first, so that it gets the
 * GPU at the holder's next boundary and can exit (before, it waited out the
 * holder's whole run). */
static void test_kill_waiter_gets_gpu(void **state)
{
    (void)state;
    tt_need_build();
    static const char *const hi_vars[] = { "SALUS_POLICY=priority", "SALUS_PRIORITY=90",
                                           NULL };
    static const char *const lo_vars[] = { "SALUS_POLICY=priority", "SALUS_PRIORITY=10",
                                           NULL };
    tt_job_t hi, lo;
    tt_job_start_env(&hi, "hijob", "60", "0", hi_vars);
    tt_job_wait_running(&hi);
    tt_job_start_env(&lo, "lojob", "60", "0", lo_vars);
    named_row_t r = { .name = "lojob" };
    uint64_t deadline = tu_now_ns() + 15ull * 1000000000;
    int waiting = 0;
    while (!waiting && tu_now_ns() < deadline) {   /* registered, waiting for the GPU */
        const char *const tables[] = { tt_table, NULL };
        top_collect_opts_t o = { .tables = tables };
        top_collector_t *c;
        top_snap_t s;
        assert_int_equal(top_collector_new(&o, &c), 0);
        top_snap_init(&s);
        if (top_collect(c, &s) == 0)
            for (int i = 0; i < s.nprocs; i++)
                if (strcmp(s.procs[i].name, "lojob") == 0 && s.procs[i].state == SHM_WAIT_GPU) {
                    top_target_of(&s, &s.procs[i], &r.t);
                    waiting = 1;
                }
        top_snap_free(&s);
        top_collector_free(c);
        if (!waiting)
            tu_sleep_ms(20);
    }
    assert_true(waiting);
    char msg[512];
    assert_int_equal(top_kill(&r.t, SIGTERM, msg, sizeof msg), 0);
    if (!tt_contains(msg, "goes first for the GPU"))
        fail_msg("the kill did not say what it does: %s", msg);
    tt_job_stop(&lo);                          /* exits, cleanly, within 15 s */
    tt_job_stop(&hi);
}

static void keys(const tt_tmux_t *tm, const char *what)
{
    tt_tmux(tm, NULL, "send-keys", "-t", "top", what, NULL);
}

static void expect_screen(const tt_tmux_t *tm, const char *const *needles)
{
    char *screen = tt_screen_with(tm, needles);
    tt_assert_shows(screen, needles);
    free(screen);
}

/* Reaped, without waiting (tu_wait would kill it at its deadline). */
static int exited(void *arg)
{
    tu_proc_t *p = arg;
    if (!p->exited && waitpid(p->pid, &p->status, WNOHANG) == p->pid)
        p->exited = 1;
    return p->exited;
}

static void test_top_keys(void **state)
{
    (void)state;
    tt_need_build();
    tt_tmux_t tm;
    tt_tmux_need(&tm, "salus-tk");
    tt_job_t a, b;
    tt_job_start_mem(&a, "keysA", "30", "256M");
    tt_job_start(&b, "keysB", "30");
    tt_job_wait_running(&a);
    tt_job_wait_running(&b);
    tt_top_start(&tm, "0.3", "160", "40");
    expect_screen(&tm, (const char *const[]){ "keysA", "keysB", "r renice", NULL });

    /* a filter by name leaves keysA alone, selected */
    keys(&tm, "/");
    expect_screen(&tm, (const char *const[]){ "name or user contains", NULL });
    keys(&tm, "keysA");
    keys(&tm, "Enter");
    expect_screen(&tm, (const char *const[]){ "filter \"keysA\"", "1 process", NULL });
    char *screen = tt_screen_with(&tm, (const char *const[]){ "filter \"keysA\"", NULL });
    if (tt_contains(screen, "keysB"))
        fail_msg("the filter left keysB:\n%s", screen);
    free(screen);

    /* r: renice, said on the message line, and in the table */
    keys(&tm, "r");
    expect_screen(&tm, (const char *const[]){ "priority of", "now 50", NULL });
    keys(&tm, "88");
    keys(&tm, "Enter");
    expect_screen(&tm, (const char *const[]){ "priority 50 -> 88", NULL });
    slot_watch_t w = { a.p.pid, 88, 0 };
    assert_true(tu_await(slot_shows, &w, 5000));
    keys(&tm, "F8");                                            /* F8: down by 10 */
    expect_screen(&tm, (const char *const[]){ "priority 88 -> 78", NULL });

    /* l: a limit below what it holds */
    keys(&tm, "l");
    expect_screen(&tm, (const char *const[]){ "memory limit of", NULL });
    keys(&tm, "600M");
    keys(&tm, "Enter");
    expect_screen(&tm, (const char *const[]){ "it goes on allocating", NULL });
    w = (slot_watch_t){ a.p.pid, -1, 600ull << 20 };
    assert_true(tu_await(slot_shows, &w, 5000));

    /* I: the reverse order, said in the status bar; / and Enter clear the filter */
    keys(&tm, "/");
    keys(&tm, "Enter");
    keys(&tm, "I");
    expect_screen(&tm, (const char *const[]){ "(reversed)", "keysB", NULL });

    /* ? shows the keys */
    keys(&tm, "?");
    expect_screen(&tm, (const char *const[]){ "renice the selected process", "kill it", NULL });
    keys(&tm, "x");

    /* k asks first: n keeps it, y kills it */
    keys(&tm, "/");
    keys(&tm, "keysA");
    keys(&tm, "Enter");
    expect_screen(&tm, (const char *const[]){ "filter \"keysA\"", NULL });
    keys(&tm, "k");
    expect_screen(&tm, (const char *const[]){ "with SIGTERM?", "y/N", NULL });
    keys(&tm, "n");
    expect_screen(&tm, (const char *const[]){ "not killed", NULL });
    assert_false(exited(&a.p));
    keys(&tm, "k");
    expect_screen(&tm, (const char *const[]){ "with SIGTERM?", NULL });
    keys(&tm, "y");
    assert_true(tu_await(exited, &a.p, 15000));
    assert_int_equal(WIFEXITED(a.p.status) ? WEXITSTATUS(a.p.status) : -1, 0);

    tt_top_quit(&tm);
    tt_job_stop(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_renice_limit_commands, tt_setup, tt_teardown),
        cmocka_unit_test_setup_teardown(test_live_limit_below_hold, tt_setup, tt_teardown),
        cmocka_unit_test(test_control_permission),
        cmocka_unit_test_setup_teardown(test_audit_lines, tt_setup, tt_teardown),
        cmocka_unit_test_setup_teardown(test_libsalus_syslog, tt_setup, tt_teardown),
        cmocka_unit_test_setup_teardown(test_kill_other_pid_namespace, tt_setup, tt_teardown),
        cmocka_unit_test_setup_teardown(test_kill_waiter_gets_gpu, tt_setup, tt_teardown),
        cmocka_unit_test_setup_teardown(test_top_keys, tt_setup, tt_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
