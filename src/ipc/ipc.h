/*
 * ipc.h - the arbitration table: one POSIX shared-memory object per user (or
 * per named group) through which the processes sharing a GPU agree on who
 * runs and how much memory each holds.  There is no daemon: every decision
 * is taken by the processes themselves, under the table's lock, and survives
 * any of them being killed.
 *
 * This module is the mechanism only: the table's creation, attachment and
 * validation, its lock, one slot per process with a liveness test that PID
 * reuse cannot fool, the reaping of dead slots, and futex waits.  What the
 * slots and devices hold beyond a process's identity belongs to the modules
 * that use them: each module (sched, memory) owns an opaque area in every
 * slot, in every device and in the table's header, lays it out itself and
 * checks every value it reads back, since a peer may have died mid-write.
 *
 * Naming: /salus-<uid> by default, mode 0600: a user's table is private.
 * SALUS_GROUP=<group> shares one table, /salus-group-<group>, mode 0660,
 * among the members of that group.  SALUS_TABLE=<name> names another table.
 */
#ifndef SALUS_IPC_H
#define SALUS_IPC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/atomic.h"

/* Sizes fixed by the ABI version: a table of another version is refused. */
#define SHM_ABI_VERSION        7u
#define SHM_MAX_SLOTS          128   /* processes sharing one table */
#define SHM_MAX_DEVICES        16
#define SHM_SLOT_AREA_BYTES    1024  /* per module, per slot */
#define SHM_DEVICE_AREA_BYTES  2048  /* per module, per device */
#define SHM_GLOBAL_AREA_BYTES  1024  /* per module, once */
#define SHM_NAME_BYTES         32    /* process name, NUL included */
#define SHM_TABLE_NAME_BYTES   64

/* The modules that own areas. */
typedef enum shm_area {
    SHM_AREA_SCHED = 0,
    SHM_AREA_MEM = 1,
    SHM_AREAS
} shm_area_t;

/* What a process is doing, as peers and salus-top see it. */
typedef enum shm_state {
    SHM_FREE = 0,       /* slot unused */
    SHM_IDLE,           /* registered, not using the GPU */
    SHM_RUNNING,        /* holds the GPU (or runs under pack) */
    SHM_WAIT_GPU,       /* waiting for the lease */
    SHM_WAIT_MEM,       /* waiting for memory (admission or a limit) */
    SHM_STATES
} shm_state_t;

const char *shm_state_name(shm_state_t state);

/* A process's identity, as written in its slot. */
typedef struct shm_ident {
    pid_t pid;
    uid_t uid;
    uint32_t gen;              /* claim count of the slot: (slot, gen) names a process */
    shm_state_t state;
    uint64_t start_ticks;      /* /proc/<pid>/stat starttime, for display */
    uint64_t registered_ns;    /* CLOCK_MONOTONIC at registration */
    char name[SHM_NAME_BYTES]; /* comm of the process, NUL-terminated */
} shm_ident_t;

typedef struct shm_table shm_table_t;

/* Called with the table locked, for a slot whose process has died, before
 * the slot is freed: the module gives back what the process held (a lease,
 * memory).  `slot_area` is the dead slot's area of that module. */
typedef void (*shm_reap_fn)(shm_table_t *t, int slot, void *slot_area, void *ctx);
/* Called with the table locked after a process died holding the lock: the
 * module makes its shared state consistent again (rebuild sums from slots). */
typedef void (*shm_repair_fn)(shm_table_t *t, void *ctx);
/* Called with the table locked, after each lock and before each unlock, in a
 * debug build only (SALUS_DEBUG): NULL when the module's invariants hold,
 * else a description of the first violation.  Broken at the lock: said once
 * (someone else broke it).  Whole at the lock and broken at the unlock: said
 * at error level at each such unlock (the holder broke it; never an abort).  A release build never
 * calls a check. */
typedef const char *(*shm_check_fn)(shm_table_t *t, void *ctx);

/* ---- opening -------------------------------------------------------------
 * Errors are negative errno values; unless quiet, the message has been
 * logged once, naming the table and what to do (remove a stale table with
 * `salus reset`, ...).  The options are taken as given: only a NULL opts
 * (the process's own table) reads SALUS_TABLE and SALUS_GROUP. */

typedef struct shm_open_opts {
    const char *name;      /* NULL: the default name (SALUS_TABLE / SALUS_GROUP / uid) */
    const char *group;     /* the group sharing the table; NULL: private to the user */
    int create;            /* create the table when it does not exist */
    int read_only;         /* monitors: map read-only, never claim a slot */
    int quiet;             /* log nothing: the caller says errors its own way */
} shm_open_opts_t;

