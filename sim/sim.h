/*
 * sim.h - the internal interface of simgpu, the simulated libcuda.so.1.
 *
 * simgpu behaves like one or more GPUs shared by several processes: device
 * state (capacity, memory in use, the compute engine's timeline, one slot
 * per process) lives in POSIX shared memory; everything else (contexts,
 * streams, events, modules, allocations) is process-local, as in the real
 * driver.  Every file of sim/ includes this header; besides it, the files
 * of graphs include graph_int.h (graph.c, graphnode.c, graphmem.c,
 * capture.c), and the loader's files and callers sim/loader/loader.h.
 *
 * Sections: constants; the shared state; process-local objects and their
 * handles; the range registry (device pointers); the time model; the entry
 * points each file offers to the others.
 *
 * Locks, in the order they are taken:
 *   sim_p.lock              process mutex: every process-local object below;
 *   sim_shared_t.lock       robust, process-shared: slots and accounting;
 *   sim_engine_t.lock       robust, process-shared: one device's engine.
 * Nothing sleeps (synchronize, host callbacks) while holding any of them.
 */
#ifndef SIM_SIM_H
#define SIM_SIM_H

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaProfiler.h>
#include "cu_procmap.h"
#include "cu_procmap_gfx.h"
#include "sim_errors.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- constants ---------------------------------------------------------- */

#define SIM_MAX_DEVICES      8
#define SIM_MAX_PROCS        256
/* Every allocation is charged round_up(size, SIM_GRANULE) bytes; VMM
 * handles are multiples of SIM_VMM_GRANULE and charged exactly. */
#define SIM_GRANULE          512u
#define SIM_VMM_GRANULE      (2ull << 20)
#define SIM_DEFAULT_MEMORY   (16ull << 30)
/* Device memory a context takes (SIMGPU_CTX_MEMORY): a real one takes a few
 * hundred MiB (its local memory, printf FIFO, malloc heap, code). */
#define SIM_DEFAULT_CTX_MEMORY (512ull << 20)
#define SIM_DEFAULT_KERNEL_NS 10000ull
/* Launches a stream holds unfinished before cuLaunchKernel blocks the host
 * (SIMGPU_QUEUE_DEPTH): the driver's push buffer holds about 1024. */
#define SIM_QUEUE_MAX 1024u
/* The shape model's fixed part of a kernel (SIMGPU_KERNEL_LAUNCH_NS): an
 * empty kernel on a GPU of this class takes a few microseconds. */
#define SIM_DEFAULT_LAUNCH_NS 2000ull
#define SIM_DEFAULT_SWITCH_US 100ull
#define SIM_DEFAULT_SYNC_SPIN_US 200ull   /* a synchronize spins this long before the end */
/* Copy bandwidths in bytes per ns (= GB/s). */
#define SIM_BW_HOST          25ull     /* host <-> device, PCIe 5 x16: the default
                                          of SIMGPU_PCIE_GBPS (sim_p.pcie_bw) */
#define SIM_BW_DEVICE        1500ull   /* device <-> device (HBM3) */
#define SIM_BW_PIN           6ull      /* host memory pinned (cuMemHostAlloc,
                                          cuMemHostRegister): a few GB/s on real
                                          hosts; SIMGPU_PIN_GBPS (sim_p.pin_bw) */
#define SIM_CTX_STACK        32        /* context stack depth per thread */
/* The devices' architecture, sm_90: what images must be built for. */
#define SIM_ARCH             90
/* Texture limits of the device (an H100's), for attributes and checks. */
#define SIM_TEX_ALIGN        512
#define SIM_TEX_PITCH_ALIGN  32
#define SIM_TEX1D_LINEAR_MAX (1u << 28)  /* elements */
#define SIM_TEX2D_LINEAR_W   131072
#define SIM_TEX2D_LINEAR_H   65000
#define SIM_TEX2D_LINEAR_PITCH 2097120   /* bytes */
/* Device code: the largest image read; what a cubin (ELF, EM_CUDA) marks
 * kernels and records their attributes with (.nv.info sections: format,
 * attribute, then a 16-bit value or the size of the data that follows). */
#define SIM_IMAGE_MAX        (1ull << 30)
#define SIM_STO_CUDA_ENTRY   0x10       /* st_other bit of kernel entries */
#define SIM_SHT_CUDA_INFO    0x70000000u
#define SIM_EIFMT_HVAL       0x03
#define SIM_EIFMT_SVAL       0x04
#define SIM_EIATTR_FRAME_SIZE 0x11
#define SIM_EIATTR_KPARAM_INFO 0x17
#define SIM_EIATTR_CBANK_PARAM_SIZE 0x19
#define SIM_EIATTR_REGCOUNT  0x2f
#define SIM_FATBIN_MAGIC     0xba55ed50u
#define SIM_FATBIN_WRAPPER_MAGIC 0x466243b1u

