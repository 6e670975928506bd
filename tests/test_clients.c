/*
 * test_clients.c - CUDA clients nobody here wrote, over simgpu with libsalus
 * preloaded: NVIDIA's cuda-bindings (per-thread default stream off and on)
 * and cuda-core, numba-cuda, PyCUDA (built here from its sources), and
 * Debian's Numba 0.56.
 *
 * The Python clients are tests/clients/<name>.py; the packages they use are
 * installed, pinned, in build/venv by mk/venv.sh (make's prerequisite of this
 * test), Debian's Numba by mk/deps.sh.  Each run is one client beside a peer
 * (salus-train) on one simgpu state and one table under `fair`, the client
 * under SALUS_MEM_LIMIT=64M.  The client prints one JSON line of what it did
 * (tests/clients/pyclient.py); the test holds against it what libsalus saw
 * (SALUS_REPORT: launches and the export they went through, allocations,
 * frees, bytes, the refusal at the limit, the limit) and what simgpu saw
 * (SIMGPU_TRACE: the client's kernels by name, the peer's beside them), and
 * the own view the client read from cuMemGetInfo.
 *
 * Divided into: running a client beside its peer; what every run must show;
 * one test per client.
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
#include <sys/stat.h>
#include <unistd.h>

#include "lib/testutil.h"

#ifndef CUDA_HOME_DIR
#define CUDA_HOME_DIR "/usr/local/cuda"
#endif
#define CLIENT_MS 120000        /* a Python start with numba's imports, on a loaded machine */
#define PEER_START_MS 30000
#define LIMIT (64L << 20)
#define SYSTEM_PYTHON "/usr/bin/python3"

/* ---- running a client beside its peer --------------------------------------------- */

/* How one client runs. */
typedef struct how {
    const char *script;     /* tests/clients/<script>.py */
    const char *mode;       /* its second argument, or NULL */
    int system_python;      /* Debian's python3 instead of build/venv's */
    int salus;              /* libsalus preloaded (and a peer beside it) */
    const char *set[4];     /* NAME=value pairs more, NULL-terminated */
} how_t;

/* What one run left. */
typedef struct crun {
    tu_proc_t p, peer;
    int rc, peer_rc;
    char *out, *err, *report, *peer_report, *trace;
    long kernels;           /* the client's kernels in the trace */
    long named;             /* those whose name starts with the client's "kernel" */
    long peer_kernels;
} crun_t;

static void crun_free(crun_t *r)
{
    free(r->out);
    free(r->err);
    free(r->report);
    free(r->peer_report);
    free(r->trace);
}

/* Kernels of pid in the trace; those named prefix... in *named. */
static long kernels_of(const char *trace, int pid, const char *prefix, long *named)
{
    tu_kernel_t *k = NULL;
    long n = tu_trace_load(trace, &k), mine = 0, with_name = 0;
    for (long i = 0; i < n; i++) {
        if (k[i].pid != pid)
            continue;
        mine++;
        with_name += prefix && strncmp(k[i].name, prefix, strlen(prefix)) == 0;
    }
    free(k);
    if (named)
        *named = with_name;
    return mine;
}

/* The peer has run a kernel: it holds a slot of the table. */
typedef struct peer_seen {
    const char *trace;
    int pid;
} peer_seen_t;

static int peer_ran(void *arg)
{
    const peer_seen_t *s = arg;
    return kernels_of(s->trace, s->pid, NULL, NULL) > 0;
}

/* salus-train on the client's state and table, running until told to stop;
 * returns once simgpu has run one of its kernels. */
static void start_peer(crun_t *r, tu_env_t *env, const char *trace, const char *report)
{
    char prog[512];
    tu_env_set(env, "SALUS_REPORT", "%s", report);
    char *argv[] = { (char *)tu_build_path("bin/salus-train", prog, sizeof prog), "--seconds", "60",
                     "--kernels", "4", "--kernel-us", "500", "--host-ms", "1", "--name", "peer",
                     NULL };
    assert_int_equal(tu_spawn(&r->peer, argv, env), 0);
    if (!tu_await(peer_ran, &(peer_seen_t){ trace, r->peer.pid }, PEER_START_MS)) {
        kill(r->peer.pid, SIGKILL);
        tu_wait(&r->peer, 5000);
        fail_msg("the peer ran no kernel in %d ms", PEER_START_MS);
    }
}

