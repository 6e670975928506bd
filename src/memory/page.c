/*
 * page.c - who pages and when: the scheduler's half of paging a job's device
 * memory to the host (SALUS_SWAP).  The allocator moves the bytes (its
 * primitives, the mem_pager_t seam); this file decides whom to ask, serves
 * what a process was asked, pages a process back in before it runs, pages
 * a process out by itself where no policy gate can (pack), and keeps the
 * counters the report and the monitors show.
 *
 * Divided into: the seam, the policy's order and the scheduler's queue;
 * asking peers (under the table lock); a job's own limit; serving a
 * request (in the process asked); paging back in before a tenure; paging
 * itself out under a policy that gates nothing; the host bound.
 *
 * The protocol, in the table (mem_slot_t's page_* words):
 *   - a process that needs memory the device does not have (an allocation,
 *     an admission, a page-in) asks, under the table lock, the peers the
 *     policy would run last to page out, as little as needed: it raises
 *     their page_req_bytes to what it wants of each (page_req_dev names the
 *     device), then waits for memory as it would for a free;
 *   - only a peer waiting for the GPU can be asked: its scheduler's wait
 *     loop serves the request at once (the asker nudges it, mem_set_nudge)
 *     or within a poll (10 ms).  Never a holder, nor
 *     one waiting for memory itself, nor one idle at rest (nothing of it
 *     would serve the request; an idle peer is asked once it queues);
 *   - a peer paged in stays resident MEM_RESIDENCY_FACTOR times as long as
 *     its page-in took (page_resident_until): a job that pays t to come
 *     back runs at least 8t before it can be sent out again (its holder
 *     keeps the GPU, the keep hook), so that the copies cost the device at
 *     most 2t in every 8t + 2t however the policy alternates.  Memory
 *     never written is not copied, so t is what written memory's copies
 *     take; the wait for victims to page out is not counted (why:
 *     docs/decisions/0001);
 *   - a waiter whose paged-out memory could not come back even with every
 *     pageable peer out (contexts and memory that cannot move fill the
 *     device) is no candidate for the GPU (the blocked hook); one granted
 *     the GPU that finds itself so leaves it while it waits, and comes
 *     back in once the memory is given back;
 *   - so is a waiter whose own limit (salus limit) is below what it would
 *     hold with its paged-out memory back: a limit below what a job holds
 *     takes effect as it frees, and a page-out frees.  Granted, it would
 *     hold the GPU through a page-in its limit never lets through, asking
 *     its peers to page out for nothing (both jobs hung so); it leaves the
 *     GPU, says why once, and comes back in when the limit is raised
 *     (mem_set_limit_table wakes the device's waiters);
 *   - a page-in before a tenure waits for room only while the process
 *     holds the GPU (mem_set_gpu_held): a waiter may take the lease from it
 *     meanwhile (it looks idle), and without it the page-in would ask
 *     nobody and serve nothing; it ends, its memory still out, and the
 *     process waits for the GPU again, where it is asked and granted;
 *   - a process that starts waiting for the GPU (its first look after a
 *     tenure) wakes its devices' memory waiters, which may ask it now;
 *   - the asked process clears the request once served (a compare-and-swap
 *     from the value it served: a larger request made meanwhile stays) and
 *     wakes the device's waiters; a request it cannot serve (its host bound
 *     is reached) marks it MEM_PAGE_FULL, left out of every choice until it
 *     pages in again.
 * Every word read from a peer's slot is checked (bounds, the slot's
 * generation) before use; the owner's counters are written by the owner
 * only, with relaxed atomics, and read by monitors without the lock.
 *
 * Locks: ask_locked runs under the table lock (account.c calls it through
 * mem_p.page_ask, so that the bottom file depends on no other); serving and
 * paging in take no lock but the table's, briefly, to ask and to wake.
 */
#include "memory/mem_layout.h"
#include "util/util.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MEM_RESIDENCY_FACTOR 8
#define MEM_PAGE_SLICE_NS    (20ull * 1000 * 1000)

/* ---- the seam and the policy's order ------------------------------------- */

static const mem_pager_t *pager;
static mem_pager_t pager_copy;
static mem_rank_fn rank_fn;

static uint64_t ask_locked(mem_local_dev_t *ld, uint64_t need);
static uint64_t movable_locked(mem_local_dev_t *ld, uint64_t *now);
static int stuck_locked(mem_local_dev_t *ld, uint64_t bytes);