#define SIM_STATE_MAGIC      0x3147504d49535953ull   /* "SYSIMPG1" */
#define SIM_STATE_VERSION    3u

/* Helpers of entry points that an older cuda.h may not declare. */
#define SIM_MAYBE_UNUSED __attribute__((unused))

static inline uint64_t sim_round_up(uint64_t x, uint64_t g)
{
    return (x + g - 1) / g * g;
}
static inline uint64_t sim_max(uint64_t a, uint64_t b) { return a > b ? a : b; }
/* A cubin for sm_<arch> runs on the device: same major version, minor no newer. */
static inline int sim_arch_runs_cubin(unsigned arch)
{
    return arch / 10 == SIM_ARCH / 10 && arch % 10 <= SIM_ARCH % 10;
}
static inline uint64_t sim_min(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* ---- a device's identity ------------------------------------------------
 * What cuDeviceGet* (device.c) and simgpu's NVML (sim/nvml) both say of
 * device dev of the state named `state`: one definition, so that the two
 * views of a device can never disagree.  The UUID is stable and distinct
 * per device, shaped as a random (version 4) one; the state's name is part
 * of the seed: two states are two machines' GPUs, so two tables on two
 * states never look like two tables on one GPU. */
#define SIM_DEVICE_NAME      "NVIDIA H100 (simgpu)"
#define SIM_PCI_BUS(dev)     (0x18 + (dev))
static inline void sim_device_uuid_of(const char *state, int dev, char out[16])
{
    uint64_t h = 0xcbf29ce484222325ull;
    const char *seeds[2] = { "simgpu", state };
    for (int s = 0; s < 2; s++)
        for (const char *p = seeds[s]; *p; p++)
            h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    for (int i = 0; i < 16; i++) {
        h = (h ^ (unsigned)(dev + 1) ^ (unsigned)i) * 0x100000001b3ull;
        out[i] = (char)(h >> 56);
    }
    out[6] = (char)((out[6] & 0x0f) | 0x40);
    out[8] = (char)((out[8] & 0x3f) | 0x80);
}

/* ---- shared state (state.c) ---------------------------------------------
 * One per SIMGPU_STATE name, created by the first process, attached by the
 * others.  Everything a peer reads from it is bounds-checked first.
 *
 * Invariants (under lock):
 *   used[d] == sum over slots s with s.live of s.used[d]
 *   used[d] <= capacity
 *   pinned == sum over slots s with s.live of s.pinned  <=  pin_limit (when set)
 * A slot is live while its process holds the record lock on the byte at
 * sim_slot_lock_offset(i) of the state's shm fd; the kernel drops that lock
 * when the process dies, which is how peers detect death (PID-reuse proof).
 */
typedef struct sim_slot {
    uint32_t live;                      /* 1: claimed by pid */
    int32_t  pid;
    uint64_t used[SIM_MAX_DEVICES];     /* bytes charged by the process */
    uint64_t pinned;                    /* host bytes the process pinned */
} sim_slot_t;

/* The compute engine of one device, serialized across processes.
 * Invariant (under lock): free_ns == max over slots of tail[slot], except
 * that a cut (below) lowers both together.  A dead process's queued work is
 * gone with its contexts, as on a real GPU: the first submission that would
 * wait behind a dead slot's tail cuts it (tail[slot] = 0, free_ns the
 * latest live tail) and writes a "cut" trace line for the dead pid. */
typedef struct sim_engine {
    pthread_mutex_t lock;               /* robust, process-shared */
    uint64_t free_ns;                   /* end of the last kernel submitted */
    uint64_t last_ctx;                  /* context id of that kernel, 0: none */
    uint64_t kernels;                   /* kernels run, for information */
    uint64_t tail[SIM_MAX_PROCS];       /* end of each slot's last kernel here */
    /* Kernel time submitted here, in all and by each slot, counted when
     * submitted (what has not run yet ends by free_ns, by tail[slot]):
     * simgpu's NVML reads utilization from them (sim/nvml). */
    uint64_t busy_ns;
    uint64_t slot_busy_ns[SIM_MAX_PROCS];
} sim_engine_t;

typedef struct sim_shared {
    uint64_t magic;                     /* SIM_STATE_MAGIC, written last */
    uint32_t version;                   /* SIM_STATE_VERSION */
    uint32_t size;                      /* sizeof(sim_shared_t) */
    uint32_t ndevices;                  /* 1..SIM_MAX_DEVICES, fixed */
    int32_t  creator;                   /* pid of the creator */
    uint64_t capacity;                  /* bytes per device, fixed */
    uint64_t switch_ns;                 /* context-switch penalty, fixed */
    uint64_t pin_limit;                 /* SIMGPU_PIN_LIMIT: host bytes all processes
                                           may pin together, 0 unbounded; fixed */
    pthread_mutex_t lock;               /* robust, process-shared */
    _Atomic uint64_t next_ctx_id;       /* context ids, unique in the state */
    uint64_t used[SIM_MAX_DEVICES];     /* bytes charged, all processes */
    uint64_t pinned;                    /* host bytes pinned, all processes */
    sim_engine_t engine[SIM_MAX_DEVICES];
    sim_slot_t slot[SIM_MAX_PROCS];
} sim_shared_t;

/* ---- process-local objects ---------------------------------------------
 * Handles given to the application (CUcontext, CUstream, CUevent, CUmodule,
 * CUfunction, ...) are not pointers: they encode kind, index and
 * generation, so that a stale or forged handle is refused by sim_obj_get()
 * without ever being dereferenced.  All objects are guarded by sim_p.lock.
 */
typedef enum sim_kind {
    SIM_K_NONE = 0,
    SIM_K_CTX, SIM_K_STREAM, SIM_K_EVENT, SIM_K_MODULE, SIM_K_FUNC,
    SIM_K_POOL, SIM_K_MEMHANDLE, SIM_K_ARRAY, SIM_K_GRAPH, SIM_K_GEXEC,
    SIM_K_GNODE, SIM_K_LINK, SIM_K_TEX, SIM_K_SURF,
    SIM_K_COUNT
} sim_kind_t;

typedef struct sim_ctx sim_ctx_t;
typedef struct sim_stream sim_stream_t;
typedef struct sim_module sim_module_t;
typedef struct sim_func sim_func_t;
typedef struct sim_pool sim_pool_t;
typedef struct sim_graph sim_graph_t;
typedef struct sim_node sim_node_t;
typedef struct sim_cls sim_cls_t;

/* A context.  Time invariants (tails only grow):
 *   btail >= tail of every blocking stream of the context (per-thread ones
 *           included), which legacy-stream work waits for;
 *   tail  >= tail of every stream of the context. */
struct sim_ctx {
    uint64_t handle;
    uint64_t id;                        /* unique across processes */
    int device;
    unsigned flags;
    int primary;                        /* the device's primary context */
    int active;                         /* primary: retained, not reset */
    int refcount;                       /* primary: retain count */
    int destroyed;
    sim_stream_t *legacy;               /* the legacy default stream */
    uint64_t btail, tail;
    int host_pending;                   /* host callbacks not yet run */
    int memwaits;                       /* streams with an unsettled wait (memop.c) */
    size_t limit[16];
    int cache_config, shmem_config;
    uint64_t charged;                   /* device memory the context itself takes */
    int rt_held;                        /* primary: the runtime's retain (export.c) is held */
    sim_cls_t *cls;                     /* context-local storage (cls.c) */
};

enum { SIM_S_USER = 0, SIM_S_LEGACY, SIM_S_PER_THREAD };

struct sim_stream {
    uint64_t handle;                    /* 0 for legacy / per-thread */
    sim_ctx_t *ctx;
    uint64_t id;                        /* 0: legacy; unique in the process */
    int kind;                           /* SIM_S_* */
    unsigned flags;                     /* CU_STREAM_NON_BLOCKING */
    int priority;
    uint64_t tail;                      /* end of the last work enqueued */
    int host_pending;                   /* host callbacks not yet run */
    int dead;                           /* destroyed, freed when host_pending == 0 */
    CUaccessPolicyWindow window;        /* stream attributes, stored */
    int sync_policy;
    sim_graph_t *capture;               /* non-NULL while capturing */
    int capture_mode;                   /* CU_STREAM_CAPTURE_MODE_* of the begin */
    int capture_invalid;                /* an illegal call invalidated the capture */
    int capture_to_graph;               /* the graph is the caller's (BeginCaptureToGraph) */
    uint64_t capture_id;
    uint64_t capture_thread;            /* the thread that began it (pthread_self) */
    /* An unsettled cuStreamWaitValue (memop.c): from mw_at on, until the
     * word at mw_addr meets mw_flags' condition against mw_value. */
    int mw_on, mw_64;
    unsigned mw_flags;
    uint64_t mw_at, mw_value;
    CUdeviceptr mw_addr;
    /* The ends of its last SIM_QUEUE_MAX kernels (a ring; qn launched in
     * all): a launch blocks while the one SIMGPU_QUEUE_DEPTH back runs. */
    uint64_t qend[SIM_QUEUE_MAX];
    uint64_t qn;
};

typedef struct sim_event {
    uint64_t handle;
    sim_ctx_t *ctx;
    unsigned flags;
    int recorded;
    uint64_t time;                      /* when the recorded work completes */
    struct sim_ipcev *ipc;              /* shared by cuIpcGetEventHandle (ipc.c) */
} sim_event_t;

typedef struct sim_param {
    uint32_t offset, size;
} sim_param_t;

enum { SIM_EMU_NONE = 0, SIM_EMU_SPIN, SIM_EMU_FILL, SIM_EMU_AXPY };

struct sim_func {
    uint64_t handle;
    sim_module_t *mod;
    char *name;
    int nparams;
    sim_param_t *params;
    uint32_t param_bytes;               /* size of the packed parameter buffer */
    int emu;                            /* SIM_EMU_* */
    int num_regs, max_threads;
    uint32_t shared_bytes, const_bytes, local_bytes;
    int max_dyn_shared, carveout, cache_config;
    int wave_known;                     /* wave_ns looked up in the table (launch.c) */
    uint64_t wave_ns;                   /* the shape model's time of one wave */
};

/* A module-scope variable (__device__, __constant__): found in the image,
 * given memory when its module is loaded into a context. */
typedef struct sim_ginst sim_ginst_t;   /* a library's variable in one context */
typedef struct sim_global {
    char *name;
    size_t size;
    void *init;                         /* initial bytes; NULL: zeros */
    struct sim_range *r;                /* its memory, once loaded */
    sim_ginst_t *inst;                  /* a library's: its memory in each context */
} sim_global_t;

struct sim_module {
    uint64_t handle;
    sim_ctx_t *ctx;                     /* NULL for a library */
    int is_library;
    int nocode;                         /* a library with no code for the device (lazy) */
    int nfuncs;
    sim_func_t **funcs;
    int nglobals;
    sim_global_t *globals;
    uint64_t image_bytes;               /* the device code loaded (image.c) */
    uint64_t charged;                   /* charged to ctx's device while loaded */
};

/* ---- the range registry (object.c) -------------------------------------
 * Every address range the device may touch: device allocations, managed,
 * pool blocks, pinned and registered host memory, VMM mappings.  Ranges never
 * overlap.  A device pointer is valid for n bytes when [p, p+n) is covered by
 * contiguous accessible ranges (sim_range_check).
 */
enum {
    SIM_R_DEVICE = 1, SIM_R_MANAGED, SIM_R_POOL, SIM_R_HOST, SIM_R_REGISTERED,
    SIM_R_MAPPED,
    SIM_R_GLOBAL,                       /* a module's variable, not charged */
    SIM_R_GRAPH                         /* graph memory (graphmem.c) */
};

typedef struct sim_memhandle sim_memhandle_t;
/* The handle types its allocation was made with (vmm.c). */
unsigned long long sim_memhandle_types(const sim_memhandle_t *mh);

typedef struct sim_range {
    uintptr_t base;
    size_t size;
    uint64_t charged;                   /* bytes charged to the device */
    uint64_t pinned;                    /* SIM_R_HOST, SIM_R_REGISTERED: bytes counted
                                           in the state's pinned (sim_pin) */
    void *raw;                          /* what to free / unmap */
    size_t raw_size;
    int kind;                           /* SIM_R_* */
    int mmapped;                        /* raw came from mmap */
    int prot;                           /* SIM_R_MAPPED: PROT_* granted */
    int device;
    unsigned flags;                     /* host alloc / register flags */
    sim_ctx_t *ctx;
    sim_pool_t *pool;                   /* SIM_R_POOL */
    sim_memhandle_t *mh;                /* SIM_R_MAPPED */
    size_t offset;                      /* SIM_R_MAPPED: where in mh's memfd */
    struct sim_ipcmem *ipc;             /* SIM_R_DEVICE shared by legacy IPC (ipc.c) */
    struct sim_range *prev, *next;      /* list of all ranges */
    struct sim_range *free_next;        /* SIM_R_POOL: in the pool's cache */
} sim_range_t;

/* ---- the process ------------------------------------------------------- */

typedef struct sim_process {
    pthread_mutex_t lock;               /* guards all process-local objects */
    pthread_cond_t cond;                /* host callbacks done (with lock) */
    atomic_int initialized;             /* cuInit succeeded in this process */
    CUresult init_error;                /* sticky cuInit failure */
    uint64_t epoch;                     /* bumped by fork(): old TLS is void */
    sim_shared_t *shared;
    int shm_fd;
    int slot;                           /* our slot, -1 before cuInit */
    int pid;                            /* getpid() at cuInit, for the trace */
    int ndevices;
    int nvisible;                       /* CUDA_VISIBLE_DEVICES: ordinals */
    int visible[SIM_MAX_DEVICES];       /* ordinal -> device (the CUdevice) */
    uint64_t capacity;
    uint64_t kernel_ns;                 /* SIMGPU_KERNEL_NS */
    uint64_t wave_ns;                   /* SIMGPU_KERNEL_WAVE_NS: 0, the fixed model */
    uint64_t launch_ns;                 /* SIMGPU_KERNEL_LAUNCH_NS */
    uint64_t queue_depth;               /* SIMGPU_QUEUE_DEPTH, 0: unbounded */
    struct sim_kernel_rule *rules;      /* SIMGPU_KERNEL_TABLE, read at cuInit */
    int nrules;
    uint64_t pcie_bw;                   /* SIMGPU_PCIE_GBPS: host <-> device, bytes/ns */
    uint64_t pin_bw;                    /* SIMGPU_PIN_GBPS: host memory pinned, bytes/ns
                                           (0: pinning costs what the pages cost) */
    uint64_t ctx_memory;                /* SIMGPU_CTX_MEMORY: per context */
    int eager;                          /* CUDA_MODULE_LOADING=EAGER (module.c) */
    int trace_fd;                       /* SIMGPU_TRACE, -1 if off */
    uint64_t next_stream_id;
    sim_ctx_t *primary[SIM_MAX_DEVICES];
    sim_pool_t *default_pool[SIM_MAX_DEVICES];
    sim_pool_t *current_pool[SIM_MAX_DEVICES];
    sim_range_t *ranges;                /* list of all ranges */
} sim_process_t;

extern sim_process_t sim_p;

#define SIM_LOCK()   pthread_mutex_lock(&sim_p.lock)
#define SIM_UNLOCK() pthread_mutex_unlock(&sim_p.lock)
#define SIM_CHECK_INIT() do { \
        if (!atomic_load_explicit(&sim_p.initialized, memory_order_acquire)) \
            return CUDA_ERROR_NOT_INITIALIZED; \
    } while (0)

