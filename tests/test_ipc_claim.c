/*
 * test_ipc_claim.c - the GPU claim files (src/ipc/claim.c) as tables come
 * and go: a table's removal takes the claims naming it that nobody holds and
 * leaves a live table's, a stale claim (its table gone or its processes
 * ended) never blocks a new table, the sweep of claims whose tables are gone
 * keeps those of tables still there, a process's first claim sweeps the
 * claims of tables removed by hand, a process removing claims keeps the
 * lock it holds itself, and another user's claim is never removed.
 *
 * Claims are made by forked children (tu_fork_teller), each on a table and a
 * made-up GPU UUID of its test's own, so that a claim's lock lives and dies
 * with a process the test controls; the parent never claims (a process
 * holds one claim per device index for its life).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "lib/testutil.h"

/* A GPU UUID no other test and no simgpu state uses. */
static void make_uuid(uint8_t u[16])
{
    static uint32_t n;
    uint64_t now = tu_now_ns();
    uint32_t pid = (uint32_t)getpid();
    n++;
    memcpy(u, &now, 8);
    memcpy(u + 8, &pid, 4);
    memcpy(u + 12, &n, 4);
}

typedef struct claimer {
    const char *table;
    const uint8_t *uuid;
    int forget;              /* then remove claims and its own table, as a tool would */
} claimer_t;

/* In a child: open (or make) the table and claim the GPU for it; what
 * shm_device_claim said (0 ours, 1 shared), 10 when the table cannot be
 * opened. */
static int claim_in_child(void *arg)
{
    const claimer_t *c = arg;
    shm_open_opts_t o = { .name = c->table, .create = 1, .quiet = 1 };
    shm_table_t *t;
    if (shm_open_table(&o, &t) != 0)
        _exit(10);
    int rc = shm_device_claim(t, 0, c->uuid);
    if (c->forget) {
        shm_forget_claims(NULL);
        shm_forget_claims(c->table);
        shm_unlink_table(c->table);
    }
    return rc;
}

/* A child holding the claim of table for uuid; what it was told in *said. */
static pid_t claimer(const char *table, const uint8_t *uuid, int forget, int *said)
{
    claimer_t c = { table, uuid, forget };
    pid_t pid = tu_fork_teller(claim_in_child, &c, said);
    assert_true(pid > 0);
    return pid;
}

static void stop(pid_t pid)
{
    tu_proc_t p = { .pid = pid };
    kill(pid, SIGKILL);
    tu_wait(&p, 5000);
}

/* A child claims and ends: its claim is nobody's now. */
static void claim_and_end(const char *table, const uint8_t *uuid)
{
    int said = -1;
    stop(claimer(table, uuid, 0, &said));
    assert_int_equal(said, 0);
}

static int gone(const char *path)
{
    return access(path, F_OK) != 0 && errno == ENOENT;
}

/* ---- removal --------------------------------------------------------------------------- */

static void test_removal_forgets_its_claims(void **state)
{
    (void)state;
    char t[64], path[512], again[512];
    uint8_t u[16];
    int said = -1;
    tu_unique_name("claim-rm", t, sizeof t);
    make_uuid(u);
    pid_t pid = claimer(t, u, 0, &said);
    assert_int_equal(said, 0);                          /* the GPU's first table */
    assert_int_equal(tu_claim_of(t, path, sizeof path), 0);
    /* Removed with a live process (salus reset --force): its claim stays. */
    assert_int_equal(shm_unlink_table(t), 0);
    assert_false(gone(path));
    stop(pid);
    /* Gone already, its process ended: the claim goes now. */
    assert_int_equal(shm_unlink_table(t), -ENOENT);
    assert_true(gone(path));
    assert_int_equal(tu_claim_of(t, again, sizeof again), -1);
    /* Made, used and removed: nothing of it remains. */
    claim_and_end(t, u);
    assert_int_equal(tu_claim_of(t, path, sizeof path), 0);
    assert_int_equal(shm_unlink_table(t), 0);
    assert_true(gone(path));
    assert_int_equal(tu_claim_of(t, again, sizeof again), -1);
}

/* A claim whose processes ended, its table removed without its claims (by
 * an older Salus, by hand): a new table takes the GPU as its first, while
 * a held claim does make the next table share it. */
static void test_stale_claim_does_not_block(void **state)
{
    (void)state;
    char a[64], b[64], c[64], pa[512], pb[512];
    uint8_t u[16];
    int said = -1;
    tu_unique_name("claim-old", a, sizeof a);
    tu_unique_name("claim-new", b, sizeof b);
    tu_unique_name("claim-next", c, sizeof c);
    make_uuid(u);
    claim_and_end(a, u);
    assert_int_equal(tu_claim_of(a, pa, sizeof pa), 0);
    assert_int_equal(shm_unlink(a), 0);
    pid_t pid = claimer(b, u, 0, &said);
    assert_int_equal(said, 0);                          /* ours, not shared */
    assert_int_equal(tu_claim_of(b, pb, sizeof pb), 0);
    assert_string_equal(pa, pb);                        /* the same GPU's claim, renamed over */
    assert_int_equal(tu_claim_of(a, pa, sizeof pa), -1);
    pid_t next = claimer(c, u, 0, &said);
    assert_int_equal(said, 1);                          /* b's processes hold it */
    stop(next);
    stop(pid);
    assert_int_equal(shm_unlink_table(c), 0);
    assert_int_equal(shm_unlink_table(b), 0);
    assert_true(gone(pb));
}

