# The scheduler's tests:
#   test_sched        the detector, the policies on hand-built views, SALUS_*
#                     parsing, histograms (one process)
#   test_sched_table  fake-clock schedules over a real table, probes, the
#                     invariant checker (one process, idle children as slots)
#   test_sched_faults the same harness (test_sched_lease_lib.c) when the
#                     table goes wrong: a stall in its lock, a spoiled slot
#   test_sched_lease  the lease protocol between processes, through the sched
#                     API with a fake driver (kernels emulated by spinning)
#   test_sched_sim    salus-train jobs over simgpu with libsalus preloaded,
#                     judged from simgpu's trace; and test_sched_forker, the
#                     driver-API client it runs for fork()
#   test_sched_capture a graph captured while a peer waits (the client
#                     tests/clients/capclient), judged from the trace
#   test_sched_seam   the drain and a capture that begins between its passes
#   test_sched_tenure what a tenure's start costs fair's pay-back rule
#                     or during one of its synchronizes (one process, over
#                     simgpu linked as the driver)
#   test_sched_devices which device a process is scheduled on: CUDA 13's
#                     streams of another device than the current context's
#                     (the client tests/clients/devclient)
#   test_sched_gang   gangs: two 2-GPU jobs whose ranks (the client
#                     tests/clients/rankclient) wait for each other through
#                     simgpu's cross-process wait; blocked holders; a dead
#                     member
#   test_sched_gangname gang names from the launchers' variables (one
#                     process, fake environments) and libsalus(7)'s list
SCHED_TEST_OBJS := $(patsubst %.c,$(B)/obj/%.o,$(wildcard src/sched/*.c)) \
                   $(patsubst %.c,$(B)/obj/%.o,$(wildcard src/ipc/*.c src/util/*.c src/drv/*.c))
$(eval $(call salus_test,test_sched,$(SCHED_TEST_OBJS),))
$(eval $(call salus_test,test_sched_table,$(SCHED_TEST_OBJS),))
#   test_sched_latency  SALUS_LATENCY_MS in fair and priority (views by hand)
$(eval $(call salus_test,test_sched_latency,$(SCHED_TEST_OBJS),))
# The multi-process tests share tests/test_sched_lib.c (table watchers).
$(B)/obj/tests/test_sched_lib.o: | $(B)/.deps-test
$(B)/obj/tests/test_sched_lease_lib.o: | $(B)/.deps-test
SCHED_LEASE_OBJS := $(SCHED_TEST_OBJS) $(B)/obj/tests/test_sched_lib.o \
                    $(B)/obj/tests/test_sched_lease_lib.o
$(eval $(call salus_test,test_sched_lease,$(SCHED_LEASE_OBJS),))
$(eval $(call salus_test,test_sched_faults,$(SCHED_LEASE_OBJS),))
$(eval $(call salus_test,test_sched_sim,$(SCHED_TEST_OBJS) $(B)/obj/tests/test_sched_lib.o,))

SCHED_FORKER := $(B)/tests/test_sched_forker
$(SCHED_FORKER): tests/test_sched_forker.c | $(B)/.deps-test
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(WARN) -D_GNU_SOURCE -I$(CUDA_HOME)/include $(CFLAGS) -o $@ $< \
	    -L$(CUDA_HOME)/lib64/stubs -lcuda

$(B)/tests/test_sched_sim: $(LIBSALUS) $(SIM_LIB) $(WL_PROGS) $(WL_CUBIN) $(SCHED_FORKER)

$(eval $(call salus_test,test_sched_capture,$(SCHED_TEST_OBJS) $(B)/obj/tests/test_sched_lib.o,))
SCHED_CAPCLIENT := $(B)/tests/clients/capclient
$(SCHED_CAPCLIENT): tests/clients/capclient.c | $(B)/.deps-test
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(WARN) -D_GNU_SOURCE -I$(CUDA_HOME)/include $(CFLAGS) -o $@ $< \
	    -L$(CUDA_HOME)/lib64/stubs -lcuda
$(B)/tests/test_sched_capture: $(LIBSALUS) $(SIM_LIB) $(WL_PROGS) $(WL_CUBIN) $(SCHED_CAPCLIENT)

#   test_sched_drain  exclusive handoffs: a job with work queued or running at
#                     what looks like a boundary (side stream, polling, 32
#                     iterations ahead, two threads, SIGKILLed) and a peer,
#                     under fifo, fair, priority, srtf (and pack), judged by
#                     the trace's cross submissions
$(eval $(call salus_test,test_sched_drain,$(SCHED_TEST_OBJS) $(B)/obj/tests/test_sched_lib.o,))
SCHED_DRAINCLIENT := $(B)/tests/clients/drainclient
$(SCHED_DRAINCLIENT): tests/clients/drainclient.c | $(B)/.deps-test
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(WARN) -D_GNU_SOURCE -I$(CUDA_HOME)/include $(CFLAGS) -pthread -o $@ $< \
	    -L$(CUDA_HOME)/lib64/stubs -lcuda
$(B)/tests/test_sched_drain: $(LIBSALUS) $(SIM_LIB) $(WL_CUBIN) $(SCHED_DRAINCLIENT)

$(eval $(call salus_test,test_sched_gang,$(SCHED_TEST_OBJS),))
$(eval $(call salus_test,test_sched_gangname,$(SCHED_TEST_OBJS),))
SCHED_RANKCLIENT := $(B)/tests/clients/rankclient
$(SCHED_RANKCLIENT): tests/clients/rankclient.c | $(B)/.deps-test
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(WARN) -D_GNU_SOURCE -I$(CUDA_HOME)/include $(CFLAGS) -o $@ $< \
	    -L$(CUDA_HOME)/lib64/stubs -lcuda -lrt
$(B)/tests/test_sched_gang: $(LIBSALUS) $(SIM_LIB) $(WL_CUBIN) $(SCHED_RANKCLIENT)

$(eval $(call salus_test,test_sched_devices,$(SCHED_TEST_OBJS) $(B)/obj/tests/test_sched_lib.o,))
SCHED_DEVCLIENT := $(B)/tests/clients/devclient
$(SCHED_DEVCLIENT): tests/clients/devclient.c | $(B)/.deps-test
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(WARN) -D_GNU_SOURCE -I$(CUDA_HOME)/include $(CFLAGS) -o $@ $< \
	    -L$(CUDA_HOME)/lib64/stubs -lcuda
$(B)/tests/test_sched_devices: $(LIBSALUS) $(SIM_LIB) $(WL_PROGS) $(WL_CUBIN) $(SCHED_DEVCLIENT) \
                              $(B)/bin/salus-top

SCHED_SIM_LIBS := -L$(B)/sim -l:libcuda.so.1 -Wl,-rpath,$(abspath $(B)/sim)
$(eval $(call salus_test,test_sched_seam,$(SCHED_TEST_OBJS),$(SCHED_SIM_LIBS)))
$(B)/tests/test_sched_seam: $(SIM_LIB) $(WL_CUBIN)
$(eval $(call salus_test,test_sched_tenure,$(SCHED_TEST_OBJS),$(SCHED_SIM_LIBS)))
$(B)/tests/test_sched_tenure: $(SIM_LIB)