void mem_set_pager(const mem_pager_t *p)
{
    if (p && p->page_out && p->page_in && p->paged_out_bytes) {
        pager_copy = *p;
        util_store_release(&pager, &pager_copy);
        util_store_release(&mem_p.page_movable, movable_locked);
        util_store_release(&mem_p.page_ask, ask_locked);
        util_store_release(&mem_p.page_stuck, stuck_locked);
    } else {
        util_store_release(&mem_p.page_stuck, NULL);
        util_store_release(&mem_p.page_ask, NULL);
        util_store_release(&mem_p.page_movable, NULL);
        util_store_release(&pager, NULL);
    }
    mem_page_able_update();
}

/* With paging on, this process's waits (an admission before its first
 * context, before it has a pager of its own) may ask peers to page out. */
void mem_page_asking_start(void)
{
    if (!mem_p.cfg.swap)
        return;
    util_store_release(&mem_p.page_movable, movable_locked);
    util_store_release(&mem_p.page_ask, ask_locked);
}

void mem_set_rank(mem_rank_fn fn)
{
    util_store_release(&rank_fn, fn);
}

void mem_set_gpu_wait(mem_gpu_wait_fn fn)
{
    util_store_release(&mem_p.gpu_wait, fn);
}

void mem_set_gpu_give_up(mem_gpu_wait_fn fn)
{
    util_store_release(&mem_p.gpu_give_up, fn);
}


void mem_set_gpu_held(mem_gpu_held_fn fn)
{
    util_store_release(&mem_p.gpu_held, fn);
}

void mem_set_nudge(mem_nudge_fn fn)
{
    util_store_release(&mem_p.nudge, fn);
}

void mem_set_hold(mem_hold_fn fn)
{
    util_store_release(&mem_p.hold, fn);
}

/* The process may be paged: SALUS_SWAP=on and a pager.  Peers ask only
 * slots that say so. */
void mem_page_able_update(void)
{
    mem_slot_t *a = util_load_acquire(&mem_p.area);
    if (!a)
        return;
    if (mem_p.cfg.swap && util_load_acquire(&pager))
        util_or_release(&a->page_flags, MEM_PAGE_ABLE);
    else
        util_and_release(&a->page_flags, ~MEM_PAGE_ABLE);
    if (mem_p.cfg.swap)
        util_or_release(&a->page_flags, MEM_PAGE_SWAP);
}

/* ---- asking peers (under the table lock) --------------------------------- */

typedef struct cand {
    int slot;
    int rank;            /* INT_MAX: runs last (not queued for the GPU) */
    uint64_t used;
} cand_t;

static int runs_after(const cand_t *a, const cand_t *b)
{
    if (a->rank != b->rank)
        return a->rank > b->rank;
    return a->used > b->used;          /* then the larger: fewer processes page */
}

/* What slot area a holds on device d that paging cannot move (exported
 * over CUDA IPC): at most `held`. */
static uint64_t pinned_on(const mem_slot_t *a, int d, uint64_t held)
{
    uint64_t p = util_load_relaxed(&a->pinned);
    return util_load_relaxed(&a->pinned_dev) == (uint32_t)d + 1 ? mem_umin(p, held) : 0;
}

/* Slot j as a victim on d: 1 and *c filled when it may be asked. */
static int victim(shm_table_t *t, int d, int j, int my_rank, uint64_t now, cand_t *c)
{
    shm_ident_t id;
    mem_slot_t *a = shm_slot_area(t, j, SHM_AREA_MEM);
    if (!a || util_load_relaxed(&a->magic) != MEM_SLOT_MAGIC || shm_slot_ident(t, j, &id) != 0 ||
        !shm_slot_alive(t, j))
        return 0;
    uint32_t f = util_load_relaxed(&a->page_flags);
    if (!(f & MEM_PAGE_ABLE) || (f & MEM_PAGE_FULL) || id.state != SHM_WAIT_GPU ||
        now < util_load_relaxed(&a->page_resident_until))
        return 0;
    const mem_sdev_t *sd = &a->dev[d];
    uint64_t g = util_load_relaxed(&sd->granted), spare = MEM_SPARE(util_load_relaxed(&sd->avail));
    if (g > MEM_MAX_BYTES || g <= spare || g - spare <= pinned_on(a, d, g - spare))
        return 0;
    mem_rank_fn rk = util_load_acquire(&rank_fn);
    int r = rk ? rk(t, d, j) : -1;
    if (r == 0 || (my_rank >= 0 && r >= 0 && r <= my_rank))
        return 0;                      /* holds the GPU, or runs before the asker */
    c->slot = j;
    c->rank = r < 0 ? INT_MAX : r;
    c->used = g - spare - pinned_on(a, d, g - spare);
    return 1;
}

