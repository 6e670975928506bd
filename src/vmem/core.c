/*
 * core.c - what virtualized allocations (vmem_int.h) stand on: the maps,
 * whether paging is on, libsalus's own context, the budget of a chunk,
 * physical chunks made and unmade through the real driver (what is kept
 * of them for reuse is keep.c's).
 *
 * Divided into: the maps (a hash map, the big allocations' sorted array);
 * records; start-up; contexts, budget and physical chunks.
 *
 * Lock: the callers hold vmem_p.lock (vmem_int.h); start-up is once.
 */
#include "vmem/vmem_int.h"
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

vmem_state_t vmem_p = { .lock = PTHREAD_MUTEX_INITIALIZER, .cg_cap = UINT64_MAX };
const vmem_async_ops_t *vmem_async_ops_p;   /* set by async.c */

/* ---- the maps ---------------------------------------------------------------
 * Linear probing, deletion by backward shift (no tombstones), at most half
 * full.  Keys are nonzero. */

static size_t slot_of(const vmem_map_t *m, uint64_t key)
{
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 17) & m->mask;
}

static int grow(vmem_map_t *m)
{
    size_t cap = m->key ? (m->mask + 1) * 2 : 1024;
    vmem_map_t n = { calloc(cap, sizeof *n.key), calloc(cap, sizeof *n.val), cap - 1, 0 };
    if (!n.key || !n.val) {
        free(n.key);
        free(n.val);
        return -1;
    }
    for (size_t i = 0; m->key && i <= m->mask; i++)
        if (m->key[i])
            vmem_map_put(&n, m->key[i], m->val[i]);
    free(m->key);
    free(m->val);
    *m = n;
    return 0;
}

int vmem_map_put(vmem_map_t *m, uint64_t key, void *val)
{
    if ((!m->key || (m->count + 1) * 2 > m->mask + 1) && grow(m) != 0)
        return -1;
    size_t i = slot_of(m, key);
    while (m->key[i] && m->key[i] != key)
        i = (i + 1) & m->mask;
    if (!m->key[i])
        m->count++;
    m->key[i] = key;
    m->val[i] = val;
    return 0;
}

void *vmem_map_get(const vmem_map_t *m, uint64_t key)
{
    if (!m->key)
        return NULL;
    for (size_t i = slot_of(m, key); m->key[i]; i = (i + 1) & m->mask)
        if (m->key[i] == key)
            return m->val[i];
    return NULL;
}

void *vmem_map_del(vmem_map_t *m, uint64_t key)
{
    if (!m->key)
        return NULL;
    size_t i = slot_of(m, key);
    while (m->key[i] && m->key[i] != key)
        i = (i + 1) & m->mask;
    if (!m->key[i])
        return NULL;
    void *val = m->val[i];
    /* Shift back the entries of the run after i that may move into the hole. */
    for (size_t j = (i + 1) & m->mask; m->key[j]; j = (j + 1) & m->mask) {
        size_t home = slot_of(m, m->key[j]);
        if (((j - home) & m->mask) >= ((j - i) & m->mask)) {
            m->key[i] = m->key[j];
            m->val[i] = m->val[j];
            i = j;
        }
    }
    m->key[i] = 0;
    m->val[i] = NULL;
    m->count--;
    return val;
}

/* First index whose base is above p. */
static size_t above(const vmem_spans_t *s, uint64_t p)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->v[mid]->base <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int vmem_spans_add(vmem_spans_t *s, vmem_buf_t *a)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        vmem_buf_t **v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return -1;
        s->v = v;
        s->cap = cap;
    }
    size_t i = above(s, a->base);
    memmove(&s->v[i + 1], &s->v[i], (s->n - i) * sizeof *s->v);
    s->v[i] = a;
    s->n++;
    return 0;
}

void vmem_spans_del(vmem_spans_t *s, const vmem_buf_t *a)
{
    size_t i = above(s, a->base);
    if (i == 0 || s->v[i - 1] != a)
        return;
    memmove(&s->v[i - 1], &s->v[i], (s->n - i) * sizeof *s->v);
    s->n--;
}

