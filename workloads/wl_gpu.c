/*
 * wl_gpu.c - the CUDA side of the workloads: context and module, the entry
 * points that take a stream, kernel sequences and their launch forms, and
 * the host synchronizations that end iterations.
 *
 * Divided into: entry points (direct or per-thread); opening and closing
 * (device, primary context, module, stream, event, aux buffers); kernel
 * plans and launches (kernel, ex, cooperative, graph); syncs.
 *
 * Every driver call is checked with wl_cu, which records the first failure
 * with the call's name and cuGetErrorName of its result.
 */
#include "wl.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The aux kernels work on two buffers of this many floats. */
#define AUX_N      65536ull
#define AUX_GRID   8u
#define AUX_BLOCK  256u

/* Suffix of the entry-point names in messages, per stream kind. */
static const char *pt(const wl_gpu_t *g, const char *variant)
{
    return g->stream_kind == WL_STREAM_PER_THREAD ? variant : "";
}

/* ---- entry points ------------------------------------------------------- */

/* The exports as a linked program binds them: the first definition in the
 * global scope (a preloaded libsalus's, else the driver's).  Looked up, not
 * taken with &: the address of a weak reference is fixed, at 0, when the
 * program loads, before wl_gpu_open has loaded the driver. */
#define WL_STR_(x) #x
#define WL_NAME_(fn) WL_STR_(fn)
#define DIRECT(field, fn) \
    (a->field = (__typeof__(&fn))dlsym(RTLD_DEFAULT, WL_NAME_(fn))) != NULL
static int api_direct(wl_api_t *a)
{
    if (DIRECT(launch_kernel, cuLaunchKernel) && DIRECT(launch_kernel_ex, cuLaunchKernelEx) &&
        DIRECT(launch_coop, cuLaunchCooperativeKernel) && DIRECT(graph_launch, cuGraphLaunch) &&
        DIRECT(memcpy_dtoh, cuMemcpyDtoH) && DIRECT(stream_sync, cuStreamSynchronize) &&
        DIRECT(event_record, cuEventRecord) && DIRECT(mem_alloc_async, cuMemAllocAsync) &&
        DIRECT(mem_free_async, cuMemFreeAsync))
        return WL_OK;
    return wl_errorf(WL_ECUDA, "the CUDA driver lacks an entry point these programs use: %s",
                     dlerror());
}
#undef DIRECT

/* libcuda.so.1, into the global scope, before any driver call (wl.h). */
static int load_driver(void)
{
    if (dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL))
        return WL_OK;
    return wl_errorf(WL_ECUDA, "cannot load the CUDA driver: %s; without a GPU, point "
                     "LD_LIBRARY_PATH at simgpu (build/sim)", dlerror());
}

/* What a program built with --default-stream per-thread gets from the
 * runtime: each entry point looked up by base name with the per-thread flag,
 * so that the driver (or an interposer) answers with its _ptsz/_ptds form. */
static int resolve(const char *sym, int version, void **out)
{
    void *pfn = NULL;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
    int rc = wl_cu(cuGetProcAddress(sym, &pfn, version,
                                    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status),
                   "cuGetProcAddress(\"%s\", %d, PER_THREAD_DEFAULT_STREAM)", sym, version);
    if (rc)
        return rc;
    if (!pfn || status != CU_GET_PROC_ADDRESS_SUCCESS)
        return wl_errorf(WL_ECUDA, "cuGetProcAddress(\"%s\", %d, PER_THREAD_DEFAULT_STREAM): "
                         "no such entry point (status %d)", sym, version, (int)status);
    *out = pfn;
    return WL_OK;
}

#define RESOLVE(field, sym)                                                   \
    do {                                                                      \
        void *p_;                                                             \
        if ((rc = resolve(sym, version, &p_)) != WL_OK)                       \
            return rc;                                                        \
        a->field = (__typeof__(a->field))p_;                                  \
    } while (0)

/* Only the entry points this run uses are asked for, so that a driver
 * without (say) graphs still runs the other forms; the rest stay direct and
 * are never called. */
