/*
 * memop.c - stream memory operations: cuStreamWaitValue32/64,
 * cuStreamWriteValue32/64 and cuStreamBatchMemOp, on memory the device can
 * reach (device allocations, pinned host memory, host memory registered with
 * cuMemHostRegister).  Registered memory that another process maps too (a
 * MAP_SHARED region) makes them a cross-process wait: a stream of one
 * process waits for a value that a stream of another writes after its
 * kernel, as NCCL's proxies and kernels wait for their peers.
 *
 * Divided into: conditions and addresses; settling a stream's wait; writes;
 * the entry points.
 *
 * Time model.  A write enqueued on a stream takes effect when the stream
 * reaches it (after the work enqueued before it): at once when that is now,
 * else by the host-callback worker at that time, so a peer never sees it
 * early.  A wait enqueued on a stream takes effect when the stream reaches
 * it (its `mw_at`) and is settled at the first look at or after that time
 * that finds the condition true: the stream's tail becomes the time of that
 * look, so its later work starts after the awaited write (late by at most
 * one poll, SIM_MEMOP_POLL_NS, never early).  A stream with an unsettled wait
 * is NOT_READY to a query; a stream or context synchronize waits until it
 * settles (forever if the value never comes, as a real GPU spins); work
 * enqueued behind it (any kind) makes the host call that enqueues it wait
 * until it settles (sim_stream_ready), where the real driver would queue it
 * and return: the time model of that work is the driver's, its host call
 * is not.
 *
 * Locks: the process lock (sim_p.lock) guards the stream's wait fields;
 * the polls read the watched word with the lock released, after checking
 * under it that the address is still mapped.
 */
#include "sim.h"

#include <errno.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <time.h>

#define SIM_MEMOP_POLL_NS 20000ull

/* ---- conditions and addresses --------------------------------------------- */

static int cond_holds(uint64_t have, uint64_t want, unsigned flags, int is64)
{
    if (!is64) {
        have = (uint32_t)have;
        want = (uint32_t)want;
    }
    switch (flags & ~(unsigned)CU_STREAM_WAIT_VALUE_FLUSH) {
    case CU_STREAM_WAIT_VALUE_GEQ:       /* cyclic: wrap-around is ignored */
        return is64 ? (int64_t)(have - want) >= 0 : (int32_t)(uint32_t)(have - want) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ:
        return have == want;
    case CU_STREAM_WAIT_VALUE_AND:
        return (have & want) != 0;
    default:                             /* NOR */
        return (is64 ? ~(have | want) : (uint32_t)~(have | want)) != 0;
    }
}

/* The word at addr, if the device can still reach it (under the lock). */
static int word_ok(CUdeviceptr addr, int is64)
{
    size_t n = is64 ? 8 : 4;
    return addr && (addr % n) == 0 && sim_range_check((uintptr_t)addr, n, PROT_READ) == 0;
}

static uint64_t word_read(CUdeviceptr addr, int is64)
{
    if (is64)
        return __atomic_load_n((uint64_t *)(uintptr_t)addr, __ATOMIC_ACQUIRE);
    return __atomic_load_n((uint32_t *)(uintptr_t)addr, __ATOMIC_ACQUIRE);
}

