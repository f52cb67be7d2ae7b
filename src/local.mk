# src/: the training engine and its programs.
noinst_LIBRARIES += libadapt.a
libadapt_a_SOURCES = \
	src/tensor.c src/tensor.h src/layer.h \
	src/cuda/device.h
if HAVE_CUDA
libadapt_a_SOURCES += src/cuda/device.cu
else
libadapt_a_SOURCES += src/cuda/device_none.c
endif
libadapt_a_SOURCES += \
	src/net.c src/net.h \
	src/models/models.c \
	src/optim.c src/optim.h
libadapt_a_SOURCES += src/train.c src/train.h src/run_io.c src/run_io.h

bin_PROGRAMS += adapt-train
adapt_train_SOURCES = src/adapt-train.c
adapt_train_LDADD = $(ADAPT_LIBS) $(ADAPT_EXT_LIBS)
