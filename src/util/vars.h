/*
 * vars.h - every SALUS_* variable libsalus reads, in one list.
 *
 * The list drives: the readers the modules call (util_var_*, with the range
 * and default written here once), `salus run`'s options and their --help,
 * and the test that libsalus(7) documents every variable.  A module that
 * reads a new variable adds its row here; nothing else names it.
 *
 *   X(id, "SALUS_NAME", kind, min, max, default, choices, option, arg, help)
 *
 * kind    LONG (whole number in [min, max]), SIZE (util_parse_size's grammar;
 *         min 1: 0 refused, min 0: 0 is none), CHOICE (one of `choices`), NAME
 *         (printable text), TABLE (a table name), PATH (a file name).
 * default the default of a LONG (also shown in help); 0 otherwise.
 * option  the long option of `salus run` that sets it, or NULL.
 */
#ifndef SALUS_UTIL_VARS_H
#define SALUS_UTIL_VARS_H

#include <stddef.h>
#include <stdint.h>

/* The policies' one list: a header of macros only, which the scheduler
 * expands into its enum, so that util_policy_names is in its order. */
#include "sched/policies.h"

#define UTIL_POLICY_NAME_(id, name, ops, help) name,
#define UTIL_POLICY_NAMES SCHED_POLICIES(UTIL_POLICY_NAME_)
#define UTIL_LOG_NAMES    "error", "warn", "info", "debug"
#define UTIL_ITER_SYNC_NAMES "auto", "every"
#define UTIL_ONOFF_NAMES     "off", "on"

#define SALUS_VARS(X)                                                                   \
    X(PRIORITY, "SALUS_PRIORITY", LONG, 0, 100, 50, NULL, "priority", "N",              \
      "priority, 0 to 100, higher is more important")                                   \
    X(POLICY, "SALUS_POLICY", CHOICE, 0, 0, 0, util_policy_names, "policy", "NAME",     \
      "policy if this job is the first on its GPU:" SCHED_POLICY_WORDS                  \
      " (default fair)")                                                                \
    X(QUANTUM_MS, "SALUS_QUANTUM_MS", LONG, 0, 3600000, 100, NULL, "quantum", "MS",     \
      "least time a holder keeps the GPU before yielding to an equal waiter")           \
    X(FILL_US, "SALUS_FILL_US", LONG, 0, 1000000, 250, NULL, "fill", "US",              \
      "under fair, a holder whose host phase after its iteration boundaries lasts at "  \
      "least this long gives the GPU to a waiter at each boundary, quantum or not "     \
      "(0: only after its quantum)")                                                    \
    X(MAX_SLICE_MS, "SALUS_MAX_SLICE_MS", LONG, 1, 3600000, 2000, NULL, "max-slice",    \
      "MS", "a holder that reaches no iteration boundary yields after this long")       \
    X(LATENCY_MS, "SALUS_LATENCY_MS", LONG, 0, 60000, 0, NULL, "latency", "MS",          \
      "a latency-sensitive job (a service): it gets the GPU at the holder's next "      \
      "boundary, ahead of the policy's order (0: none)")                                \
    X(ITERATIONS, "SALUS_ITERATIONS", LONG, 1, 1000000000000L, 0, NULL, "iterations",   \
      "N", "the job's length in iterations (srtf ranks by remaining time)")             \
    X(LENGTH_MS, "SALUS_LENGTH_MS", LONG, 1, 4294967295L, 0, NULL, "length", "MS",     \
      "the job's expected running time alone, in ms, up to 49 days (srtf ranks and "    \
      "admits by it until the job's iterations are measured)")                          \
    X(END_TIME, "SALUS_END_TIME", LONG, 1, 100000000000L, 0, NULL, "end-time", "UNIX-S",  \
      "when the job's time limit ends, in seconds since 1970 (srtf's hint without "      \
      "SALUS_ITERATIONS; the Slurm plugin sets it)")                                    \
    X(ITER_SYNC, "SALUS_ITER_SYNC", CHOICE, 0, 0, 0, util_iter_sync_names, "iter-sync", \
      "auto|every", "every host sync ends an iteration, or the detector finds which "   \
      "do (auto)")                                                                      \
    X(MEM_LIMIT, "SALUS_MEM_LIMIT", SIZE, 1, 0, 0, NULL, "mem", "SIZE",                 \
      "memory limit per device: 8G, 512M, ... or a percentage of the budget (50%)")     \
    X(MEM_RESERVE, "SALUS_MEM_RESERVE", SIZE, 0, 0, 0, NULL, "reserve", "SIZE",         \
      "memory guaranteed to the job; it waits for admission until it fits")             \
    X(MEM_WAIT_MS, "SALUS_MEM_WAIT_MS", LONG, 0, 86400000, 10000, NULL, "mem-wait", "MS", \
      "when the device is full, wait this long for peers to free memory (0: refuse at " \
      "once)")                                                                          \
    X(SWAP, "SALUS_SWAP", CHOICE, 0, 0, 0, util_onoff_names, "swap", "on|off",          \
      "page this job's device memory to the host while it waits for the GPU, so that "  \
      "jobs whose memory does not fit together can share the GPU (default off)")        \
    X(SWAP_LIMIT, "SALUS_SWAP_LIMIT", SIZE, 1, 0, 0, NULL, "swap-limit", "SIZE",        \
      "host memory this job, and all jobs of its table together, may page device "      \
      "memory to (default: half the host's available memory when it starts)")           \
    X(MEM_HEADROOM, "SALUS_MEM_HEADROOM", SIZE, 0, 0, 0, NULL, "headroom", "SIZE",      \
      "memory left to contexts, if this job is the first on its GPU (5%)")              \
    X(NAME, "SALUS_NAME", NAME, 0, 0, 0, NULL, "name", "NAME",                          \
      "the name salus-top shows (default: the program, or python's script)")            \
    X(GANG, "SALUS_GANG", NAME, 0, 0, 0, NULL, "gang", "NAME",                          \
      "the distributed job the process belongs to: a gang's processes hold their GPUs " \
      "together (default: torchrun's, MPI's, Slurm's or JAX's variables; off: none)")  \
    X(TABLE, "SALUS_TABLE", TABLE, 0, 0, 0, NULL, "table", "NAME",                      \
      "the arbitration table to join (default /salus-<uid>)")                           \
    X(GROUP, "SALUS_GROUP", NAME, 0, 0, 0, NULL, NULL, "GROUP",                         \
      "share one table, /salus-group-<group>, among the members of a group")            \
    X(REPORT, "SALUS_REPORT", PATH, 0, 0, 0, NULL, "report", "FILE",                    \
      "append a JSON line of the job's counters to FILE at exit")                       \
    X(LOG, "SALUS_LOG", CHOICE, 0, 0, 0, util_log_names, "log", "LEVEL",                \
      "libsalus's messages: error, warn (default), info, debug")                        \
    X(LOG_SYSLOG, "SALUS_LOG_SYSLOG", CHOICE, 0, 0, 0, util_onoff_names, "log-syslog",    \
      "on|off", "also send libsalus's messages to the system log (syslog, journald): "  \
      "facility user, tag libsalus (default off)")                                      \
    X(REAL_LIBCUDA, "SALUS_REAL_LIBCUDA", PATH, 0, 0, 0, NULL, NULL, "PATH",            \
      "the CUDA driver to forward to (default: libcuda.so.1 found the usual way)")

