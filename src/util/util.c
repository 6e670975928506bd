/*
 * util.c - the log, the reading of SALUS_* variables, sizes, descriptions
 * and the clock.
 *
 * The log level is one int, written once at start-up (util_log_init in
 * vars.c, which reads SALUS_LOG; from libsalus's constructor) and read
 * without a lock: a racing reader sees the
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
#include <syslog.h>
#include <time.h>
#include <unistd.h>

int util_log_level = UTIL_LOG_WARN;
int util_log_syslog;

/* syslog(3)'s priority of each level, in util_log_level_t's order. */
static const int syslog_prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };

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
    if (util_log_syslog && (unsigned)level < sizeof syslog_prio / sizeof *syslog_prio)
        syslog(syslog_prio[level], "%.*s", (int)(len - 1 - (size_t)n), line + n);
    errno = saved;
}

/* ---- SALUS_* variables -------------------------------------------------- */

const char *util_env_str(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* ---- sizes ---------------------------------------------------------------
 * The grammar, whole-string, nothing else (no sign, space, exponent, hex,
 * nan or inf: strtod's forms are exactly what let "nan%" through):
 *
 *   size    = "0" | number unit | number "%" | digits "B"
 *   number  = digits [ "." digits ]       at most 12 and 9 digits
 *   unit    = ( "K" | "M" | "G" | "T" ) [ "i" ] [ "B" ]   any case but the i
 *
 * A number needs a unit because a bare "20" was always a mistake for 20G;
 * "<digits>B" is the one way to give exact bytes, and only from 1 MiB, since
 * a GPU memory size below that is one too.  Arithmetic is on integers (a
 * 128-bit product), so every accepted text has one exact value. */

#define SIZE_INT_DIGITS  12
#define SIZE_FRAC_DIGITS 9

/* digits [ "." digits ] at *p: the value times 10^frac_len.  0 and the end,
 * or -1. */
static int size_number(const char **p, unsigned __int128 *scaled, int *frac_len)
{
    const char *s = *p;
    unsigned __int128 v = 0;
    int n = 0, f = 0;
    for (; *s >= '0' && *s <= '9'; s++, n++)
        v = v * 10 + (unsigned)(*s - '0');
    if (n == 0 || n > SIZE_INT_DIGITS)
        return -1;
    if (*s == '.') {
        for (s++; *s >= '0' && *s <= '9'; s++, f++)
            v = v * 10 + (unsigned)(*s - '0');
        if (f == 0 || f > SIZE_FRAC_DIGITS)
            return -1;
    }
    *p = s;
    *scaled = v;
    *frac_len = f;
    return 0;
}

/* ( K | M | G | T ) [ i ] [ B ] and the end of the text: 0 and the
 * multiplier, or -1. */
static int size_unit(const char *s, uint64_t *mult)
{
    static const char letters[] = "KMGT";
    const char *at = *s ? strchr(letters, toupper((unsigned char)*s)) : NULL;
    if (!at)
        return -1;
    *mult = 1ull << (10 * (at - letters + 1));
    s++;
    if (*s == 'i')
        s++;
    if (*s == 'B' || *s == 'b')
        s++;
    return *s == '\0' ? 0 : -1;
}

int util_parse_size(const char *text, uint64_t whole, uint64_t *out)
{
    static const uint64_t pow10[] = { 1, 10, 100, 1000, 10000, 100000, 1000000,
                                      10000000, 100000000, 1000000000 };
    if (!text)
        return -1;
    if (strcmp(text, "0") == 0) {
        *out = 0;
        return 0;
    }
    const char *s = text;
    unsigned __int128 v, bytes;
    int f;
    uint64_t mult;
    if (size_number(&s, &v, &f) != 0)
        return -1;
    if (s[0] == '%' && s[1] == '\0') {
        /* 0 < p <= 100, i.e. 0 < v <= 100 * 10^f */
        if (whole == 0 || v == 0 || v > (unsigned __int128)100 * pow10[f])
            return -1;
        bytes = (unsigned __int128)whole * v / ((unsigned __int128)100 * pow10[f]);
    } else if ((s[0] == 'B' || s[0] == 'b') && s[1] == '\0') {
        if (f != 0 || v < UTIL_SIZE_MIN_BYTES)
            return -1;
        bytes = v;
    } else if (size_unit(s, &mult) == 0) {
        bytes = v * mult / pow10[f];
    } else {
        return -1;
    }
    if (bytes > UTIL_SIZE_MAX)
        return -1;
    *out = (uint64_t)bytes;
    return 0;
}

/* One "<ordinal>=<size>" of a per-device list, ending at ',' or the end:
 * 0 with *ord and the size's text (copied into buf), or -1. */
static int size_entry(const char **p, int *ord, char *buf, size_t cap)
{
    const char *s = *p;
    int n = 0, digits = 0;
    for (; *s >= '0' && *s <= '9' && digits < 3; s++, digits++)
        n = n * 10 + (*s - '0');
    if (digits == 0 || *s != '=' || n >= UTIL_SIZE_ORDINALS || (digits > 1 && **p == '0'))
        return -1;
    const char *v = ++s;
    while (*s && *s != ',')
        s++;
    size_t len = (size_t)(s - v);
    if (len == 0 || len >= cap)
        return -1;
    memcpy(buf, v, len);
    buf[len] = '\0';
    *ord = n;
    *p = *s == ',' ? s + 1 : s;
    return (*s == ',' && s[1] == '\0') ? -1 : 0;
}

int util_parse_size_at(const char *text, int ordinal, uint64_t whole, uint64_t *out)
{
    if (!text)
        return -1;
    if (!strchr(text, '='))
        return util_parse_size(text, whole, out);
    uint64_t seen = 0, found = 0, v;
    int ord, have = 0;
    char size[64];
    for (const char *p = text; *p;) {
        if (size_entry(&p, &ord, size, sizeof size) != 0 || (seen & (1ull << ord)) ||
            util_parse_size(size, whole, &v) != 0)
            return -1;
        seen |= 1ull << ord;
        if (ord == ordinal) {
            found = v;
            have = 1;
        }
    }
    if (!have)
        return 1;
    *out = found;
    return 0;
}

util_size_text_t util_size(uint64_t bytes)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
    util_size_text_t t;
    int u = 0;
    while (u < 6 && bytes >= 1ull << (10 * (u + 1)))
        u++;
    double v = (double)bytes / (double)(1ull << (10 * u));
    int n;
    if (u == 0)
        n = snprintf(t.s, sizeof t.s, "%llu B", (unsigned long long)bytes);
    else if (v < 9.95)
        n = snprintf(t.s, sizeof t.s, "%.1f %s", v, units[u]);
    else
        n = snprintf(t.s, sizeof t.s, "%.0f %s", v, units[u]);
    if (u > 0 && util_log_level >= UTIL_LOG_DEBUG && n > 0 && (size_t)n < sizeof t.s)
        snprintf(t.s + n, sizeof t.s - (size_t)n, " (%llu bytes)", (unsigned long long)bytes);
    return t;
}

/* ---- descriptions ------------------------------------------------------- */

const char *util_describe(const char *fmt, ...)
{
    static __thread char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    return text;
}

/* ---- clock -------------------------------------------------------------- */

static uint64_t clock_ns(clockid_t which)
{
    struct timespec ts;
    clock_gettime(which, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t util_now_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

uint64_t util_coarse_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC_COARSE);
}
