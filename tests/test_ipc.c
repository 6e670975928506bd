/*
 * test_ipc.c - the arbitration table: creation and attachment by several
 * processes, refusal of tables it must not use, liveness that survives PID
 * reuse, reaping of dead processes (including one that died holding the
 * lock), fork, futex handoffs, a stress test and misuse.
 *
 * Every test uses its own table name.  Children are forked and always waited
 * for with a deadline; a child reports failure through its exit status.
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
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "ipc/shm_layout.h"
#include "lib/testutil.h"

static char name[64];

static int setup(void **state)
{
    (void)state;
    tu_unique_name("salus-ipc", name, sizeof name);
    shm_unlink(name);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    shm_unlink(name);
    return 0;
}

static shm_table_t *open_named(const char *n)
{
    shm_open_opts_t o = { .name = n, .create = 1 };
    shm_table_t *t = NULL;
    assert_int_equal(shm_open_table(&o, &t), 0);
    assert_non_null(t);
    return t;
}

/* Wait for a forked child; return its exit code (or 128+signal). */
static int reap_child(pid_t pid, int timeout_ms)
{
    tu_proc_t p = { .pid = pid };
    return tu_wait(&p, timeout_ms);
}

/* tu_fork_teller, which must start and tell. */
static pid_t spawn_teller(int (*fn)(void *), void *arg, int *told)
{
    pid_t pid = tu_fork_teller(fn, arg, told);
    assert_true(pid > 0);
    return pid;
}

/* In a child: open the table (arg: its name) and claim a slot; the slot. */
static int claim_slot(void *arg)
{
    shm_open_opts_t o = { .name = arg, .create = 1 };
    shm_table_t *t;
    if (shm_open_table(&o, &t) != 0)
        _exit(10);
    return shm_self(t);
}

/* A child that opens the table, claims a slot, tells the parent which, then
 * waits for SIGKILL. */
static pid_t spawn_holder(const char *n, int *slot_out)
{
    return spawn_teller(claim_slot, (void *)n, slot_out);
}

/* ---- naming and opening ------------------------------------------------- */

static void test_default_names(void **state)
{
    (void)state;
    char buf[64], want[64];
    unsetenv("SALUS_TABLE");
    unsetenv("SALUS_GROUP");
    assert_int_equal(shm_default_name(buf, sizeof buf, 0), 0);
    snprintf(want, sizeof want, "/salus-%u", (unsigned)getuid());
    assert_string_equal(buf, want);

    setenv("SALUS_GROUP", "research", 1);
    assert_int_equal(shm_default_name(buf, sizeof buf, 0), 0);
    assert_string_equal(buf, "/salus-group-research");

    setenv("SALUS_TABLE", "mine", 1);
    assert_int_equal(shm_default_name(buf, sizeof buf, 0), 0);
    assert_string_equal(buf, "/mine");

    /* A bad name is said and ignored: the default (here the group's) is used. */
    setenv("SALUS_TABLE", "../etc/passwd", 1);
    assert_int_equal(shm_default_name(buf, sizeof buf, 0), 0);
    assert_string_equal(buf, "/salus-group-research");
    unsetenv("SALUS_TABLE");
    unsetenv("SALUS_GROUP");

    shm_open_opts_t o = { .name = "no-slash", .create = 1 };
    shm_table_t *t = NULL;
    assert_int_equal(shm_open_table(&o, &t), -EINVAL);
    assert_null(t);
}

/* What stderr got while fn ran. */
static void capture_stderr(void (*fn)(void *), void *arg, char *out, size_t cap)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    int saved = dup(2);
    dup2(fds[1], 2);
    fn(arg);
    dup2(saved, 2);
    close(saved);
    close(fds[1]);
    ssize_t n = read(fds[0], out, cap - 1);
    out[n > 0 ? n : 0] = '\0';
    close(fds[0]);
}

static void open_bad_name(void *quiet)
{
    shm_open_opts_t o = { .name = "no-slash", .create = 1, .quiet = *(int *)quiet };
    shm_table_t *t = NULL;
    assert_int_equal(shm_open_table(&o, &t), -EINVAL);
}

/* Options are taken as given: a quiet open says nothing (a monitor says it
 * its own way), and a table opened with no group is private whatever
 * SALUS_GROUP says (only the process's own table reads the environment). */
