/*
 * page.c - who pages and when: the scheduler's half of paging a job's device
 * memory to the host (SALUS_SWAP).  The allocator moves the bytes (its
 * primitives, the page_pager_t seam); this file decides whom to ask, serves
 * what a process was asked, pages a process back in before it runs, pages
 * a process out by itself where no policy gate can (pack), and keeps the
 * counters the report and the monitors show.
 *
 * Divided into: the seams; asking peers (under the table
 * lock); a job's own limit; serving a request (in the process asked);
 * paging back in before a tenure; the scheduler's candidates (keep,
 * blocked).  Paging itself out under a policy that gates nothing, and the
 * allocations that may, are self.c's.
 *
 * The protocol, in the table (mem_slot_t's page_* words):
 *   - a process that needs memory the device does not have (an allocation,
 *     an admission, a page-in) asks, under the table lock, the peers the
 *     policy would run last to page out, as little as needed: it raises
 *     their page_req_bytes to what it wants of each (page_req_dev names the
 *     device), then waits for memory as it would for a free;
 *   - only a peer waiting for the GPU can be asked: its scheduler's wait
 *     loop serves the request at once (the asker nudges it, page_sched_t's nudge)
 *     or within a poll (10 ms).  Never a holder, nor
 *     one waiting for memory itself, nor one idle at rest (nothing of it
 *     would serve the request; an idle peer is asked once it queues);
 *   - a peer paged in stays resident MEM_RESIDENCY_FACTOR times as long as
 *     its page-in took (page_resident_until): a job that pays t to come
 *     back runs at least 8t before it can be sent out again (its holder
 *     keeps the GPU, page_keep_locked), so that the copies cost the device at
 *     most 2t in every 8t + 2t however the policy alternates.  Memory
 *     never written is not copied, so t is what written memory's copies
 *     take; the wait for victims to page out is not counted (why:
 *     docs/decisions/0001);
 *   - a waiter whose paged-out memory could not come back even with every
 *     pageable peer out (contexts and memory that cannot move fill the
 *     device) is no candidate for the GPU (page_blocked_locked); one granted
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
 *     holds the GPU (page_sched_t's held): a waiter may take the lease from it
 *     meanwhile (it looks idle), and without it the page-in would ask
 *     nobody and serve nothing; it ends, its memory still out, and the
 *     process waits for the GPU again, where it is asked and granted;
 *   - a process that starts waiting for the GPU (its first look after a
 *     tenure) wakes its devices' memory waiters, which may ask it now;
 *   - the asked process clears the request once served (a compare-and-swap
 *     from the value it served: a larger request made meanwhile stays) and
 *     wakes the device's waiters; a request it cannot serve (its host bound
 *     is reached) marks it MEM_PAGE_FULL, left out of every choice until it
 *     pages in again.  The pager refuses a page-out whole unless its bounds
 *     hold everything the job could still be asked for (vmem's
 *     bounds_allow, with the argument): a job left partly out by its bound
 *     would hold the GPU waiting to page in while the peer that took the
 *     room waits for more (both hung so); refused, the job keeps all its
 *     memory, is never asked again, and its askers wait for it to end.
 * Every word read from a peer's slot is checked (bounds, the slot's
 * generation) before use; the owner's counters are written by the owner
 * only, with relaxed atomics, and read by monitors without the lock.
 *
 * Every word of memory's slots is read and written through memory.h's
 * functions for paging (pagestate.c there), never through its structs.
 *
 * Locks: page_ask_locked, page_movable_locked and the stuck rule run under
 * the table lock (memory's waits call them through mem_set_paging, a call
 * up that is left: issue 25); serving and paging in take no lock but the table's,
 * briefly, to ask and to wake.
 */
#include "page/page_int.h"
#include "sched/sched.h"
#include "util/util.h"
#include "vmem/vmem.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- the seams ---------------------------------------------------------------- */

static const page_pager_t *pager;
static page_pager_t pager_copy;

static const page_sched_t the_sched = { sched_rank_locked, sched_holds_gpu,
                                        sched_give_up_for_mem, sched_nudge,
                                        sched_hold_for_mem, sched_wait_mem,
                                        sched_admit_order_locked, sched_enroll,
                                        sched_unsafe_begin, sched_unsafe_end };
static const page_sched_t *sched_p = &the_sched;
static page_sched_t sched_copy;

void page_pager_store(const page_pager_t *p)
{
    if (p) {
        pager_copy = *p;
        p = &pager_copy;
    }
    util_store_release(&pager, p);
}

const page_pager_t *page_pager(void)
{
    return util_load_acquire(&pager);
}

