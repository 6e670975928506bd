/*
 * tablefuzz.c - mutated tables and what a host and a monitor do with them
 * (tablefuzz.h).
 *
 * Divided into: where to hit (offsets that matter in the layout); what to
 * write (values that break assumptions); writing and reading objects; the
 * host; the monitor.  Nothing here is shared between threads.
 */
#include "tablefuzz.h"

#include "ipc/shm_layout.h"
#include "memory/memory.h"
#include "sched/sched.h"
#include "../../tools/top.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint64_t next(uint64_t *s)
{
    uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* ---- where to hit --------------------------------------------------------- */

static size_t slot_offset(int slot)
{
    return offsetof(shm_layout_t, slots) + (size_t)slot * sizeof(shm_slot_t);
}

/* An offset worth writing at: the used slots (the seed's first few) and
 * devices more often than the rest. */
static size_t pick_offset(size_t len, uint64_t *rng)
{
    uint64_t r = next(rng);
    int slot = (int)((r >> 8) % 4 == 0 ? (r >> 16) % SHM_MAX_SLOTS : (r >> 16) % 4);
    int dev = (int)((r >> 24) % 4 == 0 ? (r >> 32) % SHM_MAX_DEVICES : (r >> 32) % 2);
    size_t off;
    switch (r % 10) {
    case 0:
    case 1:
        off = offsetof(shm_layout_t, hdr.lock);
        break;
    case 2:
        off = offsetof(shm_layout_t, hdr.guest_gen) + 4 * ((r >> 40) % SHM_GUESTS);
        break;
    case 3:                             /* the header: counters, devices, uuids */
        off = (r >> 40) % sizeof(shm_header_t);
        break;
    case 4:
    case 5:                             /* a slot's identity */
        off = slot_offset(slot) + (r >> 40) % sizeof(shm_slot_id_t);
        break;
    case 6:
    case 7:                             /* a slot's module areas */
        off = slot_offset(slot) + offsetof(shm_slot_t, area) +
              (r >> 40) % sizeof(((shm_slot_t *)0)->area);
        break;
    case 8:                             /* a device's areas */
        off = offsetof(shm_layout_t, devices) + (size_t)dev * sizeof(shm_device_t) +
              (r >> 40) % sizeof(shm_device_t);
        break;
    default:                            /* the global areas, or anywhere */
        off = (r >> 40) % 2 ? offsetof(shm_layout_t, global) +
                                  (r >> 41) % sizeof(((shm_layout_t *)0)->global)
                            : (r >> 40) % len;
        break;
    }
    return off % len;
}

/* ---- what to write -------------------------------------------------------- */

static uint64_t pick_value(uint64_t *rng)
{
    static const uint64_t special[] = {
        0, 1, 2, 3, 4, 5, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x7fffffff, 0x80000000u,
        0xffffffffu, 0x100000000ull, 0x7fffffffffffffffull, 0x8000000000000000ull,
        UINT64_MAX, SHM_MAX_SLOTS, SHM_MAX_SLOTS + 1, SHM_MAX_DEVICES, SHM_LOCKERS,
        SHM_LOCK_WAITERS | 1, SHM_LOCK_WAITERS, 1ull << 40, 1ull << 62,
    };
    uint64_t r = next(rng);
    switch (r % 4) {
    case 0:
        return special[(r >> 8) % (sizeof special / sizeof *special)];
    case 1:                             /* a lock word naming a locker */
        return SHM_LOCK_WAITERS * ((r >> 8) & 1) |
               (((r >> 9) & 7) << SHM_LOCK_GEN_SHIFT)   /* small: near real ones */ |
               ((r >> 32) % (SHM_LOCKERS + 2));
    case 2:
        return (r >> 8) % 300;
    default:
        return next(rng);
    }
}

static void put(uint8_t *table, size_t len, size_t off, unsigned width, uint64_t v)
{
    if (width > 1)
        off &= ~(size_t)(width - 1);    /* the table's words are aligned */
    if (off + width > len)
        return;
    memcpy(table + off, &v, width);     /* little-endian, as the table is */
}

void tf_mutate(uint8_t *table, size_t len, uint64_t *rng)
{
    int n = 1 + (int)(next(rng) % 8);
    for (int i = 0; i < n; i++) {
        size_t off = pick_offset(len, rng);
        unsigned width = (unsigned[]){ 1, 4, 4, 8 }[next(rng) % 4];
        put(table, len, off, width, pick_value(rng));
    }
}

void tf_patch(uint8_t *table, size_t len, const uint8_t *data, size_t n)
{
    while (n >= 5) {
        uint32_t off;
        memcpy(&off, data, 4);
        uint8_t sel = data[4];
        unsigned width = (unsigned[]){ 1, 4, 8, 4 }[sel & 3];
        data += 5;
        n -= 5;
        uint64_t v = 0;
        unsigned w = width < n ? width : (unsigned)n;
        memcpy(&v, data, w);
        data += w;
        n -= w;
        /* A quarter of them in the header, where the lock word is. */
        size_t at = (sel & 0xc0) ? off % len : off % sizeof(shm_header_t);
        put(table, len, at, width, v);
    }
}

/* ---- objects -------------------------------------------------------------- */

int tf_write_table(const char *name, const uint8_t *bytes, size_t len)
{
    char path[128];
    snprintf(path, sizeof path, "%s%s", SHM_DIR, name);
    unlink(path);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    int err = posix_fallocate(fd, 0, (off_t)len);
    if (err == 0 && pwrite(fd, bytes, len, 0) != (ssize_t)len)
        err = errno ? errno : EIO;
    close(fd);
    return -err;
}

uint8_t *tf_read_table(const char *name, size_t *len)
{
    char path[128];
    struct stat st;
    snprintf(path, sizeof path, "%s%s", SHM_DIR, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return NULL;
    uint8_t *buf = NULL;
    if (fstat(fd, &st) == 0 && st.st_size > 0 && (buf = malloc((size_t)st.st_size)) &&
        pread(fd, buf, (size_t)st.st_size, 0) != st.st_size) {
        free(buf);
        buf = NULL;
    }
    close(fd);
    if (buf)
        *len = (size_t)st.st_size;
    return buf;
}

/* ---- the host and the monitor --------------------------------------------- */

static void read_everything(shm_table_t *t)
{
    for (int s = 0; s < SHM_MAX_SLOTS; s++) {
        shm_ident_t id;
        sched_slot_info_t si;
        mem_slot_view_t mv;
        shm_slot_ident(t, s, &id);
        shm_slot_alive(t, s);
        shm_slot_gen(t, s);
        sched_read_slot(t, s, &si);
        mem_view_slot(t, s, &mv);
    }
    for (int d = 0; d < SHM_MAX_DEVICES; d++) {
        uint8_t uuid[16];
        static sched_device_info_t di;  /* large: off the stack */
        mem_device_view_t dv;
        shm_device_uuid(t, d, uuid);
        sched_read_device(t, d, &di);
        mem_view_device(t, d, &dv);
    }
}

int tf_host(const char *name)
{
    shm_open_opts_t o = { .name = name, .create = 1 };
    shm_table_t *t = NULL;
    if (shm_open_table(&o, &t) != 0)
        return 0;
    shm_self(t);
    if (shm_lock(t) == 0) {
        static const uint8_t uuid[16] = { 'f', 'u', 'z', 'z' };
        shm_reap_dead(t, 1);
        shm_device_index_locked(t, uuid);
        shm_unlock(t);
    }
    read_everything(t);
    sched_set_policy_table(t, 0, (sched_policy_t)1, 50);
    read_everything(t);
    shm_close_table(t);
    return 1;
}

void tf_monitor(const char *name, FILE *out)
{
    const char *const tables[] = { name, NULL };
    top_collect_opts_t o = { .tables = tables, .all = 1 };
    top_collector_t *c;
    top_snap_t s;
    if (top_collector_new(&o, &c) != 0)
        return;
    top_snap_init(&s);
    if (top_collect(c, &s) == 0)
        top_print_json(out, &s);
    top_snap_free(&s);
    top_collector_free(c);
}
