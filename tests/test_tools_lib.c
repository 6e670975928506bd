/*
 * test_tools_lib.c - what the tools' end-to-end tests share (test_tools,
 * test_tools_ops): a table and a simgpu state per test, running the tools,
 * salus-train jobs under libsalus, and salus-top in a real terminal (tmux).
 *
 * Divided into: set-up; running a tool; jobs; the terminal.
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
#include <unistd.h>

#include "test_tools_lib.h"

char tt_table[64], tt_gpu[64];

int tt_setup(void **state)
{
    (void)state;
    tu_unique_name("salus-tt", tt_table, sizeof tt_table);
    tu_unique_name("simgpu-tt", tt_gpu, sizeof tt_gpu);
    shm_unlink_table(tt_table);
    return 0;
}

int tt_teardown(void **state)
{
    (void)state;
    shm_unlink_table(tt_table);
    shm_unlink_table(tt_gpu);
    return 0;
}

int tt_have(const char *rel)
{
    char path[512];
    return access(tu_build_path(rel, path, sizeof path), X_OK) == 0 ||
           access(path, R_OK) == 0;
}

void tt_need_build(void)
{
    if (!tt_have("bin/salus") || !tt_have("bin/salus-top") || !tt_have("bin/salus-train") ||
        !tt_have("libsalus.so") || !tt_have("sim/libcuda.so.1")) {
        print_message("the tools, salus-train, libsalus or simgpu are not built\n");
        skip();
    }
}

/* A program's path from PATH, or NULL. */
const char *tt_which(const char *prog, char *buf, size_t len)
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


void tt_out_free(tt_out_t *o)
{
    free(o->out);
    free(o->err);
}

/* Run build/bin/<tool> with args (NULL-terminated) in env; 20 s at most. */
tt_out_t tt_tool_env(const tu_env_t *env, const char *tool, ...)
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
    tt_out_t o;
    o.rc = tu_run(argv, env, 20000, &p);
    o.out = tu_read_file(p.out_path, NULL);
    o.err = tu_read_file(p.err_path, NULL);
    assert_non_null(o.out);
    assert_non_null(o.err);
    return o;
}


void tt_job_start(tt_job_t *j, const char *name, const char *seconds)
{
    tt_job_start_mem(j, name, seconds, "0");
}

void tt_job_start_mem(tt_job_t *j, const char *name, const char *seconds, const char *mem)
{
    tt_job_start_env(j, name, seconds, mem, NULL);
}

void tt_job_start_env(tt_job_t *j, const char *name, const char *seconds, const char *mem,
                      const char *const *vars)
{
    tt_job_start_args(j, name, seconds, mem, vars, NULL);
}

void tt_job_start_args(tt_job_t *j, const char *name, const char *seconds, const char *mem,
                       const char *const *vars, const char *const *args)
{
    tu_env_t env;
    char prog[512];
    tu_env_init(&env);
    tu_env_salus(&env, tt_gpu, tt_table);
    tu_env_set(&env, "SALUS_NAME", "%s", name);
    for (int i = 0; vars && vars[i]; i++) {
        char var[128];
        const char *eq = strchr(vars[i], '=');
        assert_non_null(eq);
        snprintf(var, sizeof var, "%.*s", (int)(eq - vars[i]), vars[i]);
        tu_env_set(&env, var, "%s", eq + 1);
    }
    snprintf(j->report, sizeof j->report, "%s/%s-%d.report", tu_tmpdir(), name, (int)getpid());
    unlink(j->report);
    tu_env_set(&env, "SALUS_REPORT", "%s", j->report);
    char *argv[32] = { (char *)tu_build_path("bin/salus-train", prog, sizeof prog),
                       "--seconds", (char *)seconds, "--kernels", "5",
                       "--aux-kernels", "0", "--kernel-us", "1000", "--name", (char *)name,
                       "--mem", (char *)mem, NULL };
    size_t n = 13;
    for (int i = 0; args && args[i]; i++) {
        assert_true(n + 1 < sizeof argv / sizeof *argv);
        argv[n++] = (char *)args[i];
    }
    argv[n] = NULL;
    assert_int_equal(tu_spawn(&j->p, argv, &env), 0);
    tu_env_free(&env);
}

/* Wait until the job's process has a slot with at least one iteration. */
void tt_job_wait_running(const tt_job_t *j)
{
    uint64_t deadline = tu_now_ns() + 15ull * 1000000000;
    while (tu_now_ns() < deadline) {
        shm_table_t *t;
        if (top_open_table(tt_table, "", 0, &t) == 0) {
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

void tt_job_stop(tt_job_t *j)
{
    if (j->p.exited)
        return;
    kill(j->p.pid, SIGTERM);
    int rc = tu_wait(&j->p, 15000);
    assert_int_equal(rc, 0);      /* SIGTERM ends the run cleanly */
}

int tt_contains(const char *text, const char *needle)
{
    return text && strstr(text, needle) != NULL;
}



int tt_tmux(const tt_tmux_t *tm, char **out, ...)
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
char *tt_screen_with(const tt_tmux_t *tm, const char *const *needles)
{
    uint64_t deadline = tu_now_ns() + 8ull * 1000000000;
    char *screen = NULL;
    for (;;) {
        free(screen);
        screen = NULL;
        tt_tmux(tm, &screen, "capture-pane", "-p", "-t", "top", NULL);
        int all = screen != NULL;
        for (int i = 0; all && needles[i]; i++)
            all = strstr(screen, needles[i]) != NULL;
        if (all || tu_now_ns() > deadline)
            return screen;
        tu_sleep_ms(100);
    }
}

void tt_assert_shows(const char *screen, const char *const *needles)
{
    for (int i = 0; needles[i]; i++)
        if (!tt_contains(screen, needles[i]))
            fail_msg("the screen lacks \"%s\":\n%s", needles[i], screen ? screen : "(none)");
}

int tt_top_gone(void *tm)
{
    return tt_tmux(tm, NULL, "has-session", "-t", "top", NULL) != 0;
}


void tt_tmux_need(tt_tmux_t *tm, const char *tag)
{
    if (!tt_which("tmux", tm->bin, sizeof tm->bin)) {
        print_message("tmux is not installed (mk/deps.sh test installs it)\n");
        skip();
    }
    snprintf(tm->sock, sizeof tm->sock, "%s-%d", tag, (int)getpid());
}

void tt_top_start(const tt_tmux_t *tm, const char *delay, const char *width,
                  const char *height)
{
    char top[512], cmd[1200];
    snprintf(cmd, sizeof cmd, "env SALUS_TABLE=%s %s -d %s -t %s", tt_table,
             tu_build_path("bin/salus-top", top, sizeof top), delay, tt_table);
    assert_int_equal(tt_tmux(tm, NULL, "new-session", "-d", "-x", width, "-y", height, "-s",
                             "top", cmd, NULL), 0);
}

void tt_top_quit(const tt_tmux_t *tm)
{
    tt_tmux(tm, NULL, "send-keys", "-t", "top", "q", NULL);
    int gone = tu_await(tt_top_gone, (void *)tm, 5000);
    tt_tmux(tm, NULL, "kill-server", NULL);
    assert_true(gone);
}
