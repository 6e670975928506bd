# Memory admission's micro-benchmark: ns libsalus adds per cuMemAlloc_v2 +
# cuMemFree_v2 pair of 4 KiB, 1 MiB and 64 MiB, and of 1 MiB beside 1,000
# live allocations, over a null driver (bench/nulldrv/nulldrv_all.c's
# exports, which return at once, with the answers of
# bench/micro/alloc_nulldrv.c, VMM's included).  Writes
# $(BENCH_OUT)/micro_memory.json (alloc_ns_per_pair: the larger of the two
# 1 MiB rows; alloc_ns_per_pair_any_size: the largest of all).

ALLOC_NULLDRV := $(B)/bench/alloc-nulldrv/libcuda.so.1
ALLOC_BENCH   := $(B)/bench/alloc_overhead
ALLOC_NULLSRC := $(wildcard bench/nulldrv/nulldrv_all.c) bench/micro/alloc_nulldrv.c

$(ALLOC_NULLDRV): $(ALLOC_NULLSRC) $(PROCMAP_H)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -fvisibility=hidden -shared -Wl,-soname,libcuda.so.1 \
	    -o $@ $(ALLOC_NULLSRC)

$(ALLOC_BENCH): bench/micro/alloc_overhead.c $(MICRO_SRC)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(WARN) -D_GNU_SOURCE -I$(CUDA_HOME)/include $(CFLAGS) -o $@ \
	    $(filter %.c,$^) \
	    -L$(CUDA_HOME)/lib64/stubs -lcuda -lrt

.PHONY: bench-memory bench-memory-quick
bench-memory: $(ALLOC_BENCH) $(ALLOC_NULLDRV) $(B)/libsalus.so
	@mkdir -p $(BENCH_OUT)
	LD_LIBRARY_PATH=$(dir $(ALLOC_NULLDRV)) $(ALLOC_BENCH) --nulldrv $(dir $(ALLOC_NULLDRV)) --libsalus $(B)/libsalus.so \
	    --out $(BENCH_OUT)/micro_memory.json
bench-memory-quick: $(ALLOC_BENCH) $(ALLOC_NULLDRV) $(B)/libsalus.so
	@mkdir -p $(BENCH_OUT)
	LD_LIBRARY_PATH=$(dir $(ALLOC_NULLDRV)) $(ALLOC_BENCH) --nulldrv $(dir $(ALLOC_NULLDRV)) --libsalus $(B)/libsalus.so \
	    --out $(BENCH_OUT)/micro_memory.json --pairs 50000 --repeats 5 --rounds 3

# The same with paging on (SALUS_SWAP=on): what libsalus adds when it serves
# the allocations itself (4 KiB and 1 MiB: blocks of its jemalloc's region,
# the last freed kept for their size; 64 MiB: a chunk of its own, kept
# likewise) over the null driver's VMM calls, stream-ordered ones included
# (async_ns_per_pair: an event recorded per free, queried at the next
# allocation).  $(BENCH_OUT)/micro_memory_swap.json; the report holds its
# worst size to twice the worst without paging (issue 28, item 5).
.PHONY: bench-memory-swap
bench-memory-swap: $(ALLOC_BENCH) $(ALLOC_NULLDRV) $(B)/libsalus.so
	@mkdir -p $(BENCH_OUT)
	SALUS_SWAP=on LD_LIBRARY_PATH=$(dir $(ALLOC_NULLDRV)) $(ALLOC_BENCH) \
	    --nulldrv $(dir $(ALLOC_NULLDRV)) --libsalus $(B)/libsalus.so \
	    --out $(BENCH_OUT)/micro_memory_swap.json --pairs 50000 --repeats 5 --rounds 3

BENCH_TARGETS += bench-memory bench-memory-swap
BENCH_QUICK_TARGETS += bench-memory-quick

# Paging's throughput over simgpu (issue 28, item 4): GiB/s out to pinned
# staging and back in through vmem.h's primitives, beside the floors (the
# modelled PCIe and a warm memcpy on this host), bench/micro/paging.c.  The
# program links libsalus's modules as the tests do.  Writes
# $(BENCH_OUT)/micro_paging.json.
PAGING_BENCH := $(B)/bench/paging
PAGING_OBJS  := $(patsubst %.c,$(B)/obj/%.o,$(wildcard src/memory/*.c src/ipc/*.c src/util/*.c \
                                                     src/drv/*.c src/vmem/*.c))
$(PAGING_BENCH): $(B)/obj/bench/micro/paging.o $(B)/obj/bench/micro/micro.o $(PAGING_OBJS) \
                 $(SIM_LIB) | $(MEM_JEMALLOC)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -pthread -o $@ $(filter %.o,$^) $(MEM_JEMALLOC_LINK) -L$(B)/sim \
	    -l:libcuda.so.1 -Wl,-rpath,$(abspath $(B)/sim) -ldl -lrt -lm

.PHONY: bench-paging bench-paging-quick
bench-paging: $(PAGING_BENCH)
	@mkdir -p $(BENCH_OUT)
	$(PAGING_BENCH) --out $(BENCH_OUT)/micro_paging.json --mib 2048 --rounds 7
bench-paging-quick: $(PAGING_BENCH)
	@mkdir -p $(BENCH_OUT)
	$(PAGING_BENCH) --out $(BENCH_OUT)/micro_paging.json --mib 512 --rounds 5

BENCH_TARGETS += bench-paging
BENCH_QUICK_TARGETS += bench-paging-quick
