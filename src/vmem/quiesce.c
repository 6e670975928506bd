/*
 * quiesce.c - waiting for the program's work before a page-out, bounded.
 *
 * A page-out copies the program's memory once the work the program queued
 * has ended: a context synchronize.  That call waits as long as the work
 * does, and some work never ends while this process waits: a kernel of an
 * NCCL collective whose peer is held at its gate, a cuStreamWaitValue32
 * that nobody writes.  Made on the page-out's thread under the allocator's
 * lock, it hung the page-out and, behind the lock, every allocation, free
 * and pointer query of the process.  So the synchronize runs on a thread of
 * its own (one per process, started at the first page-out), and the
 * page-out waits for its answer up to vmem_quiesce_ns holding no lock of
 * the allocator's: past that it is skipped (CUDA_ERROR_NOT_READY; its
 * caller says so).  The thread waits on; a page-out asked while it still
 * waits is skipped at once, without waiting again.
 *
 * Divided into: the waiter thread; the request.
 *
 * Lock: q.mu guards every field of q; the waiter thread holds nothing
 * while it is in the driver.  A child of fork() has neither the waiter
 * thread nor, should a parent's thread have held it, a usable q.mu: the
 * first call in a process (made_here) makes both anew.
 */
#include "vmem/vmem_int.h"
#include "util/util.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

uint64_t vmem_quiesce_ns = VMEM_QUIESCE_NS;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t asked_cv, done_cv;   /* a request came; an answer came */
    int started;                        /* the waiter thread runs */
    CUcontext ctx;                      /* the context of request `asked` */
    uint64_t asked, done;               /* requests made; the last one answered */
    CUresult rc;                        /* request done's answer */
} q = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* ---- the waiter thread --------------------------------------------------------- */

static CUresult sync_in(CUcontext ctx)
{
    CUcontext was;
    CUresult rc = vmem_drv()->ctx_push_current(ctx);
    if (rc == CUDA_SUCCESS) {
        rc = vmem_drv()->ctx_synchronize();
        vmem_drv()->ctx_pop_current(&was);
    }
    return rc;
}

static void *waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&q.mu);
    for (;;) {
        while (q.done == q.asked)
            pthread_cond_wait(&q.asked_cv, &q.mu);
        uint64_t gen = q.asked;
        CUcontext ctx = q.ctx;
        pthread_mutex_unlock(&q.mu);
        CUresult rc = sync_in(ctx);
        pthread_mutex_lock(&q.mu);
        q.rc = rc;
        q.done = gen;
        pthread_cond_broadcast(&q.done_cv);
    }
    return NULL;
}

/* Under q.mu: the waiter of this process, started if it is not (its
 * signals blocked: the program's handlers run on the program's threads).
 * 0, or -1 when no thread can be made. */
static int waiter_started(void)
{
    if (q.started)
        return 0;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&q.asked_cv, &ca);
    pthread_cond_init(&q.done_cv, &ca);
    pthread_condattr_destroy(&ca);
    q.asked = q.done = 0;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t ta;
    pthread_attr_init(&ta);
    pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int err = pthread_create(&t, &ta, waiter, NULL);
    pthread_attr_destroy(&ta);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err != 0)
        return -1;
    pthread_setname_np(t, "salus-quiesce");
    q.started = 1;
    return 0;
}

/* ---- the request ------------------------------------------------------------------- */

/* The state is this process's: made anew by the first call in it, once,
 * whichever thread comes first (the others wait for it; q_ready is
 * published after the lock is made, with release). */
static pid_t q_claim, q_ready;

static void made_here(void)
{
    pid_t self = getpid();
    if (util_load_acquire(&q_ready) == self)
        return;
    if (util_xchg_acq_rel(&q_claim, self) != self) {
        pthread_mutex_init(&q.mu, NULL);
        q.started = 0;
        util_store_release(&q_ready, self);
    }
    while (util_load_acquire(&q_ready) != self)
        util_cpu_relax();
}

static struct timespec deadline_of(uint64_t ns)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t at = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + ns;
    return (struct timespec){ (time_t)(at / 1000000000ull), (long)(at % 1000000000ull) };
}

CUresult vmem_quiesce(CUcontext ctx)
{
    made_here();
    pthread_mutex_lock(&q.mu);
    if (waiter_started() != 0) {
        static int said;
        pthread_mutex_unlock(&q.mu);
        util_log_once(&said, UTIL_LOG_WARN, "memory: no thread can be made to wait for this "
                      "job's GPU work before a page-out: page-outs wait for it on their own "
                      "thread, without a bound");
        return sync_in(ctx);
    }
    CUresult rc = CUDA_ERROR_NOT_READY;
    if (q.done != q.asked)
        goto out_unlock;              /* the last one still waits: skipped at once */
    q.ctx = ctx;
    uint64_t gen = ++q.asked;
    pthread_cond_signal(&q.asked_cv);
    struct timespec until = deadline_of(vmem_quiesce_ns);
    while (q.done != gen)
        if (pthread_cond_timedwait(&q.done_cv, &q.mu, &until) != 0 && q.done != gen)
            goto out_unlock;          /* past the bound: the thread waits on */
    rc = q.rc;
out_unlock:
    pthread_mutex_unlock(&q.mu);
    return rc;
}

int vmem_quiesce_waiting(void)
{
    made_here();
    pthread_mutex_lock(&q.mu);
    int busy = q.started && q.done != q.asked;
    pthread_mutex_unlock(&q.mu);
    return busy;
}

