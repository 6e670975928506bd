/*
 * util.h - what every module of libsalus shares: the log, the reading of
 * SALUS_* variables, and the clock.
 *
 * Nothing here is on the launch fast path: variables are read once, at
 * start-up, and the log is for events, not for calls.
 */
#ifndef SALUS_UTIL_H
#define SALUS_UTIL_H

#include <stdint.h>

#include "util/atomic.h"

/* Symbols libsalus exports; everything else is hidden (-fvisibility=hidden). */
#define SALUS_EXPORT __attribute__((visibility("default")))

#define UTIL_LIKELY(x)   __builtin_expect(!!(x), 1)
#define UTIL_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- log ----------------------------------------------------------------
 * SALUS_LOG=error|warn|info|debug (default warn), on stderr, each line
 * "salus[<pid>]: <level>: <message>", written with one write(2) so that lines
 * of several threads or processes never interleave. */
typedef enum {
    UTIL_LOG_ERROR = 0,
    UTIL_LOG_WARN = 1,
    UTIL_LOG_INFO = 2,
    UTIL_LOG_DEBUG = 3,
} util_log_level_t;

extern int util_log_level;
/* SALUS_LOG_SYSLOG=on: each line also goes to syslog(3) (util_log_init). */
extern int util_log_syslog;
/* Read SALUS_LOG (a bad value is reported and warn is used), then warn
 * about misspelled SALUS_* variables: libsalus's start-up. */
void util_log_init(void);
void util_log_write(util_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define UTIL_LOG(level, ...)                                     \
    do {                                                         \
        if ((int)(level) <= util_log_level)                      \
            util_log_write((level), __VA_ARGS__);                \
    } while (0)
#define util_error(...) UTIL_LOG(UTIL_LOG_ERROR, __VA_ARGS__)
#define util_warn(...)  UTIL_LOG(UTIL_LOG_WARN, __VA_ARGS__)
#define util_info(...)  UTIL_LOG(UTIL_LOG_INFO, __VA_ARGS__)
#define util_debug(...) UTIL_LOG(UTIL_LOG_DEBUG, __VA_ARGS__)

/* Say something once per process: the first caller to flip *flag logs. */
#define util_log_once(flag, level, ...)                                  \
    do {                                                                 \
        if (!util_xchg_relaxed((flag), 1))           \
            UTIL_LOG(level, __VA_ARGS__);                                \
    } while (0)

/* ---- the memory cgroup (cgroup.c) -------------------------------------------
 * The room left in this process's memory cgroup, v2 or v1, over it and its
 * ancestors: the least of limit - use (use less the inactive file cache).
 * 0 and *out written when some level has a limit; 1 when none has, or
 * nothing can be read (no cgroup, garbage): no bound.  Reads a few small
 * files: not for a launch path. */
typedef struct util_cgroup_mem {
    uint64_t room;                 /* what is left at the tightest level */
    uint64_t limit, used;          /* that level's limit and use */
    char path[256];                /* that level's directory */
    int v1;                        /* cgroup v1's memory controller */
} util_cgroup_mem_t;
int util_cgroup_mem(util_cgroup_mem_t *out);
/* Test seam: a directory the files are read under instead of "/" (a fake
 * tree of proc/self/cgroup, proc/self/mountinfo, sys/fs/cgroup/...); NULL
 * for the real ones.  Set before any call. */
extern const char *util_cgroup_root;

/* ---- SALUS_* variables --------------------------------------------------
 * Modules read their variables through vars.h's list (util_var_*), which
 * applies each variable's rules with these primitives. */

/* Sizes, by one strict grammar (util.c says why):
 *   "0", "<n>K|M|G|T" (powers of 1024; optional "i" and "B": 512M, 1.5GiB),
 *   "<n>%" of `whole` (0 < n <= 100; needs whole > 0), or "<digits>B"
 *   (exact bytes, at least UTIL_SIZE_MIN_BYTES).
 * <n> is digits with an optional fraction.  Nothing else: no bare number
 * but 0, sign, space, exponent, hex, nan.  0 and *out written, or -1. */
#define UTIL_SIZE_MIN_BYTES (1ull << 20)
#define UTIL_SIZE_MAX       (1ull << 60)
int util_parse_size(const char *text, uint64_t whole, uint64_t *out);

/* Per device, in MPS's form: "<ordinal>=<size>[,<ordinal>=<size>...]" (CUDA
 * ordinals as the process sees them, 0..63, each at most once; a plain size
 * applies to every device).  The size for `ordinal`: 0 and *out written, 1
 * when the list names other devices only (none for this one), -1 when the
 * text is not valid. */
#define UTIL_SIZE_ORDINALS 64
int util_parse_size_at(const char *text, int ordinal, uint64_t whole, uint64_t *out);

/* A size as a person reads it: "512 MiB", "2.0 GiB", "100 B"; at
 * SALUS_LOG=debug the exact bytes follow ("2.0 GiB (2147483648 bytes)").
 * Returned by value so that it can be a printf argument: util_size(n).s. */
typedef struct util_size_text { char s[48]; } util_size_text_t;
util_size_text_t util_size(uint64_t bytes);

/* The value as a string (NULL when unset or empty). */
const char *util_env_str(const char *name);

/* printf into this thread's one 256-byte buffer, which it returns: valid
 * until the thread's next call.  For a description handed up the stack (the
 * invariant checkers' first violation) without an allocation. */
const char *util_describe(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- clock -------------------------------------------------------------- */
/* CLOCK_MONOTONIC in nanoseconds: the clock simgpu's trace uses too. */
uint64_t util_now_ns(void);
/* The same clock as of its last tick (a few ms behind at most), at a
 * quarter of the cost: for stamps that expire in hundreds of ms. */
uint64_t util_coarse_ns(void);

/* The one list of SALUS_* variables and its readers. */
#include "util/vars.h"

/* ---- fork ------------------------------------------------------------------
 * One set of pthread_atfork handlers for the whole library (as jemalloc's
 * prefork/postfork): each module registers its three functions with its
 * rank, once, when it starts; before fork() every registered prefork runs in
 * rank order (each takes its module's locks, so that no lock is mid-use in
 * the copy), after it the postforks run in the reverse order, in the parent
 * (unlock) and in the child (make the process-local state anew: the child
 * holds no slot, no lease, no thread but the forking one).  The ranks are
 * the library's lock order (docs/hacking.md): a module's locks are never
 * taken while holding those of a later rank.  Registering the same rank
 * twice keeps the first.  0, or -1 when the handlers cannot be registered
 * (said once: a forked child may then inherit its parent's state). */
typedef enum util_fork_rank {
    UTIL_FORK_LOADER = 0,     /* intercept: the driver loader's lock */
    UTIL_FORK_SCHED,          /* sched: the process's bookkeeping lock */
    UTIL_FORK_THREADS,        /* intercept: the thread registry */
    UTIL_FORK_PAGING,         /* memory's paging: none taken (a page-out lasts
                                 seconds); the child forgets its parent's */
    UTIL_FORK_MEMORY,         /* memory: start-up lock, the map's stripes, VMM mappings */
    UTIL_FORK_RANKS
} util_fork_rank_t;
int util_fork_register(util_fork_rank_t rank, void (*prefork)(void),
                       void (*parent)(void), void (*child)(void));

#endif /* SALUS_UTIL_H */
