/*
 * test_tools_ops.c - running Salus day to day: the version every tool
 * prints, each command's own help, the start-up lines at the log level the
 * man page names, the workloads' help without a driver.
 *
 * Divided into: helpers (running a tool, a job); version and help; logs.
 *
 * Every test has its own simgpu state and table (tu_unique_name) and stops
 * its jobs; each child has a deadline.
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
#include <unistd.h>

#include "../tools/top.h"
#include "lib/testutil.h"

/* ---- helpers ------------------------------------------------------------------ */

static char table[64], gpu[64];

static int setup(void **state)
{
    (void)state;
    tu_unique_name("salus-to", table, sizeof table);
    tu_unique_name("simgpu-to", gpu, sizeof gpu);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    shm_unlink_table(table);
    shm_unlink_table(gpu);
    return 0;
}

static void need_build(void)
{
    static const char *const parts[] = { "bin/salus", "bin/salus-top", "bin/salus-train",
                                         "libsalus.so", "sim/libcuda.so.1", NULL };
    for (int i = 0; parts[i]; i++) {
        char path[512];
        if (access(tu_build_path(parts[i], path, sizeof path), R_OK) != 0) {
            print_message("%s is not built\n", parts[i]);
            skip();
        }
    }
}

static int contains(const char *text, const char *needle)
{
    return text && strstr(text, needle) != NULL;
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

/* Run build/<tool> with args (NULL-terminated) in env (NULL: ours); 20 s at most. */
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

/* ---- version and help ---------------------------------------------------------- */

static void test_version(void **state)
{
    (void)state;
    need_build();
    char path[512], want[128];
    char *version = tu_read_file(tu_source_path("VERSION", path, sizeof path), NULL);
    assert_non_null(version);
    version[strcspn(version, "\n")] = '\0';
    assert_true(version[0] != '\0');
    static const char *const cmds[][3] = {
        { "bin/salus", "--version", "salus" }, { "bin/salus", "-V", "salus" },
        { "bin/salus-top", "--version", "salus-top" }, { "bin/salus-top", "-V", "salus-top" },
    };
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        out_t o = TOOL(cmds[i][0], cmds[i][1]);
        snprintf(want, sizeof want, "%s %s (table ABI %u)\n", cmds[i][2], version,
                 (unsigned)SHM_ABI_VERSION);
        if (o.rc != 0 || strcmp(o.out, want) != 0)
            fail_msg("%s %s: rc %d, printed \"%s\", want \"%s\"", cmds[i][0], cmds[i][1],
                     o.rc, o.out, want);
        out_free(&o);
    }
    free(version);
}

static void test_status_help(void **state)
{
    (void)state;
    need_build();
    out_t both[2] = { TOOL("bin/salus", "status", "--help"), TOOL("bin/salus", "help", "status") };
    for (int i = 0; i < 2; i++) {
        out_t *o = &both[i];
        if (o->rc != 0 || !contains(o->out, "usage: salus status [options]") ||
            !contains(o->out, "--json") || !contains(o->out, "exit status"))
            fail_msg("salus status's help: rc %d:\n%s", o->rc, o->out);
        /* salus status is a snapshot: no live view, no keys, no --once */
        if (contains(o->out, "keys") || contains(o->out, "--once") ||
            contains(o->out, "refresh"))
            fail_msg("salus status's help speaks of the live view:\n%s", o->out);
        out_free(o);
    }
}

/* The workloads' --help needs no driver; a run without one says what to do. */
static void test_workload_help_without_driver(void **state)
{
    (void)state;
    need_build();
    tu_env_t env;
    tu_env_init(&env);
    tu_env_unset(&env, "LD_LIBRARY_PATH");
    tu_env_unset(&env, "LD_PRELOAD");
    static const char *const progs[] = { "bin/salus-train", "bin/salus-infer", NULL };
    for (int i = 0; progs[i]; i++) {
        out_t o = tool_env(&env, progs[i], "--help", (char *)NULL);
        if (o.rc != 0 || !contains(o.out, "usage:"))
            fail_msg("%s --help without LD_LIBRARY_PATH: rc %d: %s%s", progs[i], o.rc,
                     o.out, o.err);
        out_free(&o);
    }
    /* Without simgpu on the path: no driver, and the message says what to do
     * (where a real driver is installed, the run may succeed instead). */
    out_t o = tool_env(&env, "bin/salus-train", "--iterations", "2", (char *)NULL);
    if (o.rc != 0 && !contains(o.err, "cannot load the CUDA driver"))
        fail_msg("salus-train without a driver: rc %d: %s", o.rc, o.err);
    assert_true(o.rc == 0 || o.rc == 1);
    out_free(&o);
    tu_env_free(&env);
}

/* ---- logs ---------------------------------------------------------------------- */

/* salus-train under libsalus at SALUS_LOG=level: its standard error. */
static char *train_log(const char *level)
{
    tu_env_t env;
    char prog[512];
    tu_env_init(&env);
    tu_env_salus(&env, gpu, table);
    tu_env_set(&env, "SALUS_LOG", "%s", level);
    char *argv[] = { (char *)tu_build_path("bin/salus-train", prog, sizeof prog),
                     "--iterations", "5", "--kernels", "2", "--aux-kernels", "0",
                     "--kernel-us", "100", NULL };
    tu_proc_t p;
    int rc = tu_run(argv, &env, 30000, &p);
    tu_env_free(&env);
    char *err = tu_read_file(p.err_path, NULL);
    if (rc != 0)
        fail_msg("salus-train at SALUS_LOG=%s: rc %d: %s", level, rc, err ? err : "");
    return err;
}

static void test_startup_lines_at_info(void **state)
{
    (void)state;
    need_build();
    static const char *const startup[] = { "intercepting CUDA driver", "scheduler: table ",
                                           NULL };
    char *info = train_log("info"), *warn = train_log("warn");
    for (int i = 0; startup[i]; i++) {
        if (!contains(info, startup[i]))
            fail_msg("SALUS_LOG=info lacks \"%s\": %s", startup[i], info ? info : "");
        if (contains(warn, startup[i]))
            fail_msg("SALUS_LOG=warn prints \"%s\": %s", startup[i], warn);
    }
    free(info);
    free(warn);
    /* and libsalus(7) says so, under info, not under debug */
    char path[512];
    char *page = tu_read_file(tu_source_path("tools/man/libsalus.7", path, sizeof path), NULL);
    assert_non_null(page);
    const char *info_at = strstr(page, ".B info\nadds two start-up lines");
    assert_non_null(info_at);
    const char *debug_at = strstr(info_at, ".B debug\n");
    assert_non_null(debug_at);
    const char *line = strstr(info_at, "intercepting CUDA driver");
    assert_true(line && line < debug_at);
    free(page);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_status_help),
        cmocka_unit_test(test_workload_help_without_driver),
        cmocka_unit_test_setup_teardown(test_startup_lines_at_info, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
