/*
 * report.c - the counters of libsalus and the report a process leaves at exit.
 *
 * Divided into: the per-thread registry (first call, thread exit, fork); the
 * snapshot; the report (SALUS_REPORT=<file>: one JSON object per process,
 * appended with one write); the library constructor.
 *
 * Counting costs the wrappers no lock, no atomic read-modify-write and no
 * syscall: each thread counts in a block of its own, found through the
 * initial-exec TLS pointer hook_tls.  A thread's first driver call registers
 * its block in `live` (the slow path); a pthread key's destructor folds it
 * into `retired` when the thread exits.  A snapshot sums retired + live.
 *
 * registry_lock guards live, spare, retired, armed and report_path.  Block
 * counters are written by their owner only (hook_add: a single volatile
 * store) and read by snapshots with relaxed atomic loads: a snapshot taken
 * while threads run sees each counter at some recent value, which is all a
 * report needs.  A block's dispatch pointer is read and written by its owner
 * only.
 *
 * fork(): the child inherits the parent's blocks.  The prepare handler takes
 * registry_lock so that no registration is half done; the child handler
 * drops every block (their threads do not exist in the child), zeroes the
 * sums and disarms the report: a child reports only if it calls the driver.
 *
 * A process that never calls the driver never registers: no allocation, no
 * exit handler, no report.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include "intercept/intercept.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Where every thread starts; its counts are never summed. */
hook_block_t hook_unregistered = { .dispatch = &hook_first_table };

/* The initial value is an address: the dynamic linker relocates the TLS
 * image before it copies it for the main thread and every new one. */
__thread hook_block_t *hook_tls __attribute__((tls_model("initial-exec"))) = &hook_unregistered;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static hook_block_t *live;            /* blocks of running threads */
static hook_block_t *spare;           /* blocks of exited threads, zeroed, for reuse */
static hook_counts_t retired;         /* sums of exited threads */
static hook_block_t fallback = { .dispatch = &hook_real };  /* when calloc fails */
static int armed;                     /* this process called the driver */
static char report_path[PATH_MAX];    /* SALUS_REPORT when armed, or "" */

static pthread_key_t exit_key;        /* made once per process image */
static int exit_key_made, handlers_made;

/* ---- the registry -------------------------------------------------------- */

static void counts_add(hook_counts_t *sum, const hook_counts_t *c)
{
#define ADD_(field) sum->field += __atomic_load_n(&c->field, __ATOMIC_RELAXED)
    ADD_(syncs); ADD_(allocs); ADD_(frees); ADD_(bytes_allocated);
    ADD_(resolver_wrapped); ADD_(resolver_passed);
    for (int i = 0; i < HOOK_COUNT; i++)
        ADD_(calls[i]);
#undef ADD_
}

static void block_link(hook_block_t *b)
{
    b->next = live;
    b->pprev = &live;
    if (live)
        live->pprev = &b->next;
    live = b;
}

static void block_unlink(hook_block_t *b)
{
    *b->pprev = b->next;
    if (b->next)
        b->next->pprev = b->pprev;
    b->next = NULL;
    b->pprev = NULL;
}

/* Thread exit: fold the block into retired and keep it for the next thread. */
static void thread_exit(void *arg)
{
    hook_block_t *b = arg;
    hook_tls = &hook_unregistered;
    if (b == &fallback)
        return;
    pthread_mutex_lock(&registry_lock);
    counts_add(&retired, &b->c);
    block_unlink(b);
    memset(&b->c, 0, sizeof b->c);
    b->next = spare;
    spare = b;
    pthread_mutex_unlock(&registry_lock);
}

static void report_at_exit(void)
{
    hook_report_write();
}

static void fork_prepare(void)
{
    pthread_mutex_lock(&registry_lock);
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&registry_lock);
}

/* The only thread of the child is the one that forked, holding registry_lock. */
static void fork_child(void)
{
    while (live) {
        hook_block_t *b = live;
        block_unlink(b);
        if (b == &fallback)
            continue;
        memset(&b->c, 0, sizeof b->c);
        b->next = spare;
        spare = b;
    }
    memset(&fallback.c, 0, sizeof fallback.c);
    memset(&retired, 0, sizeof retired);
    armed = 0;
    report_path[0] = '\0';
    hook_tls = &hook_unregistered;
    if (exit_key_made)
        pthread_setspecific(exit_key, NULL);
    pthread_mutex_unlock(&registry_lock);
}

/* Under registry_lock: the process's first driver call. */
static void arm_locked(void)
{
    const char *path = util_var_text(UTIL_VAR_REPORT);
    snprintf(report_path, sizeof report_path, "%s", path ? path : "");
    if (path && strlen(path) >= sizeof report_path) {
        util_warn("SALUS_REPORT is longer than %d characters: no report", PATH_MAX - 1);
        report_path[0] = '\0';
    }
    if (!handlers_made) {
        handlers_made = 1;
        if (atexit(report_at_exit) != 0 ||
            pthread_atfork(fork_prepare, fork_parent, fork_child) != 0)
            util_warn("cannot register the exit and fork handlers: the report may be "
                      "missing or include a parent's counts");
    }
    armed = 1;
}

