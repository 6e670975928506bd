# Tests of simgpu (sim/), linked to build/sim/libcuda.so.1 itself:
#   test_simgpu      the driver API in one process (cuGetProcAddress, devices,
#                    errors, contexts, memory, copies, modules, launches)
#   test_simgpu_exec the time model (durations, sync, switch penalty, events,
#                    streams, host callbacks), graphs, capture, trace format
#   test_simgpu_kmodel the shape model of kernel durations (waves of
#                    resident blocks, the name table), turned on before cuInit,
#                    and the launch queue's depth
#   test_simgpu_capture the driver's capture rules: modes, unsafe calls and
#                    the invalidation they cause, what a capture may record
#   test_simgpu_mem  pools, arrays, texture and surface objects and the VMM
#                    API, with exact accounting
#   test_simgpu_globals modules' variables from PTX and cubins
#   test_simgpu_image the JIT linker, image architectures, compressed fatbins,
#                    managed variables, libraries as the runtime uses them
#                    (images built from tests/simgpu_images.cu)
#   test_simgpu_memop stream memory operations (cuStreamWaitValue/WriteValue,
#                    batches): conditions, time model, a wait on another
#                    process's write, a wait that never comes
#   test_simgpu_copy batched copies (cuMemcpyBatchAsync, cuMemcpy3DBatchAsync,
#                    both forms) and 3D peer copies: bytes, pitches, arrays,
#                    refusals, a batch stopped at a bad copy
#   test_simgpu_xla  the calls XLA's CUDA backend adds: generic graph nodes,
#                    executable graphs' kernel parameters, graph launches in
#                    the trace, tensor maps
#   test_simgpu_nccl the driver's answers NCCL's communicator and collectives
#                    depend on: registered buffers' attributes, short
#                    parameter buffers
#   test_simgpu_mp   several processes on one state (capacity, reclaim after
#                    SIGKILL, context memory, fork, engine serialization,
#                    shared trace, a dead process's work cut)
#   test_simgpu_ipc  legacy CUDA IPC of cuMemAlloc memory between processes:
#                    bytes both ways, sparse export, stale and closed handles
#   test_simgpu_state the state and loading, each in a process of its own
#                    (validation, first process fixes the configuration,
#                    before cuInit, -Bsymbolic under a preload, SIMGPU_LOG);
#                    it and test_simgpu_mp share test_simgpu_mp_lib.c
#   test_simgpu_rt   the CUDA runtime's side of the driver: cuGetExportTable's
#                    tables one by one, what the runtime needs beside them
#   test_simgpu_cudart the toolkit's runtime, cuBLAS, cuBLASLt and cuDNN over
#                    simgpu (the rt_* clients of tests/clients, built by nvcc)
SIM_TEST_LIBS := -L$(B)/sim -l:libcuda.so.1 -Wl,-rpath,$(abspath $(B)/sim)
SIM_TEST_OBJS := $(B)/obj/tests/test_simgpu_util.o $(SIM_LIB)

$(B)/obj/tests/test_simgpu_util.o $(B)/obj/tests/test_simgpu_mp_lib.o: | $(B)/.deps-test
SIM_MP_OBJS := $(SIM_TEST_OBJS) $(B)/obj/tests/test_simgpu_mp_lib.o
$(eval $(call salus_test,test_simgpu,$(SIM_TEST_OBJS),$(SIM_TEST_LIBS)))
$(eval $(call salus_test,test_simgpu_exec,$(SIM_TEST_OBJS),$(SIM_TEST_LIBS)))
$(eval $(call salus_test,test_simgpu_kmodel,$(SIM_TEST_OBJS),$(SIM_TEST_LIBS)))
$(eval $(call salus_test,test_simgpu_capture,$(SIM_TEST_OBJS),$(SIM_TEST_LIBS)))
$(eval $(call salus_test,test_simgpu_mem,$(SIM_TEST_OBJS),$(SIM_TEST_LIBS)))
$(eval $(call salus_test,test_simgpu_globals,$(SIM_TEST_OBJS),$(SIM_TEST_LIBS)))
$(eval $(call salus_test,test_simgpu_mp,$(SIM_MP_OBJS),$(SIM_TEST_LIBS)))
$(eval $(call salus_test,test_simgpu_state,$(SIM_MP_OBJS),$(SIM_TEST_LIBS)))
$(eval $(call salus_test,test_simgpu_ipc,$(SIM_MP_OBJS),$(SIM_TEST_LIBS)))
$(eval $(call salus_test,test_simgpu_memop,$(SIM_TEST_OBJS),$(SIM_TEST_LIBS)))
$(eval $(call salus_test,test_simgpu_copy,$(SIM_TEST_OBJS),$(SIM_TEST_LIBS)))
$(eval $(call salus_test,test_simgpu_xla,$(SIM_TEST_OBJS),$(SIM_TEST_LIBS)))
$(eval $(call salus_test,test_simgpu_nccl,$(SIM_TEST_OBJS),$(SIM_TEST_LIBS)))

