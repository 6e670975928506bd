# The benchmarks' smoke test: test_bench runs bench/run.py (make bench-quick's
# pieces) at its tiny scale over simgpu, with libsalus, and checks that every
# result and every key of summary.json is there.  Seconds, not minutes.
$(eval $(call salus_test,test_bench,,))
$(B)/tests/test_bench: $(B)/libsalus.so $(SIM_LIB) $(WL_PROGS) $(WL_CUBIN) $(B)/bin/salus

# bench/gpu/check.sh's --simgpu mode: its issue-11 steps over simgpu, its
# PyTorch steps around a test double, its judgements of the GPU's own output
# (about a minute).
$(eval $(call salus_test,test_gpucheck,,))
$(B)/tests/test_gpucheck: $(B)/libsalus.so $(SIM_LIB) $(GPUCHECK_FILES) $(WL_CUBIN) \
                          $(B)/tests/clients/cudart_probe $(B)/bin/salus \
                          $(B)/tests/clients/nvmlclient $(SIM_NVML_LIB)
