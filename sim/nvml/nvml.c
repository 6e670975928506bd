/*
 * nvml.c - simgpu's NVML: a libnvidia-ml.so.1 that answers from the same
 * shared state as simgpu's libcuda.so.1, so that NVML's view of a simulated
 * GPU is the driver's: the same devices (sim.h's identity: UUID, name, PCI
 * bus id), the same memory (capacity, what each live process holds, its
 * contexts' memory included), the processes that hold memory there, and
 * utilization from the engine's kernel time over the last sample period.
 *
 * Divided into: the state (attached read-only, on nvmlInit); handles and
 * errors; system and device identity; memory; processes; utilization.
 *
 * What it does not model answers as a real NVML does for a query the device
 * does not support: NVML_ERROR_NOT_SUPPORTED (temperature, power, clocks,
 * fans, ECC).  A function it does not export is, to pynvml,
 * NVML_ERROR_FUNCTION_NOT_FOUND, as with an older driver.
 *
 * The state is opened once per process and its fd kept for the process's
 * life, nvmlShutdown included: simgpu's liveness is a record lock on that
 * same file, which closing any fd of it in this process would drop.  Read
 * without the state's lock (a read-only mapping cannot take it): counters
 * are aligned 64-bit words, each read once; a slot counts while its owner
 * holds its record lock (F_GETLK), as simgpu's own reclaim decides.
 *
 * Locking: init_lock guards the attach, the init count and the samples of
 * utilization (below); everything else reads the mapping.
 */
#include "nvml/nvml_int.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


/* ---- the state ----------------------------------------------------------- */

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
const sim_shared_t *state;              /* read-only mapping, kept for life */
static int state_fd = -1;
static char state_name[NAME_MAX];
int init_count;                         /* nvmlInit less nvmlShutdown */

static void note(const char *fmt, const char *arg)
{
    fprintf(stderr, "simgpu-nvml[%d]: ", (int)getpid());
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
}

/* simgpu's name for the state (state.c's pick_name): SIMGPU_STATE, else
 * /simgpu-<uid>. */
static int pick_name(void)
{
    const char *v = getenv("SIMGPU_STATE");
    if (v && *v) {
        if (v[0] != '/' || strchr(v + 1, '/') || strlen(v) < 2 || strlen(v) > 200) {
            note("SIMGPU_STATE=%s is not a shared-memory name like /simgpu-test", v);
            return -1;
        }
        snprintf(state_name, sizeof state_name, "%s", v);
    } else {
        snprintf(state_name, sizeof state_name, "/simgpu-%u", (unsigned)getuid());
    }
    return 0;
}

