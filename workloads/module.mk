# Workloads: the device code (a cubin and PTX, built with nvcc) and the
# driver-API programs that behave like training and inference jobs.

WL_CUBIN := $(B)/workloads/kernels.cubin
WL_PTX   := $(B)/workloads/kernels.ptx

$(WL_CUBIN): workloads/kernels.cu | $(B)/.deps-build
	@mkdir -p $(@D)
	$(NVCC) -cubin -arch=$(CUDA_ARCH) -o $@ $<
$(WL_PTX): workloads/kernels.cu | $(B)/.deps-build
	@mkdir -p $(@D)
	$(NVCC) -ptx -arch=$(subst sm_,compute_,$(CUDA_ARCH)) -o $@ $<

ALL_TARGETS += $(WL_CUBIN) $(WL_PTX)
