/*
 * proc.c - the process's scheduler state that every file of src/sched
 * shares, at the bottom of the module: the process record, the driver
 * contract and the clock (the two seams), the process's gate word, and
 * failing open.
 *
 * Gate words.  A thread's sched_thread_t points at
 *   sched_gate_unreg (UNREG)  until its first launch in the slow path, and
 *                             whenever its keeper wants to see its next
 *                             launch there;
 *   proc_gate                 from then on, which is
 *     sched_gate_unreg          until the process registers,
 *     its slot's gate word      once registered: lease.c keeps it OPEN,
 *                               CONTENDED or CLOSED under the table lock,
 *     word_open (OPEN)          when scheduling failed open,
 *     word_suspended (not fast) while suspended (launches retry the lock),
 *                               (the table's lock timed out), while the
 *                               full table left it no slot (they retry the
 *                               claim), or at exit.
 * proc_gate is stored with release after the slot is set up and read with
 * acquire in the slow path.  A thread whose pointer lags (still the slot's
 * gate after a fail-open, say) reaches the slow path the next time that gate
 * is not OPEN, reads p->state with acquire, behaves, and catches up.
 *
 * The driver pointer and the clock are stored with release and loaded with
 * acquire; the enabled flag is stored after the driver pointer, so a thread
 * that sees the module enabled sees its driver.  (The count of captures in
 * progress is drain.c's, beside the synchronizes it orders with.)  No lock
 * here.
 */
#include "sched/sched_int.h"

#include <errno.h>

const uint32_t sched_gate_unreg = SCHED_GATE_UNREG;
static const uint32_t word_open = SCHED_GATE_OPEN;
/* Suspended: not fast, so that launches come to the slow path, where the
 * process retries the lock (at most once per backoff): a program that never
 * syncs comes back too. */
static const uint32_t word_suspended = SCHED_GATE_UNREG;
static const uint32_t *proc_gate = &sched_gate_unreg;

sched_proc_t sched_p = { .mu = PTHREAD_MUTEX_INITIALIZER, .slot = SCHED_NO_SLOT };

static const drv_t *drv;
static drv_t drv_copy;                    /* the caller's table may not outlive init */
static int enabled;
static sched_clock_fn clock_fn = util_now_ns;

/* ---- the seams ------------------------------------------------------------ */

void sched_init(const drv_t *d)
{
    if (d) {
        drv_copy = *d;
        util_store_release(&drv, &drv_copy);
    }
    util_store_release(&enabled, 1);
}

const drv_t *sched_drv(void)
{
    return util_load_acquire(&drv);
}

int sched_enabled(void)
{
    return util_load_acquire(&enabled);
}

uint64_t sched_now(void)
{
    return util_load_relaxed(&clock_fn)();
}

/* A clock read costs 20-50 ns (CLOCK_MONOTONIC through the vDSO; 49 on a
 * virtual machine), the coarse one 6: where a timestamp only meets
 * thresholds of milliseconds (a sync's start for a blocked holder, a
 * quantum, a slice, "no sync for a second"), the coarse one does, never
 * later than the precise one's reading.  A test's clock serves both. */
uint64_t sched_now_coarse(void)
{
    sched_clock_fn fn = util_load_relaxed(&clock_fn);
    return fn == util_now_ns ? util_coarse_ns() : fn();
}

void sched_set_clock(sched_clock_fn fn)
{
    util_store_relaxed(&clock_fn, fn ? fn : util_now_ns);
}

/* ---- the process's gate ---------------------------------------------------- */

const uint32_t *sched_proc_gate(void)
{
    return util_load_acquire(&proc_gate);
}

void sched_set_proc_gate(const uint32_t *gate)
{
    util_store_release(&proc_gate, gate ? gate : &sched_gate_unreg);
}

void sched_fail_open(sched_proc_t *p, const char *why)
{
    static int said;
    util_log_once(&said, UTIL_LOG_ERROR, "GPU time slicing is off for this process: %s; "
                  "its launches go straight to the driver", why);
    util_store_release(&p->state, SCHED_P_OPEN);
    sched_set_proc_gate(&word_open);
}

