# The scheduler's tests: unit and fake-clock schedules (test_sched), the
# lease protocol between processes through the sched API with a fake driver
# (test_sched_lease).
SCHED_TEST_OBJS := $(patsubst %.c,$(B)/obj/%.o,$(wildcard src/sched/*.c)) \
                   $(B)/obj/src/ipc/table.o $(B)/obj/src/ipc/slots.o $(B)/obj/src/util/util.o
$(eval $(call salus_test,test_sched,$(SCHED_TEST_OBJS),))
$(eval $(call salus_test,test_sched_lease,$(SCHED_TEST_OBJS),))
