$(eval $(call salus_test,test_util,$(B)/obj/src/util/util.o $(B)/obj/src/util/vars.o \
                                 $(B)/obj/src/util/cgroup.o,))
