/*
 * tex.c - texture and surface objects: cuTexObjectCreate / Destroy /
 * GetResourceDesc / GetTextureDesc / GetResourceViewDesc and
 * cuSurfObjectCreate / Destroy / GetResourceDesc.
 *
 * Divided into: checking a resource; texture objects; surface objects.
 *
 * simgpu runs no kernel that samples, so an object is what it was created
 * from, checked as the driver checks it: a live CUDA array (for a surface,
 * one made with CUDA_ARRAY3D_SURFACE_LDST), or device memory that is live
 * for the bytes described, aligned to CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT,
 * with a pitch aligned to _TEXTURE_PITCH_ALIGNMENT, within the device's
 * linear texture limits, in a format of 1, 2 or 4 channels.  Mipmapped
 * arrays do not exist in simgpu, so a mipmapped resource is never valid.
 * Every refusal is CUDA_ERROR_INVALID_VALUE, the driver's one answer; no
 * current context is CUDA_ERROR_INVALID_CONTEXT.  An object does not keep
 * its resource alive (as on the driver: destroying the array first is the
 * caller's error, and the object's queries still answer).
 *
 * Lock: sim_p.lock guards the objects and the checks of arrays and memory.
 */
#include "sim.h"

#include <stdlib.h>
#include <string.h>

typedef struct sim_texobj {
    uint64_t handle;
    CUDA_RESOURCE_DESC res;
    CUDA_TEXTURE_DESC tex;              /* textures only */
    CUDA_RESOURCE_VIEW_DESC view;       /* zeros when none was given */
} sim_texobj_t;

/* ---- checking a resource ----------------------------------------------------- */

static int channels_ok(unsigned n) { return n == 1 || n == 2 || n == 4; }

/* Device memory: live for len bytes from p, aligned for textures. */
static int memory_ok(CUdeviceptr p, size_t len)
{
    return p && p % SIM_TEX_ALIGN == 0 && len &&
           sim_range_check((uintptr_t)p, len, 0) == 0;
}

/* Under lock. */
static CUresult resource_check(const CUDA_RESOURCE_DESC *r, int surface)
{
    if (r->flags)
        return CUDA_ERROR_INVALID_VALUE;
    switch (r->resType) {
    case CU_RESOURCE_TYPE_ARRAY: {
        CUDA_ARRAY3D_DESCRIPTOR d;
        if (sim_array_desc(r->res.array.hArray, &d))
            return CUDA_ERROR_INVALID_VALUE;
        if (surface && !(d.Flags & CUDA_ARRAY3D_SURFACE_LDST))
            return CUDA_ERROR_INVALID_VALUE;
        return CUDA_SUCCESS;
    }
    case CU_RESOURCE_TYPE_LINEAR: {
        const typeof(r->res.linear) *l = &r->res.linear;
        size_t es = sim_format_size(l->format) * l->numChannels;
        if (surface || !es || !channels_ok(l->numChannels) ||
            l->sizeInBytes / es > SIM_TEX1D_LINEAR_MAX || !memory_ok(l->devPtr, l->sizeInBytes))
            return CUDA_ERROR_INVALID_VALUE;
        return CUDA_SUCCESS;
    }
    case CU_RESOURCE_TYPE_PITCH2D: {
        const typeof(r->res.pitch2D) *p = &r->res.pitch2D;
        size_t es = sim_format_size(p->format) * p->numChannels;
        if (surface || !es || !channels_ok(p->numChannels) || !p->width || !p->height ||
            p->width > SIM_TEX2D_LINEAR_W || p->height > SIM_TEX2D_LINEAR_H ||
            p->pitchInBytes % SIM_TEX_PITCH_ALIGN || p->pitchInBytes > SIM_TEX2D_LINEAR_PITCH ||
            p->width * es > p->pitchInBytes ||
            !memory_ok(p->devPtr, p->pitchInBytes * (p->height - 1) + p->width * es))
            return CUDA_ERROR_INVALID_VALUE;
        return CUDA_SUCCESS;
    }
    default:                            /* mipmapped arrays: none exist */
        return CUDA_ERROR_INVALID_VALUE;
    }
}

