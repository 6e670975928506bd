/*
 * test_memory_pagewords.c - one word written into a paging job's own
 * memory fields of the table hangs nobody (issue 32, item 4), over simgpu
 * with libsalus preloaded into pageclient.
 *
 * Two pageclient jobs of 40 MiB with paging on (SALUS_SWAP=on) share a
 * 64 MiB device (60 MiB of budget) under fair, as in
 * test_memory_pagelimit: only one fits at a time, so they page each other
 * out at each handoff.  Once both hold their memory, the test writes, under
 * the table's lock, into one job's slot (mem_slot_t.dev[0]):
 *
 *   - granted := 1 GiB, more than the device has; and granted := the budget
 *     less a little, a value a bounds check alone would take (before the
 *     fix: the job hung, without a word);
 *   - granted := all ones (before: it poisoned the device's sums, and the
 *     uncorrupted peer hung too);
 *   - limit := 0, which no tool writes (before: it hung);
 *   - random words (a fixed seed) in granted and in the spare word, three
 *     times, each once the last was repaired (before: both hung).
 *
 * In each: both jobs end within their deadline with every byte intact
 * ("done 0 bad 0"); the corrupted job says once on stderr what it found and
 * that it corrected it; while it still runs, its slot holds again what it
 * held before the write (resident plus paged out), the limit what it was,
 * and the table's invariants hold (mem_check_locked).  Every child has a
 * deadline.
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
#include <unistd.h>

#include "lib/testutil.h"
#include "test_memory_jobs.h"
#include "memory/mem_layout.h"

#define CHILD_MS   30000               /* a job alone runs about 1.5 s */
#define JOB_MIB    "40"                /* one fits the 60 MiB budget, not two */
#define ITERS      "150"               /* of two 5 ms kernels: 1.5 s of GPU */
#define KERNEL_US  "5000"
#define MiB        (1ull << 20)
/* What the corrupted job says (src/memory/owncheck.c). */
#define SAID_WROTE "something other than libsalus wrote to the table"
#define SAID_GRANT "corrected"
#define SAID_LIMIT "neither SALUS_MEM_LIMIT nor salus limit sets"

static char state_name[64], table_name[64];
static tu_proc_t job[2];                /* killed by the teardown if still running */

static void spawn(tu_proc_t *p)
{
    char client[512], cubin[512];
    char *argv[] = { (char *)tu_build_path("tests/clients/pageclient", client, sizeof client),
                     (char *)tu_build_path("workloads/kernels.cubin", cubin, sizeof cubin),
                     JOB_MIB, ITERS, KERNEL_US, NULL };
    tu_env_t env;
    tu_env_init(&env);
    tu_env_salus(&env, state_name, table_name);
    tu_env_set(&env, "SIMGPU_MEMORY", "64M");
    tu_env_set(&env, "SIMGPU_CTX_MEMORY", "0");
    tu_env_set(&env, "PAGECLIENT_BLOCK_MIB", "8");
    tu_env_set(&env, "SALUS_MEM_HEADROOM", "4M");
    tu_env_set(&env, "SALUS_SWAP", "on");
    tu_env_set(&env, "SALUS_POLICY", "fair");
    tu_env_set(&env, "SALUS_QUANTUM_MS", "50");
    tu_env_set(&env, "SALUS_MEM_WAIT_MS", "0");
    tu_env_unset(&env, "SALUS_MEM_LIMIT");
    tu_env_unset(&env, "SALUS_REPORT");
    tu_env_unset(&env, "SALUS_LOG");
    assert_int_equal(tu_spawn(p, argv, &env), 0);
    tu_env_free(&env);
}

/* ---- the table, from outside ---------------------------------------------------- */

static shm_table_t *open_table(void)
{
    shm_open_opts_t o = { .name = table_name };
    shm_table_t *t = NULL;
    assert_int_equal(shm_open_table(&o, &t), 0);
    return t;
}

static int slot_of(shm_table_t *t, pid_t pid)
{
    shm_ident_t id;
    for (int i = 0; i < SHM_MAX_SLOTS; i++)
        if (shm_slot_ident(t, i, &id) == 0 && id.pid == pid)
            return i;
    return -1;
}

/* What a job holds on the device, resident or paged out (under the lock). */
static uint64_t held_locked(shm_table_t *t, int slot)
{
    mem_slot_t *a = mem_area_of(t, slot);
    return mem_sdev_used(&a->dev[0]) + util_load_relaxed(&a->swapped_out);
}

/* The words to write into the victim's dev[0]: those whose bit is in
 * `which`. */
enum { W_GRANTED = 1, W_AVAIL = 2, W_LIMIT = 4 };
typedef struct words {
    unsigned which;
    uint64_t granted, avail, limit;
} words_t;

typedef struct before {
    uint64_t held, limit;
} before_t;

/* Under the table's lock (the owner's grants are locked too: nothing of it
 * lands between), what the slot holds and its limit, then the words. */
static before_t scribble(pid_t pid, words_t w)
{
    shm_table_t *t = open_table();
    int slot = slot_of(t, pid);
    assert_true(slot >= 0);
    assert_int_equal(shm_lock(t), 0);
    mem_sdev_t *sd = &mem_area_of(t, slot)->dev[0];
    before_t b = { held_locked(t, slot), util_load_relaxed(&sd->limit) };
    if (w.which & W_GRANTED)
        util_store_relaxed(&sd->granted, w.granted);
    if (w.which & W_AVAIL)
        util_store_seq(&sd->avail, w.avail);
    if (w.which & W_LIMIT)
        util_store_relaxed(&sd->limit, w.limit);
    shm_unlock(t);
    shm_close_table(t);
    return b;
}

