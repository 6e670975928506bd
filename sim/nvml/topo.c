/*
 * topo.c - how simgpu's devices are connected, as NVML tells it: PCIe
 * cards without NVLink, peers over the PCIe switch, outside any NVSwitch
 * fabric, no confidential computing.  PyTorch (c10_cuda), XLA and NCCL
 * read these at start-up; NCCL's NVML wrapper resolves every name below
 * and calls nvmlDeviceGetCudaComputeCapability and nvmlDeviceGetP2PStatus
 * without checking that they are there, so a missing one is a crash in
 * NCCL's first communicator, not an error.
 *
 * Divided into: NVLink; the PCIe link; peers and capability; the fabric,
 * the platform and confidential computing.  No state of its own: every
 * answer is a constant of the simulated card or the driver's own (the
 * same as simgpu's cuDeviceCanAccessPeer and compute capability).
 */
#include "nvml/nvml_int.h"

#include <string.h>
#include <sys/time.h>

/* ---- NVLink --------------------------------------------------------------- */

/* No NVLink: simgpu's devices are PCIe cards.  PyTorch's
 * c10_cuda resolves these at its first allocation and stops when one is
 * missing; the real NVML answers NOT_SUPPORTED on a GPU without the links. */
UNSUPPORTED(nvmlDeviceGetNvLinkState, unsigned int link U_, nvmlEnableState_t *active U_)
UNSUPPORTED(nvmlDeviceGetNvLinkRemoteDeviceType, unsigned int link U_,
            nvmlIntNvLinkDeviceType_t *type U_)
UNSUPPORTED(nvmlDeviceGetNvLinkRemotePciInfo_v2, unsigned int link U_, nvmlPciInfo_t *pci U_)
UNSUPPORTED(nvmlDeviceGetNvLinkRemotePciInfo, unsigned int link U_, nvmlPciInfo_t *pci U_)
UNSUPPORTED(nvmlDeviceGetNvLinkCapability, unsigned int link U_,
            nvmlNvLinkCapability_t capability U_, unsigned int *result U_)

/* ---- the PCIe link ---------------------------------------------------------- */


/* The PCIe link (nvmlDeviceGetCurrPcieLinkGeneration, ...Width, and their
 * Max variants): an H100 PCIe card's, generation 5 and 16 lanes, trained at
 * its maximum (inferred: simgpu models no link training; sim/README.md).
 * XLA reads the current link to estimate host-device bandwidth and, when
 * NVML lacks it, assumes generation 3. */
static nvmlReturn_t link_answer(nvmlDevice_t device, unsigned int *out, unsigned int value)
{
    CHECK_DEV(device, d);
    (void)d;
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    *out = value;
    return NVML_SUCCESS;
}
#define SIM_PCIE_GEN 5
#define SIM_PCIE_WIDTH 16
EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int *gen)
{
    return link_answer(device, gen, SIM_PCIE_GEN);
}
EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int *gen)
{
    return link_answer(device, gen, SIM_PCIE_GEN);
}
EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int *width)
{
    return link_answer(device, width, SIM_PCIE_WIDTH);
}
EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int *width)
{
    return link_answer(device, width, SIM_PCIE_WIDTH);
}

/* Generation 5's 32 GT/s per lane, as nvmlDeviceGetPcieLinkMaxSpeed names it. */
EXPORT nvmlReturn_t nvmlDeviceGetPcieLinkMaxSpeed(nvmlDevice_t device, unsigned int *speed)
{
    return link_answer(device, speed, NVML_PCIE_LINK_MAX_SPEED_32000MBPS);
}

/* The PCI identity in the extended form: nvmlDeviceGetPciInfo_v3's fields,
 * and a 3D controller's class (0x03, 0x02), as a data-centre card shows. */
EXPORT nvmlReturn_t nvmlDeviceGetPciInfoExt(nvmlDevice_t device, nvmlPciInfoExt_t *pci)
{
    CHECK_DEV(device, d);
    (void)d;
    if (!pci)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (pci->version != nvmlPciInfoExt_v1)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    nvmlPciInfo_t base;
    nvmlReturn_t rc = nvmlDeviceGetPciInfo_v3(device, &base);
    if (rc != NVML_SUCCESS)
        return rc;
    memset(pci, 0, sizeof *pci);
    pci->version = nvmlPciInfoExt_v1;
    pci->domain = base.domain;
    pci->bus = base.bus;
    pci->device = base.device;
    pci->pciDeviceId = base.pciDeviceId;
    pci->pciSubSystemId = base.pciSubSystemId;
    pci->baseClass = 0x03;
    pci->subClass = 0x02;
    memcpy(pci->busId, base.busId, sizeof pci->busId);
    return NVML_SUCCESS;
}

/* ---- peers and capability ----------------------------------------------------- */

/* The driver's compute capability (sim.h's SIM_ARCH, as cuDeviceGetAttribute
 * answers it). */
EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major,
                                                       int *minor)
{
    CHECK_DEV(device, d);
    (void)d;
    if (!major || !minor)
        return NVML_ERROR_INVALID_ARGUMENT;
    *major = SIM_ARCH / 10;
    *minor = SIM_ARCH % 10;
    return NVML_SUCCESS;
}

/* Peer access as simgpu's driver grants it (cuDeviceCanAccessPeer: every
 * other device, reads, writes and atomics); NVLink and the rest of the
 * capabilities are not there.  A device and itself: NOT_SUPPORTED, as
 * cuDeviceCanAccessPeer answers 0 (what the real NVML says of the pair is
 * not documented: sim/README.md). */
EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2,
                                           nvmlGpuP2PCapsIndex_t index,
                                           nvmlGpuP2PStatus_t *status)
{
    CHECK_DEV(device1, a);
    int b = dev_index(device2);
    if (b < 0 || !status)
        return NVML_ERROR_INVALID_ARGUMENT;
    int peer = a != b;
    switch (index) {
    case NVML_P2P_CAPS_INDEX_READ:
    case NVML_P2P_CAPS_INDEX_WRITE:
    case NVML_P2P_CAPS_INDEX_ATOMICS:
    case NVML_P2P_CAPS_INDEX_PCI:          /* also the deprecated _PROP */
        *status = peer ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_NOT_SUPPORTED;
        return NVML_SUCCESS;
    case NVML_P2P_CAPS_INDEX_NVLINK:
        *status = NVML_P2P_STATUS_NOT_SUPPORTED;
        return NVML_SUCCESS;
    default:
        return NVML_ERROR_INVALID_ARGUMENT;
    }
}

/* Field values: each asked field is answered NOT_SUPPORTED in its own
 * nvmlReturn (NVLink counts and throughputs, temperatures, power: nothing
 * simgpu models), the call itself a success, as NVML reports fields a
 * device lacks. */
EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int count,
                                             nvmlFieldValue_t *values)
{
    CHECK_DEV(device, d);
    (void)d;
    if (count < 0 || (count > 0 && !values))
        return NVML_ERROR_INVALID_ARGUMENT;
    struct timeval now;
    gettimeofday(&now, NULL);
    for (int i = 0; i < count; i++) {
        values[i].timestamp = (long long)now.tv_sec * 1000000 + now.tv_usec;
        values[i].latencyUsec = 0;
        values[i].nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    }
    return NVML_SUCCESS;
}

/* ---- the fabric, the platform and confidential computing ---------------------- */

/* A Hopper GPU answers the fabric query; one outside an NVSwitch fabric
 * says so in the state (NOT_SUPPORTED), not in the result. */
EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, nvmlGpuFabricInfoV_t *info)
{
    CHECK_DEV(device, d);
    (void)d;
    if (!info)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (info->version != nvmlGpuFabricInfo_v2 && info->version != nvmlGpuFabricInfo_v3)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    unsigned int version = info->version;
    memset(info, 0, version == nvmlGpuFabricInfo_v2 ? sizeof(nvmlGpuFabricInfo_v2_t)
                                                          : sizeof(nvmlGpuFabricInfo_v3_t));
    info->version = version;
    info->state = NVML_GPU_FABRIC_STATE_NOT_SUPPORTED;
    info->status = NVML_SUCCESS;
    return NVML_SUCCESS;
}


/* Platform information (rack, tray, slot) is a Blackwell-and-later
 * answer; a Hopper card has none. */
UNSUPPORTED(nvmlDeviceGetPlatformInfo, nvmlPlatformInfo_t *info U_)

/* No confidential computing: the environment unavailable, the feature off. */
EXPORT nvmlReturn_t nvmlSystemGetConfComputeState(nvmlConfComputeSystemState_t *cc)
{
    CHECK_INIT();
    if (!cc)
        return NVML_ERROR_INVALID_ARGUMENT;
    cc->environment = NVML_CC_SYSTEM_ENVIRONMENT_UNAVAILABLE;
    cc->ccFeature = NVML_CC_SYSTEM_FEATURE_DISABLED;
    cc->devToolsMode = NVML_CC_SYSTEM_DEVTOOLS_MODE_OFF;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetConfComputeSettings(nvmlSystemConfComputeSettings_t *cc)
{
    CHECK_INIT();
    if (!cc)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (cc->version != nvmlSystemConfComputeSettings_v1)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    cc->environment = NVML_CC_SYSTEM_ENVIRONMENT_UNAVAILABLE;
    cc->ccFeature = NVML_CC_SYSTEM_FEATURE_DISABLED;
    cc->devToolsMode = NVML_CC_SYSTEM_DEVTOOLS_MODE_OFF;
    cc->multiGpuMode = NVML_CC_SYSTEM_MULTIGPU_NONE;
    return NVML_SUCCESS;
}