/* Slot j waits for memory itself: it serves no request until that ends. */
static int waits_mem(shm_table_t *t, int j)
{
    shm_ident_t id;
    return shm_slot_ident(t, j, &id) != 0 || id.state == SHM_WAIT_MEM;
}

/* What paging could free on table device d: the memory of the live peers
 * of `skip` that may be paged and are not full, whatever they do now (one
 * that runs or rests waits for the GPU later, or ends), less what they
 * pinned; into *now (may be NULL), the part of it that may be asked now:
 * not within its residency, not waiting for memory itself (neither serves
 * a request before that ends: a waiter holding the GPU for them would idle
 * it). */
static uint64_t movable_but(shm_table_t *t, int d, int skip, uint64_t *now)
{
    uint64_t sum = 0, asked_now = 0, at = now ? util_now_ns() : 0;
    for (int j = 0; j < SHM_MAX_SLOTS; j++) {
        mem_slot_t *a = j == skip ? NULL : shm_slot_area(t, j, SHM_AREA_MEM);
        if (!a || util_load_relaxed(&a->magic) != MEM_SLOT_MAGIC || !shm_slot_alive(t, j) ||
            (util_load_relaxed(&a->page_flags) & (MEM_PAGE_ABLE | MEM_PAGE_FULL)) != MEM_PAGE_ABLE)
            continue;
        uint64_t u = mem_sdev_used(&a->dev[d]), m = u - pinned_on(a, d, u);
        sum += m;
        if (now && at >= util_load_relaxed(&a->page_resident_until) && !waits_mem(t, j))
            asked_now += m;
    }
    if (now)
        *now = asked_now;
    return sum;
}

static uint64_t movable_locked(mem_local_dev_t *ld, uint64_t *now)
{
    return movable_but(mem_p.t, ld->d, mem_p.slot, now);
}

/* Ask the peers the policy runs last to page out `need` bytes on ld's
 * device between them; what is asked (requests already pending count).
 * 0: nobody can be asked. */
static uint64_t ask_locked(mem_local_dev_t *ld, uint64_t need)
{
    static cand_t c[SHM_MAX_SLOTS];    /* under the table lock */
    shm_table_t *t = mem_p.t;
    int d = ld->d, n = 0;
    uint64_t now = util_now_ns(), asked = 0;
    mem_rank_fn rk = util_load_acquire(&rank_fn);
    int my_rank = rk ? rk(t, d, mem_p.slot) : -1;
    for (int j = 0; j < SHM_MAX_SLOTS; j++)
        if (j != mem_p.slot && victim(t, d, j, my_rank, now, &c[n]))
            n++;
    for (int i = 1; i < n; i++) {      /* insertion sort: last to run first */
        cand_t x = c[i];
        int k = i;
        for (; k > 0 && runs_after(&x, &c[k - 1]); k--)
            c[k] = c[k - 1];
        c[k] = x;
    }
    for (int i = 0; i < n && asked < need; i++) {
        mem_slot_t *a = shm_slot_area(t, c[i].slot, SHM_AREA_MEM);
        uint64_t want = mem_umin(c[i].used, need - asked);
        uint64_t pending = util_load_relaxed(&a->page_req_dev) == (uint32_t)d + 1 ?
                           util_load_relaxed(&a->page_req_bytes) : 0;
        if (pending < want) {
            util_store_relaxed(&a->page_req_dev, (uint32_t)d + 1);
            util_store_release(&a->page_req_bytes, want);
            pending = want;
            void (*nudge)(shm_table_t *, int) = util_load_acquire(&mem_p.nudge);
            if (nudge)
                nudge(t, c[i].slot);           /* serves now, not at its next poll */
        }
        asked += mem_umin(pending, c[i].used);
    }
    return asked;
}

/* ---- a job's own limit ----------------------------------------------------- */

static int ordinal_of(const mem_local_dev_t *ld)
{
    return (int)(ld - mem_p.dev);
}

/* What slot `slot` (area a) would hold on table device d (dev) with `out`
 * paged-out bytes back in, its context included (its limit bounds its
 * contexts too, mem_room_locked), when that is more than its limit; 0 when
 * the limit lets it all in.  Every word bounded: no overflow. */
static uint64_t over_own_limit(const mem_slot_t *a, const mem_dev_t *dev, int d, int slot,
                               uint64_t out)
{
    const mem_sdev_t *sd = &a->dev[d];
    uint64_t need = mem_sdev_used(sd) + mem_umin(out, MEM_MAX_BYTES) + mem_ctx_of(dev, slot);
    return need > util_load_relaxed(&sd->limit) ? need : 0;
}