/* ---- state.c: shared state, liveness, accounting ----------------------- */
CUresult sim_init(unsigned flags);
/* Charge bytes to device dev for this process: CUDA_ERROR_OUT_OF_MEMORY if
 * they don't fit even after reclaiming the slots of dead processes. */
CUresult sim_charge(int dev, uint64_t bytes);
void sim_uncharge(int dev, uint64_t bytes);
/* Host memory pinned and unpinned, counted against SIMGPU_PIN_LIMIT for all
 * processes of the state (CUDA_ERROR_OUT_OF_MEMORY past it). */
CUresult sim_pin(uint64_t bytes);
void sim_unpin(uint64_t bytes);
/* Free bytes of device dev (capacity - used), after reclaiming the dead. */
uint64_t sim_free_bytes(int dev);
/* The engine: run a kernel of dur ns on dev for context ctx_id, submitted at
 * submit, not before ready; returns its start (after any context-switch
 * penalty) and end. */
void sim_engine_run(int dev, uint64_t ctx_id, uint64_t submit, uint64_t ready, uint64_t dur,
                    uint64_t *start, uint64_t *end);
/* Cut the unfinished work of dead processes on dev (the copy path, which
 * does not go through sim_engine_run). */
void sim_engine_reap(int dev);
/* This process's context ctx_id on dev is gone (a primary context reset or
 * its last release): its work ends now; rest is when the process's other
 * work on dev ends (0: none). */
