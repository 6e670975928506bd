/*
 * wl_util.c - what the workloads share that is not CUDA or options: the
 * recorded error, time and signals, statistics, the PRNG and the JSON line.
 *
 * Divided into: errors; time and signals; statistics; PRNG; JSON.
 * Single-threaded, like the programs; the only state a signal handler
 * touches is one sig_atomic_t.
 */
#include "wl.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- errors ------------------------------------------------------------- */

/* The first error wins: later failures are usually consequences of it (a
 * cleanup after a failed launch), and the first names the cause. */
static char err_msg[512];
static int err_oom;

static int error_vset(int code, const char *fmt, va_list ap, const char *suffix)
{
    if (err_msg[0])
        return code;
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    if (suffix) {
        size_t n = strlen(err_msg);
        snprintf(err_msg + n, sizeof err_msg - n, "%s", suffix);
    }
    return code;
}

int wl_errorf(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(code, fmt, ap, NULL);
    va_end(ap);
    return code;
}

/* cuGetErrorName names every result, except where there is no driver to
 * ask: the toolkit's stub library answers CUDA_ERROR_STUB_LIBRARY to it too. */
static const char *error_name(CUresult r)
{
    const char *name = NULL;
    if (cuGetErrorName(r, &name) == CUDA_SUCCESS && name)
        return name;
    switch (r) {
    case CUDA_ERROR_STUB_LIBRARY:
        return "CUDA_ERROR_STUB_LIBRARY (the toolkit's stub libcuda was loaded: set "
               "LD_LIBRARY_PATH to simgpu or the real driver)";
    case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
    default: return "unknown CUDA error";
    }
}

int wl_cu(CUresult r, const char *fmt, ...)
{
    if (r == CUDA_SUCCESS)
        return WL_OK;
    const char *name = error_name(r);
    char suffix[192];
    snprintf(suffix, sizeof suffix, ": %s (%d)", name, (int)r);
    err_oom = (r == CUDA_ERROR_OUT_OF_MEMORY);
    int code = err_oom ? WL_EOOM : WL_ECUDA;
    va_list ap;
    va_start(ap, fmt);
    error_vset(code, fmt, ap, suffix);
    va_end(ap);
    return code;
}

const char *wl_error(void) { return err_msg; }
int wl_error_is_oom(void) { return err_oom; }

void wl_error_clear(void)
{
    err_msg[0] = '\0';
    err_oom = 0;
}

/* ---- time and signals --------------------------------------------------- */

static volatile sig_atomic_t stop_flag;

uint64_t wl_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Absolute deadlines: a sleep that wakes late does not push the next one. */
int wl_sleep_until(uint64_t deadline_ns)
{
    struct timespec ts = {
        .tv_sec = (time_t)(deadline_ns / 1000000000ull),
        .tv_nsec = (long)(deadline_ns % 1000000000ull),
    };
    for (;;) {
        int r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        if (r == 0)
            return 0;
        if (r != EINTR)
            return 0;   /* only EINVAL is possible, for a deadline we made */
        if (stop_flag)
            return 1;
    }
}

static void on_stop(int sig)
{
    (void)sig;
    stop_flag = 1;
}

/* No SA_RESTART: a sleep interrupted by the signal returns, so the program
 * notices the stop without waiting out its sleep. */
int wl_signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0)
        return wl_errorf(WL_ECUDA, "sigaction: %s", strerror(errno));
    return WL_OK;
}

int wl_stop_requested(void) { return stop_flag != 0; }

/* ---- statistics --------------------------------------------------------- */

int wl_samples_add(wl_samples_t *s, double x)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        double *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return wl_errorf(WL_ECUDA, "out of host memory for %zu samples", cap);
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = x;
    return WL_OK;
}

