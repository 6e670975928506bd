IPC_OBJS := $(patsubst %.c,$(B)/obj/%.o,$(wildcard src/ipc/*.c src/util/*.c src/drv/*.c))
$(eval $(call salus_test,test_ipc,$(IPC_OBJS),))
$(eval $(call salus_test,test_ipc_lock,$(IPC_OBJS),))
