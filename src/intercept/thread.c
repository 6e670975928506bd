/*
 * thread.c - the per-thread blocks of libsalus (intercept.h): registration
 * on a thread's first driver call, the active list and the folds a sync
 * asks for, snapshots for the report, thread exit and fork.
 *
 * Divided into: the registry; the gated path and the fold; snapshots; thread
 * exit; fork.
 *
 * registry_lock guards live, spare, retired, pending, armed, the active
 * list and every block's gate pointer, fold marks and links (intercept.h
 * says who writes what).  Lock order (util.h): the scheduler's bookkeeping
 * lock, then registry_lock (a fold runs under the former); nothing is taken
 * under registry_lock but the allocator's.
 *
 * A process that never calls the driver never registers: no allocation, no
 * report.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include "intercept/intercept.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Where every thread starts; its counts are never summed. */
hook_block_t hook_unregistered = { .s = { .gate = &sched_gate_unreg } };

/* The initial value is an address: the dynamic linker relocates the TLS
 * image before it copies it for the main thread and every new one. */
__thread hook_block_t *hook_tls __attribute__((tls_model("initial-exec"))) = &hook_unregistered;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static util_list_t live;              /* blocks of running threads (on_live) */
static util_list_t active;            /* blocks that launched since the last fold (on_active) */
static util_list_t spare;             /* blocks of exited threads, zeroed, for reuse (on_live) */
static hook_counts_t retired;         /* sums of exited threads */
static uint64_t retired_work;         /* work_of(&retired) */
static sched_token_t pending;         /* unfolded launches of exited threads */
static hook_block_t fallback = { .s = { .gate = &sched_gate_unreg } };  /* calloc failed */
static int armed;                     /* this process called the driver */
static void (*first_call)(void);      /* hook_threads_on_first_call */

static pthread_key_t exit_key;        /* made once per process image */
static int exit_key_made;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* ---- the registry -------------------------------------------------------- */

static void link_active(hook_block_t *b)
{
    util_list_push(&active, &b->on_active);
    b->active = 1;
}

static void unlink_active(hook_block_t *b)
{
    util_list_remove(&b->on_active);
    b->active = 0;
}

/* A spare block, zeroed, or NULL. */
static hook_block_t *take_spare(void)
{
    util_link_t *n = util_list_pop(&spare);
    return n ? UTIL_CONTAINER(n, hook_block_t, on_live) : NULL;
}

/* b, off every list, zeroed and kept for the next thread. */
static void keep_spare(hook_block_t *b)
{
    memset(b, 0, sizeof *b);
    util_list_push(&spare, &b->on_live);
}

static void thread_exit(void *arg);
static void fork_register(void);

hook_block_t *hook_thread_register(void)
{
    pthread_once(&fork_once, fork_register);
    pthread_mutex_lock(&registry_lock);
    if (!exit_key_made && pthread_key_create(&exit_key, thread_exit) == 0)
        exit_key_made = 1;
    hook_block_t *b = take_spare();
    if (!b)
        b = calloc(1, sizeof *b);
    if (b) {
        memset(b, 0, sizeof *b);
        b->s.gate = &sched_gate_unreg;
        util_list_push(&live, &b->on_live);
    } else {
        b = &fallback;      /* racy counts beat no counts; registered once */
        if (!util_link_on(&b->on_live))
            util_list_push(&live, &b->on_live);
    }
    void (*first)(void) = NULL;
    if (!armed) {
        armed = 1;
        first = first_call;
    }
    pthread_mutex_unlock(&registry_lock);
    if (first)
        first();
    if (exit_key_made && b != &fallback)
        pthread_setspecific(exit_key, b);
    hook_tls = b;
    return b;
}

/* A driver call made before the library's constructor (another library's
 * constructor) armed the process already: fn runs now. */
void hook_threads_on_first_call(void (*fn)(void))
{
    pthread_mutex_lock(&registry_lock);
    first_call = fn;
    int late = armed;
    pthread_mutex_unlock(&registry_lock);
    if (late && fn)
        fn();
}

int hook_threads_armed(void)
{
    pthread_mutex_lock(&registry_lock);
    int a = armed;
    pthread_mutex_unlock(&registry_lock);
    return a;
}

/* ---- the gated path and the fold ----------------------------------------- */

void hook_thread_gated(hook_block_t *b, const void *work, CUstream stream)
{
    util_store_relaxed(&b->parked, 1);
    const uint32_t *gate = sched_launch_slow(work, stream);
    util_store_relaxed(&b->parked, 0);
    if (b == &fallback) {
        util_store_relaxed(&b->s.gate, gate);
        return;
    }
    /* The owner reads its own `active` flag without the lock: only a fold
     * clears it, and a fold also points the gate at sched_gate_unreg, which
     * brings the owner back here. */
    if (util_load_relaxed(&b->active) &&
        util_load_relaxed(&b->s.gate) == gate)
        return;
    pthread_mutex_lock(&registry_lock);
    if (!b->active)
        link_active(b);
    util_store_relaxed(&b->s.gate, gate);
    pthread_mutex_unlock(&registry_lock);
}

static uint64_t block_launches(const hook_block_t *b)
{
    uint64_t n = 0;
    for (int i = 0; i < HOOK_LAUNCHES; i++)
        n += util_load_relaxed(&b->c.calls[hook_launch_ids[i]]);
    return n;
}

