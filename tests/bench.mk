# The benchmarks' smoke test: test_bench runs bench/run.py (make bench-quick's
# pieces) at its tiny scale over simgpu, with libsalus, and checks that every
# result and every key of summary.json is there.  Seconds, not minutes.
$(eval $(call salus_test,test_bench,,))
$(B)/tests/test_bench: $(B)/libsalus.so $(SIM_LIB) $(WL_PROGS) $(WL_CUBIN)
