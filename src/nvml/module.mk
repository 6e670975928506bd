# libsalus's NVML hooks (src/nvml) and NVML's header, which the build needs
# and the CUDA toolkit here does not ship.
#
# nvml.h: the toolkit's if it has one, else the pinned nvidia-nvml-dev wheel's
# from PyPI (mk/nvml.sh), under $(B)/nvml/; NVML_H=<path> on the command line
# names another.  The hooked names (nvml.list) are checked against it and
# generated into $(GEN)/nvml_list.h for every object that includes
# nvml/nvhook.h, and for simgpu's NVML (sim/nvml/module.mk).

NVML_DEV_REQ ?= nvidia-nvml-dev==13.0.87
ifeq ($(origin NVML_H),undefined)
NVML_H := $(if $(wildcard $(CUDA_HOME)/include/nvml.h),$(CUDA_HOME)/include/nvml.h,$(B)/nvml/nvml.h)
endif
# Every object may include <nvml.h>: the directory goes after the toolkit's.
BASE_CFLAGS += -I$(dir $(NVML_H))

$(B)/nvml/nvml.h: mk/nvml.sh | $(B)/.deps-build
	sh mk/nvml.sh $@ '$(NVML_DEV_REQ)'

NVH_LIST_H := $(GEN)/nvml_list.h
$(NVH_LIST_H): src/nvml/gen_nvml.py src/nvml/nvml.list $(NVML_H)
	@mkdir -p $(@D)
	$(PYTHON) src/nvml/gen_nvml.py src/nvml/nvml.list $(NVML_H) $@

$(patsubst %.c,$(B)/obj/%.o,$(wildcard src/nvml/*.c src/intercept/*.c)): $(NVH_LIST_H)
$(B)/.debug-syntax: | $(NVH_LIST_H)