void sim_engine_cut_own(int dev, uint64_t ctx_id, uint64_t rest);
uint64_t sim_new_ctx_id(void);
void sim_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The number in environment variable name, from 0 to max; def when it is
 * unset or not such a number (said with sim_note).  *set (if given): 1
 * when the variable gave the value. */
uint64_t sim_env_u64(const char *name, uint64_t def, uint64_t max, int *set);
/* The shared state's name (SIMGPU_STATE, else /simgpu-<uid>) once attached. */
const char *sim_state_name(void);
int sim_log_enabled(void);

/* ---- object.c: handles and ranges -------------------------------------- */
uint64_t sim_obj_new(sim_kind_t kind, void *obj);   /* 0 if out of memory */
void *sim_obj_get(uint64_t handle, sim_kind_t kind);
void sim_obj_free(uint64_t handle);
/* Call fn on every live object of a kind; fn may free that object. */
void sim_obj_foreach(sim_kind_t kind, void (*fn)(void *obj, void *arg), void *arg);
void sim_obj_reset_after_fork(void);

int sim_range_add(sim_range_t *r);                  /* 0, or -1 if it overlaps */
void sim_range_remove(sim_range_t *r);
sim_range_t *sim_range_find(uintptr_t addr);
/* memmove's bytes; never-written source memory leaves the destination's
 * pages unwritten (sparse.c).  Under sim_p.lock. */
