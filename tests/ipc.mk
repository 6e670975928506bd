IPC_OBJS := $(patsubst %.c,$(B)/obj/%.o,$(wildcard src/ipc/*.c)) $(B)/obj/src/util/util.o $(B)/obj/src/util/vars.o
$(eval $(call salus_test,test_ipc,$(IPC_OBJS),))
$(eval $(call salus_test,test_ipc_lock,$(IPC_OBJS),))
