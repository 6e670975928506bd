/*
 * test_memory_thrash.c - no thrashing: two jobs that together exceed the
 * device share it under fair with paging on (SALUS_SWAP=on), over simgpu
 * with libsalus preloaded into pageclient.
 *
 * Two pageclient jobs of 48 MiB each on a 64 MiB simgpu (no context
 * memory, no headroom) run a fixed number of iterations of two 2 ms
 * kernels under fair with a 20 ms quantum, so that fair would hand the GPU
 * over every few iterations; paging's copies take simgpu's PCIe time at
 * SIMGPU_PCIE_GBPS=1 (a page-in of 48 MiB occupies libsalus's stream for
 * c = 50.3 ms, and its synchronize waits for it: every page-in takes at
 * least c).  Both finish with every byte intact, and:
 *
 *   - page-ins: the residency rule (src/page) keeps a job paged in for 8
 *     times its page-in's time p before it may be asked out again.  Only
 *     one job fits, so neither pages while the other is resident, and
 *     their paging never overlaps (a page-in starts once the page-out it
 *     waits for is done); so the n page-ins of a job, over the jobs' life
 *     T in which they paged S0 + S1 (the reports' swap_ms, in and out),
 *     satisfy (n - 1) * 8 * c <= (n - 1) * 8 * p <= T - S0 - S1:
 *     n <= 1 + (T - S0 - S1) / (8 c).  Without the rule the two jobs page
 *     at every handoff (measured on a loaded 2-core machine: 263 to 348
 *     page-ins of each against a bound of 88 to 123, the GPU busy 5% of
 *     the time);
 *   - GPU busy: the rule lets paging cost at most 2p in every 8p + 2p, so
 *     in steady alternation the GPU runs the jobs' work at least 80% of
 *     the time their own host gaps (here none) allow.  The test measures,
 *     from simgpu's trace, the union of the jobs' kernels and their own
 *     copies (the legacy stream: paging's copies run on libsalus's own
 *     stream and count as lost) over the span from the first kernel to the
 *     last, and asserts at least 0.5: the span holds the second job's
 *     arrival (its allocation waits for the first to page out), which is
 *     not steady state, and a loaded 2-core machine stretches the host's
 *     part of paging; thrashing (the rule removed) stays far below;
 *   - fair still alternates: while both jobs run (until the first ends),
 *     the one that ran fewer of the kernels ran at least a quarter of them
 *     (0.47 measured).  Each job's 2.4 s of kernels outlast a residency
 *     (8p, 0.5 to 0.8 s measured on a loaded machine).  Were the holder to
 *     hand the GPU to the paged-out peer within its residency, the peer
 *     would hold it idle until the residency ended, and one job would then
 *     run to its end while the other waited (measured: 0.01).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>

#include "lib/testutil.h"

#define CHILD_MS    120000              /* thrashing: about 60 s */
#define JOB_MIB     16
#define PCIE_GBPS   1                       /* bytes per ns */
#define PAGE_MIN_NS ((double)JOB_MIB * (1 << 20) / PCIE_GBPS)
#define BUSY_MIN    0.5
#define SHARE_MIN   0.25

static char state_name[64], table_name[64], trace[512];

static void spawn(tu_proc_t *p, const char *report)
{
    char client[512], cubin[512];
    char *argv[] = { (char *)tu_build_path("tests/clients/pageclient", client, sizeof client),
                     (char *)tu_build_path("workloads/kernels.cubin", cubin, sizeof cubin),
                     "16", "600", "2000", NULL };
    tu_env_t env;
    tu_env_init(&env);
    tu_env_salus(&env, state_name, table_name);
    tu_env_set(&env, "SIMGPU_MEMORY", "24M");
    tu_env_set(&env, "SIMGPU_CTX_MEMORY", "0");
    tu_env_set(&env, "SIMGPU_PCIE_GBPS", "%d", PCIE_GBPS);
    tu_env_set(&env, "SIMGPU_TRACE", "%s", trace);
    tu_env_set(&env, "SALUS_MEM_HEADROOM", "0");
    tu_env_set(&env, "SALUS_SWAP", "on");
    tu_env_set(&env, "SALUS_POLICY", "fair");
    tu_env_set(&env, "SALUS_QUANTUM_MS", "20");
    tu_env_set(&env, "SALUS_REPORT", "%s", report);
    tu_env_unset(&env, "SALUS_MEM_LIMIT");
    tu_env_unset(&env, "SALUS_MEM_WAIT_MS");
    assert_int_equal(tu_spawn(p, argv, &env), 0);
    tu_env_free(&env);
}

static void finish(tu_proc_t *p, const char *who)
{
    int rc = tu_wait(p, CHILD_MS);
    char *out = tu_read_file(p->out_path, NULL), *err = tu_read_file(p->err_path, NULL);
    if (rc != 0 || !out || !strstr(out, "done 0 bad 0"))
        fail_msg("job %s exited %d: %s / %s", who, rc, out ? out : "", err ? err : "");
    free(out);
    free(err);
}

typedef struct counters { double ins, outs, paging_ns; } counters_t;

static counters_t counters(const char *report)
{
    char *text = tu_read_file(report, NULL);
    assert_non_null(text);
    counters_t c = { tu_json_need(text, "swap_ins"), tu_json_need(text, "swap_outs"),
                     tu_json_need(text, "swap_ms") * 1e6 };
    free(text);
    return c;
}

