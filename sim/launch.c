/*
 * launch.c - kernel launches: parameters, durations, the emulated kernels,
 * the engine and the trace.
 *
 * Divided into: parameter packing (kernelParams or `extra`); launch checks;
 * the emulated kernels; the launch itself; the cuLaunch* entry points; the
 * occupancy calculator.
 *
 * A launch packs its parameters as the device would see them (offsets and
 * sizes from the module), runs the emulation of salus_fill / salus_axpy on
 * the host-backed memory at call time, takes its duration (salus_spin: its
 * first parameter in ns; any other kernel: kmodel.c's), asks the
 * device's engine for its slot (state.c) and writes one trace line
 * (sim_trace, which copies and memsets write through too, from exec.c).
 *
 * Lock: sim_p.lock is held from resolving the stream to the trace write;
 * the path makes no syscall but that write (and clock_gettime, a vDSO call).
 */
#include "sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SIM_PARAM_MAX 32764             /* the driver's limit since CUDA 12.1 */

/* ---- parameters --------------------------------------------------------- */

CUresult sim_pack_params(sim_func_t *f, void **kp, void **extra, void *buf, size_t cap,
                         size_t *size)
{
    if (kp && extra)
        return CUDA_ERROR_INVALID_VALUE;
    if (f->param_bytes > cap)
        return CUDA_ERROR_INVALID_VALUE;
    memset(buf, 0, f->param_bytes);
    if (kp) {
        for (int i = 0; i < f->nparams; i++) {
            if (!kp[i])
                return CUDA_ERROR_INVALID_VALUE;
            memcpy((char *)buf + f->params[i].offset, kp[i], f->params[i].size);
        }
    } else if (extra) {
        const void *ptr = NULL;
        size_t len = 0;
        int i = 0, have_size = 0;
        for (; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
            if (i >= 16)                /* no END: refuse rather than run off */
                return CUDA_ERROR_INVALID_VALUE;
            if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
                ptr = extra[i + 1];
            } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1]) {
                len = *(const size_t *)extra[i + 1];
                have_size = 1;
            } else {
                return CUDA_ERROR_INVALID_VALUE;
            }
        }
        /* A buffer shorter than the kernel's parameters is taken: its
         * bytes, the rest zero.  NCCL's kernels declare a 4 KiB parameter
         * struct and are launched with the part of it that one launch uses
         * (CU_LAUNCH_PARAM_BUFFER_SIZE, its arguments' size), which the
         * driver runs. */
        if (!ptr || !have_size)
            return CUDA_ERROR_INVALID_VALUE;
        memcpy(buf, ptr, len < f->param_bytes ? len : f->param_bytes);
    } else if (f->nparams > 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *size = f->param_bytes;
    return CUDA_SUCCESS;
}

/* ---- checks --------------------------------------------------------------- */

