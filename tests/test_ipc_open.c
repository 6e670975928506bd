/*
 * test_ipc_open.c - what may lie at a table's name, and what may happen to
 * the object under running processes: a FIFO, a link or a squatted name is
 * refused at once, with the command that shows who put it there (a second
 * user is played by a forked child that setuid()s to nobody); modes that
 * open a private table to its group, or close it to its owner, are said for
 * what they are; a FIFO at the default name does not hang salus-top or a
 * host (a private mount namespace with its own /dev/shm); a /dev/shm too small for the table (a private mount
 * namespace with a small tmpfs) fails open with a message, and the
 * half-made object it leaves does not crash the next process; a table
 * truncated under this process, and under running hosts and salus-top,
 * costs them the table, not their life.
 *
 * Every test uses its own table name; children have deadlines.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "ipc/shm_layout.h"
#include "lib/testutil.h"

#define NOBODY 65534

static char name[64], path[128], gpu[64];

static int setup(void **state)
{
    (void)state;
    tu_unique_name("salus-open", name, sizeof name);
    snprintf(path, sizeof path, "/dev/shm%s", name);
    tu_unique_name("simgpu-open", gpu, sizeof gpu);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(path);
    return 0;
}

/* ---- helpers ------------------------------------------------------------ */

static char cap_path[512];
static int cap_saved = -1;

/* Send this process's stderr to a file until cap_end, which returns it. */
static void cap_begin(void)
{
    snprintf(cap_path, sizeof cap_path, "%s/stderr-%d", tu_tmpdir(), (int)getpid());
    int fd = open(cap_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    fflush(stderr);
    cap_saved = dup(2);
    dup2(fd, 2);
    close(fd);
}

static char *cap_end(void)
{
    fflush(stderr);
    dup2(cap_saved, 2);
    close(cap_saved);
    char *text = tu_read_file(cap_path, NULL);
    assert_non_null(text);
    fprintf(stderr, "%s", text);            /* still shown in the test's log */
    return text;
}

static void assert_said(const char *text, const char *needle)
{
    if (!strstr(text, needle))
        fail_msg("expected \"%s\" in:\n%s", needle, text);
}

/* Open `name` as a host (create) or a monitor; the error, its message. */
static int try_open(int read_only, const char *group, char **said)
{
    shm_open_opts_t o = { .name = name, .create = !read_only, .read_only = read_only,
                          .group = group };
    shm_table_t *t = NULL;
    cap_begin();
    int rc = shm_open_table(&o, &t);
    *said = cap_end();
    if (t)
        shm_close_table(t);
    return rc;
}

/* Open as try_open does: it must end in `want`, saying n1 and n2 (or NULL). */
static void expect_open(int read_only, const char *group, int want, const char *n1,
                        const char *n2)
{
    char *said;
    assert_int_equal(try_open(read_only, group, &said), want);
    if (n1)
        assert_said(said, n1);
    if (n2)
        assert_said(said, n2);
    free(said);
}

static shm_table_t *open_host(void)
{
    shm_open_opts_t o = { .name = name, .create = 1 };
    shm_table_t *t = NULL;
    assert_int_equal(shm_open_table(&o, &t), 0);
    return t;
}

/* In a forked child as user nobody: open as a host; 0 when it failed with
 * `want` and said `needle`. */
static int open_as_nobody(int want, const char *needle)
{
    char err_path[512];
    snprintf(err_path, sizeof err_path, "%s/nobody.err", tu_tmpdir());
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || dup2(fd, 2) < 0 || setgid(NOBODY) != 0 || setuid(NOBODY) != 0)
            _exit(90);
        shm_open_opts_t o = { .name = name, .create = 1 };
        shm_table_t *t = NULL;
        _exit(shm_open_table(&o, &t) == want && !t ? 0 : 91);
    }
    tu_proc_t p = { .pid = pid };
    int rc = tu_wait(&p, 10000);
    char *said = tu_read_file(err_path, NULL);
    assert_non_null(said);
    fprintf(stderr, "%s", said);
    if (rc == 0 && !strstr(said, needle))
        rc = 92;
    free(said);
    return rc;
}

static void need_root(void)
{
    if (geteuid() != 0) {
        print_message("needs root to play a second user (setuid); skipped\n");
        skip();
    }
}

