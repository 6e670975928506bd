# Salus: share one NVIDIA GPU among unmodified deep-learning processes.
#
#   make            build libsalus.so, simgpu, the workloads and the tools
#   make test       every test (unit and multi-process), then a summary line;
#                   two binaries at a time (TEST_JOBS=1: one at a time)
#   make test T=test_sched,test_ipc F='*lease*'
#                   those test binaries only; of them, the tests whose names
#                   match F (cmocka's filter: * and ? are wildcards)
#   make test-frameworks
#                   real PyTorch, JAX and CuPy programs under libsalus over
#                   simgpu (tests/frameworks.mk; FW_ENV=dir: their Python
#                   environment elsewhere than build/frameworks)
#   make test-soak  the long variants (SALUS_TEST_SOAK=1): gigabytes paged
#                   and preempted where make test moves megabytes, more
#                   rounds; the same checks (tests/module.mk lists them)
#   make demo       jobs sharing a (simulated) GPU, with and without Salus
#   make demo-torch three unmodified PyTorch training jobs doing the same
#                   (the frameworks' environment: FW_ENV, as test-frameworks)
#   make bench      the paper's experiments, reproduced (bench/results/)
#   make fuzz       the table fuzzer under libFuzzer for FUZZ_SECONDS (300)
#   make install PREFIX=/usr/local
#   make uninstall PREFIX=/usr/local
#                   what make install put there, removed
#   make deb        a Debian package, build/deb/salus_<version>_<arch>.deb
#   make DEBUG=1 test
#                   a debug build (-O1, SALUS_DEBUG: the table's invariants
#                   checked at every unlock) in build-debug/, and its tests
#
# Each directory adds its targets from its own module.mk; this file holds
# what they share.  Everything is built under build/ (B=dir: elsewhere).

CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(CUDA_HOME)/bin/nvcc
CUDA_ARCH ?= sm_90
# PTX beside each cubin, for a driver that cannot load the cubin: the oldest
# architecture targeted, so that any newer GPU's driver can compile it.
CUDA_PTX_ARCH ?= compute_90
PYTHON    ?= python3
PREFIX    ?= /usr/local
CC        ?= cc
TEST_TIMEOUT ?= 120

# DEBUG=1 on the command line (anything but 0): SALUS_DEBUG, less
# optimization, and a build directory of its own so that its objects never
# mix with a release's.  Neither DEBUG nor B is taken from the environment.
DEBUG_ON  := $(if $(filter command line,$(origin DEBUG)),$(filter-out 0,$(DEBUG)))
CFLAGS    ?= $(if $(DEBUG_ON),-O1 -g,-O2 -g)
ifneq ($(origin B),command line)
B := $(if $(DEBUG_ON),build-debug,build)
endif
GEN := $(B)/gen

# Flags every C file of the project gets.
WARN     := -Wall -Wextra -Werror
# At -O1 gcc tracks fewer value ranges than at -O2, and warns of snprintf
# truncations that a length check just before rules out.
DEBUG_CFLAGS := -DSALUS_DEBUG -Wno-format-truncation
BASE_CFLAGS := -std=gnu11 $(WARN) -D_GNU_SOURCE -fPIC -pthread \
               -I$(CUDA_HOME)/include -I$(GEN) -Isrc $(if $(DEBUG_ON),$(DEBUG_CFLAGS))
DEPFLAGS  = -MMD -MP

# Filled in by the module.mk files.
ALL_TARGETS :=
TESTS       :=
CLEAN_EXTRA :=

.PHONY: all deps deps-test test demo demo-torch bench bench-quick install clean
all:

# The driver's cuGetProcAddress map, derived from the toolkit's headers.
PROCMAP_H := $(GEN)/cu_procmap.h
$(PROCMAP_H): src/intercept/gen_procmap.py $(CUDA_HOME)/include/cudaTypedefs.h | $(B)/.deps-build
	@mkdir -p $(@D)
	$(PYTHON) $< $(CUDA_HOME)/include/cudaTypedefs.h $@

# The version, from one place: the VERSION file, as SALUS_VERSION in
# build/gen/salus_version.h (rewritten only when it changes, so that a
# rebuild does not recompile what includes it).
SALUS_VERSION := $(shell cat VERSION)
VERSION_H := $(GEN)/salus_version.h
$(VERSION_H): VERSION
	@mkdir -p $(@D)
	@printf '#define SALUS_VERSION "%s"\n' '$(SALUS_VERSION)' > $@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@

# Objects: build/obj/<path>.o from <path>.c, with header dependencies.
# A module adds its own flags with a target-specific MOD_CFLAGS.
$(B)/obj/%.o: %.c | $(PROCMAP_H) $(VERSION_H)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(MOD_CFLAGS) $(CFLAGS) $(DEPFLAGS) -c $< -o $@

