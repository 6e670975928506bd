# The tools' tests:
#   test_tools_layout  the pure parts (layout at 40 and 200 columns, cells,
#                      sorting, changes, sanitizing, JSON and Prometheus of a
#                      hand-made snapshot): no terminal, no table
#   test_tools         salus-top and salus end to end over simgpu with
#                      salus-train jobs under libsalus: tmux, JSON, policy,
#                      run, reset, arguments, help, man pages, install
# Both link the tools' objects (tools/module.mk) and a strict JSON parser.
TOOLS_TEST_OBJS := $(TOOLS_LIB_OBJS) $(TOOLS_CORE) $(B)/obj/tests/test_tools_json.o \
                   $(B)/obj/tests/test_tools_lib.o
$(B)/obj/tests/test_tools_json.o $(B)/obj/tests/test_tools_lib.o: | $(B)/.deps-test
$(eval $(call salus_test,test_tools_layout,$(TOOLS_TEST_OBJS),$(TOOLS_LDLIBS)))
$(eval $(call salus_test,test_tools,$(TOOLS_TEST_OBJS),$(TOOLS_LDLIBS)))
$(B)/tests/test_tools: $(TOOLS_BINS) $(B)/libsalus.so $(SIM_LIB) $(WL_PROGS) $(WL_CUBIN)
$(eval $(call salus_test,test_tools_docs,$(TOOLS_TEST_OBJS),$(TOOLS_LDLIBS)))
$(B)/tests/test_tools_docs: $(TOOLS_BINS) $(B)/libsalus.so $(SIM_LIB) $(WL_PROGS) $(WL_CUBIN)
# test_tools_ops     day-to-day operation: versions, each command's help, log
#                    levels, metrics and the exporter, the upgrade's status
$(eval $(call salus_test,test_tools_ops,$(TOOLS_TEST_OBJS),$(TOOLS_LDLIBS)))
$(B)/tests/test_tools_ops: $(TOOLS_BINS) $(B)/libsalus.so $(SIM_LIB) $(WL_PROGS) $(WL_CUBIN)
# test_tools_control live control: renice, limit, permissions, the audit
#                    line, salus-top's keys in tmux
$(eval $(call salus_test,test_tools_control,$(TOOLS_TEST_OBJS),$(TOOLS_LDLIBS)))
$(B)/tests/test_tools_control: $(TOOLS_BINS) $(B)/libsalus.so $(SIM_LIB) $(WL_PROGS) $(WL_CUBIN)
# test_tools_mem     one memory figure: a job's used (contexts included) and
#                    its context part the same in JSON, Prometheus and text
$(eval $(call salus_test,test_tools_mem,$(TOOLS_TEST_OBJS),$(TOOLS_LDLIBS)))
$(B)/tests/test_tools_mem: $(TOOLS_BINS) $(B)/libsalus.so $(SIM_LIB) $(WL_PROGS) $(WL_CUBIN)
