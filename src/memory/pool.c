/*
 * pool.c - memory pools: stream-ordered allocations (cuMemAllocAsync,
 * cuMemAllocFromPoolAsync) are charged as their pool holds memory, not as
 * they are made and freed.  A pool keeps what is freed into it up to its
 * release threshold (default 0; PyTorch's cudaMallocAsync backend sets
 * UINT64_MAX) and gives the rest back at the next stream, event or context
 * synchronize, or at cuMemPoolTrimTo: that memory is still the process's.
 *
 * Divided into: the records; reading the driver's figure; allocations;
 * the calls that change a pool (create, destroy, current, threshold,
 * trim); graph memory; synchronizations.
 *
 * Graph memory is each device's pool for graphs' allocation nodes: the
 * driver keeps it reserved between launches and gives it back at
 * cuDeviceGraphMemTrim only.  A node's bytes are admitted before
 * cuGraphAddMemAllocNode, and the device's graph memory is then charged as
 * CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT says, read after each node, trim
 * and free node, and at every synchronize once the process has made one
 * (a driver that backs the node only at the graph's launch shows it then).
 *
 * A pool's record (mem_layout.h) holds `charged`, the bytes of the grant
 * the pool holds, and `slack`, the part no live allocation uses.  An
 * allocation takes from the slack first and charges only what the pool
 * must grow by (so admission counts growth, not what was freed into it); a
 * free adds its bytes to the slack (mem_pool_put).  Neither asks the
 * driver: the pool's reserved memory (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)
 * is read after an allocation that had to grow it, after a trim, and at a
 * synchronize for a pool that may have released memory (slack above its
 * threshold) or allocated from its slack since the last read (the driver
 * may have grown it anyway); `charged` then follows the driver's figure,
 * never going below the live allocations.  A pool in host memory is not
 * charged; an allocation from a pool this process never saw (no create, no
 * query of a device's pools) is charged alone, as cuMemAlloc is.
 *
 * Locking: records are claimed under mem_p.lock (the start-up lock; rare);
 * mem_p.graph_lock orders the reads and charges of graph memory;
 * `charged` and `slack` change with atomics on the allocation path, and a
 * record's own mutex orders its reads of the driver's figure (held across
 * that driver call and the charge that follows, never under the table's
 * lock).  The fork handlers of memory.c take mem_p.lock; the child forgets
 * every record.
 */
#include "memory/mem_layout.h"
#include "util/util.h"

#include <string.h>

enum { OP_PASS = 0, OP_ALLOC = 1 };

static int is_on(void)
{
    return util_load_acquire(&mem_p.mode) == MEM_ON;
}

/* ---- the records ---------------------------------------------------------- */

/* The record of a live pool, or 0.  Records are claimed once and never
 * moved: a lock-free scan sees a handle only once its record is whole
 * (the handle is stored last, with release). */
static int find(uint64_t handle)
{
    int n = util_load_acquire(&mem_p.pools_used);
    for (int i = 1; i <= n && i < MEM_MAX_POOLS; i++) {
        mem_pool_t *p = &mem_p.pools[i];
        if (util_load_acquire(&p->handle) == handle &&
            !util_load_acquire(&p->destroyed))
            return i;
    }
    return 0;
}

/* Find or claim the record of `handle` on ordinal ord; 0 when the records
 * are all taken (its allocations are then charged one by one). */
static int learn(uint64_t handle, int ord, int host)
{
    static int said;
    int i = find(handle);
    if (i || !handle || ord < 0 || ord >= MEM_MAX_ORDINALS)
        return i;
    pthread_mutex_lock(&mem_p.lock);
    if (!(i = find(handle))) {
        int n = mem_p.pools_used;
        for (i = 1; i <= n; i++)         /* a destroyed pool with nothing left */
            if (mem_p.pools[i].destroyed && !__atomic_load_n(&mem_p.pools[i].charged,
                                                             __ATOMIC_SEQ_CST))
                break;
        if (i > n && n + 1 >= MEM_MAX_POOLS) {
            i = 0;
            util_log_once(&said, UTIL_LOG_INFO, "memory: this process has %d memory pools; "
                          "allocations from more are charged one by one", MEM_MAX_POOLS - 1);
        } else {
            mem_pool_t *p = &mem_p.pools[i];
            util_store_release(&p->handle, 0);
            p->ord = ord;
            p->host = (uint8_t)host;
            p->threshold = 0;             /* the driver's default */
            p->dirty = 0;
            util_store_relaxed(&p->charged, 0);
            util_store_relaxed(&p->slack, 0);
            util_store_release(&p->destroyed, 0);
            util_store_release(&p->handle, handle);
            if (i > n)
                util_store_release(&mem_p.pools_used, i);
        }
    }
    pthread_mutex_unlock(&mem_p.lock);
    return i;
}

