/*
 * test_ipc_fuzz.c - the table fuzzer of make test: thousands of mutated
 * tables (tests/lib/tablefuzz.h), none of which may crash or hang a host or
 * a monitor.
 *
 * The seed is a real table: two salus-train jobs under libsalus over simgpu
 * run, allocate and hand the lease back and forth, then are killed, leaving
 * slots, leases and memory behind.  Each mutated table is written under a
 * fresh name; then
 *   - in a forked child with a deadline: the monitor (what salus-top --json
 *     does, linked in), a host's life (ipc, sched, memory linked in), the
 *     monitor again;
 *   - for one table in every REAL_EVERY: the real programs, salus-top
 *     --once --json and a salus-train under libsalus, each with a deadline.
 * A child that dies of a signal or passes its deadline fails the test, and
 * its table is kept in the test's directory (fuzz-crash-<n>) to replay.
 *
 * SALUS_FUZZ_TABLES and SALUS_FUZZ_SEED change the count and the random seed
 * (defaults: 3000 and 1).
 *
 * Two binaries share the tables, so that each stays under a third of its
 * timeout on a loaded machine: this one the first half, test_ipc_fuzz_b
 * (this file with FUZZ_PART 1) the second.  Both draw the same sequence of
 * mutations from the seed, the second passing over the first half's
 * without running them: together, the same tables as one run of them all.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "ipc/shm_layout.h"
#include "lib/tablefuzz.h"
#include "lib/testutil.h"
#include "sched/sched.h"

#define REAL_EVERY 100

#ifndef FUZZ_PART
#define FUZZ_PART 0                /* 0: tables [0, count/2); 1: [count/2, count) */
#endif

static char seed_name[64], gpu[64];
static uint8_t *seed;
static size_t seed_len;

static int setup(void **state)
{
    (void)state;
    tu_unique_name("salus-fuzz-seed", seed_name, sizeof seed_name);
    tu_unique_name("simgpu-fuzz", gpu, sizeof gpu);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    shm_unlink(seed_name);
    free(seed);
    seed = NULL;
    return 0;
}

static void env_for(tu_env_t *env, const char *table, int preload)
{
    tu_env_init(env);
    tu_env_salus(env, gpu, table);
    if (!preload)
        tu_env_unset(env, "LD_PRELOAD");
    /* The context's 512 MiB count against it: the seed's slots carry a
     * context charge for the fuzzer to mutate too. */
    tu_env_set(env, "SALUS_MEM_LIMIT", "576M");
}

static void train_argv(char **argv, char *prog, size_t len, const char *seconds)
{
    char *a[] = { (char *)tu_build_path("bin/salus-train", prog, len), "--seconds",
                  (char *)seconds, "--kernels", "3", "--kernel-us", "500",
                  "--iter-mem", "8M", NULL };
    memcpy(argv, a, sizeof a);
}

/* Both jobs have a slot and have run an iteration on the seed table. */
static int both_ran(void *arg)
{
    (void)arg;
    shm_open_opts_t ro = { .name = seed_name, .read_only = 1 };
    shm_table_t *t = NULL;
    if (shm_open_table(&ro, &t) != 0)
        return 0;
    int n = 0;
    for (int s = 0; s < SHM_MAX_SLOTS; s++) {
        sched_slot_info_t si;
        n += shm_slot_alive(t, s) && sched_read_slot(t, s, &si) == 0 && si.iterations > 0;
    }
    shm_close_table(t);
    return n >= 2;
}

/* Two jobs run on the seed table, then are killed mid-way. */
static void make_seed(void)
{
    char prog[512];
    char *argv[12];
    tu_env_t env;
    tu_proc_t jobs[2];
    env_for(&env, seed_name, 1);
    train_argv(argv, prog, sizeof prog, "30");
    for (int i = 0; i < 2; i++)
        assert_int_equal(tu_spawn(&jobs[i], argv, &env), 0);
    tu_env_free(&env);
    assert_true(tu_await(both_ran, NULL, 20000));   /* they allocate and share */
    for (int i = 0; i < 2; i++) {
        kill(jobs[i].pid, SIGKILL);
        tu_wait(&jobs[i], 10000);
    }
    seed = tf_read_table(seed_name, &seed_len);
    assert_non_null(seed);
    assert_int_equal(seed_len, sizeof(shm_layout_t));
}