/* The table of this process, opened (created if need be) on first call from
 * SALUS_TABLE / SALUS_GROUP; NULL when it cannot be used, which has been said
 * once: the caller then passes calls through.  Shared by sched and memory. */
shm_table_t *shm_process_table(void);

/* The table's name as SALUS_TABLE / SALUS_GROUP / the uid give it (an
 * invalid one is said unless quiet). */
int  shm_default_name(char *buf, size_t len, int quiet);
int  shm_open_table(const shm_open_opts_t *opts, shm_table_t **out);
void shm_close_table(shm_table_t *t);
const char *shm_table_name(const shm_table_t *t);
/* Remove a table by name (salus reset, the tests' teardown): its object,
 * then the GPU claims naming it that no process holds (shm_forget_claims).
 * 0, or -errno of the removal (-ENOENT: no such table; its claims are
 * forgotten all the same). */
int  shm_unlink_table(const char *name);

/* ---- tables of other versions (upgrade.c) ---------------------------------
 * What any version's table says of itself, read without its layout: its
 * table ABI, the Salus version that made it, and how many processes use it
 * (their liveness locks).  0 and *out, or -errno (-ENOENT: no such table,
 * -EPROTO: not a regular file). */
#define SHM_VERSION_BYTES 16
typedef struct shm_table_about {
    uint32_t abi;                      /* 0: not a Salus table (bad magic) */
    int live;                          /* processes using it; -1 unknown */
    char version[SHM_VERSION_BYTES];   /* "0.3.0"; "": it does not say (older) */
} shm_table_about_t;
int  shm_table_about(const char *name, shm_table_about_t *out);
/* The table a process joins at `name` (shm_process_table): that table; or,
 * when an older version's table holds the name, the same made anew if no
 * process uses it, else the side table "<name>.abi<ABI>" of this version
 * until its processes end (README, "Upgrading"); said once.  A newer
 * version's table is left alone (-EPROTO, said).  0 and *out, or -errno,
 * said (the process then passes calls through). */
int  shm_open_for_process(const char *name, const char *group, shm_table_t **out);

/* ---- the lock ------------------------------------------------------------
 * A lock of our own over a futex word in the table guards structural
 * changes: claiming and freeing slots, leases, admissions.  Counters and
 * accounting use atomics and need no lock.  shm_lock waits at most 3 s (a
 * peer that holds the lock that long is hung or hostile: the caller fails
 * open, -ETIMEDOUT); when the previous holder died, or the word holds what
 * no holder can have written, it runs the repair functions before returning.
 * Not recursive; a read-only table cannot be locked (-EROFS). */
int  shm_lock(shm_table_t *t);
/* The same within wait_ns (at most the 3 s), saying nothing on time-out:
 * for a process that timed out once and now retries now and then. */
int  shm_lock_retry(shm_table_t *t, uint64_t wait_ns);
void shm_unlock(shm_table_t *t);

void shm_set_hooks(shm_table_t *t, shm_area_t area, shm_reap_fn reap,
                   shm_repair_fn repair, void *ctx);
/* The module's invariant check (given the same ctx as its other hooks). */
void shm_set_check(shm_table_t *t, shm_area_t area, shm_check_fn check);

/* ---- slots ----------------------------------------------------------------
 * A process claims one slot for its life.  It holds a POSIX record lock on a
 * byte that stands for the slot: the kernel drops it when the process dies,
 * fork() does not pass it on, and a new process with a recycled pid does not
 * hold it.  Liveness is "that byte is locked", tested with F_GETLK. */

/* The calling process's slot, claimed on first call; -1 if the table is
 * full or unusable (said once).  A forked child has none until it calls. */
int  shm_self(shm_table_t *t);
/* The calling process's slot if it has one, else -1; never claims. */
int  shm_self_peek(const shm_table_t *t);
/* 1 when the last shm_self of this process found every slot taken (a later
 * one may find one free), 0 otherwise. */
int  shm_table_full(const shm_table_t *t);
/* Give the slot back: what it held goes to the others at once (the modules'
 * reap functions).  Done at a normal exit of the process whose table
 * shm_process_table opened; the slot is claimable once the process has ended
 * or closed the table. */
void shm_release_self(shm_table_t *t);
/* 1 when the slot's process is alive, 0 when dead or free. */
int  shm_slot_alive(shm_table_t *t, int slot);
/* Reap every dead slot (reap functions, then free it). Takes the lock
 * unless already held (`locked`). Returns the number reaped, or <0. */
int  shm_reap_dead(shm_table_t *t, int locked);

