/*
 * drv.c - the driver contract's table, filled from the real driver, and the
 * helpers every module uses to read it (drv.h).
 *
 * Divided into: resolving; the current device; a stream's place; a device's
 * identity.
 * No state and no lock: the table is the caller's, written once before it is
 * published (intercept stores it with release semantics into the modules).
 */
#include "drv/drv.h"

#include <stdio.h>
#include <string.h>

/* ---- resolving ------------------------------------------------------------ */

int drv_resolve(void *(*sym)(const char *name), drv_t *out)
{
    if (!sym)
        return -1;
    drv_t d;
    memset(&d, 0, sizeof d);
#define DRV_LOOKUP_(field, params, name, fallback)                              \
    d.field = (__typeof__(d.field))sym(name);                                   \
    if (!d.field && (fallback))                                                 \
        d.field = (__typeof__(d.field))sym((const char *)(fallback));
    DRV_CALLS(DRV_LOOKUP_)
#undef DRV_LOOKUP_
    if (!d.ctx_get_device)
        return -1;
    *out = d;
    return 0;
}

/* ---- the current device --------------------------------------------------- */

int drv_current_device(const drv_t *d, int *ordinal)
{
    CUdevice dev = -1;
    if (!d || !d->ctx_get_device || d->ctx_get_device(&dev) != CUDA_SUCCESS ||
        dev < 0 || dev > DRV_MAX_ORDINAL)
        return -1;
    *ordinal = (int)dev;
    return 0;
}

/* ---- a stream's place ------------------------------------------------------- */

static int special_stream(CUstream s)
{
    return s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

int drv_stream_place(const drv_t *d, CUstream stream, CUcontext *ctx, int *ordinal)
{
    CUcontext c = NULL;
    if (!d)
        return -1;
    if (special_stream(stream)) {
        int o;
        if (drv_current_device(d, &o) != 0)
            return -1;
        if (!d->ctx_get_current || d->ctx_get_current(&c) != CUDA_SUCCESS)
            c = NULL;
        *ctx = c;
        *ordinal = o;
        return 0;
    }
    if (!d->stream_get_ctx || d->stream_get_ctx(stream, &c) != CUDA_SUCCESS)
        c = NULL;
    CUdevice dev = -1;
    if (!d->stream_get_device || d->stream_get_device(stream, &dev) != CUDA_SUCCESS) {
        CUcontext popped;
        dev = -1;
        if (!c || !d->ctx_push_current || !d->ctx_pop_current || !d->ctx_get_device ||
            d->ctx_push_current(c) != CUDA_SUCCESS)
            return -1;
        if (d->ctx_get_device(&dev) != CUDA_SUCCESS)
            dev = -1;
        d->ctx_pop_current(&popped);
    }
    if (dev < 0 || dev > DRV_MAX_ORDINAL)
        return -1;
    *ctx = c;
    *ordinal = (int)dev;
    return 0;
}

/* ---- identity ----------------------------------------------------------------
 * A driver that answers an error, or writes nothing, gets the ordinal form:
 * zeros are not an identity (two GPUs would share one lease). */

int drv_device_uuid(const drv_t *d, int ordinal, uint8_t uuid[16])
{
    static const uint8_t zero[16];
    CUuuid u;
    memset(&u, 0, sizeof u);
    if (d && d->device_get_uuid && d->device_get_uuid(&u, (CUdevice)ordinal) == CUDA_SUCCESS &&
        memcmp(u.bytes, zero, sizeof zero) != 0) {
        memcpy(uuid, u.bytes, 16);
        return 0;
    }
    char name[17];
    memset(name, 0, sizeof name);
    snprintf(name, sizeof name, "ordinal:%d", ordinal);
    memcpy(uuid, name, 16);
    return 1;
}