vmem_buf_t *vmem_spans_find(const vmem_spans_t *s, uint64_t p)
{
    size_t i = above(s, p);
    if (i == 0)
        return NULL;
    vmem_buf_t *a = s->v[i - 1];
    return p - a->base < a->bytes ? a : NULL;
}

/* ---- records ------------------------------------------------------------------ */

vmem_buf_t *vmem_buf_new_locked(void)
{
    if (vmem_p.nspare == 0)
        return calloc(1, sizeof(vmem_buf_t));
    vmem_buf_t *a = vmem_p.spare[--vmem_p.nspare];
    memset(a, 0, sizeof *a);
    return a;
}

void vmem_buf_put_locked(vmem_buf_t *a)
{
    if (!a)
        return;
    if (vmem_p.nspare < VMEM_SPARE_BUFS)
        vmem_p.spare[vmem_p.nspare++] = a;
    else
        free(a);
}

/* ---- start-up --------------------------------------------------------------- */

/* Decided once the memory module has started (mem_init): paging is on when
 * SALUS_SWAP=on and the driver has what it needs.  vmem_p.on: 0 not yet
 * decided, 1 on, 2 off. */
static void forget(void);

static void start(void)
{
    util_fork_register(UTIL_FORK_PAGING, NULL, NULL, forget);
    util_store_release(&vmem_p.on, 2);
    const drv_t *d = vmem_drv();
    if (!mem_swap_wanted())
        return;
    if (!d->mem_address_reserve || !d->mem_create || !d->mem_map || !d->mem_unmap ||
        !d->mem_set_access || !d->mem_release || !d->mem_get_granularity ||
        !d->memcpy_dtoh_async || !d->memcpy_htod_async || !d->stream_create ||
        !d->stream_synchronize || !d->mem_host_alloc || !d->mem_free_host ||
        !d->ctx_get_current || !d->ctx_push_current || !d->ctx_pop_current || !d->ctx_synchronize) {
        util_error("memory: SALUS_SWAP=on, but the driver lacks the VMM calls paging needs; "
                   "allocations stay ordinary and are never paged out");
        return;
    }
    util_store_release(&vmem_p.on, 1);
}

/* Its own copy of the driver table: memory's, once memory has one (an
 * importer of CUDA IPC handles needs it with paging off too); until then a
 * table of NULL calls, which every caller checks. */
static const drv_t no_drv;

static void copy_drv(void)
{
    vmem_p.drv = *mem_driver();
}

const drv_t *vmem_drv(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    /* On: start() found the VMM calls in the copy before its store of 1. */
    if (util_load_acquire(&vmem_p.on) == 1)
        return &vmem_p.drv;
    if (!mem_driver())
        return &no_drv;
    pthread_once(&once, copy_drv);
    return &vmem_p.drv;
}

int vmem_on(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    int on = util_load_acquire(&vmem_p.on);
    if (__builtin_expect(on != 0, 1))
        return on == 1;
    if (!mem_active())
        return 0;                     /* not started (yet), or uncounted */
    pthread_once(&once, start);
    return util_load_acquire(&vmem_p.on) == 1;
}

/* A fork() child makes no CUDA call on its parent's memory: it forgets it
 * (its own cuInit virtualizes anew). */
static void forget(void)
{
    pthread_mutex_init(&vmem_p.lock, NULL);
    memset(vmem_p.dev, 0, sizeof vmem_p.dev);
    util_store_relaxed(&vmem_p.small_devs, 0);
    memset(&vmem_p.allocs, 0, sizeof vmem_p.allocs);
    memset(&vmem_p.bigs, 0, sizeof vmem_p.bigs);
    vmem_p.staged = 0;
    memset(&vmem_p.pool, 0, sizeof vmem_p.pool);   /* the parent's pinned staging */
    vmem_p.cg_cap = UINT64_MAX;
    util_store_relaxed(&vmem_p.ticking, 0);
    if (vmem_p.ipc_forget)
        vmem_p.ipc_forget();
    const vmem_async_ops_t *o = util_load_acquire(&vmem_async_ops_p);
    if (o)
        o->forget();
}