# The tests load the workloads' cubin and PTX.
$(B)/tests/test_simgpu $(B)/tests/test_simgpu_exec $(B)/tests/test_simgpu_capture \
    $(B)/tests/test_simgpu_kmodel \
    $(B)/tests/test_simgpu_mem $(B)/tests/test_simgpu_globals $(B)/tests/test_simgpu_memop $(B)/tests/test_simgpu_copy $(B)/tests/test_simgpu_xla \
    $(B)/tests/test_simgpu_nccl \
    $(B)/tests/test_simgpu_mp $(B)/tests/test_simgpu_state \
    $(B)/tests/test_simgpu_ipc: | $(WL_CUBIN) $(WL_PTX)

# A library exporting driver names, for the -Bsymbolic check of test_simgpu_state.
SIM_SHIM := $(B)/tests/libsimgpu_shim.so
$(SIM_SHIM): tests/test_simgpu_shim.c | $(B)/.deps-test
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -shared -o $@ $<
$(B)/tests/test_simgpu_state: | $(SIM_SHIM)

# ---- test_simgpu_image: device images of other architectures and containers --
SIMIMG     := $(B)/tests/simimg
SIMIMG_SRC := tests/simgpu_images.cu
SIMIMG_ALL := $(addprefix $(SIMIMG)/,sm80.cubin sm90.cubin sm120.cubin sm90.ptx \
                ptx_zstd.fatbin ptx_lz4.fatbin ptx_plain.fatbin multi.fatbin other.fatbin \
                img.o img_z.o libimg.a)
$(SIMIMG)/sm%.cubin: $(SIMIMG_SRC) | $(B)/.deps-build
	@mkdir -p $(@D)
	$(NVCC) -cubin -arch=sm_$* -o $@ $<
$(SIMIMG)/sm90.ptx: $(SIMIMG_SRC) | $(B)/.deps-build
	@mkdir -p $(@D)
	$(NVCC) -ptx -arch=compute_90 -o $@ $<
# PTX-only fatbins: nvcc 13 compresses them by default (ZSTD); "speed" is LZ4.
$(SIMIMG)/ptx_zstd.fatbin: $(SIMIMG_SRC) | $(B)/.deps-build
	@mkdir -p $(@D)
	$(NVCC) -fatbin -arch=compute_90 -o $@ $<
$(SIMIMG)/ptx_lz4.fatbin: $(SIMIMG_SRC) | $(B)/.deps-build
	@mkdir -p $(@D)
	$(NVCC) -fatbin -arch=compute_90 --compress-mode=speed -o $@ $<
$(SIMIMG)/ptx_plain.fatbin: $(SIMIMG_SRC) | $(B)/.deps-build
	@mkdir -p $(@D)
	$(NVCC) -fatbin -arch=compute_90 --compress-mode=none -o $@ $<
# sm_80 and sm_90 cubins and compute_80 PTX; sm_80 and sm_120 cubins and compute_80 PTX.
$(SIMIMG)/multi.fatbin: $(SIMIMG_SRC) | $(B)/.deps-build
	@mkdir -p $(@D)
	$(NVCC) -fatbin -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
	    -gencode arch=compute_80,code=compute_80 -o $@ $<
