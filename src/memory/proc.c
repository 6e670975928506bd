/*
 * proc.c - the process's side of the memory module (mem_proc_t, in
 * mem_layout.h): one definition, at the bottom of the module's files, so
 * that every other file may depend on it and it on none of them.
 *
 * Locking: as mem_layout.h says of each field.
 */
#include "memory/mem_layout.h"

mem_proc_t mem_p = { .slot = -1, .lock = PTHREAD_MUTEX_INITIALIZER,
                     .graph_lock = PTHREAD_MUTEX_INITIALIZER };