typedef enum util_var_kind {
    UTIL_KIND_LONG, UTIL_KIND_SIZE, UTIL_KIND_CHOICE, UTIL_KIND_NAME, UTIL_KIND_TABLE,
    UTIL_KIND_PATH,
} util_var_kind_t;

typedef enum util_var_id {
#define UTIL_VAR_ID(id, ...) UTIL_VAR_##id,
    SALUS_VARS(UTIL_VAR_ID)
#undef UTIL_VAR_ID
    UTIL_VAR_COUNT
} util_var_id_t;

typedef struct util_var {
    const char *name;
    util_var_kind_t kind;
    long min, max, def;
    const char *const *choices;
    const char *option, *arg, *help;
} util_var_t;

extern const char *const util_policy_names[];
extern const char *const util_log_names[];
extern const char *const util_iter_sync_names[];
extern const char *const util_onoff_names[];    /* off = 0, on = 1 */
extern const util_var_t util_vars[UTIL_VAR_COUNT];

/* The readers of util.h with the list's rules: 0 and *out written when set
 * and valid; 1 when unset; -1 when invalid (said once, the caller keeps its
 * default).  util_var_long's caller may start from util_vars[id].def. */
int util_var_long(util_var_id_t id, long *out);
int util_var_choice(util_var_id_t id, int *out);
/* The value when set and valid (a SIZE is checked, a percentage of an
 * unknown whole left to the caller to resolve); NULL when unset or invalid
 * (said once). */
const char *util_var_text(util_var_id_t id);
/* 0 when `text` is a value the variable accepts; otherwise -1 and, in `why`,
 * a sentence saying which forms it accepts.  For `salus run`. */
int util_var_check(util_var_id_t id, const char *text, char *why, size_t whylen);
/* When the variable `entry` ("NAME" or "NAME=VALUE") starts with SALUS_, is
 * not in the list and is a few edits from a name that is: the index of the
 * nearest, and *name_len the length of NAME; otherwise -1. */
int util_var_misspelled(const char *entry, size_t *name_len);
/* Warn once per process about each misspelled SALUS_* variable of the
 * environment (libsalus's start-up). */
void util_var_warn_misspelled(void);
/* The refusal that `salus run` and the Slurm plugin print for a value given
 * by the option `--<option>`: 0 when `text` is accepted; otherwise -1 and, in
 * `msg`, `--<option> "<text>" is not accepted: <the forms it takes>`. */
int util_var_refusal(util_var_id_t id, const char *option, const char *text, char *msg,
                     size_t len);
/* A table name: an optional '/', then 1 to 62 of [A-Za-z0-9._-]. */
int util_table_name_ok(const char *name);

#endif /* SALUS_UTIL_VARS_H */