double wl_samples_mean(const wl_samples_t *s)
{
    if (!s->n)
        return 0;
    double sum = 0;
    for (size_t i = 0; i < s->n; i++)
        sum += s->v[i];
    return sum / (double)s->n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts a copy, so that the samples keep their order (iteration order). */
double wl_samples_pct(const wl_samples_t *s, double p)
{
    if (!s->n)
        return 0;
    double *v = malloc(s->n * sizeof *v);
    if (!v)
        return 0;
    memcpy(v, s->v, s->n * sizeof *v);
    qsort(v, s->n, sizeof *v, cmp_double);
    double rank = p / 100.0 * (double)(s->n - 1);
    size_t lo = (size_t)floor(rank);
    size_t hi = lo + 1 < s->n ? lo + 1 : lo;
    double r = v[lo] + (v[hi] - v[lo]) * (rank - (double)lo);
    free(v);
    return r;
}

double wl_samples_max(const wl_samples_t *s)
{
    double m = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i] > m)
            m = s->v[i];
    return m;
}

void wl_samples_free(wl_samples_t *s)
{
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* ---- PRNG --------------------------------------------------------------- */

void wl_rng_seed(wl_rng_t *r, uint64_t seed) { r->state = seed; }

uint64_t wl_rng_next(wl_rng_t *r)
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* 53 random bits, shifted to (0, 1] so that -log() of it is finite. */
double wl_rng_unit(wl_rng_t *r)
{
    return ((double)(wl_rng_next(r) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

/* ---- JSON --------------------------------------------------------------- */

static void json_raw(wl_json_t *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void json_raw(wl_json_t *j, const char *fmt, ...)
{
    if (j->len >= sizeof j->buf)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(j->buf + j->len, sizeof j->buf - j->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        j->len += (size_t)n;
    if (j->len >= sizeof j->buf)
        j->len = sizeof j->buf - 1;
}

static void json_key(wl_json_t *j, const char *key)
{
    json_raw(j, "%s\"%s\":", j->len > 1 ? "," : "", key);
}

void wl_json_begin(wl_json_t *j)
{
    j->len = 0;
    json_raw(j, "{");
}

/* Escapes what JSON requires; names and error messages are ASCII here, but
 * a --name from the command line may hold anything. */
void wl_json_str(wl_json_t *j, const char *key, const char *val)
{
    json_key(j, key);
    json_raw(j, "\"");
    for (const unsigned char *p = (const unsigned char *)(val ? val : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            json_raw(j, "\\%c", *p);
        else if (*p < 0x20)
            json_raw(j, "\\u%04x", *p);
        else
            json_raw(j, "%c", *p);
    }
    json_raw(j, "\"");
}

void wl_json_int(wl_json_t *j, const char *key, long long val)
{
    json_key(j, key);
    json_raw(j, "%lld", val);
}

void wl_json_u64(wl_json_t *j, const char *key, uint64_t val)
{
    json_key(j, key);
    json_raw(j, "%llu", (unsigned long long)val);
}

void wl_json_num(wl_json_t *j, const char *key, double val, int decimals)
{
    json_key(j, key);
    if (!isfinite(val))
        val = 0;   /* JSON has no NaN; only an empty run gets here */
    json_raw(j, "%.*f", decimals, val);
}

void wl_json_bool(wl_json_t *j, const char *key, int val)
{
    json_key(j, key);
    json_raw(j, "%s", val ? "true" : "false");
}

void wl_json_end(wl_json_t *j, FILE *f)
{
    json_raw(j, "}");
    fprintf(f, "%s\n", j->buf);
    fflush(f);
}

void wl_json_head(wl_json_t *j, const char *prog, const char *name)
{
    wl_json_begin(j);
    wl_json_str(j, "program", prog);
    wl_json_str(j, "name", name);
    wl_json_int(j, "pid", (long long)getpid());
}

void wl_json_tail(wl_json_t *j, int rc, int interrupted)
{
    if (interrupted)
        wl_json_bool(j, "interrupted", 1);
    wl_json_bool(j, "ok", rc == WL_OK);
    if (rc != WL_OK)
        wl_json_str(j, "error", wl_error()[0] ? wl_error() : "failed");
}