/* Run a built program with SALUS_TABLE=name over simgpu; its result. */
static int run_tool(tu_proc_t *p, int timeout_ms, const char *rel, const char *a1,
                    const char *a2, const char *a3, const char *a4)
{
    char prog[512];
    tu_env_t env;
    tu_env_init(&env);
    tu_env_salus(&env, gpu, name);
    tu_env_unset(&env, "LD_PRELOAD");
    char *argv[] = { (char *)tu_build_path(rel, prog, sizeof prog), (char *)a1,
                     (char *)a2, (char *)a3, (char *)a4, NULL };
    int rc = tu_run(argv, &env, timeout_ms, p);
    tu_env_free(&env);
    return rc;
}

/* ---- what lies at the name ---------------------------------------------- */

static void test_fifo_is_refused_without_hanging(void **state)
{
    (void)state;
    assert_int_equal(mkfifo(path, 0600), 0);
    if (geteuid() == 0)
        assert_int_equal(chown(path, NOBODY, NOBODY), 0);   /* planted by another user */
    char want[192];
    snprintf(want, sizeof want, "`ls -l %s`", path);
    expect_open(0, NULL, -EPERM, "is a FIFO", want);          /* a host */
    expect_open(1, NULL, -EPERM, "is a FIFO", NULL);          /* a monitor */

    tu_proc_t p;                              /* salus-top, whose reader used to block */
    int rc = run_tool(&p, 20000, "bin/salus-top", "--once", "--json", "-t", name);
    assert_false(p.timed_out);
    assert_true(rc >= 0 && rc < 128);
}

static void test_symlink_is_refused(void **state)
{
    (void)state;
    char other[64], other_path[128];
    tu_unique_name("salus-open-target", other, sizeof other);
    snprintf(other_path, sizeof other_path, "/dev/shm%s", other);
    int fd = open(other_path, O_RDWR | O_CREAT, 0600);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(symlink(other_path, path), 0);
    expect_open(0, NULL, -ELOOP, "is a symbolic link", NULL);
    unlink(other_path);
}

static void test_squatted_name(void **state)
{
    (void)state;
    need_root();
    /* Someone else (root, here) holds the name of nobody's table. */
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
    assert_true(fd >= 0);
    close(fd);
    char want[192];
    snprintf(want, sizeof want, "`ls -l %s` shows who", path);
    assert_int_equal(open_as_nobody(-EACCES, want), 0);

    /* And nobody holds the name root would use: root can open it, and
     * refuses it for its owner. */
    assert_int_equal(chown(path, NOBODY, NOBODY), 0);
    assert_int_equal(chmod(path, 0600), 0);
    expect_open(0, NULL, -EPERM, "belongs to uid 65534", want);
}

static void test_private_table_open_to_its_group(void **state)
{
    (void)state;
    shm_close_table(open_host());
    assert_int_equal(chmod(path, 0660), 0);
    expect_open(0, NULL, -EPERM, "mode 660: it is open to its group", "SALUS_GROUP");
    /* Named, the group may share it (the object's group is ours). */
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    struct group *gr = getgrgid(st.st_gid);
    if (!gr) {
        print_message("the object's group %u has no name here; skipped\n",
                      (unsigned)st.st_gid);
        skip();
    }
    expect_open(0, gr->gr_name, 0, NULL, NULL);
}

static void test_read_only_table_of_ones_own(void **state)
{
    (void)state;
    shm_close_table(open_host());
    assert_int_equal(chmod(path, 0400), 0);
    if (geteuid() == 0) {                     /* root may open it: it is refused */
        expect_open(0, NULL, -EACCES, "has mode 400: its owner cannot write to it", NULL);
        assert_int_equal(chown(path, NOBODY, NOBODY), 0);
        /* nobody's own 0400 table, opened by nobody */
        assert_int_equal(open_as_nobody(-EACCES, "has mode 400: it does not let its "
                                        "owner write to it"), 0);
        assert_int_equal(chown(path, 0, 0), 0);
    }
    expect_open(1, NULL, 0, NULL, NULL);
}

/* ---- a small /dev/shm ---------------------------------------------------- */

/* In a private mount namespace with a 1 MiB /dev/shm: exit 77 when one
 * cannot be made, else a code naming the step that failed. */
