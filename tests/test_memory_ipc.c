/*
 * test_memory_ipc.c - CUDA IPC on paged memory (src/memory/vmm_ipc.c):
 * ipcclient processes over one simgpu, with libsalus preloaded.
 *
 *   - paging on: a producer exports a big and a small allocation
 *     (cuIpcGetMemHandle); a consumer opens both, reads the producer's
 *     pattern and writes its own; a higher-priority job that needs the
 *     memory arrives and the producer, waiting at the gate, is paged out
 *     for it (its other memory goes to the host) while the consumer still
 *     maps the exported allocations; the consumer then writes again, and
 *     the producer, back in, sees that write (its exported memory never
 *     moved: a paged copy would have kept the earlier bytes) and every
 *     other byte intact.  Handles with any byte changed, or random, are
 *     refused without a crash; the handle of an exporter that has ended is
 *     refused at once.
 *   - the exporter frees an allocation an importer maps: the importer's
 *     bytes stay, and the allocation stays charged to the exporter (the
 *     table's view of its slot) until the importer closes it; the exporter
 *     says so once.
 *   - an exporter serves as many imports at once as half its open-file
 *     limit allows: 160 under a limit of 1024 (more than the 128 it once
 *     served at most), 100 of 160 under a limit of 200, the others refused
 *     with CUDA_ERROR_OUT_OF_MEMORY and one line on each side saying why
 *     and what to raise; every import served reads its exporter's bytes.
 *   - without libsalus, with paging off and with it on, cuIpcGetMemHandle
 *     of the program's own VMM mapping is the driver's answer
 *     (CUDA_ERROR_INVALID_VALUE, as the driver answers for VMM memory); of
 *     an ordinary allocation (4 MiB) it is the driver's too (simgpu's
 *     handle, sim/ipc.c) or, where paging made it libsalus's, libsalus's
 *     (a handle either way).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cuda.h>

#include "ipc/ipc.h"
#include "lib/testutil.h"
#include "memory/memory.h"

#define CHILD_MS 240000

static char state_name[64], table_name[64], dir[512], report[600];

static int built(void)
{
    return tu_built("sim/libcuda.so.1") && tu_built("libsalus.so") &&
           tu_built("workloads/kernels.cubin") && tu_built("tests/clients/ipcclient") &&
           tu_built("tests/clients/pageclient");
}

static void names(void)
{
    static int n;
    tu_unique_name("smi", state_name, sizeof state_name);
    tu_unique_name("stmi", table_name, sizeof table_name);
    snprintf(dir, sizeof dir, "%s/ipc%d", tu_tmpdir(), n++);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(report, sizeof report, "%s/report.jsonl", dir);
}

/* A client over this test's simgpu: with libsalus unless `salus` is 0. */
static void spawn(tu_proc_t *p, char **argv, int salus, const char *swap, int priority)
{
    tu_env_t env;
    tu_env_init(&env);
    if (salus)
        tu_env_salus(&env, state_name, table_name);
    else
        tu_env_simgpu(&env, state_name);
    tu_env_set(&env, "SIMGPU_MEMORY", "2G");
    tu_env_set(&env, "SIMGPU_CTX_MEMORY", "0");
    tu_env_set(&env, "SALUS_MEM_HEADROOM", "0");
    tu_env_set(&env, "SALUS_SWAP", "%s", swap);
    tu_env_set(&env, "SALUS_MEM_WAIT_MS", "0");
    tu_env_set(&env, "SALUS_POLICY", "priority");
    tu_env_set(&env, "SALUS_PRIORITY", "%d", priority);
    tu_env_set(&env, "SALUS_REPORT", "%s", report);
    tu_env_unset(&env, "SALUS_MEM_LIMIT");
    tu_env_unset(&env, "SALUS_MEM_RESERVE");
    assert_int_equal(tu_spawn(p, argv, &env), 0);
    tu_env_free(&env);
}

static void client(tu_proc_t *p, const char *mode, int priority)
{
    char prog[512];
    char *argv[] = { (char *)tu_build_path("tests/clients/ipcclient", prog, sizeof prog),
                     (char *)mode, dir, NULL };
    spawn(p, argv, 1, "on", priority);
}

typedef struct said {
    tu_proc_t *p;
    const char *what;
} said_t;

static int printed(void *arg)
{
    said_t *s = arg;
    char *out = tu_read_file(s->p->out_path, NULL);
    int yes = out && strstr(out, s->what) != NULL;
    free(out);
    return yes;
}

static void await_said(tu_proc_t *p, const char *what, const char *who)
{
    said_t s = { p, what };
    if (!tu_await(printed, &s, CHILD_MS)) {
        char *out = tu_read_file(p->out_path, NULL), *err = tu_read_file(p->err_path, NULL);
        fail_msg("the %s never said \"%s\": %s / %s", who, what, out ? out : "",
                 err ? err : "");
    }
}

