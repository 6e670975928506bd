/*
 * test_memory_pagekill.c - a job SIGKILLed at each phase of paging, with
 * the real allocator (vmm_page.c) over simgpu: while it is paged out,
 * half-way through a page-out and half-way through a page-in.  Each test
 * runs two processes of this binary on one simgpu state and one table:
 *
 *   - a survivor holds 96 MiB (two big allocations) with a pattern;
 *   - the victim holds 96 MiB the same way and 200 small allocations, and
 *     is parked at the phase (the allocator's test seam,
 *     vmem_phase_hook, stops it half-way: one big allocation released or
 *     mapped again, the other not, its staging held), then SIGKILLed.
 *
 * Then the survivor pages out and in (every byte of it intact) and
 * allocates 128 MiB, which fits in the 256 MiB device only once what the
 * victim held is reclaimed, in the table and in the driver; and a third
 * process, a fresh one, finds the device's free memory to be the device
 * less exactly what the survivor holds, the table's figures for the device
 * those of the survivor alone (used and granted), its invariants whole
 * (mem_check_locked), and no slot left to the victim (its staging counters
 * went with it; its host staging was its own memory).  test_memory_vmm's
 * test_sigkill_while_out covers a lone process killed while out, and
 * test_memory_page's test_killed_while_paging_out the decision's side.
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
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/testutil.h"
#include "memory/mem_layout.h"
#include "test_memory_vmm_lib.h"

#define DEVICE_MEM "256M"
#define BIG        (48 * MiB)
#define SMALLS     200
#define EXTRA      (128 * MiB)
#define WAIT_MS    60000

enum { PARKED_OUT = 100 };            /* paged out whole: not a seam's phase */

/* Shared with the children (an anonymous shared mapping made before the
 * forks). */
typedef struct shared {
    int ready;                        /* the survivor holds its pattern */
    int parked;                       /* the victim's phase, once parked there */
    int go;                           /* the survivor may page, check, allocate */
    int done;                         /* the survivor: 1 all went well, -1 not */
    int quit;                         /* the survivor may exit */
    uint64_t resident;                /* the survivor's bytes on the device */
} shared_t;

static shared_t *sh;
static char state_name[96], table_name[96];
static int park_at;                   /* in the victim: the phase to park at */

static int flag_set(void *arg)
{
    return __atomic_load_n((int *)arg, __ATOMIC_ACQUIRE) != 0;
}

static int child_setup(void)
{
    setenv("SIMGPU_CTX_MEMORY", "0", 1);   /* the device holds only the test's bytes */
    setenv("SALUS_MEM_HEADROOM", "0", 1);
    return setup_named(DEVICE_MEM, state_name, table_name);
}

/* Two big allocations with the pattern (seed). */
static int hold(CUdeviceptr p[2], uint64_t seed, uint64_t *buf, size_t cap)
{
    for (int i = 0; i < 2; i++) {
        CK(vmem_alloc(MEM_KIND_DEVICE, &p[i], NULL, BIG, 1, 0));
        if (fill(p[i], BIG, seed + (uint64_t)i, buf, cap))
            return 1;
    }
    return 0;
}

/* ---- the survivor ---------------------------------------------------------------- */

static int survivor_round(CUdeviceptr p[2], uint64_t *buf, size_t cap)
{
    uint64_t freed = 0, restored = 0;
    CUdeviceptr extra;
    CK(vmem_page_out(0, 0, &freed));
    TRUE(freed == 2 * BIG);
    CK(vmem_page_in(0, &restored));
    TRUE(restored == 2 * BIG);
    for (int i = 0; i < 2; i++)
        if (check(p[i], BIG, 1 + (uint64_t)i, buf, cap))
            return 1;
    CK(vmem_alloc(MEM_KIND_DEVICE, &extra, NULL, EXTRA, 1, 0));   /* the victim's room */
    if (fill(extra, EXTRA, 3, buf, cap) || check(extra, EXTRA, 3, buf, cap))
        return 1;
    TRUE(table_used() == 2 * BIG + EXTRA && vmem_resident_bytes(0) == 2 * BIG + EXTRA);
    sh->resident = vmem_resident_bytes(0);
    return 0;
}