void page_set_sched(const page_sched_t *s)
{
    if (s) {
        sched_copy = *s;
        s = &sched_copy;
    } else {
        s = &the_sched;
    }
    util_store_release(&sched_p, s);
}

static const page_sched_t *sched_now(void)
{
    return util_load_acquire(&sched_p);
}

int page_rank(shm_table_t *t, int d, int slot)
{
    int (*f)(shm_table_t *, int, int) = sched_now()->rank;
    return f ? f(t, d, slot) : -1;
}

int page_held(int d)
{
    int (*f)(int) = sched_now()->held;
    return !f || f(d);
}

void page_give_up(int ordinal)
{
    void (*f)(int) = sched_now()->give_up;
    if (f)
        f(ordinal);
}

void page_nudge(shm_table_t *t, int slot)
{
    void (*f)(shm_table_t *, int) = sched_now()->nudge;
    if (f)
        f(t, slot);
}

int page_hold(int ordinal, int on)
{
    int (*f)(int, int) = sched_now()->hold;
    return f ? f(ordinal, on) : 0;
}

void page_wait_mem(int ordinal)
{
    void (*f)(int) = sched_now()->wait_mem;
    if (f)
        f(ordinal);
}

int page_admit_order(shm_table_t *t, int d, int a, int b)
{
    int (*f)(shm_table_t *, int, int, int) = sched_now()->admit_order;
    return f ? f(t, d, a, b) : 0;
}

void page_enroll(int ordinal)
{
    void (*f)(int) = sched_now()->enroll;
    if (f)
        f(ordinal);
}

int page_unsafe_begin(void)
{
    int (*f)(void) = sched_now()->unsafe_begin;
    return f ? f() : 0;
}

void page_unsafe_end(void)
{
    void (*f)(void) = sched_now()->unsafe_end;
    if (f)
        f();
}

int page_can_hold(void)
{
    return sched_now()->hold != NULL;
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

/* Slot j as a victim on d: 1 and *c filled when it may be asked. */
static int victim(shm_table_t *t, int d, int j, int my_rank, uint64_t now, cand_t *c)
{
    shm_ident_t id;
    mem_page_peer_t p;
    if (mem_page_peer(t, d, j, &p) != 0 || shm_slot_ident(t, j, &id) != 0)
        return 0;
    if (!(p.flags & MEM_PAGE_ABLE) || (p.flags & MEM_PAGE_FULL) || id.state != SHM_WAIT_GPU ||
        now < p.resident_until || p.used <= p.pinned)
        return 0;
    int r = page_rank(t, d, j);
    if (r == 0 || (my_rank >= 0 && r >= 0 && r <= my_rank))
        return 0;                      /* holds the GPU, or runs before the asker */
    c->slot = j;
    c->rank = r < 0 ? INT_MAX : r;
    c->used = p.used - p.pinned;
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
        mem_page_peer_t p;
        if (j == skip || mem_page_peer(t, d, j, &p) != 0 ||
            (p.flags & (MEM_PAGE_ABLE | MEM_PAGE_FULL)) != MEM_PAGE_ABLE)
            continue;
        uint64_t m = p.used - p.pinned;
        sum += m;
        if (now && at >= p.resident_until && !waits_mem(t, j))
            asked_now += m;
    }
    if (now)
        *now = asked_now;
    return sum;
}

uint64_t page_movable_locked(int d, uint64_t *now)
{
    return movable_but(mem_table(), d, mem_self_slot(), now);
}

uint64_t page_ask_locked(int d, uint64_t need)
{
    static cand_t c[SHM_MAX_SLOTS];    /* under the table lock */
    shm_table_t *t = mem_table();
    int self = mem_self_slot(), n = 0;
    uint64_t now = util_now_ns(), asked = 0;
    if (!t || d < 0 || d >= SHM_MAX_DEVICES)
        return 0;
    int my_rank = page_rank(t, d, self);
    for (int j = 0; j < SHM_MAX_SLOTS; j++)
        if (j != self && victim(t, d, j, my_rank, now, &c[n]))
            n++;
    for (int i = 1; i < n; i++) {      /* insertion sort: last to run first */
        cand_t x = c[i];
        int k = i;
        for (; k > 0 && runs_after(&x, &c[k - 1]); k--)
            c[k] = c[k - 1];
        c[k] = x;
    }
    for (int i = 0; i < n && asked < need; i++) {
        int raised;
        uint64_t want = page_umin(c[i].used, need - asked);
        uint64_t pending = mem_page_ask_slot_locked(t, c[i].slot, d, want, &raised);
        if (raised)
            page_nudge(t, c[i].slot);          /* serves now, not at its next poll */
        asked += page_umin(pending, c[i].used);
    }
    return asked;
}

