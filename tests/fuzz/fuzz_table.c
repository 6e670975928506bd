/*
 * fuzz_table.c - the table fuzzer for long runs under libFuzzer (make fuzz):
 * each input spells mutations (tests/lib/tablefuzz.h) of a seed table that
 * this process made once; the mutated table is written under a fresh name,
 * read as salus-top --json reads it, lived in by a host (ipc, sched and
 * memory linked in), and read again.  A crash, a sanitizer report or an
 * input slower than libFuzzer's -timeout is a finding.
 *
 * The seed: a table this process made, with its own slot registered, one
 * device known by uuid and a policy set; libFuzzer's corpus grows from there.
 * The harness is one process: each input's table is closed (its slot and
 * guest given back) before the next.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "ipc/shm_layout.h"
#include "lib/tablefuzz.h"
#include "sched/sched.h"
#include "util/util.h"

static uint8_t *seed, *table;
static size_t seed_len;
static char name[64];
static FILE *null_out;

static void cleanup(void)
{
    shm_unlink(name);
}

static int make_seed(void)
{
    char seed_name[64];
    snprintf(seed_name, sizeof seed_name, "/salus-fuzz-seed-%d", (int)getpid());
    snprintf(name, sizeof name, "/salus-fuzz-%d", (int)getpid());
    atexit(cleanup);
    shm_open_opts_t o = { .name = seed_name, .create = 1 };
    shm_table_t *t;
    if (shm_open_table(&o, &t) != 0)
        return -1;
    static const uint8_t uuid[16] = { 's', 'e', 'e', 'd' };
    if (shm_self(t) < 0 || shm_lock(t) != 0)
        return -1;
    shm_device_index_locked(t, uuid);
    shm_unlock(t);
    sched_set_policy_table(t, 0, (sched_policy_t)1, 50);
    seed = tf_read_table(seed_name, &seed_len);
    shm_close_table(t);
    shm_unlink(seed_name);
    table = seed ? malloc(seed_len) : NULL;
    return table ? 0 : -1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    util_log_level = -1;                 /* a broken table's messages: thousands */
    null_out = fopen("/dev/null", "w");
    if (!null_out || make_seed() != 0) {
        fprintf(stderr, "fuzz_table: cannot make the seed table in /dev/shm\n");
        exit(1);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    memcpy(table, seed, seed_len);
    tf_patch(table, seed_len, data, size);
    if (tf_write_table(name, table, seed_len) != 0)
        return 0;
    tf_monitor(name, null_out);
    tf_host(name);
    tf_monitor(name, null_out);
    return 0;
}
