# src/config.c, src/trace.c, src/safetensors.c
# The trace (schema writer and reader) depends on src/base and jansson only,
# so the engine and perfmodel/ both link it without knowing each other.
noinst_LIBRARIES += libtrace.a
libtrace_a_SOURCES = src/trace_placeholder.c

# The run configuration (inih + jansson) is an engine part.
libadapt_a_SOURCES += src/config.c src/config.h

check_PROGRAMS += tests/test_config
tests_test_config_SOURCES = tests/test_config.c
tests_test_config_CFLAGS = $(TEST_CFLAGS)
tests_test_config_LDADD = $(TEST_LDADD)
TESTS += tests/test_config
