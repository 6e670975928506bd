# Packaging: what make install puts beside the tools (the documentation, the
# exporter's systemd unit), make uninstall, and make deb.
#
#   make install   PREFIX=/usr/local DESTDIR=   libsalus, the tools, their man
#                  pages (tools-install), the SPANK plugin (slurm-install),
#                  the report and README under share/doc/salus, and
#                  lib/systemd/system/salus-exporter.service (package-install)
#   make uninstall PREFIX=/usr/local DESTDIR=   removes exactly those files
#   make deb       build/deb/salus_<version>_<arch>.deb, made with dpkg-deb:
#                  the same files under /usr, the plugin built with /usr's
#                  paths; test_tools installs it into a scratch dpkg database
#                  (dpkg --root) and removes it again
#
# One list, INSTALLED, names every file install puts under $(PREFIX):
# uninstall removes it and test_tools checks both against it.

INSTALLED := bin/salus bin/salus-top lib/libsalus.so lib/spank_salus.so \
             share/man/man1/salus.1 share/man/man1/salus-top.1 \
             share/man/man7/libsalus.7 share/man/man8/salus-slurm.8 \
             share/doc/salus/README.md share/doc/salus/REPORT.md \
             lib/systemd/system/salus-exporter.service
UNIT_IN   := tools/systemd/salus-exporter.service.in

.PHONY: package-install uninstall deb installed-list
install: package-install
package-install: README.md bench/REPORT.md $(UNIT_IN)
	install -d $(DESTDIR)$(PREFIX)/share/doc/salus $(DESTDIR)$(PREFIX)/lib/systemd/system
	install -m 644 README.md bench/REPORT.md $(DESTDIR)$(PREFIX)/share/doc/salus/
	sed 's|@PREFIX@|$(PREFIX)|g' $(UNIT_IN) > $(DESTDIR)$(PREFIX)/lib/systemd/system/salus-exporter.service
	chmod 644 $(DESTDIR)$(PREFIX)/lib/systemd/system/salus-exporter.service

# Files only, then the directories of ours left empty (never bin/, lib/ or
# a man section another package shares).
uninstall:
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/,$(INSTALLED))
	-rmdir $(DESTDIR)$(PREFIX)/share/doc/salus 2>/dev/null
	@echo "uninstall: removed Salus from $(DESTDIR)$(PREFIX)"

# For test_tools: the list, one path a line.
installed-list:
	@printf '%s\n' $(INSTALLED)

# ---- the Debian package ---------------------------------------------------------
DEB_ARCH  := $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
DEB_DIR   := $(B)/deb
DEB_ROOT  := $(DEB_DIR)/root
DEB       := $(DEB_DIR)/salus_$(SALUS_VERSION)_$(DEB_ARCH).deb
DEB_SPANK := $(DEB_DIR)/spank_salus.so

# The plugin again, with the package's paths (/usr/lib/libsalus.so,
# /usr/bin/salus) compiled in as its defaults; its headers come with the
# test's Slurm packages when they are missing.
$(DEB_DIR)/spank_salus.o: slurm/spank_salus.c $(if $(wildcard $(SLURM_INCLUDE)/slurm/spank.h),,$(B)/.deps-slurm) | $(PROCMAP_H) $(VERSION_H)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) -DSALUS_PREFIX='"/usr"' $(CFLAGS) -c $< -o $@
$(DEB_SPANK): $(DEB_DIR)/spank_salus.o $(filter-out $(B)/obj/slurm/%,$(SPANK_OBJS))
	$(CC) -shared -o $@ $^

deb: $(DEB)
$(DEB): $(LIBSALUS) $(TOOLS_BINS) $(DEB_SPANK) $(TOOLS_MAN1) $(TOOLS_MAN7) $(TOOLS_MAN8) \
        README.md bench/REPORT.md $(UNIT_IN) VERSION mk/package.mk
	@command -v dpkg-deb >/dev/null || { echo "make deb: dpkg-deb is missing (Debian's dpkg)" >&2; exit 1; }
	rm -rf $(DEB_ROOT)
	$(MAKE) --no-print-directory B=$(B) tools-install package-install DESTDIR=$(abspath $(DEB_ROOT)) PREFIX=/usr
	install -m 755 $(DEB_SPANK) $(DEB_ROOT)/usr/lib/spank_salus.so
	install -d $(DEB_ROOT)/DEBIAN
	{ echo "Package: salus"; \
	  echo "Version: $(SALUS_VERSION)"; \
	  echo "Architecture: $(DEB_ARCH)"; \
	  echo "Maintainer: The Salus project <salus@localhost>"; \
	  echo "Installed-Size: $$(du -sk $(DEB_ROOT)/usr | cut -f1)"; \
	  echo "Depends: libc6, libgcc-s1, libncurses6, libtinfo6"; \
	  echo "Suggests: slurm-wlm, prometheus"; \
	  echo "Section: utils"; \
	  echo "Priority: optional"; \
	  echo "Description: share one NVIDIA GPU among unmodified deep-learning processes"; \
	  echo " libsalus.so, a CUDA driver-API interposer loaded with LD_PRELOAD, leases"; \
	  echo " the GPU to one job at a time at iteration boundaries and counts every"; \
	  echo " allocation against limits; salus runs jobs under it and changes them,"; \
	  echo " salus-top shows who shares the GPU and serves Prometheus metrics (a"; \
	  echo " systemd unit, salus-exporter, not enabled); spank_salus.so is the Slurm"; \
	  echo " plugin."; } > $(DEB_ROOT)/DEBIAN/control
	dpkg-deb --root-owner-group --build $(DEB_ROOT) $@
