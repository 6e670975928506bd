/*
 * test_nvml.c - NVML's view of a job, end to end: tests/clients/nvmlclient
 * reads its memory and the device's processes through the driver
 * (cuMemGetInfo_v2) and through NVML, over simgpu and simgpu's NVML.
 *
 *   - under libsalus, with a limit, beside a peer of the table and an
 *     outsider (a simgpu process without libsalus): NVML's free is the
 *     driver view's free, its total the limit, its used the process's
 *     allocations and contexts (within one context of cuMemGetInfo's
 *     total - free), before and after `salus limit` changes the limit; the
 *     process lists (v1, _v2, _v3) are the table's processes, the outsider
 *     left out; every hooked name resolves by dlsym to libsalus's function
 *     of exactly that name;
 *   - a job paged out for a higher-priority one (SALUS_SWAP=on): NVML's
 *     used falls with the view's, and comes back at its page-in;
 *   - the same through a program linked to NVML;
 *   - without libsalus (the control): the whole device, every process;
 *   - with a table libsalus cannot use: the driver's answers, and the
 *     reason said once;
 *   - pynvml (tests/clients/pynvml_smi.py, nvidia-smi's table) in a limited
 *     job agrees with its cuMemGetInfo; as a monitor without CUDA it sees
 *     the device and, under libsalus, the table's processes;
 *   - salus-top's device line and JSON carry NVML's figures of the device,
 *     and Salus's own used (the device's and the job's, contexts included)
 *     is NVML's;
 *   - simgpu's NVML against simgpu's driver: the same UUID, name, PCI bus
 *     id and memory; NVML's errors for a bad handle and an unsupported query;
 *     utilization (the device's and a job's own) from the engine's kernel
 *     time while a job spins, and none a sample period after it ends;
 *   (test_nvml_list checks the list itself: gen_nvml.py and libsalus(7).)
 *
 * Each test has its own simgpu state and table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>
#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include <nvml.h>

#include "lib/testutil.h"
#include "nvml_list.h"

#define MB (1ull << 20)
#define GB (1ull << 30)
#define CTX_MEMORY (64 * MB)

static char state_name[64], table_name[64];
/* Every child a test starts, killed at its teardown: a failed assertion
 * leaves no job spinning behind it. */
static pid_t kids[16];
static int nkids;

static void track(pid_t pid)
{
    if (nkids < (int)(sizeof kids / sizeof kids[0]))
        kids[nkids++] = pid;
}

static int setup(void **state)
{
    (void)state;
    nkids = 0;
    tu_unique_name("salus-nvml-sim", state_name, sizeof state_name);
    tu_unique_name("salus-nvml", table_name, sizeof table_name);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < nkids; i++)
        if (kill(kids[i], SIGKILL) == 0)
            waitpid(kids[i], NULL, 0);
    nkids = 0;
    shm_unlink(state_name);
    shm_unlink(table_name);
    return 0;
}

/* ---- clients ------------------------------------------------------------- */

typedef struct client {
    tu_proc_t p;
    int step;            /* the line awaited */
    char line[2048];
} client_t;

/* The paging test's set-up: a 1 GiB device (small, so that the page-out
 * and page-in copy little and the test stays quick on a busy machine),
 * paging on, priorities, every host sync a boundary (the spinning job's one
 * kernel per sync), and contexts that take nothing (as
 * test_memory_preempt's: with 64 MiB contexts this page-out does not
 * complete on this tree, a memory issue of its own). */
static const char *const paging_vars[] = {
    "SIMGPU_MEMORY=1G", "SIMGPU_CTX_MEMORY=0", "SALUS_SWAP=on", "SALUS_MEM_WAIT_MS=0",
    "SALUS_POLICY=priority", "SALUS_ITER_SYNC=every", NULL,
};

static void set_vars(tu_env_t *env, const char *const *vars)
{
    for (int i = 0; vars && vars[i]; i++) {
        char name[64];
        const char *eq = strchr(vars[i], '=');
        snprintf(name, sizeof name, "%.*s", (int)(eq - vars[i]), vars[i]);
        tu_env_set(env, name, "%s", eq + 1);
    }
}

/* nvmlclient (or -linked) holding `mib`, under libsalus when salus, with
 * SALUS_MEM_LIMIT=limit when not NULL; `vars` (NAME=value) after, and
 * mode (NULL: hold) with its argument. */
