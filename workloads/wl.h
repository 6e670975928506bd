/*
 * wl.h - the internal library of the workload programs (salus-train,
 * salus-infer): everything the two share, so that each program holds only
 * its own loop.
 *
 *   errors      one error message per process (the first one wins), CUDA
 *               results checked and named with cuGetErrorName
 *   time        CLOCK_MONOTONIC, sleeps to absolute deadlines, SIGTERM/SIGINT
 *   statistics  samples with mean and percentiles; a seeded PRNG
 *   JSON        the one-line result object
 *   options     a table-driven parser that writes --help and names the
 *               option and its accepted forms in every error
 *   gpu         context, module, streams, the driver entry points used for
 *               work (direct, or per-thread through cuGetProcAddress),
 *               kernel sequences and how they are launched, sync styles
 *   memory      device buffers over each allocation path, with OOM policy
 *   run         what a run does around its loop: start, set-up, end, and
 *               the first and last fields of its result line
 *
 * The programs include <cuda.h> plainly, as any driver-API user does.
 */
#ifndef SALUS_WL_H
#define SALUS_WL_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- the driver ----------------------------------------------------------
 * The programs are not linked to libcuda (no DT_NEEDED), so that --help and
 * argument errors work on a machine where libcuda.so.1 is not on the library
 * path; wl_gpu_open loads it (RTLD_GLOBAL) before the first driver call.
 * Every export they call is a weak reference, bound lazily at its first
 * call, so calls still go through the global scope first, where a preloaded
 * libsalus interposes exactly as on a linked program.  An export used but not
 * listed here is a link error. */
#define WL_DRIVER_EXPORTS(X) \
    X(cuArrayCreate_v2) X(cuArrayDestroy) X(cuCtxSetCurrent) X(cuCtxSynchronize) \
    X(cuDeviceGet) X(cuDeviceGetCount) X(cuDevicePrimaryCtxRelease_v2) \
    X(cuDevicePrimaryCtxRetain) X(cuDriverGetVersion) X(cuEventCreate) \
    X(cuEventDestroy_v2) X(cuEventRecord) X(cuEventSynchronize) X(cuGetErrorName) \
    X(cuGetProcAddress_v2) X(cuGraphDestroy) X(cuGraphExecDestroy) \
    X(cuGraphInstantiateWithFlags) X(cuGraphLaunch) X(cuInit) \
    X(cuLaunchCooperativeKernel) X(cuLaunchKernel) X(cuLaunchKernelEx) \
    X(cuMemAddressFree) X(cuMemAddressReserve) X(cuMemAllocAsync) X(cuMemAllocManaged) \
    X(cuMemAllocPitch_v2) X(cuMemAlloc_v2) X(cuMemCreate) X(cuMemFreeAsync) \
    X(cuMemFree_v2) X(cuMemGetAllocationGranularity) X(cuMemGetInfo_v2) X(cuMemMap) \
    X(cuMemRelease) X(cuMemSetAccess) X(cuMemUnmap) X(cuMemcpyDtoH_v2) \
    X(cuMemsetD32_v2) X(cuModuleGetFunction) X(cuModuleLoad) X(cuModuleUnload) \
    X(cuStreamBeginCapture_v2) X(cuStreamCreate) X(cuStreamDestroy_v2) \
    X(cuStreamEndCapture) X(cuStreamSynchronize)
#define WL_PRAGMA_(text) _Pragma(#text)
#define WL_WEAK_(sym) WL_PRAGMA_(weak sym)
WL_DRIVER_EXPORTS(WL_WEAK_)

/* ---- errors ------------------------------------------------------------- */

/* Return codes of every wl_ function; the exit status of the programs. */
enum {
    WL_OK = 0,
    WL_ECUDA = 1,   /* a CUDA call failed (or another run-time failure) */
    WL_EUSAGE = 2,  /* bad arguments */
    WL_EOOM = 2,    /* out of device memory under --oom fail */
    WL_ESTOP = 3,   /* internal: a signal or --seconds ended a wait for memory */
};

