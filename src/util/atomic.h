/*
 * atomic.h - the atomics of libsalus, named by what they do and the memory
 * order they need, over GCC's __atomic builtins (so they compile to the
 * same instructions): a relaxed load is util_load_relaxed(p), a release
 * store util_store_release(p, v).  The order is part of the name so that a
 * reader sees it at the call and a reviewer can grep for it; the ordering
 * argument stays in the comment above the code that needs it.
 *
 *   util_load_{relaxed,acquire,seq}(p)             *p
 *   util_store_{relaxed,release,seq}(p, v)         *p = v
 *   util_{add,sub,or,and}_{relaxed,release,seq}(p, v)
 *                                                  *p op= v, the new value
 *   util_fetch_add_{relaxed,seq}(p, v)             *p += v, the old value
 *   util_xchg_{relaxed,acquire,acq_rel,seq}(p, v)  *p = v, the old value
 *   util_fence_acquire()
 * Compare-and-swap keeps the builtin (its two orders and its weak flag
 * are each argued where it is used).
 */
#ifndef SALUS_UTIL_ATOMIC_H
#define SALUS_UTIL_ATOMIC_H

#define util_load_relaxed(p)       __atomic_load_n((p), __ATOMIC_RELAXED)
#define util_load_acquire(p)       __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define util_load_seq(p)           __atomic_load_n((p), __ATOMIC_SEQ_CST)

#define util_store_relaxed(p, v)   __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define util_store_release(p, v)   __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define util_store_seq(p, v)       __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)

#define util_add_relaxed(p, v)     __atomic_add_fetch((p), (v), __ATOMIC_RELAXED)
#define util_add_release(p, v)     __atomic_add_fetch((p), (v), __ATOMIC_RELEASE)
#define util_add_seq(p, v)         __atomic_add_fetch((p), (v), __ATOMIC_SEQ_CST)
#define util_sub_relaxed(p, v)     __atomic_sub_fetch((p), (v), __ATOMIC_RELAXED)
#define util_sub_release(p, v)     __atomic_sub_fetch((p), (v), __ATOMIC_RELEASE)
#define util_sub_seq(p, v)         __atomic_sub_fetch((p), (v), __ATOMIC_SEQ_CST)
#define util_or_relaxed(p, v)      __atomic_or_fetch((p), (v), __ATOMIC_RELAXED)
#define util_or_release(p, v)      __atomic_or_fetch((p), (v), __ATOMIC_RELEASE)
#define util_or_seq(p, v)          __atomic_or_fetch((p), (v), __ATOMIC_SEQ_CST)
#define util_and_relaxed(p, v)     __atomic_and_fetch((p), (v), __ATOMIC_RELAXED)
#define util_and_release(p, v)     __atomic_and_fetch((p), (v), __ATOMIC_RELEASE)
#define util_and_seq(p, v)         __atomic_and_fetch((p), (v), __ATOMIC_SEQ_CST)

#define util_fetch_add_relaxed(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
#define util_fetch_add_seq(p, v)     __atomic_fetch_add((p), (v), __ATOMIC_SEQ_CST)

#define util_xchg_relaxed(p, v)    __atomic_exchange_n((p), (v), __ATOMIC_RELAXED)
#define util_xchg_acquire(p, v)    __atomic_exchange_n((p), (v), __ATOMIC_ACQUIRE)
#define util_xchg_acq_rel(p, v)    __atomic_exchange_n((p), (v), __ATOMIC_ACQ_REL)
#define util_xchg_seq(p, v)        __atomic_exchange_n((p), (v), __ATOMIC_SEQ_CST)

#define util_fence_acquire()       __atomic_thread_fence(__ATOMIC_ACQUIRE)

/* One step of a spin-wait: tells the core (and a hyperthread sibling) that
 * this thread only waits. */
#if defined(__x86_64__) || defined(__i386__)
#define util_cpu_relax()           __builtin_ia32_pause()
#elif defined(__aarch64__)
#define util_cpu_relax()           __asm__ __volatile__("yield")
#else
#define util_cpu_relax()           do { } while (0)
#endif

#endif /* SALUS_UTIL_ATOMIC_H */
