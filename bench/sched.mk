# The scheduler's micro-benchmarks, over the null driver (a libcuda.so.1 whose
# every export returns at once, bench/nulldrv):
#   launch_overhead  ns libsalus adds per launch on the fast path (the process
#                    registered and holding the lease), with nobody waiting,
#                    while a peer waits for the GPU, and with a context on
#                    a second device it does not use
#   handoff          lease handoff latency p50/p99 between two processes
#                    ping-ponging the GPU (SALUS_ITER_SYNC=every, quantum 0),
#                    on an idle machine and beside one CPU hog, with a plain
#                    futex wake's p50/p99 beside the same hog (the floor)
#   sync_overhead    ns libsalus adds to a launch-and-sync round, alone,
#                    beside 256 idle threads that launched once, and under
#                    priority beside 0, 1, 4 and 16 waiting processes that
#                    the holder keeps the GPU from (every boundary decides)
# Each writes JSON; bench/results/micro_sched.json gathers them:
#   {"overhead_ns_per_launch": ..., "overhead_ns_per_launch_contended": ...,
#    "overhead_ns_per_launch_two_devices": ...,
#    "handoff_us": {"p50": ..., "p99": ...},
#    "handoff_under_hog": {"handoff_us": {...}, "futex_floor_us": {...},
#                          "p99_over_floor": ...},
#    "overhead_ns_per_sync": ..., "overhead_ns_per_sync_idle_threads": ...,
#    "overhead_ns_per_sync_waiters": {"0": ..., "16": ...},
#    "launch": {...}, "handoff": {...}, "sync": {...}}

SCHED_NULLDRV := $(B)/bench/nulldrv/libcuda.so.1
SCHED_LAUNCH  := $(B)/bench/launch_overhead
SCHED_HANDOFF := $(B)/bench/handoff
SCHED_SYNC    := $(B)/bench/sync_overhead
SCHED_BENCH_CC = $(CC) -std=gnu11 $(WARN) -D_GNU_SOURCE -I$(CUDA_HOME)/include $(CFLAGS)

$(SCHED_NULLDRV): bench/nulldrv/nulldrv.c bench/nulldrv/nulldrv_all.c $(PROCMAP_H)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -shared -Wl,-soname,libcuda.so.1 -o $@ \
	    bench/nulldrv/nulldrv.c bench/nulldrv/nulldrv_all.c
$(SCHED_LAUNCH): bench/micro/launch_overhead.c $(MICRO_SRC)
	@mkdir -p $(@D)
	$(SCHED_BENCH_CC) -o $@ $(filter %.c,$^) -L$(CUDA_HOME)/lib64/stubs -lcuda
$(SCHED_HANDOFF): bench/micro/handoff.c $(MICRO_SRC)
	@mkdir -p $(@D)
	$(SCHED_BENCH_CC) -o $@ $(filter %.c,$^) -L$(CUDA_HOME)/lib64/stubs -lcuda
$(SCHED_SYNC): bench/micro/sync_overhead.c $(MICRO_SRC)
	@mkdir -p $(@D)
	$(SCHED_BENCH_CC) -pthread -o $@ $(filter %.c,$^) -L$(CUDA_HOME)/lib64/stubs -lcuda

SCHED_BENCH_DEPS := $(SCHED_NULLDRV) $(SCHED_LAUNCH) $(SCHED_HANDOFF) $(SCHED_SYNC) \
                    $(B)/libsalus.so
SCHED_BENCH_RUN = \
	LD_LIBRARY_PATH=$(dir $(SCHED_NULLDRV)) $(SCHED_LAUNCH) --nulldrv $(dir $(SCHED_NULLDRV)) \
	    --libsalus $(B)/libsalus.so --out $(BENCH_OUT)/micro_sched_launch.json $(1) && \
	LD_LIBRARY_PATH=$(dir $(SCHED_NULLDRV)) $(SCHED_HANDOFF) --nulldrv $(dir $(SCHED_NULLDRV)) \
	    --libsalus $(B)/libsalus.so --out $(BENCH_OUT)/micro_sched_handoff.json $(2) && \
	LD_LIBRARY_PATH=$(dir $(SCHED_NULLDRV)) $(SCHED_SYNC) --nulldrv $(dir $(SCHED_NULLDRV)) \
	    --libsalus $(B)/libsalus.so --out $(BENCH_OUT)/micro_sched_sync.json $(3) && \
	$(BENCH_PYTHON) -c 'import json, sys; o = sys.argv[1]; \
	    l = json.load(open(o + "/micro_sched_launch.json")); \
	    h = json.load(open(o + "/micro_sched_handoff.json")); \
	    s = json.load(open(o + "/micro_sched_sync.json")); \
	    json.dump({"overhead_ns_per_launch": l["overhead_ns_per_launch"], \
	               "overhead_ns_per_launch_contended": l["overhead_ns_per_launch_contended"], \
	               "overhead_ns_per_launch_two_devices": l["overhead_ns_per_launch_two_devices"], \
	               "handoff_us": h["handoff_us"], \
	               "handoff_under_hog": h["under_hog"], \
	               "overhead_ns_per_sync": s["overhead_ns_per_sync"], \
	               "overhead_ns_per_sync_idle_threads": s["overhead_ns_per_sync_idle_threads"], \
	               "overhead_ns_per_sync_waiters": s["overhead_ns_per_sync_waiters"], \
	               "launch": l, "handoff": h, "sync": s}, \
	              open(o + "/micro_sched.json", "w"), indent=1)' $(BENCH_OUT)

.PHONY: bench-sched bench-sched-quick
bench-sched: $(SCHED_BENCH_DEPS)
	@mkdir -p $(BENCH_OUT)
	$(call SCHED_BENCH_RUN,--rounds 9 --repeats 9 --launches 2000000,--runs 5 --ms 1000 --hog 1,--rounds 7 --repeats 7 --syncs 20000 --waiters 0$(comma)1$(comma)4$(comma)16)
bench-sched-quick: $(SCHED_BENCH_DEPS)
	@mkdir -p $(BENCH_OUT)
	$(call SCHED_BENCH_RUN,--rounds 5 --repeats 5 --launches 500000,--runs 3 --ms 200 --hog 1,--rounds 3 --repeats 5 --syncs 5000 --waiters 0$(comma)16)

BENCH_TARGETS += bench-sched
BENCH_QUICK_TARGETS += bench-sched-quick
