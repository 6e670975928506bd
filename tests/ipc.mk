IPC_OBJS := $(B)/obj/src/ipc/table.o $(B)/obj/src/ipc/slots.o $(B)/obj/src/util/util.o $(B)/obj/src/util/vars.o
$(eval $(call salus_test,test_ipc,$(IPC_OBJS),))
