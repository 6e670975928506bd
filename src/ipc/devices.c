/*
 * devices.c - the process's ordinal -> device cache over the table's device
 * index (ipc.h, shm_device_of), and each device's serial lock (a record
 * lock, taken and dropped by one process; no memory of its own).
 *
 * A GPU's index in the table is found by its identity, which costs a driver
 * call and the table's lock; both modules that need it (sched at a launch,
 * memory at an allocation) ask here, so that a process pays once per device,
 * and the two modules can never disagree on the index of an ordinal.
 *
 * No lock of its own.  An entry is written once with a release store after
 * the index it names was registered (under the table's lock), read with an
 * acquire load; two threads that miss at once both look up and store the
 * same index (an index is never given back, and a uuid has one index).
 * fork(): the child keeps the cache, as it keeps the table's mapping.
 * A device's first lookup in a process also checks the GPU's claim
 * (claim.c): once per process and device, off every fast path.
 */
#include "ipc/shm_layout.h"
#include "drv/drv.h"

#include <fcntl.h>
#include <time.h>

_Static_assert(SHM_MAX_ORDINALS == DRV_MAX_ORDINAL + 1,
               "the cache covers every ordinal the driver contract answers");
_Static_assert(SHM_MAX_DEVICES < INT8_MAX, "an index + 1 fits the cache's int8_t");

int shm_device_of(shm_table_t *t, const drv_t *drv, int ordinal)
{
    if (!t || t->read_only || ordinal < 0 || ordinal >= SHM_MAX_ORDINALS)
        return -1;
    int v = util_load_acquire(&t->ordinal_index[ordinal]);
    if (v > 0 && v <= SHM_MAX_DEVICES)
        return v - 1;
    uint8_t uuid[16];
    int stand_in = drv_device_uuid(drv, ordinal, uuid);  /* a driver call: outside the lock */
    if (shm_lock(t) != 0)
        return -2;
    int d = shm_device_index_locked(t, uuid);
    shm_unlock(t);
    if (d < 0)
        return -1;
    if (!stand_in)                  /* registered first: a claim names a table that has it */
        shm_device_claim(t, d, uuid);
    util_store_release(&t->ordinal_index[ordinal], (int8_t)(d + 1));
    return d;
}

static int serial_op(shm_table_t *t, int device, short type)
{
    struct flock fl = { .l_type = type, .l_whence = SEEK_SET,
                        .l_start = SHM_SERIAL_BASE + device, .l_len = 1 };
    return fcntl(t->fd, F_SETLK, &fl);
}

int shm_device_serial_lock(shm_table_t *t, int device, int timeout_ms)
{
    if (!t || t->read_only || device < 0 || device >= SHM_MAX_DEVICES)
        return -1;
    for (int waited = 0;; waited++) {
        if (serial_op(t, device, F_WRLCK) == 0)
            return 0;
        if (waited >= timeout_ms)
            return -1;
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL);
    }
}

int shm_device_serial_wait(shm_table_t *t, int device, int timeout_ms)
{
    if (!t || t->read_only || device < 0 || device >= SHM_MAX_DEVICES)
        return -1;
    for (int waited = 0;; waited++) {
        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
                            .l_start = SHM_SERIAL_BASE + device, .l_len = 1 };
        if (fcntl(t->fd, F_GETLK, &fl) == 0 && fl.l_type == F_UNLCK)
            return 0;
        if (waited >= timeout_ms)
            return -1;
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL);
    }
}

void shm_device_serial_unlock(shm_table_t *t, int device)
{
    if (t && !t->read_only && device >= 0 && device < SHM_MAX_DEVICES)
        serial_op(t, device, F_UNLCK);
}
