# test_workloads runs the workload programs over simgpu: it needs them built.
$(eval $(call salus_test,test_workloads,,))
$(B)/tests/test_workloads: $(WL_PROGS)
