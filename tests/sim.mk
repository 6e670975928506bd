# Tests of simgpu (sim/), linked to build/sim/libcuda.so.1 itself:
#   test_simgpu      the driver API in one process (cuGetProcAddress, devices,
#                    errors, contexts, memory, copies, modules, launches)
#   test_simgpu_exec the time model (durations, sync, switch penalty, events,
#                    streams, host callbacks), graphs, capture, trace format
#   test_simgpu_mem  pools, arrays and the VMM API, with exact accounting
#   test_simgpu_mp   several processes on one state (capacity, reclaim after
#                    SIGKILL, fork, engine serialization, shared trace,
#                    state validation)
SIM_TEST_LIBS := -L$(B)/sim -l:libcuda.so.1 -Wl,-rpath,$(abspath $(B)/sim)
SIM_TEST_OBJS := $(B)/obj/tests/test_simgpu_util.o $(SIM_LIB)

$(B)/obj/tests/test_simgpu_util.o: | $(B)/.deps-test
$(eval $(call salus_test,test_simgpu,$(SIM_TEST_OBJS),$(SIM_TEST_LIBS)))
$(eval $(call salus_test,test_simgpu_exec,$(SIM_TEST_OBJS),$(SIM_TEST_LIBS)))
$(eval $(call salus_test,test_simgpu_mem,$(SIM_TEST_OBJS),$(SIM_TEST_LIBS)))
$(eval $(call salus_test,test_simgpu_mp,$(SIM_TEST_OBJS),$(SIM_TEST_LIBS)))

# The tests load the workloads' cubin and PTX.
$(B)/tests/test_simgpu $(B)/tests/test_simgpu_exec $(B)/tests/test_simgpu_mem \
    $(B)/tests/test_simgpu_mp: | $(WL_CUBIN) $(WL_PTX)

# A library exporting driver names, for the -Bsymbolic check of test_simgpu_mp.
SIM_SHIM := $(B)/tests/libsimgpu_shim.so
$(SIM_SHIM): tests/test_simgpu_shim.c | $(B)/.deps-test
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -shared -o $@ $<
$(B)/tests/test_simgpu_mp: | $(SIM_SHIM)
