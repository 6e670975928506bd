# Tests: cmocka binaries (several per module where it helps), build/tests/<name> from tests/<name>.c.
# A tests/<module>.mk declares each of its binaries with
#   $(eval $(call salus_test,<name>,<objects it links>,<libraries>))
# which adds it to TESTS, the list that make test runs in order.

TESTUTIL_OBJS := $(B)/obj/tests/lib/testutil.o
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
