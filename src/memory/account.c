/*
 * account.c - the shared side of memory accounting: grants of device budget
 * to processes, their return, the reclaim of peers' spare, waits for memory,
 * and what happens when a process dies.
 *
 * Divided into: the lock; reclaiming spare; grants (take, give, shrink);
 * waits and wakes; the process's room (the device's sums over its slots and
 * the reclaim log's repair are sums.c's; admission, before a reservation
 * or a context, is admit.c's; the reap and repair hooks and a monitor's new
 * limit are slot_hooks.c's).
 *
 * Locking.  Every change of a grant (sd.granted), of a reservation, of a
 * slot's wait and of a device's identity or budget is made under the table's
 * lock, by the owner of the slot, except two: a reclaimer (a process that
 * was refused) takes another slot's spare, and a reaper zeroes a dead slot.
 * The spare word sd.avail is also changed without the lock by its owner's
 * threads, always with one atomic read-modify-write, so no interleaving of
 * owners and reclaimers loses or invents a byte.  Device-wide sums are
 * recomputed from the live slots under the lock (see mem_layout.h).
 *
 * What grants and admissions may commit on a device is its budget less
 * every slot's contexts and the foreign use the driver last showed
 * (ctxmem.c measures both); a grant that comes within the headroom of that
 * asks for a fresh reading first, and so does every grant on a GPU another
 * table shares (ipc's claim: the other's grants show only in the driver).
 *
 * Death.  A process killed anywhere gives back exactly its slot: its grant
 * and reservation stop counting once the slot is freed (by whoever reaps
 * it), whatever it was doing to its own counters.  A reclaimer killed between
 * its two writes to another slot (avail, then granted) leaves the reclaim log
 * behind; the next process that takes the lock finishes the write.
 *
 * Waking.  A process waiting for memory counts itself in dev.waiters (under
 * the lock, seq_cst), reads wake_seq, tries once more (reclaiming peers'
 * spare), and sleeps on the value it read, with a timeout.  A free adds to
 * its spare (a seq_cst read-modify-write) and then reads dev.waiters
 * (seq_cst): either the free comes first in that order, and the waiter's try
 * sees the freed bytes; or the free sees the waiter and bumps wake_seq, and
 * the sleep returns at once if the bump followed the waiter's read.  The
 * timeout (20 ms) also makes the waiter reap dead peers, so memory of a
 * killed process reaches it within 100 ms.
 *
 * Stuck.  An allocator's wait runs under its own lock (vmem's), which
 * paging needs: asked to (MEM_CHARGE_BAIL), it gives up once paging's
 * stuck rule names this process (mem_p.page_stuck, src/page), and page's
 * page_self_wait, called by page with that lock released, pages it out and
 * waits for room to come back in.
 */
#include "memory/mem_layout.h"
#include "util/util.h"

#include <errno.h>
#include <limits.h>
#include <string.h>


/* What this process's contexts take on table device d (ctxmem.c): part of
 * what its limit bounds, outside its grant. */
uint64_t mem_own_ctx(int d)
{
    mem_local_dev_t *ld = mem_p.by_index[d];
    return ld && ld->dev ? mem_ctx_of(ld->dev, mem_p.slot) : 0;
}

/* ---- the lock --------------------------------------------------------------
 * shm_lock waits a few seconds at most for a holder that seems hung.  Then
 * the module is suspended rather than off: allocations that need the lock
 * are counted by this process alone, against its own limit, as debt (the
 * device's budget cannot be checked); every MEM_RETRY_* the lock is tried
 * briefly, and once it is taken the debt is charged to the grant, so that
 * the table is exact again.  Frees meanwhile pay the debt first. */

#define MEM_RETRY_MIN_NS  (100ull * 1000000)
#define MEM_RETRY_MAX_NS  (5000ull * 1000000)
#define MEM_RETRY_WAIT_NS (2ull * 1000000)

uint64_t mem_pay_debt(mem_local_dev_t *ld, uint64_t bytes)
{
    uint64_t d = util_load_relaxed(&ld->debt), pay;
    do {
        pay = mem_umin(d, bytes);
    } while (pay && !__atomic_compare_exchange_n(&ld->debt, &d, d - pay, 1, __ATOMIC_RELAXED,
                                                 __ATOMIC_RELAXED));
    return bytes - pay;
}

/* Under the lock: the debt of every device into its grant (the spare pays
 * first, so the grant never passes what is used plus the spare left). */
