/*
 * ipc_wire.h - what an exporter (ipc.c) and an importer (ipcopen.c) of
 * paged memory over CUDA IPC say to each other: libsalus's handle, the
 * request and the answer on the exporter's socket, the handle's checksum
 * and the socket's name.  Private to src/vmem; ipc.c says the protocol.
 */
#ifndef SALUS_VMEM_IPC_WIRE_H
#define SALUS_VMEM_IPC_WIRE_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#define IPC_MAGIC    0x53414c53u       /* "SLAS" */
#define IPC_VERSION  1u
#define IPC_MAX_FDS  2                 /* a big chunk, or the granules of a small one */
#define IPC_DEADLINE_MS 30000          /* an importer's wait for the exporter (which
                                          may be paging, its lock held, for seconds) */

typedef struct ipc_handle {
    uint32_t magic, version;
    uint32_t pid, check;               /* check: FNV-1a of every other byte */
    uint64_t start;                    /* the exporter's start time (clock ticks) */
    uint64_t token;                    /* the exporter's random word */
    uint64_t id;                       /* the allocation's id in the exporter */
    uint64_t offset;                   /* of the pointer in the allocation */
    uint64_t size;                     /* the allocation's */
} ipc_handle_t;
_Static_assert(sizeof(ipc_handle_t) <= CU_IPC_HANDLE_SIZE, "IPC handle");

/* What an importer asks, and what the exporter answers (with the fds). */
typedef struct ipc_req {
    uint32_t magic, version;
    uint64_t token, id;
} ipc_req_t;

/* Why a refused request was refused (ipc_rep_t.why). */
enum { IPC_WHY_REFUSED = 0,           /* freed, or never exported */
       IPC_WHY_BUSY = 1 };            /* the exporter serves all the imports it can
                                         (chunk: how many) */

typedef struct ipc_rep {
    uint32_t magic;
    int32_t status;                    /* a CUresult */
    uint32_t nfds, why;                /* why: IPC_WHY_*, when status is not success */
    uint64_t chunk;                    /* each descriptor's bytes */
    uint64_t delta;                    /* the allocation's base in the chunks */
    uint64_t size;                     /* the allocation's */
} ipc_rep_t;

static inline uint32_t ipc_checksum(const ipc_handle_t *h)
{
    ipc_handle_t c = *h;
    const unsigned char *b = (const unsigned char *)&c;
    uint32_t x = 2166136261u;
    c.check = 0;
    for (size_t i = 0; i < sizeof c; i++)
        x = (x ^ b[i]) * 16777619u;
    return x;
}

static inline void ipc_socket_name(struct sockaddr_un *sa, socklen_t *len, uint32_t pid, uint64_t start)
{
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    int n = snprintf(sa->sun_path + 1, sizeof sa->sun_path - 1, "salus-ipc-%u-%llu", pid,
                     (unsigned long long)start);
    *len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

#endif
