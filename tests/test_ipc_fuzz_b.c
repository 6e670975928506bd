/*
 * test_ipc_fuzz_b.c - the second half of the table fuzzer's tables: the
 * tests of test_ipc_fuzz.c (which says why there are two binaries), with
 * FUZZ_PART 1.
 */
#define FUZZ_PART 1
#include "test_ipc_fuzz.c"