static int survivor(void)
{
    size_t cap = 8 * MiB;
    uint64_t *buf = malloc(cap);
    CUdeviceptr p[2];
    setenv("SALUS_MEM_WAIT_MS", "5000", 1);   /* a leftover of the victim: refused */
    if (!buf || child_setup() || hold(p, 1, buf, cap))
        return 1;
    __atomic_store_n(&sh->ready, 1, __ATOMIC_RELEASE);
    if (!tu_await(flag_set, &sh->go, WAIT_MS))
        return 1;
    int rc = survivor_round(p, buf, cap);
    __atomic_store_n(&sh->done, rc == 0 ? 1 : -1, __ATOMIC_RELEASE);
    tu_await(flag_set, &sh->quit, WAIT_MS);
    return rc;
}

/* ---- the victim -------------------------------------------------------------------- */

/* Parked until the SIGKILL; a test that failed before it ends the park
 * at its teardown's quit, or the deadline does. */
static void park(void)
{
    __atomic_store_n(&sh->parked, park_at, __ATOMIC_RELEASE);
    tu_await(flag_set, &sh->quit, WAIT_MS);
    _exit(1);
}

static void park_hook(vmem_phase_t phase)
{
    if ((int)phase == park_at)
        park();
}

static int victim(void)
{
    size_t cap = 8 * MiB;
    uint64_t *buf = malloc(cap), freed = 0, restored = 0;
    CUdeviceptr p[2], s;
    if (!buf || child_setup() || hold(p, 11, buf, cap))
        return 1;
    for (int i = 0; i < SMALLS; i++) {
        CK(vmem_alloc(MEM_KIND_DEVICE, &s, NULL, 4096, 1, 0));
        if (fill(s, 4096, 13, buf, cap))
            return 1;
    }
    if (park_at == VMEM_HALF_OUT)
        vmem_phase_hook = park_hook;
    CK(vmem_page_out(0, 0, &freed));
    TRUE(freed == 2 * BIG + 2 * MiB && park_at != VMEM_HALF_OUT);
    if (park_at == PARKED_OUT)
        park();
    vmem_phase_hook = park_hook;
    CK(vmem_page_in(0, &restored));
    return 1;                         /* never here: parked half-way in */
}

/* ---- the fresh process that checks ---------------------------------------------- */

static int checker(void *arg)
{
    pid_t dead = *(pid_t *)arg;
    CUcontext ctx;
    mem_device_view_t dv;
    mem_slot_view_t sv;
    shm_ident_t id;
    setenv("SIMGPU_STATE", state_name, 1);
    setenv("SALUS_TABLE", table_name, 1);
    setenv("SIMGPU_CTX_MEMORY", "0", 1);
    CK(cuInit(0));
    CK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CK(cuCtxSetCurrent(ctx));
    TRUE(dev_free() == 256 * MiB - sh->resident);
    shm_table_t *t = shm_process_table();
    TRUE(t && mem_view_device(t, 0, &dv) == 0);
    TRUE(dv.used == sh->resident);
    int survivors = 0;
    for (int i = 0; i < SHM_MAX_SLOTS; i++) {
        if (shm_slot_ident(t, i, &id) != 0 || id.pid == getpid())
            continue;
        TRUE(id.pid != dead);
        TRUE(mem_view_slot(t, i, &sv) == 0);
        TRUE(sv.used == dv.used && sv.granted == dv.granted && sv.swapped_out == 0);
        survivors++;
    }
    TRUE(survivors == 1);
    TRUE(shm_lock(t) == 0);
    const char *bad = mem_check_locked(t);
    shm_unlock(t);
    if (bad)
        fprintf(stderr, "the table's invariants: %s\n", bad);
    TRUE(bad == NULL);
    return 0;
}

/* ---- the tests ---------------------------------------------------------------------- */

/* What the victim holds on the device, in the table, parked at `phase`:
 * nothing paged out; half-way out, the second big allocation and the small
 * region's granule (big allocations go first); half-way in, the granule
 * and the first big allocation (the small region comes back first). */
