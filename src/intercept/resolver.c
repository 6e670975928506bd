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
 *      provided the driver's answer is the very function that wrapper calls
 *      (the export's address in the driver, real.c's slot).  When it is
 *      not, the map named the wrong export for this driver: a newer ABI
 *      version than this toolkit's map knows, a per-thread (_ptsz/_ptds)
 *      variant the map did not expect, or a driver whose exports are not
 *      what its resolver hands out.  Our wrapper would then take arguments
 *      of one ABI and forward them to a function of another, so the
 *      driver's answer is handed through (said once per export at debug
 *      level; bench/gpu/check.sh's procaddr step reads those lines).
 * The self-lookup ("cuGetProcAddress" at 11030 or 12000) falls out of the
 * rule: both forms are in the list.  Unlike resolvers that ignore version and
 * flags and return the newest variant, a program gets the ABI it asked for,
 * and never a wrapper of another ABI than the driver's answer.
 *
 * An export handed through that launches, copies, sets or allocates device
 * memory (hook_base_writes) is work libsalus cannot see or gate: paging
 * stops for the process (page_stop), since it could move memory such a
 * call writes, or have it run while the memory is out.
 *
 * Also the table of every wrapper's address (hook_wrappers).
 *
 * No lock: the map and the table are read-only once loaded; counters are the
 * calling thread's.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include "intercept/intercept.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* Every wrapper, by hook id: what the resolver and the dlsym override
 * answer.  Here, beside the two it defines, so that the file that reads the
 * table is the one that completes it. */
#define WRAPPER_(cat, export, ...) (void *)export,
void *const hook_wrappers[HOOK_COUNT] = { HOOK_LIST(WRAPPER_) };

/* Step 3's guard: is the driver's answer fn the function wrapper id calls?
 * The slot is read after the real cuGetProcAddress, which loaded the driver
 * (a slot still holding its lazy stub is an export the driver lacks: not
 * equal, passed). */
static int answer_is_ours(int id, void *fn)
{
    return fn == util_load_acquire(&hook_real.slot[id]);
}

/* Steps 2 and 3: the id of the wrapper to answer, or -1 with *why set. */
static int resolve_choose(const char *symbol, void *fn, int version, cuuint64_t flags,
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
    if (!answer_is_ours(id, fn)) {
        static int said[HOOK_COUNT];
        util_log_once(&said[id], UTIL_LOG_DEBUG,
                      "resolve %s@%d flags=%llu: the driver's answer %p is not its export %s "
                      "(%p), which our wrapper calls: passed through, not intercepted",
                      symbol, version, (unsigned long long)flags, fn, *export_name,
                      util_load_relaxed(&hook_real.slot[id]));
        *why = "passed (the driver's answer is not the export our wrapper calls)";
        return -1;
    }
    *why = "wrapped";
    return id;
}

int hook_base_writes(const char *base)
{
    static const char *const prefixes[] = { "cuLaunch", "cuGraphLaunch", "cuMemcpy", "cuMemset",
                                            "cuStreamWriteValue", "cuStreamBatchMemOp",
                                            "cuMemAlloc", "cuMemCreate" };
    if (!base || strcmp(base, "cuMemAllocHost") == 0)
        return 0;                     /* host memory */
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(base, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

static void passed_writer(const char *symbol, int version, const char *why)
{
    if (!hook_base_writes(symbol) || page_stopped())
        return;
    char text[192];
    snprintf(text, sizeof text, "the program resolved %s (version %d), and libsalus handed the "
             "driver's function through unwrapped: %s", symbol, version, why);
    page_stop(text);
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
        id = resolve_choose(symbol, *pfn, version, flags, &export_name, &why);
    if (id >= 0) {
        *pfn = hook_wrappers[id];
        hook_add(&b->c.resolver_wrapped, 1);
    } else {
        hook_add(&b->c.resolver_passed, 1);
        if (rc == CUDA_SUCCESS && pfn && *pfn)
            passed_writer(symbol, version, why);
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
