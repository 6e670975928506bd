/*
 * report.c - the report a process leaves at exit, and the library's
 * constructor.
 *
 * Divided into: arming (the process's first driver call); the report
 * (SALUS_REPORT=<file>: one JSON object per process, appended with one
 * write); the constructor.
 *
 * report_lock guards report_path.  The counts come from thread.c's
 * snapshot; the modules' fields from their headers (a renamed report
 * function is a link error, not a shorter report).
 *
 * fork(): a child reports only if it calls the driver: thread.c disarms it,
 * and its first driver call arms it again here, reading SALUS_REPORT anew.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include "intercept/intercept.h"
#include "nvml/nvhook.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;
static char report_path[PATH_MAX];    /* SALUS_REPORT when armed, or "" */
static int exit_handler;              /* 1 registered, -1 could not be */

/* ---- arming ----------------------------------------------------------------- */

static void report_at_exit(void)
{
    hook_report_write();
}

/* The process's first driver call (thread.c calls it outside its lock). */
static void arm(void)
{
    const char *path = util_var_text(UTIL_VAR_REPORT);
    pthread_mutex_lock(&report_lock);
    snprintf(report_path, sizeof report_path, "%s", path ? path : "");
    if (path && strlen(path) >= sizeof report_path) {
        util_warn("SALUS_REPORT is longer than %d characters: no report", PATH_MAX - 1);
        report_path[0] = '\0';
    }
    int first = !exit_handler;
    if (first)
        exit_handler = atexit(report_at_exit) == 0 ? 1 : -1;
    pthread_mutex_unlock(&report_lock);
    if (first && exit_handler < 0)
        util_warn("cannot register the exit handler: no report will be written");
}

/* ---- the report ---------------------------------------------------------- */

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
    if (cap - *len < 2)
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
    bad = bad || put_module(buf, cap, &len, vmem_report_fields);
    bad = bad || put(buf, cap, &len, "}");
    return bad ? -1 : (int)len;
}

int hook_report_write(void)
{
    char path[PATH_MAX];
    pthread_mutex_lock(&report_lock);
    memcpy(path, report_path, sizeof path);
    pthread_mutex_unlock(&report_lock);
    int on = path[0] && hook_threads_armed();
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
 * libsalus's only start-up work: read SALUS_LOG (one getenv), hand NVML's
 * hooks glibc's dlsym, and tell the thread registry what to do at the first
 * driver call.  The driver, the
 * blocks and the handlers wait for that call. */
__attribute__((constructor)) static void salus_init(void)
{
    util_log_init();
    nvh_init(hook_dlsym_real);      /* NVML's hooks look up through glibc's dlsym */
    hook_threads_on_first_call(arm);
}
