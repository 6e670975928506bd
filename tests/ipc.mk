IPC_OBJS := $(patsubst %.c,$(B)/obj/%.o,$(wildcard src/ipc/*.c src/util/*.c src/drv/*.c))
$(eval $(call salus_test,test_ipc,$(IPC_OBJS),))
$(eval $(call salus_test,test_ipc_lock,$(IPC_OBJS),))
$(eval $(call salus_test,test_ipc_open,$(IPC_OBJS),))
# test_ipc_open runs hosts (salus-train under libsalus over simgpu) and salus-top.
$(B)/tests/test_ipc_open: | $(TOOLS_BINS) $(B)/libsalus.so $(SIM_LIB) $(WL_PROGS) $(WL_CUBIN)
# The table fuzzer: the tools' collection and JSON output and the modules
# linked in, and the real salus-top and salus-train run on some tables.
$(B)/obj/tests/lib/tablefuzz.o: | $(B)/.deps-test
$(eval $(call salus_test,test_ipc_fuzz,$(B)/obj/tests/lib/tablefuzz.o $(TOOLS_LIB_OBJS) $(TOOLS_CORE),$(TOOLS_LDLIBS)))
$(B)/tests/test_ipc_fuzz: | $(TOOLS_BINS) $(B)/libsalus.so $(SIM_LIB) $(WL_PROGS) $(WL_CUBIN)
