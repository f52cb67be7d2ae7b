# src/quant/: number formats, rounding kernels (CPU + CUDA), histograms and KL.
# Rounding must be exact and identical in every clone: no FMA contraction (every product in the
# kernels is exact anyway) and no trapping math, which lets gcc vectorise floorf/rintf.
noinst_LIBRARIES += libquant.a
libquant_a_CFLAGS = $(AM_CFLAGS) -fno-trapping-math -ffp-contract=off
libquant_a_SOURCES = \
	src/quant/quant.h src/quant/quant_impl.h src/quant/quant_cpu.h \
	src/quant/spec.c src/quant/quant.c src/quant/kernels.c src/quant/philox.c \
	src/quant/kl.c src/quant/pack.c src/quant/plugin.c src/quant/named.c src/quant/accum.c \
	src/quant/accum_spec.c src/quant/accum_impl.h src/quant/accum_fast.c src/quant/accum_fast.h \
	src/quant/gemm_int.c src/quant/gemm_int.h
if HAVE_CUDA
libquant_a_SOURCES += src/quant/cuda/quant.cu
else
libquant_a_SOURCES += src/quant/cuda_none.c
endif
EXTRA_DIST += src/quant/cuda/quant.cu src/quant/cuda_none.c

# The example rounding plugin (doc/policies.md, "Writing a rounding plugin"), a shared object built with
# plain compiler flags: the project's own flags (sanitizers, coverage) stay out of it, and
# -fopenmp-simd makes gcc emit the vector variants of its `declare simd` function.
PLUGIN_CFLAGS = -shared -fPIC -fopenmp-simd -O2 -std=gnu11 -Wall -Wextra $(WERROR_CFLAGS)
noinst_DATA = src/quant/plugins/bf16_sr.so
src/quant/plugins/bf16_sr.so: src/quant/plugins/bf16_sr.c
	@$(MKDIR_P) src/quant/plugins
	$(AM_V_CC)$(CC) $(PLUGIN_CFLAGS) -o $@ $(srcdir)/src/quant/plugins/bf16_sr.c
EXTRA_DIST += src/quant/plugins/bf16_sr.c
CLEANFILES += src/quant/plugins/bf16_sr.so

# The rounding kernels as a shared object for the Python package (adaptsim.quantize loads it with
# ctypes): src/quant/pyapi.c and the sources of libquant.a and the parts of src/base they use,
# compiled again position-independent with libquant.a's flags (the bits are the kernels' own:
# python/tests/test_quantize.py compares them with tests/quant_rows_dump, which links
# libquant.a) but without the sanitizer and fuzzer instrumentation, which a Python process cannot
# host. CPU only (cuda_none.c in every build). Only the adapt_py_* functions are exported. Built
# beside the package (python/adaptsim/, found there in a source tree) and installed in
# $(pkglibdir), where the installed package looks for it too.
PYQUANT_SRC = src/quant/pyapi.c src/quant/spec.c src/quant/quant.c src/quant/kernels.c \
	src/quant/philox.c src/quant/kl.c src/quant/pack.c src/quant/plugin.c src/quant/named.c \
	src/quant/cuda_none.c src/base/status.c src/base/log.c src/base/fileio.c
PYQUANT_HDR = src/quant/quant.h src/quant/quant_impl.h src/quant/quant_cpu.h \
	src/base/status.h src/base/log.h src/base/fileio.h src/base/rng.h src/base/hd.h
PYQUANT_CFLAGS = -shared -fPIC -fvisibility=hidden -std=gnu11 -Wall -Wextra \
	-Wno-unused-parameter -Wno-sign-compare -fno-trapping-math -ffp-contract=off \
	$(OPENMP_CFLAGS) $(NATIVE_CFLAGS) $(WERROR_CFLAGS)
pyquantdir = $(pkglibdir)
pyquant_DATA = python/adaptsim/_libadaptquant.so
python/adaptsim/_libadaptquant.so: $(PYQUANT_SRC) $(PYQUANT_HDR)
	@$(MKDIR_P) python/adaptsim
	$(AM_V_CCLD)set --; for f in $(PYQUANT_SRC); do set -- "$$@" "$(srcdir)/$$f"; done; \
	$(CC) $(PYQUANT_CFLAGS) -I$(top_srcdir) -I$(top_builddir) $(CPPFLAGS) $(CFLAGS) \
	  -Wl,-z,defs -o $@ "$$@" $(LDFLAGS) $(DL_LIBS) -lm
EXTRA_DIST += src/quant/pyapi.c
CLEANFILES += python/adaptsim/_libadaptquant.so
