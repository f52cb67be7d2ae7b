# src/trace: the trace, the contract between the engine and everything downstream: its writer
# (write.c, with the atomic file surgery of resuming) and its validating reader (read.c: lines
# into records; read_records.c: the records' typed fields). It depends on src/base and jansson
# only, so the engine and src/perfmodel both link it without knowing each other.
noinst_LIBRARIES += libtrace.a
libtrace_a_SOURCES = src/trace/trace.h src/trace/internal.h src/trace/write.c src/trace/read.c \
	src/trace/read_records.c
