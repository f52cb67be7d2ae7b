# quant/: number formats, rounding kernels (CPU + CUDA), histograms and KL.
# Rounding must be exact and identical in every clone: no FMA contraction (every product in the
# kernels is exact anyway) and no trapping math, which lets gcc vectorise floorf/rintf.
noinst_LIBRARIES += libquant.a
libquant_a_CFLAGS = $(AM_CFLAGS) -fno-trapping-math -ffp-contract=off
libquant_a_SOURCES = \
	quant/quant.h quant/quant_impl.h quant/quant_cpu.h \
	quant/spec.c quant/quant.c quant/grid.c quant/float.c quant/philox.c \
	quant/kl.c quant/pack.c
if HAVE_CUDA
libquant_a_SOURCES += quant/cuda/quant.cu
else
libquant_a_SOURCES += quant/cuda_none.c
endif
EXTRA_DIST += quant/cuda/quant.cu quant/cuda_none.c

check_PROGRAMS += tests/test_quant tests/test_quant_cuda
tests_test_quant_SOURCES = tests/test_quant.c
tests_test_quant_CFLAGS = $(TEST_CFLAGS)
tests_test_quant_LDADD = $(TEST_LDADD)
tests_test_quant_cuda_SOURCES = tests/test_quant_cuda.c
tests_test_quant_cuda_CFLAGS = $(TEST_CFLAGS)
tests_test_quant_cuda_LDADD = $(TEST_LDADD)
TESTS += tests/test_quant tests/test_quant_cuda
