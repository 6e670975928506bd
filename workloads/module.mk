# Workloads: the device code (a cubin and PTX, built with nvcc) and the
# driver-API programs that behave like training and inference jobs.

WL_CUBIN := $(B)/workloads/kernels.cubin
WL_PTX   := $(B)/workloads/kernels.ptx

$(WL_CUBIN): workloads/kernels.cu | $(B)/.deps-build
	@mkdir -p $(@D)
	$(NVCC) -cubin -arch=$(CUDA_ARCH) -o $@ $<
$(WL_PTX): workloads/kernels.cu | $(B)/.deps-build
	@mkdir -p $(@D)
	$(NVCC) -ptx -arch=$(CUDA_PTX_ARCH) -o $@ $<

ALL_TARGETS += $(WL_CUBIN) $(WL_PTX)

# The programs: C over the driver API, with weak references to the driver's
# exports bound lazily (-z lazy), and libcuda.so.1 loaded at run time (wl.h):
# LD_LIBRARY_PATH picks simgpu or the real driver, and --help needs neither.  They find the module beside themselves
# (build/bin/../workloads/kernels.cubin), hence the dependency on it.
WL_LIB_SRCS := workloads/wl_util.c workloads/wl_opt.c workloads/wl_gpu.c \
               workloads/wl_mem.c workloads/wl_run.c workloads/presets.c
WL_LIB_OBJS := $(WL_LIB_SRCS:%.c=$(B)/obj/%.o)
WL_PROGS    := $(B)/bin/salus-train $(B)/bin/salus-infer
WL_LDLIBS   := -Wl,-z,lazy -ldl -lm -lrt -lpthread

$(WL_LIB_OBJS) $(B)/obj/workloads/train.o $(B)/obj/workloads/infer.o: | $(B)/.deps-build

$(B)/bin/salus-train: $(B)/obj/workloads/train.o $(WL_LIB_OBJS) | $(WL_CUBIN) $(WL_PTX)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -pthread -o $@ $(filter %.o,$^) $(WL_LDLIBS)
$(B)/bin/salus-infer: $(B)/obj/workloads/infer.o $(WL_LIB_OBJS) | $(WL_CUBIN) $(WL_PTX)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -pthread -o $@ $(filter %.o,$^) $(WL_LDLIBS)

ALL_TARGETS += $(WL_PROGS)
