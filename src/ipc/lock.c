/*
 * lock.c - the table's lock: a mutex of our own over one futex word of the
 * table, robust against a holder that dies and against any value a peer (or
 * a stray write) leaves in the word.
 *
 * Divided into: lockers (who may write its id in the word, and how a waiter
 * tells whether that locker is alive); judging a word; lock and unlock.
 *
 * Why not a glibc robust mutex: glibc trusts the mutex's bytes (its type,
 * owner and count words) and asserts, aborting the host, on values it did
 * not write; the table is writable by every process that shares it.  Here
 * every value of the word is either a valid state or detected as invalid,
 * and an invalid one is handled like the lock of a dead process.
 *
 * Lockers.  The word names its holder by a locker id and the id's
 * generation (shm_layout.h gives the encoding).  Ids below SHM_MAX_SLOTS are
 * slots: a process that has a slot locks as its slot, with the slot's
 * generation.  A process without one (one registering, a tool) borrows a
 * guest id for as long as it needs it.  Locker i is alive while its process
 * holds the POSIX record lock on byte SHM_LIVE_BASE + i (slots.c says why
 * that test cannot be fooled by pid reuse); a guest's generation is bumped
 * by each process that takes its byte.
 *
 * Ordering argument.  Let P lock with word W = (i, g).
 *  (1) P holds byte i from before its first CAS that writes W until after
 *      its last unlock: a slot's byte from claim to release (slots.c
 *      releases it after the unlock that frees the slot), a guest's from
 *      borrow until no thread of P uses it.  So while W is in the word and P
 *      lives, F_GETLK finds byte i locked.
 *  (2) gen(i) changes only when id i passes to another process: a slot's at
 *      claim, under the lock, for a FREE slot (whose owner is gone); a
 *      guest's by the next borrower, after it took the byte.  So (i, g) with
 *      g == gen(i) names one process, and the only moment a dead holder can
 *      look alive is between a borrower taking byte i and bumping gen(i): a
 *      waiter judges again at its next poll.
 *  (3) A waiter judges W dead (byte free, or gen(i) != g) or invalid, then
 *      replaces it with a compare-and-swap from W itself.  Only P writes W;
 *      P is dead, so if the CAS succeeds no live process got the lock in
 *      between (a 23-bit generation wrap aside), and the winner of the CAS
 *      is the one process that repairs.
 *  (4) Unlock is a release CAS from the value this thread locked with to 0,
 *      then a wake of one sleeper when the waiters bit was set; a sleeper
 *      sets that bit with a CAS before it sleeps on the word with that
 *      value, so an unlock in between changes the word and the futex wait
 *      returns at once (no lost wake-up).  A thread that has slept locks
 *      with the bit set, since others may still sleep (Drepper's mutex 2).
 *  (5) The kernel does not wake waiters when a holder dies (only glibc's
 *      robust list does that), so sleepers poll: each sleep lasts at most
 *      POLL_NS, after which the waiter judges the word again.  A dead holder
 *      is replaced within about POLL_NS; a live one is waited for until the
 *      3 s deadline.
 * Threads of one process share its locker id: a waiter that finds its own
 * id and generation in the word is waiting for a sibling thread (F_GETLK
 * does not report a process's own record locks, so it must not ask).
 *
 * Locking.  t->guest and its companions are changed under t->guest_mu, a
 * spin word holding the pid of the process inside; this thread's held word
 * is thread-local.
 */
#include "ipc/shm_layout.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#define LOCK_WAIT_NS  (3000ull * 1000 * 1000)
#define POLL_NS       (2ull * 1000 * 1000)

/* The word this thread locked with (0: none), so that unlock matches it. */
static __thread uint32_t held_word;
static __thread int held_guest;

/* ---- lockers ------------------------------------------------------------ */

static int byte_lock(shm_table_t *t, int id, short type)
{
    struct flock fl = {
        .l_type = type, .l_whence = SEEK_SET, .l_start = SHM_LIVE_BASE + id, .l_len = 1,
    };
    return fcntl(t->fd, F_SETLK, &fl);
}

static uint32_t encode(int id, uint32_t gen)
{
    return ((gen & SHM_LOCK_GEN_MASK) << SHM_LOCK_GEN_SHIFT) | (uint32_t)(id + 1);
}