/* The current pool of ordinal ord (cuMemAllocAsync's), asked of the driver
 * once, then followed through cuDeviceSetMemPool. */
static int current_of(int ord)
{
    int i = util_load_acquire(&mem_p.cur_pool[ord]);
    CUmemoryPool h = NULL;
    if (i)
        return i;
    if (!mem_p.drv.device_get_mem_pool ||
        mem_p.drv.device_get_mem_pool(&h, (CUdevice)ord) != CUDA_SUCCESS || !h)
        return 0;
    i = learn((uint64_t)(uintptr_t)h, ord, 0);
    util_store_release(&mem_p.cur_pool[ord], (uint8_t)i);
    return i;
}

/* ---- reading the driver's figure --------------------------------------------
 * Under the record's lock: charged follows what the driver says the pool
 * reserves, growing (memory the driver already gave: charged without a
 * wait or a refusal counted; past the limit or the budget, not charged and
 * read again at the next synchronize, said once) or shrinking by what the
 * slack holds.  An allocation in flight may be counted by the driver and
 * not yet by us, or the reverse: the next read settles it. */
static void reread(int i)
{
    static int said;
    mem_pool_t *p = &mem_p.pools[i];
    cuuint64_t r = 0;
    if (!mem_p.drv.mem_pool_get_attribute || p->host)
        return;
    pthread_mutex_lock(&p->lock);
    mem_local_dev_t *ld = mem_local_dev(p->ord);
    CUmemoryPool h = (CUmemoryPool)(uintptr_t)util_load_acquire(&p->handle);
    if (!ld || mem_p.drv.mem_pool_get_attribute(h, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &r) !=
                   CUDA_SUCCESS || (uint64_t)r > MEM_MAX_BYTES)
        goto out_unlock;
    util_store_relaxed(&p->dirty, 0);
    uint64_t c = util_load_seq(&p->charged);
    if ((uint64_t)r > c) {
        uint64_t more = (uint64_t)r - c;
        mem_take_t r = mem_take_held(ld, more);
        if (r == MEM_TAKEN) {
            util_add_seq(&p->charged, more);
            util_add_seq(&p->slack, more);
        } else if (r == MEM_TAKE_REFUSED) {
            util_store_relaxed(&p->dirty, 1);    /* read again */
            util_log_once(&said, UTIL_LOG_WARN, "memory: a memory pool on %s grew by %s "
                          "past what this process may take (its limit, or the device's "
                          "budget); that memory is not charged until the pool's figure "
                          "fits, at a later synchronize", ld->name, util_size(more).s);
        }
    } else if ((uint64_t)r < c) {
        uint64_t s = util_load_seq(&p->slack), drop;
        do {
            drop = mem_umin(s, c - (uint64_t)r);
        } while (drop && !__atomic_compare_exchange_n(&p->slack, &s, s - drop, 1,
                                                      __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
        if (drop) {
            util_sub_seq(&p->charged, drop);
            mem_give(ld, drop);
        }
    }
out_unlock:
    pthread_mutex_unlock(&p->lock);
}

/* ---- allocations ---------------------------------------------------------- */

CUresult mem_pool_alloc_begin(mem_kind_t kind, CUmemoryPool pool, int device, uint64_t bytes,
                              mem_op_t *op)
{
    op->state = OP_PASS;
    op->pool = 0;
    if (!is_on() || bytes == 0)
        return CUDA_SUCCESS;
    int ord = device, i;
    if (pool) {
        i = find((uint64_t)(uintptr_t)pool);
    } else {
        if (ord == MEM_DEV_CURRENT && drv_current_device(&mem_p.drv, &ord) != 0)
            return CUDA_SUCCESS;          /* no context: the driver refuses it */
        i = ord >= 0 && ord < MEM_MAX_ORDINALS ? current_of(ord) : 0;
    }
    if (!i)                               /* a pool we do not know: one by one */
        return mem_alloc_begin(kind, device, bytes, op);
    mem_pool_t *p = &mem_p.pools[i];
    if (p->host)
        return CUDA_SUCCESS;
    mem_local_dev_t *ld = mem_local_dev(p->ord);
    if (!ld || bytes > MEM_MAX_BYTES)
        return ld ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
    uint64_t s = util_load_relaxed(&p->slack), took;
    do {
        took = mem_umin(s, bytes);
    } while (took && !__atomic_compare_exchange_n(&p->slack, &s, s - took, 1,
                                                  __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    if (took)
        util_store_relaxed(&p->dirty, 1);
    uint64_t need = bytes - took;
    if (need) {
        mem_take_t r = mem_charge(ld, need, 0);
        if (r != MEM_TAKEN) {
            mem_pool_put(i, took);        /* as before the call */
            return mem_take_cu(r);        /* refused, or uncounted */
        }
        util_add_seq(&p->charged, need);
    }
    op->bytes = bytes;
    op->need = need;
    op->dev = ld->d;
    op->kind = (uint16_t)kind;
    op->pool = (uint8_t)i;
    op->state = OP_ALLOC;
    return CUDA_SUCCESS;
}

CUresult mem_pool_alloc_end(mem_op_t *op, CUresult rc, uint64_t ptr)
{
    if (op->state != OP_ALLOC || !op->pool)
        return mem_alloc_end(op, rc, ptr);
    op->state = OP_PASS;
    mem_entry_t e = { .key = ptr, .bytes = op->bytes, .dev = (int16_t)op->dev,
                      .cls = MEM_CLS_PTR, .kind = (uint8_t)op->kind, .pool = op->pool }, old;
    if (rc != CUDA_SUCCESS || ptr == 0) {   /* exactly as before the call */
        mem_pool_t *p = &mem_p.pools[op->pool];
        mem_local_dev_t *ld = mem_p.by_index[op->dev];
        mem_pool_put(op->pool, op->bytes - op->need);
        util_sub_seq(&p->charged, op->need);
        if (ld && op->need)
            mem_give(ld, op->need);
        return rc;
    }
    int r = mem_map_insert(&e, &old);
    if (r == 1)
        mem_entry_released(&old);
    if (r < 0) {
        static int said;
        util_log_once(&said, UTIL_LOG_ERROR, "memory: out of host memory to record an "
                      "allocation from a pool; it stays charged to the pool");
    }
    if (op->need)
        reread(op->pool);                 /* it may have grown by more, or less */
    return rc;
}

/* ---- the calls that change a pool ------------------------------------------ */

void mem_pool_learn(CUmemoryPool pool, int device, int host)
{
    if (is_on())
        learn((uint64_t)(uintptr_t)pool, device, host);
}

void mem_pool_set_current(int device, CUmemoryPool pool)
{
    if (!is_on() || device < 0 || device >= MEM_MAX_ORDINALS)
        return;
    int i = learn((uint64_t)(uintptr_t)pool, device, 0);
    util_store_release(&mem_p.cur_pool[device], (uint8_t)i);
}

void mem_pool_destroyed(CUmemoryPool pool)
{
    int i = is_on() ? find((uint64_t)(uintptr_t)pool) : 0;
    if (!i)
        return;
    mem_pool_t *p = &mem_p.pools[i];
    util_store_seq(&p->destroyed, 1);
    for (int d = 0; d < MEM_MAX_ORDINALS; d++)
        __atomic_compare_exchange_n(&mem_p.cur_pool[d], &(uint8_t){ (uint8_t)i }, 0, 0,
                                    __ATOMIC_RELEASE, __ATOMIC_RELAXED);
    mem_pool_drain(p);                    /* its live allocations go as they are freed */
}

void mem_pool_set_attribute(CUmemoryPool pool, CUmemPool_attribute attr, const void *value)
{
    int i = is_on() && value ? find((uint64_t)(uintptr_t)pool) : 0;
    if (i && attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
        __atomic_store_n(&mem_p.pools[i].threshold, *(const cuuint64_t *)value,
                         __ATOMIC_RELAXED);
}

void mem_pool_trimmed(CUmemoryPool pool)
{
    int i = is_on() ? find((uint64_t)(uintptr_t)pool) : 0;
    if (i)
        reread(i);
}

/* ---- graph memory ------------------------------------------------------------ */

/* Under graph_lock: ordinal ord's graph memory charged as the driver says
 * (a growth past what may be taken stays short until the next read). */
static void graph_reread_locked(int ord)
{
    cuuint64_t r = 0;
    mem_local_dev_t *ld = mem_local_dev(ord);
    if (!ld || !mem_p.drv.device_get_graph_mem_attribute ||
        mem_p.drv.device_get_graph_mem_attribute((CUdevice)ord,
                                                 CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &r) !=
            CUDA_SUCCESS || (uint64_t)r > MEM_MAX_BYTES)
        return;
    uint64_t c = mem_p.graph_charged[ord];
    if ((uint64_t)r > c && mem_take_held(ld, (uint64_t)r - c) == MEM_TAKEN)
        mem_p.graph_charged[ord] = (uint64_t)r;
    else if ((uint64_t)r < c) {
        mem_give(ld, c - (uint64_t)r);
        mem_p.graph_charged[ord] = (uint64_t)r;
    }
}

static void graph_reread(uint64_t mask)
{
    pthread_mutex_lock(&mem_p.graph_lock);
    for (int ord = 0; ord < MEM_MAX_ORDINALS; ord++)
        if (mask & (1ull << ord))
            graph_reread_locked(ord);
    pthread_mutex_unlock(&mem_p.graph_lock);
}

CUresult mem_graph_alloc_begin(int device, uint64_t bytes, mem_op_t *op)
{
    op->state = OP_PASS;
    op->pool = 0;
    if (!is_on() || bytes == 0 || device < 0 || device >= MEM_MAX_ORDINALS)
        return CUDA_SUCCESS;              /* host memory, or the driver refuses it */
    mem_local_dev_t *ld = mem_local_dev(device);
    if (!ld)
        return CUDA_SUCCESS;
    mem_take_t r = mem_charge(ld, bytes, 0);
    if (r != MEM_TAKEN)
        return mem_take_cu(r);            /* refused, or uncounted */
    op->bytes = bytes;
    op->dev = device;                     /* the ordinal, here */
    op->state = OP_ALLOC;
    return CUDA_SUCCESS;
}

void mem_graph_alloc_end(mem_op_t *op, CUresult rc)
{
    if (op->state != OP_ALLOC)
        return;
    op->state = OP_PASS;
    int ord = op->dev;
    mem_local_dev_t *ld = &mem_p.dev[ord];
    if (rc != CUDA_SUCCESS) {
        mem_give(ld, op->bytes);          /* as before the call */
        return;
    }
    pthread_mutex_lock(&mem_p.graph_lock);
    mem_p.graph_charged[ord] += op->bytes;
    util_or_release(&mem_p.graph_mask, 1ull << ord);
    graph_reread_locked(ord);
    pthread_mutex_unlock(&mem_p.graph_lock);
}

void mem_graph_changed(int device)
{
    uint64_t mask = is_on() ? util_load_acquire(&mem_p.graph_mask) : 0;
    if (device >= 0)
        mask &= device < MEM_MAX_ORDINALS ? 1ull << device : 0;
    if (mask)
        graph_reread(mask);
}

/* ---- synchronizations ---------------------------------------------------------
 * The driver releases a pool's memory above its threshold at a stream,
 * event or context synchronize: read the pools that may have released some
 * (slack, and more charged than the threshold) or grown unseen (allocated
 * from their slack).  No pool: one load. */
void mem_pools_sync(void)
{
    uint64_t graphs = util_load_relaxed(&mem_p.graph_mask);
    if (__builtin_expect(graphs != 0, 0))
        graph_reread(graphs);
    int n = util_load_acquire(&mem_p.pools_used);
    for (int i = 1; i <= n && i < MEM_MAX_POOLS; i++) {
        mem_pool_t *p = &mem_p.pools[i];
        if (!util_load_acquire(&p->handle) ||
            util_load_acquire(&p->destroyed) || p->host)
            continue;
        uint64_t s = util_load_relaxed(&p->slack);
        uint64_t c = util_load_relaxed(&p->charged);
        if (util_load_relaxed(&p->dirty) ||
            (s && c > util_load_relaxed(&p->threshold)))
            reread(i);
    }
}