static CUresult check_dims(const unsigned g[3], const unsigned b[3], unsigned shmem)
{
    if (!g[0] || !g[1] || !g[2] || !b[0] || !b[1] || !b[2])
        return CUDA_ERROR_INVALID_VALUE;
    if (g[0] > 0x7fffffffu || g[1] > 65535 || g[2] > 65535)
        return CUDA_ERROR_INVALID_VALUE;
    if (b[0] > 1024 || b[1] > 1024 || b[2] > 64 ||
        (uint64_t)b[0] * b[1] * b[2] > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    if (shmem > 232448)                 /* opt-in maximum per block on sm_90 */
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* ---- emulated kernels ----------------------------------------------------- */

static uint64_t param_u64(const sim_func_t *f, const void *p, int i)
{
    uint64_t v = 0;
    if (i < f->nparams && f->params[i].size == 8)
        memcpy(&v, (const char *)p + f->params[i].offset, 8);
    return v;
}

static float param_f32(const sim_func_t *f, const void *p, int i)
{
    float v = 0;
    if (i < f->nparams && f->params[i].size == 4)
        memcpy(&v, (const char *)p + f->params[i].offset, 4);
    return v;
}

/* Runs the kernel's effect on memory now; the device would fault on a bad
 * address, simgpu refuses the launch with the error the fault would give. */
static CUresult emulate(const sim_func_t *f, const void *p)
{
    switch (f->emu) {
    case SIM_EMU_FILL: {
        float *dst = (float *)(uintptr_t)param_u64(f, p, 0);
        float v = param_f32(f, p, 1);
        uint64_t n = param_u64(f, p, 2);
        if (n > SIZE_MAX / 4 || sim_range_check((uintptr_t)dst, n * 4, 3))
            return CUDA_ERROR_ILLEGAL_ADDRESS;
        for (uint64_t i = 0; i < n; i++)
            dst[i] = v;
        return CUDA_SUCCESS;
    }
    case SIM_EMU_AXPY: {
        float *y = (float *)(uintptr_t)param_u64(f, p, 0);
        const float *x = (const float *)(uintptr_t)param_u64(f, p, 1);
        float a = param_f32(f, p, 2);
        uint64_t n = param_u64(f, p, 3);
        if (n > SIZE_MAX / 4 || sim_range_check((uintptr_t)y, n * 4, 3) ||
            sim_range_check((uintptr_t)x, n * 4, 1))
            return CUDA_ERROR_ILLEGAL_ADDRESS;
        for (uint64_t i = 0; i < n; i++)
            y[i] += a * x[i];
        return CUDA_SUCCESS;
    }
    default:
        return CUDA_SUCCESS;
    }
}

/* ---- the launch ------------------------------------------------------------ */

static void json_escape(const char *in, char *out, size_t len)
{
    size_t o = 0;
    for (; *in && o + 7 < len; in++) {
        unsigned char c = (unsigned char)*in;
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20) {
            o += (size_t)snprintf(out + o, len - o, "\\u%04x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o] = '\0';
}

/* One line, one write() to an O_APPEND fd: lines of several processes
 * appending to the same file never interleave.  submit_ns is when the host
 * enqueued the work: a reader sees how long it waited behind its stream
 * and the engine, and what one process submitted while another's work ran. */
void sim_trace(const sim_stream_t *s, int kind, const char *what, uint64_t submit,
               uint64_t start, uint64_t end)
{
    static const char *const kinds[] = { "kernel", "copy", "memset" };
    if (sim_p.trace_fd < 0)
        return;
    char name[1024], line[1500], graph[40] = "";
    json_escape(what, name, sizeof name);
    if (sim_graph_running)
        snprintf(graph, sizeof graph, ",\"graph\":%llu", (unsigned long long)sim_graph_running);
    int n = snprintf(line, sizeof line,
                     "{\"pid\":%d,\"device\":%d,\"context\":%llu,\"stream\":%llu,"
                     "\"kind\":\"%s\",\"name\":\"%s\",\"submit_ns\":%llu,"
                     "\"start_ns\":%llu,\"end_ns\":%llu%s}\n",
                     sim_p.pid, s->ctx->device, (unsigned long long)s->ctx->id,
                     (unsigned long long)s->id, kinds[kind], name,
                     (unsigned long long)submit, (unsigned long long)start,
                     (unsigned long long)end, graph);
    if (n > 0 && n < (int)sizeof line) {
        ssize_t w = write(sim_p.trace_fd, line, (size_t)n);
        (void)w;
    }
}

void sim_trace_cut(int pid, int dev, uint64_t ctx_id, uint64_t t)
{
    if (sim_p.trace_fd < 0)
        return;
    char line[256];
    int n = snprintf(line, sizeof line,
                     "{\"pid\":%d,\"device\":%d,\"context\":%llu,\"kind\":\"cut\","
                     "\"submit_ns\":%llu,\"start_ns\":%llu,\"end_ns\":%llu}\n",
                     pid, dev, (unsigned long long)ctx_id, (unsigned long long)t,
                     (unsigned long long)t, (unsigned long long)t);
    if (n > 0 && n < (int)sizeof line) {
        ssize_t w = write(sim_p.trace_fd, line, (size_t)n);
        (void)w;
    }
}

CUresult sim_launch_packed(sim_func_t *f, sim_stream_t *s, const unsigned grid[3],
                           const unsigned block[3], unsigned shmem, const void *params,
                           size_t param_size)
{
    if (s->capture)
        return sim_capture_kernel(s, f, grid, block, shmem, params, param_size);
    CUresult rc = emulate(f, params);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t dur = f->emu == SIM_EMU_SPIN ? param_u64(f, params, 0)
                   : sim_kernel_duration(f, grid, block, shmem);
    uint64_t submit = sim_now(), ready = sim_max(submit, sim_stream_ready(s)), start, end;
    sim_engine_run(s->ctx->device, s->ctx->id, submit, ready, dur, &start, &end);
    sim_stream_done(s, end);
    s->qend[s->qn++ % SIM_QUEUE_MAX] = end;
    sim_trace(s, SIM_W_KERNEL, f->name, submit, start, end);
    return CUDA_SUCCESS;
}

/* When the host may go on after a launch into s, 0 at once: the driver's
 * push buffer is full while SIMGPU_QUEUE_DEPTH launches of the stream are
 * unfinished, and cuLaunchKernel blocks until the oldest of them ends (a
 * loop that never syncs runs that far ahead of the GPU, no further).
 * Under lock; the caller sleeps after unlocking. */
static uint64_t queue_full_until(const sim_stream_t *s)
{
    uint64_t depth = sim_p.queue_depth;
    if (!depth || s->capture || s->qn < depth)
        return 0;
    uint64_t t = s->qend[(s->qn - depth) % SIM_QUEUE_MAX];
    return t > sim_now() ? t : 0;
}

static CUresult launch(CUfunction hf, const unsigned grid[3], const unsigned block[3],
                       unsigned shmem, CUstream hs, int ptsz, void **kp, void **extra)
{
    SIM_CHECK_INIT();
    CUresult rc = check_dims(grid, block, shmem);
    if (rc != CUDA_SUCCESS)
        return rc;
    unsigned char small[1024];
    void *buf = small;
    SIM_LOCK();
    sim_func_t *f = sim_obj_get((uint64_t)(uintptr_t)hf, SIM_K_FUNC);
    sim_stream_t *s;
    size_t size = 0;
    if (!f) {
        rc = CUDA_ERROR_INVALID_HANDLE;
        goto out_unlock;
    }
    rc = sim_stream_resolve(hs, ptsz, &s);
    if (rc != CUDA_SUCCESS)
        goto out_unlock;
    if (f->param_bytes > sizeof small && !(buf = malloc(f->param_bytes))) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out_unlock;
    }
    rc = sim_pack_params(f, kp, extra, buf, f->param_bytes > sizeof small ? f->param_bytes
                         : sizeof small, &size);
    if (rc == CUDA_SUCCESS)
        rc = sim_launch_packed(f, s, grid, block, shmem, buf, size);
    uint64_t until = rc == CUDA_SUCCESS ? queue_full_until(s) : 0;
    if (buf != small)
        free(buf);
    SIM_UNLOCK();
    if (until)
        sim_sleep_until(until);
    return rc;
out_unlock:
    SIM_UNLOCK();
    return rc;
}

/* ---- entry points ---------------------------------------------------------- */

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                unsigned int bx, unsigned int by, unsigned int bz,
                                unsigned int shmem, CUstream s, void **kp, void **extra)
{
    const unsigned g[3] = { gx, gy, gz }, b[3] = { bx, by, bz };
    return launch(f, g, b, shmem, s, 0, kp, extra);
}

CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                     unsigned int gz, unsigned int bx, unsigned int by,
                                     unsigned int bz, unsigned int shmem, CUstream s,
                                     void **kp, void **extra)
{
    const unsigned g[3] = { gx, gy, gz }, b[3] = { bx, by, bz };
    return launch(f, g, b, shmem, s, 1, kp, extra);
}

static CUresult launch_ex(const CUlaunchConfig *c, CUfunction f, void **kp, void **extra,
                          int ptsz)
{
    SIM_CHECK_INIT();
    if (!c || (c->numAttrs && !c->attrs))
        return CUDA_ERROR_INVALID_VALUE;
    const unsigned g[3] = { c->gridDimX, c->gridDimY, c->gridDimZ };
    const unsigned b[3] = { c->blockDimX, c->blockDimY, c->blockDimZ };
    for (unsigned i = 0; i < c->numAttrs; i++) {
        const CUlaunchAttribute *a = &c->attrs[i];
        if (a->id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
            unsigned cx = a->value.clusterDim.x, cy = a->value.clusterDim.y,
                     cz = a->value.clusterDim.z;
            if (!cx || !cy || !cz || g[0] % cx || g[1] % cy || g[2] % cz ||
                (uint64_t)cx * cy * cz > 16)
                return CUDA_ERROR_INVALID_CLUSTER_SIZE;
        }
    }
    return launch(f, g, b, c->sharedMemBytes, c->hStream, ptsz, kp, extra);
}

CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **kp, void **extra)
{
    return launch_ex(c, f, kp, extra, 0);
}

CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **kp,
                                       void **extra)
{
    return launch_ex(c, f, kp, extra, 1);
}

/* A cooperative grid must be resident at once: at most 132 SMs x the blocks
 * of this size that fit on one (2048 threads, 32 blocks). */
static CUresult launch_coop(CUfunction f, const unsigned g[3], const unsigned b[3],
                            unsigned shmem, CUstream s, void **kp, int ptsz)
{
    uint64_t threads = (uint64_t)b[0] * b[1] * b[2];
    uint64_t per_sm = threads ? 2048 / threads : 0;
    if (per_sm > 32)
        per_sm = 32;
    if (threads && threads <= 1024 && (uint64_t)g[0] * g[1] * g[2] > 132 * per_sm)
        return CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
    return launch(f, g, b, shmem, s, ptsz, kp, NULL);
}

CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                           unsigned int gz, unsigned int bx, unsigned int by,
                                           unsigned int bz, unsigned int shmem, CUstream s,
                                           void **kp)
{
    const unsigned g[3] = { gx, gy, gz }, b[3] = { bx, by, bz };
    return launch_coop(f, g, b, shmem, s, kp, 0);
}

CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                                unsigned int gz, unsigned int bx,
                                                unsigned int by, unsigned int bz,
                                                unsigned int shmem, CUstream s, void **kp)
{
    const unsigned g[3] = { gx, gy, gz }, b[3] = { bx, by, bz };
    return launch_coop(f, g, b, shmem, s, kp, 1);
}

