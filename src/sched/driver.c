/*
 * driver.c - the scheduler's two driver calls over the real driver: the
 * device of the current context, a context synchronize and a device's uuid,
 * resolved once by name (legacy ABI: cuCtxGetDevice(CUdevice *),
 * cuCtxSynchronize(void); the CUDA 13 `_v2` forms of those take a context
 * and are not used; cuDeviceGetUuid_v2, else cuDeviceGetUuid).
 *
 * The pointers are written once, before sched_init publishes the table, and
 * never change; no lock.
 */
#include "sched/sched_int.h"

#include <cuda.h>
#include <string.h>

typedef CUresult (CUDAAPI *get_device_fn)(CUdevice *);
typedef CUresult (CUDAAPI *synchronize_fn)(void);
typedef CUresult (CUDAAPI *get_uuid_fn)(CUuuid *, CUdevice);

static get_device_fn real_get_device;
static synchronize_fn real_synchronize;
static get_uuid_fn real_get_uuid;

static int drv_ctx_device(int *device)
{
    CUdevice dev;
    if (real_get_device(&dev) != CUDA_SUCCESS)
        return -1;
    *device = (int)dev;
    return 0;
}

static int drv_ctx_synchronize(void)
{
    return real_synchronize() == CUDA_SUCCESS ? 0 : -1;
}

static int drv_device_uuid(int ordinal, unsigned char uuid[16])
{
    CUuuid u;
    memset(&u, 0, sizeof u);                  /* a driver that writes nothing: zeros */
    if (real_get_uuid(&u, (CUdevice)ordinal) != CUDA_SUCCESS)
        return -1;
    memcpy(uuid, u.bytes, 16);
    return 0;
}

int sched_driver_resolve(void *(*sym)(const char *name), sched_driver_t *out)
{
    if (!sym)
        return -1;
    get_device_fn get = (get_device_fn)sym("cuCtxGetDevice");
    synchronize_fn sync = (synchronize_fn)sym("cuCtxSynchronize");
    if (!get || !sync)
        return -1;
    get_uuid_fn uuid = (get_uuid_fn)sym("cuDeviceGetUuid_v2");
    if (!uuid)
        uuid = (get_uuid_fn)sym("cuDeviceGetUuid");
    real_get_device = get;
    real_synchronize = sync;
    real_get_uuid = uuid;
    out->ctx_device = drv_ctx_device;
    out->ctx_synchronize = drv_ctx_synchronize;
    out->device_uuid = uuid ? drv_device_uuid : NULL;
    return 0;
}