static void test_open_options_explicit(void **state)
{
    (void)state;
    char said[1024];
    int quiet = 0;
    capture_stderr(open_bad_name, &quiet, said, sizeof said);
    assert_non_null(strstr(said, "is not a table name"));
    quiet = 1;
    capture_stderr(open_bad_name, &quiet, said, sizeof said);
    assert_string_equal(said, "");

    char name[64];
    tu_unique_name("salus-ipc-opts", name, sizeof name);
    setenv("SALUS_GROUP", "no-such-group-here", 1);   /* would refuse, if it were read */
    shm_open_opts_t o = { .name = name, .create = 1, .quiet = 1 };
    shm_table_t *t = NULL;
    assert_int_equal(shm_open_table(&o, &t), 0);
    unsetenv("SALUS_GROUP");
    struct stat st;
    char path[128];
    snprintf(path, sizeof path, "/dev/shm%s", name);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);          /* private */
    shm_close_table(t);
    shm_unlink_table(name);
}

static void test_create_and_attach(void **state)
{
    (void)state;
    shm_table_t *t = open_named(name);
    struct stat st;
    char path[128];
    snprintf(path, sizeof path, "/dev/shm%s", name);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);        /* private, whatever the umask */
    assert_int_equal((size_t)st.st_size, sizeof(shm_layout_t));

    int self = shm_self(t);
    assert_true(self >= 0);
    assert_int_equal(shm_self(t), self);              /* claimed once */

    int child_slot;
    pid_t pid = spawn_holder(name, &child_slot);
    assert_true(child_slot >= 0);
    assert_int_not_equal(child_slot, self);
    shm_ident_t id;
    assert_int_equal(shm_slot_ident(t, child_slot, &id), 0);
    assert_int_equal(id.pid, pid);
    assert_int_equal(id.uid, getuid());
    assert_int_equal(id.state, SHM_IDLE);
    assert_true(strlen(id.name) > 0);
    assert_true(shm_slot_alive(t, child_slot));

    kill(pid, SIGKILL);
    assert_int_equal(reap_child(pid, 5000), 128 + SIGKILL);
    shm_close_table(t);
}

static void test_read_only_monitor(void **state)
{
    (void)state;
    shm_open_opts_t ro = { .name = name, .read_only = 1 };
    shm_table_t *m = NULL;
    assert_int_equal(shm_open_table(&ro, &m), -ENOENT);   /* no table yet: quiet */

    int slot;
    pid_t pid = spawn_holder(name, &slot);
    assert_int_equal(shm_open_table(&ro, &m), 0);
    assert_int_equal(shm_self(m), -1);                    /* monitors never register */
    shm_ident_t id;
    assert_int_equal(shm_slot_ident(m, slot, &id), 0);
    assert_int_equal(id.pid, pid);
    assert_true(shm_slot_alive(m, slot));
    kill(pid, SIGKILL);
    reap_child(pid, 5000);
    assert_false(shm_slot_alive(m, slot));                /* dead, seen read-only */
    shm_close_table(m);
}

/* Make an object of the table's size whose header is changed by `forge`. */
static void make_forged(void (*forge)(shm_layout_t *))
{
    shm_table_t *t = open_named(name);
    forge(t->map);
    shm_close_table(t);
}
static void forge_magic(shm_layout_t *m) { m->hdr.magic = 0x1234; }
static void forge_version(shm_layout_t *m) { m->hdr.abi_version = SHM_ABI_VERSION + 7; }
static void forge_slots(shm_layout_t *m) { m->hdr.max_slots = 3; }