/* ---- a job's own limit ----------------------------------------------------- */

/* What the slot of `p` would hold on its device with `out` paged-out bytes
 * back in, its context included (its limit bounds its contexts too,
 * mem_room_locked), when that is more than its limit; 0 when the limit
 * lets it all in.  Every word bounded: no overflow. */
static uint64_t over_own_limit(const mem_page_peer_t *p, uint64_t out)
{
    uint64_t need = p->used + page_umin(out, MEM_MAX_BYTES) + page_umin(p->ctx, MEM_MAX_BYTES);
    return need > p->limit ? need : 0;
}

/* Whether this process has said, since its memory last came back in, that
 * its limit keeps it out (process-wide: once per such wait, not per poll). */
static int limit_said;

/* Say once why this process waits: its limit keeps `out` bytes it paged out
 * from coming back on table device d, where it would hold `need`. */
static void say_limit(int d, uint64_t limit, uint64_t out, uint64_t need)
{
    if (util_xchg_relaxed(&limit_said, 1))
        return;
    util_warn("memory: device %d: this job's memory limit, %s, keeps its paged-out memory "
              "off the device: with its %s paged out back in it would hold %s; it leaves the "
              "GPU to its peers and waits, and runs again once its limit is raised to at "
              "least that (salus limit %d SIZE)", d, util_size(limit).s, util_size(out).s,
              util_size(need).s, (int)getpid());
}

/* Own slot's paging state on table device d: 0 and *p, or -1. */
static int self_peer(int d, mem_page_peer_t *p)
{
    return mem_page_peer(mem_table(), d, mem_self_slot(), p);
}

/* At a poll of the wait for the GPU: a process whose limit keeps what it
 * paged out off a device is left out of the candidates there
 * (page_blocked_locked) and would otherwise wait without a word. */
static void limit_check_waiting(const page_pager_t *pg)
{
    if (!mem_page_out_now())
        return;
    for (int d = 0; d < SHM_MAX_DEVICES; d++) {
        int ord = mem_ordinal_at(d);
        uint64_t out = ord >= 0 ? pg->paged_out_bytes(ord) : 0, need;
        mem_page_peer_t p;
        if (out && self_peer(d, &p) == 0 && (need = over_own_limit(&p, out)) != 0)
            say_limit(d, p.limit, out, need);
    }
}

/* ---- serving a request (the process asked) ------------------------------- */

void page_publish(const page_pager_t *pg)
{
    uint64_t copied = pg->copied_bytes ? pg->copied_bytes() : 0, sum = 0;
    for (int d = 0; d < SHM_MAX_DEVICES; d++) {
        int ord = mem_ordinal_at(d);
        if (ord >= 0)
            sum += pg->paged_out_bytes(ord);
    }
    mem_page_publish(sum, pg->copied_bytes != NULL, copied);
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
    for (int d = 0; d < SHM_MAX_DEVICES; d++)
        if (mem_ordinal_at(d) >= 0 && mem_waited_at(d))
            mem_wake_of(d);
}

/* A page-out asked of this job found its GPU work still running past the
 * bound (vmem's quiesce): it is skipped, not waited for. */
static void say_undrained(int d, uint64_t want)
{
    static int said;
    util_log_once(&said, UTIL_LOG_WARN, "memory: asked to page out %s on device %d, but this "
                  "job's GPU work had not ended after %llu ms (a kernel waiting for another "
                  "process: an NCCL collective whose peer waits for the GPU, a stream wait "
                  "that nobody writes): it is not paged out now, and may be asked again",
                  util_size(want).s, d, (unsigned long long)(vmem_quiesce_ns / 1000000));
}