/* Record the error (if none is recorded yet) and return code. */
int wl_errorf(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 0 when r is CUDA_SUCCESS; otherwise record "<what>: <CUDA error name>"
 * and return WL_EOOM for CUDA_ERROR_OUT_OF_MEMORY, WL_ECUDA for the rest. */
int wl_cu(CUresult r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The recorded error ("" if none); wl_error_clear forgets it. */
const char *wl_error(void);
void wl_error_clear(void);
/* Whether the last failed wl_cu call was CUDA_ERROR_OUT_OF_MEMORY. */
int wl_error_is_oom(void);

/* ---- time and signals --------------------------------------------------- */

uint64_t wl_now_ns(void);
/* Sleep until the CLOCK_MONOTONIC deadline; returns early (non-zero) only
 * when a stop was requested by a signal. */
int wl_sleep_until(uint64_t deadline_ns);
/* SIGTERM and SIGINT set a flag that the loops check at iteration ends. */
int wl_signals_install(void);
int wl_stop_requested(void);

/* ---- statistics --------------------------------------------------------- */

typedef struct wl_samples {
    double *v;
    size_t n, cap;
} wl_samples_t;
int wl_samples_add(wl_samples_t *s, double x);
double wl_samples_mean(const wl_samples_t *s);
/* p in [0,100], linear interpolation between closest ranks; 0 if empty. */
double wl_samples_pct(const wl_samples_t *s, double p);
double wl_samples_max(const wl_samples_t *s);
void wl_samples_free(wl_samples_t *s);

/* splitmix64: deterministic for a seed, whatever the libc. */
typedef struct wl_rng { uint64_t state; } wl_rng_t;
void wl_rng_seed(wl_rng_t *r, uint64_t seed);
uint64_t wl_rng_next(wl_rng_t *r);
/* Uniform in (0, 1]. */
double wl_rng_unit(wl_rng_t *r);

/* ---- JSON result line --------------------------------------------------- */

typedef struct wl_json {
    char buf[4096];
    size_t len;
} wl_json_t;
void wl_json_begin(wl_json_t *j);
void wl_json_str(wl_json_t *j, const char *key, const char *val);
void wl_json_int(wl_json_t *j, const char *key, long long val);
void wl_json_u64(wl_json_t *j, const char *key, uint64_t val);
void wl_json_num(wl_json_t *j, const char *key, double val, int decimals);
void wl_json_bool(wl_json_t *j, const char *key, int val);
/* Close the object and write it as one line to f (flushed). */
void wl_json_end(wl_json_t *j, FILE *f);

/* ---- options ------------------------------------------------------------ */

typedef enum wl_optkind {
    WL_OPT_INT,     /* long long, within [min, max] */
    WL_OPT_DOUBLE,  /* double, finite, within [min, max] */
    WL_OPT_SIZE,    /* uint64_t bytes: N[.N][K|M|G|T] (powers of 1024) */
    WL_OPT_ENUM,    /* int: index into choices */
    WL_OPT_STR,     /* const char * (points into argv) */
    WL_OPT_FLAG,    /* int set to 1, takes no value */
} wl_optkind_t;

typedef struct wl_opt {
    const char *name;            /* without the leading "--" */
    wl_optkind_t kind;
    void *dst;
    const char *const *choices;  /* WL_OPT_ENUM: NULL-terminated */
    double min, max;             /* WL_OPT_INT / WL_OPT_DOUBLE */
    const char *metavar;         /* shown in --help */
    const char *help;
    int set;                     /* out: given on the command line */
} wl_opt_t;

/* An entry of an option table. */
#define WL_OPT(nm, k, d, ch, lo, hi, mv, h) \
    (wl_opt_t){ .name = nm, .kind = k, .dst = d, .choices = ch, .min = lo, .max = hi, \
                .metavar = mv, .help = h }

/* Parse argv ("--name value" or "--name=value") into the NULL-name-terminated
 * table.  Returns WL_OK, 1 when --help was printed, or WL_EUSAGE after a
 * message on stderr that names the option and the forms it accepts. */
int wl_opt_parse(const char *prog, const char *synopsis, wl_opt_t *opts,
                 int argc, char **argv);
/* The entry of that name (NULL if none). */
wl_opt_t *wl_opt_find(wl_opt_t *opts, const char *name);
int wl_opt_given(wl_opt_t *opts, const char *name);
/* Bytes from "64M", "1.5G", "4096"; 0 on success, -1 if malformed. */
int wl_parse_size(const char *s, uint64_t *out);
/* "64.0M"-style rendering of a size, for messages. */
const char *wl_fmt_size(uint64_t bytes, char *buf, size_t len);

/* ---- the options both programs take ------------------------------------- */

typedef enum { WL_STREAM_LEGACY, WL_STREAM_CREATED, WL_STREAM_PER_THREAD } wl_stream_kind_t;
typedef enum { WL_LAUNCH_KERNEL, WL_LAUNCH_EX, WL_LAUNCH_COOP, WL_LAUNCH_GRAPH } wl_launch_kind_t;
typedef enum {
    WL_ALLOC_ALLOC, WL_ALLOC_PITCH, WL_ALLOC_MANAGED, WL_ALLOC_ASYNC, WL_ALLOC_VMM, WL_ALLOC_ARRAY
} wl_alloc_kind_t;
typedef enum { WL_SYNC_ITEM, WL_SYNC_STREAM, WL_SYNC_CTX, WL_SYNC_EVENT, WL_SYNC_NONE } wl_sync_kind_t;
typedef enum { WL_OOM_FAIL, WL_OOM_RETRY } wl_oom_kind_t;

extern const char *const wl_stream_names[];
extern const char *const wl_launch_names[];
extern const char *const wl_alloc_names[];
extern const char *const wl_sync_names[];
extern const char *const wl_oom_names[];

typedef struct wl_common {
    const char *module;      /* NULL: beside the program */
    const char *name;        /* NULL: the program's (or the preset's) name */
    long long device;
    long long kernels;       /* launches per iteration (train) / request (infer) */
    long long aux_kernels;   /* of which salus_fill/salus_axpy; -1: kernels / 8 */
    double kernel_us;        /* duration of each salus_spin */
    double seconds;          /* 0: no time bound */
    uint64_t mem;            /* persistent memory (weights, optimizer state) */
    long long seed;
    int stream, launch, alloc, oom, verbose;
    int retain_all;          /* retain every visible device's primary context, as JAX does */
} wl_common_t;

/* Defaults of the shared options. */
void wl_common_defaults(wl_common_t *c);
/* Append the shared options' entries to opts[*n...]; *n advances. */
void wl_common_opts(wl_common_t *c, wl_opt_t *opts, size_t *n);
/* Checks across shared options; WL_EUSAGE with a message on failure. */
int wl_common_check(const char *prog, wl_common_t *c);

/* ---- gpu: context, module, entry points, launches, syncs ---------------- */

/* Which kernel each position of a sequence launches. */
typedef enum { WL_K_SPIN, WL_K_FILL, WL_K_AXPY } wl_kernel_kind_t;

/* The driver entry points that take a stream.  With --stream per-thread they
 * are the _ptsz/_ptds variants, resolved through cuGetProcAddress with
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM; otherwise the plain ones.
 * The types come from the plain declarations: the variants share them. */
typedef struct wl_api {
    __typeof__(&cuLaunchKernel) launch_kernel;
    __typeof__(&cuLaunchKernelEx) launch_kernel_ex;
    __typeof__(&cuLaunchCooperativeKernel) launch_coop;
    __typeof__(&cuGraphLaunch) graph_launch;
    __typeof__(&cuMemcpyDtoH) memcpy_dtoh;
    __typeof__(&cuStreamSynchronize) stream_sync;
    __typeof__(&cuEventRecord) event_record;
    __typeof__(&cuMemAllocAsync) mem_alloc_async;
    __typeof__(&cuMemFreeAsync) mem_free_async;
} wl_api_t;

typedef struct wl_gpu {
    const char *prog;
    int verbose;
    int stream_kind, launch_kind, alloc_kind, oom_kind;
    CUdevice dev;
    CUcontext ctx;            /* the primary context, as the runtime uses */
    CUmodule mod;
    CUfunction fn[3];         /* by wl_kernel_kind_t */
    CUstream stream;          /* where work goes: NULL for legacy/per-thread */
    CUstream capture;         /* a created stream for graph capture */
    CUevent event;            /* for --sync event */
    CUdeviceptr x, y;         /* small buffers of the aux kernels */
    unsigned long long spin_ns;
    wl_api_t api;
    uint64_t launches, syncs;
    int ctx_retained, module_loaded;
} wl_gpu_t;

/* cuInit, device, primary context, module, functions, entry points, stream,
 * event, aux buffers.  On failure the error is recorded; call wl_gpu_close. */
int wl_gpu_open(wl_gpu_t *g, const char *prog, const wl_common_t *c);
/* Undo what wl_gpu_open did, in reverse; returns the first failure. */
int wl_gpu_close(wl_gpu_t *g);
/* Free and total device memory (cuMemGetInfo_v2). */
int wl_gpu_meminfo(wl_gpu_t *g, size_t *free_b, size_t *total_b);

/* A sequence of kernels launched together; under --launch graph it is
 * captured once into a graph and each launch is one cuGraphLaunch. */
typedef struct wl_seq {
    wl_kernel_kind_t *kinds;
    int n;
    int spins;                /* how many of kinds are salus_spin */
    CUgraph graph;
    CUgraphExec exec;
} wl_seq_t;
/* kinds[from, to) of a plan: a copy, captured when the launch form is graph. */
int wl_seq_init(wl_gpu_t *g, wl_seq_t *s, const wl_kernel_kind_t *kinds, int from, int to);
int wl_seq_launch(wl_gpu_t *g, wl_seq_t *s);
int wl_seq_free(wl_seq_t *s);
/* The kernel plan of n launches with aux of them salus_fill/salus_axpy,
 * spread evenly (a model's mix of handles); malloc'd. */
wl_kernel_kind_t *wl_plan(long long n, long long aux);

/* One host synchronization of that style (none: nothing).  Counts it. */
int wl_sync(wl_gpu_t *g, int style);
/* Wait for all work of the context (end of run; not counted). */
int wl_drain(wl_gpu_t *g);

/* ---- memory ------------------------------------------------------------- */

typedef struct wl_buf {
    int kind;                 /* wl_alloc_kind_t */
    uint64_t size;            /* requested bytes; 0: nothing held */
    CUdeviceptr ptr;
    size_t span;              /* bytes reserved/mapped (vmm), pitch x height */
    CUmemGenericAllocationHandle handle;
    CUarray array;
} wl_buf_t;

/* Allocate size bytes over the gpu's --alloc path (size 0: nothing).  On
 * CUDA_ERROR_OUT_OF_MEMORY under --oom retry, sleep and retry until it fits,
 * counting *retries; WL_ESTOP (no error recorded) when a stop is requested
 * or deadline_ns (0: none) passes first. */
int wl_buf_alloc(wl_gpu_t *g, wl_buf_t *b, uint64_t size, const char *what,
                 uint64_t deadline_ns, uint64_t *retries);
int wl_buf_free(wl_gpu_t *g, wl_buf_t *b);

/* End of a run, keeping rc if it is a failure: wait for all work (*end_ns
 * is taken then), free the buffers, wait again so that cuMemFreeAsync'd
 * memory is back on the device, and read the free memory into *free_end.
 * Does nothing but return rc if the context is not there. */
int wl_finish(wl_gpu_t *g, wl_buf_t *const bufs[], int n, uint64_t *end_ns,
              size_t *free_end, int rc);
/* The --verbose line tests read to check that a run freed what it took:
 * "<prog>[pid]: free_mem start=N iter=N end=N total=N" (bytes). */
void wl_report_mem(const char *prog, size_t start, size_t iter, size_t end, size_t total);

/* ---- presets of salus-train -------------------------------------------- */

/* One model's training job, as figures the options can express. */
typedef struct wl_preset {
    const char *name;
    double iter_ms;          /* GPU time per iteration */
    long long kernels;       /* kernel launches per iteration */
    uint64_t mem;            /* persistent: weights + optimizer state */
    uint64_t iter_mem;       /* per iteration: activations, workspace */
    double host_ms;          /* host time per iteration (data loading) */
    long long iterations;    /* the job's length */
    const char *source;      /* where the figures come from */
} wl_preset_t;
const wl_preset_t *wl_preset_find(const char *name);
void wl_preset_list(FILE *f);

/* ---- the result line ---------------------------------------------------- */

/* The fields every result starts with: program, name, pid. */
void wl_json_head(wl_json_t *j, const char *prog, const char *name);
/* The fields every result ends with: ok, and error or interrupted. */
void wl_json_tail(wl_json_t *j, int rc, int interrupted);

/* ---- a run -------------------------------------------------------------- */

/* What every run holds; a program's run embeds it. */
typedef struct wl_run {
    const char *prog;
    const wl_common_t *c;
    wl_gpu_t g;
    wl_buf_t mem;             /* --mem, held from set-up to the end */
    uint64_t start_ns, end_ns, deadline_ns;     /* deadline: --seconds, 0: none */
    uint64_t oom_retries;
    size_t free_start, free_iter, free_end, total;  /* device memory, for --verbose */
    int interrupted;
} wl_run_t;

/* Start the clock: start_ns and the --seconds deadline. */
void wl_run_begin(wl_run_t *r, const char *prog, const wl_common_t *c);
/* Signal handlers, wl_gpu_open, free memory at start, --mem. */
int wl_run_setup(wl_run_t *r);
/* After the loop, keeping rc if it is a failure (WL_ESTOP is none): note
 * whether a signal stopped the run, then wl_finish over bufs (every buffer
 * still held, --mem's included).  Then the program frees its sequences and
 * calls wl_run_close, which closes the GPU. */
int wl_run_finish(wl_run_t *r, wl_buf_t *const bufs[], int n, int rc);
int wl_run_close(wl_run_t *r, int rc);
/* The result line's first fields: program name pid, count_key, jct_s
 * start_ns end_ns (end_ns is taken now if the run did not set it). */
void wl_run_json_begin(wl_run_t *r, wl_json_t *j, const char *count_key, long long count);
/* Its last fields (launches syncs oom_retries, then wl_json_tail), the line
 * on stdout, the error on stderr, and the --verbose memory line. */
void wl_run_json_end(wl_run_t *r, wl_json_t *j, int rc);

#endif /* SALUS_WL_H */