/* The client's own variables, over the run's (simgpu, table, trace). */
static void client_env(tu_env_t *env, const how_t *how, const char *report)
{
    char sim[512];
    tu_env_set(env, "SALUS_REPORT", "%s", report);
    tu_env_set(env, "SALUS_MEM_LIMIT", "%ldM", LIMIT >> 20);
    /* The limit is for what the client allocates: its context (which the
     * limit bounds too) would take all of it. */
    tu_env_set(env, "SIMGPU_CTX_MEMORY", "0");
    tu_env_set(env, "PYTHONDONTWRITEBYTECODE", "1");
    tu_env_set(env, "PATH", "%s/bin:/usr/bin:/bin", CUDA_HOME_DIR);    /* PyCUDA's nvcc */
    tu_env_set(env, "NUMBA_CUDA_DRIVER", "%s", tu_build_path("sim/libcuda.so.1", sim, sizeof sim));
    for (int i = 0; how->set[i]; i++) {
        const char *eq = strchr(how->set[i], '=');
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(eq - how->set[i]), how->set[i]);
        tu_env_set(env, name, "%s", eq + 1);
    }
}

/* What the client, its peer, libsalus and simgpu left. */
static void collect(crun_t *r, const char *report, const char *peer_report, const char *trace)
{
    r->out = tu_read_file(r->p.out_path, NULL);
    r->err = tu_read_file(r->p.err_path, NULL);
    r->report = tu_read_file(report, NULL);
    r->peer_report = tu_read_file(peer_report, NULL);
    r->trace = tu_read_file(trace, NULL);
    char kernel[64] = "";
    if (r->out)
        tu_json_str(r->out, "kernel", kernel, sizeof kernel);
    r->kernels = kernels_of(trace, r->p.pid, kernel, &r->named);
    r->peer_kernels = r->peer.pid ? kernels_of(trace, r->peer.pid, NULL, NULL) : 0;
}

static void run(crun_t *r, const how_t *how)
{
    static int seq;
    char state[64], table[64], python[512], script[512], cubin[512], rel[128];
    char report[600], peer_report[600], trace[600];
    memset(r, 0, sizeof *r);
    seq++;
    snprintf(report, sizeof report, "%s/report-%s-%d.json", tu_tmpdir(), how->script, seq);
    snprintf(peer_report, sizeof peer_report, "%s/peer-%s-%d.json", tu_tmpdir(), how->script, seq);
    snprintf(trace, sizeof trace, "%s/trace-%s-%d.json", tu_tmpdir(), how->script, seq);

    tu_env_t env;
    tu_env_init(&env);
    tu_unique_name("csim", state, sizeof state);
    if (how->salus)
        tu_env_salus(&env, state, tu_unique_name("ctab", table, sizeof table));
    else
        tu_env_simgpu(&env, state);
    tu_env_set(&env, "SIMGPU_TRACE", "%s", trace);
    tu_env_set(&env, "SALUS_POLICY", "fair");
    tu_env_unset(&env, "SALUS_LOG");
    tu_env_unset(&env, "SALUS_MEM_LIMIT");
    tu_env_unset(&env, "CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM");
    if (how->salus)
        start_peer(r, &env, trace, peer_report);
    client_env(&env, how, report);

    snprintf(rel, sizeof rel, "tests/clients/%s.py", how->script);
    char *argv[] = { how->system_python ? SYSTEM_PYTHON
                                        : (char *)tu_build_path("venv/bin/python", python, sizeof python),
                     (char *)tu_source_path(rel, script, sizeof script),
                     (char *)tu_build_path("workloads/kernels.cubin", cubin, sizeof cubin),
                     (char *)how->mode, NULL };
    r->rc = tu_run(argv, &env, CLIENT_MS, &r->p);
    if (how->salus) {
        kill(r->peer.pid, SIGTERM);
        r->peer_rc = tu_wait(&r->peer, 30000);
    }
    collect(r, report, peer_report, trace);
    tu_env_free(&env);
}

