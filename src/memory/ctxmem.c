/*
 * ctxmem.c - memory nobody allocated: what contexts take on a device, and
 * what the driver shows taken that no process accounts for (other users'
 * processes, processes without Salus, modules, heaps, local memory), read
 * from the driver's free memory so that grants never pass what the driver
 * can give.
 *
 * Divided into: reading the driver; the unexplained use; a context's
 * charge; the foreign use; the driver's refusals.
 *
 * Locking.  The driver is read with no lock held; what it said is applied
 * under the table's lock, against the live slots' sums at that moment.
 * The charge of a slot's contexts (mem_dev_t.ctx_kib[slot]) and the device's
 * foreign use (mem_dev_t.foreign) are written under the table's lock only.
 *
 * Measuring.  There is no driver call for the free memory of a device
 * without a context on it, so a context cannot be measured by the free
 * memory before and after it: it is measured after, as the use the driver
 * shows beyond every live slot's allocations and contexts and the foreign
 * use already known, with the device's serial lock (ipc.h) held from
 * before the driver made it (memory.c), so that no peer's context or
 * module is made meanwhile, that is
 *     unexplained = (capacity - driver free) - sum(used + ctx)
 *     charge      = unexplained - foreign, where that is within a factor of
 *                   two of the last context measured there (else that last
 *                   one; an eighth of the device at most before any)
 * with what passes the bound left as foreign.  The error of one charge is
 * bounded by what changed on the device between the last reading and this
 * one that no slot shows yet: a peer's allocation between its reservation
 * and its driver call (lowers it, at most that allocation), a process
 * without Salus that grew (raises it), and, only when the serial lock was
 * not had within 2 s, a peer's context or module made at the same time
 * (raises it by that much, and the peer's own measure is then lower by as
 * much: the sum stays right).  A grant can pass what the driver
 * gives only by what peers allocate between a reading and their driver
 * call; a driver's CUDA_ERROR_OUT_OF_MEMORY makes the next grant read the
 * driver again.
 */
#include "memory/mem_layout.h"
#include "util/util.h"

#include <string.h>
#include <time.h>

/* ---- reading the driver ---------------------------------------------------- */

int mem_ctx_current(int ordinal)
{
    CUdevice cur = -1;
    return mem_p.drv.ctx_get_device(&cur) == CUDA_SUCCESS && cur == ordinal ? 0 : -1;
}

/* The driver's free memory of CUDA ordinal `ordinal`, through the calling
 * thread's current context when it is on that device. */
static int read_free_current(int ordinal, uint64_t *out)
{
    const drv_t *drv = &mem_p.drv;
    size_t f = 0, t = 0;
    if (!drv->mem_get_info || mem_ctx_current(ordinal) != 0 ||
        drv->mem_get_info(&f, &t) != CUDA_SUCCESS || t == 0 || f > t)
        return -1;
    *out = f;
    return 0;
}

/* The same through the device's primary context, retained and made current
 * for the reading only (the program holds its own retain meanwhile). */
static int read_free_primary(int ordinal, uint64_t *out)
{
    const drv_t *drv = &mem_p.drv;
    CUcontext c = NULL, popped;
    size_t f = 0, t = 0;
    int rc = -1;
    if (!drv->mem_get_info || !drv->primary_ctx_retain || !drv->primary_ctx_release ||
        !drv->ctx_push_current || !drv->ctx_pop_current ||
        drv->primary_ctx_retain(&c, (CUdevice)ordinal) != CUDA_SUCCESS)
        return -1;
    if (drv->ctx_push_current(c) != CUDA_SUCCESS)
        goto out_release;
    if (drv->mem_get_info(&f, &t) == CUDA_SUCCESS && t != 0 && f <= t) {
        *out = f;
        rc = 0;
    }
    drv->ctx_pop_current(&popped);
out_release:
    drv->primary_ctx_release((CUdevice)ordinal);
    return rc;
}

/* ---- the unexplained use --------------------------------------------------- */

/* What the driver shows taken on ld's device beyond every live slot's
 * allocations and contexts.  Under the lock. */