/* Whether this process has said, since its memory last came back in, that
 * its limit keeps it out (process-wide: once per such wait, not per poll). */
static int limit_said;

/* Say once why this process waits: its limit keeps `out` bytes it paged out
 * from coming back on ld's device, where it would hold `need`. */
static void say_limit(mem_local_dev_t *ld, uint64_t out, uint64_t need)
{
    if (util_xchg_relaxed(&limit_said, 1))
        return;
    util_warn("memory: device %d: this job's memory limit, %s, keeps its paged-out memory "
              "off the device: with its %s paged out back in it would hold %s; it leaves the "
              "GPU to its peers and waits, and runs again once its limit is raised to at "
              "least that (salus limit %d SIZE)", ld->d,
              util_size(util_load_relaxed(&ld->sd->limit)).s, util_size(out).s,
              util_size(need).s, (int)getpid());
}

/* At a poll of the wait for the GPU: a process whose limit keeps what it
 * paged out off a device is left out of the candidates there (the blocked
 * hook) and would otherwise wait without a word. */
static void limit_check_waiting(mem_slot_t *a, const mem_pager_t *pg)
{
    if (!util_load_relaxed(&a->swapped_out))
        return;
    for (int d = 0; d < SHM_MAX_DEVICES; d++) {
        mem_local_dev_t *ld = util_load_acquire(&mem_p.by_index[d]);
        uint64_t out = ld && ld->sd ? pg->paged_out_bytes(ordinal_of(ld)) : 0, need;
        if (out && (need = over_own_limit(a, ld->dev, ld->d, mem_p.slot, out)) != 0)
            say_limit(ld, out, need);
    }
}

/* ---- serving a request (the process asked) ------------------------------- */

static void count(mem_slot_t *a, uint64_t *events, uint64_t bytes, uint64_t ns)
{
    util_add_relaxed(events, 1);
    util_add_relaxed(&a->swap_bytes, bytes);
    util_add_relaxed(&a->swap_ns, ns);
}

static void publish_swapped(mem_slot_t *a, const mem_pager_t *pg)
{
    if (pg->copied_bytes)
        util_store_relaxed(&a->swap_copied, pg->copied_bytes());
    uint64_t sum = 0;
    for (int d = 0; d < SHM_MAX_DEVICES; d++) {
        mem_local_dev_t *ld = util_load_acquire(&mem_p.by_index[d]);
        if (ld && ld->sd)
            sum += pg->paged_out_bytes(ordinal_of(ld));
    }
    util_store_relaxed(&a->swapped_out, sum);
}

/* Whether this process has told its devices' memory waiters, since its
 * last tenure, that it waits for the GPU (0: not yet; process-wide, its
 * waiting threads race to tell once). */
static int told_waiting;

/* A process that starts waiting for the GPU has just become a peer that
 * may be asked: those waiting for memory on its devices look again now,
 * not at the end of their slice (a holder that yields to a newcomer at a
 * boundary is paged out for it at once). */
static void tell_askers(void)
{
    for (int d = 0; d < SHM_MAX_DEVICES; d++) {
        mem_local_dev_t *ld = util_load_acquire(&mem_p.by_index[d]);
        if (ld && ld->sd && util_load_relaxed(&ld->dev->waiters))
            mem_wake(ld->dev);
    }
}

void mem_page_serve(void)
{
    mem_slot_t *a = util_load_acquire(&mem_p.area);
    const mem_pager_t *pg = util_load_acquire(&pager);
    if (!a || !pg || util_load_acquire(&mem_p.mode) != MEM_ON)
        return;
    if (!util_xchg_acq_rel(&told_waiting, 1))
        tell_askers();
    limit_check_waiting(a, pg);
    uint64_t want = util_load_acquire(&a->page_req_bytes);
    if (!want)
        return;
    uint32_t dv = util_load_relaxed(&a->page_req_dev);
    mem_local_dev_t *ld = dv >= 1 && dv <= SHM_MAX_DEVICES ?
                          util_load_acquire(&mem_p.by_index[dv - 1]) : NULL;
    if (ld && ld->sd) {
        uint64_t freed = 0, t0 = util_now_ns();
        util_or_relaxed(&a->page_flags, MEM_PAGE_OUT_BUSY);
        CUresult rc = pg->page_out(ordinal_of(ld), want, &freed);
        util_and_relaxed(&a->page_flags, ~MEM_PAGE_OUT_BUSY);
        if (rc == CUDA_SUCCESS && freed)
            count(a, &a->swap_outs, freed, util_now_ns() - t0);
        /* Less than asked because less was resident (it freed memory
         * since it was asked) is not a full host. */
        if (rc != CUDA_SUCCESS ||
            (freed < want && (!pg->resident_bytes || pg->resident_bytes(ordinal_of(ld)) > 0))) {
            static int said;
            util_or_relaxed(&a->page_flags, MEM_PAGE_FULL);
            util_log_once(&said, UTIL_LOG_WARN, "memory: asked to page out %s on device %d, "
                          "paged out %s: the host staging bound (SALUS_SWAP_LIMIT) or the "
                          "host is full; peers are not asked again until this job pages "
                          "in", util_size(want).s, ld->d, util_size(freed).s);
        }
        publish_swapped(a, pg);
        mem_wake(ld->dev);
    }
    __atomic_compare_exchange_n(&a->page_req_bytes, &want, 0, 0, __ATOMIC_RELEASE,
                                __ATOMIC_RELAXED);
}