typedef struct repaired {
    pid_t pid;
    before_t b;
    const char *said;
    char bad[256];
} repaired_t;

/* The job said it corrected its words, its slot holds again what it held,
 * its limit is what it was and the table's invariants hold; or it ended. */
static int repaired_or_exited(void *arg)
{
    repaired_t *r = arg;
    tu_proc_t *p = job[0].pid == r->pid ? &job[0] : &job[1];
    if (tu_exited(p))
        return 1;
    if (!pj_file_has(p->err_path, r->said))
        return 0;
    shm_table_t *t = open_table();
    int slot = slot_of(t, r->pid), ok = 0;
    if (slot >= 0 && shm_lock(t) == 0) {
        const char *bad = mem_check_locked(t);
        uint64_t held = held_locked(t, slot);
        uint64_t limit = util_load_relaxed(&mem_area_of(t, slot)->dev[0].limit);
        ok = !bad && held == r->b.held && limit == r->b.limit;
        snprintf(r->bad, sizeof r->bad, "invariants: %s; held %llu (before %llu); limit %llu "
                 "(before %llu)", bad ? bad : "hold", (unsigned long long)held,
                 (unsigned long long)r->b.held, (unsigned long long)limit,
                 (unsigned long long)r->b.limit);
        shm_unlock(t);
    }
    shm_close_table(t);
    return ok;
}

static void await_repaired(int victim, before_t b, const char *said)
{
    repaired_t r = { .pid = job[victim].pid, .b = b, .said = said };
    if (!tu_await(repaired_or_exited, &r, CHILD_MS) || tu_exited(&job[victim])) {
        char what[400];
        snprintf(what, sizeof what, "the corrupted job never repaired its slot while it ran "
                 "(%s)", r.bad[0] ? r.bad : "it said nothing, or it ended");
        pj_fail_with(&job[victim], what);
    }
}

static void start_both(void)
{
    if (!tu_built("sim/libcuda.so.1") || !tu_built("libsalus.so") ||
        !tu_built("workloads/kernels.cubin") || !tu_built("tests/clients/pageclient"))
        skip();
    tu_unique_name("spw", state_name, sizeof state_name);
    tu_unique_name("stpw", table_name, sizeof table_name);
    spawn(&job[0]);
    pj_await_ready(&job[0], CHILD_MS, "the first job never filled its memory");
    spawn(&job[1]);
    pj_await_ready(&job[1], CHILD_MS, "the second job never filled its memory");
}

/* Both end intact; the victim said `said` (and SAID_WROTE) once. */
static void end_both(int victim, const char *said)
{
    pj_finish(&job[!victim], CHILD_MS, "uncorrupted");
    pj_finish(&job[victim], CHILD_MS, "corrupted");
    char *err = tu_read_file(job[victim].err_path, NULL);
    int n = err ? tu_count_lines(err, said) : 0, wrote = err ? tu_count_lines(err, SAID_WROTE) : 0;
    free(err);
    if (n != 1 || wrote != 1)
        pj_fail_with(&job[victim], "the corrupted job did not say once what it corrected");
}

/* One write into the victim's words, then its repair, then both ends. */
static void one_word(int victim, words_t w, const char *said)
{
    start_both();
    before_t b = scribble(job[victim].pid, w);
    await_repaired(victim, b, said);
    end_both(victim, said);
}

static int teardown(void **state)
{
    (void)state;
    for (int j = 0; j < 2; j++)
        if (job[j].pid > 0 && !tu_exited(&job[j])) {
            kill(job[j].pid, SIGKILL);
            tu_wait(&job[j], CHILD_MS);
        }
    memset(job, 0, sizeof job);
    shm_unlink(state_name);
    shm_unlink(table_name);
    return 0;
}

/* ---- the tests ------------------------------------------------------------------ */

static void test_granted_past_the_device(void **state)
{
    (void)state;
    one_word(1, (words_t){ W_GRANTED, .granted = 0x40000000ull }, SAID_GRANT);
}

/* Within the budget: plausible to any bounds check, not to the owner. */
static void test_granted_within_the_budget(void **state)
{
    (void)state;
    one_word(1, (words_t){ W_GRANTED, .granted = 60 * MiB - 3 * 4096 }, SAID_GRANT);
}

/* All ones: the peer, uncorrupted, must not hang on the device's sums. */
static void test_granted_all_ones(void **state)
{
    (void)state;
    one_word(1, (words_t){ W_GRANTED, .granted = UINT64_MAX }, SAID_GRANT);
}

/* Limit 0, on the job paged out and waiting for the GPU at that moment. */
static void test_limit_zero(void **state)
{
    (void)state;
    one_word(0, (words_t){ W_LIMIT, .limit = 0 }, SAID_LIMIT);
}

/* Garbage in the grant and the spare word, three times (a fixed seed). */
static void test_random_grant_and_spare(void **state)
{
    (void)state;
    uint64_t x = 0x2545f4914f6cdd1dull;
    start_both();
    for (int round = 0; round < 3; round++) {
        words_t w = { W_GRANTED | W_AVAIL, 0, 0, 0 };
        for (int k = 0; k < 2; k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if (k == 0)
                w.granted = x;
            else
                w.avail = x;
        }
        before_t b = scribble(job[1].pid, w);
        await_repaired(1, b, SAID_GRANT);
    }
    end_both(1, SAID_GRANT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_granted_past_the_device, teardown),
        cmocka_unit_test_teardown(test_granted_within_the_budget, teardown),
        cmocka_unit_test_teardown(test_granted_all_ones, teardown),
        cmocka_unit_test_teardown(test_limit_zero, teardown),
        cmocka_unit_test_teardown(test_random_grant_and_spare, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