/* ---- what every run must show ----------------------------------------------------- */

/* The client did its work, and libsalus and simgpu saw exactly that work,
 * beside a peer that ran too under the same policy. */
static void check_run(const crun_t *r)
{
    if (r->rc != 0)
        fail_msg("client exited %d: %s", r->rc, r->err ? r->err : "(no stderr)");
    const char *did = r->out, *rep = r->report;
    assert_non_null(did);
    assert_non_null(rep);
    assert_int_equal(tu_count_lines(rep, "\"pid\""), 1);
    assert_int_equal((int)tu_json_need(rep, "pid"), (int)r->p.pid);
    char policy[32], launch[64], export[64];
    assert_int_equal(tu_json_str(rep, "policy", policy, sizeof policy), 0);
    assert_string_equal(policy, "fair");

    /* Launches, through the export the client's library uses. */
    assert_true(tu_json_need(did, "launches") > 0);
    assert_int_equal(tu_json_need(rep, "launches"), tu_json_need(did, "launches"));
    assert_int_equal(tu_json_str(did, "launch_export", launch, sizeof launch), 0);
    assert_int_equal(tu_json_need(rep, launch), tu_json_need(did, "launches"));
    /* Memory: what it allocated and freed, the refusal at the limit. */
    assert_int_equal(tu_json_need(rep, "allocs"), tu_json_need(did, "allocs"));
    assert_int_equal(tu_json_need(rep, "frees"), tu_json_need(did, "frees"));
    assert_int_equal(tu_json_need(rep, "bytes_allocated"), tu_json_need(did, "bytes"));
    assert_true(tu_json_need(did, "refused") >= 1);
    assert_int_equal(tu_json_need(rep, "oom_refusals"), tu_json_need(did, "refused"));
    assert_int_equal(tu_json_need(rep, "mem_limit_bytes"), LIMIT);
    if (tu_json_str(did, "alloc_export", export, sizeof export) == 0)
        assert_int_equal(tu_json_need(rep, export),
                         tu_json_need(did, "allocs") + tu_json_need(did, "refused"));
    if (tu_json_str(did, "free_export", export, sizeof export) == 0)
        assert_int_equal(tu_json_need(rep, export), tu_json_need(did, "frees"));
    if (tu_json_str(did, "copy_export", export, sizeof export) == 0)
        assert_true(tu_json_need(rep, export) >= 1);
    /* The own view: the limit, less what it held when it asked and what its
     * context and modules take (their images only here: SIMGPU_CTX_MEMORY=0,
     * at most its peak charge; the view is asked after its loads). */
    double ctx = tu_json_need(rep, "mem_context_bytes");
    assert_true(ctx < 1 << 20);
    assert_int_equal(tu_json_need(did, "view_total"), LIMIT);
    assert_int_equal(tu_json_need(did, "view_free"),
                     LIMIT - tu_json_need(did, "view_held") - ctx);

    /* simgpu ran every launch of the client, and the peer's beside them. */
    assert_int_equal(r->kernels, (long)tu_json_need(did, "launches"));
    assert_int_equal(r->named, r->kernels);
    assert_true(r->peer_kernels > 0);
    assert_int_equal(r->peer_rc, 0);
    assert_non_null(r->peer_report);
    assert_true(tu_json_need(r->peer_report, "launches") > 0);
    assert_int_equal(tu_json_str(r->peer_report, "policy", policy, sizeof policy), 0);
    assert_string_equal(policy, "fair");
}

static int have_venv(void)
{
    return tu_built("venv/.ready") && tu_built("sim/libcuda.so.1") && tu_built("libsalus.so") &&
           tu_built("workloads/kernels.cubin") && tu_built("bin/salus-train");
}

/* ---- one test per client ---------------------------------------------------------- */

