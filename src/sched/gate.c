/*
 * gate.c - the process's side of scheduling: the gate pointer, registration,
 * the per-thread launch counts, the launch slow path, the sync hooks (the
 * detector's input), the iteration hint, fork and exit.
 *
 * Divided into: globals and seams; the thread registry; registration and
 * failing open; the launch slow path; syncs and hints; fork and exit.
 *
 * Gate pointers.  proc_gate is the process's; each thread's sched_gate_tls
 * follows it, updated by the thread itself in its slow path.  Both point at
 *   word_unreg (UNREG)   until the process registers (its first launch or
 *                        context), and a thread's until its first launch
 *                        (the slow path registers the thread's counts);
 *   its slot's gate      once registered: lease.c keeps it OPEN, CONTENDED
 *                        or CLOSED under the table lock;
 *   word_open (OPEN)     when scheduling failed open, or at exit.
 * proc_gate is stored with release after the slot is set up.  A thread whose
 * pointer lags (still the slot's gate after a fail-open, say) reaches the
 * slow path the next time that gate is not OPEN, reads p->state with
 * acquire, behaves, and catches up.
 *
 * Locks: p->mu guards the process's bookkeeping (config, detector, kernel
 * sequence, iteration timing, registration); reg_mu guards the thread
 * registry (reg_live, reg_retired).  Order: p->mu, then reg_mu, then the
 * table lock; nothing sleeps holding p->mu or reg_mu.  Thread counters are
 * written by their owner only (a load and a volatile store, sched.h) and
 * summed under reg_mu with relaxed loads: a sum taken at a sync is exact for
 * the syncing thread and recent for the others, which is what a token needs.
 */
#include "sched/sched_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- globals and seams ------------------------------------------------------- */

__thread sched_thread_t sched_th __attribute__((tls_model("initial-exec")));

static uint32_t word_unreg = SCHED_GATE_UNREG;
static uint32_t word_open = SCHED_GATE_OPEN;
static uint32_t *proc_gate = &word_unreg;
__thread uint32_t *sched_gate_tls __attribute__((tls_model("initial-exec"))) = &word_unreg;

sched_proc_t sched_p = { .mu = PTHREAD_MUTEX_INITIALIZER, .slot = SCHED_NO_SLOT };
sched_driver_t sched_drv;
static int enabled;                       /* sched_init was called: not dormant */
static sched_clock_fn clock_fn = util_now_ns;

uint64_t sched_now(void)
{
    return __atomic_load_n(&clock_fn, __ATOMIC_RELAXED)();
}

void sched_set_clock(sched_clock_fn fn)
{
    __atomic_store_n(&clock_fn, fn ? fn : util_now_ns, __ATOMIC_RELAXED);
}