static void start_as(client_t *c, const char *prog, int salus, const char *limit,
                     const char *mib, const char *const *vars, const char *mode,
                     const char *arg)
{
    tu_env_t env;
    char path[512];
    tu_env_init(&env);
    if (salus)
        tu_env_salus(&env, state_name, table_name);
    else
        tu_env_simgpu(&env, state_name);
    tu_env_set(&env, "SIMGPU_CTX_MEMORY", "64M");
    tu_env_set(&env, "SALUS_MEM_HEADROOM", "0");
    tu_env_unset(&env, "SALUS_MEM_RESERVE");
    tu_env_unset(&env, "SALUS_GROUP");
    if (limit)
        tu_env_set(&env, "SALUS_MEM_LIMIT", "%s", limit);
    else
        tu_env_unset(&env, "SALUS_MEM_LIMIT");
    set_vars(&env, vars);
    char *argv[] = { (char *)tu_build_path(prog, path, sizeof path), (char *)mib,
                     (char *)(mode ? mode : "hold"), (char *)arg, NULL };
    assert_int_equal(tu_spawn(&c->p, argv, &env), 0);
    track(c->p.pid);
    tu_env_free(&env);
    c->step = 0;
}

static void start(client_t *c, const char *prog, int salus, const char *limit, const char *mib)
{
    start_as(c, prog, salus, limit, mib, NULL, NULL, NULL);
}

static int has_line(void *arg)
{
    client_t *c = arg;
    char needle[32];
    snprintf(needle, sizeof needle, "\"step\":%d,", c->step);
    char *out = tu_read_file(c->p.out_path, NULL);
    int found = out && tu_find_line(out, needle, 0, c->line, sizeof c->line) == 0;
    free(out);
    return found;
}

/* Its next line (step 0 first; later ones asked with SIGUSR1). */
static const char *next_line(client_t *c)
{
    if (c->step > 0)
        kill(c->p.pid, SIGUSR1);
    if (!tu_await(has_line, c, 20000)) {
        char *err = tu_read_file(c->p.err_path, NULL);
        fail_msg("nvmlclient %d said no step %d; stderr:\n%s", (int)c->p.pid, c->step,
                 err ? err : "");
    }
    c->step++;
    return c->line;
}

static void stop(client_t *c)
{
    kill(c->p.pid, SIGTERM);
    assert_int_equal(tu_wait(&c->p, 20000), 0);
}

static uint64_t num(const char *line, const char *key) { return (uint64_t)tu_json_need(line, key); }

/* "a,b" of two pids, sorted. */
static void pair(pid_t a, pid_t b, char *out, size_t len)
{
    snprintf(out, len, "%d,%d", (int)(a < b ? a : b), (int)(a < b ? b : a));
}

static void assert_procs(const char *line, const char *want)
{
    static const char *const keys[] = { "procs_v1", "procs_v2", "procs_v3" };
    for (int i = 0; i < 3; i++) {
        char got[512];
        assert_int_equal(tu_json_str(line, keys[i], got, sizeof got), 0);
        if (strcmp(got, want) != 0)
            fail_msg("%s is \"%s\", the table's processes are \"%s\": %s", keys[i], got, want,
                     line);
    }
}

/* NVML's memory is the job's view: free = cuMemGetInfo's free, total =
 * used + free, at most cuMemGetInfo's total and one context; used at most
 * what cuMemGetInfo's total less free counts and one context (less when
 * peers, not the limit, bound its room: that total less free then counts
 * memory that is theirs); the same through _v2 (simgpu reserves nothing).
 * What used is exactly, the tests say where they know. */
static void assert_own_view(const char *line)
{
    uint64_t cu_free = num(line, "cu_free"), cu_total = num(line, "cu_total");
    for (int v = 1; v <= 2; v++) {
        char k_total[16], k_free[16], k_used[16], k_rc[16];
        snprintf(k_rc, sizeof k_rc, "v%d_rc", v);
        snprintf(k_total, sizeof k_total, "v%d_total", v);
        snprintf(k_free, sizeof k_free, "v%d_free", v);
        snprintf(k_used, sizeof k_used, "v%d_used", v);
        assert_int_equal(num(line, k_rc), NVML_SUCCESS);
        uint64_t total = num(line, k_total), free_b = num(line, k_free), used = num(line, k_used);
        if (free_b != cu_free || total != used + free_b || total > cu_total + CTX_MEMORY ||
            used > cu_total - cu_free + CTX_MEMORY)
            fail_msg("NVML v%d total %llu free %llu used %llu against cuMemGetInfo free %llu "
                     "total %llu: %s", v, (unsigned long long)total,
                     (unsigned long long)free_b, (unsigned long long)used,
                     (unsigned long long)cu_free, (unsigned long long)cu_total, line);
    }
}

/* ---- the job's view -------------------------------------------------------- */