/* The lookups libsalus's resolver answered, wrapped or passed. */
static double resolved(const crun_t *r)
{
    return tu_json_need(r->report, "resolver_wrapped") + tu_json_need(r->report, "resolver_passed");
}

/* cuda.bindings resolves all it calls through cuGetProcAddress: every answer
 * went through libsalus's resolver, some wrapped; with the per-thread
 * default stream, cuda.bindings asks with flags 2 for the functions that
 * have a per-thread variant (SALUS_LOG=debug shows each question). */
static void check_resolver(const crun_t *r, int per_thread)
{
    double lookups = tu_json_need(r->report, "cuGetProcAddress_v2");
    assert_true(lookups >= 100);
    assert_true(tu_json_need(r->report, "resolver_wrapped") > 0);
    assert_int_equal(resolved(r), lookups);
    assert_non_null(r->err);
    assert_int_equal(tu_count_lines(r->err, ": debug: resolve "), (int)lookups);
    int flags2 = tu_count_lines(r->err, " flags=2 -> ");
    char line[512];
    assert_int_equal(tu_find_line(r->err, "resolve cuLaunchKernel@", 0, line, sizeof line), 0);
    if (per_thread) {
        assert_true(flags2 > 0);
        assert_non_null(strstr(line, " flags=2 -> cuLaunchKernel_ptsz wrapped"));
    } else {
        assert_int_equal(flags2, 0);
        assert_non_null(strstr(line, " flags=0 -> cuLaunchKernel wrapped"));
    }
}

static void test_cuda_bindings(void **state)
{
    (void)state;
    if (!have_venv())
        skip();
    crun_t r;
    run(&r, &(how_t){ .script = "cubindings", .salus = 1, .set = { "SALUS_LOG=debug", NULL } });
    check_run(&r);
    check_resolver(&r, 0);
    /* The legacy default stream: no per-thread export was reached. */
    double v;
    assert_int_not_equal(tu_json_num(r.report, "cuLaunchKernel_ptsz", &v), 0);
    assert_int_equal(tu_json_need(r.report, "cuStreamSynchronize"), 1);
    crun_free(&r);
}

static void test_cuda_bindings_per_thread(void **state)
{
    (void)state;
    if (!have_venv())
        skip();
    crun_t r;
    run(&r, &(how_t){ .script = "cubindings", .salus = 1,
                      .set = { "CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM=1", "SALUS_LOG=debug",
                               NULL } });
    check_run(&r);
    check_resolver(&r, 1);
    double v;
    assert_int_not_equal(tu_json_num(r.report, "cuLaunchKernel", &v), 0);
    assert_int_equal(tu_json_need(r.report, "cuLaunchKernel_ptsz"), tu_json_need(r.out, "launches"));
    assert_int_equal(tu_json_need(r.report, "cuStreamSynchronize_ptsz"), 1);
    crun_free(&r);
}

static void test_cuda_core(void **state)
{
    (void)state;
    if (!have_venv())
        skip();
    crun_t r;
    run(&r, &(how_t){ .script = "cucore", .salus = 1 });
    check_run(&r);
    crun_free(&r);
}

static void test_numba_cuda(void **state)
{
    (void)state;
    if (!have_venv())
        skip();
    crun_t r;
    run(&r, &(how_t){ .script = "numbacuda", .salus = 1,
                      .set = { "PYTHONWARNINGS=ignore", NULL } });
    check_run(&r);
    /* Compiled by the wheels' libNVVM and linked by their nvJitLink. */
    char venv[512], lib[512];
    tu_build_path("venv/", venv, sizeof venv);
    assert_int_equal(tu_json_str(r.out, "nvvm", lib, sizeof lib), 0);
    if (strncmp(lib, venv, strlen(venv)) != 0 || !strstr(lib, "nvidia"))
        fail_msg("libNVVM is %s, not the nvidia-nvvm wheel's under %s", lib, venv);
    assert_int_equal(tu_json_str(r.out, "nvjitlink", lib, sizeof lib), 0);
    if (strncmp(lib, venv, strlen(venv)) != 0)
        fail_msg("nvJitLink is %s, not the wheel's under %s", lib, venv);
    crun_free(&r);
}

