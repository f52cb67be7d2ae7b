# src/config.c, src/trace.c, src/safetensors.c
# The trace (schema writer and reader) depends on src/base and jansson only,
# so the engine and perfmodel/ both link it without knowing each other.
noinst_LIBRARIES += libtrace.a
libtrace_a_SOURCES = src/trace_placeholder.c
