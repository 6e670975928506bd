# simgpu: the simulated libcuda.so.1 (see sim/README.md).
#
#   make build/sim/libcuda.so.1
#
# Every sim/*.c and sim/loader/*.c (the loader: images, modules, the JIT
# linker; sim/loader/loader.h), linked with -Bsymbolic (so that cuGetProcAddress answers
# simgpu's own functions even when libsalus.so, which exports the same names,
# is preloaded), with libelf for cubins and libzstd for compressed fatbin
# entries, and exporting only cu* symbols.

SIM_SRCS     := $(wildcard sim/*.c sim/loader/*.c)
SIM_OBJS     := $(SIM_SRCS:%.c=$(B)/obj/%.o)
SIM_LIB      := $(B)/sim/libcuda.so.1
SIM_ERRORS_H := $(GEN)/sim_errors.h

# Every CUresult of the toolkit's cuda.h, for cuGetErrorName / String.
$(SIM_ERRORS_H): sim/gen_errors.py $(CUDA_HOME)/include/cuda.h | $(B)/.deps-build
	@mkdir -p $(@D)
	$(PYTHON) $< $(CUDA_HOME)/include/cuda.h $@

# The graphics interop exports (cudaGL.h, cudaEGL.h, cudaVDPAU.h), which
# cudaTypedefs.h does not list: their cuGetProcAddress rows, by the map's rule.
SIM_GFX_H    := $(GEN)/cu_procmap_gfx.h
SIM_GFX_SRC  := $(addprefix $(CUDA_HOME)/include/,cudaGLTypedefs.h cudaEGLTypedefs.h cudaVDPAUTypedefs.h)
$(SIM_GFX_H): src/intercept/gen_procmap.py $(SIM_GFX_SRC) | $(B)/.deps-build
	@mkdir -p $(@D)
	$(PYTHON) $< --rows CU_PROCMAP_GFX $@ $(SIM_GFX_SRC)

$(SIM_OBJS): | $(SIM_ERRORS_H) $(SIM_GFX_H)

$(SIM_LIB): $(SIM_OBJS) sim/libcuda.map
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -shared -Wl,-soname,libcuda.so.1 -Wl,-Bsymbolic -Wl,-z,defs \
	    -Wl,--version-script=sim/libcuda.map -o $@ $(SIM_OBJS) -lelf -lzstd -lpthread -lrt
	ln -sf libcuda.so.1 $(@D)/libcuda.so

ALL_TARGETS += $(SIM_LIB)

# simgpu's NVML, built beside it (sim/nvml).
include sim/nvml/module.mk