void sim_move(void *dst, const void *src, size_t n);
/* memset(dst, 0, n) over simgpu's ranges, 1 MiB or more by giving whole
 * pages back (sparse.c: they read as zeros, cost no RAM). */
void sim_zero(void *dst, size_t n);
/* The memfd behind a VMM handle, or -1 (vmm.c). */
int sim_vmm_fd(const sim_memhandle_t *m);
/* Legacy IPC (ipc.c): the memfd behind a shared or imported range (-1:
 * none), whether r was imported, and the release of its share (unback). */
int sim_ipc_fd(const sim_range_t *r);
int sim_ipc_imported(const sim_range_t *r);
void sim_ipc_release(sim_range_t *r);
/* An interprocess event's state where it is shared (its own, or that of
 * the process it was opened from): load before reading e->recorded/time,
 * store after a record; release when the event goes. */
void sim_ipc_event_load(sim_event_t *e);
void sim_ipc_event_store(const sim_event_t *e);
void sim_ipc_event_release(sim_event_t *e);
/* event.c: an event by handle (its shared state loaded); a new event. */
sim_event_t *sim_event_get(CUevent h);
sim_event_t *sim_event_new(sim_ctx_t *ctx, unsigned flags);
/* sparse.c: copy into dst, which reads zeros, the pages of r ever written. */
void sim_copy_written(void *dst, const sim_range_t *r);
/* 0 if [addr, addr+len) is covered by contiguous ranges granting prot. */
int sim_range_check(uintptr_t addr, size_t len, int prot);
void sim_range_reset_after_fork(void);

