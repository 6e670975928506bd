/*
 * test_memory_lib.h - what the memory tests share: a fake driver (the
 * module's seam), allocation helpers that go through the module as the
 * interception layer does, checks that work in forked children, and the
 * table's accounting read back for assertions.
 */
#ifndef TEST_MEMORY_LIB_H
#define TEST_MEMORY_LIB_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "memory/memory.h"

#define MB (1ull << 20)

/* In a forked child: a failed check says where and exits with 1 (cmocka's
 * asserts would unwind into the parent's test runner). */
#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "child %d: %s:%d: check failed: %s\n", (int)getpid(), \
                    __FILE__, __LINE__, #cond);                                  \
            _exit(1);                                                            \
        }                                                                        \
    } while (0)
#define CHECK_EQ(a, b)                                                           \
    do {                                                                         \
        unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b); \
        if (a_ != b_) {                                                          \
            fprintf(stderr, "child %d: %s:%d: %s == %llu, expected %s == %llu\n", \
                    (int)getpid(), __FILE__, __LINE__, #a, a_, #b, b_);          \
            _exit(1);                                                            \
        }                                                                        \
    } while (0)

/* The test's table name: fresh for each test, unlinked before and after
 * it by fk_setup and fk_teardown, cmocka's set-up and tear-down. */
extern char fk_table[64];
int fk_setup(void **state);
int fk_teardown(void **state);

/* The fake driver of this process. */
typedef struct fake_drv {
    int device;              /* current context's ordinal; -1: no context */
    uint64_t capacity;       /* cuDeviceTotalMem_v2 */
    int fail_allocs;         /* the next n allocations fail (OUT_OF_MEMORY) */
    uint64_t pitch_size;     /* true size of the next pitched allocation, 0: bound */
    int no_uuid;             /* device_get_uuid absent */
    uint64_t base;           /* addresses this process hands out start here */
    uint64_t force_addr;     /* nonzero: the next allocation gets this address */
    uint64_t gone_below;     /* pointers and arrays below this the driver forgot */
    uint64_t pool_reserved;  /* what FK_POOL, the current pool, reserves */
    int pool_reads;          /* its CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT reads */
} fake_drv_t;
/* Every device's current pool in the fake driver. */
#define FK_POOL ((CUmemoryPool)(uintptr_t)0x900d)
extern fake_drv_t fk;

/* The driver table over fk. */
drv_t fk_driver(void);
/* Open (create) the named table and start the module on it with fk. */
shm_table_t *fk_start(const char *table);

/* Allocate / free as the interception layer does (begin, driver, end). */
CUresult fk_alloc(mem_kind_t kind, uint64_t bytes, uint64_t *handle);
CUresult fk_free(mem_kind_t kind, uint64_t handle);
/* A stream-ordered allocation from `pool` (NULL: the current pool, FK_POOL)
 * as the interception layer makes it; the driver fails it when
 * fk.fail_allocs says so. */
CUresult fk_alloc_async(CUmemoryPool pool, uint64_t bytes, uint64_t *ptr);

/* What the table says about a slot on device 0 (read under the lock). */
typedef struct fk_acct {
    uint64_t granted, spare, used, reserved, limit, peak;
} fk_acct_t;
void fk_acct(shm_table_t *t, int slot, int d, fk_acct_t *out);
/* Device-wide, over live slots (under the lock). */
typedef struct fk_devsum {
    uint64_t used, committed, budget, capacity;
} fk_devsum_t;
void fk_devsum(shm_table_t *t, int d, fk_devsum_t *out);
/* Check the invariants of mem_layout.h (mem_check_locked) on every device
 * (in a child: a violation is said and exits). */
void fk_check_invariants(shm_table_t *t);

/* Calls of the driver's free functions made by the module (undo). */
int fk_undone(void);
/* Unset every SALUS_MEM_* variable and reset fk to its defaults. */
void fk_reset(void);

/* Children: fork, run fn(arg) in the child (exit status is its result). */
pid_t fk_fork(int (*fn)(void *), void *arg);
/* Wait for a child, up to ms; its exit status, 128+signal, -1 on timeout. */
int fk_wait(pid_t pid, int ms);

/* Pipes to sequence children: a byte at a time. */
void fk_send(int fd, char c);
char fk_recv(int fd);

/* Redirect stderr to a file of the test's tmpdir; returns its path. */
const char *fk_capture_stderr(char *path, size_t len);

uint64_t fk_now_ms(void);

#endif /* TEST_MEMORY_LIB_H */