static void test_view_beside_peer_and_limit(void **state)
{
    (void)state;
    client_t peer, outsider, job;
    start(&peer, "tests/clients/nvmlclient", 1, NULL, "256");
    next_line(&peer);
    start(&outsider, "tests/clients/nvmlclient", 0, NULL, "64");
    next_line(&outsider);
    start(&job, "tests/clients/nvmlclient", 1, "1G", "128");
    const char *line = next_line(&job);

    char want[64];
    pair(peer.p.pid, job.p.pid, want, sizeof want);
    assert_int_equal(num(line, "cu_total"), 1 * GB);
    assert_int_equal(num(line, "v1_total"), 1 * GB);           /* the limit */
    assert_int_equal(num(line, "v1_used"), 128 * MB + CTX_MEMORY);  /* its own, context too */
    assert_own_view(line);
    assert_procs(line, want);
    assert_int_equal(num(line, "wrapped"), num(line, "hooked"));

    /* salus limit: the next reading follows the new limit, both ways */
    char prog[512], pid[16];
    snprintf(pid, sizeof pid, "%d", (int)job.p.pid);
    char *argv[] = { (char *)tu_build_path("bin/salus", prog, sizeof prog), "limit", pid,
                     "512M", "-t", table_name, NULL };
    tu_proc_t p;
    tu_env_t env;
    tu_env_init(&env);
    assert_int_equal(tu_run(argv, &env, 20000, &p), 0);
    tu_env_free(&env);
    line = next_line(&job);
    assert_int_equal(num(line, "cu_total"), 512 * MB);
    assert_int_equal(num(line, "v1_total"), 512 * MB);
    assert_int_equal(num(line, "v1_used"), 128 * MB + CTX_MEMORY);
    assert_own_view(line);
    assert_procs(line, want);

    /* the peer, without a limit, sees its own share the same way */
    line = next_line(&peer);
    assert_int_equal(num(line, "v1_used"), 256 * MB + CTX_MEMORY);
    assert_own_view(line);
    assert_procs(line, want);

    stop(&job);
    stop(&outsider);
    stop(&peer);
}

/* Until the job's NVML used is below w->below (or, with below 0, at least
 * w->above): one line asked at a time, each checked as the job's view
 * (those read while peers moved memory under each try are passed over). */
typedef struct watch {
    client_t *c;
    uint64_t below, above;
    int asked;
} watch_t;

static int used_reaches(void *arg)
{
    watch_t *w = arg;
    if (!w->asked) {
        kill(w->c->p.pid, SIGUSR1);
        w->asked = 1;
    }
    if (!has_line(w->c))
        return 0;
    w->c->step++;
    w->asked = 0;
    if (!num(w->c->line, "stable"))
        return 0;
    assert_own_view(w->c->line);
    uint64_t used = num(w->c->line, "v1_used");
    return w->below ? used < w->below : used >= w->above;
}

static void await_used(client_t *c, uint64_t below, uint64_t above, const char *what)
{
    watch_t w = { c, below, above, 0 };
    if (!tu_await(used_reaches, &w, 60000))
        fail_msg("the job's NVML view never showed %s; last: %s", what, c->line);
}

/* A job paged out for a higher-priority one: NVML follows its view out
 * and back in, and lists both jobs meanwhile. */
static void test_view_through_a_page_out(void **state)
{
    (void)state;
    char cubin[512], prog[512];
    tu_build_path("workloads/kernels.cubin", cubin, sizeof cubin);
    client_t low;
    start_as(&low, "tests/clients/nvmlclient", 1, "768M", "512", paging_vars, "spin", cubin);
    const char *line = next_line(&low);
    assert_own_view(line);
    assert_int_equal(num(line, "v1_total"), 768 * MB);
    uint64_t used0 = num(line, "v1_used");
    assert_int_equal(used0, 512 * MB);

    tu_proc_t high;
    tu_env_t env;
    tu_env_init(&env);
    tu_env_salus(&env, state_name, table_name);
    tu_env_set(&env, "SIMGPU_CTX_MEMORY", "64M");
    tu_env_set(&env, "SALUS_MEM_HEADROOM", "0");
    tu_env_unset(&env, "SALUS_MEM_LIMIT");
    set_vars(&env, paging_vars);
    tu_env_set(&env, "SALUS_PRIORITY", "90");
    tu_env_set(&env, "PAGECLIENT_BLOCK_MIB", "256");
    char *argv[] = { (char *)tu_build_path("tests/clients/pageclient", prog, sizeof prog),
                     cubin, "768", "50", "2000", NULL };
    assert_int_equal(tu_spawn(&high, argv, &env), 0);
    track(high.pid);
    tu_env_free(&env);

    await_used(&low, used0 - 256 * MB, 0, "the page-out");
    char want[64];
    pair(low.p.pid, high.pid, want, sizeof want);
    assert_procs(low.line, want);

    int rc = tu_wait(&high, 60000);
    char *out = tu_read_file(high.out_path, NULL);
    if (rc != 0 || !out || !strstr(out, "done 0 bad 0"))
        fail_msg("the high-priority job exited %d: %s", rc, out ? out : "");
    free(out);
    await_used(&low, 0, used0, "the page-in");
    stop(&low);
}

static void test_linked_program(void **state)
{
    (void)state;
    client_t peer, job;
    start(&peer, "tests/clients/nvmlclient", 1, NULL, "256");
    next_line(&peer);
    start(&job, "tests/clients/nvmlclient-linked", 1, "1G", "128");
    const char *line = next_line(&job);
    char want[64];
    pair(peer.p.pid, job.p.pid, want, sizeof want);
    assert_int_equal(num(line, "v1_total"), 1 * GB);
    assert_own_view(line);
    assert_procs(line, want);
    stop(&job);
    stop(&peer);
}

