/*
 * shm_layout.h - the bytes of the arbitration table, private to src/ipc.
 *
 *   header | slots[SHM_MAX_SLOTS] | devices[SHM_MAX_DEVICES]
 *
 * Every part is 64-byte aligned so that a module's hot words do not share a
 * cache line with a peer's.  Layout changes bump SHM_ABI_VERSION.
 *
 * Invariants (under the lock, between operations):
 *   slot.state == SHM_FREE  <=>  no process owns the slot
 *   slot.state != SHM_FREE  ==>  its owner holds the record lock at
 *                                SHM_LIVE_BASE + index, or has died
 *   slot.gen increases by one at every claim: (index, gen) names a process
 *   hdr.devices <= SHM_MAX_DEVICES; dev_uuid[i] for i < devices are distinct
 */
#ifndef SALUS_SHM_LAYOUT_H
#define SALUS_SHM_LAYOUT_H

#include <stdint.h>
#include <unistd.h>

#include "ipc/ipc.h"

#define SHM_MAGIC 0x3142415453554c53ull   /* "SLUSTAB1" */
#define SHM_DIR   "/dev/shm"                /* where glibc's shm_open puts names */

/* Record-lock offsets, far past the end of the object: locks there stand for
 * things, they guard no bytes.  INIT serializes creation; SERIAL+d a
 * device's measures; LIVE+i is the
 * liveness of locker i: i < SHM_MAX_SLOTS is slot i's process, the next
 * SHM_GUESTS bytes are lent to processes that take the table's lock without
 * a slot (a process registering, `salus policy`). */
#define SHM_LOCK_INIT  ((off_t)1 << 40)
#define SHM_LIVE_BASE  (SHM_LOCK_INIT + 64)
#define SHM_GUESTS     64
#define SHM_LOCKERS    (SHM_MAX_SLOTS + SHM_GUESTS)
/* SERIAL+d: device d's serial lock (devices.c). */
#define SHM_SERIAL_BASE (SHM_LIVE_BASE + SHM_LOCKERS)

/* The table's lock word (lock.c):
 *   0                              free
 *   WAITERS? | gen << 8 | (id + 1) held by locker id (< SHM_LOCKERS) whose
 *                                  generation was gen (23 bits) when it locked
 *   anything else                  invalid: treated as a dead holder's */
#define SHM_LOCK_WAITERS   0x80000000u
#define SHM_LOCK_ID_MASK   0xffu
#define SHM_LOCK_GEN_SHIFT 8
#define SHM_LOCK_GEN_MASK  0x7fffffu

typedef struct shm_header {
    uint64_t magic;
    uint32_t abi_version;
    uint32_t ready;              /* 1 once initialized (release store) */
    uint64_t size;               /* sizeof(shm_layout_t) */
    uint32_t max_slots, max_devices;
    uint32_t slot_area, device_area, global_area;
    uint32_t creator_uid;
    int32_t  creator_pid;
    uint32_t pad0;
    uint64_t created_ns;
    uint64_t changes;            /* bumped at every claim / free (monitors) */
    uint32_t devices;            /* dev_uuid[0..devices) are registered; locked */
    uint32_t pad2;
    uint8_t  dev_uuid[SHM_MAX_DEVICES][16];
    uint32_t lock;               /* the lock word: see above and lock.c */
    uint32_t guest_gen[SHM_GUESTS]; /* bumped by each process lent guest i */
    /* 1: another table hands out device d's memory too (claim.c); atomic,
     * set once, never cleared while the table lives. */
    uint8_t  dev_shared[SHM_MAX_DEVICES];
    /* The Salus version that made the table (SALUS_VERSION, NUL-padded), at
     * SHM_VERSION_OFFSET in every version (upgrade.c); zeros in tables of
     * ABI 6 made before it was written.  Set once, at creation. */
    char     version[SHM_VERSION_BYTES];
    uint8_t pad1[60 - SHM_MAX_DEVICES - SHM_VERSION_BYTES];
} __attribute__((aligned(64))) shm_header_t;
#define SHM_VERSION_OFFSET 612

typedef struct shm_slot_id {
    uint32_t state;              /* shm_state_t; atomic */
    uint32_t gen;
    int32_t  pid;
    uint32_t uid;
    uint64_t start_ticks;
    uint64_t registered_ns;
    char     name[SHM_NAME_BYTES];
} __attribute__((aligned(64))) shm_slot_id_t;

typedef struct shm_slot {
    shm_slot_id_t id;
    uint8_t area[SHM_AREAS][SHM_SLOT_AREA_BYTES] __attribute__((aligned(64)));
} shm_slot_t;

typedef struct shm_device {
    uint8_t area[SHM_AREAS][SHM_DEVICE_AREA_BYTES] __attribute__((aligned(64)));
} shm_device_t;

typedef struct shm_layout {
    shm_header_t hdr;
    uint8_t global[SHM_AREAS][SHM_GLOBAL_AREA_BYTES] __attribute__((aligned(64)));
    shm_slot_t slots[SHM_MAX_SLOTS];
    shm_device_t devices[SHM_MAX_DEVICES];
} shm_layout_t;

/* The process-local handle of a mapped table. */
struct shm_table {
    int fd;
    int read_only;
    shm_layout_t *map;
    char name[SHM_TABLE_NAME_BYTES];
    int self;                    /* our slot, -1 if none */
    pid_t self_pid;              /* the process that claimed `self` (fork check) */
    int full;                    /* the last claim found every slot taken */
    /* The guest locker id lent to this process (lock.c), -1 if none; its
     * generation; the threads using it; a spin word holding the pid of the
     * thread's process that changes these (a parent's, after fork, is stale). */
    int guest;
    pid_t guest_pid;
    uint32_t guest_gen;
    int guest_users;
    pid_t guest_mu;
    struct {
        shm_reap_fn reap;
        shm_repair_fn repair;
        shm_check_fn check;      /* debug builds call it at each lock and unlock */
        void *ctx;
    } hooks[SHM_AREAS];
    /* CUDA ordinal -> device index + 1 (0: not looked up yet); devices.c. */
    int8_t ordinal_index[SHM_MAX_ORDINALS];
    int whole_at_lock;           /* debug builds: the checks passed at the lock */
    void (*repair_locked)(shm_table_t *t);   /* slots.c's, set at open */
};

/* slots.c, for table.c, which hands it to lock.c as t->repair_locked (the
 * lock repairs after a dead holder; slots.c takes the lock: a pointer, not a
 * name, keeps lock.c below slots.c). */
void shm_repair_locked(shm_table_t *t);

/* Our slot, if this process (not a parent before fork) claimed it; -1. */
static inline int shm_self_now(const shm_table_t *t)
{
    return t && t->self >= 0 && t->self_pid == getpid() ? t->self : -1;
}
/* lock.c, for table.c: give back the guest id (closing the table). */
void shm_lock_forget(shm_table_t *t);
#ifdef SALUS_DEBUG
/* table.c, for lock.c: the modules' check hooks, just after a lock is taken
 * and just before it is given back (debug builds only). */
void shm_debug_check_lock(shm_table_t *t);
void shm_debug_check_unlock(shm_table_t *t);
#endif
/* guard.c: survive the table's object shrinking under its mapping.  add
 * after mapping, remove before unmapping; lost once a peer shrank it. */
void shm_guard_add(shm_table_t *t);
void shm_guard_remove(shm_table_t *t);
int  shm_guard_lost(const shm_table_t *t);

#endif /* SALUS_SHM_LAYOUT_H */
