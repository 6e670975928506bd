/*
 * peers.c - what NVML's process lists keep: the processes of the caller's
 * table on a GPU, and an NVML device's identity (its UUID, as the table
 * knows GPUs).
 *
 * Divided into: the device's UUID; the table's processes.
 *
 * No lock: the table is read through ipc's and memory's validated copies
 * (shm_slot_ident, mem_view_slot, mem_view_device), made without the
 * table's lock, as salus-top reads it; a slot that changes under a copy is
 * left out of this answer and in the next.
 */
#include "nvml/nvhook.h"
#include "ipc/ipc.h"
#include "memory/memory.h"
#include "util/util.h"

#include <string.h>
#include <unistd.h>

/* ---- the device's UUID --------------------------------------------------- */

static int hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (or "MIG-..."): the 16 bytes. */
static int parse_uuid(const char *text, uint8_t out[16])
{
    const char *p = strchr(text, '-');
    if (!p)
        return -1;
    p++;
    uint8_t b[16];
    for (int i = 0; i < 16; i++) {
        if (*p == '-')
            p++;
        int hi = hex(p[0]), lo = hi < 0 ? -1 : hex(p[1]);
        if (hi < 0 || lo < 0)
            return -1;
        b[i] = (uint8_t)(hi << 4 | lo);
        p += 2;
    }
    if (*p)
        return -1;
    memcpy(out, b, 16);
    return 0;
}

int nvh_device_uuid(nvmlDevice_t dev, uint8_t out[16])
{
    typedef nvmlReturn_t (*uuid_fn)(nvmlDevice_t, char *, unsigned int);
    uuid_fn fn = (uuid_fn)nvh_real_other("nvmlDeviceGetUUID");
    char text[NVML_DEVICE_UUID_BUFFER_SIZE];
    if (!fn || fn(dev, text, sizeof text) != NVML_SUCCESS)
        return -1;
    text[sizeof text - 1] = 0;
    return parse_uuid(text, out);
}

/* ---- the table's processes ------------------------------------------------- */

/* The table's index of the GPU with this UUID, or -1. */
static int table_device(shm_table_t *t, const uint8_t uuid[16])
{
    for (int d = 0; d < SHM_MAX_DEVICES; d++) {
        uint8_t u[16];
        if (shm_device_uuid(t, d, u) == 0 && memcmp(u, uuid, 16) == 0)
            return d;
    }
    return -1;
}

int nvh_table_pids(const uint8_t uuid[16], pid_t *pids, int cap)
{
    shm_table_t *t = shm_process_table();
    if (!t)
        return -1;
    int d = table_device(t, uuid);
    if (d < 0)
        return 0;                   /* no process of the table uses that GPU */
    int group = util_var_text(UTIL_VAR_GROUP) != NULL;
    uid_t me = getuid();
    /* Liveness is a record lock that F_GETLK never reports to its holder:
     * the caller's own slot is alive by asking. */
    int self = shm_self_peek(t);
    int n = 0;
    for (int s = 0; s < SHM_MAX_SLOTS && n < cap; s++) {
        shm_ident_t id;
        mem_slot_view_t v;
        if (shm_slot_ident(t, s, &id) != 0 || (!group && id.uid != me) ||
            mem_view_slot(t, s, &v) != 0 || !(v.devices & (1u << d)) ||
            (s != self && !shm_slot_alive(t, s)))
            continue;
        pids[n++] = id.pid;
    }
    return n;
}
