/*
 * guard.c - a process survives the table's object being shrunk under its
 * mapping (a peer's ftruncate, `truncate -s 0` on /dev/shm/<name>).
 *
 * Divided into: the guarded ranges; the SIGBUS handler and its chaining;
 * adding, removing and asking.
 *
 * A page of a MAP_SHARED mapping past the end of its file faults with
 * SIGBUS.  Re-checking the size with fstat before each access cannot help:
 * the launch fast path reads the gate word with one load and no syscall, and
 * a peer may shrink the object between any check and the access after it.
 * So the handling is at the fault itself: SIGBUS is caught, and a fault whose
 * address lies in a mapped table is repaired by mapping private zero pages
 * over the whole table (MAP_FIXED, which is async-signal-safe as a syscall),
 * the table is marked lost, one line says so on stderr, and the faulting
 * instruction runs again on the zero page.  Every word of the table reads 0
 * from then on, which every module reads as its free or open state (the
 * gate is SCHED_GATE_OPEN): launches go straight to the driver.  shm_lock
 * refuses a lost table, so nothing is decided on it.  A fault anywhere else
 * is passed to the handler that was there before (the host's, or the
 * default action, which then kills as it would have).
 *
 * Ordering.  An entry is published by a release store of its start after
 * its length and name are written; the handler reads start with an acquire
 * load, so it never sees a half-made entry.  An entry is removed (start set
 * to 0) before its range is unmapped, so the handler never maps over a range
 * that may since hold something else.  Entries are changed under guards_mu
 * (never taken by the handler).
 *
 * Limit: a program that installs its own SIGBUS handler after libsalus maps
 * its table, and does not pass on faults it does not know, is not protected.
 * (The handler is put back at every mapping of a table, chaining to the one
 * found there.)
 */
#include "ipc/shm_layout.h"
#include "util/util.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define GUARDS 64                   /* tables mapped at once (salus-top maps many) */

typedef struct guard {
    uintptr_t start;                 /* 0: unused; atomic */
    size_t len;
    int lost;                        /* atomic */
    char name[SHM_TABLE_NAME_BYTES];
} guard_t;

static guard_t guards[GUARDS];
static pthread_mutex_t guards_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction previous;

/* ---- the handler -------------------------------------------------------- */

static size_t put(char *buf, size_t at, size_t len, const char *s)
{
    while (*s && at + 1 < len)
        buf[at++] = *s++;
    return at;
}

/* One line on stderr, with write(2) and no stdio: we are in a handler. */
static void say_lost(const guard_t *g)
{
    char buf[512], digits[16];
    size_t at = 0, n = 0;
    unsigned pid = (unsigned)getpid();
    do
        digits[n++] = (char)('0' + pid % 10);
    while ((pid /= 10) && n < sizeof digits);
    at = put(buf, at, sizeof buf, "salus[");
    while (n)
        buf[at++] = digits[--n];
    at = put(buf, at, sizeof buf, "]: error: table ");
    at = put(buf, at, sizeof buf, g->name);
    at = put(buf, at, sizeof buf, " was truncated by another process while this one "
             "used it; Salus passes calls through for this process from now on (once no "
             "process uses the table, remove it with `salus reset`)\n");
    ssize_t rc = write(STDERR_FILENO, buf, at);
    (void)rc;
}

/* A fault that is not ours: as if we had never been there. */
static void chain(int sig, siginfo_t *si, void *uc)
{
    if ((previous.sa_flags & SA_SIGINFO) && previous.sa_sigaction) {
        previous.sa_sigaction(sig, si, uc);
    } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
    } else {
        /* Default action: restore it; a fault happens again on return and
         * kills, a signal sent by kill() is sent again. */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigaction(SIGBUS, &dfl, NULL);
        if (si->si_code <= 0)
            raise(SIGBUS);
    }
}

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    uintptr_t at = (uintptr_t)si->si_addr;
    for (int i = 0; si->si_code > 0 && i < GUARDS; i++) {
        guard_t *g = &guards[i];
        uintptr_t start = util_load_acquire(&g->start);
        if (!start || at < start || at - start >= g->len)
            continue;
        if (mmap((void *)start, g->len, PROT_READ | PROT_WRITE,
                 MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED)
            break;
        if (!util_xchg_acq_rel(&g->lost, 1))
            say_lost(g);
        errno = saved;
        return;
    }
    errno = saved;
    chain(sig, si, uc);
}

/* ---- adding, removing, asking ------------------------------------------- */

/* Put the handler in place, unless it is there: at every mapping, since the
 * program may have set its own since the last (ours then passes on to it). */
static void install(void)
{
    struct sigaction cur, sa;
    if (sigaction(SIGBUS, NULL, &cur) != 0 ||
        ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigbus))
        return;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &previous);
}

void shm_guard_add(shm_table_t *t)
{
    static int said_full;
    pthread_mutex_lock(&guards_mu);
    install();
    int i = 0;
    while (i < GUARDS && util_load_relaxed(&guards[i].start))
        i++;
    if (i < GUARDS) {
        guards[i].len = sizeof(shm_layout_t);
        guards[i].lost = 0;
        memcpy(guards[i].name, t->name, sizeof guards[i].name);
        util_store_release(&guards[i].start, (uintptr_t)t->map);
    }
    pthread_mutex_unlock(&guards_mu);
    if (i == GUARDS)
        util_log_once(&said_full, UTIL_LOG_WARN, "table %s: this process maps more than "
                      "%d tables; this one is not protected against truncation", t->name,
                      GUARDS);
}

static guard_t *find(const shm_table_t *t)
{
    for (int i = 0; t && t->map && i < GUARDS; i++)
        if (util_load_acquire(&guards[i].start) == (uintptr_t)t->map)
            return &guards[i];
    return NULL;
}

void shm_guard_remove(shm_table_t *t)
{
    pthread_mutex_lock(&guards_mu);
    guard_t *g = find(t);
    if (g)
        util_store_release(&g->start, 0);
    pthread_mutex_unlock(&guards_mu);
}

int shm_guard_lost(const shm_table_t *t)
{
    guard_t *g = find(t);
    return g && util_load_acquire(&g->lost);
}
