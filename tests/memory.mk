# Memory admission (src/memory): the module driven through its interface
# with a fake driver, in forked children (test_memory: one process;
# test_memory_share: several; test_memory_hammer: the hammer, with and
# without SIGKILLs; test_memory_page: paging's decisions).
MEM_TEST_OBJS := $(patsubst %.c,$(B)/obj/%.o,$(wildcard src/memory/*.c)) \
                 $(patsubst %.c,$(B)/obj/%.o,$(wildcard src/ipc/*.c src/util/*.c src/drv/*.c)) \
                 $(B)/obj/tests/test_memory_lib.o
$(B)/obj/tests/test_memory_lib.o: | $(B)/.deps-test
$(eval $(call salus_test,test_memory,$(MEM_TEST_OBJS),))
$(eval $(call salus_test,test_memory_share,$(MEM_TEST_OBJS),))
$(eval $(call salus_test,test_memory_hammer,$(MEM_TEST_OBJS),))
# Memory held past its allocation (VMM mappings, pools), with the fake driver.
$(eval $(call salus_test,test_memory_hold,$(MEM_TEST_OBJS),))
# Who pages and when (src/page), over a fake pager and a fake scheduler
# (page.h's seams; the real ones are linked, unused).
PAGE_TEST_OBJS := $(MEM_TEST_OBJS) \
                  $(patsubst %.c,$(B)/obj/%.o,$(wildcard src/page/*.c src/sched/*.c src/vmem/*.c))
$(eval $(call salus_test,test_memory_page,$(PAGE_TEST_OBJS),-lm))
# End to end: salus-train over simgpu with libsalus preloaded.
$(eval $(call salus_test,test_memory_e2e,$(MEM_TEST_OBJS),))
$(B)/tests/test_memory_e2e: $(WL_PROGS) $(SIM_LIB) $(B)/libsalus.so
# The driver's other ways of holding memory (VMM, pools, another device):
# tests/clients/memclient over simgpu with libsalus preloaded.
MEM_CLIENT := $(B)/tests/clients/memclient
$(MEM_CLIENT): tests/clients/memclient.c | $(B)/.deps-test
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(WARN) -D_GNU_SOURCE -I$(CUDA_HOME)/include $(CFLAGS) -o $@ $< \
	    -L$(CUDA_HOME)/lib64/stubs -lcuda
$(eval $(call salus_test,test_memory_drv,$(MEM_TEST_OBJS),))
$(B)/tests/test_memory_drv: $(SIM_LIB) $(B)/libsalus.so $(MEM_CLIENT)
# Paging's virtualized allocations over simgpu itself, with the private
# jemalloc linked in as libsalus links it.
MEM_VMM_LIBS := $(MEM_JEMALLOC_LINK) -L$(B)/sim -l:libcuda.so.1 \
                -Wl,-rpath,$(abspath $(B)/sim) -lm
MEM_VMM_OBJS := $(MEM_TEST_OBJS) $(patsubst %.c,$(B)/obj/%.o,$(wildcard src/vmem/*.c)) \
                $(B)/obj/tests/test_memory_vmm_lib.o
$(B)/obj/tests/test_memory_vmm_lib.o: | $(B)/.deps-test
$(eval $(call salus_test,test_memory_vmm,$(MEM_VMM_OBJS),$(MEM_VMM_LIBS)))
$(B)/tests/test_memory_vmm: $(SIM_LIB) $(B)/libsalus.so $(B)/tests/clients/vmmclient \
                            | $(MEM_JEMALLOC)
# Small allocations kept for the next of their size (jem.c), over simgpu.
$(eval $(call salus_test,test_memory_vmmkeep,$(MEM_VMM_OBJS),$(MEM_VMM_LIBS)))
$(B)/tests/test_memory_vmmkeep: $(SIM_LIB) | $(MEM_JEMALLOC)
# Paging's pinned staging kept from one page-out to the next (stage.c).
$(eval $(call salus_test,test_memory_stage,$(MEM_VMM_OBJS),$(MEM_VMM_LIBS)))
$(B)/tests/test_memory_stage: $(SIM_LIB) | $(MEM_JEMALLOC)
# A job SIGKILLed while paged out, paging out and paging in, beside a
# survivor, with the same allocator over simgpu.
$(eval $(call salus_test,test_memory_pagekill,$(MEM_VMM_OBJS),$(MEM_VMM_LIBS)))
$(B)/tests/test_memory_pagekill: $(SIM_LIB) | $(MEM_JEMALLOC)
$(B)/tests/clients/vmmclient: tests/clients/vmmclient.c
	@mkdir -p $(@D)
	$(CC) $(CLIENT_CFLAGS) -o $@ $< $(CUDA_STUBS) -ldl
# A page-out beside work that does not end (a stream wait nobody writes).
$(eval $(call salus_test,test_memory_pagehang,$(MEM_VMM_OBJS),$(MEM_VMM_LIBS)))
$(B)/tests/test_memory_pagehang: $(SIM_LIB) | $(MEM_JEMALLOC)
# Stream-ordered allocations with paging on (vmm_async.c) over simgpu, and
# through libsalus: tests/clients/asyncclient.
$(eval $(call salus_test,test_memory_async,$(MEM_VMM_OBJS),$(MEM_VMM_LIBS)))
$(B)/tests/test_memory_async: $(SIM_LIB) $(B)/libsalus.so $(WL_CUBIN) \
                              $(B)/tests/clients/asyncclient | $(MEM_JEMALLOC)
$(B)/tests/clients/asyncclient: tests/clients/asyncclient.c
	@mkdir -p $(@D)
	$(CC) $(CLIENT_CFLAGS) -o $@ $< $(CUDA_STUBS) -ldl
# Memory nobody allocated (contexts, the driver's free memory, the own view
# without a limit): processes of this binary under libsalus over simgpu.
MEM_CTX_LIBS := -L$(B)/sim -l:libcuda.so.1 -Wl,-rpath,$(abspath $(B)/sim)
$(eval $(call salus_test,test_memory_ctx,$(SIM_LIB),$(MEM_CTX_LIBS)))
$(B)/tests/test_memory_ctx: $(B)/libsalus.so
# Priority preemption on a full device: pageclient jobs over simgpu.
$(eval $(call salus_test,test_memory_preempt,,))
$(B)/tests/test_memory_preempt: $(SIM_LIB) $(B)/libsalus.so $(WL_CUBIN) \
                                $(B)/tests/clients/pageclient $(B)/bin/salus-top
$(B)/tests/clients/pageclient: tests/clients/pageclient.c
	@mkdir -p $(@D)
	$(CC) $(CLIENT_CFLAGS) -o $@ $< $(CUDA_STUBS) -ldl
# With paging on, contexts admitted before they are made, in the policy's
# order: admitclient jobs over simgpu.
$(eval $(call salus_test,test_memory_admit,,))
$(B)/tests/test_memory_admit: $(SIM_LIB) $(B)/libsalus.so $(B)/tests/clients/admitclient
$(B)/tests/clients/admitclient: tests/clients/admitclient.c
	@mkdir -p $(@D)
	$(CC) $(CLIENT_CFLAGS) -o $@ $< $(CUDA_STUBS)
# CUDA IPC on paged memory (vmm_ipc.c): ipcclient producers and consumers
# over simgpu, a pageclient job paging the producer out.
$(eval $(call salus_test,test_memory_ipc,$(MEM_TEST_OBJS),))
$(B)/tests/test_memory_ipc: $(SIM_LIB) $(B)/libsalus.so $(WL_CUBIN) \
                            $(B)/tests/clients/ipcclient $(B)/tests/clients/pageclient
$(B)/tests/clients/ipcclient: tests/clients/ipcclient.c
	@mkdir -p $(@D)
	$(CC) $(CLIENT_CFLAGS) -o $@ $< $(CUDA_STUBS) -ldl
# No thrashing: two pageclient jobs that together exceed a simgpu device
# share it under fair with paging on.
$(eval $(call salus_test,test_memory_thrash,,))
$(B)/tests/test_memory_thrash: $(SIM_LIB) $(B)/libsalus.so $(WL_CUBIN) \
                               $(B)/tests/clients/pageclient
# A memory limit that keeps a paging job's own memory out hangs nobody:
# pageclient jobs over simgpu and salus limit.
$(eval $(call salus_test,test_memory_pagelimit,,))
$(B)/tests/test_memory_pagelimit: $(SIM_LIB) $(B)/libsalus.so $(WL_CUBIN) \
                                  $(B)/tests/clients/pageclient $(B)/bin/salus
# The paging tests' pageclient helpers (test_memory_jobs.h).
MEM_JOBS_OBJ := $(B)/obj/tests/test_memory_jobs.o
$(MEM_JOBS_OBJ): | $(B)/.deps-test
# One word written into a paging job's own memory fields hangs nobody: the
# same pageclient jobs, the table written through the module's layout.
$(eval $(call salus_test,test_memory_pagewords,$(MEM_TEST_OBJS) $(MEM_JOBS_OBJ),))
$(B)/tests/test_memory_pagewords: $(SIM_LIB) $(B)/libsalus.so $(WL_CUBIN) \
                                  $(B)/tests/clients/pageclient
# A paging job in a memory cgroup is not OOM-killed by its page-out's
# staging: a pageclient job in a cgroup the test makes (root), a peer outside.
$(eval $(call salus_test,test_memory_pagecgroup,$(MEM_JOBS_OBJ),))
$(B)/tests/test_memory_pagecgroup: $(SIM_LIB) $(B)/libsalus.so $(WL_CUBIN) \
                                   $(B)/tests/clients/pageclient