void page_serve(void)
{
    const page_pager_t *pg = page_pager();
    if (!pg || !mem_registered() || !mem_active())
        return;
    if (!util_xchg_acq_rel(&told_waiting, 1))
        tell_askers();
    limit_check_waiting(pg);
    if (page_unsafe_begin() != 0)
        return;        /* a capture is open: the request waits for a poll after it */
    int d;
    uint64_t want = mem_page_request(&d);
    int ord = want && d >= 0 ? mem_ordinal_at(d) : -1;
    if (ord >= 0) {
        uint64_t freed = 0, t0 = util_now_ns();
        mem_page_flags_set(MEM_PAGE_OUT_BUSY);
        CUresult rc = pg->page_out(ord, want, &freed);
        mem_page_flags_clear(MEM_PAGE_OUT_BUSY);
        if (rc == CUDA_SUCCESS && freed)
            mem_page_counted(0, freed, util_now_ns() - t0);
        /* Less than asked because less was resident (it freed memory
         * since it was asked) is not a full host; nor is work that has not
         * ended (the asker asks again, or another). */
        if (rc == CUDA_ERROR_NOT_READY)
            say_undrained(d, want);
        else if (rc != CUDA_SUCCESS ||
            (freed < want && (!pg->resident_bytes || pg->resident_bytes(ord) > 0))) {
            static int said;
            mem_page_flags_set(MEM_PAGE_FULL);
            util_log_once(&said, UTIL_LOG_WARN, "memory: asked to page out %s on device %d, "
                          "paged out %s: the host staging bound (SALUS_SWAP_LIMIT, or the job's "
                          "memory cgroup) cannot hold all of it, or the host is full; peers "
                          "do not ask this job again until it pages in (not at all if it "
                          "paged nothing out)", util_size(want).s, d, util_size(freed).s);
        }
        page_publish(pg);
        mem_wake_of(d);
    }
    page_unsafe_end();
    if (want)
        mem_page_request_served(want);
}

/* ---- paging back in, before the process runs on a device ----------------- */

/* A page-in maps and copies synchronously, which a stream capture of the
 * process forbids (sched.h): it waits for the captures' end, 1 ms at a
 * time, for up to PAGE_CAPTURE_WAIT_NS, charged to this tenure; then it
 * goes on, said once (a capture whose thread waits for this one's launch
 * would never end).  1 when entered (page_unsafe_end after), else 0. */
static int unsafe_enter_waiting(void)
{
    static int said;
    uint64_t until = util_now_ns() + PAGE_CAPTURE_WAIT_NS;
    while (page_unsafe_begin() != 0) {
        if (util_now_ns() >= until) {
            util_log_once(&said, UTIL_LOG_WARN, "memory: this job's memory must page in "
                          "before it runs, and a stream capture of its has been open for "
                          "%llu ms: it pages in now, which may invalidate the capture",
                          (unsigned long long)(PAGE_CAPTURE_WAIT_NS / 1000000));
            return 0;
        }
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL);
    }
    return 1;
}

int page_in_once(const page_pager_t *pg, int ord)
{
    uint64_t restored = 0, t0 = util_now_ns();
    int entered = unsafe_enter_waiting();
    CUresult rc = pg->page_in(ord, &restored);
    if (entered)
        page_unsafe_end();
    if (rc != CUDA_SUCCESS)
        return -1;
    uint64_t now = util_now_ns();
    mem_page_counted(1, restored, now - t0);
    mem_page_resident_until(now + PAGE_RESIDENCY_FACTOR * (now - t0));
    return 0;
}

/* Ask peers for what the page-in lacks on table device d; the wake word's
 * value before asking, for the wait, and whether paging peers could make
 * the room at all (page_blocked_locked).  Nothing is asked or written
 * when the lock is out of reach (said): the page-in, uncounted then, is
 * tried again after the slice.  A job never runs with its memory out: its
 * kernels would fault on the unmapped chunks, fatal to its context. */
static void ask_for_page_in(int d, uint64_t bytes, uint32_t *seq, int *blocked)
{
    if (mem_page_lock(-1) != 0)
        return;
    *seq = mem_wake_seq_of(d);
    uint64_t room = mem_room_of_locked(d);
    if (bytes > room)
        page_ask_locked(d, bytes - room);
    *blocked = bytes > room && page_blocked_locked(mem_table(), d, mem_self_slot());
    mem_page_unlock();
}

