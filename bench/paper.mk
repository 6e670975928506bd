# The paper's experiments over simgpu (bench/run.py, bench/salusbench/):
# a training trace under every policy, hyper-parameter tuning, inference
# services, a latency-sensitive service beside training (mixed), and the
# GPU time that time slicing wastes (slicing), and real PyTorch jobs under
# each policy (pytorch: in the frameworks' environment, FW_ENV as make
# test-frameworks has it; skipped with its reason without one).  Each
# writes <name>.json under $(BENCH_OUT); after every fragment's targets, the report step
# gathers them with the micro-benchmarks' JSON into report.md, summary.json
# and the plots (make bench also copies the report to bench/REPORT.md and
# bench/report/).
#
#   make bench          full size (about 40 minutes on 2 cores: the paging
#                       rows run in three arrival orders)
#   make bench-quick    the same experiments scaled down (about 1.5 minutes)

BENCH_RUN := $(BENCH_PYTHON) bench/run.py

.PHONY: bench-paper bench-paper-quick bench-report bench-report-quick
bench-paper:
	FW_ENV=$(FW_ENV) $(BENCH_RUN) training hyperparam inference mixed slicing pytorch \
	    --scale full --out $(BENCH_OUT)
bench-paper-quick:
	FW_ENV=$(FW_ENV) $(BENCH_RUN) training hyperparam inference mixed slicing pytorch \
	    --scale quick --out $(BENCH_OUT)
bench-report:
	$(BENCH_RUN) micro report --scale full --out $(BENCH_OUT)
bench-report-quick:
	$(BENCH_RUN) micro report --scale quick --out $(BENCH_OUT)

BENCH_TARGETS += bench-paper
BENCH_QUICK_TARGETS += bench-paper-quick
BENCH_FINAL_TARGETS += bench-report
BENCH_QUICK_FINAL_TARGETS += bench-report-quick