static uint64_t held_at(int phase)
{
    return phase == PARKED_OUT ? 0 : BIG + 2 * MiB;
}

static uint64_t table_used_of(pid_t pid)
{
    shm_open_opts_t o = { .name = table_name };
    shm_table_t *t = NULL;
    shm_ident_t id;
    mem_slot_view_t v;
    uint64_t used = UINT64_MAX;
    if (shm_open_table(&o, &t) != 0)
        return used;
    for (int i = 0; i < SHM_MAX_SLOTS; i++)
        if (shm_slot_ident(t, i, &id) == 0 && id.pid == pid && mem_view_slot(t, i, &v) == 0)
            used = v.used;
    shm_close_table(t);
    return used;
}

static pid_t start(int (*fn)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        _exit(fn());
    assert_true(pid > 0);
    return pid;
}

static int exit_code(pid_t pid)
{
    int st = 0;
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
}

typedef struct parked_goal { pid_t pid; int phase; } parked_goal_t;

/* Parked there, or dead (it will never be: the test fails at once). */
static int parked_or_dead(void *arg)
{
    parked_goal_t *g = arg;
    return __atomic_load_n(&sh->parked, __ATOMIC_ACQUIRE) == g->phase ||
           waitpid(g->pid, NULL, WNOHANG) == g->pid;
}

static pid_t surv, vict;

static int setup(void **state)
{
    (void)state;
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED)
        return -1;
    memset(sh, 0, sizeof *sh);
    surv = vict = 0;
    tu_unique_name("pk-sim", state_name, sizeof state_name);
    tu_unique_name("pk-tab", table_name, sizeof table_name);
    return 0;
}

/* A test that failed half-way leaves its children: they are ended here. */
static int teardown(void **state)
{
    (void)state;
    __atomic_store_n(&sh->quit, 1, __ATOMIC_RELEASE);
    pid_t kids[2] = { surv, vict };
    for (int i = 0; i < 2; i++)
        if (kids[i] > 0 && waitpid(kids[i], NULL, WNOHANG) == 0) {
            kill(kids[i], SIGKILL);
            waitpid(kids[i], NULL, 0);
        }
    munmap(sh, sizeof *sh);
    return 0;
}

static void killed_at(int phase)
{
    surv = start(survivor);
    if (!tu_await(flag_set, &sh->ready, WAIT_MS))
        fail_msg("the survivor never held its memory");
    park_at = phase;
    vict = start(victim);
    parked_goal_t g = { vict, phase };
    if (!tu_await(parked_or_dead, &g, WAIT_MS) || sh->parked != phase)
        fail_msg("the victim never parked at phase %d", phase);
    assert_int_equal(table_used_of(vict), held_at(phase));
    kill(vict, SIGKILL);
    assert_int_equal(exit_code(vict), 128 + SIGKILL);
    pid_t dead = vict;
    vict = 0;
    __atomic_store_n(&sh->go, 1, __ATOMIC_RELEASE);
    if (!tu_await(flag_set, &sh->done, WAIT_MS) || sh->done != 1)
        fail_msg("the survivor did not page, keep its bytes and allocate the victim's room");
    int told = -1;
    pid_t chk = tu_fork_teller(checker, &dead, &told);
    assert_true(chk > 0);
    kill(chk, SIGKILL);
    waitpid(chk, NULL, 0);
    assert_int_equal(told, 0);
    __atomic_store_n(&sh->quit, 1, __ATOMIC_RELEASE);
    assert_int_equal(exit_code(surv), 0);
    surv = 0;
}

static void test_killed_while_paged_out(void **state)
{
    (void)state;
    killed_at(PARKED_OUT);
}

static void test_killed_while_paging_out(void **state)
{
    (void)state;
    killed_at(VMEM_HALF_OUT);
}

static void test_killed_while_paging_in(void **state)
{
    (void)state;
    killed_at(VMEM_HALF_IN);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_killed_while_paged_out),
        T(test_killed_while_paging_out),
        T(test_killed_while_paging_in),
    };
    return cmocka_run_group_tests_name("memory_pagekill", tests, NULL, NULL);
}
