# quant/: number formats, rounding kernels (CPU + CUDA), histograms and KL.
noinst_LIBRARIES += libquant.a
libquant_a_SOURCES = quant/quant_placeholder.c