static CUresult texdesc_check(const CUDA_TEXTURE_DESC *t)
{
    const unsigned known = CU_TRSF_READ_AS_INTEGER | CU_TRSF_NORMALIZED_COORDINATES |
                           CU_TRSF_SRGB | CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION |
                           CU_TRSF_SEAMLESS_CUBEMAP;
    for (int i = 0; i < 3; i++)
        if ((unsigned)t->addressMode[i] > CU_TR_ADDRESS_MODE_BORDER)
            return CUDA_ERROR_INVALID_VALUE;
    if ((unsigned)t->filterMode > CU_TR_FILTER_MODE_LINEAR ||
        (unsigned)t->mipmapFilterMode > CU_TR_FILTER_MODE_LINEAR || (t->flags & ~known))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* A view only of an array (not block-compressed here: simgpu has none),
 * in a known format, no larger than the array, on its only level. */
static CUresult view_check(const CUDA_RESOURCE_DESC *r, const CUDA_RESOURCE_VIEW_DESC *v)
{
    CUDA_ARRAY3D_DESCRIPTOR d;
    if (r->resType != CU_RESOURCE_TYPE_ARRAY || sim_array_desc(r->res.array.hArray, &d) ||
        (unsigned)v->format > CU_RES_VIEW_FORMAT_UNSIGNED_BC7 || v->firstMipmapLevel ||
        v->lastMipmapLevel || v->firstLayer > v->lastLayer ||
        v->width > d.Width || v->height > d.Height || v->depth > d.Depth)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* ---- texture objects ---------------------------------------------------------- */

CUresult CUDAAPI cuTexObjectCreate(CUtexObject *out, const CUDA_RESOURCE_DESC *res,
                                   const CUDA_TEXTURE_DESC *tex,
                                   const CUDA_RESOURCE_VIEW_DESC *view)
{
    SIM_CHECK_INIT();
    if (!out || !res || !tex)
        return CUDA_ERROR_INVALID_VALUE;
    sim_texobj_t *o = calloc(1, sizeof *o);
    if (!o)
        return CUDA_ERROR_OUT_OF_MEMORY;
    SIM_LOCK();
    sim_ctx_t *ctx;
    CUresult rc = sim_ctx_require(&ctx);
    if (rc == CUDA_SUCCESS)
        rc = resource_check(res, 0);
    if (rc == CUDA_SUCCESS)
        rc = texdesc_check(tex);
    if (rc == CUDA_SUCCESS && view)
        rc = view_check(res, view);
    if (rc == CUDA_SUCCESS && !(o->handle = sim_obj_new(SIM_K_TEX, o)))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS) {
        o->res = *res;
        o->tex = *tex;
        if (view)
            o->view = *view;
        *out = o->handle;
    } else {
        free(o);
    }
    SIM_UNLOCK();
    return rc;
}

static CUresult destroy(uint64_t h, sim_kind_t kind)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_texobj_t *o = sim_obj_get(h, kind);
    if (o) {
        sim_obj_free(o->handle);
        free(o);
    }
    SIM_UNLOCK();
    return o ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Copy part of an object out: what 0 resource, 1 texture, 2 view. */
static CUresult query(uint64_t h, sim_kind_t kind, int what, void *out)
{
    SIM_CHECK_INIT();
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_texobj_t *o = sim_obj_get(h, kind);
    if (o && what == 0)
        memcpy(out, &o->res, sizeof o->res);
    else if (o && what == 1)
        memcpy(out, &o->tex, sizeof o->tex);
    else if (o)
        memcpy(out, &o->view, sizeof o->view);
    SIM_UNLOCK();
    return o ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuTexObjectDestroy(CUtexObject t)
{
    return destroy(t, SIM_K_TEX);
}

CUresult CUDAAPI cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC *out, CUtexObject t)
{
    return query(t, SIM_K_TEX, 0, out);
}

CUresult CUDAAPI cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC *out, CUtexObject t)
{
    return query(t, SIM_K_TEX, 1, out);
}

CUresult CUDAAPI cuTexObjectGetResourceViewDesc(CUDA_RESOURCE_VIEW_DESC *out, CUtexObject t)
{
    return query(t, SIM_K_TEX, 2, out);
}

/* ---- surface objects ----------------------------------------------------------- */

CUresult CUDAAPI cuSurfObjectCreate(CUsurfObject *out, const CUDA_RESOURCE_DESC *res)
{
    SIM_CHECK_INIT();
    if (!out || !res)
        return CUDA_ERROR_INVALID_VALUE;
    sim_texobj_t *o = calloc(1, sizeof *o);
    if (!o)
        return CUDA_ERROR_OUT_OF_MEMORY;
    SIM_LOCK();
    sim_ctx_t *ctx;
    CUresult rc = sim_ctx_require(&ctx);
    if (rc == CUDA_SUCCESS)
        rc = resource_check(res, 1);
    if (rc == CUDA_SUCCESS && !(o->handle = sim_obj_new(SIM_K_SURF, o)))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS) {
        o->res = *res;
        *out = o->handle;
    } else {
        free(o);
    }
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuSurfObjectDestroy(CUsurfObject s)
{
    return destroy(s, SIM_K_SURF);
}

CUresult CUDAAPI cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC *out, CUsurfObject s)
{
    return query(s, SIM_K_SURF, 0, out);
}