/* A table libsalus cannot use (not a Salus table): memory passes through,
 * and so do the process lists, which say once why. */
static void test_unusable_table_fails_open(void **state)
{
    (void)state;
    int fd = shm_open(table_name, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "not a table, not a table, not a table", 37), 37);
    close(fd);
    client_t outsider, job;
    start(&outsider, "tests/clients/nvmlclient", 0, NULL, "64");
    next_line(&outsider);
    start(&job, "tests/clients/nvmlclient", 1, "1G", "128");
    const char *line = next_line(&job);
    char want[64];
    pair(outsider.p.pid, job.p.pid, want, sizeof want);
    assert_int_equal(num(line, "v1_total"), 16 * GB);          /* the driver's */
    assert_int_equal(num(line, "v1_free"), num(line, "cu_free"));
    assert_procs(line, want);                                    /* unfiltered */
    stop(&job);
    char *err = tu_read_file(job.p.err_path, NULL);
    assert_non_null(err);
    if (tu_count_lines(err, "NVML: nvmlDeviceGetComputeRunningProcesses") != 1 ||
        tu_count_lines(err, "NVML:") != 1)
        fail_msg("libsalus did not say once why NVML's lists are the device's: %s", err);
    free(err);
    stop(&outsider);
}

/* The control: without libsalus NVML shows the device as it is. */
static void test_control_whole_device(void **state)
{
    (void)state;
    client_t peer, plain;
    start(&peer, "tests/clients/nvmlclient", 1, "1G", "256");
    next_line(&peer);
    start(&plain, "tests/clients/nvmlclient", 0, NULL, "128");
    const char *line = next_line(&plain);
    char want[64];
    pair(peer.p.pid, plain.p.pid, want, sizeof want);
    uint64_t cu_free = num(line, "cu_free");
    assert_int_equal(num(line, "v1_total"), 16 * GB);
    assert_int_equal(num(line, "v1_free"), cu_free);             /* the driver's free */
    assert_int_equal(num(line, "v1_used"), 16 * GB - cu_free);
    assert_int_equal(num(line, "v1_used"), 256 * MB + 128 * MB + 2 * CTX_MEMORY);
    assert_procs(line, want);
    assert_int_equal(num(line, "wrapped"), 0);
    stop(&plain);
    stop(&peer);
}

/* ---- pynvml ----------------------------------------------------------------- */

/* tests/clients/pynvml_smi.py <mib> in build/venv: its JSON line. */
static void pynvml_run(int salus, const char *limit, const char *mib, pid_t *pid, char *line,
                       size_t len)
{
    char py[512], script[512];
    tu_env_t env;
    tu_env_init(&env);
    if (salus)
        tu_env_salus(&env, state_name, table_name);
    else
        tu_env_simgpu(&env, state_name);
    tu_env_set(&env, "SIMGPU_CTX_MEMORY", "64M");
    tu_env_set(&env, "SALUS_MEM_HEADROOM", "0");
    if (limit)
        tu_env_set(&env, "SALUS_MEM_LIMIT", "%s", limit);
    else
        tu_env_unset(&env, "SALUS_MEM_LIMIT");
    char *argv[] = { (char *)tu_build_path("venv/bin/python", py, sizeof py),
                     (char *)tu_source_path("tests/clients/pynvml_smi.py", script, sizeof script),
                     (char *)mib, NULL };
    tu_proc_t p;
    int rc = tu_run(argv, &env, 30000, &p);
    tu_env_free(&env);
    char *out = tu_read_file(p.out_path, NULL), *err = tu_read_file(p.err_path, NULL);
    if (rc != 0 || !out || tu_find_line(out, "\"program\":\"pynvml\"", 0, line, len) != 0)
        fail_msg("pynvml_smi.py exited %d: %s / %s", rc, out ? out : "", err ? err : "");
    printf("%s", out);               /* the nvidia-smi table, for the log */
    free(out);
    free(err);
    *pid = p.pid;
}