/* ---- device.c ---------------------------------------------------------- */
int sim_device_valid(CUdevice dev);
/* Read CUDA_VISIBLE_DEVICES (at cuInit, under the process lock). */
void sim_read_visible(void);

/* ---- stubs.c: the graphics interop exports -------------------------------
 * Declared without parameters: their types belong to the GL, EGL and VDPAU
 * headers, and the definitions (all NOT_SUPPORTED) read no argument. */
#define SIM_GFX_DECL(base, version, per_thread, export) CUresult CUDAAPI export(void);
CU_PROCMAP_GFX(SIM_GFX_DECL)

/* ---- ctx.c ------------------------------------------------------------- */
/* The current context of the calling thread (validated), or NULL. */
sim_ctx_t *sim_ctx_current(void);
/* Current context or the error a call must return without one. */
CUresult sim_ctx_require(sim_ctx_t **out);
sim_ctx_t *sim_ctx_get(CUcontext h);                /* validated handle */
void sim_ctx_reset_tls(void);

/* The device's primary context, active, for the runtime (CUDART interface
 * slot 2): retained once for the process, again after a reset. */
CUresult sim_ctx_primary_for_runtime(CUcontext *pctx, CUdevice dev);

/* ---- export.c, cls.c, integrity.c, md2.c: the runtime's private tables --- */
enum {
    SIM_EXPORT_CUDART, SIM_EXPORT_HOOKS, SIM_EXPORT_TLS, SIM_EXPORT_CLS, SIM_EXPORT_CHECKS,
    SIM_EXPORT_INTEGRITY, SIM_EXPORT_IDENTITY, SIM_EXPORT_LT, SIM_EXPORT_CUPTI, SIM_EXPORT_COUNT
};
/* A slot nobody documents was called: CUDA_ERROR_NOT_SUPPORTED, said once
 * per slot under SIMGPU_LOG=1. */
CUresult sim_export_refuse(int table, int slot);
extern const void *const sim_cudart_table[13];
extern const void *const sim_integrity_table[3];
extern const void *const sim_cls_table[4];
/* Context-local storage: take a context's entries (under sim_p.lock), then
 * run their destructors and free them (without it: destructors call the
 * driver).  h is the context's handle, which the destructors get. */
