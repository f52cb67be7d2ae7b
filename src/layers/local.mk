# src/layers: the CPU layer kinds behind src/layer.h (one file per kind).
libadapt_a_SOURCES += \
	src/layers/layers_impl.h src/layers/layer.c src/layers/fc.c src/layers/gemm.c src/layers/im2col.c \
	src/layers/conv2d.c src/layers/linear.c src/layers/act.c src/layers/pool.c \
	src/layers/batchnorm.c src/layers/add.c src/layers/flatten.c src/layers/xent.c

check_PROGRAMS += tests/test_layers
tests_test_layers_SOURCES = tests/test_layers.c tests/testutil.c tests/testutil.h
tests_test_layers_CFLAGS = $(TEST_CFLAGS)
tests_test_layers_LDADD = $(TEST_LDADD)
TESTS += tests/test_layers

# Per-layer timing at the model shapes (not a test): make tests/bench_layers
EXTRA_PROGRAMS += tests/bench_layers
tests_bench_layers_SOURCES = tests/bench_layers.c tests/testutil.c tests/testutil.h
tests_bench_layers_LDADD = $(ADAPT_LIBS) $(ADAPT_EXT_LIBS)
CLEANFILES += tests/bench_layers
# The same layers timed in PyTorch, for comparison (not built, not run).
EXTRA_DIST += tests/bench_layers_torch.py