/* pynvml inside a limited job, as a monitor under libsalus and outside it. */
static void test_pynvml_inside_and_outside(void **state)
{
    (void)state;
    client_t peer, outsider;
    start(&peer, "tests/clients/nvmlclient", 1, NULL, "256");
    next_line(&peer);
    start(&outsider, "tests/clients/nvmlclient", 0, NULL, "64");
    next_line(&outsider);
    char line[2048], want[64], got[512];
    pid_t pid;

    pynvml_run(1, "1G", "128", &pid, line, sizeof line);
    pair(peer.p.pid, pid, want, sizeof want);
    assert_int_equal(num(line, "total"), 1 * GB);
    assert_int_equal(num(line, "used"), 128 * MB + CTX_MEMORY);
    assert_int_equal(num(line, "free"), num(line, "cu_free"));
    assert_int_equal(num(line, "total"), num(line, "used") + num(line, "free"));
    assert_int_equal(num(line, "total2"), 1 * GB);
    assert_int_equal(num(line, "free2"), num(line, "cu_free"));
    assert_int_equal(num(line, "used2"), 128 * MB + CTX_MEMORY);
    assert_int_equal(tu_json_str(line, "procs", got, sizeof got), 0);
    assert_string_equal(got, want);

    /* a monitor under libsalus, using no CUDA: the device, the table's processes */
    pynvml_run(1, "1G", "0", &pid, line, sizeof line);
    snprintf(want, sizeof want, "%d", (int)peer.p.pid);
    assert_int_equal(num(line, "total"), 16 * GB);
    assert_int_equal(num(line, "used"), 256 * MB + 64 * MB + 2 * CTX_MEMORY);
    assert_int_equal(tu_json_str(line, "procs", got, sizeof got), 0);
    assert_string_equal(got, want);

    /* outside Salus: the same device, every process on it */
    pynvml_run(0, NULL, "0", &pid, line, sizeof line);
    pair(peer.p.pid, outsider.p.pid, want, sizeof want);
    assert_int_equal(num(line, "total"), 16 * GB);
    assert_int_equal(num(line, "used"), 256 * MB + 64 * MB + 2 * CTX_MEMORY);
    assert_int_equal(tu_json_str(line, "procs", got, sizeof got), 0);
    assert_string_equal(got, want);
    stop(&outsider);
    stop(&peer);
}

/* ---- salus-top ------------------------------------------------------------------ */

/* salus-top's device line and JSON from NVML, over simgpu's: the device's
 * figures (salus-top runs without libsalus), sensors simgpu lacks left out. */
static void test_salus_top_reads_nvml(void **state)
{
    (void)state;
    client_t peer;
    start(&peer, "tests/clients/nvmlclient", 1, NULL, "256");
    uint64_t own_used = num(next_line(&peer), "v1_used");     /* its NVML view: 256M + context */
    char prog[512];
    tu_env_t env;
    tu_env_init(&env);
    tu_env_simgpu(&env, state_name);
    tu_proc_t p;
    char *json_argv[] = { (char *)tu_build_path("bin/salus-top", prog, sizeof prog), "--once",
                          "--json", "-t", table_name, NULL };
    assert_int_equal(tu_run(json_argv, &env, 20000, &p), 0);
    char *out = tu_read_file(p.out_path, NULL);
    assert_non_null(out);
    if (!strstr(out, "\"nvml\":{\"mem_used_bytes\":335544320,\"mem_total_bytes\":17179869184,"
                     "\"utilization_percent\":0,\"temperature_c\":null,\"power_watts\":null}"))
        fail_msg("salus-top --json has not NVML's figures of the device: %s", out);
    /* One figure: Salus's used of the device and of the job, contexts
     * included, is NVML's (the device's, with the job alone on it; the
     * job's own view through NVML), and the contexts are their own part. */
    const char *proc = strstr(out, "\"processes\":[{");
    assert_non_null(proc);
    assert_int_equal(num(out, "mem_used_bytes"), 256 * MB + CTX_MEMORY);   /* the device's */
    assert_int_equal(num(out, "mem_context_bytes"), CTX_MEMORY);
    assert_int_equal(num(proc, "mem_used_bytes"), own_used);
    assert_int_equal(own_used, 256 * MB + CTX_MEMORY);
    assert_int_equal(num(proc, "mem_context_bytes"), CTX_MEMORY);
    free(out);
    char *text_argv[] = { prog, "--once", "-t", table_name, NULL };
    assert_int_equal(tu_run(text_argv, &env, 20000, &p), 0);
    out = tu_read_file(p.out_path, NULL);
    assert_non_null(out);
    if (!strstr(out, "util 0%  vram 320M/16G"))
        fail_msg("salus-top's device line has not NVML's figures: %s", out);
    if (!strstr(out, "mem 320M used of ") || !strstr(out, "(contexts 64M)"))
        fail_msg("salus-top's device line has not NVML's used (contexts included): %s", out);
    free(out);
    tu_env_free(&env);
    stop(&peer);
}

/* ---- simgpu's NVML against simgpu's driver ---------------------------------- */

static void *sym(void *h, const char *name)
{
    void *f = dlsym(h, name);
    if (!f)
        fail_msg("no %s: %s", name, dlerror());
    return f;
}

typedef struct util_probe {
    nvmlDevice_t d;
    nvmlReturn_t (*rates)(nvmlDevice_t, nvmlUtilization_t *);
    nvmlReturn_t (*samples)(nvmlDevice_t, nvmlProcessUtilizationSample_t *, unsigned *,
                            unsigned long long);
    nvmlReturn_t (*procs)(nvmlDevice_t, unsigned *, nvmlProcessInfo_t *);
    pid_t pid;
    int busy;            /* 1: until busy; 0: until idle and gone */
    unsigned gpu, sm;    /* the last reading */
    int listed;          /* the job in the compute process list */
} util_probe_t;

