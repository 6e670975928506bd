# The interception layer: the hook list, generated from hooks.list and the
# driver map, for every object of src/intercept and the tests that use it.

HOOK_LIST_H := $(GEN)/hook_list.h
$(HOOK_LIST_H): src/intercept/gen_hooks.py src/intercept/hooks.list $(PROCMAP_H)
	@mkdir -p $(@D)
	$(PYTHON) src/intercept/gen_hooks.py src/intercept/hooks.list $(PROCMAP_H) $@

# Every object that includes intercept.h needs the list before it compiles.
$(patsubst %.c,$(B)/obj/%.o,$(wildcard src/intercept/*.c)): $(HOOK_LIST_H)
