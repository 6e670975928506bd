/*
 * proc.c - cuGetProcAddress (4 arguments) and cuGetProcAddress_v2 (5).
 *
 * Divided into: the table; the lookup; the entry points.  The exports that
 * simgpu does not implement are generated in stubs.c.
 *
 * The tables are CU_PROCMAP (build/gen/cu_procmap.h, generated from the
 * toolkit's cudaTypedefs.h), CU_PROCMAP_GFX (the graphics interop headers'
 * typedefs, by the same rule) and cudaProfiler.h's three: one row per
 * export, sorted by base name, then per-thread flag, then version, with
 * &export as the answer.  libcuda.so.1
 * is linked with -Bsymbolic, so &export is simgpu's own function even when a
 * preloaded library (libsalus) exports the same name.
 *
 * The driver's rules: flags 0 (DEFAULT) and 1 (LEGACY_STREAM) pick legacy
 * variants; 2 (PER_THREAD_DEFAULT_STREAM) picks the newest per-thread variant
 * at or below the requested version when there is one, else the legacy one;
 * the answer is the newest variant whose version <= the requested one.
 *
 * A fault for the resolvers that use this one (libsalus's guard):
 * SIMGPU_PROCADDR_PT=<symbol>@<version> answers that one legacy question
 * (flags 0 or 1, exactly that version) as if flags were 2, with the
 * per-thread variant when there is one: a driver whose answer is not the
 * export a map of its headers would name.
 *
 * No lock: the table is constant.
 */
#include "sim.h"

#include <stdlib.h>
#include <string.h>

/* ---- the table ------------------------------------------------------------------ */

typedef struct proc_row {
    const char *base;
    int version;
    int per_thread;
    void *fn;
} proc_row_t;

#define SIM_ROW(base, version, per_thread, export) \
    { #base, version, per_thread, (void *)&export },
static const proc_row_t rows[] = { CU_PROCMAP(SIM_ROW) };
static const proc_row_t gfx_rows[] = { CU_PROCMAP_GFX(SIM_ROW) };

/* Exports of cudaProfiler.h, which no typedef header of cuda.h's lists. */
static const proc_row_t profiler_rows[] = {
    { "cuProfilerInitialize", 4000, 0, (void *)&cuProfilerInitialize },
    { "cuProfilerStart", 4000, 0, (void *)&cuProfilerStart },
    { "cuProfilerStop", 4000, 0, (void *)&cuProfilerStop },
};

#define TABLE(t) { t, (int)(sizeof t / sizeof t[0]) }
static const struct { const proc_row_t *rows; int n; } tables[] = {
    TABLE(rows), TABLE(gfx_rows), TABLE(profiler_rows),
};

/* ---- the lookup ----------------------------------------------------------------- */

/* [*lo, *hi): the rows of base name sym in t (n rows, sorted by base). */
static int find_in(const proc_row_t *t, int n, const char *sym,
                   const proc_row_t **lo, const proc_row_t **hi)
{
    int a = 0, b = n;
    while (a < b) {                     /* first row with base >= sym */
        int m = (a + b) / 2;
        if (strcmp(t[m].base, sym) < 0)
            a = m + 1;
        else
            b = m;
    }
    int end = a;
    while (end < n && !strcmp(t[end].base, sym))
        end++;
    *lo = &t[a];
    *hi = &t[end];
    return end > a;
}

static void find_rows(const char *sym, const proc_row_t **lo, const proc_row_t **hi)
{
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        if (find_in(tables[i].rows, tables[i].n, sym, lo, hi))
            return;
}

/* The newest row of [lo, hi) with this per-thread flag and version <= ver. */
static const proc_row_t *newest(const proc_row_t *lo, const proc_row_t *hi, int pt, int ver)
{
    const proc_row_t *best = NULL;
    for (const proc_row_t *r = lo; r < hi; r++)
        if (r->per_thread == pt && r->version <= ver && (!best || r->version > best->version))
            best = r;
    return best;
}

/* Whether SIMGPU_PROCADDR_PT names (sym, ver).  Read at each lookup:
 * lookups are not a hot path, and a test sets it per process. */
static int skewed(const char *sym, int ver)
{
    const char *v = getenv("SIMGPU_PROCADDR_PT");
    const char *at = v ? strchr(v, '@') : NULL;
    return at && (size_t)(at - v) == strlen(sym) && strncmp(v, sym, (size_t)(at - v)) == 0 &&
           atoi(at + 1) == ver;
}

static CUresult lookup(const char *sym, void **pfn, int ver, cuuint64_t flags,
                       CUdriverProcAddressQueryResult *status)
{
    if (!sym || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                              CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ||
        flags == (CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
        return CUDA_ERROR_INVALID_VALUE;
    if (ver > CU_PROCMAP_HEADER_VERSION)
        return CUDA_ERROR_INVALID_VALUE;
    const proc_row_t *lo, *hi, *r = NULL;
    find_rows(sym, &lo, &hi);
    if (lo == hi) {
        *pfn = NULL;
        if (status)
            *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_NOT_FOUND;
    }
    if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) || skewed(sym, ver))
        r = newest(lo, hi, 1, ver);
    if (!r)
        r = newest(lo, hi, 0, ver);
    if (!r) {
        *pfn = NULL;
        if (status)
            *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
        return CUDA_ERROR_NOT_FOUND;
    }
    *pfn = r->fn;
    if (status)
        *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

/* ---- the entry points --------------------------------------------------------------
 * Both work before cuInit: the runtime resolves its whole table first. */

CUresult CUDAAPI cuGetProcAddress(const char *sym, void **pfn, int ver, cuuint64_t flags)
{
    return lookup(sym, pfn, ver, flags, NULL);
}

CUresult CUDAAPI cuGetProcAddress_v2(const char *sym, void **pfn, int ver, cuuint64_t flags,
                                     CUdriverProcAddressQueryResult *status)
{
    CUresult rc = lookup(sym, pfn, ver, flags, status);
    return rc == CUDA_ERROR_NOT_FOUND ? CUDA_SUCCESS : rc;  /* the answer is in status */
}