static void small_shm_child(void)
{
    if (unshare(CLONE_NEWNS) != 0)
        _exit(77);
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=1m") != 0)
        _exit(78);
    int filler = open("/dev/shm/filler", O_RDWR | O_CREAT, 0600);
    if (filler < 0 || posix_fallocate(filler, 0, 800 * 1024) != 0)
        _exit(79);
    shm_open_opts_t o = { .name = name, .create = 1 };
    shm_table_t *t = NULL;
    if (shm_open_table(&o, &t) != -ENOSPC || t)
        _exit(80);                            /* fails open, said */
    struct stat st;
    if (stat(path, &st) != 0 || st.st_size != 0)
        _exit(81);                            /* nothing half-allocated left */
    if (shm_open_table(&o, &t) != -ENOSPC)    /* the next one: the same, no crash */
        _exit(82);
    /* A sparse object of the full size, never made ready (a creator of an
     * older version died): the next process must not write into holes that
     * the full /dev/shm cannot back. */
    if (truncate(path, sizeof(shm_layout_t)) != 0)
        _exit(83);
    if (shm_open_table(&o, &t) != -ENOSPC)
        _exit(84);
    shm_open_opts_t ro = { .name = name, .read_only = 1 };
    if (shm_open_table(&ro, &t) != -EAGAIN)   /* a monitor: being set up */
        _exit(85);
    /* Room again: the half-made object is made a table. */
    close(filler);
    unlink("/dev/shm/filler");
    if (shm_open_table(&o, &t) != 0 || shm_self(t) < 0 || shm_lock(t) != 0)
        _exit(86);
    shm_unlock(t);
    shm_close_table(t);
    _exit(0);
}

/* In a private mount namespace with a /dev/shm of its own: a FIFO planted
 * by another user at this user's default table name, /dev/shm/salus-<uid>;
 * then salus-top (no -t: its discovery and the default table) and a host
 * under libsalus, each of which must finish.  Exit 77/78: no namespace. */
static void planted_fifo_child(char *const argv[], char *const envp[])
{
    char fifo[64];
    if (unshare(CLONE_NEWNS) != 0)
        _exit(77);
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=64m,mode=1777") != 0)
        _exit(78);
    snprintf(fifo, sizeof fifo, "/dev/shm/salus-%u", (unsigned)getuid());
    if (mkfifo(fifo, 0666) != 0 || chown(fifo, NOBODY, NOBODY) != 0)
        _exit(79);
    execve("/bin/sh", argv, envp);
    _exit(80);
}

static void test_fifo_at_the_default_name(void **state)
{
    (void)state;
    need_root();
    char top[512], train[512], lib[512], script[2048];
    snprintf(script, sizeof script,
             "%s --once --json > /dev/null || exit 81; "
             "LD_PRELOAD=%s %s --iterations 5 --kernels 2 --kernel-us 100 || exit 82",
             tu_build_path("bin/salus-top", top, sizeof top),
             tu_build_path("libsalus.so", lib, sizeof lib),
             tu_build_path("bin/salus-train", train, sizeof train));
    char *argv[] = { "sh", "-c", script, NULL };
    tu_env_t env;
    tu_env_init(&env);
    tu_env_simgpu(&env, gpu);
    tu_env_unset(&env, "SALUS_TABLE");
    tu_env_unset(&env, "SALUS_GROUP");
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        planted_fifo_child(argv, env.vars);
    tu_env_free(&env);
    tu_proc_t p = { .pid = pid };
    int rc = tu_wait(&p, 60000);
    if (rc == 77 || rc == 78) {
        print_message("cannot make a private mount namespace with its own /dev/shm "
                      "(unshare -m or mount refused); skipped\n");
        skip();
    }
    assert_false(p.timed_out);               /* neither salus-top nor the host hung */
    assert_int_equal(rc, 0);
}

static void test_small_dev_shm(void **state)
{
    (void)state;
    char err_path[512];
    snprintf(err_path, sizeof err_path, "%s/small-shm.err", tu_tmpdir());
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 2);
        small_shm_child();
    }
    tu_proc_t p = { .pid = pid };
    int rc = tu_wait(&p, 20000);
    char *said = tu_read_file(err_path, NULL);
    assert_non_null(said);
    fprintf(stderr, "%s", said);
    if (rc == 77 || rc == 78) {
        print_message("cannot make a private mount namespace with a small /dev/shm "
                      "(unshare -m or mount refused: not root, or no CAP_SYS_ADMIN in "
                      "this container); skipped\n");
        free(said);
        skip();
    }
    assert_int_equal(rc, 0);
    assert_said(said, "cannot allocate its");
    assert_said(said, "No space left on device");
    assert_said(said, "df -h /dev/shm");
    free(said);
}

/* ---- truncation ---------------------------------------------------------- */

/* Shrink the object to `size` under this process's mapping: every access
 * after it works (on zeros), the lock is refused, one message says why. */