void page_in_before_run(int device)
{
    const page_pager_t *pg = page_pager();
    if (!pg || !mem_registered() || device < 0 || device >= SHM_MAX_DEVICES || !mem_active())
        return;
    /* It runs: a request left from its wait is moot (whoever asked waits on
     * and asks again whom it finds waiting then). */
    mem_page_request_drop();
    util_store_release(&told_waiting, 0);
    int ord = mem_ordinal_at(device), said = 0, left = 0;
    if (ord < 0)
        return;
    uint64_t out = pg->paged_out_bytes(ord), start = util_now_ns();
    if (!out)
        return;
    mem_page_flags_set(MEM_PAGE_IN_BUSY);
    for (;;) {
        if (page_in_once(pg, ord) == 0)
            break;
        uint32_t seq = mem_wake_seq_of(device);
        int blocked = 0;
        mem_page_peer_t me;
        uint64_t need = self_peer(device, &me) == 0 ? over_own_limit(&me, out) : 0;
        if (need) {
            /* Its own limit keeps it out: no peer's page-out could help.
             * It leaves the GPU (and the queue, at every slice: a grant
             * would be held idle) until the limit is raised. */
            say_limit(device, me.limit, out, need);
            page_give_up(ord);
        } else {
            if (!said++)
                util_info("memory: device %d: %s to page in before this job runs; waiting for "
                          "peers to page out", device, util_size(out).s);
            ask_for_page_in(device, out, &seq, &blocked);
            /* Memory only the jobs behind it can give back, by running: the
             * GPU goes to them (once per wait), and the scheduler takes
             * this process back once it is in (sched_acquire). */
            if (blocked && !left++)
                page_give_up(ord);
        }
        mem_wake_wait(device, seq, PAGE_SLICE_NS);
        out = pg->paged_out_bytes(ord);
        if (!out)
            break;
        /* The lease went to another meanwhile (a waiter took it as idle,
         * or the give-up above handed it on): this wait is no tenure's any
         * more.  Waiting on, unqueued, it would ask nobody (it runs before
         * no one) and serve no request, while the new holder runs for good.
         * It goes back to the wait for the GPU (sched_acquire), where it is
         * asked and granted again, and pages in at that tenure. */
        if (!page_held(device))
            break;
    }
    mem_page_flags_clear(MEM_PAGE_IN_BUSY | MEM_PAGE_FULL);
    if (!pg->paged_out_bytes(ord))
        util_store_relaxed(&limit_said, 0);        /* a later limit's wait is said again */
    page_publish(pg);
    if (said)
        util_info("memory: device %d: paged in after %llu ms", device,
                  (unsigned long long)((util_now_ns() - start) / 1000000));
}

/* ---- the scheduler's candidates -------------------------------------------- */

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
int page_keep_locked(shm_table_t *t, int device, int slot)
{
    int self = mem_self_slot();
    mem_page_peer_t me, p;
    if (!mem_registered() || !t || t != mem_table() || device < 0 ||
        device >= SHM_MAX_DEVICES || slot == self ||
        (mem_page_flags() & (MEM_PAGE_ABLE | MEM_PAGE_FULL)) != MEM_PAGE_ABLE ||
        self_peer(device, &me) != 0 || util_now_ns() >= me.resident_until)
        return 0;
    if (mem_ordinal_at(device) < 0 || mem_page_peer(t, device, slot, &p) != 0)
        return 0;
    uint64_t need = p.swapped_out;
    if (need > MEM_MAX_BYTES)
        return 0;
    if (!need && !p.run_peak) {
        mem_page_dev_t f;
        uint64_t seen = mem_page_dev_locked(t, device, self, &f) == 0 ? f.largest_seen : 0;
        need = seen > p.used ? seen - p.used : 0;
    }
    return need > 0 && need > mem_room_of_locked(device);
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
 * checked.  Every waiter is asked at every boundary of a holder that
 * keeps the GPU: one with nothing out is answered from one word, before
 * the liveness test (a system call) of the full look. */
int page_blocked_locked(shm_table_t *t, int device, int slot)
{
    mem_page_peer_t p;
    mem_page_dev_t f;
    if (!t || device < 0 || device >= SHM_MAX_DEVICES || slot < 0 || slot >= SHM_MAX_SLOTS ||
        mem_page_peer_out(t, slot) == 0 || mem_page_peer(t, device, slot, &p) != 0)
        return 0;
    uint64_t out = p.swapped_out;
    if (!out || out > MEM_MAX_BYTES)
        return 0;
    if (mem_page_dev_locked(t, device, slot, &f) != 0)
        return 0;
    if (over_own_limit(&p, out))
        return 1;
    uint64_t movable = movable_but(t, device, slot, NULL);
    uint64_t fixed = f.held > movable ? f.held - movable : 0;
    return p.used + out + fixed > f.effective;
}

int page_is_out(void)
{
    return mem_page_out_now() != 0;
}

int page_in_fits(int device)
{
    const page_pager_t *pg = page_pager();
    if (!pg || !mem_registered() || device < 0 || device >= SHM_MAX_DEVICES || !mem_active())
        return 1;
    int ord = mem_ordinal_at(device);
    uint64_t out = ord >= 0 ? pg->paged_out_bytes(ord) : 0;
    mem_page_peer_t me;
    if (!out)
        return 1;
    if (self_peer(device, &me) != 0 || over_own_limit(&me, out))
        return 0;
    if (mem_page_lock(device) != 0)
        return 0;
    uint64_t room = mem_room_of_locked(device);
    mem_page_unlock();
    return out <= room;
}
