# make test-frameworks: real PyTorch, JAX and CuPy programs over simgpu with
# libsalus preloaded (tests/frameworks/*.py, run by tests/frameworks/run.py).
#
# Their Python environment is FW_ENV (default build/frameworks), made by
# mk/fwenv.sh from the pinned tests/frameworks/requirements.txt when it is
# missing or its pins changed (the script decides, by a hash: several
# checkouts may share one FW_ENV).  An environment that cannot be made is a
# skip of every scenario, with the reason, or a failure under CI=true.
# FW_CASES=a,b runs only the cases whose names contain a or b;
# FW_TIMEOUT is each scenario's limit in seconds.
FW_ENV     ?= $(B)/frameworks
FW_TIMEOUT ?= 900
FW_SCENARIOS := $(sort $(wildcard tests/frameworks/[0-9]*.py))

.PHONY: test-frameworks
test-frameworks: $(B)/.deps-test $(LIBSALUS) $(B)/sim/libcuda.so.1
	@sh mk/fwenv.sh $(FW_ENV) tests/frameworks/requirements.txt || \
	    echo "test-frameworks: no frameworks environment; the scenarios cannot run" >&2
	@FW_BUILD=$(B) FW_CASES='$(FW_CASES)' $(PYTHON) tests/frameworks/run.py \
	    $(FW_ENV) $(B)/tests/fw-logs $(FW_TIMEOUT) $(FW_SCENARIOS)
