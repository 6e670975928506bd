# bench/gpu/check.sh's own programs (it runs on a machine with an NVIDIA GPU,
# and over simgpu with --simgpu): the fixed-work kernel of its overlap step,
# as a cubin for CUDA_ARCH and as PTX for CUDA_PTX_ARCH (compute_90 by
# default: PTX of the oldest architecture the project targets, which a
# driver too old for the cubin can still compile at load), and the
# driver-API program that launches it in the patterns of issue 11.
# `make gpucheck` builds them; nothing else depends on them but the test of
# check.sh's --simgpu mode (tests/bench.mk).

GPUCHECK       := $(B)/gpucheck
GPUCHECK_FILES := $(GPUCHECK)/overlap $(GPUCHECK)/stamp.cubin $(GPUCHECK)/stamp.ptx

$(GPUCHECK)/stamp.cubin: bench/gpu/stamp.cu | $(B)/.deps-build
	@mkdir -p $(@D)
	$(NVCC) -cubin -arch=$(CUDA_ARCH) -o $@ $<
$(GPUCHECK)/stamp.ptx: bench/gpu/stamp.cu | $(B)/.deps-build
	@mkdir -p $(@D)
	$(NVCC) -ptx -arch=$(CUDA_PTX_ARCH) -o $@ $<
$(GPUCHECK)/overlap: bench/gpu/overlap.c | $(B)/.deps-build
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(WARN) -D_GNU_SOURCE -I$(CUDA_HOME)/include $(CFLAGS) -o $@ $< \
	    -L$(CUDA_HOME)/lib64/stubs -lcuda -lpthread

gpucheck: $(GPUCHECK_FILES)
.PHONY: gpucheck