# Set-up of a fresh machine (see mk/deps.sh); stamps so that it runs once.
$(B)/.deps-build: mk/deps.sh
	@mkdir -p $(B)
	@sh mk/deps.sh build
	@touch $@
# After the build's: two apt-get runs at once (make -j) fight over dpkg's lock.
$(B)/.deps-test: mk/deps.sh $(B)/.deps-build
	@mkdir -p $(B)
	@sh mk/deps.sh test
	@touch $@
deps: $(B)/.deps-build
deps-test: $(B)/.deps-test

# libsalus is every .c file under src/; a module adds rules of its own (a
# generated header, say) in its module.mk.  Its names are defined before the
# modules are read, so that any module.mk may depend on $(LIBSALUS).
SALUS_SRCS := $(wildcard src/*/*.c)
SALUS_OBJS := $(SALUS_SRCS:%.c=$(B)/obj/%.o)
LIBSALUS   := $(B)/libsalus.so
include $(wildcard src/*/module.mk sim/module.mk workloads/module.mk \
                   tools/module.mk bench/module.mk slurm/module.mk tests/module.mk)
# After the modules: packaging uses their names (mk/package.mk).
include mk/package.mk

# libsalus.so: every module of src/, linked with hidden visibility so that it
# exports only what is marked SALUS_EXPORT (the wrapped driver symbols, dlsym
# and the documented salus_* functions).  It does not link libcuda: the real
# driver is opened when a process first uses CUDA.
$(SALUS_OBJS): MOD_CFLAGS := -fvisibility=hidden
$(LIBSALUS): $(SALUS_OBJS) $(MEM_JEMALLOC)
	$(CC) -shared -Wl,-soname,libsalus.so -Wl,-Bsymbolic -Wl,-z,now -o $@ $(SALUS_OBJS) \
	    $(MEM_JEMALLOC_LINK) -ldl -lpthread -lrt -lm
ALL_TARGETS += $(LIBSALUS)

all: $(ALL_TARGETS)

# What only a debug build compiles (SALUS_DEBUG) must compile in every build:
# make test checks its syntax, a few seconds, once per change of src/.
$(B)/.debug-syntax: $(SALUS_SRCS) $(wildcard src/*/*.h) | $(PROCMAP_H) $(HOOK_LIST_H)
	$(CC) $(BASE_CFLAGS) $(DEBUG_CFLAGS) -fsyntax-only $(SALUS_SRCS)
	@touch $@

# T picks test binaries by name (comma or space separated), F the tests in
# them by cmocka's filter (tests/lib/testutil.c hands it over).
comma := ,
TEST_PICK := $(if $(T),$(addprefix $(B)/tests/,$(notdir $(subst $(comma), ,$(T)))),$(TESTS))
TEST_UNKNOWN := $(filter-out $(TESTS),$(TEST_PICK))
test: $(B)/.deps-test all $(B)/.debug-syntax $(filter $(TESTS),$(TEST_PICK))
	@$(if $(TEST_UNKNOWN),echo "make test: no test binary $(notdir $(TEST_UNKNOWN)); the tests are: $(notdir $(TESTS))" >&2; exit 2)
	@CMOCKA_TEST_FILTER='$(F)' sh mk/run-tests.sh $(B)/tests/logs $(TEST_TIMEOUT) $(TEST_PICK)

# Three jobs share simgpu under Salus, then run without it (mk/demo.sh).  The
# build's commands are hidden (errors still show); V=1 prints them.
demo: $(B)/.deps-test
	@$(MAKE) --no-print-directory $(if $(filter 1,$(V)),,-s) all
	@sh mk/demo.sh

# Three PyTorch training jobs share simgpu under Salus, then run without it
# (mk/demo_torch.py), in the frameworks' environment (FW_ENV, default
# build/frameworks: tests/frameworks.mk), made by mk/fwenv.sh when missing.
demo-torch: $(B)/.deps-test
	@$(MAKE) --no-print-directory $(if $(filter 1,$(V)),,-s) all
	@sh mk/fwenv.sh $(FW_ENV) tests/frameworks/requirements.txt
	@$(PYTHON) mk/demo_torch.py $(FW_ENV) $(B)

# bin/, lib/ and share/man/ under $(DESTDIR)$(PREFIX): tools/module.mk's rule;
# slurm/module.mk and mk/package.mk add theirs.
install: all tools-install

clean:
	rm -rf $(B) $(CLEAN_EXTRA)

-include $(shell find $(B)/obj -name '*.d' 2>/dev/null)