/* ---- paging back in, before the process runs on a device ----------------- */

/* Page in what was paged out on ld's device, once: 0 when it is all in,
 * -1 when the budget is not there now. */
static int page_in_once(mem_slot_t *a, const mem_pager_t *pg, int ord)
{
    uint64_t restored = 0, t0 = util_now_ns();
    if (pg->page_in(ord, &restored) != CUDA_SUCCESS)
        return -1;
    uint64_t now = util_now_ns();
    count(a, &a->swap_ins, restored, now - t0);
    util_store_relaxed(&a->page_resident_until, now + MEM_RESIDENCY_FACTOR * (now - t0));
    return 0;
}

/* The tenure this page-in is for is still this process's: it holds table
 * device d's GPU (or no scheduler says otherwise). */
static int still_held(int d)
{
    mem_gpu_held_fn held = util_load_acquire(&mem_p.gpu_held);
    return !held || held(d);
}

/* Ask peers for what the page-in lacks; the wake word's value before
 * asking, for the wait, and whether paging peers could make the room at
 * all (mem_page_blocked_locked).  -1 when the lock is out of reach. */
static int ask_for_page_in(mem_local_dev_t *ld, uint64_t bytes, uint32_t *seq, int *blocked)
{
    if (mem_lock() != 0)
        return -1;
    *seq = util_load_seq(&ld->dev->wake_seq);
    uint64_t room = mem_room_locked(ld);
    if (bytes > room)
        ask_locked(ld, bytes - room);
    *blocked = bytes > room && mem_page_blocked_locked(mem_p.t, ld->d, mem_p.slot);
    shm_unlock(mem_p.t);
    return 0;
}

void mem_page_in_before_run(int device)
{
    mem_slot_t *a = util_load_acquire(&mem_p.area);
    const mem_pager_t *pg = util_load_acquire(&pager);
    if (!a || !pg || device < 0 || device >= SHM_MAX_DEVICES ||
        util_load_acquire(&mem_p.mode) != MEM_ON)
        return;
    /* It runs: a request left from its wait is moot (whoever asked waits on
     * and asks again whom it finds waiting then). */
    util_store_relaxed(&a->page_req_bytes, 0);
    util_store_release(&told_waiting, 0);
    mem_local_dev_t *ld = util_load_acquire(&mem_p.by_index[device]);
    if (!ld || !ld->sd)
        return;
    int ord = ordinal_of(ld), said = 0, left = 0;
    uint64_t out = pg->paged_out_bytes(ord), start = util_now_ns();
    if (!out)
        return;
    util_or_relaxed(&a->page_flags, MEM_PAGE_IN_BUSY);
    for (;;) {
        if (page_in_once(a, pg, ord) == 0)
            break;
        uint32_t seq = util_load_seq(&ld->dev->wake_seq);
        int blocked = 0;
        uint64_t need = over_own_limit(a, ld->dev, ld->d, mem_p.slot, out);
        if (need) {
            /* Its own limit keeps it out: no peer's page-out could help.
             * It leaves the GPU (and the queue, at every slice: a grant
             * would be held idle) until the limit is raised. */
            say_limit(ld, out, need);
            mem_give_up_gpu(ld->d);
        } else {
            if (!said++)
                util_info("memory: device %d: %s to page in before this job runs; waiting for "
                          "peers to page out", device, util_size(out).s);
            if (ask_for_page_in(ld, out, &seq, &blocked) != 0)
                break;                 /* the lock is out of reach: said; try at the next tenure */
            /* Memory only the jobs behind it can give back, by running: the
             * GPU goes to them (once per wait), and the scheduler takes
             * this process back once it is in (sched_acquire). */
            if (blocked && !left++)
                mem_give_up_gpu(ld->d);
        }
        shm_futex_wait(&ld->dev->wake_seq, seq, MEM_PAGE_SLICE_NS);
        out = pg->paged_out_bytes(ord);
        if (!out)
            break;
        /* The lease went to another meanwhile (a waiter took it as idle,
         * or the give-up above handed it on): this wait is no tenure's any
         * more.  Waiting on, unqueued, it would ask nobody (it runs before
         * no one) and serve no request, while the new holder runs for good.
         * It goes back to the wait for the GPU (sched_acquire), where it is
         * asked and granted again, and pages in at that tenure. */
        if (!still_held(ld->d))
            break;
    }
    util_and_relaxed(&a->page_flags, ~(MEM_PAGE_IN_BUSY | MEM_PAGE_FULL));
    if (!pg->paged_out_bytes(ord))
        util_store_relaxed(&limit_said, 0);        /* a later limit's wait is said again */
    publish_swapped(a, pg);
    if (said)
        util_info("memory: device %d: paged in after %llu ms", device,
                  (unsigned long long)((util_now_ns() - start) / 1000000));
}