static void test_refuses_foreign_tables(void **state)
{
    (void)state;
    void (*forges[])(shm_layout_t *) = { forge_magic, forge_version, forge_slots };
    for (size_t i = 0; i < sizeof forges / sizeof *forges; i++) {
        shm_unlink(name);
        make_forged(forges[i]);
        shm_open_opts_t o = { .name = name, .create = 1 };
        shm_table_t *t = NULL;
        assert_int_equal(shm_open_table(&o, &t), -EPROTO);
        assert_null(t);
    }

    /* Another size: made by another version, or not a table at all. */
    shm_unlink(name);
    int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 4096), 0);
    close(fd);
    shm_open_opts_t o = { .name = name, .create = 1 };
    shm_table_t *t = NULL;
    assert_int_equal(shm_open_table(&o, &t), -EPROTO);

    /* Open to every user: not trusted. */
    shm_unlink(name);
    t = open_named(name);
    shm_close_table(t);
    char path[128];
    snprintf(path, sizeof path, "/dev/shm%s", name);
    assert_int_equal(chmod(path, 0666), 0);
    t = NULL;
    assert_int_equal(shm_open_table(&o, &t), -EPERM);
    assert_null(t);
}

static void test_other_users_table(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        fprintf(stderr, "needs root to act as a second user; skipped\n");
        skip();
    }
    shm_table_t *t = open_named(name);            /* root's table, 0600 */
    pid_t pid = fork();
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(20);
        shm_open_opts_t o = { .name = name, .create = 1 };
        shm_table_t *other = NULL;
        int rc = shm_open_table(&o, &other);
        _exit(rc == -EACCES && other == NULL ? 0 : 21);
    }
    assert_int_equal(reap_child(pid, 5000), 0);
    shm_close_table(t);
}

/* ---- liveness and reaping ----------------------------------------------- */

static int reaped_slot = -1, reap_calls, repair_calls;
static void count_reap(shm_table_t *t, int slot, void *area, void *ctx)
{
    (void)t; (void)area; (void)ctx;
    reaped_slot = slot;
    reap_calls++;
}
static void count_repair(shm_table_t *t, void *ctx)
{
    (void)t; (void)ctx;
    repair_calls++;
}

static void test_sigkill_is_reaped(void **state)
{
    (void)state;
    shm_table_t *t = open_named(name);
    shm_set_hooks(t, SHM_AREA_SCHED, count_reap, count_repair, NULL);
    reap_calls = 0;
    int slot;
    pid_t pid = spawn_holder(name, &slot);
    assert_true(shm_slot_alive(t, slot));
    assert_int_equal(shm_reap_dead(t, 0), 0);         /* alive: not reaped */

    kill(pid, SIGKILL);
    reap_child(pid, 5000);
    uint64_t t0 = tu_now_ns();
    assert_false(shm_slot_alive(t, slot));
    assert_int_equal(shm_reap_dead(t, 0), 1);
    assert_true(tu_now_ns() - t0 < 100ull * 1000 * 1000);  /* well within 100 ms */
    assert_int_equal(reap_calls, 1);
    assert_int_equal(reaped_slot, slot);
    shm_ident_t id;
    assert_int_equal(shm_slot_ident(t, slot, &id), -1);  /* freed */
    shm_close_table(t);
}

static void test_pid_reuse_cannot_fool(void **state)
{
    (void)state;
    shm_table_t *t = open_named(name);
    shm_set_hooks(t, SHM_AREA_MEM, count_reap, NULL, NULL);
    reap_calls = 0;
    /* A slot that names a live pid (ours, or init's) but whose owner holds no
     * liveness lock: its process died and the pid went to someone else. */
    shm_slot_id_t *id = &t->map->slots[5].id;
    id->pid = 1;
    id->gen = 9;
    __atomic_store_n(&id->state, SHM_RUNNING, __ATOMIC_RELEASE);
    assert_false(shm_slot_alive(t, 5));
    assert_int_equal(shm_reap_dead(t, 0), 1);
    assert_int_equal(reap_calls, 1);
    assert_int_equal(shm_slot_gen(t, 5), 0);
    shm_close_table(t);
}

/* In a child: claim a slot and take the table's lock; the slot. */
static int claim_and_lock(void *arg)
{
    (void)arg;
    shm_table_t *c = open_named(name);
    int slot = shm_self(c);
    if (shm_lock(c) != 0)
        _exit(30);
    return slot;
}