static uint64_t unexplained_locked(mem_local_dev_t *ld, uint64_t free_bytes)
{
    mem_sums_t s;
    mem_sums(mem_p.t, ld->d, -1, &s);
    uint64_t cap = util_load_relaxed(&ld->dev->capacity);
    uint64_t taken = cap > free_bytes ? cap - free_bytes : 0, known = s.used + s.ctx;
    return taken > known ? taken - known : 0;
}

/* ---- a context's charge ---------------------------------------------------- */

/* The most this process's contexts and modules took at once, over its
 * devices, for the report (the charge itself goes with the contexts). */
uint64_t mem_ctx_peak(void)
{
    return util_load_relaxed(&mem_p.ctx_peak);
}

static void note_peak_locked(void)
{
    uint64_t sum = 0;
    for (int d = 0; d < SHM_MAX_DEVICES; d++)
        if (mem_p.by_index[d])
            sum += mem_ctx_of(mem_p.by_index[d]->dev, mem_p.slot);
    if (sum > mem_ctx_peak())
        util_store_relaxed(&mem_p.ctx_peak, sum);
}

/* What admission charged for a context before it was made (admit.c) goes:
 * the measure, or the driver's refusal, replaces it.  Under the lock. */
static void drop_precharge_locked(mem_local_dev_t *ld)
{
    uint64_t kib = mem_ctx_of(ld->dev, mem_p.slot) >> 10, pre = (ld->ctx_precharge + 1023) / 1024;
    if (!ld->ctx_precharge)
        return;
    util_store_relaxed(&ld->dev->ctx_kib[mem_p.slot], (uint32_t)(kib > pre ? kib - pre : 0));
    ld->ctx_precharge = 0;
}

void mem_ctx_precharge_drop(mem_local_dev_t *ld)
{
    if (!ld->ctx_precharge || !mem_p.area || mem_p.slot < 0 || mem_p.slot >= SHM_MAX_SLOTS ||
        mem_lock() != 0)
        return;
    drop_precharge_locked(ld);
    mem_publish_locked(mem_p.t, ld->d);
    shm_unlock(mem_p.t);
    mem_wake(ld->dev);
}

/* What a context or module is charged from `raw`, what the driver shows
 * taken beyond the table and the foreign use known so far (`u` in all),
 * and whether the measure may stand for the next context (*plausible).
 * Contexts on one device are alike: a measure off by more than a factor of
 * two from the last one there is not trusted, and the context is charged
 * as the last one, the rest of what the driver shows being foreign.  Too
 * large: memory the table no longer counts and the driver has not freed
 * yet (a process that has just ended gives its slot back before it is torn
 * down), which, charged to the context, counted 3.5 GiB against a job's
 * limit in the training bench and became the room admission keeps for
 * every newcomer; too small: foreign use read when such memory was there,
 * gone since, which made contexts look free and let admission in more
 * than the driver could make.  A module is charged what it shows, at most
 * twice the last context (an eighth of the device before any).  The
 * device's sums are the same either way.  Under the lock. */
static uint64_t charge_of_locked(mem_local_dev_t *ld, uint64_t raw, uint64_t u, int what,
                                 int *plausible)
{
    uint64_t eighth = util_load_relaxed(&ld->dev->capacity) / 8;
    uint64_t last = util_load_relaxed(&ld->dev->ctx_last);
    if (!last || last > eighth) {
        *plausible = raw <= eighth;
        return mem_umin(raw, eighth);
    }
    *plausible = raw >= last / 2 && raw <= 2 * last;
    if (what == MEM_CHARGE_MODULE)
        return mem_umin(raw, 2 * last);
    return *plausible ? raw : mem_umin(last, u);
}

