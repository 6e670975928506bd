# Tests: cmocka binaries (several per module where it helps), build/tests/<name> from tests/<name>.c.
# A tests/<module>.mk declares each of its binaries with
#   $(eval $(call salus_test,<name>,<objects it links>,<libraries>))
# which adds it to TESTS, the list that make test runs in order.

TESTUTIL_OBJS := $(B)/obj/tests/lib/testutil.o $(B)/obj/tests/lib/actor.o \
                 $(B)/obj/tests/lib/salusrun.o
TEST_LDLIBS   := -lcmocka -ldl -lpthread -lrt

$(TESTUTIL_OBJS): | $(B)/.deps-test

define salus_test
TESTS += $(B)/tests/$(1)
$(B)/obj/tests/$(1).o: | $(B)/.deps-test
$(B)/tests/$(1): $(B)/obj/tests/$(1).o $(TESTUTIL_OBJS) $(2)
	@mkdir -p $$(@D)
	$$(CC) $$(CFLAGS) -pthread -o $$@ $$(filter %.o %.a,$$^) $(3) $$(TEST_LDLIBS)
endef

include $(filter-out tests/module.mk,$(wildcard tests/*.mk))

# make test runs two binaries at a time (mk/run-tests.sh, TEST_JOBS); these
# run after the others, one at a time: their checks are shares of GPU time
# or rest times between processes (a second binary's load beside them on a
# busy 2-core machine made them fail), or they page gigabytes.
TEST_ALONE ?= test_memory_thrash test_memory_ipc test_sched_lease test_sched_sim \
              test_sched_gang
export TEST_ALONE
# Of these, one at a time beside the other lane's: each keeps a core busy
# (Python, shellcheck, nm, thousands of children), and two of them at once
# on a loaded 2-core machine took test_gpucheck_judge past 40 s.
TEST_HEAVY ?= test_slurm test_bench test_gpucheck test_gpucheck_torch test_gpucheck_judge \
              test_clients test_ipc_fuzz test_ipc_fuzz_b test_layering
export TEST_HEAVY

# make test-soak: the long variants of the tests that have one, with
# SALUS_TEST_SOAK=1 (tu_soak in tests/lib/testutil.h) and a timeout of
# TEST_SOAK_TIMEOUT seconds per binary: paging's gigabytes and ten rounds
# (test_memory_vmm), preemption's 3 GiB jobs (test_memory_preempt).  The
# same checks as make test's, at the sizes and counts make test scaled
# down to stay in its budget; they need about 8 GiB of free host memory.
SOAK_TESTS := $(addprefix $(B)/tests/,test_memory_vmm test_memory_preempt)
TEST_SOAK_TIMEOUT ?= 900
.PHONY: test-soak
test-soak: $(B)/.deps-test all $(SOAK_TESTS)
	@SALUS_TEST_SOAK=1 CMOCKA_TEST_FILTER='$(F)' sh mk/run-tests.sh $(B)/tests/soak-logs \
	    $(TEST_SOAK_TIMEOUT) $(SOAK_TESTS)