static int api_per_thread(wl_api_t *a, const wl_common_t *c)
{
    int driver = 0, rc;
    if ((rc = wl_cu(cuDriverGetVersion(&driver), "cuDriverGetVersion")))
        return rc;
    /* Ask for the ABI of the headers we were built with, or the driver's if
     * it is older: a driver answers nothing newer than itself. */
    int version = driver < CUDA_VERSION ? driver : CUDA_VERSION;
    RESOLVE(launch_kernel, "cuLaunchKernel");
    if (c->launch == WL_LAUNCH_EX)
        RESOLVE(launch_kernel_ex, "cuLaunchKernelEx");
    if (c->launch == WL_LAUNCH_COOP)
        RESOLVE(launch_coop, "cuLaunchCooperativeKernel");
    if (c->launch == WL_LAUNCH_GRAPH)
        RESOLVE(graph_launch, "cuGraphLaunch");
    RESOLVE(memcpy_dtoh, "cuMemcpyDtoH");
    RESOLVE(stream_sync, "cuStreamSynchronize");
    RESOLVE(event_record, "cuEventRecord");
    if (c->alloc == WL_ALLOC_ASYNC) {
        RESOLVE(mem_alloc_async, "cuMemAllocAsync");
        RESOLVE(mem_free_async, "cuMemFreeAsync");
    }
    return WL_OK;
}

/* ---- opening and closing ------------------------------------------------ */

/* <dir of the program>/../workloads/kernels.<ext> */
static void module_beside_program(const char *ext, char *buf, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(buf, len, "workloads/kernels.%s", ext);
        return;
    }
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    snprintf(buf, len, "%s/../workloads/kernels.%s", exe, ext);
}

/* The cubin first; the PTX when the cubin is missing or is not for this GPU
 * (the driver JIT-compiles PTX for any newer architecture). */
static int load_module(wl_gpu_t *g, const char *path)
{
    if (path)
        return wl_cu(cuModuleLoad(&g->mod, path), "cuModuleLoad(%s)", path);
    char cubin[PATH_MAX + 32], ptx[PATH_MAX + 32];
    module_beside_program("cubin", cubin, sizeof cubin);
    module_beside_program("ptx", ptx, sizeof ptx);
    if (access(cubin, R_OK) == 0) {
        CUresult r = cuModuleLoad(&g->mod, cubin);
        if (r == CUDA_SUCCESS)
            return WL_OK;
        if (access(ptx, R_OK) != 0)
            return wl_cu(r, "cuModuleLoad(%s)", cubin);
        if (g->verbose)
            fprintf(stderr, "%s: %s does not load here; trying %s\n", g->prog, cubin, ptx);
    } else if (access(ptx, R_OK) != 0) {
        return wl_errorf(WL_ECUDA, "no kernels module: neither %s nor %s can be read "
                         "(build them with make, or give --module PATH)", cubin, ptx);
    }
    return wl_cu(cuModuleLoad(&g->mod, ptx), "cuModuleLoad(%s)", ptx);
}

/* --retain-all: every other device's primary context, kept until exit (the
 * driver releases them then), as JAX holds one on every visible GPU. */
static int retain_others(int count, int device)
{
    int rc;
    for (int d = 0; d < count; d++) {
        CUdevice dev;
        CUcontext ctx;
        if (d != device && ((rc = wl_cu(cuDeviceGet(&dev, d), "cuDeviceGet(%d)", d)) ||
                            (rc = wl_cu(cuDevicePrimaryCtxRetain(&ctx, dev),
                                        "cuDevicePrimaryCtxRetain(%d)", d))))
            return rc;
    }
    return WL_OK;
}

static int open_context(wl_gpu_t *g, int device, int retain_all)
{
    int count = 0, rc;
    if ((rc = wl_cu(cuInit(0), "cuInit")) ||
        (rc = wl_cu(cuDeviceGetCount(&count), "cuDeviceGetCount")))
        return rc;
    if (device >= count)
        return wl_errorf(WL_EUSAGE, "--device %d: there %s %d device%s", device,
                         count == 1 ? "is" : "are", count, count == 1 ? "" : "s");
    if (retain_all && (rc = retain_others(count, device)))
        return rc;
    if ((rc = wl_cu(cuDeviceGet(&g->dev, device), "cuDeviceGet(%d)", device)) ||
        (rc = wl_cu(cuDevicePrimaryCtxRetain(&g->ctx, g->dev), "cuDevicePrimaryCtxRetain")))
        return rc;
    g->ctx_retained = 1;
    return wl_cu(cuCtxSetCurrent(g->ctx), "cuCtxSetCurrent");
}