/* ---- occupancy ----------------------------------------------------------------------------
 * From the function's registers and shared memory, on an SM of 2048
 * threads, 32 blocks, 64K registers and 228 KiB of shared memory (1 KiB of
 * it reserved per block), as Hopper's occupancy calculator does. */

int sim_blocks_per_sm(const sim_func_t *f, int block, size_t dyn)
{
    int warps = (block + 31) / 32, n = 32;
    if (2048 / (warps * 32) < n)
        n = 2048 / (warps * 32);
    if (f->num_regs > 0) {
        int regs = ((f->num_regs * 32 + 255) / 256) * 256 * warps;   /* per-warp granules */
        if (65536 / regs < n)
            n = 65536 / regs;
    }
    size_t smem = f->shared_bytes + dyn + 1024;
    if (smem > 1024 && (int)(233472 / smem) < n)
        n = (int)(233472 / smem);
    return n;
}

static CUresult occupancy(int *out, CUfunction hf, int block, size_t dyn)
{
    SIM_CHECK_INIT();
    if (!out || block <= 0 || block > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_func_t *f = sim_obj_get((uint64_t)(uintptr_t)hf, SIM_K_FUNC);
    if (f)
        *out = sim_blocks_per_sm(f, block, dyn);
    SIM_UNLOCK();
    return f ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, CUfunction f, int block,
                                                             size_t dyn)
{
    return occupancy(n, f, block, dyn);
}

CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, CUfunction f,
                                                                      int block, size_t dyn,
                                                                      unsigned int flags)
{
    (void)flags;
    return occupancy(n, f, block, dyn);
}