/* ---- paging itself out, under a policy that gates nothing -----------------
 * Under pack no job waits at a gate, so none can be asked: jobs that each
 * hold memory and wait for more would wait for each other until
 * SALUS_MEM_WAIT_MS refused one (the training bench lost a job so).  When
 * every peer holding memory on the device waits for memory too, and none
 * of them could take what it waits for now, the job that arrived last
 * among those waiters that can page (registration time, then slot: every
 * waiter evaluates the same order, so exactly one moves) pages itself out:
 * its launches held (mem_p.hold), its work waited for and its memory
 * copied to the host, its budget given back; it then waits for room for
 * all of it and its allocation, pages in, and lets its threads go.  One
 * job at a time pages, the latest first, as pack admitted them in arrival
 * order; a job that could not fit alone never gets here (its wait ends in
 * a refusal at once).  The wait takes no lock of the pager's under the
 * table lock: what a peer holds and waits for is read from its slot. */

/* Slot j (ident b) arrived after slot i (ident a). */
static int arrived_after(const shm_ident_t *b, int j, const shm_ident_t *a, int i)
{
    if (b->registered_ns != a->registered_ns)
        return b->registered_ns > a->registered_ns;
    return j > i;
}

static int stuck_locked(mem_local_dev_t *ld, uint64_t bytes)
{
    shm_table_t *t = mem_p.t;
    mem_slot_t *me = mem_p.area;
    shm_ident_t mine, id;
    int d = ld->d;
    if (!util_load_acquire(&pager) || !me ||
        !util_load_acquire(&mem_p.hold) ||
        (util_load_relaxed(&me->page_flags) & (MEM_PAGE_ABLE | MEM_PAGE_FULL)) != MEM_PAGE_ABLE ||
        shm_slot_ident(t, mem_p.slot, &mine) != 0)
        return 0;
    uint64_t used = mem_sdev_used(ld->sd);
    if (used <= pinned_on(me, d, used))
        return 0;                      /* nothing of it can move */
    uint64_t taken = mem_own_ctx(d) + mem_clampb(util_load_relaxed(&ld->dev->foreign));
    if (used + bytes + taken > util_load_relaxed(&ld->dev->budget) ||
        used + bytes > util_load_relaxed(&ld->sd->limit))
        return 0;                      /* it cannot fit alone: refused, not paged */
    mem_sums_t o;
    mem_sums(t, d, mem_p.slot, &o);
    uint64_t budget = mem_effective_budget(ld->dev, &o, mem_own_ctx(d));
    uint64_t room = budget > o.held + used ? budget - o.held - used : 0;
    for (int j = 0; j < SHM_MAX_SLOTS; j++) {
        mem_slot_t *a = j == mem_p.slot ? NULL : shm_slot_area(t, j, SHM_AREA_MEM);
        if (!a || util_load_relaxed(&a->magic) != MEM_SLOT_MAGIC || !shm_slot_alive(t, j) ||
            shm_slot_ident(t, j, &id) != 0)
            continue;
        uint64_t u = mem_sdev_used(&a->dev[d]);
        uint32_t f = util_load_relaxed(&a->page_flags);
        if (!u || u > MEM_MAX_BYTES)
            continue;                  /* holds nothing here */
        if (id.state != SHM_WAIT_MEM || (f & (MEM_PAGE_OUT_BUSY | MEM_PAGE_IN_BUSY)))
            return 0;                  /* runs, or pages: it gives memory back or ends */
        if (util_load_relaxed(&a->wait_dev) == (uint32_t)d + 1 &&
            util_load_relaxed(&a->wait_bytes) <= room)
            return 0;                  /* it can take what it waits for: it goes on */
        if ((f & (MEM_PAGE_ABLE | MEM_PAGE_FULL)) == MEM_PAGE_ABLE && u > pinned_on(a, d, u) &&
            !util_load_relaxed(&a->swapped_out) && arrived_after(&id, j, &mine, mem_p.slot))
            return 0;                  /* a later one pages first */
    }
    return 1;
}

