/*
 * check.c - the memory module's invariants over a table, as written above
 * its layout (mem_layout.h): for the tests, and in a debug build (make
 * DEBUG=1) at every lock and unlock of the table, through ipc's check hook.
 * A release build never calls them.
 *
 * Divided into: one slot; one device; the entry points.  Called with the
 * table locked.  They only read: no repair, no abort, no log; the first
 * violation is described in util_describe's per-thread buffer for the
 * caller to print.
 * "used == the process's live allocations" is known only to the process
 * itself and is left to the tests, which count their allocations.
 */
#include "memory/mem_layout.h"

#include "util/util.h"

/* ---- one slot ----------------------------------------------------------------- */

/* Slot j on device d; adds max(granted, reserved) to *committed. */
static const char *check_sdev(int j, int d, const mem_sdev_t *sd, uint64_t *committed)
{
    uint64_t granted = util_load_relaxed(&sd->granted), reserved = util_load_relaxed(&sd->reserved);
    uint64_t spare = MEM_SPARE(util_load_relaxed(&sd->avail));
    uint64_t limit = util_load_relaxed(&sd->limit);
    if (granted > MEM_MAX_BYTES || reserved > MEM_MAX_BYTES)
        return util_describe("slot %d, device %d: granted %llu or reserved %llu is past 2^48", j,
                             d, (unsigned long long)granted, (unsigned long long)reserved);
    if (spare > granted)
        return util_describe("slot %d, device %d: spare %llu is more than the grant %llu "
                             "(used < 0)", j, d, (unsigned long long)spare,
                             (unsigned long long)granted);
    if (granted > limit)
        return util_describe("slot %d, device %d: granted %llu is more than its limit %llu", j, d,
                             (unsigned long long)granted, (unsigned long long)limit);
    if (reserved > 0 && !(util_load_relaxed(&sd->flags) & MEM_SDEV_ADMITTED))
        return util_describe("slot %d, device %d: %llu bytes reserved, yet not admitted", j, d,
                             (unsigned long long)reserved);
    *committed += granted > reserved ? granted : reserved;
    return NULL;
}

/* ---- one device ---------------------------------------------------------------- */

static const char *check_dev(shm_table_t *t, int d, const mem_dev_t *dev)
{
    const char *bad;
    uint64_t capacity = util_load_relaxed(&dev->capacity), budget = util_load_relaxed(&dev->budget);
    if (capacity > MEM_MAX_BYTES || budget > capacity)
        return util_describe("device %d: budget %llu, capacity %llu (budget <= capacity < 2^48)",
                             d, (unsigned long long)budget, (unsigned long long)capacity);
    if (util_load_relaxed(&dev->log.valid))
        return util_describe("device %d: a reclaim log is left valid at an unlock", d);
    uint64_t committed = 0;
    for (int j = 0; j < SHM_MAX_SLOTS; j++) {
        mem_slot_t *a = shm_slot_area(t, j, SHM_AREA_MEM);
        if (!a || shm_slot_gen(t, j) == 0)
            continue;
        if ((bad = check_sdev(j, d, &a->dev[d], &committed)) != NULL)
            return bad;
    }
    if (committed > budget)
        return util_describe("device %d: the live slots commit %llu bytes, more than the budget "
                             "%llu", d, (unsigned long long)committed, (unsigned long long)budget);
    return NULL;
}

/* ---- the entry points ------------------------------------------------------------ */

const char *mem_check_locked(shm_table_t *t)
{
    const char *bad;
    for (int d = 0; d < SHM_MAX_DEVICES; d++) {
        mem_dev_t *dev = shm_device_area(t, d, SHM_AREA_MEM);
        if (dev && util_load_relaxed(&dev->magic) == MEM_DEV_MAGIC &&
            (bad = check_dev(t, d, dev)) != NULL)
            return bad;
    }
    return NULL;
}

const char *mem_check_hook(shm_table_t *t, void *ctx)
{
    (void)ctx;
    return mem_check_locked(t);
}
