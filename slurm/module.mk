# The Slurm plugin, spank_salus.so (slurm/README.md, salus-slurm(8)), and its
# test against Slurm's own daemons.
#
#   make                    builds it when Debian's libslurm-dev is installed
#                           (<slurm/spank.h>); otherwise says so in one line
#   make test               installs Slurm first (mk/deps.sh slurm), then runs
#                           build/tests/test_slurm with the other tests
#   make install            installs it as $(PREFIX)/lib/spank_salus.so
#
# The plugin is linked with the one list of variables (src/util) so that it
# checks options by libsalus's own rules; Slurm's symbols (spank_*, slurm_*)
# come from the program that loads it, so it links no Slurm library.

SLURM_INCLUDE ?= /usr/include
SPANK_SO   := $(B)/slurm/spank_salus.so
SPANK_OBJS := $(B)/obj/slurm/spank_salus.o $(B)/obj/src/util/vars.o $(B)/obj/src/util/util.o
SLURM_TEST := $(B)/tests/test_slurm

# The plugin's default paths: where make install puts libsalus.so and salus.
$(B)/obj/slurm/spank_salus.o: MOD_CFLAGS := -DSALUS_PREFIX='"$(PREFIX)"'
# Left unresolved: only what slurmd, slurmstepd, sbatch, srun and salloc
# provide (spank_*, slurm_*) and libc's; anything else would fail in a job.
$(SPANK_SO): $(SPANK_OBJS)
	@mkdir -p $(@D)
	$(CC) -shared -o $@ $^
	@if nm -D --undefined-only $@ | awk '$$1 == "U" && $$2 !~ /^(spank_|slurm_)|@/ { print; bad = 1 } END { exit !bad }'; then \
	    echo "$@: the symbols above are neither Slurm's nor libc's" >&2; rm -f $@; exit 1; fi

TESTS += $(SLURM_TEST)
$(SLURM_TEST): slurm/test_slurm.sh $(B)/.deps-slurm
	@mkdir -p $(@D)
	install -m 755 $< $@

# Without the headers when this make began, the test builds the plugin by a
# make that starts after mk/deps.sh slurm has installed them (and after this
# one has built the objects they share, so that two makes never write one).
ifneq ($(wildcard $(SLURM_INCLUDE)/slurm/spank.h),)
ALL_TARGETS += $(SPANK_SO)
install: slurm-install
$(SLURM_TEST): $(SPANK_SO)
else
$(info slurm: spank_salus.so not built: no <slurm/spank.h> (Debian's libslurm-dev; make test installs it))
.PHONY: slurm-plugin
slurm-plugin: $(B)/.deps-slurm $(filter-out $(B)/obj/slurm/%,$(SPANK_OBJS))
	@$(MAKE) --no-print-directory $(SPANK_SO)
$(SLURM_TEST): slurm-plugin
endif

.PHONY: slurm-install
slurm-install: $(SPANK_SO)
	install -d $(DESTDIR)$(PREFIX)/lib
	install -m 755 $(SPANK_SO) $(DESTDIR)$(PREFIX)/lib/

# Slurm's daemons and headers come with the test's packages (after the
# test's own: two apt-get at once fight over dpkg's lock).
$(B)/.deps-slurm: mk/deps.sh $(B)/.deps-test
	@sh mk/deps.sh slurm
	@touch $@