/* ---- contexts, budget and physical chunks ------------------------------------ */

int vmem_enter(vmem_dev_t *v)
{
    return vmem_drv()->ctx_push_current(v->ctx) == CUDA_SUCCESS ? 0 : -1;
}

void vmem_leave(void)
{
    CUcontext c;
    vmem_drv()->ctx_pop_current(&c);
}

/* The budget of a chunk, as an allocation of that size would take it (the
 * limits, admission, a wait when the device is full), with the operation's
 * flags (vmem_p.charge_flags); *charged: 0 when the module lets it pass
 * uncounted (then nothing is to be given back).  Under vmem_p.lock. */
CUresult vmem_charge(int ordinal, uint64_t bytes, int *charged)
{
    if (bytes > MEM_MAX_BYTES)
        return CUDA_ERROR_OUT_OF_MEMORY;
    switch (mem_charge_at(ordinal, bytes, vmem_p.charge_flags)) {
    case MEM_CHARGED:
        *charged = 1;
        return CUDA_SUCCESS;
    case MEM_UNCOUNTED:
        *charged = 0;
        return CUDA_SUCCESS;
    case MEM_CHARGE_STUCK:
        vmem_p.stuck = 1;             /* the operation pages itself out, then again */
        return CUDA_ERROR_OUT_OF_MEMORY;
    default:
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
}

void vmem_uncharge(int ordinal, uint64_t bytes)
{
    mem_uncharge_at(ordinal, bytes);
}

void vmem_stuck_try(int bail)
{
    vmem_p.charge_flags = bail ? MEM_CHARGE_BAIL : 0;
    vmem_p.stuck = 0;
}

int vmem_stuck_seen(void)
{
    int stuck = vmem_p.stuck;
    vmem_p.stuck = 0;
    vmem_p.charge_flags = 0;
    return stuck;
}

/* Physical memory for [at, at + bytes) of v's device: created, mapped,
 * readable and writable by the device.  Uncharged: the caller charges.
 * Chunks may be exported as POSIX file descriptors (ipc.c: CUDA IPC on
 * paged memory), which costs nothing until one is; a driver that refuses
 * the handle type gets chunks without it from then on, and no IPC. */
CUresult vmem_back(vmem_dev_t *v, CUdeviceptr at, size_t bytes,
                     CUmemGenericAllocationHandle *out)
{
    const drv_t *d = vmem_drv();
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { CU_MEM_LOCATION_TYPE_DEVICE, v->ordinal } };
    CUmemAccessDesc acc = { .location = prop.location,
                            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CUmemGenericAllocationHandle h = 0;
    CUresult rc = CUDA_ERROR_NOT_SUPPORTED;
    if (!vmem_p.no_fd) {
        prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        rc = d->mem_create(&h, bytes, &prop, 0);
        prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    }
    if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_OUT_OF_MEMORY) {
        /* Refused for the handle type (a platform without it)? */
        if ((rc = d->mem_create(&h, bytes, &prop, 0)) == CUDA_SUCCESS && !vmem_p.no_fd) {
            static int said;
            vmem_p.no_fd = 1;
            util_log_once(&said, UTIL_LOG_INFO, "memory: the driver makes no POSIX file "
                          "descriptor handles for paged memory here: CUDA IPC of it "
                          "(cuIpcGetMemHandle) needs SALUS_SWAP=off");
        }
    }
    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = d->mem_map(at, bytes, 0, h, 0)) != CUDA_SUCCESS)
        goto out_release;
    if ((rc = d->mem_set_access(at, bytes, &acc, 1)) != CUDA_SUCCESS)
        goto out_unmap;
    *out = h;
    return CUDA_SUCCESS;
out_unmap:
    d->mem_unmap(at, bytes);
out_release:
    d->mem_release(h);
    return rc;
}

void vmem_unback(CUdeviceptr at, size_t bytes, CUmemGenericAllocationHandle h)
{
    vmem_drv()->mem_unmap(at, bytes);
    vmem_drv()->mem_release(h);
}

void vmem_set_work_count(vmem_work_count_fn fn)
{
    util_store_release(&vmem_p.work_count, fn);
}