static void guest_enter(shm_table_t *t)
{
    pid_t me = getpid();
    for (;;) {
        pid_t cur = util_load_relaxed(&t->guest_mu);
        if (cur != me && __atomic_compare_exchange_n(&t->guest_mu, &cur, me, 0,
                                                     __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return;          /* free (0), or held by our parent before a fork */
        sched_yield();       /* a sibling thread, for a few syscalls */
    }
}

static void guest_leave(shm_table_t *t)
{
    util_store_release(&t->guest_mu, 0);
}

/* Borrow a guest id for one lock (or share the one this process has). */
static int guest_borrow(shm_table_t *t, uint32_t *word)
{
    int rc = 0;
    guest_enter(t);
    if (t->guest < 0 || t->guest_pid != getpid()) {
        t->guest = -1;       /* a forked child holds none of its parent's bytes */
        t->guest_users = 0;
        for (int g = 0; g < SHM_GUESTS; g++) {
            if (byte_lock(t, SHM_MAX_SLOTS + g, F_WRLCK) != 0)
                continue;
            t->guest = g;
            t->guest_pid = getpid();
            t->guest_gen = __atomic_add_fetch(&t->map->hdr.guest_gen[g], 1, __ATOMIC_ACQ_REL);
            break;
        }
    }
    if (t->guest >= 0) {
        t->guest_users++;
        *word = encode(SHM_MAX_SLOTS + t->guest, t->guest_gen);
    } else {
        rc = -EAGAIN;
    }
    guest_leave(t);
    return rc;
}

/* One use of the guest id is over; give it back once this process has a
 * slot (the slot's id serves from now on) and no thread uses it. */
static void guest_return(shm_table_t *t)
{
    guest_enter(t);
    if (t->guest >= 0 && t->guest_pid == getpid() && --t->guest_users <= 0 &&
        shm_self_now(t) >= 0) {
        byte_lock(t, SHM_MAX_SLOTS + t->guest, F_UNLCK);
        t->guest = -1;
    }
    guest_leave(t);
}

void shm_lock_forget(shm_table_t *t)
{
    guest_enter(t);
    if (t->guest >= 0 && t->guest_pid == getpid())
        byte_lock(t, SHM_MAX_SLOTS + t->guest, F_UNLCK);
    t->guest = -1;
    guest_leave(t);
}

/* The word this process locks with: its slot's, else a guest's. */
static int my_word(shm_table_t *t, uint32_t *word, int *guest)
{
    int self = shm_self_now(t);
    *guest = self < 0;
    if (self >= 0) {
        *word = encode(self, util_load_relaxed(&t->map->slots[self].id.gen));
        return 0;
    }
    return guest_borrow(t, word);
}

/* ---- judging a word ----------------------------------------------------- */

typedef enum { HOLDER_ALIVE, HOLDER_DEAD, WORD_INVALID } judgment_t;

static uint32_t locker_gen(shm_table_t *t, int id)
{
    if (id < SHM_MAX_SLOTS)
        return util_load_acquire(&t->map->slots[id].id.gen);
    return util_load_acquire(&t->map->hdr.guest_gen[id - SHM_MAX_SLOTS]);
}

static judgment_t judge(shm_table_t *t, uint32_t word, uint32_t mine)
{
    uint32_t bits = word & ~SHM_LOCK_WAITERS;
    int id = (int)(bits & SHM_LOCK_ID_MASK) - 1;
    if (id < 0 || id >= SHM_LOCKERS)
        return WORD_INVALID;
    uint32_t gen = (bits >> SHM_LOCK_GEN_SHIFT) & SHM_LOCK_GEN_MASK;
    if ((locker_gen(t, id) & SHM_LOCK_GEN_MASK) != gen)
        return HOLDER_DEAD;              /* id i has passed to another process */
    if (bits == mine)
        return HOLDER_ALIVE;             /* a sibling thread: we are alive */
    struct flock fl = {
        .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = SHM_LIVE_BASE + id, .l_len = 1,
    };
    if (fcntl(t->fd, F_GETLK, &fl) != 0)
        return HOLDER_ALIVE;             /* cannot tell: never take on doubt */
    return fl.l_type == F_UNLCK ? HOLDER_DEAD : HOLDER_ALIVE;
}

/* ---- lock and unlock ---------------------------------------------------- */

/* We replaced the word of a dead holder, or an invalid one: repair. */
static void took_over(shm_table_t *t, uint32_t old, judgment_t why)
{
    static int said_invalid;
    if (why == WORD_INVALID)
        util_log_once(&said_invalid, UTIL_LOG_ERROR,
                      "table %s: its lock word held 0x%08x, which no process writes (a "
                      "stray write to the table?); Salus treats it as the lock of a dead "
                      "process and repairs the table", t->name, old);
    else
        util_info("table %s: a process died holding the table's lock; repairing", t->name);
    if (t->repair_locked)
        t->repair_locked(t);
}

static int timed_out(shm_table_t *t)
{
    static int said_hung;
    util_log_once(&said_hung, UTIL_LOG_ERROR,
                  "table %s: its lock has been held for %llu s by a process that seems "
                  "hung; this process goes on without waiting for it", t->name,
                  LOCK_WAIT_NS / 1000000000ull);
    return -ETIMEDOUT;
}

/* Lock within wait_ns; on time-out -ETIMEDOUT, said once unless quiet. */
static int lock_within(shm_table_t *t, uint64_t wait_ns, int quiet)
{
    static int said_guests;
    uint32_t mine, *word;
    int guest;
    if (!t || t->read_only)
        return -EROFS;
    if (shm_guard_lost(t))
        return -EIO;                     /* truncated under us: guard.c said so */
    if (my_word(t, &mine, &guest) != 0) {
        util_log_once(&said_guests, UTIL_LOG_ERROR,
                      "table %s: %d processes without a slot are taking its lock at once; "
                      "this one goes on without Salus for now", t->name, SHM_GUESTS);
        return -EAGAIN;
    }
    word = &t->map->hdr.lock;
    uint64_t deadline = util_now_ns() + wait_ns;
    uint32_t sleepers = 0;               /* SHM_LOCK_WAITERS once we have slept */
    for (;;) {
        uint32_t cur = util_load_relaxed(word);
        judgment_t why = HOLDER_ALIVE;
        if (cur == 0 || (why = judge(t, cur, mine)) != HOLDER_ALIVE) {
            uint32_t take = mine | sleepers | (cur & SHM_LOCK_WAITERS);
            if (!__atomic_compare_exchange_n(word, &cur, take, 0, __ATOMIC_ACQUIRE,
                                             __ATOMIC_RELAXED))
                continue;
            held_word = take & ~SHM_LOCK_WAITERS;
            held_guest = guest;
            if (cur != 0)
                took_over(t, cur, why);
#ifdef SALUS_DEBUG
            shm_debug_check_lock(t);
#endif
            return 0;
        }
        uint64_t now = util_now_ns();
        if (now >= deadline) {
            if (guest)
                guest_return(t);
            return quiet ? -ETIMEDOUT : timed_out(t);
        }
        if (!(cur & SHM_LOCK_WAITERS) &&
            !__atomic_compare_exchange_n(word, &cur, cur | SHM_LOCK_WAITERS, 0,
                                         __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            continue;
        uint64_t left = deadline - now;
        shm_futex_wait(word, cur | SHM_LOCK_WAITERS, left < POLL_NS ? left : POLL_NS);
        sleepers = SHM_LOCK_WAITERS;
    }
}

int shm_lock(shm_table_t *t)
{
    return lock_within(t, LOCK_WAIT_NS, 0);
}

int shm_lock_retry(shm_table_t *t, uint64_t wait_ns)
{
    return lock_within(t, wait_ns < LOCK_WAIT_NS ? wait_ns : LOCK_WAIT_NS, 1);
}

void shm_unlock(shm_table_t *t)
{
    static int said_taken;
    if (!t || t->read_only)
        return;
#ifdef SALUS_DEBUG
    if (held_word)
        shm_debug_check_unlock(t);
#endif
    uint32_t *word = &t->map->hdr.lock, mine = held_word;
    uint32_t cur = util_load_relaxed(word);
    held_word = 0;
    do {
        if ((cur & ~SHM_LOCK_WAITERS) != mine || mine == 0) {
            /* Overwritten while we held it (a stray write, which a waiter
             * took as a dead holder's): the word is someone else's now. */
            util_log_once(&said_taken, UTIL_LOG_WARN,
                          "table %s: the table's lock word was overwritten while this "
                          "process held the lock; another process may have repaired the "
                          "table meanwhile", t->name);
            break;
        }
    } while (!__atomic_compare_exchange_n(word, &cur, 0, 0, __ATOMIC_RELEASE,
                                          __ATOMIC_RELAXED));
    if ((cur & ~SHM_LOCK_WAITERS) == mine && mine != 0 && (cur & SHM_LOCK_WAITERS))
        shm_futex_wake(word, 1);
    if (held_guest)
        guest_return(t);
    held_guest = 0;
}
