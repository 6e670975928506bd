/*
 * test_tools_mem.c - one memory figure in every output of the tools: a
 * salus-train job under libsalus over simgpu, holding 256M under a limit of
 * 1G with contexts of 64M (SIMGPU_CTX_MEMORY), is shown and exported with
 * the same used - its allocations and its contexts, what its limit counts -
 * and the same context part, in salus-top's JSON (process and device),
 * Prometheus (process and device series) and text (MEM/LIMIT and the
 * device's header).
 *
 * Divided into: reading the outputs; the test.
 *
 * Each test has its own simgpu state and table (tt_setup) and stops its
 * job; each child has a deadline.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_tools_json.h"
#include "test_tools_lib.h"

#define MB (1ull << 20)

/* ---- reading the outputs ---------------------------------------------------- */

static uint64_t field(const tj_t *obj, const char *key, const char *text)
{
    const tj_t *f = tj_get(obj, key);
    if (!f || f->type != TJ_NUM)
        fail_msg("\"%s\" missing or not a number: %s", key, text);
    return (uint64_t)f->num;
}

/* The value of the series `name` on the line that carries `label` too. */
static uint64_t series(const char *text, const char *name, const char *label)
{
    char head[128];
    snprintf(head, sizeof head, "\n%s{", name);
    for (const char *at = strstr(text, head); at; at = strstr(at + 1, head)) {
        const char *end = strchr(at + 1, '\n'), *close = strstr(at, "} ");
        if (!end || !close || close > end)
            break;
        size_t n = (size_t)(end - at);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), at);
        if (strstr(line, label))
            return strtoull(strstr(line, "} ") + 2, NULL, 10);
    }
    fail_msg("no series %s with %s in:\n%s", name, label, text);
    return 0;
}

/* ---- the test ------------------------------------------------------------------ */

static void test_one_memory_figure(void **state)
{
    (void)state;
    tt_need_build();
    tt_job_t j;
    const char *const vars[] = { "SIMGPU_CTX_MEMORY=64M", "SALUS_MEM_LIMIT=1G", NULL };
    tt_job_start_env(&j, "figjob", "30", "256M", vars);
    tt_job_wait_running(&j);

    /* JSON: used counts the contexts, which are their own part */
    tt_out_t o = TT_TOOL("bin/salus-top", "--once", "--json", "-t", tt_table);
    assert_int_equal(o.rc, 0);
    char err[128];
    tj_t *root = tj_parse(o.out, err, sizeof err);
    if (!root)
        fail_msg("not valid JSON (%s): %s", err, o.out);
    const tj_t *devs = tj_get(root, "devices");
    assert_true(devs && devs->type == TJ_ARR && devs->n == 1);
    const tj_t *d = tj_at(devs, 0), *procs = tj_get(d, "processes");
    assert_true(procs && procs->type == TJ_ARR && procs->n == 1);
    const tj_t *p = tj_at(procs, 0);
    uint64_t used = field(p, "mem_used_bytes", o.out), ctx = field(p, "mem_context_bytes", o.out);
    uint64_t limit = field(p, "mem_limit_bytes", o.out);
    if (ctx < 64 * MB || ctx > 65 * MB)            /* the context and salus-train's module */
        fail_msg("the job's contexts are %llu bytes, not 64M and its module: %s",
                 (unsigned long long)ctx, o.out);
    if (used < 256 * MB + ctx || used > 260 * MB + ctx)
        fail_msg("the job's used is %llu bytes, not its 256M and %llu of contexts: %s",
                 (unsigned long long)used, (unsigned long long)ctx, o.out);
    assert_int_equal(limit, 1024 * MB);
    assert_int_equal(field(d, "mem_used_bytes", o.out), used);      /* alone on the device */
    assert_int_equal(field(d, "mem_context_bytes", o.out), ctx);
    assert_int_equal(field(d, "mem_foreign_bytes", o.out), 0);      /* nothing outside */
    tj_free(root);
    tt_out_free(&o);

    /* Prometheus: the same figures, process and device */
    o = TT_TOOL("bin/salus-top", "--prometheus", "-t", tt_table);
    assert_int_equal(o.rc, 0);
    char pid[32], table[96];
    snprintf(pid, sizeof pid, "pid=\"%d\"", (int)j.p.pid);
    snprintf(table, sizeof table, "table=\"%s\"", tt_table);
    assert_int_equal(series(o.out, "salus_process_memory_used_bytes", pid), used);
    assert_int_equal(series(o.out, "salus_process_memory_context_bytes", pid), ctx);
    assert_int_equal(series(o.out, "salus_device_memory_used_bytes", table), used);
    assert_int_equal(series(o.out, "salus_device_memory_context_bytes", table), ctx);
    assert_int_equal(series(o.out, "salus_device_memory_foreign_bytes", table), 0);
    tt_out_free(&o);

    /* text: MEM/LIMIT and the device's used, its contexts beside */
    char u[16], l[16], c[16], want[3][64];
    top_human_bytes(used, u, sizeof u);
    top_human_bytes(limit, l, sizeof l);
    top_human_bytes(ctx, c, sizeof c);
    snprintf(want[0], sizeof want[0], " %s/%s ", u, l);
    snprintf(want[1], sizeof want[1], "mem %s used of ", u);
    snprintf(want[2], sizeof want[2], "(contexts %s)", c);
    o = TT_TOOL("bin/salus-top", "--once", "-t", tt_table);
    assert_int_equal(o.rc, 0);
    for (int i = 0; i < 3; i++)
        if (!tt_contains(o.out, want[i]))
            fail_msg("salus-top --once lacks \"%s\":\n%s", want[i], o.out);
    tt_out_free(&o);
    tt_job_stop(&j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_one_memory_figure, tt_setup, tt_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
