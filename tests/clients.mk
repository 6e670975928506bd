# The third-party clients (tests/clients/*.py, run by test_clients): their
# Python environment, build/venv, made once by mk/venv.sh from the pinned
# tests/clients/requirements.txt (and again when either changes).  The
# Debian packages they need (python3-venv, python3-numba) come from
# mk/deps.sh test.
VENV := $(B)/venv
VENV_READY := $(VENV)/.ready
$(VENV_READY): mk/venv.sh tests/clients/requirements.txt | $(B)/.deps-test
	CUDA_HOME=$(CUDA_HOME) sh mk/venv.sh $(VENV) tests/clients/requirements.txt

$(B)/obj/tests/test_clients.o: MOD_CFLAGS := -DCUDA_HOME_DIR='"$(CUDA_HOME)"'
$(eval $(call salus_test,test_clients,,))
$(B)/tests/test_clients: $(VENV_READY) $(B)/libsalus.so $(B)/sim/libcuda.so.1 \
                         $(B)/bin/salus-train $(WL_CUBIN) $(WL_PTX)
