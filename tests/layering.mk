# test_layering: no dependency loop between libsalus's files or modules,
# judged from the objects libsalus.so is linked from (mk/circles.py).
$(B)/obj/tests/test_layering.o: MOD_CFLAGS := -DLAYER_SCRIPT='"mk/circles.py"' \
                                              -DLAYER_OBJS='"$(B)/obj/src"'
$(eval $(call salus_test,test_layering,,))
$(B)/tests/test_layering: $(LIBSALUS) mk/circles.py mk/pointers.py