static int open_functions(wl_gpu_t *g)
{
    static const char *const names[] = { "salus_spin", "salus_fill", "salus_axpy" };
    int rc;
    for (int k = 0; k < 3; k++)
        if ((rc = wl_cu(cuModuleGetFunction(&g->fn[k], g->mod, names[k]),
                        "cuModuleGetFunction(%s)", names[k])))
            return rc;
    return WL_OK;
}

/* Streams, the event, and the aux buffers (x = 1.0, y = 0.0: the "loss"
 * that item syncs read is y[0], written by the aux kernels). */
static int open_resources(wl_gpu_t *g)
{
    int rc;
    if (g->stream_kind == WL_STREAM_CREATED &&
        (rc = wl_cu(cuStreamCreate(&g->stream, CU_STREAM_DEFAULT), "cuStreamCreate")))
        return rc;
    /* The legacy stream cannot be captured; a graph is captured on a stream
     * of its own and launched on the workload's stream. */
    if (g->launch_kind == WL_LAUNCH_GRAPH &&
        (rc = wl_cu(cuStreamCreate(&g->capture, CU_STREAM_NON_BLOCKING), "cuStreamCreate")))
        return rc;
    if ((rc = wl_cu(cuEventCreate(&g->event, CU_EVENT_DISABLE_TIMING), "cuEventCreate")) ||
        (rc = wl_cu(cuMemAlloc(&g->x, AUX_N * sizeof(float)), "cuMemAlloc_v2(aux buffer)")) ||
        (rc = wl_cu(cuMemAlloc(&g->y, AUX_N * sizeof(float)), "cuMemAlloc_v2(aux buffer)")))
        return rc;
    const float one = 1.0f;
    unsigned int bits;
    memcpy(&bits, &one, sizeof bits);
    if ((rc = wl_cu(cuMemsetD32(g->x, bits, AUX_N), "cuMemsetD32_v2")) ||
        (rc = wl_cu(cuMemsetD32(g->y, 0, AUX_N), "cuMemsetD32_v2")))
        return rc;
    return wl_cu(cuCtxSynchronize(), "cuCtxSynchronize");
}

int wl_gpu_open(wl_gpu_t *g, const char *prog, const wl_common_t *c)
{
    memset(g, 0, sizeof *g);
    g->prog = prog;
    g->verbose = c->verbose;
    g->stream_kind = c->stream;
    g->launch_kind = c->launch;
    g->alloc_kind = c->alloc;
    g->oom_kind = c->oom;
    g->spin_ns = (unsigned long long)(c->kernel_us * 1000.0 + 0.5);
    int rc;
    if ((rc = load_driver()) || (rc = api_direct(&g->api)) ||
        (rc = open_context(g, (int)c->device, c->retain_all)))
        return rc;
    if (c->stream == WL_STREAM_PER_THREAD && (rc = api_per_thread(&g->api, c)))
        return rc;
    if ((rc = load_module(g, c->module)))
        return rc;
    g->module_loaded = 1;
    if ((rc = open_functions(g)))
        return rc;
    return open_resources(g);
}

/* Keeps going after a failure, so that everything that can be released is;
 * returns the first failure (which wl_cu has recorded unless one was). */
