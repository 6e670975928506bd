/*
 * procmap.c - the driver map: which export cuGetProcAddress(symbol, version,
 * flags) names, from the rows gen_procmap.py derived from cudaTypedefs.h.
 *
 * The rows are sorted by base name (strcmp), then per-thread flag, then
 * version, so a lookup is a binary search for the first row of the base name
 * and a walk over its few variants.  Read-only data: no lock.
 */
#include "intercept/intercept.h"

#include <string.h>

typedef struct procmap_row {
    const char *base;
    int version;
    int per_thread;
    const char *export_name;
} procmap_row_t;

#define PROCMAP_ROW_(base, version, pt, export) { #base, version, pt, #export },
static const procmap_row_t procmap_rows[] = { CU_PROCMAP(PROCMAP_ROW_) };
#define PROCMAP_N (sizeof procmap_rows / sizeof procmap_rows[0])

/* Index of the first row of `base`, or -1. */
static long procmap_first(const char *base)
{
    size_t lo = 0, hi = PROCMAP_N;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(procmap_rows[mid].base, base) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < PROCMAP_N && strcmp(procmap_rows[lo].base, base) == 0 ? (long)lo : -1;
}

/* The newest variant of the base at [first...] with this per-thread flag and
 * a version <= version, or NULL. */
static const procmap_row_t *procmap_newest(long first, int per_thread, int version)
{
    const procmap_row_t *best = NULL;
    const char *base = procmap_rows[first].base;
    for (size_t i = (size_t)first; i < PROCMAP_N && strcmp(procmap_rows[i].base, base) == 0; i++) {
        const procmap_row_t *r = &procmap_rows[i];
        if (r->per_thread == per_thread && r->version <= version &&
            (!best || r->version > best->version))
            best = r;
    }
    return best;
}

int hook_procmap_lookup(const char *symbol, int version, cuuint64_t flags,
                        const char **export_name)
{
    if (!symbol || flags > CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
        return -1;
    long first = procmap_first(symbol);
    if (first < 0)
        return -1;
    const procmap_row_t *r = NULL;
    if (flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
        r = procmap_newest(first, 1, version);
    if (!r)
        r = procmap_newest(first, 0, version);
    if (!r)
        return -1;
    *export_name = r->export_name;
    return 0;
}