sim_cls_t *sim_cls_take(sim_ctx_t *c);
void sim_cls_run(sim_cls_t *list, CUcontext h);
void sim_cls_drop(sim_cls_t *list);     /* free, no destructor (under the lock) */
/* Run the destructors of context h's storage, while it is still valid
 * (called without the lock, before a destroy, reset or last release). */
void sim_cls_release(CUcontext h);
/* At cuInit: the exit handler that runs what destructors are left. */
void sim_cls_init(void);

typedef struct sim_md2 {
    uint8_t x[48], c[16], buf[16], l;
    unsigned n;                         /* bytes in buf */
} sim_md2_t;
void sim_md2_init(sim_md2_t *m);
void sim_md2_update(sim_md2_t *m, const void *data, size_t len);
void sim_md2_final(sim_md2_t *m, uint8_t out[16]);
void sim_md2(const void *data, size_t len, uint8_t out[16]);
void sim_hmac_md2(const uint8_t key[16], const void *msg, size_t len, uint8_t out[16]);

/* ---- mem.c ------------------------------------------------------------- */
/* Allocate size device-visible bytes charged to dev, registered as kind. */
CUresult sim_mem_alloc(sim_ctx_t *ctx, int dev, size_t size, int kind, sim_range_t **out);
void sim_mem_release(sim_range_t *r);
void sim_mem_release_ctx(sim_ctx_t *ctx);           /* context teardown */

/* ---- exec.c / event.c: time model, streams, events, host callbacks ------ */
uint64_t sim_now(void);
void sim_sleep_until(uint64_t t);
/* Resolve a stream argument (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD or
 * a handle); ptds: NULL means the per-thread stream.  Under lock. */
CUresult sim_stream_resolve(CUstream h, int ptds, sim_stream_t **out);
/* When work newly enqueued on s may start (legacy-stream semantics). */
uint64_t sim_stream_ready(sim_stream_t *s);
/* Record that work on s ends at end. */
void sim_stream_done(sim_stream_t *s, uint64_t end);
/* Enqueue a transfer of ns on s (a copy or memset: SIM_W_*, named for the
 * trace); returns its end. */
uint64_t sim_stream_transfer(sim_stream_t *s, uint64_t ns, int kind, const char *name);
/* Wait (lock released) until the work of s (or of ctx) and its host
 * callbacks are done.  Called with lock held; returns with it held. */
void sim_stream_wait(sim_stream_t *s);
void sim_ctx_wait(sim_ctx_t *ctx);
void sim_streams_destroy_ctx(sim_ctx_t *ctx);
void sim_events_destroy_ctx(sim_ctx_t *ctx);
void sim_hostfn_reset_after_fork(void);
sim_stream_t *sim_stream_new(sim_ctx_t *ctx, int kind, unsigned flags, int prio);
void sim_exec_reset_after_fork(void);
uint64_t sim_transfer_ns(size_t bytes, uint64_t bw);

/* ---- memop.c: stream memory operations ----------------------------------- */
/* 1 when s has no unsettled wait (one look; under the lock). */
int sim_memop_settled(sim_stream_t *s);
/* Wait until s's wait (or every wait of ctx's streams) is settled, the lock
 * released between looks (called and returns with it held; s or ctx may
 * be gone after: look them up again by handle). */
void sim_memop_settle(sim_stream_t *s);
void sim_memop_settle_ctx(sim_ctx_t *ctx);
/* A stream destroyed with its wait unsettled: the wait goes with it. */
void sim_memop_drop(sim_stream_t *s);

/* ---- launch.c ---------------------------------------------------------- */
/* What a trace line describes: its "kind" field. */
enum { SIM_W_KERNEL, SIM_W_COPY, SIM_W_MEMSET };
/* One SIMGPU_TRACE line for work on s submitted by the host at submit and
 * run in [start, end); nothing when the trace is off.  Under lock. */
/* The graph launch (graph.c) whose nodes this thread is running: its
 * number in the process, from 1; 0 outside one.  sim_trace writes it as
 * "graph", so that a reader tells a graph's kernels from direct launches. */
extern __thread uint64_t sim_graph_running;
void sim_trace(const sim_stream_t *s, int kind, const char *name, uint64_t submit,
               uint64_t start, uint64_t end);
/* A "cut" line: the work of pid on dev (of context ctx_id only, unless 0)
 * submitted up to t and not finished by t ended at t (its context is gone). */
void sim_trace_cut(int pid, int dev, uint64_t ctx_id, uint64_t t);
/* Launch f with a packed parameter buffer on s (under lock). */
CUresult sim_launch_packed(sim_func_t *f, sim_stream_t *s, const unsigned grid[3],
                           const unsigned block[3], unsigned shmem,
                           const void *params, size_t param_size);
