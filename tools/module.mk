# The tools: salus-top (the live monitor) and salus (run, status, policy,
# reset), and their man pages with libsalus(7) and salus-slurm(8) (the
# Slurm plugin's, slurm/).
#
#   make build/bin/salus build/bin/salus-top
#   make tools-install PREFIX=... DESTDIR=...   (what make install runs)
#
# They read the arbitration table through the modules' own interfaces, so
# they link those modules' objects (ipc, util, sched, memory) from a static
# archive, which pulls in only what the read functions need: never
# libsalus.so, which overrides dlsym, and never the CUDA driver.

TOOLS_CORE_OBJS := $(patsubst %.c,$(B)/obj/%.o,$(wildcard src/ipc/*.c src/util/*.c src/drv/*.c \
                                                   src/sched/*.c src/memory/*.c))
TOOLS_CORE      := $(B)/tools/libsalus-core.a
TOOLS_LIB_OBJS  := $(patsubst %,$(B)/obj/tools/%.o,collect layout output draw text top gpuinfo nvmlinfo http access control \
                                                   capture audit)
TOOLS_BINS      := $(B)/bin/salus $(B)/bin/salus-top
TOOLS_MAN1      := tools/man/salus.1 tools/man/salus-top.1
TOOLS_MAN7      := tools/man/libsalus.7
TOOLS_MAN8      := tools/man/salus-slurm.8
TOOLS_LDLIBS    := $(shell pkg-config --libs ncurses 2>/dev/null || echo -lncurses) -lm -lpthread -lrt -ldl

$(TOOLS_CORE): $(TOOLS_CORE_OBJS)
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $^

$(TOOLS_LIB_OBJS) $(B)/obj/tools/salus.o $(B)/obj/tools/salus_run.o $(B)/obj/tools/salus_control.o \
    $(B)/obj/tools/top_main.o: | $(B)/.deps-build
$(B)/obj/tools/nvmlinfo.o: | $(NVML_H)

$(B)/bin/salus-top: $(B)/obj/tools/top_main.o $(TOOLS_LIB_OBJS) $(TOOLS_CORE)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -pthread -o $@ $^ $(TOOLS_LDLIBS)
$(B)/bin/salus: $(B)/obj/tools/salus.o $(B)/obj/tools/salus_run.o $(B)/obj/tools/salus_control.o \
               $(TOOLS_LIB_OBJS) $(TOOLS_CORE)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -pthread -o $@ $^ $(TOOLS_LDLIBS)

ALL_TARGETS += $(TOOLS_BINS)

.PHONY: tools-install
tools-install: $(LIBSALUS) $(TOOLS_BINS) $(TOOLS_MAN1) $(TOOLS_MAN7) $(TOOLS_MAN8)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib \
	    $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man7 \
	    $(DESTDIR)$(PREFIX)/share/man/man8
	install -m 755 $(TOOLS_BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 755 $(LIBSALUS) $(DESTDIR)$(PREFIX)/lib/
	install -m 644 $(TOOLS_MAN1) $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 644 $(TOOLS_MAN7) $(DESTDIR)$(PREFIX)/share/man/man7/
	install -m 644 $(TOOLS_MAN8) $(DESTDIR)$(PREFIX)/share/man/man8/
