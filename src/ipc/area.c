/*
 * area.c - what the table offers below its lock: the modules' areas, their
 * hooks (and, in debug builds, their invariant checks at each lock and
 * unlock), the device index, and futex waits on the table's words.
 *
 * Divided into: hooks; debug checks; devices; areas; futexes.  At the
 * bottom of ipc: lock.c, slots.c, devices.c and table.c use it, it uses none
 * of them.  No lock of its own: the device index is written with the
 * table's lock held by the caller; hooks are set by their module at start,
 * before it takes the lock.
 */
#include "ipc/shm_layout.h"
#include "util/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---- hooks ------------------------------------------------------------ */

void shm_set_hooks(shm_table_t *t, shm_area_t area, shm_reap_fn reap,
                   shm_repair_fn repair, void *ctx)
{
    if ((unsigned)area >= SHM_AREAS)
        return;
    t->hooks[area].reap = reap;
    t->hooks[area].repair = repair;
    t->hooks[area].ctx = ctx;
}

void shm_set_check(shm_table_t *t, shm_area_t area, shm_check_fn check)
{
    if ((unsigned)area < SHM_AREAS)
        t->hooks[area].check = check;
}

/* Debug builds: the modules' invariants at each lock and unlock (lock.c
 * calls these).  A table found broken at the lock was broken by someone
 * else: a peer's bug (its own debug build says so), a peer that died
 * mid-change, or a test that scribbles on purpose to prove that every word
 * is checked before use; that is said once and the holder goes on.  A table
 * found whole at the lock and broken at the unlock was broken by the code
 * that held the lock: said at each such unlock, at error level (libsalus
 * never aborts its host, not even in a debug build).
 * A release build compiles none of this. */
#ifdef SALUS_DEBUG
static const char *const area_names[SHM_AREAS] = { "scheduler", "memory" };

static const char *first_violation(shm_table_t *t, int *area)
{
    for (int a = 0; a < SHM_AREAS; a++) {
        const char *bad = t->hooks[a].check ? t->hooks[a].check(t, t->hooks[a].ctx) : NULL;
        if (bad) {
            *area = a;
            return bad;
        }
    }
    return NULL;
}

void shm_debug_check_lock(shm_table_t *t)
{
    static int said;
    int a = 0;
    const char *bad = first_violation(t, &a);
    t->whole_at_lock = bad == NULL;
    if (bad)
        util_log_once(&said, UTIL_LOG_WARN, "debug build: table %s: an invariant of the %s "
                      "did not hold when this process took the lock: %s", t->name,
                      area_names[a], bad);
}

void shm_debug_check_unlock(shm_table_t *t)
{
    int a = 0;
    const char *bad = t->whole_at_lock ? first_violation(t, &a) : NULL;
    if (bad)                 /* said at each unlock that breaks one; never aborts the host */
        util_error("debug build: table %s: an invariant of the %s held at the lock and does "
                   "not at the unlock (this process broke it while holding the lock): %s",
                   t->name, area_names[a], bad);
}
#endif

/* ---- devices ------------------------------------------------------------ */

int shm_device_index_locked(shm_table_t *t, const uint8_t uuid[16])
{
    if (!t || t->read_only || !uuid)
        return -1;
    shm_header_t *h = &t->map->hdr;
    uint32_t n = h->devices;
    if (n > SHM_MAX_DEVICES)             /* a peer scribbled: keep what is sane */
        n = h->devices = SHM_MAX_DEVICES;
    for (uint32_t d = 0; d < n; d++)
        if (memcmp(h->dev_uuid[d], uuid, 16) == 0)
            return (int)d;
    if (n == SHM_MAX_DEVICES)
        return -1;
    memcpy(h->dev_uuid[n], uuid, 16);
    util_store_release(&h->devices, n + 1);
    return (int)n;
}

int shm_device_uuid(shm_table_t *t, int device, uint8_t out[16])
{
    if (!t || device < 0 || device >= SHM_MAX_DEVICES)
        return -1;
    uint32_t n = util_load_acquire(&t->map->hdr.devices);
    if ((uint32_t)device >= n || n > SHM_MAX_DEVICES)
        return -1;
    memcpy(out, t->map->hdr.dev_uuid[device], 16);
    return 0;
}

/* ---- areas -------------------------------------------------------------- */

void *shm_slot_area(shm_table_t *t, int slot, shm_area_t area)
{
    if (!t || slot < 0 || slot >= SHM_MAX_SLOTS || (unsigned)area >= SHM_AREAS)
        return NULL;
    return t->map->slots[slot].area[area];
}

void *shm_device_area(shm_table_t *t, int device, shm_area_t area)
{
    if (!t || device < 0 || device >= SHM_MAX_DEVICES || (unsigned)area >= SHM_AREAS)
        return NULL;
    return t->map->devices[device].area[area];
}

void *shm_global_area(shm_table_t *t, shm_area_t area)
{
    if (!t || (unsigned)area >= SHM_AREAS)
        return NULL;
    return t->map->global[area];
}

/* ---- futexes -----------------------------------------------------------
 * Shared (not FUTEX_PRIVATE) futexes on words of the mapping: the kernel
 * keys them by the object's inode and offset, so processes that map the table
 * at different addresses wait on the same word. */

int shm_futex_wait(uint32_t *word, uint32_t expected, uint64_t timeout_ns)
{
    struct timespec ts, *tsp = NULL;
    if (timeout_ns) {
        ts.tv_sec = (time_t)(timeout_ns / 1000000000ull);
        ts.tv_nsec = (long)(timeout_ns % 1000000000ull);
        tsp = &ts;
    }
    long rc = syscall(SYS_futex, word, FUTEX_WAIT, expected, tsp, NULL, 0);
    if (rc == 0 || errno == EAGAIN)
        return 0;
    return errno;
}

int shm_futex_wake(uint32_t *word, int count)
{
    long rc = syscall(SYS_futex, word, FUTEX_WAKE, count, NULL, NULL, 0);
    return rc < 0 ? -errno : (int)rc;
}
