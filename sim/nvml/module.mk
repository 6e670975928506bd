# simgpu's NVML: a libnvidia-ml.so.1 beside simgpu's libcuda.so.1, answering
# from the same shared state (sim/nvml/nvml.c).
#
#   make build/sim/libnvidia-ml.so.1
#
# Linked with -Bsymbolic (its own calls stay its own when libsalus.so, which
# exports some of the same names, is preloaded), exporting only nvml*.

SIM_NVML_SRCS := $(wildcard sim/nvml/*.c)
SIM_NVML_OBJS := $(SIM_NVML_SRCS:%.c=$(B)/obj/%.o)
SIM_NVML_LIB  := $(B)/sim/libnvidia-ml.so.1

$(SIM_NVML_OBJS): MOD_CFLAGS := -Isim -fvisibility=hidden
$(SIM_NVML_OBJS): | $(NVML_H) $(SIM_ERRORS_H) $(SIM_GFX_H)

$(SIM_NVML_LIB): $(SIM_NVML_OBJS) sim/nvml/libnvidia-ml.map
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(LDFLAGS) -shared -Wl,-soname,libnvidia-ml.so.1 -Wl,-Bsymbolic -Wl,-z,defs \
	    -Wl,--version-script=sim/nvml/libnvidia-ml.map -o $@ $(SIM_NVML_OBJS) -lpthread -lrt
	ln -sf libnvidia-ml.so.1 $(@D)/libnvidia-ml.so

ALL_TARGETS += $(SIM_NVML_LIB)