static int self_out(mem_local_dev_t *ld, uint64_t bytes)
{
    mem_slot_t *a = util_load_acquire(&mem_p.area);
    const mem_pager_t *pg = util_load_acquire(&pager);
    mem_hold_fn hold = util_load_acquire(&mem_p.hold);
    int ord = ordinal_of(ld);
    if (!a || !pg || !hold || !hold(ord, 1))
        return 0;
    uint64_t freed = 0, t0 = util_now_ns();
    util_or_relaxed(&a->page_flags, MEM_PAGE_OUT_BUSY);
    CUresult rc = pg->page_out(ord, UINT64_MAX, &freed);
    util_and_relaxed(&a->page_flags, ~MEM_PAGE_OUT_BUSY);
    if (freed)
        count(a, &a->swap_outs, freed, util_now_ns() - t0);
    publish_swapped(a, pg);
    mem_wake(ld->dev);
    if (pg->paged_out_bytes(ord) == 0) {
        hold(ord, 0);                  /* nothing moved (rc says why): it waits as it was */
        return 0;
    }
    static int said;
    util_log_once(&said, UTIL_LOG_INFO, "memory: %s: every job holding memory here waits "
                  "for more, and the policy runs them all at once (none waits at a gate to "
                  "be paged): this job, the last of them to arrive, paged out %s to the "
                  "host%s and waits for room for it and its %s allocation",
                  ld->name, util_size(freed).s,
                  rc == CUDA_SUCCESS ? "" : " (not all of it: the host staging bound)",
                  util_size(bytes).s);
    return 1;
}

static int self_in(mem_local_dev_t *ld)
{
    mem_slot_t *a = util_load_acquire(&mem_p.area);
    const mem_pager_t *pg = util_load_acquire(&pager);
    int ord = ordinal_of(ld);
    if (!a || !pg)
        return 0;
    util_or_relaxed(&a->page_flags, MEM_PAGE_IN_BUSY);
    int rc = pg->paged_out_bytes(ord) ? page_in_once(a, pg, ord) : 0;
    util_and_relaxed(&a->page_flags, ~MEM_PAGE_IN_BUSY);
    if (rc == 0)
        util_and_relaxed(&a->page_flags, ~MEM_PAGE_FULL);
    publish_swapped(a, pg);
    return rc;
}

static void self_release(mem_local_dev_t *ld)
{
    mem_hold_fn hold = util_load_acquire(&mem_p.hold);
    if (hold)
        hold(ordinal_of(ld), 0);
}

/* The caller's wait gave up stuck (mem_take_was_stuck), its locks
 * released: page this process out on ld's device (its launches held),
 * wait, however long, for room for what went out and `bytes`, page back
 * in and let the launches go.  0: back in, the caller tries its allocation
 * again; -1: nothing could move (the caller refuses it).  Takes and
 * releases the table lock. */
int mem_page_self_wait(mem_local_dev_t *ld, uint64_t bytes)
{
    mem_slot_t *a = mem_p.area;
    if (!a || !self_out(ld, bytes))
        return -1;
    uint64_t start = util_now_ns();
    int in = 0, locked = mem_lock() == 0, entered = locked;
    if (locked) {
        mem_fix_log(mem_p.t, ld->d);
        mem_wait_enter(a, ld->d, MEM_WAIT_ALLOC, 0, bytes);
    }
    while (locked && !in) {
        uint32_t seq = util_load_seq(&ld->dev->wake_seq);
        uint64_t need = bytes + mem_clampb(util_load_relaxed(&a->swapped_out));
        util_store_relaxed(&a->wait_bytes, need);   /* what peers see it wait for (stuck) */
        if (mem_room_locked(ld) >= need) {
            shm_unlock(mem_p.t);
            in = self_in(ld) == 0;
            if ((locked = mem_lock() == 0))
                mem_fix_log(mem_p.t, ld->d);
            continue;
        }
        locked = mem_sleep_unlocked(ld->dev, &ld->dev->wake_seq, seq, MEM_WAIT_SLICE_NS, ld->d,
                                    0) == 0;
    }
    if (entered)
        mem_wait_leave(a, ld->d, start, locked);
    if (locked)
        shm_unlock(mem_p.t);
    if (!in && self_in(ld) != 0)   /* the lock is out of reach: said */
        util_warn("memory: %s: the table's lock is out of reach while this job is paged "
                  "out; its memory could not all come back in", ld->name);
    self_release(ld);
    return 0;
}

