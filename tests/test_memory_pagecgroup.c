/*
 * test_memory_pagecgroup.c - a paging job inside a memory cgroup is not
 * OOM-killed by its own page-out (issue 32, item 2), over simgpu with
 * libsalus preloaded into pageclient.
 *
 * A low-priority pageclient job of 200 MiB with paging on (SALUS_SWAP=on)
 * runs in a memory cgroup of 256 MiB that this test makes (as root: cgroup
 * v2 where its memory controller is, else v1's memory hierarchy); a
 * high-priority job of 192 MiB (one block) arrives outside it, on a
 * 320 MiB device that holds one of them, and asks the first to page out
 * the 76 MiB its block lacks, at once.
 *
 * simgpu's device memory is host memory (memfds), which the cgroup charges
 * too: the job's 200 MiB of device memory fit its 256 MiB with room for the
 * process, and it runs alone without a fault.  What does not fit is the
 * page-out's pinned staging: 200 MiB more, all allocated and copied before
 * any device memory is released (76 MiB of it here: 300 MiB in all).  The
 * peer's one block makes one large request: asked in 8 MiB pieces, each
 * piece's staging would fit beside the device memory the piece before
 * released, and the job would be killed at its page-in instead, where
 * simgpu's device memory comes back beside the staging (on a GPU, not the
 * cgroup's).  On a real GPU the device memory is not
 * the cgroup's, and the staging alone is what a cgroup near its limit
 * cannot hold (the 809 MiB of 1000 MiB): the same page-out, the
 * same kill.  Before the fix the kernel's OOM killer SIGKILLed the job
 * mid page-out (the host bound, half of MemAvailable, knows nothing of
 * cgroups).  Now the page-out is refused (all but what fits in the
 * cgroup's room less a margin): the job says once why, keeps its memory on
 * the GPU and finishes with every byte intact; the peer waits for the
 * memory and then finishes too.
 *
 * Not root, or no memory cgroup this test can make and limit: skipped,
 * with the reason in the summary.  Every child has a deadline; the cgroup
 * is removed at the end.
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
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/testutil.h"
#include "test_memory_jobs.h"

#define CHILD_MS   30000               /* a job alone runs about 2 s */
#define CG_MIB     256                 /* the job's cgroup */
#define JOB_MIB    "200"               /* fits the cgroup; with its staging, not */
#define PEER_MIB   "192"               /* one block: it asks for 76 MiB at once */
#define DEV_MIB    "320M"              /* one job's memory at a time */
/* What the job says once when its cgroup refuses the page-out (src/vmem). */
#define SAID_CG    "would pass this job's memory cgroup's limit"

static char state_name[64], table_name[64];
static char cg_dir[600];               /* the cgroup made, removed by the teardown */
static tu_proc_t job, peer;

/* ---- the cgroup -------------------------------------------------------------- */

static int write_text(const char *dir, const char *file, const char *text)
{
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "we");
    if (!f)
        return -1;
    int ok = fputs(text, f) >= 0;
    ok = fclose(f) == 0 && ok;
    return ok ? 0 : -1;
}

/* Where a memory cgroup can be made: the cgroup v2 mount whose controllers
 * include memory, else cgroup v1's memory hierarchy.  0 with its mount
 * point and whether it is v2; -1 with the reason. */
static int memory_mount(char *mnt, size_t len, int *v2, char *why, size_t wlen)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    char line[2048], v1[512] = "";
    if (!f) {
        snprintf(why, wlen, "cannot read /proc/self/mountinfo: %s", strerror(errno));
        return -1;
    }
    *v2 = 0;
    while (fgets(line, sizeof line, f)) {
        char point[512], type[64], opts[512], ctl[600];
        const char *dash = strstr(line, " - ");
        if (!dash || sscanf(line, "%*s %*s %*s %*s %511s", point) != 1 ||
            sscanf(dash + 3, "%63s %*s %511s", type, opts) != 2)
            continue;
        snprintf(ctl, sizeof ctl, "%s/cgroup.controllers", point);
        if (strcmp(type, "cgroup2") == 0 && pj_file_has(ctl, "memory")) {
            snprintf(mnt, len, "%s", point);
            *v2 = 1;
            break;
        }
        char words[520];
        snprintf(words, sizeof words, ",%s,", opts);
        if (strcmp(type, "cgroup") == 0 && strstr(words, ",memory,"))
            snprintf(v1, sizeof v1, "%s", point);
    }
    fclose(f);
    if (!*v2 && !*v1) {
        snprintf(why, wlen, "no memory cgroup controller is mounted (v2 or v1)");
        return -1;
    }
    if (!*v2)
        snprintf(mnt, len, "%s", v1);
    return 0;
}