hook_block_t *hook_thread_register(void)
{
    pthread_mutex_lock(&registry_lock);
    if (!exit_key_made && pthread_key_create(&exit_key, thread_exit) == 0)
        exit_key_made = 1;
    hook_block_t *b = spare;
    if (b)
        spare = b->next;
    else
        b = calloc(1, sizeof *b);
    if (b)
        b->dispatch = &hook_real;
    if (!b) {
        b = &fallback;      /* racy counts beat no counts; registered once */
        if (!b->pprev)
            block_link(b);
    } else {
        block_link(b);
    }
    if (!armed)
        arm_locked();
    pthread_mutex_unlock(&registry_lock);
    if (exit_key_made)
        pthread_setspecific(exit_key, b);
    hook_tls = b;
    return b;
}

/* ---- the snapshot -------------------------------------------------------- */

void hook_counts_snapshot(hook_counts_t *out)
{
    hook_counts_t sum;
    memset(&sum, 0, sizeof sum);
    pthread_mutex_lock(&registry_lock);
    counts_add(&sum, &retired);
    for (hook_block_t *b = live; b; b = b->next)
        counts_add(&sum, &b->c);
    pthread_mutex_unlock(&registry_lock);
    for (int i = 0; i < HOOK_COUNT; i++)
        if (hook_categories[i] == HOOK_CAT_LAUNCH)
            sum.launches += sum.calls[i];
    *out = sum;
}

/* ---- the report ---------------------------------------------------------- */

/* Modules that add fields (see intercept.h); NULL until they exist.  Hidden:
 * resolved inside libsalus at link time, never from the program. */
#define REPORT_MODULE_ __attribute__((weak, visibility("hidden")))
extern int sched_report_fields(char *buf, size_t cap) REPORT_MODULE_;
extern int mem_report_fields(char *buf, size_t cap) REPORT_MODULE_;

/* Append to buf at *len, as snprintf; -1 once it no longer fits. */
static int put(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int put(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap - *len)
        return -1;
    *len += (size_t)n;
    return 0;
}

static int put_module(char *buf, size_t cap, size_t *len, int (*fields)(char *, size_t))
{
    if (!fields || cap - *len < 2)
        return 0;
    int n = fields(buf + *len + 1, cap - *len - 1);
    if (n < 0 || (size_t)n >= cap - *len - 1)
        return -1;
    if (n > 0) {
        buf[*len] = ',';
        *len += (size_t)n + 1;
    }
    return 0;
}

/* The program's name, made safe inside a JSON string. */
static void report_name(char *out, size_t cap)
{
    const char *name = program_invocation_short_name;
    size_t i = 0;
    for (; name && name[i] && i + 1 < cap; i++) {
        unsigned char ch = (unsigned char)name[i];
        out[i] = ch < 0x20 || ch == '"' || ch == '\\' || ch >= 0x7f ? '_' : (char)ch;
    }
    out[i] = '\0';
}

int hook_report_format(char *buf, size_t cap)
{
    char name[64];
    report_name(name, sizeof name);
    hook_counts_t c;
    hook_counts_snapshot(&c);
    size_t len = 0;
    int bad = put(buf, cap, &len,
                  "{\"pid\":%d,\"name\":\"%s\",\"launches\":%llu,\"syncs\":%llu,"
                  "\"allocs\":%llu,\"frees\":%llu,\"bytes_allocated\":%llu,"
                  "\"resolver_wrapped\":%llu,\"resolver_passed\":%llu,\"calls\":{",
                  (int)getpid(), name,
                  (unsigned long long)c.launches, (unsigned long long)c.syncs,
                  (unsigned long long)c.allocs, (unsigned long long)c.frees,
                  (unsigned long long)c.bytes_allocated,
                  (unsigned long long)c.resolver_wrapped,
                  (unsigned long long)c.resolver_passed);
    const char *sep = "";
    for (int i = 0; i < HOOK_COUNT && !bad; i++) {
        if (c.calls[i]) {
            bad = put(buf, cap, &len, "%s\"%s\":%llu", sep, hook_names[i],
                      (unsigned long long)c.calls[i]);
            sep = ",";
        }
    }
    bad = bad || put(buf, cap, &len, "}");
    bad = bad || put_module(buf, cap, &len, sched_report_fields);
    bad = bad || put_module(buf, cap, &len, mem_report_fields);
    bad = bad || put(buf, cap, &len, "}");
    return bad ? -1 : (int)len;
}

int hook_report_write(void)
{
    char path[PATH_MAX];
    pthread_mutex_lock(&registry_lock);
    int on = armed && report_path[0];
    memcpy(path, report_path, sizeof path);
    pthread_mutex_unlock(&registry_lock);
    if (!on)
        return 0;
    char line[16384];
    int n = hook_report_format(line, sizeof line - 1);
    if (n < 0) {
        util_warn("the report does not fit in %zu bytes: not written", sizeof line);
        return -1;
    }
    line[n++] = '\n';
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        util_warn("cannot open SALUS_REPORT=%s: %s; no report", path, strerror(errno));
        return -1;
    }
    ssize_t w = write(fd, line, (size_t)n);
    int saved = errno;
    close(fd);
    if (w != n) {
        util_warn("cannot write SALUS_REPORT=%s: %s", path, w < 0 ? strerror(saved) : "short write");
        return -1;
    }
    return 0;
}

/* ---- the constructor ------------------------------------------------------
 * libsalus's only start-up work: read SALUS_LOG (one getenv).  The driver,
 * the registry and the handlers wait for the first driver call. */
__attribute__((constructor)) static void salus_init(void)
{
    util_log_init();
}