/* The holder keeps the GPU at a boundary rather than hand it to a waiter
 * whose memory cannot come in beside it while the holder is within its
 * residency: granted, the waiter would hold the GPU idle until the
 * residency ends (victim() leaves the holder alone until then), so that
 * under fair, with a quantum shorter than the residency, the GPU would
 * idle for most of every 8p (test_memory_thrash).  The residency is the
 * rule's time to run, and the holder runs it.  What the waiter needs here:
 * what it has paged out (over its devices: a bound), or, before it has
 * ended an iteration, as much as the largest job the device has seen (its
 * own peak is not known yet; srtf runs such a newcomer first).  A waiter
 * whose need fits in the room is let in. */
int mem_page_keep_locked(shm_table_t *t, int device, int slot)
{
    mem_slot_t *me = util_load_acquire(&mem_p.area);
    if (!me || t != mem_p.t || device < 0 || device >= SHM_MAX_DEVICES || slot == mem_p.slot ||
        (util_load_relaxed(&me->page_flags) & (MEM_PAGE_ABLE | MEM_PAGE_FULL)) != MEM_PAGE_ABLE ||
        util_now_ns() >= util_load_relaxed(&me->page_resident_until))
        return 0;
    mem_slot_t *a = shm_slot_area(t, slot, SHM_AREA_MEM);
    mem_local_dev_t *ld = util_load_acquire(&mem_p.by_index[device]);
    if (!a || !ld || !ld->sd || util_load_relaxed(&a->magic) != MEM_SLOT_MAGIC ||
        !shm_slot_alive(t, slot))
        return 0;
    uint64_t need = util_load_relaxed(&a->swapped_out);
    if (need > MEM_MAX_BYTES)
        return 0;
    const mem_sdev_t *sd = &a->dev[device];
    uint64_t seen = mem_largest_seen(ld->dev), used = mem_sdev_used(sd);
    if (!need && !util_load_relaxed(&sd->run_peak))
        need = seen > used ? seen - used : 0;
    return need > 0 && need > mem_room_locked(ld);
}

/* The waiter in `slot` is left out of the GPU's candidates while what it
 * has paged out cannot come back on table device `device` even with every
 * other pageable process paged out: the contexts, pinned memory and
 * non-pageable jobs on the device leave too little room.  Granted the GPU,
 * it would hold it through a page-in that waits for memory only the jobs
 * behind it can give back, by running to their end.  It is a candidate
 * again once that memory is given back.  So is one whose own limit keeps
 * what it paged out from coming back (granted, it would hold the GPU
 * through a page-in its limit never lets through), until the limit is
 * raised.  Under the table lock; reads the table only, every word
 * checked. */
int mem_page_blocked_locked(shm_table_t *t, int device, int slot)
{
    if (!t || device < 0 || device >= SHM_MAX_DEVICES || slot < 0 || slot >= SHM_MAX_SLOTS)
        return 0;
    mem_slot_t *a = shm_slot_area(t, slot, SHM_AREA_MEM);
    const mem_dev_t *dev = shm_device_area(t, device, SHM_AREA_MEM);
    if (!a || !dev || util_load_relaxed(&a->magic) != MEM_SLOT_MAGIC || !shm_slot_alive(t, slot))
        return 0;
    uint64_t out = util_load_relaxed(&a->swapped_out);
    if (!out || out > MEM_MAX_BYTES)
        return 0;
    if (over_own_limit(a, dev, device, slot, out))
        return 1;
    uint64_t used = mem_sdev_used(&a->dev[device]);
    mem_sums_t o;
    mem_sums(t, device, slot, &o);
    uint64_t movable = movable_but(t, device, slot, NULL);
    uint64_t fixed = o.held > movable ? o.held - movable : 0;
    uint64_t budget = mem_effective_budget(dev, &o, mem_ctx_of(dev, slot));
    return used + out + fixed > budget;
}

int mem_page_is_out(void)
{
    mem_slot_t *a = util_load_acquire(&mem_p.area);
    return a && util_load_relaxed(&a->swapped_out) != 0;
}