/* Blocks of `block` threads and dyn bytes of dynamic shared memory that
 * one SM holds at once (the occupancy calculator's answer). */
int sim_blocks_per_sm(const sim_func_t *f, int block, size_t dyn);

/* ---- kmodel.c ---------------------------------------------------------- */
/* The SMs of a device, which the shape model fills with waves of blocks. */
#define SIM_SMS 132
/* Read the kernel-duration settings (under lock, in cuInit). */
void sim_kernel_model_init(void);
/* How long a launch of f (not salus_spin) runs (under lock). */
uint64_t sim_kernel_duration(sim_func_t *f, const unsigned grid[3], const unsigned block[3],
                             unsigned shmem);
/* Pack kernelParams / extra into buf (cap bytes); *size is set. */
CUresult sim_pack_params(sim_func_t *f, void **kernel_params, void **extra,
                         void *buf, size_t cap, size_t *size);
/* Enqueue a host function on s (under lock). */
CUresult sim_hostfn_enqueue(sim_stream_t *s, void (*fn)(void *), void *user,
                            CUstreamCallback cb, CUstream cb_stream);

/* ---- graph.c ----------------------------------------------------------- */
/* Stream capture hooks: record work instead of running it (under lock). */
CUresult sim_capture_kernel(sim_stream_t *s, sim_func_t *f, const unsigned grid[3],
                            const unsigned block[3], unsigned shmem,
                            const void *params, size_t size);
CUresult sim_capture_memset(sim_stream_t *s, CUdeviceptr dst, size_t pitch,
                            unsigned value, unsigned elem, size_t width, size_t height);
CUresult sim_capture_memcpy(sim_stream_t *s, void *dst, const void *src, size_t bytes,
                            uint64_t bw);
CUresult sim_capture_host(sim_stream_t *s, void (*fn)(void *), void *user);
/* A stream-ordered allocation (made now, by the caller) or free recorded
 * into the capture of s as a memory node (graph.c says what a launch does
 * with them). */
CUresult sim_capture_alloc(sim_stream_t *s, CUdeviceptr d);
CUresult sim_capture_free(sim_stream_t *s, CUdeviceptr d);
/* The driver's capture rules (graph.c), under lock.  A potentially unsafe
 * call by the calling thread (cuCtxSynchronize, cuMemAlloc, cuMemFree, a
 * synchronous copy or memset, use of the legacy stream): CUDA_SUCCESS, or
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED after invalidating every capture the
 * thread's interaction mode makes it conflict with. */
CUresult sim_capture_unsafe(void);
/* A call that waits for or queries stream s (blocking: it also blocks the
 * host, as a synchronous copy): fails with UNSUPPORTED and invalidates s's
 * capture when s captures, else as sim_capture_unsafe when blocking or s is
 * the legacy stream. */
CUresult sim_capture_conflict(sim_stream_t *s, int blocking);
/* A stream going away leaves the captures in progress. */
void sim_capture_drop(sim_stream_t *s);

/* ---- copy.c ------------------------------------------------------------ */
/* A copy's trace name from its sides: "HtoD", "DtoH", "DtoD" or "HtoH". */
const char *sim_copy_name(int dst_device, int src_device);
/* Memset of width elements of elem bytes in height rows (under lock). */
CUresult sim_memset_do(CUdeviceptr dst, size_t pitch, unsigned value, unsigned elem,
                       size_t width, size_t height);

/* ---- pool.c / array.c / vmm.c ------------------------------------------ */
void sim_pools_trim_sync(void);                     /* after a synchronize */
/* The pool's handle (its CUmemoryPool). */
uint64_t sim_pool_handle(const sim_pool_t *p);
void sim_pool_release_block(sim_range_t *r);        /* from cuMemFree */
void sim_arrays_destroy_ctx(sim_ctx_t *ctx);
void *sim_array_data(CUarray a, size_t *row_bytes, size_t *height, size_t *depth);
int sim_array_desc(CUarray a, CUDA_ARRAY3D_DESCRIPTOR *d);   /* under lock; -1: bad */
size_t sim_format_size(CUarray_format f);           /* 0: not modelled */
void sim_vmm_reset_after_fork(void);

/* ---- graphmem.c ------------------------------------------------------------ */
typedef struct sim_gmem sim_gmem_t;
void sim_gmem_ref(sim_gmem_t *g);                   /* a node holds it (under lock) */
void sim_gmem_unref(sim_gmem_t *g);
void sim_gmem_reset_after_fork(void);

#endif /* SIM_SIM_H */
