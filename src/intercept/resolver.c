/*
 * resolver.c - cuGetProcAddress (4 arguments, CUDA 11.3) and
 * cuGetProcAddress_v2 (5 arguments, CUDA 12.0): how the CUDA runtime, and
 * every framework built on it, finds the driver's functions.
 *
 * The rule, for (symbol, version, flags):
 *   1. ask the real driver, with the same arguments; if it fails or returns
 *      no function, its answer is ours, unchanged;
 *   2. name the export it chose with the driver map (procmap.c): the newest
 *      variant at or below version, per-thread only when flags ask for it;
 *   3. if that export is wrapped, answer our wrapper of exactly that export -
 *      provided our map can know it: version <= the header's version, or the
 *      driver gives the same function at the header's version (else a newer
 *      driver may have a variant we do not know: pass it through).
 * The self-lookup ("cuGetProcAddress" at 11030 or 12000) falls out of the
 * rule: both forms are in the list.  Unlike resolvers that ignore version and
 * flags and return the newest variant, a program gets the ABI it asked for.
 *
 * Also the table of every wrapper's address (hook_wrappers).
 *
 * No lock: the map and the table are read-only once loaded; counters are the
 * calling thread's.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include "intercept/intercept.h"

#include <stddef.h>

/* Every wrapper, by hook id: what the resolver and the dlsym override
 * answer.  Here, beside the two it defines, so that the file that reads the
 * table is the one that completes it. */
#define WRAPPER_(cat, export, ...) (void *)export,
void *const hook_wrappers[HOOK_COUNT] = { HOOK_LIST(WRAPPER_) };

/* Does the driver give fn for symbol at the header's version too? */
static int same_at_header(const char *symbol, void *fn, cuuint64_t flags, int five)
{
    void *at_header = NULL;
    CUresult rc = five
        ? HOOK_REAL(cuGetProcAddress_v2)(symbol, &at_header, CU_PROCMAP_HEADER_VERSION, flags, NULL)
        : HOOK_REAL(cuGetProcAddress)(symbol, &at_header, CU_PROCMAP_HEADER_VERSION, flags);
    return rc == CUDA_SUCCESS && at_header == fn;
}

/* Steps 2 and 3: the id of the wrapper to answer, or -1 with *why set. */
static int resolve_choose(const char *symbol, void *fn, int version, cuuint64_t flags, int five,
                          const char **export_name, const char **why)
{
    if (hook_procmap_lookup(symbol, version, flags, export_name) != 0) {
        *why = "passed (not in this toolkit's map)";
        return -1;
    }
    int id = hook_find(*export_name);
    if (id < 0) {
        *why = "passed (not wrapped)";
        return -1;
    }
    if (version > CU_PROCMAP_HEADER_VERSION && !same_at_header(symbol, fn, flags, five)) {
        *why = "passed (the driver has a variant newer than this toolkit's map)";
        return -1;
    }
    *why = "wrapped";
    return id;
}

static CUresult resolve(const char *symbol, void **pfn, int version, cuuint64_t flags,
                        CUdriverProcAddressQueryResult *status, int five)
{
    hook_block_t *b = hook_enter(five ? HOOK_cuGetProcAddress_v2 : HOOK_cuGetProcAddress);
    CUresult rc = five ? HOOK_REAL(cuGetProcAddress_v2)(symbol, pfn, version, flags, status)
                       : HOOK_REAL(cuGetProcAddress)(symbol, pfn, version, flags);
    const char *export_name = "-", *why = "passed (driver: no function)";
    int id = -1;
    if (rc != CUDA_SUCCESS)
        why = "passed (driver: error)";
    else if (symbol && pfn && *pfn)
        id = resolve_choose(symbol, *pfn, version, flags, five, &export_name, &why);
    if (id >= 0) {
        *pfn = hook_wrappers[id];
        hook_add(&b->c.resolver_wrapped, 1);
    } else {
        hook_add(&b->c.resolver_passed, 1);
    }
    util_debug("resolve %s@%d flags=%llu -> %s %s (rc %d)", symbol ? symbol : "(null)", version,
               (unsigned long long)flags, export_name, why, (int)rc);
    return rc;
}

SALUS_EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                                  cuuint64_t flags,
                                                  CUdriverProcAddressQueryResult *status)
{
    return resolve(symbol, pfn, version, flags, status, 1);
}

SALUS_EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int version,
                                               cuuint64_t flags)
{
    return resolve(symbol, pfn, version, flags, NULL, 0);
}
