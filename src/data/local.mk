# src/data: data sets (IDX, CIFAR), validation split, epoch order, batches.
libadapt_a_SOURCES += \
	src/data.h src/data/internal.h \
	src/data/idx.c src/data/cifar.c src/data/dataset.c \
	src/data/order.c src/data/batch.c

check_PROGRAMS += tests/test_data
tests_test_data_SOURCES = tests/test_data.c
tests_test_data_CFLAGS = $(TEST_CFLAGS)
tests_test_data_LDADD = $(TEST_LDADD)
TESTS += tests/test_data
