/*
 * gpuinfo.c - what the NVIDIA kernel driver says of a GPU, found by its UUID,
 * so that salus-top's device line and metrics name the GPU as nvidia-smi and
 * DCGM exporter do: its model, its index (gpu="0", in PCI bus order, as NVML
 * counts by default) and its device minor (device="nvidia0").
 *
 * Divided into: formatting a UUID; reading one GPU's information file;
 * top_gpu_info.
 *
 * The tools never load the CUDA driver; the kernel driver's files under
 * /proc/driver/nvidia/gpus/<PCI bus id>/information ("Model:", "GPU UUID:",
 * "Device Minor:") are plain text.  Without them (simgpu, a container that
 * hides /proc/driver) the GPU is known by its UUID alone.  No lock: the tool
 * is single-threaded.
 */
#include "top.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define GPUS_DIR "/proc/driver/nvidia/gpus"

/* ---- formatting a UUID ----------------------------------------------------- */

void top_uuid_text(const uint8_t uuid[16], char *buf, size_t len)
{
    static const int dash_after[] = { 4, 6, 8, 10 };
    size_t at = (size_t)snprintf(buf, len, "GPU-");
    for (int i = 0, k = 0; i < 16 && at + 3 < len; i++) {
        if (k < 4 && i == dash_after[k]) {
            buf[at++] = '-';
            k++;
        }
        at += (size_t)snprintf(buf + at, len - at, "%02x", uuid[i]);
    }
}

/* ---- one GPU's information file ---------------------------------------------- */

/* The value after "key:" on its line, trimmed, sanitized, in buf. */
static int field(const char *text, const char *key, char *buf, size_t len)
{
    const char *at = strstr(text, key);
    if (!at || len == 0)
        return -1;
    at += strlen(key);
    while (*at == ' ' || *at == '\t')
        at++;
    size_t n = strcspn(at, "\n");
    while (n > 0 && (at[n - 1] == ' ' || at[n - 1] == '\t' || at[n - 1] == '\r'))
        n--;
    if (n >= len)
        n = len - 1;
    memcpy(buf, at, n);
    buf[n] = '\0';
    top_sanitize(buf);
    return 0;
}

static int read_info(const char *path, char *text, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(text, 1, len - 1, f);     /* bounded: the file is small */
    fclose(f);
    text[n] = '\0';
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ---- top_gpu_info ------------------------------------------------------------ */

/* The kernel's directory name of a GPU (0000:3b:00.0) as NVML and DCGM's
 * pci_bus_id write it (00000000:3B:00.0); "" when it is not one. */
static void bus_id(const char *dir, char *out, size_t len)
{
    unsigned dom, bus, dev, fn;
    char end;
    out[0] = '\0';
    if (sscanf(dir, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &end) == 4 && bus < 256 &&
        dev < 32 && fn < 8)
        snprintf(out, len, "%08X:%02X:%02X.%X", dom, bus, dev, fn);
}

int top_gpu_info(const char *root, const char *uuid, top_gpu_info_t *out)
{
    DIR *dir = opendir(root ? root : GPUS_DIR);
    if (!dir)
        return -1;
    char *names[64];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL && n < 64)
        if (e->d_name[0] != '.' && (names[n] = strdup(e->d_name)) != NULL)
            n++;
    closedir(dir);
    qsort(names, (size_t)n, sizeof *names, cmp_names);   /* PCI bus order: NVML's index */
    int rc = -1;
    for (int i = 0; i < n && rc != 0; i++) {
        char path[512], text[4096], id[64], minor[16];
        snprintf(path, sizeof path, "%s/%s/information", root ? root : GPUS_DIR, names[i]);
        if (read_info(path, text, sizeof text) != 0 || field(text, "GPU UUID:", id, sizeof id) ||
            strcasecmp(id, uuid) != 0)
            continue;
        top_gpu_info_t g = { .index = i, .minor = -1 };
        if (field(text, "Model:", g.model, sizeof g.model) != 0)
            g.model[0] = '\0';
        if (field(text, "Device Minor:", minor, sizeof minor) == 0)
            g.minor = atoi(minor);
        bus_id(names[i], g.pci_bus_id, sizeof g.pci_bus_id);
        *out = g;
        rc = 0;
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    return rc;
}