static void test_holder_dies_with_lock(void **state)
{
    (void)state;
    shm_table_t *t = open_named(name);
    shm_set_hooks(t, SHM_AREA_SCHED, count_reap, count_repair, NULL);
    reap_calls = repair_calls = 0;
    int slot;
    pid_t pid = spawn_teller(claim_and_lock, NULL, &slot);
    kill(pid, SIGKILL);                               /* mid-way through a structural change */
    reap_child(pid, 5000);
    uint64_t t0 = tu_now_ns();
    assert_int_equal(shm_lock(t), 0);                 /* not a hang, not an error */
    assert_true(tu_now_ns() - t0 < 100ull * 1000 * 1000);
    assert_int_equal(repair_calls, 1);
    assert_int_equal(reap_calls, 1);
    assert_int_equal(reaped_slot, slot);
    shm_unlock(t);
    assert_int_equal(shm_lock(t), 0);                 /* consistent again */
    assert_int_equal(repair_calls, 1);
    shm_unlock(t);
    shm_close_table(t);
}

/* In a child: take the table's lock. */
static int take_lock(void *arg)
{
    (void)arg;
    return shm_lock(open_named(name));
}

static void test_hung_lock_holder_times_out(void **state)
{
    (void)state;
    shm_table_t *t = open_named(name);
    int locked;
    pid_t pid = spawn_teller(take_lock, NULL, &locked);   /* holds it forever */
    assert_int_equal(locked, 0);
    assert_int_equal(shm_lock(t), -ETIMEDOUT);        /* bounded, not a hang */
    kill(pid, SIGKILL);
    reap_child(pid, 5000);
    assert_int_equal(shm_lock(t), 0);                 /* and recovers once it dies */
    shm_unlock(t);
    shm_close_table(t);
}

static void test_dead_creator_table_is_remade(void **state)
{
    (void)state;
    /* The creator died after sizing the object, before marking it ready. */
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, sizeof(shm_layout_t)), 0);
    shm_layout_t *m = mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    m->hdr.magic = SHM_MAGIC;
    munmap(m, sizeof *m);
    close(fd);
    shm_table_t *t = open_named(name);
    assert_true(shm_self(t) >= 0);
    shm_close_table(t);
}

/* ---- fork, futexes ------------------------------------------------------ */

/* In a forked child of a registered process (arg: the inherited table):
 * no slot until it asks for one; then its own. */
static int claim_own_slot(void *arg)
{
    shm_table_t *t = arg;
    if (shm_self_peek(t) != -1)
        _exit(40);                            /* inherited the parent's slot */
    return shm_self(t);                       /* registers only when it asks */
}

static void test_fork_child_holds_no_slot(void **state)
{
    (void)state;
    shm_table_t *t = open_named(name);
    int self = shm_self(t);
    assert_true(self >= 0);
    int child_slot;
    pid_t pid = spawn_teller(claim_own_slot, t, &child_slot);
    assert_true(child_slot >= 0);
    assert_int_not_equal(child_slot, self);
    shm_ident_t id;
    assert_int_equal(shm_slot_ident(t, child_slot, &id), 0);
    assert_int_equal(id.pid, pid);
    assert_int_equal(shm_slot_ident(t, self, &id), 0);
    assert_int_equal(id.pid, getpid());
    kill(pid, SIGKILL);
    reap_child(pid, 5000);
    assert_true(shm_slot_alive(t, self));     /* the child's death is not ours */
    assert_int_equal(shm_reap_dead(t, 0), 1);
    shm_close_table(t);
}

static void test_futex_across_processes(void **state)
{
    (void)state;
    shm_table_t *t = open_named(name);
    uint32_t *word = shm_global_area(t, SHM_AREA_SCHED);
    assert_non_null(word);
    assert_int_equal(shm_futex_wait(word, 0, 20 * 1000 * 1000), ETIMEDOUT);
    assert_int_equal(shm_futex_wait(word, 5, 0), 0);   /* value differs: no wait */

    pid_t pid = fork();
    if (pid == 0) {
        shm_table_t *c = open_named(name);
        uint32_t *w = shm_global_area(c, SHM_AREA_SCHED);
        while (__atomic_load_n(w, __ATOMIC_ACQUIRE) == 0)
            if (shm_futex_wait(w, 0, 5ull * 1000 * 1000 * 1000) == ETIMEDOUT)
                _exit(50);
        _exit(__atomic_load_n(w, __ATOMIC_ACQUIRE) == 7 ? 0 : 51);
    }
    tu_sleep_ms(50);
    __atomic_store_n(word, 7, __ATOMIC_RELEASE);
    shm_futex_wake(word, 1);
    assert_int_equal(reap_child(pid, 5000), 0);
    shm_close_table(t);
}