int wl_gpu_close(wl_gpu_t *g)
{
    int rc = WL_OK, r;
#define CLOSE(cond, call, what)                                  \
    if (cond) {                                                  \
        r = wl_cu(call, what);                                   \
        if (r && !rc)                                            \
            rc = r;                                              \
    }
    CLOSE(g->y, cuMemFree(g->y), "cuMemFree_v2(aux buffer)");
    CLOSE(g->x, cuMemFree(g->x), "cuMemFree_v2(aux buffer)");
    CLOSE(g->event, cuEventDestroy(g->event), "cuEventDestroy_v2");
    CLOSE(g->capture, cuStreamDestroy(g->capture), "cuStreamDestroy_v2");
    CLOSE(g->stream, cuStreamDestroy(g->stream), "cuStreamDestroy_v2");
    CLOSE(g->module_loaded, cuModuleUnload(g->mod), "cuModuleUnload");
    CLOSE(g->ctx_retained, cuDevicePrimaryCtxRelease(g->dev), "cuDevicePrimaryCtxRelease_v2");
#undef CLOSE
    g->x = g->y = 0;
    g->event = NULL;
    g->capture = g->stream = NULL;
    g->module_loaded = g->ctx_retained = 0;
    return rc;
}

int wl_gpu_meminfo(wl_gpu_t *g, size_t *free_b, size_t *total_b)
{
    (void)g;
    return wl_cu(cuMemGetInfo(free_b, total_b), "cuMemGetInfo_v2");
}

/* ---- kernel plans and launches ------------------------------------------ */

/* aux handles, each centred in its share of the sequence, alternating
 * fill (a zero_grad-like write) and axpy (an optimizer-like update). */
wl_kernel_kind_t *wl_plan(long long n, long long aux)
{
    wl_kernel_kind_t *k = malloc((size_t)n * sizeof *k);
    if (!k) {
        wl_errorf(WL_ECUDA, "out of host memory for a plan of %lld kernels", n);
        return NULL;
    }
    for (long long i = 0; i < n; i++)
        k[i] = WL_K_SPIN;
    for (long long j = 0; j < aux; j++)
        k[((2 * j + 1) * n) / (2 * aux)] = (j % 2) ? WL_K_AXPY : WL_K_FILL;
    return k;
}

static const char *launch_name(const wl_gpu_t *g)
{
    switch (g->launch_kind) {
    case WL_LAUNCH_EX: return "cuLaunchKernelEx";
    case WL_LAUNCH_COOP: return "cuLaunchCooperativeKernel";
    default: return "cuLaunchKernel";
    }
}

/* One kernel on stream s in the chosen form (graph: captured as plain
 * launches).  Small grids, so that a cooperative launch fits any GPU. */
static int launch_one(wl_gpu_t *g, wl_kernel_kind_t kind, CUstream s)
{
    unsigned long long ns = g->spin_ns, n = AUX_N;
    float value = 0.5f, a = 0.001f;
    void *spin_args[] = { &ns };
    void *fill_args[] = { &g->y, &value, &n };
    void *axpy_args[] = { &g->y, &g->x, &a, &n };
    void **args = kind == WL_K_SPIN ? spin_args : kind == WL_K_FILL ? fill_args : axpy_args;
    unsigned int grid = kind == WL_K_SPIN ? 1 : AUX_GRID;
    unsigned int block = kind == WL_K_SPIN ? 1 : AUX_BLOCK;
    CUfunction f = g->fn[kind];
    CUresult r;
    switch (g->launch_kind) {
    case WL_LAUNCH_EX: {
        CUlaunchConfig cfg = { .gridDimX = grid, .gridDimY = 1, .gridDimZ = 1,
                               .blockDimX = block, .blockDimY = 1, .blockDimZ = 1,
                               .sharedMemBytes = 0, .hStream = s, .attrs = NULL, .numAttrs = 0 };
        r = g->api.launch_kernel_ex(&cfg, f, args, NULL);
        break;
    }
    case WL_LAUNCH_COOP:
        r = g->api.launch_coop(f, grid, 1, 1, block, 1, 1, 0, s, args);
        break;
    default:
        r = g->api.launch_kernel(f, grid, 1, 1, block, 1, 1, 0, s, args, NULL);
        break;
    }
    return wl_cu(r, "%s%s", launch_name(g), pt(g, "_ptsz"));
}

/* Capture the sequence once; a failure ends the capture so that the stream
 * is usable again, and names what the driver could not do. */
