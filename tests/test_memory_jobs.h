/*
 * test_memory_jobs.h - what the paging tests that run pageclient jobs over
 * simgpu share (test_memory_pagewords, test_memory_pagecgroup): reading a
 * job's output, waiting for it to hold its memory, and its end with every
 * byte intact, each with a deadline and the job's output in the failure.
 * test_memory_jobs.c.
 */
#ifndef TEST_MEMORY_JOBS_H
#define TEST_MEMORY_JOBS_H

#include "lib/testutil.h"

/* 1 when the file at path holds word. */
int pj_file_has(const char *path, const char *word);
/* Fail the test with what, and the job's stdout and stderr. */
void pj_fail_with(tu_proc_t *p, const char *what);
/* Until the job says "ready" (its memory holds its pattern), up to ms;
 * fails the test with who when it exits or the deadline passes first. */
void pj_await_ready(tu_proc_t *p, int ms, const char *who);
/* The job ends within ms, every call a success and every byte intact
 * ("done 0 bad 0"); else the test fails, naming who and how (hung and
 * killed at its deadline, SIGKILLed, or failed). */
void pj_finish(tu_proc_t *p, int ms, const char *who);

#endif
