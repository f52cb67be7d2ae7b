# src/config.c, src/trace.c, src/safetensors.c
# The trace (schema writer and reader) depends on src/base and jansson only,
# so the engine and perfmodel/ both link it without knowing each other.
noinst_LIBRARIES += libtrace.a
libtrace_a_SOURCES = src/trace.c src/trace.h

# The run configuration (inih + jansson) and safetensors checkpoints are engine parts.
libadapt_a_SOURCES += src/config.c src/config.h src/safetensors.c src/safetensors.h

check_PROGRAMS += tests/test_config tests/test_io
tests_test_config_SOURCES = tests/test_config.c
tests_test_config_CFLAGS = $(TEST_CFLAGS)
tests_test_config_LDADD = $(TEST_LDADD)
tests_test_io_SOURCES = tests/test_io.c
tests_test_io_CFLAGS = $(TEST_CFLAGS)
tests_test_io_LDADD = $(TEST_LDADD)
TESTS += tests/test_config tests/test_io