void mem_ctx_charge(mem_local_dev_t *ld, int ordinal, int what)
{
    static const char *const whats[] = { "a context", "a context", "a module" };
    uint64_t f;
    if (!mem_p.area || mem_p.slot < 0 || mem_p.slot >= SHM_MAX_SLOTS ||
        (what == MEM_CHARGE_PRIMARY ? read_free_primary(ordinal, &f)
                                    : read_free_current(ordinal, &f)) != 0 ||
        mem_lock() != 0)
        return;
    mem_fix_log(mem_p.t, ld->d);
    drop_precharge_locked(ld);        /* this measure replaces admission's estimate */
    uint64_t u = unexplained_locked(ld, f), foreign = util_load_relaxed(&ld->dev->foreign);
    int plausible;
    uint64_t charge = charge_of_locked(ld, u > foreign ? u - foreign : 0, u, what, &plausible);
    uint64_t kib = (mem_ctx_of(ld->dev, mem_p.slot) >> 10) + (charge + 1023) / 1024;
    util_store_relaxed(&ld->dev->ctx_kib[mem_p.slot], (uint32_t)mem_umin(kib, UINT32_MAX));
    util_store_relaxed(&ld->dev->foreign, u - charge);
    if (what != MEM_CHARGE_MODULE && charge && plausible)
        util_store_relaxed(&ld->dev->ctx_last, charge);
    note_peak_locked();
    mem_publish_locked(mem_p.t, ld->d);
    shm_unlock(mem_p.t);
    UTIL_LOG(what == MEM_CHARGE_MODULE ? UTIL_LOG_DEBUG : UTIL_LOG_INFO,
             "memory: device %d: %s of this process takes %s (the driver's free memory, "
             "less what the processes sharing it account for)", ordinal,
             whats[what % 3], util_size(charge).s);
}

void mem_ctx_uncharge(mem_local_dev_t *ld)
{
    if (!mem_p.area || mem_p.slot < 0 || mem_p.slot >= SHM_MAX_SLOTS ||
        !mem_ctx_of(ld->dev, mem_p.slot) || mem_lock() != 0)
        return;
    util_store_relaxed(&ld->dev->ctx_kib[mem_p.slot], 0);
    ld->ctx_precharge = 0;
    mem_publish_locked(mem_p.t, ld->d);
    shm_unlock(mem_p.t);
    mem_wake(ld->dev);
}

/* ---- the foreign use -------------------------------------------------------- */

int mem_drv_refresh(mem_local_dev_t *ld, int ordinal)
{
    uint64_t f;
    /* Not while a peer makes a context: it would show here as foreign, and
     * its own measure would then find nothing to charge. */
    shm_device_serial_wait(mem_p.t, ld->d, 2000);
    if (read_free_current(ordinal, &f) != 0 || mem_lock() != 0)
        return -1;
    mem_fix_log(mem_p.t, ld->d);
    util_store_relaxed(&ld->dev->foreign, unexplained_locked(ld, f));
    mem_publish_locked(mem_p.t, ld->d);
    shm_unlock(mem_p.t);
    return 0;
}

/* ---- the driver's refusals -------------------------------------------------
 * A process that exits gives its slot back in a destructor, and the driver
 * frees its memory only as the process is torn down, after: between the
 * two the table shows room the driver does not have, and an allocation
 * admitted then is refused.  A short wait ends that.  Like a shortage the
 * table sees, this one waits up to SALUS_MEM_WAIT_MS (memory a process
 * without Salus holds may not come back: its refusal stands then).  Each
 * look reads the driver again (the foreign use), so that the table learns
 * what it could not see. */
#define MEM_DRV_POLL_NS  (10ull * 1000 * 1000)

int mem_drv_retry(mem_local_dev_t *ld, int ordinal, uint64_t bytes, uint64_t *refused_at)
{
    static int said_retry, said_stands;
    uint64_t now = util_now_ns();
    uint64_t grace = mem_p.cfg.wait_ns;
    if (!*refused_at)
        *refused_at = now;
    if (now - *refused_at >= grace) {
        util_log_once(&said_stands, UTIL_LOG_WARN, "memory: the driver refused %s on %s "
                      "for %llu ms although the table had room: memory outside the table "
                      "(a process without libsalus) holds it; the program gets "
                      "CUDA_ERROR_OUT_OF_MEMORY", util_size(bytes).s, ld->name,
                      (unsigned long long)((now - *refused_at) / 1000000));
        return 0;
    }
    util_log_once(&said_retry, UTIL_LOG_INFO, "memory: the driver refused %s on %s that "
                  "the table has room for (memory a process that has just ended gives "
                  "back as it is torn down); calling it again for up to %llu ms "
                  "(SALUS_MEM_WAIT_MS)",
                  util_size(bytes).s, ld->name, (unsigned long long)(grace / 1000000));
    struct timespec ts = { 0, (long)MEM_DRV_POLL_NS };
    nanosleep(&ts, NULL);
    mem_drv_refresh(ld, ordinal);
    return 1;
}