/* ---- devices ------------------------------------------------------------ */

static void test_device_registry(void **state)
{
    (void)state;
    shm_table_t *t = open_named(name);
    uint8_t a[16] = "GPU-aaaaaaaaaaa", b[16] = "GPU-bbbbbbbbbbb", out[16];
    assert_int_equal(shm_device_uuid(t, 0, out), -1);      /* nothing registered */
    assert_int_equal(shm_lock(t), 0);
    assert_int_equal(shm_device_index_locked(t, a), 0);
    assert_int_equal(shm_device_index_locked(t, b), 1);
    assert_int_equal(shm_device_index_locked(t, a), 0);    /* known: same index */
    shm_unlock(t);
    assert_int_equal(shm_device_uuid(t, 1, out), 0);
    assert_memory_equal(out, b, 16);
    assert_int_equal(shm_device_uuid(t, 2, out), -1);
    assert_int_equal(shm_device_uuid(t, -1, out), -1);

    /* Another process that sees b under another ordinal gets b's index. */
    pid_t pid = fork();
    if (pid == 0) {
        shm_table_t *c = open_named(name);
        if (shm_lock(c) != 0)
            _exit(80);
        int d = shm_device_index_locked(c, b);
        shm_unlock(c);
        _exit(d == 1 ? 0 : 81);
    }
    assert_int_equal(reap_child(pid, 5000), 0);

    /* Full: every index taken, a new GPU gets none; a scribbled count is
     * clamped rather than trusted. */
    assert_int_equal(shm_lock(t), 0);
    for (int i = 2; i < SHM_MAX_DEVICES; i++) {
        uint8_t u[16] = { 0 };
        snprintf((char *)u, sizeof u, "GPU-%d", i);
        assert_int_equal(shm_device_index_locked(t, u), i);
    }
    uint8_t c[16] = "GPU-ccccccccccc";
    assert_int_equal(shm_device_index_locked(t, c), -1);
    t->map->hdr.devices = 1000;
    assert_int_equal(shm_device_index_locked(t, a), 0);
    assert_int_equal(t->map->hdr.devices, SHM_MAX_DEVICES);
    shm_unlock(t);
    shm_close_table(t);
}

/* ---- stress and misuse -------------------------------------------------- */

static void test_stress_claims(void **state)
{
    (void)state;
    enum { PROCS = 12, ROUNDS = 60 };
    shm_table_t *t = open_named(name);
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        pids[p] = fork();
        if (pids[p] == 0) {
            for (int r = 0; r < ROUNDS; r++) {
                shm_table_t *c;
                shm_open_opts_t o = { .name = name, .create = 1 };
                if (shm_open_table(&o, &c) != 0)
                    _exit(60);
                int s = shm_self(c);
                if (s < 0)
                    _exit(61);
                shm_ident_t id;
                if (shm_slot_ident(c, s, &id) != 0 || id.pid != getpid())
                    _exit(62);
                if (r % 7 == 3) {
                    /* A crash: a grandchild claims and is killed. */
                    pid_t g = fork();
                    if (g == 0) {
                        shm_self(c);
                        raise(SIGKILL);
                    }
                    waitpid(g, NULL, 0);
                }
                shm_close_table(c);
            }
            _exit(0);
        }
    }
    for (int p = 0; p < PROCS; p++)
        assert_int_equal(reap_child(pids[p], 60000), 0);
    shm_reap_dead(t, 0);
    int used = 0;
    for (int i = 0; i < SHM_MAX_SLOTS; i++)
        used += shm_slot_gen(t, i) != 0;
    assert_int_equal(used, 0);                  /* every slot given back or reaped */
    shm_close_table(t);
}

