# NVML (src/nvml, sim/nvml): test_nvml runs tests/clients/nvmlclient, which
# reads its memory and the device's processes both through the driver and
# through NVML, over simgpu and simgpu's NVML, with libsalus preloaded (the
# job's view) and without (the control: the whole device); the generator's
# check of nvml.list against nvml.h and libsalus(7)'s list of the hooks
# (test_nvml_list); and
# pynvml (tests/clients/pynvml_smi.py, from build/venv: tests/clients.mk).
NVML_CLIENT_SRC := tests/clients/nvmlclient.c
NVML_CLIENT_CFLAGS = -std=gnu11 $(WARN) -D_GNU_SOURCE -I$(CUDA_HOME)/include \
                     -I$(dir $(NVML_H)) -I$(GEN) $(CFLAGS)
# (No .deps-test: bench/gpu/check.sh builds it on a GPU machine that may
# have nothing but a compiler and the toolkit.)
$(B)/tests/clients/nvmlclient: $(NVML_CLIENT_SRC) $(NVH_LIST_H)
	@mkdir -p $(@D)
	$(CC) $(NVML_CLIENT_CFLAGS) -o $@ $< -L$(CUDA_HOME)/lib64/stubs -lcuda -ldl -pthread
$(B)/tests/clients/nvmlclient-linked: $(NVML_CLIENT_SRC) $(NVH_LIST_H) $(SIM_NVML_LIB)
	@mkdir -p $(@D)
	$(CC) $(NVML_CLIENT_CFLAGS) -DNVML_LINKED -o $@ $< -L$(CUDA_HOME)/lib64/stubs -lcuda \
	    -L$(B)/sim -l:libnvidia-ml.so.1 -ldl -pthread
$(B)/obj/tests/test_nvml.o: $(NVH_LIST_H)
$(eval $(call salus_test,test_nvml,,))
$(B)/obj/tests/test_nvml_list.o: MOD_CFLAGS := -DNVML_H_PATH='"$(NVML_H)"'
$(B)/obj/tests/test_nvml_list.o: $(NVH_LIST_H)
$(eval $(call salus_test,test_nvml_list,,))
$(B)/tests/test_nvml: $(SIM_LIB) $(SIM_NVML_LIB) $(B)/libsalus.so $(B)/bin/salus \
                      $(B)/tests/clients/nvmlclient $(B)/tests/clients/nvmlclient-linked \
                      $(WL_CUBIN) $(B)/tests/clients/pageclient $(VENV_READY)