/* A validated copy of a slot's identity; -1 when free or invalid. */
int  shm_slot_ident(shm_table_t *t, int slot, shm_ident_t *out);
/* Generation of a slot (0 when free). */
uint32_t shm_slot_gen(shm_table_t *t, int slot);
void shm_set_state(shm_table_t *t, int slot, shm_state_t state);

/* ---- devices ---------------------------------------------------------------
 * One GPU has one index in the table, whatever ordinal each process sees it
 * under (CUDA_VISIBLE_DEVICES changes them): the table knows devices by
 * UUID, and every module uses this index for its device areas, so that
 * their views of one GPU always agree.  An index is never given back. */

/* The index of the device with this UUID, registered if new; with the table
 * locked.  -1 when all SHM_MAX_DEVICES indices are taken. */
int  shm_device_index_locked(shm_table_t *t, const uint8_t uuid[16]);
/* The UUID of device index d: 0 and *out written, or -1 when unused. */
int  shm_device_uuid(shm_table_t *t, int device, uint8_t out[16]);

/* The device index of CUDA ordinal `ordinal` of this process (0 ..
 * SHM_MAX_ORDINALS - 1), found by its identity (drv_device_uuid) and
 * registered if new: the one ordinal -> device cache that sched and memory
 * share, per table, so a process asks the driver once per device.  Takes the
 * table's lock on a device's first lookup only.  -1: bad ordinal or every
 * index taken; -2: the table's lock cannot be taken. */
#define SHM_MAX_ORDINALS 64
struct drv;
int  shm_device_of(shm_table_t *t, const struct drv *drv, int ordinal);

/* Two tables on one GPU.  A GPU's first table names itself in a claim file,
 * /dev/shm/salus-gpu-<uuid in hex> (world-readable: tables of other users
 * must see it), which each of its processes holds a read lock on while it
 * lives; a process of another table that finds the claim naming a table
 * and held marks the device shared in its own table (and in the other's,
 * when it may write it) and says so once.  A claim nobody holds is stale
 * and taken over.  shm_device_of checks it at a process's first lookup of an
 * ordinal, outside the table's lock.  A process's first claim also sweeps
 * the claims of tables that are gone (shm_forget_claims(NULL)), so that
 * tables removed by hand leave no claims behind for long.  Returns 1 shared,
 * 0 ours, -1 not known (no /dev/shm, a claim we cannot read). */
int  shm_device_claim(shm_table_t *t, int device, const uint8_t uuid[16]);
/* 1 when device index d is marked shared with another table, else 0. */
int  shm_device_shared(shm_table_t *t, int device);
/* The claim file's path for a GPU UUID (buf of SHM_CLAIM_PATH_BYTES). */
#define SHM_CLAIM_PATH_BYTES 64
void shm_claim_path(const uint8_t uuid[16], char *buf, size_t len);
/* Remove the claims that name table `name` (NULL: any table whose object is
 * gone) and that no process holds: never a live table's, never another
 * user's (this user cannot write it), never one this process holds.  The
 * number removed, or -errno (-EINVAL: a bad name; no /dev/shm). */
int  shm_forget_claims(const char *name);

/* A device's serial lock: what processes must not do at once on device
 * index d (memory's reading of the driver around a context made, so that
 * one process's reading holds no other's context).  A POSIX record lock on
 * a byte of the table's object for the device: the kernel drops it when the
 * holder dies; per process, so the threads of one process share it.  Waits
 * up to timeout_ms (polling each millisecond): 0 held, -1 not (a holder
 * that long in the driver, a read-only table, a bad index). */
int  shm_device_serial_lock(shm_table_t *t, int device, int timeout_ms);
void shm_device_serial_unlock(shm_table_t *t, int device);
/* Wait, as long, until no other process holds it (without taking it). */
int  shm_device_serial_wait(shm_table_t *t, int device, int timeout_ms);

/* ---- module areas --------------------------------------------------------
 * 64-byte aligned, zeroed when the table is made; a slot's areas are zeroed
 * when the slot is claimed.  slot/device out of range -> NULL. */
void *shm_slot_area(shm_table_t *t, int slot, shm_area_t area);
void *shm_device_area(shm_table_t *t, int device, shm_area_t area);
void *shm_global_area(shm_table_t *t, shm_area_t area);

/* ---- futex waits -----------------------------------------------------------
 * On a 32-bit word of the table (process-shared futex).  wait returns 0 when
 * woken or when *word != expected, ETIMEDOUT past timeout_ns (0: no wait
 * limit), EINTR on a signal. */
int  shm_futex_wait(uint32_t *word, uint32_t expected, uint64_t timeout_ns);
int  shm_futex_wake(uint32_t *word, int count);

#endif /* SALUS_IPC_H */
