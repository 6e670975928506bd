/*
 * nvml_int.h - what the files of simgpu's NVML share: the attached state,
 * device handles and the checks every entry point makes first.
 *
 * A device handle points into devs[]: anything else is refused without
 * being dereferenced, as NVML_ERROR_INVALID_ARGUMENT (the real library's
 * answer to an invalid device).  nvml.c owns the state and the handles;
 * topo.c answers how the devices are connected.
 */
#ifndef SIM_NVML_INT_H
#define SIM_NVML_INT_H

#include "sim.h"
#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include <nvml.h>

#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))

struct nvmlDevice_st {
    int index;
};

extern const sim_shared_t *state;    /* read-only mapping, set once by nvmlInit */
extern int init_count;               /* nvmlInit less nvmlShutdown (atomic) */
extern struct nvmlDevice_st devs[SIM_MAX_DEVICES];

/* The index of a valid handle of an attached state, or -1. */
int dev_index(nvmlDevice_t h);

static inline int initialized(void)
{
    return __atomic_load_n(&init_count, __ATOMIC_ACQUIRE) > 0;
}

#define CHECK_INIT()                                                  \
    do {                                                              \
        if (!initialized())                                           \
            return NVML_ERROR_UNINITIALIZED;                          \
    } while (0)
#define CHECK_DEV(h, d)                                               \
    CHECK_INIT();                                                     \
    int d = dev_index(h);                                             \
    if (d < 0)                                                        \
        return NVML_ERROR_INVALID_ARGUMENT

/* A query the device does not support: NVML_ERROR_NOT_SUPPORTED for a
 * valid handle (the real library's answer on a device without it). */
#define UNSUPPORTED(name, ...)                                                \
    EXPORT nvmlReturn_t name(nvmlDevice_t device, __VA_ARGS__)                \
    {                                                                         \
        CHECK_DEV(device, d);                                                 \
        (void)d;                                                              \
        return NVML_ERROR_NOT_SUPPORTED;                                      \
    }
#define U_ __attribute__((unused))

#endif