/* Make cg_dir with a limit of CG_MIB and no swap; 0, or -1 with why. */
static int make_cgroup(char *why, size_t wlen)
{
    char mnt[512], limit[32], sub[600];
    int v2;
    if (geteuid() != 0) {
        snprintf(why, wlen, "not root: making a memory cgroup needs root");
        return -1;
    }
    if (memory_mount(mnt, sizeof mnt, &v2, why, wlen) != 0)
        return -1;
    snprintf(sub, sizeof sub, "%s/cgroup.subtree_control", mnt);
    if (v2 && !pj_file_has(sub, "memory") &&
        write_text(mnt, "cgroup.subtree_control", "+memory") != 0) {
        snprintf(why, wlen, "cannot enable +memory in %s/cgroup.subtree_control: %s", mnt,
                 strerror(errno));
        return -1;
    }
    snprintf(cg_dir, sizeof cg_dir, "%s/salus-test-%d", mnt, (int)getpid());
    if (mkdir(cg_dir, 0755) != 0) {
        snprintf(why, wlen, "cannot make the cgroup %s: %s", cg_dir, strerror(errno));
        cg_dir[0] = 0;
        return -1;
    }
    snprintf(limit, sizeof limit, "%llu", (unsigned long long)CG_MIB << 20);
    if (write_text(cg_dir, v2 ? "memory.max" : "memory.limit_in_bytes", limit) != 0) {
        snprintf(why, wlen, "cannot set the cgroup's memory limit: %s", strerror(errno));
        return -1;
    }
    /* Swap would let the kernel page the job out instead of killing it
     * (none is tried if the host has none; the files may be absent). */
    if (v2)
        write_text(cg_dir, "memory.swap.max", "0");
    else
        write_text(cg_dir, "memory.memsw.limit_in_bytes", limit);
    return 0;
}

static void remove_cgroup(void)
{
    /* The processes are reaped; the kernel empties a cgroup's list of
     * them soon after, not always before rmdir is asked. */
    for (int i = 0; cg_dir[0] && i < 200 && rmdir(cg_dir) != 0 && errno == EBUSY; i++)
        usleep(10000);
    cg_dir[0] = 0;
}

/* ---- the jobs ------------------------------------------------------------------ */

/* A pageclient job; in the cgroup (its shell joins it, then execs the job,
 * so that every byte the job touches is charged there) when in_cg. */
static void spawn(tu_proc_t *p, int priority, const char *iters, const char *wait_ms,
                  int in_cg)
{
    const char *mib = in_cg ? JOB_MIB : PEER_MIB;
    char client[512], cubin[512], procs[700];
    snprintf(procs, sizeof procs, "%s/cgroup.procs", cg_dir);
    char *direct[] = { (char *)tu_build_path("tests/clients/pageclient", client, sizeof client),
                       (char *)tu_build_path("workloads/kernels.cubin", cubin, sizeof cubin),
                       (char *)mib, (char *)iters, "2000", NULL };
    char *joined[] = { "/bin/sh", "-c", "echo $$ > \"$0\" && exec \"$@\"", procs, direct[0],
                       direct[1], direct[2], direct[3], direct[4], NULL };
    tu_env_t env;
    tu_env_init(&env);
    tu_env_salus(&env, state_name, table_name);
    tu_env_set(&env, "SIMGPU_MEMORY", DEV_MIB);
    tu_env_set(&env, "SIMGPU_CTX_MEMORY", "0");
    tu_env_set(&env, "PAGECLIENT_BLOCK_MIB", "%s", in_cg ? "8" : PEER_MIB);
    tu_env_set(&env, "SALUS_MEM_HEADROOM", "4M");
    tu_env_set(&env, "SALUS_SWAP", "on");
    tu_env_set(&env, "SALUS_POLICY", "priority");
    tu_env_set(&env, "SALUS_PRIORITY", "%d", priority);
    tu_env_set(&env, "SALUS_MEM_WAIT_MS", "%s", wait_ms);
    tu_env_unset(&env, "SALUS_SWAP_LIMIT");
    tu_env_unset(&env, "SALUS_MEM_LIMIT");
    tu_env_unset(&env, "SALUS_REPORT");
    tu_env_unset(&env, "SALUS_LOG");
    assert_int_equal(tu_spawn(p, in_cg ? joined : direct, &env), 0);
    tu_env_free(&env);
}

static void test_page_out_in_cgroup_is_not_oom_killed(void **state)
{
    (void)state;
    char why[700];
    if (!tu_built("sim/libcuda.so.1") || !tu_built("libsalus.so") ||
        !tu_built("workloads/kernels.cubin") || !tu_built("tests/clients/pageclient"))
        skip();
    if (make_cgroup(why, sizeof why) != 0) {
        remove_cgroup();
        tu_skip("%s", why);
    }
    tu_unique_name("spcg", state_name, sizeof state_name);
    tu_unique_name("stpcg", table_name, sizeof table_name);
    spawn(&job, 10, "300", "0", 1);
    pj_await_ready(&job, CHILD_MS, "the job in the cgroup never filled its memory");
    spawn(&peer, 90, "50", "120000", 0);    /* waits for the job's memory if need be */
    pj_finish(&job, CHILD_MS, "cgroup's");
    char *err = tu_read_file(job.err_path, NULL);
    int said = err ? tu_count_lines(err, SAID_CG) : 0;
    free(err);
    if (said != 1)
        pj_fail_with(&job, said ? "the job said more than once why it could not page out"
                             : "the job never said its cgroup refused the page-out");
    pj_finish(&peer, CHILD_MS, "high-priority");
}

static int teardown(void **state)
{
    (void)state;
    tu_proc_t *all[] = { &job, &peer };
    for (int j = 0; j < 2; j++) {
        if (all[j]->pid > 0 && !tu_exited(all[j])) {
            kill(all[j]->pid, SIGKILL);
            tu_wait(all[j], CHILD_MS);
        }
        memset(all[j], 0, sizeof *all[j]);
    }
    remove_cgroup();
    if (state_name[0])
        shm_unlink(state_name);
    if (table_name[0])
        shm_unlink(table_name);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_page_out_in_cgroup_is_not_oom_killed, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
