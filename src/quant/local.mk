# src/quant/: number formats, rounding kernels (CPU + CUDA), histograms and KL.
# Rounding must be exact and identical in every clone: no FMA contraction (every product in the
# kernels is exact anyway) and no trapping math, which lets gcc vectorise floorf/rintf.
noinst_LIBRARIES += libquant.a
libquant_a_CFLAGS = $(AM_CFLAGS) -fno-trapping-math -ffp-contract=off
libquant_a_SOURCES = \
	src/quant/quant.h src/quant/quant_impl.h src/quant/quant_cpu.h \
	src/quant/spec.c src/quant/quant.c src/quant/kernels.c src/quant/philox.c \
	src/quant/kl.c src/quant/pack.c src/quant/plugin.c src/quant/named.c
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
