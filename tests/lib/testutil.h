/*
 * testutil.h - what the multi-process tests share: paths into the build tree,
 * unique names for shared memory, child processes with an environment and a
 * timeout, and readers for the JSON lines that libsalus (SALUS_REPORT) and
 * simgpu (SIMGPU_TRACE) write, and waits for a state with a deadline.
 *
 * Tests run from anywhere: paths are found from the test binary's own
 * location, build/tests/<name>.  Every child gets a deadline; a child that
 * passes it is killed and reported, so a hang fails one test instead of the run.
 */
#ifndef SALUS_TESTUTIL_H
#define SALUS_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Absolute path of <build>/<rel> in buf (e.g. "sim/libcuda.so.1"). */
const char *tu_build_path(const char *rel, char *buf, size_t len);
/* 1 if <build>/<rel> exists; else 0, with a line on stderr naming the make
 * target, for a test that then calls skip(). */
int tu_built(const char *rel);
/* Absolute path of <source root>/<rel> in buf. */
const char *tu_source_path(const char *rel, char *buf, size_t len);
/* A fresh directory for this test binary's files, made on first use. */
const char *tu_tmpdir(void);
/* "/<prefix>-<pid>-<n>": a shared-memory name no other test uses; it is
 * unlinked when the test binary exits. */
const char *tu_unique_name(const char *prefix, char *buf, size_t len);
/* The GPU claim file (/dev/shm/salus-gpu-<uuid>) that names table `table`:
 * 0 with its path, -1 when none does.  The names tu_unique_name handed out
 * have their claims unlinked with them. */
int tu_claim_of(const char *table, char *path, size_t len);

