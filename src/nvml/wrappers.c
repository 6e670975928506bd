/*
 * wrappers.c - the NVML exports of libsalus: one macro per category of
 * nvml.list, expanded for each of its names, the table of their addresses,
 * and the dlsym override's decision for NVML names.
 *
 * Divided into: the process's view of memory (MEMORY); the process lists
 * (PROCS, PUTIL); the wrappers; the dlsym decision.
 *
 * Every wrapper calls the real function first and keeps its error as the
 * answer.  On success it writes the process's view over the real answer:
 *   MEMORY  free  = what cuMemGetInfo_v2's hook answers as free (memory's
 *                   own view of that GPU: mem_view_uuid);
 *           used  = the process's allocations and what its contexts take;
 *           total = used + free, NVML's equation: the limit when there is
 *                   one (the room a limit leaves is net of the contexts);
 *                   without, the view's total and the contexts.  _v2's
 *                   reserved is the driver's, added to total.  None is more
 *                   than the driver said.  A GPU the process has no memory
 *                   on is answered as the driver says.
 *   PROCS   the real list's rows of the table's processes on that GPU
 *   PUTIL   (nvh_table_pids), with the real figures of each.
 * Each is a function of the real answer and the table only, so applying it
 * twice changes nothing: an NVML whose v1 calls its own _v2 through our
 * export is answered right.  A failure in a hook (no table, no UUID, no
 * memory for a copy) fails open: said once, the real answer returned.
 *
 * No lock: memory's view takes the table's lock as cuMemGetInfo's does;
 * the rest reads validated copies (peers.c).
 */
#include "nvml/nvhook.h"
#include "memory/memory.h"
#include "util/util.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- the process's view of memory ------------------------------------------ */

