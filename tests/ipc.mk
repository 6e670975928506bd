IPC_OBJS := $(patsubst %.c,$(B)/obj/%.o,$(wildcard src/ipc/*.c src/util/*.c src/drv/*.c))
$(eval $(call salus_test,test_ipc,$(IPC_OBJS),))
$(eval $(call salus_test,test_ipc_lock,$(IPC_OBJS),))
$(eval $(call salus_test,test_ipc_open,$(IPC_OBJS),))
# test_ipc_claim: the GPU claim files as tables are made and removed.
$(eval $(call salus_test,test_ipc_claim,$(IPC_OBJS),))
# test_ipc_upgrade: a table of another version at a process's table name.
$(eval $(call salus_test,test_ipc_upgrade,$(IPC_OBJS),))
# test_ipc_open runs hosts (salus-train under libsalus over simgpu) and salus-top.
$(B)/tests/test_ipc_open: | $(TOOLS_BINS) $(B)/libsalus.so $(SIM_LIB) $(WL_PROGS) $(WL_CUBIN)
# The table fuzzer: the tools' collection and JSON output and the modules
# linked in, and the real salus-top and salus-train run on some tables.
$(B)/obj/tests/lib/tablefuzz.o: | $(B)/.deps-test
$(eval $(call salus_test,test_ipc_fuzz,$(B)/obj/tests/lib/tablefuzz.o $(TOOLS_LIB_OBJS) $(TOOLS_CORE),$(TOOLS_LDLIBS)))
$(B)/tests/test_ipc_fuzz: | $(TOOLS_BINS) $(B)/libsalus.so $(SIM_LIB) $(WL_PROGS) $(WL_CUBIN)
# The second half of its tables (test_ipc_fuzz.c says why).
$(eval $(call salus_test,test_ipc_fuzz_b,$(B)/obj/tests/lib/tablefuzz.o $(TOOLS_LIB_OBJS) $(TOOLS_CORE),$(TOOLS_LDLIBS)))
$(B)/tests/test_ipc_fuzz_b: | $(TOOLS_BINS) $(B)/libsalus.so $(SIM_LIB) $(WL_PROGS) $(WL_CUBIN)

# make fuzz: the libFuzzer harness (tests/fuzz/fuzz_table.c) over the same
# host and monitor, built with clang -fsanitize=fuzzer,address,undefined from
# the sources themselves into $(B)/fuzz/, run for FUZZ_SECONDS (default 300)
# on its corpus $(B)/fuzz/corpus; findings are written as crash-*/timeout-*
# files in $(B)/fuzz/.  Not part of make test.
FUZZ_SECONDS ?= 300
FUZZ_BIN  := $(B)/fuzz/fuzz_table
FUZZ_SRCS := tests/fuzz/fuzz_table.c tests/lib/tablefuzz.c \
             $(patsubst $(B)/obj/%.o,%.c,$(TOOLS_CORE_OBJS) $(TOOLS_LIB_OBJS))
FUZZ_CFLAGS := -std=gnu11 -D_GNU_SOURCE -pthread -g -O1 -fno-omit-frame-pointer \
               -fsanitize=fuzzer,address,undefined -I$(CUDA_HOME)/include -I$(GEN) -Isrc -Itests

$(B)/.deps-fuzz: mk/deps.sh $(B)/.deps-test
	@sh mk/deps.sh fuzz
	@touch $@
$(FUZZ_BIN): $(FUZZ_SRCS) $(wildcard src/*/*.h tests/lib/*.h tools/*.h) | $(B)/.deps-fuzz $(PROCMAP_H)
	@mkdir -p $(@D)
	clang $(FUZZ_CFLAGS) -o $@ $(FUZZ_SRCS) $(TOOLS_LDLIBS)

.PHONY: fuzz
fuzz: $(FUZZ_BIN)
	@mkdir -p $(B)/fuzz/corpus
	cd $(B)/fuzz && ./fuzz_table -max_total_time=$(FUZZ_SECONDS) -timeout=30 \
	    -rss_limit_mb=4096 -print_final_stats=1 corpus