/* An environment: the test's own, with variables set or removed. */
typedef struct tu_env {
    char **vars;   /* NULL-terminated "NAME=value" */
    size_t n, cap;
} tu_env_t;
void tu_env_init(tu_env_t *env);              /* copy of environ */
void tu_env_set(tu_env_t *env, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void tu_env_unset(tu_env_t *env, const char *name);
void tu_env_free(tu_env_t *env);
/* The usual set-up for a run over simgpu: LD_LIBRARY_PATH to build/sim,
 * SIMGPU_STATE and SALUS_TABLE unique to this call, SIMGPU_MEMORY=16G. */
void tu_env_simgpu(tu_env_t *env, const char *state_name);
/* The same, with libsalus preloaded. */
void tu_env_salus(tu_env_t *env, const char *state_name, const char *table_name);

/* A child process; its stdout and stderr go to files in tu_tmpdir(). */
typedef struct tu_proc {
    pid_t pid;
    char out_path[512], err_path[512];
    int status;        /* from waitpid, valid once exited */
    int exited;        /* 1 once reaped */
    int timed_out;     /* 1 when tu_wait killed it at the deadline */
} tu_proc_t;
int  tu_spawn(tu_proc_t *p, char *const argv[], const tu_env_t *env);
/* Wait up to timeout_ms; kill (SIGKILL) and mark timed_out past it.
 * Returns the exit code (0-255), 128+signal, or -1 on timeout. */
int  tu_wait(tu_proc_t *p, int timeout_ms);
/* 1 once the child has exited (reaped then, without waiting; tu_wait
 * afterwards returns its code), else 0: for a wait on a state the child
 * reaches, so that a child that died ends the wait instead of its deadline. */
int  tu_exited(tu_proc_t *p);
/* spawn + wait. */
int  tu_run(char *const argv[], const tu_env_t *env, int timeout_ms, tu_proc_t *p);
/* Fork a child that runs fn(arg) (exiting on failure), tells the parent
 * the int fn returned through a pipe, then waits to be killed.  Returns
 * once it has told: its pid, and what it told in *told; -1 when it could
 * not start or died before telling. */
pid_t tu_fork_teller(int (*fn)(void *), void *arg, int *told);

/* Whole file, NUL-terminated, malloc'd; NULL if it cannot be read. */
char *tu_read_file(const char *path, size_t *len);
/* The n-th (0-based) line of text that contains needle, copied to buf. */
int tu_find_line(const char *text, const char *needle, int n, char *buf, size_t len);
/* Count lines of text that contain needle. */
int tu_count_lines(const char *text, const char *needle);

/* Flat JSON objects (one per line): the value of "key". Return 0 if found. */
int tu_json_num(const char *obj, const char *key, double *out);
int tu_json_str(const char *obj, const char *key, char *buf, size_t len);
/* The number of "key" in obj; the test fails, saying so, when there is none. */
double tu_json_need(const char *obj, const char *key);

/* One line of a SIMGPU_TRACE file: a kernel, copy or memset (kind; a line
 * without one is a kernel), submitted by the host at submit_ns (0 when the
 * line has none) and run in [start_ns, end_ns). */
typedef struct tu_kernel {
    int pid, device;
    uint64_t context, stream;
    char kind[8];
    char name[64];
    uint64_t submit_ns, start_ns, end_ns;
} tu_kernel_t;
/* Load a trace's kernels, sorted by start_ns. Returns the count, -1 if
 * unreadable.  The trace's "cut" lines (a context gone with work queued:
 * its process died) are applied: that work ends at the cut. */
long tu_trace_load(const char *path, tu_kernel_t **out);
/* Load every line of a trace (kernels, copies, memsets), sorted by start_ns. */
long tu_trace_load_all(const char *path, tu_kernel_t **out);
/* GPU time of pid in [from, to) in ns (from = to = 0: the whole trace). */
uint64_t tu_trace_busy(const tu_kernel_t *k, long n, int pid, uint64_t from, uint64_t to);
/* Number of times consecutive kernels (by start) belong to different pids. */
long tu_trace_switches(const tu_kernel_t *k, long n);
/* Work (any kind) submitted while another process had work on the same
 * device submitted before it and not yet ended: the count, and in *first (if
 * not NULL and the count is not 0) the index in k of the earliest submitted.
 * An exclusive handoff makes it 0.  Returns -1 if out of memory. */
long tu_trace_cross_submits(const tu_kernel_t *k, long n, long *first);

/* Monotonic clock in ns. */
uint64_t tu_now_ns(void);
/* Sleep ms milliseconds. */
void tu_sleep_ms(int ms);
/* Wait until pred(arg) is true, polling with short sleeps (1 ms, doubling
 * to 16 ms) for at most ms milliseconds of the monotonic clock.  Returns 1
 * when pred became true, 0 at the deadline (pred is asked once more then,
 * so a slow poll never loses a state reached just in time). */
int tu_await(int (*pred)(void *arg), void *arg, int ms);

/* Skip the running cmocka test with its reason: a "[  REASON  ]" line that
 * mk/run-tests.sh shows beside the skip in the summary (a skip without a
 * reason passes silently there).  For tests that include cmocka.h. */
#define tu_skip(...)                                                    \
    do {                                                                \
        print_message("[  REASON  ] " __VA_ARGS__);                     \
        print_message("\n");                                            \
        skip();                                                         \
    } while (0)

/* make test-soak sets SALUS_TEST_SOAK=1: the tests that have a long variant
 * (gigabytes where make test moves megabytes, more rounds) run it.  1 then,
 * else 0.  The checks are the same either way; only the sizes and counts
 * grow. */
#define TU_SOAK_VAR "SALUS_TEST_SOAK"
int tu_soak(void);

/* Every test binary links this file: before main, it hands the pattern in
 * CMOCKA_TEST_FILTER (make test F=..., '*' and '?' as wildcards) to cmocka,
 * which then runs only the tests whose names match. */
#define TU_FILTER_VAR "CMOCKA_TEST_FILTER"

#endif /* SALUS_TESTUTIL_H */