static uint64_t umin(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* The view of dev, or -1: not a GPU this process has memory on. */
static int own_view(nvmlDevice_t dev, mem_uuid_view_t *v)
{
    uint8_t uuid[16];
    return nvh_device_uuid(dev, uuid) == 0 && mem_view_uuid(uuid, v) == 0 ? 0 : -1;
}

/* total, free and used over what the driver answered (reserved: kept out
 * of free and used, as _v2 counts it): used is the process's own, free its
 * view's, total their sum, none more than the driver said. */
static void view_memory(const mem_uuid_view_t *v, uint64_t reserved, unsigned long long *total,
                        unsigned long long *free_b, unsigned long long *used)
{
    uint64_t u = v->used + v->contexts, f = umin(v->free, *free_b);
    uint64_t t = umin(u + f + reserved, *total);
    uint64_t r = umin(reserved, t);
    f = umin(f, t - r);
    *total = t;
    *free_b = f;
    *used = t - r - f;
}

static void fix_memory_v1(nvmlDevice_t dev, nvmlMemory_t *m)
{
    mem_uuid_view_t v;
    if (own_view(dev, &v) == 0)
        view_memory(&v, 0, &m->total, &m->free, &m->used);
}

static void fix_memory_v2(nvmlDevice_t dev, nvmlMemory_v2_t *m)
{
    mem_uuid_view_t v;
    if (own_view(dev, &v) == 0)
        view_memory(&v, m->reserved, &m->total, &m->free, &m->used);
}

#define FIX_MEMORY(dev, m)                                                    \
    _Generic((m), nvmlMemory_t *: fix_memory_v1, nvmlMemory_v2_t *: fix_memory_v2)(dev, m)

/* ---- the process lists ---------------------------------------------------------
 * Every row type starts with the pid: the filter reads it there. */
_Static_assert(offsetof(nvmlProcessInfo_v1_t, pid) == 0, "pid first");
_Static_assert(offsetof(nvmlProcessInfo_v2_t, pid) == 0, "pid first");
_Static_assert(offsetof(nvmlProcessUtilizationSample_t, pid) == 0, "pid first");

#define NVH_MAX_PIDS 512

static void fail_open(const char *name, const char *why)
{
    static int said;
    util_log_once(&said, UTIL_LOG_WARN,
                  "NVML: %s: %s; answering the device's own list, not the job's view "
                  "(this is said once)", name, why);
}

/* Keep, in place and in order, the rows of rows[n] (each `size` bytes) whose
 * pid is one of the table's on dev.  The count kept, or -1 (fail open). */
static int keep_table_rows(const char *name, nvmlDevice_t dev, void *rows, unsigned n,
                           size_t size)
{
    uint8_t uuid[16];
    pid_t pids[NVH_MAX_PIDS];
    if (nvh_device_uuid(dev, uuid) != 0) {
        fail_open(name, "the device's UUID is not known to NVML");
        return -1;
    }
    int np = nvh_table_pids(uuid, pids, NVH_MAX_PIDS);
    if (np < 0) {
        fail_open(name, "no Salus table to read the processes from");
        return -1;
    }
    unsigned k = 0;
    for (unsigned i = 0; i < n; i++) {
        char *row = (char *)rows + (size_t)i * size;
        unsigned pid;
        memcpy(&pid, row, sizeof pid);
        for (int j = 0; j < np; j++)
            if ((unsigned)pids[j] == pid) {
                if (k != i)
                    memmove((char *)rows + (size_t)k * size, row, size);
                k++;
                break;
            }
    }
    return (int)k;
}

/* Answer rows[n] to a caller with room for *count, by NVML's protocol:
 * too small is NVML_ERROR_INSUFFICIENT_SIZE with the count needed; an
 * empty list always fits. */
static nvmlReturn_t deliver(const void *rows, unsigned n, size_t size, unsigned int *count,
                            void *out)
{
    if (n > *count) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (n && !out)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (n)
        memcpy(out, rows, (size_t)n * size);
    *count = n;
    return NVML_SUCCESS;
}

/* The whole real list, in a buffer of ours (*heap: to free), grown as the
 * driver asks: the caller's room may fit the kept rows and not the
 * device's.  `ask` calls the real function with (count, buffer). */
typedef nvmlReturn_t (*ask_fn)(void *ctx, unsigned int *count, void *rows);
static nvmlReturn_t ask_all(ask_fn ask, void *ctx, size_t size, void *stack, unsigned cap,
                            void **rows, unsigned *n, void **heap)
{
    *heap = NULL;
    *rows = stack;
    unsigned room = cap;
    nvmlReturn_t rc = ask(ctx, &room, stack);
    for (int tries = 0; rc == NVML_ERROR_INSUFFICIENT_SIZE && tries < 4; tries++) {
        free(*heap);
        room += 16;                 /* a few more may come meanwhile */
        *heap = calloc(room, size);
        if (!*heap)
            return NVML_ERROR_MEMORY;
        *rows = *heap;
        rc = ask(ctx, &room, *heap);
    }
    *n = room;
    return rc;
}

/* ---- the wrappers ------------------------------------------------------------- */

#define MEMORY_WRAPPER_(name, T)                                              \
    SALUS_EXPORT nvmlReturn_t name(nvmlDevice_t dev, T *m)                    \
    {                                                                         \
        typedef nvmlReturn_t (*fn_t)(nvmlDevice_t, T *);                      \
        int pass;                                                             \
        nvmlReturn_t why;                                                     \
        fn_t fn = (fn_t)nvh_real(NVH_##name, &pass, &why);                    \
        if (!fn)                                                              \
            return why;                                                       \
        nvmlReturn_t rc = fn(dev, m);                                         \
        if (rc == NVML_SUCCESS && !pass && m)                                 \
            FIX_MEMORY(dev, m);                                               \
        return rc;                                                            \
    }

/* The real list of (dev, count, rows), then the table's rows of it. */
#define PROCS_WRAPPER_(name, T)                                               \
    typedef nvmlReturn_t (*name##_fn)(nvmlDevice_t, unsigned int *, T *);     \
    typedef struct { name##_fn fn; nvmlDevice_t dev; } name##_ctx;            \
    static nvmlReturn_t name##_ask(void *c, unsigned int *count, void *rows)  \
    {                                                                         \
        name##_ctx *x = c;                                                    \
        return x->fn(x->dev, count, rows);                                    \
    }                                                                         \
    SALUS_EXPORT nvmlReturn_t name(nvmlDevice_t dev, unsigned int *count, T *infos) \
    {                                                                         \
        int pass;                                                             \
        nvmlReturn_t why;                                                     \
        name##_fn fn = (name##_fn)nvh_real(NVH_##name, &pass, &why);          \
        if (!fn)                                                              \
            return why;                                                       \
        if (pass || !count)                                                   \
            return fn(dev, count, infos);                                     \
        T stack[64];                                                          \
        void *rows, *heap;                                                    \
        unsigned n;                                                           \
        name##_ctx x = { fn, dev };                                           \
        nvmlReturn_t rc = ask_all(name##_ask, &x, sizeof(T), stack, 64, &rows, &n, &heap); \
        if (rc == NVML_ERROR_MEMORY)                                          \
            fail_open(#name, "out of memory for the list");                   \
        if (rc != NVML_SUCCESS) {                                             \
            free(heap);                                                       \
            return rc == NVML_ERROR_MEMORY || rc == NVML_ERROR_INSUFFICIENT_SIZE \
                       ? fn(dev, count, infos) : rc;                          \
        }                                                                     \
        int k = keep_table_rows(#name, dev, rows, n, sizeof(T));              \
        rc = deliver(rows, k < 0 ? n : (unsigned)k, sizeof(T), count, infos); \
        free(heap);                                                           \
        return rc;                                                            \
    }

/* Samples newer than last_seen, of the table's processes; a size query
 * (NULL buffer) is the driver's: its count bounds the kept one. */
typedef nvmlReturn_t (*putil_fn)(nvmlDevice_t, nvmlProcessUtilizationSample_t *,
                                 unsigned int *, unsigned long long);
typedef struct { putil_fn fn; nvmlDevice_t dev; unsigned long long last_seen; } putil_ctx;
static nvmlReturn_t putil_ask(void *c, unsigned int *count, void *rows)
{
    putil_ctx *x = c;
    return x->fn(x->dev, rows, count, x->last_seen);
}

#define PUTIL_WRAPPER_(name, T)                                               \
    SALUS_EXPORT nvmlReturn_t name(nvmlDevice_t dev, T *samples, unsigned int *count, \
                                   unsigned long long last_seen)              \
    {                                                                         \
        int pass;                                                             \
        nvmlReturn_t why;                                                     \
        putil_fn fn = (putil_fn)nvh_real(NVH_##name, &pass, &why);            \
        if (!fn)                                                              \
            return why;                                                       \
        if (pass || !count || !samples)                                       \
            return fn(dev, samples, count, last_seen);                        \
        T stack[64];                                                          \
        void *rows, *heap;                                                    \
        unsigned n;                                                           \
        putil_ctx x = { fn, dev, last_seen };                                 \
        nvmlReturn_t rc = ask_all(putil_ask, &x, sizeof(T), stack, 64, &rows, &n, &heap); \
        if (rc == NVML_ERROR_MEMORY)                                          \
            fail_open(#name, "out of memory for the samples");                \
        if (rc != NVML_SUCCESS) {                                             \
            free(heap);                                                       \
            return rc == NVML_ERROR_MEMORY || rc == NVML_ERROR_INSUFFICIENT_SIZE \
                       ? fn(dev, samples, count, last_seen) : rc;             \
        }                                                                     \
        int k = keep_table_rows(#name, dev, rows, n, sizeof(T));              \
        rc = k == 0 ? NVML_ERROR_NOT_FOUND                                    \
                    : deliver(rows, k < 0 ? n : (unsigned)k, sizeof(T), count, samples); \
        free(heap);                                                           \
        return rc;                                                            \
    }

#define WRAPPER_(cat, name, type) cat##_WRAPPER_(name, type)
NVH_LIST(WRAPPER_)

/* ---- the dlsym decision ----------------------------------------------------- */

#define ADDRESS_(cat, name, type) (void *)name,
void *const nvh_wrappers[NVH_IDS] = { NVH_LIST(ADDRESS_) };

void *nvh_dlsym_decide(void *handle, const char *name, void *found)
{
    (void)handle;
    int id = nvh_find(name);
    if (id < 0 || !found)
        return NULL;
    if (found == nvh_wrappers[id])
        return found;               /* the lookup found libsalus itself */
    if (nvh_bind((nvh_id_t)id, found) != 0) {
        util_debug("dlsym %s: not the NVML in use (%p): passed", name, found);
        return NULL;
    }
    util_debug("dlsym %s: wrapped", name);
    return nvh_wrappers[id];
}