static void test_misuse(void **state)
{
    (void)state;
    shm_table_t *t = open_named(name);
    assert_null(shm_slot_area(t, -1, SHM_AREA_SCHED));
    assert_null(shm_slot_area(t, SHM_MAX_SLOTS, SHM_AREA_SCHED));
    assert_null(shm_slot_area(t, 0, SHM_AREAS));
    assert_null(shm_device_area(t, SHM_MAX_DEVICES, SHM_AREA_MEM));
    assert_null(shm_slot_area(NULL, 0, SHM_AREA_SCHED));
    assert_false(shm_slot_alive(t, -3));
    assert_false(shm_slot_alive(NULL, 0));
    assert_int_equal(shm_slot_gen(t, 1000), 0);
    shm_ident_t id;
    assert_int_equal(shm_slot_ident(t, -1, &id), -1);
    assert_string_equal(shm_state_name(SHM_WAIT_MEM), "waiting-mem");
    assert_string_equal(shm_state_name((shm_state_t)99), "invalid");

    /* A slot a peer scribbled on: state out of range, name unterminated and
     * full of control bytes, pid negative. */
    shm_slot_id_t *sid = &t->map->slots[9].id;
    sid->state = 77;
    assert_int_equal(shm_slot_ident(t, 9, &id), -1);
    sid->state = SHM_RUNNING;
    sid->pid = -5;
    assert_int_equal(shm_slot_ident(t, 9, &id), -1);
    sid->pid = 4242;
    memset(sid->name, '\x1b', sizeof sid->name);
    assert_int_equal(shm_slot_ident(t, 9, &id), 0);
    assert_int_equal(strlen(id.name), SHM_NAME_BYTES - 1);
    assert_null(strchr(id.name, '\x1b'));
    shm_set_state(t, 9, (shm_state_t)42);              /* ignored */
    assert_int_equal(sid->state, SHM_RUNNING);
    shm_close_table(t);
}

/* In a child: every slot registered as its own, liveness lock held. */
static int hold_every_slot(void *arg)
{
    (void)arg;
    shm_table_t *c = open_named(name);
    for (int i = 0; i < SHM_MAX_SLOTS; i++) {
        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
                            .l_start = SHM_LIVE_BASE + i, .l_len = 1 };
        if (fcntl(c->fd, F_SETLK, &fl) != 0)
            _exit(70);
        c->map->slots[i].id.pid = getpid();
        c->map->slots[i].id.gen = 1;
        __atomic_store_n(&c->map->slots[i].id.state, SHM_IDLE, __ATOMIC_RELEASE);
    }
    return SHM_MAX_SLOTS;
}

static void test_table_full(void **state)
{
    (void)state;
    shm_table_t *t = open_named(name);
    /* A helper process holds the liveness lock of every slot, as if 128 live
     * processes were registered. */
    int held;
    pid_t pid = spawn_teller(hold_every_slot, NULL, &held);
    assert_int_equal(held, SHM_MAX_SLOTS);
    assert_int_equal(shm_self(t), -1);                 /* full: runs without Salus */
    kill(pid, SIGKILL);
    reap_child(pid, 5000);
    assert_true(shm_self(t) >= 0);                     /* all reaped, room again */
    shm_close_table(t);
}

/* A free slot whose generation is all ones (claimed 2^32 times, or a stray
 * write) is claimed as generation 1, never 0, which every reader of a (slot,
 * gen) pair takes for "no process": the lease of a process claimed as gen 0
 * would never be its own. */
static void test_gen_wrap_skips_zero(void **state)
{
    (void)state;
    shm_table_t *t = open_named(name);
    for (int i = 0; i < SHM_MAX_SLOTS; i++)
        t->map->slots[i].id.gen = 0xffffffffu;
    int self = shm_self(t);
    assert_true(self >= 0);
    assert_int_equal(shm_slot_gen(t, self), 1);
    shm_close_table(t);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_default_names),
        T(test_open_options_explicit),
        T(test_create_and_attach),
        T(test_read_only_monitor),
        T(test_refuses_foreign_tables),
        T(test_other_users_table),
        T(test_sigkill_is_reaped),
        T(test_pid_reuse_cannot_fool),
        T(test_holder_dies_with_lock),
        T(test_hung_lock_holder_times_out),
        T(test_dead_creator_table_is_remade),
        T(test_fork_child_holds_no_slot),
        T(test_futex_across_processes),
        T(test_device_registry),
        T(test_stress_claims),
        T(test_misuse),
        T(test_table_full),
        T(test_gen_wrap_skips_zero),
    };
    return cmocka_run_group_tests_name("ipc", tests, NULL, NULL);
}
