# src/cuda: the CUDA device runtime (choosing and describing a GPU); a no-CUDA stub otherwise.
noinst_LIBRARIES += libadaptcuda.a
libadaptcuda_a_SOURCES = src/cuda/device.h
if HAVE_CUDA
libadaptcuda_a_SOURCES += src/cuda/device.cu
else
libadaptcuda_a_SOURCES += src/cuda/device_none.c
endif
EXTRA_DIST += src/cuda/device.cu src/cuda/device_none.c