/* The sweep of salus reset --all: claims of tables that are gone, not of
 * tables still there (stale too, but their tables may be used again). */
static void test_forget_claims_of_gone_tables(void **state)
{
    (void)state;
    char a[64], b[64], pa[512], pb[512];
    uint8_t ua[16], ub[16];
    tu_unique_name("claim-gone", a, sizeof a);
    tu_unique_name("claim-kept", b, sizeof b);
    make_uuid(ua);
    make_uuid(ub);
    claim_and_end(a, ua);
    claim_and_end(b, ub);
    assert_int_equal(tu_claim_of(a, pa, sizeof pa), 0);
    assert_int_equal(shm_unlink(a), 0);
    assert_true(shm_forget_claims(NULL) >= 0);   /* a peer's sweep may have been first */
    assert_true(gone(pa));
    assert_int_equal(tu_claim_of(b, pb, sizeof pb), 0);
    assert_int_equal(shm_forget_claims("no-slash"), -EINVAL);
    assert_int_equal(shm_unlink_table(b), 0);
    assert_true(gone(pb));
}

/* A table removed by hand (rm /dev/shm/salus-...) leaves its claim; the
 * next process that claims any GPU sweeps it away. */
static void test_attach_sweeps_orphaned_claims(void **state)
{
    (void)state;
    char a[64], b[64], pa[512], pb[512];
    uint8_t ua[16], ub[16];
    int said = -1;
    tu_unique_name("claim-byhand", a, sizeof a);
    tu_unique_name("claim-attach", b, sizeof b);
    make_uuid(ua);
    make_uuid(ub);
    claim_and_end(a, ua);
    assert_int_equal(tu_claim_of(a, pa, sizeof pa), 0);
    assert_int_equal(shm_unlink(a), 0);                 /* by hand: its claim stays */
    assert_false(gone(pa));
    pid_t pid = claimer(b, ub, 0, &said);               /* another GPU, another table */
    assert_int_equal(said, 0);
    assert_true(gone(pa));
    assert_int_equal(tu_claim_of(b, pb, sizeof pb), 0); /* its own claim is kept */
    stop(pid);
    assert_int_equal(shm_unlink_table(b), 0);
    assert_true(gone(pb));
}

/* A process that removes claims (its own table's among them) keeps holding
 * its own: opening and closing the file would have dropped its lock, and the
 * next table would have taken the GPU as its first. */
static void test_forget_keeps_claims_held_here(void **state)
{
    (void)state;
    char t[64], other[64], path[512];
    uint8_t u[16];
    int said = -1;
    tu_unique_name("claim-self", t, sizeof t);
    tu_unique_name("claim-other", other, sizeof other);
    make_uuid(u);
    pid_t pid = claimer(t, u, 1, &said);
    assert_int_equal(said, 0);
    assert_int_equal(tu_claim_of(t, path, sizeof path), 0);
    pid_t next = claimer(other, u, 0, &said);
    assert_int_equal(said, 1);                          /* still held */
    stop(next);
    stop(pid);
    assert_int_equal(shm_unlink_table(other), 0);
    assert_int_equal(shm_unlink_table(t), -ENOENT);     /* the child removed it */
    assert_true(gone(path));
}

/* Another user cannot remove a claim (it cannot open it for writing), nor
 * its table; the owner can.  Needs root, to be another user.  The table
 * stays until the owner removes it, so that no sweep of gone tables takes
 * the claim meanwhile. */
static void test_another_users_claim_stays(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        print_message("not root: cannot act as another user\n");
        skip();
    }
    char t[64], path[512];
    uint8_t u[16];
    tu_unique_name("claim-root", t, sizeof t);
    make_uuid(u);
    claim_and_end(t, u);
    assert_int_equal(tu_claim_of(t, path, sizeof path), 0);
    pid_t pid = fork();
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(10);
        int rc = shm_unlink_table(t);
        _exit(shm_forget_claims(t) == 0 && rc != 0 && rc != -ENOENT ? 0 : 11);
    }
    assert_true(pid > 0);
    tu_proc_t p = { .pid = pid };
    assert_int_equal(tu_wait(&p, 10000), 0);
    assert_false(gone(path));
    assert_int_equal(shm_unlink_table(t), 0);
    assert_true(gone(path));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_removal_forgets_its_claims),
        cmocka_unit_test(test_stale_claim_does_not_block),
        cmocka_unit_test(test_forget_claims_of_gone_tables),
        cmocka_unit_test(test_attach_sweeps_orphaned_claims),
        cmocka_unit_test(test_forget_keeps_claims_held_here),
        cmocka_unit_test(test_another_users_claim_stays),
    };
    return cmocka_run_group_tests_name("ipc claims", tests, NULL, NULL);
}
