# src/data: data sets (IDX, CIFAR), validation split, epoch order, batches.
noinst_LIBRARIES += libdata.a
libdata_a_SOURCES = \
	src/data/data.h src/data/internal.h \
	src/data/idx.c src/data/cifar.c src/data/dataset.c \
	src/data/order.c src/data/batch.c src/data/resize.c
