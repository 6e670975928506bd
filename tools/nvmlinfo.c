/*
 * nvmlinfo.c - what NVML says of a GPU, found by its UUID, for salus-top's
 * device line: utilization, memory, and temperature and power where the GPU
 * reports them, as nvtop and nvidia-smi show them.
 *
 * Divided into: loading NVML; top_nvml_read.
 *
 * NVML (libnvidia-ml.so.1) is opened on first need, with dlopen: a machine
 * without it (no driver) shows what it showed before, and the tools link
 * nothing new.  Over simgpu, its own libnvidia-ml.so.1 answers from the same
 * state (temperature and power: not supported, left out).  salus-top runs
 * without libsalus, so these are the device's figures, every tenant's.
 * No lock: the tool is single-threaded.
 */
#include "top.h"

#include <dlfcn.h>
#include <string.h>

#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include <nvml.h>

/* ---- loading NVML --------------------------------------------------------- */

static struct {
    int state;                      /* 0 not tried, 1 ready, -1 absent */
    nvmlReturn_t (*by_uuid)(const char *, nvmlDevice_t *);
    nvmlReturn_t (*util)(nvmlDevice_t, nvmlUtilization_t *);
    nvmlReturn_t (*mem)(nvmlDevice_t, nvmlMemory_t *);
    nvmlReturn_t (*temp)(nvmlDevice_t, nvmlTemperatureSensors_t, unsigned int *);
    nvmlReturn_t (*power)(nvmlDevice_t, unsigned int *);
} nv;

static int load(void)
{
    if (nv.state)
        return nv.state;
    nv.state = -1;
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return -1;
    nvmlReturn_t (*init)(void);
    *(void **)&init = dlsym(h, "nvmlInit_v2");
    *(void **)&nv.by_uuid = dlsym(h, "nvmlDeviceGetHandleByUUID");
    *(void **)&nv.util = dlsym(h, "nvmlDeviceGetUtilizationRates");
    *(void **)&nv.mem = dlsym(h, "nvmlDeviceGetMemoryInfo");
    *(void **)&nv.temp = dlsym(h, "nvmlDeviceGetTemperature");
    *(void **)&nv.power = dlsym(h, "nvmlDeviceGetPowerUsage");
    if (!init || !nv.by_uuid || !nv.mem || init() != NVML_SUCCESS) {
        dlclose(h);
        return -1;
    }
    nv.state = 1;
    return 1;
}

/* ---- top_nvml_read ----------------------------------------------------------- */

int top_nvml_read(const char *uuid, top_nvml_t *out)
{
    nvmlDevice_t d;
    nvmlMemory_t m;
    if (!uuid || !uuid[0] || load() != 1 || nv.by_uuid(uuid, &d) != NVML_SUCCESS ||
        nv.mem(d, &m) != NVML_SUCCESS)
        return -1;
    top_nvml_t v = { .util_pct = -1, .temp_c = -1, .power_mw = -1,
                     .mem_used = m.used, .mem_total = m.total };
    nvmlUtilization_t u;
    unsigned int x;
    if (nv.util && nv.util(d, &u) == NVML_SUCCESS)
        v.util_pct = (int)u.gpu;
    if (nv.temp && nv.temp(d, NVML_TEMPERATURE_GPU, &x) == NVML_SUCCESS)
        v.temp_c = (int)x;
    if (nv.power && nv.power(d, &x) == NVML_SUCCESS)
        v.power_mw = (int64_t)x;
    *out = v;
    return 0;
}