/* Busy: the device mostly busy, the job's own sample busy, the job listed.
 * Idle: the device idle, the job in no list. */
static int util_shows(void *arg)
{
    util_probe_t *p = arg;
    nvmlUtilization_t u;
    nvmlProcessUtilizationSample_t s[16];
    nvmlProcessInfo_t rows[16];
    unsigned n = 16, k = 16;
    if (p->rates(p->d, &u) != NVML_SUCCESS)
        return 0;
    p->gpu = u.gpu;
    p->sm = 0;
    p->listed = 0;
    if (p->samples(p->d, s, &n, 0) != NVML_SUCCESS)
        n = 0;
    for (unsigned i = 0; i < n; i++)
        if (s[i].pid == (unsigned)p->pid)
            p->sm = s[i].smUtil;
    if (p->procs(p->d, &k, rows) != NVML_SUCCESS)
        k = 0;
    for (unsigned i = 0; i < k; i++)
        p->listed |= rows[i].pid == (unsigned)p->pid;
    return p->busy ? p->gpu >= 50 && p->sm >= 50 && p->listed
                   : p->gpu == 0 && p->sm == 0 && !p->listed;
}

static void test_sim_nvml_matches_driver(void **state)
{
    (void)state;
    char path[512];
    setenv("SIMGPU_STATE", state_name, 1);
    setenv("SIMGPU_DEVICES", "2", 1);
    void *cu = dlopen(tu_build_path("sim/libcuda.so.1", path, sizeof path), RTLD_NOW | RTLD_LOCAL);
    void *nv = dlopen(tu_build_path("sim/libnvidia-ml.so.1", path, sizeof path),
                      RTLD_NOW | RTLD_LOCAL);
    assert_non_null(cu);
    assert_non_null(nv);
    CUresult (*init)(unsigned) = sym(cu, "cuInit");
    CUresult (*get)(CUdevice *, int) = sym(cu, "cuDeviceGet");
    CUresult (*uuid)(CUuuid *, CUdevice) = sym(cu, "cuDeviceGetUuid");
    CUresult (*name)(char *, int, CUdevice) = sym(cu, "cuDeviceGetName");
    CUresult (*pci)(char *, int, CUdevice) = sym(cu, "cuDeviceGetPCIBusId");
    CUresult (*total)(size_t *, CUdevice) = sym(cu, "cuDeviceTotalMem_v2");
    nvmlReturn_t (*ninit)(void) = sym(nv, "nvmlInit_v2");
    nvmlReturn_t (*count)(unsigned *) = sym(nv, "nvmlDeviceGetCount_v2");
    nvmlReturn_t (*handle)(unsigned, nvmlDevice_t *) = sym(nv, "nvmlDeviceGetHandleByIndex_v2");
    nvmlReturn_t (*nuuid)(nvmlDevice_t, char *, unsigned) = sym(nv, "nvmlDeviceGetUUID");
    nvmlReturn_t (*nname)(nvmlDevice_t, char *, unsigned) = sym(nv, "nvmlDeviceGetName");
    nvmlReturn_t (*npci)(nvmlDevice_t, nvmlPciInfo_t *) = sym(nv, "nvmlDeviceGetPciInfo_v3");
    nvmlReturn_t (*mem)(nvmlDevice_t, nvmlMemory_t *) = sym(nv, "nvmlDeviceGetMemoryInfo");
    nvmlReturn_t (*temp)(nvmlDevice_t, nvmlTemperatureSensors_t, unsigned *) =
        sym(nv, "nvmlDeviceGetTemperature");
    nvmlReturn_t (*util)(nvmlDevice_t, nvmlUtilization_t *) =
        sym(nv, "nvmlDeviceGetUtilizationRates");

    nvmlDevice_t d;
    assert_int_equal(handle(0, &d), NVML_ERROR_UNINITIALIZED);   /* before nvmlInit */
    assert_int_equal(init(0), CUDA_SUCCESS);
    assert_int_equal(ninit(), NVML_SUCCESS);
    unsigned n = 0;
    assert_int_equal(count(&n), NVML_SUCCESS);
    assert_int_equal(n, 2);
    for (unsigned i = 0; i < n; i++) {
        CUdevice cd;
        CUuuid u;
        char cname[128], nname_s[128], cpci[64], text[NVML_DEVICE_UUID_BUFFER_SIZE], want[80];
        size_t bytes;
        nvmlPciInfo_t info;
        nvmlMemory_t m;
        assert_int_equal(get(&cd, (int)i), CUDA_SUCCESS);
        assert_int_equal(handle(i, &d), NVML_SUCCESS);
        assert_int_equal(uuid(&u, cd), CUDA_SUCCESS);
        assert_int_equal(nuuid(d, text, sizeof text), NVML_SUCCESS);
        const unsigned char *b = (const unsigned char *)u.bytes;
        snprintf(want, sizeof want,
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                 b[12], b[13], b[14], b[15]);
        assert_string_equal(text, want);
        assert_int_equal(name(cname, sizeof cname, cd), CUDA_SUCCESS);
        assert_int_equal(nname(d, nname_s, sizeof nname_s), NVML_SUCCESS);
        assert_string_equal(cname, nname_s);
        assert_int_equal(pci(cpci, sizeof cpci, cd), CUDA_SUCCESS);
        assert_int_equal(npci(d, &info), NVML_SUCCESS);
        assert_string_equal(cpci, info.busIdLegacy);
        assert_int_equal(total(&bytes, cd), CUDA_SUCCESS);
        assert_int_equal(mem(d, &m), NVML_SUCCESS);
        assert_int_equal(m.total, bytes);
    }
    /* a forged handle, an unsupported sensor: the real NVML's codes */
    unsigned t;
    nvmlMemory_t m;
    nvmlUtilization_t u;
    assert_int_equal(mem((nvmlDevice_t)&t, &m), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(handle(n, &d), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(handle(0, &d), NVML_SUCCESS);
    assert_int_equal(temp(d, NVML_TEMPERATURE_GPU, &t), NVML_ERROR_NOT_SUPPORTED);
    /* the NVLink and fabric queries PyTorch resolves at its first
     * allocation: there, and a PCIe card's answer */
    nvmlReturn_t (*remote)(nvmlDevice_t, unsigned, nvmlIntNvLinkDeviceType_t *) =
        sym(nv, "nvmlDeviceGetNvLinkRemoteDeviceType");
    nvmlReturn_t (*rpci)(nvmlDevice_t, unsigned, nvmlPciInfo_t *) =
        sym(nv, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    nvmlReturn_t (*fabric)(nvmlDevice_t, nvmlGpuFabricInfoV_t *) =
        sym(nv, "nvmlDeviceGetGpuFabricInfoV");
    nvmlIntNvLinkDeviceType_t lt;
    nvmlPciInfo_t lp;
    nvmlGpuFabricInfoV_t fi = { .version = nvmlGpuFabricInfo_v2 };
    assert_int_equal(remote(d, 0, &lt), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(rpci(d, 0, &lp), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(fabric(d, &fi), NVML_SUCCESS);
    assert_int_equal(fi.state, NVML_GPU_FABRIC_STATE_NOT_SUPPORTED);
    fi.version = 7;
    assert_int_equal(fabric(d, &fi), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    /* XLA's reads: the driver's version as dotted numbers (it parses each
     * field), the PCIe link it estimates bandwidth from */
    nvmlReturn_t (*drv)(char *, unsigned) = sym(nv, "nvmlSystemGetDriverVersion");
    char ver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    unsigned major = 0, minor = 0, patch = 0;
    int used = 0;
    assert_int_equal(drv(ver, sizeof ver), NVML_SUCCESS);
    assert_int_equal(sscanf(ver, "%u.%u.%u%n", &major, &minor, &patch, &used), 3);
    assert_int_equal(ver[used], '\0');
    assert_true(major >= 580);                  /* CUDA 13.0's driver branch */
    nvmlReturn_t (*gen)(nvmlDevice_t, unsigned *) = sym(nv, "nvmlDeviceGetCurrPcieLinkGeneration");
    nvmlReturn_t (*gmax)(nvmlDevice_t, unsigned *) = sym(nv, "nvmlDeviceGetMaxPcieLinkGeneration");
    nvmlReturn_t (*wid)(nvmlDevice_t, unsigned *) = sym(nv, "nvmlDeviceGetCurrPcieLinkWidth");
    nvmlReturn_t (*wmax)(nvmlDevice_t, unsigned *) = sym(nv, "nvmlDeviceGetMaxPcieLinkWidth");
    unsigned g = 0, gm = 0, w = 0, wm = 0;
    assert_int_equal(gen(d, &g), NVML_SUCCESS);
    assert_int_equal(gmax(d, &gm), NVML_SUCCESS);
    assert_int_equal(wid(d, &w), NVML_SUCCESS);
    assert_int_equal(wmax(d, &wm), NVML_SUCCESS);
    assert_int_equal(g, 5);
    assert_int_equal(w, 16);
    assert_true(g <= gm && w <= wm);
    assert_int_equal(gen(d, NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(gen((nvmlDevice_t)&t, &g), NVML_ERROR_INVALID_ARGUMENT);
    /* NCCL's reads at its first communicator (it calls the first two
     * without checking they exist): the driver's capability and peers */
    CUresult (*attr)(int *, CUdevice_attribute, CUdevice) = sym(cu, "cuDeviceGetAttribute");
    CUresult (*peer)(int *, CUdevice, CUdevice) = sym(cu, "cuDeviceCanAccessPeer");
    nvmlReturn_t (*cc)(nvmlDevice_t, int *, int *) = sym(nv, "nvmlDeviceGetCudaComputeCapability");
    nvmlReturn_t (*p2p)(nvmlDevice_t, nvmlDevice_t, nvmlGpuP2PCapsIndex_t, nvmlGpuP2PStatus_t *) =
        sym(nv, "nvmlDeviceGetP2PStatus");
    nvmlReturn_t (*fields)(nvmlDevice_t, int, nvmlFieldValue_t *) =
        sym(nv, "nvmlDeviceGetFieldValues");
    nvmlReturn_t (*ccstate)(nvmlConfComputeSystemState_t *) =
        sym(nv, "nvmlSystemGetConfComputeState");
    int cmaj = 0, cmin = 0, dmaj = -1, dmin = -1;
    CUdevice c0, c1;
    nvmlDevice_t d1;
    assert_int_equal(get(&c0, 0), CUDA_SUCCESS);
    assert_int_equal(get(&c1, 1), CUDA_SUCCESS);
    assert_int_equal(handle(1, &d1), NVML_SUCCESS);
    assert_int_equal(attr(&dmaj, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, c0), CUDA_SUCCESS);
    assert_int_equal(attr(&dmin, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, c0), CUDA_SUCCESS);
    assert_int_equal(cc(d, &cmaj, &cmin), NVML_SUCCESS);
    assert_int_equal(cmaj, dmaj);
    assert_int_equal(cmin, dmin);
    int can01 = -1, can00 = -1;
    nvmlGpuP2PStatus_t st01, st00, stnv;
    assert_int_equal(peer(&can01, c0, c1), CUDA_SUCCESS);
    assert_int_equal(peer(&can00, c0, c0), CUDA_SUCCESS);
    assert_int_equal(p2p(d, d1, NVML_P2P_CAPS_INDEX_READ, &st01), NVML_SUCCESS);
    assert_int_equal(p2p(d, d, NVML_P2P_CAPS_INDEX_WRITE, &st00), NVML_SUCCESS);
    assert_int_equal(p2p(d, d1, NVML_P2P_CAPS_INDEX_NVLINK, &stnv), NVML_SUCCESS);
    assert_int_equal(st01 == NVML_P2P_STATUS_OK, can01 == 1);
    assert_int_equal(st00 == NVML_P2P_STATUS_OK, can00 == 1);
    assert_int_equal(stnv, NVML_P2P_STATUS_NOT_SUPPORTED);       /* PCIe cards */
    assert_int_equal(p2p(d, (nvmlDevice_t)&t, NVML_P2P_CAPS_INDEX_READ, &st01),
                     NVML_ERROR_INVALID_ARGUMENT);
    nvmlFieldValue_t fv[2] = { { .fieldId = NVML_FI_DEV_NVLINK_LINK_COUNT },
                               { .fieldId = NVML_FI_DEV_POWER_INSTANT } };
    assert_int_equal(fields(d, 2, fv), NVML_SUCCESS);             /* each field says */
    assert_int_equal(fv[0].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(fv[1].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
    nvmlConfComputeSystemState_t ccs;
    assert_int_equal(ccstate(&ccs), NVML_SUCCESS);
    assert_int_equal(ccs.ccFeature, NVML_CC_SYSTEM_FEATURE_DISABLED);
    assert_int_equal(util(d, &u), NVML_SUCCESS);
    assert_int_equal(u.gpu, 0);                 /* nothing has run on this state */

    /* A job spinning on device 0: utilization from the engine's kernel
     * time, the job's own samples, the job in the process list; all gone
     * a sample period after it ends. */
    char cubin[512];
    client_t job;
    tu_build_path("workloads/kernels.cubin", cubin, sizeof cubin);
    start_as(&job, "tests/clients/nvmlclient", 0, NULL, "16", NULL, "spin", cubin);
    next_line(&job);
    util_probe_t pr = { .d = d, .rates = util, .samples = sym(nv, "nvmlDeviceGetProcessUtilization"),
                        .procs = sym(nv, "nvmlDeviceGetComputeRunningProcesses_v3"),
                        .pid = job.p.pid, .busy = 1 };
    if (!tu_await(util_shows, &pr, 20000))
        fail_msg("simgpu's NVML never showed the job busy: gpu %u%%, its sample %u%%, listed %d",
                 pr.gpu, pr.sm, pr.listed);
    stop(&job);
    pr.busy = 0;
    if (!tu_await(util_shows, &pr, 20000))
        fail_msg("simgpu's NVML still shows the ended job: gpu %u%%, listed %d", pr.gpu,
                 pr.listed);
    unsetenv("SIMGPU_STATE");
    unsetenv("SIMGPU_DEVICES");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_view_beside_peer_and_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_view_through_a_page_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_linked_program, setup, teardown),
        cmocka_unit_test_setup_teardown(test_control_whole_device, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unusable_table_fails_open, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pynvml_inside_and_outside, setup, teardown),
        cmocka_unit_test_setup_teardown(test_salus_top_reads_nvml, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sim_nvml_matches_driver, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