/* Under init_lock. */
static nvmlReturn_t attach_locked(void)
{
    if (state)
        return NVML_SUCCESS;
    if (pick_name() != 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    int fd = shm_open(state_name, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) {
        /* No simgpu process has made the state: the "driver" is not there. */
        note("no simgpu state %s: start a CUDA program on simgpu first "
             "(NVML_ERROR_DRIVER_NOT_LOADED)", state_name);
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    struct stat st;
    const sim_shared_t *s = MAP_FAILED;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof *s)
        s = mmap(NULL, sizeof *s, PROT_READ, MAP_SHARED, fd, 0);
    if (s == MAP_FAILED || s->magic != SIM_STATE_MAGIC || s->version != SIM_STATE_VERSION ||
        s->size != sizeof *s || s->ndevices < 1 || s->ndevices > SIM_MAX_DEVICES) {
        note("state %s is not a simgpu state of this version: remove it or set "
             "SIMGPU_STATE to another name (NVML_ERROR_LIB_RM_VERSION_MISMATCH)", state_name);
        if (s != MAP_FAILED)
            munmap((void *)s, sizeof *s);
        close(fd);
        return NVML_ERROR_LIB_RM_VERSION_MISMATCH;
    }
    state_fd = fd;
    __atomic_store_n(&state, s, __ATOMIC_RELEASE);
    return NVML_SUCCESS;
}

static uint64_t load64(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* Slot i's process is alive: it holds the record lock on its slot's first
 * byte (simgpu's state.c).  A pid reused by this process after the slot's
 * owner died would be taken for alive: simgpu's own reclaim frees such a
 * slot at its next lock. */
static int slot_alive(int i)
{
    if (!__atomic_load_n(&state->slot[i].live, __ATOMIC_ACQUIRE))
        return 0;
    /* F_GETLK never reports the caller's own locks: this process's slot,
     * when simgpu's libcuda runs here too, is alive by being asked. */
    if (__atomic_load_n(&state->slot[i].pid, __ATOMIC_RELAXED) == (int32_t)getpid())
        return 1;
    struct flock fl = {
        .l_type = F_WRLCK, .l_whence = SEEK_SET,
        .l_start = (off_t)(offsetof(sim_shared_t, slot) + (size_t)i * sizeof(sim_slot_t)),
        .l_len = 1,
    };
    if (fcntl(state_fd, F_GETLK, &fl) < 0)
        return 1;
    return fl.l_type != F_UNLCK;
}

/* What the live processes hold on device d, contexts included. */
static uint64_t device_used(int d)
{
    uint64_t used = 0;
    for (int i = 0; i < SIM_MAX_PROCS; i++)
        if (slot_alive(i))
            used += load64(&state->slot[i].used[d]);
    return sim_min(used, state->capacity);
}

/* ---- handles and errors ---------------------------------------------------
 * (nvml_int.h: a handle points into devs[]; dev_index refuses the rest.) */

struct nvmlDevice_st devs[SIM_MAX_DEVICES] = {
    { 0 }, { 1 }, { 2 }, { 3 }, { 4 }, { 5 }, { 6 }, { 7 },
};

int dev_index(nvmlDevice_t h)
{
    uintptr_t p = (uintptr_t)h, base = (uintptr_t)devs;
    if (p < base || p >= base + sizeof devs || (p - base) % sizeof devs[0])
        return -1;
    int d = (int)((p - base) / sizeof devs[0]);
    return d < (int)state->ndevices ? d : -1;
}

static nvmlReturn_t init(void)
{
    pthread_mutex_lock(&init_lock);
    nvmlReturn_t rc = attach_locked();
    if (rc == NVML_SUCCESS)
        __atomic_add_fetch(&init_count, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&init_lock);
    return rc;
}

EXPORT nvmlReturn_t nvmlInit_v2(void) { return init(); }
EXPORT nvmlReturn_t nvmlInit(void) { return init(); }
EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags;
    return init();
}

EXPORT nvmlReturn_t nvmlShutdown(void)
{
    pthread_mutex_lock(&init_lock);
    nvmlReturn_t rc = init_count > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
    if (init_count > 0)
        __atomic_sub_fetch(&init_count, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&init_lock);
    return rc;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t rc)
{
    switch (rc) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

/* ---- system and device identity --------------------------------------------- */

static nvmlReturn_t copy_text(char *out, unsigned int len, const char *text)
{
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(text) + 1 > len)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, text, strlen(text) + 1);
    return NVML_SUCCESS;
}

/* A driver's version is dotted numbers, "<major>.<minor>.<patch>" (580.65.06
 * for the first CUDA 13.0 driver, NVML's nvmlSystemGetDriverVersion); XLA
 * parses each field as a number and, failing that, takes the driver for
 * 0.0.0 (no r545+ features).  580 is the branch that CUDA 13.0, the
 * version cuDriverGetVersion reports, requires; simgpu's own name is in the
 * devices' names. */
EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int len)
{
    CHECK_INIT();
    return copy_text(version, len, "580.00.00");
}

EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int len)
{
    CHECK_INIT();
    return copy_text(version, len, "13.580.00");
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version)
{
    CHECK_INIT();
    if (!version)
        return NVML_ERROR_INVALID_ARGUMENT;
    *version = CUDA_VERSION;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version)
{
    return nvmlSystemGetCudaDriverVersion(version);
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    CHECK_INIT();
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = state->ndevices;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *count)
{
    return nvmlDeviceGetCount_v2(count);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    CHECK_INIT();
    if (!device || index >= state->ndevices)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devs[index];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    CHECK_DEV(device, d);
    if (!index)
        return NVML_ERROR_INVALID_ARGUMENT;
    *index = (unsigned)d;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor)
{
    return nvmlDeviceGetIndex(device, minor);
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int len)
{
    CHECK_DEV(device, d);
    return copy_text(name, len, SIM_DEVICE_NAME);
}

