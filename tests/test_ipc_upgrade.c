/*
 * test_ipc_upgrade.c - a table made by another version of Salus at a
 * process's table name (src/ipc/upgrade.c, README "Upgrading"): what any
 * version's table says of itself (ABI, maker's version, live processes);
 * one nobody uses is made anew; one in use is left to its processes while
 * this version's processes share the side table "<name>.abi<N>"; once the
 * old processes have ended, this version's keep joining the side table
 * while it is in use, and the next process after them takes the name back
 * and removes the side table.
 *
 * "Another version" is a table of this layout whose header says another
 * ABI and maker (written through the object, as an old libsalus would have
 * made it); its processes are forked children holding a liveness lock on it,
 * as every version's processes do.  Processes of this version are forked
 * children that open their table with shm_open_for_process and claim a slot
 * (shm_self); each tells which table it got.  Every test has its own names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "ipc/shm_layout.h"
#include "lib/testutil.h"
#include "salus_version.h"

#define OLD_ABI (SHM_ABI_VERSION - 1)

static char name[64], side[80];

static int setup(void **state)
{
    (void)state;
    tu_unique_name("salus-upg", name, sizeof name);
    snprintf(side, sizeof side, "%s.abi%u", name, (unsigned)SHM_ABI_VERSION);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    shm_unlink_table(name);
    shm_unlink_table(side);
    return 0;
}

/* ---- helpers ------------------------------------------------------------------------ */

/* A table at `name` as an older Salus made it: its ABI and its version. */
static void make_old(const char *n, uint32_t abi, const char *version)
{
    shm_open_opts_t o = { .name = n, .create = 1, .quiet = 1 };
    shm_table_t *t;
    assert_int_equal(shm_open_table(&o, &t), 0);
    shm_close_table(t);
    char path[128];
    snprintf(path, sizeof path, "/dev/shm%s", n);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    shm_layout_t *m = mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(m != MAP_FAILED);
    m->hdr.abi_version = abi;
    memset(m->hdr.version, 0, sizeof m->hdr.version);
    snprintf(m->hdr.version, sizeof m->hdr.version, "%s", version);
    munmap(m, sizeof *m);
    close(fd);
}

/* In a child: a process of the old version, holding its liveness lock. */
static int old_process(void *arg)
{
    char path[128];
    snprintf(path, sizeof path, "/dev/shm%s", (const char *)arg);
    int fd = open(path, O_RDWR);
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = SHM_LIVE_BASE + 5,
                        .l_len = 1 };
    return fd >= 0 && fcntl(fd, F_SETLK, &fl) == 0 ? 0 : 1;
}

/* In a child: a process of this version.  It tells 1 when it got `name`, 2
 * the side table, 0 something else, after claiming a slot there. */
static int new_process(void *arg)
{
    (void)arg;
    shm_table_t *t;
    if (shm_open_for_process(name, NULL, &t) != 0 || shm_self(t) < 0)
        return 0;
    const char *got = shm_table_name(t);
    return strcmp(got, name) == 0 ? 1 : strcmp(got, side) == 0 ? 2 : 0;
}

static pid_t start(int (*fn)(void *), void *arg, int *told)
{
    pid_t pid = tu_fork_teller(fn, arg, told);
    assert_true(pid > 0);
    return pid;
}

static void stop(pid_t pid)
{
    tu_proc_t p = { .pid = pid };
    kill(pid, SIGKILL);
    tu_wait(&p, 5000);
}

static shm_table_about_t about(const char *n)
{
    shm_table_about_t a;
    assert_int_equal(shm_table_about(n, &a), 0);
    return a;
}

/* ---- tests -------------------------------------------------------------------------- */

/* Any version's table says its ABI, its maker and how many use it. */
static void test_about(void **state)
{
    (void)state;
    make_old(name, OLD_ABI, "0.2.9");
    shm_table_about_t a = about(name);
    assert_int_equal(a.abi, OLD_ABI);
    assert_string_equal(a.version, "0.2.9");
    assert_int_equal(a.live, 0);
    int told = -1;
    pid_t old = start(old_process, name, &told);
    assert_int_equal(told, 0);
    assert_int_equal(about(name).live, 1);
    stop(old);
    assert_int_equal(about(name).live, 0);
    /* a table of this version names this version */
    shm_open_opts_t o = { .name = side, .create = 1, .quiet = 1 };
    shm_table_t *t;
    assert_int_equal(shm_open_table(&o, &t), 0);
    shm_close_table(t);
    a = about(side);
    assert_int_equal(a.abi, SHM_ABI_VERSION);
    assert_string_equal(a.version, SALUS_VERSION);
    shm_table_about_t none;
    assert_int_equal(shm_table_about("/salus-upg-no-such-table", &none), -ENOENT);
}

/* Nobody uses the old table: it is made anew at its name, for this version. */
static void test_stale_made_anew(void **state)
{
    (void)state;
    make_old(name, OLD_ABI, "0.2.9");
    int told = -1;
    pid_t p = start(new_process, NULL, &told);
    assert_int_equal(told, 1);
    shm_table_about_t a = about(name);
    assert_int_equal(a.abi, SHM_ABI_VERSION);
    assert_string_equal(a.version, SALUS_VERSION);
    assert_int_equal(a.live, 1);
    stop(p);
}

/* The rolling upgrade: old jobs keep their table, new ones share the side
 * table while old ones live, and keep joining it while it is in use; the
 * first process after them all takes the name back. */
static void test_rolling_upgrade(void **state)
{
    (void)state;
    make_old(name, OLD_ABI, "0.2.9");
    int told = -1;
    pid_t old = start(old_process, name, &told);
    assert_int_equal(told, 0);
    pid_t a = start(new_process, NULL, &told);
    assert_int_equal(told, 2);                        /* beside it */
    pid_t b = start(new_process, NULL, &told);
    assert_int_equal(told, 2);                        /* with a, not alone */
    assert_int_equal(about(name).abi, OLD_ABI);       /* the old jobs' table untouched */
    assert_int_equal(about(side).live, 2);
    stop(old);                                        /* the old jobs end */
    pid_t c = start(new_process, NULL, &told);
    assert_int_equal(told, 2);                        /* a and b still share the side */
    stop(a);
    stop(b);
    stop(c);
    pid_t d = start(new_process, NULL, &told);
    assert_int_equal(told, 1);                        /* the name back */
    assert_int_equal(about(name).abi, SHM_ABI_VERSION);
    shm_table_about_t gone;
    assert_int_equal(shm_table_about(side, &gone), -ENOENT);   /* the side table removed */
    stop(d);
}

/* A newer version's table is not this version's to judge: left alone, and
 * the process passes calls through (as it always did). */
static void test_newer_left_alone(void **state)
{
    (void)state;
    make_old(name, SHM_ABI_VERSION + 1, "9.0.0");
    int told = -1;
    pid_t p = start(new_process, NULL, &told);
    assert_int_equal(told, 0);
    stop(p);
    assert_int_equal(about(name).abi, SHM_ABI_VERSION + 1);
    shm_table_about_t none;
    assert_int_equal(shm_table_about(side, &none), -ENOENT);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_about),
        T(test_stale_made_anew),
        T(test_rolling_upgrade),
        T(test_newer_left_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