void sched_no_slot(sched_proc_t *p, shm_table_t *t)
{
    uint64_t now = sched_now();
    p->t = t;
    p->slot = -1;
    util_store_relaxed(&p->suspended_ns, now);
    util_store_relaxed(&p->backoff_ns, SCHED_RETRY_MIN_NS);
    util_store_relaxed(&p->retry_ns, now + SCHED_RETRY_MIN_NS);
    util_store_release(&p->state, SCHED_P_NOSLOT);
    sched_set_proc_gate(&word_suspended);        /* launches come to the slow path */
}

void sched_lock_failed(sched_proc_t *p, int err)
{
    static int said;
    sched_pstate_t active = SCHED_P_ACTIVE;
    if (err != -ETIMEDOUT) {
        sched_fail_open(p, "the table's lock cannot be taken");
        return;
    }
    uint64_t now = sched_now();
    util_store_relaxed(&p->suspended_ns, now);
    util_store_relaxed(&p->backoff_ns, SCHED_RETRY_MIN_NS);
    util_store_relaxed(&p->retry_ns, now + SCHED_RETRY_MIN_NS);
    if (!__atomic_compare_exchange_n(&p->state, &active, SCHED_P_SUSPENDED, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return;                               /* exiting, open, or suspended already */
    sched_set_proc_gate(&word_suspended);
    util_log_once(&said, UTIL_LOG_WARN, "GPU time slicing is suspended for this process: a "
                  "peer has held the table's lock for seconds; its launches go straight to "
                  "the driver until the lock is usable again (it retries at its syncs and launches)");
}

/* ---- the hooks of the modules beside this one (sched.h) -------------------
 * Each pointer is stored with release and loaded with acquire on its own:
 * a hook is a plain function of intercept's, with no state of ours. */
static void (*hook_boundary)(void);
static void (*hook_waiting)(void);
static void (*hook_tenure)(int d);
static int (*hook_paged_out)(void);
static int (*hook_fits)(int d);
static int (*hook_keep)(shm_table_t *t, int d, int slot);
static int (*hook_blocked)(shm_table_t *t, int d, int slot);
static uint64_t (*hook_tick)(void);

void sched_set_hooks(const sched_hooks_t *h)
{
    util_store_release(&hook_boundary, h ? h->boundary : NULL);
    util_store_release(&hook_waiting, h ? h->waiting : NULL);
    util_store_release(&hook_tenure, h ? h->tenure : NULL);
    util_store_release(&hook_paged_out, h ? h->paged_out : NULL);
    util_store_release(&hook_fits, h ? h->fits : NULL);
    util_store_release(&hook_keep, h ? h->keep : NULL);
    util_store_release(&hook_blocked, h ? h->blocked : NULL);
    util_store_release(&hook_tick, h ? h->tick : NULL);
}

uint64_t sched_hook_tick(void)
{
    uint64_t (*fn)(void) = util_load_acquire(&hook_tick);
    return fn ? fn() : 0;
}

void sched_hook_boundary(void)
{
    void (*fn)(void) = util_load_acquire(&hook_boundary);
    if (fn)
        fn();
}

void sched_hook_waiting(void)
{
    void (*fn)(void) = util_load_acquire(&hook_waiting);
    if (fn)
        fn();
}

void sched_hook_tenure(int d)
{
    void (*fn)(int) = util_load_acquire(&hook_tenure);
    if (fn)
        fn(d);
}

int sched_hook_paged_out(void)
{
    int (*fn)(void) = util_load_acquire(&hook_paged_out);
    return fn ? fn() : 0;
}

int sched_hook_fits(int d)
{
    int (*fn)(int) = util_load_acquire(&hook_fits);
    return fn ? fn(d) : 1;
}

int sched_hook_keep_locked(shm_table_t *t, int d, int slot)
{
    int (*fn)(shm_table_t *, int, int) = util_load_acquire(&hook_keep);
    return fn ? fn(t, d, slot) : 0;
}

int sched_hook_blocked_locked(shm_table_t *t, int d, int slot)
{
    int (*fn)(shm_table_t *, int, int) = util_load_acquire(&hook_blocked);
    return fn ? fn(t, d, slot) : 0;
}

/* At exit: launches made by exit handlers pass. */
void sched_proc_gate_open(void)
{
    sched_set_proc_gate(&word_open);
}