/* Under registry_lock: b's launches since its last fold, into *tok. */
static void fold_block(hook_block_t *b, sched_token_t *tok)
{
    uint64_t n = block_launches(b), h = util_load_relaxed(&b->s.hash);
    tok->launches += n - b->folded_launches;
    tok->hash += h - b->folded_hash;
    b->folded_launches = n;
    b->folded_hash = h;
}

/* The calling thread stays on the list (it is likely to launch again, and
 * it is one block); the others leave it and see their next launch in the
 * gated path.  Ordering: see the active list in intercept.h. */
sched_token_t hook_threads_fold(void)
{
    hook_block_t *self = hook_tls;
    pthread_mutex_lock(&registry_lock);
    sched_token_t tok = pending;
    memset(&pending, 0, sizeof pending);
    hook_block_t *b;
    UTIL_LIST_EACH(b, &active, hook_block_t, on_active) {
        fold_block(b, &tok);
        if (b != self) {
            unlink_active(b);
            util_store_relaxed(&b->s.gate, &sched_gate_unreg);
        }
    }
    pthread_mutex_unlock(&registry_lock);
    return tok;
}

/* ---- snapshots -------------------------------------------------------------- */

/* A call is counted before it is gated and made after: counted and not
 * parked is let through or about to be (a thread between its count and
 * its gate looks let through too: an allocation looks written, never the
 * reverse). */
#define WORK_TERM_(cat, export, ...) \
    HOOK_WHEN_WORK_##cat(+ util_load_relaxed(&c->calls[HOOK_##export]))
static uint64_t work_of(const hook_counts_t *c)
{
    return 0 HOOK_LIST(WORK_TERM_);
}

/* Called at every paged allocation of a chunk of its own: a load per work
 * export and live thread (the shared block is live once used), the exited
 * threads' sum kept as one number. */
uint64_t hook_work_released(void)
{
    pthread_mutex_lock(&registry_lock);
    uint64_t n = retired_work;
    hook_block_t *b;
    UTIL_LIST_EACH(b, &live, hook_block_t, on_live)   /* the shared block: as let through */
        n += work_of(&b->c) - (b != &fallback && util_load_relaxed(&b->parked) ? 1 : 0);
    pthread_mutex_unlock(&registry_lock);
    return n;
}

static void counts_add(hook_counts_t *sum, const hook_counts_t *c)
{
#define ADD_(field) sum->field += util_load_relaxed(&c->field)
    ADD_(syncs); ADD_(allocs); ADD_(frees); ADD_(bytes_allocated);
    ADD_(resolver_wrapped); ADD_(resolver_passed);
    for (int i = 0; i < HOOK_COUNT; i++)
        ADD_(calls[i]);
#undef ADD_
}

void hook_counts_snapshot(hook_counts_t *out)
{
    hook_counts_t sum;
    memset(&sum, 0, sizeof sum);
    pthread_mutex_lock(&registry_lock);
    counts_add(&sum, &retired);
    hook_block_t *b;
    UTIL_LIST_EACH(b, &live, hook_block_t, on_live)
        counts_add(&sum, &b->c);
    pthread_mutex_unlock(&registry_lock);
    for (int i = 0; i < HOOK_LAUNCHES; i++)
        sum.launches += sum.calls[hook_launch_ids[i]];
    *out = sum;
}

/* ---- thread exit -------------------------------------------------------------
 * Fold the block into retired (and its unfolded launches into pending) and
 * keep it for the next thread.  A later driver call by the same thread
 * (another TLS destructor) registers it again from zero. */
static void thread_exit(void *arg)
{
    hook_block_t *b = arg;
    hook_tls = &hook_unregistered;
    pthread_mutex_lock(&registry_lock);
    counts_add(&retired, &b->c);
    retired_work += work_of(&b->c);
    if (b->active)
        unlink_active(b);
    fold_block(b, &pending);
    util_list_remove(&b->on_live);
    keep_spare(b);
    pthread_mutex_unlock(&registry_lock);
}

/* ---- fork ----------------------------------------------------------------------
 * The child's only thread is the one that forked, holding registry_lock
 * (taken before the fork, in util.h's order).  Every block belongs to a
 * thread the child does not have, the forking one included (its counts are
 * the parent's): all go to spare, the sums start from zero, and the report
 * is disarmed until the child calls the driver. */

static void prefork(void)
{
    pthread_mutex_lock(&registry_lock);
}

static void postfork_parent(void)
{
    pthread_mutex_unlock(&registry_lock);
}

static void postfork_child(void)
{
    for (util_link_t *n; (n = util_list_pop(&live)) != NULL;) {
        hook_block_t *b = UTIL_CONTAINER(n, hook_block_t, on_live);
        if (b != &fallback)
            keep_spare(b);
    }
    active.first = NULL;
    memset(&fallback, 0, sizeof fallback);
    fallback.s.gate = &sched_gate_unreg;
    memset(&retired, 0, sizeof retired);
    retired_work = 0;
    memset(&pending, 0, sizeof pending);
    armed = 0;
    hook_tls = &hook_unregistered;
    if (exit_key_made)
        pthread_setspecific(exit_key, NULL);
    pthread_mutex_init(&registry_lock, NULL);
}

static void fork_register(void)
{
    util_fork_register(UTIL_FORK_THREADS, prefork, postfork_parent, postfork_child);
}