/* The block size with the most resident threads per SM (the largest among
 * equals), and the grid that fills every SM with it. */
static CUresult potential(int *grid, int *block, CUfunction hf, CUoccupancyB2DSize b2d,
                          size_t dyn, int limit)
{
    SIM_CHECK_INIT();
    if (!grid || !block)
        return CUDA_ERROR_INVALID_VALUE;
    if (limit <= 0 || limit > 1024)
        limit = 1024;
    SIM_LOCK();
    sim_func_t *f = sim_obj_get((uint64_t)(uintptr_t)hf, SIM_K_FUNC);
    SIM_UNLOCK();                       /* b2d is the program's: not under our lock */
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    int best = 0, best_n = 0, best_threads = -1;
    for (int b = (limit + 31) / 32 * 32; b > 0; b -= 32) {
        int bs = b > limit ? limit : b;
        int n = sim_blocks_per_sm(f, bs, b2d ? b2d(bs) : dyn);
        if (n * bs > best_threads) {
            best_threads = n * bs;
            best = bs;
            best_n = n;
        }
    }
    *grid = best_n * 132;
    *block = best;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuOccupancyMaxPotentialBlockSize(int *grid, int *block, CUfunction f,
                                                  CUoccupancyB2DSize b2d, size_t dyn, int limit)
{
    return potential(grid, block, f, b2d, dyn, limit);
}

CUresult CUDAAPI cuOccupancyMaxPotentialBlockSizeWithFlags(int *grid, int *block, CUfunction f,
                                                           CUoccupancyB2DSize b2d, size_t dyn,
                                                           int limit, unsigned int flags)
{
    (void)flags;
    return potential(grid, block, f, b2d, dyn, limit);
}

CUresult CUDAAPI cuOccupancyAvailableDynamicSMemPerBlock(size_t *out, CUfunction hf, int blocks,
                                                         int block)
{
    SIM_CHECK_INIT();
    if (!out || blocks <= 0 || block <= 0 || block > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_func_t *f = sim_obj_get((uint64_t)(uintptr_t)hf, SIM_K_FUNC);
    if (f) {
        size_t per = 233472 / (size_t)blocks;
        size_t used = f->shared_bytes + 1024;
        size_t avail = per > used ? per - used : 0;
        *out = avail > 232448 - f->shared_bytes ? 232448 - f->shared_bytes : avail;
    }
    SIM_UNLOCK();
    return f ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* Clusters resident at once: blocks per SM (above) over the 132 SMs, in
 * clusters of the size config's CLUSTER_DIMENSION gives; a size is needed
 * (simgpu's kernels never require one), at most 16 blocks (the
 * non-portable maximum), as the driver documents.  Hopper schedules a
 * cluster within one GPC; simgpu ignores the GPCs' boundaries. */
CUresult CUDAAPI cuOccupancyMaxActiveClusters(int *n, CUfunction hf, const CUlaunchConfig *c)
{
    SIM_CHECK_INIT();
    if (!n || !c || (c->numAttrs && !c->attrs))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t size = 0;
    for (unsigned i = 0; i < c->numAttrs; i++) {
        const CUlaunchAttribute *a = &c->attrs[i];
        if (a->id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
            size = (uint64_t)a->value.clusterDim.x * a->value.clusterDim.y *
                   a->value.clusterDim.z;
    }
    if (!size || size > 16)
        return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    uint64_t block = (uint64_t)c->blockDimX * c->blockDimY * c->blockDimZ;
    if (!block || block > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_func_t *f = sim_obj_get((uint64_t)(uintptr_t)hf, SIM_K_FUNC);
    if (f)
        *n = (int)(sim_blocks_per_sm(f, (int)block, c->sharedMemBytes) * 132ull / size);
    SIM_UNLOCK();
    return f ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
