# The benchmarks' smoke test: test_bench runs bench/run.py (make bench-quick's
# pieces) at its tiny scale over simgpu, with libsalus, and checks that every
# result and every key of summary.json is there.  Seconds, not minutes.
$(eval $(call salus_test,test_bench,,))
$(B)/tests/test_bench: $(B)/libsalus.so $(SIM_LIB) $(WL_PROGS) $(WL_CUBIN) $(B)/bin/salus

# bench/gpu/check.sh's --simgpu mode: its issue-11 steps over simgpu
# (test_gpucheck), its PyTorch steps around a test double (test_gpucheck_torch),
# its judgements of the GPU's own output and of those steps refusing what
# they must, and its lint (test_gpucheck_judge): about a minute together,
# three binaries so that each stays under a third of its timeout.
GPUCHECK_TEST_OBJS := $(B)/obj/tests/test_gpucheck_lib.o
$(B)/obj/tests/test_gpucheck_lib.o: | $(B)/.deps-test
GPUCHECK_TEST_NEEDS := $(B)/libsalus.so $(SIM_LIB) $(GPUCHECK_FILES) $(WL_CUBIN) \
                       $(B)/tests/clients/cudart_probe $(B)/bin/salus \
                       $(B)/tests/clients/nvmlclient $(SIM_NVML_LIB)
$(eval $(call salus_test,test_gpucheck,$(GPUCHECK_TEST_OBJS),))
$(eval $(call salus_test,test_gpucheck_torch,$(GPUCHECK_TEST_OBJS),))
$(eval $(call salus_test,test_gpucheck_judge,$(GPUCHECK_TEST_OBJS),))
$(B)/tests/test_gpucheck $(B)/tests/test_gpucheck_torch $(B)/tests/test_gpucheck_judge: \
    $(GPUCHECK_TEST_NEEDS)