/* Wait for p's end: it must exit 0 having said `what`. */
static void finish(tu_proc_t *p, const char *what, const char *who)
{
    int rc = tu_wait(p, CHILD_MS);
    char *out = tu_read_file(p->out_path, NULL), *err = tu_read_file(p->err_path, NULL);
    if (rc != 0 || !out || !strstr(out, what))
        fail_msg("the %s exited %d, not saying \"%s\": %s / %s", who, rc, what,
                 out ? out : "", err ? err : "");
    free(out);
    free(err);
}

static void touch(const char *name)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_CREAT | O_WRONLY, 0600);
    assert_true(fd >= 0);
    close(fd);
}

/* pid's slot in table t: 0 and *v, or -1. */
static int slot_view(shm_table_t *t, pid_t pid, mem_slot_view_t *v)
{
    for (int s = 0; s < SHM_MAX_SLOTS; s++) {
        shm_ident_t id;
        if (shm_slot_ident(t, s, &id) == 0 && id.pid == pid && mem_view_slot(t, s, v) == 0)
            return 0;
    }
    return -1;
}

/* A number of pid's line in the report. */
static double report_num(pid_t pid, const char *key)
{
    char *text = tu_read_file(report, NULL), needle[32], line[4096];
    double v = -1;
    assert_non_null(text);
    snprintf(needle, sizeof needle, "\"pid\":%d,", (int)pid);
    assert_int_equal(tu_find_line(text, needle, 0, line, sizeof line), 0);
    assert_int_equal(tu_json_num(line, key, &v), 0);
    free(text);
    return v;
}

static void test_ipc_paged_out_while_exported(void **state)
{
    (void)state;
    if (!built())
        skip();
    names();
    char prog[512], cubin[512], pager[512];
    char *pargv[] = { (char *)tu_build_path("tests/clients/ipcclient", prog, sizeof prog),
                      "produce", dir,
                      (char *)tu_build_path("workloads/kernels.cubin", cubin, sizeof cubin),
                      "512", "2000", NULL };
    char *hargv[] = { (char *)tu_build_path("tests/clients/pageclient", pager, sizeof pager),
                      cubin, "1024", "20", "2000", NULL };
    tu_proc_t prod, fz, cons, high, dd;
    spawn(&prod, pargv, 1, "on", 10);
    await_said(&prod, "exported", "producer");
    /* X and S's granule are pinned (published for src/page), Y is not. */
    shm_table_t *t = NULL;
    mem_slot_view_t v;
    shm_open_opts_t o = { .name = table_name, .read_only = 1 };
    assert_int_equal(shm_open_table(&o, &t), 0);
    assert_int_equal(slot_view(t, prod.pid, &v), 0);
    assert_int_equal(v.pinned, (768u + 2u) << 20);
    shm_close_table(t);
    /* Garbled handles are refused, the valid one opens. */
    client(&fz, "fuzz", 50);
    finish(&fz, "refused 72 of 72", "fuzzer");
    client(&cons, "consume", 50);
    await_said(&cons, "opened bad 0", "consumer");
    /* The producer holds 1282 MiB (X 768, S's granule 2, Y 512) of 2 GiB;
     * the high job's second 512 MiB block lacks 258 MiB, which paging X
     * (the largest) would give, but X is pinned: Y goes instead
     * (SALUS_MEM_WAIT_MS=0: only paging lets the job in). */
    spawn(&high, hargv, 1, "on", 90);
    await_said(&high, "ready", "high-priority job");
    touch("write2");
    finish(&cons, "closed 0", "consumer");
    finish(&high, "done 0 bad 0", "high-priority job");
    touch("stop");
    finish(&prod, "done 0 bad 0", "producer");
    assert_true(report_num(prod.pid, "swap_outs") >= 1);
    /* The exporter has ended: its handle is refused at once. */
    client(&dd, "dead", 50);
    finish(&dd, "refused", "importer of a dead exporter's handle");
    shm_unlink(state_name);
    shm_unlink(table_name);
}

/* The bytes pid's slot of table t uses, or -1 when it has none. */
static int64_t slot_used(shm_table_t *t, pid_t pid)
{
    mem_slot_view_t v;
    return slot_view(t, pid, &v) == 0 ? (int64_t)v.used : -1;
}

typedef struct used_goal {
    shm_table_t *t;
    pid_t pid;
    int64_t below;
} used_goal_t;

static int used_below(void *arg)
{
    used_goal_t *g = arg;
    int64_t u = slot_used(g->t, g->pid);
    return u >= 0 && u < g->below;
}

