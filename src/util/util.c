/*
 * util.c - the log, the reading of SALUS_* variables, and the clock.
 *
 * The log level is one int, written once at start-up (util_log_init, from
 * libsalus's constructor) and read without a lock: a racing reader sees the
 * old or the new level, and either is fine for a log.  Each line is built in a
 * stack buffer and written with a single write(2), which keeps lines whole
 * when threads or processes log at once.  Variable readers are called at
 * start-up only; they never allocate.
 */
#include "util/util.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int util_log_level = UTIL_LOG_WARN;

static const char *const level_names[] = { UTIL_LOG_NAMES, NULL };

void util_log_write(util_log_level_t level, const char *fmt, ...)
{
    char line[1024];
    int saved = errno;
    int n = snprintf(line, sizeof line, "salus[%d]: %s: ", (int)getpid(),
                     level_names[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;  /* a log that cannot be written is dropped */
    errno = saved;
}

void util_log_init(void)
{
    int level;
    if (util_var_choice(UTIL_VAR_LOG, &level) == 0)
        util_log_level = level;
}

/* ---- SALUS_* variables -------------------------------------------------- */

const char *util_env_str(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static int parse_unit(const char *p, uint64_t *mult)
{
    switch (toupper((unsigned char)*p)) {
    case '\0': *mult = 1; return 0;
    case 'B': *mult = 1; p++; break;
    case 'K': *mult = 1ull << 10; p++; break;
    case 'M': *mult = 1ull << 20; p++; break;
    case 'G': *mult = 1ull << 30; p++; break;
    case 'T': *mult = 1ull << 40; p++; break;
    default: return -1;
    }
    if (*mult > 1 && *p == 'i')   /* KiB, MiB, ... */
        p++;
    if (*mult > 1 && toupper((unsigned char)*p) == 'B')
        p++;
    return *p == '\0' ? 0 : -1;
}

int util_parse_size(const char *text, uint64_t whole, uint64_t *out)
{
    if (!text || !*text || *text == '-' || isspace((unsigned char)*text))
        return -1;
    errno = 0;
    char *end;
    double v = strtod(text, &end);
    if (errno || end == text || v < 0)
        return -1;
    if (*end == '%' && end[1] == '\0') {
        if (whole == 0 || v <= 0 || v > 100)
            return -1;
        *out = (uint64_t)((double)whole * v / 100.0);
        return 0;
    }
    uint64_t mult;
    if (parse_unit(end, &mult) != 0)
        return -1;
    double bytes = v * (double)mult;
    if (bytes >= 18446744073709551615.0)
        return -1;
    if (mult == 1 && v != (double)(uint64_t)v)   /* fractional bytes */
        return -1;
    *out = (uint64_t)bytes;
    return 0;
}

/* ---- clock -------------------------------------------------------------- */

uint64_t util_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
