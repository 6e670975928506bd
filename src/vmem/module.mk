# libsalus's private jemalloc (src/vmem/jem.c): Debian's static PIC
# archive, its public names renamed salus_je_* (mk/jemalloc.sh).  libsalus
# links all of it (jem.c refers to it weakly) and exports none of it.
MEM_JEMALLOC      := $(GEN)/libsalus_jemalloc.a
MEM_JEMALLOC_LINK := -Wl,--whole-archive $(MEM_JEMALLOC) -Wl,--no-whole-archive \
                     -Wl,--exclude-libs,ALL
$(MEM_JEMALLOC): mk/jemalloc.sh | $(B)/.deps-build
	@mkdir -p $(@D)
	sh mk/jemalloc.sh "$$($(CC) -print-file-name=libjemalloc_pic.a)" $@
