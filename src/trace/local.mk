# src/trace: the trace, the contract between the engine and everything downstream: its writer
# and its validating reader. It depends on src/base and jansson only, so the engine and
# src/perfmodel both link it without knowing each other.
noinst_LIBRARIES += libtrace.a
libtrace_a_SOURCES = src/trace/trace.c src/trace/trace.h