static void truncated_under_us(off_t size)
{
    shm_table_t *t = open_host();
    int self = shm_self(t);
    assert_true(self >= 0);
    cap_begin();
    assert_int_equal(truncate(path, size), 0);
    shm_ident_t id;
    int last = SHM_MAX_SLOTS - 1;
    shm_slot_ident(t, last, &id);                     /* reads past the new end */
    uint64_t *area = shm_device_area(t, SHM_MAX_DEVICES - 1, SHM_AREA_MEM);
    *area = 7;                                        /* and writes */
    int locked = shm_lock(t);
    int alive = shm_slot_alive(t, self);
    char *said = cap_end();
    assert_int_equal(locked, -EIO);
    assert_false(alive);                              /* the table reads as empty */
    assert_int_equal(tu_count_lines(said, "was truncated by another process"), 1);
    free(said);
    shm_close_table(t);
}

static void test_truncated_under_this_process(void **state)
{
    (void)state;
    truncated_under_us(0);
    unlink(path);
    truncated_under_us((off_t)sizeof(shm_layout_t) / 2);
}

/* The live hosts in the table. */
static int count_hosts(void)
{
    shm_open_opts_t ro = { .name = name, .read_only = 1 };
    shm_table_t *t = NULL;
    if (shm_open_table(&ro, &t) != 0)
        return 0;
    int n = 0;
    for (int s = 0; s < SHM_MAX_SLOTS; s++)
        n += shm_slot_alive(t, s);
    shm_close_table(t);
    return n;
}

static int two_hosts(void *arg)
{
    (void)arg;
    return count_hosts() >= 2;
}

/* salus-top --json has printed more than `more_than` snapshots. */
typedef struct lines_wait {
    const char *path;
    int more_than;
} lines_wait_t;

static int count_file_lines(const char *path)
{
    char *text = tu_read_file(path, NULL);
    int n = text ? tu_count_lines(text, "{") : 0;
    free(text);
    return n;
}

static int has_more_lines(void *arg)
{
    lines_wait_t *w = arg;
    return count_file_lines(w->path) > w->more_than;
}

static void test_truncated_under_running_hosts(void **state)
{
    (void)state;
    char prog[512], top[512];
    tu_env_t env;
    tu_env_init(&env);
    tu_env_salus(&env, gpu, name);
    tu_proc_t jobs[2], mon;
    char *argv[] = { (char *)tu_build_path("bin/salus-train", prog, sizeof prog),
                     "--seconds", "3", "--kernels", "4", "--kernel-us", "1000", NULL };
    for (int i = 0; i < 2; i++)
        assert_int_equal(tu_spawn(&jobs[i], argv, &env), 0);
    assert_true(tu_await(two_hosts, NULL, 15000));
    tu_env_unset(&env, "LD_PRELOAD");
    char *top_argv[] = { (char *)tu_build_path("bin/salus-top", top, sizeof top),
                         "--json", "-d", "0.1", "-t", name, NULL };
    assert_int_equal(tu_spawn(&mon, top_argv, &env), 0);
    tu_env_free(&env);
    lines_wait_t w = { mon.out_path, 0 };
    assert_true(tu_await(has_more_lines, &w, 15000));   /* salus-top has it mapped */

    assert_int_equal(truncate(path, 0), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(tu_wait(&jobs[i], 30000), 0);       /* ran to the end */
        char *err = tu_read_file(jobs[i].err_path, NULL);
        assert_non_null(err);
        assert_said(err, "was truncated by another process");
        free(err);
    }
    w.more_than = count_file_lines(mon.out_path);
    assert_true(tu_await(has_more_lines, &w, 15000));   /* it samples after it */
    kill(mon.pid, SIGTERM);
    int rc = tu_wait(&mon, 10000);
    if (rc != 0 && rc != 128 + SIGTERM) {
        char *err = tu_read_file(mon.err_path, NULL);
        fail_msg("salus-top ended with %d after the truncation:\n%s", rc, err ? err : "");
    }
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_fifo_is_refused_without_hanging),
        T(test_symlink_is_refused),
        T(test_squatted_name),
        T(test_private_table_open_to_its_group),
        T(test_read_only_table_of_ones_own),
        T(test_fifo_at_the_default_name),
        T(test_small_dev_shm),
        T(test_truncated_under_this_process),
        T(test_truncated_under_running_hosts),
    };
    return cmocka_run_group_tests_name("ipc_open", tests, NULL, NULL);
}
