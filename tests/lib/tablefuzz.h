/*
 * tablefuzz.h - what the table fuzzers share (test_ipc_fuzz in make test,
 * tests/fuzz/fuzz_table.c under libFuzzer in make fuzz): turning a table's
 * bytes into a mutated table, and what a host and a monitor do with one.
 *
 * A mutated table is the bytes of a real table (a seed) with words changed
 * where they hurt most: the lock word and the guests' generations, the
 * header's counters, slot identities, and the words of the modules' slot,
 * device and global areas.  It is written as a fresh object under a fresh
 * name, so that nothing alive holds any of its liveness locks: every slot
 * in it is a dead process's, and the lock word a dead holder's or garbage.
 */
#ifndef SALUS_TABLEFUZZ_H
#define SALUS_TABLEFUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Apply 1 to 8 random mutations to table[0..len) from *rng (xorshift). */
void tf_mutate(uint8_t *table, size_t len, uint64_t *rng);
/* Apply the mutations that data[0..n) spells (libFuzzer's input): records
 * of a 32-bit offset, a width selector and the value's bytes. */
void tf_patch(uint8_t *table, size_t len, const uint8_t *data, size_t n);
/* Write bytes as the object of table `name` (mode 0600, pages allocated).
 * 0 or -errno. */
int  tf_write_table(const char *name, const uint8_t *bytes, size_t len);
/* The bytes of table `name` into a malloc'd buffer of *len bytes; NULL if
 * it cannot be read. */
uint8_t *tf_read_table(const char *name, size_t *len);
/* A host's life on the table: attach (create), register, lock, reap, take a
 * device index, read every slot and device through ipc, sched and memory,
 * set a policy, release.  Returns whether it got the table (1) or was
 * refused (0): both are fine; crashing and hanging are not. */
int  tf_host(const char *name);
/* What salus-top --json does: collect one snapshot of `name`, print it. */
void tf_monitor(const char *name, FILE *out);

#endif /* SALUS_TABLEFUZZ_H */