/* Keep a table that broke something, to replay it. */
static void keep(const uint8_t *table, int n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/fuzz-crash-%d", tu_tmpdir(), n);
    FILE *f = fopen(path, "w");
    if (f) {
        fwrite(table, 1, seed_len, f);
        fclose(f);
    }
    fprintf(stderr, "table %d kept in %s\n", n, path);
}

/* A child that must end by itself, without a signal, before its deadline. */
static int ended_well(tu_proc_t *p, int rc, const char *what, int n)
{
    if (!p->timed_out && rc >= 0 && rc < 128)
        return 1;
    fprintf(stderr, "table %d: %s %s\n", n, what,
            p->timed_out ? "passed its deadline" : "died of a signal");
    return 0;
}

static int linked_in(const char *name, int n)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        FILE *null = fopen("/dev/null", "w");
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 2);                    /* the messages a broken table earns */
        tf_monitor(name, null);
        tf_host(name);
        tf_monitor(name, null);
        _exit(0);
    }
    tu_proc_t p = { .pid = pid };
    return ended_well(&p, tu_wait(&p, 20000), "the linked-in host or monitor", n);
}

static int real_programs(const char *name, int n)
{
    char prog[512], top[512];
    char *argv[12];
    tu_env_t env;
    tu_proc_t p;
    env_for(&env, name, 0);
    char *top_argv[] = { (char *)tu_build_path("bin/salus-top", top, sizeof top), "--once",
                         "--json", "-d", "0", "-t", (char *)name, NULL };
    int ok = ended_well(&p, tu_run(top_argv, &env, 20000, &p), "salus-top --json", n);
    tu_env_free(&env);
    env_for(&env, name, 1);
    train_argv(argv, prog, sizeof prog, "0.2");
    ok &= ended_well(&p, tu_run(argv, &env, 30000, &p), "salus-train under libsalus", n);
    tu_env_free(&env);
    return ok;
}

static void test_mutated_tables(void **state)
{
    (void)state;
    const char *e = getenv("SALUS_FUZZ_TABLES");
    int count = e ? atoi(e) : 3000;
    e = getenv("SALUS_FUZZ_SEED");
    uint64_t rng = e ? strtoull(e, NULL, 0) : 1;
    make_seed();
    uint8_t *table = malloc(seed_len);
    assert_non_null(table);
    char name[64];
    tu_unique_name("salus-fuzz", name, sizeof name);     /* made again each time */
    int bad = 0, real = 0, from = FUZZ_PART ? count / 2 : 0, to = FUZZ_PART ? count : count / 2;
    for (int n = 0; n < to && bad < 5; n++) {
        memcpy(table, seed, seed_len);
        tf_mutate(table, seed_len, &rng);
        if (n < from)
            continue;                  /* the other binary's: drawn, not run */
        assert_int_equal(tf_write_table(name, table, seed_len), 0);
        int ok = linked_in(name, n);
        if (ok && n % REAL_EVERY == 0) {
            assert_int_equal(tf_write_table(name, table, seed_len), 0);   /* unrepaired */
            ok = real_programs(name, n);
            real++;
        }
        if (!ok) {
            keep(table, n);
            bad++;
        }
    }
    shm_unlink(name);
    free(table);
    print_message("%d mutated tables (%d to %d of %d), %d of them also through salus-top "
                  "and a libsalus host: %d broke something\n", to - from, from, to - 1, count,
                  real, bad);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_mutated_tables, setup, teardown),
    };
    return cmocka_run_group_tests_name(FUZZ_PART ? "ipc_fuzz_b" : "ipc_fuzz", tests, NULL, NULL);
}