/* NVML's form of a UUID: "GPU-" and the 16 bytes as 8-4-4-4-12 hex digits. */
static void uuid_text(int d, char out[NVML_DEVICE_UUID_BUFFER_SIZE])
{
    unsigned char b[16];
    sim_device_uuid_of(state_name, d, (char *)b);
    snprintf(out, NVML_DEVICE_UUID_BUFFER_SIZE,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
             b[13], b[14], b[15]);
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int len)
{
    CHECK_DEV(device, d);
    char text[NVML_DEVICE_UUID_BUFFER_SIZE];
    uuid_text(d, text);
    return copy_text(uuid, len, text);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    CHECK_INIT();
    if (!uuid || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned d = 0; d < state->ndevices; d++) {
        char text[NVML_DEVICE_UUID_BUFFER_SIZE];
        uuid_text((int)d, text);
        if (strcasecmp(text, uuid) == 0) {
            *device = &devs[d];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    CHECK_DEV(device, d);
    if (!pci)
        return NVML_ERROR_INVALID_ARGUMENT;
    memset(pci, 0, sizeof *pci);
    pci->domain = 0;
    pci->bus = (unsigned)SIM_PCI_BUS(d);
    pci->device = 0;
    pci->pciDeviceId = 0x233010de;     /* an H100's device id, NVIDIA's vendor id */
    /* cuDeviceGetPCIBusId's text, in NVML's longer form */
    unsigned bus = (unsigned)SIM_PCI_BUS(d) & 0xff;
    snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", bus);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02X:00.0", bus);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    return nvmlDeviceGetPciInfo_v3(device, pci);
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    return nvmlDeviceGetPciInfo_v3(device, pci);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *id, nvmlDevice_t *device)
{
    CHECK_INIT();
    unsigned domain, bus, slot, fn;
    if (!id || !device || sscanf(id, "%x:%x:%x.%x", &domain, &bus, &slot, &fn) != 4)
        return NVML_ERROR_INVALID_ARGUMENT;
    int d = (int)bus - SIM_PCI_BUS(0);
    if (domain || slot || fn || d < 0 || d >= (int)state->ndevices)
        return NVML_ERROR_NOT_FOUND;
    *device = &devs[d];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *id, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByPciBusId_v2(id, device);
}

/* What simgpu does not model: the answer of a device without the sensor. */
UNSUPPORTED(nvmlDeviceGetTemperature, nvmlTemperatureSensors_t s U_, unsigned int *t U_)
UNSUPPORTED(nvmlDeviceGetPowerUsage, unsigned int *mw U_)
UNSUPPORTED(nvmlDeviceGetEnforcedPowerLimit, unsigned int *mw U_)
UNSUPPORTED(nvmlDeviceGetFanSpeed, unsigned int *pct U_)
UNSUPPORTED(nvmlDeviceGetClockInfo, nvmlClockType_t type U_, unsigned int *mhz U_)
UNSUPPORTED(nvmlDeviceGetBAR1MemoryInfo, nvmlBAR1Memory_t *bar1 U_)
/* ---- memory ------------------------------------------------------------------ */

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    CHECK_DEV(device, d);
    if (!memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    uint64_t used = device_used(d);
    memory->total = state->capacity;
    memory->used = used;
    memory->free = state->capacity - used;
    return NVML_SUCCESS;
}

/* simgpu reserves nothing for the driver: reserved is 0. */
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    CHECK_DEV(device, d);
    if (!memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    uint64_t used = device_used(d);
    memory->total = state->capacity;
    memory->reserved = 0;
    memory->used = used;
    memory->free = state->capacity - used;
    return NVML_SUCCESS;
}

/* ---- processes -----------------------------------------------------------------
 * A process is on a device while it holds memory there (a context takes
 * SIMGPU_CTX_MEMORY): the live slots with used[d] > 0, in slot order. */

typedef struct proc_row {
    unsigned pid;
    uint64_t used;
} proc_row_t;

static int procs_of(int d, proc_row_t *rows)
{
    int n = 0;
    for (int i = 0; i < SIM_MAX_PROCS; i++) {
        uint64_t used = load64(&state->slot[i].used[d]);
        if (used && slot_alive(i))
            rows[n++] = (proc_row_t){ (unsigned)state->slot[i].pid, used };
    }
    return n;
}

/* The size protocol of NVML's process lists: *count is the room in infos;
 * too small (0 and infos NULL included) is NVML_ERROR_INSUFFICIENT_SIZE with
 * the count needed, except that an empty list always succeeds. */
#define PROCS_FN(name, type, fill)                                            \
    EXPORT nvmlReturn_t name(nvmlDevice_t device, unsigned int *count, type *infos) \
    {                                                                         \
        CHECK_DEV(device, d);                                                 \
        if (!count)                                                           \
            return NVML_ERROR_INVALID_ARGUMENT;                               \
        proc_row_t rows[SIM_MAX_PROCS];                                       \
        int n = procs_of(d, rows);                                            \
        if ((unsigned)n > *count) {                                           \
            *count = (unsigned)n;                                             \
            return NVML_ERROR_INSUFFICIENT_SIZE;                              \
        }                                                                     \
        if (n && !infos)                                                      \
            return NVML_ERROR_INVALID_ARGUMENT;                               \
        for (int i = 0; i < n; i++) {                                         \
            memset(&infos[i], 0, sizeof infos[i]);                            \
            infos[i].pid = rows[i].pid;                                       \
            infos[i].usedGpuMemory = rows[i].used;                            \
            fill;                                                             \
        }                                                                     \
        *count = (unsigned)n;                                                 \
        return NVML_SUCCESS;                                                  \
    }
#define NO_MIG (infos[i].gpuInstanceId = infos[i].computeInstanceId = 0xFFFFFFFFu)
PROCS_FN(nvmlDeviceGetComputeRunningProcesses, nvmlProcessInfo_v1_t, (void)0)
PROCS_FN(nvmlDeviceGetComputeRunningProcesses_v2, nvmlProcessInfo_v2_t, NO_MIG)
PROCS_FN(nvmlDeviceGetComputeRunningProcesses_v3, nvmlProcessInfo_t, NO_MIG)

/* No graphics or MPS clients on a simulated GPU: empty lists. */
#define EMPTY_PROCS_FN(name, type)                                            \
    EXPORT nvmlReturn_t name(nvmlDevice_t device, unsigned int *count, type *infos) \
    {                                                                         \
        CHECK_DEV(device, d);                                                 \
        (void)d;                                                              \
        (void)infos;                                                          \
        if (!count)                                                           \
            return NVML_ERROR_INVALID_ARGUMENT;                               \
        *count = 0;                                                           \
        return NVML_SUCCESS;                                                  \
    }
EMPTY_PROCS_FN(nvmlDeviceGetGraphicsRunningProcesses, nvmlProcessInfo_v1_t)
EMPTY_PROCS_FN(nvmlDeviceGetGraphicsRunningProcesses_v2, nvmlProcessInfo_v2_t)
EMPTY_PROCS_FN(nvmlDeviceGetGraphicsRunningProcesses_v3, nvmlProcessInfo_t)
EMPTY_PROCS_FN(nvmlDeviceGetMPSComputeRunningProcesses, nvmlProcessInfo_v1_t)
EMPTY_PROCS_FN(nvmlDeviceGetMPSComputeRunningProcesses_v2, nvmlProcessInfo_v2_t)
EMPTY_PROCS_FN(nvmlDeviceGetMPSComputeRunningProcesses_v3, nvmlProcessInfo_t)

/* ---- utilization ------------------------------------------------------------
 * The engine counts kernel time when it is submitted (busy_ns, and by slot);
 * what has not run yet lies before free_ns (tail[slot] for a slot), so the
 * kernel time run by now is at least busy - (free - now).  Utilization is
 * the kernel time run over the last sample period (SAMPLE_NS, as a real
 * GPU's 1/6 s to 1 s), from samples this process takes when asked (every
 * SAMPLE_GAP_NS at most, a few kept): the newest sample at least a period
 * old is the base, else the oldest (a process that just started sees the
 * time since its first question).  The memory figure is 0: simgpu does not
 * model memory bandwidth.  Under init_lock. */

#define SAMPLE_NS      (200ull * 1000000)
#define SAMPLE_GAP_NS  (20ull * 1000000)
#define SAMPLES        12

typedef struct sample {
    uint64_t t;
    uint64_t run;                        /* kernel time run by t */
    uint64_t slot_run[SIM_MAX_PROCS];
    int32_t  pid[SIM_MAX_PROCS];         /* whose slot_run it is */
} sample_t;

static sample_t samples[SIM_MAX_DEVICES][SAMPLES];
static int nsamples[SIM_MAX_DEVICES];

/* simgpu's clock (exec.c's sim_now): the engine's times are on it. */
static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t run_by(uint64_t busy, uint64_t end, uint64_t now)
{
    uint64_t ahead = end > now ? end - now : 0;
    return busy > ahead ? busy - ahead : 0;
}

static void sample_take(int d, uint64_t now, sample_t *s)
{
    const sim_engine_t *e = &state->engine[d];
    s->t = now;
    s->run = run_by(load64(&e->busy_ns), load64(&e->free_ns), now);
    for (int i = 0; i < SIM_MAX_PROCS; i++) {
        s->slot_run[i] = run_by(load64(&e->slot_busy_ns[i]), load64(&e->tail[i]), now);
        s->pid[i] = __atomic_load_n(&state->slot[i].pid, __ATOMIC_RELAXED);
    }
}

/* Under init_lock: the current sample in *cur, the base in the return. */
static const sample_t *sample_window(int d, sample_t *cur)
{
    sample_take(d, now_ns(), cur);
    sample_t *ring = samples[d];
    int n = nsamples[d];
    if (n == 0 || cur->t - ring[n - 1].t >= SAMPLE_GAP_NS) {
        if (n == SAMPLES) {
            memmove(ring, ring + 1, (SAMPLES - 1) * sizeof *ring);
            n--;
        }
        ring[n++] = *cur;
        nsamples[d] = n;
    }
    const sample_t *base = &ring[0];
    for (int i = n - 1; i >= 0; i--)
        if (cur->t - ring[i].t >= SAMPLE_NS) {
            base = &ring[i];
            break;
        }
    return base;
}

static unsigned percent(uint64_t part, uint64_t whole)
{
    if (whole == 0)
        return 0;
    uint64_t p = part * 100 / whole;
    return p > 100 ? 100 : (unsigned)p;
}

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *u)
{
    CHECK_DEV(device, d);
    if (!u)
        return NVML_ERROR_INVALID_ARGUMENT;
    static sample_t cur;
    pthread_mutex_lock(&init_lock);
    const sample_t *base = sample_window(d, &cur);
    unsigned gpu = percent(cur.run - sim_min(base->run, cur.run), cur.t - base->t);
    pthread_mutex_unlock(&init_lock);
    u->gpu = gpu;
    u->memory = 0;
    return NVML_SUCCESS;
}