/* PyCUDA: direct calls (linked to libcuda.so.1), no cuGetProcAddress. */
static void test_pycuda(void **state)
{
    (void)state;
    if (!have_venv())
        skip();
    crun_t r;
    run(&r, &(how_t){ .script = "pycudaclient", .salus = 1 });
    check_run(&r);
    assert_int_equal(resolved(&r), 0);
    assert_int_equal(tu_json_need(r.report, "cuCtxCreate_v4"), 1);
    /* Its own kernel, compiled by SourceModule, ran beside the cubin's. */
    assert_non_null(strstr(r.trace, "\"salus_pyscale\""));
    assert_non_null(strstr(r.trace, "\"salus_fill\""));
    /* Its context was detached (cuCtxDetach) without a complaint. */
    assert_non_null(r.err);
    assert_null(strstr(r.err, "PyCUDA WARNING"));
    crun_free(&r);
}

/* Numba 0.56 calls cuCtxGetDevice_v2 with CUDA 12's one-argument prototype
 * (tests/clients/numba056.py): its high-level API stops on
 * CUDA_ERROR_INVALID_CONTEXT (201), and the same way with libsalus as
 * without, libsalus passing the call through as it came. */
static void test_numba056_v2_prototypes(void **state)
{
    (void)state;
    if (!tu_built("sim/libcuda.so.1") || !tu_built("libsalus.so") || !tu_built("bin/salus-train"))
        skip();
    crun_t plain, salus;
    run(&plain, &(how_t){ .script = "numba056", .mode = "highlevel", .system_python = 1 });
    run(&salus, &(how_t){ .script = "numba056", .mode = "highlevel", .system_python = 1, .salus = 1 });
    char call[64];
    for (crun_t *r = &plain; r; r = r == &plain ? &salus : NULL) {
        if (r->rc != 3 || !r->out || tu_json_str(r->out, "error", call, sizeof call) != 0)
            fail_msg("numba 0.56 exited %d: %s%s", r->rc, r->out ? r->out : "",
                     r->err ? r->err : "");
        assert_string_equal(call, "cuCtxGetDevice");
        assert_int_equal(tu_json_need(r->out, "code"), 201);
    }
    assert_string_equal(plain.out, salus.out);
    assert_null(plain.report);
    /* libsalus was there: numba's binding reached the driver through it. */
    assert_non_null(salus.report);
    assert_int_equal((int)tu_json_need(salus.report, "pid"), (int)salus.p.pid);
    assert_true(tu_json_need(salus.report, "cuInit") >= 1);
    assert_int_equal(tu_json_need(salus.report, "launches"), 0);
    assert_true(salus.peer_kernels > 0);
    crun_free(&plain);
    crun_free(&salus);
}

/* The rest of Numba 0.56's binding works through libsalus, its driver
 * linker (cuLink*, which libsalus passes through) included. */
static void test_numba056_binding(void **state)
{
    (void)state;
    if (!tu_built("sim/libcuda.so.1") || !tu_built("libsalus.so") || !tu_built("bin/salus-train") ||
        !tu_built("workloads/kernels.cubin"))
        skip();
    crun_t r;
    run(&r, &(how_t){ .script = "numba056", .mode = "binding", .system_python = 1, .salus = 1 });
    check_run(&r);
    /* Its driver linker made the image the kernels came from. */
    assert_true(tu_json_need(r.out, "linked") > 0);
    /* It binds names with dlsym: no cuGetProcAddress. */
    assert_int_equal(resolved(&r), 0);
    crun_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cuda_bindings),
        cmocka_unit_test(test_cuda_bindings_per_thread),
        cmocka_unit_test(test_cuda_core),
        cmocka_unit_test(test_numba_cuda),
        cmocka_unit_test(test_pycuda),
        cmocka_unit_test(test_numba056_v2_prototypes),
        cmocka_unit_test(test_numba056_binding),
    };
    return cmocka_run_group_tests_name("clients", tests, NULL, NULL);
}