/* Each job's page-ins within what the residency rule allows over the
 * jobs' life of t_ns; the page-ins of both. */
static double check_page_ins(const char rep[2][512], double t_ns)
{
    counters_t c[2] = { counters(rep[0]), counters(rep[1]) };
    double bound = 1 + (t_ns - c[0].paging_ns - c[1].paging_ns) / (8 * PAGE_MIN_NS);
    for (int j = 0; j < 2; j++) {
        fprintf(stderr, "job %d: %.0f page-ins, %.0f page-outs, %.0f ms paging; over %.0f "
                "ms the rule allows %.1f page-ins\n", j, c[j].ins, c[j].outs,
                c[j].paging_ns / 1e6, t_ns / 1e6, bound);
        if (c[j].ins > bound)
            fail_msg("job %d: %.0f page-ins, more than the residency rule allows (%.1f)", j,
                     c[j].ins, bound);
        assert_true(c[j].ins == c[j].outs);   /* it ends resident: it read its bytes back */
    }
    return c[0].ins + c[1].ins;
}

/* The jobs' share of the GPU between the first kernel and the last: the
 * union of kernels and the jobs' own copies (stream 0; pageclient makes no
 * stream) over that span. */
static double busy_fraction(void)
{
    tu_kernel_t *k;
    long n = tu_trace_load_all(trace, &k);
    assert_true(n > 0);
    uint64_t first = UINT64_MAX, last = 0, busy = 0, end = 0;
    for (long i = 0; i < n; i++)
        if (!k[i].kind[0] || strcmp(k[i].kind, "kernel") == 0) {
            first = k[i].start_ns < first ? k[i].start_ns : first;
            last = k[i].end_ns > last ? k[i].end_ns : last;
        }
    assert_true(first < last);
    for (long i = 0; i < n; i++) {     /* sorted by start: merge as we go */
        int kernel = !k[i].kind[0] || strcmp(k[i].kind, "kernel") == 0;
        if (!kernel && k[i].stream != 0)
            continue;                   /* paging's copies: libsalus's stream */
        uint64_t s = k[i].start_ns < first ? first : k[i].start_ns;
        uint64_t e = k[i].end_ns > last ? last : k[i].end_ns;
        if (s < end)
            s = end;
        if (e > s) {
            busy += e - s;
            end = e;
        }
    }
    free(k);
    return (double)busy / (double)(last - first);
}

/* While both jobs ran (up to the end of the first to finish), the share of
 * the kernels of the one that ran fewer. */
static double shared_fraction(void)
{
    tu_kernel_t *k = NULL;
    long n = tu_trace_load(trace, &k), count[2] = { 0, 0 };
    assert_true(n > 0);
    int pid[2] = { k[0].pid, 0 };
    uint64_t last[2] = { 0, 0 };
    for (long i = 0; i < n; i++) {
        int j = k[i].pid == pid[0] ? 0 : 1;
        pid[j] = k[i].pid;
        last[j] = k[i].end_ns;
    }
    uint64_t both = last[0] < last[1] ? last[0] : last[1];
    for (long i = 0; i < n; i++)
        if (k[i].end_ns <= both)
            count[k[i].pid == pid[0] ? 0 : 1]++;
    free(k);
    long fewer = count[0] < count[1] ? count[0] : count[1];
    return count[0] + count[1] ? (double)fewer / (double)(count[0] + count[1]) : 0;
}

static void test_no_thrashing_under_fair(void **state)
{
    (void)state;
    if (!tu_built("sim/libcuda.so.1") || !tu_built("libsalus.so") ||
        !tu_built("workloads/kernels.cubin") || !tu_built("tests/clients/pageclient"))
        skip();
    char rep[2][512];
    tu_unique_name("sthr", state_name, sizeof state_name);
    tu_unique_name("stthr", table_name, sizeof table_name);
    snprintf(trace, sizeof trace, "%s/thrash-trace.jsonl", tu_tmpdir());
    unlink(trace);
    tu_proc_t job[2];
    uint64_t t0 = tu_now_ns();
    for (int j = 0; j < 2; j++) {
        snprintf(rep[j], sizeof rep[j], "%s/thrash-report-%d.json", tu_tmpdir(), j);
        unlink(rep[j]);
        spawn(&job[j], rep[j]);
    }
    finish(&job[0], "0");
    finish(&job[1], "1");
    double t_ns = (double)(tu_now_ns() - t0);   /* each job's life, and a little more */
    assert_true(check_page_ins(rep, t_ns) >= 1);             /* they did not fit together: one paged */
    double share = shared_fraction();
    fprintf(stderr, "while both ran, the lesser job ran %.2f of the kernels\n", share);
    if (share < SHARE_MIN)
        fail_msg("one job ran %.2f of the kernels while both ran: fair did not alternate",
                 share);
    double busy = busy_fraction();
    fprintf(stderr, "GPU busy %.3f of the span (at least %.2f)\n", busy, BUSY_MIN);
    if (busy < BUSY_MIN)
        fail_msg("the GPU ran the jobs' work %.3f of the time, under %.2f", busy, BUSY_MIN);
    shm_unlink(state_name);
    shm_unlink(table_name);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_thrashing_under_fair),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
