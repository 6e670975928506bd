# Start-up's micro-benchmark: what libsalus adds to a fresh process (loading
# it, its constructor, the driver load behind it, registration and the
# first launch), over the null driver (bench/nulldrv), each child paired
# with one without libsalus (bench/micro/startup.c).  Writes
# $(BENCH_OUT)/micro_startup.json:
#   {"overhead_us_first_call": ..., "overhead_us_process": ...,
#    "plain_us_first_call": ..., "plain_us_process": ..., ...}

STARTUP_BENCH := $(B)/bench/startup

$(STARTUP_BENCH): bench/micro/startup.c $(MICRO_SRC)
	@mkdir -p $(@D)
	$(SCHED_BENCH_CC) -o $@ $(filter %.c,$^) -L$(CUDA_HOME)/lib64/stubs -lcuda

STARTUP_BENCH_RUN = LD_LIBRARY_PATH=$(dir $(SCHED_NULLDRV)) $(STARTUP_BENCH) \
	--nulldrv $(dir $(SCHED_NULLDRV)) --libsalus $(B)/libsalus.so \
	--out $(BENCH_OUT)/micro_startup.json $(1)

.PHONY: bench-startup bench-startup-quick
bench-startup: $(STARTUP_BENCH) $(SCHED_NULLDRV) $(B)/libsalus.so
	@mkdir -p $(BENCH_OUT)
	$(call STARTUP_BENCH_RUN,--runs 21 --rounds 5)
bench-startup-quick: $(STARTUP_BENCH) $(SCHED_NULLDRV) $(B)/libsalus.so
	@mkdir -p $(BENCH_OUT)
	$(call STARTUP_BENCH_RUN,--runs 11 --rounds 3)

BENCH_TARGETS += bench-startup
BENCH_QUICK_TARGETS += bench-startup-quick
