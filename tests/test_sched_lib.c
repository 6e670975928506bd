/*
 * test_sched_lib.c - the scheduler tests' table watchers and foreign tables
 * (see test_sched_lib.h).
 *
 * Divided into: watching a table; foreign tables.  The watchers read the
 * table as salus-top does, through ipc and sched's readers, and assert
 * nothing (the tests do); making a foreign table asserts each step.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_sched_lib.h"

#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sched/sched.h"
#include "lib/testutil.h"

#define MS 1000000ull

/* ---- watching a table ------------------------------------------------------------- */

typedef struct opening {
    const char *name;
    shm_table_t *t;
} opening_t;

static int opened(void *arg)
{
    opening_t *o = arg;
    shm_open_opts_t opts = { .name = o->name, .read_only = 1 };
    return shm_open_table(&opts, &o->t) == 0;
}

shm_table_t *ts_open_table(const char *name, int timeout_ms)
{
    opening_t o = { name, NULL };
    tu_await(opened, &o, timeout_ms);
    return o.t;
}

pid_t ts_holder(shm_table_t *t, int nwaiters)
{
    sched_device_info_t di;
    shm_ident_t id;
    if (sched_read_device(t, 0, &di) == 0 && di.holder >= 0 && di.nwaiters >= nwaiters &&
        shm_slot_ident(t, di.holder, &id) == 0)
        return id.pid;
    return -1;
}

typedef struct holding {
    shm_table_t *t;
    int nwaiters;
    pid_t pid;
} holding_t;

static int held(void *arg)
{
    holding_t *h = arg;
    return (h->pid = ts_holder(h->t, h->nwaiters)) >= 0;
}

pid_t ts_await_holder(shm_table_t *t, int nwaiters, int timeout_ms)
{
    holding_t h = { t, nwaiters, -1 };
    tu_await(held, &h, timeout_ms);
    return h.pid;
}

int ts_state(shm_table_t *t, pid_t pid)
{
    for (int s = 0; s < SHM_MAX_SLOTS; s++) {
        shm_ident_t id;
        if (shm_slot_ident(t, s, &id) == 0 && id.pid == pid)
            return (int)id.state;
    }
    return -1;
}

pid_t ts_others(shm_table_t *t, pid_t pid, int ms, int *seen)
{
    uint64_t deadline = tu_now_ns() + (uint64_t)ms * MS;
    *seen = 0;
    while (tu_now_ns() < deadline) {
        for (int s = 0; s < SHM_MAX_SLOTS; s++) {
            shm_ident_t id;
            if (shm_slot_ident(t, s, &id) != 0)
                continue;
            if (id.pid != pid)
                return id.pid;
            *seen = 1;
        }
        tu_sleep_ms(3);
    }
    return 0;
}

/* ---- foreign tables --------------------------------------------------------------- */

void ts_make_foreign(const char *name, int foreign)
{
    shm_unlink(name);
    if (foreign == 0) {                              /* a real table of ABI 99 */
        shm_open_opts_t o = { .name = name, .create = 1 };
        shm_table_t *t;
        assert_int_equal(shm_open_table(&o, &t), 0);
        shm_close_table(t);
        int fd = shm_open(name, O_RDWR, 0600);
        assert_true(fd >= 0);
        uint32_t version = 99;
        assert_int_equal(pwrite(fd, &version, sizeof version, 8), (ssize_t)sizeof version);
        close(fd);
    } else {                                         /* garbage of another size */
        int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
        assert_true(fd >= 0);
        char junk[4096];
        memset(junk, 0x5a, sizeof junk);
        assert_int_equal(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
        close(fd);
    }
}

int ts_in_state(void *arg)
{
    const ts_watch_t *w = arg;
    int s = ts_state(w->t, w->pid);
    return w->state == TS_REGISTERED ? s >= 0 : s == w->state;
}

void ts_finish(tu_proc_t *p, const char *who, int ms)
{
    int rc = tu_wait(p, ms);
    if (rc != 0) {
        char *out = tu_read_file(p->out_path, NULL), *err = tu_read_file(p->err_path, NULL);
        fail_msg("the %s exited %d: %s / %s", who, rc, out ? out : "", err ? err : "");
    }
}
