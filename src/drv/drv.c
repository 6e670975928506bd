/*
 * drv.c - the driver contract's table, filled from the real driver, and the
 * helpers every module uses to read it (drv.h).
 *
 * Divided into: resolving; the current device; a device's identity.
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