static int seq_capture(wl_gpu_t *g, wl_seq_t *s)
{
    int rc = wl_cu(cuStreamBeginCapture(g->capture, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                   "--launch graph: cuStreamBeginCapture_v2");
    if (rc)
        return rc;
    for (int i = 0; i < s->n && !rc; i++)
        rc = launch_one(g, s->kinds[i], g->capture);
    CUgraph graph = NULL;
    CUresult r = cuStreamEndCapture(g->capture, &graph);
    if (!rc)
        rc = wl_cu(r, "--launch graph: cuStreamEndCapture");
    if (rc) {
        if (graph)
            wl_cu(cuGraphDestroy(graph), "cuGraphDestroy");
        return rc;
    }
    s->graph = graph;
    return wl_cu(cuGraphInstantiate(&s->exec, graph, 0), "--launch graph: cuGraphInstantiateWithFlags");
}

int wl_seq_init(wl_gpu_t *g, wl_seq_t *s, const wl_kernel_kind_t *kinds, int from, int to)
{
    memset(s, 0, sizeof *s);
    s->n = to - from;
    s->kinds = malloc((size_t)(s->n > 0 ? s->n : 1) * sizeof *s->kinds);
    if (!s->kinds)
        return wl_errorf(WL_ECUDA, "out of host memory for a kernel sequence");
    for (int i = 0; i < s->n; i++) {
        s->kinds[i] = kinds[from + i];
        s->spins += s->kinds[i] == WL_K_SPIN;
    }
    if (g->launch_kind == WL_LAUNCH_GRAPH && s->n > 0)
        return seq_capture(g, s);
    return WL_OK;
}

int wl_seq_launch(wl_gpu_t *g, wl_seq_t *s)
{
    if (s->n == 0)
        return WL_OK;
    if (g->launch_kind == WL_LAUNCH_GRAPH) {
        int rc = wl_cu(g->api.graph_launch(s->exec, g->stream), "cuGraphLaunch%s", pt(g, "_ptsz"));
        if (!rc)
            g->launches += (uint64_t)s->n;
        return rc;
    }
    for (int i = 0; i < s->n; i++) {
        int rc = launch_one(g, s->kinds[i], g->stream);
        if (rc)
            return rc;
        g->launches++;
    }
    return WL_OK;
}

int wl_seq_free(wl_seq_t *s)
{
    int rc = WL_OK, r;
    if (s->exec && (r = wl_cu(cuGraphExecDestroy(s->exec), "cuGraphExecDestroy")))
        rc = r;
    if (s->graph && (r = wl_cu(cuGraphDestroy(s->graph), "cuGraphDestroy")) && !rc)
        rc = r;
    free(s->kinds);
    memset(s, 0, sizeof *s);
    return rc;
}

/* ---- syncs -------------------------------------------------------------- */

/* item: what loss.item() amounts to, a small blocking copy of a value the
 * kernels wrote; the others are the driver's three ways to wait. */
int wl_sync(wl_gpu_t *g, int style)
{
    int rc = WL_OK;
    float loss;
    switch (style) {
    case WL_SYNC_ITEM:
        rc = wl_cu(g->api.memcpy_dtoh(&loss, g->y, sizeof loss), "cuMemcpyDtoH_v2%s", pt(g, "_ptds"));
        break;
    case WL_SYNC_STREAM:
        rc = wl_cu(g->api.stream_sync(g->stream), "cuStreamSynchronize%s", pt(g, "_ptsz"));
        break;
    case WL_SYNC_CTX:
        rc = wl_cu(cuCtxSynchronize(), "cuCtxSynchronize");
        break;
    case WL_SYNC_EVENT:
        rc = wl_cu(g->api.event_record(g->event, g->stream), "cuEventRecord%s", pt(g, "_ptsz"));
        if (!rc)
            rc = wl_cu(cuEventSynchronize(g->event), "cuEventSynchronize");
        break;
    default:
        return WL_OK;
    }
    if (!rc)
        g->syncs++;
    return rc;
}

int wl_drain(wl_gpu_t *g)
{
    (void)g;
    return wl_cu(cuCtxSynchronize(), "cuCtxSynchronize");
}
