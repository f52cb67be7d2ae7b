# src/quant/: number formats, rounding kernels (CPU + CUDA), histograms and KL.
# Rounding must be exact and identical in every clone: no FMA contraction (every product in the
# kernels is exact anyway) and no trapping math, which lets gcc vectorise floorf/rintf.
noinst_LIBRARIES += libquant.a
libquant_a_CFLAGS = $(AM_CFLAGS) -fno-trapping-math -ffp-contract=off
libquant_a_SOURCES = \
	src/quant/quant.h src/quant/quant_impl.h src/quant/quant_cpu.h \
	src/quant/spec.c src/quant/quant.c src/quant/kernels.c src/quant/philox.c \
	src/quant/kl.c src/quant/pack.c
if HAVE_CUDA
libquant_a_SOURCES += src/quant/cuda/quant.cu
else
libquant_a_SOURCES += src/quant/cuda_none.c
endif
EXTRA_DIST += src/quant/cuda/quant.cu src/quant/cuda_none.c
