/*
 * tensormap.c - tensor maps, the descriptors of the Tensor Memory Accelerator
 * (TMA): cuTensorMapEncodeTiled and cuTensorMapReplaceAddress.  XLA (and
 * cuBLAS, Triton) encode them on the host for Hopper kernels.
 *
 * The arguments are checked as the CUDA Driver API documents them for
 * cuTensorMapEncodeTiled (rank 1 to 5, 3 to 5 interleaved; the address 16
 * bytes aligned, 32 when interleaved by 32 bytes or of a 16-byte-aligned
 * packed type; each dimension 1 to 2^32; strides multiples of 16 (32 in
 * those cases) below 2^40; a box of 1 to 256 elements a side whose inner
 * side is a multiple of 16 bytes without interleave and fits the swizzle
 * span; element strides 1 to 8; 32-byte interleave only with 32-byte
 * swizzle; the NaN fill only for floating-point types), and refused with
 * CUDA_ERROR_INVALID_VALUE, as the driver does.
 *
 * The 128-byte CUtensorMap is opaque: what a real driver writes there is
 * the GPU's own descriptor format, undocumented.  simgpu writes its own
 * record of the arguments (tm_t below): its kernels compute nothing, so no
 * kernel reads it; cuTensorMapReplaceAddress rewrites the address in it.
 *
 * Divided into: the types; the checks; the calls.  No state, no lock.
 */
#include "sim.h"

#include <string.h>

/* ---- the types --------------------------------------------------------------------- */

/* simgpu's record in the opaque 128 bytes (fits: checked below). */
typedef struct {
    uint64_t magic;
    uint64_t address;
    uint64_t dim[5];
    uint64_t stride[4];
    uint32_t box[5];
    uint8_t estride[5], rank, type, interleave, swizzle, l2, oob;
} tm_t;
_Static_assert(sizeof(tm_t) <= sizeof(CUtensorMap), "tm_t fits a CUtensorMap");

#define TM_MAGIC 0x70616d7374616d74ull   /* "tmatsmap": a map simgpu encoded */

/* Bits per element (the packed types are 4 or 6 bits), 0 for no such type. */
static unsigned type_bits(CUtensorMapDataType t)
{
    switch (t) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8:
        return 8;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
        return 16;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ:
        return 32;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64:
        return 64;
    case CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B:
    case CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B:
        return 4;
    case CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B:
        return 6;
    default:
        return 0;
    }
}

static int is_float(CUtensorMapDataType t)
{
    return t == CU_TENSOR_MAP_DATA_TYPE_FLOAT16 || t == CU_TENSOR_MAP_DATA_TYPE_FLOAT32 ||
           t == CU_TENSOR_MAP_DATA_TYPE_FLOAT64 || t == CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 ||
           t == CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ || t == CU_TENSOR_MAP_DATA_TYPE_TFLOAT32 ||
           t == CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ;
}

/* ---- the checks --------------------------------------------------------------------- */

/* The bytes that address and strides must be multiples of. */
static unsigned align_of(CUtensorMapDataType t, CUtensorMapInterleave il)
{
    int wide = il == CU_TENSOR_MAP_INTERLEAVE_32B || t == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B ||
               t == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B;
    return wide ? 32 : 16;
}

/* The largest inner side of a box, in bytes, that a swizzle allows. */
static unsigned swizzle_span(CUtensorMapSwizzle sw)
{
    switch (sw) {
    case CU_TENSOR_MAP_SWIZZLE_32B:
        return 32;
    case CU_TENSOR_MAP_SWIZZLE_64B:
        return 64;
    case CU_TENSOR_MAP_SWIZZLE_NONE:
        return ~0u;
    default:
        return 128;                     /* the 128-byte spans, whatever their atom */
    }
}

static int modes_ok(CUtensorMapDataType t, CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                    CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
    if (!type_bits(t) || (unsigned)il > CU_TENSOR_MAP_INTERLEAVE_32B ||
        (unsigned)sw > CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B ||
        (unsigned)l2 > CU_TENSOR_MAP_L2_PROMOTION_L2_256B ||
        (unsigned)oob > CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)
        return 0;
    if (il == CU_TENSOR_MAP_INTERLEAVE_32B && sw != CU_TENSOR_MAP_SWIZZLE_32B)
        return 0;
    return oob == CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE || is_float(t);
}

static int shape_ok(CUtensorMapDataType t, cuuint32_t rank, const cuuint64_t *dim,
                    const cuuint64_t *stride, const cuuint32_t *box, const cuuint32_t *es,
                    CUtensorMapInterleave il, CUtensorMapSwizzle sw)
{
    unsigned align = align_of(t, il);
    if (rank < (il == CU_TENSOR_MAP_INTERLEAVE_NONE ? 1u : 3u) || rank > 5 || !dim || !box ||
        !es || (rank > 1 && !stride))
        return 0;
    for (cuuint32_t i = 0; i < rank; i++)
        if (!dim[i] || dim[i] > (1ull << 32) || !box[i] || box[i] > 256 || !es[i] || es[i] > 8)
            return 0;
    for (cuuint32_t i = 0; i + 1 < rank; i++)
        if (stride[i] % align || stride[i] >= (1ull << 40))
            return 0;
    uint64_t inner = (uint64_t)box[0] * type_bits(t) / 8;
    if (il == CU_TENSOR_MAP_INTERLEAVE_NONE && (inner % 16 || inner > swizzle_span(sw)))
        return 0;
    return 1;
}

/* ---- the calls ---------------------------------------------------------------------- */

CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType t, cuuint32_t rank,
                                        void *address, const cuuint64_t *dim,
                                        const cuuint64_t *stride, const cuuint32_t *box,
                                        const cuuint32_t *es, CUtensorMapInterleave il,
                                        CUtensorMapSwizzle sw, CUtensorMapL2promotion l2,
                                        CUtensorMapFloatOOBfill oob)
{
    SIM_CHECK_INIT();
    if (!map || !address || (uintptr_t)address % align_of(t, il) ||
        !modes_ok(t, il, sw, l2, oob) || !shape_ok(t, rank, dim, stride, box, es, il, sw))
        return CUDA_ERROR_INVALID_VALUE;
    tm_t tm = { .magic = TM_MAGIC, .address = (uintptr_t)address, .rank = (uint8_t)rank,
                .type = (uint8_t)t, .interleave = (uint8_t)il, .swizzle = (uint8_t)sw,
                .l2 = (uint8_t)l2, .oob = (uint8_t)oob };
    for (cuuint32_t i = 0; i < rank; i++) {
        tm.dim[i] = dim[i];
        tm.box[i] = box[i];
        tm.estride[i] = (uint8_t)es[i];
        if (i + 1 < rank)
            tm.stride[i] = stride[i];
    }
    memset(map, 0, sizeof *map);
    memcpy(map, &tm, sizeof tm);
    return CUDA_SUCCESS;
}

/* A map simgpu encoded gets a new address, aligned as its encoding required. */
CUresult CUDAAPI cuTensorMapReplaceAddress(CUtensorMap *map, void *address)
{
    SIM_CHECK_INIT();
    tm_t tm;
    if (!map || !address)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(&tm, map, sizeof tm);
    if (tm.magic != TM_MAGIC ||
        (uintptr_t)address % align_of((CUtensorMapDataType)tm.type,
                                      (CUtensorMapInterleave)tm.interleave))
        return CUDA_ERROR_INVALID_VALUE;
    tm.address = (uintptr_t)address;
    memcpy(map, &tm, sizeof tm);
    return CUDA_SUCCESS;
}
