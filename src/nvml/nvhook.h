/*
 * nvhook.h - libsalus's NVML hooks: their whole interface.
 *
 * Tools and frameworks read a GPU's memory and processes through NVML
 * (libnvidia-ml.so.1: nvidia-smi, pynvml, torch.cuda.list_gpu_processes,
 * vLLM's checks).  libsalus answers the functions of nvml.list with the
 * calling process's own view - the same numbers cuMemGetInfo_v2's hook
 * gives (memory's mem_view_uuid) and the processes of its table - and lets
 * every other NVML function through untouched.  Programs reach NVML
 *   - by linking it: they call our exports (LD_PRELOAD puts libsalus first);
 *   - by dlopen + dlsym (pynvml, nvidia-smi): intercept's dlsym override asks
 *     nvh_dlsym_decide, which answers our wrapper of exactly the name asked
 *     (_v2 and _v3 are functions of their own, with their own structs).
 * Each wrapper calls the real function first; an error is the caller's
 * answer unchanged; on success the process's view replaces what the view
 * covers.  Without NVML (no library loaded) nothing changes: a linked call
 * answers NVML_ERROR_UNINITIALIZED, as an NVML that was never initialized.
 * A failure inside a hook fails open: it is said once on stderr and the
 * real answer is returned.
 *
 * Data flows intercept -> nvml -> memory / ipc: intercept's dlsym override
 * and constructor call in; this module reads memory's and ipc's public
 * headers only.
 *
 * Files, each depending only on those after it: wrappers.c (the exports,
 * their addresses and the dlsym decision), peers.c (the table's processes on
 * a device), real.c (the names and the real functions).
 */
#ifndef SALUS_NVHOOK_H
#define SALUS_NVHOOK_H

#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include <nvml.h>
#include <stdint.h>
#include <sys/types.h>

#include "nvml_list.h"

#pragma GCC visibility push(hidden)

/* One id per hooked function, in the list's order (sorted by name). */
#define NVH_ID_ROW_(cat, name, type) NVH_##name,
typedef enum nvh_id {
    NVH_LIST(NVH_ID_ROW_)
    NVH_IDS
} nvh_id_t;

extern const char *const nvh_names[NVH_IDS];
extern void *const nvh_wrappers[NVH_IDS];
/* The id of a hooked name, or -1. */
int nvh_find(const char *name);

/* glibc's dlsym (intercept's real.c), given by libsalus's constructor:
 * every lookup this module makes goes through it, never through the
 * override. */
typedef void *(*nvh_dlsym_fn)(void *handle, const char *name);
void nvh_init(nvh_dlsym_fn real_dlsym);

/* The dlsym override's question for a name starting with "nvml": `found`
 * is what the real dlsym found for (handle, name).  NULL: forward (not
 * hooked, not found, or another NVML than the one already bound); else
 * our wrapper of exactly that name. */
void *nvh_dlsym_decide(void *handle, const char *name, void *found);

/* The real function of id, bound on first need (to the NVML that dlsym
 * found it in, else to libnvidia-ml.so.1 if loaded); NULL when there is
 * none, and *why says which NVML error that is.  *pass = 1: a function of
 * another NVML than the bound one, to call and answer unchanged. */
void *nvh_real(nvh_id_t id, int *pass, nvmlReturn_t *why);
/* A real NVML function that is not hooked (nvmlDeviceGetUUID), from the
 * same library as the bound ones; NULL if none is bound. */
void *nvh_real_other(const char *name);

/* Bind fn, found by a lookup, as id's real function: 0 when it is (now)
 * the bound one, -1 when it is not a function of the NVML in use (or is
 * libsalus's own). */
int nvh_bind(nvh_id_t id, void *fn);

/* Test seam: forget what was bound (the next call binds again). */
void nvh_reset(void);

/* ---- the table's processes (peers.c) -------------------------------------
 * The pids whose rows a process list keeps on the GPU with this UUID: the
 * live processes of the caller's table using that device whose user is the
 * caller's - every user's in a group table (SALUS_GROUP), where the group
 * shares its view on purpose.  So a table private to another user shows
 * the caller only its own.  The count (<= cap), or -1 when there is no
 * table to ask (the caller then keeps the real answer). */
int nvh_table_pids(const uint8_t uuid[16], pid_t *pids, int cap);

/* The UUID of an NVML device, asked of the real NVML
 * ("GPU-xxxxxxxx-xxxx-..." parsed).  0, or -1. */
int nvh_device_uuid(nvmlDevice_t dev, uint8_t out[16]);

#pragma GCC visibility pop

#endif /* SALUS_NVHOOK_H */
