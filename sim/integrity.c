/*
 * integrity.c - the runtime's integrity check (export table d4082055-...):
 * libcudart proves that the driver is NVIDIA's by asking it for an HMAC
 * over things both sides know, and computing it too.
 *
 * Slot 1 is check(version, unix seconds, u64 result[2]).  For a version
 * ending in 0 or 1 the answer is one of two fixed constants; for the others
 * (libcudart 12.x and 13.x ask 13000 to 13002, 12082, ...) it is
 * HMAC-MD2 (md2.c) with a fixed key over, in this order:
 *   driver version (u32, what cuDriverGetVersion says), the version asked
 *   (u32), the pid (u32), the calling thread (u32: pthread_self's low
 *   bits), the addresses of the CUDART interface table, of this table and
 *   of the check function itself (as slot 1 holds it; 3 x 8 bytes), the
 *   seconds given (u64); then for each device the process sees, in ordinal
 *   order, its UUID (16 bytes) and PCI domain, bus and device (3 x i32).
 * A wrong answer makes the runtime fail every call with
 * cudaErrorSoftwareValidityNotEstablished (103).  The inputs, key and
 * constants are those ZLUDA's dark_api spells out.
 *
 * Divided into: the message; the check; the table.
 *
 * Lock: none held; it calls the public device queries.
 */
#include "sim.h"

#include <string.h>
#include <unistd.h>

static const uint8_t hmac_key[16] = {
    0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52,
    0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f,
};

/* ---- the message --------------------------------------------------------------------- */

#define HEAD_BYTES   48                 /* 4 x u32, 3 pointers, u64 */
#define DEVICE_BYTES 28                 /* UUID, 3 x i32 */

static size_t put(uint8_t *msg, size_t at, const void *v, size_t n)
{
    memcpy(msg + at, v, n);
    return at + n;
}

/* The device part of the message; 0 bytes when a query fails. */
static size_t put_devices(uint8_t *msg, size_t at)
{
    int n = 0;
    if (cuDeviceGetCount(&n) != CUDA_SUCCESS)
        return 0;
    for (int i = 0; i < n && i < SIM_MAX_DEVICES; i++) {
        CUdevice d;
        CUuuid u;
        int pci[3];
        if (cuDeviceGet(&d, i) != CUDA_SUCCESS || cuDeviceGetUuid_v2(&u, d) != CUDA_SUCCESS ||
            cuDeviceGetAttribute(&pci[0], CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, d) ||
            cuDeviceGetAttribute(&pci[1], CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d) ||
            cuDeviceGetAttribute(&pci[2], CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, d))
            return 0;
        at = put(msg, at, u.bytes, 16);
        at = put(msg, at, pci, sizeof pci);
    }
    return at;
}

/* ---- the check ------------------------------------------------------------------------ */

static CUresult integrity_check(uint32_t version, uint64_t seconds, uint64_t result[2])
{
    if (!result)
        return CUDA_ERROR_INVALID_VALUE;
    if (version % 10 == 0 || version % 10 == 1) {
        result[0] = version % 10 ? 0x1841181c03cb675cull : 0x3341181c03cb675cull;
        result[1] = 0x8ed383aa1f4cd1e8ull;
        return CUDA_SUCCESS;
    }
    int driver = 0;
    cuDriverGetVersion(&driver);
    uint32_t head[4] = { (uint32_t)driver, version, (uint32_t)getpid(),
                         (uint32_t)(uintptr_t)pthread_self() };
    const void *addr[3] = { sim_cudart_table, sim_integrity_table, sim_integrity_table[1] };
    uint8_t msg[HEAD_BYTES + SIM_MAX_DEVICES * DEVICE_BYTES];
    size_t at = put(msg, 0, head, sizeof head);
    at = put(msg, at, addr, sizeof addr);
    at = put(msg, at, &seconds, sizeof seconds);
    size_t end = put_devices(msg, at);
    if (!end)
        return CUDA_ERROR_NOT_INITIALIZED;
    uint8_t mac[16];
    sim_hmac_md2(hmac_key, msg, end, mac);
    memcpy(result, mac, 16);            /* two u64 of the host's byte order, as the runtime reads */
    return CUDA_SUCCESS;
}

/* ---- the table ---------------------------------------------------------------------------- */

static CUresult refuse_2(void)
{
    return sim_export_refuse(SIM_EXPORT_INTEGRITY, 2);
}

const void *const sim_integrity_table[3] = {
    (const void *)(3 * sizeof(void *)), (const void *)integrity_check, (const void *)refuse_2,
};