static void nap(void)
{
    struct timespec ts = { 0, (long)SIM_MEMOP_POLL_NS };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ---- settling a stream's wait ---------------------------------------------- */

/* One look at s's wait (under the lock): 1 when it is settled (or none). */
static int settle_once(sim_stream_t *s)
{
    if (!s->mw_on)
        return 1;
    uint64_t now = sim_now();
    if (now < s->mw_at)
        return 0;
    if (word_ok(s->mw_addr, s->mw_64) && !cond_holds(word_read(s->mw_addr, s->mw_64),
                                                     s->mw_value, s->mw_flags, s->mw_64))
        return 0;
    /* A word unmapped meanwhile faults on a real GPU; here the wait ends. */
    s->mw_on = 0;
    s->ctx->memwaits--;
    sim_stream_done(s, now);
    pthread_cond_broadcast(&sim_p.cond);
    return 1;
}

int sim_memop_settled(sim_stream_t *s)
{
    return settle_once(s);
}

/* Wait, the lock released between looks, until s's wait is settled or s is
 * destroyed.  Called with the lock held; returns with it held. */
void sim_memop_settle(sim_stream_t *s)
{
    uint64_t h = s->handle;
    while ((s = sim_obj_get(h, SIM_K_STREAM)) && !settle_once(s)) {
        SIM_UNLOCK();
        nap();
        SIM_LOCK();
    }
}

static void settle_if_ctx(void *obj, void *arg)
{
    sim_stream_t *s = obj;
    if (s->ctx == arg)
        settle_once(s);
}

void sim_memop_settle_ctx(sim_ctx_t *ctx)
{
    uint64_t h = ctx->handle;
    while ((ctx = sim_obj_get(h, SIM_K_CTX)) && ctx->memwaits > 0) {
        sim_obj_foreach(SIM_K_STREAM, settle_if_ctx, ctx);
        if (ctx->memwaits <= 0)
            break;
        SIM_UNLOCK();
        nap();
        SIM_LOCK();
    }
}

/* ---- writes ------------------------------------------------------------------ */

typedef struct memop_write {
    CUdeviceptr addr;
    uint64_t value;
    int is64;
} memop_write_t;

static void word_write(CUdeviceptr addr, uint64_t value, int is64)
{
    if (is64)
        __atomic_store_n((uint64_t *)(uintptr_t)addr, value, __ATOMIC_RELEASE);
    else
        __atomic_store_n((uint32_t *)(uintptr_t)addr, (uint32_t)value, __ATOMIC_RELEASE);
}

/* Run by the host-callback worker when the stream reaches the write. */
static void write_due(void *arg)
{
    memop_write_t *w = arg;
    SIM_LOCK();
    int ok = word_ok(w->addr, w->is64);
    SIM_UNLOCK();
    if (ok)
        word_write(w->addr, w->value, w->is64);
    free(w);
}

static CUresult write_value(sim_stream_t *s, CUdeviceptr addr, uint64_t value, int is64)
{
    uint64_t at = sim_max(sim_now(), sim_stream_ready(s));
    if (at <= sim_now()) {
        word_write(addr, value, is64);
        return CUDA_SUCCESS;
    }
    memop_write_t *w = malloc(sizeof *w);
    if (!w)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *w = (memop_write_t){ addr, value, is64 };
    CUresult rc = sim_hostfn_enqueue(s, write_due, w, NULL, NULL);
    if (rc != CUDA_SUCCESS)
        free(w);
    return rc;
}

/* The wait takes effect when the stream reaches it; s has no wait pending
 * (memop settled it first). */
static void wait_value(sim_stream_t *s, CUdeviceptr addr, uint64_t value, unsigned flags,
                       int is64)
{
    s->mw_at = sim_max(sim_now(), sim_stream_ready(s));
    s->mw_addr = addr;
    s->mw_value = value;
    s->mw_flags = flags;
    s->mw_64 = is64;
    s->mw_on = 1;
    s->ctx->memwaits++;
}

void sim_memop_drop(sim_stream_t *s)
{
    if (s->mw_on) {
        s->mw_on = 0;
        s->ctx->memwaits--;
    }
}

/* ---- the entry points ---------------------------------------------------------- */

static CUresult memop(CUstream hs, int ptds, const CUstreamBatchMemOpParams *op)
{
    unsigned kind = op->operation;
    int is64 = kind == CU_STREAM_MEM_OP_WAIT_VALUE_64 || kind == CU_STREAM_MEM_OP_WRITE_VALUE_64;
    int wait = kind == CU_STREAM_MEM_OP_WAIT_VALUE_32 || kind == CU_STREAM_MEM_OP_WAIT_VALUE_64;
    int write = kind == CU_STREAM_MEM_OP_WRITE_VALUE_32 ||
                kind == CU_STREAM_MEM_OP_WRITE_VALUE_64;
    if (!wait && !write)
        return kind == CU_STREAM_MEM_OP_BARRIER || kind == CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES
               ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    CUdeviceptr addr = wait ? op->waitValue.address : op->writeValue.address;
    uint64_t value = wait ? (is64 ? op->waitValue.value64 : op->waitValue.value)
                          : (is64 ? op->writeValue.value64 : op->writeValue.value);
    unsigned flags = wait ? op->waitValue.flags : op->writeValue.flags;
    if (wait ? (flags & ~(3u | (unsigned)CU_STREAM_WAIT_VALUE_FLUSH)) != 0
             : (flags & ~(unsigned)CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_stream_t *s;
    CUresult rc = sim_stream_resolve(hs, ptds, &s);
    if (rc == CUDA_SUCCESS && s->mw_on) {     /* behind an earlier wait: its turn */
        sim_memop_settle(s);
        rc = sim_stream_resolve(hs, ptds, &s);
    }
    if (rc == CUDA_SUCCESS && s->capture)
        rc = CUDA_ERROR_NOT_SUPPORTED;   /* memop nodes are not modelled */
    if (rc == CUDA_SUCCESS && !word_ok(addr, is64))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && write)
        rc = write_value(s, addr, value, is64);
    if (rc == CUDA_SUCCESS && wait)
        wait_value(s, addr, value, flags, is64);
    SIM_UNLOCK();
    return rc;
}

static CUresult batch(CUstream hs, int ptds, unsigned count, CUstreamBatchMemOpParams *ops,
                      unsigned flags)
{
    SIM_CHECK_INIT();
    if (flags || (count && !ops) || count > 256)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < count; i++) {
        CUresult rc = memop(hs, ptds, &ops[i]);
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    return CUDA_SUCCESS;
}

static CUresult one(CUstream hs, int ptds, unsigned kind, CUdeviceptr addr, uint64_t value,
                    unsigned flags)
{
    SIM_CHECK_INIT();
    CUstreamBatchMemOpParams op = { .operation = kind };
    int is64 = kind == CU_STREAM_MEM_OP_WAIT_VALUE_64 || kind == CU_STREAM_MEM_OP_WRITE_VALUE_64;
    if (kind == CU_STREAM_MEM_OP_WAIT_VALUE_32 || kind == CU_STREAM_MEM_OP_WAIT_VALUE_64) {
        op.waitValue.address = addr;
        op.waitValue.flags = flags;
        if (is64)
            op.waitValue.value64 = value;
        else
            op.waitValue.value = (cuuint32_t)value;
    } else {
        op.writeValue.address = addr;
        op.writeValue.flags = flags;
        if (is64)
            op.writeValue.value64 = value;
        else
            op.writeValue.value = (cuuint32_t)value;
    }
    return memop(hs, ptds, &op);
}

/* Every variant the toolkit declares: the legacy and per-thread forms of the
 * first (8.0, 9.0) and the _v2 (11.7) exports, which behave alike here. */
#define SIM_MEMOP_ONE(export, ptds, kind, type) \
    CUresult CUDAAPI export(CUstream s, CUdeviceptr a, type v, unsigned int f) \
    { return one(s, ptds, kind, a, v, f); }
#define SIM_MEMOP_BATCH(export, ptds) \
    CUresult CUDAAPI export(CUstream s, unsigned int n, CUstreamBatchMemOpParams *p, \
                            unsigned int f) \
    { return batch(s, ptds, n, p, f); }

#ifdef CU_PARAMS_cuStreamWaitValue32
SIM_MEMOP_ONE(cuStreamWaitValue32, 0, CU_STREAM_MEM_OP_WAIT_VALUE_32, cuuint32_t)
SIM_MEMOP_ONE(cuStreamWaitValue32_ptsz, 1, CU_STREAM_MEM_OP_WAIT_VALUE_32, cuuint32_t)
SIM_MEMOP_ONE(cuStreamWaitValue64, 0, CU_STREAM_MEM_OP_WAIT_VALUE_64, cuuint64_t)
SIM_MEMOP_ONE(cuStreamWaitValue64_ptsz, 1, CU_STREAM_MEM_OP_WAIT_VALUE_64, cuuint64_t)
SIM_MEMOP_ONE(cuStreamWriteValue32, 0, CU_STREAM_MEM_OP_WRITE_VALUE_32, cuuint32_t)
SIM_MEMOP_ONE(cuStreamWriteValue32_ptsz, 1, CU_STREAM_MEM_OP_WRITE_VALUE_32, cuuint32_t)
SIM_MEMOP_ONE(cuStreamWriteValue64, 0, CU_STREAM_MEM_OP_WRITE_VALUE_64, cuuint64_t)
SIM_MEMOP_ONE(cuStreamWriteValue64_ptsz, 1, CU_STREAM_MEM_OP_WRITE_VALUE_64, cuuint64_t)
SIM_MEMOP_BATCH(cuStreamBatchMemOp, 0)
SIM_MEMOP_BATCH(cuStreamBatchMemOp_ptsz, 1)
#endif
#ifdef CU_PARAMS_cuStreamWaitValue32_v2
SIM_MEMOP_ONE(cuStreamWaitValue32_v2, 0, CU_STREAM_MEM_OP_WAIT_VALUE_32, cuuint32_t)
SIM_MEMOP_ONE(cuStreamWaitValue32_v2_ptsz, 1, CU_STREAM_MEM_OP_WAIT_VALUE_32, cuuint32_t)
SIM_MEMOP_ONE(cuStreamWaitValue64_v2, 0, CU_STREAM_MEM_OP_WAIT_VALUE_64, cuuint64_t)
SIM_MEMOP_ONE(cuStreamWaitValue64_v2_ptsz, 1, CU_STREAM_MEM_OP_WAIT_VALUE_64, cuuint64_t)
SIM_MEMOP_ONE(cuStreamWriteValue32_v2, 0, CU_STREAM_MEM_OP_WRITE_VALUE_32, cuuint32_t)
SIM_MEMOP_ONE(cuStreamWriteValue32_v2_ptsz, 1, CU_STREAM_MEM_OP_WRITE_VALUE_32, cuuint32_t)
SIM_MEMOP_ONE(cuStreamWriteValue64_v2, 0, CU_STREAM_MEM_OP_WRITE_VALUE_64, cuuint64_t)
SIM_MEMOP_ONE(cuStreamWriteValue64_v2_ptsz, 1, CU_STREAM_MEM_OP_WRITE_VALUE_64, cuuint64_t)
SIM_MEMOP_BATCH(cuStreamBatchMemOp_v2, 0)
SIM_MEMOP_BATCH(cuStreamBatchMemOp_v2_ptsz, 1)
#endif
