# src/base: what every module uses and that knows nothing of training: status codes, logging,
# file helpers (atomic write, strings, paths), the safetensors container, host/device macros,
# the counter-based RNG.
noinst_LIBRARIES += libadaptbase.a
libadaptbase_a_SOURCES = \
	src/base/status.c src/base/status.h \
	src/base/log.c src/base/log.h \
	src/base/fileio.c src/base/fileio.h \
	src/base/safetensors.c src/base/safetensors.h \
	src/base/hd.h src/base/rng.h \
	src/base/version.c src/base/version.h
nodist_libadaptbase_a_SOURCES = src/base/buildinfo.h
# where adapt_find_file looks for shipped files: this source tree, then the installed data
libadaptbase_a_CPPFLAGS = $(AM_CPPFLAGS) -DADAPT_ABS_SRCDIR='"$(abs_top_srcdir)"' \
	-DADAPT_PKGDATADIR='"$(pkgdatadir)"'

# src/base/buildinfo.h: the commit (git describe in a git checkout, the file .commit that
# `make dist` writes in a release tarball, else "unknown") and the compiler and options, for
# --version. Written on every make but replaced only when it changes, so only version.o
# follows a new commit.
BUILT_SOURCES += src/base/buildinfo.h
CLEANFILES += src/base/buildinfo.h
src/base/buildinfo.h: FORCE
	$(AM_V_GEN)$(MKDIR_P) src/base; \
	if test -e "$(srcdir)/.git"; then \
	  commit=`cd "$(srcdir)" && git describe --always --dirty --abbrev=12 2>/dev/null`; \
	elif test -f "$(srcdir)/.commit"; then \
	  commit=`cat "$(srcdir)/.commit"`; \
	fi; \
	q() { printf '%s' "$$*" | sed 's/["\\]/\\&/g'; }; \
	{ echo "#define ADAPT_BUILD_COMMIT \"`q $${commit:-unknown}`\""; \
	  echo "#define ADAPT_BUILD_CC \"`q $(CC)`\""; \
	  echo "#define ADAPT_BUILD_CFLAGS \"`q $(CFLAGS) $(NATIVE_CFLAGS) $(OPENMP_CFLAGS) \
	    $(SANITIZER_CFLAGS) $(FUZZ_CFLAGS)`\""; \
	  echo "#define ADAPT_BUILD_NVCC \"`q $(NVCC) $(NVCCFLAGS)`\""; } > $@.tmp; \
	if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@; fi
.PHONY: FORCE
FORCE:

# a release tarball records the commit it was made from
dist-hook: dist-commit
dist-commit:
	if test -e "$(srcdir)/.git"; then \
	  (cd "$(srcdir)" && git describe --always --dirty --abbrev=12) > "$(distdir)/.commit"; \
	fi
.PHONY: dist-commit