$(SIMIMG)/other.fatbin: $(SIMIMG_SRC) | $(B)/.deps-build
	@mkdir -p $(@D)
	$(NVCC) -fatbin -gencode arch=compute_80,code=sm_80 -gencode arch=compute_120,code=sm_120 \
	    -o $@ $<
# Relocatable device code in a host object, and an archive of it.
$(SIMIMG)/img.o: $(SIMIMG_SRC) | $(B)/.deps-build
	@mkdir -p $(@D)
	$(NVCC) -dc -arch=sm_90 --compress-mode=none -o $@ $<
# nvcc 13 compresses relocatable device code by default (ZSTD).
$(SIMIMG)/img_z.o: $(SIMIMG_SRC) | $(B)/.deps-build
	@mkdir -p $(@D)
	$(NVCC) -dc -arch=sm_90 -o $@ $<
# Its member's name is long, so that ar names it "/0" in a "//" table.
$(SIMIMG)/libimg.a: $(SIMIMG)/img.o
	rm -f $@ && cp $< $(@D)/img_with_a_long_member_name.o && \
	    ar rcs $@ $(@D)/img_with_a_long_member_name.o

$(eval $(call salus_test,test_simgpu_image,$(SIM_TEST_OBJS),$(SIM_TEST_LIBS)))
# It links the toolkit's libcudadevrt.a too.
$(B)/obj/tests/test_simgpu_image.o: MOD_CFLAGS := -DCUDA_HOME_DIR='"$(CUDA_HOME)"'
$(B)/tests/test_simgpu_image: | $(WL_CUBIN) $(WL_PTX) $(SIMIMG_ALL)

# ---- test_simgpu_rt and test_simgpu_cudart: the CUDA runtime over simgpu -----
# rt_client.cu linked with the shared runtime, the static one, and as PTX
# only (the driver gets PTX to JIT); rt_libs.cu with cuBLAS, cuBLASLt and
# cuDNN (not built, and its tests skipped saying so, without cudnn.h).  The
# toolkit's libraries are found through the run path, libcuda.so.1 through
# LD_LIBRARY_PATH (simgpu's).
RT_CLI      := $(B)/tests/clients
RT_NVCC     := $(NVCC) -Xlinker -rpath=$(CUDA_HOME)/lib64
RT_CLIENTS  := $(RT_CLI)/rt_shared $(RT_CLI)/rt_static $(RT_CLI)/rt_ptx \
               $(if $(wildcard $(CUDA_HOME)/include/cudnn.h),$(RT_CLI)/rt_libs)
$(RT_CLI)/rt_shared: tests/clients/rt_client.cu | $(B)/.deps-build
	@mkdir -p $(@D)
	$(RT_NVCC) -arch=sm_90 -cudart shared -o $@ $<
$(RT_CLI)/rt_static: tests/clients/rt_client.cu | $(B)/.deps-build
	@mkdir -p $(@D)
	$(RT_NVCC) -arch=sm_90 -cudart static -o $@ $<
$(RT_CLI)/rt_ptx: tests/clients/rt_client.cu | $(B)/.deps-build
	@mkdir -p $(@D)
	$(RT_NVCC) -gencode arch=compute_90,code=compute_90 -cudart shared -o $@ $<
$(RT_CLI)/rt_libs: tests/clients/rt_libs.cu | $(B)/.deps-build
	@mkdir -p $(@D)
	$(RT_NVCC) -arch=sm_90 -cudart shared -o $@ $< -lcublasLt -lcublas -lcudnn

$(eval $(call salus_test,test_simgpu_rt,$(SIM_MP_OBJS) $(B)/obj/sim/md2.o,$(SIM_TEST_LIBS)))
$(B)/tests/test_simgpu_rt: | $(SIMIMG)/multi.fatbin $(SIMIMG)/other.fatbin $(WL_CUBIN)
$(eval $(call salus_test,test_simgpu_cudart,,))
$(B)/tests/test_simgpu_cudart: | $(SIM_LIB) $(RT_CLIENTS)