static void test_ipc_freed_while_imported(void **state)
{
    (void)state;
    if (!built())
        skip();
    names();
    tu_proc_t lender, keeper;
    shm_table_t *t = NULL;
    client(&lender, "lend", 10);
    await_said(&lender, "exported", "exporter");
    client(&keeper, "keep", 50);
    await_said(&keeper, "opened bad 0", "importer");
    touch("free");
    await_said(&lender, "freed 0", "exporter");
    shm_open_opts_t o = { .name = table_name, .read_only = 1 };
    assert_int_equal(shm_open_table(&o, &t), 0);
    /* Freed, but mapped by the importer: still the exporter's charge, and
     * not movable. */
    mem_slot_view_t v;
    assert_int_equal(slot_view(t, lender.pid, &v), 0);
    assert_true(v.used >= 768u << 20);
    assert_int_equal(v.pinned, 768u << 20);
    touch("close");
    finish(&keeper, "closed 0 bad 0", "importer");
    used_goal_t g = { t, lender.pid, 768ll << 20 };
    if (!tu_await(used_below, &g, 10000))
        fail_msg("the exporter still holds %lld bytes after the last import closed",
                 (long long)slot_used(t, lender.pid));
    assert_int_equal(slot_view(t, lender.pid, &v), 0);
    assert_int_equal(v.pinned, 0);
    touch("stop");
    finish(&lender, "freed 0", "exporter");
    /* It said once that the freed memory stays, and where it shows. */
    char *err = tu_read_file(lender.err_path, NULL);
    int said = err ? tu_count_lines(err, "pinned_bytes") : 0;
    if (said != 1)
        fail_msg("the exporter said %d times that its freed memory stays: %s", said,
                 err ? err : "");
    free(err);
    shm_close_table(t);
    shm_unlink(state_name);
    shm_unlink(table_name);
}

/* lendmany under `nofile` and takemany of 160 handles: the importer's
 * line must be `want`; `said`: whether both sides said why some were
 * refused. */
static void many(const char *nofile, const char *want, int said)
{
    char prog[512];
    char *lend[] = { (char *)tu_build_path("tests/clients/ipcclient", prog, sizeof prog),
                     "lendmany", dir, "160", (char *)nofile, NULL };
    char *take[] = { prog, "takemany", dir, "160", NULL };
    tu_proc_t lender, taker;
    names();
    spawn(&lender, lend, 1, "on", 10);
    await_said(&lender, "exported 160", "exporter");
    spawn(&taker, take, 1, "on", 10);
    await_said(&taker, "opened", "importer");
    char *out = tu_read_file(taker.out_path, NULL), *err = tu_read_file(taker.err_path, NULL);
    if (!out || !strstr(out, want))
        fail_msg("under an open-file limit of %s the importer said \"%s\", not \"%s\": %s",
                 nofile, out ? out : "", want, err ? err : "");
    free(out);
    free(err);
    touch("stop");
    finish(&taker, "closed 0", "importer");
    finish(&lender, "exported 160", "exporter");
    char *lerr = tu_read_file(lender.err_path, NULL), *terr = tu_read_file(taker.err_path, NULL);
    int lsaid = lerr ? tu_count_lines(lerr, "serves 100 imports at once already") : 0;
    int tsaid = terr ? tu_count_lines(terr, "raise the exporter's ulimit -n") : 0;
    if (lsaid != said || tsaid != said)
        fail_msg("the refusals were said %d and %d times, not %d: %s / %s", lsaid, tsaid, said,
                 lerr ? lerr : "", terr ? terr : "");
    free(lerr);
    free(terr);
    shm_unlink(state_name);
    shm_unlink(table_name);
}

static void test_ipc_many_imports(void **state)
{
    (void)state;
    if (!built())
        skip();
    many("1024", "opened 160 refused 0 rc 0 bad 0", 0);
    many("200", "opened 100 refused 60 rc 2 bad 0", 1);
}

/* plain's two answers under libsalus (salus), with paging swap. */
static void plain(int salus, const char *swap, int want_alloc, int want_vmm)
{
    char prog[512], line[128], expect[64];
    char *argv[] = { (char *)tu_build_path("tests/clients/ipcclient", prog, sizeof prog),
                     "plain", NULL };
    tu_proc_t p;
    names();
    spawn(&p, argv, salus, swap, 50);
    snprintf(expect, sizeof expect, "plain %d %d", want_alloc, want_vmm);
    int rc = tu_wait(&p, CHILD_MS);
    char *out = tu_read_file(p.out_path, NULL);
    line[0] = '\0';
    if (out)
        tu_find_line(out, "plain", 0, line, sizeof line);
    if (rc != 0 || !strstr(line, expect))
        fail_msg("salus %d swap %s: \"%s\", not \"%s\"", salus, swap, line, expect);
    free(out);
    shm_unlink(state_name);
    shm_unlink(table_name);
}

static void test_ipc_passes_through(void **state)
{
    (void)state;
    if (!built())
        skip();
    plain(0, "off", CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE);
    plain(1, "off", CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE);
    plain(1, "on", CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ipc_passes_through),
        cmocka_unit_test(test_ipc_paged_out_while_exported),
        cmocka_unit_test(test_ipc_freed_while_imported),
        cmocka_unit_test(test_ipc_many_imports),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
