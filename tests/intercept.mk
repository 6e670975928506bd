# Tests of the interception layer (src/intercept):
#   test_procmap        the driver map against cudaTypedefs.h and the stub libcuda
#   test_intercept      the hook table and the wrappers against fakes
#   test_intercept_resolver  cuGetProcAddress against a fake driver, and its guard
#   test_intercept_load the loader, the dlsym override (RTLD_NEXT), the report,
#                       fork(), processes with libsalus preloaded over a fake driver
#   test_intercept_sim  every path into the driver over simgpu, and libcudart
# and what they run: the clients of tests/clients, a fake libcuda.so.1, the
# libraries of the RTLD_NEXT test and a libsalus whose intercept objects are
# built -O0 -fno-optimize-sibling-calls.

INTERCEPT_OBJS := $(patsubst %.c,$(B)/obj/%.o,$(wildcard src/intercept/*.c src/nvml/*.c)) \
                  $(patsubst %.c,$(B)/obj/%.o,$(wildcard src/sched/*.c src/ipc/*.c)) \
                  $(patsubst %.c,$(B)/obj/%.o,$(wildcard src/memory/*.c src/vmem/*.c src/page/*.c)) \
                  $(patsubst %.c,$(B)/obj/%.o,$(wildcard src/util/*.c src/drv/*.c))
TCLI := $(B)/tests/clients
CLIENT_CFLAGS := -std=gnu11 $(WARN) -D_GNU_SOURCE -I$(CUDA_HOME)/include $(CFLAGS)
CUDA_STUBS := -L$(CUDA_HOME)/lib64/stubs -lcuda

$(B)/obj/tests/test_procmap.o $(B)/obj/tests/test_intercept_sim.o: \
    MOD_CFLAGS := -DCUDA_HOME_DIR='"$(CUDA_HOME)"' -DSIMGPU_LIB='"$(abspath $(SIM_LIB))"'
$(B)/obj/tests/test_procmap.o $(B)/obj/tests/test_intercept.o \
    $(B)/obj/tests/test_intercept_load.o $(B)/obj/tests/test_intercept_sim.o \
    $(B)/obj/tests/test_intercept_resolver.o: $(HOOK_LIST_H) $(NVH_LIST_H)

$(eval $(call salus_test,test_procmap,$(B)/obj/src/intercept/procmap.o,))
$(B)/tests/test_procmap: | $(SIM_LIB)
$(eval $(call salus_test,test_intercept,$(INTERCEPT_OBJS),))
$(eval $(call salus_test,test_intercept_load,$(INTERCEPT_OBJS),))
$(eval $(call salus_test,test_intercept_resolver,$(INTERCEPT_OBJS),))
$(eval $(call salus_test,test_intercept_sim,,))

# ---- what test_intercept and test_intercept_load run ----------------------------------------------

FAKECUDA := $(B)/tests/fakecuda/libcuda.so.1
$(FAKECUDA): tests/clients/fakecuda.c
	@mkdir -p $(@D)
	$(CC) $(CLIENT_CFLAGS) -fPIC -shared -Wl,-soname,libcuda.so.1 -o $@ $<

$(TCLI)/libnext_a.so $(TCLI)/libnext_b.so: $(TCLI)/libnext_%.so: tests/clients/next_lib.c
	@mkdir -p $(@D)
	$(CC) $(CLIENT_CFLAGS) -fPIC -shared -DNEXT_SIDE="'$*'" -o $@ $< -ldl
$(TCLI)/next_main: tests/clients/next_main.c $(TCLI)/libnext_a.so $(TCLI)/libnext_b.so
	$(CC) $(CLIENT_CFLAGS) -o $@ $< -L$(TCLI) -Wl,--no-as-needed -lnext_a -lnext_b \
	    -Wl,-rpath,'$$ORIGIN'
$(TCLI)/libbadnext.so: tests/clients/badnext.c
	@mkdir -p $(@D)
	$(CC) $(CLIENT_CFLAGS) -O0 -fno-optimize-sibling-calls -fPIC -shared -o $@ $< -ldl

# libsalus with its intercept objects built without optimization or sibling
# calls: the dlsym trampoline must forward RTLD_NEXT all the same.
O0_OBJS := $(patsubst %.c,$(B)/obj-O0/%.o,$(wildcard src/intercept/*.c))
$(O0_OBJS): $(B)/obj-O0/%.o: %.c $(HOOK_LIST_H) $(NVH_LIST_H)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -fvisibility=hidden -O0 -g -fno-optimize-sibling-calls $(DEPFLAGS) -c $< -o $@
-include $(wildcard $(B)/obj-O0/src/intercept/*.d)
LIBSALUS_O0 := $(B)/tests/libsalus-O0.so
$(LIBSALUS_O0): $(O0_OBJS) $(filter-out $(B)/obj/src/intercept/%,$(SALUS_SRCS:%.c=$(B)/obj/%.o))
	$(CC) -shared -Wl,-soname,libsalus.so -Wl,-Bsymbolic -Wl,-z,now -o $@ $^ -ldl -lpthread -lrt

$(B)/tests/test_intercept: $(LIBSALUS)
$(B)/tests/test_intercept_load: $(FAKECUDA) $(TCLI)/next_main $(TCLI)/libbadnext.so \
                                $(LIBSALUS_O0) $(LIBSALUS) $(TCLI)/initclient

$(TCLI)/initclient: tests/clients/initclient.c
	@mkdir -p $(@D)
	$(CC) $(CLIENT_CFLAGS) -o $@ $< $(CUDA_STUBS)

# ---- what test_intercept_sim runs ------------------------------------------

$(TCLI)/drvclient: tests/clients/drvclient.c
	@mkdir -p $(@D)
	$(CC) $(CLIENT_CFLAGS) -o $@ $< $(CUDA_STUBS) -ldl
$(TCLI)/drvclient_ptds: tests/clients/drvclient.c
	@mkdir -p $(@D)
	$(CC) $(CLIENT_CFLAGS) -DCUDA_API_PER_THREAD_DEFAULT_STREAM=1 -o $@ $< $(CUDA_STUBS) -ldl
$(TCLI)/cudart_probe: tests/clients/cudart_probe.cu
	@mkdir -p $(@D)
	$(NVCC) -cudart shared -o $@ $<

$(B)/tests/test_intercept_sim: $(B)/libsalus.so $(TCLI)/drvclient $(TCLI)/drvclient_ptds \
                               $(TCLI)/cudart_probe $(WL_CUBIN)
