# Benchmarks: `make bench` runs every experiment at full size, `make
# bench-quick` the same scaled down; both write bench/results/.  A fragment
# bench/<name>.mk adds a phony target to BENCH_TARGETS (full) and
# BENCH_QUICK_TARGETS (scaled down); its recipe writes its figures as JSON
# under $(BENCH_OUT) for the report to gather.  BENCH_FINAL_TARGETS and
# BENCH_QUICK_FINAL_TARGETS run after all of those (the report).

BENCH_OUT := bench/results
BENCH_TARGETS :=
BENCH_QUICK_TARGETS :=
BENCH_FINAL_TARGETS :=
BENCH_QUICK_FINAL_TARGETS :=
BENCH_PYTHON ?= /usr/bin/python3
# What the micro-benchmarks (bench/micro/*_overhead.c, handoff.c) share.
MICRO_SRC := bench/micro/micro.c bench/micro/micro.h

$(B)/.deps-bench: mk/deps.sh
	@mkdir -p $(B)
	@sh mk/deps.sh bench
	@touch $@

include $(filter-out bench/module.mk,$(wildcard bench/*.mk))

bench: $(B)/.deps-bench all
	@mkdir -p $(BENCH_OUT)
	@$(MAKE) --no-print-directory $(BENCH_TARGETS)
	$(if $(BENCH_FINAL_TARGETS),@$(MAKE) --no-print-directory $(BENCH_FINAL_TARGETS))

bench-quick: $(B)/.deps-bench all
	@mkdir -p $(BENCH_OUT)
	@$(MAKE) --no-print-directory $(BENCH_QUICK_TARGETS)
	$(if $(BENCH_QUICK_FINAL_TARGETS),@$(MAKE) --no-print-directory $(BENCH_QUICK_FINAL_TARGETS))