/* One sample per process on the device with kernel time in the window, at
 * this call's time (CLOCK_REALTIME, microseconds, as NVML's CPU
 * timestamps); NVML_ERROR_NOT_FOUND when none is newer than lastSeen.  A
 * NULL buffer asks the size (NVML_ERROR_INSUFFICIENT_SIZE and the count). */
EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                                    nvmlProcessUtilizationSample_t *out,
                                                    unsigned int *count,
                                                    unsigned long long last_seen)
{
    CHECK_DEV(device, d);
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long stamp = (unsigned long long)ts.tv_sec * 1000000ull +
                               (unsigned long long)ts.tv_nsec / 1000;
    static sample_t cur;
    nvmlProcessUtilizationSample_t rows[SIM_MAX_PROCS];
    unsigned n = 0;
    pthread_mutex_lock(&init_lock);
    const sample_t *base = sample_window(d, &cur);
    for (int i = 0; i < SIM_MAX_PROCS; i++) {
        uint64_t from = base->pid[i] == cur.pid[i] ? base->slot_run[i] : 0;
        uint64_t ran = cur.slot_run[i] > from ? cur.slot_run[i] - from : 0;
        if (ran && slot_alive(i))
            rows[n++] = (nvmlProcessUtilizationSample_t){
                .pid = (unsigned)cur.pid[i], .timeStamp = stamp,
                .smUtil = percent(ran, cur.t - base->t),
            };
    }
    pthread_mutex_unlock(&init_lock);
    if (n == 0 || stamp <= last_seen)
        return NVML_ERROR_NOT_FOUND;
    if (!out || *count < n) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    memcpy(out, rows, n * sizeof rows[0]);
    *count = n;
    return NVML_SUCCESS;
}