void sched_init(const sched_driver_t *drv)
{
    if (drv) {
        __atomic_store_n(&sched_drv.ctx_device, drv->ctx_device, __ATOMIC_RELEASE);
        __atomic_store_n(&sched_drv.ctx_synchronize, drv->ctx_synchronize, __ATOMIC_RELEASE);
        __atomic_store_n(&sched_drv.device_uuid, drv->device_uuid, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&enabled, 1, __ATOMIC_RELEASE);
}

int sched_current_ordinal(void)
{
    int (*fn)(int *) = __atomic_load_n(&sched_drv.ctx_device, __ATOMIC_ACQUIRE);
    if (!fn)
        return 0;
    int d = -1;
    if (fn(&d) != 0 || d < 0 || d >= SHM_MAX_DEVICES)
        return -1;
    return d;
}

static void bump_activity(sched_slot_t *me)
{
    __atomic_store_n(&me->activity, __atomic_load_n(&me->activity, __ATOMIC_RELAXED) + 1,
                     __ATOMIC_RELAXED);
}

/* At an iteration boundary: until the next launch or sync the owner is at
 * rest between iterations, which waiters may treat as idle much sooner than
 * a pause inside an iteration (wait.c). */
static void mark_rest(sched_slot_t *me)
{
    __atomic_store_n(&me->rest_activity, __atomic_load_n(&me->activity, __ATOMIC_RELAXED),
                     __ATOMIC_RELAXED);
}

/* ---- the thread registry ---------------------------------------------------- */

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static sched_thread_t *reg_live;          /* registered threads */
static sched_token_t reg_retired;         /* sums of exited threads */
static pthread_key_t reg_key;
static int reg_key_ok;
static pthread_once_t reg_once = PTHREAD_ONCE_INIT;

static void fork_child(void);

/* Thread exit: fold the counts into reg_retired.  A later launch by the same
 * thread (another TLS destructor) registers it again from zero. */
static void thread_exit(void *arg)
{
    sched_thread_t *th = arg;
    pthread_mutex_lock(&reg_mu);
    if (th->registered) {
        reg_retired.launches += th->launches;
        reg_retired.hash += th->hash;
        *th->pprev = th->next;
        if (th->next)
            th->next->pprev = th->pprev;
        th->registered = 0;
        th->launches = 0;
        th->hash = 0;
    }
    pthread_mutex_unlock(&reg_mu);
    sched_gate_tls = &word_unreg;        /* a later launch registers it again */
}

static void reg_setup(void)
{
    reg_key_ok = pthread_key_create(&reg_key, thread_exit) == 0;
    if (pthread_atfork(NULL, NULL, fork_child) != 0)
        util_warn("cannot register a fork handler: a forked child may inherit its "
                  "parent's scheduling state");
}

static void thread_register(void)
{
    pthread_once(&reg_once, reg_setup);
    sched_thread_t *th = &sched_th;
    pthread_mutex_lock(&reg_mu);
    if (!th->registered) {
        th->next = reg_live;
        th->pprev = &reg_live;
        if (reg_live)
            reg_live->pprev = &th->next;
        reg_live = th;
        th->registered = 1;
    }
    pthread_mutex_unlock(&reg_mu);
    if (reg_key_ok)
        pthread_setspecific(reg_key, th);
}

/* The process's launch count and hash sum. */
static sched_token_t collect(void)
{
    pthread_mutex_lock(&reg_mu);
    sched_token_t s = reg_retired;
    for (sched_thread_t *th = reg_live; th; th = th->next) {
        s.launches += __atomic_load_n(&th->launches, __ATOMIC_RELAXED);
        s.hash += __atomic_load_n(&th->hash, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&reg_mu);
    return s;
}

/* ---- registration and failing open ------------------------------------------ */

static void at_exit(void);

void sched_fail_open(sched_proc_t *p, const char *why)
{
    static int said;
    util_log_once(&said, UTIL_LOG_ERROR, "GPU time slicing is off for this process: %s; "
                  "its launches go straight to the driver", why);
    __atomic_store_n(&p->state, SCHED_P_OPEN, __ATOMIC_RELEASE);
    __atomic_store_n(&proc_gate, &word_open, __ATOMIC_RELEASE);
}

/* Under p->mu: claim the slot and set up its area. */
static void register_locked(sched_proc_t *p)
{
    sched_config_read(&p->cfg);
    if (p->det.mode == SCHED_DET_AUTO && p->cfg.iter_sync_every)
        p->det.mode = SCHED_DET_EVERY;
    shm_table_t *t = shm_process_table();
    if (!t) {
        sched_fail_open(p, "the arbitration table cannot be used (see above)");
        return;
    }
    shm_set_hooks(t, SHM_AREA_SCHED, sched_reap_hook, sched_repair_hook, NULL);
    int slot = shm_self(t);
    if (slot < 0) {
        sched_fail_open(p, "it has no slot in the arbitration table");
        return;
    }
    if (shm_lock(t) != 0) {
        sched_fail_open(p, "the table's lock cannot be taken");
        return;
    }
    sched_slot_t *me = sched_slot(t, slot);
    me->priority = p->cfg.priority;
    me->declared = p->cfg.iterations;
    __atomic_store_n(&me->devset, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&me->gate, SCHED_GATE_OPEN, __ATOMIC_RELAXED);
    __atomic_store_n(&me->magic, SCHED_SLOT_MAGIC, __ATOMIC_RELEASE);
    shm_unlock(t);

    p->t = t;
    p->slot = slot;
    p->gen = shm_slot_gen(t, slot);
    p->me = me;
    p->devset = 0;
    p->last_boundary_ns = p->registered_ns = sched_now();
    p->waited_mark_ns = 0;
    if (!p->handlers_made) {
        p->handlers_made = 1;
        if (atexit(at_exit) != 0)
            util_warn("cannot register an exit handler: peers take this process's "
                      "lease back only when they see it dead");
    }
    __atomic_store_n(&p->state, SCHED_P_ACTIVE, __ATOMIC_RELEASE);
    __atomic_store_n(&proc_gate, &me->gate, __ATOMIC_RELEASE);
    util_info("scheduler: table %s, slot %d, priority %d, policy %s (the first process "
              "on a device fixes it)", shm_table_name(t), slot, p->cfg.priority,
              sched_policy_names[p->cfg.policy]);
}

/* The process's state once registration was tried (UNREG: still dormant). */
static sched_pstate_t ensure_registered(sched_proc_t *p)
{
    sched_pstate_t st = __atomic_load_n(&p->state, __ATOMIC_ACQUIRE);
    if (st != SCHED_P_UNREG || !__atomic_load_n(&enabled, __ATOMIC_ACQUIRE))
        return st;
    pthread_mutex_lock(&p->mu);
    if (p->state == SCHED_P_UNREG)
        register_locked(p);
    pthread_mutex_unlock(&p->mu);
    return __atomic_load_n(&p->state, __ATOMIC_ACQUIRE);
}

static void device_uuid(int ordinal, uint8_t uuid[16])
{
    int (*fn)(int, unsigned char *) = __atomic_load_n(&sched_drv.device_uuid, __ATOMIC_ACQUIRE);
    memset(uuid, 0, 16);
    if (!fn || fn(ordinal, uuid) != 0)
        snprintf((char *)uuid, 16, "ordinal:%d", ordinal);
}

/* The table device of a CUDA ordinal, found by uuid: on first use the
 * process joins it (set up if new, in its devset, vtime lifted, gate
 * updated).  -1 when unknown (failed open, all table devices taken). */
static int table_device(sched_proc_t *p, int ordinal)
{
    static int said_full;
    if (ordinal < 0 || ordinal >= SHM_MAX_DEVICES)
        return -1;
    int v = __atomic_load_n(&p->dev_index[ordinal], __ATOMIC_ACQUIRE);
    if (v > 0)
        return v - 1;
    uint8_t uuid[16];
    device_uuid(ordinal, uuid);                 /* a driver call: outside the lock */
    if (shm_lock(p->t) != 0) {
        sched_fail_open(p, "the table's lock cannot be taken");
        return -1;
    }
    int d = sched_dev_find_locked(p->t, uuid, &p->cfg);
    if (d >= 0) {
        sched_slot_t *me = p->me;
        __atomic_store_n(&me->devset, me->devset | (1u << d), __ATOMIC_RELAXED);
        sched_vtime_lift_locked(p->t, d, p->slot, sched_now());
        sched_gate_update_locked(p->t, p->slot);
    }
    shm_unlock(p->t);
    if (d < 0) {
        util_log_once(&said_full, UTIL_LOG_ERROR, "table %s knows %d devices already; "
                      "launches on device %d are not scheduled", shm_table_name(p->t),
                      SHM_MAX_DEVICES, ordinal);
        return -1;
    }
    __atomic_or_fetch(&p->devset, 1u << d, __ATOMIC_RELAXED);
    __atomic_store_n(&p->dev_index[ordinal], (int8_t)(d + 1), __ATOMIC_RELEASE);
    return d;
}

/* ---- the launch slow path ------------------------------------------------------
 * Reached when the gate is not OPEN: register, find the launch's device,
 * join it, then either hold (bookkeeping while contended) or acquire. */

void sched_launch_slow(const void *work)
{
    sched_proc_t *p = &sched_p;
    if (UTIL_UNLIKELY(!sched_th.registered))
        thread_register();
    sched_pstate_t st = ensure_registered(p);
    sched_gate_tls = __atomic_load_n(&proc_gate, __ATOMIC_ACQUIRE);
    if (st != SCHED_P_ACTIVE)
        return;
    int d = table_device(p, sched_current_ordinal());
    if (d < 0)
        return;                      /* no context (the driver will refuse it), or open */
    bump_activity(p->me);
    sched_dev_t *dev = sched_dev(p->t, d);
    if (__atomic_load_n(&dev->lease, __ATOMIC_ACQUIRE) == sched_lease_of(p->slot, p->gen)) {
        if (__atomic_load_n(&p->me->gate, __ATOMIC_RELAXED) != SCHED_GATE_OPEN)
            sched_holder_launch(p, d, (uint64_t)(uintptr_t)work);
        return;
    }
    sched_acquire(p, d);
}

void sched_note_context(int device)
{
    sched_proc_t *p = &sched_p;
    if (ensure_registered(p) != SCHED_P_ACTIVE)
        return;
    table_device(p, device >= 0 ? device : sched_current_ordinal());
}

/* ---- syncs and hints -------------------------------------------------------------- */

/* Under p->mu: an iteration ended at `now`; its running time excludes the
 * time spent waiting for the lease. */
static void iteration_done(sched_proc_t *p, uint64_t now)
{
    sched_slot_t *me = p->me;
    uint64_t waited = __atomic_load_n(&me->waited_ns, __ATOMIC_RELAXED);
    if (p->last_boundary_ns && now > p->last_boundary_ns) {
        uint64_t dt = now - p->last_boundary_ns, w = waited - p->waited_mark_ns;
        p->iter_sum_ns += dt > w ? dt - w : 0;
        p->iter_count++;
        __atomic_store_n(&me->iter_ns, p->iter_sum_ns / p->iter_count, __ATOMIC_RELAXED);
    }
    p->last_boundary_ns = now;
    p->waited_mark_ns = waited;
    __atomic_store_n(&me->iterations, p->det.iterations, __ATOMIC_RELAXED);
    __atomic_store_n(&me->boundary_ns, now, __ATOMIC_RELAXED);
}

/* Under p->mu: the detector found the loop's period (first, or after a
 * phase change): the time since the last boundary spans learning, not one
 * iteration, and is not a sample; the next full iteration is. */
static void iteration_restart(sched_proc_t *p, int boundary, uint64_t now)
{
    p->last_boundary_ns = boundary ? now : 0;
    p->waited_mark_ns = __atomic_load_n(&p->me->waited_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&p->me->iterations, p->det.iterations, __ATOMIC_RELAXED);
}

void sched_sync_begin(void)
{
    sched_proc_t *p = &sched_p;
    if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != SCHED_P_ACTIVE || sched_th.in_sync)
        return;
    sched_th.in_sync = 1;
    __atomic_add_fetch(&p->me->in_sync, 1, __ATOMIC_RELAXED);
}

void sched_sync_end(sched_sync_kind_t kind, int ok)
{
    (void)kind;                      /* every kind of host wait is a candidate */
    sched_proc_t *p = &sched_p;
    if (sched_th.in_sync) {
        sched_th.in_sync = 0;
        __atomic_sub_fetch(&p->me->in_sync, 1, __ATOMIC_RELAXED);
    }
    if (!ok || __atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != SCHED_P_ACTIVE)
        return;
    uint64_t now = sched_now();
    pthread_mutex_lock(&p->mu);
    sched_token_t sum = collect();
    sched_token_t tok = { sum.launches - p->last.launches, sum.hash - p->last.hash };
    p->last = sum;
    int boundary = sched_detect_feed(&p->det, tok);
    util_debug("sync: %llu launches since the last, period %d, %s", (unsigned long long)tok.launches,
               p->det.period, boundary ? "iteration boundary" : "inside an iteration");
    if (p->det.relocked)
        iteration_restart(p, boundary, now);
    else if (boundary)
        iteration_done(p, now);
    p->last_sync_ns = now;
    pthread_mutex_unlock(&p->mu);
    bump_activity(p->me);
    if (boundary)
        mark_rest(p->me);
    if (__atomic_load_n(&p->me->gate, __ATOMIC_RELAXED) != SCHED_GATE_OPEN)
        sched_yield_point(p, boundary, 1);
}

SALUS_EXPORT void salus_iteration_end(void)
{
    sched_proc_t *p = &sched_p;
    pthread_mutex_lock(&p->mu);
    sched_detect_hint(&p->det);
    int active = __atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == SCHED_P_ACTIVE;
    if (active)
        iteration_done(p, sched_now());
    pthread_mutex_unlock(&p->mu);
    if (!active)
        return;
    bump_activity(p->me);
    mark_rest(p->me);
    if (__atomic_load_n(&p->me->gate, __ATOMIC_RELAXED) != SCHED_GATE_OPEN)
        sched_yield_point(p, 1, 0);
}

/* ---- fork and exit ---------------------------------------------------------------
 * The child of fork() is a new process: no slot, no lease, no registered
 * thread but the one that forked, counts from zero.  Its locks may have been
 * held by threads that do not exist in it: they are made anew. */

static void fork_child(void)
{
    sched_proc_t *p = &sched_p;
    pthread_mutex_init(&reg_mu, NULL);
    reg_live = NULL;
    memset(&reg_retired, 0, sizeof reg_retired);
    sched_th.registered = 0;
    sched_th.in_sync = 0;
    sched_th.launches = 0;
    sched_th.hash = 0;
    sched_th.next = NULL;
    sched_th.pprev = NULL;

    pthread_mutex_init(&p->mu, NULL);
    p->state = SCHED_P_UNREG;
    p->t = NULL;
    p->slot = SCHED_NO_SLOT;
    p->gen = 0;
    p->me = NULL;
    p->devset = 0;
    memset(p->dev_index, 0, sizeof p->dev_index);
    sched_detect_init(&p->det, SCHED_DET_AUTO);
    sched_kseq_reset(&p->kseq);
    memset(&p->last, 0, sizeof p->last);
    p->last_boundary_ns = p->waited_mark_ns = 0;
    p->iter_sum_ns = p->iter_count = 0;
    p->last_sync_ns = p->registered_ns = 0;
    proc_gate = &word_unreg;
    sched_gate_tls = &word_unreg;
}

static void at_exit(void)
{
    sched_proc_t *p = &sched_p;
    sched_pstate_t active = SCHED_P_ACTIVE;
    if (!__atomic_compare_exchange_n(&p->state, &active, SCHED_P_EXITING, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return;
    __atomic_store_n(&proc_gate, &word_open, __ATOMIC_RELEASE);
    sched_gate_tls = &word_open;
    sched_release_all(p);
}