static void charge_debts_locked(void)
{
    for (int d = 0; d < SHM_MAX_DEVICES; d++) {
        mem_local_dev_t *ld = mem_p.by_index[d];
        if (!ld || !util_load_relaxed(&ld->debt))
            continue;
        mem_sdev_t *sd = ld->sd;
        uint64_t debt = util_xchg_relaxed(&ld->debt, 0);
        uint64_t w = util_load_seq(&sd->avail), pay;
        do {
            pay = mem_umin(MEM_SPARE(w), debt);
        } while (pay && !__atomic_compare_exchange_n(&sd->avail, &w, w - pay, 1,
                                                     __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
        mem_set_granted(ld, util_load_relaxed(&sd->granted) + (debt - pay));
        mem_publish_locked(mem_p.t, d);
        util_info("memory: %s: %s allocated while the table's lock was out of reach "
                  "is charged", ld->name, util_size(debt).s);
    }
}

static int suspend(void)
{
    static int said;
    uint64_t now = util_now_ns();
    util_store_relaxed(&mem_p.backoff_ns, MEM_RETRY_MIN_NS);
    util_store_relaxed(&mem_p.retry_ns, now + MEM_RETRY_MIN_NS);
    util_store_release(&mem_p.suspended, 1);
    util_log_once(&said, UTIL_LOG_WARN, "memory: a peer has held the table's lock for "
                  "seconds; this process counts its allocations alone meanwhile (its limit "
                  "holds, the device's budget cannot be checked) and charges them when the "
                  "lock is usable again");
    return -1;
}

/* A suspended module: one short try when its time has come. */
static int retry(void)
{
    uint64_t now = util_now_ns();
    if (now < util_load_relaxed(&mem_p.retry_ns))
        return -1;
    if (shm_lock_retry(mem_p.t, MEM_RETRY_WAIT_NS) != 0) {
        uint64_t b = util_load_relaxed(&mem_p.backoff_ns) * 2;
        b = b > MEM_RETRY_MAX_NS ? MEM_RETRY_MAX_NS : b;
        util_store_relaxed(&mem_p.backoff_ns, b);
        util_store_relaxed(&mem_p.retry_ns, util_now_ns() + b);
        return -1;
    }
    if (util_xchg_acq_rel(&mem_p.suspended, 0))
        util_warn("memory: the table's lock is usable again; allocations are shared and "
                  "limited as before");
    charge_debts_locked();
    mem_own_check_locked();
    return 0;
}

int mem_lock(void)
{
    static int said;
    if (util_load_acquire(&mem_p.suspended))
        return retry();
    int rc = shm_lock(mem_p.t);
    if (rc == 0) {
        mem_own_check_locked();       /* its own words, before anything reads them */
        return 0;
    }
    if (rc == -ETIMEDOUT)
        return suspend();
    util_store_release(&mem_p.mode, MEM_OPEN);
    util_log_once(&said, UTIL_LOG_ERROR, "memory: the table's lock cannot be taken; "
                  "allocations pass through without limits from now on");
    return -1;
}

void mem_own_check_soon(void)
{
    if (mem_own_words_suspect() && mem_lock() == 0)   /* mem_lock checks and repairs */
        shm_unlock(mem_p.t);
}

void mem_resume_try(void)
{
    if (util_load_acquire(&mem_p.suspended) && retry() == 0)
        shm_unlock(mem_p.t);
}

/* While suspended: take `bytes` as debt if the process stays within its own
 * limit.  MEM_TAKEN, or MEM_TAKE_REFUSED. */
static mem_take_t take_as_debt(mem_local_dev_t *ld, uint64_t bytes)
{
    mem_sdev_t *sd = ld->sd;
    uint64_t d = util_load_relaxed(&ld->debt);
    for (;;) {
        /* its own count: the table's words are not checked without the lock */
        uint64_t used = util_load_relaxed(&ld->charged);
        uint64_t limit = util_load_relaxed(&sd->limit);
        if (limit == 0 || limit > util_load_relaxed(&ld->dev->budget))
            limit = ld->lim_seen;                 /* a word no tool writes (owncheck.c) */
        if (used + mem_own_ctx(ld->d) + bytes > mem_umax(limit, util_load_relaxed(&ld->lim_hold)))
            return MEM_TAKE_REFUSED;
        if (__atomic_compare_exchange_n(&ld->debt, &d, d + bytes, 1, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
            mem_took(ld, bytes);
            return MEM_TAKEN;
        }
    }
}

/* ---- reclaiming spare ----------------------------------------------------
 * Take from slot j's spare on d what lies above its reservation, for a
 * refused peer.  Ordering: the log is complete (valid written last) before
 * the CAS; granted follows the CAS; the log is cleared last.  A death at any
 * point leaves either no CAS (the log's tag is not in avail: nothing to do)
 * or a CAS without its granted write (mem_fix_log subtracts take). */
uint64_t mem_reclaim_one(shm_table_t *t, mem_dev_t *dev, int d, int j)
{
    mem_sdev_t *sd = &mem_area_of(t, j)->dev[d];
    uint64_t w = util_load_seq(&sd->avail);
    for (;;) {
        uint64_t g = mem_clampb(util_load_relaxed(&sd->granted));
        uint64_t r = util_load_relaxed(&sd->reserved);
        uint64_t take = mem_umin(MEM_SPARE(w), g > r ? g - r : 0);
        if (take == 0)
            return 0;
        uint32_t tag = (MEM_TAG(w) + 1) & 0xffff;
        dev->log.slot = j;
        dev->log.slot_gen = shm_slot_gen(t, j);
        dev->log.tag = tag;
        dev->log.take = take;
        util_store_seq(&dev->log.valid, 1);
        uint64_t nw = ((uint64_t)tag << MEM_SPARE_BITS) | (MEM_SPARE(w) - take);
        if (__atomic_compare_exchange_n(&sd->avail, &w, nw, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST)) {
            util_store_relaxed(&sd->granted, g - take);
            util_store_relaxed(&sd->granted_tag, tag);
            util_store_seq(&dev->log.valid, 0);
            return take;
        }
        util_store_seq(&dev->log.valid, 0);   /* w reloaded: retry */
    }
}

uint64_t mem_reclaim_all_locked(shm_table_t *t, mem_dev_t *dev, int d, int self)
{
    uint64_t taken = 0;
    for (int j = 0; j < SHM_MAX_SLOTS; j++)
        if (j != self && shm_slot_gen(t, j) != 0)
            taken += mem_reclaim_one(t, dev, d, j);
    return taken;
}

/* ---- grants --------------------------------------------------------------
 * The process's own sd changes here under the lock; its other threads keep
 * taking and giving spare with atomics meanwhile. */

/* Take the whole spare (keeping the tag); returns it. */
static uint64_t take_all(mem_sdev_t *sd)
{
    uint64_t w = util_load_seq(&sd->avail);
    while (!__atomic_compare_exchange_n(&sd->avail, &w, w & ~MEM_SPARE_MASK, 1,
                                        __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;
    return MEM_SPARE(w);
}

static void add_spare(mem_sdev_t *sd, uint64_t bytes)
{
    if (bytes)
        util_add_seq(&sd->avail, bytes);
}

/* What grants may commit on the device: its budget less every context's
 * measured memory (own_ctx: the caller's) and the foreign use the driver
 * last showed, so that nothing Salus grants is refused by the driver for
 * memory Salus could have known of, and the headroom stays free for the
 * contexts of processes yet to come. */
uint64_t mem_effective_budget(const mem_dev_t *dev, const mem_sums_t *o, uint64_t own_ctx)
{
    uint64_t budget = util_load_relaxed(&dev->budget);
    uint64_t taken = o->ctx + own_ctx + mem_clampb(util_load_relaxed(&dev->foreign));
    return budget > taken ? budget - taken : 0;
}

/* Grow ld's grant by `need` bytes at least, by a chunk more when that fits:
 * within its limit, and within the device's effective budget once what the
 * others commit is counted, after reclaiming their spare and reaping the
 * dead if need be.  A grant that would come within the headroom of the
 * capacity, or on a GPU another table shares, asks for a driver reading
 * first (MEM_ASK) unless `fresh`.
 * Returns MEM_FIT with *grant set, or why not. */
static mem_fit_t grant_locked(mem_local_dev_t *ld, uint64_t need, uint64_t *grant, int fresh)
{
    shm_table_t *t = mem_p.t;
    mem_sdev_t *sd = ld->sd;
    mem_dev_t *dev = ld->dev;
    uint64_t g0 = mem_clampb(util_load_relaxed(&sd->granted)), r = util_load_relaxed(&sd->reserved);
    uint64_t ctx = mem_own_ctx(ld->d), limit = mem_live_limit_locked(ld, ctx, mem_p.cfg.swap);
    limit = limit > ctx ? limit - ctx : 0;        /* its contexts count against it */
    if (g0 > limit || need > limit - g0)
        return MEM_OVER_LIMIT;
    if (g0 + need <= r) {
        /* Within its reservation: admission set it aside, and every peer's
         * grant counts it as committed, so it is this process's whatever
         * the budget reads now (contexts measured since, foreign use). */
        mem_set_granted(ld, g0 + need);
        *grant = need;
        return MEM_FIT;
    }
    uint64_t extra = need < ld->chunk ? mem_umin(ld->chunk, limit - g0 - need) : 0;
    int reclaimed = 0;
    for (int attempt = 0; attempt < 4; attempt++) {
        mem_sums_t o;
        mem_sums(t, ld->d, mem_p.slot, &o);
        uint64_t budget = mem_effective_budget(dev, &o, mem_own_ctx(ld->d));
        /* Another table hands out this GPU too (ipc's claim): what it
         * granted shows only in the driver, so every grant reads it. */
        uint64_t headroom = util_load_relaxed(&dev->headroom);
        if (!fresh && (o.committed_run + mem_umax(g0 + need, r) + headroom > budget ||
                       shm_device_shared(t, ld->d)))
            return MEM_ASK;
        uint64_t room = budget > o.committed_run ? budget - o.committed_run : 0;
        if (mem_umax(g0 + need, r) <= room) {
            uint64_t x = need + mem_umin(extra, room - mem_umax(g0 + need, r));
            mem_set_granted(ld, g0 + x);
            *grant = x;
            return MEM_FIT;
        }
        if (!reclaimed && budget > o.held_run && mem_umax(g0 + need, r) <= budget - o.held_run) {
            mem_reclaim_all_locked(t, dev, ld->d, mem_p.slot);      /* enough spare out there */
            reclaimed = 1;
            continue;
        }
        if (shm_reap_dead(t, 1) <= 0)
            break;                                          /* nobody dead: full */
    }
    return MEM_OVER_DEVICE;
}

/* Take `bytes` for an allocation, under the lock. */
static mem_fit_t take_locked(mem_local_dev_t *ld, uint64_t bytes, int fresh)
{
    mem_sdev_t *sd = ld->sd;
    uint64_t spare, grant;
    if (mem_take_fast(sd, bytes, &spare)) {
        mem_took(ld, bytes);
        return MEM_FIT;
    }
    uint64_t a = take_all(sd);
    if (a >= bytes) {                       /* freed meanwhile */
        add_spare(sd, a - bytes);
        mem_took(ld, bytes);
        return MEM_FIT;
    }
    mem_fit_t fit = grant_locked(ld, bytes - a, &grant, fresh);
    if (fit != MEM_FIT) {
        add_spare(sd, a);
        return fit;
    }
    add_spare(sd, grant - (bytes - a));
    mem_took(ld, bytes);
    return MEM_FIT;
}

/* ---- giving back --------------------------------------------------------- */

void mem_wake_admit(mem_dev_t *dev)
{
    util_add_seq(&dev->admit_seq, 1);
    shm_futex_wake(&dev->admit_seq, INT_MAX);
}

/* Return the spare beyond a chunk to the device, and any spare above what
 * it may hold (livelim.c), never below the reservation, which is the job's
 * anyway. */
void mem_shrink(mem_local_dev_t *ld)
{
    shm_table_t *t = mem_p.t;
    mem_sdev_t *sd = ld->sd;
    uint64_t x;
    if (mem_lock() != 0)
        return;
    mem_fix_log(t, ld->d);
    uint64_t w = util_load_seq(&sd->avail);
    uint64_t g = util_load_relaxed(&sd->granted), r = util_load_relaxed(&sd->reserved);
    uint64_t ctx = mem_own_ctx(ld->d), may = mem_live_limit_locked(ld, ctx, mem_p.cfg.swap);
    uint64_t over = g + ctx > may ? g + ctx - may : 0;
    do {
        uint64_t spare = MEM_SPARE(w);
        x = mem_umin(mem_umin(mem_umax(spare > ld->chunk ? spare - ld->chunk : 0, over), spare),
                     g > r ? g - r : 0);
    } while (x && !__atomic_compare_exchange_n(&sd->avail, &w, w - x, 1, __ATOMIC_SEQ_CST,
                                               __ATOMIC_SEQ_CST));
    if (x) {
        mem_set_granted(ld, g - x);
        mem_publish_locked(t, ld->d);
    }
    shm_unlock(t);
}

void mem_give_slow(mem_local_dev_t *ld, uint64_t spare)
{
    if (spare > ld->shrink_at)
        mem_shrink(ld);
    if (util_load_seq(&ld->dev->waiters))
        mem_wake(ld->dev);
}

/* A pool's slack back to the grant: exchanged to 0, so that each byte goes
 * back once whoever drains it (a destroy, a free that saw it destroyed, a
 * read of what the driver released). */
void mem_pool_drain(mem_pool_t *p)
{
    uint64_t x = util_xchg_seq(&p->slack, 0);
    int ord = p->ord;
    if (!x)
        return;
    util_sub_seq(&p->charged, x);
    mem_local_dev_t *ld = ord >= 0 && ord < MEM_MAX_ORDINALS ? &mem_p.dev[ord] : NULL;
    if (ld && util_load_acquire(&ld->sd))
        mem_give(ld, x);
}

/* ---- waits ----------------------------------------------------------------
 * The slot's state shows waiting-mem while any thread of the process waits;
 * the first to wait saves the state, the last to leave restores it.  Called
 * under the table lock, which guards `waiting`. */
static int waiting;
static shm_state_t state_before;

void mem_wait_enter(mem_slot_t *a, int d, uint32_t kind, uint32_t ticket, uint64_t bytes)
{
    shm_ident_t id;
    if (waiting++ == 0) {
        state_before = SHM_IDLE;
        if (shm_slot_ident(mem_p.t, mem_p.slot, &id) == 0 && id.state != SHM_WAIT_MEM)
            state_before = id.state;
        shm_set_state(mem_p.t, mem_p.slot, SHM_WAIT_MEM);
    }
    util_store_relaxed(&a->wait_kind, kind);
    util_store_relaxed(&a->wait_ticket, ticket);
    util_store_relaxed(&a->wait_bytes, bytes);
    util_store_seq(&a->wait_dev, (uint32_t)d + 1);
    mem_publish_locked(mem_p.t, d);
}

void mem_wait_leave(mem_slot_t *a, int d, uint64_t since, int locked)
{
    util_store_seq(&a->wait_dev, 0);
    util_store_relaxed(&a->wait_kind, MEM_WAIT_NONE);
    util_add_relaxed(&a->waited_ns, util_now_ns() - since);
    if (locked)
        mem_publish_locked(mem_p.t, d);
    if (--waiting == 0)
        shm_set_state(mem_p.t, mem_p.slot, state_before);
}

/* With paging on, the scheduler's hook `fn` for table device d's CUDA
 * ordinal.  Outside the lock. */
static void gpu_hook(void (*fn)(int), int d)
{
    mem_local_dev_t *ld = d >= 0 && d < SHM_MAX_DEVICES ?
                          util_load_acquire(&mem_p.by_index[d]) : NULL;
    if (fn && ld && util_load_acquire(&mem_p.page_ask))
        fn((int)(ld - mem_p.dev));
}

/* What this module's waits ask of the layer above (memory.h). */
void mem_set_paging(const mem_paging_t *p)
{
    util_store_release(&mem_p.sched_enroll, p ? p->enroll : NULL);
    util_store_release(&mem_p.admit_order, p ? p->admit_order : NULL);
    util_store_release(&mem_p.gpu_give_up, p ? p->give_up : NULL);
    util_store_release(&mem_p.gpu_wait, p ? p->queue : NULL);
    util_store_release(&mem_p.page_stuck, p ? p->stuck : NULL);
    util_store_release(&mem_p.page_movable, p ? p->movable : NULL);
    util_store_release(&mem_p.page_ask, p ? p->ask : NULL);
}

/* With paging on: queue for table device d's GPU (the scheduler's, through
 * mem_paging_t's queue), so that the holder yields to this process by the
 * policy and peers waiting at the gate can be asked to page out for it.  Outside
 * the lock. */
void mem_queue_for_gpu(int d)
{
    gpu_hook(util_load_acquire(&mem_p.gpu_wait), d);
}

/* Paging could free what `bytes` lacks on ld's device (peers that may be
 * paged hold it): worth waiting for, whatever SALUS_MEM_WAIT_MS says;
 * `now`: by peers that may be asked now (worth holding the GPU for: one
 * within its residency cannot be, and the GPU would idle until it ends).
 * Under the lock. */
int mem_pageable_locked(mem_local_dev_t *ld, uint64_t bytes, int *now)
{
    uint64_t (*movable)(int, uint64_t *) = util_load_acquire(&mem_p.page_movable);
    if (now)
        *now = 0;
    if (!movable || !util_load_acquire(&mem_p.page_ask))
        return 0;
    uint64_t room = mem_room_locked(ld), soon, asked_now;
    if (bytes <= room)
        return 0;
    soon = movable(ld->d, &asked_now);
    if (now)
        *now = asked_now >= bytes - room;
    return soon >= bytes - room;
}

int mem_gpu_choice(int page_now, int *gave_up)
{
    if (page_now) {
        *gave_up = 0;
        return 1;
    }
    return (*gave_up)++ ? 0 : -1;
}

/* The other half (mem_paging_t's give_up): paging cannot make this wait's
 * room now, so the process leaves the GPU to the jobs that hold the memory.
 * Outside the lock. */
void mem_give_up_gpu(int d)
{
    gpu_hook(util_load_acquire(&mem_p.gpu_give_up), d);
}

/* Sleep until memory is returned on dev (or a slice passes), with the lock
 * released; with paging on, queued for the GPU (queue 1) or leaving it
 * (queue -1: paging cannot make the room); 0 with the lock held again, -1
 * if it cannot be taken again. */
int mem_sleep_unlocked(mem_dev_t *dev, uint32_t *word, uint32_t seq, uint64_t max_ns, int d,
                       int queue)
{
    shm_unlock(mem_p.t);
    if (queue > 0)
        mem_queue_for_gpu(d);
    else if (queue < 0)
        mem_give_up_gpu(d);
    shm_futex_wait(word, seq,
                   word == &dev->wake_seq ? mem_umin(max_ns, MEM_WAIT_SLICE_NS) : max_ns);
    if (mem_lock() != 0)
        return -1;
    mem_fix_log(mem_p.t, d);
    return 0;
}

/* With paging (src/page, mem_set_paging): ask the peers the policy runs last to page out
 * what `bytes` lacks on ld's device; what is asked (0: nobody can be).
 * Under the lock. */
uint64_t mem_ask_pages_locked(mem_local_dev_t *ld, uint64_t bytes)
{
    uint64_t (*ask)(int, uint64_t) = util_load_acquire(&mem_p.page_ask);
    if (!ask)
        return 0;
    uint64_t room = mem_room_locked(ld);
    return bytes > room ? ask(ld->d, bytes - room) : 0;
}

/* With paging on, a job that would fit on the device alone waits for an
 * allocation as long as a peer there can still end and give its memory
 * and its context back: one not waiting for memory itself.  Paging frees
 * memory, not contexts; OOM reaches the program only when the job cannot
 * fit alone, or when every peer waits for memory too (SALUS_MEM_WAIT_MS
 * then ends the wait, as it would a deadlock).  Under the lock. */
static int outwaits_locked(mem_local_dev_t *ld, uint64_t bytes)
{
    shm_table_t *t = mem_p.t;
    mem_sdev_t *sd = ld->sd;
    uint64_t need = mem_sdev_used(sd) + bytes;
    uint64_t taken = mem_own_ctx(ld->d) + mem_clampb(util_load_relaxed(&ld->dev->foreign));
    if (!mem_p.cfg.swap || need + taken > util_load_relaxed(&ld->dev->budget) ||
        need > mem_live_limit_locked(ld, mem_own_ctx(ld->d), mem_p.cfg.swap))
        return 0;
    for (int j = 0; j < SHM_MAX_SLOTS; j++) {
        shm_ident_t id;
        if (j != mem_p.slot && shm_slot_alive(t, j) && shm_slot_ident(t, j, &id) == 0 &&
            id.state != SHM_WAIT_MEM &&
            (util_load_relaxed(&mem_area_of(t, j)->dev[ld->d].flags) & MEM_SDEV_REGISTERED))
            return 1;
    }
    return 0;
}

/* Stuck now, for a wait that may give up so (MEM_CHARGE_BAIL).  Under the
 * lock. */
static int stuck_now_locked(mem_local_dev_t *ld, uint64_t bytes, unsigned flags)
{
    int (*stuck)(int, uint64_t) = util_load_acquire(&mem_p.page_stuck);
    return (flags & MEM_CHARGE_BAIL) && stuck && stuck(ld->d, bytes);
}

/* Stuck (paging's rule, mem_p.page_stuck) for MEM_STUCK_NS, with a
 * caller that can page itself out (MEM_CHARGE_BAIL): the wait gives up, so
 * that the caller, its locks released, pages out and waits for room for
 * everything (page.h's page_self_wait).  *since tracks the stretch.  Under the
 * lock; 1: stuck (waits on, or gives up when *give_up). */
static int stuck_locked(mem_local_dev_t *ld, uint64_t bytes, unsigned flags, uint64_t now,
                        uint64_t *since, int *give_up)
{
    if (!stuck_now_locked(ld, bytes, flags)) {
        *since = 0;
        return 0;
    }
    if (!*since)
        *since = now;
    *give_up = now - *since >= MEM_STUCK_NS;
    return 1;
}

/* Over the device's budget: wait for peers to give memory back (or die),
 * up to SALUS_MEM_WAIT_MS, and as long as peers are asked to page out (the
 * wait then ends when they have), or until stuck (stuck_locked: *stuck).
 * Lock held on entry; on return too, unless *lost. */
static mem_fit_t wait_locked(mem_local_dev_t *ld, uint64_t bytes, unsigned flags, int *lost,
                             int *gave_up_stuck)
{
    mem_slot_t *a = mem_p.area;
    uint64_t start = util_now_ns(), deadline = start + mem_p.cfg.wait_ns, since = 0;
    mem_fit_t fit;
    static int said;
    util_log_once(&said, UTIL_LOG_WARN, "memory: an allocation of %s on device %d waits for "
                  "the processes sharing the device to free memory (up to %llu ms, "
                  "SALUS_MEM_WAIT_MS, or as long as peers page out); salus-top shows it "
                  "waiting-mem", util_size(bytes).s, ld->d,
                  (unsigned long long)(mem_p.cfg.wait_ns / 1000000));
    mem_wait_enter(a, ld->d, MEM_WAIT_ALLOC, 0, bytes);
    int gave_up = 0, give_up = 0;
    for (;;) {
        uint32_t seq = util_load_seq(&ld->dev->wake_seq);
        fit = take_locked(ld, bytes, 1);
        uint64_t now = util_now_ns();
        int asked = fit == MEM_OVER_DEVICE && mem_ask_pages_locked(ld, bytes) != 0;
        int page_now = 0;
        int pageable = fit == MEM_OVER_DEVICE && mem_pageable_locked(ld, bytes, &page_now);
        int stuck = fit == MEM_OVER_DEVICE &&
                    stuck_locked(ld, bytes, flags, now, &since, &give_up);
        if (asked && deadline < now + MEM_PAGE_WAIT_NS)
            deadline = now + MEM_PAGE_WAIT_NS;      /* peers page out: wait for them */
        if ((pageable || stuck || (fit == MEM_OVER_DEVICE && outwaits_locked(ld, bytes))) &&
            deadline < now + 2 * MEM_WAIT_SLICE_NS)
            deadline = now + 2 * MEM_WAIT_SLICE_NS; /* they will, once they wait or end */
        if (give_up)
            *gave_up_stuck = 1;
        if (fit != MEM_OVER_DEVICE || now >= deadline || give_up)
            break;
        /* Paging cannot make the room now: leave the GPU to the jobs that
         * hold the memory, once; queued again once paging can. */
        if (mem_sleep_unlocked(ld->dev, &ld->dev->wake_seq, seq,
                               mem_umin(deadline - now, since ? MEM_STUCK_NS : UINT64_MAX), ld->d,
                               mem_gpu_choice(asked || page_now, &gave_up)) != 0) {
            *lost = 1;
            break;
        }
    }
    mem_wait_leave(a, ld->d, start, !*lost);
    return fit;
}

/* Who set a limit of `limit`: a monitor (salus limit) when it is not what
 * registration set; else SALUS_MEM_LIMIT, or nobody (the whole budget). */
static const char *limit_origin(const mem_local_dev_t *ld, uint64_t limit)
{
    if (limit != ld->lim_set)
        return "set by salus limit";
    return mem_p.cfg.limit ? "SALUS_MEM_LIMIT" : "none set: the device's whole budget";
}

static void say_refusal(mem_local_dev_t *ld, uint64_t bytes, mem_fit_t fit)
{
    static int said;
    mem_sdev_t *sd = ld->sd;
    uint64_t g = util_load_relaxed(&sd->granted) + util_load_relaxed(&ld->debt);
    uint64_t spare = MEM_SPARE(util_load_relaxed(&sd->avail)), used = g > spare ? g - spare : 0;
    uint64_t outside = mem_clampb(util_load_relaxed(&ld->dev->sum_ctx)) +
                       mem_clampb(util_load_relaxed(&ld->dev->foreign));
    uint64_t budget = util_load_relaxed(&ld->dev->budget);
    uint64_t grantable = budget > outside ? budget - outside : 0;
    uint64_t limit = util_load_relaxed(&sd->limit), hold = util_load_relaxed(&ld->lim_hold);
    if (fit == MEM_OVER_LIMIT)
        util_log_once(&said, UTIL_LOG_WARN, "memory: refused %s on %s: this "
                      "process uses %s and its contexts %s of its limit of %s (%s%s%s); the "
                      "program sees CUDA_ERROR_OUT_OF_MEMORY", util_size(bytes).s, ld->name,
                      util_size(used).s, util_size(mem_own_ctx(ld->d)).s,
                      util_size(hold > limit ? hold : limit).s, limit_origin(ld, limit),
                      hold > limit ? ", held above it to its last iteration's peak until "
                      "that falls; the limit itself is " : "",
                      hold > limit ? util_size(limit).s : "");
    else
        util_log_once(&said, UTIL_LOG_WARN, "memory: refused %s on %s: the "
                      "%s it can grant (its budget of %s less %s that contexts and "
                      "processes outside the table take, as the driver says) is taken by "
                      "the processes sharing it%s", util_size(bytes).s, ld->name,
                      util_size(grantable).s, util_size(util_load_relaxed(&ld->dev->budget)).s,
                      util_size(outside).s,
                      mem_p.cfg.wait_ns ? " (waited SALUS_MEM_WAIT_MS)" :
                      "; SALUS_MEM_WAIT_MS=<ms> would wait for them to free memory");
}

mem_take_t mem_take_slow(mem_local_dev_t *ld, uint64_t bytes, int fresh, unsigned flags)
{
    shm_table_t *t = mem_p.t;
    int lost = 0, stuck = 0;
    if (mem_lock() != 0) {
        if (!util_load_acquire(&mem_p.suspended))
            return MEM_TAKE_UNCOUNTED;
        mem_take_t r = take_as_debt(ld, bytes);
        if (r == MEM_TAKE_REFUSED) {
            util_add_relaxed(&mem_p.area->oom_refusals, 1);
            say_refusal(ld, bytes, MEM_OVER_LIMIT);
        }
        return r;
    }
    mem_fix_log(t, ld->d);
    mem_fit_t fit = take_locked(ld, bytes, fresh);
    if (fit == MEM_ASK) {
        shm_unlock(t);
        return MEM_TAKE_ASK_DRIVER;
    }
    if (fit == MEM_OVER_DEVICE && !(flags & MEM_CHARGE_NOWAIT) &&
        (mem_p.cfg.wait_ns || mem_ask_pages_locked(ld, bytes) ||
         mem_pageable_locked(ld, bytes, NULL) || stuck_now_locked(ld, bytes, flags)))
        fit = wait_locked(ld, bytes, flags, &lost, &stuck);
    if (lost)
        return MEM_TAKE_UNCOUNTED;
    if (stuck) {                      /* not refused: the caller pages itself out */
        mem_publish_locked(t, ld->d);
        shm_unlock(t);
        return MEM_TAKE_STUCK;
    }
    mem_publish_locked(t, ld->d);
    shm_unlock(t);
    if (fit == MEM_FIT)
        return MEM_TAKEN;
    util_add_relaxed(&mem_p.area->oom_refusals, 1);
    say_refusal(ld, bytes, fit);
    return MEM_TAKE_REFUSED;
}

mem_take_t mem_take_held(mem_local_dev_t *ld, uint64_t bytes)
{
    uint64_t spare;
    if (mem_take_fast(ld->sd, bytes, &spare)) {
        mem_took(ld, bytes);
        return MEM_TAKEN;
    }
    if (mem_lock() != 0)
        return util_load_acquire(&mem_p.suspended) ? take_as_debt(ld, bytes)
                                                                   : MEM_TAKE_UNCOUNTED;
    mem_fix_log(mem_p.t, ld->d);
    mem_fit_t fit = take_locked(ld, bytes, 1);   /* the driver gave it: no reading */
    mem_publish_locked(mem_p.t, ld->d);
    shm_unlock(mem_p.t);
    return fit == MEM_FIT ? MEM_TAKEN : MEM_TAKE_REFUSED;
}

/* ---- the process's room, for its view ----------------------------------- */

uint64_t mem_room_locked(mem_local_dev_t *ld)
{
    mem_sdev_t *sd = ld->sd;
    mem_sums_t o;
    mem_sums(mem_p.t, ld->d, mem_p.slot, &o);
    uint64_t g = util_load_relaxed(&sd->granted), spare = MEM_SPARE(util_load_relaxed(&sd->avail));
    uint64_t used = g > spare ? g - spare : 0;
    uint64_t limit = util_load_relaxed(&sd->limit);
    uint64_t budget = mem_effective_budget(ld->dev, &o, mem_own_ctx(ld->d));
    uint64_t mine = used + mem_own_ctx(ld->d);        /* its limit bounds its contexts too */
    uint64_t lim_room = limit > mine ? limit - mine : 0;
    uint64_t dev_room = budget > o.held_run + used ? budget - o.held_run - used : 0;
    return mem_umin(lim_room, dev_room);
}
