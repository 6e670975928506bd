/*
 * test_memory_vmm_lib.h - what the tests of virtualized memory over simgpu
 * share (test_memory_vmm, test_memory_pagekill, test_memory_async): a
 * child's set-up (a simgpu state, a context, a table, paging on, memory
 * started through memory.h), the device's free memory and the table's
 * figure of this process, and a pattern written and checked through the
 * driver.  The checks return 1 and say what failed on stderr, for children
 * that tell their parent a result.
 */
#ifndef SALUS_TEST_MEMORY_VMM_LIB_H
#define SALUS_TEST_MEMORY_VMM_LIB_H

#include <stdint.h>
#include <stdio.h>

#include "vmem/vmem_int.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define CK(x) do { CUresult rc_ = (x); if (rc_ != CUDA_SUCCESS) { \
    fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, (int)rc_); return 1; } } while (0)
#define TRUE(x) do { if (!(x)) { \
    fprintf(stderr, "%s:%d: not true: %s\n", __FILE__, __LINE__, #x); return 1; } } while (0)

/* Changes the driver's table before memory starts, when set (a child's
 * own: it is set after the fork). */
extern void (*patch_drv)(drv_t *d);
/* In the child: simgpu of `mem` bytes, a context, a table (these names, or
 * new ones when NULL), paging on.  0, or 1 with what failed said. */
int setup_named(const char *mem, const char *state_name, const char *table_name);
/* In the parent: name a child's simgpu state and table (tag-sim, tag-tab,
 * into state and table, each of cap bytes: the parent removes them at its
 * exit), fork fn(arg) as a child that tells its result, SIGKILL it once
 * told; the result (0: passed), or -1 when the child could not start. */
int run_teller(const char *tag, char *state, char *table, size_t cap, int (*fn)(void *),
               void *arg);
/* The driver's free memory on device 0. */
uint64_t dev_free(void);
/* The table's figure of this process's use of device 0 (UINT64_MAX: none). */
uint64_t table_used(void);

/* The pattern: a function of the device address, never 0. */
static inline uint64_t pat(uint64_t addr, uint64_t seed)
{
    return ((addr >> 3) * 0x9e3779b97f4a7c15ull ^ seed) | 1;
}
/* Write the pattern over [p, p + n), through buf of cap bytes; check it. */
int fill(CUdeviceptr p, uint64_t n, uint64_t seed, uint64_t *buf, size_t cap);
int check(CUdeviceptr p, uint64_t n, uint64_t seed, uint64_t *buf, size_t cap);

#endif
